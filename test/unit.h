/*-------------------------------------------------------------------------
 *
 * unit.h
 *	  What the unit tests of the pure code (test/cron_test.c,
 *	  test/rate_test.c) share: the counts of checks, CHECK, and the check
 *	  of a refused input's message.
 *
 * IDENTIFICATION
 *	  test/unit.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef RETRIES_TEST_UNIT_H
#define RETRIES_TEST_UNIT_H

#include <stdio.h>
#include <string.h>

#include "core/policy.h"

static int	passed;
static int	failed;

#define CHECK(cond, input) \
	do { \
		if (cond) \
			passed++; \
		else \
		{ \
			failed++; \
			fprintf(stderr, "%s:%d: CHECK failed: %s (input \"%s\")\n", \
					__FILE__, __LINE__, #cond, (input)); \
		} \
	} while (0)

/*
 * check_refused -- 'parser' was given 'str', and 'accepted' says whether it
 * took it: it must not have, and its message must contain 'want'
 */
static inline void
check_refused(const char *parser, const char *str, bool accepted,
			  const PolicyError *err, const char *want)
{
	if (accepted)
	{
		failed++;
		fprintf(stderr, "%s accepted \"%s\"\n", parser, str);
		return;
	}
	CHECK(strstr(err->message, want) != NULL, str);
	if (strstr(err->message, want) == NULL)
		fprintf(stderr, "  message: %s\n  wanted:  %s\n", err->message, want);
}

#endif							/* RETRIES_TEST_UNIT_H */
