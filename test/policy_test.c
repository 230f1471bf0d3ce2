/*-------------------------------------------------------------------------
 *
 * policy_test.c
 *	  Unit tests of the pure policy code in src/core/policy.c: the policy
 *	  grammar, durations, the delay formula, jitter and retry_on.
 *
 * A standalone program with no server and no test framework:
 *
 *		cc -std=c99 -Wall -Wextra -Werror -Isrc test/policy_test.c src/core/policy.c -lm
 *
 * ("make unittest" does this).  Each CHECK that fails prints its file, line
 * and expression; the last line of output is always
 *
 *		policy_test: N passed, M failed
 *
 * and the exit status is non-zero when M > 0.  Loops over many values count
 * as one check each and report the first value that failed.
 *
 * IDENTIFICATION
 *	  test/policy_test.c
 *
 *-------------------------------------------------------------------------
 */
#include "core/policy.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int	passed;
static int	failed;

/*
 * check_at
 *		Count one check; on failure print where it is, what it checked and
 *		the input it was about, if any.
 */
static bool
check_at(bool ok, const char *file, int line, const char *expr,
		 const char *input)
{
	if (ok)
		passed++;
	else
	{
		failed++;
		if (input != NULL)
			fprintf(stderr, "%s:%d: CHECK failed: %s (input \"%s\")\n",
					file, line, expr, input);
		else
			fprintf(stderr, "%s:%d: CHECK failed: %s\n", file, line, expr);
	}
	return ok;
}

#define CHECK(expr)				check_at((expr), __FILE__, __LINE__, #expr, NULL)
#define CHECK_IN(line, expr, input) \
	check_at((expr), __FILE__, (line), #expr, (input))

#define USEC(n)		((int64_t) (n))
#define MS(n)		((int64_t) (n) * POLICY_USECS_PER_MS)
#define SEC(n)		((int64_t) (n) * POLICY_USECS_PER_SEC)
#define MIN(n)		((int64_t) (n) * POLICY_USECS_PER_MIN)
#define HOUR(n)		((int64_t) (n) * POLICY_USECS_PER_HOUR)
#define DAY(n)		((int64_t) (n) * POLICY_USECS_PER_DAY)

/*
 * xorshift64
 *		A tiny deterministic PRNG (Marsaglia), so that every run tests the
 *		same "random" values and a failure can be reproduced.
 */
static uint64_t
xorshift64(uint64_t *state)
{
	uint64_t	x = *state;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	*state = x;
	return x;
}

/*
 * bounded_len
 *		strlen that stops at max, for fields that might be unterminated
 *		(strnlen is POSIX, not C99).
 */
static size_t
bounded_len(const char *str, size_t max)
{
	size_t		len = 0;

	while (len < max && str[len] != '\0')
		len++;
	return len;
}

/*
 * same_spec
 *		Do two PolicySpecs have the same parts?  Compared field by field,
 *		since padding bytes are not part of the value.
 */
static bool
same_spec(const PolicySpec *a, const PolicySpec *b)
{
	return a->has_count == b->has_count && a->count == b->count &&
		a->min_delay == b->min_delay && a->has_max == b->has_max &&
		a->max_delay == b->max_delay;
}

/*
 * error_style_ok
 *		Does an error follow the message style: a non-empty lower-case
 *		message without a final period, and a hint that is empty or a
 *		sentence starting with a capital and ending with a period?
 */
static bool
error_style_ok(const PolicyError *err)
{
	size_t		mlen = bounded_len(err->message, POLICY_ERROR_LEN);
	size_t		hlen = bounded_len(err->hint, POLICY_ERROR_LEN);

	if (mlen == 0 || mlen >= POLICY_ERROR_LEN || hlen >= POLICY_ERROR_LEN)
		return false;
	/* lower case, except for an acronym such as SQLSTATE */
	if (err->message[0] >= 'A' && err->message[0] <= 'Z' &&
		!(err->message[1] >= 'A' && err->message[1] <= 'Z'))
		return false;
	if (err->message[mlen - 1] == '.')
		return false;
	if (hlen > 0 && (!(err->hint[0] >= 'A' && err->hint[0] <= 'Z') ||
					 err->hint[hlen - 1] != '.'))
		return false;
	return true;
}

/* A policy string that parses, and what it parses to */
typedef struct ValidPolicy
{
	int			line;
	const char *input;
	bool		has_count;
	int32_t		count;
	int64_t		min_delay;
	bool		has_max;
	int64_t		max_delay;
} ValidPolicy;

/*
 * test_valid_policies
 *		Every form of the grammar parses to the right parts.
 */
static void
test_valid_policies(void)
{
	static const ValidPolicy cases[] = {
		{__LINE__, "5s", false, 0, SEC(5), false, -1},
		{__LINE__, "5s 10m", false, 0, SEC(5), true, MIN(10)},
		{__LINE__, "10 5s", true, 10, SEC(5), false, -1},
		{__LINE__, "10 5s 10m", true, 10, SEC(5), true, MIN(10)},
		{__LINE__, "5 1s 1h", true, 5, SEC(1), true, HOUR(1)},
		{__LINE__, "1h30m", false, 0, MIN(90), false, -1},
		{__LINE__, "1.5s", false, 0, MS(1500), false, -1},
		{__LINE__, "250ms", false, 0, MS(250), false, -1},
		{__LINE__, "1d", false, 0, DAY(1), false, -1},
		{__LINE__, "1d2h3m4s500ms", false, 0,
		DAY(1) + HOUR(2) + MIN(3) + SEC(4) + MS(500), false, -1},
		{__LINE__, "  5s  ", false, 0, SEC(5), false, -1},
		{__LINE__, "\t10\t5s \t 10m\n", true, 10, SEC(5), true, MIN(10)},
		{__LINE__, "\r\n 3 \f 1s\v2s ", true, 3, SEC(1), true, SEC(2)},
		{__LINE__, "1 1ms", true, 1, MS(1), false, -1},
		{__LINE__, "999999999 1s", true, 999999999, SEC(1), false, -1},
		{__LINE__, "007 1s", true, 7, SEC(1), false, -1},
		{__LINE__, "1s 1s", false, 0, SEC(1), true, SEC(1)},
		{__LINE__, "0.001ms 3650d", false, 0, 1, true, POLICY_MAX_DURATION},
		{__LINE__, "3650d", false, 0, POLICY_MAX_DURATION, false, -1},
		{__LINE__, "2 0.5m 1.5h", true, 2, SEC(30), true, MIN(90)},
	};
	size_t		i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
	{
		const ValidPolicy *c = &cases[i];
		PolicySpec	spec;
		PolicyError err;

		if (!CHECK_IN(c->line, policy_parse(c->input, &spec, &err), c->input))
		{
			fprintf(stderr, "    message: %s\n", err.message);
			continue;
		}
		CHECK_IN(c->line, spec.has_count == c->has_count, c->input);
		CHECK_IN(c->line, spec.count == c->count, c->input);
		CHECK_IN(c->line, spec.min_delay == c->min_delay, c->input);
		CHECK_IN(c->line, spec.has_max == c->has_max, c->input);
		CHECK_IN(c->line, spec.max_delay == c->max_delay, c->input);
		CHECK_IN(c->line, err.message[0] == '\0' && err.hint[0] == '\0',
				 c->input);
	}

	/* the result and error pointers may be NULL */
	CHECK(policy_parse("5 1s 1h", NULL, NULL));
	CHECK(!policy_parse("5x", NULL, NULL));
	CHECK(!policy_parse(NULL, NULL, NULL));
}

/* A policy string that must not parse, and what the error must say */
typedef struct BadPolicy
{
	int			line;
	const char *input;
	const char *message;		/* the whole message, exactly */
	const char *hint;			/* a part of the hint */
} BadPolicy;

/*
 * test_malformed_policies
 *		Malformed policies fail, with a message naming the bad part.
 */
static void
test_malformed_policies(void)
{
	static const BadPolicy cases[] = {
		{__LINE__, "", "policy is empty",
		"Write \"[count] min [max]\", for example \"5 1s 1h\"."},
		{__LINE__, "  \t \n ", "policy is empty", "\"5 1s 1h\""},
		{__LINE__, "10", "missing minimum delay after count \"10\"", "\"5 1s\""},
		{__LINE__, "5", "missing minimum delay after count \"5\"", "\"5s\""},
		{__LINE__, "5x", "unknown unit \"x\" in duration \"5x\"", "d, h, m, s and ms"},
		{__LINE__, "10 20 5s", "count \"10\" is followed by another count \"20\"",
		"Only the first part can be a count"},
		{__LINE__, "10 20", "count \"10\" is followed by another count \"20\"",
		"a delay needs a unit"},
		{__LINE__, "1s 2s 3s", "too many parts: \"3s\" follows the maximum delay",
		"[count] min [max]"},
		{__LINE__, "10 5s 10m 20m",
		"too many parts: \"20m\" follows the maximum delay", "5 1s 1h"},
		{__LINE__, "5m 1h 2h 3h 4h",
		"too many parts: \"2h\" follows the maximum delay", "5 1s 1h"},
		{__LINE__, "0 1s", "count must be at least 1, not \"0\"",
		"max_attempts => 1"},
		{__LINE__, "-1 1s", "count must be at least 1, not \"-1\"",
		"leave it out to retry without limit"},
		{__LINE__, "1000000000 1s",
		"count \"1000000000\" exceeds the maximum of 999999999", "without limit"},
		{__LINE__, "99999999999999999999999999 1s",
		"count \"99999999999999999999999999\" exceeds the maximum of 999999999", ""},
		{__LINE__, "3.5 1s", "count \"3.5\" is not a whole number", "number of retries"},
		{__LINE__, "10s 5s",
		"maximum delay \"5s\" is less than minimum delay \"10s\"", "at least the minimum"},
		{__LINE__, "1h 30m",
		"maximum delay \"30m\" is less than minimum delay \"1h\"", ""},
		{__LINE__, "3 5s 0s",
		"maximum delay \"0s\" is less than minimum delay \"5s\"", ""},
		{__LINE__, "0s", "minimum delay must be positive, not \"0s\"", "greater than zero"},
		{__LINE__, "5 0ms 1s", "minimum delay must be positive, not \"0ms\"", ""},
		{__LINE__, "0.0000001s",
		"minimum delay must be positive, not \"0.0000001s\"", ""},
		{__LINE__, "-5s", "minimum delay must be positive, not \"-5s\"", "without a sign"},
		{__LINE__, "10 -5s", "minimum delay must be positive, not \"-5s\"", ""},
		{__LINE__, "5s -10m", "maximum delay must be positive, not \"-10m\"", ""},
		{__LINE__, "30m1h", "units out of order in duration \"30m1h\": \"h\" follows \"m\"",
		"largest to smallest"},
		{__LINE__, "5ms5s", "units out of order in duration \"5ms5s\": \"s\" follows \"ms\"",
		""},
		{__LINE__, "1s1d", "units out of order in duration \"1s1d\": \"d\" follows \"s\"", ""},
		{__LINE__, "1h1h", "unit \"h\" repeated in duration \"1h1h\"", "at most once"},
		{__LINE__, "1d2d", "unit \"d\" repeated in duration \"1d2d\"", ""},
		{__LINE__, "1.s", "invalid number \"1.\" in duration \"1.s\"",
		"digits after the decimal point"},
		{__LINE__, ".5s", "invalid number \".5\" in duration \".5s\"", "\"0.5s\""},
		{__LINE__, "1..5s", "invalid number \"1..5\" in duration \"1..5s\"",
		"at most one decimal point"},
		{__LINE__, "1.5.5s", "invalid number \"1.5.5\" in duration \"1.5.5s\"", ""},
		{__LINE__, "s", "missing number before unit \"s\" in duration \"s\"", ""},
		{__LINE__, "ms 5s", "missing number before unit \"ms\" in duration \"ms\"", ""},
		{__LINE__, "fast", "duration \"fast\" does not start with a number",
		"number and a unit"},
		{__LINE__, "5 s", "unit \"s\" is separated from its number \"5\" by white space",
		"\"5s\""},
		{__LINE__, "10 5 ms", "unit \"ms\" is separated from its number \"5\" by white space",
		""},
		{__LINE__, "5s 10 m", "unit \"m\" is separated from its number \"10\" by white space",
		""},
		{__LINE__, "5S", "unknown unit \"S\" in duration \"5S\"", "lower case"},
		{__LINE__, "5MS", "unknown unit \"MS\" in duration \"5MS\"", "lower case"},
		{__LINE__, "5M", "unknown unit \"M\" in duration \"5M\"", "months"},
		{__LINE__, "1e3s", "unknown unit \"e\" in duration \"1e3s\"", ""},
		{__LINE__, "5sec", "unknown unit \"sec\" in duration \"5sec\"", ""},
		{__LINE__, "5\xc2\xb5s", "unknown unit \"\xc2\xb5s\" in duration \"5\xc2\xb5s\"", ""},
		{__LINE__, "+5s", "sign \"+\" is not allowed in duration \"+5s\"", "without a sign"},
		{__LINE__, "-", "unexpected character \"-\" in duration \"-\"", ""},
		{__LINE__, "5s,10m", "unexpected character \",\" in duration \"5s,10m\"",
		"white space"},
		{__LINE__, "5s;10m", "unexpected character \";\" in duration \"5s;10m\"",
		"white space"},
		{__LINE__, "1h-5m", "unexpected character \"-\" in duration \"1h-5m\"", ""},
		{__LINE__, "5,5s", "unexpected character \",\" in duration \"5,5s\"", ""},
		{__LINE__, "5s\x01", "unexpected character \"\\x01\" in duration \"5s\\x01\"", ""},
		{__LINE__, "5s 10", "missing unit in duration \"10\"", "\"5s\""},
		{__LINE__, "10 5s 20", "missing unit in duration \"20\"", ""},
		{__LINE__, "3.5", "missing unit in duration \"3.5\"", ""},
		{__LINE__, "1h30", "missing unit after \"30\" in duration \"1h30\"", ""},
		{__LINE__, "99999999999999999999s",
		"duration \"99999999999999999999s\" exceeds the maximum of 3650d", "3650d"},
		{__LINE__, "1000000000d", "duration \"1000000000d\" exceeds the maximum of 3650d", ""},
		{__LINE__, "3651d", "duration \"3651d\" exceeds the maximum of 3650d", ""},
		{__LINE__, "1s 3650d1ms", "duration \"3650d1ms\" exceeds the maximum of 3650d", ""},
		{__LINE__, "87600h0.001ms",
		"duration \"87600h0.001ms\" exceeds the maximum of 3650d", ""},
		/* a syntax error is reported before a value that is too large */
		{__LINE__, "99999999999999999999x",
		"unknown unit \"x\" in duration \"99999999999999999999x\"", ""},
		/* left to right: the first bad part is the one reported */
		{__LINE__, "0 5x", "count must be at least 1, not \"0\"", ""},
		{__LINE__, "5x 0s 1s 2s", "unknown unit \"x\" in duration \"5x\"", ""},
	};
	size_t		i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
	{
		const BadPolicy *c = &cases[i];
		PolicySpec	before = {true, 42, 43, true, 44};
		PolicySpec	spec = before;
		PolicyError err;

		if (!CHECK_IN(c->line, !policy_parse(c->input, &spec, &err), c->input))
			continue;
		if (!CHECK_IN(c->line, strcmp(err.message, c->message) == 0, c->input))
			fprintf(stderr, "    got:      %s\n    expected: %s\n",
					err.message, c->message);
		if (!CHECK_IN(c->line, strstr(err.hint, c->hint) != NULL, c->input))
			fprintf(stderr, "    hint: %s\n    expected to contain: %s\n",
					err.hint, c->hint);
		CHECK_IN(c->line, error_style_ok(&err), c->input);
		/* a failed parse leaves the result alone */
		CHECK_IN(c->line, same_spec(&spec, &before), c->input);
	}
}

/*
 * test_long_tokens
 *		Very long tokens are quoted shortened, never overflowing a field and
 *		never cutting a multibyte character in half.
 */
static void
test_long_tokens(void)
{
	char		input[4096];
	PolicyError err;
	size_t		i;
	const char *quote_start;
	const char *dots;

	/* 2000 'x' after a number: the unit is quoted, cut short */
	input[0] = '5';
	memset(input + 1, 'x', 2000);
	input[2001] = '\0';
	CHECK(!policy_parse(input, NULL, &err));
	CHECK(strncmp(err.message, "unknown unit \"xxxx", 18) == 0);
	CHECK(strstr(err.message, "...\"") != NULL);
	CHECK(strlen(err.message) < 150);
	CHECK(error_style_ok(&err));

	/* a long run of two-byte UTF-8 characters is cut between characters */
	input[0] = '5';
	for (i = 0; i < 1000; i++)
	{
		input[1 + 2 * i] = (char) 0xc3;
		input[2 + 2 * i] = (char) 0xa9;
	}
	input[2001] = '\0';
	CHECK(!policy_parse(input, NULL, &err));
	quote_start = strchr(err.message, '"');
	dots = strstr(err.message, "...\"");
	CHECK(quote_start != NULL && dots != NULL);
	if (quote_start != NULL && dots != NULL)
		CHECK((dots - quote_start - 1) % 2 == 0);	/* whole characters */

	/* a count of 3000 digits, and 3000 fraction digits */
	memset(input, '9', 3000);
	strcpy(input + 3000, " 1s");
	CHECK(!policy_parse(input, NULL, &err));
	CHECK(strstr(err.message, "exceeds the maximum of 999999999") != NULL);
	input[0] = '1';
	input[1] = '.';
	memset(input + 2, '9', 3000);
	strcpy(input + 3002, "s");
	{
		PolicySpec	spec;

		/* "1.999...9s" rounds to 2s exactly */
		CHECK(policy_parse(input, &spec, &err));
		CHECK(spec.min_delay == SEC(2));
	}
}

/* A duration string that parses, and its value */
typedef struct ValidDuration
{
	int			line;
	const char *input;
	int64_t		usecs;
} ValidDuration;

/*
 * test_durations
 *		policy_parse_duration on its own: values, rounding, limits, errors.
 */
static void
test_durations(void)
{
	static const ValidDuration cases[] = {
		{__LINE__, "0s", 0},
		{__LINE__, "0ms", 0},
		{__LINE__, "0d", 0},
		{__LINE__, "0.0s", 0},
		{__LINE__, "1ms", 1000},
		{__LINE__, "0.001ms", 1},
		{__LINE__, "0.01ms", 10},
		{__LINE__, "0.25ms", 250},
		{__LINE__, "2s0.25ms", 2000250},
		{__LINE__, "1.5s", 1500000},
		{__LINE__, "1.5m", SEC(90)},
		{__LINE__, "0.5d", HOUR(12)},
		{__LINE__, "1.1h", SEC(3960)},
		{__LINE__, "007s", SEC(7)},
		{__LINE__, "1h30m", MIN(90)},
		{__LINE__, "1d2h3m4s500ms", DAY(1) + HOUR(2) + MIN(3) + SEC(4) + MS(500)},
		{__LINE__, "1d1ms", DAY(1) + MS(1)},
		{__LINE__, "1.5h30m", HOUR(2)},
		/* fractions round to the nearest microsecond, halves up */
		{__LINE__, "0.0005ms", 1},
		{__LINE__, "0.0004999ms", 0},
		{__LINE__, "0.0015ms", 2},
		{__LINE__, "0.1234567s", 123457},
		{__LINE__, "1.0000005s", 1000001},
		{__LINE__, "1.000000499999999999999999999s", 1000000},
		{__LINE__, "0.00000000000000000000000000001d", 0},
		{__LINE__, "0.000000000011574074074074074d", 1},	/* 1 / 86400e6 d */
		{__LINE__, "0.0000000115740740740740740741d", 1000},
		{__LINE__, "0.00000001d", 864},
		/* the largest duration, written every way */
		{__LINE__, "3650d", POLICY_MAX_DURATION},
		{__LINE__, "87600h", POLICY_MAX_DURATION},
		{__LINE__, "5256000m", POLICY_MAX_DURATION},
		{__LINE__, "315360000s", POLICY_MAX_DURATION},
		{__LINE__, "315360000000ms", POLICY_MAX_DURATION},
		{__LINE__, "3649d24h", POLICY_MAX_DURATION},
		{__LINE__, "3649d23h59m59s999.999ms", POLICY_MAX_DURATION - 1},
		{__LINE__, "3649d23h59m59s999.9994ms", POLICY_MAX_DURATION - 1},
		{__LINE__, "3649d23h59m59s999.9995ms", POLICY_MAX_DURATION},
		{__LINE__, "3650d0.0004ms", POLICY_MAX_DURATION},
		{__LINE__, "0000000000000000000000000000000000001s", SEC(1)},
	};
	size_t		i;
	int64_t		v;
	PolicyError err;
	char		buf[8192];

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
	{
		const ValidDuration *c = &cases[i];

		v = -42;
		if (!CHECK_IN(c->line, policy_parse_duration(c->input, strlen(c->input),
													 &v, &err), c->input))
		{
			fprintf(stderr, "    message: %s\n", err.message);
			continue;
		}
		if (!CHECK_IN(c->line, v == c->usecs, c->input))
			fprintf(stderr, "    got %lld, expected %lld\n",
					(long long) v, (long long) c->usecs);
	}

	/* only str[0..len) is read */
	CHECK(policy_parse_duration("5s10m", 2, &v, &err) && v == SEC(5));
	CHECK(policy_parse_duration("1h30m", 2, &v, &err) && v == HOUR(1));
	CHECK(!policy_parse_duration("5s", 1, &v, &err));
	CHECK(strcmp(err.message, "missing unit in duration \"5\"") == 0);

	/* errors of the duration parser itself */
	CHECK(!policy_parse_duration("", 0, &v, &err));
	CHECK(strcmp(err.message, "duration is empty") == 0);
	CHECK(!policy_parse_duration(NULL, 5, &v, &err));
	CHECK(strcmp(err.message, "duration is empty") == 0);
	CHECK(!policy_parse_duration("-5s", 3, &v, &err));
	CHECK(strcmp(err.message, "duration \"-5s\" is negative") == 0);
	CHECK(error_style_ok(&err));
	CHECK(!policy_parse_duration("5s ", 3, &v, &err));
	CHECK(strcmp(err.message, "unexpected character \" \" in duration \"5s \"") == 0);
	CHECK(!policy_parse_duration("5\0s", 3, &v, &err));
	CHECK(strcmp(err.message,
				 "unexpected character \"\\x00\" in duration \"5\\x00s\"") == 0);
	CHECK(!policy_parse_duration("3650d0.001ms", 12, &v, &err));
	CHECK(strstr(err.message, "exceeds the maximum of 3650d") != NULL);
	CHECK(strstr(err.hint, "3650d") != NULL);
	CHECK(error_style_ok(&err));

	/* a failed parse leaves the result alone; NULL pointers are fine */
	v = 77;
	CHECK(!policy_parse_duration("5x", 2, &v, &err) && v == 77);
	CHECK(policy_parse_duration("5s", 2, NULL, NULL));
	CHECK(!policy_parse_duration("5x", 2, NULL, NULL));

	/* 5000 fraction digits, and 5000 integer digits */
	buf[0] = '0';
	buf[1] = '.';
	memset(buf + 2, '9', 5000);
	strcpy(buf + 5002, "ms");
	CHECK(policy_parse_duration(buf, strlen(buf), &v, &err) && v == 1000);
	memset(buf, '9', 5000);
	strcpy(buf + 5000, "ms");
	CHECK(!policy_parse_duration(buf, strlen(buf), &v, &err));
	CHECK(strstr(err.message, "exceeds the maximum") != NULL);
}

/*
 * test_format_duration
 *		Formatting gives the documented texts, and every value from 0 to
 *		POLICY_MAX_DURATION reads back as itself.
 */
static void
test_format_duration(void)
{
	static const struct
	{
		int64_t		usecs;
		const char *text;
	}			cases[] = {
		{0, "0s"},
		{1, "0.001ms"},
		{10, "0.01ms"},
		{100, "0.1ms"},
		{120, "0.12ms"},
		{999, "0.999ms"},
		{1000, "1ms"},
		{1001, "1.001ms"},
		{500000, "500ms"},
		{1500000, "1s500ms"},
		{2000250, "2s0.25ms"},
		{SEC(5), "5s"},
		{MIN(10), "10m"},
		{SEC(5400), "1h30m"},
		{DAY(1), "1d"},
		{DAY(1) + HOUR(1) + MIN(1) + SEC(1) + MS(1) + 1, "1d1h1m1s1.001ms"},
		{DAY(2) + SEC(3), "2d3s"},
		{POLICY_MAX_DURATION, "3650d"},
		{POLICY_MAX_DURATION - 1, "3649d23h59m59s999.999ms"},
		{-SEC(5), "-5s"},
	};
	static const int64_t units[] = {
		1, 10, 100, POLICY_USECS_PER_MS, 10 * POLICY_USECS_PER_MS,
		POLICY_USECS_PER_SEC, POLICY_USECS_PER_MIN,
		POLICY_USECS_PER_HOUR, POLICY_USECS_PER_DAY
	};
	static const int64_t multiples[] = {1, 2, 7, 23, 24, 59, 60, 61, 999, 1000, 1001};
	char		buf[POLICY_FORMAT_LEN];
	size_t		i;
	size_t		j;
	size_t		len;
	uint64_t	state = UINT64_C(0x9e3779b97f4a7c15);
	int			bad;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
	{
		len = policy_format_duration(cases[i].usecs, buf, sizeof(buf));
		if (!CHECK_IN(__LINE__, strcmp(buf, cases[i].text) == 0, cases[i].text))
			fprintf(stderr, "    got \"%s\"\n", buf);
		CHECK_IN(__LINE__, len == strlen(cases[i].text), cases[i].text);
	}

	/* extreme values fit, and a short buffer truncates like snprintf */
	len = policy_format_duration(INT64_MAX, buf, sizeof(buf));
	CHECK(len == strlen(buf) && len < POLICY_FORMAT_LEN);
	CHECK(strcmp(buf, "106751991d4h54s775.807ms") == 0);
	len = policy_format_duration(INT64_MIN, buf, sizeof(buf));
	CHECK(len == strlen(buf) && buf[0] == '-');
	CHECK(strcmp(buf, "-106751991d4h54s775.808ms") == 0);
	memset(buf, 'Z', sizeof(buf));
	CHECK(policy_format_duration(SEC(5400), buf, 4) == 5);
	CHECK(strcmp(buf, "1h3") == 0 && buf[4] == 'Z');
	CHECK(policy_format_duration(SEC(5400), buf, 1) == 5 && buf[0] == '\0');
	CHECK(policy_format_duration(SEC(5400), NULL, 0) == 5);

	/* round trip of values near every unit boundary */
	bad = 0;
	for (i = 0; i < sizeof(units) / sizeof(units[0]); i++)
	{
		for (j = 0; j < sizeof(multiples) / sizeof(multiples[0]); j++)
		{
			int			d;

			for (d = -1; d <= 1; d++)
			{
				int64_t		x = units[i] * multiples[j] + d;
				int64_t		back = -1;
				PolicyError err;

				policy_format_duration(x, buf, sizeof(buf));
				if (!policy_parse_duration(buf, strlen(buf), &back, &err) ||
					back != x)
				{
					if (bad++ == 0)
						fprintf(stderr, "    %lld -> \"%s\" -> %lld\n",
								(long long) x, buf, (long long) back);
				}
			}
		}
	}
	CHECK(bad == 0);

	/* round trip of 300000 pseudo-random values, uniform and structured */
	bad = 0;
	for (i = 0; i < 300000; i++)
	{
		int64_t		x;
		int64_t		back = -1;
		PolicyError err;

		if (i % 2 == 0)
			x = (int64_t) (xorshift64(&state) % (uint64_t) (POLICY_MAX_DURATION + 1));
		else
		{
			/* random parts, many of them zero, to exercise every shape */
			uint64_t	r = xorshift64(&state);

			x = DAY((r & 1) ? (int64_t) (r >> 8) % 3650 : 0) +
				HOUR((r & 2) ? (int64_t) (r >> 20) % 24 : 0) +
				MIN((r & 4) ? (int64_t) (r >> 28) % 60 : 0) +
				SEC((r & 8) ? (int64_t) (r >> 36) % 60 : 0) +
				MS((r & 16) ? (int64_t) (r >> 44) % 1000 : 0) +
				((r & 32) ? (int64_t) (r >> 54) % 1000 : 0);
		}
		len = policy_format_duration(x, buf, sizeof(buf));
		if (len != strlen(buf) ||
			!policy_parse_duration(buf, len, &back, &err) || back != x)
		{
			if (bad++ == 0)
				fprintf(stderr, "    %lld -> \"%s\" -> %lld\n",
						(long long) x, buf, (long long) back);
		}
	}
	CHECK(bad == 0);
}

/*
 * test_format_policy
 *		policy_format gives the documented texts, and a policy written by
 *		it parses back to the same parts.
 */
static void
test_format_policy(void)
{
	char		buf[POLICY_FORMAT_LEN];
	size_t		len;
	uint64_t	state = 12345;
	int			i;
	int			bad;

	CHECK(policy_format(6, SEC(5), MIN(10), buf, sizeof(buf)) == 8);
	CHECK(strcmp(buf, "5 5s 10m") == 0);
	policy_format(-1, SEC(5), -1, buf, sizeof(buf));
	CHECK(strcmp(buf, "5s") == 0);
	policy_format(0, SEC(5), -1, buf, sizeof(buf));
	CHECK(strcmp(buf, "5s") == 0);
	policy_format(1, SEC(1), -1, buf, sizeof(buf));
	CHECK(strcmp(buf, "0 1s") == 0);
	policy_format(0, MS(1500), HOUR(1), buf, sizeof(buf));
	CHECK(strcmp(buf, "1s500ms 1h") == 0);
	policy_format(6, SEC(1), HOUR(1), buf, sizeof(buf));
	CHECK(strcmp(buf, "5 1s 1h") == 0);

	/* the longest outputs still fit */
	len = policy_format(INT32_MAX, INT64_MIN, INT64_MAX, buf, sizeof(buf));
	CHECK(len == strlen(buf) && len < POLICY_FORMAT_LEN);
	CHECK(strcmp(buf, "2147483646 -106751991d4h54s775.808ms 106751991d4h54s775.807ms") == 0);
	len = policy_format(INT32_MIN, 0, 0, buf, sizeof(buf));
	CHECK(strcmp(buf, "0s 0s") == 0);
	CHECK(policy_format(6, SEC(5), MIN(10), buf, 3) == 8 && strcmp(buf, "5 ") == 0);

	/* parse(format(x)) == x for valid policies */
	bad = 0;
	for (i = 0; i < 20000; i++)
	{
		uint64_t	r = xorshift64(&state);
		int32_t		attempts = (r & 1) ? 0 : 2 + (int32_t) ((r >> 8) % (POLICY_MAX_ATTEMPTS - 1));
		int64_t		min = 1 + (int64_t) (xorshift64(&state) % (uint64_t) POLICY_MAX_DURATION);
		int64_t		max = (r & 2) ? -1 :
			min + (int64_t) (xorshift64(&state) % (uint64_t) (POLICY_MAX_DURATION - min + 1));
		PolicySpec	spec;
		PolicyError err;

		policy_format(attempts, min, max, buf, sizeof(buf));
		if (!policy_parse(buf, &spec, &err) ||
			spec.has_count != (attempts > 0) ||
			(attempts > 0 && spec.count != attempts - 1) ||
			spec.min_delay != min ||
			spec.has_max != (max >= 0) ||
			(max >= 0 && spec.max_delay != max))
		{
			if (bad++ == 0)
				fprintf(stderr, "    \"%s\": %s\n", buf, err.message);
		}
	}
	CHECK(bad == 0);
}

/*
 * test_delay
 *		The delay formula, fixed and exponential, at and beyond its limits.
 */
static void
test_delay(void)
{
	static const double multipliers[] = {1.0, 1.0001, 1.5, 2.0, 3.0, 10.0, 1e300, DBL_MAX};
	int32_t		r;
	int			i;
	int			bad;
	uint64_t	state = 777;

	/* fixed: max < 0 */
	CHECK(policy_delay(SEC(5), -1, 2.0, 1) == SEC(5));
	CHECK(policy_delay(SEC(5), -1, 2.0, 2) == SEC(5));
	CHECK(policy_delay(SEC(5), -1, 2.0, 100) == SEC(5));
	CHECK(policy_delay(SEC(5), -1, 2.0, INT32_MAX) == SEC(5));
	CHECK(policy_delay(SEC(5), -1, DBL_MAX, INT32_MAX) == SEC(5));
	CHECK(policy_delay(SEC(5), -1, 2.0, 0) == SEC(5));
	CHECK(policy_delay(SEC(5), -1, 2.0, INT32_MIN) == SEC(5));
	CHECK(policy_delay(INT64_MAX, -1, 2.0, 1) == POLICY_MAX_DURATION);

	/* 1s 1h, multiplier 2: 1, 2, 4, ..., 2048, then 3600 s */
	for (r = 1; r <= 12; r++)
		CHECK_IN(__LINE__, policy_delay(SEC(1), HOUR(1), 2.0, r) == SEC(1) << (r - 1), "1s 1h");
	CHECK(policy_delay(SEC(1), HOUR(1), 2.0, 12) == SEC(2048));
	CHECK(policy_delay(SEC(1), HOUR(1), 2.0, 13) == SEC(3600));
	CHECK(policy_delay(SEC(1), HOUR(1), 2.0, 14) == SEC(3600));
	CHECK(policy_delay(SEC(1), HOUR(1), 2.0, 1000) == SEC(3600));
	CHECK(policy_delay(SEC(1), HOUR(1), 2.0, INT32_MAX) == SEC(3600));
	CHECK(policy_delay(SEC(1), HOUR(1), 2.0, 0) == SEC(1));
	CHECK(policy_delay(SEC(1), HOUR(1), 2.0, -7) == SEC(1));
	CHECK(policy_delay(SEC(1), HOUR(1), 2.0, INT32_MIN) == SEC(1));

	/* multiplier 1.5: powers of 1.5 are exact in binary */
	CHECK(policy_delay(SEC(1), SEC(10), 1.5, 1) == 1000000);
	CHECK(policy_delay(SEC(1), SEC(10), 1.5, 2) == 1500000);
	CHECK(policy_delay(SEC(1), SEC(10), 1.5, 3) == 2250000);
	CHECK(policy_delay(SEC(1), SEC(10), 1.5, 4) == 3375000);
	CHECK(policy_delay(SEC(1), SEC(10), 1.5, 5) == 5062500);
	CHECK(policy_delay(SEC(1), SEC(10), 1.5, 6) == 7593750);
	CHECK(policy_delay(SEC(1), SEC(10), 1.5, 7) == SEC(10));
	CHECK(policy_delay(3, SEC(10), 1.5, 2) == 5);	/* 4.5 rounds to 5 */

	/* multiplier 1: always the minimum */
	CHECK(policy_delay(SEC(1), HOUR(1), 1.0, INT32_MAX) == SEC(1));

	/* huge multipliers and retries clamp instead of overflowing */
	CHECK(policy_delay(SEC(1), HOUR(1), DBL_MAX, 1) == SEC(1));
	CHECK(policy_delay(SEC(1), HOUR(1), DBL_MAX, 2) == HOUR(1));
	CHECK(policy_delay(SEC(1), HOUR(1), DBL_MAX, INT32_MAX) == HOUR(1));
	CHECK(policy_delay(1, POLICY_MAX_DURATION, DBL_MAX, INT32_MAX) == POLICY_MAX_DURATION);
	CHECK(policy_delay(1, POLICY_MAX_DURATION, 1.0001, INT32_MAX) == POLICY_MAX_DURATION);
	CHECK(policy_delay(1, POLICY_MAX_DURATION, 2.0, 49) == INT64_C(1) << 48);
	CHECK(policy_delay(1, POLICY_MAX_DURATION, 2.0, 50) == POLICY_MAX_DURATION);
	CHECK(policy_delay(SEC(1), INT64_MAX, 2.0, INT32_MAX) == POLICY_MAX_DURATION);
	CHECK(policy_delay(INT64_MAX, INT64_MAX, DBL_MAX, INT32_MAX) == POLICY_MAX_DURATION);

	/* out-of-contract inputs are tamed, never negative */
	CHECK(policy_delay(SEC(1), HOUR(1), INFINITY, 2) == HOUR(1));
	CHECK(policy_delay(SEC(1), HOUR(1), NAN, 5) == SEC(1));
	CHECK(policy_delay(SEC(1), HOUR(1), 0.5, 5) == SEC(1));
	CHECK(policy_delay(SEC(1), HOUR(1), -3.0, 5) == SEC(1));
	CHECK(policy_delay(SEC(10), SEC(5), 2.0, 1) == SEC(5));
	CHECK(policy_delay(0, HOUR(1), DBL_MAX, INT32_MAX) == 0);
	CHECK(policy_delay(0, HOUR(1), INFINITY, 5) == 0);
	CHECK(policy_delay(-SEC(1), HOUR(1), 2.0, 5) == 0);
	CHECK(policy_delay(INT64_MIN, -1, 2.0, 5) == 0);

	/* for random policies: within [min, max] and never decreasing */
	bad = 0;
	for (i = 0; i < 20000; i++)
	{
		int64_t		min = 1 + (int64_t) (xorshift64(&state) % (uint64_t) HOUR(1));
		int64_t		max = min + (int64_t) (xorshift64(&state) % (uint64_t) DAY(400));
		double		mult = multipliers[i % (int) (sizeof(multipliers) / sizeof(multipliers[0]))];
		int64_t		prev = 0;
		int32_t		retries[] = {1, 2, 3, 5, 10, 30, 60, 100, 1000, 100000, INT32_MAX};
		size_t		k;

		for (k = 0; k < sizeof(retries) / sizeof(retries[0]); k++)
		{
			int64_t		d = policy_delay(min, max, mult, retries[k]);

			if (d < min || d > max || d < prev)
			{
				if (bad++ == 0)
					fprintf(stderr, "    min %lld max %lld mult %g retry %d: %lld\n",
							(long long) min, (long long) max, mult,
							(int) retries[k], (long long) d);
			}
			prev = d;
		}
	}
	CHECK(bad == 0);
}

/*
 * test_jitter
 *		Jitter stays in its range for every random value, reaches both ends,
 *		and is deterministic.
 */
static void
test_jitter(void)
{
	static const int64_t delays[] = {
		1, 2, 3, 7, 1000, SEC(1), HOUR(1), POLICY_MAX_DURATION, INT64_MAX
	};
	uint64_t	state = 4242;
	size_t		i;
	int			j;
	int			bad;
	bool		saw0;
	bool		saw1;
	double		sum;

	/* none, and the trivial delays */
	CHECK(policy_jitter(SEC(5), POLICY_JITTER_NONE, 123) == SEC(5));
	CHECK(policy_jitter(0, POLICY_JITTER_FULL, UINT64_MAX) == 0);
	CHECK(policy_jitter(0, POLICY_JITTER_EQUAL, UINT64_MAX) == 0);
	CHECK(policy_jitter(0, POLICY_JITTER_NONE, UINT64_MAX) == 0);
	CHECK(policy_jitter(-5, POLICY_JITTER_FULL, 99) == 0);
	CHECK(policy_jitter(-5, POLICY_JITTER_NONE, 99) == 0);
	CHECK(policy_jitter(INT64_MIN, POLICY_JITTER_EQUAL, 99) == 0);
	CHECK(policy_jitter(SEC(5), (PolicyJitter) 42, 99) == SEC(5));

	/* both ends of both ranges are reachable */
	CHECK(policy_jitter(SEC(10), POLICY_JITTER_FULL, 0) == 0);
	CHECK(policy_jitter(SEC(10), POLICY_JITTER_FULL, UINT64_MAX) == SEC(10));
	CHECK(policy_jitter(SEC(10), POLICY_JITTER_EQUAL, 0) == SEC(5));
	CHECK(policy_jitter(SEC(10), POLICY_JITTER_EQUAL, UINT64_MAX) == SEC(10));
	CHECK(policy_jitter(7, POLICY_JITTER_EQUAL, 0) == 4);	/* 7 - 7/2 */
	CHECK(policy_jitter(1, POLICY_JITTER_EQUAL, 0) == 1);
	CHECK(policy_jitter(INT64_MAX, POLICY_JITTER_FULL, UINT64_MAX) == INT64_MAX);
	CHECK(policy_jitter(INT64_MAX, POLICY_JITTER_EQUAL, UINT64_MAX) == INT64_MAX);
	CHECK(policy_jitter(INT64_MAX, POLICY_JITTER_EQUAL, 0) == INT64_MAX - INT64_MAX / 2);
	CHECK(policy_jitter(SEC(10), POLICY_JITTER_FULL, UINT64_C(1) << 63) == SEC(5));

	/* deterministic */
	CHECK(policy_jitter(HOUR(1), POLICY_JITTER_FULL, 0x123456789abcdefULL) ==
		  policy_jitter(HOUR(1), POLICY_JITTER_FULL, 0x123456789abcdefULL));

	/* in range for many random values */
	bad = 0;
	for (i = 0; i < sizeof(delays) / sizeof(delays[0]); i++)
	{
		for (j = 0; j < 100000; j++)
		{
			uint64_t	rnd = xorshift64(&state);
			int64_t		full = policy_jitter(delays[i], POLICY_JITTER_FULL, rnd);
			int64_t		equal = policy_jitter(delays[i], POLICY_JITTER_EQUAL, rnd);

			if (full < 0 || full > delays[i] ||
				equal < delays[i] - delays[i] / 2 || equal > delays[i])
			{
				if (bad++ == 0)
					fprintf(stderr, "    delay %lld random %llu: %lld %lld\n",
							(long long) delays[i], (unsigned long long) rnd,
							(long long) full, (long long) equal);
			}
		}
	}
	CHECK(bad == 0);

	/* a delay of 1 gives 0 and 1 under full jitter, about equally often */
	saw0 = saw1 = false;
	sum = 0;
	for (j = 0; j < 100000; j++)
	{
		int64_t		v = policy_jitter(1, POLICY_JITTER_FULL, xorshift64(&state));

		saw0 |= (v == 0);
		saw1 |= (v == 1);
		sum += (double) v;
	}
	CHECK(saw0 && saw1);
	CHECK(fabs(sum / 100000 - 0.5) < 0.01);

	/* the mean is the middle of the range */
	sum = 0;
	for (j = 0; j < 100000; j++)
		sum += (double) policy_jitter(SEC(1), POLICY_JITTER_FULL, xorshift64(&state));
	CHECK(fabs(sum / 100000 - 500000.0) < 5000.0);
	sum = 0;
	for (j = 0; j < 100000; j++)
		sum += (double) policy_jitter(SEC(1), POLICY_JITTER_EQUAL, xorshift64(&state));
	CHECK(fabs(sum / 100000 - 750000.0) < 2500.0);
}

/*
 * test_jitter_names
 *		Jitter names parse, ignoring case, and name each kind back.
 */
static void
test_jitter_names(void)
{
	PolicyJitter j = (PolicyJitter) 99;

	CHECK(policy_parse_jitter("none", &j) && j == POLICY_JITTER_NONE);
	CHECK(policy_parse_jitter("full", &j) && j == POLICY_JITTER_FULL);
	CHECK(policy_parse_jitter("equal", &j) && j == POLICY_JITTER_EQUAL);
	CHECK(policy_parse_jitter("FULL", &j) && j == POLICY_JITTER_FULL);
	CHECK(policy_parse_jitter("Equal", &j) && j == POLICY_JITTER_EQUAL);
	CHECK(policy_parse_jitter("none", NULL));

	j = POLICY_JITTER_FULL;
	CHECK(!policy_parse_jitter("", &j) && j == POLICY_JITTER_FULL);
	CHECK(!policy_parse_jitter("ful", &j));
	CHECK(!policy_parse_jitter("fullx", &j));
	CHECK(!policy_parse_jitter("none ", &j));
	CHECK(!policy_parse_jitter(" none", &j));
	CHECK(!policy_parse_jitter("random", &j));
	CHECK(!policy_parse_jitter(NULL, &j));

	CHECK(strcmp(policy_jitter_name(POLICY_JITTER_NONE), "none") == 0);
	CHECK(strcmp(policy_jitter_name(POLICY_JITTER_FULL), "full") == 0);
	CHECK(strcmp(policy_jitter_name(POLICY_JITTER_EQUAL), "equal") == 0);
	CHECK(strcmp(policy_jitter_name((PolicyJitter) 99), "unknown") == 0);
	CHECK(!policy_parse_jitter(policy_jitter_name((PolicyJitter) 99), &j));
	CHECK(policy_parse_jitter(policy_jitter_name(POLICY_JITTER_EQUAL), &j) &&
		  j == POLICY_JITTER_EQUAL);
}

/*
 * normalize
 *		Run policy_normalize_retry_on and join the result with commas, or
 *		return "ERROR: message" so that tests compare one string.
 */
static const char *
normalize(const char *const *entries, int n, PolicyError *err)
{
	static char result[1024];
	char		out[64][POLICY_SQLSTATE_ENTRY_LEN];
	int			count;
	int			i;

	if (n + 1 > 64)
		return "too many for the test";
	memset(out, 'Q', sizeof(out));
	count = policy_normalize_retry_on(entries, n, out, err);
	if (count < 0)
	{
		snprintf(result, sizeof(result), "ERROR: %s", err->message);
		return result;
	}
	result[0] = '\0';
	for (i = 0; i < count; i++)
	{
		if (i > 0)
			strcat(result, ",");
		strcat(result, out[i]);
	}
	/* nothing is written past the n + 1 entries promised */
	if (n + 1 < 64 && out[n + 1][0] != 'Q')
		return "wrote past the end";
	return result;
}

#define NORMALIZE(expected, ...) \
	do { \
		const char *entries_[] = {__VA_ARGS__}; \
		const char *got_ = normalize(entries_, \
									 (int) (sizeof(entries_) / sizeof(entries_[0])), \
									 &err); \
		if (!CHECK_IN(__LINE__, strcmp(got_, (expected)) == 0, (expected))) \
			fprintf(stderr, "    got: %s\n", got_); \
		if (strncmp(got_, "ERROR: ", 7) == 0) \
			CHECK_IN(__LINE__, error_style_ok(&err), (expected)); \
	} while (0)

/*
 * test_retry_on
 *		retry_on lists are normalized, refused with a clear error when bad,
 *		and matched most specific entry first.
 */
static void
test_retry_on(void)
{
	PolicyError err;
	char		out[8][POLICY_SQLSTATE_ENTRY_LEN];
	char		longentry[600];
	const char *longp[1];

	/* normalization */
	CHECK(strcmp(normalize(NULL, 0, &err), "RT") == 0);
	NORMALIZE("RT", "RT");
	NORMALIZE("RT", "rt");
	NORMALIZE("RT", "Rt", "rT", "RT");
	NORMALIZE("40001,40P01,08,RT", "40001", "40p01", "08");
	NORMALIZE("RT,40001", "rt", "40001");
	NORMALIZE("40001,-08006,08,RT", "40001", "40001", "-08006", "08", "-08006");
	NORMALIZE("-RT", "-RT");
	NORMALIZE("-RT,RT429", "-rt", "RT429");
	NORMALIZE("RT429,-RT", "RT429", "-RT");
	NORMALIZE("-RT429,RT", "-RT429");
	NORMALIZE("57014,55P03,RT", "57014", "55P03", "57014");
	NORMALIZE("03,RT", "03");
	NORMALIZE("ZZZZZ,RT", "zzzzz");

	/* errors name the entry */
	NORMALIZE("ERROR: invalid SQLSTATE or class \"4000\"", "4000");
	NORMALIZE("ERROR: invalid SQLSTATE or class \"400011\"", "40001", "400011");
	NORMALIZE("ERROR: invalid SQLSTATE or class \"\"", "");
	NORMALIZE("ERROR: invalid SQLSTATE or class \"-\"", "-");
	NORMALIZE("ERROR: invalid SQLSTATE or class \"--40001\"", "--40001");
	NORMALIZE("ERROR: invalid SQLSTATE or class \"4000!\"", "4000!");
	NORMALIZE("ERROR: invalid SQLSTATE or class \" 40001\"", " 40001");
	NORMALIZE("ERROR: invalid SQLSTATE or class \"40 01\"", "40 01");
	NORMALIZE("ERROR: invalid SQLSTATE or class \"+RT\"", "+RT");
	NORMALIZE("ERROR: invalid SQLSTATE or class \"\xc3\xa9\"", "\xc3\xa9");
	NORMALIZE("ERROR: invalid SQLSTATE or class \"R\\x09\"", "R\t");
	NORMALIZE("ERROR: retry_on element 2 is null", "40001", NULL, "08");
	NORMALIZE("ERROR: retry_on element 1 is null", NULL);
	NORMALIZE("ERROR: class \"00\" is not an error", "00");
	NORMALIZE("ERROR: class \"01\" is not an error", "-01");
	NORMALIZE("ERROR: class \"02\" is not an error", "08", "02");
	NORMALIZE("ERROR: SQLSTATE \"01000\" is not an error", "01000");
	NORMALIZE("ERROR: SQLSTATE \"02000\" is not an error", "-02000");
	NORMALIZE("ERROR: SQLSTATE \"0100C\" is not an error", "0100c");
	NORMALIZE("ERROR: retry_on both includes and excludes \"RT429\"", "RT429", "-RT429");
	NORMALIZE("ERROR: retry_on both includes and excludes \"RT429\"", "-rt429", "RT429");
	NORMALIZE("ERROR: retry_on both includes and excludes \"RT\"", "RT", "-RT");
	NORMALIZE("ERROR: retry_on both includes and excludes \"08\"", "08", "40001", "-08");

	/* the hints */
	CHECK(policy_normalize_retry_on((const char *[]) {"4000"}, 1, out, &err) == -1);
	CHECK(strcmp(err.hint, "Use a 5-character SQLSTATE such as \"40001\" or a 2-character class such as \"08\".") == 0);
	CHECK(policy_normalize_retry_on((const char *[]) {"RT429", "-RT429"}, 2, out, &err) == -1);
	CHECK(strcmp(err.hint, "Remove either \"RT429\" or \"-RT429\".") == 0);
	CHECK(policy_normalize_retry_on((const char *[]) {"01"}, 1, out, &err) == -1);
	CHECK(strstr(err.hint, "not errors") != NULL);

	/* odd calls */
	CHECK(policy_normalize_retry_on(NULL, 2, out, &err) == -1);
	CHECK(strcmp(err.message, "retry_on element 1 is null") == 0);
	CHECK(policy_normalize_retry_on(NULL, -1, out, &err) == -1);
	CHECK(policy_normalize_retry_on(NULL, 0, NULL, &err) == -1);
	CHECK(policy_normalize_retry_on((const char *[]) {"40001"}, 1, out, NULL) == 2);
	CHECK(policy_normalize_retry_on((const char *[]) {"4000"}, 1, out, NULL) == -1);
	memset(longentry, '4', sizeof(longentry) - 1);
	longentry[sizeof(longentry) - 1] = '\0';
	longp[0] = longentry;
	CHECK(policy_normalize_retry_on(longp, 1, out, &err) == -1);
	CHECK(strncmp(err.message, "invalid SQLSTATE or class \"4444", 31) == 0);
	CHECK(strstr(err.message, "...\"") != NULL && strlen(err.message) < 100);
}

/*
 * retries
 *		Normalize a retry_on list and match a SQLSTATE against it.
 */
static bool
retries(const char *const *entries, int n, const char *sqlstate)
{
	char		out[16][POLICY_SQLSTATE_ENTRY_LEN];
	PolicyError err;
	int			count = policy_normalize_retry_on(entries, n, out, &err);

	if (count < 0)
	{
		fprintf(stderr, "    unexpected error: %s\n", err.message);
		return false;
	}
	return policy_retries_sqlstate((const char (*)[POLICY_SQLSTATE_ENTRY_LEN]) out,
								   count, sqlstate);
}

#define LIST(...)	((const char *[]) {__VA_ARGS__}), \
	(int) (sizeof((const char *[]) {__VA_ARGS__}) / sizeof(const char *))

/*
 * test_matching
 *		The most specific entry decides; RT is retried unless excluded.
 */
static void
test_matching(void)
{
	static const char entries[][POLICY_SQLSTATE_ENTRY_LEN] = {"08", "-08006", "40001"};
	static const char unterminated[][POLICY_SQLSTATE_ENTRY_LEN] = {
		{'R', 'T', '0', '0', '0', 'X', 'Y'}, {'-', '4', '0', '0', '0', '1', 'Z'}
	};

	/* the default: RT only */
	CHECK(retries(NULL, 0, "RT000"));
	CHECK(retries(NULL, 0, "RTZZZ"));
	CHECK(retries(NULL, 0, "rt123"));
	CHECK(!retries(NULL, 0, "40001"));
	CHECK(!retries(NULL, 0, "P0001"));
	CHECK(!retries(NULL, 0, "RT00"));
	CHECK(!retries(NULL, 0, "RT0000"));
	CHECK(!retries(NULL, 0, "RT00!"));
	CHECK(!retries(NULL, 0, ""));
	CHECK(!retries(NULL, 0, NULL));

	/* additions */
	CHECK(retries(LIST("40001", "40P01"), "40001"));
	CHECK(retries(LIST("40001", "40P01"), "40P01"));
	CHECK(retries(LIST("40001", "40P01"), "RT001"));
	CHECK(!retries(LIST("40001", "40P01"), "40002"));
	CHECK(retries(LIST("08"), "08001"));
	CHECK(retries(LIST("08"), "08006"));
	CHECK(!retries(LIST("08"), "0800"));

	/* the most specific entry wins, whatever the order */
	CHECK(retries(LIST("08", "-08006"), "08001"));
	CHECK(!retries(LIST("08", "-08006"), "08006"));
	CHECK(!retries(LIST("-08006", "08"), "08006"));
	CHECK(retries(LIST("-08", "08006"), "08006"));
	CHECK(!retries(LIST("-08", "08006"), "08001"));
	CHECK(retries(LIST("-RT", "RT429"), "RT429"));
	CHECK(!retries(LIST("-RT", "RT429"), "RT000"));
	CHECK(!retries(LIST("-RT429"), "RT429"));
	CHECK(retries(LIST("-RT429"), "RT430"));
	CHECK(!retries(LIST("-RT"), "RT000"));
	CHECK(!retries(LIST("-RT"), "40001"));

	/* matching directly, without normalizing first */
	CHECK(policy_retries_sqlstate(entries, 3, "08001"));
	CHECK(!policy_retries_sqlstate(entries, 3, "08006"));
	CHECK(policy_retries_sqlstate(entries, 3, "40001"));
	CHECK(!policy_retries_sqlstate(entries, 3, "RT000"));
	CHECK(!policy_retries_sqlstate(entries, 0, "08001"));
	CHECK(!policy_retries_sqlstate(NULL, 3, "08001"));
	CHECK(!policy_retries_sqlstate(unterminated, 2, "RT000"));
	CHECK(!policy_retries_sqlstate(unterminated, 2, "40001"));
}

/*
 * test_fuzz
 *		Random strings over the grammar's alphabet: every accepted policy is
 *		valid and reads back through policy_format, and every refused one
 *		has a well-formed error.
 */
static void
test_fuzz(void)
{
	static const char alphabet[] = "0123456789..msmshd -+,xS\t";
	uint64_t	state = 2024;
	char		input[24];
	char		buf[POLICY_FORMAT_LEN];
	int			i;
	int			bad = 0;
	int			accepted = 0;

	for (i = 0; i < 300000; i++)
	{
		int			len = (int) (xorshift64(&state) % 16);
		int			k;
		PolicySpec	spec;
		PolicySpec	back;
		PolicyError err;

		for (k = 0; k < len; k++)
			input[k] = alphabet[xorshift64(&state) % (sizeof(alphabet) - 1)];
		input[len] = '\0';

		if (policy_parse(input, &spec, &err))
		{
			accepted++;
			policy_format(spec.has_count ? spec.count + 1 : 0, spec.min_delay,
						  spec.has_max ? spec.max_delay : -1, buf, sizeof(buf));
			if (spec.min_delay < 1 || spec.min_delay > POLICY_MAX_DURATION ||
				(spec.has_count && (spec.count < 1 || spec.count >= POLICY_MAX_ATTEMPTS)) ||
				(spec.has_max && (spec.max_delay < spec.min_delay ||
								  spec.max_delay > POLICY_MAX_DURATION)) ||
				!policy_parse(buf, &back, &err) ||
				!same_spec(&spec, &back))
			{
				if (bad++ == 0)
					fprintf(stderr, "    accepted \"%s\" badly (\"%s\")\n", input, buf);
			}
		}
		else if (!error_style_ok(&err))
		{
			if (bad++ == 0)
				fprintf(stderr, "    \"%s\": message \"%s\" hint \"%s\"\n",
						input, err.message, err.hint);
		}
	}
	CHECK(bad == 0);
	CHECK(accepted > 1000);
}

int
main(void)
{
	test_valid_policies();
	test_malformed_policies();
	test_long_tokens();
	test_durations();
	test_format_duration();
	test_format_policy();
	test_delay();
	test_jitter();
	test_jitter_names();
	test_retry_on();
	test_matching();
	test_fuzz();

	printf("policy_test: %d passed, %d failed\n", passed, failed);
	return failed > 0 ? 1 : 0;
}
