/*-------------------------------------------------------------------------
 *
 * evaluate.h
 *	  Running a role's code for an attempt, in its sandbox and under its
 *	  time limit (src/engine/evaluate.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef RETRIES_EVALUATE_H
#define RETRIES_EVALUATE_H

#include "nodes/pg_list.h"
#include "utils/jsonb.h"

#include "engine/policies.h"

/* Where evaluate_sandboxed() was when an error came */
typedef enum SandboxStep
{
	STEP_ARGUMENTS,				/* converting the call's arguments */
	STEP_FUNCTION,				/* running the function (or a hook) */
	STEP_RESULT					/* converting its result to jsonb */
} SandboxStep;

extern void evaluate_init(void);
extern int64 evaluate_time_limit(const CachedPolicy *policy, bool *capped);
extern ErrorData *evaluate_sandboxed(Oid role, Oid fnoid, bool hook, Jsonb *stored_args,
									 MemoryContext argcxt, List *given_args,
									 int64 timeout, SandboxStep *step,
									 Datum *result, bool *isnull);
extern bool evaluate_timed_out(void);
extern bool evaluate_attempt_killed(const char **limit);

#endif							/* RETRIES_EVALUATE_H */
