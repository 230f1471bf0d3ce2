/*-------------------------------------------------------------------------
 *
 * sandbox.c
 *	  Running a call's code as its role, as if in a fresh login session of
 *	  that role, and leaving nothing of it behind.
 *
 * A worker is a superuser session that runs the calls of every role, many
 * calls to one batch transaction, each in a subtransaction of its own.  The
 * code a call reaches (its function, the conversion of its arguments, the
 * triggers its statements fire, deferred ones too) is untrusted: it is the
 * choice of whoever scheduled the call.  The rule (doc/operations.md,
 * "Isolation"): every piece of it runs as the call's role, sees the
 * settings a login session of that role would start with (login.c), and
 * nothing it does outlives its attempt or runs later as the worker or as
 * another call.  Code that the function's owner chose never runs with the
 * caller's rights (doc/architecture.md, "Trust"): the on_exhausted and
 * delay_fn hooks run as that owner, in a sandbox of the owner's (execute.c's
 * run_hook), and a cast to json of a result's type whose function another
 * role owns does not run at all (sandbox_convert_result).
 *
 * This is PostgreSQL's own answer for running untrusted code from a
 * privileged session (REFRESH MATERIALIZED VIEW, ANALYZE, CREATE INDEX),
 * applied to a whole attempt, plus what the end of a session's transaction
 * and DISCARD ALL would do, done at the end of each attempt:
 *
 * sandbox_enter(), inside the attempt's subtransaction:
 *	- the session user and the current user become the role (session_user
 *	  is the role, as in its login session, not the worker's bootstrap
 *	  superuser), with SECURITY_LOCAL_USERID_CHANGE, so that SET ROLE and
 *	  SET SESSION AUTHORIZATION are refused;
 *	- a GUC nest level opens, and the role's login settings are applied in
 *	  it: ALTER DATABASE ... SET, ALTER ROLE ... SET, ALTER ROLE ... IN
 *	  DATABASE ... SET, read once per batch transaction; a role whose
 *	  default_transaction_read_only is on gets a read-only attempt, and
 *	  its statement_timeout bounds the attempt as it would bound a
 *	  statement that called the function in a login session.
 *
 * sandbox_leave(), still inside the subtransaction and as the role, when
 * the code returned:
 *	- what a commit would run, run now: deferred triggers fire (SET
 *	  CONSTRAINTS ALL IMMEDIATE takes effect retroactively), so an error
 *	  they raise fails this attempt only, and never runs as the worker;
 *	- every cursor is closed (WITH HOLD ones too, which a commit would
 *	  otherwise run to completion as the worker); temp objects are dropped,
 *	  also those made in the temp schema named by its own name (pg_temp_3),
 *	  which PostgreSQL does not note as a use of it (a role without TEMP on
 *	  the database may not have made them, even if an earlier call made the
 *	  worker's temp schema); large-object descriptors are closed (LISTEN,
 *	  PostgreSQL refuses in a worker);
 *	- the GUC nest level is rolled back, whatever the code set (SET, SET
 *	  LOCAL, set_config, is_local or not), and the user restored.
 * If the code raised instead, the subtransaction's abort undoes all of
 * that by itself.
 *
 * sandbox_reset_session(), after the subtransaction, either way: what a
 * subtransaction's abort does not undo is undone too: prepared statements
 * are deallocated, session advisory locks released, sequences' currval and
 * lastval forgotten.
 *
 * Firing deferred triggers changes the batch transaction's SET CONSTRAINTS
 * state for good (PostgreSQL has no way back to "as declared" but the
 * abort of a subtransaction), so an attempt that may have queued deferred
 * trigger events, or ran SET CONSTRAINTS, ends its batch
 * (sandbox_transaction_changed): the next call starts in a fresh
 * transaction, where every constraint is as declared again.  Which
 * attempts those are is known from two hooks, which act only inside the
 * sandbox: ExecutorEnd sees the tables each statement wrote and whether
 * they have INITIALLY DEFERRED triggers; ProcessUtility (hooks.c) sees SET
 * CONSTRAINTS and COPY FROM.
 *
 * What escapes an ERROR (doc/operations.md, "Containment").  Settings that
 * turn an error into the end of the process (exit_on_error) or end it by
 * themselves (transaction_timeout, from PostgreSQL 17) are pinned: the worker
 * sets them off for its life at sandbox_init(), as a setting forced on a
 * session (PGC_S_OVERRIDE, which postgresql.conf cannot undo), and gives them
 * a check hook that refuses to turn them on while a call's code runs: SET,
 * set_config() and a function's SET clause fail with 55P02, and ALTER ROLE
 * ... SET of them is skipped as a login skips a setting it cannot
 * apply.  So is an application_name of Citus's own form, from which Citus
 * would take the worker's global pid for every later call
 * (check_application_name).  Process-wide state that a call can set and
 * SQL can read back, the seed of random(), is reseeded before an attempt in
 * another context than the last one runs: a context is the role an
 * attempt runs as and the owner of the function it runs, so that neither
 * another role's calls nor another role's function called by the same
 * role chose the seed.  So are PL/pgSQL's compiled functions, whose
 * variables' types the search_path of their compilation chose: from one
 * context to another they are compiled anew (plcache.c).  And so are the
 * expressions PostgreSQL plans once and keeps per process (a domain's
 * CHECK in the type cache, an index's expressions and predicate and a
 * partition key in the relation cache), into which SQL functions are
 * inlined, their bodies parsed under the search_path of whoever loaded
 * them first: those entries are invalidated, as a change of their catalog
 * rows would (exprcache.c), so that another role's
 * search_path never chose an operator that runs in the caller's attempt.
 * The rest (a function that traps its own cancel, memory) is the worker's
 * business (execute.c, worker.c).
 *
 * JIT.  A third hook, the planner's, tells the worker's own statements from
 * a call's: the worker's are planned without JIT (see sandbox_planner), a
 * call's as its role's session would plan them.
 *
 * Not covered: state that a C extension keeps in process memory of its own
 * (dblink's named connections, for one) is the extension's, unknown here,
 * as it is to DISCARD ALL; doc/operations.md says so.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_depend.h"
#include "catalog/pg_namespace.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "commands/dbcommands.h"
#include "commands/prepare.h"
#include "commands/sequence.h"
#include "commands/trigger.h"
#include "executor/executor.h"
#include "jit/jit.h"
#include "libpq/be-fsstubs.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "nodes/parsenodes.h"
#include "optimizer/planner.h"
#include "storage/lock.h"
#include "storage/proc.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/fmgrprotos.h"
#include "utils/guc.h"
#include "utils/json.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/portal.h"
#include "utils/regproc.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
#include "utils/timeout.h"

#include "base/base.h"
#include "base/compat.h"
#include "engine/login.h"
#include "engine/conns.h"
#include "engine/exprcache.h"
#include "engine/plcache.h"
#include "engine/sandbox.h"
#include "flow/flow.h"

/* Between sandbox_enter() and the end of the attempt */
static bool in_sandbox = false;

/* From the start of sandbox_enter() to the end of the attempt */
static bool settings_pinned = false;

/* The attempt may have queued deferred trigger events, or set constraints */
static bool attempt_defers = false;

/* The transaction's SET CONSTRAINTS state is no longer as declared */
static bool transaction_changed = false;

/* The worker's own session user, which it gets back after every attempt */
static Oid	worker_session_userid = InvalidOid;
static bool worker_session_superuser = false;

/* The role whose code runs in the sandbox now (sandbox_enter) */
static Oid	sandbox_role = InvalidOid;

/*
 * The context of the last attempt: the role it ran as and the owner of the
 * function it ran (InvalidOid: the next attempt starts a new context), and
 * the transaction it ran in
 */
static Oid	last_role = InvalidOid;
static Oid	last_owner = InvalidOid;
static LocalTransactionId last_lxid = InvalidLocalTransactionId;

/*
 * What the worker is doing that routes other roles' functions through
 * sandbox_fmgr: converting a call's result to jsonb
 * (sandbox_convert_result), or making its arguments (sandbox_make_args);
 * ROUTE_OFF while a trusted function that such a step reached runs
 */
typedef enum SandboxRouting
{
	ROUTE_OFF,
	ROUTE_RESULT,
	ROUTE_ARGS
} SandboxRouting;

static SandboxRouting routing = ROUTE_OFF;

static needs_fmgr_hook_type prev_needs_fmgr_hook = NULL;
static fmgr_hook_type prev_fmgr_hook = NULL;

/* The check hooks the pinned settings had (see pin_settings) */
static GucBoolCheckHook prev_exit_on_error_check = NULL;
static GucIntCheckHook prev_transaction_timeout_check = NULL;
static GucStringCheckHook prev_application_name_check = NULL;

/*
 * refuse_pinned -- a check hook's refusal of a pinned setting
 */
static bool
refuse_pinned(const char *name)
{
	GUC_check_errcode(ERRCODE_CANT_CHANGE_RUNTIME_PARAM);
	GUC_check_errmsg("parameter \"%s\" cannot be turned on in a call", name);
	GUC_check_errdetail("A retries worker runs the calls of every role: what ends the process would end the others' calls too.");
	return false;
}

/*
 * check_exit_on_error -- check hook of exit_on_error in a worker
 */
static bool
check_exit_on_error(bool *newval, void **extra, GucSource source)
{
	if (*newval && settings_pinned)
		return refuse_pinned("exit_on_error");
	return prev_exit_on_error_check == NULL ||
		prev_exit_on_error_check(newval, extra, source);
}

/*
 * check_transaction_timeout -- check hook of transaction_timeout in a
 * worker
 */
static bool
check_transaction_timeout(int *newval, void **extra, GucSource source)
{
	if (*newval != 0 && settings_pinned)
		return refuse_pinned("transaction_timeout");
	return prev_transaction_timeout_check == NULL ||
		prev_transaction_timeout_check(newval, extra, source);
}

/*
 * check_application_name -- check hook of application_name in a worker:
 * a call may not take one of Citus's internal names ("citus_internal
 * gpid=N", "citus_rebalancer gpid=N", ...), from which Citus takes the
 * process's global pid: the worker's, for every later call, in
 * citus_stat_activity and citus_lock_waits, and in its connections to the
 * other nodes
 */
static bool
check_application_name(char **newval, void **extra, GucSource source)
{
	if (settings_pinned && *newval != NULL && strncmp(*newval, "citus_", 6) == 0)
	{
		GUC_check_errcode(ERRCODE_CANT_CHANGE_RUNTIME_PARAM);
		GUC_check_errmsg("parameter \"application_name\" cannot be set to a name of Citus's own (\"%s\") in a call",
						 *newval);
		GUC_check_errdetail("Citus takes the process's global pid from such a name, and a retries worker runs the calls of every role.");
		return false;
	}
	return prev_application_name_check == NULL ||
		prev_application_name_check(newval, extra, source);
}

/*
 * pin_settings -- pin the settings that end the process (see the top of
 * the file): off for the worker's life, and not to be turned on by calls
 */
static void
pin_settings(void)
{
	struct config_generic *rec = retries_find_setting("exit_on_error");

	if (rec != NULL && rec->vartype == PGC_BOOL)
	{
		prev_exit_on_error_check = ((struct config_bool *) rec)->check_hook;
		((struct config_bool *) rec)->check_hook = check_exit_on_error;
		SetConfigOption("exit_on_error", "off", PGC_SUSET, PGC_S_OVERRIDE);
	}
	rec = retries_find_setting("transaction_timeout");
	if (rec != NULL && rec->vartype == PGC_INT)
	{
		prev_transaction_timeout_check = ((struct config_int *) rec)->check_hook;
		((struct config_int *) rec)->check_hook = check_transaction_timeout;
		SetConfigOption("transaction_timeout", "0", PGC_SUSET, PGC_S_OVERRIDE);
	}
	rec = retries_find_setting("application_name");
	if (rec != NULL && rec->vartype == PGC_STRING)
	{
		prev_application_name_check = ((struct config_string *) rec)->check_hook;
		((struct config_string *) rec)->check_hook = check_application_name;
	}
}

static ExecutorEnd_hook_type prev_ExecutorEnd = NULL;

static void reseed_random(void);

/*
 * defers_after_statement -- can this table's triggers have queued events
 * that wait for the end of the transaction?
 *
 * Only INITIALLY DEFERRED ones can, since SET CONSTRAINTS in the attempt is
 * noted by itself and an earlier one would have ended the batch.
 */
static bool
defers_after_statement(List *result_relations)
{
	ListCell   *lc;

	foreach(lc, result_relations)
	{
		TriggerDesc *trigdesc = ((ResultRelInfo *) lfirst(lc))->ri_TrigDesc;

		if (trigdesc == NULL)
			continue;
		for (int i = 0; i < trigdesc->numtriggers; i++)
			if (trigdesc->triggers[i].tginitdeferred)
				return true;
	}
	return false;
}

/*
 * sandbox_executor_end -- ExecutorEnd hook: note a statement of the
 * attempt that wrote a table with deferred triggers
 */
static void
sandbox_executor_end(QueryDesc *queryDesc)
{
	EState	   *estate = queryDesc->estate;

	if (in_sandbox && !attempt_defers && estate != NULL)
		attempt_defers =
			defers_after_statement(estate->es_opened_result_relations) ||
			defers_after_statement(estate->es_tuple_routing_result_relations) ||
			defers_after_statement(estate->es_trig_target_relations);

	if (prev_ExecutorEnd)
		prev_ExecutorEnd(queryDesc);
	else
		standard_ExecutorEnd(queryDesc);
}

/*
 * sandbox_note_utility -- called by the ProcessUtility hook (hooks.c) for
 * every utility command: inside an attempt, note the commands that leave
 * something for the end of the transaction
 */
void
sandbox_note_utility(Node *stmt)
{
	if (!in_sandbox)
		return;
	if (IsA(stmt, ConstraintsSetStmt) ||
		(IsA(stmt, CopyStmt) && ((CopyStmt *) stmt)->is_from))
		attempt_defers = true;
}

static planner_hook_type prev_planner = NULL;

/*
 * sandbox_planner -- plan a statement: one of the worker's own (outside the
 * sandbox) is never JIT-compiled
 *
 * The worker keeps its plans for its life and runs each of them thousands
 * of times a second.  A plan whose estimate crossed jit_above_cost (the
 * statistics of a table at a bad moment) would compile its expressions
 * again at every execution, for milliseconds each.  A call's statements
 * are planned as in a login session of its role, JIT included.
 */
static PlannedStmt *
sandbox_planner(Query *parse, const char *query_string, int cursorOptions,
				ParamListInfo boundParams)
{
	PlannedStmt *result;

	if (prev_planner != NULL)
		result = prev_planner(parse, query_string, cursorOptions, boundParams);
	else
		result = standard_planner(parse, query_string, cursorOptions, boundParams);
	if (!in_sandbox)
		result->jitFlags = PGJIT_NONE;
	return result;
}

/*
 * foreign_function -- is function fnoid code that the call's role did not
 * choose: not built in, and owned by another role than the call's (the
 * role of the sandbox, whoever the current user is: PostgreSQL switches to
 * the owner of a SECURITY DEFINER function before sandbox_fmgr sees it)
 * that is not a superuser?
 *
 * A superuser's function (an extension's, or one the administrator wrote)
 * is trusted code: it runs as the caller, as in a direct call.
 */
static bool
foreign_function(Oid fnoid)
{
	Oid			owner;

	if (fnoid < FirstNormalObjectId)
		return false;
	owner = schema_function_owner(fnoid);
	return OidIsValid(owner) && owner != sandbox_role && !superuser_arg(owner);
}

/*
 * text_form_as_json -- what stands for another role's cast to json while a
 * result is converted: the value's text, as its type's output function
 * gives it (what a direct call shows), as a JSON string
 *
 * The value is of the cast function's first parameter type (a cast's
 * source type, or one binary-coercible to it).  Its output function runs
 * with the conversion's routing off: it is what a direct call runs.
 */
static Datum
text_form_as_json(PG_FUNCTION_ARGS)
{
	Oid			argtype = InvalidOid;
	Oid			output;
	bool		isvarlena;
	HeapTuple	tup;
	StringInfoData buf;
	char	   *str;

	tup = SearchSysCache1(PROCOID, ObjectIdGetDatum(fcinfo->flinfo->fn_oid));
	if (HeapTupleIsValid(tup))
	{
		Form_pg_proc form = (Form_pg_proc) GETSTRUCT(tup);

		if (form->pronargs > 0)
			argtype = form->proargtypes.values[0];
		ReleaseSysCache(tup);
	}
	if (!OidIsValid(argtype))
		elog(ERROR, "retries: cache lookup failed for the cast function %u",
			 fcinfo->flinfo->fn_oid);
	if (IsPolymorphicType(argtype))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("the result's cast to json %s is another role's, and polymorphic: it is not run, and its value's type is not known",
						format_procedure(fcinfo->flinfo->fn_oid)),
				 errhint("A cast of another role's is not run for a call; its owner can make it take the type itself.")));
	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	getTypeOutputInfo(argtype, &output, &isvarlena);
	routing = ROUTE_OFF;
	str = OidOutputFunctionCall(output, PG_GETARG_DATUM(0));
	routing = ROUTE_RESULT;
	initStringInfo(&buf);
	escape_json(&buf, str);
	PG_RETURN_TEXT_P(cstring_to_text_with_len(buf.data, buf.len));
}

/*
 * sandbox_needs_fmgr -- PostgreSQL's needs_fmgr_hook: while a result is
 * converted, or arguments made, every function that is not built in goes
 * through sandbox_fmgr.  The functions that to_jsonb() calls itself are
 * output functions and casts to json; those it calls, not what they call
 * in turn (see sandbox_fmgr).  Making arguments runs input functions,
 * domains' checks and the function's defaults.  And while a call's code
 * runs, PL/pgSQL's validator goes through it too (plcache.c).
 */
static bool
sandbox_needs_fmgr(Oid fnoid)
{
	if (prev_needs_fmgr_hook != NULL && prev_needs_fmgr_hook(fnoid))
		return true;
	if (in_sandbox && plcache_is_validator(fnoid))
		return true;
	return routing != ROUTE_OFF && fnoid >= FirstNormalObjectId;
}

/*
 * What sandbox_fmgr did at FHET_START, in '*private': nothing, or a
 * trusted function runs with routing off (FMGR_TRUSTED plus the routing to
 * restore after it), or another role's cast does not run
 */
#define FMGR_LEFT		0
#define FMGR_REPLACED	1
#define FMGR_TRUSTED	2

/*
 * sandbox_fmgr -- PostgreSQL's fmgr_hook, around a function that
 * sandbox_needs_fmgr routed (and around every SECURITY DEFINER function or
 * one with SET clauses, which it leaves alone but while a result is
 * converted).  FHET_START comes after PostgreSQL has looked the function
 * up, switched to its owner if it is SECURITY DEFINER and applied its SET
 * clauses, and before it calls it, through 'flinfo':
 *
 *	- another role's cast to json (it returns json) does not run at all:
 *	  text_form_as_json runs in its place.  Its SET clauses were applied
 *	  and are undone by PostgreSQL when it returns; one setting has an
 *	  effect that outlives it, the seed of random(), which is drawn anew
 *	  then (a cast of mallory's with SET seed fixed the caller's random());
 *	- any other function of another role (an output function that changed
 *	  hands; while arguments are made, a function that a default or a
 *	  domain's check calls) fails the conversion: it is not the caller's
 *	  choice, and nothing can stand for it;
 *	- a function of the caller's or of a superuser's (a cast, an output
 *	  function) runs as in a direct call, as the caller, and nothing it
 *	  calls is routed: the result is not being converted while it runs.
 */
static void
sandbox_fmgr(FmgrHookEventType event, FmgrInfo *flinfo, Datum *private)
{
	if (prev_fmgr_hook != NULL)
		prev_fmgr_hook(event, flinfo, private);
	switch (event)
	{
		case FHET_START:
			if (plcache_is_validator(flinfo->fn_oid))
			{
				flinfo->fn_addr = plcache_validate;
				return;
			}
			if (routing == ROUTE_OFF)
				return;
			if (!foreign_function(flinfo->fn_oid))
			{
				*private = Int32GetDatum(FMGR_TRUSTED + routing);
				routing = ROUTE_OFF;
			}
			else if (routing == ROUTE_RESULT &&
					 get_func_rettype(flinfo->fn_oid) == JSONOID)
			{
				flinfo->fn_addr = text_form_as_json;
				*private = Int32GetDatum(FMGR_REPLACED);
			}
			else if (routing == ROUTE_RESULT)
				ereport(ERROR,
						(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
						 errmsg("converting the result to jsonb would run function %s of another role",
								format_procedure(flinfo->fn_oid)),
						 errdetail("Only the caller's code and a superuser's convert a call's result.")));
			else
				ereport(ERROR,
						(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
						 errmsg("making the call's arguments would run function %s of another role",
								format_procedure(flinfo->fn_oid)),
						 errdetail("A parameter's default, or a domain's check of an argument, calls it: only the caller's code and a superuser's make a call's arguments."),
						 errhint("Pass the argument whose default calls it, or have its owner give the function to the caller or to a superuser.")));
			break;
		case FHET_END:
		case FHET_ABORT:
			if (DatumGetInt32(*private) >= FMGR_TRUSTED)
				routing = (SandboxRouting) (DatumGetInt32(*private) - FMGR_TRUSTED);
			else if (DatumGetInt32(*private) == FMGR_REPLACED)
			{
				/* at the end, reseed; at an abort, the next call does */
				if (event == FHET_END)
					reseed_random();
				last_role = InvalidOid;
			}
			*private = Int32GetDatum(FMGR_LEFT);
			break;
	}
}

/*
 * sandbox_convert_result -- a call's result is about to be converted to
 * jsonb (true), or has been (false)
 *
 * to_jsonb() runs the cast to json of each type in the result that has
 * one.  The type's owner chose that cast, not the caller: a call of a
 * function that returns another role's type (of another role's function,
 * mostly) would run that role's code with the caller's rights, up to a
 * superuser's, which a direct call of the function never does (it shows
 * the result with the type's output function).  So while converting, such
 * a cast is not run: the value's text form stands for it, as a JSON
 * string (sandbox_fmgr).  Casts of the caller and of superusers run as
 * before, as the caller.
 */
void
sandbox_convert_result(bool converting)
{
	Assert(in_sandbox);
	routing = converting ? ROUTE_RESULT : ROUTE_OFF;
}

/*
 * sandbox_make_args -- a call's arguments are about to be made (true), or
 * have been (false): converted from their stored values (input functions,
 * domains' checks) and its parameters' defaults evaluated
 *
 * The caller chose her arguments, not the function's defaults nor the
 * checks of another role's domain: those are SQL of the function's or the
 * domain's owner, which a superuser who calls another role's function
 * would otherwise run with her own rights.  While making them, a function
 * of another role fails the attempt (42501, sandbox_fmgr); built-in
 * functions, the caller's and superusers' run as the caller.
 */
void
sandbox_make_args(bool making)
{
	Assert(in_sandbox);
	routing = making ? ROUTE_ARGS : ROUTE_OFF;
}

/*
 * sandbox_init -- install the sandbox's hooks (once per worker; ordinary
 * backends never run a sandbox and do not have them)
 */
void
sandbox_init(void)
{
	worker_session_userid = GetSessionUserId();
	worker_session_superuser = GetSessionUserIsSuperuser();
	prev_ExecutorEnd = ExecutorEnd_hook;
	ExecutorEnd_hook = sandbox_executor_end;
	prev_planner = planner_hook;
	planner_hook = sandbox_planner;
	prev_needs_fmgr_hook = needs_fmgr_hook;
	needs_fmgr_hook = sandbox_needs_fmgr;
	prev_fmgr_hook = fmgr_hook;
	fmgr_hook = sandbox_fmgr;

	pin_settings();
	plcache_init();
}

/*
 * reseed_random -- give random() a seed no earlier call chose
 *
 * setseed() takes a float8 in [-1, 1]: 53 random bits of one make the
 * sequence that follows as unpredictable as a fresh session's.
 */
static void
reseed_random(void)
{
	uint64		bits;

	if (!pg_strong_random(&bits, sizeof(bits)))
		bits = (uint64) clock_system_now() ^ ((uint64) MyProcPid << 32);
	(void) DirectFunctionCall1(setseed,
							   Float8GetDatum((double) (bits >> 11) / (double) (UINT64CONST(1) << 52) - 1.0));
}

/*
 * sandbox_begin_transaction -- a worker transaction has started
 *
 * The worker's own transactions write, whatever default_transaction_read_only
 * says (a database owner can set it): a read-only default would stop every
 * batch.  Calls still get the default (see sandbox_enter).  And they are
 * READ COMMITTED, whatever default_transaction_isolation says: under a
 * database's default of serializable or repeatable read, the workers' own
 * statements failed with 40001 and their batches rolled back and ran again,
 * every role's calls with them (the seventh hostile review).  The calls of a
 * batch share its transaction, and so its isolation level.
 */
void
sandbox_begin_transaction(void)
{
	Assert(!in_sandbox);
	XactReadOnly = false;
	XactIsoLevel = XACT_READ_COMMITTED;
	transaction_changed = false;
}

/*
 * sandbox_note_error -- an attempt failed with 'edata': one that lost a
 * connection to another server ends its batch (sandbox_transaction_changed),
 * so that the next call starts in a new transaction, with connections of
 * its own.  Those are the errors of class 08 and the codes a server's
 * shutdown sends (57P01 to 57P03), which Citus passes on from a node.  A
 * Citus transaction that lost a node keeps that node's placements tied to
 * the connection it lost: the next call of the batch that wrote to a
 * reference table waited on it until it was cancelled, minutes later
 * (t/citus/001_faults.pl, a worker node stopped under load).
 */
void
sandbox_note_error(const ErrorData *edata)
{
	if (ERRCODE_TO_CATEGORY(edata->sqlerrcode) == ERRCODE_CONNECTION_EXCEPTION ||
		edata->sqlerrcode == ERRCODE_ADMIN_SHUTDOWN ||
		edata->sqlerrcode == ERRCODE_CRASH_SHUTDOWN ||
		edata->sqlerrcode == ERRCODE_CANNOT_CONNECT_NOW)
		transaction_changed = true;
}

/*
 * sandbox_transaction_changed -- did an attempt change the transaction in a
 * way the next call must not see?  Then the batch ends after it.
 */
bool
sandbox_transaction_changed(void)
{
	return transaction_changed;
}

/*
 * sandbox_active -- is code of a call running, between sandbox_enter() and
 * sandbox_leave() or the abort of its subtransaction?
 */
bool
sandbox_active(void)
{
	return in_sandbox;
}

/*
 * sandbox_enter -- start running code of a call as 'role': function
 * 'fnoid', the call's or one of its hooks
 *
 * Called inside the subtransaction that the code runs in.  Until
 * sandbox_leave(), or the subtransaction's abort, the current user is the
 * role and the settings are those of a fresh login session of the role.
 */
void
sandbox_enter(Sandbox *sb, Oid role, Oid fnoid)
{
	Oid			owner = schema_function_owner(fnoid);

	Assert(!in_sandbox);
	if (role != last_role || owner != last_owner)
	{
		reseed_random();
		plcache_new_context();
		exprcache_new_context(last_lxid == retries_local_xid());
		conns_forget_all();
		last_role = role;
		last_owner = owner;
	}
	last_lxid = retries_local_xid();
	settings_pinned = true;
	sb->role = role;
	sandbox_role = role;
	GetUserIdAndSecContext(&sb->saved_userid, &sb->saved_sec_context);
	SetSessionAuthorization(role, superuser_arg(role));
	SetUserIdAndSecContext(role,
						   sb->saved_sec_context | SECURITY_LOCAL_USERID_CHANGE);

	sb->guc_nestlevel = NewGUCNestLevel();
	login_apply_settings(role);

	/* a hook: only the schemas its owner may trust (login.c) */
	if (sb->pin_path)
		login_trust_search_path(role);
	if (DefaultXactReadOnly && !XactReadOnly)
		(void) set_config_option("transaction_read_only", "on", PGC_USERSET,
								 PGC_S_SESSION, GUC_ACTION_LOCAL, true, 0,
								 false);
	if (StatementTimeout > 0)
		enable_timeout_after(STATEMENT_TIMEOUT, StatementTimeout);

	/* to learn whether the attempt makes temp objects */
	sb->saved_xact_flags = MyXactFlags & XACT_FLAGS_ACCESSEDTEMPNAMESPACE;
	MyXactFlags &= ~XACT_FLAGS_ACCESSEDTEMPNAMESPACE;

	attempt_defers = false;
	in_sandbox = true;
}

/*
 * fire_deferred -- fire the deferred trigger events queued so far, as SET
 * CONSTRAINTS ALL IMMEDIATE does, with a snapshot taken now, as at commit
 */
static void
fire_deferred(void)
{
	ConstraintsSetStmt *stmt = makeNode(ConstraintsSetStmt);

	stmt->constraints = NIL;
	stmt->deferred = false;
	CommandCounterIncrement();
	PushActiveSnapshot(GetTransactionSnapshot());
	AfterTriggerSetState(stmt);
	PopActiveSnapshot();
	transaction_changed = true;
}

/*
 * temp_objects_left -- is there anything in the worker's temp schema?
 *
 * PostgreSQL notes that a transaction used its temp schema when it is
 * named pg_temp or a temp table is opened, but not when the schema is
 * named by its own name (pg_temp_3): a call could create a type there,
 * say a domain named text, that every later call of any role, and the
 * worker, would find first.  Every object of a schema depends on it, so
 * one probe of pg_depend tells whether the schema holds anything.
 */
static bool
temp_objects_left(void)
{
	Oid			tempns;
	Oid			temptoast;
	Relation	rel;
	ScanKeyData keys[2];
	SysScanDesc scan;
	bool		found;

	GetTempNamespaceState(&tempns, &temptoast);
	if (!OidIsValid(tempns))
		return false;
	CommandCounterIncrement();
	rel = table_open(DependRelationId, AccessShareLock);
	ScanKeyInit(&keys[0], Anum_pg_depend_refclassid,
				BTEqualStrategyNumber, F_OIDEQ, ObjectIdGetDatum(NamespaceRelationId));
	ScanKeyInit(&keys[1], Anum_pg_depend_refobjid,
				BTEqualStrategyNumber, F_OIDEQ, ObjectIdGetDatum(tempns));
	scan = systable_beginscan(rel, DependReferenceIndexId, true, NULL, 2, keys);
	found = HeapTupleIsValid(systable_getnext(scan));
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return found;
}

/*
 * drop_temp_objects -- drop the temp objects the attempt made, if any
 *
 * The worker's temp schema is made once, by the first call that needs it,
 * and PostgreSQL checks the TEMP privilege only then; the check is made
 * here for every later role.
 */
static void
drop_temp_objects(const Sandbox *sb)
{
	if ((MyXactFlags & XACT_FLAGS_ACCESSEDTEMPNAMESPACE) == 0 &&
		!temp_objects_left())
		return;
	if (retries_database_aclcheck(MyDatabaseId, sb->role, ACL_CREATE_TEMP) != ACLCHECK_OK)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied to create temporary tables in database \"%s\"",
						get_database_name(MyDatabaseId))));
	ResetTempTableNamespace();
}

/*
 * sandbox_leave -- the call's code returned: run what the end of its
 * transaction would run, as the role, then drop what it left behind and
 * restore the worker's user and settings
 *
 * Still inside the subtransaction: an error here (a deferred trigger's)
 * fails the attempt like any other, and the subtransaction's abort cleans
 * up.
 */
void
sandbox_leave(Sandbox *sb)
{
	Assert(in_sandbox);

	/*
	 * As at commit: closing a cursor may queue trigger events, and a trigger
	 * may open cursors, so loop until neither leaves anything.
	 */
	for (;;)
	{
		if (attempt_defers)
		{
			attempt_defers = false;
			fire_deferred();
		}
		PortalHashTableDeleteAll();
		if (!attempt_defers)
			break;
	}
	drop_temp_objects(sb);
	AtEOXact_LargeObject(true);

	in_sandbox = false;
	/* whether it fired is for sandbox_reset_session to know */
	disable_timeout(STATEMENT_TIMEOUT, true);
	AtEOXact_GUC(false, sb->guc_nestlevel);
	settings_pinned = false;
	SetUserIdAndSecContext(sb->saved_userid, sb->saved_sec_context);
	SetSessionAuthorization(worker_session_userid, worker_session_superuser);
}

/*
 * sandbox_timeout_over -- the statement of an attempt is over: its
 * statement timeout is disarmed, and a cancel that the timeout raised is
 * dropped.  The timer may fire where nothing checks for interrupts (md5()
 * of a large value, a JIT compilation) or as the code returns: the cancel
 * then belongs to nobody (one that cancelled the code was consumed), and
 * cancelled the worker's own statement that records the batch, which was
 * rolled back and its calls run again, uncharged, for ever (the
 * forty-fifth hostile review, t/075 1).  The indicator must be read before
 * anything disarms the timeout without keeping it.  A backend drops a
 * cancel that comes between two statements, too.
 */
void
sandbox_timeout_over(void)
{
	disable_timeout(STATEMENT_TIMEOUT, true);
	if (get_timeout_indicator(STATEMENT_TIMEOUT, true))
		QueryCancelPending = false;
}

/*
 * sandbox_reset_session -- after the attempt's subtransaction, committed or
 * rolled back: undo what is not transactional
 *
 * The abort of a subtransaction restores the current user, not the session
 * user: that is done here (again, after sandbox_leave).
 */
void
sandbox_reset_session(const Sandbox *sb)
{
	in_sandbox = false;
	settings_pinned = false;
	routing = ROUTE_OFF;
	SetSessionAuthorization(worker_session_userid, worker_session_superuser);

	sandbox_timeout_over();

	MyXactFlags |= sb->saved_xact_flags;
	DropAllPreparedStatements();
	LockReleaseSession(USER_LOCKMETHOD);
	ResetSequenceCaches();
}

/*
 * sandbox_abort -- the worker's transaction was aborted, maybe in the
 * middle of an attempt: the session user is the worker's again (the
 * abort restored the current user)
 */
void
sandbox_abort(void)
{
	in_sandbox = false;
	settings_pinned = false;
	routing = ROUTE_OFF;
	SetSessionAuthorization(worker_session_userid, worker_session_superuser);
}
