/*-------------------------------------------------------------------------
 *
 * settings.c
 *	  The retries.* settings, and whether the library was preloaded.
 *
 * Defined by _PG_init (retries.c).  Every check hook reports by return
 * value, not by error: it may run in the postmaster.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/datetime.h"
#include "utils/guc.h"
#include "utils/memutils.h"

#include "base/base.h"
#include "core/policy.h"

int			retries_max_workers = 2;
int			retries_max_extra_workers = 2;
int			retries_max_runners = 32;
int			retries_max_databases = 1024;
int			retries_max_cluster_workers = 16;
int			retries_worker_idle_timeout = 10;	/* seconds; 0: never */
int			retries_reserved_workers = 0;
int			retries_batch_size = 100;
bool		retries_enabled = true;
char	   *retries_retention = NULL;
char	   *retries_default_policy = NULL;
int			retries_max_attempt_time = 3600;	/* seconds; 0: no cap */
int			retries_min_delay = 10; /* milliseconds */
int			retries_max_result_size = 1024;
int			retries_max_args_size = 1024;
int			retries_max_worker_memory = 256 * 1024;
int			retries_max_kept_attempts = 1000;
int			retries_max_rate_limits = 1024;
int			retries_debug_clock_offset = 0; /* milliseconds */

bool		retries_preloaded = false;

/*
 * check_default_policy -- GUC check hook for retries.default_policy
 *
 * The value must parse as a policy string, so that annotate() never meets a
 * broken default.
 */
static bool
check_default_policy(char **newval, void **extra, GucSource source)
{
	PolicySpec	spec;
	PolicyError err;

	if (*newval == NULL || policy_parse(*newval, &spec, &err))
		return true;
	GUC_check_errdetail("%s", err.message);
	if (err.hint[0] != '\0')
		GUC_check_errhint("%s", err.hint);
	return false;
}

/*
 * check_retention -- GUC check hook for retries.retention
 *
 * The value is an interval ('7 days', '12h', '90 min'); it must not be
 * negative.  Parsed with the datetime routines that report errors by return
 * code, as check hooks may run in the postmaster and must not throw.
 */
static bool
check_retention(char **newval, void **extra, GucSource source)
{
	char		workbuf[256];
	char	   *field[MAXDATEFIELDS];
	int			ftype[MAXDATEFIELDS];
	int			nf;
	int			dtype;
	struct pg_itm_in itm_in;
	Interval	span;
	int64		usecs;

	if (*newval == NULL)
		return true;
	if (ParseDateTime(*newval, workbuf, sizeof(workbuf), field, ftype,
					  MAXDATEFIELDS, &nf) != 0 ||
		DecodeInterval(field, ftype, nf, INTERVAL_FULL_RANGE,
					   &dtype, &itm_in) != 0 ||
		dtype != DTK_DELTA ||
		itmin2interval(&itm_in, &span) != 0)
	{
		GUC_check_errdetail("\"%s\" is not an interval.", *newval);
		GUC_check_errhint("Use an interval such as '7 days' or '12 hours'.");
		return false;
	}
	if (!args_interval_to_usecs(&span, &usecs))
	{
		GUC_check_errdetail("Retention must be between 0 and 3650 days.");
		return false;
	}
	return true;
}

/*
 * settings_define -- define the retries.* settings (from
 * _PG_init, retries_preloaded set)
 */
void
settings_define(void)
{
	DefineCustomIntVariable("retries.max_workers",
							"Number of worker processes per database.",
							NULL,
							&retries_max_workers,
							2, 1, 64,
							PGC_SIGHUP, 0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("retries.max_extra_workers",
							"Most workers per database started beside retries.max_workers while those are all held by long batches.",
							"An extra worker runs the calls of roles that have none running, and stops once a worker is free.",
							&retries_max_extra_workers,
							2, 0, 64,
							PGC_SIGHUP, 0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("retries.max_cluster_workers",
							"Most workers of all databases together, beside the runner places.",
							"A database with due work gets one as the pool has room, the longest waiting first; while some wait, a worker leaves its database after a second of work.",
							&retries_max_cluster_workers,
							16, 1, 192,
							PGC_SIGHUP, 0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("retries.worker_idle_timeout",
							"How long a worker with nothing to do stays before it exits.",
							"A database with nothing due holds no worker; its next due call or firing, or a call committed, starts one. 0: workers stay.",
							&retries_worker_idle_timeout,
							10, 0, 86400,
							PGC_SIGHUP, GUC_UNIT_S,
							NULL, NULL, NULL);

	DefineCustomIntVariable("retries.max_runners",
							"Most procedures and commands of the cluster that run at once beside the workers.",
							"Each takes two background-worker slots while it runs: its runner and the worker that waits for it. 0: they run in the database's own workers, one fewer than retries.max_workers at a time.",
							&retries_max_runners,
							32, 0, 64,	/* RETRIES_MAX_RUNNERS */
							PGC_SIGHUP, 0,
							NULL, NULL, NULL);

	/*
	 * It sizes shared memory, which only a preloaded library has: loaded
	 * later (CREATE EXTENSION without preloading, which warns), a
	 * postmaster-only setting could not be defined at all.
	 */
	if (retries_preloaded)
		DefineCustomIntVariable("retries.reserved_workers",
								"Background-worker slots kept for the extension's extra workers and runners.",
								"Each is an idle process that holds its slot, so that parallel queries and other extensions cannot take it; used when no other slot is free.",
								&retries_reserved_workers,
								0, 0, 32,
								PGC_POSTMASTER, 0,
								NULL, NULL, NULL);

	if (retries_preloaded)
		DefineCustomIntVariable("retries.max_databases",
								"Most databases of the cluster that the workers serve.",
								"Each takes a small entry in shared memory, whether it has the extension or not.",
								&retries_max_databases,
								1024, 16, 100000,
								PGC_POSTMASTER, 0,
								NULL, NULL, NULL);

	if (retries_preloaded)
		DefineCustomIntVariable("retries.max_rate_limits",
								"Most rate-limited functions whose recent starts shared memory follows at once.",
								"A function's owner may hold an eighth of them; a function that finds none waits.",
								&retries_max_rate_limits,
								1024, 8, 100000,
								PGC_POSTMASTER, 0,
								NULL, NULL, NULL);

	DefineCustomIntVariable("retries.batch_size",
							"Most calls one worker runs in one transaction.",
							NULL,
							&retries_batch_size,
							100, 1, 10000,
							PGC_SIGHUP, 0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("retries.max_attempt_time",
							"Longest any one attempt may run, whatever its policy says.",
							"An attempt that runs longer is cancelled and recorded as a timeout. 0 means no cap.",
							&retries_max_attempt_time,
							3600, 0, INT_MAX / 1000,
							PGC_SIGHUP, GUC_UNIT_S,
							NULL, NULL, NULL);

	DefineCustomIntVariable("retries.min_delay",
							"Shortest delay before any retry, whatever its policy, delay_fn or retries.retry() says.",
							NULL,
							&retries_min_delay,
							10, 0, INT_MAX,
							PGC_SIGHUP, GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomIntVariable("retries.max_kept_attempts",
							"Most attempt rows kept for one call; older ones are deleted as new ones are recorded.",
							NULL,
							&retries_max_kept_attempts,
							1000, 1, INT_MAX,
							PGC_SIGHUP, 0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("retries.max_result_size",
							"Largest return value of a call that is kept, as jsonb; a larger one fails the attempt.",
							NULL,
							&retries_max_result_size,
							1024, 1, MaxAllocSize / 1024,
							PGC_SIGHUP, GUC_UNIT_KB,
							NULL, NULL, NULL);

	DefineCustomIntVariable("retries.max_args_size",
							"Largest arguments of a call, as jsonb; retries.call() and retries.schedule() refuse larger ones.",
							"A superuser's setting: the workers read every role's arguments into their memory.",
							&retries_max_args_size,
							1024, 1, MaxAllocSize / 1024,
							PGC_SUSET, GUC_UNIT_KB,
							NULL, NULL, NULL);

	DefineCustomIntVariable("retries.max_worker_memory",
							"Memory a worker may have grown to after a batch before it exits, to be replaced by a fresh one.",
							"Caches that calls fill (compiled functions, catalog entries, time zones) live as long as the worker. 0 means no bound.",
							&retries_max_worker_memory,
							256 * 1024, 0, INT_MAX / 1024,
							PGC_SIGHUP, GUC_UNIT_KB,
							NULL, NULL, NULL);

	DefineCustomBoolVariable("retries.enabled",
							 "Runs scheduled calls; off pauses all execution.",
							 "Scheduling still works while execution is paused.",
							 &retries_enabled,
							 true,
							 PGC_SIGHUP, 0,
							 NULL, NULL, NULL);

	DefineCustomStringVariable("retries.retention",
							   "How long finished calls and their attempts are kept.",
							   NULL,
							   &retries_retention,
							   "7 days",
							   PGC_SIGHUP, 0,
							   check_retention, NULL, NULL);

	DefineCustomStringVariable("retries.default_policy",
							   "Retry policy used when retries.annotate() is given none.",
							   "The form is '[count] min [max]', as in '5 1s 1h'.",
							   &retries_default_policy,
							   "5 1s 1h",
							   PGC_USERSET, 0,
							   check_default_policy, NULL, NULL);

	DefineCustomIntVariable("retries.debug_clock_offset",
							"For tests: how far the clock the extension decides by runs ahead of the system's.",
							"Due calls, retries, schedules and rate limits go by that clock; recorded times do not.",
							&retries_debug_clock_offset,
							0, 0, INT_MAX,
							PGC_SIGHUP, GUC_UNIT_MS | GUC_NOT_IN_SAMPLE,
							NULL, NULL, NULL);

	MarkGUCPrefixReserved("retries");
}
