/*-------------------------------------------------------------------------
 *
 * lone.c
 *	  After a batch failed outside its calls: calls run one a batch, and
 *	  the one-call batch that fails so is failed or charged alone (see "A
 *	  bad row" in worker.c); and the calls a worker leaves alone.
 *
 * State of the worker's own: how many calls to run one per batch
 * (one_by_one) and for which role (every role's, or the one whose batch
 * failed at its commit), the call of the current one-call batch, and the
 * calls left alone, which the claims leave out (lone_skipped).  The worker
 * asks at each batch (lone_batch_begin, lone_batch_limit, lone_claimed,
 * lone_batch_ran) and tells every error that escaped a batch
 * (lone_after_error).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "storage/ipc.h"
#include "utils/builtins.h"
#include "utils/snapmgr.h"

#include "api/api.h"
#include "base/base.h"
#include "engine/execute.h"
#include "engine/lone.h"
#include "engine/recovery.h"
#include "engine/wslot.h"
#include "tables/tables.h"

/*
 * How many calls to run one per batch, and for which role (InvalidOid:
 * every role's); the call of the current one-call batch (0 if none yet)
 * and the attempt it runs
 */
static int	one_by_one = 0;
static Oid	one_by_one_role = InvalidOid;
static int64 lone_call_id = 0;
static int32 lone_attempt = 0;

/*
 * Calls a worker leaves alone: those it could not even fail, and in an
 * extra worker, those whose code is a role's that holds another worker
 * (extra_passes_over, batch.c)
 */
static int64 skipped[LONE_SKIP_MAX];
static int	nskipped = 0;

/*
 * A call whose last attempt was interrupted, claimed by a batch of other
 * calls: it runs alone, in the next batch (see "Containment" in worker.c);
 * 0 if none
 */
static int64 lone_next = 0;

/* The extension the worker serves, as lone_after_error() was given it */
static Oid	served = InvalidOid;

/*
 * lone_skip -- leave call 'id' alone from now on; false if the list is
 * full (LONE_SKIP_MAX)
 */
bool
lone_skip(int64 id)
{
	if (nskipped >= LONE_SKIP_MAX)
		return false;
	skipped[nskipped++] = id;
	return true;
}

/*
 * lone_skipped -- the calls left alone, and how many (*n)
 */
const int64 *
lone_skipped(int *n)
{
	*n = nskipped;
	return skipped;
}

/* lone_nskipped -- how many calls are left alone */
int
lone_nskipped(void)
{
	return nskipped;
}

/* lone_next_set -- call 'id' runs alone, in the next batch */
void
lone_next_set(int64 id)
{
	lone_next = id;
}

/* lone_next_pending -- does a call wait to run alone in the next batch? */
bool
lone_next_pending(void)
{
	return lone_next != 0;
}

/* lone_next_take -- the call to run alone in this batch, forgotten here */
int64
lone_next_take(void)
{
	int64		id = lone_next;

	lone_next = 0;
	return id;
}

/* lone_one_by_one -- do calls run one a batch now? */
bool
lone_one_by_one(void)
{
	return one_by_one > 0;
}

/* lone_batch_begin -- a batch begins: no one-call batch's call yet */
void
lone_batch_begin(void)
{
	lone_call_id = 0;
}

/* lone_batch_limit -- how many calls the next batch may claim first */
int
lone_batch_limit(void)
{
	return one_by_one > 0 ? 1 : retries_batch_size;
}

/*
 * lone_claimed -- the batch claimed 'first' first: false if the batch may
 * take its role's calls whole after all (one call a batch only for the
 * role whose batch failed at its commit); else, in a one-call batch, it
 * is the lone call
 */
bool
lone_claimed(const RetriesCall *first)
{
	if (one_by_one > 0 && OidIsValid(one_by_one_role) && first->role != one_by_one_role)
		return false;
	if (one_by_one > 0)
	{
		lone_call_id = first->id;
		lone_attempt = first->attempts + 1;
	}
	return true;
}

/*
 * lone_batch_ran -- a batch of 'role' with n calls committed: one less to
 * run one a batch
 */
void
lone_batch_ran(Oid role, int n)
{
	if (one_by_one > 0 && n > 0 && (!OidIsValid(one_by_one_role) || role == one_by_one_role))
		one_by_one--;
}

/*
 * passing_error -- is an error of the worker one that may not happen next
 * time (resources, the server or the operator, a conflict with another
 * transaction), rather than one that a call's row makes happen every time?
 */
static bool
passing_error(int sqlerrcode)
{
	/*
	 * connection, transaction state and rollback, resources, limits,
	 * operator, system
	 */
	static const char *const classes[] = {"08", "25", "40", "53", "54", "57", "58"};

	/* lock not available, object in use */
	static const char *const codes[] = {"55P03", "55006"};
	const char *sqlstate = unpack_sql_state(sqlerrcode);

	for (size_t i = 0; i < lengthof(classes); i++)
		if (strncmp(sqlstate, classes[i], 2) == 0)
			return true;
	for (size_t i = 0; i < lengthof(codes); i++)
		if (strcmp(sqlstate, codes[i]) == 0)
			return true;
	return false;
}

/*
 * leave_lone_call -- what fail_lone_call or commit_failure could not write
 * failed too: this worker leaves the call alone (LONE_SKIP_MAX of them at most)
 * until it exits
 */
static void
leave_lone_call(void)
{
	if (!lone_skip(lone_call_id))
		return;
	ereport(LOG,
			(errmsg("retries: this worker leaves call " INT64_FORMAT " alone until it exits",
					lone_call_id)));
}

/*
 * in_lone_transaction -- run 'write' for the call of a one-call batch that
 * failed outside the call (lone_call_id), in a transaction of its own,
 * with SPI connected, a snapshot and the extension locked (nothing is
 * written if the extension is not the one this worker serves); if even
 * that fails, leave the call alone from now on
 */
static void
in_lone_transaction(void (*write) (const ErrorData *edata), const ErrorData *edata)
{
	MemoryContext oldcxt = CurrentMemoryContext;

	PG_TRY();
	{
		wslot_start_transaction();
		SPI_connect();
		PushActiveSnapshot(GetTransactionSnapshot());
		if (wslot_lock_extension() == served)
			write(edata);
		PopActiveSnapshot();
		SPI_finish();
		wslot_commit_transaction();
	}
	PG_CATCH();
	{
		wslot_recover_from_error(oldcxt, NULL);
		leave_lone_call();
	}
	PG_END_TRY();
	lone_call_id = 0;
}

/*
 * write_lone_failure -- fail the lone call for good with the worker's
 * error 'edata', unless it has been charged or claimed since
 *
 * Not through outcome.c, the writer of every other outcome: this path is
 * for a bad row, such as an attempt's row that is already there, which
 * its INSERT passes over (ON CONFLICT DO NOTHING) so that the call fails
 * all the same; every other outcome must meet such a row as an error.
 */
static void
write_lone_failure(const ErrorData *edata)
{
	const char *message = args_valid_text(psprintf("the worker could not run or record this attempt: %s",
												   edata->message));

	if (calls_fail_bad_row(lone_call_id, lone_attempt,
						   unpack_sql_state(edata->sqlerrcode), message,
						   "The error was the worker's, outside the call's own transaction, and it came back with the call alone in its batch; the call is failed so that it cannot keep the other calls from running."))
		chains_calls_finished(1, &lone_call_id, "f", NULL);
}

/*
 * fail_lone_call -- fail the call of a one-call batch that failed outside
 * the call, in a transaction of its own, with the worker's error; if even
 * that fails, leave the call alone from now on
 */
static void
fail_lone_call(const ErrorData *edata)
{
	ereport(LOG,
			(errmsg("retries: call " INT64_FORMAT " failed: the worker could not run or record attempt %d: %s",
					lone_call_id, lone_attempt, edata->message)));
	in_lone_transaction(write_lone_failure, edata);
}

/*
 * charge_lone_commit -- charge the lone call's attempt as
 * execute_commit_failed says, unless it has been charged or claimed since
 */
static void
charge_lone_commit(const ErrorData *edata)
{
	RetriesCall call;

	if (recovery_lock_call(lone_call_id, &call, NULL) == CALL_LOCKED_NOW &&
		call.attempts < lone_attempt)
		execute_commit_failed(&call, lone_attempt, edata);
}

/*
 * commit_failure -- the call of a one-call batch ran, but the batch's
 * commit failed (edata): charge its attempt as execute_commit_failed says,
 * in a transaction of its own; if even that fails, leave the call alone
 * from now on
 *
 * What fails at the commit is the transaction around the call, not its
 * function: the sandbox fires the call's deferred triggers inside the
 * attempt.  Citus fails the commit of a transaction that used a connection
 * to a node it has lost since ("failure on connection marked as
 * essential", XX000, from its pre-commit callback), for as long as the
 * node is down; it fails it when a name it gives a prepared transaction
 * is already taken (42710: any role may PREPARE TRANSACTION under the
 * names Citus will use next, which are predictable); and it reports the
 * error of a deferred trigger on another node, which fires when that node
 * prepares (any SQLSTATE, 40001 among them).  Failing the call for good, as
 * an error that comes back with the call alone otherwise does
 * (fail_lone_call), would let an outage or another role fail it; not
 * charging it (a "passing" SQLSTATE) would run it again and again without
 * end.  Charged as interrupted, it is retried after its delay, within its
 * attempts.
 */
static void
commit_failure(const ErrorData *edata)
{
	ereport(LOG,
			(errmsg("retries: attempt %d of call " INT64_FORMAT " ran, but its transaction could not commit: %s",
					lone_attempt, lone_call_id, edata->message)));
	in_lone_transaction(charge_lone_commit, edata);
}

/*
 * lone_after_error -- an error (edata) escaped a batch and rolled it back;
 * 'commit_role' is the batch's role if it was raised at its commit, else
 * InvalidOid.  True if the worker may go on at once: a one-call batch's
 * call is charged (at its commit) or failed (a row's error, not a passing
 * one), or the role whose commit failed runs one call a batch from now
 * on, which costs that role only.  False if the worker must pause: every
 * role's calls run one a batch from now on.
 */
bool
lone_after_error(const ErrorData *edata, Oid commit_role, Oid extension)
{
	served = extension;
	if (OidIsValid(commit_role))
	{
		/*
		 * A batch holds one role's calls: its commit failing costs that role
		 * only.  No pause; its calls run one a batch, and a one-call batch's
		 * attempt is charged.  They are due again now (the rollback undid
		 * their claims).
		 */
		if (lone_call_id != 0)
			commit_failure(edata);
		else
		{
			one_by_one = Max(one_by_one, retries_batch_size);
			one_by_one_role = commit_role;
		}
		return true;
	}
	if (lone_call_id != 0 && !passing_error(edata->sqlerrcode))
	{
		fail_lone_call(edata);
		return true;
	}
	one_by_one = Max(one_by_one, retries_batch_size);
	one_by_one_role = InvalidOid;
	return false;
}
