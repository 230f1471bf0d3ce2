/*-------------------------------------------------------------------------
 *
 * outcome.c
 *	  Writing the outcomes of attempts: the call's new state and its row of
 *	  retries.attempt_data.
 *
 * Successes and retries are queued (outcome_queue) and written by one
 * statement at the end of the batch (outcome_flush, from
 * execute_finish_batch), which costs a fraction of a statement per call;
 * an outcome that something reads right after (a call failed for good,
 * whose on_exhausted hook runs next, an interrupted attempt) is written at
 * once, with the queued ones (outcome_record).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "common/int.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "api/api.h"
#include "base/base.h"
#include "base/compat.h"
#include "engine/outcome.h"
#include "tables/tables.h"

/*
 * Outcomes waiting to be written, one column array each, in the order of
 * calls_write_outcomes()'s columns (CallsOutcomeColumn).  They live in the
 * transaction's memory; a new transaction starts an empty list.
 */
static struct
{
	LocalTransactionId lxid;	/* the transaction the list belongs to */
	int			n;
	int			size;
	Datum	   *values[OC_NCOLUMNS];
	bool	   *nulls[OC_NCOLUMNS];
	bool	   *notify;			/* each outcome's Outcome.notify */
	CallState  *state;			/* and Outcome.state, as OC_STATE holds it */
	Size		result_bytes;	/* of the results in the list */
}			pending;

/* Results that the list may hold before they are written, in bytes */
#define PENDING_RESULT_BYTES	(16 * 1024 * 1024)

/*
 * pending_add -- queue an attempt's outcome for outcome_flush(); it is
 * finished now
 */
static void
pending_add(const RetriesCall *call, int32 attempt, TimestampTz started_at,
			const Outcome *out)
{
	TimestampTz finished = clock_system_now();
	TimestampTz next = 0;
	int			row;

	if (pending.lxid != retries_local_xid())
	{
		pending.lxid = retries_local_xid();
		pending.n = 0;
		pending.size = 128;
		for (int c = 0; c < OC_NCOLUMNS; c++)
		{
			pending.values[c] = MemoryContextAlloc(TopTransactionContext,
												   sizeof(Datum) * pending.size);
			pending.nulls[c] = MemoryContextAlloc(TopTransactionContext,
												  sizeof(bool) * pending.size);
		}
		pending.notify = MemoryContextAlloc(TopTransactionContext,
											sizeof(bool) * pending.size);
		pending.state = MemoryContextAlloc(TopTransactionContext,
										   sizeof(CallState) * pending.size);
		pending.result_bytes = 0;
	}
	else if (pending.n == pending.size)
	{
		pending.size *= 2;
		for (int c = 0; c < OC_NCOLUMNS; c++)
		{
			pending.values[c] = repalloc(pending.values[c], sizeof(Datum) * pending.size);
			pending.nulls[c] = repalloc(pending.nulls[c], sizeof(bool) * pending.size);
		}
		pending.notify = repalloc(pending.notify, sizeof(bool) * pending.size);
		pending.state = repalloc(pending.state, sizeof(CallState) * pending.size);
	}
	row = pending.n++;
	pending.notify[row] = out->notify;
	pending.state[row] = out->state;

#define SET(c, value, isnull) \
	do { \
		pending.nulls[c][row] = (isnull); \
		pending.values[c][row] = (isnull) ? (Datum) 0 : (value); \
	} while (0)
#define SET_TEXT(c, str) SET(c, CStringGetTextDatum(str), (str) == NULL)
	/* what the code raised, as it is valid here (args_valid_text) */
#define SET_RAISED(c, str) SET_TEXT(c, args_valid_text(str))
	SET(OC_CALL_ID, Int64GetDatum(call->id), false);
	SET(OC_ATTEMPT, Int32GetDatum(attempt), false);
	SET(OC_STARTED, TimestampTzGetDatum(started_at), false);
	SET(OC_FINISHED, TimestampTzGetDatum(finished), false);
	SET_TEXT(OC_OUTCOME, attempt_outcome_name(out->outcome));
	SET_TEXT(OC_STATE, call_state_name(out->state));
	/* a delay past the end of time means never */
	if (out->delay >= 0 && pg_add_s64_overflow(clock_ahead(finished), out->delay, &next))
		next = DT_NOEND;
	SET(OC_NEXT_ATTEMPT, TimestampTzGetDatum(next), out->delay < 0);
	SET_TEXT(OC_SQLSTATE, out->sqlstate[0] ? out->sqlstate : NULL);
	SET_RAISED(OC_MESSAGE, out->message);
	SET_RAISED(OC_DETAIL, out->detail);
	SET_RAISED(OC_HINT, out->hint);
	SET_RAISED(OC_CONTEXT, out->context);
	SET(OC_DELAY, Int64GetDatum(out->delay), out->delay < 0);
	SET(OC_RESULT, PointerGetDatum(out->result), out->result == NULL);
	SET_RAISED(OC_COMMAND_TAG, out->command_tag);
	SET(OC_PID, Int32GetDatum(out->pid == 0 ? MyProcPid : out->pid), out->pid < 0);
#undef SET_RAISED
#undef SET_TEXT
#undef SET
	if (out->result != NULL)
		pending.result_bytes += VARSIZE(out->result);
}

/*
 * trim_attempts -- delete the oldest attempt rows of the queued calls whose
 * attempt being written is past retries.max_kept_attempts, so that the
 * call keeps that many with it; and say so, once per worker.  A statement
 * of its own, run only when some call needs it (rarely): inside the
 * statement that writes every batch's outcomes it made the planner join
 * attempt_data for every batch, and a plan made while attempt_data was
 * empty read all of it for every batch.
 */
static void
trim_attempts(void)
{
	static bool logged = false;
	int64	   *ids = NULL;
	int32	   *attempts = NULL;
	int			n = 0;

	for (int row = 0; row < pending.n; row++)
	{
		int32		attempt = DatumGetInt32(pending.values[OC_ATTEMPT][row]);

		if (attempt <= retries_max_kept_attempts)
			continue;
		if (ids == NULL)
		{
			ids = palloc(sizeof(int64) * pending.n);
			attempts = palloc(sizeof(int32) * pending.n);
		}
		ids[n] = DatumGetInt64(pending.values[OC_CALL_ID][row]);
		attempts[n++] = attempt;
	}
	if (n == 0)
		return;
	if (!logged)
	{
		ereport(LOG,
				(errmsg("retries: call " INT64_FORMAT " has made %d attempts: only its last %d attempt rows are kept (retries.max_kept_attempts)",
						ids[0], attempts[0],
						retries_max_kept_attempts),
				 errdetail("This is logged once per worker."),
				 errhint("Raise retries.max_kept_attempts to keep more of the history of such calls.")));
		logged = true;
	}
	calls_trim_attempts(ids, attempts, n, retries_max_kept_attempts);
}

/*
 * outcome_flush -- write the queued outcomes: the calls' new states and
 * their attempt rows, all in one statement.  Runs inside SPI, in the batch
 * transaction.
 *
 * A call keeps at most retries.max_kept_attempts attempt rows: writing a
 * newer one deletes those that fall out (trim_attempts), so that a call
 * retried without end (every 10 ms, say) cannot fill the disk before it
 * finishes and is pruned.  The call keeps counting its attempts.
 */
void
outcome_flush(void)
{
	int			n = pending.n;
	int64	   *finished_ids;
	char	   *finished_how;
	bool	   *finished_notify;
	int			nfinished = 0;

	if (pending.lxid != retries_local_xid() || n == 0)
		return;
	trim_attempts();
	calls_write_outcomes(pending.values, pending.nulls, n);
	pending.n = 0;
	pending.result_bytes = 0;

	/* the calls that finished: their waiters, NOTIFYs and followers */
	finished_ids = palloc(sizeof(int64) * n);
	finished_how = palloc(n);
	finished_notify = palloc(sizeof(bool) * n);
	for (int row = 0; row < n; row++)
	{
		CallState	state = pending.state[row];

		/*
		 * a cancelled call (execute_runner_end's) was finished by cancel(),
		 * which woke its waiters and cancelled its followers
		 */
		if (state == CALL_SCHEDULED || state == CALL_CANCELLED)
			continue;
		finished_ids[nfinished] = DatumGetInt64(pending.values[OC_CALL_ID][row]);
		finished_how[nfinished] = state == CALL_SUCCEEDED ? 's' : 'f';
		finished_notify[nfinished++] = pending.notify[row];
	}
	chains_calls_finished(nfinished, finished_ids, finished_how, finished_notify);
}

/*
 * outcome_set_error -- copy an error's fields into an outcome, each cut to
 * ERROR_TEXT_LEN bytes (args_clip_len; the error of a role's code was cut
 * so when it was caught, evaluate.c, but a message may quote it)
 */
void
outcome_set_error(Outcome *out, int sqlerrcode, const char *message,
				  const char *detail, const char *hint, const char *context)
{
	strlcpy(out->sqlstate, unpack_sql_state(sqlerrcode), sizeof(out->sqlstate));
	out->message = message ? args_clipped(pstrdup(message)) : NULL;
	out->detail = detail ? args_clipped(pstrdup(detail)) : NULL;
	out->hint = hint ? args_clipped(pstrdup(hint)) : NULL;
	out->context = context ? args_clipped(pstrdup(context)) : NULL;
}

/*
 * outcome_record -- write an attempt's outcome now (with any queued ones),
 * for outcomes that something reads right after: a call failed for good,
 * whose on_exhausted hook runs next, or an interrupted attempt
 */
void
outcome_record(const RetriesCall *call, int32 attempt, TimestampTz started_at,
			   const Outcome *out)
{
	pending_add(call, attempt, started_at, out);
	outcome_flush();
}

/*
 * outcome_queue -- queue an attempt's outcome, to be written with the
 * batch's others (outcome_flush); large results are written early, not all
 * kept until the commit
 */
void
outcome_queue(const RetriesCall *call, int32 attempt, TimestampTz started_at,
			  const Outcome *out)
{
	pending_add(call, attempt, started_at, out);
	if (pending.result_bytes > PENDING_RESULT_BYTES)
		outcome_flush();
}
