/*-------------------------------------------------------------------------
 *
 * slots.c
 *	  A worker's own slot, as the worker changes it: taking and freeing
 *	  it, what it is doing, its counters, its database's count of wanted
 *	  workers when it is busy or done, and its leaving.
 *
 * The launcher assigns a slot (in_use, dboid, slot_no, generation) under
 * the shared lock; the worker makes it its own (shmem_slot_take) and frees
 * it (shmem_slot_release), under the lock too.  What changes with every
 * attempt (state, current call, roles, counters, busy time) is behind the
 * slot's spinlock only, so that attempts of different workers never wait
 * for each other (shmem_slot_set_state).  The engine's wslot.c is the
 * worker's side of all of it; the rules for leaving are engine/leave.c's.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/latch.h"
#include "storage/proc.h"

#include "base/base.h"
#include "shmem/shmem.h"

/*
 * shmem_slot_take -- make slot 'me', which the launcher assigned with
 * 'generation', this process's own (its pid and latch); false if the
 * launcher has given up on it meanwhile (and may have assigned it to
 * another worker)
 */
bool
shmem_slot_take(RetriesWorker *me, uint32 generation, TimestampTz now)
{
	bool		mine;

	LWLockAcquire(retries_shared->lock, LW_EXCLUSIVE);
	mine = me->in_use && me->generation == generation && me->pid == 0;
	if (mine)
	{
		me->pid = MyProcPid;
		me->latch = &MyProc->procLatch;
		SpinLockAcquire(&me->mutex);
		me->since = now;
		me->in_runner = false;
		SpinLockRelease(&me->mutex);
	}
	LWLockRelease(retries_shared->lock);
	return mine;
}

/*
 * shmem_slot_release -- free this process's slot 'me', and wake the
 * launcher; returns whether it was a runner place marked lost (its attempt
 * may be charged now)
 */
bool
shmem_slot_release(RetriesWorker *me)
{
	bool		lost;

	LWLockAcquire(retries_shared->lock, LW_EXCLUSIVE);
	Assert(me->pid == MyProcPid);
	me->in_use = false;
	me->pid = 0;
	me->latch = NULL;
	SpinLockAcquire(&me->mutex);
	me->current_call = 0;
	me->in_runner = false;
	SpinLockRelease(&me->mutex);
	shmem_set_launcher_latch();
	lost = shmem_runner_place_was_lost(me);
	LWLockRelease(retries_shared->lock);
	return lost;
}

/*
 * shmem_slot_set_state -- publish what worker 'me' (this process's slot)
 * is doing: 'state', call 'call_id' of 'role', in a batch that holds
 * 'holder' (kept while running unless given); returns whether its busy
 * time began (it went from another state to running), and into *ended
 * whether it left running or changed call while not running
 *
 * The busy time: a busy period starts when the worker goes from another
 * state to running (the first attempt of a batch) and ends when it leaves
 * running.  Each change of state or call reads the clock anyway, for
 * 'since', so the busy time costs no clock read of its own.  The slot is
 * this process's: its fields are read without the spinlock, which guards
 * them from the readers only.
 */
bool
shmem_slot_set_state(RetriesWorker *me, RetriesWorkerState state,
					 int64 call_id, Oid role, Oid holder, bool *ended)
{
	bool		changed = me->state != state || me->current_call != call_id;
	TimestampTz now = changed ? clock_system_now() : 0;
	bool		began = false;

	SpinLockAcquire(&me->mutex);
	if (changed)
	{
		me->since = now;
		began = state == WORKER_RUNNING && me->busy_since == 0;
		if (began)
			me->busy_since = now;
		if (began && me->stretch_since == 0)
			me->stretch_since = now;
		else if (state != WORKER_RUNNING && me->busy_since != 0)
		{
			/* a clock set back must not make the counter go back */
			me->busy_us += Max(now - me->busy_since, 0);
			me->busy_since = 0;
		}
		if (state != WORKER_RUNNING && me->state == WORKER_RUNNING)
		{
			me->last_role = me->holder_role;
			me->last_batch_role = me->batch_role;
		}
	}
	me->state = state;
	me->current_call = call_id;
	me->current_role = role;
	if (OidIsValid(holder) || state != WORKER_RUNNING)
	{
		/* a batch that ended, or another role's: no longer the pool's */
		if (state != WORKER_RUNNING || role != me->batch_role)
			me->pool_counted = false;
		me->holder_role = holder;
		me->batch_role = role;
	}
	SpinLockRelease(&me->mutex);
	*ended = changed && state != WORKER_RUNNING;
	return began;
}

/*
 * shmem_slot_count_call -- add an attempt to worker 'me''s counters
 * (retries.workers)
 */
void
shmem_slot_count_call(RetriesWorker *me, bool succeeded)
{
	SpinLockAcquire(&me->mutex);
	me->calls_run++;
	if (!succeeded)
		me->errors++;
	SpinLockRelease(&me->mutex);
}

/*
 * shmem_slot_rest -- this worker has no batch to run next: it sleeps until
 * woken or its work is due
 */
void
shmem_slot_rest(RetriesWorker *me)
{
	SpinLockAcquire(&me->mutex);
	me->stretch_since = 0;
	SpinLockRelease(&me->mutex);
}

/*
 * shmem_workers_all_busy -- a worker of database 'dboid' has begun a
 * batch: if its workers are all busy, wake the launcher (to start an extra
 * one once they count as held, with retries.max_extra_workers above 0),
 * and, with fewer workers than it may have, raise its count of wanted ones
 * (workers on demand).  Returns what the count was before, or -1 if it was
 * not raised (for shmem_workers_batch_done).
 */
int
shmem_workers_all_busy(Oid dboid, TimestampTz now)
{
	RetriesHeld held;
	RetriesDatabase *db;
	bool		more;
	int			raised_from = -1;

	LWLockAcquire(retries_shared->lock, LW_SHARED);
	shmem_workers_held(dboid, retries_max_workers, now, &held);
	if (retries_max_extra_workers > 0 && held.base_busy >= retries_max_workers)
		shmem_set_launcher_latch();
	db = shmem_find_database(dboid, false);
	more = db != NULL && held.base_busy >= held.base &&
		held.base < retries_max_workers && db->wanted < retries_max_workers;
	LWLockRelease(retries_shared->lock);
	if (!more)
		return -1;

	db = shmem_lock_database(dboid, LW_EXCLUSIVE);
	if (db != NULL)
	{
		raised_from = db->wanted;
		db->wanted = RETRIES_MAX_SLOTS;
	}
	shmem_set_launcher_latch();
	LWLockRelease(retries_shared->lock);
	return raised_from;
}

/*
 * shmem_workers_batch_done -- a worker of database 'dboid' whose batch
 * raised the count of wanted workers from 'raised_from'
 * (shmem_workers_all_busy) has ended it: if no other worker has come
 * since, lower it again
 */
void
shmem_workers_batch_done(Oid dboid, int raised_from, TimestampTz now)
{
	RetriesHeld held;
	RetriesDatabase *db;

	LWLockAcquire(retries_shared->lock, LW_EXCLUSIVE);
	shmem_workers_held(dboid, retries_max_workers, now, &held);
	db = shmem_find_database(dboid, false);
	if (db != NULL && held.base <= 1 && db->wanted == RETRIES_MAX_SLOTS)
		db->wanted = Max(raised_from, 1);
	LWLockRelease(retries_shared->lock);
}

/*
 * shmem_worker_holds -- what holds each worker of database 'dboid' other
 * than 'me', outside the runner places, that runs a batch, or whose last
 * batch ended at 'recent' or later (0: none counts), into holds[], once
 * per worker; returns how many.  Read without the shared lock (each slot
 * under its spinlock): a hint.
 */
int
shmem_worker_holds(const RetriesWorker *me, Oid dboid, TimestampTz recent,
				   RetriesHold *holds)
{
	int			n = 0;

	for (int i = 0; i < RETRIES_MAX_SLOTS; i++)
	{
		RetriesWorker *w = &retries_shared->workers[i];
		RetriesHold h = {InvalidOid, InvalidOid};

		if (w == me || !w->in_use || w->dboid != dboid ||
			RETRIES_IS_RUNNER_SLOT(w->slot_no))
			continue;
		SpinLockAcquire(&w->mutex);
		if (w->state == WORKER_RUNNING)
		{
			h.role = w->batch_role;
			h.holder = w->holder_role;
		}
		else if (recent != 0 && w->since >= recent)
		{
			h.role = w->last_batch_role;
			h.holder = w->last_role;
		}
		SpinLockRelease(&w->mutex);
		if (OidIsValid(h.holder))
			holds[n++] = h;
	}
	return n;
}

/*
 * shmem_pool_contended -- do databases with due work wait for room in the
 * pool of workers (retries.max_cluster_workers), or do more workers run
 * than it allows now (pool_over)?
 */
bool
shmem_pool_contended(void)
{
	bool		contended;

	LWLockAcquire(retries_shared->lock, LW_SHARED);
	contended = retries_shared->pool_waiting > 0 || retries_shared->pool_over;
	LWLockRelease(retries_shared->lock);
	return contended;
}

/*
 * shmem_set_entries_waiting -- 'waiting' databases with work wait for an
 * entry of the database table (engine/revisits.c); while any does, the
 * idle workers are woken, to leave their databases idle if they can
 */
void
shmem_set_entries_waiting(int waiting)
{
	LWLockAcquire(retries_shared->lock, LW_EXCLUSIVE);
	if (waiting > 0 && retries_shared->entries_waiting == 0)
		shmem_wake_idle_workers();
	retries_shared->entries_waiting = waiting;
	LWLockRelease(retries_shared->lock);
}

/*
 * shmem_forget_far_noted -- no entry's due time is kept by the launcher
 * (a new launcher's list is empty)
 */
void
shmem_forget_far_noted(void)
{
	LWLockAcquire(retries_shared->lock, LW_EXCLUSIVE);
	for (int i = 0; i < retries_max_databases; i++)
		shmem_dbs[i].far_noted = false;
	LWLockRelease(retries_shared->lock);
}

/*
 * shmem_entries_contended -- do databases with work wait for an entry of
 * the database table (retries.max_databases), which an idle one's gives
 * up (evictable_database)?
 */
bool
shmem_entries_contended(void)
{
	bool		contended;

	LWLockAcquire(retries_shared->lock, LW_SHARED);
	contended = retries_shared->entries_waiting > 0;
	LWLockRelease(retries_shared->lock);
	return contended;
}

/*
 * extra_idle_until -- until when no extra worker starts in a database that
 * an idle one left, its work next due at 'due' (0: none known): then, or
 * RETRIES_EXTRA_IDLE_MS on, whichever comes first
 */
static TimestampTz
extra_idle_until(TimestampTz due)
{
	TimestampTz latest = TimestampTzPlusMilliseconds(clock_system_now(),
													 RETRIES_EXTRA_IDLE_MS);

	return due == 0 || due > latest ? latest : due;
}

/*
 * shmem_slot_leave -- worker 'me' leaves its database, which is due again
 * at 'due_at' if no other worker of it stays, unless a commit woke it
 * meanwhile (without 'for_others') or it is the last free worker of a
 * database whose others are busy while no database waits for the pool:
 * then false, and nothing changed.  If it leaves, its slot says so, the
 * database's count of wanted workers is the others', and its due calls
 * all of 'capped_role' (if valid) of the code of 'capped_holder', held
 * back by the pool's cap until
 * 'capped_until', start no worker meanwhile (engine/leave.c says why).
 * With 'idle_until' (not 0: nothing due before then, nothing to look
 * after; DT_NOEND if nothing is due at all), the last worker to leave
 * marks the database idle: its entry may go to another database until a
 * commit there wakes it (evictable_database), or, once the launcher keeps
 * it (far_noted), until its work is due ('idle_look': only a look at what
 * its workers look after is due then, engine/leave.c).
 * The caller exits once it returns true.
 */
bool
shmem_slot_leave(RetriesWorker *me, TimestampTz due_at, bool for_others,
				 Oid capped_role, Oid capped_holder, TimestampTz capped_until,
				 TimestampTz idle_until, bool idle_look)
{
	RetriesDatabase *db;
	RetriesWorker *w;
	int			others = 0;
	int			others_free = 0;

	LWLockAcquire(retries_shared->lock, LW_EXCLUSIVE);
	if (!for_others && pg_atomic_read_u32(&me->woken) != 0)
	{
		LWLockRelease(retries_shared->lock);
		return false;
	}
	for (int i = -1; (w = shmem_next_worker(me->dboid, &i)) != NULL;)
	{
		bool		free;

		if (w == me || w->leaving || w->slot_no >= retries_max_workers)
			continue;
		SpinLockAcquire(&w->mutex);
		free = w->state != WORKER_RUNNING;
		SpinLockRelease(&w->mutex);
		others++;
		others_free += free;
	}
	if (others > 0 && others_free == 0 && retries_shared->pool_waiting == 0 &&
		!retries_shared->pool_over)
	{
		LWLockRelease(retries_shared->lock);
		return false;
	}
	me->leaving = true;
	db = shmem_find_database(me->dboid, false);
	if (db != NULL)
	{
		db->wanted = others;
		/* the last, or the last free: the launcher starts one at due_at */
		if (others == 0 || others_free == 0)
			db->due_at = due_at;
		if (me->slot_no >= retries_max_workers && !RETRIES_IS_RUNNER_SLOT(me->slot_no))
			db->extra_idle_until = extra_idle_until(due_at);
		db->capped_role = capped_role;
		db->capped_holder = capped_holder;
		db->capped_until = capped_until;
		db->idle = idle_until != 0 && others == 0;
		db->far_due = db->idle && idle_until != DT_NOEND ? idle_until : 0;
		db->far_look = idle_look;
		db->far_noted = false;
	}
	LWLockRelease(retries_shared->lock);
	return true;
}

/*
 * shmem_db_wants_extras -- does database 'dboid' want extra workers now
 * (shmem_extras_wanted, under the lock)?
 */
bool
shmem_db_wants_extras(Oid dboid, TimestampTz now)
{
	RetriesHeld held;
	bool		wanted;

	LWLockAcquire(retries_shared->lock, LW_SHARED);
	wanted = shmem_extras_wanted(dboid, retries_max_workers, now, &held);
	LWLockRelease(retries_shared->lock);
	return wanted;
}

/*
 * shmem_extra_left_idle -- an extra worker of database 'dboid' leaves with
 * nothing due before 'due' (0: nothing due): no other starts before then,
 * or RETRIES_EXTRA_IDLE_MS on at the latest, unless a commit wakes the
 * database (launcher.c, start_extra)
 */
void
shmem_extra_left_idle(Oid dboid, TimestampTz due)
{
	RetriesDatabase *db;

	db = shmem_lock_database(dboid, LW_EXCLUSIVE);
	if (db != NULL)
		db->extra_idle_until = extra_idle_until(due);
	LWLockRelease(retries_shared->lock);
}

/*
 * shmem_reserve_extra_backoff -- no reserved worker goes to the extra
 * workers of database 'dboid' before 'until'
 */
void
shmem_reserve_extra_backoff(Oid dboid, TimestampTz until)
{
	RetriesDatabase *db;

	db = shmem_lock_database(dboid, LW_EXCLUSIVE);
	if (db != NULL)
		db->reserve_extra_after = until;
	LWLockRelease(retries_shared->lock);
}
