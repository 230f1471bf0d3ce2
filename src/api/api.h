/*-------------------------------------------------------------------------
 *
 * api.h
 *	  The SQL API, by section of doc/reference.md: what its files offer
 *	  the layers above (the schedules, the engine).
 *
 * src/api/annotate.c		retries.annotate(), retries.unannotate()
 * src/api/call.c			retries.call()
 * src/api/colocate.c		retries.call()'s colocate_with on Citus
 * src/api/call_args.c		converting call arguments to parameter types
 * src/api/manage.c			retries.cancel(), retry_now(), reschedule()
 * src/api/call_context.c	retries.retry(), current_call(), current_attempt()
 * src/api/chains.c			calls that run after others; what finishing a
 *							call does to the calls after it
 * src/api/wait.c			retries.wait(), retries.result()
 * src/api/status.c			retries.workers and the running calls
 * src/api/events.c			retries.emit(), retries.event(), event timeouts
 *
 *-------------------------------------------------------------------------
 */
#ifndef RETRIES_API_H
#define RETRIES_API_H

#include "executor/spi.h"
#include "utils/array.h"
#include "utils/jsonb.h"
#include "utils/timestamp.h"

/* call_args.c */
extern Jsonb *call_args_canonicalize(Oid fnoid, Jsonb *args);
extern List *call_args_build(Oid fnoid, Jsonb *args);
extern Oid	call_args_foreign_domain(Oid typid);
extern void call_args_check_size(const Jsonb *args, const char *what);

/* colocate.c */
extern bool colocate_call(FunctionCallInfo fcinfo, Oid fnoid, Jsonb *args, int64 *id);
extern bool colocate_forward(const char *op, int64 id, FunctionCallInfo fcinfo,
							 int timeout_arg, Datum *value, bool *isnull);
extern Datum colocate_calls_row(Datum value);
extern void colocate_drop_mailboxes(void);

/* call.c */
extern uint64 retries_policy_generation;
extern void call_forget_outcome(void);

/* What a new call takes from its function's current policy */
typedef struct RetriesPolicyRef
{
	int32		policy_id;
	int32		max_attempts;	/* 0 when unlimited */
	bool		unlimited;
	bool		gated;			/* paused: new calls are made held (flow.c) */
	Oid			fn_key;			/* the function's key (names.c) */
} RetriesPolicyRef;

extern void call_require_policy(Oid fnoid, Snapshot stmt, RetriesPolicyRef *ref);
extern bool call_insert_fired(Oid fnoid, int32 policy_id, Datum args, Oid role,
							  int64 schedule_id, TimestampTz run_at,
							  int64 *id);
extern int64 call_insert_command(Oid fnoid, int32 policy_id, Jsonb *args,
								 Datum run_at, Oid role, Datum key);

/* events.c */
extern void events_check_name(text *event, const char *argname);
extern bool events_emitted(Oid role, text *event);
extern void events_lock_shared(Oid role, text *event);
extern TimestampTz events_release_timed_out(TimestampTz now);

/* command.c */
extern int	command_check_syntax(const char *text);
extern Jsonb *command_args(text *command, const char *database, Oid *fnoid);
extern void command_target(Jsonb *args, char **sql, char **database, char **owner);
extern char *command_elsewhere_lacks(Oid role, const char *database, const char *owner,
									 Oid *dboid, const char **owner_now,
									 int *sqlerrcode, const char **hint);

/* annotate.c */
extern int32 annotate_command_policy(Oid fnoid, const char *source,
									 ArrayType *retry_on, Oid role);

/* chains.c: what retries.call()'s after says about a new call */
typedef struct RetriesAfter
{
	int			nwaiting;		/* how many of its calls have not succeeded, */
	int64	   *waiting;		/* these */
	int			nrunning;		/* how many of those another transaction holds
								 * locked (a worker running them), */
	int64	   *running;		/* these */
	int64		failed;			/* one that failed or was cancelled, or 0 */
	char		failed_how;		/* 'f' (failed) or 'c' (cancelled) */
} RetriesAfter;

extern bool retries_chains_released;
extern bool retries_chains_deferred;
extern bool (*chains_worker_note_hook) (void);
extern void chains_after_check(ArrayType *after, Oid caller, RetriesAfter *out);
extern void chains_after_record(int64 call_id, const RetriesAfter *after);
extern void chains_calls_finished(int n, const int64 *ids, const char *how,
								  const bool *notify);
extern bool chains_pending(void);

/*
 * manage.c: set by a worker (engine/worker.c), whether a call is one its
 * open batch has claimed (and so holds locked)
 */
extern bool (*manage_claimed_hook) (int64 id);

/* call_context.c: set by a worker around each attempt */
extern int64 retries_current_call_id;
extern Oid	retries_current_call_role;
extern int32 retries_current_attempt_number;
extern int64 retries_retry_after_usecs;

#endif							/* RETRIES_API_H */
