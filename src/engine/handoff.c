/*-------------------------------------------------------------------------
 *
 * handoff.c
 *	  A procedure's or command's attempt handed to a runner, and the places
 *	  of the workers that wait for one.
 *
 * The worker's batch marks such a call's attempt begun (handoff_begin: due
 * at 'infinity' until its outcome, in the ledger before the mark commits)
 * and commits; then the worker launches the runner (runner.c), waits for
 * it outside any transaction, and records its outcome (handoff_run).
 *
 * Runner places.  A procedure's or command's attempt runs in a runner
 * (runner.c), which a worker waits for, outside any transaction.  With
 * retries.max_runners above 0 (the default, 32) the waiting does not take a
 * place of the database's own: the worker that begins such an attempt
 * reserves one of the cluster's runner places (shmem_reserve_runner: fewer than
 * retries.max_runners in use, fewer than three quarters of them by the
 * call's role, and the last quarter only to a role that holds none, so
 * that one role's long commands, or a few roles' together, leave places to
 * the others); it waits for the runner in its place, and once the runner has
 * run for RUNNER_MOVE_AFTER_MS (a second) it moves to a slot_no of its own
 * from RETRIES_RUNNER_SLOT_BASE on (move_to_runner_place: its in-flight
 * record goes with it, ledger_move), the launcher starts another worker in
 * the place it left, and it exits once the outcome is recorded.  So one
 * long command delays no other, nor any function call, for more than a
 * second, and short ones (most) cost no process but their runner's.  A call that
 * finds no place is held (calls_hold_for_runner), and let go in role turns
 * as places are freed (handoff_release_held; a worker that frees one wakes
 * the databases that hold calls).  A worker in a runner place that exits
 * with its attempt in flight has no successor in that slot: it marks the
 * place lost (recovery_note_exit), no other worker moves there, and the next
 * worker of the database to look charges the attempt from the place's file
 * (handoff_recover_places).  With retries.max_runners 0 the worker waits in
 * its own place, and at most retries.max_workers - 1 of them do.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/latch.h"
#include "storage/lmgr.h"
#include "storage/lock.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "base/base.h"
#include "base/compat.h"
#include "engine/execute.h"
#include "engine/handoff.h"
#include "engine/ledger.h"
#include "engine/runner.h"
#include "engine/wslot.h"
#include "flow/flow.h"
#include "shmem/shmem.h"
#include "tables/tables.h"

/* The extension the worker serves, as found when it started (handoff_init) */
static Oid	handoff_extension = InvalidOid;

/*
 * The procedure's call that the batch marked running, for a runner to run
 * once the batch has committed (handoff_run)
 */
static struct
{
	bool		pending;
	bool		launched;		/* its runner may have started: what it
								 * commits, no rollback of the worker's undoes */
	RetriesCall call;
	Oid			holder;			/* whose code it runs (other_holds) */
	Jsonb	   *args;			/* in TopMemoryContext */
	Oid			dboid;			/* another database it runs in, or InvalidOid */
	char	   *sql;			/* ... and its text there, in TopMemoryContext */
	int64		timeout;		/* the attempt's time limit; -1: none */
	LOCKTAG		lock;			/* held while it runs (cancel() waits) */
}			runner_next;

/* How often a worker whose runner runs looks at it */
#define RUNNER_POLL_MS			100
/* ... and after how long it leaves its place to a new worker */
#define RUNNER_MOVE_AFTER_MS	RETRIES_HELD_AFTER_MS

/*
 * handoff_set_in_runner -- say in the worker's slot whether its call, of 'role',
 * runs in a runner (the places' count, shmem/places.c)
 */
void
handoff_set_in_runner(bool in_runner, Oid role)
{
	shmem_set_in_runner(worker_slot, in_runner, role);
}

/* How often a worker looks for calls held for a runner, whatever it knows */
#define RUNNER_HELD_PROBE_MS	10000

/* This batch held a call for a runner (handoff_held_committed says so) */
static bool held_for_runner = false;

/*
 * handoff_held_committed -- after a batch has committed: if it held a call
 * for a runner, say that the database may have held calls
 */
void
handoff_held_committed(void)
{
	if (!held_for_runner)
		return;
	held_for_runner = false;
	/* it may want an extra worker (see "Extra workers") */
	shmem_runner_held(MyDatabaseId);
}

/*
 * handoff_release_held -- let go of calls held for a runner while places
 * are free, in turns between roles (calls_release_runner_holds), in a
 * transaction of its own; nothing to do, and no query, unless a batch has
 * held one since a worker last found none, or RUNNER_HELD_PROBE_MS have
 * passed since this worker last looked (a call held some other way, by a
 * change this code does not see, is let go all the same).  The calls of a
 * role that holds its share of the runner places stay held, and in an extra
 * worker, those of the 'nextra' roles of 'extra_avoid', whose calls it may
 * not claim.
 */
void
handoff_release_held(const Oid *extra_avoid, int nextra)
{
	static TimestampTz last_probe = 0;
	Oid			last_role;
	uint32		held;
	int			places;
	int			released = -1;
	int64		ids[RETRIES_MAX_RUNNERS];
	Oid			avoid[3 * RETRIES_MAX_SLOTS];
	int			navoid = 0;
	TimestampTz now = clock_system_now();

	/* how many more may wait for a runner (shmem_reserve_runner's count) */
	if (!shmem_runner_holds(worker_slot,
							TimestampDifferenceExceeds(last_probe, now,
													   RUNNER_HELD_PROBE_MS),
							&held, &last_role, &places, avoid, &navoid))
		return;
	last_probe = now;
	/* an extra lets go only of calls it may claim */
	memcpy(avoid + navoid, extra_avoid, sizeof(Oid) * nextra);
	navoid += nextra;
	if (places <= 0)
		return;

	wslot_start_transaction();
	SPI_connect();
	PushActiveSnapshot(GetTransactionSnapshot());
	if (wslot_lock_extension() == handoff_extension)
		released = schema_retries_version() >= SCHEMA_1_2 ?
			calls_release_runner_holds(Min(places, RETRIES_MAX_RUNNERS),
									   &last_role, avoid, navoid, ids) : 0;
	PopActiveSnapshot();
	SPI_finish();
	wslot_commit_transaction();

	/*
	 * The turn goes on from the role let go last; none left: none until a
	 * batch holds one again (one that passed over roles found no answer for
	 * those)
	 */
	shmem_runner_holds_done(worker_slot, released, ids, last_role, navoid > 0,
							held);
}

/*
 * move_to_runner_place -- this worker, whose call has run in a runner for
 * RUNNER_MOVE_AFTER_MS, leaves its place to a new worker and takes a runner place (see
 * "Runner places"): a slot_no from RETRIES_RUNNER_SLOT_BASE that no worker
 * of the database has, nor a worker that exited there with its attempt in
 * flight (runners_lost).  The launcher keeps the place it leaves until its
 * in-flight record has moved (moved_from), so that the worker it starts
 * there does not find the record and charge an attempt that runs.  With
 * none free it stays where it is, and tries again at its next look.
 */
static void
move_to_runner_place(void)
{
	int			to = shmem_runner_move(worker_slot);

	if (to < 0)
		return;
	ledger_move(to);
	shmem_runner_moved(worker_slot);
}

/*
 * handoff_place_freed -- the call this worker waited for in a runner has
 * its outcome, and its runner place is free: wake the databases that hold
 * calls for one (see "Runner places")
 */
void
handoff_place_freed(void)
{
	Oid		   *dbs = palloc(sizeof(Oid) * retries_max_databases);
	int			n = shmem_runner_waiting_dbs(dbs);

	for (int i = 0; i < n; i++)
		shmem_wake_workers(dbs[i], WAKE_CALLS, InvalidOid);
	pfree(dbs);
}

/*
 * handoff_recover_places -- charge the attempts that workers which exited
 * in a runner place left in flight (runners_lost), from the files of those
 * places, once no worker is there any more, by 'recover' (the worker's charge of
 * a slot's file); a place whose charge waits (the call's row is locked)
 * stays marked, and is looked at again the next time
 */
void
handoff_recover_places(bool (*recover) (int slot_no))
{
	/* not while the worker that left it is still on its way out */
	uint64		lost = shmem_runner_places_lost(MyDatabaseId);
	uint64		done = 0;
	uint64		charged = 0;

	if (lost == 0)
		return;

	wslot_start_transaction();
	SPI_connect();
	PushActiveSnapshot(GetTransactionSnapshot());
	if (wslot_lock_extension() == handoff_extension)
	{
		for (int j = 0; j < RETRIES_MAX_RUNNERS; j++)
		{
			InFlight	rec;
			uint64		bit = UINT64CONST(1) << j;

			if ((lost & bit) == 0)
				continue;
			if (!ledger_read_slot(RETRIES_RUNNER_SLOT_BASE + j, &rec))
				done |= bit;	/* nothing there */
			else if (recover(RETRIES_RUNNER_SLOT_BASE + j))
				charged |= bit;
		}
	}
	else
		done = lost;			/* the extension's calls are gone */
	PopActiveSnapshot();
	SPI_finish();
	wslot_commit_transaction();

	for (int j = 0; j < RETRIES_MAX_RUNNERS; j++)
		if (charged & (UINT64CONST(1) << j))
			ledger_clear_slot(RETRIES_RUNNER_SLOT_BASE + j);
	shmem_runner_places_found(MyDatabaseId, done | charged);
}

/*
 * forget_runner_next -- free what runner_next holds in TopMemoryContext
 */
static void
forget_runner_next(void)
{
	pfree(runner_next.args);
	runner_next.args = NULL;
	if (runner_next.sql != NULL)
		pfree(runner_next.sql);
	runner_next.sql = NULL;
}

/*
 * handoff_begin -- a procedure's call at the head of the batch: checked
 * as run_call checks a call (may_start), then marked running for a runner
 * (execute_runner_begin), which starts once the batch has committed: the
 * procedure may COMMIT, and CREATE INDEX CONCURRENTLY in it would wait for
 * the batch's snapshot
 */
void
handoff_begin(RetriesCall *call)
{
	Jsonb	   *args;
	int64		timeout;
	Oid			dboid;
	char	   *sql;

	if (!shmem_reserve_runner(worker_slot, call->role, call->id))
	{
		/*
		 * held, uncharged, until a place is free: the batches keep one worker
		 * (before 1.2, which has no held calls, a second later)
		 */
		shmem_gate_leave(worker_slot);
		if (schema_retries_version() >= SCHEMA_1_2)
		{
			calls_hold_for_runner(call->id);
			held_for_runner = true;
		}
		else
			calls_put_back(call->id);
		return;
	}
	if (!execute_runner_begin(call, &args, &timeout, &dboid, &sql))
	{
		handoff_set_in_runner(false, InvalidOid);
		shmem_gate_leave(worker_slot);
		return;
	}

	/*
	 * In the ledger before the mark commits: a crash from then on charges the
	 * attempt, and gives the call, due at 'infinity' until its outcome, a
	 * time to run again (an error rolls both back: batch_run's caller clears
	 * the ledger)
	 */
	ledger_write(call->id, call->attempts + 1);
	/* taken before the mark commits, so that cancel() never misses it */
	SET_LOCKTAG_RUNNER(runner_next.lock, call->id);
	(void) LockAcquire(&runner_next.lock, ExclusiveLock, true, false);
	runner_next.call = *call;
	runner_next.call.args = NULL;
	/* a procedure of another role: held as a batch of its functions */
	runner_next.holder = execute_code_owner(call);
	if (!OidIsValid(runner_next.holder))
		runner_next.holder = call->role;
	runner_next.args = (Jsonb *) MemoryContextAlloc(TopMemoryContext, VARSIZE(args));
	memcpy(runner_next.args, args, VARSIZE(args));
	runner_next.dboid = dboid;
	runner_next.sql = sql != NULL ? MemoryContextStrdup(TopMemoryContext, sql) : NULL;
	runner_next.timeout = timeout;
	runner_next.pending = true;
}

/*
 * handoff_run -- the attempt of the call handoff_begin() marked, in a
 * runner: this worker waits for it, outside any transaction, then records
 * its outcome in a transaction of its own.  The ledger holds the attempt
 * meanwhile, as for any attempt: a crash charges it (the call is at least
 * once: what the procedure committed stays).
 */
void
handoff_run(void)
{
	RetriesCall *call = &runner_next.call;
	TimestampTz started_at = clock_system_now();
	RunnerOutcome outcome;
	Oid			key;
	int			cap_ms;

	runner_next.pending = false;
	cap_ms = runner_next.timeout < 0 ? 0 :
		(int) Min(runner_next.timeout / 1000 + 1, INT_MAX / 2);
	wslot_set_state(WORKER_RUNNING, call->id, call->role, runner_next.holder);
	pgstat_report_activity(STATE_RUNNING,
						   psprintf("retries: call " INT64_FORMAT " attempt %d, in a runner",
									call->id, call->attempts + 1));
	runner_next.launched = true;
	if (!(OidIsValid(runner_next.dboid) ?
		  runner_launch_in(runner_next.dboid, call->role, runner_next.sql, cap_ms,
						   call->id, call->attempts + 1) :
		  runner_launch_call(call->role, execute_call_function(call, &key),
							 runner_next.args, cap_ms, call->id,
							 call->attempts + 1)))
	{
		/* nothing ran: a stop now charges nothing */
		runner_next.launched = false;
		ereport(LOG,
				(errmsg("retries: no background worker slot is free for call " INT64_FORMAT "; it waits a second",
						call->id),
				 errhint("Raise max_worker_processes.")));
		wslot_start_transaction();
		SPI_connect();
		PushActiveSnapshot(GetTransactionSnapshot());
		if (wslot_lock_extension() == handoff_extension)
			calls_put_back(call->id);
	}
	else
	{
		/*
		 * An error here (a cancel of the worker, say) would leave the call
		 * due at 'infinity', unclaimed for good: the worker exits instead,
		 * its runner is stopped, and its successor charges the attempt
		 * interrupted (the ledger still holds it)
		 */
		PG_TRY();
		{
			while (!runner_poll(&outcome))
			{
				/*
				 * Its place to a new worker once the runner has run for
				 * RUNNER_MOVE_AFTER_MS, with runner places (see "Runner
				 * places")
				 */
				if (retries_max_runners > 0 && !RETRIES_IS_RUNNER_SLOT(worker_slot->slot_no) &&
					TimestampDifferenceExceeds(started_at, clock_system_now(),
											   RUNNER_MOVE_AFTER_MS))
					move_to_runner_place();
				(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
								 RUNNER_POLL_MS, PG_WAIT_EXTENSION);
				ResetLatch(MyLatch);
				CHECK_FOR_INTERRUPTS();
			}
			wslot_start_transaction();
			SPI_connect();
			PushActiveSnapshot(GetTransactionSnapshot());
			if (wslot_lock_extension() == handoff_extension)
			{
				runner_outcome_here(&outcome);
				execute_runner_end(call, started_at, runner_next.timeout, &outcome);
			}
		}
		PG_CATCH();
		{
			HOLD_INTERRUPTS();
			EmitErrorReport();
			FlushErrorState();
			ereport(FATAL,
					(errmsg("retries: the worker stops after an error while a runner ran call " INT64_FORMAT,
							call->id),
					 errdetail("The worker that takes its place charges the attempt as interrupted.")));
		}
		PG_END_TRY();
		wslot_count_call(outcome.status == RUNNER_SUCCEEDED);
	}
	PopActiveSnapshot();
	SPI_finish();
	wslot_commit_transaction();
	/* an on_exhausted hook's sandbox may have released it already */
	if (retries_lock_held_by_me(&runner_next.lock, ExclusiveLock))
		LockRelease(&runner_next.lock, ExclusiveLock, true);
	shmem_gate_leave(worker_slot);
	handoff_set_in_runner(false, InvalidOid);
	forget_runner_next();
	wslot_set_state(WORKER_IDLE, 0, InvalidOid, InvalidOid);
	pgstat_report_activity(STATE_IDLE, NULL);
	ledger_write(0, 0);
	runner_next.launched = false;
}


/*
 * handoff_init -- the worker serves extension 'extension' (its OID)
 */
void
handoff_init(Oid extension)
{
	handoff_extension = extension;
}

/*
 * handoff_pending -- has the batch that committed marked a call's attempt
 * for a runner to run (handoff_run)?
 */
bool
handoff_pending(void)
{
	return runner_next.pending;
}

/*
 * handoff_launched -- may a runner of this worker's have started: what it
 * commits, no rollback of the worker's undoes?
 */
bool
handoff_launched(void)
{
	return runner_next.launched;
}

/*
 * handoff_drop -- the batch that marked a call's attempt for a runner did
 * not commit (an error kept the runner from starting): forget it, and the
 * place taken for it
 */
void
handoff_drop(void)
{
	if (!runner_next.pending)
		return;
	runner_next.pending = false;
	forget_runner_next();
	LockRelease(&runner_next.lock, ExclusiveLock, true);
	handoff_set_in_runner(false, InvalidOid);
}

/*
 * handoff_abort -- the batch was rolled back: nothing it held for a runner,
 * nor the place it took for one, is left
 */
void
handoff_abort(void)
{
	held_for_runner = false;
	handoff_set_in_runner(false, InvalidOid);
}
