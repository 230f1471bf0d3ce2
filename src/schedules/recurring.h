/*-------------------------------------------------------------------------
 *
 * recurring.h
 *	  The `every` of recurring schedules, in a time zone: parsing and the
 *	  next firing (see recurring.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef RETRIES_RECURRING_H
#define RETRIES_RECURRING_H

#include "datatype/timestamp.h"
#include "pgtime.h"

#include "core/cron.h"

/*
 * A parsed `every`: a cron expression, a fixed interval, or '@reboot' (at
 * each start of the server: no time, see schedule_arm_at_start)
 */
typedef struct RetriesEvery
{
	bool		is_cron;
	bool		at_start;		/* '@reboot' */
	CronSpec	cron;			/* when is_cron */
	int64		usecs;			/* when neither: the interval, >= 1 s */
} RetriesEvery;

/* What an every of '@reboot' looks like to SQL (a regular expression) */
#define EVERY_AT_START_REGEX	"^\\s*@[Rr][Ee][Bb][Oo][Oo][Tt]\\s*$"

/* Parse `every`, or raise 22023 naming the bad part */
extern void recurring_every_parse(const char *every, RetriesEvery *result);

/* The time zone of that name, or raise 22023 */
extern pg_tz *recurring_time_zone(const char *name);

/*
 * The first firing strictly after 'after': for a cron expression, the next
 * matching wall-clock minute of tz as an instant (a skipped one at its
 * shift, a repeated one at its first occurrence); for an interval,
 * origin + k * interval.  DT_NOEND if there is none (always for
 * '@reboot', which no time brings).
 */
extern TimestampTz recurring_every_next(const RetriesEvery *every, pg_tz *tz,
										TimestampTz origin, TimestampTz after);

#endif							/* RETRIES_RECURRING_H */
