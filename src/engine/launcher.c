/*-------------------------------------------------------------------------
 *
 * launcher.c
 *	  The launcher: one background worker per cluster that starts and stops
 *	  the per-database workers.
 *
 * Registered from _PG_init to start once recovery has finished, so no
 * worker ever runs on a standby and all start after promotion.  It connects
 * to no database, only reading pg_database: each database that allows
 * connections and is not a template is probed by starting one worker,
 * which looks for the extension and reports back through shared memory.
 * No worker is ever started in a database that the launcher's last read
 * of pg_database did not list so (RetriesDatabase.listed): the commands
 * that create, drop or alter a database, and CREATE EXTENSION, have it
 * read pg_database again as they commit, so a template (template1 with
 * the extension in it) or a dropped database never gets one, and a new
 * database gets its workers at once.
 * Databases with the extension get retries.max_workers workers; the others
 * are left alone until CREATE EXTENSION wakes the launcher at commit.
 * A database whose workers were stopped (DROP DATABASE, DROP EXTENSION)
 * stays paused for a while, so that the launcher does not race the command.
 *
 * The launcher survives anything that happens to it: SIGTERM (or an error)
 * ends it with exit code 1, and the postmaster starts it again a second
 * later.  Its workers do not depend on it: each frees its own slot when it
 * exits.  A new launcher adopts the slots it finds in use: a worker that
 * has started (its pid is there) frees its slot itself; one that never
 * started is given up after ADOPT_GRACE_MS, and its generation number
 * tells it so should it start after all.
 *
 * It sleeps until a worker stops (the postmaster sets its latch), someone
 * wakes it (CREATE EXTENSION, a stop that ended), or the next thing it has
 * to do is due; at the latest after LAUNCHER_NAPTIME_MS, to look for new
 * databases.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/pg_database.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "storage/spin.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "tcop/tcopprot.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "base/base.h"
#include "engine/engine.h"
#include "engine/revisits.h"
#include "shmem/shmem.h"

/* How often to look for new databases in pg_database */
#define LAUNCHER_NAPTIME_MS		5000
/* How often to look again at a database that had no extension */
#define REPROBE_MS				(5 * 60 * 1000)
/* How often at most to log that no background worker could be had */
#define COMPLAINT_INTERVAL_MS	(60 * 1000)
/* How long an adopted slot whose worker never started is kept */
#define ADOPT_GRACE_MS			10000
/* How often the launcher looks again at a database whose work is capped */
#define CAPPED_RECHECK_MS		250
/* How soon a database held back by the cap, still so when looked at, is looked at again */
#define CAPPED_REVISIT_MS		16000
/* How long a database's workers run batches back to back before one more */
#define MORE_AFTER_MS			200

/* The workers this launcher started, by slot */
typedef struct Launched
{
	BackgroundWorkerHandle *handle; /* NULL: not started by this launcher */
	Oid			dboid;
	int			slot_no;
	uint32		generation;
} Launched;

static Launched launched[RETRIES_MAX_SLOTS];

/* Where a database comes in the order of read_databases */
typedef enum DatabaseRank
{
	RANK_SERVED,				/* has an entry, and something to do */
	RANK_NEW,					/* not looked at yet */
	RANK_QUIET,					/* has an entry: found without the extension,
								 * or with nothing to do */
	RANK_QUIET_UNTRACKED		/* looked at, and gave its entry up since */
} DatabaseRank;

/* A set of databases (sorted, in TopMemoryContext) */
typedef struct OidSet
{
	Oid		   *oids;
	int			n;
} OidSet;

/*
 * The databases this launcher has looked at (each had an entry at a read
 * of pg_database, or its work is kept in revisits.c), and all the last
 * read found
 */
static OidSet known;
static OidSet listed;

/*
 * Workers of the pool in use (all but those in runner places), counted at
 * the start of each round of manage_databases and as it starts more
 */
static int	pool_used = 0;

/*
 * Workers that may run beyond retries.max_cluster_workers now, for the
 * roles other than the one whose batches hold the most of the pool
 * (pool_extra), counted at each pass of the launcher
 */
static int	pool_extra_now = 0;

PGDLLEXPORT void retries_launcher_main(Datum main_arg);

/*
 * launcher_register -- register the launcher (from _PG_init)
 */
void
launcher_register(void)
{
	BackgroundWorker worker;

	memset(&worker, 0, sizeof(worker));
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker.bgw_restart_time = 1;
	snprintf(worker.bgw_library_name, BGW_MAXLEN, "retries");
	snprintf(worker.bgw_function_name, BGW_MAXLEN, "retries_launcher_main");
	snprintf(worker.bgw_name, BGW_MAXLEN, "retries launcher");
	snprintf(worker.bgw_type, BGW_MAXLEN, "retries launcher");
	RegisterBackgroundWorker(&worker);
}

/*
 * start_worker -- start the worker for slot 'slot_no' of a database; in a
 * reserved worker if no background worker slot is free and it is an extra
 * worker or, 'first', one the database needs: it has none (with workers on
 * demand, a parallel query that took every slot kept a database whose
 * workers had left from getting one: the twenty-fourth hostile review,
 * t/058), or each it has runs a batch (t/060)
 *
 * Returns false if no slot or no background worker could be had (the
 * launcher tries again later, and says so in the log now and then).
 * Caller holds the lock exclusively.
 */
static bool
start_worker(Oid dboid, int slot_no, bool first)
{
	static TimestampTz last_complaint = 0;
	BackgroundWorker worker;
	RetriesWorker *w;
	RetriesDatabase *db;
	int			slot = -1;
	uint32		generation;

	for (int i = 0; i < RETRIES_MAX_SLOTS; i++)
	{
		if (!shmem_worker_slot(i)->in_use && launched[i].handle == NULL)
		{
			slot = i;
			break;
		}
	}
	if (slot < 0)
	{
		if (TimestampDifferenceExceeds(last_complaint, clock_system_now(),
									   COMPLAINT_INTERVAL_MS))
		{
			ereport(LOG,
					(errmsg("retries: all %d worker slots are in use, database %u gets no worker",
							RETRIES_MAX_SLOTS, dboid),
					 errhint("Lower retries.max_workers, or have fewer databases with the extension.")));
			last_complaint = clock_system_now();
		}
		return false;
	}
	generation = shmem_next_generation();

	memset(&worker, 0, sizeof(worker));
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker.bgw_restart_time = BGW_NEVER_RESTART;
	worker.bgw_main_arg = UInt32GetDatum(RETRIES_WORKER_ARG(slot, generation));
	worker.bgw_notify_pid = MyProcPid;
	snprintf(worker.bgw_library_name, BGW_MAXLEN, "retries");
	snprintf(worker.bgw_function_name, BGW_MAXLEN, "retries_worker_main");
	snprintf(worker.bgw_name, BGW_MAXLEN, "retries worker %d for database %u",
			 slot_no, dboid);
	/* an extra's own type: pg_stat_activity tells them apart */
	snprintf(worker.bgw_type, BGW_MAXLEN, "%s",
			 slot_no < retries_max_workers ? "retries worker" : "retries extra worker");

	/*
	 * Fill the slot in before the worker exists: the postmaster may start it
	 * before RegisterDynamicBackgroundWorker returns here, and it reads its
	 * database from the slot.
	 */
	w = shmem_slot_assign(slot, dboid, slot_no, generation, clock_system_now());

	if (!RegisterDynamicBackgroundWorker(&worker, &launched[slot].handle))
	{
		int			index;
		uint32		reserve_generation;

		/* no slot free: a reserved worker's, if one is (reserve.c) */
		launched[slot].handle = NULL;
		db = shmem_find_database(dboid, false);
		if ((first || slot_no >= retries_max_workers) &&
			(db == NULL || clock_system_now() >= db->reserve_extra_after) &&
			shmem_reserve_give(RESERVE_WORKER, worker.bgw_main_arg, InvalidOid, &index,
							   &reserve_generation))
			return true;		/* it frees its slot itself, as an adopted one */
		w->in_use = false;
		if (TimestampDifferenceExceeds(last_complaint, clock_system_now(),
									   COMPLAINT_INTERVAL_MS))
		{
			ereport(LOG,
					(errmsg("retries: could not start a worker for database %u", dboid),
					 errhint("Raise max_worker_processes to at least 1 + retries.reserved_workers + (retries.max_workers + retries.max_extra_workers) times the number of databases with the extension.")));
			last_complaint = clock_system_now();
		}
		return false;
	}
	launched[slot].dboid = dboid;
	launched[slot].slot_no = slot_no;
	launched[slot].generation = generation;
	pool_used++;
	return true;
}

/*
 * pool_room -- may one more worker start (retries.max_cluster_workers)?
 * If not, database db, with work and no worker, waits for one from 'now'
 * (the longest waiting are served first: manage_databases).  A database
 * that has a worker gets no second while others wait for their first.
 */
static bool
pool_room(RetriesDatabase *db, bool has_worker, TimestampTz now)
{
	if (has_worker && shmem_pool_waiting() > 0)
		return false;
	if (pool_used < retries_max_cluster_workers + pool_extra_now)
		return true;
	if (!has_worker && db->waiting_since == 0)
		db->waiting_since = now;
	return false;
}

/*
 * reap_workers -- forget the workers that have exited, freeing the slots of
 * those that could not free them themselves (they died before they took
 * it, or never started); a probe that exited without saying what it found
 * leaves its database to be probed again.  Returns whether any worker
 * exited.  Caller holds the lock exclusively.
 */
static bool
reap_workers(TimestampTz now)
{
	bool		any = false;

	for (int i = 0; i < RETRIES_MAX_SLOTS; i++)
	{
		RetriesWorker *w = shmem_worker_slot(i);
		RetriesDatabase *db;
		pid_t		pid;

		if (launched[i].handle == NULL)
		{
			/* adopted from an earlier launcher, and never started */
			if (w->in_use && w->pid == 0 &&
				TimestampDifferenceExceeds(w->assigned_at, now, ADOPT_GRACE_MS))
				w->in_use = false;
			continue;
		}
		if (GetBackgroundWorkerPid(launched[i].handle, &pid) != BGWH_STOPPED)
			continue;

		pfree(launched[i].handle);
		launched[i].handle = NULL;
		if (w->in_use && w->generation == launched[i].generation)
			w->in_use = false;
		any = true;

		db = shmem_find_database(launched[i].dboid, false);
		if (db != NULL && db->state == DB_PROBING)
			shmem_set_db_state(db, DB_UNKNOWN);
		/* not after one that left idle, or a runner place: nothing failed */
		if (db != NULL && !w->leaving && !RETRIES_IS_RUNNER_SLOT(w->slot_no))
			db->next_start = TimestampTzPlusMilliseconds(now, RESTART_DELAY_MS);
	}
	return any;
}

/*
 * stop_slot -- ask a worker to exit; caller holds the lock.  Its attempt in
 * flight, if any, does not use up one of its call's (execute_interrupted):
 * the call did nothing to stop it.
 */
static void
stop_slot(int i)
{
	RetriesWorker *w = shmem_worker_slot(i);

	w->stopped = true;
	if (launched[i].handle != NULL)
		TerminateBackgroundWorker(launched[i].handle);
	else if (w->pid != 0)
		kill(w->pid, SIGTERM);	/* adopted */
}

/*
 * start_extra -- start an extra worker in database db if it wants extras
 * (its workers, or their places for runners, held by long batches:
 * worker.c, "Extra workers"), the extras it has are all held too, and it
 * has fewer than retries.max_extra_workers; 'have' says
 * which slot_nos it has.  Not while its last extra left with nothing due
 * and no commit woke it since, before its next call or firing is due, or
 * RETRIES_EXTRA_IDLE_MS on (extra_idle_until): another would find nothing
 * to run either, leave, and take a place of the pool from the databases
 * with work due, a second at a time (a role's long calls in eight
 * databases at the pool's cap started four extras a second there, and
 * alice's call, due in a database whose two workers another role's calls
 * held, waited minutes for one: t/078_review_41.pl).  Returns when to
 * look again: when a worker busy now will count as held, or another may
 * start, or 0 if neither.  Caller holds the lock.
 */
static TimestampTz
start_extra(RetriesDatabase *db, const bool *have, TimestampTz now)
{
	RetriesHeld held;
	int			base = Min(retries_max_workers, RETRIES_MAX_SLOTS);
	int			top = Min(base + retries_max_extra_workers, RETRIES_MAX_SLOTS);
	TimestampTz ahead = TimestampTzPlusMilliseconds(db->extra_idle_until, -START_AHEAD_MS);

	if (!shmem_extras_wanted(db->dboid, base, now, &held) ||
		held.extras_held < held.extras)
		return held.next;
	if (db->extra_idle_until != 0 && now < ahead)
		return ahead;
	for (int n = base; n < top; n++)
	{
		if (have[n])
			continue;
		/* held workers wait for an extra as a database waits for its first */
		if (!pool_room(db, false, now))
			return 0;
		if (!start_worker(db->dboid, n, false))
			return TimestampTzPlusMilliseconds(now, RESTART_DELAY_MS);
		db->extra_idle_until = 0;
		return held.next;
	}
	return held.next;
}

/*
 * capped_idle -- database 'db', whose due calls the pool's cap still holds
 * back (still_capped), was looked at by the launcher itself
 * (revisits_wake_due): it stays idle, its entry free for another
 * database, its look kept for CAPPED_REVISIT_MS on
 * (revisits_note_far_due), while the launcher goes on checking the cap as
 * long as it keeps the entry.  (A worker started at each such
 * look, every 4 s in each database: the forty-first hostile review, t/074
 * 3.)  Caller holds the lock.
 */
static void
capped_idle(RetriesDatabase *db, TimestampTz now)
{
	if (db->idle)
		return;
	db->idle = true;
	db->far_due = TimestampTzPlusMilliseconds(now, CAPPED_REVISIT_MS);
	db->far_look = true;
	db->far_noted = false;
}

/*
 * still_capped -- is the work due in database db, which its last worker
 * left because it was all of one role's calls of one role's code that the
 * pool's cap held back (leave.c; turns.c, pool_take), still held back:
 * such a batch may still not begin (shmem_pool_refuses: the big ones hold
 * all places of the pool but one), and nothing
 * else of the database's (a firing, a call of any role due later) is due
 * yet?  Then no worker starts for it, and the last place stays the other
 * roles' (the thirtieth hostile review, t/064 7: a worker a second in each
 * of such databases kept it from them).  If not, the mark is cleared.
 * Caller holds the lock.
 */
static bool
still_capped(RetriesDatabase *db, TimestampTz now)
{
	int			cap = shmem_pool_cap();

	if (!OidIsValid(db->capped_role))
		return false;
	if (cap > 0 &&
		(db->capped_until == 0 ||
		 now < TimestampTzPlusMilliseconds(db->capped_until, -START_AHEAD_MS)) &&
		shmem_pool_refuses(db->capped_role, db->capped_holder))
		return true;
	db->capped_role = InvalidOid;
	return false;
}

/*
 * manage_database -- start or stop workers of one database as its state
 * asks; returns when it next needs looking at, or 0 if only when something
 * happens.  Caller holds the lock exclusively.
 */
static TimestampTz
manage_database(RetriesDatabase *db, TimestampTz now)
{
	bool		have[RETRIES_MAX_SLOTS] = {false};
	int			wanted;
	int			nbase = 0;
	bool		held = true;	/* each base worker it has runs a batch */
	TimestampTz busy_from = 0;	/* ... the last of them back to back since */
	bool		needy;
	bool		due;

	for (int i = 0; i < RETRIES_MAX_SLOTS; i++)
	{
		RetriesWorker *w = shmem_worker_slot(i);

		if (w->in_use && w->dboid == db->dboid && !w->leaving &&
			w->slot_no < retries_max_workers)
		{
			bool		running;

			busy_from = Max(busy_from, shmem_slot_working_since(w, &running));
			held &= running;
		}

		/* a worker that freed its slot is still there until reaped */
		if (!w->in_use && launched[i].handle != NULL &&
			launched[i].dboid == db->dboid)
			have[launched[i].slot_no] = true;
		if (!w->in_use || w->dboid != db->dboid)
			continue;
		/* one that moves to a runner place has its old one until it is done */
		if (w->moved_from >= 0)
			have[w->moved_from] = true;
		/* paused, or more workers than now wanted: stop them */
		if (now < db->paused_until || db->state == DB_NO_EXTENSION ||
			(db->state == DB_ACTIVE && !RETRIES_IS_RUNNER_SLOT(w->slot_no) &&
			 w->slot_no >= retries_max_workers + retries_max_extra_workers))
			stop_slot(i);
		else if (w->slot_no < RETRIES_MAX_SLOTS)
			have[w->slot_no] = true;
	}

	if (now < db->paused_until)
		return db->paused_until;
	/* not seen in pg_database as a database to serve (yet): no worker */
	if (!db->listed)
		return 0;
	if (now < db->next_start && db->state != DB_NO_EXTENSION)
		return db->next_start;

	switch (db->state)
	{
		case DB_UNKNOWN:
			if (!have[0] && !pool_room(db, false, now))
				return 0;
			if (!have[0] && start_worker(db->dboid, 0, true))
			{
				db->waiting_since = 0;
				shmem_set_db_state(db, DB_PROBING);
			}
			else if (!have[0])
			{
				if (db->waiting_since == 0)
					db->waiting_since = now;
				return TimestampTzPlusMilliseconds(now, RESTART_DELAY_MS);
			}
			break;
		case DB_ACTIVE:

			/*
			 * On demand (worker.c, "Workers on demand"): with no worker
			 * wanted, one when a commit woke it or its work is due; more once
			 * it finds itself busy (note_all_busy), so that a visit of a
			 * database among many due at once (a schedule every minute in
			 * each) starts no second worker that finds nothing to do
			 */
			for (int n = 0; n < retries_max_workers && n < RETRIES_MAX_SLOTS; n++)
				nbase += have[n];
			due = db->due_at != 0 &&
				now >= TimestampTzPlusMilliseconds(db->due_at, -START_AHEAD_MS);

			/*
			 * A commit that made only calls of a role whose own code the cap
			 * holds back: those are held back too (the forty-fifth hostile
			 * review: a worker started at each of her commits took the other
			 * roles' place).  Where the calls held back were of another
			 * role's code, the role's commit may have made calls of its own,
			 * which the cap does not hold back: a worker comes (the
			 * forty-ninth, t/078 6: bob's own calls waited for as long as his
			 * one call of alice's code was held).
			 */
			if (db->woken && (db->woken_for != db->capped_role ||
							  db->capped_holder != db->capped_role))
				db->capped_role = InvalidOid;
			else if ((db->woken || due) && db->wanted == 0 && still_capped(db, now))
			{
				db->woken = false;
				capped_idle(db, now);
				return TimestampTzPlusMilliseconds(now, CAPPED_RECHECK_MS);
			}
			if (db->woken || (db->wanted == 0 && due))
			{
				db->wanted = Max(db->wanted, 1);
				db->woken = false;
			}

			/*
			 * Work due by time in a database whose every worker is held,
			 * which its free worker left while the pool was contended
			 * (worker.c, leave_database): one more (the twenty-seventh
			 * hostile review, t/061 3: alice's schedule waited for mallory's
			 * held call)
			 */
			else if (due && held && nbase > 0 && nbase >= db->wanted)
				db->wanted = Min(nbase + 1, retries_max_workers);
			if (db->wanted == 0)
			{
				db->waiting_since = 0;
				return db->due_at != 0 ?
					TimestampTzPlusMilliseconds(db->due_at, -START_AHEAD_MS) : 0;
			}

			/*
			 * One worker at a time, and then the next database: when there
			 * are not background workers enough for all, each database gets
			 * its share, not the first ones all they want
			 */
			wanted = Min(Min(retries_max_workers, db->wanted), RETRIES_MAX_SLOTS);

			/*
			 * A database whose every worker runs a batch (a long call) is as
			 * needy as one with none: it waits for the pool in turn, and may
			 * take a reserved worker (the twenty-sixth hostile review, t/060
			 * 4 and 6)
			 */
			needy = nbase == 0 || held;

			/*
			 * A second worker only once the first has run batches back to
			 * back for MORE_AFTER_MS: one started as each short batch began
			 * found nothing to do, and left (the forty-third hostile review:
			 * 7 workers started a second for 4 calls in 13 databases, each
			 * with a call every 3 s); timed from the first batch, a backlog
			 * of short calls, each batch 50 ms at most, never had a second
			 * (the forty-fourth: 200 calls of 0.1 s took 20.5 s, not 10.3)
			 */
			if (nbase > 0 && nbase < wanted && held &&
				now < TimestampTzPlusMilliseconds(busy_from, MORE_AFTER_MS))
				return TimestampTzPlusMilliseconds(busy_from, MORE_AFTER_MS);
			for (int n = 0; n < retries_max_workers && n < RETRIES_MAX_SLOTS && nbase < wanted; n++)
			{
				if (have[n])
					continue;
				if (!pool_room(db, !needy, now))
					return 0;
				if (!start_worker(db->dboid, n, needy))
				{
					/* no background worker slot: it waits as for the pool */
					if (needy && db->waiting_since == 0)
						db->waiting_since = now;
					return TimestampTzPlusMilliseconds(now, RESTART_DELAY_MS);
				}
				db->waiting_since = 0;
				return now;		/* more to start, after the others */
			}
			db->waiting_since = 0;
			if (db->due_at != 0 && !due && held)
			{
				TimestampTz ahead = TimestampTzPlusMilliseconds(db->due_at, -START_AHEAD_MS);
				TimestampTz extra = start_extra(db, have, now);

				return extra != 0 ? Min(extra, ahead) : ahead;
			}
			return start_extra(db, have, now);
		case DB_NO_EXTENSION:

			/*
			 * CREATE EXTENSION wakes us; looking again now and then also
			 * covers a CREATE that committed as the last worker was leaving.
			 */
			if (now >= db->next_start + (int64) REPROBE_MS * 1000)
				shmem_set_db_state(db, DB_UNKNOWN);
			return db->next_start + (int64) REPROBE_MS * 1000;
		case DB_PROBING:
			break;
	}
	return 0;
}

/*
 * oidset_has -- is 'dboid' in 'set'?
 */
static bool
oidset_has(const OidSet *set, Oid dboid)
{
	return set->n > 0 &&
		bsearch(&dboid, set->oids, set->n, sizeof(Oid), oid_cmp) != NULL;
}

/*
 * oidset_set -- 'set' is now the databases of 'oids' (of the current
 * transaction's memory)
 */
static void
oidset_set(OidSet *set, List *oids)
{
	ListCell   *lc;

	if (set->oids != NULL)
		pfree(set->oids);
	set->oids = NULL;
	set->n = 0;
	if (oids == NIL)
		return;
	set->oids = MemoryContextAlloc(TopMemoryContext, sizeof(Oid) * list_length(oids));
	foreach(lc, oids)
		set->oids[set->n++] = lfirst_oid(lc);
	qsort(set->oids, set->n, sizeof(Oid), oid_cmp);
}

/*
 * database_rank -- where a database comes in the launcher's order
 * (read_databases)
 */
static DatabaseRank
database_rank(Oid dboid)
{
	bool		quiet;

	if (shmem_db_tracked(dboid, &quiet))
		return quiet ? RANK_QUIET : RANK_SERVED;
	if (oidset_has(&known, dboid) || revisits_kept(dboid))
		return RANK_QUIET_UNTRACKED;
	return RANK_NEW;
}

/*
 * read_databases -- the databases that workers may serve (allowing
 * connections, not templates) that have an entry of the database table,
 * into 'seen' (at most retries.max_databases); returns how many.  Those
 * not looked at yet are noted to be (revisits_note_new), 'since' on.
 *
 * Entries are given in turns between the databases' owners (revisits.c):
 * to the databases whose kept call or firing falls due, those a commit
 * woke while no entry could be had for them (shmem_wake_workers), and
 * those not looked at yet; then to the looks due.  A quiet one (found
 * without the extension, or left by its last worker with nothing to do)
 * gets none again until its work is due or a commit there wakes it
 * (CREATE EXTENSION, a call): the launcher does not look at the same quiet
 * databases in turn for ever.  So a role that may create databases cannot
 * take the place of one served now by making more (the seventh hostile
 * review: 128 empty ones, and a routine ALTER DATABASE that moved the
 * served one's row behind them, left it with no worker), nor of one made
 * after hers (the thirty-sixth: a tenant's new database got no worker
 * behind 16 empty ones; the thirty-seventh: behind 15 copies of a template
 * with the extension and nothing to do); nor can her commits or due calls
 * in a hundred databases (a database woken by a commit waited in
 * pg_database's order behind a hundred databases at full gates: the
 * fortieth; then behind another role's databases whose calls fell due:
 * the forty-third; after a launcher restart, bob's databases not looked
 * at yet waited a minute behind mallory's commits: the forty-fourth).
 */
static int
read_databases(Oid *seen, TimestampTz since)
{
	static bool complained = false;
	Relation	rel;
	SysScanDesc scan;
	HeapTuple	tup;
	int			nseen = 0;
	int			nall = 0;
	List	   *ranked[RANK_QUIET_UNTRACKED + 1] = {NIL};
	List	   *all = NIL;
	ListCell   *lc;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	rel = table_open(DatabaseRelationId, AccessShareLock);
	scan = systable_beginscan(rel, InvalidOid, false, NULL, 0, NULL);
	while (HeapTupleIsValid(tup = systable_getnext(scan)))
	{
		Form_pg_database dat = (Form_pg_database) GETSTRUCT(tup);
		DatabaseRank rank;

		if (!dat->datallowconn || dat->datistemplate)
			continue;
		nall++;
		revisits_listed(dat->oid, dat->datdba);
		rank = database_rank(dat->oid);
		ranked[rank] = lappend_oid(ranked[rank], dat->oid);
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	revisits_sweep();
	foreach(lc, ranked[RANK_NEW])
		revisits_note_new(lfirst_oid(lc), since);
	for (int rank = RANK_SERVED; rank < RANK_QUIET_UNTRACKED; rank++)
	{
		if (rank == RANK_NEW)
			continue;
		foreach(lc, ranked[rank])
		{
			if (nseen < retries_max_databases)
				seen[nseen++] = lfirst_oid(lc);
		}
	}
	oidset_set(&known, list_concat(list_concat(list_copy(ranked[RANK_SERVED]),
											   ranked[RANK_QUIET]),
								   ranked[RANK_QUIET_UNTRACKED]));
	for (int rank = RANK_SERVED; rank <= RANK_QUIET_UNTRACKED; rank++)
		all = list_concat(all, ranked[rank]);
	oidset_set(&listed, all);
	PopActiveSnapshot();
	CommitTransactionCommand();

	if (nall > retries_max_databases && !complained)
	{
		ereport(LOG,
				(errmsg("retries: %d databases allow connections, but workers serve at most %d at once",
						nall, retries_max_databases),
				 errdetail("A database with nothing due gives its place up; those with work due and no place wait for one, in turns between the databases' owners, and their work runs late."),
				 errhint("Raise retries.max_databases, or mark unused databases ALLOW_CONNECTIONS false.")));
		complained = true;
	}
	return nseen;
}

/*
 * by_waiting -- qsort order of database entries: those that wait for room
 * in the pool, the longest waiting first, then the others as they are
 */
static int
by_waiting(const void *a, const void *b)
{
	TimestampTz wa = shmem_db_entry(*(const int *) a)->waiting_since;
	TimestampTz wb = shmem_db_entry(*(const int *) b)->waiting_since;

	if (wa != wb)
		return wa == 0 ? 1 : wb == 0 ? -1 : wa < wb ? -1 : 1;
	return *(const int *) a - *(const int *) b;
}

/*
 * pool_in_use -- the workers of the pool: every worker slot in use but
 * those in runner places.  Caller holds the lock.
 */
static int
pool_in_use(void)
{
	RetriesWorker *w;
	int			n = 0;

	for (int i = -1; (w = shmem_next_worker(InvalidOid, &i)) != NULL;)
		n += !RETRIES_IS_RUNNER_SLOT(w->slot_no);
	return n;
}

/*
 * note_pool_waiting -- say how many databases wait for room in the pool,
 * and whether more workers run than it allows now (pool_extra fell as the
 * batches of the role holding the most of it ended); while either holds,
 * wake the idle workers, which then leave their databases, and the busy
 * ones leave after a second of work (worker.c, "Workers on demand").
 * Caller holds the lock exclusively.
 */
static void
note_pool_waiting(void)
{
	int			waiting = 0;
	bool		over = pool_used > retries_max_cluster_workers + pool_extra_now;

	for (int i = 0; i < retries_max_databases; i++)
	{
		RetriesDatabase *db = shmem_db_entry(i);

		waiting += OidIsValid(db->dboid) && db->waiting_since != 0;
	}
	shmem_note_pool(waiting, over);
}

/*
 * pool_extra -- how many workers may run beyond retries.max_cluster_workers
 * now: while the big roles (each with a quarter of the pool or more;
 * superusers' batches do not count) hold more of it together than all but
 * the smaller roles' share (shmem_pool_share: half of it), as many as they
 * hold of that share.  So the smaller roles always have half the pool
 * between them, whatever the big ones' long calls hold (up to all places
 * but one, shmem_pool_cap), and a role alone in the cluster still has all
 * of it.  (With the other roles' one place, the databases where their calls
 * were due took it in turns, a second and a worker's start each: calls in
 * six databases ran up to 7.5 s late, and a schedule every second missed
 * half its firings, the forty-fifth hostile review, t/076.)  The workers in
 * these places run any role's calls but the big ones' while they hold the
 * cap (turns.c, pool_take); as their batches end, the pool shrinks back
 * (note_pool_waiting).
 */
static int
pool_extra(void)
{
	int			share = shmem_pool_share();

	if (share == 0)
		return 0;
	return Max(0, shmem_pool_heavy() - (retries_max_cluster_workers - share));
}

/*
 * manage_databases -- bring the database table in line with pg_database
 * when 'seen' is given (mark the databases listed, drop vanished ones),
 * reap exited
 * workers and manage each database; returns when the launcher must look
 * again at the latest.  *reaped tells whether a worker exited: maybe its
 * database is gone, and pg_database is worth reading again.
 */
static TimestampTz
manage_databases(Oid *seen, int nseen, bool *reaped)
{
	TimestampTz now = clock_system_now();
	TimestampTz next = TimestampTzPlusMilliseconds(now, LAUNCHER_NAPTIME_MS);
	int		   *order;
	int			norder = 0;

	shmem_lock(LW_EXCLUSIVE);
	*reaped = reap_workers(now);

	for (int i = 0; i < RETRIES_MAX_SLOTS; i++)
	{
		RetriesWorker *w = shmem_worker_slot(i);

		/* an adopted slot whose worker may yet start */
		if (w->in_use && w->pid == 0 && launched[i].handle == NULL)
			next = Min(next, TimestampTzPlusMilliseconds(w->assigned_at, ADOPT_GRACE_MS));
	}

	/*
	 * forget databases that are gone or no longer allow connections: those
	 * the read did not find at all, not those beyond its first
	 * retries.max_databases ('seen'), which a revisit may have given an entry
	 * since (it was lost then, and its work with it: the forty-first hostile
	 * review; t/074 says why it has no check); and none while a commit since
	 * may have made one for a database the read did not know yet
	 * (shmem_wake_workers: the next read lists it)
	 */
	for (int i = 0; i < retries_max_databases && seen != NULL &&
		 !shmem_reread_pending(); i++)
	{
		RetriesDatabase *db = shmem_db_entry(i);

		if (!OidIsValid(db->dboid))
			continue;
		if (!oidset_has(&listed, db->dboid))
		{
			shmem_set_db_state(db, DB_NO_EXTENSION);
			(void) manage_database(db, now);
			db->dboid = InvalidOid;
		}
	}
	for (int j = 0; j < nseen && seen != NULL; j++)
	{
		RetriesDatabase *db = shmem_find_database(seen[j], false);

		if (db != NULL)
			db->listed = true;
	}

	/* the databases that wait for the pool longest first, then the others */
	order = palloc(sizeof(int) * retries_max_databases);
	for (int i = 0; i < retries_max_databases; i++)
		if (OidIsValid(shmem_db_entry(i)->dboid))
			order[norder++] = i;
	qsort(order, norder, sizeof(int), by_waiting);
	pool_used = pool_in_use();
	for (int i = 0; i < norder; i++)
	{
		RetriesDatabase *db = shmem_db_entry(order[i]);
		TimestampTz when;

		revisits_note_far_due(db);
		when = manage_database(db, now);
		if (when != 0)
			next = Min(next, when);
	}
	pfree(order);
	note_pool_waiting();
	shmem_unlock();
	return next;
}

/*
 * launcher_exit -- no launcher to wake any more (before_shmem_exit
 * callback)
 */
static void
launcher_exit(int code, Datum arg)
{
	shmem_launcher_gone();
}

/*
 * retries_launcher_main -- entry point of the launcher
 *
 * SIGTERM, or any error, ends it with exit code 1 (die(), FATAL), and the
 * postmaster starts it again; at shutdown it does not.  The database table
 * is read at once, then every LAUNCHER_NAPTIME_MS and after a worker
 * exited; between two reads the launcher wakes when something happens or
 * is due (see manage_databases).
 */
void
retries_launcher_main(Datum main_arg)
{
	MemoryContext launcher_cxt;
	TimestampTz last_read = 0;
	Oid		   *seen;
	int			nseen = 0;
	bool		reaped = false;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();

	/* no database: only shared catalogs such as pg_database */
	BackgroundWorkerInitializeConnection(NULL, NULL, 0);
	pgstat_report_appname("retries launcher");

	/* the handles of the workers it starts live here, for its whole life */
	launcher_cxt = AllocSetContextCreate(TopMemoryContext, "retries launcher",
										 ALLOCSET_SMALL_SIZES);
	MemoryContextSwitchTo(launcher_cxt);
	seen = palloc(sizeof(Oid) * retries_max_databases);

	shmem_launcher_here();
	before_shmem_exit(launcher_exit, (Datum) 0);
	revisits_forget_noted();

	for (;;)
	{
		TimestampTz now = clock_system_now();
		TimestampTz next;
		TimestampTz revisit;
		bool		read;

		CHECK_FOR_INTERRUPTS();
		Assert(CurrentMemoryContext == launcher_cxt);
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}

		read = shmem_take_reread() || reaped ||
			TimestampDifferenceExceeds(last_read, now, LAUNCHER_NAPTIME_MS);
		if (read)
		{
			nseen = read_databases(seen, clock_now());
			MemoryContextSwitchTo(launcher_cxt);
			last_read = now;
		}

		/*
		 * Entries go first to the databases whose call or firing is due or
		 * that a commit woke, in turns between their owners, then to those
		 * the read ranks first (not looked at yet), then to the looks due
		 * (revisits.c).  Looks at a hundred full gates falling due again and
		 * again took every entry before a call due; so did the databases not
		 * looked at yet after a launcher restart, a hundred probed in turn
		 * (the forty-second hostile review, t/074 4 and 5).
		 */
		revisits_note_woken(now);
		revisits_wake_due(now, false);
		pool_extra_now = pool_extra();
		next = manage_databases(read ? seen : NULL, nseen, &reaped);
		revisits_wake_due(now, true);
		revisits_note_waiting();
		next = Min(next, TimestampTzPlusMilliseconds(last_read, LAUNCHER_NAPTIME_MS));
		revisit = revisits_next(clock_system_now());
		if (revisit != 0)
			next = Min(next, revisit);

		(void) WaitLatch(MyLatch,
						 WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 Max(clock_system_ms_until(next), 1),
						 PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
}
