/*-------------------------------------------------------------------------
 *
 * worker.c
 *	  The per-database worker: claims due calls, runs them in batches, and
 *	  sleeps until the next one is due or a new one is committed.
 *
 * A batch is one transaction of one role's calls, claimed and run by
 * batch.c; this file is the loop around it: the periodic steps, the
 * recovery of an error that escapes a batch, the sleep, and leaving.
 *
 * Containment (doc/operations.md, "Containment").  The sandbox contains what
 * raises an ERROR.  What escapes one (the process's exit, which rolls back its
 * batch and has the calls of the batch run again) must cost only the role
 * whose call caused it, so a batch holds the calls of one role; of those,
 * the calls that run code of another role (its function, SECURITY DEFINER
 * or not, with the hooks and time limit it chose: see
 * execute_foreign_owner) share a batch only with calls that run the same
 * role's code, so that such code cannot have the role's other calls run
 * again, nor hold them claimed while it runs: a batch of such code ends at
 * the first call claimed that runs other code, released at commit, and a
 * batch of the role's own code leaves such a call, claimed, to a later
 * batch; and a call whose last attempt was interrupted (by the
 * worker's exit, or a crash) runs alone, in a batch of its own: if it makes the worker exit again, no other
 * call is rolled back with it, and each time it is charged an attempt, until
 * it fails.  Such a call, claimed behind others, ends its batch before it, and
 * the next batch claims it alone (lone_next).  The worker leaves the last free
 * worker of the database to other roles (busy_roles, turns.c), replaces itself when
 * the caches that calls fill have grown too much (grown_too_much), and waits
 * for no lock that a role can hold: a call row that another transaction holds
 * is skipped and come back to.
 *
 * The crash rule.  A crash rolls the whole batch back, which loses nothing
 * and runs nothing twice, but the call that crashed the worker must be
 * charged an attempt, or a call that kills its worker every time would
 * crash it forever.  Writing that down in the database would cost a commit
 * per call, so instead each worker keeps a tiny file of its own (ledger.c),
 * pg_retries/<database>.<slot>, holding the call and attempt in flight: it
 * is written before each attempt starts and cleared when the attempt's
 * outcome is recorded.  The worker maps the file into its memory, so that
 * each of those writes is a store, not a system call.  A process kill
 * leaves the file behind (the page cache outlives the process, and the
 * mapping is of the page cache), and the next worker to start in that slot
 * records the attempt as 'interrupted', which counts toward max_attempts.
 * Only that call is charged; its batch-mates run again uncharged.
 *
 * A worker that exits while the cluster stays up (SIGTERM, or any FATAL
 * error) releases the call's row lock as it goes, and its successor starts
 * only a second or so later: meanwhile another worker could claim the call
 * and run the same attempt again, uncharged.  So on its way out the worker
 * also notes the attempt in shared memory (before its transaction is rolled
 * back and the lock released), and whichever worker claims the call next
 * charges the attempt instead of running it.  After a
 * postmaster restart the first worker of a database handles the files of
 * all its slots before any worker claims a call, so a poison call cannot be
 * picked up again before it is charged.  The file also names the extension
 * (its OID), so that a file left behind before DROP EXTENSION and CREATE
 * EXTENSION charges nothing to the new extension's calls, whose ids start
 * again from 1.
 *
 * A bad row.  An error outside any call's subtransaction (the worker's own:
 * writing the outcomes, say) rolls the whole batch back.  If it came from
 * one call's row (an attempt row that is already there, say), every batch
 * that claims that call would fail the same way, and the calls behind it
 * would never run.  So after such an error the worker runs its next calls
 * one per batch; a one-call batch that fails outside the call with an
 * error that is not a passing one (a full disk, a conflict, a shutdown)
 * fails that call, in a transaction of its own, with the worker's error as
 * its message, and the others carry on.  If even that cannot be written,
 * the worker leaves the call alone (LONE_SKIP_MAX of them at most) until it
 * exits.  An error raised while a batch commits is not a row's but the
 * transaction's (Citus's two-phase commit: a node lost, a name taken, a
 * deferred trigger on another node): a batch holds one role's calls, so it
 * costs that role only.  The worker does not pause, runs that role's next
 * calls one per batch (other roles' batches stay whole), and charges the
 * attempt of a one-call batch that fails so as interrupted
 * (lone.c), to be retried after its delay.
 *
 * Schedules.  At the top of its loop, a worker fires the recurring
 * schedules that are due (schedule.c), in a short transaction before its
 * batch, so that a long call never holds a schedule's row locked: when the
 * next one is due, when a firing waits in a queue, when woken, and, while
 * it runs calls, at least every FIRE_CHECK_MS.  A wake-up is a flag in the
 * worker's slot as well as its latch (a call that waits resets the latch),
 * and says why: a wake-up for new calls alone (WAKE_CALLS) goes straight to
 * the batch, since what this transaction does cannot have changed: it cost
 * a third of the time from a call's commit to its start.  An error there is
 * logged and the worker tries again later, while its batches go on.  The
 * same transaction releases
 * the held calls that the gates of paused or limited functions let go
 * (flow.c); while a gate lets calls go, the worker also does it after
 * each batch that ran calls, since their ends may leave it room.
 *
 * Extra workers.  A role's long calls, commands or procedures can hold
 * every worker of the database, and the calls of every other role would
 * wait for them, up to retries.max_attempt_time; the last free worker is
 * left to other roles (busy_roles) only if they have a call due when it is
 * claimed.  So when each of the database's workers has been in one batch
 * for RETRIES_HELD_AFTER_MS, the launcher starts an extra worker (slot_no
 * from retries.max_workers on; at most retries.max_extra_workers of them,
 * one more each time all the extras are held too).  An extra worker takes
 * only the calls of roles that hold no other worker (running_roles): a
 * worker that runs a role's calls of its own functions is held by that
 * role; one that runs calls of another role's functions holds neither
 * role's own calls back, only more calls of the same caller or of the
 * same owner's functions (other_holds, extra_passes_over), so that a
 * role's due call starts within about a second whatever another role
 * holds: its own long calls, its calls of the role's functions, or the
 * role's calls of its functions.  A role's own code (its long call) holds
 * its share: its next call waits for it, or for a worker another role
 * leaves.  It fires schedules as the others do, and stops as soon as it
 * finds nothing to claim while some worker of the database's own is not
 * held.  One that leaves having found nothing to run while they are held
 * is not replaced before a commit wakes the database or its next call or
 * firing is due, RETRIES_EXTRA_IDLE_MS at most (shmem_extra_left_idle;
 * launcher.c, start_extra): four
 * extras a second churned through the databases of a role's long calls,
 * each taking a place of the pool a moment.  A base worker that begins a
 * batch while the others are busy wakes the launcher, which looks again
 * when they will count as held.
 *
 * Runner places.  A procedure's or command's attempt runs in a runner, which
 * a worker waits for, outside any transaction: the hand-off, and the
 * cluster's places for workers that wait so, are handoff.c's.
 *
 * Workers on demand.  A database with nothing due holds no worker, and the
 * databases take turns in the pool of retries.max_cluster_workers: when a
 * worker leaves its database is leave.c's (the worker tells it what it
 * looks after, LeaveNeeds); the launcher starts a worker again when the
 * database's work is due, or at once when a commit finds no worker that
 * stays (shmem_wake_workers marks the database woken); the first worker
 * that finds all of the database's workers busy raises the count of those
 * it wants (note_all_busy).
 * Each visit of a database is a new process: what one visit did that the
 * next need not redo (the pruning, the '@reboot' arming, the refresh of
 * function signatures) is kept in the database's shared memo
 * (RetriesDbMemo), so that a visit costs little more than its calls.
 *
 * DROP EXTENSION.  The backend that runs DROP EXTENSION stops the workers
 * first (hooks.c), so that the drop does not wait for their running calls.
 * Each transaction of the worker also locks the extension (as an object),
 * as DROP EXTENSION does before it drops anything: a drop some other way
 * (DROP SCHEMA ... CASCADE, DROP OWNED) waits for the worker's transaction
 * to end, and a worker that comes second waits for the drop, then sees the
 * extension gone and exits, instead of tripping over the dropped tables.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_extension.h"
#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lmgr.h"
#include "storage/lock.h"
#include "storage/proc.h"
#include "tcop/tcopprot.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"

#include "api/api.h"
#include "base/base.h"
#include "base/compat.h"
#include "engine/batch.h"
#include "engine/claim.h"
#include "engine/execute.h"
#include "engine/handoff.h"
#include "engine/leave.h"
#include "engine/ledger.h"
#include "engine/login.h"
#include "engine/lone.h"
#include "engine/outcome.h"
#include "engine/recovery.h"
#include "engine/retention.h"
#include "engine/runner.h"
#include "engine/sandbox.h"
#include "engine/steps.h"
#include "engine/turns.h"
#include "engine/wslot.h"
#include "flow/flow.h"
#include "schedules/schedules.h"
#include "shmem/shmem.h"
#include "tables/tables.h"

/* Longest sleep, so that pruning and checks still happen when idle */
#define MAX_SLEEP_MS			10000

/* How often to prune */
#define PRUNE_INTERVAL_MS		10000

/*
 * This worker started as an extra one; if a change of retries.max_workers
 * makes it one of the database's own, or the reverse, it exits, and the
 * launcher starts what is wanted (an extra's process is known as one in
 * pg_stat_activity)
 */
static bool started_extra = false;


/*
 * Whether a gate is full (see flow.c): then the end of a batch may leave
 * it room to release more
 */
static bool gated = false;

/* followers left for later (see chains.c): the next sleep is short */
static bool chains_recheck = false;

/* The extension this worker serves (its OID), as found when it started */
static Oid	my_extension = InvalidOid;


PGDLLEXPORT void retries_worker_main(Datum main_arg);

/*
 * work_guarded -- prune if it is time, then run a batch unless paused
 * (batch_run()'s result, or 0), surviving an error
 *
 * An error that escapes a batch is not a call's (those are caught and
 * recorded): it is the worker's own, such as a disk too full to record the
 * outcomes.  It is logged, the batch is rolled back whole, so that its
 * calls run again later, uncharged, and the worker carries on; the caller
 * waits before the next try, longer after each error in a row
 * (*errors counts them), so that a full disk neither spins the CPU nor
 * floods the log.  Exiting instead would have the launcher start the
 * worker again a second later, forever.  The calls of the failed batch
 * then run one per batch, and one that fails alone is failed for good
 * (see "A bad row" at the top).
 */
static int
work_guarded(TimestampTz *due, TimestampTz *last_prune, int *errors, bool serve)
{
	MemoryContext oldcxt = CurrentMemoryContext;
	volatile int n = 0;
	volatile bool batching = false;

	PG_TRY();
	{
		if (worker_slot->slot_no == 0 &&
			TimestampDifferenceExceeds(*last_prune, clock_system_now(),
									   steps_housekeeping_deferred() ?
									   HOUSEKEEPING_DEFER_MS : PRUNE_INTERVAL_MS))
		{
			retention_prune_round(my_extension);
			*last_prune = clock_system_now();
			steps_memo_write_pruned(*last_prune);
		}
		if (serve)
		{
			Oid			extra_avoid[RETRIES_MAX_SLOTS * 2];

			handoff_recover_places(recovery_charge_slot);
			/* an extra lets go only of calls it may claim */
			handoff_release_held(extra_avoid,
								 wslot_is_extra() ? turns_running_roles(extra_avoid) : 0);
		}
		batching = true;
		if (serve)
			n = batch_run(due);
		else
			wslot_set_state(WORKER_PAUSED, 0, InvalidOid, InvalidOid);
		*errors = 0;
	}
	PG_CATCH();
	{
		ErrorData  *edata;
		Oid			commit_role = batch_after_error();

		wslot_recover_from_error(oldcxt, &edata);

		/* the attempt in flight was rolled back with the rest: no charge */
		ledger_write(0, 0);
		/* a hold and a place taken for a runner that the batch marked */
		handoff_abort();
		wslot_set_state(WORKER_IDLE, 0, InvalidOid, InvalidOid);
		pgstat_report_activity(STATE_IDLE, NULL);
		*due = 0;
		n = 0;

		if (batching && lone_after_error(edata, commit_role,
										 my_extension))
			*due = clock_now(); /* no pause: the others can go on */
		else
			(*errors)++;
	}
	PG_END_TRY();
	return n;
}

/*
 * grown_too_much -- has the worker's memory grown past
 * retries.max_worker_memory?  Then it exits, between its transactions,
 * and the launcher starts another one in its place.
 *
 * What a worker keeps from one transaction to the next is its caches, and
 * calls fill them: compiled functions, catalog entries, time zones, each
 * kept as long as the process.  A role whose calls touch thousands of
 * objects could otherwise make every worker hold them for good.
 */
static bool
grown_too_much(void)
{
	Size		used;

	if (retries_max_worker_memory <= 0)
		return false;
	used = MemoryContextMemAllocated(TopMemoryContext, true);
	if (used <= (Size) retries_max_worker_memory * 1024)
		return false;
	ereport(LOG,
			(errmsg("retries: the worker exits to be replaced: its memory has grown to %zu kB, past retries.max_worker_memory (%d kB)",
					used / 1024, retries_max_worker_memory),
			 errdetail("The caches that calls fill live as long as the worker process.")));
	return true;
}

/*
 * worker_note -- chains_worker_note_hook: is the code running now the
 * worker's own, not a role's attempt or hook (see chains.c)?
 */
static bool
worker_note(void)
{
	return !sandbox_active();
}

/*
 * worker_start -- take the slot the launcher gave, connect to its database,
 * tell the launcher whether the extension is there (exit if not), and
 * charge the attempts that dead workers left in flight
 */
static void
worker_start(Datum main_arg)
{
	TimestampTz due_at;
	uint32		creates;
	bool		present;
	Oid			dboid;

	worker_slot_index = RETRIES_WORKER_ARG_SLOT(DatumGetUInt32(main_arg));
	worker_slot = shmem_worker_slot(worker_slot_index);
	started_extra = wslot_is_extra();

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();

	if (!wslot_take(RETRIES_WORKER_ARG_GENERATION(DatumGetUInt32(main_arg))))
		proc_exit(shmem_exit_code());	/* the launcher gave up on this worker */

	worker_cxt = AllocSetContextCreate(TopMemoryContext, "retries worker",
									   ALLOCSET_DEFAULT_SIZES);
	worker_loop_cxt = AllocSetContextCreate(worker_cxt, "retries worker loop",
											ALLOCSET_DEFAULT_SIZES);
	MemoryContextSwitchTo(worker_loop_cxt);
	before_shmem_exit(wslot_release, (Datum) 0);
	dboid = worker_slot->dboid;

	login_note_server_settings();
	BackgroundWorkerInitializeConnectionByOid(dboid, InvalidOid, 0);
	pgstat_report_appname("retries worker");
	before_shmem_exit(recovery_note_exit, (Datum) 0);
	chains_worker_note_hook = worker_note;

	/*
	 * Is the extension here?  Tell the launcher either way; but a CREATE
	 * EXTENSION that committed after this transaction began, unseen, leaves
	 * the database to be probed again at once (its commit could not, while
	 * this worker probed it).
	 */
	creates = shmem_db_creates(MyDatabaseId);
	wslot_start_transaction();
	login_forget_own_settings();
	my_extension = wslot_lock_extension();
	handoff_init(my_extension);
	batch_init(my_extension);
	present = OidIsValid(my_extension);
	wslot_commit_transaction();
	/* started for work that was due when the last worker left (on demand) */
	due_at = shmem_db_probed(MyDatabaseId, present, creates);
	if (!present)
		proc_exit(shmem_exit_code());
	steps_fire_late_from(due_at);

	execute_init(ledger_hook_phase);
	tables_names_bound_waits();
	sandbox_init();
	ledger_open(worker_slot->slot_no, my_extension);
	recovery_charge(my_extension);
	recovery_wait();
}

/*
 * wait_after_errors -- after 'errors' errors in a row, the last at
 * 'last_error', wait out a delay that doubles with each (whatever wakes
 * the worker meanwhile); true if it waited
 */
static bool
wait_after_errors(int errors, TimestampTz last_error)
{
	long		delay = Min((long) ERROR_DELAY_MS << Min(errors - 1, 10),
							MAX_ERROR_DELAY_MS);
	long		wait_ms = clock_system_ms_until(TimestampTzPlusMilliseconds(last_error, delay));

	if (wait_ms <= 0)
		return false;
	(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
					 wait_ms, PG_WAIT_EXTENSION);
	ResetLatch(MyLatch);
	return true;
}

/*
 * took_wake_up -- take the reasons the worker was woken for (see
 * shmem_wake_workers); true if there were any.  The short transaction at
 * the top of the loop runs at the next turn if one of them is WAKE_FIRE,
 * or if 'latch' says the latch was set with none (by something else than a
 * wake-up: a signal, say): a wake-up for calls alone has the worker claim
 * them at once, without firing schedules or releasing held calls first,
 * which nothing it says has changed.
 */
static bool
took_wake_up(bool latch)
{
	uint32		why = pg_atomic_exchange_u32(&worker_slot->woken, 0);

	if ((why & WAKE_FIRE) != 0 || (why == 0 && latch))
		steps_look_soon();
	return why != 0;
}

/*
 * after_batch -- how long to sleep after a round that claimed n calls
 * (due: when the next call is due, 0 if now or none), or 0 to go on at once
 */
static long
after_batch(int n, TimestampTz due)
{
	long		sleep_ms = MAX_SLEEP_MS;

	if (n > 0 && (batch_take_gate_touched() || gated))
	{
		steps_look_soon();		/* the batch's calls may leave a gate room */
		gated = true;
	}
	if (n > 0 && (due == 0 || steps_fire_waiting() || gated || retries_chains_released))
		return 0;				/* a full batch: more may be due; or a call
								 * that a queued firing or a gate waits for
								 * may have finished; or the batch released
								 * calls that ran after its own */
	if (due != 0)
		sleep_ms = Min(sleep_ms, clock_ms_until(due));
	if (retries_enabled && steps_next_fire() != 0)
		sleep_ms = Min(sleep_ms, clock_ms_until(steps_next_fire()));
	if (chains_recheck)
	{
		/* followers left for later: look again within FIRE_CHECK_MS */
		sleep_ms = Min(sleep_ms, FIRE_CHECK_MS);
		chains_recheck = false;
	}
	if (sleep_ms <= 0)
		return 0;				/* due since the claim */
	if (took_wake_up(false))
		return 0;				/* woken while it ran calls, which may have
								 * reset the latch */
	return sleep_ms;
}

/*
 * leave_needs -- what this worker looks after, for leave.c: what keeps it
 * in its database
 */
static LeaveNeeds
leave_needs(void)
{
	LeaveNeeds	needs;
	TimestampTz capped_until;

	needs.runs_alone = lone_one_by_one() || lone_next_pending();
	needs.looks_after = steps_fire_waiting() || gated || chains_recheck ||
		steps_fire_errors() > 0 || steps_copy_made_at() != 0;
	needs.next_fire = steps_next_fire();
	needs.look_again_ms = leave_look_again_ms();
	needs.capped_role = turns_capped(&capped_until, &needs.capped_holder);
	needs.capped_until = steps_next_fire();
	if (capped_until != 0 &&
		(needs.capped_until == 0 || capped_until < needs.capped_until))
		needs.capped_until = capped_until;
	return needs;
}

/*
 * worker_stop -- the extension was dropped, or fewer workers are wanted:
 * let the launcher know, and exit.  An extension dropped and created again
 * leaves the state to the CREATE, which has the launcher start workers for
 * the new one.
 */
static void
worker_stop(void)
{
	shmem_db_left(MyDatabaseId, worker_slot->slot_no < retries_max_workers &&
				  !batch_extension_replaced());
	proc_exit(shmem_exit_code());
}

/*
 * replaced -- a change of retries.max_workers made this worker one of the
 * database's own, or an extra one, which it did not start as: exit, and
 * the launcher starts what is wanted in its place
 */
static void
replaced(void)
{
	shmem_wake_launcher();
	proc_exit(shmem_exit_code());
}

/*
 * retries_worker_main -- entry point of a per-database worker
 */
void
retries_worker_main(Datum main_arg)
{
	TimestampTz ran_at = clock_system_now();
	TimestampTz started_at = ran_at;
	TimestampTz last_prune = 0;
	TimestampTz last_error = 0;
	int			errors = 0;
	int			fire_rounds = 0;
	bool		serve;

	worker_start(main_arg);
	last_prune = steps_memo_read()->pruned_at;
	for (;;)
	{
		TimestampTz due = 0;
		long		sleep_ms;
		int			n;

		/* every path of the loop, and every transaction, ends up here */
		Assert(CurrentMemoryContext == worker_loop_cxt);
		MemoryContextReset(worker_loop_cxt);

		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			char	   *retention = pstrdup(retries_retention);

			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
			/* a new retention is applied at once, not at the next pruning */
			if (strcmp(retention, retries_retention) != 0)
				last_prune = 0;
		}

		/*
		 * Send the table statistics of the batches run since the last time,
		 * at most once a second while busy, as a backend does between
		 * queries.  Autovacuum learns only from them of the rows the workers
		 * insert, update and prune: without them attempt_data, which only the
		 * workers write, was never vacuumed and grew without bound.
		 */
		pgstat_report_stat(false);
		if (worker_slot->slot_no >= retries_max_workers + retries_max_extra_workers)
			break;
		if (wslot_is_extra() != started_extra)
			replaced();

		if (errors > 0 && wait_after_errors(errors, last_error))
			continue;

		steps_names(my_extension);
		serve = steps_serving(my_extension);
		if (serve)
		{
			Size		before = MemoryContextMemAllocated(TopMemoryContext, true);

			steps_fire(my_extension, &gated);

			/*
			 * Each schedule's time zone stays cached once fired (t/060 8): a
			 * round of firings that grew the worker past the bound ends it as
			 * a batch would (not its first round, which fills the caches
			 * every worker needs: under a tiny bound, a worker still gets on)
			 */
			if (++fire_rounds > 1 &&
				MemoryContextMemAllocated(TopMemoryContext, true) > before &&
				grown_too_much())
				proc_exit(shmem_exit_code());	/* the launcher starts a fresh
												 * one */
		}
		retries_chains_released = false;

		/*
		 * A reload that came since the top of the loop first: a worker busy
		 * starting up or firing claimed a call made after retries.enabled was
		 * turned off and the setting reloaded everywhere (t/043 2)
		 */
		if (ConfigReloadPending)
			continue;
		n = work_guarded(&due, &last_prune, &errors, serve);
		if (retries_chains_deferred)
		{
			steps_look_soon();	/* followers left for later: look soon */
			chains_recheck = true;
			retries_chains_deferred = false;
		}
		if (errors > 0)
		{
			last_error = clock_system_now();
			continue;
		}
		/* paused: n and due stay 0, and the worker sleeps */
		if (n < 0)
			break;				/* the extension was dropped */
		if (n > 0 && grown_too_much())
			proc_exit(shmem_exit_code());	/* the launcher starts a fresh one */
		if (n > 0)
		{
			ran_at = clock_system_now();
			if (!wslot_is_extra())
			{
				LeaveNeeds	needs = leave_needs();

				leave_for_others(&needs, started_at);
			}
		}
		sleep_ms = after_batch(n, due);
		if (sleep_ms <= 0)
			continue;
		if (n == 0 && !wslot_is_extra())
		{
			/*
			 * In a reserved worker, with nothing it may run for a second:
			 * give it back (leave_reserve)
			 */
			if (shmem_in_reserve())
			{
				{
					LeaveNeeds	needs = leave_needs();

					leave_reserve(&needs, due, ran_at, started_at, turns_reserve_passed_over());
					sleep_ms = Min(sleep_ms, RETRIES_HELD_AFTER_MS);
				}
			}
			else
			{
				LeaveNeeds	needs = leave_needs();

				leave_when_idle(&needs, ran_at, due, started_at);
			}
			/* ... and look again when it will have been idle long enough */
			sleep_ms = Min(sleep_ms, leave_idle_left_ms(ran_at, MAX_SLEEP_MS));
		}
		if (wslot_is_extra())
		{
			/* an extra stays only while the others are held */
			if (!turns_extra_wanted() || turns_idle_in_reserve(ran_at))
				break;
			if (leave_idle_extra(ran_at))
			{
				/*
				 * it found nothing to run while the others were held: no
				 * other in its place before a commit, or a call or firing is
				 * due
				 */
				TimestampTz fire = steps_next_fire();

				shmem_extra_left_idle(MyDatabaseId,
									  fire != 0 && (due == 0 || fire < due) ? fire : due);
				break;
			}
			sleep_ms = Min(sleep_ms, RETRIES_HELD_AFTER_MS);
		}

		/* idle: send whatever statistics are left before sleeping */
		wslot_rest();
		pgstat_report_stat(true);
		if (WaitLatch(MyLatch,
					  WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
					  sleep_ms, PG_WAIT_EXTENSION) & WL_LATCH_SET)
			(void) took_wake_up(true);
		ResetLatch(MyLatch);
	}
	worker_stop();
}
