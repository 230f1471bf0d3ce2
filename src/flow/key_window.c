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
 * - a call a worker has claimed holds its row locked FOR UPDATE until its
 *   batch ends: the check takes FOR KEY SHARE SKIP LOCKED on the key's
 *   other scheduled calls, and one that it could not lock is running, or
 *   about to (another worker's batch claimed it); one that it did lock
 *   stays locked until this batch ends, so that no other worker can claim
 *   it while this call's attempt runs (its claim skips it).  A role's own
 *   cancel() or reschedule() takes no lock that conflicts with it;
 * - a call handed to a runner (a procedure: its row is due at 'infinity'
 *   while it runs);
 * - a call this batch started before: its attempt is not written until
 *   the batch ends, so the batch keeps the keys it started (started_keys).
 *
 * The latest start of the key's other calls is read after that, in a
 * statement of its own, so that it sees the attempts of every batch whose
 * lock the check found released.  A crash leaves the attempt it cut short
 * in the ledger of its worker, which the first worker after the restart
 * charges (with its start) before any worker claims a call: the next call
 * of the key is spaced from it too.  An attempt cut short by a worker's
 * exit while the server stays up is charged when its call is next
 * claimed; until then the key's other calls do not see it.
 *
 * Two calls of a key that two workers claim at once each find the other
 * locked, and both are put off: the one with the lower id for a short
 * while (the window, from RECHECK_MIN_MS to RECHECK_MS), the other for the
 * whole window (at least RECHECK_MIN_MS), so that the first goes next.
 * The locks the check takes are FOR KEY SHARE, which a role's cancel(),
 * retry_now() or reschedule() (FOR NO KEY UPDATE, manage.c) does not wait
 * for.  The spacing is measured on the workers'
 * clock (clock.c), so that retries.debug_clock_offset moves it as it moves
 * every due time.
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

/*
 * How long a call put off behind a running call of its key waits to look
 * again: its window, but at least RECHECK_MIN_MS (a window of a microsecond
 * had a worker spin, putting the same calls off again and again) and at
 * most RECHECK_MS
 */
#define RECHECK_MIN_MS			100
#define RECHECK_MS				1000

/*
 * The other calls o of the key of call $1: of its role $2 and key $3 (the
 * index call_data_key is on the key's hash)
 */
#define OTHERS_OF_KEY \
	" o.scheduled_by OPERATOR(pg_catalog.=) $2::pg_catalog.regrole" \
	" AND pg_catalog.md5(o.key) OPERATOR(pg_catalog.=) pg_catalog.md5($3)" \
	" AND o.key OPERATOR(pg_catalog.=) $3" \
	" AND o.id OPERATOR(pg_catalog.<>) $1"

/* The keys (text) whose calls this transaction started; in its memory */
static List *started_keys = NIL;
static bool callback_registered = false;

/*
 * forget_started_keys -- at the end of a transaction, its keys are gone
 * with its memory
 */
static void
forget_started_keys(XactEvent event, void *arg)
{
	if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_ABORT ||
		event == XACT_EVENT_PARALLEL_COMMIT || event == XACT_EVENT_PARALLEL_ABORT)
		started_keys = NIL;
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
	MemoryContext oldcxt;

	if (!callback_registered)
	{
		RegisterXactCallback(forget_started_keys, NULL);
		callback_registered = true;
	}
	oldcxt = MemoryContextSwitchTo(TopTransactionContext);
	started_keys = lappend(started_keys, pstrdup(key));
	MemoryContextSwitchTo(oldcxt);
}

/*
 * put_off -- move call 'id' (whose row this transaction holds) to 'when',
 * uncharged
 */
static void
put_off(int64 id, TimestampTz when)
{
	static SPIPlanPtr plan = NULL;
	Oid			argtypes[2] = {INT8OID, TIMESTAMPTZOID};
	Datum		values[2] = {Int64GetDatum(id), TimestampTzGetDatum(when)};

	plans_prepare_kept(&plan,
					   "UPDATE retries.call_data SET next_attempt = $2,"
					   " updated_at = pg_catalog.now()"
					   " WHERE id OPERATOR(pg_catalog.=) $1",
					   2, argtypes);
	if (SPI_execute_plan(plan, values, NULL, false, 0) != SPI_OK_UPDATE)
		elog(ERROR, "retries: could not put off call " INT64_FORMAT, id);
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
 * others_running -- the key's other scheduled calls that run now (claimed
 * by another transaction, or in a runner): 0 if none, else -1 if one of
 * them was made before call 'id' (a lower id), 1 if all were made after
 * it.  Only a due call can have been claimed ('now' is the workers'
 * clock, by which claims take due calls), so the key's calls due later
 * are not looked at, and the due ones are locked FOR KEY SHARE (see the top
 * of the file): one look costs a read of the key's calls, and a lock of
 * each of its due ones (the first look puts each off, behind the call that
 * runs), never a rescan per call (a key of 50,000 calls due next year made
 * one look last 84 s, the ninth review).
 */
static int
others_running(int64 id, Datum role, Datum key, TimestampTz now)
{
	static SPIPlanPtr plan = NULL;
	Oid			argtypes[4] = {INT8OID, OIDOID, TEXTOID, TIMESTAMPTZOID};
	Datum		values[4] = {Int64GetDatum(id), role, key, TimestampTzGetDatum(now)};
	bool		isnull;
	Datum		earlier;

	/*
	 * The key's other due calls and those in a runner, each with whether this
	 * statement could lock it (a row that another transaction holds is
	 * missing from 'locked'): whether one runs, and whether one made before
	 */
	plans_prepare_kept(&plan,
					   "WITH others AS ("
					   " SELECT o.id, o.next_attempt FROM retries.call_data o"
					   " WHERE" OTHERS_OF_KEY
					   " AND o.state OPERATOR(pg_catalog.=) 'scheduled'"
					   " AND (o.next_attempt OPERATOR(pg_catalog.<=) $4"
					   "  OR o.next_attempt OPERATOR(pg_catalog.=) 'infinity')),"
					   " locked AS ("
					   " SELECT l.id FROM retries.call_data l"
					   " WHERE l.id OPERATOR(pg_catalog.=) ANY (SELECT id FROM others)"
					   " AND l.state OPERATOR(pg_catalog.=) 'scheduled'"
					   " FOR KEY SHARE SKIP LOCKED)"
					   " SELECT pg_catalog.bool_or(o.id OPERATOR(pg_catalog.<) $1)"
					   " FROM others o"
					   " WHERE o.next_attempt OPERATOR(pg_catalog.=) 'infinity'"
					   " OR NOT EXISTS (SELECT FROM locked l WHERE l.id OPERATOR(pg_catalog.=) o.id)",
					   4, argtypes);
	if (SPI_execute_plan(plan, values, NULL, false, 0) != SPI_OK_SELECT ||
		SPI_processed != 1)
		elog(ERROR, "retries: could not look for the running calls of a key");
	earlier = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	if (isnull)
		return 0;
	return DatumGetBool(earlier) ? -1 : 1;
}

/*
 * latest_start -- when the latest attempt of the key's other calls began
 * (kept calls: retries.retention forgets older ones); false if none did.
 * Only calls charged with an attempt are looked up in attempt_data (a
 * key's calls due later have none).
 */
static bool
latest_start(int64 id, Datum role, Datum key, TimestampTz *start)
{
	static SPIPlanPtr plan = NULL;
	Oid			argtypes[3] = {INT8OID, OIDOID, TEXTOID};
	Datum		values[3] = {Int64GetDatum(id), role, key};
	bool		isnull;
	Datum		d;

	plans_prepare_kept(&plan,
					   "SELECT pg_catalog.max(a.started_at) FROM retries.attempt_data a"
					   " WHERE a.call_id OPERATOR(pg_catalog.=) ANY ("
					   "  SELECT o.id FROM retries.call_data o WHERE" OTHERS_OF_KEY
					   "  AND o.attempts OPERATOR(pg_catalog.>) 0)",
					   3, argtypes);
	if (SPI_execute_plan(plan, values, NULL, false, 1) != SPI_OK_SELECT)
		elog(ERROR, "retries: could not read when a key's calls last started");
	d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	if (isnull)
		return false;
	*start = DatumGetTimestampTz(d);
	return true;
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
	int			running;

	plans_prepare_kept(&plan,
					   "SELECT scheduled_by::pg_catalog.oid, key, key_window"
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

	/* one of the key's calls runs now: look again once it may have ended */
	if (started_here(key_text))
		running = -1;
	else
		running = others_running(id, role, key, now);
	if (running != 0)
	{
		int64		wait = running < 0 ? window : Min(window, RECHECK_MS * INT64CONST(1000));

		put_off(id, now + Max(wait, RECHECK_MIN_MS * INT64CONST(1000)));
		return false;
	}

	/* none runs: the window after the latest start */
	if (latest_start(id, role, key, &last) && last + window > now)
	{
		put_off(id, last + window);
		return false;
	}
	note_started(key_text);
	return true;
}
