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
 * (revisits_note, before the entry may go), here in its own memory, as
 * many as there are such databases (a couple of dozen bytes each, however
 * many a role may create), and wakes the database as it falls due
 * (launcher.c, revisit_due): as a commit would, which gives it an entry
 * again, but its looks go on backing off; one that gets none is kept a
 * second more, keeping when it first fell due, and the longest due are
 * woken first (revisits_take).
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
 * revisits_note -- database 'dboid' has work due at 'due' (first due at
 * 'since', if it was tried before), after 'looks' looks in a row that ran
 * nothing; with 'look', only a look at what its workers look after (a
 * gate, a waiting firing, calls the pool's cap holds back), no call or
 * firing.  Replaces what was kept for it.
 */
void
revisits_note(Oid dboid, TimestampTz due, TimestampTz since, int looks,
			  bool look)
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
 * revisits_first -- when the first database kept is due; 0 if none
 */
TimestampTz
revisits_first(void)
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
 * revisits_take -- the databases kept that are due within 'ahead_ms'
 * (only those with a call or a firing due, unless 'looks_too'), calls and
 * firings first, the longest due first, into due[] (room for 'max');
 * returns how many, and forgets them.  The longest due first: a database
 * tried with no entry to be had keeps when it first fell due
 * (revisit_due), so that one does not wait behind a hundred that fall due
 * again and again; calls and firings before looks, so that bob's call
 * does not wait behind a hundred looks at full gates (the forty-second
 * hostile review: 6-89 s late behind 96 databases at full gates).
 */
int
revisits_take(int ahead_ms, bool looks_too, RevisitDue *due, int max)
{
	HASH_SEQ_STATUS seq;
	Revisit    *r;
	RevisitDue *all;
	int			nall = 0;
	int			n;

	if (revisits_first() == 0 || clock_ms_until(first) > ahead_ms)
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
 * revisits_waiting -- how many databases kept are due and were tried
 * already, with no entry to be had then (launcher.c, revisit_due)
 */
int
revisits_waiting(void)
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
