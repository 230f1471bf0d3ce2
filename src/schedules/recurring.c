/*-------------------------------------------------------------------------
 *
 * recurring.c
 *	  The times of recurring schedules: `every` (a cron expression or an
 *	  interval) in a time zone, and retries.next_runs().
 *
 * A cron expression names wall-clock minutes (src/cron.c finds the next
 * one); this file turns each into an instant with PostgreSQL's own
 * time-zone code, by these rules (doc/operations.md, "Recurring
 * schedules"):
 *
 *	- a wall-clock time that a daylight-saving shift skips (02:30 on the
 *	  spring-forward night in America/New_York, or any time of 30 December
 *	  2011 in Pacific/Apia) fires once, at the instant of the shift;
 *	- a wall-clock time that happens twice (01:30 on the fall-back night)
 *	  fires once, at its first occurrence.
 *
 * An interval ('30s', '1h30m', '5 minutes') is a fixed rate: the instants
 * origin + k * interval, which no time zone or shift moves.
 *
 * IDENTIFICATION
 *	  src/schedules/recurring.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "catalog/pg_type.h"
#include "common/int.h"
#include "datatype/timestamp.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "pgtime.h"
#include "utils/builtins.h"
#include "utils/datetime.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"
#include "access/tupdesc.h"

#include "base/base.h"
#include "core/cron.h"
#include "core/policy.h"
#include "schedules/recurring.h"

PG_FUNCTION_INFO_V1(retries_next_runs);

/* Most instants one call of next_runs() returns */
#define NEXT_RUNS_MAX	10000

/* Longest every and time zone, in bytes: no message quotes more */
#define RECURRING_TEXT_MAX	256

/* Shortest interval of an interval schedule */
#define EVERY_MIN_USECS	USECS_PER_SEC

/*
 * check_length -- refuse a text of more than RECURRING_TEXT_MAX bytes
 * ('what': every, timezone) before any message quotes it
 */
static void
check_length(const char *text, const char *what)
{
	if (strlen(text) > RECURRING_TEXT_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid %s: %zu bytes, more than %d", what, strlen(text),
						RECURRING_TEXT_MAX)));
}

/*
 * raise_every_error -- ereport a PolicyError about `every`
 */
static void
raise_every_error(const PolicyError *err)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("invalid every: %s", err->message),
			 err->hint[0] ? errhint("%s", err->hint) : 0));
}

/*
 * parse_interval_text -- an interval in PostgreSQL's own syntax ('5
 * minutes', '1 day 2 hours') as microseconds, days counting 24 hours;
 * months, which have no fixed length, are refused
 */
static int64
parse_interval_text(const char *every)
{
	Interval   *volatile iv = NULL;
	int64		usecs;
	MemoryContext oldcxt = CurrentMemoryContext;

	PG_TRY();
	{
		iv = DatumGetIntervalP(DirectFunctionCall3(interval_in,
												   CStringGetDatum(every),
												   ObjectIdGetDatum(InvalidOid),
												   Int32GetDatum(-1)));
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		/* raised again at once, as ours: nothing goes on after the error */
		MemoryContextSwitchTo(oldcxt);
		edata = CopyErrorData();
		FlushErrorState();
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid every: \"%s\" is neither a cron expression nor an interval",
						every),
				 errdetail_internal("%s", edata->message),
				 errhint("Write five cron fields, such as '*/5 * * * *', a macro such as '@daily' (or '@reboot', at each start of the server), or an interval such as '30s', '1h30m' or '5 minutes'.")));
	}
	PG_END_TRY();
	if (iv->month != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid every: interval \"%s\" has months, which have no fixed length",
						every),
				 errhint("Use a cron expression, such as '0 0 1 * *' for the first of each month.")));
	if (pg_mul_s64_overflow((int64) iv->day, USECS_PER_DAY, &usecs) ||
		pg_add_s64_overflow(usecs, iv->time, &usecs))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid every: interval \"%s\" is out of range", every)));
	return usecs;
}

/*
 * is_at_start -- is 'every' pg_cron's '@reboot' (in any case, white space
 * around it allowed), as EVERY_AT_START_REGEX says
 */
static bool
is_at_start(const char *every)
{
	const char *p = every;
	size_t		n;

	while (*p == ' ' || (*p >= '\t' && *p <= '\r'))
		p++;
	if (pg_strncasecmp(p, "@reboot", 7) != 0)
		return false;
	for (n = 7; p[n] != '\0'; n++)
		if (!(p[n] == ' ' || (p[n] >= '\t' && p[n] <= '\r')))
			return false;
	return true;
}

void
recurring_every_parse(const char *every, RetriesEvery *result)
{
	PolicyError err;

	check_length(every, "every");
	memset(result, 0, sizeof(*result));
	if (is_at_start(every))
	{
		result->at_start = true;
		return;
	}
	if (cron_looks_like_cron(every))
	{
		if (!cron_parse(every, &result->cron, &err))
			raise_every_error(&err);
		result->is_cron = true;
		return;
	}
	if (!policy_parse_duration(every, strlen(every), &result->usecs, NULL))
		result->usecs = parse_interval_text(every);
	if (result->usecs < EVERY_MIN_USECS)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid every: interval \"%s\" is shorter than 1 second", every),
				 errhint("An interval schedule fires at most once a second; a cron expression at most once a minute.")));
}

pg_tz *
recurring_time_zone(const char *name)
{
	pg_tz	   *tz;

	check_length(name, "timezone");
	/* a POSIX zone's <abbreviation> may hold any bytes (t/060) */
	args_check_encoding(name, strlen(name), "timezone");
	tz = pg_tzset(name);

	if (tz == NULL || !pg_tz_acceptable(tz))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid timezone: time zone \"%s\" is not known", name),
				 errhint("Use a name from pg_timezone_names, such as 'UTC' or 'Europe/London'.")));
	return tz;
}

/* unix_seconds -- the whole second at or before t, as a pg_time_t */
static pg_time_t
unix_seconds(TimestampTz t)
{
	int64		secs = t / USECS_PER_SEC;

	if (t < 0 && t % USECS_PER_SEC != 0)
		secs--;					/* floor, not truncation */
	return (pg_time_t) (secs + (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * SECS_PER_DAY);
}

/* wall_clock -- the wall-clock minute of instant t in tz */
static void
wall_clock(pg_time_t t, pg_tz *tz, CronTime *wall)
{
	struct pg_tm *tm = pg_localtime(&t, tz);

	if (tm == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
				 errmsg("timestamp out of range for time zone \"%s\"",
						pg_get_timezone_name(tz))));
	wall->year = tm->tm_year + 1900;
	wall->month = tm->tm_mon + 1;
	wall->day = tm->tm_mday;
	wall->hour = tm->tm_hour;
	wall->minute = tm->tm_min;
}

/*
 * instant_of -- the instant at which the wall-clock minute 'wall' of tz
 * fires: its first occurrence, or, when a shift skips it, the shift
 *
 * It walks the zone's offset periods over a window wide enough for any
 * offset that PostgreSQL accepts, earliest first: the zones of the tz
 * database stay within 15 hours of UTC, but a POSIX zone may be up to 167
 * hours and 59 minutes from it in standard and in summer time (UTC-167,
 * <X>+41<Y>+42,M3.5.0,M10.5.0; PostgreSQL refuses offsets with seconds),
 * so the window is ZONE_REACH either side.  In a period with offset 'off', the wall time L happens at
 * L - off if that falls inside the period.  At a shift forward from offset
 * 'a' to 'b' at instant B, the wall times [B + a, B + b) never happen.
 * Every wall time therefore either happens or is skipped within the
 * window; one that is neither means the zone is not what this code knows,
 * and is an error, not a guess.
 */
#define ZONE_REACH		((pg_time_t) 8 * 24 * SECS_PER_HOUR)

static pg_time_t
instant_of(const CronTime *wall, pg_tz *tz)
{
	pg_time_t	local = (pg_time_t) (date2j(wall->year, wall->month, wall->day) -
									 UNIX_EPOCH_JDATE) * SECS_PER_DAY +
	wall->hour * SECS_PER_HOUR + wall->minute * SECS_PER_MINUTE;
	pg_time_t	from = local - ZONE_REACH;
	pg_time_t	until = local + ZONE_REACH;

	while (from <= until)
	{
		long int	before_off,
					after_off;
		int			before_dst,
					after_dst;
		pg_time_t	boundary;
		int			r;

		r = pg_next_dst_boundary(&from, &before_off, &before_dst, &boundary,
								 &after_off, &after_dst, tz);
		if (r < 0)
			break;
		if (local - before_off >= from && (r == 0 || local - before_off < boundary))
			return local - before_off;
		if (r == 0)
			break;
		if (after_off > before_off &&
			local >= boundary + before_off && local < boundary + after_off)
			return boundary;
		from = boundary;
	}
	ereport(ERROR,
			(errcode(ERRCODE_INTERNAL_ERROR),
			 errmsg("could not place %04d-%02d-%02d %02d:%02d in time zone \"%s\"",
					wall->year, wall->month, wall->day, wall->hour, wall->minute,
					pg_get_timezone_name(tz))));
	return local;				/* not reached */
}

TimestampTz
recurring_every_next(const RetriesEvery *every, pg_tz *tz, TimestampTz origin,
					 TimestampTz after)
{
	if (every->at_start)
		return DT_NOEND;
	if (!every->is_cron)
	{
		int64		k;
		TimestampTz next;

		if (after < origin)
			return origin;
		k = (after - origin) / every->usecs + 1;
		if (pg_mul_s64_overflow(k, every->usecs, &next) ||
			pg_add_s64_overflow(next, origin, &next) ||
			!IS_VALID_TIMESTAMP(next))
			return DT_NOEND;
		return next;
	}
	else
	{
		pg_time_t	after_secs = unix_seconds(after);
		CronTime	wall;

		wall_clock(after_secs, tz, &wall);
		for (;;)
		{
			pg_time_t	at;

			CHECK_FOR_INTERRUPTS();
			if (!cron_next(&every->cron, &wall, &wall))
				return DT_NOEND;
			at = instant_of(&wall, tz);
			/* a wall time seen again after a shift back is not a new one */
			if (at > after_secs)
				return time_t_to_timestamptz(at);
		}
	}
}

/*
 * years_begin, years_end -- the instants of the years 1 to 9999 that a
 * cron walk (core/cron.c) covers in any zone: a week within them, wider
 * than any zone's offset (the seventeenth hostile review: before the year
 * 1 the walk took the wrong day of the week)
 */
static TimestampTz
years_begin(void)
{
	return (TimestampTz) (date2j(1, 1, 8) - POSTGRES_EPOCH_JDATE) * USECS_PER_DAY;
}

static TimestampTz
years_end(void)
{
	return (TimestampTz) (date2j(9999, 12, 24) - POSTGRES_EPOCH_JDATE) * USECS_PER_DAY;
}

/*
 * retries_next_runs -- retries.next_runs(every, timezone, after, n): the
 * next n instants at which a schedule of `every` in `timezone` would fire
 * after `after` (an interval schedule: counted from `after`)
 */
Datum
retries_next_runs(PG_FUNCTION_ARGS)
{
	char	   *every_text = text_to_cstring(PG_GETARG_TEXT_PP(0));
	char	   *tz_name = text_to_cstring(PG_GETARG_TEXT_PP(1));
	TimestampTz after = PG_GETARG_TIMESTAMPTZ(2);
	int32		n = PG_GETARG_INT32(3);
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	RetriesEvery every;
	pg_tz	   *tz;
	TimestampTz at = after;
	TupleDesc	desc;
	MemoryContext oldcxt;

	if (n < 0 || n > NEXT_RUNS_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid n: %d is not between 0 and %d", n, NEXT_RUNS_MAX)));
	if (TIMESTAMP_NOT_FINITE(after) || after < years_begin() || after > years_end())
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid after: it must be a timestamp of the years 1 to 9999"),
				 errdetail("Cron expressions are walked over those years only.")));
	recurring_every_parse(every_text, &every);
	tz = recurring_time_zone(tz_name);

	/* the result: one timestamptz column, materialized */
	if (rsinfo == NULL || !IsA(rsinfo, ReturnSetInfo) ||
		!(rsinfo->allowedModes & SFRM_Materialize))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("retries.next_runs() must be called where a set can be returned")));
	oldcxt = MemoryContextSwitchTo(rsinfo->econtext->ecxt_per_query_memory);
	desc = CreateTemplateTupleDesc(1);
	TupleDescInitEntry(desc, (AttrNumber) 1, "next_runs", TIMESTAMPTZOID, -1, 0);
	rsinfo->returnMode = SFRM_Materialize;
	rsinfo->setResult = tuplestore_begin_heap(false, false, work_mem);
	rsinfo->setDesc = desc;
	MemoryContextSwitchTo(oldcxt);
	for (int i = 0; i < n; i++)
	{
		Datum		value;
		bool		isnull = false;

		at = recurring_every_next(&every, tz, after, at);
		if (TIMESTAMP_NOT_FINITE(at))
			break;
		value = TimestampTzGetDatum(at);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, &value, &isnull);
	}
	return (Datum) 0;
}
