/*-------------------------------------------------------------------------
 *
 * rate_test.c
 *	  Unit tests of src/core/rate.c: parsing rates, and the bound that admitted
 *	  starts keep (never more than count in any window-long interval),
 *	  checked against every admitted start of long random runs; and that
 *	  the bound does not starve a steady demand.
 *
 * IDENTIFICATION
 *	  test/rate_test.c
 *
 *-------------------------------------------------------------------------
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/rate.h"
#include "unit.h"

static void
parses(const char *str, int32_t count, int64_t window)
{
	RateSpec	r;
	PolicyError err;
	bool		ok = rate_parse(str, &r, &err);

	CHECK(ok && r.count == count && r.window == window, str);
	if (!ok)
		fprintf(stderr, "  error: %s\n", err.message);
}

static void
refused(const char *str, const char *want)
{
	RateSpec	r;
	PolicyError err;
	bool		accepted = rate_parse(str, &r, &err);

	check_refused("rate_parse", str, accepted, &err, want);
}

/* a small deterministic generator (xorshift64*) */
static uint64_t rng = 88172645463325252ULL;

static uint64_t
next_random(void)
{
	rng ^= rng >> 12;
	rng ^= rng << 25;
	rng ^= rng >> 27;
	return rng * 2685821657736338717ULL;
}

/*
 * run -- 'attempts' starts asked for at random moments (gaps up to
 * 'max_gap' microseconds, often 0: bursts), admitted or not under 'rate';
 * checks that no window-long interval holds more than count admitted
 * starts; returns how many were admitted
 */
static long
run(const char *rate_text, int attempts, int64_t max_gap)
{
	RateSpec	rate;
	PolicyError err;
	RateRing	ring;
	int64_t    *admitted = malloc(sizeof(int64_t) * attempts);
	long		n = 0;
	int64_t		now = 1000000;
	long		worst = 0;
	long		lo = 0;

	if (!rate_parse(rate_text, &rate, &err))
	{
		failed++;
		fprintf(stderr, "could not parse %s: %s\n", rate_text, err.message);
		free(admitted);
		return 0;
	}
	rate_reset(&ring, &rate, -1);
	for (int i = 0; i < attempts; i++)
	{
		int64_t		next = -1;

		now += (next_random() % 3 == 0) ? 0 : (int64_t) (next_random() % (uint64_t) (max_gap + 1));
		if (rate_admit(&ring, &rate, now, &next))
			admitted[n++] = now;
		else if (next <= now)
		{
			failed++;
			fprintf(stderr, "%s: refused at %lld, next %lld is not later\n", rate_text,
					(long long) now, (long long) next);
			break;
		}
	}
	/* every interval (t - window, t] ending at an admitted start */
	for (long k = 0; k < n; k++)
	{
		while (admitted[lo] <= admitted[k] - rate.window)
			lo++;
		if (k - lo + 1 > worst)
			worst = k - lo + 1;
	}
	CHECK(worst <= rate.count, rate_text);
	if (worst > rate.count)
		fprintf(stderr, "  %s: %ld starts in one window\n", rate_text, worst);
	free(admitted);
	return n;
}

/*
 * steady -- a demand far above the rate, for 'windows' windows: how many
 * starts were admitted, per window (the bound's cost in throughput)
 */
static double
steady(const char *rate_text, int windows)
{
	RateSpec	rate;
	PolicyError err;
	RateRing	ring;
	long		n = 0;
	int64_t		step;

	if (!rate_parse(rate_text, &rate, &err))
		return 0;
	rate_reset(&ring, &rate, -1);
	step = rate.window / rate.count / 10 + 1;
	for (int64_t now = 0; now < rate.window * windows; now += step)
		if (rate_admit(&ring, &rate, now, NULL))
			n++;
	return (double) n / windows;
}

int
main(void)
{
	RateSpec	rate;
	RateRing	ring;
	PolicyError err;
	int64_t		next;

	parses("100/1s", 100, 1000000);
	parses(" 10 / 1m ", 10, 60000000);
	parses("5/250ms", 5, 250000);
	parses("1/1d", 1, INT64_C(86400000000));
	parses("1000000/1h30m", 1000000, INT64_C(5400000000));
	refused("100", "has no \"/\"");
	refused("", "has no \"/\"");
	refused("/1s", "has no count");
	refused("10/", "has no duration");
	refused("-1/1s", "is not a whole number");
	refused("1.5/1s", "is not a whole number");
	refused("0/1s", "out of range");
	refused("1000001/1s", "out of range");
	refused("99999999999999999999/1s", "out of range");
	refused("10/0s", "out of range");
	refused("10/500us", "");
	refused("10/2d", "out of range");
	refused("10/1x", "");

	/* burst: the largest divisor of count up to RATE_RING */
	rate.window = 1000000;
	rate.count = 100;
	CHECK(rate_burst(&rate) == 100 && rate_spacing(&rate) == 1000000, "100/1s");
	rate.count = 1000;
	CHECK(rate_burst(&rate) == 125 && rate_spacing(&rate) == 125000, "1000/1s");
	rate.count = 1009;
	CHECK(rate_burst(&rate) == 1, "1009/1s: prime");

	/* exact sliding window: 3 in any second */
	(void) rate_parse("3/1s", &rate, &err);
	rate_reset(&ring, &rate, -1);
	CHECK(rate_room(&ring, &rate, 0, NULL) == 3, "3/1s: room at first");
	CHECK(rate_admit(&ring, &rate, 0, NULL), "3/1s: 1st");
	CHECK(rate_admit(&ring, &rate, 100000, NULL), "3/1s: 2nd");
	CHECK(rate_admit(&ring, &rate, 200000, NULL), "3/1s: 3rd");
	CHECK(!rate_admit(&ring, &rate, 300000, &next) && next == 1000000, "3/1s: 4th waits for 1 s");
	CHECK(rate_room(&ring, &rate, 1000000, &next) == 1 && next == 1100000,
		  "3/1s: at 1 s, room for one, the next at 1.1 s");
	CHECK(rate_admit(&ring, &rate, 1000000, NULL), "3/1s: 4th at 1 s");
	CHECK(!rate_admit(&ring, &rate, 1099999, NULL), "3/1s: 5th not before 1.1 s");

	/* a reset "since" a moment counts a whole burst then */
	rate_reset(&ring, &rate, 5000000);
	CHECK(rate_room(&ring, &rate, 5999999, &next) == 0 && next == 6000000,
		  "3/1s: reset as full at 5 s");
	CHECK(rate_room(&ring, &rate, 6000000, NULL) == 3, "3/1s: full room a window later");

	/* random runs: the bound holds for every admitted start */
	run("3/1s", 20000, 400000);
	run("100/1s", 200000, 20000);
	run("10/1m", 20000, 30000000);
	run("128/10ms", 100000, 200);
	run("1000/1s", 200000, 2000);
	run("1009/1s", 100000, 2000);
	run("7/3ms", 100000, 1000);
	run("1/1ms", 100000, 2000);

	/* a steady demand gets the rate (or, paced, nearly) */
	CHECK(steady("100/1s", 50) >= 99.0, "100/1s steady");
	CHECK(steady("1000/1s", 50) >= 990.0, "1000/1s steady");
	CHECK(steady("1009/1s", 50) >= 990.0, "1009/1s steady");
	CHECK(steady("10/1m", 50) >= 9.9, "10/1m steady");

	printf("rate_test: %d passed, %d failed\n", passed, failed);
	return failed > 0;
}
