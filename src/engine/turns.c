/*-------------------------------------------------------------------------
 *
 * turns.c
 *	  Whose calls a worker may claim first: the roles' turns, the last
 *	  free worker of a database, extra and reserved workers, and the
 *	  pool's cap on one role (see "Containment" and "Extra workers" in
 *	  worker.c).
 *
 * What the other workers hold is read from their slots without the lock:
 * a hint for the claims (other_holds).  The pool's cap is checked again,
 * and counted, under the lock when a batch begins (pool_take).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/spin.h"
#include "utils/timestamp.h"

#include "base/base.h"
#include "engine/claim.h"
#include "engine/execute.h"
#include "engine/lone.h"
#include "engine/turns.h"
#include "engine/wslot.h"
#include "shmem/shmem.h"

/* How long no reserved worker goes to an extra that gave one back idle */
#define RESERVE_EXTRA_BACKOFF_MS	10000

/* The role whose due call claim_heads() took last (see claim.c) */
static Oid	last_role = InvalidOid;

/*
 * other_holds -- what holds each other worker of this database that runs a
 * batch, or whose last batch ended at 'recent' or later (0: none counts),
 * into holds[], once per worker; returns how many.  Read without the
 * shared lock (shmem_worker_holds): a hint for the claims.
 *
 * A batch of a role's calls of its own functions (or a superuser's) holds
 * that role.  A batch of calls of another role's functions
 * (execute_foreign_owner) is both roles' doing: the caller chose to call,
 * the owner chose the code, and either can make it slow (mallory's slow
 * function that alice calls; mallory's calls of alice's function that wait
 * for a lock mallory holds).  So it holds neither role's own calls back
 * (running_roles): an extra worker runs them.  It holds back only the
 * batches of the same kind: of the same caller, or of the same owner's
 * code (extra_passes_over), so that neither role can have such batches
 * hold every extra worker too.
 */
static int
other_holds(RetriesHold *holds, TimestampTz recent)
{
	return shmem_worker_holds(worker_slot, MyDatabaseId, recent, holds);
}

/*
 * busy_roles -- the roles that hold all the other workers of this database
 * (running their own calls of their own functions: a batch of calls of
 * another role's functions holds neither role, see other_holds), into
 * roles[]; returns how many (none with one worker: it cannot leave another
 * one free)
 *
 * Read without the locks: a hint for claim_heads(), which passes over such
 * a role while another has due calls, so that one role's long calls never
 * take the last free worker from the others.
 */
static int
busy_roles(Oid *roles)
{
	int			n = 0;
	int			others = retries_max_workers - 1;
	RetriesHold running[RETRIES_MAX_SLOTS];
	int			nrunning;

	if (others < 1)
		return 0;
	nrunning = other_holds(running, 0);
	for (int i = 0; i < nrunning; i++)
	{
		int			count = 0;
		bool		listed = false;

		if (running[i].role != running[i].holder)
			continue;			/* another role's code: see other_holds */
		for (int j = 0; j < nrunning; j++)
			count += running[j].role == running[i].role &&
				running[j].role == running[j].holder;
		for (int j = 0; j < n; j++)
			listed |= roles[j] == running[i].role;
		if (count >= others && !listed)
			roles[n++] = running[i].role;
	}
	return n;
}

/*
 * turns_extra_wanted -- may an extra worker that found nothing to claim stay:
 * does the database still want extras (shmem_extras_wanted)?
 */
bool
turns_extra_wanted(void)
{
	return shmem_db_wants_extras(MyDatabaseId, clock_system_now());
}

/*
 * turns_idle_in_reserve -- an extra worker that runs in a reserved worker
 * (reserve.c) and has run nothing since 'ran_at', RETRIES_HELD_AFTER_MS ago
 * or more, gives the reserved worker back: it exits.  The database wants
 * one (a call waits for a place to run a procedure in, say) that it cannot
 * use, the call's role having one running; no reserved worker goes to this
 * database's extras for RESERVE_EXTRA_BACKOFF_MS.  (A database's own
 * worker gives it back by leave_reserve.)  Reserved workers are few, for
 * the whole cluster, and a runner or another database may be waiting for
 * one.
 */
bool
turns_idle_in_reserve(TimestampTz ran_at)
{
	TimestampTz now = clock_system_now();

	if (!shmem_in_reserve() || !wslot_is_extra() ||
		!TimestampDifferenceExceeds(ran_at, now, RETRIES_HELD_AFTER_MS))
		return false;
	shmem_reserve_extra_backoff(MyDatabaseId,
								TimestampTzPlusMilliseconds(now, RESERVE_EXTRA_BACKOFF_MS));
	return true;
}

/*
 * recent_holds -- other_holds() of the workers that run a batch, or ran the
 * last one idle for less than RETRIES_HELD_AFTER_MS (a role whose calls
 * keep the workers busy leaves them idle for a moment between its batches:
 * an extra worker is not for it)
 */
static int
recent_holds(RetriesHold *holds)
{
	return other_holds(holds, TimestampTzPlusMilliseconds(clock_system_now(),
														  -RETRIES_HELD_AFTER_MS));
}

/*
 * turns_running_roles -- the roles that have a batch of calls of their own code
 * running in another worker of this database, or recently (recent_holds),
 * each once, into roles[]; returns how many.  A batch of calls of another
 * role's functions is not listed (see other_holds): a role whose calls of
 * another role's slow function run, or whose function another role's
 * calls run, is not held back by them.  So two roles that call each
 * other's slow functions hold a worker each way besides their own calls'
 * share (the twenty-ninth hostile review, t/063 2); listing a role for
 * both kinds of batch at once let another role hold its calls back by
 * calling its function while it called a third role's (the thirtieth,
 * t/064 1), the worse of the two.
 */
int
turns_running_roles(Oid *roles)
{
	RetriesHold all[RETRIES_MAX_SLOTS];
	int			nall = recent_holds(all);
	int			n = 0;

	for (int i = 0; i < nall; i++)
	{
		bool		listed = false;

		if (all[i].role != all[i].holder)
			continue;
		for (int j = 0; j < n; j++)
			listed |= roles[j] == all[i].role;
		if (!listed)
			roles[n++] = all[i].role;
	}
	return n;
}

/*
 * reserve_roles -- the roles whose calls run in another reserved worker
 * (reserve.c), of any database, into roles[]; returns how many.  Reserved
 * workers are few, for the whole cluster, there for when parallel queries
 * or other extensions take every other background worker: a worker that
 * runs in one takes no call of a role that holds another already, so that
 * one role's calls in many databases cannot take them all (the twenty-fifth
 * hostile review, t/059: the first workers of two databases of mallory's
 * took both, and alice's database had none); idle, it gives its reserved
 * worker back (idle_in_reserve).
 */
static int
reserve_roles(Oid *roles)
{
	return shmem_reserve_roles(roles);
}

/* When a worker that found only calls of a capped role looks again */
#define POOL_CAP_RECHECK_MS		1000

/*
 * pool_roles -- the roles that may not begin one more batch now, into
 * roles[]; returns how many.  The big roles of the pool
 * (retries.max_cluster_workers), each with a quarter of it or more, hold
 * all places but one together, in every database: a worker takes none of
 * their calls (turns_claim_first), whatever else is due or not, while they
 * do.  So one role's long calls in many databases (its own databases, for
 * a role that may create them), or a few roles' together, leave places of
 * the pool to the others, and another role's call made in any database
 * gets one within about a second (the twenty-ninth hostile review, t/063
 * 3: mallory's long calls in two databases of hers took the whole pool,
 * and alice's call waited for them to end); shmem/shmem.c, pool_refuses,
 * says who counts.  A superuser's calls are the administrator's, and not
 * counted; nor is anything in a pool of two or less, where the cap would
 * leave every role one batch at a time.
 */
static int
pool_roles(Oid *roles)
{
	if (shmem_pool_cap() == 0)
		return 0;
	return shmem_pool_roles(roles);
}

/*
 * Whether the last claim found only calls of roles that pool_roles capped:
 * they are due, and the worker looks again POOL_CAP_RECHECK_MS later (if
 * it leaves meanwhile, its database is due again then)
 */
static bool pool_capped = false;
static Oid	pool_capped_role = InvalidOid;
static Oid	pool_capped_holder = InvalidOid;	/* ... of whose code */
static TimestampTz pool_capped_until = 0;	/* when a call not capped may be
											 * due */

/*
 * The calls of other roles' code that the pool's cap held back, whose they
 * are and whose code (held_ids, held_roles, held_holders; held_n of them):
 * a claim leaves them out while the cap would still hold them back
 * (held_keep), so that a role's calls of a capped role's functions, due
 * first, do not hold back its other calls (held_claim).  At most
 * POOL_HELD_MAX; past that, the claims stop at them, and the worker looks
 * again POOL_CAP_RECHECK_MS later.
 */
#define POOL_HELD_MAX			256
/* How many such calls one claim passes over at most */
#define POOL_HELD_PER_CLAIM		16

static int64 held_ids[POOL_HELD_MAX];
static Oid	held_roles[POOL_HELD_MAX];
static Oid	held_holders[POOL_HELD_MAX];
static int	held_n = 0;

/*
 * pool_take -- may this worker begin a batch that begins with 'call',
 * which it has claimed?  Not if the cap refuses one more batch of the
 * call's role running the code of its holder (*holder: the role, or the
 * owner of the other role's function it calls, execute_foreign_owner),
 * superusers' calls aside: checked and counted at once with the other
 * workers' (shmem_pool_take), since pool_roles' look before the claim sees
 * no claim made at the same instant.  Sets pool_capped if not.
 */
static bool
pool_take(const RetriesCall *call, Oid *holder)
{
	*holder = execute_foreign_owner(call);
	if (!OidIsValid(*holder))
		*holder = call->role;
	if (shmem_pool_cap() == 0 || superuser_arg(call->role))
		return true;
	if (shmem_pool_take(worker_slot, call->role, *holder, clock_system_now()))
		return true;
	/* the first call held back, if several: the database's mark (leave.c) */
	if (!pool_capped)
	{
		pool_capped_role = call->role;
		pool_capped_holder = *holder;
	}
	pool_capped = true;
	return false;
}

/*
 * held_keep -- keep, of the calls held back (held_ids), those that the
 * pool's cap would hold back still (shmem_pool_refused)
 */
static void
held_keep(void)
{
	bool		refused[POOL_HELD_MAX];
	int			kept = 0;

	if (held_n == 0)
		return;
	shmem_pool_refused(held_roles, held_holders, held_n, refused);
	for (int i = 0; i < held_n; i++)
	{
		if (!refused[i])
			continue;
		held_ids[kept] = held_ids[i];
		held_roles[kept] = held_roles[i];
		held_holders[kept++] = held_holders[i];
	}
	held_n = kept;
}

/*
 * held_claim -- the pool's cap refused the batch of 'call', of another
 * role's code ('holder'): leave it out of the claims while the cap would
 * still refuse it, and claim again (true), unless it is the role's own
 * code (the role is capped: its calls wait), or the list is full, or this
 * claim passed over POOL_HELD_PER_CLAIM such calls already
 */
static bool
held_claim(const RetriesCall *call, Oid holder, int tries)
{
	if (holder == call->role || held_n >= POOL_HELD_MAX || tries >= POOL_HELD_PER_CLAIM)
		return false;
	held_ids[held_n] = call->id;
	held_roles[held_n] = call->role;
	held_holders[held_n++] = holder;
	return true;
}

/*
 * claim_skips -- the calls the claims leave out: those this worker leaves
 * alone (lone_skipped) and those held back by the cap (held_ids); how many
 * into *n
 */
static const int64 *
claim_skips(int *n)
{
	int			nlone;
	const int64 *lone = lone_skipped(&nlone);
	int64	   *all;

	*n = nlone + held_n;
	if (held_n == 0)
		return lone;
	all = palloc(sizeof(int64) * *n);
	memcpy(all, lone, sizeof(int64) * nlone);
	memcpy(all + nlone, held_ids, sizeof(int64) * held_n);
	return all;
}

/*
 * Whether the last claim in a reserved worker passed over roles whose
 * calls run in other reserved workers (reserve_roles): their calls may be
 * due, and the database with them, once this worker gives the reserve back
 */
static bool reserve_passed_over = false;

/*
 * claim_head -- claim the first call of a batch, as turns_claim_first
 * says, avoiding the 'ncapped' roles of 'capped' (pool_roles); returns 1,
 * or 0 if none is due that may be claimed
 */
static int
claim_head(RetriesCall *calls, TimestampTz now, const Oid *capped, int ncapped,
		   bool *below_zero)
{
	Oid			avoid[RETRIES_MAX_SLOTS * 3];
	int			navoid;
	int			nskipped;
	const int64 *skipped = claim_skips(&nskipped);
	int			n;

	if (wslot_is_extra() || shmem_in_reserve())
	{
		navoid = wslot_is_extra() ? turns_running_roles(avoid) : reserve_roles(avoid);
		if (!wslot_is_extra())
			reserve_passed_over = navoid > 0;
		memcpy(avoid + navoid, capped, sizeof(Oid) * ncapped);
		return claim_heads(calls, now, &last_role, avoid, navoid + ncapped,
						   skipped, nskipped, true, below_zero);
	}
	navoid = busy_roles(avoid);
	memcpy(avoid + navoid, capped, sizeof(Oid) * ncapped);
	n = claim_heads(calls, now, &last_role, avoid, navoid + ncapped,
					skipped, nskipped, false, below_zero);
	if (n == 0)
		n = claim_of_role(calls, now, InvalidOid, skipped, nskipped, below_zero);
	return n;
}

/*
 * turns_claim_first -- claim the first call of a batch, which makes it a batch
 * of that call's role (see claim.c); returns 1, or 0 if no call is due
 *
 * That call is: the one the last batch left to run alone (its last
 * attempt was interrupted), if it is still due; else the earliest due call
 * of the next role in turn (claim_heads; from version 1.7, a role with
 * only calls below 0 due has its turn too, *below_zero set: the batch is
 * of such calls); else, when each of those is locked by another worker (or
 * the database is at 1.1, without the index of the turns), the first due
 * call that can be claimed, of a priority above 0, then of 0; else, when
 * no call of priority 0 or above is due, one below 0 (*below_zero set).
 * An extra worker takes only the head of a role that has no call running
 * in another worker (see "Extra workers"); a worker in a reserved worker,
 * only that of a role whose calls run in no other reserved worker
 * (reserve_roles).  No worker begins a batch that the pool's cap refuses
 * (pool_roles, pool_take; pool_capped is set then): of a role whose own
 * batches hold a quarter of the pool while the big ones hold all places
 * but one, or of its calls of other roles' code, which the claims then pass
 * over while the cap holds (held_claim).
 */
int
turns_claim_first(RetriesCall *calls, TimestampTz now, bool *below_zero)
{
	Oid			capped[RETRIES_MAX_SLOTS];
	int			ncapped;

	*below_zero = false;
	pool_capped = false;
	if (lone_next_pending())
	{
		int64		id = lone_next_take();

		if (claim_ids(calls, &id, 1, now) == 1)
			return 1;
	}
	ncapped = pool_roles(capped);
	held_keep();

	/*
	 * Calls the cap still holds back are due: a claim that finds nothing else
	 * finds only those, as if it had claimed them again (the worker looks
	 * again POOL_CAP_RECHECK_MS later, and its database is marked so as it
	 * leaves; else, its worker gone, no other came for them once the cap let
	 * them go: the forty-ninth hostile review, t/078 4)
	 */
	if (held_n > 0)
	{
		pool_capped = true;
		pool_capped_role = held_roles[0];
		pool_capped_holder = held_holders[0];
	}
	for (int tries = 0;; tries++)
	{
		int			n = claim_head(calls, now, capped, ncapped, below_zero);
		Oid			holder;

		/*
		 * A capped role's call, claimed when nothing else was, or by a worker
		 * that another beat to the role's last place: left claimed until the
		 * empty batch commits, and looked at again later (pool_take counts
		 * the role's batches anew, under the lock; pool_capped stays set if
		 * nothing else is claimed); a call of another role's code is passed
		 * over (held_claim)
		 */
		if (n == 0 || pool_take(&calls[0], &holder))
		{
			if (n > 0)
				pool_capped = false;
			return n;
		}
		if (!held_claim(&calls[0], holder, tries))
			return 0;
	}
}

/*
 * turns_extra_passes_over -- in an extra worker, is a batch of 'role''s
 * calls that run the code of 'holder' (the role, or the owner of another
 * role's functions) of the kind that another worker of the database runs
 * (recent_holds)?  A batch of a role's own calls, if another runs one of
 * that role's; a batch of calls of another role's functions, if another
 * runs calls of that role's functions, or calls of other roles' functions
 * by the same caller (a call of mallory's slow function while another
 * worker runs one; mallory's calls of alice's function that wait for her
 * lock).  Its first call is then left to the database's own workers
 * (worker.c).  Otherwise either role of such calls could have them hold
 * every extra worker too.
 */
bool
turns_extra_passes_over(Oid role, Oid holder)
{
	RetriesHold holds[RETRIES_MAX_SLOTS];
	int			n = recent_holds(holds);
	bool		own = holder == role;

	for (int i = 0; i < n; i++)
	{
		bool		same;

		if (own)
			same = holds[i].role == holds[i].holder && holds[i].role == role;
		else
			same = holds[i].role != holds[i].holder &&
				(holds[i].holder == holder || holds[i].role == role);
		if (same)
			return true;
	}
	return false;
}

/*
 * turns_reserve_passes_over -- in a reserved worker, is a batch of
 * 'role''s calls of another role's code ('holder') that runs in another
 * reserved worker already (reserve_roles)?  Its first call is then left to
 * other workers, as an extra does (turns_extra_passes_over): the reserved
 * workers avoid the roles whose code runs in the others, and so must a
 * batch of that code made by another role's calls.
 */
bool
turns_reserve_passes_over(Oid role, Oid holder)
{
	Oid			roles[RETRIES_MAX_SLOTS];
	int			n = reserve_roles(roles);

	if (holder == role)
		return false;
	for (int i = 0; i < n; i++)
	{
		if (roles[i] == holder)
			return true;
	}
	return false;
}

/*
 * turns_capped_due -- after a claim at 'claimed_at' that found nothing,
 * *due being when the next call falls due (0: none): if the claim found
 * only calls of capped roles, look again POOL_CAP_RECHECK_MS later at the
 * latest, and note when a call not capped may be due
 */
void
turns_capped_due(TimestampTz claimed_at, TimestampTz *due)
{
	TimestampTz again;

	if (!pool_capped)
		return;
	again = TimestampTzPlusMilliseconds(claimed_at, POOL_CAP_RECHECK_MS);
	pool_capped_until = *due;
	*due = *due == 0 ? again : Min(*due, again);
}

/*
 * turns_capped -- did the last claim find only calls that the pool's cap
 * held back?  Then whose (returned) of whose code (*holder), and until
 * when its database is due for other work (*until, 0 if not known);
 * InvalidOid if not
 */
Oid
turns_capped(TimestampTz *until, Oid *holder)
{
	*until = pool_capped_until;
	*holder = pool_capped_holder;
	return pool_capped ? pool_capped_role : InvalidOid;
}

/*
 * turns_reserve_passed_over -- did the last claim in a reserved worker pass
 * over roles whose calls run in other reserved workers?
 */
bool
turns_reserve_passed_over(void)
{
	return reserve_passed_over;
}
