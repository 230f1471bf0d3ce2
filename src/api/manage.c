/*-------------------------------------------------------------------------
 *
 * manage.c
 *	  retries.cancel(), retries.retry_now() and retries.reschedule():
 *	  changing a call after it was scheduled.
 *
 * Each works only on calls the current role may see (its own, or any for a
 * superuser or a member of retries_admin).  A call it may not see gets the
 * same error as one that does not exist, so ids of other roles' calls
 * reveal nothing.
 *
 *   state       cancel            retry_now / reschedule
 *   scheduled   -> cancelled      next attempt moved
 *   running     waits for the     refused
 *               attempt, then
 *               as for its result
 *   succeeded   false             refused
 *   failed      false             scheduled again, fresh attempt budget
 *   cancelled   false             scheduled again, fresh attempt budget
 *
 * A running call's row is locked by the worker's batch transaction until
 * the attempt's outcome commits, so cancel() simply waits for that lock: if
 * the attempt failed and the call was rescheduled, it is then cancelled and
 * gets no further attempt; if it succeeded, there is nothing to cancel.
 * While it waits it is listed in shared memory (shmem_cancel_wait_begin),
 * and workers start no attempt of a call listed there: otherwise a retry
 * due sooner than the cancel's backend gets to the row would be claimed
 * and run first.
 *
 * Code that a worker runs -- an attempt, or a hook of one -- is inside the
 * batch transaction that holds those locks: it would get the lock of a
 * call of the same batch, its own included, without waiting, and change a
 * call whose outcome the batch is about to write.  Such a call is refused
 * (manage_claimed_hook says which calls the batch holds).
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "access/xact.h"
#include "storage/ipc.h"
#include "storage/lock.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "api/api.h"
#include "base/base.h"
#include "flow/flow.h"
#include "shmem/shmem.h"
#include "tables/tables.h"
#include "xact/xact.h"

/* see api.h; NULL but in a worker */
bool		(*manage_claimed_hook) (int64 id) = NULL;

PG_FUNCTION_INFO_V1(retries_cancel);
PG_FUNCTION_INFO_V1(retries_retry_now);
PG_FUNCTION_INFO_V1(retries_reschedule);

/* A call as this file needs it, locked by lock_call() */
typedef struct LockedCall
{
	int64		id;
	CallState	state;
	int32		attempts;
	bool		has_key;
	bool		policy_unlimited;
	int32		policy_max_attempts;
} LockedCall;

/*
 * lock_waiting_event -- if call 'id' waits for an event (1.6), and 'caller'
 * may see it, take the event's share lock first, as a debounce of it does
 * (call.c): an emit of the event locks the event, then the rows of the
 * calls it releases, in the order of its scan, and a transaction that
 * cancelled one of them and then another deadlocked with it (the
 * fourteenth hostile review).  Read without a lock: a call that starts to
 * wait meanwhile was made after this transaction's look, and its own
 * transaction holds the lock.
 */
static void
lock_waiting_event(int64 id, Oid caller)
{
	static SPIPlanPtr plan = NULL;
	Oid			argtypes[1] = {INT8OID};
	Datum		values[1] = {Int64GetDatum(id)};
	bool		isnull;
	Oid			role;
	text	   *event;

	if (schema_retries_version() < SCHEMA_1_6)
		return;
	plans_prepare_kept(&plan,
					   "SELECT scheduled_by::pg_catalog.oid, on_event FROM retries.call_data"
					   " WHERE id OPERATOR(pg_catalog.=) $1 AND event_wait"
					   " AND state OPERATOR(pg_catalog.=) 'scheduled'",
					   1, argtypes);
	if (SPI_execute_plan(plan, values, NULL, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not look up call " INT64_FORMAT, id);
	if (SPI_processed != 1)
		return;
	role = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1,
										  &isnull));
	event = DatumGetTextPCopy(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2,
											&isnull));
	if (!isnull && access_may_see_call(caller, role))
		events_lock_shared(role, event);
}

/*
 * lock_call -- read a call's row (locking it if 'lock'), or raise "not
 * found" if it does not exist or 'caller' may not see it
 *
 * Runs as the extension's owner, inside SPI_connect().
 */
static void
lock_call(int64 id, Oid caller, bool lock, LockedCall *call)
{
	static SPIPlanPtr lock_plan = NULL;
	static SPIPlanPtr read_plan = NULL;
	SPIPlanPtr	plan;
	Oid			argtypes[1] = {INT8OID};
	Datum		values[1] = {Int64GetDatum(id)};
	HeapTuple	row;
	TupleDesc	desc;
	bool		isnull;
	Oid			scheduled_by;
	Datum		d;

#define LOCK_CALL_QUERY \
	"SELECT c.state::pg_catalog.text, c.scheduled_by::pg_catalog.oid," \
	" c.attempts, c.key IS NOT NULL, p.max_attempts" \
	" FROM retries.call_data c" \
	" JOIN retries.policy_data p ON p.id OPERATOR(pg_catalog.=) c.policy_id" \
	" WHERE c.id OPERATOR(pg_catalog.=) $1"

	/*
	 * FOR NO KEY UPDATE, as the UPDATE that follows: it waits for a worker's
	 * claim (FOR UPDATE) and for other writers of the row, but not for the
	 * FOR KEY SHARE of a debounce, which changes nothing of the row
	 */
	if (lock)
	{
		lock_waiting_event(id, caller);
		plan = plans_prepare_kept(&lock_plan, LOCK_CALL_QUERY " FOR NO KEY UPDATE OF c",
								  1, argtypes);
	}
	else
		plan = plans_prepare_kept(&read_plan, LOCK_CALL_QUERY, 1, argtypes);
#undef LOCK_CALL_QUERY
	if (SPI_execute_plan(plan, values, NULL, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not look up call " INT64_FORMAT, id);

	if (SPI_processed == 1)
	{
		row = SPI_tuptable->vals[0];
		desc = SPI_tuptable->tupdesc;
		scheduled_by = DatumGetObjectId(SPI_getbinval(row, desc, 2, &isnull));
		if (access_may_see_call(caller, scheduled_by))
		{
			if (manage_claimed_hook != NULL && manage_claimed_hook(id))
				ereport(ERROR,
						(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
						 errmsg("call " INT64_FORMAT " is being run by the batch that runs this code", id),
						 errdetail("A worker runs a batch of one role's calls in one transaction, which holds them all until their outcomes are written."),
						 errhint("Cancel, retry or reschedule it from another session; a call that should not be retried can raise an error its policy does not retry.")));
			/* a procedure's or command's own call, in its runner */
			if (id == retries_current_call_id)
				ereport(ERROR,
						(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
						 errmsg("call " INT64_FORMAT " is running this code", id),
						 errhint("A call that should not be retried can raise an error its policy does not retry.")));
			call->id = id;
			call->state = call_state_parse(SPI_getvalue(row, desc, 1));
			call->attempts = DatumGetInt32(SPI_getbinval(row, desc, 3, &isnull));
			call->has_key = DatumGetBool(SPI_getbinval(row, desc, 4, &isnull));
			d = SPI_getbinval(row, desc, 5, &call->policy_unlimited);
			call->policy_max_attempts = call->policy_unlimited ? 0 : DatumGetInt32(d);
			return;
		}
	}
	args_call_not_found(id, NULL);
}

/*
 * cancel_wait_cleanup -- unlist a cancel() that ended in an error while
 * waiting (or whose process exited)
 */
static void
cancel_wait_cleanup(int code, Datum arg)
{
	shmem_cancel_wait_end();
}

/*
 * lock_call_for_cancel -- lock_call() for cancel(), listed in shared memory
 * while it waits for the row (see the head of this file)
 *
 * The call is read without a lock first, so that a role cannot make workers
 * hold off calls it may not see.
 */
static void
lock_call_for_cancel(int64 id, Oid caller, LockedCall *call)
{
	lock_call(id, caller, false, call);
	shmem_cancel_wait_begin(id);
	PG_ENSURE_ERROR_CLEANUP(cancel_wait_cleanup, (Datum) 0);
	{
		/*
		 * A call that a runner runs is not locked: its worker holds the
		 * runner's lock instead, until the attempt's outcome has committed
		 */
		if (shmem_call_is_running(id))
		{
			LOCKTAG		tag;

			SET_LOCKTAG_RUNNER_PROCESS(tag, id);
			(void) LockAcquire(&tag, ShareLock, false, false);
			LockRelease(&tag, ShareLock, false);
			SET_LOCKTAG_RUNNER(tag, id);
			(void) LockAcquire(&tag, ShareLock, false, false);
			LockRelease(&tag, ShareLock, false);
		}
		lock_call(id, caller, true, call);
	}
	PG_END_ENSURE_ERROR_CLEANUP(cancel_wait_cleanup, (Datum) 0);
	shmem_cancel_wait_end();
}

/*
 * retries_cancel -- SQL function retries.cancel(id)
 *
 * A scheduled call becomes cancelled.  For a running call this waits until
 * its attempt is recorded (see the head of this file).  Returns false,
 * changing nothing, for a call that had already finished, so that cancelling
 * many calls in one statement does not stop at the first finished one.
 */
Datum
retries_cancel(PG_FUNCTION_ARGS)
{
	RetriesUserSwitch save;
	LockedCall	call;
	bool		result = true;
	Datum		value;
	bool		isnull;

	args_check_not_null(fcinfo, 0, "id");
	/* a call of another Citus node: cancelled there (colocate.c) */
	if (colocate_forward("cancel", PG_GETARG_INT64(0), fcinfo, -1, &value, &isnull))
		PG_RETURN_BOOL(!isnull && DatumGetBool(DirectFunctionCall1(jsonb_bool, value)));

	access_become_owner(&save);
	SPI_connect();
	lock_call_for_cancel(PG_GETARG_INT64(0), save.saved_userid, &call);

	if (call.state == CALL_SCHEDULED)
	{
		calls_cancel(call.id);
		/* its waiters, NOTIFY, and the calls that run after it (chains.c) */
		chains_calls_finished(1, &call.id, "c", NULL);
	}
	else
		result = false;

	SPI_finish();
	access_restore_user(&save);
	PG_RETURN_BOOL(result);
}

/*
 * check_key_free -- before a finished call with a key is scheduled again,
 * make sure the role has no other unfinished call with that key, which
 * would break the rule that a key names one unfinished call
 */
static void
check_key_free(const LockedCall *call)
{
	static SPIPlanPtr plan = NULL;
	Oid			argtypes[1] = {INT8OID};
	Datum		values[1] = {Int64GetDatum(call->id)};

	plans_prepare_kept(&plan,
					   "SELECT o.id FROM retries.call_data c, retries.call_data o"
					   " WHERE c.id OPERATOR(pg_catalog.=) $1"
					   " AND o.scheduled_by OPERATOR(pg_catalog.=) c.scheduled_by"
					   " AND pg_catalog.md5(o.key)"
					   " OPERATOR(pg_catalog.=) pg_catalog.md5(c.key)"
					   " AND o.key OPERATOR(pg_catalog.=) c.key"
					   " AND o.key IS NOT NULL"
					   " AND o.state OPERATOR(pg_catalog.=) ANY ('{scheduled,running}')",
					   1, argtypes);
	if (SPI_execute_plan(plan, values, NULL, false, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not look up the key of call " INT64_FORMAT, call->id);
	if (SPI_processed > 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("call " INT64_FORMAT " cannot be scheduled again because call %s has the same key and has not finished",
						call->id, SPI_getvalue(SPI_tuptable->vals[0],
											   SPI_tuptable->tupdesc, 1))));
}

/*
 * rearm_call -- the work of retry_now() and reschedule(): a scheduled call
 * gets a new time for its next attempt; a failed or cancelled one is
 * scheduled again with a fresh attempt budget (its attempt numbers go on
 * from where they were, and its history stays); a running or succeeded one
 * is refused.
 */
static bool
rearm_call(int64 id, Datum run_at)
{
	RetriesUserSwitch save;
	LockedCall	call;

	access_become_owner(&save);
	SPI_connect();
	/* refuse a running call without waiting for the worker's row lock */
	lock_call(id, save.saved_userid, false, &call);
	if (shmem_call_is_running(call.id) || call.state == CALL_RUNNING)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("call " INT64_FORMAT " is running", call.id),
				 errhint("Wait until its attempt finishes, or cancel it.")));
	lock_call(id, save.saved_userid, true, &call);
	if (call.state == CALL_SCHEDULED)
	{
		calls_move(call.id, run_at);
	}
	else if (call.state == CALL_FAILED || call.state == CALL_CANCELLED)
	{
		if (call.has_key)
			check_key_free(&call);
		calls_schedule_again(call.id, call.state, run_at, schema_retries_version());
		/* a call of a paused or limited function waits for its gate */
		flow_gate_call(call.id);
	}
	else
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("call " INT64_FORMAT " has already succeeded", call.id),
				 errhint("Schedule a new call with retries.call().")));

	SPI_finish();
	access_restore_user(&save);
	xact_wake_workers(WAKE_CALLS);
	return true;
}

/*
 * retries_retry_now -- SQL function retries.retry_now(id)
 */
Datum
retries_retry_now(PG_FUNCTION_ARGS)
{
	args_check_not_null(fcinfo, 0, "id");
	PG_RETURN_BOOL(rearm_call(PG_GETARG_INT64(0),
							  TimestampTzGetDatum(clock_xact_now())));
}

/*
 * retries_reschedule -- SQL function retries.reschedule(id, run_at)
 */
Datum
retries_reschedule(PG_FUNCTION_ARGS)
{
	args_check_not_null(fcinfo, 0, "id");
	args_check_not_null(fcinfo, 1, "run_at");
	PG_RETURN_BOOL(rearm_call(PG_GETARG_INT64(0),
							  clock_clamp_run_at(PG_GETARG_DATUM(1))));
}
