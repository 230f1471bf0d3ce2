/*-------------------------------------------------------------------------
 *
 * execute.h
 *	  Running one attempt of a call (execute.c), for the worker loop.
 *
 *-------------------------------------------------------------------------
 */
#ifndef RETRIES_EXECUTE_H
#define RETRIES_EXECUTE_H

#include "utils/jsonb.h"

/* A call claimed by a worker */
typedef struct RetriesCall
{
	int64		id;
	int32		policy_id;
	Jsonb	   *args;			/* canonical, as stored; NULL if deferred */
	bool		args_deferred;	/* too large to copy when claimed: read when
								 * its attempt starts (see claim.c) */
	int32		attempts;		/* made before this one */
	int32		max_attempts;	/* 0 when unlimited */
	Oid			role;			/* scheduled_by */
	bool		lone;			/* its last attempt was interrupted: it runs
								 * alone in its batch (see batch.c) */
	bool		windowed;		/* a key_window spaces its key's deliveries
								 * (flow/key_window.c) */
	int32		priority;		/* as given to retries.call() */
} RetriesCall;

/* Which hook of a call's policy runs (see execute.c) */
typedef enum ExecuteHook
{
	HOOK_NONE = 0,
	HOOK_ON_EXHAUSTED,
	HOOK_DELAY_FN
} ExecuteHook;

/* Told when a hook of a call starts (which) and ends (HOOK_NONE) */
typedef void (*ExecuteHookPhase) (int64 call_id, int32 attempt, ExecuteHook which);

extern void execute_init(ExecuteHookPhase hook_phase);
extern bool execute_attempt(RetriesCall *call);
extern void execute_finish_batch(void);
extern void execute_interrupted(RetriesCall *call, int32 attempt, ExecuteHook in_hook,
								TimestampTz started, bool stopped);
extern void execute_commit_failed(RetriesCall *call, int32 attempt,
								  const ErrorData *edata);
extern Oid	execute_call_function(const RetriesCall *call, Oid *key);
struct RunnerOutcome;			/* runner.h */

extern bool execute_is_procedure(const RetriesCall *call);
extern Oid	execute_foreign_owner(const RetriesCall *call);
extern Oid	execute_code_owner(const RetriesCall *call);
extern bool execute_runner_begin(RetriesCall *call, Jsonb **args, int64 *timeout,
								 Oid *dboid, char **sql);
extern void execute_runner_end(RetriesCall *call, TimestampTz started_at,
							   int64 timeout, const struct RunnerOutcome *outcome);

#endif							/* RETRIES_EXECUTE_H */
