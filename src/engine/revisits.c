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
 * again, but its looks go on backing off; one that gets none is kept a second
 * more, keeping when it first fell due, and the longest due are woken first
 * (take), calls and firings before looks.  While any waits for an entry, idle
 * workers leave theirs (revisits_note_waiting).
 *
 * The list lives as long as the launcher.  A new launcher starts with none:
 * it looks at every database without an entry as new, and the entries it
 * finds idle are noted again before they may go (launcher.c).  Databases
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

/* A database whose kept work is due (take) */
typedef struct RevisitDue
{
	Oid			dboid;
	TimestampTz since;			/* when it first fell due */
	int			looks;			/* its looks in a row that ran nothing */
	bool		look;			/* only a look is due, no call or firing */
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
	uint32		listed;			/* the read of pg_database that last saw it */
} Revisit;

static HTAB *revisits = NULL;

/* the earliest due time, unless first_stale */
static TimestampTz first = 0;
static bool first_stale = false;

/* the read of pg_database under way (revisits_listed) */
static uint32 reading = 0;

/*
 * table -- the list, made in TopMemoryContext on first use
 */
static HTAB *
table(void)
{
	HASHCTL		ctl;

	if (revisits != NULL)
		return revisits;
	ctl.keysize = sizeof(Oid);
	ctl.entrysize = sizeof(Revisit);
	ctl.hcxt = TopMemoryContext;
	revisits = hash_create("retries revisits", 64, &ctl,
						   HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	return revisits;
}

/*
 * note -- database 'dboid' has work due at 'due' (first due at
 * 'since', if it was tried before), after 'looks' looks in a row that ran
 * nothing; with 'look', only a look at what its workers look after (a
 * gate, a waiting firing, calls the pool's cap holds back), no call or
 * firing.  Replaces what was kept for it.
 */
static void
note(Oid dboid, TimestampTz due, TimestampTz since, int looks, bool look)
{
	Revisit    *r;
	bool		found;

	r = hash_search(table(), &dboid, HASH_ENTER, &found);
	if (found && r->due < due)
		first_stale = true;		/* it may have been the first */
	r->due = due;
	r->since = since;
	r->looks = looks;
	r->look = look;
	r->listed = reading;
	if (!first_stale && (first == 0 || due < first))
		first = due;
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
 * by_since -- qsort order of due databases: calls and firings due before
 * looks, the longest due first
 */
static int
by_since(const void *a, const void *b)
{
	const RevisitDue *ra = a;
	const RevisitDue *rb = b;

	if (ra->look != rb->look)
		return ra->look ? 1 : -1;
	return ra->since < rb->since ? -1 : ra->since > rb->since ? 1 : 0;
}

/*
 * take -- the databases kept that are due within 'ahead_ms' (only those
 * with a call or a firing due, unless 'looks_too'), calls and firings
 * first, the longest due first, into due[] (room for 'max'); returns how
 * many, and forgets them.  The longest due first: a database tried with
 * no entry to be had keeps when it first fell due (revisits_wake_due), so
 * that one does not wait behind a hundred that fall due again and again;
 * calls and firings before looks, so that bob's call
 * does not wait behind a hundred looks at full gates (the forty-second
 * hostile review: 6-89 s late behind 96 databases at full gates).
 */
static int
take(int ahead_ms, bool looks_too, RevisitDue *due, int max)
{
	HASH_SEQ_STATUS seq;
	Revisit    *r;
	RevisitDue *all;
	int			nall = 0;
	int			n;

	if (first_time() == 0 || clock_ms_until(first) > ahead_ms)
		return 0;
	all = palloc(sizeof(RevisitDue) * hash_get_num_entries(revisits));
	hash_seq_init(&seq, table());
	while ((r = hash_seq_search(&seq)) != NULL)
	{
		if (clock_ms_until(r->due) > ahead_ms || (r->look && !looks_too))
			continue;
		all[nall].dboid = r->dboid;
		all[nall].since = r->since;
		all[nall].looks = r->looks;
		all[nall++].look = r->look;
	}
	qsort(all, nall, sizeof(RevisitDue), by_since);
	n = Min(nall, max);
	for (int i = 0; i < n; i++)
	{
		due[i] = all[i];
		(void) hash_search(revisits, &all[i].dboid, HASH_REMOVE, NULL);
	}
	pfree(all);
	first_stale = true;
	return n;
}

/*
 * waiting_count -- how many databases kept are due and were tried
 * already, with no entry to be had then (revisits_wake_due)
 */
static int
waiting_count(void)
{
	HASH_SEQ_STATUS seq;
	Revisit    *r;
	int			n = 0;

	if (revisits == NULL)
		return 0;
	hash_seq_init(&seq, revisits);
	while ((r = hash_seq_search(&seq)) != NULL)
		n += r->since < r->due;
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
 * revisits_sweep, or the first) found database 'dboid'
 */
void
revisits_listed(Oid dboid)
{
	Revisit    *r;

	if (revisits == NULL)
		return;
	r = hash_search(revisits, &dboid, HASH_FIND, NULL);
	if (r != NULL)
		r->listed = reading;
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

	if (revisits != NULL)
	{
		hash_seq_init(&seq, revisits);
		while ((r = hash_seq_search(&seq)) != NULL)
		{
			if (r->listed != reading)
			{
				(void) hash_search(revisits, &r->dboid, HASH_REMOVE, NULL);
				first_stale = true;
			}
		}
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
	note(db->dboid, db->far_due, db->far_due, db->idle_looks, db->far_look);
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
 * revisits_wake_due -- wake the databases whose work the launcher kept
 * (revisits_note_far_due) and that are due within START_AHEAD_MS, as a commit
 * there would (shmem_wake_workers), but for two things: what it looks
 * after keeps backing off, in the entry it kept or in a new one (looks
 * started over at each such wake kept 96 databases with a full gate
 * looked at every 4 s at most, 1,207 workers started in 30 s: the
 * fortieth hostile review, t/074 1), and one that gets no entry is not
 * counted as woken by a commit: it is kept a second more, and woken again
 * then, before those that fell due after it (take).  Only those
 * with a call or a firing due, unless 'looks_too'.
 */
void
revisits_wake_due(TimestampTz now, bool looks_too)
{
	RevisitDue	due[MAX_REVISITS];
	int			n = take(START_AHEAD_MS, looks_too, due, MAX_REVISITS);

	for (int i = 0; i < n; i++)
	{
		bool		quiet;
		bool		had = shmem_db_tracked(due[i].dboid, &quiet);

		shmem_wake_workers(due[i].dboid, WAKE_CALLS | WAKE_REVISIT);
		if (shmem_db_tracked(due[i].dboid, &quiet))
		{
			/* given an entry by the wake: its looks go on */
			if (!had)
				shmem_db_set_looks(due[i].dboid, due[i].looks);
			continue;
		}
		note(due[i].dboid,
			 clock_ahead(TimestampTzPlusMilliseconds(now, RESTART_DELAY_MS)),
			 due[i].since, due[i].looks, due[i].look);
	}
}

/*
 * revisits_note_waiting -- say how many databases with work wait for an
 * entry of the database table: those whose kept work fell due and got
 * none (waiting) and 'read_unserved' of the launcher's last read of
 * pg_database (launcher.c);
 * while any does, wake the idle workers, which leave their databases idle
 * if they can (leave.c, leave_when_idle), and their entries go to those
 * that wait
 */
void
revisits_note_waiting(int read_unserved)
{
	shmem_set_entries_waiting(waiting_count() + read_unserved);
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
	return TimestampTzPlusMilliseconds(now,
									   Max(clock_ms_until(first_due) - START_AHEAD_MS, 0));
}
