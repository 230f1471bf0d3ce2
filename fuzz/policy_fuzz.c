/*-------------------------------------------------------------------------
 *
 * policy_fuzz.c
 *	  libFuzzer target for the pure policy code in src/core/policy.c: the policy
 *	  grammar, durations, the delay formula, jitter and retry_on.
 *
 * Built with clang and every sanitizer that applies ("make fuzz"):
 *
 *		clang -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
 *			-Isrc fuzz/policy_fuzz.c src/core/policy.c -lm
 *
 * so a buffer overrun, a signed overflow, an out-of-range float conversion
 * or a shift past the width is a finding by itself.  On top of that every
 * result is checked against what policy.h promises, and a broken promise
 * is reported with abort() after printing what was wrong.
 *
 * An input is one text and, after its first NUL byte, optional "knobs":
 * bytes read as raw numbers (a multiplier as the bits of a double, attempt
 * numbers, delays, random values, a buffer size), zero where the input is
 * short.  So the seed corpus can be plain policy strings, and the fuzzer can
 * still reach NaN, infinities, denormals, INT64_MIN and INT32_MAX.
 *
 * What is checked:
 *	- policy_parse: a policy it accepts is within the documented bounds,
 *	  policy_format writes it in fewer than POLICY_FORMAT_LEN bytes, and that
 *	  text parses back to the same policy and formats to the same text; a
 *	  refused one leaves the result alone and has a well-formed error (style,
 *	  no control characters, valid UTF-8 when the input was).
 *	- policy_parse_duration, on the text and on the raw bytes (NULs and all):
 *	  the same, for durations; and any duration in range, from the knobs,
 *	  survives format and parse exactly.
 *	- policy_delay, for each accepted policy and for raw out-of-contract
 *	  arguments, over many multipliers (1, just above 1, 1.5, 2, 10, 1e300,
 *	  DBL_MAX, infinity, NaN, below 1, negative, denormal, the knob) and
 *	  attempt numbers (1..64, powers of ten, INT32_MAX, below 1, the knob):
 *	  never negative, never above the cap or POLICY_MAX_DURATION, never below
 *	  the minimum, never decreasing as the attempt number grows, and close
 *	  to min * multiplier^(n-1) computed in long double whenever that is
 *	  clearly below the cap.
 *	- policy_jitter: full within [0, d], equal within [d - d/2, d], none
 *	  exactly d, both ends reachable with random 0 and UINT64_MAX.
 *	- policy_format with any arguments and any buffer size: snprintf's
 *	  contract (full length returned, a terminated prefix written, not one
 *	  byte past the buffer, which is allocated to its exact size).
 *	- policy_parse_jitter / policy_jitter_name round trip.
 *	- policy_normalize_retry_on on the text split into entries: the output
 *	  is normalized, has RT (or -RT) once, no duplicates, and normalizing it
 *	  again gives the same list; policy_retries_sqlstate agrees with each
 *	  exact entry and with each class entry no exact one overrides.
 *	- cron_parse (src/core/cron.c): a refused expression has a well-formed error;
 *	  an accepted one has bits only where its fields can (bit 0 of the days
 *	  is 'L'), some in each; and
 *	  cron_next from a wall-clock minute taken from the knobs finds a later
 *	  minute that matches, with no match in between (checked minute by
 *	  minute over up to two days).
 *	- rate_parse (src/core/rate.c): a refused rate has a well-formed error; an
 *	  accepted one is within bounds, and 64 starts asked for at moments
 *	  from the knobs are admitted only while no window-long interval holds
 *	  more than the rate's count.
 *
 * IDENTIFICATION
 *	  fuzz/policy_fuzz.c
 *
 *-------------------------------------------------------------------------
 */
#include "core/cron.h"
#include "core/rate.h"
#include "core/policy.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Most entries the retry_on check splits the text into */
#define MAX_ENTRIES		16

/*
 * Knobs
 *		The bytes after the text's NUL, read front to back as raw numbers;
 *		past their end every read gives zero.
 */
typedef struct Knobs
{
	const uint8_t *data;
	size_t		len;
	size_t		pos;
} Knobs;

static uint64_t
knob_u64(Knobs *k)
{
	uint64_t	v = 0;
	int			i;

	for (i = 0; i < 8; i++)
	{
		v <<= 8;
		if (k->pos < k->len)
			v |= k->data[k->pos++];
	}
	return v;
}

static int64_t
knob_i64(Knobs *k)
{
	uint64_t	u = knob_u64(k);
	int64_t		v;

	memcpy(&v, &u, sizeof(v));
	return v;
}

static int32_t
knob_i32(Knobs *k)
{
	uint32_t	u = (uint32_t) (knob_u64(k) >> 32);
	int32_t		v;

	memcpy(&v, &u, sizeof(v));
	return v;
}

static double
knob_double(Knobs *k)
{
	uint64_t	u = knob_u64(k);
	double		v;

	memcpy(&v, &u, sizeof(v));
	return v;
}

/*
 * fail
 *		Report a broken promise and abort, which libFuzzer records as a crash
 *		with the input that caused it.
 */
static void
fail(const char *what, const char *input)
{
	fprintf(stderr, "policy_fuzz: %s (input \"%s\")\n", what, input);
	abort();
}

#define REQUIRE(cond, input) \
	do { if (!(cond)) fail(#cond, (input)); } while (0)

/*
 * bounded_len
 *		strlen, but never looking at more than max bytes (C99 has no strnlen).
 */
static size_t
bounded_len(const char *s, size_t max)
{
	const char *end = memchr(s, '\0', max);

	return end == NULL ? max : (size_t) (end - s);
}

/*
 * valid_utf8
 *		Is s[0..len) well-formed UTF-8 (no overlongs, surrogates or values
 *		past U+10FFFF)?
 */
static bool
valid_utf8(const char *s, size_t len)
{
	const unsigned char *p = (const unsigned char *) s;
	size_t		i = 0;

	while (i < len)
	{
		unsigned char c = p[i];
		size_t		n;
		uint32_t	cp;
		size_t		j;

		if (c < 0x80)
		{
			i++;
			continue;
		}
		if (c >= 0xc2 && c <= 0xdf)
		{
			n = 1;
			cp = c & 0x1fu;
		}
		else if (c >= 0xe0 && c <= 0xef)
		{
			n = 2;
			cp = c & 0x0fu;
		}
		else if (c >= 0xf0 && c <= 0xf4)
		{
			n = 3;
			cp = c & 0x07u;
		}
		else
			return false;
		if (i + n >= len)
			return false;
		for (j = 1; j <= n; j++)
		{
			if ((p[i + j] & 0xc0) != 0x80)
				return false;
			cp = (cp << 6) | (p[i + j] & 0x3fu);
		}
		if ((n == 2 && cp < 0x800) || (n == 3 && cp < 0x10000) ||
			(cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff)
			return false;
		i += n + 1;
	}
	return true;
}

/*
 * check_error
 *		A refused input's error: a terminated, non-empty, lower-case message
 *		without a final period; an empty hint or a sentence; no control
 *		characters in either (tokens are quoted with \xNN); and valid UTF-8
 *		whenever the input was, so that a cut never splits a character.
 */
static void
check_error(const PolicyError *err, const char *input, bool input_utf8)
{
	const char *m = err->message;
	const char *h = err->hint;
	size_t		mlen = bounded_len(m, POLICY_ERROR_LEN);
	size_t		hlen = bounded_len(h, POLICY_ERROR_LEN);
	size_t		i;

	REQUIRE(mlen > 0 && mlen < POLICY_ERROR_LEN, input);
	REQUIRE(hlen < POLICY_ERROR_LEN, input);
	REQUIRE(!(m[0] >= 'A' && m[0] <= 'Z') || (m[1] >= 'A' && m[1] <= 'Z'), input);
	REQUIRE(m[mlen - 1] != '.', input);
	REQUIRE(hlen == 0 || (h[0] >= 'A' && h[0] <= 'Z' && h[hlen - 1] == '.'), input);
	for (i = 0; i < mlen; i++)
		REQUIRE((unsigned char) m[i] >= 0x20 && m[i] != 0x7f, input);
	for (i = 0; i < hlen; i++)
		REQUIRE((unsigned char) h[i] >= 0x20 && h[i] != 0x7f, input);
	if (input_utf8)
	{
		REQUIRE(valid_utf8(m, mlen), input);
		REQUIRE(valid_utf8(h, hlen), input);
	}
}

/*
 * check_jitter
 *		Jitter of one delay d (any int64) with each kind and a few random
 *		values.
 */
static void
check_jitter(int64_t d, uint64_t knob_random, const char *input)
{
	static const uint64_t fixed[] = {
		0, 1, UINT64_C(1) << 63, UINT64_MAX - 1, UINT64_MAX
	};
	int64_t		lo_equal = (d > 0) ? d - d / 2 : 0;
	int64_t		dd = (d > 0) ? d : 0;
	size_t		i;

	for (i = 0; i <= sizeof(fixed) / sizeof(fixed[0]); i++)
	{
		uint64_t	r = (i < sizeof(fixed) / sizeof(fixed[0])) ? fixed[i] : knob_random;
		int64_t		full = policy_jitter(d, POLICY_JITTER_FULL, r);
		int64_t		equal = policy_jitter(d, POLICY_JITTER_EQUAL, r);

		REQUIRE(policy_jitter(d, POLICY_JITTER_NONE, r) == dd, input);
		REQUIRE(full >= 0 && full <= dd, input);
		REQUIRE(equal >= lo_equal && equal <= dd, input);
	}
	/* both ends of each range are reachable */
	REQUIRE(policy_jitter(d, POLICY_JITTER_FULL, 0) == 0, input);
	REQUIRE(policy_jitter(d, POLICY_JITTER_FULL, UINT64_MAX) == dd, input);
	REQUIRE(policy_jitter(d, POLICY_JITTER_EQUAL, 0) == lo_equal, input);
	REQUIRE(policy_jitter(d, POLICY_JITTER_EQUAL, UINT64_MAX) == dd, input);
}

/*
 * check_delays
 *		policy_delay over many attempt numbers for one (min, max,
 *		multiplier), which may be far outside the contract.
 *
 * Whatever the arguments, the result is in [0, POLICY_MAX_DURATION], at
 * most max_delay when there is one, 0 when min_delay <= 0, and never
 * decreasing as the attempt number grows.  Within the contract (min_delay
 * in range, max_delay absent or at least min_delay, a finite multiplier of
 * at least 1) it is also at least min_delay, exactly min_delay for a fixed
 * delay, and close to the formula computed in long double.
 */
static void
check_delays(int64_t min, int64_t max, double mult, int32_t knob_retry,
			 uint64_t knob_random, bool with_jitter, const char *input)
{
	static const int32_t big_retries[] = {
		65, 100, 1000, 10000, 100000, 1000000, 10000000, 100000000,
		999999999, 1000000000, INT32_MAX - 1, INT32_MAX
	};
	static const int32_t low_retries[] = {INT32_MIN, -1000, -1, 0};
	bool		in_contract;
	int64_t		min_c;
	int64_t		cap;
	int64_t		prev = -1;
	int32_t		retries[64 + sizeof(big_retries) / sizeof(big_retries[0])];
	size_t		nretries = 0;
	size_t		i;

	in_contract = min >= 1 && min <= POLICY_MAX_DURATION &&
		(max < 0 || (max >= min && max <= POLICY_MAX_DURATION)) &&
		isfinite(mult) && mult >= 1.0;

	/* what the result is clamped to */
	min_c = (min > POLICY_MAX_DURATION) ? POLICY_MAX_DURATION : min;
	if (max < 0)
		cap = min_c;
	else
		cap = (max > POLICY_MAX_DURATION) ? POLICY_MAX_DURATION : max;

	/* attempts below 1 count as 1 */
	for (i = 0; i < sizeof(low_retries) / sizeof(low_retries[0]); i++)
		REQUIRE(policy_delay(min, max, mult, low_retries[i]) ==
				policy_delay(min, max, mult, 1), input);

	for (i = 1; i <= 64; i++)
		retries[nretries++] = (int32_t) i;
	for (i = 0; i < sizeof(big_retries) / sizeof(big_retries[0]); i++)
		retries[nretries++] = big_retries[i];

	for (i = 0; i < nretries; i++)
	{
		int32_t		r = retries[i];
		int64_t		d = policy_delay(min, max, mult, r);

		REQUIRE(d >= 0 && d <= POLICY_MAX_DURATION, input);
		REQUIRE(max < 0 || d <= max, input);
		REQUIRE(min > 0 || d == 0, input);
		REQUIRE(d >= prev, input);
		if (min > 0)
			REQUIRE(d >= (min_c < cap ? min_c : cap), input);
		prev = d;

		if (in_contract)
		{
			REQUIRE(d >= min && d <= cap, input);
			if (max < 0 || r == 1 || mult == 1.0)
				REQUIRE(d == min, input);
			else if (r <= 64)
			{
				/* the formula, in more precision; only where clearly uncapped */
				long double ref = (long double) min * powl((long double) mult, (long double) (r - 1));
				long double tol = ref * 1e-9L + 1.0L;

				if (ref + tol < (long double) cap)
					REQUIRE(fabsl((long double) d - ref) <= tol, input);
				else if (ref - tol > (long double) cap)
					REQUIRE(d == cap, input);
			}
		}
		if (with_jitter)
			check_jitter(d, knob_random, input);
	}

	/* the knob's attempt number sits between its neighbours */
	{
		int64_t		d = policy_delay(min, max, mult, knob_retry);

		REQUIRE(d >= 0 && d <= POLICY_MAX_DURATION, input);
		REQUIRE(d >= policy_delay(min, max, mult, knob_retry <= 1 ? 1 : knob_retry - 1), input);
		REQUIRE(d <= policy_delay(min, max, mult, knob_retry == INT32_MAX ? INT32_MAX : knob_retry + 1), input);
	}
}

/* Multipliers every accepted policy is tried with */
static double
special_multiplier(int i)
{
	switch (i)
	{
		case 0:
			return 1.0;
		case 1:
			return nextafter(1.0, 2.0);
		case 2:
			return 1.0001;
		case 3:
			return 1.5;
		case 4:
			return 2.0;
		case 5:
			return 3.0;
		case 6:
			return 10.0;
		case 7:
			return 1e300;
		case 8:
			return DBL_MAX;
		case 9:
			return INFINITY;
		case 10:
			return NAN;
		case 11:
			return nextafter(1.0, 0.0);
		case 12:
			return 0.0;
		case 13:
			return -2.0;
		case 14:
			return -INFINITY;
		case 15:
			return nextafter(0.0, 1.0); /* the least denormal */
	}
	return -1;
}

#define NUM_SPECIAL_MULTIPLIERS 16

/*
 * check_format_buffer
 *		policy_format into a buffer of exactly 'size' bytes (heap, so that
 *		AddressSanitizer sees a single byte too many) keeps snprintf's
 *		contract, compared with the text written into a roomy buffer.
 */
static void
check_format_buffer(int32_t attempts, int64_t min, int64_t max, size_t size,
					const char *input)
{
	char		full[256];
	size_t		len = policy_format(attempts, min, max, full, sizeof(full));
	char	   *buf = malloc(size > 0 ? size : 1);
	size_t		len2;

	REQUIRE(len < POLICY_FORMAT_LEN, input);
	REQUIRE(strlen(full) == len, input);
	REQUIRE(policy_format(attempts, min, max, NULL, 0) == len, input);
	if (buf == NULL)
		abort();
	len2 = policy_format(attempts, min, max, size > 0 ? buf : NULL, size);
	REQUIRE(len2 == len, input);
	if (size > 0)
	{
		size_t		written = strlen(buf);

		REQUIRE(written == (len < size ? len : size - 1), input);
		REQUIRE(memcmp(buf, full, written) == 0, input);
	}
	free(buf);
}

/*
 * reference_duration
 *		The value of a duration that policy_parse_duration accepted,
 *		computed another way: each part's number read by strtold (the C
 *		locale's, as libFuzzer never calls setlocale) times its unit, in
 *		long double.  Exact to well under a microsecond for any accepted
 *		duration.  The parser rounds each part to a microsecond, so its
 *		result must be within half a microsecond per part of it (*parts
 *		counts them), give or take the long double's own error.
 */
static long double
reference_duration(const char *str, size_t len, int *parts)
{
	long double total = 0;
	size_t		pos = 0;

	*parts = 0;

	while (pos < len)
	{
		char		number[64];
		size_t		start = pos;
		size_t		n;
		long double unit;

		while (pos < len && ((str[pos] >= '0' && str[pos] <= '9') || str[pos] == '.'))
			pos++;

		/*
		 * leading zeros change nothing; fraction digits past 60 nothing we
		 * can measure
		 */
		while (start + 1 < pos && str[start] == '0' && str[start + 1] != '.')
			start++;
		n = pos - start;
		if (n >= sizeof(number))
		{
			const char *dot = memchr(str + start, '.', n);
			size_t		int_len = dot ? (size_t) (dot - (str + start)) : n;

			if (int_len >= sizeof(number) - 2)
				return -1;		/* too long to be accepted; not reached */
			n = sizeof(number) - 1;
		}
		memcpy(number, str + start, n);
		number[n] = '\0';
		if (pos + 1 < len && str[pos] == 'm' && str[pos + 1] == 's')
		{
			unit = (long double) POLICY_USECS_PER_MS;
			pos += 2;
		}
		else
		{
			switch (str[pos])
			{
				case 'd':
					unit = (long double) POLICY_USECS_PER_DAY;
					break;
				case 'h':
					unit = (long double) POLICY_USECS_PER_HOUR;
					break;
				case 'm':
					unit = (long double) POLICY_USECS_PER_MIN;
					break;
				default:
					unit = (long double) POLICY_USECS_PER_SEC;
					break;
			}
			pos++;
		}
		total += strtold(number, NULL) * unit;
		(*parts)++;
	}
	return total;
}

/*
 * check_duration
 *		policy_parse_duration on str[0..len): an accepted duration is in
 *		range, has the value reference_duration finds, and reads back from
 *		its canonical text; a refused one has a well-formed error.
 */
static void
check_duration(const char *str, size_t len, const char *input, bool utf8)
{
	int64_t		v = -12345;
	int64_t		back = -1;
	PolicyError err;
	char		buf[POLICY_FORMAT_LEN];
	size_t		flen;
	int			parts;

	if (policy_parse_duration(str, len, &v, &err))
	{
		long double ref = reference_duration(str, len, &parts);

		REQUIRE(v >= 0 && v <= POLICY_MAX_DURATION, input);
		REQUIRE(err.message[0] == '\0' && err.hint[0] == '\0', input);
		REQUIRE(fabsl((long double) v - ref) <= 0.51L * parts, input);
		flen = policy_format_duration(v, buf, sizeof(buf));
		REQUIRE(flen < sizeof(buf), input);
		REQUIRE(policy_parse_duration(buf, flen, &back, NULL), input);
		REQUIRE(back == v, input);
	}
	else
	{
		REQUIRE(v == -12345, input);
		check_error(&err, input, utf8);
	}
	REQUIRE(policy_parse_duration(str, len, NULL, NULL) ==
			policy_parse_duration(str, len, &back, &err), input);
}

/*
 * check_policy
 *		policy_parse on the text, and everything that follows from a policy
 *		it accepts.
 */
static void
check_policy(const char *text, bool utf8, Knobs *knobs)
{
	PolicySpec	spec;
	PolicySpec	back;
	PolicyError err;
	char		buf[POLICY_FORMAT_LEN];
	char		buf2[POLICY_FORMAT_LEN];
	size_t		len;
	double		knob_mult = knob_double(knobs);
	int32_t		knob_retry = knob_i32(knobs);
	uint64_t	knob_random = knob_u64(knobs);
	int			i;

	memset(&spec, 0x5a, sizeof(spec));
	REQUIRE(policy_parse(text, NULL, NULL) == policy_parse(text, &back, NULL), text);
	if (!policy_parse(text, &spec, &err))
	{
		PolicySpec	untouched;

		memset(&untouched, 0x5a, sizeof(untouched));
		REQUIRE(memcmp(&spec, &untouched, sizeof(spec)) == 0, text);
		check_error(&err, text, utf8);
		return;
	}

	REQUIRE(err.message[0] == '\0' && err.hint[0] == '\0', text);
	REQUIRE(spec.has_count ? (spec.count >= 1 && spec.count <= POLICY_MAX_ATTEMPTS - 1)
			: spec.count == 0, text);
	if (spec.has_count)
	{
		/* the count is the first token, read another way */
		const char *p = text;

		while (*p == ' ' || (*p >= '\t' && *p <= '\r'))
			p++;
		REQUIRE(strtoll(p, NULL, 10) == spec.count, text);
	}
	REQUIRE(spec.min_delay >= 1 && spec.min_delay <= POLICY_MAX_DURATION, text);
	REQUIRE(spec.has_max ? (spec.max_delay >= spec.min_delay &&
							spec.max_delay <= POLICY_MAX_DURATION)
			: spec.max_delay == -1, text);

	/* format, parse back, format again: the same policy and text */
	len = policy_format(spec.has_count ? spec.count + 1 : 0, spec.min_delay,
						spec.max_delay, buf, sizeof(buf));
	REQUIRE(len < sizeof(buf), text);
	REQUIRE(policy_parse(buf, &back, &err), text);
	REQUIRE(back.has_count == spec.has_count && back.count == spec.count &&
			back.min_delay == spec.min_delay && back.has_max == spec.has_max &&
			back.max_delay == spec.max_delay, text);
	policy_format(back.has_count ? back.count + 1 : 0, back.min_delay,
				  back.max_delay, buf2, sizeof(buf2));
	REQUIRE(strcmp(buf, buf2) == 0, text);

	/* the delays of this policy, with every kind of multiplier */
	for (i = 0; i < NUM_SPECIAL_MULTIPLIERS; i++)
		check_delays(spec.min_delay, spec.max_delay, special_multiplier(i),
					 knob_retry, knob_random, i == 4, text);
	check_delays(spec.min_delay, spec.max_delay, knob_mult, knob_retry,
				 knob_random, true, text);
}

/*
 * check_retry_on
 *		The text split on white space and commas into retry_on entries ("?"
 *		stands for a null element), normalized, with the invariants of a
 *		normalized list and of matching against it.
 */
static void
check_retry_on(const char *text, bool utf8, Knobs *knobs)
{
	char		copy[512];
	const char *entries[MAX_ENTRIES];
	char		out[MAX_ENTRIES + 1][POLICY_SQLSTATE_ENTRY_LEN];
	char		again[MAX_ENTRIES + 2][POLICY_SQLSTATE_ENTRY_LEN];
	const char *outp[MAX_ENTRIES + 1];
	PolicyError err;
	int			n = 0;
	int			nout;
	int			i;
	int			j;
	int			rt = 0;
	char		sqlstate[6];
	size_t		pos = 0;
	size_t		tlen = strlen(text);
	uint64_t	knob_state = knob_u64(knobs);

	if (tlen >= sizeof(copy))
		return;
	memcpy(copy, text, tlen + 1);
	while (pos < tlen && n < MAX_ENTRIES)
	{
		size_t		start;

		while (pos < tlen && (copy[pos] == ' ' || copy[pos] == ','))
			pos++;
		if (pos >= tlen)
			break;
		start = pos;
		while (pos < tlen && copy[pos] != ' ' && copy[pos] != ',')
			pos++;
		copy[pos++] = '\0';
		entries[n++] = strcmp(copy + start, "?") == 0 ? NULL : copy + start;
	}

	nout = policy_normalize_retry_on(entries, n, out, &err);
	if (nout < 0)
	{
		check_error(&err, text, utf8);
		return;
	}
	REQUIRE(nout >= 1 && nout <= n + 1, text);
	for (i = 0; i < nout; i++)
	{
		const char *e = out[i];
		const char *code = e + (e[0] == '-' ? 1 : 0);
		size_t		len = bounded_len(code, 6);

		REQUIRE(len == 2 || len == 5, text);
		for (j = 0; j < (int) len; j++)
			REQUIRE((code[j] >= '0' && code[j] <= '9') ||
					(code[j] >= 'A' && code[j] <= 'Z'), text);
		REQUIRE(!(code[0] == '0' && code[1] >= '0' && code[1] <= '2'), text);
		if (strcmp(code, "RT") == 0)
			rt++;
		for (j = 0; j < i; j++)
		{
			const char *other = out[j] + (out[j][0] == '-' ? 1 : 0);

			REQUIRE(strcmp(other, code) != 0, text);
		}
		outp[i] = e;
	}
	REQUIRE(rt == 1, text);

	/* normalizing a normalized list changes nothing */
	REQUIRE(policy_normalize_retry_on(outp, nout, again, &err) == nout, text);
	for (i = 0; i < nout; i++)
		REQUIRE(strcmp(again[i], out[i]) == 0, text);

	/* each exact entry decides its code; a class, codes no entry names */
	for (i = 0; i < nout; i++)
	{
		bool		exclude = out[i][0] == '-';
		const char *code = out[i] + (exclude ? 1 : 0);
		bool		named = false;

		if (strlen(code) == 5)
		{
			REQUIRE(policy_retries_sqlstate((const char (*)[POLICY_SQLSTATE_ENTRY_LEN]) out,
											nout, code) == !exclude, text);
			continue;
		}
		memcpy(sqlstate, code, 2);
		memcpy(sqlstate + 2, "Z9Z", 4);
		for (j = 0; j < nout; j++)
			named = named || strcmp(out[j] + (out[j][0] == '-' ? 1 : 0), sqlstate) == 0;
		if (!named)
			REQUIRE(policy_retries_sqlstate((const char (*)[POLICY_SQLSTATE_ENTRY_LEN]) out,
											nout, sqlstate) == !exclude, text);
	}

	/* any five bytes from the knobs: no crash, and case does not matter */
	for (i = 0; i < 5; i++)
		sqlstate[i] = (char) (knob_state >> (8 * i));
	sqlstate[5] = '\0';
	{
		bool		r = policy_retries_sqlstate((const char (*)[POLICY_SQLSTATE_ENTRY_LEN]) out,
												nout, sqlstate);
		char		upper[6];

		for (i = 0; i < 6; i++)
			upper[i] = (sqlstate[i] >= 'a' && sqlstate[i] <= 'z')
				? (char) (sqlstate[i] - 'a' + 'A') : sqlstate[i];
		REQUIRE(policy_retries_sqlstate((const char (*)[POLICY_SQLSTATE_ENTRY_LEN]) out,
										nout, upper) == r, text);
	}
}

/*
 * check_jitter_names
 *		policy_parse_jitter on the text, and the names read back.
 */
static void
check_jitter_names(const char *text)
{
	PolicyJitter j = (PolicyJitter) 99;
	int			i;

	if (policy_parse_jitter(text, &j))
	{
		const char *name = policy_jitter_name(j);

		REQUIRE(strlen(name) == strlen(text), text);
		for (i = 0; name[i] != '\0'; i++)
			REQUIRE(name[i] == text[i] ||
					(text[i] >= 'A' && text[i] <= 'Z' && name[i] == text[i] - 'A' + 'a'), text);
	}
	else
		REQUIRE(j == (PolicyJitter) 99, text);
	for (i = POLICY_JITTER_NONE; i <= POLICY_JITTER_EQUAL; i++)
		REQUIRE(policy_parse_jitter(policy_jitter_name((PolicyJitter) i), &j) &&
				j == (PolicyJitter) i, text);
}

/*
 * check_raw_numbers
 *		The knobs as raw arguments: policy_delay far outside its contract,
 *		jitter of any int64, policy_format into any buffer, and the format
 *		and parse round trip of any duration in range.
 */
static void
check_raw_numbers(const char *text, Knobs *knobs)
{
	int64_t		min = knob_i64(knobs);
	int64_t		max = knob_i64(knobs);
	double		mult = knob_double(knobs);
	int32_t		retry = knob_i32(knobs);
	uint64_t	random = knob_u64(knobs);
	int32_t		attempts = knob_i32(knobs);
	size_t		bufsize = (size_t) (knob_u64(knobs) >> 56) % (POLICY_FORMAT_LEN + 8);
	int64_t		durations[3];
	int			i;

	check_delays(min, max, mult, retry, random, false, text);
	check_jitter(min, random, text);
	check_format_buffer(attempts, min, max, bufsize, text);

	durations[0] = min;
	durations[1] = max;
	durations[2] = (int64_t) (random % (uint64_t) (POLICY_MAX_DURATION + 1));
	for (i = 0; i < 3; i++)
	{
		int64_t		v = durations[i];
		char		buf[POLICY_FORMAT_LEN];
		size_t		len;
		int64_t		back = -1;

		if (v < 0 || v > POLICY_MAX_DURATION)
			continue;
		len = policy_format_duration(v, buf, sizeof(buf));
		REQUIRE(len < sizeof(buf), text);
		REQUIRE(policy_parse_duration(buf, len, &back, NULL) && back == v, text);
	}
}

/*
 * check_cron
 *		The text as a cron expression; see the header comment.
 */
static void
check_cron(const char *text, bool utf8, Knobs *knobs)
{
	CronSpec	spec;
	PolicyError err;
	CronTime	after;
	CronTime	next;
	CronTime	t;
	uint64_t	k = knob_u64(knobs);

	(void) cron_looks_like_cron(text);
	if (!cron_parse(text, &spec, &err))
	{
		check_error(&err, text, utf8);
		return;
	}
	REQUIRE(spec.minutes != 0 && spec.minutes >> 60 == 0, text);
	REQUIRE(spec.hours != 0 && spec.hours >> 24 == 0, text);
	REQUIRE(spec.days != 0, text);	/* bit 0 is CRON_LAST_DAY, 'L' */
	REQUIRE(spec.months != 0 && (spec.months & 1) == 0 && spec.months >> 13 == 0, text);
	REQUIRE(spec.weekdays != 0 && spec.weekdays >> 7 == 0, text);

	/* a valid wall-clock minute from the knob, years 1 to 9999 */
	after.year = 1 + (int) (k % 9999);
	after.month = 1 + (int) (k >> 16 & 0xff) % 12;
	after.day = 1 + (int) (k >> 24 & 0xff) % cron_days_in_month(after.year, after.month);
	after.hour = (int) (k >> 32 & 0xff) % 24;
	after.minute = (int) (k >> 40 & 0xff) % 60;
	if (!cron_next(&spec, &after, &next))
	{
		/* a parsed expression always fires within 40 years */
		REQUIRE(after.year > 9999 - 41, text);
		return;
	}
	REQUIRE(cron_compare(&after, &next) < 0, text);
	REQUIRE(next.month >= 1 && next.month <= 12 && next.day >= 1 &&
			next.day <= cron_days_in_month(next.year, next.month) &&
			next.hour >= 0 && next.hour < 24 && next.minute >= 0 && next.minute < 60,
			text);
	REQUIRE(cron_matches(&spec, &next), text);
	t = after;
	for (int i = 0; i < 2 * 24 * 60; i++)
	{
		cron_add_minute(&t);
		if (cron_compare(&t, &next) >= 0)
			break;
		REQUIRE(!cron_matches(&spec, &t), text);
	}
}

/*
 * check_rate -- rate_parse (src/core/rate.c): a refused rate has a well-formed
 * error; an accepted one is within bounds, and starts asked for at moments
 * taken from the knobs are admitted only while no window-long interval
 * holds more than count of them
 */
static void
check_rate(const char *text, bool utf8, Knobs *knobs)
{
	RateSpec	rate;
	PolicyError err;
	RateRing	ring;
	int64_t		starts[64];
	int			n = 0;
	int64_t		now = 0;

	if (!rate_parse(text, &rate, &err))
	{
		check_error(&err, text, utf8);
		return;
	}
	REQUIRE(rate.count >= 1 && rate.count <= RATE_MAX_COUNT, text);
	REQUIRE(rate.window >= RATE_MIN_WINDOW && rate.window <= RATE_MAX_WINDOW, text);
	REQUIRE(rate_burst(&rate) >= 1 && rate.count % rate_burst(&rate) == 0, text);
	rate_reset(&ring, &rate, -1);
	for (int i = 0; i < 64; i++)
	{
		int64_t		next = 0;

		now += (int64_t) (knob_u64(knobs) % (uint64_t) (rate.window / 4 + 1));
		if (rate_admit(&ring, &rate, now, &next))
		{
			int			in_window = 0;

			starts[n++] = now;
			for (int k = 0; k < n; k++)
				if (starts[k] > now - rate.window)
					in_window++;
			REQUIRE(in_window <= rate.count, text);
		}
		else
			REQUIRE(next > now, text);
	}
}

int			LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *nul = memchr(data, '\0', size);
	size_t		tlen = (nul != NULL) ? (size_t) (nul - data) : size;
	char	   *input = malloc(tlen + 1);
	Knobs		knobs;
	bool		utf8;

	if (input == NULL)
		abort();
	memcpy(input, data, tlen);
	input[tlen] = '\0';
	knobs.data = (nul != NULL) ? nul + 1 : NULL;
	knobs.len = (nul != NULL) ? size - tlen - 1 : 0;
	knobs.pos = 0;
	utf8 = valid_utf8(input, tlen);

	check_policy(input, utf8, &knobs);
	check_duration(input, tlen, input, utf8);
	if (nul != NULL)
		check_duration((const char *) data, size, input, valid_utf8((const char *) data, size));
	check_jitter_names(input);
	check_retry_on(input, utf8, &knobs);
	check_raw_numbers(input, &knobs);
	check_cron(input, utf8, &knobs);
	check_rate(input, utf8, &knobs);

	free(input);
	return 0;
}
