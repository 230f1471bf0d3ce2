/*-------------------------------------------------------------------------
 *
 * evaluate.c
 *	  Running a role's code for an attempt: in a subtransaction and the
 *	  sandbox of its role, under the attempt's time limit; the function with
 *	  its arguments and defaults, or a hook, and its result made jsonb.
 *
 * What the code raised comes back as an ErrorData, with the step it came
 * from (its arguments, the function, its result): execute.c and verdict.c
 * decide what it means for the call.  Nothing here reads or writes the
 * calls table.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/pg_authid.h"
#include "catalog/pg_collation.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "common/int.h"
#include "common/pg_prng.h"
#include "executor/executor.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/regproc.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"

#include "api/api.h"
#include "base/base.h"
#include "base/compat.h"
#include "core/policy.h"
#include "engine/evaluate.h"
#include "engine/execute.h"
#include "engine/outcome.h"
#include "engine/runner.h"
#include "engine/policies.h"
#include "engine/proctext.h"
#include "engine/sandbox.h"
#include "engine/time_cap.h"
#include "flow/flow.h"
#include "tables/tables.h"


/*
 * The time limit of an attempt (its policy's timeout, or the cap
 * retries.max_attempt_time): when it passes, the attempt is cancelled as a
 * statement timeout would cancel a statement.  A function may trap that
 * cancel (EXCEPTION WHEN query_canceled) and go on; so the limit holds by
 * two more means: an attempt that returns after its cancel is failed as a
 * timeout all the same (evaluate_sandboxed), and one that is still running
 * ATTEMPT_KILL_GRACE_MS after its cancel was made (not after it was due:
 * time_cap.c) ends with the worker, which is told to exit as if by
 * SIGTERM: no code can trap that.  The attempt is
 * then charged as interrupted (see worker.c), and the calls that shared
 * its batch, all of its role (see worker.c), run again uncharged.
 */
#define ATTEMPT_KILL_GRACE_MS	2000

static volatile sig_atomic_t attempt_timed_out = false;
static volatile sig_atomic_t attempt_killed = false;

/* The limit of the attempt under way, as text, for the log */
static char attempt_limit_text[POLICY_FORMAT_LEN];

/*
 * attempt_timeout_handler -- the policy's timeout has passed: cancel the
 * running function as a statement timeout would
 */
static void
attempt_timeout_handler(void)
{
	attempt_timed_out = true;
	QueryCancelPending = true;
	InterruptPending = true;
	SetLatch(MyLatch);
}

/*
 * attempt_kill_handler -- the attempt trapped its cancel and went on: the
 * worker exits at its next check for interrupts, as after SIGTERM
 */
static void
attempt_kill_handler(void)
{
	attempt_killed = true;
	ProcDiePending = true;
	InterruptPending = true;
	SetLatch(MyLatch);
}

/*
 * evaluate_attempt_killed -- whether the worker is exiting because an
 * attempt went on past its time limit after its cancel; if so, the limit
 * as text into *limit
 */
bool
evaluate_attempt_killed(const char **limit)
{
	*limit = attempt_limit_text;
	return attempt_killed;
}

/*
 * evaluate_time_limit -- how long an attempt (or a hook) may run, in
 * microseconds, -1 for no limit: the policy's timeout, capped at
 * retries.max_attempt_time; *capped tells whether the cap is what applies
 */
int64
evaluate_time_limit(const CachedPolicy *policy, bool *capped)
{
	int64		cap = (int64) retries_max_attempt_time * USECS_PER_SEC;
	int64		timeout = policy != NULL ? policy->timeout : -1;

	*capped = cap > 0 && (timeout < 0 || timeout > cap);
	return *capped ? cap : timeout;
}

/*
 * to_jsonb() as called for results of one type: its FmgrInfo, whose
 * fn_expr tells it the type of its argument, in a memory context of its
 * own, made again when a result of another type comes (a batch mostly
 * calls one function)
 */
static MemoryContext to_jsonb_cxt = NULL;
static Oid	to_jsonb_type = InvalidOid;
static FmgrInfo to_jsonb_flinfo;

/*
 * default_value -- a parameter's default expression, given for a parameter
 * the call left out, evaluated: a Const in the executor's memory
 *
 * Evaluated before the call, as PostgreSQL evaluates a call's arguments,
 * but apart from it, in the sandbox's making of arguments
 * (sandbox_make_args): a default is SQL that the function's owner wrote,
 * and a function of another role that it calls must not run with the
 * caller's rights.
 */
static Const *
default_value(Expr *arg, EState *estate)
{
	Oid			type = exprType((Node *) arg);
	ExprState  *state;
	Datum		value;
	bool		isnull;
	int16		typlen;
	bool		typbyval;

	sandbox_make_args(true);
	state = ExecInitExpr(expression_planner(arg), NULL);
	value = ExecEvalExpr(state, GetPerTupleExprContext(estate), &isnull);
	sandbox_make_args(false);
	get_typlenbyval(type, &typlen, &typbyval);
	return makeConst(type, exprTypmod((Node *) arg), exprCollation((Node *) arg),
					 typlen, isnull ? (Datum) 0 : datumCopy(value, typbyval, typlen),
					 isnull, typbyval);
}

/*
 * evaluate_call -- call a function with these argument expressions; its
 * result, copied into the caller's memory context, goes to *result if
 * 'result' is not NULL
 *
 * The call is built as a FuncExpr and run through the executor, so that
 * defaults, strictness and the function's own expectations of fn_expr are
 * as in a SQL call.  Only the arguments go through the planner (a default
 * expression may need it); the call itself does not, because the planner
 * would try to inline a SQL function, parsing its body once more on every
 * attempt only to find that it cannot, and an inlined call would run the
 * same anyway.
 */
static void
evaluate_call(Oid fnoid, List *args, Datum *result, bool *isnull, Oid *result_type)
{
	MemoryContext callercxt = CurrentMemoryContext;
	EState	   *estate = CreateExecutorState();
	FuncExpr   *fexpr;
	ExprState  *exprstate;
	List	   *planned = NIL;
	Oid			inputcollid = InvalidOid;
	Oid			rettype = get_func_rettype(fnoid);
	ListCell   *lc;
	Datum		value;
	bool		valuenull;

	MemoryContextSwitchTo(estate->es_query_cxt);
	foreach(lc, args)
	{
		Expr	   *arg = (Expr *) lfirst(lc);

		planned = lappend(planned, IsA(arg, Const) ? arg : (Expr *) default_value(arg, estate));
		/* as in SQL: collatable arguments pass their (default) collation */
		if (!OidIsValid(inputcollid))
			inputcollid = exprCollation((Node *) arg);
	}
	fexpr = makeFuncExpr(fnoid, rettype, planned,
						 InvalidOid, inputcollid, COERCE_EXPLICIT_CALL);
	exprstate = ExecInitExpr((Expr *) fexpr, NULL);
	MemoryContextSwitchTo(callercxt);
	value = ExecEvalExprSwitchContext(exprstate, GetPerTupleExprContext(estate),
									  &valuenull);

	/* the value lives in the executor's memory, about to be freed */
	if (result != NULL)
	{
		int16		typlen;
		bool		typbyval;

		get_typlenbyval(rettype, &typlen, &typbyval);
		*result = valuenull ? (Datum) 0 : datumCopy(value, typbyval, typlen);
		*isnull = valuenull;
		*result_type = rettype;
	}
	FreeExecutorState(estate);
}

/*
 * result_to_jsonb -- a function's result (of type 'type') as to_jsonb()
 * makes it, in the caller's memory context; NULL for void or NULL
 *
 * to_jsonb() runs the output functions of the result's types (and their
 * casts to json), which are the role's code as much as the function is:
 * the caller runs this in the call's sandbox.
 */
static Jsonb *
result_to_jsonb(Oid type, Datum value, bool isnull)
{
	if (isnull || type == VOIDOID)
		return NULL;
	if (to_jsonb_cxt == NULL || to_jsonb_type != type)
	{
		MemoryContext oldcxt;

		if (to_jsonb_cxt != NULL)
			MemoryContextDelete(to_jsonb_cxt);
		to_jsonb_cxt = AllocSetContextCreate(TopMemoryContext, "retries to_jsonb",
											 ALLOCSET_SMALL_SIZES);
		to_jsonb_type = InvalidOid;
		oldcxt = MemoryContextSwitchTo(to_jsonb_cxt);
		fmgr_info_cxt(F_TO_JSONB, &to_jsonb_flinfo, to_jsonb_cxt);
		to_jsonb_flinfo.fn_expr = (Node *)
			makeFuncExpr(F_TO_JSONB, JSONBOID,
						 list_make1(makeNullConst(type, -1, InvalidOid)),
						 InvalidOid, InvalidOid, COERCE_EXPLICIT_CALL);
		MemoryContextSwitchTo(oldcxt);
		to_jsonb_type = type;
	}
	return DatumGetJsonbP(FunctionCall1(&to_jsonb_flinfo, value));
}

/*
 * check_result_size -- raise 54000 if a call's result is larger than
 * retries.max_result_size
 */
static void
check_result_size(Oid fnoid, const Jsonb *result)
{
	Size		limit = (Size) retries_max_result_size * 1024;
	char		size[POLICY_FORMAT_LEN];
	char		max[POLICY_FORMAT_LEN];

	if (result == NULL || VARSIZE(result) <= limit)
		return;
	snprintf(size, sizeof(size), "%zu bytes", (Size) VARSIZE(result));
	snprintf(max, sizeof(max), "%d kB", retries_max_result_size);
	ereport(ERROR,
			(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
			 errmsg("the result of %s is %s as jsonb, more than retries.max_result_size (%s)",
					format_procedure(fnoid), size, max),
			 errhint("Return less (keep large data in a table and return its key), or raise retries.max_result_size.")));
}

/*
 * evaluate_in_sandbox -- what evaluate_sandboxed() runs in its subtransaction:
 * the call, and, for the call itself ('keep'), its result converted to
 * jsonb and checked (*step says which is under way)
 *
 * A function of its own, not inlined, so that its locals are not those of
 * evaluate_sandboxed(), which a longjmp out of the subtransaction could clobber.
 */
static pg_noinline void
evaluate_in_sandbox(Oid fnoid, List *args, bool keep, SandboxStep *step,
					Datum *result, bool *isnull)
{
	Oid			result_type = InvalidOid;
	Jsonb	   *jb;

	evaluate_call(fnoid, args, result, isnull, &result_type);
	if (!keep)
		return;
	*step = STEP_RESULT;
	sandbox_convert_result(true);
	jb = result_to_jsonb(result_type, *result, *isnull);
	sandbox_convert_result(false);
	check_result_size(fnoid, jb);
	if (jb != NULL)
		args_check_jsonb_encoding(jb, "the result");
	*result = PointerGetDatum(jb);
	*isnull = jb == NULL;
	*step = STEP_FUNCTION;
}

/*
 * arm_time_limit -- start the clocks of an attempt's time limit: its
 * cancel, and the end of the worker if it traps the cancel (see the top
 * of the file)
 */
static void
arm_time_limit(int64 timeout)
{
	policy_format_duration(timeout, attempt_limit_text, sizeof(attempt_limit_text));
	time_cap_arm((int) Min(timeout / 1000, INT_MAX), ATTEMPT_KILL_GRACE_MS);
}

/*
 * disarm_time_limit -- stop them
 */
static void
disarm_time_limit(void)
{
	time_cap_disarm();
}

/*
 * rename_deadlock_cancel -- an attempt that Citus cancelled to break a
 * distributed deadlock failed with a deadlock (40P01), as Citus reports
 * such a cancel itself: it renames the cancel's 57014 only when the error
 * is emitted (its emit_log_hook), and the sandbox catches the error
 * before that.  Citus, when loaded, says whether it cancelled this
 * process for a deadlock (and forgets it: the next cancel may have another
 * cause).
 */
static void
rename_deadlock_cancel(ErrorData *edata)
{
	static bool looked_up = false;
	static bool (*cancelled_for_deadlock) (bool clear) = NULL;

	if (edata->sqlerrcode != ERRCODE_QUERY_CANCELED)
		return;
	if (!looked_up)
	{
		cancelled_for_deadlock = (bool (*) (bool))
			citus_symbol("MyBackendGotCancelledDueToDeadlock");
		looked_up = true;
	}
	if (cancelled_for_deadlock != NULL && cancelled_for_deadlock(true))
	{
		edata->sqlerrcode = ERRCODE_T_R_DEADLOCK_DETECTED;
		edata->message = pstrdup("canceling the transaction since it was involved in a distributed deadlock");
	}
}

/*
 * clip_error -- the texts of a role's error that an attempt keeps, cut to
 * ERROR_TEXT_LEN bytes (args_clip_len), as soon as the error is caught:
 * everything after (the outcome, the attempt's row, the call's last
 * message, a hook's error) copies these, not the texts the code raised
 */
static void
clip_error(ErrorData *edata)
{
	edata->message = args_clipped(edata->message);
	edata->detail = args_clipped(edata->detail);
	edata->hint = args_clipped(edata->hint);
	edata->context = args_clipped(edata->context);
	edata->internalquery = args_clipped(edata->internalquery);
}

/*
 * evaluate_sandboxed -- run a function (the call, or one of its hooks) as
 * 'role', in a subtransaction and the sandbox of sandbox.c; on error,
 * return its ErrorData (in the caller's memory context) and roll the
 * subtransaction back
 *
 * For the call itself, 'stored_args' are its canonical arguments, which
 * are converted inside the sandbox (a domain's check or a default is the
 * role's code too), and its result is returned as jsonb, converted and
 * checked against retries.max_result_size inside the sandbox too; *step
 * tells the caller where an error happened.  Hooks pass their argument
 * expressions in 'given_args', and get their result as it is; a hook
 * ('hook') runs with its search_path pinned (sandbox_enter).  With
 * 'result', the result is returned in the caller's memory context.
 *
 * The attempt's timeout covers everything the role's code runs, deferred
 * triggers included.  A timeout that fires as the code returns leaves a
 * cancel pending that belongs to nobody: it is cleared, so that it cannot
 * cancel the worker's own bookkeeping or the next call.
 */
ErrorData *
evaluate_sandboxed(Oid role, Oid fnoid, bool hook, Jsonb *stored_args, MemoryContext argcxt,
				   List *given_args, int64 timeout, SandboxStep *step, Datum *result,
				   bool *isnull)
{
	MemoryContext oldcxt = CurrentMemoryContext;
	ResourceOwner oldowner = CurrentResourceOwner;
	ErrorData  *volatile edata = NULL;
	List	   *volatile args = given_args;
	Sandbox		sb;

	memset(&sb, 0, sizeof(sb));
	sb.pin_path = hook;
	*step = STEP_FUNCTION;
	attempt_timed_out = false;

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(oldcxt);

	PG_TRY();
	{
		sandbox_enter(&sb, role, fnoid);
		if (timeout > 0)
			arm_time_limit(timeout);
		if (stored_args != NULL)
		{
			*step = STEP_ARGUMENTS;
			proctext_check_domains(fnoid);
			if (argcxt != NULL)
				MemoryContextSwitchTo(argcxt);
			sandbox_make_args(true);
			args = call_args_build(fnoid, stored_args);
			sandbox_make_args(false);
			MemoryContextSwitchTo(oldcxt);
			*step = STEP_FUNCTION;
		}
		PushActiveSnapshot(GetTransactionSnapshot());
		evaluate_in_sandbox(fnoid, args, stored_args != NULL, step, result, isnull);
		PopActiveSnapshot();
		sandbox_leave(&sb);

		/* it trapped its cancel and returned: a timeout all the same */
		if (attempt_timed_out)
			ereport(ERROR,
					(errcode(ERRCODE_QUERY_CANCELED),
					 errmsg("canceling the attempt after its time limit"),
					 errdetail("The function went on after it was cancelled; its effects were rolled back.")));
		if (timeout > 0)
			disarm_time_limit();

		ReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(oldcxt);
		CurrentResourceOwner = oldowner;
	}
	PG_CATCH();
	{
		if (timeout > 0)
			disarm_time_limit();
		MemoryContextSwitchTo(oldcxt);
		edata = CopyErrorData();
		FlushErrorState();
		clip_error(edata);
		rename_deadlock_cancel(edata);
		sandbox_note_error(edata);
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(oldcxt);
		CurrentResourceOwner = oldowner;
	}
	PG_END_TRY();

	if (attempt_timed_out)
		QueryCancelPending = false;
	sandbox_reset_session(&sb);
	return edata;
}

/*
 * evaluate_init -- the handlers of the attempts' time limit (once per
 * worker)
 */
void
evaluate_init(void)
{
	time_cap_init(attempt_timeout_handler, attempt_kill_handler);
}

/*
 * evaluate_timed_out -- did the last code that evaluate_sandboxed() ran
 * reach its time limit (whatever it raised once cancelled)?
 */
bool
evaluate_timed_out(void)
{
	return attempt_timed_out;
}
