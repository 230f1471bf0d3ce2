/*-------------------------------------------------------------------------
 *
 * rate.c
 *	  Rate limits of functions: parsing 'count/window', and admitting
 *	  starts under it (see rate.h for the bound and why it holds).
 *
 * IDENTIFICATION
 *	  src/rate.c
 *
 *-------------------------------------------------------------------------
 */
#include <string.h>

#include "core/policy.h"
#include "core/rate.h"

#define RATE_HINT "Write a rate as a count of attempts per duration, such as \"100/1s\" or \"10/1m\"."

static bool
is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

/* trim -- narrow [*start, *end) to leave out white space at both ends */
static void
trim(const char *str, size_t *start, size_t *end)
{
	while (*start < *end && is_space(str[*start]))
		(*start)++;
	while (*end > *start && is_space(str[*end - 1]))
		(*end)--;
}

bool
rate_parse(const char *str, RateSpec *result, PolicyError *err)
{
	char		qrate[POLICY_QUOTED_LEN];
	char		qpart[POLICY_QUOTED_LEN];
	const char *slash;
	size_t		len;
	size_t		cs = 0;
	size_t		ce;
	size_t		ws;
	size_t		we;
	int64_t		count = 0;
	int64_t		window;

	memset(err, 0, sizeof(*err));
	len = str == NULL ? 0 : strlen(str);
	policy_quote(qrate, str == NULL ? "" : str, len);
	slash = str == NULL ? NULL : memchr(str, '/', len);
	if (slash == NULL)
	{
		policy_set_error(err, "rate %s has no \"/\" between a count and a duration", qrate);
		policy_set_hint(err, RATE_HINT);
		return false;
	}

	/* the count: a whole number, 1 .. RATE_MAX_COUNT */
	ce = (size_t) (slash - str);
	trim(str, &cs, &ce);
	policy_quote(qpart, str + cs, ce - cs);
	if (cs == ce)
	{
		policy_set_error(err, "rate %s has no count before \"/\"", qrate);
		policy_set_hint(err, RATE_HINT);
		return false;
	}
	for (size_t i = cs; i < ce; i++)
	{
		if (str[i] < '0' || str[i] > '9')
		{
			policy_set_error(err, "count %s of rate %s is not a whole number", qpart, qrate);
			policy_set_hint(err, RATE_HINT);
			return false;
		}
		if (count <= RATE_MAX_COUNT)
			count = count * 10 + (str[i] - '0');
	}
	if (count < 1 || count > RATE_MAX_COUNT)
	{
		policy_set_error(err, "count %s of rate %s is out of range", qpart, qrate);
		policy_set_hint(err, "A rate's count is 1 to %d attempts.", RATE_MAX_COUNT);
		return false;
	}

	/* the window: a duration, 1 ms .. 1 day */
	ws = (size_t) (slash - str) + 1;
	we = len;
	trim(str, &ws, &we);
	policy_quote(qpart, str + ws, we - ws);
	if (ws == we)
	{
		policy_set_error(err, "rate %s has no duration after \"/\"", qrate);
		policy_set_hint(err, RATE_HINT);
		return false;
	}
	if (!policy_parse_duration(str + ws, we - ws, &window, err))
		return false;
	if (window < RATE_MIN_WINDOW || window > RATE_MAX_WINDOW)
	{
		memset(err, 0, sizeof(*err));
		policy_set_error(err, "duration %s of rate %s is out of range", qpart, qrate);
		policy_set_hint(err, "A rate's duration is 1ms to 1d.");
		return false;
	}
	result->count = (int32_t) count;
	result->window = window;
	return true;
}

int32_t
rate_burst(const RateSpec *rate)
{
	int32_t		b = rate->count < RATE_RING ? rate->count : RATE_RING;

	while (rate->count % b != 0)
		b--;
	return b;
}

int64_t
rate_spacing(const RateSpec *rate)
{
	int64_t		span = rate->window * rate_burst(rate);

	return (span + rate->count - 1) / rate->count;
}

void
rate_reset(RateRing *ring, const RateSpec *rate, int64_t since)
{
	ring->head = 0;
	ring->filled = 0;
	if (since < 0)
		return;
	for (int32_t i = 0; i < rate_burst(rate); i++)
	{
		ring->times[ring->head % RATE_RING] = since;
		ring->head++;
		ring->filled++;
	}
}

int32_t
rate_room(const RateRing *ring, const RateSpec *rate, int64_t now, int64_t * next)
{
	int32_t		burst = rate_burst(rate);
	int64_t		spacing = rate_spacing(rate);

	for (int32_t i = 0; i < burst; i++)
	{
		/*
		 * The i-th start from now is start head + i, which must come
		 * 'spacing' after start head + i - burst: recorded if the ring holds
		 * it, else it never happened (since the reset).  The times are in
		 * order, so the first that is too recent ends the room.
		 */
		uint32_t	back = (uint32_t) (burst - i);
		int64_t		t;

		if (back > ring->filled)
			continue;
		t = ring->times[(ring->head - back) % RATE_RING];
		if (t + spacing > now)
		{
			if (next != NULL)
				*next = t + spacing;
			return i;
		}
	}
	/* all of the burst now: the next one 'spacing' after the first of them */
	if (next != NULL)
		*next = now + spacing;
	return burst;
}

bool
rate_admit(RateRing *ring, const RateSpec *rate, int64_t now, int64_t * next)
{
	int64_t		newest;

	if (rate_room(ring, rate, now, next) == 0)
		return false;
	/* keep the times in order, should the clock step back */
	newest = ring->filled > 0 ? ring->times[(ring->head - 1) % RATE_RING] : now;
	ring->times[ring->head % RATE_RING] = now > newest ? now : newest;
	ring->head++;
	if (ring->filled < RATE_RING)
		ring->filled++;
	return true;
}
