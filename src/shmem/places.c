/*-------------------------------------------------------------------------
 *
 * places.c
 *	  Runner places in shared memory: the workers that wait for a runner,
 *	  counted by role across the cluster, and a database's calls held for a
 *	  place and places lost.
 *
 * The rules are engine/handoff.c's ("Runner places"): with
 * retries.max_runners above 0, fewer than that many workers of the cluster
 * wait for a runner at once, a role holds at most its share of them
 * (places_role_share), and the last quarter go only to roles that hold
 * none (places_kept); with retries.max_runners 0, at most
 * retries.max_workers - 1 of a database's own workers wait, and an extra
 * worker always may.  This file counts and marks under the shared lock, so
 * that two workers deciding at once cannot both take the last place; the
 * worker's own mark (in_runner, runner_role) is behind its slot's spinlock,
 * as every other field that changes with an attempt.
 *
 * Offers.  A place that a worker lets go to a held call (handoff.c's
 * handoff_release_held) is offered to that call (offers[]) until the call
 * claims a place (shmem_reserve_runner) or RETRIES_OFFER_MS pass, and the
 * workers of its database let go of no more calls than there are places
 * free and not offered: two workers that let go at once, or one that lets
 * go before the call let go before has taken its place, no longer let go
 * of two calls for one place (bob's call, let go by one worker, and
 * alice's next one, by another, both found the place free, and alice's,
 * claimed first, took it: the turns between roles were lost one time in
 * many).  A worker that lets go first marks the places it looks at as
 * offered to calls not known yet (call_id 0), which
 * shmem_runner_holds_done turns into offers to the calls it let go.  An
 * offer counts only in its own database, and keeps no place from a call:
 * another database's calls, and a call made meanwhile, take places as
 * before (the thirty-ninth hostile review, t/072: offers that counted in
 * every database, to calls a role had moved hours on, kept another
 * database's commands from every free place), and an offer whose call does
 * not take its place (cancelled, held at its gate) delays its database's
 * next let-go by a second at most.  With retries.max_runners 0 no place is
 * offered.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/latch.h"
#include "utils/timestamp.h"

#include "base/base.h"
#include "shmem/shmem.h"

/*
 * shmem_runner_place_bit -- the bit of a runner place in RetriesDatabase's
 * runners_lost (and places_taken's answer), for a slot_no; 0 for a slot_no
 * that is no runner place
 */
uint64
shmem_runner_place_bit(int slot_no)
{
	if (!RETRIES_IS_RUNNER_SLOT(slot_no) ||
		slot_no >= RETRIES_RUNNER_SLOT_BASE + RETRIES_MAX_RUNNERS)
		return 0;
	return UINT64CONST(1) << (slot_no - RETRIES_RUNNER_SLOT_BASE);
}

/*
 * places_taken -- the runner places of database 'dboid' that a worker holds,
 * a bit each; under the lock, which the caller holds
 */
static uint64
places_taken(Oid dboid)
{
	RetriesWorker *w;
	uint64		taken = 0;

	for (int i = -1; (w = shmem_next_worker(dboid, &i)) != NULL;)
		taken |= shmem_runner_place_bit(w->slot_no);
	return taken;
}

/*
 * shmem_set_in_runner -- say in worker 'me''s slot whether its call, of
 * 'role', runs in a runner (the places' count)
 */
void
shmem_set_in_runner(RetriesWorker *me, bool in_runner, Oid role)
{
	SpinLockAcquire(&me->mutex);
	me->in_runner = in_runner;
	me->runner_role = in_runner ? role : InvalidOid;
	SpinLockRelease(&me->mutex);
}

/*
 * shmem_slot_is_extra -- is 'w' one of its database's extra workers (a
 * slot_no above the database's own, below the runner places)?
 */
bool
shmem_slot_is_extra(const RetriesWorker *w)
{
	return w->slot_no >= retries_max_workers &&
		!RETRIES_IS_RUNNER_SLOT(w->slot_no);
}

/*
 * own_in_runners -- how many of the database's own workers (not the
 * extras) wait for a runner (never 'me', which is deciding, and unmarked);
 * under the lock, which the caller holds.  With retries.max_runners 0 only.
 */
static int
own_in_runners(const RetriesWorker *me)
{
	RetriesWorker *w;
	int			n = 0;

	for (int i = -1; (w = shmem_next_worker(me->dboid, &i)) != NULL;)
	{
		if (w->slot_no >= retries_max_workers)
			continue;
		SpinLockAcquire(&w->mutex);
		n += w->in_runner;
		SpinLockRelease(&w->mutex);
	}
	return n;
}

/*
 * places_role_share -- the most runner places the calls of one role may
 * hold: all but a quarter of them
 */
static int
places_role_share(void)
{
	return Max(retries_max_runners - retries_max_runners / 4, 1);
}

/*
 * places_kept -- how many runner places only roles that hold none may take:
 * a quarter of them, so that a role's command finds a place while fewer
 * than that many other roles each hold one beside those that hold the rest
 */
static int
places_kept(void)
{
	return retries_max_runners / 4;
}

/*
 * places_in_use -- how many workers of the cluster other than 'me' hold a
 * runner place, into *total, and their roles, each once, into roles[] with
 * how many places each holds into counts[]; returns how many roles.  Under
 * the lock, which the caller holds.
 */
static int
places_in_use(const RetriesWorker *me, int *total, Oid *roles, int *counts)
{
	RetriesWorker *w;
	int			n = 0;

	*total = 0;
	for (int i = -1; (w = shmem_next_worker(InvalidOid, &i)) != NULL;)
	{
		Oid			role = InvalidOid;
		int			j;

		if (w == me)
			continue;
		SpinLockAcquire(&w->mutex);
		if (w->in_runner)
			role = w->runner_role;
		SpinLockRelease(&w->mutex);
		if (!OidIsValid(role))
			continue;
		(*total)++;
		for (j = 0; j < n && roles[j] != role; j++)
			;
		if (j == n)
		{
			roles[n++] = role;
			counts[j] = 0;
		}
		counts[j]++;
	}
	return n;
}

/*
 * places_free -- how many runner places 'me' finds free, and the roles that
 * may take none of them into capped[], with their number into *ncapped:
 * those that hold their share (places_role_share), and, when no more places
 * are free than the quarter kept for roles that hold none (places_kept),
 * every role that holds one (the twenty-fifth hostile review, t/059: two
 * roles together held every place, and a third role's command waited for
 * theirs to end).  With retries.max_runners 0, how many more of the
 * database's workers may wait for a runner.  Under the lock, which the
 * caller holds.
 */
static int
places_free(const RetriesWorker *me, Oid *capped, int *ncapped)
{
	Oid			roles[RETRIES_MAX_SLOTS];
	int			counts[RETRIES_MAX_SLOTS];
	int			total;
	int			n;
	int			free;

	*ncapped = 0;
	if (retries_max_runners == 0)
		return retries_max_workers < 2 || shmem_slot_is_extra(me) ? 1 :
			retries_max_workers - 1 - own_in_runners(me);

	n = places_in_use(me, &total, roles, counts);
	free = Max(retries_max_runners - total, 0);
	for (int i = 0; i < n; i++)
		if (counts[i] >= places_role_share() || free <= places_kept())
			capped[(*ncapped)++] = roles[i];
	return free;
}

/*
 * offers_kept -- drop the offers that have expired by 'now', and count
 * those of database 'dboid' (none with retries.max_runners 0, whose places
 * are a database's own workers); under the exclusive lock, which the
 * caller holds
 */
static int
offers_kept(TimestampTz now, Oid dboid)
{
	int			kept = 0;
	int			n = 0;

	for (int i = 0; i < retries_shared->noffers; i++)
	{
		RetriesOffer *o = &retries_shared->offers[i];

		if (o->until <= now)
			continue;
		retries_shared->offers[n++] = *o;
		if (retries_max_runners > 0 && o->dboid == dboid)
			kept++;
	}
	retries_shared->noffers = n;
	return kept;
}

/*
 * offer_remove -- the offer to call 'call_id' of database 'dboid' ends (it
 * took its place, or cannot); under the exclusive lock
 */
static void
offer_remove(Oid dboid, int64 call_id)
{
	for (int i = retries_shared->noffers - 1; i >= 0; i--)
	{
		RetriesOffer *o = &retries_shared->offers[i];

		if (o->call_id == call_id && o->dboid == dboid)
			*o = retries_shared->offers[--retries_shared->noffers];
	}
}

/*
 * offer_add -- keep a place for call 'call_id' of 'me''s database (0: not
 * known yet) until 'until'; under the exclusive lock.  With no room left
 * (every database offering every place), none: its database may let go of
 * one call too many.
 */
static void
offer_add(const RetriesWorker *me, int64 call_id, TimestampTz until)
{
	RetriesOffer *o;

	if (retries_shared->noffers >= RETRIES_MAX_OFFERS)
		return;
	o = &retries_shared->offers[retries_shared->noffers++];
	o->dboid = me->dboid;
	o->call_id = call_id;
	o->owner = me - retries_shared->workers;
	o->generation = me->generation;
	o->until = until;
}

/*
 * offers_withdraw -- the places worker 'me' offered to calls not known yet
 * (shmem_runner_holds) are no longer offered; under the exclusive lock
 */
static void
offers_withdraw(const RetriesWorker *me)
{
	int			owner = me - retries_shared->workers;

	for (int i = retries_shared->noffers - 1; i >= 0; i--)
	{
		RetriesOffer *o = &retries_shared->offers[i];

		if (o->call_id == 0 && o->owner == owner &&
			o->generation == me->generation)
			*o = retries_shared->offers[--retries_shared->noffers];
	}
}

/*
 * shmem_reserve_runner -- may worker 'me' have call 'call_id' of 'role' run
 * in a runner now?  A place is free and the role may take it (places_free: with
 * retries.max_runners 0, a long procedure must not hold back the calls of
 * functions, so at least one of the database's own workers never waits for
 * a runner, and an extra worker always may: it runs the calls of one role
 * that has none running elsewhere, and no function call waits for it).  If
 * so, the worker's mark says it does, made under the same lock as the
 * count, so that two workers deciding at once cannot both take the last
 * place.  The mark stays until handoff_run() ends, or is taken back
 * (shmem_set_in_runner(false)) if the call does not go to a runner after
 * all.  The call's offer (see "Offers") ends either way.
 */
bool
shmem_reserve_runner(RetriesWorker *me, Oid role, int64 call_id)
{
	Oid			capped[RETRIES_MAX_SLOTS];
	int			ncapped;
	bool		room;

	LWLockAcquire(retries_shared->lock, LW_EXCLUSIVE);
	room = places_free(me, capped, &ncapped) > 0;
	for (int i = 0; i < ncapped; i++)
		room &= capped[i] != role;
	if (room)
		shmem_set_in_runner(me, true, role);
	offer_remove(me->dboid, call_id);
	LWLockRelease(retries_shared->lock);
	return room;
}

/*
 * shmem_runner_work_pending -- does database 'dboid' hold calls for a
 * runner place that no worker has looked at yet, or a lost place whose
 * attempt is not charged yet (or has it no entry)?  Then its workers do
 * not leave it.
 */
bool
shmem_runner_work_pending(Oid dboid)
{
	RetriesDatabase *db;
	bool		pending;

	db = shmem_lock_database(dboid, LW_SHARED);
	pending = db == NULL || db->runner_held != db->runner_seen ||
		db->runners_lost != 0;
	LWLockRelease(retries_shared->lock);
	return pending;
}

/*
 * shmem_runner_held -- a batch of database 'dboid' has held a call for a
 * runner: count it, so that its workers look for held calls, and wake the
 * launcher (the database may want an extra worker)
 */
void
shmem_runner_held(Oid dboid)
{
	RetriesDatabase *db;

	db = shmem_lock_database(dboid, LW_EXCLUSIVE);
	if (db != NULL)
		db->runner_held++;
	shmem_set_launcher_latch();
	LWLockRelease(retries_shared->lock);
}

/*
 * shmem_runner_holds -- what worker 'me' needs to let go of its database's
 * calls held for a runner: false if the database has no entry, or no call
 * held since a worker last found none (unless 'probe'); else into *held the
 * count of holds (for shmem_runner_holds_done), into *last_role the role let
 * go last, into *places how many may be let go: the places free and not
 * offered to the database's calls, which are offered now to the calls this
 * worker lets go (see "Offers"; shmem_runner_holds_done must follow), and
 * into avoid[] (room for
 * RETRIES_MAX_SLOTS) the roles that may take no place, with their number into
 * *navoid
 */
bool
shmem_runner_holds(RetriesWorker *me, bool probe, uint32 *held,
				   Oid *last_role, int *places, Oid *avoid, int *navoid)
{
	RetriesDatabase *db;
	bool		look;
	TimestampTz now = clock_system_now();

	db = shmem_lock_database(me->dboid, LW_EXCLUSIVE);
	look = db != NULL && (probe || db->runner_held != db->runner_seen);
	if (look)
	{
		*held = db->runner_held;
		*last_role = db->runner_role;
		*places = places_free(me, avoid, navoid) - offers_kept(now, me->dboid);
		for (int i = 0; i < *places; i++)
			offer_add(me, 0, TimestampTzPlusMilliseconds(now, RETRIES_OFFER_MS));
	}
	LWLockRelease(retries_shared->lock);
	return look;
}

/*
 * shmem_runner_holds_done -- worker 'me' let go of 'released' held calls of
 * its database, 'ids', the last of 'last_role': the places it offered
 * (shmem_runner_holds) are kept for those calls, the others no longer
 * (see "Offers"); the turn goes on from that role, whichever worker does it
 * next; none let go, and no role passed over: none is held until a batch
 * holds one again ('held', shmem_runner_holds's count)
 */
void
shmem_runner_holds_done(RetriesWorker *me, int released, const int64 *ids,
						Oid last_role, bool passed_over, uint32 held)
{
	RetriesDatabase *db;
	TimestampTz until = TimestampTzPlusMilliseconds(clock_system_now(),
													RETRIES_OFFER_MS);

	db = shmem_lock_database(me->dboid, LW_EXCLUSIVE);
	offers_withdraw(me);
	for (int i = 0; i < released; i++)
		offer_add(me, ids[i], until);
	if (db != NULL && released > 0)
		db->runner_role = last_role;
	if (db != NULL && released == 0 && !passed_over)
		db->runner_seen = held;
	LWLockRelease(retries_shared->lock);
}

/*
 * shmem_runner_move -- worker 'me' leaves its place for a runner place: a
 * slot_no from RETRIES_RUNNER_SLOT_BASE that no worker of the database has,
 * nor a worker that exited there with its attempt in flight
 * (runners_lost).  It remembers the place it left (moved_from), which the
 * launcher keeps until shmem_runner_moved.  Returns the new slot_no, or -1
 * with none free (nothing changed).
 */
int
shmem_runner_move(RetriesWorker *me)
{
	RetriesDatabase *db;
	uint64		unusable;
	int			to = -1;

	db = shmem_lock_database(me->dboid, LW_EXCLUSIVE);
	unusable = db != NULL ? places_taken(me->dboid) | db->runners_lost : ~UINT64CONST(0);
	for (int j = 0; j < RETRIES_MAX_RUNNERS && to < 0; j++)
		if ((unusable & (UINT64CONST(1) << j)) == 0)
			to = RETRIES_RUNNER_SLOT_BASE + j;
	if (to >= 0)
	{
		me->moved_from = me->slot_no;
		me->slot_no = to;
	}
	LWLockRelease(retries_shared->lock);
	return to;
}

/*
 * shmem_runner_moved -- worker 'me''s in-flight record has moved with it:
 * the launcher may start another worker in the place it left
 */
void
shmem_runner_moved(RetriesWorker *me)
{
	LWLockAcquire(retries_shared->lock, LW_EXCLUSIVE);
	me->moved_from = -1;
	shmem_set_launcher_latch();
	LWLockRelease(retries_shared->lock);
}

/*
 * shmem_runner_waiting_dbs -- the databases that hold calls for a runner
 * place, into dbs[] (room for retries.max_databases); returns how many
 */
int
shmem_runner_waiting_dbs(Oid *dbs)
{
	int			n = 0;

	LWLockAcquire(retries_shared->lock, LW_SHARED);
	for (int i = 0; i < retries_max_databases; i++)
	{
		RetriesDatabase *db = &shmem_dbs[i];

		if (OidIsValid(db->dboid) && db->runner_held != db->runner_seen)
			dbs[n++] = db->dboid;
	}
	LWLockRelease(retries_shared->lock);
	return n;
}

/*
 * shmem_runner_place_lost -- a worker in a runner place (its bit 'bit')
 * exits with an attempt in flight: the database's other workers charge it
 * (runners_lost)
 */
void
shmem_runner_place_lost(Oid dboid, uint64 bit)
{
	RetriesDatabase *db;

	db = shmem_lock_database(dboid, LW_EXCLUSIVE);
	if (db != NULL)
		db->runners_lost |= bit;
	LWLockRelease(retries_shared->lock);
}

/*
 * shmem_runner_places_lost -- the runner places of database 'dboid' whose
 * workers exited with an attempt in flight and have left (no worker is on
 * its way out of one still), a bit each
 */
uint64
shmem_runner_places_lost(Oid dboid)
{
	RetriesDatabase *db;
	uint64		lost;

	db = shmem_lock_database(dboid, LW_SHARED);
	lost = db != NULL ? db->runners_lost : 0;
	if (lost != 0)
		lost &= ~places_taken(dboid);
	LWLockRelease(retries_shared->lock);
	return lost;
}

/*
 * shmem_runner_places_found -- the lost runner places 'bits' of database
 * 'dboid' are charged, or were empty: none is lost any more
 */
void
shmem_runner_places_found(Oid dboid, uint64 bits)
{
	RetriesDatabase *db;

	db = shmem_lock_database(dboid, LW_EXCLUSIVE);
	if (db != NULL)
		db->runners_lost &= ~bits;
	LWLockRelease(retries_shared->lock);
}

/*
 * shmem_runner_place_was_lost -- is worker 'w''s place (a runner place)
 * marked lost?  Under the lock, which the caller holds.
 */
bool
shmem_runner_place_was_lost(const RetriesWorker *w)
{
	RetriesDatabase *db = shmem_find_database(w->dboid, false);

	return db != NULL &&
		(db->runners_lost & shmem_runner_place_bit(w->slot_no)) != 0;
}
