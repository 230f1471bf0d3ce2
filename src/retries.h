/*-------------------------------------------------------------------------
 *
 * retries.h
 *	  Declarations shared by the retries extension's C files.
 *
 * src/retries.c		module initialization and settings
 * src/policy.c			policy grammar and delay arithmetic (pure C)
 * src/catalog.c		the extension's tables, roles and visibility
 * src/call_args.c		converting call arguments to parameter types
 * src/annotate.c		retries.annotate(), retries.unannotate()
 * src/schedule.c		retries.call()
 * src/schedules.c		recurring schedules: their functions and their firing
 * src/cron.c			cron expressions (pure C)
 * src/recurring.c		`every` in a time zone, retries.next_runs()
 * src/manage.c			retries.cancel(), retry_now(), reschedule()
 * src/call_context.c	retries.retry(), current_call(), current_attempt()
 * src/shmem.c			state shared by launcher, workers and backends
 * src/launcher.c		the launcher, which starts per-database workers
 * src/worker.c			the worker loop: batches, sleeping, crash recovery
 * src/claim.c			claiming due calls into the worker's memory
 * src/execute.c		running one attempt and recording its outcome
 * src/sandbox.c		running a call's code as its role, leaving nothing behind
 * src/chains.c			calls that run after others; what finishing a call does
 * src/wait.c			retries.wait(), retries.result(), waking waiters
 * src/hooks.c			commit wake-ups, DROP DATABASE/EXTENSION handling
 *
 *-------------------------------------------------------------------------
 */
#ifndef RETRIES_H
#define RETRIES_H

#include "executor/spi.h"
#include "fmgr.h"
#include "utils/array.h"
#include "utils/jsonb.h"
#include "utils/timestamp.h"

#include "rate.h"

/* The SQLSTATE that retries.retry() raises; its class RT is always retried */
#define ERRCODE_RETRIES_RETRY	MAKE_SQLSTATE('R','T','0','0','0')

/* Settings (retries.c) */
extern int	retries_max_workers;
extern int	retries_batch_size;
extern bool retries_enabled;
extern char *retries_retention;
extern char *retries_default_policy;
extern int	retries_max_attempt_time;
extern int	retries_min_delay;
extern int	retries_max_kept_attempts;
extern int	retries_max_rate_limits;
extern int	retries_max_result_size;
extern int	retries_max_args_size;
extern int	retries_max_worker_memory;

/* Was the library loaded by shared_preload_libraries? (retries.c) */
extern bool retries_preloaded;

/* Saved identity while acting as the extension's owner (catalog.c) */
typedef struct RetriesUserSwitch
{
	Oid			saved_userid;
	int			saved_sec_context;
} RetriesUserSwitch;

/* catalog.c */
extern Oid	retries_schema_oid(void);
extern void retries_become_owner(RetriesUserSwitch *save);
extern void retries_hold_for_restore(void);
extern void retries_restore_xact_end(bool committed);
extern void retries_restore_subxact_end(bool committed, SubTransactionId mySubid,
										SubTransactionId parentSubid);
extern void retries_restore_before_prepare(void);
extern pid_t retries_being_restored(void);
extern void retries_restore_user(const RetriesUserSwitch *save);
extern bool retries_sees_all_calls(Oid roleid);
extern bool retries_may_see_call(Oid roleid, Oid scheduled_by);
extern bool retries_reads_all_calls(Oid roleid);
extern bool retries_may_read_call(Oid roleid, Oid scheduled_by);
extern char *retries_call_privilege(Oid fnoid, Oid role);
extern void retries_check_call_privilege(Oid fnoid, Oid role);
extern char *retries_login_privilege(Oid role, const char **hint);
extern void retries_call_not_found(int64 id, const char *argname);
extern Datum retries_id_array(const int64 *ids, int n);
extern void retries_check_not_null(FunctionCallInfo fcinfo, int argno,
								   const char *argname);
extern bool retries_interval_to_usecs(const Interval *span, int64 *usecs);
extern int64 retries_interval_to_delay(const Interval *span);
extern Interval *retries_usecs_to_interval(int64 usecs);
extern long retries_ms_until(TimestampTz when);
extern Datum retries_clamp_run_at(Datum run_at);
extern SPIPlanPtr retries_prepare_kept(SPIPlanPtr *plan, const char *query,
									   int nargs, Oid *argtypes);
/*
 * Where a query about claimable calls means "and no gate holds it", and
 * "and its priority is 0" (both need version 1.2: see catalog.c)
 */
#define NOT_HELD " /*not held*/"
#define PRIORITY_ZERO " /*priority 0*/"
extern SPIPlanPtr retries_prepare_unheld(SPIPlanPtr *plans, const char *query,
										 int nargs, Oid *argtypes);
extern void retries_columns_to_arrays(int ncolumns, const Oid *types, Datum **cols,
									  bool **nulls, int n, Oid *argtypes,
									  Datum *values);

/* call_args.c */
extern Jsonb *call_args_canonicalize(Oid fnoid, Jsonb *args);
extern List *call_args_build(Oid fnoid, Jsonb *args);

/* flow.c */
typedef struct RetriesGate
{
	Oid			fn;				/* the function's key (function_names.c) */
	bool		paused;
	int32		max_running;	/* 0 when not limited */
	int32		max_per_key;	/* max_running_per_key; 0 when not limited */
	bool		has_rate;		/* is it rate-limited, */
	RateSpec	rate;			/* at this rate? */
} RetriesGate;

extern bool retries_flow_available(void);
extern int	retries_load_gates(RetriesGate **gates);
extern void retries_hold_call(int64 id, Oid fnoid);
extern bool retries_call_limit_key(int64 id, int64 *key);
extern Oid	retries_function_owner(Oid fnoid);
extern void retries_hold_calls(Oid fnoid);
extern bool retries_set_gate(Oid fnoid, const bool *paused, int32 max_running,
							 int32 max_per_key, const char *rate, bool *was_paused);
extern void retries_clear_limit(Oid fnoid);
extern void retries_gate_call(int64 id);
extern TimestampTz retries_release_held(TimestampTz now, bool *gated);

/* chains.c: what retries.call()'s after says about a new call */
typedef struct RetriesAfter
{
	int			nwaiting;		/* how many of its calls have not succeeded, */
	int64	   *waiting;		/* these */
	int			nrunning;		/* how many of those another transaction
								 * holds locked (a worker running them), */
	int64	   *running;		/* these */
	int64		failed;			/* one that failed or was cancelled, or 0 */
	char		failed_how;		/* 'f' (failed) or 'c' (cancelled) */
} RetriesAfter;

extern bool retries_chains_released;
extern bool retries_chains_deferred;
extern bool retries_chains_available(void);

/*
 * function_names.c.  RETRIES_KEY_OF(fn) is SQL for the key of function
 * fn (an SQL expression of type oid), NULL if it has none: as
 * retries_function_key(fn, false), inside a query.
 */
#define RETRIES_ORIGIN "retries.origin()"
#define RETRIES_KEY_OF(fn) \
	"COALESCE(" \
	" (SELECT k.key FROM retries.function_names k" \
	"  WHERE k.fn OPERATOR(pg_catalog.=) " fn \
	"  AND k.fn OPERATOR(pg_catalog.<>) 0" \
	"  AND k.origin OPERATOR(pg_catalog.=) " RETRIES_ORIGIN \
	"  ORDER BY k.key LIMIT 1)," \
	" (SELECT k.key FROM retries.function_names k" \
	"  WHERE k.origin OPERATOR(pg_catalog.<>) " RETRIES_ORIGIN \
	"  AND k.fn OPERATOR(pg_catalog.<>) 0" \
	"  AND retries.resolve_function(k.signature, k.owner) OPERATOR(pg_catalog.=) " fn \
	"  ORDER BY k.key LIMIT 1))"
extern bool retries_function_names_available(void);
extern Oid	retries_function_key(Oid fn, bool create);
extern Oid	retries_key_function(Oid key);
extern void retries_refresh_function_names(void);
extern bool retries_names_refresh_due(void);
extern void retries_names_refresh_failed(void);
extern void retries_after_check(ArrayType *after, Oid caller, RetriesAfter *out);
extern void retries_after_record(int64 call_id, const RetriesAfter *after);
extern void retries_calls_finished(int n, const int64 *ids, const char *how,
								   const bool *notify);
extern bool retries_chains_pending(void);

/* wait.c */
extern void retries_call_finished(int64 id, bool notify);
extern void retries_finished_at_end(bool committed);

/* hooks.c */
extern void retries_install_hooks(void);
extern void retries_wake_at_commit(void);
extern void retries_gates_changed_at_commit(void);
extern uint64 retries_gates_generation(void);

/* schedule.c */
extern uint64 retries_policy_generation;
/* What a new call takes from its function's current policy */
typedef struct RetriesPolicyRef
{
	int32		policy_id;
	int32		max_attempts;	/* 0 when unlimited */
	bool		unlimited;
	bool		gated;			/* paused: new calls are made held (flow.c) */
	Oid			fn_key;			/* the function's key (function_names.c) */
} RetriesPolicyRef;

extern void retries_require_policy(Oid fnoid, Snapshot stmt, RetriesPolicyRef *ref);
extern bool retries_insert_fired_call(Oid fnoid, Datum args, Oid role,
									  int64 schedule_id, TimestampTz run_at,
									  int64 *id);

/* schedules.c */
extern TimestampTz retries_fire_schedules(TimestampTz now, bool *waiting);

/* launcher.c */
extern void retries_register_launcher(void);

/* call_context.c: set by a worker around each attempt */
extern int64 retries_current_call_id;
extern int32 retries_current_attempt_number;
extern int64 retries_retry_after_usecs;

#endif							/* RETRIES_H */
