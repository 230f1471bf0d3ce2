/*-------------------------------------------------------------------------
 *
 * clock.c
 *	  The time of day as the extension decides by it: one seam.
 *
 * Every decision that depends on the time of day reads it here: whether a
 * call is due and when the next one will be (the worker's claim and
 * sleep), the due time of a new or rearmed call, when a retry falls due,
 * which occurrence of a schedule comes next, and how much of a rate
 * limit's window has passed.  The clock read here runs ahead of the
 * system's by retries.debug_clock_offset, a setting for tests: moving it
 * forward is time passing, for all of those decisions at once, without a
 * test sleeping through it.  Moving it back delays what was planned by
 * the clock ahead until the system's clock reaches it.
 *
 * What is not such a decision reads the system's clock, unmoved, but here
 * too (clock_system_now, clock_system_statement_start): the times recorded
 * in the tables (created_at, updated_at, an attempt's started_at and
 * finished_at), how long an attempt, a batch or a wait has lasted, the time
 * limits of processes, and the validity of a role (as PostgreSQL checks
 * it).  No other file reads a clock (scripts/layers checks it), so that
 * every read is one of these, chosen on purpose.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"

#include "base/base.h"

/*
 * offset -- how far this clock runs ahead of the system's, in microseconds
 */
static inline TimestampTz
offset(void)
{
	return (TimestampTz) retries_debug_clock_offset * 1000;
}

/*
 * clock_ahead -- a time read from the system's clock, on this clock
 */
TimestampTz
clock_ahead(TimestampTz system_time)
{
	return system_time + offset();
}

/*
 * clock_now -- the time now
 */
TimestampTz
clock_now(void)
{
	return clock_ahead(GetCurrentTimestamp());
}

/*
 * clock_system_now -- the time now on the system's clock, not moved: for
 * what is recorded or measured, not decided (see the top)
 */
TimestampTz
clock_system_now(void)
{
	return GetCurrentTimestamp();
}

/*
 * clock_system_statement_start -- when the current statement started, on
 * the system's clock (a call's created_at)
 */
TimestampTz
clock_system_statement_start(void)
{
	return GetCurrentStatementStartTimestamp();
}

/*
 * clock_xact_now -- the time the transaction started, as now() is in SQL
 */
TimestampTz
clock_xact_now(void)
{
	return clock_ahead(GetCurrentTransactionStartTimestamp());
}

/*
 * clock_system_ms_until -- milliseconds from now until 'when' on the
 * system's clock, rounded up; 0 if past
 */
long
clock_system_ms_until(TimestampTz when)
{
	long		secs;
	int			usecs;

	TimestampDifference(GetCurrentTimestamp(), when, &secs, &usecs);
	return secs * 1000 + (usecs + 999) / 1000;
}

/*
 * clock_ms_until -- milliseconds from now until 'when' on this clock,
 * rounded up; 0 if past
 */
long
clock_ms_until(TimestampTz when)
{
	if (TIMESTAMP_NOT_FINITE(when))
		return clock_system_ms_until(when);
	return clock_system_ms_until(when - offset());
}

/*
 * clock_clamp_run_at -- a call's first due time: run_at, but no earlier
 * than now() (the transaction's start)
 *
 * Due calls run earliest first: a run_at far in the past ('-infinity')
 * would put a call ahead of every other role's calls that fell due before
 * it was scheduled.  'infinity' is refused: a call due then is one that a
 * runner runs (execute.c), which no one else may claim or lock.
 */
Datum
clock_clamp_run_at(Datum run_at)
{
	if (TIMESTAMP_IS_NOEND(DatumGetTimestampTz(run_at)))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("run_at must be a finite time"),
				 errdetail("A call due at infinity is one that a runner runs now."),
				 errhint("To hold calls back, use retries.pause(), or give a time far ahead.")));
	return TimestampTzGetDatum(Max(DatumGetTimestampTz(run_at), clock_xact_now()));
}
