/*-------------------------------------------------------------------------
 *
 * verdict.h
 *	  What an attempt comes to: checks, classification, delays, failure and
 *	  its hooks (src/engine/verdict.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef RETRIES_VERDICT_H
#define RETRIES_VERDICT_H

#include "engine/evaluate.h"
#include "engine/execute.h"
#include "engine/outcome.h"
#include "engine/policies.h"

extern void verdict_init(ExecuteHookPhase hook_phase);
extern bool verdict_precheck(const RetriesCall *call, const CachedPolicy *policy,
							 Outcome *out);
extern void verdict_classify_error(const RetriesCall *call, const CachedPolicy *policy,
								   int32 attempt, const ErrorData *edata,
								   SandboxStep step, int64 timeout, bool capped,
								   Outcome *out);
extern void verdict_set_timed_out(const RetriesCall *call, int32 attempt, int64 timeout,
								  bool capped, Outcome *out);
extern void verdict_finish_failure(const RetriesCall *call, const CachedPolicy *policy,
								   int32 attempt, bool retryable, Outcome *out);
extern void verdict_fail_without_policy(const RetriesCall *call, int32 attempt,
										TimestampTz started_at, Outcome *out);
extern void verdict_on_exhausted(const RetriesCall *call, const CachedPolicy *policy,
								 int32 attempt);
extern void verdict_record_hook_error(int64 call_id, int32 attempt, const char *error);

#endif							/* RETRIES_VERDICT_H */
