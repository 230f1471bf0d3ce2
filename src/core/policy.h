/*-------------------------------------------------------------------------
 *
 * policy.h
 *	  The retry-policy grammar ('[count] min [max]'), durations, the delay
 *	  formula, jitter and retry_on matching.
 *
 * Everything declared here is a pure function: no server state, no palloc,
 * no ereport, only the C standard library.  That lets the SQL API, the
 * workers, the unit tests (test/policy_test.c) and the fuzzers share one
 * implementation.  Errors are returned in a PolicyError, which the SQL layer
 * turns into an ereport.
 *
 * Durations are int64 microseconds throughout.
 *
 *-------------------------------------------------------------------------
 */
#ifndef RETRIES_POLICY_H
#define RETRIES_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define POLICY_USECS_PER_MS		INT64_C(1000)
#define POLICY_USECS_PER_SEC	INT64_C(1000000)
#define POLICY_USECS_PER_MIN	(INT64_C(60) * POLICY_USECS_PER_SEC)
#define POLICY_USECS_PER_HOUR	(INT64_C(60) * POLICY_USECS_PER_MIN)
#define POLICY_USECS_PER_DAY	(INT64_C(24) * POLICY_USECS_PER_HOUR)

/* Longest delay or duration accepted anywhere: 3650 days */
#define POLICY_MAX_DURATION		(INT64_C(3650) * POLICY_USECS_PER_DAY)

/* Most attempts a policy may allow; a count (of retries) is one less */
#define POLICY_MAX_ATTEMPTS		1000000000

/* Longest text any PolicyError field holds, including the terminator */
#define POLICY_ERROR_LEN		256

/* Size of a buffer that always holds a formatted duration or policy */
#define POLICY_FORMAT_LEN		128

/* A normalized retry_on entry: optional '-', 2 or 5 characters, NUL */
#define POLICY_SQLSTATE_ENTRY_LEN	7

typedef enum PolicyJitter
{
	POLICY_JITTER_NONE,
	POLICY_JITTER_FULL,			/* uniform in [0, delay] */
	POLICY_JITTER_EQUAL			/* uniform in [delay/2, delay] */
} PolicyJitter;

/*
 * An error from one of the parsers.  'message' is a lower-case fragment
 * without a final period that names the bad part, e.g.
 *		unknown unit "x" in duration "5x"
 * 'hint' is a full sentence saying what to do, or empty if none is known.
 */
typedef struct PolicyError
{
	char		message[POLICY_ERROR_LEN];
	char		hint[POLICY_ERROR_LEN];
} PolicyError;

#if defined(__GNUC__) || defined(__clang__)
#define POLICY_PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))
#else
#define POLICY_PRINTF(fmt, args)
#endif

/*
 * Fill err's message from a format and clear its hint (nothing if err is
 * NULL, for a caller that only wants a yes or no); then, optionally, its
 * hint.  For the parsers here and in cron.c.
 */
extern void policy_set_error(PolicyError *err, const char *fmt,...) POLICY_PRINTF(2, 3);
extern void policy_set_hint(PolicyError *err, const char *fmt,...) POLICY_PRINTF(2, 3);

/*
 * Write str[0..len) between double quotes into dst, which has
 * POLICY_QUOTED_LEN bytes, for a message, and return dst: control
 * characters as \xNN, text past 40 bytes cut (never inside a multibyte
 * character) and marked "...".
 */
#define POLICY_QUOTED_LEN	48
extern const char *policy_quote(char *dst, const char *str, size_t len);

/* The parts of a parsed policy string '[count] min [max]' */
typedef struct PolicySpec
{
	bool		has_count;		/* was a count given? */
	int32_t		count;			/* retries, 1 .. POLICY_MAX_ATTEMPTS - 1; 0
								 * when has_count is false */
	int64_t		min_delay;		/* 1 .. POLICY_MAX_DURATION */
	bool		has_max;		/* was a max given (exponential backoff)? */
	int64_t		max_delay;		/* min_delay .. POLICY_MAX_DURATION; -1 when
								 * has_max is false */
} PolicySpec;

/*
 * Parse a duration such as "5s", "1h30m", "1.5s" or "250ms" into
 * microseconds.  Units are ms, s, m, h and d (lower case), each used at most
 * once and in descending order; a number may have a decimal fraction, which
 * is rounded to the nearest microsecond.  Zero is accepted here; callers
 * decide whether it is allowed.  The text is str[0..len).
 */
extern bool policy_parse_duration(const char *str, size_t len, int64_t * result,
								  PolicyError *err);

/*
 * Parse a policy string '[count] min [max]'.  Tokens are separated by white
 * space; leading and trailing white space is ignored.
 */
extern bool policy_parse(const char *str, PolicySpec *result, PolicyError *err);

/*
 * Write the canonical text of a duration, which policy_parse_duration reads
 * back as the same value: whole units, largest first, zero units left out,
 * microseconds as a fraction of ms ("0s", "500ms", "1h30m", "2s0.25ms").
 * Like snprintf, returns the full length and truncates to fit buflen.
 */
extern size_t policy_format_duration(int64_t usecs, char *buf, size_t buflen);

/*
 * Write a policy as '[count] min [max]' (snprintf-like, as above).  max_attempts <= 0 means unlimited
 * (no count); max_delay < 0 means a fixed delay (no max).  The count written
 * is max_attempts - 1, which is 0 for a policy that never retries.
 */
extern size_t policy_format(int32_t max_attempts, int64_t min_delay,
							int64_t max_delay, char *buf, size_t buflen);

/*
 * Delay before retry number 'retry' (1 for the first retry):
 * min(max_delay, min_delay * multiplier^(retry-1)), or min_delay when
 * max_delay < 0.  Never overflows: results are clamped to max_delay (or
 * POLICY_MAX_DURATION).  multiplier must be finite and >= 1.
 */
extern int64_t policy_delay(int64_t min_delay, int64_t max_delay,
							double multiplier, int32_t retry);

/*
 * Apply jitter to a delay, using 'random' as a uniformly distributed 64-bit
 * value: FULL gives [0, delay], EQUAL gives [delay - delay/2, delay].
 */
extern int64_t policy_jitter(int64_t delay, PolicyJitter jitter, uint64_t random);

/* Jitter names: "none", "full", "equal" */
extern bool policy_parse_jitter(const char *str, PolicyJitter *result);
extern const char *policy_jitter_name(PolicyJitter jitter);

/*
 * Normalize a retry_on list.  Each entry is a 5-character SQLSTATE or a
 * 2-character class (letters are upper-cased), optionally prefixed with '-'
 * to exclude it.  Classes 00, 01 and 02 are not errors and are refused, as
 * are entries that both include and exclude the same code.  Duplicates are
 * dropped; the class RT is added unless the list excludes it ("-RT").
 * 'out' must have room for n + 1 entries.  Returns the number of entries
 * written, or -1 with 'err' filled.
 */
extern int	policy_normalize_retry_on(const char *const *entries, int n,
									  char (*out)[POLICY_SQLSTATE_ENTRY_LEN],
									  PolicyError *err);

/*
 * Does a normalized retry_on list retry this 5-character SQLSTATE?  The most
 * specific entry decides: an exact code beats its class; no match means no.
 */
extern bool policy_retries_sqlstate(const char (*entries)[POLICY_SQLSTATE_ENTRY_LEN],
									int n, const char *sqlstate);

#endif							/* RETRIES_POLICY_H */
