/*-------------------------------------------------------------------------
 *
 * rate.h
 *	  Rate limits of functions ('100/1s': at most 100 attempts start in any
 *	  second): parsing, and the admission of starts.
 *
 * Like policy.h, everything here is a pure function: no server state, no
 * palloc, no ereport, only the C standard library, so that the SQL layer,
 * the workers (through shared memory, shmem.c), the unit tests
 * (test/rate_test.c) and the fuzzers share one implementation.  Errors come
 * back in a PolicyError.
 *
 * The bound.  A rate 'count/window' admits a start at time t only if no
 * window-long interval ending at t would then hold more than count starts.
 * Remembering the last count start times decides that exactly, but a rate
 * such as 100000/1h would need that many; so a RateRing keeps the last
 * RATE_RING starts, and the rate is applied as 'burst' starts per
 * window * burst / count, where burst is the largest divisor of count no
 * larger than RATE_RING: start k is admitted only if start k - burst was
 * at least that long before.  Any window-long interval is count / burst
 * such shorter ones, each holding at most burst starts: never more than
 * count in all.  With count <= RATE_RING (burst = count) that is exactly
 * the sliding window; a larger count that RATE_RING divides badly (a prime
 * such as 1009) is paced more evenly than it needs to be, never faster.
 *
 *-------------------------------------------------------------------------
 */
#ifndef RETRIES_RATE_H
#define RETRIES_RATE_H

#include <stdbool.h>
#include <stdint.h>

#include "core/policy.h"

/* Starts a RateRing remembers */
#define RATE_RING			128

/* Bounds of a rate's parts */
#define RATE_MAX_COUNT		1000000
#define RATE_MIN_WINDOW		INT64_C(1000)	/* 1 ms */
#define RATE_MAX_WINDOW		POLICY_USECS_PER_DAY

/* A parsed rate 'count/window' */
typedef struct RateSpec
{
	int32_t		count;			/* 1 .. RATE_MAX_COUNT */
	int64_t		window;			/* microseconds, RATE_MIN_WINDOW ..
								 * RATE_MAX_WINDOW */
} RateSpec;

/* The last starts admitted under a rate, newest at times[(head - 1) % RATE_RING] */
typedef struct RateRing
{
	int64_t		times[RATE_RING];	/* microseconds, any epoch */
	uint32_t	head;			/* starts recorded, ever (wraps) */
	uint32_t	filled;			/* valid entries, up to RATE_RING */
} RateRing;

/*
 * Parse a rate such as "100/1s", "10/1m" or "5/250ms": a count, a slash and
 * a duration (policy_parse_duration's units); white space around the parts
 * is ignored.
 */
extern bool rate_parse(const char *str, RateSpec *result, PolicyError *err);

/* The rate applied: 'burst' starts per 'spacing' microseconds (see above) */
extern int32_t rate_burst(const RateSpec *rate);
extern int64_t rate_spacing(const RateSpec *rate);

/* Empty a ring; if 'since' >= 0, as if 'burst' starts had happened then */
extern void rate_reset(RateRing *ring, const RateSpec *rate, int64_t since);

/*
 * May a start happen at 'now' under 'rate'?  If so it is recorded and true
 * is returned; if not, *next (when non-NULL) is the earliest time one may.
 */
extern bool rate_admit(RateRing *ring, const RateSpec *rate, int64_t now, int64_t * next);

/*
 * How many starts could be admitted at 'now', one after another (up to
 * burst); *next is when the next one beyond those may start.
 */
extern int32_t rate_room(const RateRing *ring, const RateSpec *rate, int64_t now,
						 int64_t * next);

#endif							/* RETRIES_RATE_H */
