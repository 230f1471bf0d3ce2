/*-------------------------------------------------------------------------
 *
 * cron.h
 *	  Cron expressions of recurring schedules: parsing and the next
 *	  matching wall-clock minute.
 *
 * Like policy.h, everything here is a pure function: no server state, no
 * palloc, no ereport, only the C standard library, so that the SQL layer,
 * the workers, the unit tests (test/cron_test.c) and the fuzzers share one
 * implementation.  Errors come back in a PolicyError.
 *
 * Times here are wall-clock times of no time zone (CronTime); turning them
 * into instants, with the daylight-saving rules of a zone, is the server
 * layer's work (PostgreSQL's own time-zone code).
 *
 * The grammar is Vixie cron's five fields: minute (0-59), hour (0-23), day
 * of month (1-31), month (1-12 or jan-dec), day of week (0-7 or sun-sat, 0
 * and 7 both Sunday).  A field is a comma-separated list of '*', a value, or
 * a range 'a-b', each optionally followed by '/step'; 'a/step' means
 * a-(the field's maximum)/step.  Names are case-insensitive.  The day of
 * month may also be 'L' (or 'l', or pg_cron's '$'): the last day of the
 * month, alone or as an element of a list ('1,15,L'), never in a range or
 * with a step.  When both day fields are restricted (neither starts with
 * '*'), a day matches if either does; otherwise it must match both.  The macros @yearly (@annually),
 * @monthly, @weekly, @daily (@midnight) and @hourly stand for their usual
 * expressions.
 *
 *-------------------------------------------------------------------------
 */
#ifndef RETRIES_CRON_H
#define RETRIES_CRON_H

#include <stdbool.h>
#include <stdint.h>

#include "core/policy.h"

/* A parsed cron expression: one bit per value that matches */
typedef struct CronSpec
{
	uint64_t	minutes;		/* bit m: minute m, 0..59 */
	uint32_t	hours;			/* bit h: hour h, 0..23 */
	uint32_t	days;			/* bit d: day of month d, 1..31; bit 0:
								 * CRON_LAST_DAY */
	uint16_t	months;			/* bit m: month m, 1..12 */
	uint8_t		weekdays;		/* bit w: day of week w, 0 (Sunday)..6 */
	bool		days_star;		/* the day-of-month field starts with '*' */
	bool		weekdays_star;	/* the day-of-week field starts with '*' */
} CronSpec;

/* CronSpec.days: the last day of the month ('L'), whichever day it is */
#define CRON_LAST_DAY	UINT32_C(1)

/* A wall-clock minute: no zone, no seconds */
typedef struct CronTime
{
	int			year;			/* 1 .. 9999 */
	int			month;			/* 1 .. 12 */
	int			day;			/* 1 .. days in the month */
	int			hour;			/* 0 .. 23 */
	int			minute;			/* 0 .. 59 */
} CronTime;

/*
 * Is str (NUL-terminated) meant as a cron expression rather than an
 * interval: a macro ('@...'), anything with '*', ',' or '/' (which no
 * interval has), or five fields separated by white space?  Says nothing of
 * whether it is a valid one.
 */
extern bool cron_looks_like_cron(const char *str);

/*
 * Parse a cron expression.  Refuses (with the bad field and part named in
 * err) values out of range, unknown names, empty lists, steps of 0, ranges
 * that run backwards, and a day of month that none of the chosen months
 * has (such as '0 0 30 2 *'), which would never fire.
 */
extern bool cron_parse(const char *str, CronSpec *result, PolicyError *err);

/* Does the date y-m-d match the day fields of spec? */
extern bool cron_day_matches(const CronSpec *spec, int year, int month, int day);

/*
 * The first wall-clock minute strictly after 'after' that spec matches,
 * into *next.  Returns false if there is none before year 10000 (or within
 * CRON_SEARCH_DAYS, which a parsed spec never needs).
 */
extern bool cron_next(const CronSpec *spec, const CronTime *after, CronTime *next);

/* Does spec match the wall-clock minute t? */
extern bool cron_matches(const CronSpec *spec, const CronTime *t);

/* Move t one minute on, and compare two minutes (as strcmp does) */
extern void cron_add_minute(CronTime *t);
extern int	cron_compare(const CronTime *a, const CronTime *b);

/* Days in a month, and the day of week (0 = Sunday) of a date */
extern int	cron_days_in_month(int year, int month);
extern int	cron_weekday(int year, int month, int day);

/*
 * The longest search cron_next makes, in days.  The rarest day a parsed spec
 * can choose is a 29 February that is also a given day of week: a restricted
 * day of month with a day of week that is a step over '*' matches only days
 * that are both (cron_test has one).  The Gregorian calendar has 14,609 days
 * between two of those around a skipped leap year (2088 to 2128); every
 * other choice recurs sooner.
 */
#define CRON_SEARCH_DAYS	14610

#endif							/* RETRIES_CRON_H */
