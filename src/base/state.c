/*-------------------------------------------------------------------------
 *
 * state.c
 *	  The states of a call, and the changes between them; the outcomes of
 *	  an attempt.
 *
 * A call is stored 'scheduled', 'succeeded', 'failed' or 'cancelled'
 * (retries.call_state; the views show 'running' for a scheduled call whose
 * attempt a worker runs now: its row stays 'scheduled', locked, until the
 * attempt's outcome commits).  Every piece of code that changes a call's
 * state names the change with call_state_change(), which refuses one that
 * the table below does not allow; the states are compared as CallState,
 * never as strings.  The same table, drawn, is in doc/architecture.md.
 * An attempt's outcome is an AttemptOutcome, named as stored
 * (retries.attempt_outcome) only when it is written.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "base/base.h"

static const char *const state_names[CALL_STATE_COUNT] = {
	[CALL_SCHEDULED] = "scheduled",
	[CALL_RUNNING] = "running",
	[CALL_SUCCEEDED] = "succeeded",
	[CALL_FAILED] = "failed",
	[CALL_CANCELLED] = "cancelled",
};

static const char *const outcome_names[ATTEMPT_OUTCOME_COUNT] = {
	[OUTCOME_SUCCEEDED] = "succeeded",
	[OUTCOME_RETRY] = "retry",
	[OUTCOME_FAILED] = "failed",
	[OUTCOME_TIMEOUT] = "timeout",
	[OUTCOME_INTERRUPTED] = "interrupted",
};

/*
 * state_may[from][to]: the changes a call may go through.  An attempt
 * starts from RUNNING; retries.cancel(), retry_now() and reschedule(), and
 * the cancelling of the calls after one that failed, from what is stored.
 */
static const bool state_may[CALL_STATE_COUNT][CALL_STATE_COUNT] = {
	/*
	 * a claim; retry_now() and reschedule(); cancel(); failing a call before
	 * its attempt (its role, function or arguments are gone)
	 */
	[CALL_SCHEDULED] = {
		[CALL_SCHEDULED] = true,
		[CALL_RUNNING] = true,
		[CALL_FAILED] = true,
		[CALL_CANCELLED] = true,
	},

	/*
	 * the outcome of an attempt: scheduled again (retry, timeout,
	 * interrupted), succeeded, failed; cancelled, if cancel() came while it
	 * ran and it would have been retried
	 */
	[CALL_RUNNING] = {
		[CALL_SCHEDULED] = true,
		[CALL_SUCCEEDED] = true,
		[CALL_FAILED] = true,
		[CALL_CANCELLED] = true,
	},
	/* final */
	[CALL_SUCCEEDED] = {false},
	/* retry_now() and reschedule() */
	[CALL_FAILED] = {
		[CALL_SCHEDULED] = true,
	},
	[CALL_CANCELLED] = {
		[CALL_SCHEDULED] = true,
	},
};

/*
 * call_state_name -- a state as stored and shown
 */
const char *
call_state_name(CallState state)
{
	Assert(state >= 0 && state < CALL_STATE_COUNT);
	return state_names[state];
}

/*
 * attempt_outcome_name -- an outcome as stored and shown
 */
const char *
attempt_outcome_name(AttemptOutcome outcome)
{
	if (outcome <= OUTCOME_UNSET || outcome >= ATTEMPT_OUTCOME_COUNT)
		elog(ERROR, "retries: an attempt's outcome was not decided");
	return outcome_names[outcome];
}

/*
 * call_state_parse -- a state from its name (as read from the table)
 */
CallState
call_state_parse(const char *name)
{
	for (int i = 0; i < CALL_STATE_COUNT; i++)
	{
		if (strcmp(name, state_names[i]) == 0)
			return (CallState) i;
	}
	elog(ERROR, "retries: unknown call state \"%s\"", name);
	pg_unreachable();
}

/*
 * call_state_finished -- does a call in this state wait for nothing more
 * (succeeded, failed or cancelled)?
 */
bool
call_state_finished(CallState state)
{
	return state == CALL_SUCCEEDED || state == CALL_FAILED ||
		state == CALL_CANCELLED;
}

/*
 * call_state_change -- the change of a call from 'from' to 'to': 'to',
 * or an error if the table does not allow it (a bug, not a user's error)
 */
CallState
call_state_change(CallState from, CallState to)
{
	Assert(from >= 0 && from < CALL_STATE_COUNT);
	Assert(to >= 0 && to < CALL_STATE_COUNT);
	if (unlikely(!state_may[from][to]))
		elog(ERROR, "retries: a call cannot go from state %s to %s",
			 state_names[from], state_names[to]);
	return to;
}
