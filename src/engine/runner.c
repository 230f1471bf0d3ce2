/*-------------------------------------------------------------------------
 *
 * runner.c
 *	  Running a role's procedure or command in a process of its own: a
 *	  dynamic background worker connected as the role, which runs the SQL
 *	  text as psql runs a script.
 *
 * Why a process of its own.  A procedure that commits, VACUUM, CREATE INDEX
 * CONCURRENTLY and REFRESH MATERIALIZED VIEW CONCURRENTLY cannot run inside
 * a transaction block or a function, which is what a worker's batch is.
 * Through SPI they fail ("cannot be executed from a function"), and a
 * procedure's COMMIT needs a top-level CALL.  So the text runs in a new
 * backend, statement by statement, each as a client's simple query of its
 * own (run_script, after exec_simple_query in postgres.c): as psql runs a
 * script, each statement commits on its own unless the text opened a
 * transaction block (BEGIN ... COMMIT), and the first error ends the run.
 * A text of several statements thus runs VACUUM beside other statements,
 * and DROP INDEX CONCURRENTLY before CREATE INDEX CONCURRENTLY, each at
 * the top level; one that wants them all or none says BEGIN and COMMIT.
 * (The text as one simple query, one implicit transaction for all its
 * statements, refused those, as it does to a client: 25001.)
 *
 * The role.  The process connects as the role itself
 * (BackgroundWorkerInitializeConnectionByOid): session_user and
 * current_user are the role, never a superuser it could RESET back to.  A
 * login's checks that such a connection skips (VALID UNTIL) are made too,
 * and an "ALTER ROLE ... SET role" is undone.  Then role and
 * session_authorization are pinned (pin_role: their check hooks refuse any
 * other role, however it is set: SET, set_config, a function's SET clause).
 * runner_check_utility() refuses PREPARE TRANSACTION, whose transaction
 * would outlive the run, and COPY from or to the client, which would read
 * the postmaster's standard input or write into the server's log.
 * Everything else a session leaves (temporary tables, prepared statements,
 * settings, advisory locks, cursors) goes with the process; LISTEN is
 * refused to background workers by PostgreSQL itself.
 *
 * The time cap.  statement_timeout is the role's to change, so the cap is
 * private timers, as for attempts (execute.c, time_cap.c): a cancel when
 * the cap is reached, and, RUNNER_KILL_GRACE_MS after that cancel, the end
 * of the process for code that traps it.  Once the cap is reached nothing
 * commits (cap_at_commit): a statement that trapped the cancel and ended
 * within the grace fails all the same, and so does a COMMIT that a
 * procedure runs after trapping it.  The parent terminates the process as
 * well if it is still there RUNNER_PARENT_GRACE_MS after that, counted
 * from when the child armed its cap.
 *
 * The outcome.  The child writes it into the dynamic shared memory segment
 * it shares with the parent: success, or the error's SQLSTATE, message,
 * detail, hint and context.  An ERROR is caught; a FATAL (the end of the
 * process after the cap, a role that may no longer log in) cannot be, so
 * emit_log_hook copies it on its way out.  A process killed by a signal
 * says nothing (RUNNER_LOST); the postmaster then restarts every backend,
 * as it does for a client's backend.
 *
 * The parent never waits: runner_launch() starts the process and returns,
 * runner_poll() says whether it has ended and how.  A parent holds one run
 * at a time.  It must hold no snapshot while a run goes on: CREATE INDEX
 * CONCURRENTLY waits for every transaction older than its own to end.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/namespace.h"
#include "fmgr.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "nodes/parsenodes.h"
#include "parser/analyze.h"
#include "pgstat.h"
#include "port/atomics.h"
#include "postmaster/bgworker.h"
#include "storage/dsm.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lock.h"
#include "storage/proc.h"
#include "tcop/pquery.h"
#include "tcop/tcopprot.h"
#include "tcop/utility.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/regproc.h"
#include "utils/ruleutils.h"
#include "utils/guc.h"
#include "utils/guc_tables.h"
#include "utils/memutils.h"
#include "utils/portal.h"
#include "utils/ps_status.h"
#include "utils/snapmgr.h"
#include "utils/timeout.h"
#include "utils/timestamp.h"

#include "api/api.h"
#include "base/base.h"
#include "base/compat.h"
#include "engine/proctext.h"
#include "engine/runner.h"
#include "engine/sandbox.h"
#include "engine/time_cap.h"
#include "flow/flow.h"
#include "shmem/shmem.h"
#include "tables/tables.h"

/* After the cap's cancel, the process ends this much later (time_cap.c) */
#define RUNNER_KILL_GRACE_MS	2000
/* and the parent terminates it if it is still there this much later */
#define RUNNER_PARENT_GRACE_MS	3000
/* ... counted from the start of the run while the child has not armed its cap */
#define RUNNER_START_GRACE_MS	60000

/* What the child says in RunnerShared.state */
#define RUN_STARTING	0
#define RUN_RUNNING		1
#define RUN_DONE		2

/* The segment the parent and the child share */
typedef struct RunnerShared
{
	Oid			dboid;			/* the database it connects to */
	Oid			origin;			/* the parent's (the call's) database */
	int			encoding;		/* ... and its encoding, the text's */
	Oid			roleoid;
	int			cap_ms;			/* 0: none */
	Oid			fnoid;			/* a procedure, its arguments (jsonb) in text;
								 * InvalidOid: text is SQL */
	int64		call_id;		/* for retries.current_call() there; or 0 */
	int32		attempt;		/* for retries.current_attempt(); or 0 */
	pg_atomic_uint32 state;
	pg_atomic_uint64 armed_at;	/* when the child armed its cap; 0: not yet */
	RunnerOutcome outcome;		/* once state is RUN_DONE */
	char text[	FLEXIBLE_ARRAY_MEMBER];
} RunnerShared;

PGDLLEXPORT void retries_runner_main(Datum arg);

/* The parent's run, if any */
static dsm_segment *run_segment = NULL;
static BackgroundWorkerHandle *run_handle = NULL;	/* NULL: a reserved worker */
static int	run_reserve;		/* ... this one, of this generation */
static uint32 run_reserve_generation;
static TimestampTz run_started;
static int	run_cap_ms;
static bool run_terminated;

/* In the child: its segment, and whether the cap's cancel came */
static RunnerShared *child_shared = NULL;
static emit_log_hook_type prev_emit_log_hook = NULL;
static volatile sig_atomic_t cap_reached = false;


static bool exit_callback = false;

static void
runner_stop_at_exit(int code, Datum arg)
{
	runner_stop();
}

/*
 * launch -- start running 'text' (SQL, or fnoid's arguments) as 'role' in
 * this database, with a time cap of cap_ms (0: none); false if no
 * background worker slot is free (max_worker_processes), in which case
 * nothing started
 */
static bool
launch(Oid dboid, Oid role, Oid fnoid, const char *text, int cap_ms,
	   int64 call_id, int32 attempt)
{
	Size		size = offsetof(RunnerShared, text) + strlen(text) + 1;
	RunnerShared *shared;
	BackgroundWorker worker;
	MemoryContext oldcxt;
	bool		started;

	Assert(run_segment == NULL);
	if (!exit_callback)
	{
		/* a parent that exits ends its run (its successor charges it) */
		before_shmem_exit(runner_stop_at_exit, (Datum) 0);
		exit_callback = true;
	}
	run_segment = dsm_create(size, 0);
	dsm_pin_mapping(run_segment);	/* past the transaction, if any */
	shared = dsm_segment_address(run_segment);
	memset(shared, 0, size);
	shared->dboid = dboid;
	shared->origin = MyDatabaseId;
	shared->encoding = GetDatabaseEncoding();
	shared->roleoid = role;
	shared->cap_ms = cap_ms;
	shared->fnoid = fnoid;
	shared->call_id = call_id;
	shared->attempt = attempt;
	pg_atomic_init_u32(&shared->state, RUN_STARTING);
	pg_atomic_init_u64(&shared->armed_at, 0);
	strcpy(shared->text, text);

	memset(&worker, 0, sizeof(worker));
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker.bgw_restart_time = BGW_NEVER_RESTART;
	snprintf(worker.bgw_library_name, BGW_MAXLEN, "retries");
	snprintf(worker.bgw_function_name, BGW_MAXLEN, "retries_runner_main");
	snprintf(worker.bgw_name, BGW_MAXLEN, "retries runner for role %u", role);
	snprintf(worker.bgw_type, BGW_MAXLEN, "retries runner");
	worker.bgw_main_arg = UInt32GetDatum(dsm_segment_handle(run_segment));
	worker.bgw_notify_pid = MyProcPid;

	oldcxt = MemoryContextSwitchTo(TopMemoryContext);
	started = RegisterDynamicBackgroundWorker(&worker, &run_handle);
	MemoryContextSwitchTo(oldcxt);
	if (!started)
	{
		/* no slot free: a reserved worker's, if one is (reserve.c) */
		run_handle = NULL;
		started = shmem_reserve_give_runner(worker.bgw_main_arg, role, &run_reserve,
											&run_reserve_generation);
	}
	if (!started)
	{
		dsm_detach(run_segment);
		run_segment = NULL;
		run_handle = NULL;
		return false;
	}
	run_started = clock_system_now();
	run_cap_ms = cap_ms;
	run_terminated = false;
	return true;
}

/* terminate_run -- end the process of the run (SIGTERM) */
static void
terminate_run(void)
{
	if (run_handle != NULL)
		TerminateBackgroundWorker(run_handle);
	else
		shmem_reserve_terminate(run_reserve, run_reserve_generation);
}

/* runner_launch -- run the SQL text as psql runs a script (launch) */
bool
runner_launch(Oid role, const char *text, int cap_ms)
{
	return launch(MyDatabaseId, role, InvalidOid, text, cap_ms, 0, 0);
}

/*
 * runner_launch_in -- run the SQL text of call call_id as psql runs a
 * script, connected to database dboid (launch): a command that runs in
 * another database (api/command.c).  There the call is no call of that
 * database's: retries.current_call() says NULL.
 */
bool
runner_launch_in(Oid dboid, Oid role, const char *text, int cap_ms,
				 int64 call_id, int32 attempt)
{
	return launch(dboid, role, InvalidOid, text, cap_ms, call_id, attempt);
}

/*
 * runner_launch_call -- run a top-level CALL of the procedure fnoid with
 * the call's stored arguments (launch)
 */
bool
runner_launch_call(Oid role, Oid fnoid, Jsonb *args, int cap_ms,
				   int64 call_id, int32 attempt)
{
	return launch(MyDatabaseId, role, fnoid,
				  JsonbToCString(NULL, &args->root, VARSIZE(args)),
				  cap_ms, call_id, attempt);
}

/* runner_busy -- has this process a run going on? */
bool
runner_busy(void)
{
	return run_segment != NULL;
}

/*
 * runner_poll -- has the run ended?  If so, its outcome into *outcome, and
 * this process may launch another.  Terminates a run past its cap and the
 * graces.
 */
bool
runner_poll(RunnerOutcome *outcome)
{
	RunnerShared *shared;
	pid_t		pid;
	BgwHandleStatus status;

	if (run_segment == NULL)
		return false;
	shared = dsm_segment_address(run_segment);
	if (run_handle != NULL)
		status = GetBackgroundWorkerPid(run_handle, &pid);
	else
		status = shmem_reserve_running(run_reserve, run_reserve_generation) != 0 ?
			BGWH_STARTED : BGWH_STOPPED;
	if (status != BGWH_STOPPED && status != BGWH_POSTMASTER_DIED)
	{
		/*
		 * Counted from when the child armed its cap (a child slow to start,
		 * on a loaded machine, has its whole cap and grace all the same)
		 */
		TimestampTz armed_at = (TimestampTz) pg_atomic_read_u64(&shared->armed_at);
		int			ms = run_cap_ms + RUNNER_KILL_GRACE_MS + RUNNER_PARENT_GRACE_MS;

		if (run_cap_ms > 0 && !run_terminated &&
			TimestampDifferenceExceeds(armed_at != 0 ? armed_at : run_started,
									   clock_system_now(),
									   armed_at != 0 ? ms : ms + RUNNER_START_GRACE_MS))
		{
			terminate_run();
			run_terminated = true;
		}
		return false;
	}

	pg_read_barrier();
	if (pg_atomic_read_u32(&shared->state) == RUN_DONE)
		memcpy(outcome, &shared->outcome, sizeof(RunnerOutcome));
	else
	{
		memset(outcome, 0, sizeof(RunnerOutcome));
		outcome->status = RUNNER_LOST;
	}
	dsm_detach(run_segment);
	if (run_handle != NULL)
		pfree(run_handle);
	run_segment = NULL;
	run_handle = NULL;
	return true;
}

/*
 * field_here -- one text of an outcome (RUNNER_TEXT_LEN bytes or fewer) in
 * this database's encoding, converted from 'encoding' where it can be
 * whole; else each byte that is not ASCII as '?'.  In a transaction.
 */
static void
field_here(char *field, size_t size, int encoding)
{
	int			len = strlen(field);
	Oid			proc = FindDefaultConversionProc(encoding, GetDatabaseEncoding());
	unsigned char *dest;

	if (len == 0)
		return;
	dest = palloc((Size) len * MAX_CONVERSION_GROWTH + 1);
	if (OidIsValid(proc) &&
		pg_do_encoding_conversion_buf(proc, encoding, GetDatabaseEncoding(),
									  (unsigned char *) field, len,
									  dest, len * MAX_CONVERSION_GROWTH + 1, true) == len)
	{
		int			cut = pg_mbcliplen((char *) dest, strlen((char *) dest), size - 1);

		memcpy(field, dest, cut);
		field[cut] = '\0';
	}
	else
	{
		for (char *p = field; *p != '\0'; p++)
			if (IS_HIGHBIT_SET(*p))
				*p = '?';
	}
	pfree(dest);
}

/*
 * runner_outcome_here -- an outcome's texts, written by a runner in
 * another database, in this one's encoding (field_here): stored as they
 * came, text invalid here kept every role's calls out of a restore (the
 * twenty-third hostile review, t/056).  In a transaction.
 */
void
runner_outcome_here(RunnerOutcome *outcome)
{
	if (outcome->status == RUNNER_LOST || outcome->encoding == GetDatabaseEncoding())
		return;
	field_here(outcome->message, sizeof(outcome->message), outcome->encoding);
	field_here(outcome->detail, sizeof(outcome->detail), outcome->encoding);
	field_here(outcome->hint, sizeof(outcome->hint), outcome->encoding);
	field_here(outcome->context, sizeof(outcome->context), outcome->encoding);
	field_here(outcome->command_tag, sizeof(outcome->command_tag), outcome->encoding);
}

/*
 * runner_stop -- end the run, if any, without waiting for it (the parent is
 * on its way out; its successor charges the run, see worker.c)
 */
void
runner_stop(void)
{
	if (run_segment == NULL)
		return;
	terminate_run();
	dsm_detach(run_segment);
	run_segment = NULL;
	run_handle = NULL;
}


/* ---------------------------------------------------------------------
 * The child
 * ---------------------------------------------------------------------
 */

/* runner_is_child -- is this process a runner? */
bool
runner_is_child(void)
{
	return child_shared != NULL;
}

/* The check hooks that role and session_authorization had (pin_role) */
static GucStringCheckHook prev_role_check = NULL;
static GucStringCheckHook prev_session_authorization_check = NULL;
static bool role_pinned = false;

/* refuse_role_change -- a check hook's refusal, once the role is pinned */
static bool
refuse_role_change(void)
{
	GUC_check_errcode(ERRCODE_INSUFFICIENT_PRIVILEGE);
	GUC_check_errmsg("a command run by retries cannot change its role");
	GUC_check_errdetail("It runs as the role that scheduled it, and only as that role.");
	return false;
}

static bool
check_role(char **newval, void **extra, GucSource source)
{
	/*
	 * RESET ROLE, SET ROLE NONE, or the role itself (a procedure's SET
	 * clause): the role it already is
	 */
	if (role_pinned && pg_strcasecmp(*newval, "none") != 0 &&
		strcmp(*newval, GetUserNameFromId(GetSessionUserId(), false)) != 0)
		return refuse_role_change();
	return prev_role_check == NULL || prev_role_check(newval, extra, source);
}

static bool
check_session_authorization(char **newval, void **extra, GucSource source)
{
	/* SET SESSION AUTHORIZATION DEFAULT, DISCARD ALL: the role itself */
	if (role_pinned && *newval != NULL &&
		strcmp(*newval, GetUserNameFromId(GetSessionUserId(), false)) != 0)
		return refuse_role_change();
	return prev_session_authorization_check == NULL ||
		prev_session_authorization_check(newval, extra, source);
}

/*
 * pin_role -- from now on, role and session_authorization cannot change
 * in this process, however they are set (SET, set_config, a function's SET
 * clause, RESET, DISCARD ALL)
 */
static void
pin_role(void)
{
	struct config_generic *rec = retries_find_setting("role");

	if (rec == NULL || rec->vartype != PGC_STRING)
		elog(FATAL, "retries: setting \"role\" not found");
	prev_role_check = ((struct config_string *) rec)->check_hook;
	((struct config_string *) rec)->check_hook = check_role;
	rec = retries_find_setting("session_authorization");
	if (rec == NULL || rec->vartype != PGC_STRING)
		elog(FATAL, "retries: setting \"session_authorization\" not found");
	prev_session_authorization_check = ((struct config_string *) rec)->check_hook;
	((struct config_string *) rec)->check_hook = check_session_authorization;
	role_pinned = true;
}

/*
 * start_as_role -- once connected: the role as a login would find it
 * (VALID UNTIL too, which a background worker's connection does not
 * check; and a CONNECTION LIMIT of 0, of the role or the database, which
 * refuses it as PostgreSQL refuses such a login, 53300: a limit above 0 is
 * not counted, background workers are not), its own role whatever "ALTER
 * ROLE ... SET role" says, pinned
 */
static void
start_as_role(void)
{
	const char *hint = NULL;
	char	   *lacks;

	StartTransactionCommand();
	lacks = access_login_privilege(child_shared->roleoid, &hint);
	if (lacks != NULL)
		ereport(FATAL,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("%s", lacks), errhint("%s", hint)));
	lacks = access_connection_shut(child_shared->roleoid);
	if (lacks != NULL)
		ereport(FATAL,
				(errcode(ERRCODE_TOO_MANY_CONNECTIONS),
				 errmsg("%s", lacks),
				 errdetail("A command or procedure runs in a session of its role, which a CONNECTION LIMIT of 0 keeps out."),
				 errhint("Put 53300 in the policy's retry_on to have its attempts wait for the limit to be lifted.")));
	SetConfigOption("role", "none", PGC_SUSET, PGC_S_OVERRIDE);
	CommitTransactionCommand();
	pin_role();
	SetConfigOption("application_name", "retries runner", PGC_USERSET, PGC_S_SESSION);
}

/*
 * runner_check_utility -- in a runner, refuse what would outlive the run,
 * or talk to a client there is none of (another role: pin_role)
 */
void
runner_check_utility(Node *parsetree)
{
	if (IsA(parsetree, TransactionStmt) &&
		((TransactionStmt *) parsetree)->kind == TRANS_STMT_PREPARE)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("a command run by retries cannot prepare a transaction"),
				 errdetail("A prepared transaction would outlive the attempt.")));
	else if (IsA(parsetree, CopyStmt) && ((CopyStmt *) parsetree)->filename == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("a command run by retries cannot COPY %s the client",
						((CopyStmt *) parsetree)->is_from ? "from" : "to"),
				 errdetail("It runs in the server, where there is no client.")));
}

/*
 * clip -- src into dst (RUNNER_TEXT_LEN bytes); a longer one is cut at a
 * character's end and ends in "..." (args_clip_len)
 */
static void
clip(char *dst, const char *src)
{
	int			srclen;
	int			len;

	if (src == NULL)
		src = "";
	srclen = strlen(src);
	len = args_clip_len(src, srclen);
	memcpy(dst, src, len);
	if (len < srclen)
		strcpy(dst + len, "...");
	else
		dst[len] = '\0';
}

/* The completion tag of the last statement that ran to its end */
static char last_tag[COMPLETION_TAG_BUFSIZE];

/*
 * note_outcome -- the child's outcome, for the parent; 'message', if given,
 * instead of the error's own
 */
static void
note_outcome(RunnerStatus status, ErrorData *edata, const char *message)
{
	RunnerOutcome *out = &child_shared->outcome;

	if (pg_atomic_read_u32(&child_shared->state) == RUN_DONE)
		return;
	memset(out, 0, sizeof(RunnerOutcome));
	out->status = status;
	out->capped = cap_reached;
	out->retry_after = retries_retry_after_usecs;
	out->pid = MyProcPid;
	out->encoding = GetDatabaseEncoding();
	if (status == RUNNER_SUCCEEDED)
		strlcpy(out->command_tag, last_tag, sizeof(out->command_tag));
	if (edata != NULL)
	{
		out->sqlerrcode = edata->sqlerrcode;
		clip(out->message, message ? message : edata->message);
		clip(out->detail, edata->detail);
		clip(out->hint, edata->hint);
		clip(out->context, edata->context);
	}
	pg_write_barrier();
	pg_atomic_write_u32(&child_shared->state, RUN_DONE);
}

/*
 * runner_emit_log -- a FATAL cannot be caught: note it as it is reported,
 * before the process exits
 */
static void
runner_emit_log(ErrorData *edata)
{
	if (edata->elevel >= FATAL && child_shared != NULL)
		note_outcome(RUNNER_FAILED, edata,
					 cap_reached && edata->sqlerrcode == ERRCODE_ADMIN_SHUTDOWN ?
					 "terminating the command: it went on past its time limit" : NULL);
	if (prev_emit_log_hook)
		prev_emit_log_hook(edata);
}

static void
cap_cancel(void)
{
	cap_reached = true;
	QueryCancelPending = true;
	InterruptPending = true;
	SetLatch(MyLatch);
}

static void
cap_kill(void)
{
	ProcDiePending = true;
	InterruptPending = true;
	SetLatch(MyLatch);
}

/*
 * check_cap -- a statement that trapped the cap's cancel and went on to its
 * end fails all the same, before it commits
 */
static void
check_cap(void)
{
	if (cap_reached)
		ereport(ERROR,
				(errcode(ERRCODE_QUERY_CANCELED),
				 errmsg("canceling the command: it reached its time limit")));
}

/*
 * cap_at_commit -- transaction callback: nothing commits once the cap is
 * reached, whether the statement's own commit or a COMMIT that a
 * procedure or DO block that trapped the cap's cancel runs itself
 */
static void
cap_at_commit(XactEvent event, void *arg)
{
	if (event == XACT_EVENT_PRE_COMMIT || event == XACT_EVENT_PRE_PREPARE)
		check_cap();
}

/*
 * note_tag -- keep the completion tag of a statement that ran to its end,
 * as a client is sent it (EndCommand): "INSERT 0 3", "VACUUM"
 */
static void
note_tag(const QueryCompletion *qc)
{
	const char *name = GetCommandTagName(qc->commandTag);

	if (command_tag_display_rowcount(qc->commandTag))
		snprintf(last_tag, sizeof(last_tag),
				 qc->commandTag == CMDTAG_INSERT ? "%s 0 " UINT64_FORMAT : "%s " UINT64_FORMAT,
				 name, qc->nprocessed);
	else
		strlcpy(last_tag, name, sizeof(last_tag));
}

/*
 * run_statement -- one statement of the text, as exec_simple_query runs it
 */
static void
run_statement(RawStmt *parsetree, const char *text, MemoryContext cxt)
{
	CommandTag	tag = CreateCommandTag(parsetree->stmt);
	bool		snapshot_set = false;
	List	   *querytrees;
	List	   *plantrees;
	Portal		portal;
	DestReceiver *receiver;
	QueryCompletion qc;
	MemoryContext oldcxt;
	int16		format = 0;

	set_ps_display(GetCommandTagName(tag));
	pgstat_report_activity(STATE_RUNNING, text);
	CHECK_FOR_INTERRUPTS();
	if (analyze_requires_snapshot(parsetree))
	{
		PushActiveSnapshot(GetTransactionSnapshot());
		snapshot_set = true;
	}
	oldcxt = MemoryContextSwitchTo(cxt);
	querytrees = pg_analyze_and_rewrite_fixedparams(parsetree, text, NULL, 0, NULL);
	plantrees = pg_plan_queries(querytrees, text, CURSOR_OPT_PARALLEL_OK, NULL);
	if (snapshot_set)
		PopActiveSnapshot();
	CHECK_FOR_INTERRUPTS();

	portal = CreatePortal("", true, true);
	portal->visible = false;
	PortalDefineQuery(portal, NULL, text, tag, plantrees, NULL);
	PortalStart(portal, NULL, 0, InvalidSnapshot);
	PortalSetResultFormat(portal, 1, &format);
	receiver = CreateDestReceiver(DestNone);
	MemoryContextSwitchTo(oldcxt);

	/* the role's statement_timeout, if any, as a client's backend has it */
	if (StatementTimeout > 0)
		enable_timeout_after(STATEMENT_TIMEOUT, StatementTimeout);
	(void) retries_portal_run(portal, receiver, &qc);
	sandbox_timeout_over();
	receiver->rDestroy(receiver);
	PortalDrop(portal, false);
	check_cap();
	note_tag(&qc);
}

/*
 * run_script -- the text as psql runs a script: each statement as a
 * client's simple query of its own, committed on its own unless the text
 * opened a transaction block, whose BEGIN and COMMIT are obeyed; the first
 * error ends it
 */
static void
run_script(const char *text)
{
	MemoryContext textcxt = AllocSetContextCreate(TopMemoryContext,
												  "retries runner text",
												  ALLOCSET_DEFAULT_SIZES);
	MemoryContext cxt = AllocSetContextCreate(TopMemoryContext,
											  "retries runner statement",
											  ALLOCSET_DEFAULT_SIZES);
	MemoryContext oldcxt;
	List	   *parsetrees;
	ListCell   *lc;

	debug_query_string = text;

	pgstat_report_activity(STATE_RUNNING, text);

	/*
	 * Parsed outside the transactions: a statement may commit one and start
	 * another (VACUUM, CREATE INDEX CONCURRENTLY, a procedure's COMMIT)
	 */
	oldcxt = MemoryContextSwitchTo(textcxt);
	parsetrees = pg_parse_query(text);
	MemoryContextSwitchTo(oldcxt);
	foreach(lc, parsetrees)
	{
		RawStmt    *parsetree = lfirst_node(RawStmt, lc);

		/* in a block the text opened, a step of it; else a transaction */
		SetCurrentStatementStartTimestamp();
		StartTransactionCommand();
		run_statement(parsetree, text, cxt);
		CommitTransactionCommand();
		MemoryContextReset(cxt);
	}

	/*
	 * A BEGIN without its COMMIT: a client that disconnects has it rolled
	 * back, and so would this process's exit, silently.  An error instead.
	 */
	if (IsTransactionOrTransactionBlock())
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TRANSACTION_STATE),
				 errmsg("the command left a transaction block open, which was rolled back"),
				 errhint("End it with COMMIT.")));
	debug_query_string = NULL;
	pgstat_report_activity(STATE_IDLE, NULL);
}

/*
 * text_here -- a command's text, written in the encoding of the call's
 * database, in this one's, as psql converts a script from its client
 * encoding: in another database of another encoding it runs as written
 * (the twenty-third hostile review, t/056: LATIN1's 'é' was 'Ã©'); a
 * character this one lacks fails the attempt (22P05)
 */
static const char *
text_here(const char *text)
{
	char	   *here;

	if (child_shared->encoding == GetDatabaseEncoding())
		return text;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	here = (char *) pg_do_encoding_conversion((unsigned char *) text, strlen(text),
											  child_shared->encoding,
											  GetDatabaseEncoding());
	here = MemoryContextStrdup(TopMemoryContext, here);
	CommitTransactionCommand();
	return here;
}

/*
 * retries_runner_main -- the runner process: connect as the role, run the
 * text under the cap, note the outcome, exit
 */
void
retries_runner_main(Datum arg)
{
	dsm_segment *segment;
	MemoryContext errcxt;

	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	/* the postmaster's standard input is no client's */
	if (freopen("/dev/null", "r", stdin) == NULL)
		elog(FATAL, "retries: could not open /dev/null: %m");
	segment = dsm_attach(DatumGetUInt32(arg));
	if (segment == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("retries: the runner's shared memory is gone")));
	child_shared = dsm_segment_address(segment);
	prev_emit_log_hook = emit_log_hook;
	emit_log_hook = runner_emit_log;

	/*
	 * A FATAL is noted as it is reported (runner_emit_log), which it is only
	 * if log_min_messages lets it.  A role that may no longer log in ends
	 * here, with one.
	 */
	if (log_min_messages > FATAL)
		SetConfigOption("log_min_messages", "fatal", PGC_SUSET, PGC_S_OVERRIDE);
	BackgroundWorkerInitializeConnectionByOid(child_shared->dboid,
											  child_shared->roleoid, 0);
	start_as_role();

	/*
	 * The text is parsed as run_command() checked it, whatever the role's or
	 * database's setting (a statement in it may change it for the statements
	 * after, as a client's could)
	 */
	SetConfigOption("standard_conforming_strings", "on", PGC_USERSET, PGC_S_SESSION);
	pg_atomic_write_u32(&child_shared->state, RUN_RUNNING);

	/*
	 * In another database the call is none of that database's calls
	 * (current_call() says NULL there), but retries.retry() there chooses its
	 * next delay as here: only code of the call's role may (the role is the
	 * cluster's; the twenty-first review, t/054: another role's SECURITY
	 * DEFINER function there put the call off ten years)
	 */
	retries_current_call_role = child_shared->roleoid;
	if (child_shared->dboid == child_shared->origin)
	{
		retries_current_call_id = child_shared->call_id;
		retries_current_attempt_number = child_shared->attempt;
	}
	if (child_shared->call_id != 0)
	{
		LOCKTAG		tag;

		/* a cancel() in the call's database waits for it (manage.c) */
		SET_LOCKTAG_RUNNER_PROCESS_IN(tag, child_shared->origin, child_shared->call_id);
		(void) LockAcquire(&tag, ExclusiveLock, true, false);
	}

	if (child_shared->cap_ms > 0)
	{
		RegisterXactCallback(cap_at_commit, NULL);
		time_cap_init(cap_cancel, cap_kill);
		pg_atomic_write_u64(&child_shared->armed_at, (uint64) clock_system_now());
		time_cap_arm(child_shared->cap_ms, RUNNER_KILL_GRACE_MS);
	}

	errcxt = AllocSetContextCreate(TopMemoryContext, "retries runner error",
								   ALLOCSET_DEFAULT_SIZES);
	PG_TRY();
	{
		if (OidIsValid(child_shared->fnoid))
			run_script(proctext_build(child_shared->fnoid, child_shared->text));
		else
			run_script(text_here(child_shared->text));
		note_outcome(RUNNER_SUCCEEDED, NULL, NULL);
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		HOLD_INTERRUPTS();
		EmitErrorReport();		/* in the server's log, as a client's */
		MemoryContextSwitchTo(errcxt);
		edata = CopyErrorData();
		FlushErrorState();
		AbortOutOfAnyTransaction();
		note_outcome(RUNNER_FAILED, edata,
					 cap_reached && edata->sqlerrcode == ERRCODE_QUERY_CANCELED ?
					 "canceling the command: it reached its time limit" : NULL);
		RESUME_INTERRUPTS();
	}
	PG_END_TRY();
	proc_exit(shmem_exit_code());
}


/* ---------------------------------------------------------------------
 * For tests only: not part of the extension's SQL; a superuser binds them
 * with CREATE FUNCTION ... LANGUAGE C.
 *
 *	 retries_debug_runner_start(text, regrole, integer) RETURNS void
 *	 retries_debug_runner_start_call(regprocedure, jsonb, regrole, integer)
 *		RETURNS void
 *	 retries_debug_runner_poll() RETURNS text	-- NULL while it runs
 * ---------------------------------------------------------------------
 */
PG_FUNCTION_INFO_V1(retries_debug_runner_start);
PG_FUNCTION_INFO_V1(retries_debug_runner_start_call);
PG_FUNCTION_INFO_V1(retries_debug_runner_poll);

/* debug_may_start -- refuse a start by hand to a role that is not a superuser */
static void
debug_may_start(void)
{
	if (!superuser())
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("only a superuser may start a runner by hand")));
	if (runner_busy())
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("this session has a runner going on")));
}

/* debug_started -- the outcome of runner_launch(), as an error if it failed */
static void
debug_started(bool started)
{
	if (!started)
		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("no background worker slot is free for a runner")));
}

Datum
retries_debug_runner_start(PG_FUNCTION_ARGS)
{
	debug_may_start();
	debug_started(runner_launch(PG_GETARG_OID(1), text_to_cstring(PG_GETARG_TEXT_PP(0)),
								PG_GETARG_INT32(2)));
	PG_RETURN_VOID();
}

Datum
retries_debug_runner_start_call(PG_FUNCTION_ARGS)
{
	debug_may_start();
	debug_started(runner_launch_call(PG_GETARG_OID(2), PG_GETARG_OID(0),
									 call_args_canonicalize(PG_GETARG_OID(0),
															PG_GETARG_JSONB_P(1)),
									 PG_GETARG_INT32(3), 0, 0));
	PG_RETURN_VOID();
}

Datum
retries_debug_runner_poll(PG_FUNCTION_ARGS)
{
	RunnerOutcome out;

	if (!runner_poll(&out))
		PG_RETURN_NULL();
	if (out.status == RUNNER_SUCCEEDED)
		PG_RETURN_TEXT_P(cstring_to_text("succeeded"));
	if (out.status == RUNNER_LOST)
		PG_RETURN_TEXT_P(cstring_to_text("lost"));
	PG_RETURN_TEXT_P(cstring_to_text(psprintf("failed %s: %s",
											  unpack_sql_state(out.sqlerrcode),
											  out.message)));
}
