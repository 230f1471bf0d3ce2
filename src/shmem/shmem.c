/*-------------------------------------------------------------------------
 *
 * shmem.c
 *	  Shared state of the launcher and workers, and what backends do with
 *	  it: its layout, the databases and their states, the worker slots,
 *	  waking and stopping workers, restores and renames.  The gates of
 *	  limited functions are in gates.c, the waiting backends in waits.c.
 *
 * One LWLock (RetriesShared.lock) guards all of it but what a slot's
 * spinlock guards (its current call and state) and the atomics (see
 * doc/architecture.md, "Locks").
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <signal.h>
#include <unistd.h>

#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "common/cryptohash.h"
#include "common/hashfn.h"
#include "common/sha2.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/lock.h"
#include "storage/proc.h"
#include "storage/procarray.h"
#include "storage/shmem.h"
#include "utils/builtins.h"
#include "utils/resowner.h"
#include "utils/timestamp.h"

#include "base/base.h"
#include "base/compat.h"
#include "core/rate.h"
#include "shmem/shmem.h"

RetriesShared *retries_shared = NULL;

/* MaxBackends entries, right after *retries_shared (waits.c) */
RetriesBackendWait *shmem_backend_waits = NULL;

/* retries.max_rate_limits of them, after the waits (gates.c) */
RetriesRateSlot *shmem_rate_slots = NULL;

/* retries.max_databases of them, after the rate slots */
RetriesDatabase *shmem_dbs = NULL;

static shmem_startup_hook_type prev_shmem_startup_hook = NULL;


/*
 * shared_size -- bytes of shared memory: RetriesShared, then a
 * RetriesBackendWait per backend, then retries.max_rate_limits rate slots,
 * then retries.max_databases database entries
 */
static Size
backend_waits_size(void)
{
	return MAXALIGN(mul_size(MaxBackends, sizeof(RetriesBackendWait)));
}

static Size
rate_slots_size(void)
{
	return MAXALIGN(mul_size(retries_max_rate_limits, sizeof(RetriesRateSlot)));
}

static Size
shared_size(void)
{
	return add_size(add_size(add_size(MAXALIGN(sizeof(RetriesShared)), backend_waits_size()),
							 rate_slots_size()),
					mul_size(retries_max_databases, sizeof(RetriesDatabase)));
}

/*
 * shmem_request_space -- ask for our shared memory and lock (from
 * shmem_request_hook, in the postmaster)
 */
void
shmem_request_space(void)
{
	RequestAddinShmemSpace(shared_size());
	RequestNamedLWLockTranche("retries", 1);
}

/*
 * shmem_startup -- create or attach to the shared state
 */
static void
shmem_startup(void)
{
	bool		found;

	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	retries_shared = ShmemInitStruct("retries", shared_size(), &found);
	shmem_backend_waits = (RetriesBackendWait *)
		((char *) retries_shared + MAXALIGN(sizeof(RetriesShared)));
	shmem_rate_slots = (RetriesRateSlot *)
		((char *) shmem_backend_waits + backend_waits_size());
	shmem_dbs = (RetriesDatabase *) ((char *) shmem_rate_slots + rate_slots_size());
	if (!found)
	{
		memset(retries_shared, 0, shared_size());
		retries_shared->lock = &(GetNamedLWLockTranche("retries"))->lock;
		for (int i = 0; i < RETRIES_MAX_SLOTS; i++)
		{
			SpinLockInit(&retries_shared->workers[i].mutex);
			pg_atomic_init_u32(&retries_shared->workers[i].woken, 0);
		}
		pg_atomic_init_u32(&retries_shared->ncancel_waits, 0);
		pg_atomic_init_u32(&retries_shared->nfinish_waits, 0);
		pg_atomic_init_u64(&retries_shared->gates_generation, 0);
		pg_atomic_init_u32(&retries_shared->nrestores, 0);
		for (int i = 0; i < MaxBackends; i++)
			SpinLockInit(&shmem_backend_waits[i].mutex);
		retries_shared->started_at = clock_system_now();
		if (!pg_strong_random(retries_shared->lock_secret,
							  sizeof(retries_shared->lock_secret)))
			elog(ERROR, "retries: could not generate a random secret");
	}
	LWLockRelease(AddinShmemInitLock);
}

/*
 * shmem_install -- install the shmem startup hook (from _PG_init)
 */
void
shmem_install(void)
{
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = shmem_startup;
}

/*
 * evictable_database -- an entry that may make room for another, NULL if
 * none: that of a database found without the extension, else that of one
 * whose last worker left it idle (nothing due within two seconds, nothing
 * to look after): one with nothing due at all first, then the one whose
 * work is due last, once the launcher keeps when (far_noted); not paused,
 * with no worker, no call held for a runner place and no place lost.  Its
 * database needs no entry until it has work: CREATE EXTENSION makes one as
 * it commits (xact.c), and so does any commit that schedules or releases a
 * call in it (shmem_wake_workers), and the launcher when its work falls
 * due (engine/revisits.c).  Caller holds the lock exclusively.
 */
static RetriesDatabase *
evictable_database(void)
{
	TimestampTz now = clock_system_now();
	RetriesDatabase *idle = NULL;
	RetriesDatabase *far = NULL;

	for (int i = 0; i < retries_max_databases; i++)
	{
		RetriesDatabase *db = &shmem_dbs[i];
		int			w = -1;

		if (!OidIsValid(db->dboid) || db->paused_until > now ||
			shmem_next_worker(db->dboid, &w) != NULL)
			continue;
		if (db->state == DB_NO_EXTENSION)
			return db;
		if (!db->idle || db->state != DB_ACTIVE ||
			db->runner_held != db->runner_seen || db->runners_lost != 0)
			continue;
		if (db->far_due == 0 && idle == NULL)
			idle = db;
		else if (db->far_due != 0 && db->far_noted &&
				 (far == NULL || db->far_due > far->far_due))
			far = db;
	}
	return idle != NULL ? idle : far;
}

/*
 * shmem_find_database -- the entry of a database, optionally created;
 * NULL if absent (or no room).  Caller holds the lock exclusively to create.
 *
 * A database found without the extension, or one with nothing to do,
 * gives its entry up to one that needs it (evictable_database): databases
 * that never had the extension cannot fill the table and shut out one made
 * after them (the thirty-sixth hostile review, t/070 2), nor can copies of
 * a template with the extension that have nothing to do (the
 * thirty-seventh, t/071 1).
 */
RetriesDatabase *
shmem_find_database(Oid dboid, bool create)
{
	RetriesDatabase *free_entry = NULL;

	for (int i = 0; i < retries_max_databases; i++)
	{
		RetriesDatabase *db = &shmem_dbs[i];

		if (db->dboid == dboid)
			return db;
		if (free_entry == NULL && !OidIsValid(db->dboid))
			free_entry = db;
	}
	if (create && free_entry == NULL)
		free_entry = evictable_database();
	if (!create || free_entry == NULL)
		return NULL;
	memset(free_entry, 0, sizeof(RetriesDatabase));
	free_entry->dboid = dboid;
	free_entry->runner_held = 1;	/* a crash may have left some */
	free_entry->wanted = RETRIES_MAX_SLOTS; /* all it may have, until idle */
	free_entry->state = DB_UNKNOWN; /* a new entry: no transition */
	return free_entry;
}

/*
 * shmem_recovery_begin -- must this worker charge the interrupted attempts
 * of every slot of its database (the first since the server started)?
 * Makes the database's entry if it has none.
 */
bool
shmem_recovery_begin(Oid dboid)
{
	RetriesDatabase *db;
	bool		all;

	LWLockAcquire(retries_shared->lock, LW_EXCLUSIVE);
	db = shmem_find_database(dboid, true);
	all = db != NULL && !db->recovered;
	LWLockRelease(retries_shared->lock);
	return all;
}

/*
 * shmem_recovery_end -- the database's interrupted attempts are charged
 */
void
shmem_recovery_end(Oid dboid)
{
	RetriesDatabase *db;

	db = shmem_lock_database(dboid, LW_EXCLUSIVE);
	if (db != NULL)
		db->recovered = true;
	LWLockRelease(retries_shared->lock);
}

/*
 * shmem_recovered -- are the database's interrupted attempts charged (or
 * is it gone from the list)?
 */
bool
shmem_recovered(Oid dboid)
{
	RetriesDatabase *db;
	bool		done;

	db = shmem_lock_database(dboid, LW_SHARED);
	done = db == NULL || db->recovered;
	LWLockRelease(retries_shared->lock);
	return done;
}

/*
 * shmem_slot_stopped -- did the extension itself stop this worker?
 */
bool
shmem_slot_stopped(const RetriesWorker *w)
{
	bool		stopped;

	LWLockAcquire(retries_shared->lock, LW_SHARED);
	stopped = w->stopped;
	LWLockRelease(retries_shared->lock);
	return stopped;
}

/*
 * shmem_set_db_state -- change what the launcher knows of a database;
 * caller holds the lock exclusively
 *
 * The changes allowed are listed with RetriesDbState (shmem.h).
 */
void
shmem_set_db_state(RetriesDatabase *db, RetriesDbState state)
{
	Assert(LWLockHeldByMeInMode(retries_shared->lock, LW_EXCLUSIVE));
	Assert(db->state == state ||
		   state == DB_NO_EXTENSION ||
		   (db->state == DB_UNKNOWN && state == DB_PROBING) ||
		   (db->state == DB_PROBING && state == DB_UNKNOWN) ||
		   (db->state != DB_NO_EXTENSION && state == DB_ACTIVE) ||
		   (db->state == DB_NO_EXTENSION && state == DB_UNKNOWN));

	/*
	 * found anew: all the workers it may have, until they leave idle; one
	 * given its entry for its work due, one (a second started with each entry
	 * given again: the forty-third hostile review)
	 */
	if (state == DB_ACTIVE && db->state != DB_ACTIVE)
		db->wanted = db->revisited ? 1 : RETRIES_MAX_SLOTS;
	db->state = state;
}

/*
 * shmem_slot_assign -- assign slot 'slot' to a worker of database 'dboid'
 * about to start, as its slot_no 'slot_no', with 'generation' (which the
 * worker is given, to know it: shmem_slot_take), at 'now'; its state and
 * counters start afresh.  Returns the slot.  Caller (the launcher) holds
 * the lock exclusively.
 */
RetriesWorker *
shmem_slot_assign(int slot, Oid dboid, int slot_no, uint32 generation,
				  TimestampTz now)
{
	RetriesWorker *w = &retries_shared->workers[slot];
	RetriesDatabase *db;

	Assert(LWLockHeldByMeInMode(retries_shared->lock, LW_EXCLUSIVE));
	db = shmem_find_database(dboid, false);
	if (db != NULL)
		db->idle = false;
	w->in_use = true;
	w->dboid = dboid;
	w->slot_no = slot_no;
	w->generation = generation;
	w->assigned_at = now;
	w->pid = 0;
	w->latch = NULL;
	w->gate_fn = InvalidOid;
	w->gate_keyed = false;
	w->stopped = false;
	w->leaving = false;
	w->moved_from = -1;
	SpinLockAcquire(&w->mutex);
	w->state = WORKER_STARTING;
	w->current_call = 0;
	w->current_role = InvalidOid;
	w->holder_role = InvalidOid;
	w->batch_role = InvalidOid;
	w->last_role = InvalidOid;
	w->last_batch_role = InvalidOid;
	w->since = 0;
	w->calls_run = 0;
	w->errors = 0;
	w->busy_us = 0;
	w->busy_since = 0;
	w->stretch_since = 0;
	SpinLockRelease(&w->mutex);
	return w;
}

/*
 * shmem_slot_working_since -- since when worker 'w' runs batches back to
 * back (0 if it rests), and in *running whether it runs one now
 */
TimestampTz
shmem_slot_working_since(RetriesWorker *w, bool *running)
{
	TimestampTz since;

	SpinLockAcquire(&w->mutex);
	since = w->stretch_since;
	*running = w->state == WORKER_RUNNING;
	SpinLockRelease(&w->mutex);
	return since;
}

/*
 * shmem_wake_idle_workers -- wake every idle worker (they leave their
 * databases while others wait for the pool); caller holds the lock
 */
void
shmem_wake_idle_workers(void)
{
	RetriesWorker *w;

	for (int i = -1; (w = shmem_next_worker(InvalidOid, &i)) != NULL;)
	{
		bool		idle;

		SpinLockAcquire(&w->mutex);
		idle = w->state == WORKER_IDLE;
		SpinLockRelease(&w->mutex);
		if (idle && w->latch != NULL)
			SetLatch(w->latch);
	}
}

/*
 * shmem_note_pool -- say how many databases wait for room in the pool of
 * workers, and whether more workers run than it allows now ('over'); as
 * either comes to hold, wake the idle workers, which then leave their
 * databases (leave.c).  Caller holds the lock exclusively.
 */
void
shmem_note_pool(int waiting, bool over)
{
	if ((waiting > 0 || over) &&
		retries_shared->pool_waiting == 0 && !retries_shared->pool_over)
		shmem_wake_idle_workers();
	retries_shared->pool_waiting = waiting;
	retries_shared->pool_over = over;
}

/*
 * shmem_pool_waiting -- how many databases wait for room in the pool (as
 * the launcher last counted them); caller holds the lock
 */
int
shmem_pool_waiting(void)
{
	return retries_shared->pool_waiting;
}

/*
 * shmem_next_generation -- a new generation for a worker slot being
 * assigned; caller holds the lock exclusively
 */
uint32
shmem_next_generation(void)
{
	return ++retries_shared->next_generation & RETRIES_GENERATION_MASK;
}

/*
 * shmem_reread_pending -- has a commit asked the launcher to read
 * pg_database again (shmem_reread_databases), not yet answered?  Unlike
 * shmem_take_reread, the question leaves it asked.  Caller holds the lock.
 */
bool
shmem_reread_pending(void)
{
	return retries_shared->reread_databases;
}

/*
 * shmem_db_entry -- entry i of the database table (in use or not); caller
 * holds the lock
 */
RetriesDatabase *
shmem_db_entry(int i)
{
	Assert(i >= 0 && i < retries_max_databases);
	return &shmem_dbs[i];
}

/*
 * shmem_db_tracked -- has database 'dboid' an entry in the database table?
 * If so, into *quiet whether it was found without the extension, or with
 * nothing to do (idle): its entry may go to another database
 */
bool
shmem_db_tracked(Oid dboid, bool *quiet)
{
	RetriesDatabase *db;
	bool		tracked;

	db = shmem_lock_database(dboid, LW_SHARED);
	tracked = db != NULL;
	*quiet = tracked && (db->state == DB_NO_EXTENSION || db->idle);
	LWLockRelease(retries_shared->lock);
	return tracked;
}

/*
 * shmem_launcher_here -- this process is the launcher: backends and
 * workers wake it through its latch
 */
void
shmem_launcher_here(void)
{
	LWLockAcquire(retries_shared->lock, LW_EXCLUSIVE);
	retries_shared->launcher_pid = MyProcPid;
	retries_shared->launcher_latch = &MyProc->procLatch;
	LWLockRelease(retries_shared->lock);
}

/*
 * shmem_launcher_gone -- the launcher (this process) exits: no latch to set
 * until the next one starts
 */
void
shmem_launcher_gone(void)
{
	LWLockAcquire(retries_shared->lock, LW_EXCLUSIVE);
	if (retries_shared->launcher_pid == MyProcPid)
	{
		retries_shared->launcher_pid = 0;
		retries_shared->launcher_latch = NULL;
	}
	LWLockRelease(retries_shared->lock);
}

/*
 * shmem_take_reread -- has pg_database changed since the launcher last
 * asked (shmem_reread_databases)?  The question clears it.
 */
bool
shmem_take_reread(void)
{
	bool		reread;

	LWLockAcquire(retries_shared->lock, LW_EXCLUSIVE);
	reread = retries_shared->reread_databases;
	retries_shared->reread_databases = false;
	LWLockRelease(retries_shared->lock);
	return reread;
}

/*
 * shmem_copy_workers -- a consistent copy of every worker slot, into
 * copy[] (room for RETRIES_MAX_SLOTS); under the lock (shared), which keeps
 * the slots' assignment still, and each slot's spinlock
 */
void
shmem_copy_workers(RetriesWorker *copy)
{
	LWLockAcquire(retries_shared->lock, LW_SHARED);
	for (int i = 0; i < RETRIES_MAX_SLOTS; i++)
	{
		RetriesWorker *w = &retries_shared->workers[i];

		SpinLockAcquire(&w->mutex);
		memcpy(&copy[i], w, sizeof(RetriesWorker));
		SpinLockRelease(&w->mutex);
	}
	LWLockRelease(retries_shared->lock);
}

/*
 * shmem_let_workers_back -- the workers of database 'dboid' that a
 * transaction stopped (shmem_stop_workers) may start again; with
 * 'extension_gone', the database has no extension any more
 */
void
shmem_let_workers_back(Oid dboid, bool extension_gone)
{
	RetriesDatabase *db;

	db = shmem_lock_database(dboid, LW_EXCLUSIVE);
	if (db != NULL)
	{
		db->paused_until = 0;
		if (extension_gone)
			shmem_set_db_state(db, DB_NO_EXTENSION);
	}
	LWLockRelease(retries_shared->lock);
}

/*
 * shmem_extension_created -- the extension was created in database
 * 'dboid' (or its workers were let back at a commit that woke the
 * launcher): an entry, to be looked at anew, with nothing its workers did
 * before remembered (t/060 3)
 */
void
shmem_extension_created(Oid dboid)
{
	RetriesDatabase *db;

	LWLockAcquire(retries_shared->lock, LW_EXCLUSIVE);
	db = shmem_find_database(dboid, true);
	if (db != NULL && db->state == DB_NO_EXTENSION)
		shmem_set_db_state(db, DB_UNKNOWN);
	if (db != NULL)
	{
		db->paused_until = 0;
		db->idle = false;
		db->creates++;
		memset(&db->memo, 0, sizeof(db->memo));
	}
	LWLockRelease(retries_shared->lock);
}

/*
 * wake_launcher -- set the launcher's latch; with 'reread', make it read
 * pg_database again first
 */
static void
wake_launcher(bool reread)
{
	if (retries_shared == NULL)
		return;
	LWLockAcquire(retries_shared->lock, reread ? LW_EXCLUSIVE : LW_SHARED);
	if (reread)
		retries_shared->reread_databases = true;
	shmem_set_launcher_latch();
	LWLockRelease(retries_shared->lock);
}

/*
 * shmem_worker_slot -- slot 'i' of the workers' slots
 */
RetriesWorker *
shmem_worker_slot(int i)
{
	Assert(i >= 0 && i < RETRIES_MAX_SLOTS);
	return &retries_shared->workers[i];
}

/*
 * shmem_db_creates -- how many CREATE EXTENSIONs database dboid has seen
 * commit (a worker compares it before and after it probes the database)
 */
uint32
shmem_db_creates(Oid dboid)
{
	RetriesDatabase *db;
	uint32		creates;

	db = shmem_lock_database(dboid, LW_SHARED);
	creates = db != NULL ? db->creates : 0;
	LWLockRelease(retries_shared->lock);
	return creates;
}

/*
 * shmem_db_probed -- a worker found the extension in database dboid, or
 * not ('present'), in a transaction that began when it had seen 'creates'
 * CREATE EXTENSIONs: the database's state for the launcher, which is
 * woken; a CREATE EXTENSION that committed meanwhile, unseen, leaves the
 * database to be probed again at once.  Returns when the database's work
 * was due when its last worker left (on demand), or 0, and forgets it.
 */
TimestampTz
shmem_db_probed(Oid dboid, bool present, uint32 creates)
{
	RetriesDatabase *db;
	TimestampTz due_at = 0;

	LWLockAcquire(retries_shared->lock, LW_EXCLUSIVE);
	db = shmem_find_database(dboid, true);
	if (db != NULL && !present && db->creates != creates)
	{
		if (db->state == DB_PROBING)
			shmem_set_db_state(db, DB_UNKNOWN);
	}
	else if (db != NULL)
		shmem_set_db_state(db, present ? DB_ACTIVE : DB_NO_EXTENSION);
	if (db != NULL && present)
	{
		due_at = db->due_at;
		db->due_at = 0;
	}
	shmem_set_launcher_latch();
	LWLockRelease(retries_shared->lock);
	return due_at;
}

/*
 * shmem_db_left -- a worker of database dboid exits for good: the
 * extension is gone from it if 'gone', and the launcher is woken
 */
void
shmem_db_left(Oid dboid, bool gone)
{
	RetriesDatabase *db;

	db = shmem_lock_database(dboid, LW_EXCLUSIVE);
	if (db != NULL && gone)
		shmem_set_db_state(db, DB_NO_EXTENSION);
	shmem_set_launcher_latch();
	LWLockRelease(retries_shared->lock);
}

/*
 * shmem_wake_launcher -- make the launcher look at the databases now
 */
void
shmem_wake_launcher(void)
{
	wake_launcher(false);
}

/*
 * shmem_reread_databases -- make the launcher read pg_database again now
 * (a database was created, dropped or altered, or got the extension)
 *
 * Until it has, it starts no worker in a database that it has not seen
 * there allowing connections and not a template.
 */
void
shmem_reread_databases(void)
{
	wake_launcher(true);
}

/*
 * shmem_note_restore -- this session restores database dboid's
 * extension; false if there is no room to note it
 */
bool
shmem_note_restore(Oid dboid)
{
	RetriesRestore *free_entry = NULL;

	LWLockAcquire(retries_shared->lock, LW_EXCLUSIVE);
	for (int i = 0; i < RETRIES_MAX_RESTORES; i++)
	{
		RetriesRestore *r = &retries_shared->restores[i];

		if (r->dboid == dboid && r->pid == MyProcPid)
		{
			/* noted already: one entry per session and database */
			LWLockRelease(retries_shared->lock);
			return true;
		}
		if (!OidIsValid(r->dboid) && free_entry == NULL)
			free_entry = r;
	}
	if (free_entry != NULL)
	{
		pg_atomic_fetch_add_u32(&retries_shared->nrestores, 1);
		free_entry->dboid = dboid;
		free_entry->pid = MyProcPid;
	}
	LWLockRelease(retries_shared->lock);
	return free_entry != NULL;
}

/*
 * shmem_forget_restores -- this session restores nothing any more (it
 * ends)
 */
void
shmem_forget_restores(void)
{
	LWLockAcquire(retries_shared->lock, LW_EXCLUSIVE);
	for (int i = 0; i < RETRIES_MAX_RESTORES; i++)
	{
		RetriesRestore *r = &retries_shared->restores[i];

		if (r->pid == MyProcPid && OidIsValid(r->dboid))
		{
			pg_atomic_fetch_sub_u32(&retries_shared->nrestores, 1);
			r->dboid = InvalidOid;
			r->pid = 0;
		}
	}
	LWLockRelease(retries_shared->lock);
}

/*
 * shmem_names_changed -- a rename committed in database dboid: bump its
 * names_generation and wake its workers, which then refresh the
 * signatures they keep (names.c)
 */
void
shmem_names_changed(Oid dboid)
{
	RetriesDatabase *db;

	if (retries_shared == NULL)
		return;
	db = shmem_lock_database(dboid, LW_EXCLUSIVE);
	if (db != NULL)
		db->names_generation++;
	LWLockRelease(retries_shared->lock);
	shmem_wake_workers(dboid, WAKE_FIRE, InvalidOid);
}

/*
 * shmem_names_generation -- database dboid's names_generation (0 if it
 * has no entry)
 */
uint64
shmem_names_generation(Oid dboid)
{
	RetriesDatabase *db;
	uint64		generation = 0;

	db = shmem_lock_database(dboid, LW_SHARED);
	if (db != NULL)
		generation = db->names_generation;
	LWLockRelease(retries_shared->lock);
	return generation;
}

/*
 * shmem_memo_read -- what database dboid's workers did (RetriesDbMemo),
 * all zero if it has no entry
 */
void
shmem_memo_read(Oid dboid, RetriesDbMemo *memo)
{
	RetriesDatabase *db;

	memset(memo, 0, sizeof(*memo));
	db = shmem_lock_database(dboid, LW_SHARED);
	if (db != NULL)
		*memo = db->memo;
	LWLockRelease(retries_shared->lock);
}

/*
 * shmem_memo_write -- a worker of database dboid did what 'memo' says, in
 * a transaction that committed: keep the newest of each for the next
 * workers (a zero names_done or time leaves what is there)
 */
void
shmem_memo_write(Oid dboid, const RetriesDbMemo *memo)
{
	RetriesDatabase *db;

	db = shmem_lock_database(dboid, LW_EXCLUSIVE);
	if (db != NULL)
	{
		RetriesDbMemo *m = &db->memo;

		if (memo->names_done != 0 && memo->names_done_at >= m->names_done_at)
		{
			m->names_done = memo->names_done;
			m->names_done_at = memo->names_done_at;
		}
		m->stale_done_at = Max(m->stale_done_at, memo->stale_done_at);
		m->pruned_at = Max(m->pruned_at, memo->pruned_at);
		m->armed = m->armed || memo->armed;
	}
	LWLockRelease(retries_shared->lock);
}

/*
 * shmem_restoring -- the PID of a session restoring database dboid's
 * extension, 0 if none
 */
pid_t
shmem_restoring(Oid dboid)
{
	pid_t		pid = 0;

	/* mostly none: no lock taken on the path of every call then */
	if (pg_atomic_read_u32(&retries_shared->nrestores) == 0)
		return 0;
	LWLockAcquire(retries_shared->lock, LW_SHARED);
	for (int i = 0; i < RETRIES_MAX_RESTORES && pid == 0; i++)
		if (retries_shared->restores[i].dboid == dboid)
			pid = retries_shared->restores[i].pid;
	LWLockRelease(retries_shared->lock);
	return pid;
}

/*
 * shmem_workers_held -- count the workers of database dboid, and those of
 * them that are held: busy in one batch (in the calls of one role) for
 * RETRIES_HELD_AFTER_MS or more as of 'now'.  Workers of slot_no below
 * 'base' (retries.max_workers) are the database's own, the others extras
 * (worker.c, "Extra workers").  Caller holds the LWLock.
 */
void
shmem_workers_held(Oid dboid, int base, TimestampTz now, RetriesHeld *held)
{
	RetriesWorker *w;

	memset(held, 0, sizeof(*held));
	for (int i = -1; (w = shmem_next_worker(dboid, &i)) != NULL;)
	{
		TimestampTz busy_since;
		TimestampTz held_at;
		bool		in_runner;
		bool		extra = w->slot_no >= base;

		/* one waiting for a runner in a place of its own is neither */
		if (RETRIES_IS_RUNNER_SLOT(w->slot_no))
			continue;
		SpinLockAcquire(&w->mutex);
		busy_since = w->state == WORKER_RUNNING ? w->busy_since : 0;
		in_runner = w->in_runner;
		SpinLockRelease(&w->mutex);
		if (extra)
			held->extras++;
		else
			held->base++;
		if (busy_since == 0)
			continue;
		if (!extra)
			held->base_busy++;
		held_at = TimestampTzPlusMilliseconds(busy_since, RETRIES_HELD_AFTER_MS);
		if (held_at <= now)
		{
			if (extra)
				held->extras_held++;
			else
				held->base_held++;
			if (!extra && in_runner)
				held->runners_held++;
		}
		else if (held->next == 0 || held_at < held->next)
			held->next = held_at;
	}
}

/*
 * shmem_extras_wanted -- does database dboid want extra workers
 * (worker.c, "Extra workers"): are its own workers (slot_no below 'base')
 * all held, or (with retries.max_runners 0) are the places for runners
 * among them all held while calls may be held for a runner?  Fills *held (shmem_workers_held).  Caller
 * holds the lock.
 */
bool
shmem_extras_wanted(Oid dboid, int base, TimestampTz now, RetriesHeld *held)
{
	RetriesDatabase *db = shmem_find_database(dboid, false);
	int			places = base < 2 ? 1 : base - 1;

	shmem_workers_held(dboid, base, now, held);
	if (db == NULL)
		return false;
	return held->base_held >= base ||
		(retries_max_runners == 0 && held->runners_held >= places &&
		 db->runner_held != db->runner_seen);
}

/*
 * shmem_note_loads -- note what a restore did to database dboid's
 * extension extoid: refused it, or loaded tables 'loaded' (bits), added to
 * what is noted of that extension; in place of the oldest entry when
 * there is no room
 */
void
shmem_note_loads(Oid dboid, Oid extoid, bool refused, uint32 loaded)
{
	RetriesLoads *entry = NULL;

	LWLockAcquire(retries_shared->lock, LW_EXCLUSIVE);
	for (int i = 0; i < RETRIES_MAX_RESTORES && entry == NULL; i++)
		if (retries_shared->loads[i].dboid == dboid)
			entry = &retries_shared->loads[i];
	if (entry == NULL)
	{
		entry = &retries_shared->loads[retries_shared->next_loads];
		retries_shared->next_loads =
			(retries_shared->next_loads + 1) % RETRIES_MAX_RESTORES;
	}
	if (entry->dboid != dboid || entry->extoid != extoid)
		memset(entry, 0, sizeof(RetriesLoads));
	entry->dboid = dboid;
	entry->extoid = extoid;
	entry->refused |= refused;
	entry->loaded |= loaded;
	LWLockRelease(retries_shared->lock);
}

/*
 * shmem_loads -- whether a restore of database dboid's extension extoid
 * was refused; *loaded, the tables that a COPY has loaded (bits)
 */
bool
shmem_loads(Oid dboid, Oid extoid, uint32 *loaded)
{
	bool		refused = false;

	*loaded = 0;
	LWLockAcquire(retries_shared->lock, LW_SHARED);
	for (int i = 0; i < RETRIES_MAX_RESTORES; i++)
	{
		RetriesLoads *entry = &retries_shared->loads[i];

		if (entry->dboid == dboid && entry->extoid == extoid)
		{
			refused = entry->refused;
			*loaded = entry->loaded;
		}
	}
	LWLockRelease(retries_shared->lock);
	return refused;
}

/* This process is a reserved worker (its index), or -1 */
static int	shmem_my_reserve = -1;

/*
 * reserve_left -- before_shmem_exit callback: this reserved worker's
 * process ends, and with it the job it was given
 */
static void
reserve_left(int code, Datum arg)
{
	RetriesReserve *r = &retries_shared->reserves[shmem_my_reserve];

	LWLockAcquire(retries_shared->lock, LW_EXCLUSIVE);
	r->pid = 0;
	r->latch = NULL;
	r->job = RESERVE_NONE;
	r->generation++;
	LWLockRelease(retries_shared->lock);
}

/*
 * shmem_reserve_pause -- a process of reserved worker 'index' starts: how
 * long it should wait, in ms, before it is free for a job.  PostgreSQL
 * starts a reserved worker again at once when it exits (reserve.c); one
 * whose previous process ended within a second of its start without a job
 * (an error as it started, say) waits out the rest of that second, so
 * that such a failure does not restart it in a loop.
 */
long
shmem_reserve_pause(int index)
{
	RetriesReserve *r = &retries_shared->reserves[index];
	TimestampTz now = clock_system_now();
	long		wait_ms = 0;

	LWLockAcquire(retries_shared->lock, LW_EXCLUSIVE);
	if (r->started_at != 0 && !r->had_job &&
		!TimestampDifferenceExceeds(r->started_at, now, 1000))
		wait_ms = 1000 - (long) ((now - r->started_at) / 1000);
	r->started_at = now;
	r->had_job = false;
	LWLockRelease(retries_shared->lock);
	return Max(wait_ms, 0);
}

/*
 * shmem_reserve_begin -- this process is reserved worker 'index' (see
 * engine/reserve.c): note it there, free for a job, until it exits
 */
void
shmem_reserve_begin(int index)
{
	RetriesReserve *r = &retries_shared->reserves[index];

	shmem_my_reserve = index;
	LWLockAcquire(retries_shared->lock, LW_EXCLUSIVE);
	r->pid = MyProcPid;
	r->latch = &MyProc->procLatch;
	r->job = RESERVE_NONE;
	LWLockRelease(retries_shared->lock);
	before_shmem_exit(reserve_left, (Datum) 0);
}

/*
 * reserve_role -- whose calls or code reserved worker r runs: a runner's
 * call's role, or, of the batch that a worker run there runs now, whose
 * code it is (its holder: the owner of the functions of a batch of another
 * role's functions, else the calls' role; the twenty-seventh hostile
 * review, t/061 4: alice's call of mallory's slow function in one kept
 * alice's own calls out of the other); InvalidOid if none, or if it is
 * this process and not 'self'.  Caller holds the LWLock.
 */
static Oid
reserve_role(RetriesReserve *r, bool self)
{
	RetriesWorker *w;
	Oid			role = InvalidOid;

	if (r->pid == 0 || (r->pid == MyProcPid && !self))
		return InvalidOid;
	if (r->job == RESERVE_RUNNER)
		return r->role;
	if (r->job != RESERVE_WORKER)
		return InvalidOid;
	for (int j = -1; (w = shmem_next_worker(InvalidOid, &j)) != NULL;)
	{
		if (w->pid != r->pid)
			continue;
		SpinLockAcquire(&w->mutex);
		if (w->state == WORKER_RUNNING)
			role = OidIsValid(w->holder_role) ? w->holder_role : w->batch_role;
		SpinLockRelease(&w->mutex);
	}
	return role;
}

/*
 * shmem_reserve_give -- give job 'job' with argument 'arg' to a free reserved
 * worker; false if none is free, or if 'role' (a runner's, or InvalidOid)
 * has half of them running its calls already (rounded up; runners and
 * workers' batches alike, t/060 1): they are few,
 * and no role takes all of them from the others (the twenty-third hostile
 * review, t/031_trust_review_2.pl 4: with runner places, one role's
 * procedures took both).  Its index and generation into *index and
 * *generation.  Caller holds the LWLock exclusively.
 */
bool
shmem_reserve_give(RetriesReserveJob job, Datum arg, Oid role, int *index,
				   uint32 *generation)
{
	int			of_role = 0;

	for (int i = 0; i < RETRIES_MAX_RESERVES && OidIsValid(role); i++)
		of_role += reserve_role(&retries_shared->reserves[i], true) == role;
	if (OidIsValid(role) && of_role >= (retries_reserved_workers + 1) / 2)
		return false;
	for (int i = 0; i < RETRIES_MAX_RESERVES; i++)
	{
		RetriesReserve *r = &retries_shared->reserves[i];

		if (r->pid == 0 || r->job != RESERVE_NONE)
			continue;
		r->job = job;
		r->arg = arg;
		r->role = role;
		r->had_job = true;
		r->generation++;
		*index = i;
		*generation = r->generation;
		SetLatch(r->latch);
		return true;
	}
	return false;
}

/*
 * shmem_reserve_give_runner -- give a runner, with argument 'arg', of role
 * 'role' to a free reserved worker (shmem_reserve_give); takes the LWLock
 */
bool
shmem_reserve_give_runner(Datum arg, Oid role, int *index, uint32 *generation)
{
	bool		given;

	LWLockAcquire(retries_shared->lock, LW_EXCLUSIVE);
	given = shmem_reserve_give(RESERVE_RUNNER, arg, role, index, generation);
	LWLockRelease(retries_shared->lock);
	return given;
}

/*
 * shmem_reserve_job -- the job given to reserved worker 'index', and its
 * argument into *arg; RESERVE_NONE while it has none
 */
RetriesReserveJob
shmem_reserve_job(int index, Datum *arg)
{
	RetriesReserve *r = &retries_shared->reserves[index];
	RetriesReserveJob job;

	LWLockAcquire(retries_shared->lock, LW_SHARED);
	job = r->job;
	*arg = r->arg;
	LWLockRelease(retries_shared->lock);
	return job;
}

/*
 * shmem_reserve_running -- the PID of the process that runs the job given as
 * (index, generation), or 0 once it has ended.  Takes the LWLock.
 */
pid_t
shmem_reserve_running(int index, uint32 generation)
{
	RetriesReserve *r = &retries_shared->reserves[index];
	pid_t		pid;

	LWLockAcquire(retries_shared->lock, LW_SHARED);
	pid = r->generation == generation ? r->pid : 0;
	LWLockRelease(retries_shared->lock);
	return pid;
}

/*
 * shmem_reserve_terminate -- end the job given as (index, generation), if it
 * still runs (SIGTERM, as TerminateBackgroundWorker sends)
 */
void
shmem_reserve_terminate(int index, uint32 generation)
{
	pid_t		pid = shmem_reserve_running(index, generation);

	if (pid != 0)
		kill(pid, SIGTERM);
}

/*
 * shmem_in_reserve -- does this process run in a reserved worker?
 */
bool
shmem_in_reserve(void)
{
	return shmem_my_reserve >= 0;
}

/*
 * shmem_reserve_roles -- the roles whose calls run in a reserved worker now
 * (a worker's batch or a runner; other than this process), each once, into
 * roles[] (room for RETRIES_MAX_RESERVES); returns how many.  Takes the
 * LWLock.
 */
int
shmem_reserve_roles(Oid *roles)
{
	int			n = 0;

	LWLockAcquire(retries_shared->lock, LW_SHARED);
	for (int i = 0; i < RETRIES_MAX_RESERVES; i++)
	{
		Oid			role = reserve_role(&retries_shared->reserves[i], false);
		bool		listed = false;

		for (int j = 0; j < n; j++)
			listed |= roles[j] == role;
		if (OidIsValid(role) && !listed)
			roles[n++] = role;
	}
	LWLockRelease(retries_shared->lock);
	return n;
}

/*
 * The pool's cap counts batches in accounts: a batch of a role's calls of
 * its own code (or of a superuser's) in the role's own; a batch of a
 * role's calls of another role's functions (execute_foreign_owner), which
 * either role can make slow (the owner by its code, the caller by holding
 * a lock it waits for), in the caller's account of calls of others' code,
 * apart from its own.  So a role's own calls do not pay for its calls of
 * a slow function of another's (the forty-eighth hostile review, t/078:
 * they counted as its own, and with mallory at the cap, three of alice's
 * calls of mallory's slow function held every other call of alice's
 * back, in every database); the caller cannot have them fill the pool
 * (calling many roles' slow functions), since that account is capped as
 * its own is; and no role's calls of the owner's code pay for another
 * caller's (counted against the owner's code, mallory's calls of alice's
 * function, held at her lock, held every other role's calls of alice's
 * functions back: the forty-ninth, t/078 5).  Many roles' calls of one
 * role's slow function hold the pool as as many roles' long calls do.
 */
typedef enum PoolAccountKind
{
	POOL_OWN,					/* a role's calls of its own code */
	POOL_CALLS					/* a role's calls of other roles' code */
} PoolAccountKind;

typedef struct PoolAccount
{
	PoolAccountKind kind;
	Oid			role;
	int			batches;		/* how many batches it holds */
} PoolAccount;

/* The accounts of the batches the pool's cap counts (pool_tally) */
typedef struct PoolTally
{
	PoolAccount accounts[RETRIES_MAX_SLOTS + 1];	/* room for one more */
	int			n;
} PoolTally;

/*
 * pool_account_of -- the account in t that a batch of role 'role''s calls
 * of the code of 'holder' counts in, added with no batches if new
 */
static PoolAccount *
pool_account_of(PoolTally *t, Oid role, Oid holder)
{
	PoolAccountKind kind = !OidIsValid(holder) || holder == role ? POOL_OWN : POOL_CALLS;
	PoolAccount *a;

	for (a = t->accounts; a < t->accounts + t->n; a++)
	{
		if (a->kind == kind && a->role == role)
			return a;
	}
	a->kind = kind;
	a->role = role;
	a->batches = 0;
	t->n++;
	return a;
}

/*
 * pool_tally -- the accounts of the batches the pool's cap counts, in the
 * workers of the pool (every database's but those in runner places, and
 * but 'except'), into *t.  A batch counts once a worker has taken its
 * place for it (shmem_pool_take, which superusers' batches skip: they are
 * the administrator's) and until it ends.  Caller holds the LWLock.
 */
static void
pool_tally(PoolTally *t, const RetriesWorker *except)
{
	RetriesWorker *w;

	t->n = 0;
	for (int i = -1; (w = shmem_next_worker(InvalidOid, &i)) != NULL;)
	{
		Oid			role = InvalidOid;
		Oid			holder = InvalidOid;

		if (w == except || RETRIES_IS_RUNNER_SLOT(w->slot_no))
			continue;
		SpinLockAcquire(&w->mutex);
		if (w->state == WORKER_RUNNING && w->pool_counted)
		{
			role = w->batch_role;
			holder = w->holder_role;
		}
		SpinLockRelease(&w->mutex);
		if (OidIsValid(role))
			pool_account_of(t, role, holder)->batches++;
	}
}

/*
 * pool_big -- how many batches make an account one of the pool's big
 * ones: a quarter of it (4 of 16), at least 2
 */
static int
pool_big(void)
{
	return Max(2, retries_max_cluster_workers / 4);
}

/*
 * pool_heavy -- how many places of the pool the big accounts of t hold
 * together
 */
static int
pool_heavy(const PoolTally *t)
{
	int			big = pool_big();
	int			heavy = 0;

	for (int i = 0; i < t->n; i++)
		heavy += t->accounts[i].batches >= big ? t->accounts[i].batches : 0;
	return heavy;
}

/*
 * pool_refuses -- may a batch of role 'role''s calls of the code of
 * 'holder' (the role, or the owner of the other role's functions) not
 * begin, beside t's batches?  Not if its account would not be big (a
 * quarter of the pool or more); else, if the big ones would then hold
 * more than all places but one together (shmem_pool_cap): one role's long
 * calls (the twenty-ninth hostile review, t/063 3: they took the whole
 * pool), or two roles' working together (the forty-sixth, t/077:
 * mallory's fifteen and eve's eight took the pool and the places it grew
 * by for the others, and no other role's call ran).  A role below a
 * quarter may begin one as the pool has room; so the last place, and the
 * places the pool grows by while the big ones hold more than half
 * (engine/launcher.c, pool_extra), go to the smaller ones: it takes four
 * roles or more working together to fill it.
 */
static bool
pool_refuses(PoolTally *t, Oid role, Oid holder, int cap)
{
	int			n = t->n;
	PoolAccount *mine;
	bool		refused;

	if (cap == 0)
		return false;
	mine = pool_account_of(t, role, holder);
	mine->batches++;
	refused = mine->batches >= pool_big() && pool_heavy(t) > cap;
	mine->batches--;
	t->n = n;
	return refused;
}

/*
 * pool_tally_now -- the accounts of the batches the pool's cap counts now
 * (pool_tally), into *t.  Takes the LWLock.
 */
static void
pool_tally_now(PoolTally *t)
{
	LWLockAcquire(retries_shared->lock, LW_SHARED);
	pool_tally(t, NULL);
	LWLockRelease(retries_shared->lock);
}

/*
 * shmem_pool_roles -- the roles that may not begin one more batch of calls
 * of their own code now (pool_refuses), into roles[] (room for
 * RETRIES_MAX_SLOTS); returns how many.  Takes the LWLock.
 */
int
shmem_pool_roles(Oid *roles)
{
	PoolTally	t;
	int			cap = shmem_pool_cap();
	int			n = 0;

	pool_tally_now(&t);
	for (int i = 0; i < t.n; i++)
	{
		Oid			role = t.accounts[i].role;

		if (t.accounts[i].kind == POOL_OWN && pool_refuses(&t, role, role, cap))
			roles[n++] = role;
	}
	return n;
}

/*
 * shmem_pool_heavy -- how many places of the pool the big accounts hold
 * together (pool_heavy).  Takes the LWLock.
 */
int
shmem_pool_heavy(void)
{
	PoolTally	t;

	pool_tally_now(&t);
	return pool_heavy(&t);
}

/*
 * shmem_pool_refuses -- may a batch of role 'role''s calls of the code of
 * 'holder' not begin now (pool_refuses)?  Caller holds the LWLock.
 */
bool
shmem_pool_refuses(Oid role, Oid holder)
{
	PoolTally	t;

	pool_tally(&t, NULL);
	return pool_refuses(&t, role, holder, shmem_pool_cap());
}

/*
 * shmem_pool_refused -- which of the n batches of roles[]'s calls of the
 * code of holders[] may not begin now (pool_refuses), into refused[].
 * Takes the LWLock once for all.
 */
void
shmem_pool_refused(const Oid *roles, const Oid *holders, int n, bool *refused)
{
	PoolTally	t;
	int			cap = shmem_pool_cap();

	pool_tally_now(&t);
	for (int i = 0; i < n; i++)
		refused[i] = pool_refuses(&t, roles[i], holders[i], cap);
}

/*
 * shmem_pool_cap -- the most places of the pool (retries.max_cluster_workers)
 * that the big roles hold together (pool_refuses): all but one; 0, no cap,
 * in a pool of two or less, where it would leave every role one batch at a
 * time
 */
int
shmem_pool_cap(void)
{
	return retries_max_cluster_workers < 3 ? 0 : retries_max_cluster_workers - 1;
}

/*
 * shmem_pool_share -- how many places of the pool the smaller roles keep
 * while the big ones hold the most of it: half of it; the pool grows
 * beyond retries.max_cluster_workers for them by as many places as the big
 * ones hold of that half (engine/launcher.c, pool_extra).  0 where
 * shmem_pool_cap sets no cap.
 */
int
shmem_pool_share(void)
{
	return shmem_pool_cap() == 0 ? 0 : retries_max_cluster_workers / 2;
}

/*
 * shmem_pool_take -- may worker 'self' begin a batch of role 'role''s
 * calls (not a superuser's) that runs the code of 'holder' (the role, or
 * the owner of the other role's functions they call), which it has
 * claimed?  Not if pool_refuses says so of the account it counts in: the
 * role's own, or its account of calls of other roles' code ("The pool's
 * cap counts batches in accounts").  If so, it is counted as running one
 * from now (its state RUNNING, its batch the role's and the holder's,
 * counted by the pool's cap), under the exclusive lock, so that two
 * workers that claimed at one instant cannot both take the last place
 * (the thirtieth hostile review, t/064 3); true.  Takes the LWLock.
 */
bool
shmem_pool_take(RetriesWorker *self, Oid role, Oid holder, TimestampTz now)
{
	PoolTally	t;
	bool		refused;

	LWLockAcquire(retries_shared->lock, LW_EXCLUSIVE);
	pool_tally(&t, self);
	refused = pool_refuses(&t, role, holder, shmem_pool_cap());
	if (!refused)
	{
		SpinLockAcquire(&self->mutex);
		if (self->state != WORKER_RUNNING)
			self->since = now;
		self->state = WORKER_RUNNING;
		self->batch_role = role;
		self->holder_role = holder;
		self->pool_counted = true;
		SpinLockRelease(&self->mutex);

		/*
		 * The big roles into the smaller ones' half while databases wait for
		 * the pool: the launcher may start more workers for them now
		 * (pool_extra)
		 */
		if (pool_heavy(&t) + pool_big() > retries_max_cluster_workers - shmem_pool_share() &&
			retries_shared->pool_waiting > 0)
			shmem_set_launcher_latch();
	}
	LWLockRelease(retries_shared->lock);
	return !refused;
}

/*
 * shmem_exit_code -- the exit code of a process whose work is done: 1 in
 * a reserved worker, which PostgreSQL then starts again in its slot; 0
 * elsewhere, for a dynamic worker that is not to be started again
 */
int
shmem_exit_code(void)
{
	return shmem_my_reserve >= 0 ? 1 : 0;
}

/*
 * note_unserved -- database 'dboid' was woken by a commit, and no entry of
 * the database table could be had for it: the launcher, woken, takes it at
 * its next pass, to be given one in turn (engine/revisits.c,
 * revisits_note_woken).  When the list is full (commits in more than
 * RETRIES_MAX_UNSERVED databases without an entry between two passes) the
 * oldest half goes: those wait for their next commit, or their work due
 * (doc/operations.md).  Caller holds the lock exclusively.
 */
static void
note_unserved(Oid dboid)
{
	for (int i = 0; i < retries_shared->nunserved; i++)
		if (retries_shared->unserved[i] == dboid)
			return;
	if (retries_shared->nunserved == RETRIES_MAX_UNSERVED)
	{
		retries_shared->nunserved = RETRIES_MAX_UNSERVED / 2;
		memmove(retries_shared->unserved,
				retries_shared->unserved + RETRIES_MAX_UNSERVED / 2,
				sizeof(Oid) * (RETRIES_MAX_UNSERVED / 2));
	}
	retries_shared->unserved[retries_shared->nunserved++] = dboid;
}

/*
 * shmem_wake_workers -- wake every worker of a database, so that a call
 * or schedule just committed is picked up at once; 'why' is WAKE_CALLS,
 * WAKE_FIRE or both (the flags first: see RetriesWorker.woken; SetLatch()
 * orders the two); 'role' is the role whose calls alone the commit made,
 * InvalidOid if it did anything else
 *
 * A database with no worker that stays (none, or all leaving idle: worker.c,
 * "Workers on demand"; a worker in a runner place claims nothing) is
 * marked woken instead, and the launcher starts one.  A worker that leaves
 * looks at its woken flag under the exclusive lock as it marks itself
 * leaving, so one of the two always sees the other.
 */
void
shmem_wake_workers(Oid dboid, uint32 why, Oid role)
{
	RetriesWorker *w;
	RetriesDatabase *db;
	bool		stays = false;
	bool		free = false;
	bool		commit = (why & (WAKE_REVISIT | WAKE_TURN)) == 0;
	bool		extra_idle = false;
	int			base = 0;

	if (retries_shared == NULL)
		return;
	LWLockAcquire(retries_shared->lock, LW_SHARED);
	for (int i = -1; (w = shmem_next_worker(dboid, &i)) != NULL;)
	{
		if (!w->leaving && !RETRIES_IS_RUNNER_SLOT(w->slot_no))
		{
			stays = true;
			SpinLockAcquire(&w->mutex);
			free |= w->state != WORKER_RUNNING;
			SpinLockRelease(&w->mutex);
			base += w->slot_no < retries_max_workers;
		}
		if (w->latch != NULL)
		{
			pg_atomic_fetch_or_u32(&w->woken, why & ~(WAKE_REVISIT | WAKE_TURN));
			SetLatch(w->latch);
		}
	}
	/* all busy, and an extra left idle: see below */
	if (OidIsValid(dboid) && stays && !free && commit)
	{
		db = shmem_find_database(dboid, false);
		extra_idle = db != NULL && db->extra_idle_until != 0;
	}
	LWLockRelease(retries_shared->lock);

	/*
	 * A commit while its workers are all busy: an extra may start again at
	 * once, though the last one left idle (launcher.c, start_extra)
	 */
	if (extra_idle)
	{
		db = shmem_lock_database(dboid, LW_EXCLUSIVE);
		if (db != NULL)
			db->extra_idle_until = 0;
		LWLockRelease(retries_shared->lock);
		shmem_set_launcher_latch();
	}

	/*
	 * Its workers that stay are all busy, and it may have more: want them
	 * all, so that what committed does not wait for a long call (t/060 5)
	 */
	if (!OidIsValid(dboid) || (stays && (free || base >= retries_max_workers)))
		return;

	db = shmem_lock_database(dboid, LW_EXCLUSIVE);

	/*
	 * No entry: it gave its entry up with nothing to do (evictable_database),
	 * or never had one.  It gets one now, as at CREATE EXTENSION, and the
	 * launcher reads pg_database to list it; or, none to be had, or other
	 * databases waiting for one, a commit's wake is noted for the launcher,
	 * which gives the entries in turns between the databases' owners
	 * (engine/revisits.c, revisits_note_woken: a role committing in a hundred
	 * databases took each entry freed, and another role's waited). The
	 * launcher's own wake tries again itself (a read of pg_database at each
	 * such try: 20 to 80 a second with a hundred databases waiting, the
	 * forty-second hostile review).
	 */
	if (db == NULL && !stays)
	{
		bool		revisit = (why & (WAKE_REVISIT | WAKE_TURN)) != 0;

		db = shmem_find_database(dboid,
								 revisit || retries_shared->entries_waiting == 0);
		if (db != NULL)
			retries_shared->reread_databases = true;
		else if (!revisit)
			note_unserved(dboid);
	}
	if (db != NULL && stays)
		db->wanted = RETRIES_MAX_SLOTS;
	else if (db != NULL && (why & WAKE_REVISIT))
	{
		/*
		 * The launcher's own look: due now, as its last worker left it, so
		 * that one still held back by the pool's cap gets no worker
		 * (launcher.c, still_capped), which a commit's wake would start
		 */
		TimestampTz now = clock_system_now();

		db->idle = false;
		if (db->due_at == 0 || db->due_at > now)
			db->due_at = now;
	}
	else if (db != NULL)
	{
		/* whose calls alone woke it: launcher.c, capped_wake */
		db->woken_for = !db->woken || db->woken_for == role ? role : InvalidOid;
		db->woken = true;
		db->idle = false;
		db->extra_idle_until = 0;
		/* a commit: what it looks after may be let through now */
		db->idle_looks = 0;
	}

	/*
	 * Not the launcher's own wake that found no entry: it waits for one to be
	 * freed (revisits.c), and woke itself into a loop of tries
	 */
	if (db != NULL || !(why & (WAKE_REVISIT | WAKE_TURN)))
		shmem_set_launcher_latch();
	LWLockRelease(retries_shared->lock);
}

/*
 * shmem_db_idle_looks -- how many visits in a row to database dboid looked
 * after something and ran nothing (0 if it has no entry)
 */
int
shmem_db_idle_looks(Oid dboid)
{
	RetriesDatabase *db;
	int			looks;

	db = shmem_lock_database(dboid, LW_SHARED);
	looks = db != NULL ? db->idle_looks : 0;
	LWLockRelease(retries_shared->lock);
	return looks;
}

/*
 * shmem_db_note_look -- a worker leaves database dboid, which it looked
 * after, having run something ('ran') or not
 */
void
shmem_db_note_look(Oid dboid, bool ran)
{
	RetriesDatabase *db;

	db = shmem_lock_database(dboid, LW_EXCLUSIVE);
	if (db != NULL)
		db->idle_looks = ran ? 0 : Min(db->idle_looks + 1, 1000);
	LWLockRelease(retries_shared->lock);
}

/*
 * shmem_db_revisited -- has database dboid, woken by the launcher as its
 * work fell due (engine/revisits.c, revisits_wake_due), an entry now?  If
 * it is one given now ('given'), it had 'looks' visits in a row that ran
 * nothing when it gave its last one up, and, with 'one_worker', wants one
 * worker when found anew; its kept work is due from 'since', when it
 * first fell due (its first worker fires the firings due from then on as
 * on time: engine/steps.c, steps_fire_late_from; 0 for one woken by a
 * commit or not looked at yet, whose firings missed while the server was
 * down stay missed).
 */
bool
shmem_db_revisited(Oid dboid, bool given, int looks, TimestampTz since,
				   bool one_worker)
{
	RetriesDatabase *db;

	db = shmem_lock_database(dboid, LW_EXCLUSIVE);
	if (db != NULL && given)
	{
		db->idle_looks = looks;
		db->revisited = one_worker;
	}
	if (db != NULL && since != 0 && db->due_at != 0 && since < db->due_at)
		db->due_at = since;
	LWLockRelease(retries_shared->lock);
	return db != NULL;
}

/*
 * shmem_take_unserved -- the databases woken by a commit while no entry
 * could be had for them (note_unserved), into dboids[] (room for
 * RETRIES_MAX_UNSERVED); returns how many, and forgets them
 */
int
shmem_take_unserved(Oid *dboids)
{
	int			n;

	LWLockAcquire(retries_shared->lock, LW_EXCLUSIVE);
	n = retries_shared->nunserved;
	memcpy(dboids, retries_shared->unserved, sizeof(Oid) * n);
	retries_shared->nunserved = 0;
	LWLockRelease(retries_shared->lock);
	return n;
}

/*
 * shmem_stop_workers -- stop a database's workers and keep the launcher
 * from starting new ones for pause_secs
 *
 * Used before DROP DATABASE, which fails if other sessions stay connected,
 * and when the extension is dropped.  Waits up to 10 s for the workers to
 * exit: for their slots to be free, and for their processes to be gone
 * from the database, which a worker leaves after it frees its slot (DROP
 * DATABASE ... WITH (FORCE) by a database owner who is not a superuser
 * failed on a worker between the two: "must be a member of the role whose
 * process is being terminated").
 */
void
shmem_stop_workers(Oid dboid, int pause_secs)
{
	RetriesDatabase *db;
	RetriesWorker *w;
	pid_t		pids[RETRIES_MAX_SLOTS];
	int			npids = 0;

	if (retries_shared == NULL)
		return;

	LWLockAcquire(retries_shared->lock, LW_EXCLUSIVE);
	db = shmem_find_database(dboid, true);
	if (db != NULL)
		db->paused_until = TimestampTzPlusMilliseconds(clock_system_now(),
													   pause_secs * 1000);
	for (int i = -1; (w = shmem_next_worker(dboid, &i)) != NULL;)
	{
		/* not itself: a called function may run the command */
		if (w->pid != 0 && w->pid != MyProcPid)
		{
			w->stopped = true;	/* its attempt does not use one up */
			kill(w->pid, SIGTERM);
			pids[npids++] = w->pid;
		}
	}
	LWLockRelease(retries_shared->lock);

	for (int tries = 0; tries < 1000; tries++)
	{
		bool		any = false;

		LWLockAcquire(retries_shared->lock, LW_SHARED);
		for (int i = -1; !any && (w = shmem_next_worker(dboid, &i)) != NULL;)
			any = w->pid != 0 && w->pid != MyProcPid;
		LWLockRelease(retries_shared->lock);
		for (int i = 0; i < npids && !any; i++)
			any = BackendPidGetProc(pids[i]) != NULL;
		if (!any)
			break;
		CHECK_FOR_INTERRUPTS();
		pg_usleep(10000L);
	}
}

/* How many private locks of a class a role's transaction may hold at most */
#define PRIVATE_LOCK_BUCKETS	16

/*
 * keyed_lock_tag -- the tag of a lock of class 'lockclass' of database
 * dboid on 'what' (len bytes): an advisory lock whose fields are a SHA-256
 * of 'what' and the class keyed by the shared memory's secret (see
 * shmem_private_lock), so that pg_locks, which every role reads, tells
 * nothing of what it locks
 */
static void
keyed_lock_tag(LOCKTAG *tag, Oid dboid, uint16 lockclass, const void *what, size_t len)
{
	static const uint8 no_secret[32];
	const uint8 *secret = retries_shared != NULL ? retries_shared->lock_secret
	: no_secret;
	ResourceOwner saved = CurrentResourceOwner;
	ResourceOwner owner = NULL;
	pg_cryptohash_ctx *ctx;
	uint8		digest[PG_SHA256_DIGEST_LENGTH];
	uint32		words[2];

	/* a runner takes its lock outside any transaction: the hash needs one */
	if (CurrentResourceOwner == NULL)
		CurrentResourceOwner = owner = ResourceOwnerCreate(NULL, "retries lock tag");
	ctx = pg_cryptohash_create(PG_SHA256);
	if (ctx == NULL ||
		pg_cryptohash_init(ctx) < 0 ||
		pg_cryptohash_update(ctx, secret, 32) < 0 ||
		pg_cryptohash_update(ctx, what, len) < 0 ||
		pg_cryptohash_update(ctx, (const uint8 *) &lockclass, sizeof(lockclass)) < 0 ||
		pg_cryptohash_final(ctx, digest, sizeof(digest)) < 0)
		elog(ERROR, "retries: could not hash a lock's name");
	pg_cryptohash_free(ctx);
	if (owner != NULL)
	{
		CurrentResourceOwner = saved;
		ResourceOwnerDelete(owner);
	}
	memcpy(words, digest, sizeof(words));
	SET_LOCKTAG_ADVISORY(*tag, dboid, words[0], words[1], lockclass);
}

/*
 * private_lock_tag -- the tag of a private lock of class 'lockclass' of role
 * 'role' on 'which' (a name's bucket, or its hash): see shmem_private_lock
 */
static void
private_lock_tag(LOCKTAG *tag, uint16 lockclass, Oid role, uint32 which)
{
	uint32		what[2] = {role, which};

	keyed_lock_tag(tag, MyDatabaseId, lockclass, what, sizeof(what));
}

/*
 * shmem_runner_lock_tag -- the tag of a runner's lock of class 'lockclass'
 * on call 'call_id' of database dboid (SET_LOCKTAG_RUNNER): keyed as a
 * private lock's
 */
void
shmem_runner_lock_tag(LOCKTAG *tag, Oid dboid, int64 call_id, uint16 lockclass)
{
	keyed_lock_tag(tag, dboid, lockclass, &call_id, sizeof(call_id));
}

/*
 * shmem_private_lock -- take, as the current transaction's, a lock in mode
 * 'mode' of class 'lockclass' on the name 'name' (len bytes) of role
 * 'role': a key of its calls, or one of its events
 *
 * The lock is one of PRIVATE_LOCK_BUCKETS of the role and class: the
 * name's bucket.  Each lock held takes an entry of the server's lock table
 * until the transaction ends, so a lock per name would let one transaction
 * that makes calls waiting on 20,000 events fill it, and fail other roles'
 * transactions; with buckets a transaction holds at most that many per
 * role and class.  Two names of a role in one bucket only wait for each
 * other.  The lock is an advisory lock of this database, of a class
 * (field4) that SQL's advisory functions never use, and pg_locks shows its
 * tag to every role.  So the tag is not the bucket, nor a hash that a role
 * could compute, but a SHA-256 of the role, the class and the bucket keyed
 * by a secret that this shared memory drew when it was made.  Without
 * shared memory (the library not preloaded) the secret is all zero.
 */
void
shmem_private_lock(uint16 lockclass, Oid role, const char *name, int len,
				   LOCKMODE mode)
{
	LOCKTAG		tag;

	private_lock_tag(&tag, lockclass, role,
					 hash_bytes((const unsigned char *) name, len) % PRIVATE_LOCK_BUCKETS);
	(void) LockAcquire(&tag, mode, false, false);
}

/*
 * shmem_try_name_lock -- take, as the current transaction's, if no other
 * transaction holds it, an exclusive lock of class 'lockclass' on the name
 * 'name' (len bytes) of role 'role', its tag made as shmem_private_lock's
 * but of the name's own hash, not its bucket: whether it was taken.  One
 * lock per name, for a caller that takes few in a transaction (a worker's
 * batch, for the keys of the calls it starts: key_window.c).
 */
bool
shmem_try_name_lock(uint16 lockclass, Oid role, const char *name, int len)
{
	LOCKTAG		tag;

	private_lock_tag(&tag, lockclass, role, hash_bytes((const unsigned char *) name, len));
	return LockAcquire(&tag, ExclusiveLock, false, true) != LOCKACQUIRE_NOT_AVAIL;
}

/*
 * shmem_call_is_running -- is some worker running this call right now?
 */
bool
shmem_call_is_running(int64 call_id)
{
	bool		running = false;
	RetriesWorker *w;

	if (retries_shared == NULL)
		return false;
	LWLockAcquire(retries_shared->lock, LW_SHARED);
	for (int i = -1; !running && (w = shmem_next_worker(MyDatabaseId, &i)) != NULL;)
	{
		SpinLockAcquire(&w->mutex);
		running = w->current_call == call_id;
		SpinLockRelease(&w->mutex);
	}
	LWLockRelease(retries_shared->lock);
	return running;
}
