/*-------------------------------------------------------------------------
 *
 * execute.c
 *	  Running one attempt of a call, classifying its outcome and recording
 *	  it: the call's new state and one row of retries.attempt_data.
 *
 * A worker runs each attempt inside its batch transaction, in a
 * subtransaction of its own, as the role that scheduled the call.  Success
 * releases the subtransaction, so the function's effects and the record of
 * its success commit together.  Successes and retries are queued and
 * written by one statement at the end of the batch (execute_finish_batch),
 * which costs a fraction of a statement per call; a call that fails for
 * good is written at once, since its on_exhausted hook comes next.  An
 * error rolls back the function's effects only; the outcome is then:
 *
 *	- the SQLSTATE is matched against the policy's retry_on (a timeout is
 *	  57014), and a retryable error within the attempt budget reschedules
 *	  the call after the policy's delay (or retries.retry()'s 'after', or
 *	  what delay_fn returns);
 *	- anything else fails the call for good and calls on_exhausted.
 *
 * Before the function runs, the things that make a call impossible are
 * checked: the role and function still exist, the role may log in and
 * execute the function, and the arguments still convert.  Each fails the
 * call for good, whatever retry_on says.
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
#include "engine/execute.h"
#include "engine/outcome.h"
#include "engine/runner.h"
#include "engine/policies.h"
#include "engine/sandbox.h"
#include "engine/time_cap.h"
#include "flow/flow.h"
#include "tables/tables.h"


/* Where run_sandboxed() was when an error came */
typedef enum SandboxStep
{
	STEP_ARGUMENTS,				/* converting the call's arguments */
	STEP_FUNCTION,				/* running the function (or a hook) */
	STEP_RESULT					/* converting its result to jsonb */
} SandboxStep;


/*
 * The time limit of an attempt (its policy's timeout, or the cap
 * retries.max_attempt_time): when it passes, the attempt is cancelled as a
 * statement timeout would cancel a statement.  A function may trap that
 * cancel (EXCEPTION WHEN query_canceled) and go on; so the limit holds by
 * two more means: an attempt that returns after its cancel is failed as a
 * timeout all the same (run_sandboxed), and one that is still running
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

/* The worker's, told when a hook starts and ends (execute_init) */
static ExecuteHookPhase hook_phase_callback = NULL;

static void record_hook_error(int64 call_id, int32 attempt, const char *error);

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
 * execute_attempt_killed -- whether the worker is exiting because an
 * attempt went on past its time limit after its cancel; if so, the limit
 * as text into *limit
 */
bool
execute_attempt_killed(const char **limit)
{
	*limit = attempt_limit_text;
	return attempt_killed;
}

/*
 * execute_init -- set up what attempts need (once per worker)
 */
void
execute_init(ExecuteHookPhase hook_phase)
{
	hook_phase_callback = hook_phase;
	policies_init();
	time_cap_init(attempt_timeout_handler, attempt_kill_handler);
}

/*
 * attempt_time_limit -- how long an attempt (or a hook) may run, in
 * microseconds, -1 for no limit: the policy's timeout, capped at
 * retries.max_attempt_time; *capped tells whether the cap is what applies
 */
static int64
attempt_time_limit(const CachedPolicy *policy, bool *capped)
{
	int64		cap = (int64) retries_max_attempt_time * USECS_PER_SEC;
	int64		timeout = policy != NULL ? policy->timeout : -1;

	*capped = cap > 0 && (timeout < 0 || timeout > cap);
	return *capped ? cap : timeout;
}

/*
 * log_capped -- say, once per worker, that an attempt ran into
 * retries.max_attempt_time
 */
static void
log_capped(const RetriesCall *call, int32 attempt, const char *cap)
{
	static bool logged = false;

	if (logged)
		return;
	ereport(LOG,
			(errmsg("retries: attempt %d of call " INT64_FORMAT " ran past retries.max_attempt_time (%s) and was cancelled",
					attempt, call->id, cap),
			 errdetail("This is logged once per worker."),
			 errhint("Give the function's policy a timeout that suits it, or raise retries.max_attempt_time.")));
	logged = true;
}

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
 * to_jsonb() as called for results of one type: its FmgrInfo, whose
 * fn_expr tells it the type of its argument, in a memory context of its
 * own, made again when a result of another type comes (a batch mostly
 * calls one function)
 */
static MemoryContext to_jsonb_cxt = NULL;
static Oid	to_jsonb_type = InvalidOid;
static FmgrInfo to_jsonb_flinfo;

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
 * evaluate_in_sandbox -- what run_sandboxed() runs in its subtransaction:
 * the call, and, for the call itself ('keep'), its result converted to
 * jsonb and checked (*step says which is under way)
 *
 * A function of its own, not inlined, so that its locals are not those of
 * run_sandboxed(), which a longjmp out of the subtransaction could clobber.
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
 * run_sandboxed -- run a function (the call, or one of its hooks) as
 * 'role', in a subtransaction and the sandbox of sandbox.c; on error,
 * return its ErrorData (in the caller's memory context) and roll the
 * subtransaction back
 *
 * For the call itself, 'stored_args' are its canonical arguments, which
 * are converted inside the sandbox (a domain's check or a default is the
 * role's code too), and its result is returned as jsonb, converted and
 * checked against retries.max_result_size inside the sandbox too; *step
 * tells the caller where an error happened.  Hooks pass their argument
 * expressions in 'given_args', and get their result as it is.  With
 * 'result', the result is returned in the caller's memory context.
 *
 * The attempt's timeout covers everything the role's code runs, deferred
 * triggers included.  A timeout that fires as the code returns leaves a
 * cancel pending that belongs to nobody: it is cleared, so that it cannot
 * cancel the worker's own bookkeeping or the next call.
 */
static ErrorData *
run_sandboxed(Oid role, Oid fnoid, Jsonb *stored_args, MemoryContext argcxt,
			  List *given_args, int64 timeout, SandboxStep *step, Datum *result,
			  bool *isnull)
{
	MemoryContext oldcxt = CurrentMemoryContext;
	ResourceOwner oldowner = CurrentResourceOwner;
	ErrorData  *volatile edata = NULL;
	List	   *volatile args = given_args;
	Sandbox		sb;

	memset(&sb, 0, sizeof(sb));
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
 * precheck -- can this call's attempt start?  It cannot if its role or its
 * function is gone, or if the role may no longer do what a direct call of
 * the function needs: log in to this database (LOGIN, VALID UNTIL,
 * CONNECT), EXECUTE the function, use its schema.  Each of those fails the
 * call for good, with 42501 for a privilege, whatever retry_on says.
 *
 * Fills 'out' with a failure naming the reason, and returns false.
 */
static bool
precheck(const RetriesCall *call, const CachedPolicy *policy, Outcome *out)
{
	const char *hint = NULL;
	char	   *lacks;

	if (!SearchSysCacheExists1(AUTHOID, ObjectIdGetDatum(call->role)))
	{
		outcome_set_error(out, ERRCODE_UNDEFINED_OBJECT,
						  psprintf("role %u that scheduled the call no longer exists",
								   call->role), NULL, NULL, NULL);
		return false;
	}
	if ((lacks = access_login_privilege(call->role, &hint)) != NULL)
	{
		outcome_set_error(out, ERRCODE_INSUFFICIENT_PRIVILEGE, lacks, NULL, hint, NULL);
		return false;
	}
	if (!SearchSysCacheExists1(PROCOID, ObjectIdGetDatum(policy->fn)))
	{
		outcome_set_error(out, ERRCODE_UNDEFINED_FUNCTION,
						  psprintf("function %s no longer exists", policy->fn_signature),
						  NULL, NULL, NULL);
		return false;
	}
	if ((lacks = access_call_privilege(policy->fn, call->role)) != NULL)
	{
		outcome_set_error(out, ERRCODE_INSUFFICIENT_PRIVILEGE, lacks, NULL,
						  "A call needs what a direct call of its function needs, at each attempt.",
						  NULL);
		return false;
	}
	return true;
}

static char *hook_signature_wrong(Oid hook, List *args, Oid rettype);

/*
 * run_hook -- run a hook of a call's policy (on_exhausted, delay_fn) with
 * these argument expressions, as run_sandboxed() runs code: under
 * retries.max_attempt_time, with the worker told which hook runs (see
 * hook_phase in worker.c); on error, its ErrorData
 *
 * A hook is the choice of whoever annotated the function, its owner (or a
 * superuser acting for it): it runs as the owner of the annotated
 * function as it is now, as if in a login session of that owner, never as
 * the role that scheduled the call, which chose neither the hook nor its
 * code (doc/architecture.md, "Trust").  Like the body of a SECURITY
 * DEFINER function, it runs whether or not the owner may log in.
 *
 * The hook runs only if it is the owner's code or a superuser's (the
 * function may have changed hands since it was annotated: its former
 * owner's hook would run with the new owner's rights), and if the owner
 * may call it as a direct call would: it may have been dropped, or its
 * privileges revoked, since the policy was written.  If not, the error is
 * a 42501 that says so.
 */
static ErrorData *
run_hook(const RetriesCall *call, const CachedPolicy *policy, int32 attempt,
		 ExecuteHook which, Oid hook, List *args, Datum *result, bool *isnull)
{
	ErrorData  *edata;
	char	   *lacks = NULL;
	char	   *wrong;
	bool		capped;
	SandboxStep step;
	Oid			owner = schema_function_owner(policy->fn);

	if (!OidIsValid(owner))
		lacks = psprintf("function %s no longer exists", policy->fn_signature);
	else if (!SearchSysCacheExists1(PROCOID, ObjectIdGetDatum(hook)))
		lacks = psprintf("function %u no longer exists", hook);
	else if ((wrong = hook_signature_wrong(hook, args,
										   which == HOOK_DELAY_FN ? INTERVALOID : InvalidOid)) != NULL)
	{
		edata = palloc0(sizeof(ErrorData));
		edata->sqlerrcode = ERRCODE_INVALID_FUNCTION_DEFINITION;
		edata->message = wrong;
		return edata;
	}
	else if ((lacks = access_hook_owner(hook, owner,
										which == HOOK_DELAY_FN ? "delay_fn" : "on_exhausted")) == NULL)
		lacks = access_call_privilege(hook, owner);
	if (lacks != NULL)
	{
		edata = palloc0(sizeof(ErrorData));
		edata->sqlerrcode = ERRCODE_INSUFFICIENT_PRIVILEGE;
		edata->message = lacks;
		return edata;
	}
	if (hook_phase_callback != NULL)
		hook_phase_callback(call->id, attempt, which);
	edata = run_sandboxed(owner, hook, NULL, NULL, args,
						  attempt_time_limit(NULL, &capped), &step, result, isnull);
	if (hook_phase_callback != NULL)
		hook_phase_callback(call->id, attempt, HOOK_NONE);
	return edata;
}

/*
 * hook_signature_wrong -- why 'hook' may not be called with 'args' (Consts)
 * for a result of type 'rettype' (InvalidOid: any that is not a pseudo-type
 * but void or record), or NULL if it may
 *
 * annotate() refuses such hooks, but a restore writes policy_data as the
 * dump has it: a hook called with Datums of other types than its own, or
 * whose result is read as an interval that it is not, read memory where
 * they pointed, and crashed the server (the thirteenth hostile review).  So
 * the signature is checked where the hook is called, too.
 */
static char *
hook_signature_wrong(Oid hook, List *args, Oid rettype)
{
	HeapTuple	tup = SearchSysCache1(PROCOID, ObjectIdGetDatum(hook));
	Form_pg_proc proc;
	bool		ok;
	int			i = 0;
	ListCell   *lc;

	if (!HeapTupleIsValid(tup))
		return psprintf("function %u no longer exists", hook);
	proc = (Form_pg_proc) GETSTRUCT(tup);
	ok = proc->prokind == PROKIND_FUNCTION && !proc->proretset &&
		proc->pronargs == list_length(args);
	if (OidIsValid(rettype))
		ok = ok && proc->prorettype == rettype;
	else
		ok = ok && (get_typtype(proc->prorettype) != TYPTYPE_PSEUDO ||
					proc->prorettype == VOIDOID || proc->prorettype == RECORDOID);
	foreach(lc, args)
	{
		if (!ok)
			break;
		ok = proc->proargtypes.values[i++] == exprType((Node *) lfirst(lc));
	}
	ReleaseSysCache(tup);
	if (ok)
		return NULL;
	return psprintf("hook %s has the wrong signature: it is not called",
					format_procedure(hook));
}

/*
 * hook_error_shown -- may a hook's error be shown, in full, on the call
 * whose failure ran it?  A hook runs as the owner of the annotated
 * function, and its error may carry what that owner's code read: the
 * call's role sees it if she is that owner (or a superuser); another role
 * sees its SQLSTATE only (the thirty-second hostile review, t/066 8).
 */
static bool
hook_error_shown(const RetriesCall *call, const CachedPolicy *policy)
{
	return schema_function_owner(policy->fn) == call->role ||
		superuser_arg(call->role);
}

/*
 * hook_error_text -- a hook's error message as the call shows it (see
 * hook_error_shown)
 */
static const char *
hook_error_text(const RetriesCall *call, const CachedPolicy *policy,
				const ErrorData *edata)
{
	if (hook_error_shown(call, policy))
		return edata->message;
	return "its message is shown only to the owner of the function";
}

/*
 * choose_delay -- the delay before the next attempt after a retryable error,
 * or false (with 'out' set to a failure) when delay_fn says to stop or fails
 */
static bool
choose_delay(const RetriesCall *call, const CachedPolicy *policy, int32 attempt,
			 Outcome *out)
{
	if (retries_retry_after_usecs >= 0 && strcmp(out->sqlstate, "RT000") == 0)
	{
		out->delay = retries_retry_after_usecs;
		return true;
	}

	if (OidIsValid(policy->delay_fn))
	{
		List	   *args;
		Datum		result;
		bool		isnull;
		ErrorData  *edata;

		args = list_make3(makeConst(INT4OID, -1, InvalidOid, 4,
									Int32GetDatum(attempt), false, true),
						  makeConst(TEXTOID, -1, DEFAULT_COLLATION_OID, -1,
									CStringGetTextDatum(out->sqlstate), false, false),
						  makeConst(TEXTOID, -1, DEFAULT_COLLATION_OID, -1,
									CStringGetTextDatum(out->message ? out->message : ""),
									out->message == NULL, false));
		edata = run_hook(call, policy, attempt, HOOK_DELAY_FN, policy->delay_fn, args,
						 &result, &isnull);
		if (edata != NULL)
		{
			bool		shown = hook_error_shown(call, policy);

			out->detail = psprintf("The attempt failed with %s: %s",
								   out->sqlstate, out->message ? out->message : "");

			outcome_set_error(out, edata->sqlerrcode,
							  psprintf("delay_fn %s failed: %s",
									   format_procedure(policy->delay_fn),
									   hook_error_text(call, policy, edata)),
							  out->detail, shown ? edata->hint : NULL,
							  shown ? edata->context : NULL);
			return false;
		}
		if (isnull)
		{
			out->hint = pstrdup("delay_fn returned NULL, which stops the retries.");
			return false;
		}
		out->delay = args_interval_to_delay(DatumGetIntervalP(result));
		return true;
	}

	out->delay = policy_jitter(policy_delay(policy->min_delay, policy->max_delay,
											policy->multiplier, attempt),
							   policy->jitter,
							   pg_prng_uint64(&pg_global_prng_state));
	return true;
}

/*
 * next_delay -- the delay before the next attempt after a retryable error
 * (see choose_delay), raised to retries.min_delay: attempts retried with no
 * delay, by a policy or by retries.retry(after => '0'), could otherwise
 * write attempt rows as fast as a worker runs
 */
static bool
next_delay(const RetriesCall *call, const CachedPolicy *policy, int32 attempt,
		   Outcome *out)
{
	static bool logged = false;
	int64		floor = (int64) retries_min_delay * 1000;

	if (!choose_delay(call, policy, attempt, out))
		return false;
	if (out->delay < floor)
	{
		if (!logged)
		{
			char		asked[POLICY_FORMAT_LEN];
			char		given[POLICY_FORMAT_LEN];

			policy_format_duration(out->delay, asked, sizeof(asked));
			policy_format_duration(floor, given, sizeof(given));
			ereport(LOG,
					(errmsg("retries: the retry of call " INT64_FORMAT " waits retries.min_delay (%s), not the %s its policy asked for",
							call->id, given, asked),
					 errdetail("This is logged once per worker."),
					 errhint("Lower retries.min_delay to let retries come sooner.")));
			logged = true;
		}
		out->delay = floor;
	}
	return true;
}

/*
 * run_on_exhausted -- call the policy's on_exhausted hook for a call that
 * failed for good, as the call's owner; its error is added to the attempt's
 * row and never changes the call's state
 */
static void
run_on_exhausted(const RetriesCall *call, const CachedPolicy *policy, int32 attempt)
{
	List	   *args;
	Datum		result;
	bool		isnull;
	ErrorData  *edata;

	if (!OidIsValid(policy->on_exhausted) ||
		!SearchSysCacheExists1(AUTHOID, ObjectIdGetDatum(call->role)))
		return;

	CommandCounterIncrement();
	args = list_make1(makeConst(INT8OID, -1, InvalidOid, 8,
								Int64GetDatum(call->id), false, FLOAT8PASSBYVAL));
	edata = run_hook(call, policy, attempt, HOOK_ON_EXHAUSTED, policy->on_exhausted, args,
					 &result, &isnull);
	if (edata == NULL)
		return;
	record_hook_error(call->id, attempt, psprintf("%s: %s",
												  unpack_sql_state(edata->sqlerrcode),
												  hook_error_text(call, policy, edata)));
}

/*
 * record_hook_error -- add the error of its on_exhausted hook to an
 * attempt's row
 */
static void
record_hook_error(int64 call_id, int32 attempt, const char *error)
{
	static SPIPlanPtr plan = NULL;
	Oid			argtypes[3] = {INT8OID, INT4OID, TEXTOID};
	Datum		values[3];

	values[0] = Int64GetDatum(call_id);
	values[1] = Int32GetDatum(attempt);
	values[2] = CStringGetTextDatum(args_valid_text(error));
	plans_prepare_kept(&plan,
					   "UPDATE retries.attempt_data SET on_exhausted_error = $3"
					   " WHERE call_id OPERATOR(pg_catalog.=) $1"
					   " AND attempt OPERATOR(pg_catalog.=) $2",
					   3, argtypes);
	if (SPI_execute_plan(plan, values, NULL, false, 0) != SPI_OK_UPDATE)
		elog(ERROR, "retries: could not record the on_exhausted error of call " INT64_FORMAT,
			 call_id);
}

/*
 * finish_failure -- a failed attempt: retry if the error is retryable and
 * the budget allows, else fail for good
 */
static void
finish_failure(const RetriesCall *call, const CachedPolicy *policy, int32 attempt,
			   bool retryable, Outcome *out)
{
	bool		exhausted = call->max_attempts > 0 && attempt >= call->max_attempts;

	if (retryable && !exhausted && next_delay(call, policy, attempt, out))
	{
		out->state = call_state_change(CALL_RUNNING, CALL_SCHEDULED);
		if (out->outcome == OUTCOME_FAILED)
			out->outcome = OUTCOME_RETRY;
		return;
	}
	out->state = call_state_change(CALL_RUNNING, CALL_FAILED);
	out->delay = -1;
	if (retryable && exhausted && out->hint == NULL)
		out->hint = psprintf("All %d attempts are used.", call->max_attempts);
}

/*
 * fail_without_policy -- a call whose policy row is gone (deleted by hand:
 * the extension never deletes one) cannot run: it fails, saying so, and
 * has no on_exhausted to call
 */
static void
fail_without_policy(const RetriesCall *call, int32 attempt,
					TimestampTz started_at, Outcome *out)
{
	out->outcome = OUTCOME_FAILED;
	out->state = call_state_change(CALL_RUNNING, CALL_FAILED);
	outcome_set_error(out, ERRCODE_UNDEFINED_OBJECT,
					  psprintf("policy %d of the call no longer exists", call->policy_id),
					  "Rows of retries.policy_data are never deleted by the extension.",
					  "Schedule the call again, with retries.call().", NULL);
	outcome_record(call, attempt, started_at, out);
}

/*
 * execute_finish_batch -- write the outcomes the batch has queued (its
 * successes and retries); called inside SPI before the batch commits
 */
void
execute_finish_batch(void)
{
	outcome_flush();
}

/*
 * read_args -- the stored arguments of call 'id', which its batch has
 * claimed, copied into the current memory context (for calls whose
 * arguments were too large to copy when they were claimed: see claim.c)
 */
static Jsonb *
read_args(int64 id)
{
	static SPIPlanPtr plan = NULL;
	Oid			argtypes[1] = {INT8OID};
	Datum		values[1] = {Int64GetDatum(id)};
	MemoryContext cxt = CurrentMemoryContext;
	bool		isnull;
	Datum		d;
	Jsonb	   *args;

	plans_prepare_kept(&plan,
					   "SELECT args FROM retries.call_data WHERE id OPERATOR(pg_catalog.=) $1",
					   1, argtypes);
	if (SPI_execute_plan(plan, values, NULL, true, 1) != SPI_OK_SELECT ||
		SPI_processed != 1)
		elog(ERROR, "retries: could not read the arguments of call " INT64_FORMAT, id);
	d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	/* SPI left its procedure's memory current */
	MemoryContextSwitchTo(cxt);
	args = DatumGetJsonbPCopy(d);
	SPI_freetuptable(SPI_tuptable);
	return args;
}

/*
 * set_timed_out -- an attempt stopped at its time limit ('timeout', which
 * is retries.max_attempt_time if 'capped'), whatever it raised once it was
 * cancelled: outcome timeout, SQLSTATE 57014
 */
static void
set_timed_out(const RetriesCall *call, int32 attempt, int64 timeout, bool capped,
			  Outcome *out)
{
	char		buf[POLICY_FORMAT_LEN];

	policy_format_duration(timeout, buf, sizeof(buf));
	out->outcome = OUTCOME_TIMEOUT;
	strlcpy(out->sqlstate, "57014", sizeof(out->sqlstate));
	out->message = capped ?
		psprintf("attempt ran past retries.max_attempt_time (%s)", buf) :
		psprintf("attempt timed out after %s", buf);
	if (capped)
		log_capped(call, attempt, buf);
}

/*
 * classify_error -- the outcome of an attempt that ended with an error
 * ('step' tells where, 'timeout' and 'capped' its time limit): failed for
 * good, or to be retried, as its policy says, into *out
 */
static void
classify_error(const RetriesCall *call, const CachedPolicy *policy, int32 attempt,
			   const ErrorData *edata, SandboxStep step, int64 timeout, bool capped,
			   Outcome *out)
{
	outcome_set_error(out, edata->sqlerrcode, edata->message, edata->detail,
					  edata->hint, edata->context);
	if (step == STEP_ARGUMENTS)
	{
		out->outcome = OUTCOME_FAILED;
		out->message = psprintf("arguments can no longer be converted: %s", edata->message);
		finish_failure(call, policy, attempt, false, out);
	}
	else if (attempt_timed_out)
	{
		set_timed_out(call, attempt, timeout, capped, out);
		finish_failure(call, policy, attempt,
					   policy_retries_sqlstate((const char (*)[POLICY_SQLSTATE_ENTRY_LEN]) policy->retry_on,
											   policy->nretry_on, "57014"),
					   out);
	}
	else if (step == STEP_RESULT)
	{
		/*
		 * the same result would come back: not retried, whatever retry_on
		 * says
		 */
		out->outcome = OUTCOME_FAILED;
		out->detail = pstrdup("The function returned, but its result could not be kept, so its effects were rolled back; a result is not retried.");
		finish_failure(call, policy, attempt, false, out);
	}
	else
	{
		out->outcome = OUTCOME_FAILED;
		finish_failure(call, policy, attempt,
					   policy_retries_sqlstate((const char (*)[POLICY_SQLSTATE_ENTRY_LEN]) policy->retry_on,
											   policy->nretry_on, out->sqlstate),
					   out);
	}
}

/*
 * execute_attempt -- run the next attempt of a claimed call and record it
 *
 * Called by a worker inside its batch transaction and SPI connection.
 * Returns true if the attempt succeeded.
 */
bool
execute_attempt(RetriesCall *call)
{
	CachedPolicy *policy = policies_get(call->policy_id);
	int32		attempt = call->attempts + 1;
	TimestampTz started_at = clock_system_now();
	Outcome		out;
	SandboxStep step;
	Datum		result;
	bool		isnull;
	ErrorData  *edata;
	int64		timeout;
	bool		capped;
	Jsonb	   *args;
	MemoryContext argcxt = NULL;

	memset(&out, 0, sizeof(out));
	out.delay = -1;

	if (policy == NULL)
	{
		fail_without_policy(call, attempt, started_at, &out);
		return false;
	}
	out.notify = policy->notify;

	if (!precheck(call, policy, &out))
	{
		out.outcome = OUTCOME_FAILED;
		out.state = call_state_change(CALL_RUNNING, CALL_FAILED);
		outcome_record(call, attempt, started_at, &out);
		run_on_exhausted(call, policy, attempt);
		return false;
	}

	retries_current_call_id = call->id;
	retries_current_call_role = call->role;
	retries_current_attempt_number = attempt;
	retries_retry_after_usecs = -1;
	timeout = attempt_time_limit(policy, &capped);
	args = call->args;
	if (call->args_deferred)
	{
		/* large: read now, and freed with what is made of them */
		MemoryContext oldcxt;

		argcxt = AllocSetContextCreate(CurrentMemoryContext, "retries call arguments",
									   ALLOCSET_DEFAULT_SIZES);
		oldcxt = MemoryContextSwitchTo(argcxt);
		args = read_args(call->id);
		MemoryContextSwitchTo(oldcxt);
	}
	edata = run_sandboxed(call->role, policy->fn, args, argcxt, NIL, timeout,
						  &step, &result, &isnull);
	if (argcxt != NULL)
		MemoryContextDelete(argcxt);
	retries_current_call_id = 0;
	retries_current_call_role = InvalidOid;
	retries_current_attempt_number = 0;

	/*
	 * It would have waited for a name while its batch held others: not run,
	 * and not charged; it stays due, and the worker ends the batch
	 * (name_locks.c)
	 */
	if (edata != NULL && edata->sqlerrcode == ERRCODE_LOCK_NOT_AVAILABLE &&
		tables_name_refused())
		return false;

	if (edata == NULL)
	{
		out.outcome = OUTCOME_SUCCEEDED;
		out.state = call_state_change(CALL_RUNNING, CALL_SUCCEEDED);
		out.result = isnull ? NULL : DatumGetJsonbP(result);
		outcome_queue(call, attempt, started_at, &out);
		return true;
	}

	classify_error(call, policy, attempt, edata, step, timeout, capped, &out);
	if (out.state == CALL_FAILED)
	{
		outcome_record(call, attempt, started_at, &out);
		run_on_exhausted(call, policy, attempt);
	}
	else
		outcome_queue(call, attempt, started_at, &out);	/* a retry */
	return false;
}

/*
 * execute_call_function -- the function a call calls, InvalidOid if its
 * policy or function is gone (execute_attempt fails such a call), and in
 * *key its key (names.c), which names its gate
 */
Oid
execute_call_function(const RetriesCall *call, Oid *key)
{
	CachedPolicy *policy = policies_get(call->policy_id);

	*key = policy != NULL ? policy->fn_key : InvalidOid;
	return policy != NULL ? policy->fn : InvalidOid;
}

/*
 * interrupted_outcome -- begin the outcome of an interrupted attempt of
 * 'call' in *out; its policy, or NULL if it has none: the call has then
 * been failed (fail_without_policy), and there is nothing more to record
 */
static CachedPolicy *
interrupted_outcome(RetriesCall *call, int32 attempt, Outcome *out)
{
	CachedPolicy *policy = policies_get(call->policy_id);

	memset(out, 0, sizeof(*out));
	out->delay = -1;
	if (policy == NULL)
	{
		fail_without_policy(call, attempt, clock_system_now(), out);
		return NULL;
	}
	out->notify = policy->notify;
	out->outcome = OUTCOME_INTERRUPTED;
	return policy;
}

/*
 * charge_interruption -- record the interrupted attempt begun in *out
 * with error 'sqlstate', 'message' and 'detail': it counts, and the call
 * is retried after its delay whatever retry_on says, or fails (and its
 * on_exhausted hook runs) if that was its last attempt
 */
static void
charge_interruption(RetriesCall *call, CachedPolicy *policy, int32 attempt, Outcome *out,
					TimestampTz started, int sqlstate, const char *message,
					const char *detail)
{
	outcome_set_error(out, sqlstate, message, detail, NULL, NULL);
	finish_failure(call, policy, attempt, true, out);
	outcome_record(call, attempt, started, out);
	if (out->state == CALL_FAILED)
		run_on_exhausted(call, policy, attempt);
}

/*
 * allow_another_attempt -- one more attempt for 'call', if it has a limit
 */
static void
allow_another_attempt(RetriesCall *call)
{
	static SPIPlanPtr plan = NULL;
	Oid			argtypes[1] = {INT8OID};
	Datum		values[1] = {Int64GetDatum(call->id)};

	if (call->max_attempts <= 0)
		return;
	plans_prepare_kept(&plan,
					   "UPDATE retries.call_data SET max_attempts = max_attempts OPERATOR(pg_catalog.+) 1"
					   " WHERE id OPERATOR(pg_catalog.=) $1 AND max_attempts IS NOT NULL",
					   1, argtypes);
	if (SPI_execute_plan(plan, values, NULL, false, 0) != SPI_OK_UPDATE)
		elog(ERROR, "retries: could not allow call " INT64_FORMAT " another attempt", call->id);
	call->max_attempts++;
}

/*
 * charge_stop -- record an attempt that the extension's own stop of its
 * worker cut short (see execute_interrupted)
 */
static void
charge_stop(RetriesCall *call, int32 attempt, TimestampTz started)
{
	CachedPolicy *policy;
	Outcome		out;

	ereport(LOG,
			(errmsg("retries: attempt %d of call " INT64_FORMAT " was cut short by a stop of its worker for a command on its database; the call is given another",
					attempt, call->id)));
	policy = interrupted_outcome(call, attempt, &out);
	if (policy == NULL)
		return;
	charge_interruption(call, policy, attempt, &out, started, ERRCODE_ADMIN_SHUTDOWN,
						"the worker running this attempt was stopped for a command on its database",
						"DROP DATABASE, ALTER DATABASE (RENAME, SET TABLESPACE, ALLOW_CONNECTIONS false), CREATE DATABASE from it as a template, or DROP EXTENSION stopped the database's workers; the attempt's effects were rolled back, and it does not use up one of the call's attempts.");
}

/*
 * execute_interrupted -- record that an attempt was cut short by a crash or
 * a killed worker: it counts, and the call is retried after its delay or
 * fails if that was its last attempt.  'started' is when it started (0 if
 * unknown: then now); it finished when it is charged.
 *
 * 'stopped': the extension itself stopped the worker, for a command that
 * needs the database alone (DROP DATABASE, a rename, CREATE DATABASE from
 * it as a template, SET TABLESPACE) or a database that takes no more
 * connections.  The attempt is recorded all the same, but the call is
 * given one more (its max_attempts grows by one): the call did nothing to
 * stop it, and a database's owner who ran such commands again and again,
 * even ones that PostgreSQL then refused, had every role's calls there
 * fail (the thirteenth and fifteenth hostile reviews).  Never for an
 * attempt in a runner (recovery_note_exit), which commits what it ran on its
 * own: it is charged as a killed worker's.
 *
 * The one way an interrupted attempt is charged: by the recovery of a dead
 * worker's slot, or by the worker that claims the call later (worker.c).
 */
void
execute_interrupted(RetriesCall *call, int32 attempt, ExecuteHook in_hook,
					TimestampTz started, bool stopped)
{
	CachedPolicy *policy;
	Outcome		out;

	if (started == 0)
		started = clock_system_now();
	if (stopped && in_hook == HOOK_NONE)
	{
		allow_another_attempt(call);
		charge_stop(call, attempt, started);
		return;
	}

	ereport(LOG,
			(errmsg("retries: attempt %d of call " INT64_FORMAT " was interrupted",
					attempt, call->id)));
	policy = interrupted_outcome(call, attempt, &out);
	if (policy == NULL)
		return;
	if (in_hook == HOOK_ON_EXHAUSTED)
	{
		/* the call had failed for good: it fails, its hook is not run again */
		outcome_set_error(&out, ERRCODE_ADMIN_SHUTDOWN,
						  "the worker was interrupted while the on_exhausted hook of this failed attempt ran",
						  "The call had failed for good; the record of its failure was rolled back with the hook, whose effects were rolled back too.",
						  NULL, NULL);
		out.state = call_state_change(CALL_RUNNING, CALL_FAILED);
		outcome_record(call, attempt, started, &out);
		record_hook_error(call->id, attempt,
						  "57P01: interrupted (the hook went on past its time limit, or the server crashed or the worker was killed); it is not run again");
		return;
	}
	if (in_hook == HOOK_DELAY_FN)
	{
		/* as when delay_fn fails: the call fails, naming it */
		outcome_set_error(&out, ERRCODE_ADMIN_SHUTDOWN,
						  psprintf("delay_fn %s was interrupted (it went on past its time limit, or the server crashed or the worker was killed)",
								   format_procedure(policy->delay_fn)),
						  "The attempt had failed with a retryable error, and its delay_fn ran to choose the delay; the record of the attempt was rolled back with it.",
						  NULL, NULL);
		out.state = call_state_change(CALL_RUNNING, CALL_FAILED);
		outcome_record(call, attempt, started, &out);
		run_on_exhausted(call, policy, attempt);
		return;
	}
	charge_interruption(call, policy, attempt, &out, started, ERRCODE_ADMIN_SHUTDOWN,
						"the worker running this attempt was interrupted",
						"The server crashed, or the process running the attempt was killed or stopped, while the attempt ran; what it had not committed was rolled back.");
}


/*
 * execute_commit_failed -- record the attempt of a one-call batch that ran,
 * but whose transaction could not commit, with the commit's error (edata):
 * as an interruption, it counts, and the call is retried after its delay
 * whatever retry_on says, or fails if that was its last attempt
 *
 * What fails a commit is not the call's function but the transaction
 * around it: Citus's two-phase commit, when a node it wrote to is lost, a
 * name it gives a prepared transaction is taken, or a deferred trigger
 * fires on another node (see commit_failure in worker.c).
 */
void
execute_commit_failed(RetriesCall *call, int32 attempt, const ErrorData *edata)
{
	Outcome		out;
	CachedPolicy *policy = interrupted_outcome(call, attempt, &out);

	if (policy == NULL)
		return;
	charge_interruption(call, policy, attempt, &out, clock_system_now(),
						edata->sqlerrcode,
						psprintf("the attempt's transaction could not commit: %s", edata->message),
						"The function returned, but the commit of its transaction failed (a node of a distributed transaction was lost, say); its effects were rolled back.");
}


/*
 * execute_is_procedure -- is the call's function a procedure, whose calls
 * run alone, in a runner (runner.c)?
 */
bool
execute_is_procedure(const RetriesCall *call)
{
	CachedPolicy *policy = policies_get(call->policy_id);

	return policy != NULL && policy->procedure;
}

/*
 * code_owner -- the owner of the function of 'policy' (NULL: none), if it
 * is neither the call's role nor a superuser, else InvalidOid
 */
static Oid
code_owner(const CachedPolicy *policy, const RetriesCall *call)
{
	Oid			owner;

	if (policy == NULL || !OidIsValid(policy->fn))
		return InvalidOid;
	owner = schema_function_owner(policy->fn);
	if (!OidIsValid(owner) || owner == call->role || superuser_arg(owner))
		return InvalidOid;
	return owner;
}

/*
 * execute_foreign_owner -- the role whose choice the call's code is, as far
 * as is known before it runs, if that role is neither the call's nor a
 * superuser: the owner of its function (whose body that role wrote, and
 * whose policy, time limit and hooks it chose); else InvalidOid.  Such
 * code may end the worker (a cancel it traps past its time limit), which
 * rolls back its batch, SECURITY DEFINER or not: worker.c keeps the calls
 * of one such owner in batches of their own (doc/architecture.md,
 * "Trust").
 */
Oid
execute_foreign_owner(const RetriesCall *call)
{
	CachedPolicy *policy = policies_get(call->policy_id);

	if (policy == NULL || policy->procedure)
		return InvalidOid;
	return code_owner(policy, call);
}

/*
 * execute_code_owner -- the owner of the function or procedure that the
 * call runs, if that is neither the caller nor a superuser (another role's
 * code), else InvalidOid.  A runner that runs another role's procedure is
 * held as a batch of its functions is (worker.c, other_holds).
 */
Oid
execute_code_owner(const RetriesCall *call)
{
	return code_owner(policies_get(call->policy_id), call);
}

/*
 * set_next_attempt -- make call 'id' due at 'when' (an SQL expression), by
 * the statement prepared in *plan
 */
static void
set_next_attempt(SPIPlanPtr *plan, int64 id, const char *when)
{
	Oid			argtypes[1] = {INT8OID};
	Datum		values[1] = {Int64GetDatum(id)};

	plans_prepare_kept(plan,
					   psprintf("UPDATE retries.call_data SET next_attempt = %s"
								" WHERE id OPERATOR(pg_catalog.=) $1", when),
					   1, argtypes);
	if (SPI_execute_plan(*plan, values, NULL, false, 0) != SPI_OK_UPDATE)
		elog(ERROR, "retries: could not update call " INT64_FORMAT, id);
}

/*
 * elsewhere_check -- for a command that runs in another database (a call of
 * retries.command_in): that database, by its name in the arguments, into
 * *dboid, and the text into *sql; false, with the failure in 'out', if it
 * lacks what command_elsewhere_lacks() checks: the database, of the owner
 * it had when the command was made, the privileges to make such commands,
 * a login there (what precheck() checks of this database)
 */
static bool
elsewhere_check(const RetriesCall *call, Jsonb *args, Oid *dboid, char **sql,
				Outcome *out)
{
	char	   *database;
	char	   *owner;
	const char *owner_now;
	const char *hint;
	int			sqlerrcode;
	char	   *lacks;

	command_target(args, sql, &database, &owner);
	lacks = command_elsewhere_lacks(call->role, database, owner, dboid, &owner_now,
									&sqlerrcode, &hint);
	if (lacks == NULL)
		return true;
	outcome_set_error(out, sqlerrcode, lacks, NULL, hint, NULL);
	return false;
}

/*
 * execute_runner_begin -- in the batch's transaction, before a runner runs
 * the next attempt of a procedure's call: the checks an attempt makes
 * first (precheck), its arguments into *args (in the caller's memory) and
 * its time limit into *timeout, and the call made due at 'infinity', so
 * that no worker claims it while its runner runs, once the batch commits
 * (it stays 'scheduled', unfinished, and shows as running: worker.c's
 * set_state).  For a command that runs in another database (api/command.c)
 * that database into *dboid and its text into *sql; else InvalidOid and
 * NULL.  False if the attempt cannot start: its outcome is recorded.
 */
bool
execute_runner_begin(RetriesCall *call, Jsonb **args, int64 *timeout,
					 Oid *dboid, char **sql)
{
	static SPIPlanPtr plan = NULL;
	CachedPolicy *policy = policies_get(call->policy_id);
	int32		attempt = call->attempts + 1;
	Outcome		out;
	bool		capped;

	memset(&out, 0, sizeof(out));
	out.delay = -1;
	*dboid = InvalidOid;
	*sql = NULL;
	if (policy == NULL)
	{
		fail_without_policy(call, attempt, clock_system_now(), &out);
		return false;
	}
	out.notify = policy->notify;
	*args = call->args_deferred ? read_args(call->id) : call->args;
	if (!precheck(call, policy, &out) ||
		(policy->fn == schema_command_in_oid() &&
		 !elsewhere_check(call, *args, dboid, sql, &out)))
	{
		out.outcome = OUTCOME_FAILED;
		out.state = call_state_change(CALL_RUNNING, CALL_FAILED);
		outcome_record(call, attempt, clock_system_now(), &out);
		run_on_exhausted(call, policy, attempt);
		return false;
	}
	*timeout = attempt_time_limit(policy, &capped);
	set_next_attempt(&plan, call->id, "'infinity'::pg_catalog.timestamptz");
	return true;
}

/*
 * execute_runner_put_back -- a procedure's call that cannot start now (no
 * background worker slot for its runner, or the other workers wait for
 * theirs): scheduled again a second later, its attempt not charged
 */
void
execute_runner_put_back(const RetriesCall *call)
{
	static SPIPlanPtr plan = NULL;

	set_next_attempt(&plan, call->id,
					 "pg_catalog.clock_timestamp()"
					 " OPERATOR(pg_catalog.+) '1 second'::pg_catalog.interval");
}

/*
 * execute_runner_hold -- a procedure's call that waits for a place in a
 * runner (the other workers wait for theirs): held, out of every index the
 * workers claim from, uncharged, until execute_runner_release() lets it go
 * (held with no gate and waiting for no call is held for a runner alone:
 * a gate it passed is no longer its hold, and its release is not the
 * gate's; pass_gate() holds it at its gate again if the gate is closed
 * when it is next claimed)
 */
void
execute_runner_hold(const RetriesCall *call)
{
	static SPIPlanPtr plan = NULL;
	Oid			argtypes[1] = {INT8OID};
	Datum		values[1] = {Int64GetDatum(call->id)};

	plans_prepare_kept(&plan,
					   "UPDATE retries.call_data SET held = true, gate = NULL"
					   " WHERE id OPERATOR(pg_catalog.=) $1",
					   1, argtypes);
	if (SPI_execute_plan(plan, values, NULL, false, 0) != SPI_OK_UPDATE)
		elog(ERROR, "retries: could not hold call " INT64_FORMAT, call->id);
}

/*
 * execute_runner_release -- let go of up to 'places' calls held for a
 * runner, in turns between roles: each the earliest of the first role
 * after *last_role that has one (then from the first role again), which
 * it sets; returns how many.  A call that another transaction holds
 * locked is left for the next time, and so are the calls of the 'navoid'
 * roles of 'avoid'.
 */
int
execute_runner_release(int places, Oid *last_role, const Oid *avoid, int navoid)
{
	static SPIPlanPtr plan = NULL;
	Oid			argtypes[2] = {OIDOID, OIDARRAYOID};
	Datum	   *elems = palloc(sizeof(Datum) * Max(navoid, 1));
	Datum		avoided;
	int			released = 0;

	for (int i = 0; i < navoid; i++)
		elems[i] = ObjectIdGetDatum(avoid[i]);
	avoided = PointerGetDatum(construct_array(elems, navoid, OIDOID, sizeof(Oid),
											  true, TYPALIGN_INT));

	plans_prepare_kept(&plan,
					   "UPDATE retries.call_data c SET held = false"
					   " WHERE c.id OPERATOR(pg_catalog.=) (SELECT id FROM retries.call_data"
					   "  WHERE state OPERATOR(pg_catalog.=) 'scheduled' AND held"
					   "  AND gate IS NULL AND waiting_on OPERATOR(pg_catalog.=) 0"
					   "  AND scheduled_by::pg_catalog.oid OPERATOR(pg_catalog.<>) ALL ($2)"
					   "  ORDER BY scheduled_by::pg_catalog.oid OPERATOR(pg_catalog.<=) $1,"
					   "  scheduled_by, next_attempt LIMIT 1 FOR UPDATE SKIP LOCKED)"
					   " RETURNING c.scheduled_by::pg_catalog.oid",
					   2, argtypes);
	for (; released < places; released++)
	{
		Datum		values[2] = {ObjectIdGetDatum(*last_role), avoided};
		bool		isnull;

		if (SPI_execute_plan(plan, values, NULL, false, 0) != SPI_OK_UPDATE_RETURNING)
			elog(ERROR, "retries: could not release calls held for a runner");
		if (SPI_processed == 0)
			break;
		*last_role = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[0],
													SPI_tuptable->tupdesc, 1, &isnull));
	}
	return released;
}

/*
 * execute_runner_end -- record the outcome of an attempt that a runner
 * ran, as execute_attempt records one it ran itself: a success; an error,
 * retried per retry_on; the time limit reached (a timeout, as for an
 * attempt); or a runner that ended without a word (interrupted).  In a
 * transaction and SPI connection of its own.
 */
void
execute_runner_end(RetriesCall *call, TimestampTz started_at, int64 timeout,
				   const RunnerOutcome *ro)
{
	static SPIPlanPtr plan = NULL;
	CachedPolicy *policy = policies_get(call->policy_id);
	int32		attempt = call->attempts + 1;
	Oid			argtypes[2] = {INT8OID, TIMESTAMPTZOID};
	Datum		values[2] = {Int64GetDatum(call->id), TimestampTzGetDatum(started_at)};
	bool		cancelled;
	Outcome		out;

	/*
	 * Due again when the attempt started, as a call of a batch is left (a
	 * retry moves it on); and a cancel() that came after the batch that
	 * made it due at 'infinity' committed, and before the runner started,
	 * stands: the attempt is recorded, the call stays cancelled
	 */
	plans_prepare_kept(&plan,
					   "UPDATE retries.call_data SET next_attempt = $2"
					   " WHERE id OPERATOR(pg_catalog.=) $1"
					   " AND next_attempt OPERATOR(pg_catalog.=) 'infinity'::pg_catalog.timestamptz"
					   " RETURNING state OPERATOR(pg_catalog.=) 'cancelled'",
					   2, argtypes);
	if (SPI_execute_plan(plan, values, NULL, false, 0) != SPI_OK_UPDATE_RETURNING)
		elog(ERROR, "retries: could not update call " INT64_FORMAT, call->id);
	cancelled = SPI_processed == 1 &&
		DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1,
								   &(bool) {false}));

	memset(&out, 0, sizeof(out));
	out.delay = -1;
	out.pid = ro->pid != 0 ? ro->pid : -1;
	out.command_tag = ro->command_tag[0] ? ro->command_tag : NULL;
	if (policy == NULL)
	{
		fail_without_policy(call, attempt, started_at, &out);
		return;
	}
	out.notify = policy->notify;
	if (cancelled && ro->status != RUNNER_LOST)
	{
		out.outcome = ro->status == RUNNER_SUCCEEDED ? OUTCOME_SUCCEEDED : OUTCOME_FAILED;
		if (ro->status != RUNNER_SUCCEEDED)
			outcome_set_error(&out, ro->sqlerrcode, ro->message, NULL, NULL, NULL);
		out.state = CALL_CANCELLED;
		outcome_record(call, attempt, started_at, &out);
		return;
	}
	if (ro->status == RUNNER_LOST)
	{
		execute_interrupted(call, attempt, HOOK_NONE, started_at, false);
		return;
	}
	if (ro->status == RUNNER_SUCCEEDED)
	{
		out.outcome = OUTCOME_SUCCEEDED;
		out.state = call_state_change(CALL_RUNNING, CALL_SUCCEEDED);
		outcome_record(call, attempt, started_at, &out);
		return;
	}
	outcome_set_error(&out, ro->sqlerrcode, ro->message,
					  ro->detail[0] ? ro->detail : NULL,
					  ro->hint[0] ? ro->hint : NULL,
					  ro->context[0] ? ro->context : NULL);
	out.outcome = OUTCOME_FAILED;
	if (ro->capped)
	{
		bool		by_cap;

		(void) attempt_time_limit(policy, &by_cap);
		set_timed_out(call, attempt, timeout, by_cap, &out);
	}
	retries_retry_after_usecs = ro->retry_after;	/* retries.retry()'s */
	finish_failure(call, policy, attempt,
				   policy_retries_sqlstate((const char (*)[POLICY_SQLSTATE_ENTRY_LEN]) policy->retry_on,
										   policy->nretry_on, out.sqlstate),
				   &out);
	retries_retry_after_usecs = -1;
	outcome_record(call, attempt, started_at, &out);
	if (out.state == CALL_FAILED)
		run_on_exhausted(call, policy, attempt);
}
