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
 * This file is the attempt's course: evaluate.c runs the role's code (the
 * function, its arguments and defaults, a hook) in its sandbox under the
 * time limit, verdict.c says what an attempt comes to (the checks before
 * it, its error classified, the delay of a retry, a call failed for good
 * and its on_exhausted hook), outcome.c writes it.  Here too: an attempt
 * cut short (a worker's exit, a stop, a commit that failed) charged as
 * interrupted, whose code a call runs (code_owner), and a procedure's or
 * command's call before and after its runner (execute_runner_*).
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
#include "engine/sandbox.h"
#include "engine/time_cap.h"
#include "engine/verdict.h"
#include "flow/flow.h"
#include "tables/tables.h"


/*
 * execute_init -- set up what attempts need (once per worker)
 */
void
execute_init(ExecuteHookPhase hook_phase)
{
	verdict_init(hook_phase);
	policies_init();
	evaluate_init();
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
		verdict_fail_without_policy(call, attempt, started_at, &out);
		return false;
	}
	out.notify = policy->notify;

	if (!verdict_precheck(call, policy, &out))
	{
		out.outcome = OUTCOME_FAILED;
		out.state = call_state_change(CALL_RUNNING, CALL_FAILED);
		outcome_record(call, attempt, started_at, &out);
		verdict_on_exhausted(call, policy, attempt);
		return false;
	}

	retries_current_call_id = call->id;
	retries_current_call_role = call->role;
	retries_current_attempt_number = attempt;
	retries_retry_after_usecs = -1;
	timeout = evaluate_time_limit(policy, &capped);
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
	edata = evaluate_sandboxed(call->role, policy->fn, false, args, argcxt, NIL, timeout,
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

	verdict_classify_error(call, policy, attempt, edata, step, timeout, capped, &out);
	if (out.state == CALL_FAILED)
	{
		outcome_record(call, attempt, started_at, &out);
		verdict_on_exhausted(call, policy, attempt);
	}
	else
		outcome_queue(call, attempt, started_at, &out); /* a retry */
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
 * been failed (verdict_fail_without_policy), and there is nothing more to record
 */
static CachedPolicy *
interrupted_outcome(RetriesCall *call, int32 attempt, Outcome *out)
{
	CachedPolicy *policy = policies_get(call->policy_id);

	memset(out, 0, sizeof(*out));
	out->delay = -1;
	if (policy == NULL)
	{
		verdict_fail_without_policy(call, attempt, clock_system_now(), out);
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
	verdict_finish_failure(call, policy, attempt, true, out);
	outcome_record(call, attempt, started, out);
	if (out->state == CALL_FAILED)
		verdict_on_exhausted(call, policy, attempt);
}

/*
 * allow_another_attempt -- one more attempt for 'call', if it has a limit
 */
static void
allow_another_attempt(RetriesCall *call)
{
	if (call->max_attempts <= 0)
		return;
	calls_allow_another_attempt(call->id);
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
		verdict_record_hook_error(call->id, attempt,
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
		verdict_on_exhausted(call, policy, attempt);
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
 * elsewhere_check -- for a command that runs in another database (a call of
 * retries.command_in): that database, by its name in the arguments, into
 * *dboid, and the text into *sql; false, with the failure in 'out', if it
 * lacks what command_elsewhere_lacks() checks: the database, of the owner
 * it had when the command was made, the privileges to make such commands,
 * a login there (what verdict_precheck() checks of this database)
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
 * first (verdict_precheck), its arguments into *args (in the caller's memory) and
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
		verdict_fail_without_policy(call, attempt, clock_system_now(), &out);
		return false;
	}
	out.notify = policy->notify;
	*args = call->args_deferred ? read_args(call->id) : call->args;
	if (!verdict_precheck(call, policy, &out) ||
		(policy->fn == schema_command_in_oid() &&
		 !elsewhere_check(call, *args, dboid, sql, &out)))
	{
		out.outcome = OUTCOME_FAILED;
		out.state = call_state_change(CALL_RUNNING, CALL_FAILED);
		outcome_record(call, attempt, clock_system_now(), &out);
		verdict_on_exhausted(call, policy, attempt);
		return false;
	}
	*timeout = evaluate_time_limit(policy, &capped);
	calls_hand_to_runner(call->id);
	return true;
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
	CachedPolicy *policy = policies_get(call->policy_id);
	int32		attempt = call->attempts + 1;
	bool		cancelled;
	Outcome		out;

	/*
	 * Due again when the attempt started, as a call of a batch is left (a
	 * retry moves it on); and a cancel() that came after the batch that made
	 * it due at 'infinity' committed, and before the runner started, stands:
	 * the attempt is recorded, the call stays cancelled
	 */
	cancelled = calls_runner_returned(call->id, started_at);

	memset(&out, 0, sizeof(out));
	out.delay = -1;
	out.pid = ro->pid != 0 ? ro->pid : -1;
	out.command_tag = ro->command_tag[0] ? ro->command_tag : NULL;
	if (policy == NULL)
	{
		verdict_fail_without_policy(call, attempt, started_at, &out);
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

		(void) evaluate_time_limit(policy, &by_cap);
		verdict_set_timed_out(call, attempt, timeout, by_cap, &out);
	}
	retries_retry_after_usecs = ro->retry_after;	/* retries.retry()'s */
	verdict_finish_failure(call, policy, attempt,
						   policy_retries_sqlstate((const char (*)[POLICY_SQLSTATE_ENTRY_LEN]) policy->retry_on,
												   policy->nretry_on, out.sqlstate),
						   &out);
	retries_retry_after_usecs = -1;
	outcome_record(call, attempt, started_at, &out);
	if (out.state == CALL_FAILED)
		verdict_on_exhausted(call, policy, attempt);
}
