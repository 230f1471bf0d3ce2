/*-------------------------------------------------------------------------
 *
 * worker.c
 *	  The per-database worker: claims due calls, runs them in batches, and
 *	  sleeps until the next one is due or a new one is committed.
 *
 * A batch is one transaction: the worker claims up to retries.batch_size
 * due calls of one role with FOR UPDATE SKIP LOCKED (so no two workers
 * ever run the same call) into its own memory (claim.c), runs each in a
 * subtransaction and the sandbox of its role (sandbox.c) and records its
 * outcome, and stops taking more after BATCH_TIME_MS so that one slow call
 * does not hold the others' commits for long, or after a call that changed
 * the transaction for good, or that was put back because it would have
 * waited for an event's or a key's name while the batch held names that
 * its earlier calls took (name_locks.c: two batches never wait for each
 * other's names).  Calls claimed but not reached are simply released at
 * commit.  The roles take turns, a batch each (claim.c).
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
 * A call may run for minutes, and the calls claimed after it stay locked
 * until it ends, out of the other workers' reach.  So a batch claims in
 * steps: 1 call first, then, each time it has run all it claimed, as many
 * again: a slow call holds back at most as many claimed calls as ran
 * before it in the same batch, and none when it is the first.
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
 * held.  A base worker that begins a batch while the others are busy
 * wakes the launcher, which looks again when they will count as held.
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

/* A batch stops taking new calls after this long */
#define BATCH_TIME_MS			50
/* Longest sleep, so that pruning and checks still happen when idle */
#define MAX_SLEEP_MS			10000

/* Pruning: how often, and how many calls per transaction */
#define PRUNE_INTERVAL_MS		10000
#define PRUNE_BATCH				1000

/* How often to look whether a restore of the database is over */
#define RESTORE_CHECK_MS		1000

/*
 * This worker started as an extra one; if a change of retries.max_workers
 * makes it one of the database's own, or the reverse, it exits, and the
 * launcher starts what is wanted (an extra's process is known as one in
 * pg_stat_activity)
 */
static bool started_extra = false;


/*
 * Whether the batch's transaction is committing, and the role whose calls
 * the batch holds (see lone_after_error)
 */
static bool committing_batch = false;
static Oid	batch_role = InvalidOid;


/*
 * Whether a gate is full (see flow.c), and whether the last batch held a
 * call or ran an attempt of a limited function: then the end of a batch
 * may leave a gate room to release more
 */
static bool gated = false;

static bool gate_touched = false;

/* followers left for later (see chains.c): the next sleep is short */
static bool chains_recheck = false;

/* The extension this worker serves (its OID), as found when it started */
static Oid	my_extension = InvalidOid;

/* Set when the worker stops because the extension was dropped and created again */
static bool extension_replaced = false;

PGDLLEXPORT void retries_worker_main(Datum main_arg);

/*
 * next_due -- when the earliest call due after 'after' is due, or 0 if none
 * is
 *
 * 'after' is the time of the last claim: calls due by then that the claim
 * did not get are locked by other workers, which run them (and record a
 * retry's next time themselves), so they are no reason to wake up.  The
 * query takes a new snapshot, so that it sees this batch's own outcomes
 * and retries.
 */
static TimestampTz
next_due(TimestampTz after)
{
	static SPIPlanPtr plans[UNHELD_PLANS];
	SPIPlanPtr	plan;
	Oid			argtypes[1] = {TIMESTAMPTZOID};
	Datum		values[1] = {TimestampTzGetDatum(after)};
	bool		isnull;
	Datum		d;
	TimestampTz zero;
	TimestampTz other;

	/* the first entry of the due index, whatever the statistics say */
	plan = plans_prepare_unheld(plans,
								"SELECT next_attempt FROM retries.call_data"
								" WHERE state OPERATOR(pg_catalog.=) 'scheduled'" NOT_HELD PRIORITY_ZERO
								" AND next_attempt OPERATOR(pg_catalog.>) $1"
								" ORDER BY next_attempt LIMIT 1",
								1, argtypes);
	if (plans_execute_by_index(plan, values, false, 1) != SPI_OK_SELECT)
		elog(ERROR, "retries: could not find the next due call");
	if (SPI_processed == 0)
		zero = 0;
	else
	{
		d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
		zero = isnull ? 0 : DatumGetTimestampTz(d);
	}

	/* and of the other priorities */
	other = claim_next_prioritized(after);
	if (zero == 0 || (other != 0 && other < zero))
		return other;
	return zero;
}

/*
 * prune -- delete finished calls (and their attempts) older than
 * retries.retention, a small batch per transaction so that pruning never
 * holds up the calls
 */
static void
prune(void)
{
	TimestampTz start = clock_system_now();

	for (;;)
	{
		uint64		deleted;

		wslot_start_transaction();
		SPI_connect();
		PushActiveSnapshot(GetTransactionSnapshot());
		if (wslot_lock_extension() != my_extension)
		{
			/* dropped: run_batch() will see it */
			PopActiveSnapshot();
			SPI_finish();
			wslot_commit_transaction();
			break;
		}

		deleted = retention_prune(PRUNE_BATCH);
		if (schema_retries_version() >= SCHEMA_1_6)
			deleted = Max(deleted, retention_prune_events(PRUNE_BATCH));
		if (schema_retries_version() >= SCHEMA_1_7)
			deleted = Max(deleted, tables_prune_name_locks(PRUNE_BATCH));
		PopActiveSnapshot();
		SPI_finish();
		wslot_commit_transaction();

		if (deleted < PRUNE_BATCH ||
			TimestampDifferenceExceeds(start, clock_system_now(), BATCH_TIME_MS))
			break;
	}
}

/*
 * pass_gate -- may the call's attempt start, as far as the gates of the
 * batch say (see flow.c)?  If its function is paused, or limited and with
 * no room, the call is held, uncharged, and false returned; if limited
 * and with room, the worker counts among its attempts in flight until
 * shmem_gate_leave().
 */
static bool
pass_gate(const RetriesCall *call, const RetriesGate *gates, int ngates)
{
	Oid			gate;
	Oid			fnoid = execute_call_function(call, &gate);

	for (int g = 0; g < ngates; g++)
	{
		if (gates[g].fn != gate)
			continue;
		gate_touched = true;
		if (!gates[g].paused)
		{
			bool		keyed = false;
			int64		key = 0;

			if (gates[g].max_per_key > 0)
				keyed = flow_call_limit_key(call->id, &key);
			if (shmem_gate_enter(worker_slot, gate, gates[g].max_running,
								 keyed, key, gates[g].max_per_key,
								 gates[g].has_rate ? &gates[g].rate : NULL,
								 gates[g].has_rate ? schema_function_owner(fnoid)
								 : InvalidOid))
				return true;
		}
		flow_hold_call(call->id, gate);
		return false;
	}
	return true;
}

/*
 * claimed_ids -- the ids of the calls left alone and of calls[0..n-1], the
 * calls a claim must leave out
 */
static int64 *
claimed_ids(const RetriesCall *calls, int n)
{
	int			nskipped;
	const int64 *skipped = lone_skipped(&nskipped);
	int64	   *ids = palloc(sizeof(int64) * (nskipped + n + 1));

	memcpy(ids, skipped, sizeof(int64) * nskipped);
	for (int i = 0; i < n; i++)
		ids[nskipped + i] = calls[i].id;
	return ids;
}

/* A batch as it is claimed and run: the calls of one role, in one transaction */
typedef struct Batch
{
	RetriesCall *calls;
	int			n;				/* claimed so far */
	int			limit;			/* the most it may hold */
	Oid			role;			/* whose calls it holds */
	Oid			foreign_owner;	/* whose code they run as that role, if
								 * another's (execute_foreign_owner) */
	bool		claimed_all;	/* more calls may be claimed */
	bool		zero_done;		/* the calls of priority 0 are all claimed */
	bool		below_zero;		/* a batch of calls of priority below 0 */
	TimestampTz claimed_at;
	Claim	   *claim;			/* the query that goes on claiming, or NULL */
	RetriesGate *gates;			/* pauses and limits, as of gates_generation */
	int			ngates;
	uint64		gates_generation;
} Batch;

/* The batch open now, or NULL (see batch_claimed) */
static Batch *open_batch_now = NULL;

/*
 * batch_holder -- the role whose code batch b runs: the owner of the other
 * role's functions its calls run (execute_foreign_owner), else its calls'
 * role (see other_holds)
 */
static Oid
batch_holder(const Batch *b)
{
	return OidIsValid(b->foreign_owner) ? b->foreign_owner : b->role;
}

/*
 * skip_first -- leave the first call of batch b to other workers: this one
 * claims around it from now on (skipped); true.  A worker whose list of
 * such calls is full exits: the launcher starts a fresh one if it is still
 * wanted.
 */
static bool
skip_first(const Batch *b)
{
	if (!lone_skip(b->calls[0].id))
		proc_exit(shmem_exit_code());
	return true;
}

/*
 * extra_passes_over -- in an extra worker, is batch b of the kind that
 * another worker of the database runs (turns_extra_passes_over)?  Its
 * first call is then not run, but left to the database's own workers, and
 * this worker claims around it from now on (skipped).  An extra whose list
 * of such calls is full exits: the launcher starts a fresh one if it is
 * still wanted.
 */
static bool
extra_passes_over(const Batch *b)
{
	return turns_extra_passes_over(b->role, batch_holder(b)) && skip_first(b);
}

/*
 * reserve_passes_over -- in a reserved worker, is batch b of another
 * role's code that runs in another reserved worker already
 * (turns_reserve_passes_over)?  Its first call is then left to other
 * workers, and this one claims around it (skipped), as an extra does.
 */
static bool
reserve_passes_over(const Batch *b)
{
	return turns_reserve_passes_over(b->role, batch_holder(b)) && skip_first(b);
}

/*
 * batch_claimed -- has the batch open now claimed call 'id'?  (Set as
 * manage_claimed_hook: code that the batch runs may not change its calls;
 * see manage.c.)
 */
static bool
batch_claimed(int64 id)
{
	if (open_batch_now == NULL)
		return false;
	for (int i = 0; i < open_batch_now->n; i++)
		if (open_batch_now->calls[i].id == id)
			return true;
	return false;
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
 * open_batch -- start the batch's transaction; false, with it ended, if
 * there is nothing to run in it: the extension is gone or replaced
 * (*result -1), or being restored (*result 0, *due when to look again)
 */
static bool
open_batch(TimestampTz start, TimestampTz *due, int *result)
{
	Oid			extoid;
	Oid			policies;

	wslot_start_transaction();
	SPI_connect();
	PushActiveSnapshot(GetTransactionSnapshot());

	extoid = wslot_lock_extension();
	if (extoid != my_extension)
	{
		PopActiveSnapshot();
		SPI_finish();
		wslot_commit_transaction();
		extension_replaced = OidIsValid(extoid);
		*result = -1;
		return false;
	}
	/* a restore under way: nothing runs before its tables are loaded */
	if (restore_holder())
	{
		PopActiveSnapshot();
		SPI_finish();
		wslot_commit_transaction();
		*due = TimestampTzPlusMilliseconds(clock_ahead(start), RESTORE_CHECK_MS);
		*result = 0;
		return false;
	}

	/*
	 * policy_data before call_data, in the order in which retries.call() and
	 * the update scripts (1.0 to 1.1 alters policy_data, then 1.1 to 1.2
	 * call_data) lock them: a batch that had claimed calls and then read a
	 * policy deadlocked with ALTER EXTENSION UPDATE 1.0 to 1.2.
	 */
	policies = get_relname_relid("policy_data", schema_retries_oid());
	if (OidIsValid(policies))
		LockRelationOid(policies, AccessShareLock);
	return true;
}

/*
 * head_after_priorities -- the first call of a batch (its role's earliest
 * due, claim_first) runs after the calls of a higher priority claimed
 * with it (claim_prioritized, highest first): among a role's due calls,
 * the higher priority runs first.  Only calls of the role's own code, and
 * none whose last attempt was interrupted, go before it: the batch is of
 * its first call's code, and a call of another role's code first would
 * hold the role's own calls claimed with it for as long as it runs (the
 * twenty-ninth hostile review, t/063 7); such a call runs in a later batch,
 * as it would behind the head.
 */
static void
head_after_priorities(RetriesCall *calls, int n)
{
	RetriesCall head = calls[0];
	int			k = 1;

	while (k < n && calls[k].priority > head.priority && !calls[k].lone &&
		   !OidIsValid(execute_foreign_owner(&calls[k])))
	{
		calls[k - 1] = calls[k];
		k++;
	}
	calls[k - 1] = head;
}

/*
 * claim_batch -- the batch's role and its first call (see claim.c); then,
 * unless that call runs alone, more of the role's calls: those of a
 * priority above 0, then those of priority 0 earliest first, through a
 * query that goes on from step to step (claim_again); or, for a batch of
 * calls below 0, those, leaving out the calls left alone and those
 * already claimed
 *
 * The claims' plans are made as if a scan of the whole table or a sort
 * cost more than any index scan (plans_by_index_begin): they are kept, and
 * one made after an ANALYZE of a table of finished calls (autovacuum's,
 * after any drain), whose statistics say that no call is scheduled,
 * walked every due call through call_data_due and sorted them, at each
 * claim (62 % of the workers' time in a drain of 40,000 calls made after
 * such an ANALYZE; t/029_claim_plans.pl).
 */
static void
claim_batch(Batch *b)
{
	int			nestlevel = plans_by_index_begin();

	/* room for a whole batch: the limit of one call is another role's only */
	b->calls = MemoryContextAlloc(TopTransactionContext,
								  sizeof(RetriesCall) * Max(b->limit, retries_batch_size));
	b->gates_generation = flow_gates_generation();
	b->ngates = flow_load_gates(&b->gates);
	b->claimed_at = clock_now();

	b->n = turns_claim_first(b->calls, b->claimed_at, &b->below_zero);
	b->role = b->n > 0 ? b->calls[0].role : InvalidOid;
	b->claimed_all = b->n > 0;
	if (b->n > 0 && !lone_claimed(&b->calls[0]))
		b->limit = retries_batch_size;

	b->claim = NULL;
	b->foreign_owner = b->n > 0 ? execute_foreign_owner(&b->calls[0]) : InvalidOid;
	if (b->n > 0 && !b->calls[0].lone && b->limit > 1)
	{
		/*
		 * The role's calls of a priority first, claimed with the first call;
		 * not before another role's code has run, which would hold them
		 * claimed while it runs (the fifteenth hostile review): such a batch
		 * claims one call at a time (claim_again)
		 */
		if (!b->below_zero)
		{
			if (!OidIsValid(b->foreign_owner))
			{
				b->n += claim_prioritized(b->calls + b->n, b->limit - b->n, b->claimed_at,
										  true, b->role, claimed_ids(b->calls, b->n),
										  lone_nskipped() + b->n);

				head_after_priorities(b->calls, b->n);
			}
			b->claim = claim_begin(b->limit, b->claimed_at, b->role,
								   claimed_ids(b->calls, b->n), lone_nskipped() + b->n);
		}
		b->zero_done = b->below_zero;
	}
	else
		b->zero_done = true;
	plans_by_index_end(nestlevel);
}

/*
 * claim_again -- all claimed calls have run: claim as many again (up to
 * the limit), of priority 0, and once none of those is left, of a batch
 * below 0, below 0; false if none was claimed.  A batch of another role's
 * code claims one call at a time: the next may be that code again, and
 * would hold the one claimed with it for as long as it runs.
 */
static bool
claim_again(Batch *b)
{
	int			want = Min(OidIsValid(b->foreign_owner) ? 1 : Max(b->n, 1),
						   b->limit - b->n);
	int			got = 0;
	int			nestlevel;

	if (want <= 0 || !b->claimed_all || b->n == 0 || b->calls[0].lone)
		return false;
	nestlevel = plans_by_index_begin();
	if (!b->zero_done)
	{
		got = claim_more(b->claim, b->calls + b->n, want);
		b->zero_done = got < want;
		b->claimed_all = got == want;
	}
	else if (b->below_zero)
	{
		got = claim_prioritized(b->calls + b->n, want, b->claimed_at, false, b->role,
								claimed_ids(b->calls, b->n), lone_nskipped() + b->n);
		b->claimed_all = got == want;
	}
	plans_by_index_end(nestlevel);
	b->n += got;
	return got > 0;
}

/*
 * may_start -- may a claimed call's attempt start?  Not if a copy of a
 * database brought it (serving), if an interrupted
 * attempt of it is to be charged instead, if a cancel() waits for it (it
 * gets the call first: see manage.c), if its key_window puts it off
 * (another call of its key runs, or began within the window: see
 * key_window.c), or if its gate holds it (a paused
 * function, or a limited one with no room; the gates as they are now: a
 * pause or limit that committed since they were loaded applies to this
 * attempt too)
 */
static bool
may_start(Batch *b, RetriesCall *call)
{
	ExecuteHook hook;
	TimestampTz started;
	bool		stopped;

	if (steps_copy_made_at() != 0 &&
		tables_cancel_copied_call(call->id, steps_copy_made_at()))
	{
		steps_finish_cancelled(&call->id, 1);
		return false;
	}
	if (ledger_take_interrupted(my_extension, call->id, call->attempts + 1, &hook,
								&started, &stopped))
	{
		execute_interrupted(call, call->attempts + 1, hook, started, stopped);
		return false;
	}
	if (shmem_cancel_waiting(call->id))
		return false;
	if (call->windowed && !flow_key_window_allows(call->id))
		return false;
	if (flow_gates_generation() != b->gates_generation)
	{
		b->gates_generation = flow_gates_generation();
		b->ngates = flow_load_gates(&b->gates);
	}
	return b->ngates == 0 || pass_gate(call, b->gates, b->ngates);
}

/*
 * run_call -- one claimed call of the batch: its interrupted attempt
 * charged, or handed to a cancel() that waits for it, or held at its
 * gate, or its attempt run
 */
static void
run_call(Batch *b, RetriesCall *call)
{
	bool		ok;

	if (!may_start(b, call))
		return;

	ledger_write(call->id, call->attempts + 1);
	call_forget_outcome();
	tables_names_attempt_begins();
	wslot_set_state(WORKER_RUNNING, call->id, call->role, batch_holder(b));
	pgstat_report_activity(STATE_RUNNING,
						   psprintf("retries: call " INT64_FORMAT " attempt %d",
									call->id, call->attempts + 1));
	ok = execute_attempt(call);

	/*
	 * The attempt has ended: no longer its call's, before it leaves the gate
	 * (else one more attempt than the limit would seem to run, until this
	 * worker's next call)
	 */
	wslot_set_state(WORKER_RUNNING, 0, InvalidOid, InvalidOid);
	shmem_gate_leave(worker_slot);
	wslot_count_call(ok);
	ledger_write(0, 0);
}

/*
 * run_batch -- one batch transaction; returns the number of calls claimed
 * and sets *due to when the next call is due, or to 0 if more may be due
 * now (a full batch, or one cut short) or none is scheduled at all
 *
 * Returns -1 if the extension is no longer installed, or not the one the
 * worker started with (extension_replaced tells which).
 */
static int
run_batch(TimestampTz *due)
{
	Batch		b;
	TimestampTz start = clock_system_now();
	int			result;

	lone_batch_begin();
	batch_role = InvalidOid;
	/* one that an error kept from running: its batch, and mark, rolled back */
	handoff_drop();
	if (!open_batch(start, due, &result))
		return result;
	memset(&b, 0, sizeof(b));
	b.limit = lone_batch_limit();
	claim_batch(&b);
	batch_role = b.role;
	open_batch_now = &b;

	for (int i = 0;; i++)
	{
		/*
		 * An attempt that fired deferred triggers leaves the transaction's
		 * constraint modes changed for good: the next call must start in a
		 * new transaction (see sandbox.c), and so must one after a call put
		 * back for a name (name_locks.c).  A call whose last attempt was
		 * interrupted runs alone.
		 */
		if (i > 0 && (ShutdownRequestPending || b.calls[0].lone ||
					  sandbox_transaction_changed() || tables_name_refused() ||
					  TimestampDifferenceExceeds(start, clock_system_now(),
												 BATCH_TIME_MS)))
			break;
		if (i == b.n && !claim_again(&b))
			break;

		/* a call whose last attempt was interrupted: the next batch, alone */
		if (i > 0 && b.calls[i].lone)
		{
			lone_next_set(b.calls[i].id);
			break;
		}
		/* a procedure's: alone too, in a runner after the batch commits */
		if (execute_is_procedure(&b.calls[i]))
		{
			if (i > 0)
				lone_next_set(b.calls[i].id);
			else if (may_start(&b, &b.calls[0]))
				handoff_begin(&b.calls[0]);
			break;
		}

		/*
		 * One that runs another role's code than the first: a later batch. A
		 * batch of another role's code ends there, or that code would hold
		 * the call, claimed, for as long as it runs (the thirteenth hostile
		 * review: mallory's slow function, claimed after it, kept alice's own
		 * call waiting); a batch of the role's own code goes on.
		 */
		if (i == 0)
		{
			if (wslot_is_extra() && extra_passes_over(&b))
				break;
			if (!wslot_is_extra() && shmem_in_reserve() && reserve_passes_over(&b))
				break;
		}
		else if (execute_foreign_owner(&b.calls[i]) != b.foreign_owner)
		{
			if (OidIsValid(b.foreign_owner))
				break;
			continue;
		}
		run_call(&b, &b.calls[i]);
	}
	if (b.claim != NULL)
		claim_end(b.claim);
	execute_finish_batch();
	open_batch_now = NULL;

	/*
	 * Nothing more of this role's is due now; other roles' calls may be,
	 * which the next batch takes at once (*due stays 0).  Only a batch that
	 * found nothing to claim looks for when the next call falls due.
	 */
	*due = 0;
	if (b.n == 0)
		*due = next_due(b.claimed_at);
	if (b.n == 0)
		turns_capped_due(b.claimed_at, due);

	PopActiveSnapshot();
	SPI_finish();
	committing_batch = true;
	wslot_commit_transaction();
	committing_batch = false;
	wslot_set_state(WORKER_IDLE, 0, InvalidOid, InvalidOid);
	pgstat_report_activity(STATE_IDLE, NULL);
	handoff_held_committed();
	if (handoff_pending())
	{
		handoff_run();
		if (retries_max_runners > 0)
			handoff_place_freed();

		/*
		 * The place it left has another worker now, which the outcome's
		 * consequences (a retry, calls after it) wake: there may be none (on
		 * demand), and then the launcher starts one (the twenty-fourth
		 * hostile review, t/058)
		 */
		if (RETRIES_IS_RUNNER_SLOT(worker_slot->slot_no))
		{
			shmem_wake_workers(MyDatabaseId, WAKE_CALLS | WAKE_FIRE);
			proc_exit(shmem_exit_code());
		}
	}
	lone_batch_ran(b.role, b.n);
	return b.n;
}

/*
 * work_guarded -- prune if it is time, then run a batch unless paused
 * (run_batch()'s result, or 0), surviving an error
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
			prune();
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
			n = run_batch(due);
		else
			wslot_set_state(WORKER_PAUSED, 0, InvalidOid, InvalidOid);
		*errors = 0;
	}
	PG_CATCH();
	{
		ErrorData  *edata;
		bool		at_commit = committing_batch;

		committing_batch = false;
		wslot_recover_from_error(oldcxt, &edata);
		open_batch_now = NULL;

		/* the attempt in flight was rolled back with the rest: no charge */
		ledger_write(0, 0);
		/* a hold and a place taken for a runner that the batch marked */
		handoff_abort();
		wslot_set_state(WORKER_IDLE, 0, InvalidOid, InvalidOid);
		pgstat_report_activity(STATE_IDLE, NULL);
		*due = 0;
		n = 0;

		if (batching && lone_after_error(edata, at_commit ? batch_role : InvalidOid,
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
 * worker_start -- take the slot the launcher gave, connect to its database,
 * tell the launcher whether the extension is there (exit if not), and
 * charge the attempts that dead workers left in flight
 */
static void
worker_start(Datum main_arg)
{
	RetriesDatabase *db;
	uint32		creates;
	bool		present;
	Oid			dboid;

	worker_slot_index = RETRIES_WORKER_ARG_SLOT(DatumGetUInt32(main_arg));
	worker_slot = &retries_shared->workers[worker_slot_index];
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
	manage_claimed_hook = batch_claimed;
	chains_worker_note_hook = worker_note;

	/*
	 * Is the extension here?  Tell the launcher either way; but a CREATE
	 * EXTENSION that committed after this transaction began, unseen, leaves
	 * the database to be probed again at once (its commit could not, while
	 * this worker probed it).
	 */
	LWLockAcquire(retries_shared->lock, LW_SHARED);
	db = shmem_find_database(MyDatabaseId, false);
	creates = db != NULL ? db->creates : 0;
	LWLockRelease(retries_shared->lock);
	wslot_start_transaction();
	login_forget_own_settings();
	my_extension = wslot_lock_extension();
	handoff_init(my_extension);
	present = OidIsValid(my_extension);
	wslot_commit_transaction();
	LWLockAcquire(retries_shared->lock, LW_EXCLUSIVE);
	db = shmem_find_database(MyDatabaseId, true);
	if (db != NULL && !present && db->creates != creates)
	{
		if (db->state == DB_PROBING)
			shmem_set_db_state(db, DB_UNKNOWN);
	}
	else if (db != NULL)
		shmem_set_db_state(db, present ? DB_ACTIVE : DB_NO_EXTENSION);
	/* started for work that was due when the last worker left (on demand) */
	if (db != NULL && present)
	{
		steps_fire_late_from(db->due_at);
		db->due_at = 0;
	}
	if (retries_shared->launcher_latch)
		SetLatch(retries_shared->launcher_latch);
	LWLockRelease(retries_shared->lock);
	if (!present)
		proc_exit(shmem_exit_code());

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

	if (n > 0 && (gated || gate_touched))
	{
		steps_look_soon();		/* the batch's calls may leave a gate room */
		gated = true;
		gate_touched = false;
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
	needs.look_again_ms = FIRE_CHECK_MS;
	needs.capped_role = turns_capped(&capped_until);
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
	RetriesDatabase *db;

	LWLockAcquire(retries_shared->lock, LW_EXCLUSIVE);
	db = shmem_find_database(MyDatabaseId, false);
	if (db != NULL && worker_slot->slot_no < retries_max_workers &&
		!extension_replaced)
		shmem_set_db_state(db, DB_NO_EXTENSION);
	if (retries_shared->launcher_latch)
		SetLatch(retries_shared->launcher_latch);
	LWLockRelease(retries_shared->lock);
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
	LWLockAcquire(retries_shared->lock, LW_SHARED);
	if (retries_shared->launcher_latch)
		SetLatch(retries_shared->launcher_latch);
	LWLockRelease(retries_shared->lock);
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
			if (!turns_extra_wanted() || turns_idle_in_reserve(ran_at) ||
				leave_idle_extra(ran_at))
				break;
			sleep_ms = Min(sleep_ms, RETRIES_HELD_AFTER_MS);
		}

		/* idle: send whatever statistics are left before sleeping */
		pgstat_report_stat(true);
		if (WaitLatch(MyLatch,
					  WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
					  sleep_ms, PG_WAIT_EXTENSION) & WL_LATCH_SET)
			(void) took_wake_up(true);
		ResetLatch(MyLatch);
	}
	worker_stop();
}
