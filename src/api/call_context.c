/*-------------------------------------------------------------------------
 *
 * call_context.c
 *	  What a called function can ask and say about its own call:
 *	  retries.current_call(), retries.current_attempt(), retries.retry().
 *
 * A worker sets retries_current_call_id and retries_current_attempt_number
 * around each attempt; elsewhere they are zero and the functions return
 * NULL.  retries.retry() raises RT000, which every policy retries, and
 * leaves its 'after' in retries_retry_after_usecs for the worker to read.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"

#include "api/api.h"
#include "base/base.h"

int64		retries_current_call_id = 0;
Oid			retries_current_call_role = InvalidOid;
int32		retries_current_attempt_number = 0;
int64		retries_retry_after_usecs = -1;

PG_FUNCTION_INFO_V1(retries_retry);
PG_FUNCTION_INFO_V1(retries_current_call);
PG_FUNCTION_INFO_V1(retries_current_attempt);

/*
 * retries_retry -- SQL function retries.retry(message, after)
 *
 * Always raises SQLSTATE RT000.  With 'after', the next attempt is at least
 * that far away, whatever the policy's formula says (like an HTTP
 * Retry-After); the attempt budget still applies.  Only code that runs as
 * the call's role (or a role it is a member of) may choose the delay: code
 * that runs as another role in the attempt (its SECURITY DEFINER function)
 * retries under the policy, as retries.event() tells it nothing (the
 * eleventh hostile review: such code put a call off ten years past its
 * policy's max_delay).  Code that runs as the call's role, whoever wrote
 * it (another role's trigger of a table the call writes), has its rights
 * anyway.
 */
Datum
retries_retry(PG_FUNCTION_ARGS)
{
	const char *message = PG_ARGISNULL(0) ? "retry requested"
	: text_to_cstring(PG_GETARG_TEXT_PP(0));
	int64		after = -1;

	if (!PG_ARGISNULL(1))
		after = args_interval_arg(fcinfo, 1, "after", false);
	if (after >= 0 && OidIsValid(retries_current_call_role) &&
		!has_privs_of_role(GetUserId(), retries_current_call_role))
		after = -1;
	retries_retry_after_usecs = after;
	ereport(ERROR,
			(errcode(ERRCODE_RETRIES_RETRY),
			 errmsg("%s", message)));
	PG_RETURN_VOID();			/* keep compiler quiet */
}

/*
 * retries_current_call -- SQL function retries.current_call()
 */
Datum
retries_current_call(PG_FUNCTION_ARGS)
{
	if (retries_current_call_id == 0)
		PG_RETURN_NULL();
	PG_RETURN_INT64(retries_current_call_id);
}

/*
 * retries_current_attempt -- SQL function retries.current_attempt()
 */
Datum
retries_current_attempt(PG_FUNCTION_ARGS)
{
	if (retries_current_attempt_number == 0)
		PG_RETURN_NULL();
	PG_RETURN_INT32(retries_current_attempt_number);
}
