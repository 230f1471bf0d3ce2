/*-------------------------------------------------------------------------
 *
 * batch.c
 *	  A worker's batch: one transaction of one role's calls, claimed, each
 *	  checked at its gate and run, and committed; then the hand-off of a
 *	  procedure's or command's call to its runner.
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
 * A call may run for minutes, and the calls claimed after it stay locked
 * until it ends, out of the other workers' reach.  So a batch claims in
 * steps: 1 call first, then, each time it has run all it claimed, as many
 * again: a slow call holds back at most as many claimed calls as ran
 * before it in the same batch, and none when it is the first.
 *
 * What the batch's calls may run beside each other (one role's; code of
 * another role only with calls of the same code; a call whose last attempt
 * was interrupted alone) is worker.c's "Containment"; whose calls the batch
 * claims first is turns.c's, what is left alone after an error lone.c's.
 *
 * The batch open now is known to the code it runs only through
 * manage_claimed_hook (batch_claimed): a call's code may not cancel or
 * reschedule a call the batch holds (manage.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/lmgr.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "api/api.h"
#include "base/base.h"
#include "engine/batch.h"
#include "engine/claim.h"
#include "engine/execute.h"
#include "engine/handoff.h"
#include "engine/ledger.h"
#include "engine/lone.h"
#include "engine/outcome.h"
#include "engine/sandbox.h"
#include "engine/steps.h"
#include "engine/turns.h"
#include "engine/wslot.h"
#include "flow/flow.h"
#include "shmem/shmem.h"
#include "tables/tables.h"

/* How often to look whether a restore of the database is over */
#define RESTORE_CHECK_MS		1000

/* The extension the worker serves (its OID), as batch_init() was given it */
static Oid	served = InvalidOid;

/* Set when the batch found the extension dropped and created again */
static bool extension_replaced = false;

/*
 * Whether the batch's transaction is committing, and the role whose calls
 * the batch holds (see batch_after_error)
 */
static bool committing_batch = false;
static Oid	batch_role = InvalidOid;

/*
 * Whether the last batch held a call or ran an attempt of a limited
 * function: then its end may leave a gate room to release more
 */
static bool gate_touched = false;

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
		calls_hold_at_gate(call->id, gate);
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
	if (extoid != served)
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
	b->gates_generation = shmem_gates_generation();
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
	if (ledger_take_interrupted(served, call->id, call->attempts + 1, &hook,
								&started, &stopped))
	{
		execute_interrupted(call, call->attempts + 1, hook, started, stopped);
		return false;
	}
	if (shmem_cancel_waiting(call->id))
		return false;
	if (call->windowed && !flow_key_window_allows(call->id))
		return false;
	if (shmem_gates_generation() != b->gates_generation)
	{
		b->gates_generation = shmem_gates_generation();
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
 * batch_run -- one batch transaction; returns the number of calls claimed
 * and sets *due to when the next call is due, or to 0 if more may be due
 * now (a full batch, or one cut short) or none is scheduled at all
 *
 * Returns -1 if the extension is no longer installed, or not the one the
 * worker started with (extension_replaced tells which).
 */
int
batch_run(TimestampTz *due)
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
			shmem_wake_workers(MyDatabaseId, WAKE_CALLS | WAKE_FIRE, InvalidOid);
			proc_exit(shmem_exit_code());
		}
	}
	lone_batch_ran(b.role, b.n);
	return b.n;
}


/*
 * batch_init -- the worker serves 'extension': its batches run its calls,
 * and the code they run asks batch_claimed() about the calls they hold
 */
void
batch_init(Oid extension)
{
	served = extension;
	manage_claimed_hook = batch_claimed;
}

/*
 * batch_extension_replaced -- did a batch find the extension dropped and
 * created again (not only dropped)?
 */
bool
batch_extension_replaced(void)
{
	return extension_replaced;
}

/*
 * batch_after_error -- an error escaped the batch, and its transaction is
 * rolled back: no batch is open any more.  Returns the role whose calls
 * the batch held if the error was raised at its commit (a passing error
 * of the transaction: lone_after_error), else InvalidOid.
 */
Oid
batch_after_error(void)
{
	Oid			role = committing_batch ? batch_role : InvalidOid;

	committing_batch = false;
	open_batch_now = NULL;
	return role;
}

/*
 * batch_take_gate_touched -- did the batches since the last call hold a
 * call, or run an attempt, of a limited or paused function?
 */
bool
batch_take_gate_touched(void)
{
	bool		touched = gate_touched;

	gate_touched = false;
	return touched;
}
