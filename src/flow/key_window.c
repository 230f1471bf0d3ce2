/*-------------------------------------------------------------------------
 *
 * key_window.c
 *	  The spacing of a key's deliveries: an attempt of a call made with a
 *	  key_window starts only when no other call of its key runs, and at
 *	  least the window after the latest attempt of the key's other calls
 *	  began (doc/reference.md, retries.call's key_window).
 *
 * A key_window also dedupes (call.c: a call made within the window of the
 * creation of the key's latest call returns that call's id); this file is
 * the other half, checked by the worker just before an attempt starts, for
 * the calls whose claim says they have a window (call_data.key_window,
 * version 1.7).  Checking there, and not when the call is made, is what
 * holds the rule through whatever moves a call's due time: a backlog, a
 * pause, a crash, priorities, retry_now(), several workers.  A call that
 * may not start yet is put off (its next_attempt moved), uncharged, and
 * the worker goes on with its batch.
 *
 * The other calls of the key that run now are seen so:
 *
 * - a batch that starts a call of the key holds the key's window lock
 *   until it ends (its attempt's outcome commits with it): an advisory
 *   lock of a class SQL cannot take, whose tag is a keyed hash of the role
 *   and key (shmem_try_name_lock); another batch that cannot take it
 *   (it never waits for it) puts its call off.  A batch holds one lock per
 *   key it started, at most MAX_STARTED_KEYS: the calls of more keys wait
 *   for a later batch;
 * - a call handed to a runner (a procedure's or a command's: its row is
 *   due at 'infinity' while it runs), looked for among the key's calls
 *   whatever the call to start is (a key names one function's calls only
 *   within its window: a function's call may take the key of a procedure's
 *   older call that still runs, the tenth hostile review);
 * - a call this batch started before: the lock is its own, so the batch
 *   keeps the keys it started (started_keys).
 *
 * An earlier design locked each of the key's other scheduled calls and
 * tested each against the others, and 50,000 calls of a key due next year
 * made one look last 84 s, while two workers' looks at a backlog of one key
 * kept finding each other's claims (the ninth hostile reviews).  A look
 * now tries one lock, then reads the key's calls once through the index
 * of keys (key_others): it costs as many index entries as the key has
 * calls, locking none.
 *
 * That read, of whether a runner runs one of the key's other calls and of
 * when their latest attempt began, comes after the try of the lock, in a
 * statement of its own, so that it sees the attempts of every batch whose
 * lock the try found released.  A crash leaves the attempt it cut short
 * in the ledger of its worker, which the first worker after the restart
 * charges (with its start) before any worker claims a call: the next call
 * of the key is spaced from it too.  An attempt cut short by a worker's
 * exit while the server stays up is charged when its call is next
 * claimed; until then the key's other calls do not see it.
 *
 * A call put off behind a running call of its key looks again after its
 * window, between RECHECK_MIN_MS and RECHECK_MS, then twice as long each
 * time up to RECHECK_MS (behind_running_delay), and the key's other calls
 * due before then with it (put_off_key); the key's calls later in the
 * same batch follow it without another look or write (put_off_keys).  The
 * spacing is measured on the workers' clock (clock.c), so that
 * retries.debug_clock_offset moves it as it moves every due time.
 *
 * IDENTIFICATION
 *	  src/flow/key_window.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "base/base.h"
#include "flow/flow.h"
#include "shmem/shmem.h"
#include "tables/tables.h"

/*
 * How long a call put off behind a running call of its key waits to look
 * again: its window, but at least RECHECK_MIN_MS (a window of a microsecond
 * had a worker spin, putting the same calls off again and again) and at
 * most RECHECK_MS
 */
#define RECHECK_MIN_MS			100
#define RECHECK_MS				1000

/*
 * The most keys with windows whose calls one batch starts: it holds a lock
 * of the server's lock table for each, until it ends
 */
#define MAX_STARTED_KEYS		32

/* The keys (text) whose calls this transaction started; in its memory */
static List *started_keys = NIL;
static bool callback_registered = false;

/*
 * A key whose calls this transaction put off behind a running one
 * (put_off_key), and until when; in its memory
 */
typedef struct KeyPutOff
{
	char	   *key;
	TimestampTz until;
} KeyPutOff;

static List *put_off_keys = NIL;

/*
 * forget_started_keys -- at the end of a transaction, its keys are gone
 * with its memory
 */
static void
forget_started_keys(XactEvent event, void *arg)
{
	if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_ABORT ||
		event == XACT_EVENT_PARALLEL_COMMIT || event == XACT_EVENT_PARALLEL_ABORT)
	{
		started_keys = NIL;
		put_off_keys = NIL;
	}
}

/*
 * remember_for_xact -- what 'cell' points to, once the lists above are
 * forgotten at the end of the transaction
 */
static void
remember_for_xact(List **list, void *cell)
{
	MemoryContext oldcxt;

	if (!callback_registered)
	{
		RegisterXactCallback(forget_started_keys, NULL);
		callback_registered = true;
	}
	oldcxt = MemoryContextSwitchTo(TopTransactionContext);
	*list = lappend(*list, cell);
	MemoryContextSwitchTo(oldcxt);
}

/*
 * started_here -- did this transaction start a call of 'key'?
 */
static bool
started_here(const char *key)
{
	ListCell   *lc;

	foreach(lc, started_keys)
	{
		if (strcmp((const char *) lfirst(lc), key) == 0)
			return true;
	}
	return false;
}

/*
 * note_started -- remember that this transaction starts a call of 'key'
 */
static void
note_started(const char *key)
{
	remember_for_xact(&started_keys, MemoryContextStrdup(TopTransactionContext, key));
}

/*
 * put_off_here -- did this transaction put off the calls of 'key' behind a
 * running one?  Until when, then (else 0)
 */
static TimestampTz
put_off_here(const char *key)
{
	ListCell   *lc;

	foreach(lc, put_off_keys)
	{
		KeyPutOff  *k = (KeyPutOff *) lfirst(lc);

		if (strcmp(k->key, key) == 0)
			return k->until;
	}
	return 0;
}

/*
 * note_put_off -- remember that this transaction put off the calls of 'key'
 * until 'until'
 */
static void
note_put_off(const char *key, TimestampTz until)
{
	KeyPutOff  *k = MemoryContextAlloc(TopTransactionContext, sizeof(KeyPutOff));

	k->key = MemoryContextStrdup(TopTransactionContext, key);
	k->until = until;
	remember_for_xact(&put_off_keys, k);
}

/*
 * behind_running_delay -- how long a call of a key whose other call runs
 * waits before it looks again: its window, at least RECHECK_MIN_MS, and
 * twice what it waited last ('waited': its due time less when it was last
 * written; 0 if a call of the key started since), up to RECHECK_MS.  A
 * call of a 1 ms window behind one that ran for minutes looked every
 * 100 ms, it and the key's 100 other calls, and their rows' versions
 * piled up faster than vacuum took them: a tenth of a core, more on a
 * loaded machine.
 */
static int64
behind_running_delay(int64 window, int64 waited)
{
	int64		least = Max(Min(window, RECHECK_MS * INT64CONST(1000)),
							RECHECK_MIN_MS * INT64CONST(1000));
	int64		delay = least;

	if (waited > 0 && waited <= 2 * RECHECK_MS * INT64CONST(1000))
		delay = Max(delay, 2 * waited);
	return Min(delay, Max(least, RECHECK_MS * INT64CONST(1000)));
}

/*
 * interval_usecs -- an interval as microseconds, a month as 30 days (as
 * PostgreSQL's own interval comparison counts it); a key_window is at most
 * 3650 days
 */
static int64
interval_usecs(const Interval *span)
{
	return span->time + (int64) span->day * USECS_PER_DAY +
		(int64) span->month * DAYS_PER_MONTH * USECS_PER_DAY;
}

/*
 * window_lock -- take the key's window lock (see the top of the file), for
 * as long as this transaction lasts; false if another batch holds it, or
 * this one holds as many as it may
 */
static bool
window_lock(Datum role, const char *key_text)
{
	if (list_length(started_keys) >= MAX_STARTED_KEYS)
		return false;
	return shmem_try_name_lock(RETRIES_WINDOW_LOCK_CLASS, DatumGetObjectId(role),
							   key_text, strlen(key_text));
}

/*
 * key_others -- one read of the key's other calls, without locks: does a
 * runner run one (its row is due at 'infinity' meanwhile)?  And when did
 * the latest attempt of those charged with one begin (kept calls:
 * retries.retention forgets older ones; 0 if none did)?  Only calls
 * charged with an attempt are looked up in attempt_data (a key's calls due
 * later have none).
 */
static bool
key_others(int64 id, Datum role, Datum key, TimestampTz *latest)
{
	static SPIPlanPtr plan = NULL;
	Oid			argtypes[3] = {INT8OID, OIDOID, TEXTOID};
	Datum		values[3] = {Int64GetDatum(id), role, key};
	bool		isnull;
	bool		running;
	Datum		d;

	plans_prepare_kept(&plan,
					   "WITH o AS MATERIALIZED (SELECT o.id, o.attempts,"
					   "  o.state OPERATOR(pg_catalog.=) 'scheduled'"
					   "  AND o.next_attempt OPERATOR(pg_catalog.=) 'infinity' AS running"
					   "  FROM retries.call_data o WHERE" CALLS_OTHERS_OF_KEY ")"
					   " SELECT EXISTS (SELECT FROM o WHERE running),"
					   "  (SELECT pg_catalog.max(a.started_at) FROM retries.attempt_data a"
					   "   WHERE a.call_id OPERATOR(pg_catalog.=) ANY ("
					   "    SELECT o.id FROM o WHERE o.attempts OPERATOR(pg_catalog.>) 0))",
					   3, argtypes);
	/* not read-only: a snapshot taken now, after the try of the lock */
	if (SPI_execute_plan(plan, values, NULL, false, 1) != SPI_OK_SELECT)
		elog(ERROR, "retries: could not read when a key's calls last started");
	running = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1,
										 &isnull));
	d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull);
	*latest = isnull ? 0 : DatumGetTimestampTz(d);
	return running;
}

/*
 * flow_key_window_allows -- may the attempt of call 'id', claimed by this
 * transaction and made with a key_window, start now?  If not, it is put
 * off (see the top of the file) and false returned.  Inside SPI, as the
 * extension's owner.
 */
bool
flow_key_window_allows(int64 id)
{
	static SPIPlanPtr plan = NULL;
	Oid			argtypes[1] = {INT8OID};
	Datum		values[1] = {Int64GetDatum(id)};
	HeapTuple	row;
	TupleDesc	desc;
	bool		key_null;
	bool		window_null;
	Datum		role;
	Datum		key;
	Datum		window_datum;
	char	   *key_text;
	int64		window;
	TimestampTz now = clock_now();
	TimestampTz last;
	int64		waited;
	TimestampTz due;
	TimestampTz written;
	bool		locked;
	bool		isnull;

	plans_prepare_kept(&plan,
					   "SELECT scheduled_by::pg_catalog.oid, key, key_window, next_attempt, updated_at"
					   " FROM retries.call_data WHERE id OPERATOR(pg_catalog.=) $1",
					   1, argtypes);
	if (SPI_execute_plan(plan, values, NULL, false, 1) != SPI_OK_SELECT)
		elog(ERROR, "retries: could not read the key of call " INT64_FORMAT, id);
	if (SPI_processed == 0)
		return true;
	row = SPI_tuptable->vals[0];
	desc = SPI_tuptable->tupdesc;
	role = SPI_getbinval(row, desc, 1, &key_null);
	key = SPI_getbinval(row, desc, 2, &key_null);
	window_datum = SPI_getbinval(row, desc, 3, &window_null);
	if (key_null || window_null)
		return true;
	window = interval_usecs(DatumGetIntervalP(window_datum));
	key_text = TextDatumGetCString(key);
	/* when it is due, when it was last written (put_off), so how long */
	due = DatumGetTimestampTz(SPI_getbinval(row, desc, 4, &isnull));
	written = DatumGetTimestampTz(SPI_getbinval(row, desc, 5, &isnull));
	waited = due - clock_ahead(written);

	/*
	 * One of the key's calls runs now: look again once it may have ended (a
	 * call of this batch's: once the window has passed)
	 */
	if (started_here(key_text))
	{
		calls_put_off(id, now + Max(window, RECHECK_MIN_MS * INT64CONST(1000)));
		return false;
	}

	/*
	 * The batch put the key's calls off already, this one with them (its row,
	 * read after, says so) unless it was past CALLS_PUT_OFF_MAX: a batch of
	 * the key's calls behind a running one makes one look and writes each row
	 * once, not one look per call (each of which put off all the others
	 * again)
	 */
	last = put_off_here(key_text);
	if (last != 0)
	{
		if (due < last)
			calls_put_off(id, last);
		return false;
	}
	locked = window_lock(role, key_text);
	if (key_others(id, role, key, &last) || !locked)
	{
		/*
		 * Twice as long as last time, unless a call of the key started since
		 * (one ran: the key moves, and its calls are looked at as often as
		 * before)
		 */
		last = now + behind_running_delay(window, last > written ? 0 : waited);
		calls_put_off_key(id, role, key, last);
		note_put_off(key_text, last);
		return false;
	}

	/* none runs: the window after the latest start */
	if (last != 0 && last + window > now)
	{
		calls_put_off(id, last + window);
		return false;
	}
	note_started(key_text);
	return true;
}
