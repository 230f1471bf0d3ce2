/*-------------------------------------------------------------------------
 *
 * gates.c
 *	  The gates of limited functions in shared memory: how many attempts
 *	  of a function run now (and of each limit_key), and the rate slots
 *	  that follow a rate-limited function's recent starts.
 *
 * A worker enters a function's gate before an attempt and leaves it after
 * (shmem_gate_enter, shmem_gate_leave); the count and the entry are one
 * step under the exclusive LWLock, so that two workers never both take the
 * last room.  flow.c decides what a gate holds; this file only counts.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "utils/timestamp.h"

#include "base/base.h"
#include "core/rate.h"
#include "shmem/shmem.h"

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
		RetriesRateSlot *r = &shmem_rate_slots[i];
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
		TimestampTz now = clock_now();
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
 * shmem_gates_changed -- a transaction that changed a pause or limit has
 * committed: the workers load the gates again (shmem_gates_generation)
 */
void
shmem_gates_changed(void)
{
	pg_atomic_fetch_add_u64(&retries_shared->gates_generation, 1);
}

/*
 * shmem_gates_generation -- how many transactions that changed a pause or
 * limit have committed since the server started (0 without the shared
 * memory: not preloaded)
 */
uint64
shmem_gates_generation(void)
{
	if (retries_shared == NULL)
		return 0;
	pg_memory_barrier();
	return pg_atomic_read_u64(&retries_shared->gates_generation);
}
