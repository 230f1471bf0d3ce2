/*-------------------------------------------------------------------------
 *
 * verdict.c
 *	  What an attempt comes to: the checks before it starts, its error
 *	  classified against its policy (retry_on, the timeout), the delay of
 *	  its retry (the policy's, retries.retry()'s, or delay_fn's), and a call
 *	  failed for good with its on_exhausted hook.
 *
 * The hooks are the choice of the annotated function's owner: they run
 * through evaluate.c as that role, whoever made the call (run_hook), and
 * what they raise is shown in full only to a caller who owns the function,
 * or a superuser (hook_error_shown).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/pg_authid.h"
#include "catalog/pg_collation.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "common/int.h"
#include "common/pg_prng.h"
#include "executor/executor.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/regproc.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"

#include "api/api.h"
#include "base/base.h"
#include "base/compat.h"
#include "core/policy.h"
#include "engine/evaluate.h"
#include "engine/execute.h"
#include "engine/outcome.h"
#include "engine/runner.h"
#include "engine/policies.h"
#include "engine/sandbox.h"
#include "engine/time_cap.h"
#include "engine/verdict.h"
#include "flow/flow.h"
#include "tables/tables.h"


/* The worker's, told when a hook starts and ends (verdict_init) */
static ExecuteHookPhase hook_phase_callback = NULL;

/*
 * log_capped -- say, once per worker, that an attempt ran into
 * retries.max_attempt_time
 */
static void
log_capped(const RetriesCall *call, int32 attempt, const char *cap)
{
	static bool logged = false;

	if (logged)
		return;
	ereport(LOG,
			(errmsg("retries: attempt %d of call " INT64_FORMAT " ran past retries.max_attempt_time (%s) and was cancelled",
					attempt, call->id, cap),
			 errdetail("This is logged once per worker."),
			 errhint("Give the function's policy a timeout that suits it, or raise retries.max_attempt_time.")));
	logged = true;
}

/*
 * verdict_precheck -- can this call's attempt start?  It cannot if its role or its
 * function is gone, or if the role may no longer do what a direct call of
 * the function needs: log in to this database (LOGIN, VALID UNTIL,
 * CONNECT), EXECUTE the function, use its schema.  Each of those fails the
 * call for good, with 42501 for a privilege, whatever retry_on says.
 *
 * Fills 'out' with a failure naming the reason, and returns false.
 */
bool
verdict_precheck(const RetriesCall *call, const CachedPolicy *policy, Outcome *out)
{
	const char *hint = NULL;
	char	   *lacks;

	if (!SearchSysCacheExists1(AUTHOID, ObjectIdGetDatum(call->role)))
	{
		outcome_set_error(out, ERRCODE_UNDEFINED_OBJECT,
						  psprintf("role %u that scheduled the call no longer exists",
								   call->role), NULL, NULL, NULL);
		return false;
	}
	if ((lacks = access_login_privilege(call->role, &hint)) != NULL)
	{
		outcome_set_error(out, ERRCODE_INSUFFICIENT_PRIVILEGE, lacks, NULL, hint, NULL);
		return false;
	}
	if (!SearchSysCacheExists1(PROCOID, ObjectIdGetDatum(policy->fn)))
	{
		outcome_set_error(out, ERRCODE_UNDEFINED_FUNCTION,
						  psprintf("function %s no longer exists", policy->fn_signature),
						  NULL, NULL, NULL);
		return false;
	}
	if ((lacks = access_call_privilege(policy->fn, call->role)) != NULL)
	{
		outcome_set_error(out, ERRCODE_INSUFFICIENT_PRIVILEGE, lacks, NULL,
						  "A call needs what a direct call of its function needs, at each attempt.",
						  NULL);
		return false;
	}
	return true;
}

static char *hook_signature_wrong(Oid hook, List *args, Oid rettype);

/*
 * run_hook -- run a hook of a call's policy (on_exhausted, delay_fn) with
 * these argument expressions, as evaluate_sandboxed() runs code: under
 * retries.max_attempt_time, with the worker told which hook runs (see
 * hook_phase in worker.c); on error, its ErrorData
 *
 * A hook is the choice of whoever annotated the function, its owner (or a
 * superuser acting for it): it runs as the owner of the annotated
 * function as it is now, as if in a login session of that owner, never as
 * the role that scheduled the call, which chose neither the hook nor its
 * code (doc/architecture.md, "Trust").  Like the body of a SECURITY
 * DEFINER function, it runs whether or not the owner may log in.
 *
 * The hook runs only if it is the owner's code or a superuser's (the
 * function may have changed hands since it was annotated: its former
 * owner's hook would run with the new owner's rights), and if the owner
 * may call it as a direct call would: it may have been dropped, or its
 * privileges revoked, since the policy was written.  If not, the error is
 * a 42501 that says so.
 */
static ErrorData *
run_hook(const RetriesCall *call, const CachedPolicy *policy, int32 attempt,
		 ExecuteHook which, Oid hook, List *args, Datum *result, bool *isnull)
{
	ErrorData  *edata;
	char	   *lacks = NULL;
	char	   *wrong;
	bool		capped;
	SandboxStep step;
	Oid			owner = schema_function_owner(policy->fn);

	if (!OidIsValid(owner))
		lacks = psprintf("function %s no longer exists", policy->fn_signature);
	else if (!SearchSysCacheExists1(PROCOID, ObjectIdGetDatum(hook)))
		lacks = psprintf("function %u no longer exists", hook);
	else if ((wrong = hook_signature_wrong(hook, args,
										   which == HOOK_DELAY_FN ? INTERVALOID : InvalidOid)) != NULL)
	{
		edata = palloc0(sizeof(ErrorData));
		edata->sqlerrcode = ERRCODE_INVALID_FUNCTION_DEFINITION;
		edata->message = wrong;
		return edata;
	}
	else if ((lacks = access_hook_owner(hook, owner,
										which == HOOK_DELAY_FN ? "delay_fn" : "on_exhausted")) == NULL)
		lacks = access_call_privilege(hook, owner);
	if (lacks != NULL)
	{
		edata = palloc0(sizeof(ErrorData));
		edata->sqlerrcode = ERRCODE_INSUFFICIENT_PRIVILEGE;
		edata->message = lacks;
		return edata;
	}
	if (hook_phase_callback != NULL)
		hook_phase_callback(call->id, attempt, which);
	edata = evaluate_sandboxed(owner, hook, true, NULL, NULL, args,
							   evaluate_time_limit(NULL, &capped), &step, result, isnull);
	if (hook_phase_callback != NULL)
		hook_phase_callback(call->id, attempt, HOOK_NONE);
	return edata;
}

/*
 * hook_signature_wrong -- why 'hook' may not be called with 'args' (Consts)
 * for a result of type 'rettype' (InvalidOid: any that is not a pseudo-type
 * but void or record), or NULL if it may
 *
 * annotate() refuses such hooks, but a restore writes policy_data as the
 * dump has it: a hook called with Datums of other types than its own, or
 * whose result is read as an interval that it is not, read memory where
 * they pointed, and crashed the server (the thirteenth hostile review).  So
 * the signature is checked where the hook is called, too.
 */
static char *
hook_signature_wrong(Oid hook, List *args, Oid rettype)
{
	HeapTuple	tup = SearchSysCache1(PROCOID, ObjectIdGetDatum(hook));
	Form_pg_proc proc;
	bool		ok;
	int			i = 0;
	ListCell   *lc;

	if (!HeapTupleIsValid(tup))
		return psprintf("function %u no longer exists", hook);
	proc = (Form_pg_proc) GETSTRUCT(tup);
	ok = proc->prokind == PROKIND_FUNCTION && !proc->proretset &&
		proc->pronargs == list_length(args);
	if (OidIsValid(rettype))
		ok = ok && proc->prorettype == rettype;
	else
		ok = ok && (get_typtype(proc->prorettype) != TYPTYPE_PSEUDO ||
					proc->prorettype == VOIDOID || proc->prorettype == RECORDOID);
	foreach(lc, args)
	{
		if (!ok)
			break;
		ok = proc->proargtypes.values[i++] == exprType((Node *) lfirst(lc));
	}
	ReleaseSysCache(tup);
	if (ok)
		return NULL;
	return psprintf("hook %s has the wrong signature: it is not called",
					format_procedure(hook));
}

/*
 * hook_error_shown -- may a hook's error be shown, in full, on the call
 * whose failure ran it?  A hook runs as the owner of the annotated
 * function, and its error may carry what that owner's code read: the
 * call's role sees it if she is that owner (or a superuser); another role
 * sees its SQLSTATE only (the thirty-second hostile review, t/066 8).
 */
static bool
hook_error_shown(const RetriesCall *call, const CachedPolicy *policy)
{
	return schema_function_owner(policy->fn) == call->role ||
		superuser_arg(call->role);
}

/*
 * hook_error_text -- a hook's error message as the call shows it (see
 * hook_error_shown)
 */
static const char *
hook_error_text(const RetriesCall *call, const CachedPolicy *policy,
				const ErrorData *edata)
{
	if (hook_error_shown(call, policy))
		return edata->message;
	return "its message is shown only to the owner of the function";
}

/*
 * choose_delay -- the delay before the next attempt after a retryable error,
 * or false (with 'out' set to a failure) when delay_fn says to stop or fails
 */
static bool
choose_delay(const RetriesCall *call, const CachedPolicy *policy, int32 attempt,
			 Outcome *out)
{
	if (retries_retry_after_usecs >= 0 && strcmp(out->sqlstate, "RT000") == 0)
	{
		out->delay = retries_retry_after_usecs;
		return true;
	}

	if (OidIsValid(policy->delay_fn))
	{
		List	   *args;
		Datum		result;
		bool		isnull;
		ErrorData  *edata;

		args = list_make3(makeConst(INT4OID, -1, InvalidOid, 4,
									Int32GetDatum(attempt), false, true),
						  makeConst(TEXTOID, -1, DEFAULT_COLLATION_OID, -1,
									CStringGetTextDatum(out->sqlstate), false, false),
						  makeConst(TEXTOID, -1, DEFAULT_COLLATION_OID, -1,
									CStringGetTextDatum(out->message ? out->message : ""),
									out->message == NULL, false));
		edata = run_hook(call, policy, attempt, HOOK_DELAY_FN, policy->delay_fn, args,
						 &result, &isnull);
		if (edata != NULL)
		{
			bool		shown = hook_error_shown(call, policy);

			out->detail = psprintf("The attempt failed with %s: %s",
								   out->sqlstate, out->message ? out->message : "");

			outcome_set_error(out, edata->sqlerrcode,
							  psprintf("delay_fn %s failed: %s",
									   format_procedure(policy->delay_fn),
									   hook_error_text(call, policy, edata)),
							  out->detail, shown ? edata->hint : NULL,
							  shown ? edata->context : NULL);
			return false;
		}
		if (isnull)
		{
			out->hint = pstrdup("delay_fn returned NULL, which stops the retries.");
			return false;
		}
		out->delay = args_interval_to_delay(DatumGetIntervalP(result));
		return true;
	}

	out->delay = policy_jitter(policy_delay(policy->min_delay, policy->max_delay,
											policy->multiplier, attempt),
							   policy->jitter,
							   pg_prng_uint64(&pg_global_prng_state));
	return true;
}

/*
 * next_delay -- the delay before the next attempt after a retryable error
 * (see choose_delay), raised to retries.min_delay: attempts retried with no
 * delay, by a policy or by retries.retry(after => '0'), could otherwise
 * write attempt rows as fast as a worker runs
 */
static bool
next_delay(const RetriesCall *call, const CachedPolicy *policy, int32 attempt,
		   Outcome *out)
{
	static bool logged = false;
	int64		floor = (int64) retries_min_delay * 1000;

	if (!choose_delay(call, policy, attempt, out))
		return false;
	if (out->delay < floor)
	{
		if (!logged)
		{
			char		asked[POLICY_FORMAT_LEN];
			char		given[POLICY_FORMAT_LEN];

			policy_format_duration(out->delay, asked, sizeof(asked));
			policy_format_duration(floor, given, sizeof(given));
			ereport(LOG,
					(errmsg("retries: the retry of call " INT64_FORMAT " waits retries.min_delay (%s), not the %s its policy asked for",
							call->id, given, asked),
					 errdetail("This is logged once per worker."),
					 errhint("Lower retries.min_delay to let retries come sooner.")));
			logged = true;
		}
		out->delay = floor;
	}
	return true;
}

/*
 * verdict_on_exhausted -- call the policy's on_exhausted hook for a call that
 * failed for good, as the call's owner; its error is added to the attempt's
 * row and never changes the call's state
 */
void
verdict_on_exhausted(const RetriesCall *call, const CachedPolicy *policy, int32 attempt)
{
	List	   *args;
	Datum		result;
	bool		isnull;
	ErrorData  *edata;

	if (!OidIsValid(policy->on_exhausted) ||
		!SearchSysCacheExists1(AUTHOID, ObjectIdGetDatum(call->role)))
		return;

	CommandCounterIncrement();
	args = list_make1(makeConst(INT8OID, -1, InvalidOid, 8,
								Int64GetDatum(call->id), false, FLOAT8PASSBYVAL));
	edata = run_hook(call, policy, attempt, HOOK_ON_EXHAUSTED, policy->on_exhausted, args,
					 &result, &isnull);
	if (edata == NULL)
		return;
	verdict_record_hook_error(call->id, attempt, psprintf("%s: %s",
														  unpack_sql_state(edata->sqlerrcode),
														  hook_error_text(call, policy, edata)));
}

/*
 * verdict_record_hook_error -- add the error of its on_exhausted hook to an
 * attempt's row
 */
void
verdict_record_hook_error(int64 call_id, int32 attempt, const char *error)
{
	calls_note_hook_error(call_id, attempt, args_valid_text(error));
}

/*
 * verdict_finish_failure -- a failed attempt: retry if the error is retryable and
 * the budget allows, else fail for good
 */
void
verdict_finish_failure(const RetriesCall *call, const CachedPolicy *policy, int32 attempt,
					   bool retryable, Outcome *out)
{
	bool		exhausted = call->max_attempts > 0 && attempt >= call->max_attempts;

	if (retryable && !exhausted && next_delay(call, policy, attempt, out))
	{
		out->state = call_state_change(CALL_RUNNING, CALL_SCHEDULED);
		if (out->outcome == OUTCOME_FAILED)
			out->outcome = OUTCOME_RETRY;
		return;
	}
	out->state = call_state_change(CALL_RUNNING, CALL_FAILED);
	out->delay = -1;
	if (retryable && exhausted && out->hint == NULL)
		out->hint = psprintf("All %d attempts are used.", call->max_attempts);
}

/*
 * verdict_fail_without_policy -- a call whose policy row is gone (deleted by hand:
 * the extension never deletes one) cannot run: it fails, saying so, and
 * has no on_exhausted to call
 */
void
verdict_fail_without_policy(const RetriesCall *call, int32 attempt,
							TimestampTz started_at, Outcome *out)
{
	out->outcome = OUTCOME_FAILED;
	out->state = call_state_change(CALL_RUNNING, CALL_FAILED);
	outcome_set_error(out, ERRCODE_UNDEFINED_OBJECT,
					  psprintf("policy %d of the call no longer exists", call->policy_id),
					  "Rows of retries.policy_data are never deleted by the extension.",
					  "Schedule the call again, with retries.call().", NULL);
	outcome_record(call, attempt, started_at, out);
}

/*
 * verdict_set_timed_out -- an attempt stopped at its time limit ('timeout', which
 * is retries.max_attempt_time if 'capped'), whatever it raised once it was
 * cancelled: outcome timeout, SQLSTATE 57014
 */
void
verdict_set_timed_out(const RetriesCall *call, int32 attempt, int64 timeout, bool capped,
					  Outcome *out)
{
	char		buf[POLICY_FORMAT_LEN];

	policy_format_duration(timeout, buf, sizeof(buf));
	out->outcome = OUTCOME_TIMEOUT;
	strlcpy(out->sqlstate, "57014", sizeof(out->sqlstate));
	out->message = capped ?
		psprintf("attempt ran past retries.max_attempt_time (%s)", buf) :
		psprintf("attempt timed out after %s", buf);
	if (capped)
		log_capped(call, attempt, buf);
}

/*
 * verdict_classify_error -- the outcome of an attempt that ended with an error
 * ('step' tells where, 'timeout' and 'capped' its time limit): failed for
 * good, or to be retried, as its policy says, into *out
 */
void
verdict_classify_error(const RetriesCall *call, const CachedPolicy *policy, int32 attempt,
					   const ErrorData *edata, SandboxStep step, int64 timeout, bool capped,
					   Outcome *out)
{
	outcome_set_error(out, edata->sqlerrcode, edata->message, edata->detail,
					  edata->hint, edata->context);
	if (step == STEP_ARGUMENTS)
	{
		out->outcome = OUTCOME_FAILED;
		out->message = args_clipped(psprintf("arguments can no longer be converted: %s", edata->message));
		verdict_finish_failure(call, policy, attempt, false, out);
	}
	else if (evaluate_timed_out())
	{
		verdict_set_timed_out(call, attempt, timeout, capped, out);
		verdict_finish_failure(call, policy, attempt,
							   policy_retries_sqlstate((const char (*)[POLICY_SQLSTATE_ENTRY_LEN]) policy->retry_on,
													   policy->nretry_on, "57014"),
							   out);
	}
	else if (step == STEP_RESULT)
	{
		/*
		 * the same result would come back: not retried, whatever retry_on
		 * says
		 */
		out->outcome = OUTCOME_FAILED;
		out->detail = pstrdup("The function returned, but its result could not be kept, so its effects were rolled back; a result is not retried.");
		verdict_finish_failure(call, policy, attempt, false, out);
	}
	else
	{
		out->outcome = OUTCOME_FAILED;
		verdict_finish_failure(call, policy, attempt,
							   policy_retries_sqlstate((const char (*)[POLICY_SQLSTATE_ENTRY_LEN]) policy->retry_on,
													   policy->nretry_on, out->sqlstate),
							   out);
	}
}

/*
 * verdict_init -- the worker's callback, told when a hook starts and ends
 * (once per worker)
 */
void
verdict_init(ExecuteHookPhase hook_phase)
{
	hook_phase_callback = hook_phase;
}
