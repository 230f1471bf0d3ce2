/*-------------------------------------------------------------------------
 *
 * wait.c
 *	  Waiting for calls to finish: retries.wait() and retries.result(), and
 *	  what a transaction that finishes calls does for their waiters when it
 *	  commits.
 *
 * A call finishes (succeeds, fails for good or is cancelled) in a worker's
 * batch, in a backend's cancel(), or when a call it runs after fails
 * (chains.c).  Each of those notes the call here as it writes its new
 * state (xact_call_finished, in xact.c): it sends NOTIFY retries_finished if the
 * call's policy asks for it (PostgreSQL delivers it at commit, or drops it
 * on rollback), and keeps the call's id until the transaction ends.  When
 * the transaction commits, the backends waiting for one of those calls
 * get their latches set (shmem_wake_finish_waiters in shmem.c); when it
 * aborts, the ids are forgotten.
 *
 * retries.wait() announces in shared memory which call it waits for,
 * before it looks at the call, then sleeps on its latch until a commit
 * wakes it, its timeout passes or the statement is cancelled: no polling,
 * and a finish that commits between the look and the sleep still wakes
 * it.  Each look is one query with a snapshot of its own, taken for the
 * look and released with it: the wait sees the finish whatever the
 * transaction's isolation level, keeps no snapshot of its own while it
 * sleeps, and locks no row of the call, so that the workers never wait for
 * it.  (The statement that calls it keeps its own snapshot, as any
 * statement does.)  A call that cannot finish before the waiter's
 * transaction ends, because that transaction scheduled it, re-armed it or
 * locked it (by scheduling a call after it), is refused instead of waited
 * for.
 *
 * IDENTIFICATION
 *	  src/api/wait.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/transam.h"
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "commands/async.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "api/api.h"
#include "base/base.h"
#include "core/policy.h"
#include "shmem/shmem.h"
#include "tables/tables.h"

PG_FUNCTION_INFO_V1(retries_wait);
PG_FUNCTION_INFO_V1(retries_result);

/* A call as retries.wait() and retries.result() look at it */
typedef struct LookedCall
{
	CallState	state;			/* as stored */
	bool		ours;			/* this transaction must end first */
	Datum		row;			/* retries.calls row, if 'want_row' */
	Datum		result;
	bool		result_null;
	char	   *last_message;	/* NULL if none */
} LookedCall;

/*
 * look_at_call -- read call 'id' with a snapshot of its own (the latest),
 * as the extension's owner, and raise "does not exist" if 'caller' may not
 * see it; with 'want_row', its retries.calls row too, in the caller's
 * memory context
 */
static void
look_at_call(int64 id, Oid caller, bool want_row, LookedCall *call)
{
	static SPIPlanPtr plan = NULL;
	Oid			argtypes[2] = {INT8OID, BOOLOID};
	Datum		values[2] = {Int64GetDatum(id), BoolGetDatum(want_row)};
	MemoryContext callercxt = CurrentMemoryContext;
	RetriesUserSwitch save;
	HeapTuple	row;
	TupleDesc	desc;
	bool		isnull;
	Datum		d;
	char	   *message;
	TransactionId xmin;
	TransactionId xmax;

	access_become_owner(&save);
	SPI_connect();
	plans_prepare_kept(&plan,
					   "SELECT c.state::pg_catalog.text, c.scheduled_by::pg_catalog.oid,"
					   " c.xmin, c.xmax, c.result, c.last_message,"
					   " CASE WHEN $2 THEN (SELECT v FROM retries.calls v"
					   "  WHERE v.id OPERATOR(pg_catalog.=) c.id) END"
					   " FROM retries.call_data c WHERE c.id OPERATOR(pg_catalog.=) $1",
					   2, argtypes);
	if (SPI_execute_snapshot(plan, values, NULL, GetLatestSnapshot(), InvalidSnapshot,
							 true, false, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not look up call " INT64_FORMAT, id);
	if (SPI_processed != 1 ||
		!access_may_read_call(save.saved_userid,
							  DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[0],
															 SPI_tuptable->tupdesc,
															 2, &isnull))))
		args_call_not_found(id, NULL);

	row = SPI_tuptable->vals[0];
	desc = SPI_tuptable->tupdesc;
	call->state = call_state_parse(SPI_getvalue(row, desc, 1));
	xmin = DatumGetTransactionId(SPI_getbinval(row, desc, 3, &isnull));
	xmax = DatumGetTransactionId(SPI_getbinval(row, desc, 4, &isnull));
	/* written or locked by this transaction (a lock by several is missed) */
	call->ours = TransactionIdIsCurrentTransactionId(xmin) ||
		(TransactionIdIsNormal(xmax) && TransactionIdIsCurrentTransactionId(xmax));
	d = SPI_getbinval(row, desc, 5, &call->result_null);
	call->result = call->result_null ? (Datum) 0 : SPI_datumTransfer(d, false, -1);
	message = SPI_getvalue(row, desc, 6);
	call->last_message = message != NULL ? MemoryContextStrdup(callercxt, message) : NULL;
	call->row = (Datum) 0;
	d = SPI_getbinval(row, desc, 7, &isnull);
	if (want_row && !isnull)
		call->row = SPI_datumTransfer(d, false, -1);
	SPI_finish();
	access_restore_user(&save);
}

/*
 * finish_wait_cleanup -- unlist a wait() that ended in an error (or whose
 * process exited)
 */
static void
finish_wait_cleanup(int code, Datum arg)
{
	shmem_finish_wait_end();
}

/*
 * wait_timeout -- retries.wait()'s timeout argument in microseconds, -1
 * for none
 */
static int64
wait_timeout(FunctionCallInfo fcinfo)
{
	int64		usecs;

	if (PG_ARGISNULL(1))
		return -1;
	if (!args_interval_to_usecs(PG_GETARG_INTERVAL_P(1), &usecs))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid timeout: %s",
						DatumGetCString(DirectFunctionCall1(interval_out,
															PG_GETARG_DATUM(1)))),
				 errdetail("A timeout must be at least 0 and at most 1000000 years."),
				 errhint("Leave it NULL to wait as long as it takes.")));
	return usecs;
}

/*
 * wait_for_call -- the wait of retries_wait(), announced in shared memory:
 * look at the call, and sleep until a commit wakes this backend, until
 * the call has finished; its retries.calls row
 */
static Datum
wait_for_call(int64 id, Oid caller, int64 timeout)
{
	TimestampTz deadline = timeout >= 0 ? clock_system_now() + timeout : 0;
	LookedCall	call;

	for (;;)
	{
		long		sleep_ms = -1;

		look_at_call(id, caller, true, &call);
		if (call_state_finished(call.state))
			break;
		if (call.ours)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("call " INT64_FORMAT " cannot finish before this transaction ends", id),
					 errdetail("This transaction scheduled, re-armed or locked the call; no worker can run it until the transaction commits."),
					 errhint("Commit first, then wait in a new transaction.")));
		if (deadline != 0)
		{
			sleep_ms = clock_system_ms_until(deadline);
			if (sleep_ms <= 0)
			{
				char		buf[POLICY_FORMAT_LEN];

				policy_format_duration(timeout, buf, sizeof(buf));
				ereport(ERROR,
						(errcode(ERRCODE_QUERY_CANCELED),
						 errmsg("call " INT64_FORMAT " did not finish within %s", id, buf),
						 errdetail("It is %s.",
								   call_state_name(shmem_call_is_running(id) ? CALL_RUNNING : call.state)),
						 errhint("Wait again, or raise the timeout.")));
			}
		}
		(void) WaitLatch(MyLatch,
						 WL_LATCH_SET | WL_EXIT_ON_PM_DEATH |
						 (sleep_ms >= 0 ? WL_TIMEOUT : 0),
						 sleep_ms, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
	if (call.row == (Datum) 0)
		args_call_not_found(id, NULL);	/* pruned between the two reads */
	return call.row;
}

/*
 * retries_wait -- SQL function retries.wait(id, timeout): the call's row
 * in retries.calls once it has finished (at once if it already has)
 *
 * Raises 57014 once 'timeout' has passed (NULL: no limit), 42704 for a call
 * the caller may not see, and 55000 for a call that cannot finish before
 * the caller's transaction ends.  Statement timeouts and cancels end the
 * wait as they end any statement.
 */
Datum
retries_wait(PG_FUNCTION_ARGS)
{
	int64		id;
	int64		timeout;
	Datum		row;
	bool		isnull;

	args_check_not_null(fcinfo, 0, "id");
	id = PG_GETARG_INT64(0);
	timeout = wait_timeout(fcinfo);
	/* a call of another Citus node: waited for there (colocate.c) */
	if (colocate_forward("wait", id, fcinfo, 1, &row, &isnull))
		PG_RETURN_DATUM(colocate_calls_row(row));
	if (id == retries_current_call_id)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("call " INT64_FORMAT " is running this code", id),
				 errdetail("A call cannot wait for itself to finish.")));

	if (!shmem_finish_wait_begin(id))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("retries.wait() needs the retries library to be preloaded"),
				 errhint("Add retries to shared_preload_libraries and restart the server: without it no call runs.")));
	PG_ENSURE_ERROR_CLEANUP(finish_wait_cleanup, (Datum) 0);
	{
		row = wait_for_call(id, GetUserId(), timeout);
	}
	PG_END_ENSURE_ERROR_CLEANUP(finish_wait_cleanup, (Datum) 0);
	shmem_finish_wait_end();
	PG_RETURN_DATUM(row);
}

/*
 * retries_result -- SQL function retries.result(id): the return value of a
 * call that has succeeded, as jsonb (NULL for a function that returns
 * void or NULL)
 *
 * Raises 55000 for a call that has not succeeded, saying what it is, and
 * 42704 for a call the caller may not see.  It does not wait: see
 * retries.wait().
 */
Datum
retries_result(PG_FUNCTION_ARGS)
{
	int64		id;
	LookedCall	call;
	Datum		value;
	bool		isnull;

	args_check_not_null(fcinfo, 0, "id");
	id = PG_GETARG_INT64(0);
	if (colocate_forward("result", id, fcinfo, -1, &value, &isnull))
	{
		if (isnull)
			PG_RETURN_NULL();
		PG_RETURN_DATUM(value);
	}
	look_at_call(id, GetUserId(), false, &call);
	if (call.state != CALL_SUCCEEDED)
	{
		bool		finished = call_state_finished(call.state);

		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("call " INT64_FORMAT " has not succeeded", id),
				 call.last_message != NULL ?
				 errdetail("It is %s; its last error: %s",
						   call_state_name(finished || !shmem_call_is_running(id) ? call.state : CALL_RUNNING),
						   call.last_message) :
				 errdetail("It is %s.",
						   call_state_name(finished || !shmem_call_is_running(id) ? call.state : CALL_RUNNING)),
				 finished ? 0 : errhint("retries.wait(" INT64_FORMAT ") waits until it finishes.", id)));
	}
	if (call.result_null)
		PG_RETURN_NULL();
	PG_RETURN_DATUM(call.result);
}
