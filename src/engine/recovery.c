/*-------------------------------------------------------------------------
 *
 * recovery.c
 *	  Interrupted attempts: noted by a worker on its way out, charged by
 *	  the next worker of the database (see "The crash rule" in worker.c).
 *
 * A worker that exits in the middle of an attempt notes it in its in-flight
 * file and in shared memory (recovery_note_exit, a before_shmem_exit
 * callback); a crash leaves only the file (ledger.c).  The first worker of
 * a database after the server started charges what every slot's file
 * holds, and the calls handed to runners that no file names; a later one
 * its own slot's (recovery_charge); the database's other workers wait for
 * the first (recovery_wait) before they claim anything.  A call whose row
 * another transaction holds is not waited for: its attempt is charged when
 * the call is next claimed.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/latch.h"
#include "storage/lock.h"
#include "utils/snapmgr.h"

#include "base/base.h"
#include "engine/evaluate.h"
#include "engine/execute.h"
#include "engine/handoff.h"
#include "engine/ledger.h"
#include "engine/recovery.h"
#include "engine/wslot.h"
#include "shmem/shmem.h"

/*
 * How long an interrupted attempt that no one charged is remembered: one
 * that an exiting worker noted (its successor claims the call at once),
 * and one that could not be charged because a session held its call's row
 * locked (which a role may do for as long as it likes)
 */
#define INTERRUPTED_KEEP_MS		60000
#define INTERRUPTED_LOCKED_KEEP_MS	(3600 * 1000)

/* The extension the worker serves, as recovery_charge() was given it */
static Oid	served = InvalidOid;

/*
 * recovery_lock_call -- lock the row of call 'id' if it is scheduled and
 * no other transaction has it locked, and fill in what charging an attempt
 * of it needs (id, policy, attempts, max_attempts, role) into *call; if
 * 'handed_over' is not NULL, whether the row, as locked, is due at
 * 'infinity' (handed to a runner) into it
 */
LockedCall
recovery_lock_call(int64 id, RetriesCall *call, bool *handed_over)
{
	static SPIPlanPtr plan = NULL;
	static SPIPlanPtr exists_plan = NULL;
	Oid			argtypes[1] = {INT8OID};
	Datum		values[1] = {Int64GetDatum(id)};
	bool		isnull;
	HeapTuple	row;
	TupleDesc	desc;
	Datum		d;

	plans_prepare_kept(&plan,
					   "SELECT policy_id, attempts, max_attempts, scheduled_by::pg_catalog.oid,"
					   " next_attempt OPERATOR(pg_catalog.=) 'infinity'::pg_catalog.timestamptz"
					   " FROM retries.call_data"
					   " WHERE id OPERATOR(pg_catalog.=) $1"
					   " AND state OPERATOR(pg_catalog.=) 'scheduled'"
					   " FOR UPDATE SKIP LOCKED",
					   1, argtypes);
	if (SPI_execute_plan(plan, values, NULL, false, 1) != SPI_OK_SELECT)
		elog(ERROR, "retries: could not look up call " INT64_FORMAT, id);
	if (SPI_processed != 1)
	{
		plans_prepare_kept(&exists_plan,
						   "SELECT FROM retries.call_data"
						   " WHERE id OPERATOR(pg_catalog.=) $1"
						   " AND state OPERATOR(pg_catalog.=) 'scheduled'",
						   1, argtypes);
		if (SPI_execute_plan(exists_plan, values, NULL, true, 1) != SPI_OK_SELECT)
			elog(ERROR, "retries: could not look up call " INT64_FORMAT, id);
		return SPI_processed == 0 ? CALL_GONE : CALL_LOCKED;
	}
	row = SPI_tuptable->vals[0];
	desc = SPI_tuptable->tupdesc;
	memset(call, 0, sizeof(*call));
	call->id = id;
	call->policy_id = DatumGetInt32(SPI_getbinval(row, desc, 1, &isnull));
	call->attempts = DatumGetInt32(SPI_getbinval(row, desc, 2, &isnull));
	d = SPI_getbinval(row, desc, 3, &isnull);
	call->max_attempts = isnull ? 0 : DatumGetInt32(d);
	call->role = DatumGetObjectId(SPI_getbinval(row, desc, 4, &isnull));
	if (handed_over != NULL)
		*handed_over = DatumGetBool(SPI_getbinval(row, desc, 5, &isnull));
	return CALL_LOCKED_NOW;
}

/*
 * charge_interrupted -- record the attempt a dead worker left in flight,
 * if its batch did not commit (the call still has fewer attempts); false
 * if the call's row is locked by another transaction, so that the attempt
 * could not be charged now
 *
 * The row is locked SKIP LOCKED: a session may hold it for as long as it
 * likes (a reschedule() left uncommitted), and recovery must not wait for it
 * (doc/operations.md, "Containment").  A locked call cannot be claimed either;
 * the attempt is noted in shared memory for INTERRUPTED_LOCKED_KEEP_MS, and
 * the worker that claims the call once the lock is gone charges it then.
 */
static bool
charge_interrupted(const InFlight *rec)
{
	RetriesCall call;
	ExecuteHook hook;
	TimestampTz started;
	bool		stopped;

	switch (recovery_lock_call(rec->call_id, &call, NULL))
	{
		case CALL_GONE:
			return true;		/* finished or gone: nothing to charge */
		case CALL_LOCKED:
			ereport(LOG,
					(errmsg("retries: attempt %d of call " INT64_FORMAT " was interrupted; its call is locked by another transaction, so it is charged when the call is next claimed",
							rec->attempt, rec->call_id)));
			/* a stop's attempt stays given back, whoever charges it */
			ledger_note_interrupted(rec, INTERRUPTED_LOCKED_KEEP_MS, rec->stopped != 0);
			return false;
		case CALL_LOCKED_NOW:
			break;
	}

	/* its ring entry, if recovery_note_exit() left one, is done with too */
	(void) ledger_take_interrupted(rec->extension, rec->call_id, rec->attempt, &hook,
								   &started, &stopped);
	if (call.attempts >= rec->attempt)
		return true;			/* its batch committed after all */

	execute_interrupted(&call, rec->attempt, (ExecuteHook) rec->hook, rec->started,
						stopped || rec->stopped != 0);
	return true;
}

/*
 * charge_lost_runners -- charge the attempts of the calls that were handed to
 * a runner (due at 'infinity' until their outcome: handoff_begin) before
 * this database's workers last started, and that no in-flight file named:
 * their runner is gone, and so is the record of their attempt, which a
 * pg_upgrade (the new data directory has no pg_retries) or a promoted
 * standby (the files are not replicated) does not carry.  Without this
 * they stayed unclaimed for good.
 *
 * Called by the first worker of the database after the server started,
 * before any worker of it claims anything (the recovered flag), after the
 * in-flight files were charged: no runner of this database runs then.  A
 * call whose runner lock (SET_LOCKTAG_RUNNER) is held all the same is left
 * alone.
 */
static void
charge_lost_runners(void)
{
	static SPIPlanPtr plan = NULL;
	int64	   *ids;
	uint64		n;

	plans_prepare_kept(&plan,
					   "SELECT id FROM retries.call_data"
					   " WHERE state OPERATOR(pg_catalog.=) 'scheduled'"
					   " AND next_attempt OPERATOR(pg_catalog.=) 'infinity'::pg_catalog.timestamptz",
					   0, NULL);
	/* not read-only: it must see the charges recovery_charge_slot() just made */
	if (SPI_execute_plan(plan, NULL, NULL, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "retries: could not look for calls of lost runners");
	n = SPI_processed;
	if (n == 0)
		return;
	ids = palloc(sizeof(int64) * n);
	for (uint64 i = 0; i < n; i++)
	{
		bool		isnull;

		ids[i] = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[i],
											 SPI_tuptable->tupdesc, 1, &isnull));
	}
	SPI_freetuptable(SPI_tuptable);

	for (uint64 i = 0; i < n; i++)
	{
		LOCKTAG		tag;
		RetriesCall call;
		bool		handed_over;

		SET_LOCKTAG_RUNNER(tag, ids[i]);
		if (LockAcquire(&tag, ExclusiveLock, true, true) == LOCKACQUIRE_NOT_AVAIL)
			continue;

		/*
		 * Still due at 'infinity' once locked: another worker that recovered
		 * the database at the same moment may have charged it from its
		 * in-flight file, and committed, since the query above (charged
		 * again, its next attempt was charged unrun: a loaded run of t/023,
		 * under ASan)
		 */
		if (recovery_lock_call(ids[i], &call, &handed_over) == CALL_LOCKED_NOW &&
			handed_over)
		{
			ereport(LOG,
					(errmsg("retries: call " INT64_FORMAT " was handed to a runner before the server stopped, and no record of its attempt is left: the attempt is charged as interrupted",
							ids[i]),
					 errdetail("The data directory was upgraded with pg_upgrade, or is a promoted standby: neither keeps pg_retries.")));
			execute_interrupted(&call, call.attempts + 1, HOOK_NONE, 0, false);
		}
		LockRelease(&tag, ExclusiveLock, true);
	}
	pfree(ids);
}

/*
 * recovery_charge_slot -- charge what the in-flight file of one slot holds; true if
 * it held anything that is now dealt with, for ledger_clear_slot() to clear once
 * the charge has committed (a charge left for later stays in the file, and
 * in shared memory: see charge_interrupted).  Runs inside a transaction
 * and SPI connection.
 */
bool
recovery_charge_slot(int slot_no)
{
	InFlight	rec;
	bool		held = ledger_read_slot(slot_no, &rec);

	/* a record of an extension since dropped is only cleared */
	if (held && rec.extension == served)
		held = charge_interrupted(&rec);
	return held;
}

/*
 * recovery_charge -- charge interrupted attempts: those of every slot of this
 * database if it is the first worker since the server started, else only
 * its own slot's
 *
 * The charges commit before the worker claims anything, and the other
 * workers of a just-started database wait for them (the recovered flag).
 */
void
recovery_charge(Oid extension)
{
	bool		all = shmem_recovery_begin(MyDatabaseId);
	bool		held[RETRIES_MAX_SLOTS] = {false};

	served = extension;
	wslot_start_transaction();
	SPI_connect();
	PushActiveSnapshot(GetTransactionSnapshot());
	/* nothing to do if it was dropped just now: the batch will see it */
	if (wslot_lock_extension() == served)
	{
		if (all)
		{
			for (int n = 0; n < RETRIES_MAX_SLOTS; n++)
				held[n] = recovery_charge_slot(n);
			charge_lost_runners();
		}
		else
			held[worker_slot->slot_no] = recovery_charge_slot(worker_slot->slot_no);
	}
	PopActiveSnapshot();
	SPI_finish();
	wslot_commit_transaction();

	for (int n = 0; n < RETRIES_MAX_SLOTS; n++)
		if (held[n])
			ledger_clear_slot(n);
	if (all)
		shmem_recovery_end(MyDatabaseId);
}

/*
 * recovery_wait -- wait until the database's interrupted attempts are
 * charged (by this worker or another)
 */
void
recovery_wait(void)
{
	while (!shmem_recovered(MyDatabaseId))
	{
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 10, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
}

/*
 * recovery_note_exit -- on the way out in the middle of an attempt, note it for
 * the next worker to claim the call (before_shmem_exit callback)
 *
 * Registered after the connection to the database, so it runs before the
 * transaction is rolled back: no other worker can have claimed the call
 * yet.  The slot itself is freed later, by wslot_release().
 */
void
recovery_note_exit(int code, Datum arg)
{
	const char *limit;
	const InFlight *inflight = ledger_in_flight();
	bool		stopped;

	if (inflight->call_id == 0)
		return;
	if (evaluate_attempt_killed(&limit))
		ereport(LOG,
				(errmsg("retries: the worker exits: attempt %d of call " INT64_FORMAT " went on past its time limit (%s) after it was cancelled",
						inflight->attempt, inflight->call_id, limit),
				 errdetail("The function trapped the cancel. The attempt is charged as interrupted, and the calls of its batch run again."),
				 errhint("Do not catch query_canceled in the function, or re-raise it.")));

	/*
	 * Not charged when the extension's stop cut it short: unless a runner ran
	 * it, whose commits stay (the seventeenth hostile review: the owner's
	 * ALLOW_CONNECTIONS off and on ran a procedure's committed step again)
	 */
	stopped = shmem_slot_stopped(worker_slot) && !evaluate_attempt_killed(&limit) &&
		!handoff_launched();
	if (stopped)
		ledger_note_stopped();
	ledger_note_interrupted(inflight, INTERRUPTED_KEEP_MS, stopped);

	/*
	 * In a runner place no worker comes next in its slot: the database's
	 * other workers charge it from there (handoff_recover_places)
	 */
	if (shmem_runner_place_bit(worker_slot->slot_no) != 0)
		shmem_runner_place_lost(MyDatabaseId,
								shmem_runner_place_bit(worker_slot->slot_no));
}
