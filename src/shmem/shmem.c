/*-------------------------------------------------------------------------
 *
 * shmem.c
 *	  Shared state of the launcher and workers, and what backends do with
 *	  it: wake workers, stop them, and show them in retries.workers.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <signal.h>
#include <unistd.h>

#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/shmem.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "base/base.h"
#include "base/compat.h"
#include "core/rate.h"
#include "shmem/shmem.h"

RetriesShared *retries_shared = NULL;

/* MaxBackends entries, right after *retries_shared */
static RetriesBackendWait *backend_waits = NULL;

/* retries.max_rate_limits of them, after backend_waits (see rate_slot) */
static RetriesRateSlot *rate_slots = NULL;

static shmem_startup_hook_type prev_shmem_startup_hook = NULL;


/*
 * shared_size -- bytes of shared memory: RetriesShared, then a
 * RetriesBackendWait per backend, then retries.max_rate_limits rate slots
 */
static Size
backend_waits_size(void)
{
	return MAXALIGN(mul_size(MaxBackends, sizeof(RetriesBackendWait)));
}

static Size
shared_size(void)
{
	return add_size(add_size(MAXALIGN(sizeof(RetriesShared)), backend_waits_size()),
					mul_size(retries_max_rate_limits, sizeof(RetriesRateSlot)));
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
	backend_waits = (RetriesBackendWait *)
		((char *) retries_shared + MAXALIGN(sizeof(RetriesShared)));
	rate_slots = (RetriesRateSlot *)
		((char *) backend_waits + backend_waits_size());
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
			SpinLockInit(&backend_waits[i].mutex);
		retries_shared->started_at = GetCurrentTimestamp();
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
 * shmem_find_database -- the entry of a database, optionally created;
 * NULL if absent (or no room).  Caller holds the lock exclusively to create.
 */
RetriesDatabase *
shmem_find_database(Oid dboid, bool create)
{
	RetriesDatabase *free_entry = NULL;

	for (int i = 0; i < RETRIES_MAX_DATABASES; i++)
	{
		RetriesDatabase *db = &retries_shared->dbs[i];

		if (db->dboid == dboid)
			return db;
		if (free_entry == NULL && !OidIsValid(db->dboid))
			free_entry = db;
	}
	if (!create || free_entry == NULL)
		return NULL;
	memset(free_entry, 0, sizeof(RetriesDatabase));
	free_entry->dboid = dboid;
	free_entry->state = DB_UNKNOWN; /* a new entry: no transition */
	return free_entry;
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
	db->state = state;
}

/*
 * shmem_copy_worker -- a consistent copy of a worker slot; caller holds
 * the lock (shared is enough), which keeps the slot's assignment still
 */
void
shmem_copy_worker(int slot, RetriesWorker *copy)
{
	RetriesWorker *w = &retries_shared->workers[slot];

	SpinLockAcquire(&w->mutex);
	memcpy(copy, w, sizeof(RetriesWorker));
	SpinLockRelease(&w->mutex);
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
	if (retries_shared->launcher_latch)
		SetLatch(retries_shared->launcher_latch);
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
	for (int i = 0; i < RETRIES_MAX_DATABASES; i++)
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
	for (int i = 0; i < RETRIES_MAX_DATABASES; i++)
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
	LWLockAcquire(retries_shared->lock, LW_EXCLUSIVE);
	db = shmem_find_database(dboid, false);
	if (db != NULL)
		db->names_generation++;
	LWLockRelease(retries_shared->lock);
	shmem_wake_workers(dboid);
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

	LWLockAcquire(retries_shared->lock, LW_SHARED);
	db = shmem_find_database(dboid, false);
	if (db != NULL)
		generation = db->names_generation;
	LWLockRelease(retries_shared->lock);
	return generation;
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
	for (int i = 0; i < RETRIES_MAX_DATABASES && pid == 0; i++)
		if (retries_shared->restores[i].dboid == dboid)
			pid = retries_shared->restores[i].pid;
	LWLockRelease(retries_shared->lock);
	return pid;
}

/*
 * shmem_wake_workers -- wake every worker of a database, so that a call
 * or schedule just committed is picked up at once (the flag first: see
 * RetriesWorker.woken; SetLatch() orders the two)
 */
void
shmem_wake_workers(Oid dboid)
{
	RetriesWorker *w;

	if (retries_shared == NULL)
		return;
	LWLockAcquire(retries_shared->lock, LW_SHARED);
	for (int i = -1; (w = shmem_next_worker(dboid, &i)) != NULL;)
	{
		if (w->latch != NULL)
		{
			pg_atomic_write_u32(&w->woken, 1);
			SetLatch(w->latch);
		}
	}
	LWLockRelease(retries_shared->lock);
}

/*
 * shmem_stop_workers -- stop a database's workers and keep the launcher
 * from starting new ones for pause_secs
 *
 * Used before DROP DATABASE, which fails if other sessions stay connected,
 * and when the extension is dropped.  Waits up to 10 s for the workers to
 * exit.
 */
void
shmem_stop_workers(Oid dboid, int pause_secs)
{
	RetriesDatabase *db;
	RetriesWorker *w;

	if (retries_shared == NULL)
		return;

	LWLockAcquire(retries_shared->lock, LW_EXCLUSIVE);
	db = shmem_find_database(dboid, true);
	if (db != NULL)
		db->paused_until = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
													   pause_secs * 1000);
	for (int i = -1; (w = shmem_next_worker(dboid, &i)) != NULL;)
	{
		/* not itself: a called function may run the command */
		if (w->pid != 0 && w->pid != MyProcPid)
			kill(w->pid, SIGTERM);
	}
	LWLockRelease(retries_shared->lock);

	for (int tries = 0; tries < 1000; tries++)
	{
		bool		any = false;

		LWLockAcquire(retries_shared->lock, LW_SHARED);
		for (int i = -1; !any && (w = shmem_next_worker(dboid, &i)) != NULL;)
			any = w->pid != 0 && w->pid != MyProcPid;
		LWLockRelease(retries_shared->lock);
		if (!any)
			break;
		CHECK_FOR_INTERRUPTS();
		pg_usleep(10000L);
	}
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

/*
 * gate_running -- how many workers of this database run an attempt of
 * limited function fnoid; the caller holds the LWLock
 */
static int
gate_running(Oid fnoid)
{
	int			n = 0;

	RetriesWorker *w;

	for (int i = -1; (w = shmem_next_worker(MyDatabaseId, &i)) != NULL;)
	{
		if (w->gate_fn == fnoid)
			n++;
	}
	return n;
}

/*
 * shmem_gate_running -- how many workers of this database run an attempt
 * of limited function fnoid now (see flow.c)
 */
int
shmem_gate_running(Oid fnoid)
{
	int			n;

	LWLockAcquire(retries_shared->lock, LW_SHARED);
	n = gate_running(fnoid);
	LWLockRelease(retries_shared->lock);
	return n;
}

/*
 * rate_idle -- does a rate slot hold nothing back at 'now' (every start of
 * its burst allowed)?  A free slot is idle too.
 */
static bool
rate_idle(const RetriesRateSlot *r, TimestampTz now)
{
	return !OidIsValid(r->fn) ||
		rate_room(&r->ring, &r->rate, now, NULL) == rate_burst(&r->rate);
}

/*
 * rate_slot -- the rate slot of fnoid in this database, or, if 'create', a
 * new one (a free slot, or one whose rate no longer holds anything back);
 * NULL if there is none, or if the function's owner (unless InvalidOid)
 * holds its quota of slots that still hold something back already (an
 * eighth of them, so that no role can take them all from the others), and
 * then *full is set.  The caller holds the LWLock (exclusively to create).
 *
 * A slot of the function that holds nothing back counts as a new one: its
 * function waits while the owner's other functions hold the quota, as a
 * function without a slot does.  (Handing it out regardless let a role's
 * functions run past the quota, one per old slot of its.)
 *
 * A new slot counts a whole burst of starts at the time this shared memory
 * was made: starts before a crash restart or a server restart are
 * forgotten, and may have been as many as the rate allows just before it.
 * So after a restart, a rate-limited function waits one spacing of its
 * rate (at most its window) before its first start.
 */
static RetriesRateSlot *
rate_slot(Oid fnoid, Oid owner, const RateSpec *rate, TimestampTz now, bool create,
		  bool *full)
{
	RetriesRateSlot *mine = NULL;
	RetriesRateSlot *spare = NULL;
	int			owned = 0;

	for (int i = 0; i < retries_max_rate_limits; i++)
	{
		RetriesRateSlot *r = &rate_slots[i];
		bool		idle;

		if (r->fn == fnoid && r->dboid == MyDatabaseId)
		{
			mine = r;
			continue;
		}
		idle = rate_idle(r, now);
		if (idle && spare == NULL)
			spare = r;
		if (!idle && OidIsValid(owner) && r->owner == owner)
			owned++;
	}
	*full = OidIsValid(owner) &&
		owned >= Max(1, retries_max_rate_limits / RATE_QUOTA_SHARE);
	if (mine != NULL && !rate_idle(mine, now))
		return mine;
	if (*full)
		return NULL;
	if (mine != NULL)
		return mine;
	if (!create || spare == NULL)
		return NULL;
	spare->dboid = MyDatabaseId;
	spare->fn = fnoid;
	spare->owner = owner;
	spare->rate = *rate;
	rate_reset(&spare->ring, rate, retries_shared->started_at);
	return spare;
}

/*
 * shmem_gate_rate_room -- how many attempts of fnoid (owned by 'owner')
 * 'rate' lets start at 'now', and when the next beyond those may (*next);
 * none while the owner holds its quota of rate slots (then *next is a
 * second away, when the release looks again)
 */
int32
shmem_gate_rate_room(Oid fnoid, Oid owner, const RateSpec *rate, TimestampTz now,
					 TimestampTz *next)
{
	RetriesRateSlot *r;
	RateRing	fresh;
	int32		room;
	int64		at;
	bool		full;

	LWLockAcquire(retries_shared->lock, LW_SHARED);
	r = rate_slot(fnoid, owner, rate, now, false, &full);
	if (r == NULL && full)
	{
		room = 0;
		at = now + USECS_PER_SEC;
	}
	else if (r == NULL)
	{
		rate_reset(&fresh, rate, retries_shared->started_at);
		room = rate_room(&fresh, rate, now, &at);
	}
	else
		room = rate_room(&r->ring, rate, now, &at);
	LWLockRelease(retries_shared->lock);
	*next = (TimestampTz) at;
	return room;
}

/*
 * shmem_gate_enter -- worker 'me' may start an attempt of fnoid, which
 * at most max_running may run at once (0: any number), at most
 * max_per_key of one limit_key (0: any number; 'keyed' says whether the
 * call has a key, whose hash is 'key'), and only as often as 'rate' lets
 * (NULL: any), if there is room for it now: then it counts among them
 * (until shmem_gate_leave; its start, for the rate) and true is returned
 *
 * The count and the entry are one step under the exclusive LWLock, so two
 * workers never both take the last room.  If shared memory has no room to
 * follow another rate (retries.max_rate_limits functions held back by
 * theirs at once, or the owner's share of them: see rate_slot), the
 * attempt does not start: the bound comes first.  'owner' owns fnoid.
 */
bool
shmem_gate_enter(RetriesWorker *me, Oid fnoid, int32 max_running,
				 bool keyed, int64 key, int32 max_per_key, const RateSpec *rate,
				 Oid owner)
{
	int			running = 0;
	int			running_key = 0;
	bool		room;
	RetriesWorker *w;

	LWLockAcquire(retries_shared->lock, LW_EXCLUSIVE);
	for (int i = -1; (w = shmem_next_worker(MyDatabaseId, &i)) != NULL;)
	{
		if (w->gate_fn != fnoid)
			continue;
		running++;
		if (keyed && w->gate_keyed && w->gate_key == key)
			running_key++;
	}
	room = (max_running == 0 || running < max_running) &&
		(!keyed || max_per_key == 0 || running_key < max_per_key);
	if (room && rate != NULL)
	{
		TimestampTz now = GetCurrentTimestamp();
		bool		full;
		RetriesRateSlot *r = rate_slot(fnoid, owner, rate, now, true, &full);

		room = r != NULL;
		if (room)
		{
			r->rate = *rate;
			room = rate_admit(&r->ring, rate, now, NULL);
		}
	}
	if (room)
	{
		me->gate_fn = fnoid;
		me->gate_keyed = keyed;
		me->gate_key = key;
	}
	LWLockRelease(retries_shared->lock);
	return room;
}

/*
 * shmem_gate_key_counts -- the key hashes of the attempts of fnoid that
 * run now in this database with a limit_key, each once, into *keys, and
 * how many run of each into *counts (both palloc'd); returns how many keys
 */
int
shmem_gate_key_counts(Oid fnoid, int64 **keys, int32 **counts)
{
	int			n = 0;
	RetriesWorker *w;

	*keys = palloc(sizeof(int64) * RETRIES_MAX_SLOTS);
	*counts = palloc(sizeof(int32) * RETRIES_MAX_SLOTS);
	LWLockAcquire(retries_shared->lock, LW_SHARED);
	for (int i = -1; (w = shmem_next_worker(MyDatabaseId, &i)) != NULL;)
	{
		int			k;

		if (w->gate_fn != fnoid || !w->gate_keyed)
			continue;
		for (k = 0; k < n && (*keys)[k] != w->gate_key; k++)
			;
		if (k == n)
		{
			(*keys)[n] = w->gate_key;
			(*counts)[n++] = 0;
		}
		(*counts)[k]++;
	}
	LWLockRelease(retries_shared->lock);
	return n;
}

/*
 * shmem_gate_leave -- worker 'me' has ended its attempt of a limited
 * function
 */
void
shmem_gate_leave(RetriesWorker *me)
{
	if (!OidIsValid(me->gate_fn))
		return;
	LWLockAcquire(retries_shared->lock, LW_EXCLUSIVE);
	me->gate_fn = InvalidOid;
	me->gate_keyed = false;
	LWLockRelease(retries_shared->lock);
}

/*
 * shmem_cancel_wait_begin -- announce that this backend's cancel() is
 * about to wait for the row of call_id (of the current database), so that
 * no worker starts another attempt of it meanwhile
 *
 * Without this, a worker that committed an attempt's retry could claim the
 * call again, before the waiting cancel() got to the row, whenever the
 * retry was due sooner than the cancel's backend ran (a short min_delay, a
 * busy machine): the call got a further attempt after all.
 */
void
shmem_cancel_wait_begin(int64 call_id)
{
	RetriesBackendWait *wait;

	if (retries_shared == NULL || retries_backend_index() < 0)
		return;
	wait = &backend_waits[retries_backend_index()];
	LWLockAcquire(retries_shared->lock, LW_EXCLUSIVE);
	if (wait->call_id == 0)
		pg_atomic_fetch_add_u32(&retries_shared->ncancel_waits, 1);
	wait->dboid = MyDatabaseId;
	wait->call_id = call_id;
	LWLockRelease(retries_shared->lock);
}

/*
 * shmem_cancel_wait_end -- this backend's cancel() no longer waits
 */
void
shmem_cancel_wait_end(void)
{
	RetriesBackendWait *wait;

	if (retries_shared == NULL || retries_backend_index() < 0)
		return;
	wait = &backend_waits[retries_backend_index()];
	LWLockAcquire(retries_shared->lock, LW_EXCLUSIVE);
	if (wait->call_id != 0)
		pg_atomic_fetch_sub_u32(&retries_shared->ncancel_waits, 1);
	wait->dboid = InvalidOid;
	wait->call_id = 0;
	LWLockRelease(retries_shared->lock);
}

/*
 * shmem_cancel_waiting -- is a cancel() waiting for this call (of the
 * current database)?  Workers ask before each attempt; the common answer,
 * no cancel() waiting anywhere, costs one read.
 */
bool
shmem_cancel_waiting(int64 call_id)
{
	bool		waiting = false;

	if (retries_shared == NULL)
		return false;
	pg_memory_barrier();
	if (pg_atomic_read_u32(&retries_shared->ncancel_waits) == 0)
		return false;
	LWLockAcquire(retries_shared->lock, LW_SHARED);
	for (int i = 0; i < MaxBackends && !waiting; i++)
		waiting = backend_waits[i].call_id == call_id &&
			backend_waits[i].dboid == MyDatabaseId;
	LWLockRelease(retries_shared->lock);
	return waiting;
}

/*
 * shmem_finish_wait_begin -- announce that this backend waits for the end
 * of call_id (of the current database), so that the commit that finishes
 * it sets this backend's latch (see shmem_wake_finish_waiters); false if
 * there is no shared memory to announce it in (the library is not
 * preloaded)
 *
 * Call it before looking at the call: a commit that comes after the look
 * then sees the entry.
 */
bool
shmem_finish_wait_begin(int64 call_id)
{
	RetriesBackendWait *wait;

	if (retries_shared == NULL || retries_backend_index() < 0)
		return false;
	wait = &backend_waits[retries_backend_index()];
	SpinLockAcquire(&wait->mutex);
	if (wait->finish_call_id == 0)
		pg_atomic_fetch_add_u32(&retries_shared->nfinish_waits, 1);
	wait->finish_dboid = MyDatabaseId;
	wait->finish_call_id = call_id;
	wait->latch = MyLatch;
	SpinLockRelease(&wait->mutex);
	pg_memory_barrier();
	return true;
}

/*
 * shmem_finish_wait_end -- this backend no longer waits for a call
 */
void
shmem_finish_wait_end(void)
{
	RetriesBackendWait *wait;

	if (retries_shared == NULL || retries_backend_index() < 0)
		return;
	wait = &backend_waits[retries_backend_index()];
	SpinLockAcquire(&wait->mutex);
	if (wait->finish_call_id != 0)
		pg_atomic_fetch_sub_u32(&retries_shared->nfinish_waits, 1);
	wait->finish_dboid = InvalidOid;
	wait->finish_call_id = 0;
	wait->latch = NULL;
	SpinLockRelease(&wait->mutex);
}

/*
 * shmem_wake_finish_waiters -- set the latch of every backend waiting for
 * the end of one of the n calls of 'ids' (of the current database), which
 * a transaction just committed as finished
 *
 * Called after the commit; when nobody waits, which is the common case,
 * it costs one read.
 */
void
shmem_wake_finish_waiters(const int64 *ids, int n)
{
	if (retries_shared == NULL || n == 0)
		return;
	pg_memory_barrier();
	if (pg_atomic_read_u32(&retries_shared->nfinish_waits) == 0)
		return;
	for (int i = 0; i < MaxBackends; i++)
	{
		RetriesBackendWait *wait = &backend_waits[i];
		int64		call_id;
		Latch	   *latch = NULL;

		SpinLockAcquire(&wait->mutex);
		call_id = wait->finish_dboid == MyDatabaseId ? wait->finish_call_id : 0;
		if (call_id != 0)
		{
			for (int j = 0; j < n && latch == NULL; j++)
				if (ids[j] == call_id)
					latch = wait->latch;
		}
		SpinLockRelease(&wait->mutex);
		if (latch != NULL)
			SetLatch(latch);
	}
}
