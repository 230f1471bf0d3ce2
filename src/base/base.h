/*-------------------------------------------------------------------------
 *
 * base.h
 *	  Server helpers every layer above uses: the settings, the schema and
 *	  its version, argument checks and conversions, kept query plans.
 *
 * src/base/settings.c	the retries.* settings; whether preloaded
 * src/base/schema.c	schema retries and its version
 * src/base/args.c		checking and converting SQL arguments
 * src/base/plans.c		queries prepared once per session
 * src/base/state.c		the states of a call and the changes between them
 * src/base/clock.c		the time of day the extension decides by
 *
 *-------------------------------------------------------------------------
 */
#ifndef RETRIES_BASE_H
#define RETRIES_BASE_H

#include "executor/spi.h"
#include "fmgr.h"
#include "utils/jsonb.h"
#include "utils/timestamp.h"

/* The SQLSTATE that retries.retry() raises; its class RT is always retried */
#define ERRCODE_RETRIES_RETRY	MAKE_SQLSTATE('R','T','0','0','0')

/* settings.c */
extern int	retries_max_workers;
extern int	retries_max_extra_workers;
extern int	retries_max_runners;
extern int	retries_max_databases;
extern int	retries_max_cluster_workers;
extern int	retries_worker_idle_timeout;
extern int	retries_reserved_workers;
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
extern int	retries_debug_clock_offset;

/*
 * The extension's directory in the data directory: the workers' crash
 * ledger (engine/ledger.c) and notes of databases made by CREATE DATABASE
 * (tables/home.c)
 */
#define RETRIES_DIR			"pg_retries"

/* Was the library loaded by shared_preload_libraries? */
extern bool retries_preloaded;
extern void settings_define(void);

/* schema.c: the versions whose objects the library tells apart */
typedef enum RetriesSchemaVersion
{
	SCHEMA_1_1 = 11,			/* 1.0 and 1.1 */
	SCHEMA_1_2 = 12,			/* flow control, chains, results, schedules */
	SCHEMA_1_3 = 13,			/* held calls indexed by role */
	SCHEMA_1_4 = 14,			/* function_names: keys of functions */
	SCHEMA_1_5 = 15,			/* procedures and commands */
	SCHEMA_1_6 = 16,			/* keys with windows, debounce, events */
	SCHEMA_1_7 = 17				/* calls beside their data, low priorities by
								 * role */
} RetriesSchemaVersion;

extern Oid	schema_retries_oid(void);

/* The saved identity while acting as the extension's owner (schema.c) */
typedef struct RetriesUserSwitch
{
	Oid			saved_userid;
	int			saved_sec_context;
	int			guc_nestlevel;	/* of the search_path pinned meanwhile */
} RetriesUserSwitch;

extern void schema_switch_to_owner(RetriesUserSwitch *save);
extern void schema_switch_back(const RetriesUserSwitch *save);
extern Oid	schema_retries_owner(void);
extern RetriesSchemaVersion schema_retries_version(void);
extern Oid	schema_command_oid(void);
extern Oid	schema_command_in_oid(void);
extern Oid	schema_function_owner(Oid fnoid);
extern bool schema_is_command(Oid fnoid);
extern void schema_refuse_command(Oid fnoid, const char *argname);

/* The most bytes of an argument an error message quotes (args_quotable) */
#define QUOTE_MAX	200

/*
 * The most bytes of each text of an attempt's error that is kept (its
 * message, detail, hint and context, the terminating zero included):
 * args_clip_len
 */
#define ERROR_TEXT_LEN	16384

/* args.c */
extern void args_call_not_found(int64 id, const char *argname);
extern Datum args_id_array(const int64 *ids, int n);
extern int	args_portable_literals(void);
extern void args_check_not_null(FunctionCallInfo fcinfo, int argno,
								const char *argname);
extern bool args_interval_to_usecs(const Interval *span, int64 *usecs);
extern int64 args_interval_arg(FunctionCallInfo fcinfo, int argno,
							   const char *argname, bool positive);
extern int64 args_interval_to_delay(const Interval *span);
extern char *args_quotable(const char *text, int len);
extern int	args_clip_len(const char *text, int len);
extern char *args_clipped(char *text);
extern void args_check_encoding(const char *text, int len, const char *what);
extern void args_check_jsonb_encoding(Jsonb *value, const char *what);
extern const char *args_valid_text(const char *str);
extern Interval *args_usecs_to_interval(int64 usecs);

/* citus.c: Citus's library by name; the coordinator forwarding a call */
extern void *citus_symbol(const char *name);
extern bool citus_here(void);
extern bool citus_speaks_for_cluster(void);
extern char *citus_forward_text(FunctionCallInfo fcinfo);
extern char *citus_owned_text(Oid fnoid);
extern void citus_forward_call(FunctionCallInfo fcinfo, const char *tail);
extern void citus_forward(const char *sql);

/* clock.c: the time of day, ahead of the system's by the debug offset */
extern TimestampTz clock_ahead(TimestampTz system_time);
extern TimestampTz clock_now(void);
extern TimestampTz clock_xact_now(void);
extern TimestampTz clock_system_now(void);
extern TimestampTz clock_system_statement_start(void);
extern long clock_system_ms_until(TimestampTz when);
extern long clock_ms_until(TimestampTz when);
extern Datum clock_clamp_run_at(Datum run_at);

/* state.c: a call's state; CALL_RUNNING is shown, never stored */
typedef enum CallState
{
	CALL_SCHEDULED,
	CALL_RUNNING,
	CALL_SUCCEEDED,
	CALL_FAILED,
	CALL_CANCELLED
} CallState;
#define CALL_STATE_COUNT	(CALL_CANCELLED + 1)

extern const char *call_state_name(CallState state);
extern CallState call_state_parse(const char *name);
extern bool call_state_finished(CallState state);
extern CallState call_state_change(CallState from, CallState to);

/* state.c: an attempt's outcome (retries.attempt_outcome) */
typedef enum AttemptOutcome
{
	OUTCOME_UNSET,				/* an Outcome zeroed, not yet decided */
	OUTCOME_SUCCEEDED,
	OUTCOME_RETRY,
	OUTCOME_FAILED,
	OUTCOME_TIMEOUT,
	OUTCOME_INTERRUPTED
} AttemptOutcome;
#define ATTEMPT_OUTCOME_COUNT	(OUTCOME_INTERRUPTED + 1)

extern const char *attempt_outcome_name(AttemptOutcome outcome);

/*
 * The lock a worker holds (as its session's) while a runner runs a call,
 * that cancel() waits for: an advisory lock of this database, of a class
 * (field4) that SQL's advisory functions never use.  Advisory, so that the
 * end of the process, however it ends, releases it; the sandbox releases
 * it too when it releases a hook's advisory locks, which does no harm once
 * the outcome's first write holds the call's row (execute_runner_end).
 */
#define RETRIES_RUNNER_LOCK_CLASS	0x5254

/*
 * The classes of the private locks (shmem_private_lock): on a key of a
 * role's calls (debounce), on an event of a role (making a call that waits
 * for it, and emitting it)
 */
#define RETRIES_KEY_LOCK_CLASS		(RETRIES_RUNNER_LOCK_CLASS + 2)
#define RETRIES_EVENT_LOCK_CLASS	(RETRIES_RUNNER_LOCK_CLASS + 3)
/* and the one a batch holds on each key with a window whose call it starts */
#define RETRIES_WINDOW_LOCK_CLASS	(RETRIES_RUNNER_LOCK_CLASS + 4)

/*
 * RETRIES_RUNNER_LOCK_CLASS + 1: the one the runner itself holds while it
 * runs the call (their tags: SET_LOCKTAG_RUNNER and the other, shmem.h)
 */

/* plans.c */
extern SPIPlanPtr plans_prepare_kept(SPIPlanPtr *plan, const char *query,
									 int nargs, Oid *argtypes);
extern SPIPlanPtr plans_prepare_generic(SPIPlanPtr *plan, const char *query,
										int nargs, Oid *argtypes);
extern int	plans_by_index_begin(void);
extern void plans_by_index_end(int nestlevel);
extern int	plans_execute_by_index(SPIPlanPtr plan, Datum *values, bool read_only,
								   long count);
extern int	plans_execute_read_committed(SPIPlanPtr plan, Datum *values,
										 const char *nulls);

/*
 * Where a query about claimable calls means "and no gate holds it", and
 * "and its priority is 0" (both need version 1.2), the call's priority
 * column (1.2), and its key_window column (1.7): see plans.c; its plans are
 * kept in arrays of UNHELD_PLANS
 */
#define NOT_HELD " /*not held*/"
#define PRIORITY_ZERO " /*priority 0*/"
#define PRIORITY_COLUMN " /*priority*/"
#define KEY_WINDOW " /*key_window*/"
#define UNHELD_PLANS 3
extern SPIPlanPtr plans_prepare_unheld(SPIPlanPtr *plans, const char *query,
									   int nargs, Oid *argtypes);
extern void plans_columns_to_arrays(int ncolumns, const Oid *types, Datum **cols,
									bool **nulls, int n, Oid *argtypes,
									Datum *values);

#endif							/* RETRIES_BASE_H */
