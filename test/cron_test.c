/*-------------------------------------------------------------------------
 *
 * cron_test.c
 *	  Unit tests of the pure cron code in src/core/cron.c: parsing, refusals
 *	  with the bad part named, Vixie cron's day rule, and the next matching
 *	  minute, checked against a minute-by-minute search.
 *
 *		cc -std=c99 -Wall -Wextra -Werror -Isrc test/cron_test.c src/core/cron.c src/core/policy.c -lm
 *
 * ("make unittest" does this).  The last line of output is always
 *
 *		cron_test: N passed, M failed
 *
 * and the exit status is non-zero when M > 0.
 *
 * IDENTIFICATION
 *	  test/cron_test.c
 *
 *-------------------------------------------------------------------------
 */
#include "core/cron.h"

#include <stdio.h>
#include <string.h>

#include "unit.h"

/* parses: str is accepted */
static CronSpec
parses(const char *str)
{
	CronSpec	spec;
	PolicyError err;

	memset(&spec, 0, sizeof(spec));
	if (!cron_parse(str, &spec, &err))
	{
		failed++;
		fprintf(stderr, "cron_parse refused \"%s\": %s\n", str, err.message);
	}
	else
		passed++;
	return spec;
}

/* refused: str is refused with a message containing 'want' */
static void
refused(const char *str, const char *want)
{
	CronSpec	spec;
	PolicyError err;
	bool		accepted = cron_parse(str, &spec, &err);

	check_refused("cron_parse", str, accepted, &err, want);
}

/* next_is: the first match after 'after' of expr is 'want' (as text) */
static void
next_is(const char *expr, CronTime after, const char *want)
{
	CronSpec	spec = parses(expr);
	CronTime	next;
	char		got[32] = "none";

	if (cron_next(&spec, &after, &next))
		snprintf(got, sizeof(got), "%04d-%02d-%02d %02d:%02d",
				 next.year, next.month, next.day, next.hour, next.minute);
	CHECK(strcmp(got, want) == 0, expr);
	if (strcmp(got, want) != 0)
		fprintf(stderr, "  got %s, wanted %s\n", got, want);
}

/*
 * agrees: from 'start', for 'minutes' minutes, cron_next gives the same
 * minute as stepping one minute at a time
 */
static void
agrees(const char *expr, CronTime start, int minutes)
{
	CronSpec	spec = parses(expr);
	CronTime	t = start;
	CronTime	want;
	bool		ok = true;

	if (spec.minutes == 0)
		return;					/* refused: parses() counted it */
	/* the first match after t, the slow way, found once and then kept up */
	want = t;
	do
		cron_add_minute(&want);
	while (!cron_matches(&spec, &want));
	for (int i = 0; i < minutes && ok; i++)
	{
		CronTime	got;

		if (!cron_next(&spec, &t, &got) || cron_compare(&got, &want) != 0)
		{
			ok = false;
			fprintf(stderr, "  %s after %04d-%02d-%02d %02d:%02d: got %04d-%02d-%02d %02d:%02d\n",
					expr, t.year, t.month, t.day, t.hour, t.minute,
					got.year, got.month, got.day, got.hour, got.minute);
		}
		cron_add_minute(&t);
		if (cron_compare(&t, &want) == 0)
			do
				cron_add_minute(&want);
			while (!cron_matches(&spec, &want));
	}
	CHECK(ok, expr);
}

/*
 * last_days_agree: from 'from' (a date) for 'days' days, expr (whose
 * day-of-month field is L and day-of-week '*') matches a day exactly when
 * the day 24 hours later is a 1st: pg_cron's own definition of the last
 * day, found here by stepping minutes rather than by the month's length
 */
static void
last_days_agree(const char *expr, CronTime from, int days)
{
	CronSpec	spec = parses(expr);
	CronTime	t = from;
	bool		ok = true;
	int			seen = 0;

	for (int i = 0; i < days && ok; i++)
	{
		CronTime	tomorrow = t;
		bool		last;

		for (int m = 0; m < 24 * 60; m++)
			cron_add_minute(&tomorrow);
		last = tomorrow.day == 1;
		seen += last;
		if (cron_day_matches(&spec, t.year, t.month, t.day) != last)
		{
			ok = false;
			fprintf(stderr, "  %s on %04d-%02d-%02d: %s\n", expr, t.year, t.month,
					t.day, last ? "the last day, not matched" : "matched, not the last day");
		}
		t = tomorrow;
	}
	CHECK(ok && seen > 0, expr);
}

int
main(void)
{
	CronSpec	s;
	CronTime	t = {2026, 11, 24, 10, 7};

	/* the calendar */
	CHECK(cron_weekday(2026, 11, 24) == 2, "2026-11-24 is a Tuesday");
	CHECK(cron_weekday(2000, 1, 1) == 6, "2000-01-01 is a Saturday");
	CHECK(cron_weekday(2011, 12, 31) == 6, "2011-12-31 is a Saturday");
	CHECK(cron_days_in_month(2024, 2) == 29, "2024 is a leap year");
	CHECK(cron_days_in_month(2100, 2) == 28, "2100 is not");
	CHECK(cron_days_in_month(2000, 2) == 29, "2000 is");

	/* what parses, and into what */
	s = parses("* * * * *");
	CHECK(s.minutes == (UINT64_C(1) << 60) - 1 && s.hours == (1u << 24) - 1 &&
		  s.weekdays == 0x7f && s.days_star && s.weekdays_star, "* * * * *");
	s = parses("0,30 9-17 * jan-MAR,Dec mon-fri");
	CHECK(s.minutes == ((UINT64_C(1) << 0) | (UINT64_C(1) << 30)), "minutes");
	CHECK(s.hours == (((1u << 18) - 1) & ~((1u << 9) - 1)), "hours 9-17");
	CHECK(s.months == ((1u << 1) | (1u << 2) | (1u << 3) | (1u << 12)), "months");
	CHECK(s.weekdays == 0x3e && !s.weekdays_star, "mon-fri");
	s = parses("*/15 */6 1/10 * 7");
	CHECK(s.minutes == ((UINT64_C(1) << 0) | (UINT64_C(1) << 15) |
						(UINT64_C(1) << 30) | (UINT64_C(1) << 45)), "*/15");
	CHECK(s.hours == ((1u << 0) | (1u << 6) | (1u << 12) | (1u << 18)), "*/6");
	CHECK(s.days == ((1u << 1) | (1u << 11) | (1u << 21) | (1u << 31)), "1/10");
	CHECK(s.weekdays == 1 && !s.days_star, "7 is Sunday");
	s = parses("  @daily  ");
	CHECK(s.minutes == 1 && s.hours == 1 && s.days_star, "@daily");
	parses("@yearly");
	parses("@annually");
	parses("@monthly");
	parses("@weekly");
	parses("@midnight");
	parses("@hourly");
	parses("0 0 31 1,2 *");
	parses("0 0 29 2 *");
	parses("0 0 30 2 1");		/* both restricted: any Monday of February */
	CHECK(cron_looks_like_cron("0 0 * * *") && cron_looks_like_cron(" @daily"),
		  "looks like cron");
	CHECK(cron_looks_like_cron("* * * * * *") && cron_looks_like_cron("*/5"),
		  "a wrong number of fields still does");
	CHECK(!cron_looks_like_cron("5 minutes") && !cron_looks_like_cron("1h30m") &&
		  !cron_looks_like_cron("1 day 2 hours 3 minutes"),
		  "an interval does not");

	/* refusals name the bad part */
	refused("61 * * * *", "minute value 61 is out of range 0-59 in \"61\"");
	refused("* 24 * * *", "hour value 24 is out of range 0-23");
	refused("* * 0 * *", "day-of-month value 0 is out of range 1-31");
	refused("* * * 13 *", "month value 13 is out of range 1-12");
	refused("* * * * 8", "day-of-week value 8 is out of range 0-7");
	refused("* * * foo *", "unknown month name in \"foo\"");
	refused("* * * * sunday", "unknown day-of-week name in \"sunday\"");
	refused("x * * * *", "minute field \"x\" is not a number");
	refused("5-1 * * * *", "minute range 5-1 runs backwards");
	refused("*/0 * * * *", "minute step 0 is out of range 1-59");
	refused("*/ * * * *", "minute step in \"*/\" is not a number");
	refused("1,,2 * * * *", "minute field \"1,,2\" is not a number");
	refused("1;2 * * * *", "unexpected \";2\" in minute field \"1;2\"");
	refused("* * *", "has 3 fields, not 5");
	refused("* * * * * *", "has more than 5 fields");
	refused("", "has 0 fields, not 5");
	refused("@reboot", "unknown cron macro \"@reboot\"");
	refused("@daily 5", "unknown cron macro \"@daily\"");
	refused("0 0 30 2 *", "never fires");
	refused("0 0 31 4,6,9,11 *", "never fires");
	refused("99999999999999999999 * * * *", "minute value 99999999999999999999 is out of range 0-59");

	/* L (or pg_cron's $): the last day of the month, alone or in a list */
	s = parses("0 0 L * *");
	CHECK(s.days == CRON_LAST_DAY && !s.days_star, "L");
	s = parses("0 0 $ * *");
	CHECK(s.days == CRON_LAST_DAY, "$");
	s = parses("0 0 l * *");
	CHECK(s.days == CRON_LAST_DAY, "l");
	s = parses("0 0 1,15,L * *");
	CHECK(s.days == (CRON_LAST_DAY | (1u << 1) | (1u << 15)), "1,15,L");
	parses("0 0 L 2 *");
	parses("0 0 L,$ 4,6,9,11 *");
	refused("0 0 L-2 * *", "day-of-month L in \"L-2\" stands alone");
	refused("0 0 L/2 * *", "day-of-month L in \"L/2\" stands alone");
	refused("0 0 LW * *", "day-of-month L in \"LW\" stands alone");
	refused("0 0 1-L * *", "day-of-month L in \"1-L\" stands alone");
	refused("0 0 1,L/7 * *", "day-of-month L in \"1,L/7\" stands alone");
	refused("L * * * *", "minute field \"L\" is not a number");
	refused("0 0 * * L", "unknown day-of-week name in \"L\"");
	refused("0 0 * L *", "unknown month name in \"L\"");

	/* the next minute */
	next_is("*/15 * * * *", t, "2026-11-24 10:15");
	next_is("7 * * * *", t, "2026-11-24 11:07");
	next_is("0 0 * * *", t, "2026-11-25 00:00");
	next_is("0 0 1 1 *", (CronTime) {2026, 12, 31, 23, 59}, "2027-01-01 00:00");
	next_is("0 0 29 2 *", (CronTime) {2023, 3, 1, 0, 0}, "2024-02-29 00:00");
	next_is("0 0 29 2 *", (CronTime) {2096, 3, 1, 0, 0}, "2104-02-29 00:00");
	/* both day fields restricted: the 13th or a Friday */
	next_is("0 0 13 * 5", t, "2026-11-27 00:00");
	next_is("0 0 13 * 5", (CronTime) {2026, 11, 27, 0, 0}, "2026-12-04 00:00");
	/* one starts with '*': both must match (Mondays on days 1, 11, 21, 31) */
	next_is("0 0 */10 * 1", t, "2026-12-21 00:00");
	next_is("0 12 * * sun", t, "2026-11-29 12:00");
	next_is("59 23 31 12 *", (CronTime) {9999, 12, 31, 23, 59}, "none");
	/* a '*'-led day of week with a day of month: both must match */
	next_is("0 0 1 2 */7", t, "2032-02-01 00:00");
	next_is("0 0 29 2 */7", (CronTime) {2088, 2, 29, 0, 0}, "2128-02-29 00:00");
	/* the last day of the month, leap years included */
	next_is("0 0 L * *", t, "2026-11-30 00:00");
	next_is("0 0 L * *", (CronTime) {2026, 11, 30, 0, 0}, "2026-12-31 00:00");
	next_is("30 23 L 2 *", (CronTime) {2024, 1, 1, 0, 0}, "2024-02-29 23:30");
	next_is("30 23 L 2 *", (CronTime) {2099, 3, 1, 0, 0}, "2100-02-28 23:30");
	next_is("0 0 $ 4 *", (CronTime) {2026, 11, 24, 0, 0}, "2027-04-30 00:00");
	/* both day fields restricted: the last day or a Friday */
	next_is("0 0 L * 5", (CronTime) {2026, 11, 27, 0, 0}, "2026-11-30 00:00");
	next_is("0 0 L * 5", (CronTime) {2026, 11, 30, 0, 0}, "2026-12-04 00:00");
	/* a '*'-led day of week: the last day only when it is a Sunday */
	next_is("0 0 L * */7", t, "2027-01-31 00:00");

	/* against the slow way, over stretches with month and year ends */
	agrees("*/7 * * * *", (CronTime) {2026, 12, 31, 22, 0}, 300);
	agrees("0,30 9-17 * * mon-fri", (CronTime) {2026, 11, 20, 0, 0}, 20000);
	agrees("15 3 1,15 * *", (CronTime) {2027, 1, 30, 0, 0}, 60000);
	agrees("0 0 13 * 5", (CronTime) {2026, 1, 1, 0, 0}, 100000);
	agrees("0 0 */10 * 1", (CronTime) {2026, 1, 1, 0, 0}, 100000);
	agrees("30 2 * 3,10 0", (CronTime) {2026, 2, 27, 0, 0}, 100000);
	agrees("0 0 L * *", (CronTime) {2027, 12, 1, 0, 0}, 200000);
	agrees("15 6 1,L * mon", (CronTime) {2028, 1, 15, 0, 0}, 200000);
	agrees("59 23 L 2 *", (CronTime) {2099, 1, 1, 0, 0}, 600000);
	last_days_agree("0 0 L * *", (CronTime) {2023, 1, 1, 0, 0}, 3000);
	last_days_agree("0 0 $ * *", (CronTime) {2099, 12, 1, 0, 0}, 800);

	printf("cron_test: %d passed, %d failed\n", passed, failed);
	return failed > 0;
}
