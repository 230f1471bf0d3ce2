/*-------------------------------------------------------------------------
 *
 * revisits.c
 *	  When the databases that gave their entries up have work due again:
 *	  the launcher's own list.
 *
 * A database whose last worker left it with nothing due within two
 * seconds is idle (engine/leave.c), and its entry of the database table
 * may go to another database (shmem/shmem.c, evictable_database).  One
 * with nothing due at all needs none until a commit there wakes it; one
 * with a call or a firing due later would lose it, for nothing wakes a
 * database at a time.  So the launcher keeps, for each idle database whose
 * work is due later, when, and how many looks in a row ran nothing there
 * (revisits_note_far_due, before the entry may go), here in its own
 * memory, as many as there are such databases (a couple of dozen bytes
 * each, however many a role may create), and wakes the database as it
 * falls due (revisits_wake_due): as a commit would, which gives it an entry
 * again, but its looks go on backing off; one that gets none waits, kept,
 * keeping when it first fell due, and is tried again as entries are freed
 * (WAIT_RETRY_MS apart at the soonest).  The entries to be had go in turns between the owners
 * of the databases due (each owner's longest due before any owner's
 * second), calls and firings before looks (take).  While any waits for an
 * entry, idle workers leave theirs (revisits_note_waiting).
 *
 * The databases a commit woke while no entry could be had, and those the
 * launcher has not looked at yet, take their turns here too
 * (revisits_note_woken, revisits_note_new).  The list lives as long as the
 * launcher.  A new launcher starts with none: it looks at every database
 * without an entry as new, and the entries it finds idle are noted again
 * before they may go (launcher.c).  Databases
 * no longer listed in pg_database are dropped from it at each read
 * (revisits_listed, revisits_sweep).
 *
 * Times are on the clock the extension decides by (base/clock.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/hsearch.h"
#include "utils/memutils.h"

#include "base/base.h"
#include "engine/revisits.h"
#include "shmem/shmem.h"

/* Most databases woken at once as their work falls due */
#define MAX_REVISITS			64
/* How soon at the least those that got no entry are tried again */
#define WAIT_RETRY_MS			25

/* A database whose kept work is due (take) */
typedef struct RevisitDue
{
	Oid			dboid;
	Oid			owner;			/* its owner, InvalidOid if not known */
	TimestampTz since;			/* when it first fell due */
	int			looks;			/* its looks in a row that ran nothing */
	bool		look;			/* only a look is due, no call or firing */
	bool		anew;			/* woken by a commit, or not looked at yet */
	int			turn;			/* its place among its owner's (by_owner) */
} RevisitDue;

/* A database, and when its work is due */
typedef struct Revisit
{
	Oid			dboid;			/* the key */
	TimestampTz due;
	TimestampTz since;			/* when it first fell due (due: when it is
								 * tried next) */
	int			looks;			/* its looks in a row that ran nothing
								 * (shmem.h, idle_looks) */
	bool		look;			/* only a look is due (leave.c, idle_until) */
	bool		anew;			/* woken by a commit, or not looked at yet:
								 * all the workers it may have, not one */
	Oid			owner;			/* its owner (owner_of) */
	uint32		listed;			/* the read of pg_database that last saw it */
} Revisit;

/* A database listed in pg_database, and its owner (revisits_listed) */
typedef struct Owned
{
	Oid			dboid;			/* the key */
	Oid			owner;
	uint32		listed;			/* the read of pg_database that last saw it */
} Owned;

static HTAB *revisits = NULL;
static HTAB *owners = NULL;

/* the earliest due time, unless first_stale */
static TimestampTz first = 0;
static bool first_stale = false;

/* the read of pg_database under way (revisits_listed) */
static uint32 reading = 0;

/* when the last try found no entry to be had; 0 if it found one */
static TimestampTz none_free_at = 0;

/*
 * how many databases kept wait: are due and were tried already, with no
 * entry to be had then (revisits_wake_due); kept by note and forget
 */
static int	nwaiting = 0;

/* a database kept waits for an entry: it was tried, and is due again */
#define WAITS(r)	((r)->since < (r)->due)

/*
 * new_table -- a table of 'entrysize' entries keyed by a database's oid,
 * in TopMemoryContext
 */
static HTAB *
new_table(const char *name, Size entrysize)
{
	HASHCTL		ctl;

	ctl.keysize = sizeof(Oid);
	ctl.entrysize = entrysize;
	ctl.hcxt = TopMemoryContext;
	return hash_create(name, 64, &ctl, HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
}

/*
 * table -- the list, made on first use
 */
static HTAB *
table(void)
{
	if (revisits == NULL)
		revisits = new_table("retries revisits", sizeof(Revisit));
	return revisits;
}

/*
 * owner_of -- the owner of database 'dboid' as the launcher's last read of
 * pg_database found it; InvalidOid if that read did not list it
 */
static Oid
owner_of(Oid dboid)
{
	Owned	   *o;

	if (owners == NULL)
		return InvalidOid;
	o = hash_search(owners, &dboid, HASH_FIND, NULL);
	return o != NULL ? o->owner : InvalidOid;
}

/*
 * note -- database 'dboid' has work due at 'due' (first due at
 * 'since', if it was tried before), after 'looks' looks in a row that ran
 * nothing; with 'look', only a look at what its workers look after (a
 * gate, a waiting firing, calls the pool's cap holds back), no call or
 * firing; with 'anew', woken by a commit or not looked at yet (given an
 * entry, it wants all its workers, not one: shmem_db_revisited).
 * Replaces what was kept for it.
 */
static void
note(Oid dboid, TimestampTz due, TimestampTz since, int looks, bool look,
	 bool anew)
{
	Revisit    *r;
	bool		found;

	r = hash_search(table(), &dboid, HASH_ENTER, &found);
	if (found && r->due < due)
		first_stale = true;		/* it may have been the first */
	if (found && WAITS(r))
		nwaiting--;
	r->due = due;
	r->since = since;
	r->looks = looks;
	r->look = look;
	r->anew = anew;
	r->owner = owner_of(dboid);
	r->listed = reading;
	if (WAITS(r))
		nwaiting++;
	if (!first_stale && (first == 0 || due < first))
		first = due;
}

/*
 * forget -- database 'dboid' is kept no more
 */
static void
forget(Oid dboid)
{
	Revisit    *r = hash_search(revisits, &dboid, HASH_REMOVE, NULL);

	if (r != NULL && WAITS(r))
		nwaiting--;
	first_stale = true;			/* it may have been the first */
}

/*
 * first_time -- when the first database kept is due; 0 if none
 */
static TimestampTz
first_time(void)
{
	HASH_SEQ_STATUS seq;
	Revisit    *r;

	if (!first_stale)
		return first;
	first = 0;
	hash_seq_init(&seq, table());
	while ((r = hash_seq_search(&seq)) != NULL)
		if (first == 0 || r->due < first)
			first = r->due;
	first_stale = false;
	return first;
}

/*
 * by_owner -- qsort order of due databases: calls and firings before
 * looks, then by owner, the longest due first
 */
static int
by_owner(const void *a, const void *b)
{
	const RevisitDue *ra = a;
	const RevisitDue *rb = b;

	if (ra->look != rb->look)
		return ra->look ? 1 : -1;
	if (ra->owner != rb->owner)
		return ra->owner < rb->owner ? -1 : 1;
	return ra->since < rb->since ? -1 : ra->since > rb->since ? 1 : 0;
}

/*
 * by_turn -- qsort order of due databases: calls and firings before
 * looks, then in turns between their owners (each owner's longest due
 * before any owner's second), the longest due first within a turn
 */
static int
by_turn(const void *a, const void *b)
{
	const RevisitDue *ra = a;
	const RevisitDue *rb = b;

	if (ra->look != rb->look)
		return ra->look ? 1 : -1;
	if (ra->turn != rb->turn)
		return ra->turn < rb->turn ? -1 : 1;
	return ra->since < rb->since ? -1 : ra->since > rb->since ? 1 : 0;
}

/*
 * in_turns -- order the 'n' due databases of due[] (by_turn)
 */
static void
in_turns(RevisitDue *due, int n)
{
	qsort(due, n, sizeof(RevisitDue), by_owner);
	for (int i = 0; i < n; i++)
		due[i].turn = i > 0 && due[i - 1].owner == due[i].owner &&
			due[i - 1].look == due[i].look ? due[i - 1].turn + 1 : 0;
	qsort(due, n, sizeof(RevisitDue), by_turn);
}

/*
 * take -- the databases kept that are due by 'until', or that wait for an
 * entry already (only those with a call or a firing due, unless
 * 'looks_too'), in turns between their owners (in_turns), into due[]
 * (room for 'max'); returns how many.  None before WAIT_RETRY_MS after
 * the last try found no entry: a try at each pass, with a hundred due
 * databases waiting and more falling due, made the launcher busy.
 *
 * In turns: the entries went to the databases due longest whoever owned
 * them, and bob's calls and firings in a database of his waited behind
 * the backlog of mallory's calls truly due in a hundred of hers (the
 * forty-third hostile review, t/074 6); one owner's are still the longest
 * due first, so that one does not wait behind a hundred that fall due
 * again and again.  Those that wait already are taken with the others,
 * not only when tried again a second on (revisits_wake_due): an entry
 * freed between two tries went to one that had just fallen due.  Calls
 * and firings before looks, so that bob's call does not wait behind a
 * hundred looks at full gates (the forty-second hostile review: 6-89 s
 * late behind 96 databases at full gates).
 */
static int
take(TimestampTz until, bool looks_too, RevisitDue *due, int max)
{
	HASH_SEQ_STATUS seq;
	Revisit    *r;
	RevisitDue *all;
	int			nall = 0;
	int			n;
	bool		anew;
	bool		waits_too;

	if (none_free_at != 0 &&
		!TimestampDifferenceExceeds(none_free_at, clock_system_now(), WAIT_RETRY_MS))
		return 0;
	anew = first_time() != 0 && first <= until;
	waits_too = nwaiting > 0;
	if (!anew && !waits_too)
		return 0;
	all = palloc(sizeof(RevisitDue) * hash_get_num_entries(revisits));
	hash_seq_init(&seq, table());
	while ((r = hash_seq_search(&seq)) != NULL)
	{
		bool		waits = WAITS(r);

		if ((r->look && !looks_too) || (waits ? !waits_too : r->due > until))
			continue;
		all[nall].dboid = r->dboid;
		all[nall].owner = r->owner;
		all[nall].since = r->since;
		all[nall].looks = r->looks;
		all[nall].anew = r->anew;
		all[nall++].look = r->look;
	}
	in_turns(all, nall);
	n = Min(nall, max);
	memcpy(due, all, sizeof(RevisitDue) * n);
	pfree(all);
	return n;
}

/*
 * revisits_kept -- is work of database 'dboid' kept here?
 */
bool
revisits_kept(Oid dboid)
{
	return revisits != NULL &&
		hash_search(revisits, &dboid, HASH_FIND, NULL) != NULL;
}

/*
 * revisits_listed -- a read of pg_database (the next one after
 * revisits_sweep, or the first) found database 'dboid', owned by 'owner'
 */
void
revisits_listed(Oid dboid, Oid owner)
{
	Revisit    *r;
	Owned	   *o;

	if (owners == NULL)
		owners = new_table("retries database owners", sizeof(Owned));
	o = hash_search(owners, &dboid, HASH_ENTER, NULL);
	o->owner = owner;
	o->listed = reading;
	if (revisits == NULL)
		return;
	r = hash_search(revisits, &dboid, HASH_FIND, NULL);
	if (r != NULL)
	{
		r->owner = owner;
		r->listed = reading;
	}
}

/*
 * revisits_sweep -- the read of pg_database is over: forget the databases
 * it did not find (dropped, or no longer allowing connections)
 */
void
revisits_sweep(void)
{
	HASH_SEQ_STATUS seq;
	Revisit    *r;
	Owned	   *o;

	if (revisits != NULL)
	{
		hash_seq_init(&seq, revisits);
		while ((r = hash_seq_search(&seq)) != NULL)
		{
			if (r->listed != reading)
				forget(r->dboid);
		}
	}
	if (owners != NULL)
	{
		hash_seq_init(&seq, owners);
		while ((o = hash_seq_search(&seq)) != NULL)
			if (o->listed != reading)
				(void) hash_search(owners, &o->dboid, HASH_REMOVE, NULL);
	}
	reading++;
}

/*
 * revisits_note_far_due -- keep when an idle database's work is due,
 * after which its entry may go to another database (evictable_database).
 * Caller holds the lock exclusively.
 */
void
revisits_note_far_due(RetriesDatabase *db)
{
	if (!db->idle || db->far_due == 0 || db->far_noted)
		return;
	note(db->dboid, db->far_due, db->far_due, db->idle_looks, db->far_look, false);
	db->far_noted = true;
}

/*
 * revisits_forget_noted -- a new launcher keeps no due times: the idle
 * entries are noted again (revisits_note_far_due) before they may go
 */
void
revisits_forget_noted(void)
{
	shmem_forget_far_noted();
}

/*
 * wait_again -- database 'due', due, got no entry, or was not tried once
 * another got none (revisits_wake_due): it waits, kept, keeping when it
 * first fell due; taken again with the others (take), and a second on at
 * the latest
 */
static void
wait_again(const RevisitDue *due, TimestampTz now)
{
	note(due->dboid, clock_ahead(TimestampTzPlusMilliseconds(now, RESTART_DELAY_MS)),
		 due->since, due->looks, due->look, due->anew);
}

/*
 * revisits_wake_due -- wake the databases whose work the launcher kept
 * (revisits_note_far_due) and that are due within START_AHEAD_MS or wait
 * already, in turns between their owners (take), as a commit there would
 * (shmem_wake_workers), but for three things: what it looks after keeps
 * backing off, in the entry it kept or in a new one (looks started over
 * at each such wake kept 96 databases with a full gate looked at every 4 s
 * at most, 1,207 workers started in 30 s: the fortieth hostile review,
 * t/074 1); its work is due from when it first fell due, so that a firing
 * that waited for an entry is not missed (shmem_db_revisited); and one
 * that gets no entry is not counted as woken by a commit: it waits, kept
 * (wait_again).  Once one gets none, those after it in the turns that have
 * no entry are not tried (none is to be had): the turns, not the order of
 * the tries, say who gets the next.  Only those with a call or a firing
 * due, unless 'looks_too'.
 */
void
revisits_wake_due(TimestampTz now, bool looks_too)
{
	RevisitDue	due[MAX_REVISITS];
	int			n = take(TimestampTzPlusMilliseconds(clock_now(), START_AHEAD_MS),
						 looks_too, due, MAX_REVISITS);
	bool		none_free = false;

	for (int i = 0; i < n; i++)
	{
		bool		quiet;
		bool		had = shmem_db_tracked(due[i].dboid, &quiet);

		if (!had && none_free)
		{
			wait_again(&due[i], now);
			continue;
		}
		shmem_wake_workers(due[i].dboid,
						   WAKE_CALLS | (due[i].anew ? WAKE_TURN : WAKE_REVISIT), InvalidOid);
		if (shmem_db_revisited(due[i].dboid, !had, due[i].looks,
							   due[i].anew ? 0 : due[i].since, !due[i].anew))
		{
			forget(due[i].dboid);
			continue;
		}
		wait_again(&due[i], now);
		none_free = true;
	}
	if (n > 0)
		none_free_at = none_free ? clock_system_now() : 0;
}

/*
 * revisits_note_woken -- the databases a commit woke while no entry could
 * be had for them (shmem_wake_workers) are due now: they take their turn
 * with those whose kept work fell due (take), keeping when they first fell
 * due if kept already
 */
void
revisits_note_woken(TimestampTz now)
{
	Oid			woken[RETRIES_MAX_UNSERVED];
	int			n = shmem_take_unserved(woken);

	for (int i = 0; i < n; i++)
	{
		Revisit    *r = revisits != NULL ?
		hash_search(revisits, &woken[i], HASH_FIND, NULL) : NULL;

		if (r == NULL)
			note(woken[i], now, now, 0, false, true);
		else if (r->due > now || r->look)
			note(woken[i], Min(r->due, now), Min(r->since, now), 0, false, true);
	}
}

/*
 * revisits_note_new -- database 'dboid' was not looked at yet (a read of
 * pg_database found it: launcher.c, read_databases): it takes its turn
 * for an entry, its work due from 'since'
 */
void
revisits_note_new(Oid dboid, TimestampTz since)
{
	if (!revisits_kept(dboid))
		note(dboid, since, since, 0, false, true);
}

/*
 * revisits_note_waiting -- say how many databases with work wait for an
 * entry of the database table: those whose kept work fell due, woken by
 * a commit or not looked at yet that got none;
 * while any does, wake the idle workers, which leave their databases idle
 * if they can (leave.c, leave_when_idle), and their entries go to those
 * that wait
 */
void
revisits_note_waiting(void)
{
	shmem_set_entries_waiting(nwaiting);
}

/*
 * revisits_next -- when revisits_wake_due has next to run (0: only when a
 * database is noted)
 */
TimestampTz
revisits_next(TimestampTz now)
{
	TimestampTz first_due = first_time();

	if (first_due == 0)
		return 0;
	/* those that wait are tried again WAIT_RETRY_MS after the last try */
	if (none_free_at != 0 && nwaiting > 0)
		return TimestampTzPlusMilliseconds(none_free_at, WAIT_RETRY_MS);
	return TimestampTzPlusMilliseconds(now,
									   Max(clock_ms_until(first_due) - START_AHEAD_MS, 0));
}
