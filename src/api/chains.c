/*-------------------------------------------------------------------------
 *
 * chains.c
 *	  Calls that run after others (retries.call's after), and what happens
 *	  when calls finish: their followers released or cancelled, their
 *	  waiters woken, their NOTIFY sent.
 *
 * A call made with after => '{17, 18}' waits for those of the calls that
 * have not succeeded yet: one row of retries.call_after for each, and
 * their number in call_data.waiting_on.  While it waits it is held (held,
 * with no gate), out of the indexes the workers claim from (see flow.c),
 * so that waiting calls cost the workers nothing, however many there are.
 *
 * When a call succeeds, the transaction that records it deletes its rows
 * of call_after and takes one off the waiting_on of each follower; a
 * follower that reaches 0 is released (held = false), to be claimed as
 * any due call, in the same commit: crash-safe, and with work proportional
 * to the followers of the calls that finish (a fan-in of 10,000 calls
 * into one costs 10,000 decrements, not 10,000 recounts).  When a call
 * fails for good or is cancelled, its followers are cancelled, naming it,
 * and theirs in turn, level by level.  If one of those rows is locked by
 * another transaction (a cancel() or reschedule() of the follower left
 * uncommitted, say), waiting for it could stall a worker for as long as
 * an ordinary role likes: so the follower is skipped (SKIP LOCKED), the
 * finished call is listed in call_after_pending, in the same transaction,
 * and the workers look at that list in their short transaction before
 * each batch, at least once a second, until it is done.
 *
 * retries.call() reads the calls of its after list with a share lock on their
 * rows, kept until its transaction ends: a worker cannot claim one of them
 * meanwhile (SKIP LOCKED) and a cancel() waits.  So either the new call sees
 * that it has finished, or the transaction that finishes it sees the new
 * call's rows of call_after.  A call that a worker is running (its row locked
 * by the worker's batch) is not waited for (retries.call() returns at once:
 * doc/operations.md, "Containment"): it is read as the statement's snapshot
 * sees it, and, if unfinished, also listed in call_after_pending, in the new
 * call's transaction; if the batch that runs it commits its end without
 * seeing the new call's rows, the workers find it there and release or cancel
 * the new call.  A call named in after that has already succeeded is not
 * waited for; one that has failed or was cancelled has the new call cancelled
 * at once.
 *
 * The entries that the workers make in call_after_pending have keys of
 * their own, so that no worker waits for a role's transaction: an entry
 * that a worker's own code makes is the finished call's id negated, one
 * that a role's code makes (retries.call(), cancel(), in the role's session
 * or in an attempt or hook that a worker runs) is the call's id.  The key
 * is unique, and an insertion that meets an uncommitted entry with its key
 * waits for that entry's transaction: with one key for both, the worker
 * that finished a call waited for as long as a role kept open the
 * transaction of a new call made after it (t/020_containment.pl, d).  A
 * worker's own code notes a call only while it holds the call's row locked
 * (its batch finished it, or chains_pending() share-locked it): so its
 * entry meets only those of other workers' short transactions, whose
 * batches could not lock the call meanwhile.  A role's entry meets only
 * those of other code about the same call, which only roles that may see
 * it can name (its own, and a superuser or a member of retries_admin).
 *
 * A call scheduled again by hand (retry_now, reschedule of a failed or
 * cancelled call) waits for nothing any more.
 *
 * IDENTIFICATION
 *	  src/api/chains.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "lib/qunique.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"

#include "api/api.h"
#include "base/base.h"
#include "core/policy.h"
#include "tables/tables.h"
#include "xact/xact.h"

/* Most finished calls whose pending followers one transaction looks at */
#define PENDING_BATCH			1000

/*
 * Set when a transaction released a call, and when it left followers for
 * later (see the head of worker.c); the worker clears them
 */
bool		retries_chains_released = false;
bool		retries_chains_deferred = false;

/*
 * Set by a worker at its start: whether a note made now is the worker's
 * own, to be negated (see the head of the file)
 */
bool		(*chains_worker_note_hook) (void) = NULL;

static void cancel_followers(const int64 *ids, const char *how, int n);
static int64 note_sign(void);

/*
 * cmp_int64 -- qsort comparator of int64s
 */
static int
cmp_int64(const void *a, const void *b)
{
	int64		x = *(const int64 *) a;
	int64		y = *(const int64 *) b;

	return x < y ? -1 : x > y ? 1 : 0;
}

/*
 * rows_of_ids -- for each of the n calls of 'ids', the row of SPI_tuptable
 * whose first column is its id, or -1 if none
 */
static int *
rows_of_ids(const int64 *ids, int n)
{
	int		   *rows = palloc(sizeof(int) * n);

	for (int i = 0; i < n; i++)
		rows[i] = -1;
	for (uint64 row = 0; row < SPI_processed; row++)
	{
		bool		isnull;
		int64		id = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[row],
													 SPI_tuptable->tupdesc, 1, &isnull));

		for (int i = 0; i < n; i++)
			if (ids[i] == id)
				rows[i] = (int) row;
	}
	return rows;
}

/*
 * share_lock_calls -- share-lock those of the n calls of 'ids' that no
 * other transaction holds locked (SKIP LOCKED: a worker running one, a
 * cancel() not yet committed, or a role's own open transaction must not
 * keep this one waiting): locked[i] says whether ids[i] was, and, if so,
 * states[i] is its state then; a call that is gone is not locked, nor is
 * one that a runner runs (due at 'infinity' meanwhile, unlocked: a share
 * lock on it would keep its worker from recording its outcome for as long
 * as this transaction lasts)
 */
static void
share_lock_calls(const int64 *ids, int n, bool *locked, CallState *states)
{
	static SPIPlanPtr plan = NULL;
	Oid			argtypes[1] = {INT8ARRAYOID};
	Datum		values[1] = {args_id_array(ids, n)};
	int		   *rows;

	plans_prepare_kept(&plan,
					   "SELECT id, state::pg_catalog.text FROM retries.call_data"
					   " WHERE id OPERATOR(pg_catalog.=) ANY ($1)"
					   " AND next_attempt OPERATOR(pg_catalog.<>) 'infinity'::pg_catalog.timestamptz"
					   " ORDER BY id FOR SHARE SKIP LOCKED",
					   1, argtypes);
	if (SPI_execute_plan(plan, values, NULL, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not lock calls that others run after");
	rows = rows_of_ids(ids, n);
	for (int i = 0; i < n; i++)
	{
		locked[i] = rows[i] >= 0;
		if (locked[i])
			states[i] = call_state_parse(SPI_getvalue(SPI_tuptable->vals[rows[i]],
													  SPI_tuptable->tupdesc, 2));
	}
	SPI_freetuptable(SPI_tuptable);
}

/*
 * chains_after_check -- read the calls of retries.call()'s after list
 * (an int8[]) for a new call that 'caller' schedules: *out says which of
 * them the new call waits for, and whether one has failed or was
 * cancelled already
 *
 * Raises 22004 for a NULL element and 42704 for a call that does not
 * exist or that the caller may not see.  Each is first read without a
 * lock, so that a role cannot lock calls it may not see; then they are
 * locked FOR SHARE, in the order of their ids (see the head of the file).
 * Runs as the extension's owner, inside SPI.
 */
void
chains_after_check(ArrayType *after, Oid caller, RetriesAfter *out)
{
	static SPIPlanPtr see_plan = NULL;
	Oid			argtypes[1] = {INT8ARRAYOID};
	Datum		values[1];
	Datum	   *elems;
	bool	   *nulls;
	int			n;
	int64	   *ids;
	CallState  *states;
	bool	   *locked;

	memset(out, 0, sizeof(*out));
	if (ARR_NDIM(after) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("after must be a one-dimensional array of call ids")));
	deconstruct_array(after, INT8OID, sizeof(int64), FLOAT8PASSBYVAL, TYPALIGN_DOUBLE,
					  &elems, &nulls, &n);
	if (n == 0)
		return;
	ids = palloc(sizeof(int64) * n);
	for (int i = 0; i < n; i++)
	{
		if (nulls[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("after must not contain NULL"),
					 errhint("List the ids of the calls that must succeed first.")));
		ids[i] = DatumGetInt64(elems[i]);
	}
	qsort(ids, n, sizeof(int64), cmp_int64);
	n = (int) qunique(ids, n, sizeof(int64), cmp_int64);
	values[0] = args_id_array(ids, n);

	/* each call exists, and the caller may see it; and its state */
	plans_prepare_kept(&see_plan,
					   "SELECT id, scheduled_by::pg_catalog.oid, state::pg_catalog.text"
					   " FROM retries.call_data"
					   " WHERE id OPERATOR(pg_catalog.=) ANY ($1) ORDER BY id",
					   1, argtypes);
	if (SPI_execute_plan(see_plan, values, NULL, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not look up the calls of after");
	states = palloc(sizeof(CallState) * n);
	for (int i = 0, row = 0; i < n; i++, row++)
	{
		bool		isnull;

		if (row >= (int) SPI_processed ||
			DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[row], SPI_tuptable->tupdesc,
										1, &isnull)) != ids[i] ||
			!access_may_see_call(caller,
								 DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[row],
																SPI_tuptable->tupdesc,
																2, &isnull))))
			args_call_not_found(ids[i], "after");
		states[i] = call_state_parse(SPI_getvalue(SPI_tuptable->vals[row],
												  SPI_tuptable->tupdesc, 3));
	}
	SPI_freetuptable(SPI_tuptable);

	/*
	 * then their states, locked; those locked by another transaction (a
	 * worker running them) keep the state read above, and are noted for the
	 * workers (see the head of the file)
	 */
	locked = palloc(sizeof(bool) * n);
	share_lock_calls(ids, n, locked, states);

	out->waiting = palloc(sizeof(int64) * n);
	out->running = palloc(sizeof(int64) * n);
	for (int i = 0; i < n; i++)
	{
		if (states[i] == CALL_SCHEDULED)
		{
			out->waiting[out->nwaiting++] = ids[i];
			if (!locked[i])
				out->running[out->nrunning++] = ids[i];
		}
		else if (states[i] != CALL_SUCCEEDED && out->failed == 0)
		{
			out->failed = ids[i];
			out->failed_how = states[i] == CALL_FAILED ? 'f' : 'c';
		}
	}
}

/*
 * chains_after_record -- record that the new call 'call_id' runs after
 * the calls of 'after' (see chains_after_check); if one of them has
 * failed or was cancelled, cancel it
 *
 * Runs as the extension's owner, inside SPI, in the transaction that made
 * the call (held, and waiting_on set to after->nwaiting, plus one if one of
 * them failed).
 */
void
chains_after_record(int64 call_id, const RetriesAfter *after)
{
	static SPIPlanPtr plan = NULL;
	Oid			argtypes[2] = {INT8ARRAYOID, INT8OID};
	Datum		values[2];
	int64	   *firsts;
	int			n = after->nwaiting;

	if (n == 0 && after->failed == 0)
		return;					/* it waits for nothing */
	firsts = palloc(sizeof(int64) * (n + 1));
	if (n > 0)
		memcpy(firsts, after->waiting, sizeof(int64) * n);
	if (after->failed != 0)
		firsts[n++] = after->failed;
	values[0] = args_id_array(firsts, n);
	values[1] = Int64GetDatum(call_id);
	plans_prepare_kept(&plan,
					   "INSERT INTO retries.call_after (after_id, call_id)"
					   " SELECT pg_catalog.unnest($1), $2",
					   2, argtypes);
	if (SPI_execute_plan(plan, values, NULL, false, 0) != SPI_OK_INSERT)
		elog(ERROR, "could not record the calls that call " INT64_FORMAT " runs after",
			 call_id);
	if (after->nrunning > 0)
	{
		static SPIPlanPtr pending_plan = NULL;
		Oid			pending_types[2] = {INT8ARRAYOID, INT8OID};
		Datum		pending_values[2];

		/* being run: the workers look again once the run is over */
		pending_values[0] = args_id_array(after->running, after->nrunning);
		pending_values[1] = Int64GetDatum(note_sign());
		plans_prepare_kept(&pending_plan,
						   "INSERT INTO retries.call_after_pending (after_id)"
						   " SELECT $2 OPERATOR(pg_catalog.*) pg_catalog.unnest($1)"
						   " ON CONFLICT DO NOTHING",
						   2, pending_types);
		if (SPI_execute_plan(pending_plan, pending_values, NULL, false, 0) != SPI_OK_INSERT)
			elog(ERROR, "could not note the running calls that call " INT64_FORMAT " runs after",
				 call_id);
		xact_wake_workers(WAKE_FIRE);	/* to look at the list after the
										 * commit */
	}
	if (after->failed != 0)
		cancel_followers(&after->failed, &after->failed_how, 1);
}

/*
 * note_sign -- what a finished call's id is multiplied by in this process's
 * notes of call_after_pending (see the head of the file)
 */
static int64
note_sign(void)
{
	return chains_worker_note_hook != NULL && chains_worker_note_hook() ? -1 : 1;
}

/*
 * noted_call -- the call that an entry of call_after_pending notes: its id,
 * negated if a worker noted it (see the head of the file)
 */
static inline int64
noted_call(int64 note)
{
	return note < 0 ? -note : note;
}

/*
 * left_for_later -- this transaction noted finished calls whose followers
 * are left for later: the workers look at them soon after its commit (the
 * worker that commits it, from retries_chains_deferred; the others, and all
 * of them when a role's session commits it, woken)
 */
static void
left_for_later(void)
{
	retries_chains_deferred = true;
	xact_wake_workers(WAKE_FIRE);
}

/*
 * release_followers -- the calls of 'ids' (n) succeeded: their rows of
 * call_after go, and each of their followers has one fewer call to wait
 * for, and is released when it has none left; followers locked by another
 * transaction are left for later (call_after_pending).  Returns how many
 * were released.
 */
static uint64
release_followers(const int64 *ids, int n)
{
	bool		later;
	uint64		released = calls_release_followers(args_id_array(ids, n),
												   Int64GetDatum(note_sign()), &later);

	if (later)
		left_for_later();
	return released;
}

/*
 * cancel_followers -- the calls of 'ids' (n) failed or were cancelled
 * (how[i]: 'f' or 'c'): cancel their followers, each naming the call it ran
 * after, and the followers of those, level by level; followers locked by
 * another transaction are left for later (call_after_pending)
 */
static void
cancel_followers(const int64 *ids, const char *how, int n)
{
	Datum		sign = Int64GetDatum(note_sign());
	const int64 *level_ids = ids;
	const char *level_how = how;
	int			level_n = n;

	while (level_n > 0)
	{
		int			next_n;
		int64	   *next_ids;
		bool	   *next_notify;
		Datum	   *failed = palloc(sizeof(Datum) * level_n);
		char	   *next_how;

		CHECK_FOR_INTERRUPTS();
		for (int i = 0; i < level_n; i++)
			failed[i] = BoolGetDatum(level_how[i] == 'f');
		calls_cancel_followers(args_id_array(level_ids, level_n),
							   PointerGetDatum(construct_array(failed, level_n, BOOLOID, 1,
															   true, TYPALIGN_CHAR)),
							   sign);
		/* one row per cancelled call, or one with a NULL id if none */
		next_ids = palloc(sizeof(int64) * SPI_processed);
		next_notify = palloc(sizeof(bool) * SPI_processed);
		next_n = 0;
		for (uint64 row = 0; row < SPI_processed; row++)
		{
			HeapTuple	tup = SPI_tuptable->vals[row];
			bool		none;
			bool		isnull;
			Datum		id = SPI_getbinval(tup, SPI_tuptable->tupdesc, 1, &none);

			if (DatumGetInt64(SPI_getbinval(tup, SPI_tuptable->tupdesc, 3, &isnull)) > 0)
				left_for_later();
			if (none)
				continue;
			next_ids[next_n] = DatumGetInt64(id);
			next_notify[next_n++] = DatumGetBool(SPI_getbinval(tup, SPI_tuptable->tupdesc,
															   2, &isnull));
		}
		SPI_freetuptable(SPI_tuptable);

		/* the cancelled calls are finished too: their waiters, then theirs */
		for (int i = 0; i < next_n; i++)
			xact_call_finished(next_ids[i], next_notify[i]);
		next_how = palloc(Max(next_n, 1));
		memset(next_how, 'c', Max(next_n, 1));
		level_ids = next_ids;
		level_how = next_how;
		level_n = next_n;
	}
}

/*
 * have_followers -- may any call wait for another now?  One probe of an
 * index, so that calls that finish cost nothing more where no call runs
 * after another.
 */
static bool
have_followers(void)
{
	static SPIPlanPtr plan = NULL;
	bool		found;

	plans_prepare_kept(&plan, "SELECT FROM retries.call_after LIMIT 1", 0, NULL);
	if (SPI_execute_plan(plan, NULL, NULL, false, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not look for calls that run after others");
	found = SPI_processed > 0;
	SPI_freetuptable(SPI_tuptable);
	return found;
}

/*
 * notify_flags -- for each of the n calls of 'ids', whether its policy
 * asks for NOTIFY (false for a database older than 1.2)
 */
static bool *
notify_flags(const int64 *ids, int n)
{
	static SPIPlanPtr plan = NULL;
	Oid			argtypes[1] = {INT8ARRAYOID};
	Datum		values[1] = {args_id_array(ids, n)};
	bool	   *notify = palloc0(sizeof(bool) * n);
	int		   *rows;

	if (schema_retries_version() < SCHEMA_1_2)
		return notify;
	plans_prepare_kept(&plan,
					   "SELECT c.id FROM retries.call_data c"
					   " JOIN retries.policy_data p ON p.id OPERATOR(pg_catalog.=) c.policy_id"
					   " WHERE c.id OPERATOR(pg_catalog.=) ANY ($1) AND p.notify",
					   1, argtypes);
	if (SPI_execute_plan(plan, values, NULL, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not look up which calls notify");
	rows = rows_of_ids(ids, n);
	for (int i = 0; i < n; i++)
		notify[i] = rows[i] >= 0;
	SPI_freetuptable(SPI_tuptable);
	return notify;
}

/*
 * chains_calls_finished -- the current transaction has just written that
 * the n calls of 'ids' finished: how[i] is 's' (succeeded), 'f' (failed)
 * or 'c' (cancelled), notify[i] whether the call's policy asks for NOTIFY
 * (NULL: look it up)
 *
 * Their waiters are woken at commit and their NOTIFYs sent (wait.c); the
 * calls that run after them are released or cancelled, and a cancelled
 * call that still waited for others waits no more.  Runs as the
 * extension's owner (or a worker), inside SPI.
 */
void
chains_calls_finished(int n, const int64 *ids, const char *how, const bool *notify)
{
	int64	   *succeeded;
	int64	   *failed;
	char	   *failed_how;
	int			nsucceeded = 0;
	int			nfailed = 0;

	if (n == 0)
		return;
	if (notify == NULL)
		notify = notify_flags(ids, n);
	for (int i = 0; i < n; i++)
		xact_call_finished(ids[i], notify[i]);

	if (schema_retries_version() < SCHEMA_1_2 || !have_followers())
		return;
	succeeded = palloc(sizeof(int64) * n);
	failed = palloc(sizeof(int64) * n);
	failed_how = palloc(n);
	for (int i = 0; i < n; i++)
	{
		if (how[i] == 's')
			succeeded[nsucceeded++] = ids[i];
		else
		{
			failed[nfailed] = ids[i];
			failed_how[nfailed++] = how[i];
		}
	}
	if (nsucceeded > 0 && release_followers(succeeded, nsucceeded) > 0)
		retries_chains_released = true;
	if (nfailed > 0)
	{
		static SPIPlanPtr plan = NULL;
		Oid			argtypes[1] = {INT8ARRAYOID};
		Datum		values[1] = {args_id_array(failed, nfailed)};

		/* a call that still waited (cancelled by hand) waits no more */
		plans_prepare_kept(&plan,
						   "DELETE FROM retries.call_after"
						   " WHERE call_id OPERATOR(pg_catalog.=) ANY ($1)",
						   1, argtypes);
		if (SPI_execute_plan(plan, values, NULL, false, 0) != SPI_OK_DELETE)
			elog(ERROR, "could not forget what cancelled calls waited for");
		cancel_followers(failed, failed_how, nfailed);
	}
}

/*
 * chains_pending -- release or cancel the followers of the calls
 * listed in call_after_pending, those that are no longer locked by
 * another transaction (see the head of the file); true if any was released
 *
 * An entry goes once its call's row can be share-locked: the call is
 * finished (its followers are dealt with now), or it is unfinished and no
 * worker runs it (its followers' rows of call_after, committed before the
 * entry was seen, are seen by whatever transaction finishes it later), or
 * it is gone.  An entry whose call is locked (a worker's batch runs it)
 * stays for a later look.  Called by a worker, as its superuser, in its
 * short transaction before a batch, inside SPI.
 */
bool
chains_pending(void)
{
	static SPIPlanPtr pending_plan = NULL;
	static SPIPlanPtr present_plan = NULL;
	static SPIPlanPtr done_plan = NULL;
	Oid			argtypes[1] = {INT4OID};
	Oid			id_types[1] = {INT8ARRAYOID};
	Datum		values[1] = {Int32GetDatum(PENDING_BATCH)};
	int64	   *raw;
	int			nraw;
	int64	   *ids;
	bool	   *done;
	bool	   *settled;
	CallState  *states;
	int			n;
	int64	   *succeeded;
	int64	   *failed;
	char	   *failed_how;
	int64	   *gone;
	int			nsucceeded = 0;
	int			nfailed = 0;
	int			ngone = 0;
	bool		released = false;

	if (schema_retries_version() < SCHEMA_1_2)
		return false;
	plans_prepare_kept(&pending_plan,
					   "SELECT after_id FROM retries.call_after_pending"
					   " LIMIT $1 FOR UPDATE SKIP LOCKED",
					   1, argtypes);
	if (SPI_execute_plan(pending_plan, values, NULL, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read the finished calls whose followers wait");
	nraw = (int) SPI_processed;
	if (nraw == 0)
		return false;
	raw = palloc(sizeof(int64) * nraw);
	ids = palloc(sizeof(int64) * nraw);
	for (int i = 0; i < nraw; i++)
	{
		bool		isnull;

		raw[i] = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[i],
											 SPI_tuptable->tupdesc, 1, &isnull));
		ids[i] = noted_call(raw[i]);
	}
	SPI_freetuptable(SPI_tuptable);
	qsort(ids, nraw, sizeof(int64), cmp_int64);
	n = qunique(ids, nraw, sizeof(int64), cmp_int64);
	done = palloc(sizeof(bool) * n);
	settled = palloc0(sizeof(bool) * n);
	values[0] = args_id_array(ids, n);

	/* the calls that no other transaction holds, and their states */
	states = palloc(sizeof(CallState) * n);
	share_lock_calls(ids, n, done, states);
	succeeded = palloc(sizeof(int64) * n);
	failed = palloc(sizeof(int64) * n);
	failed_how = palloc(n);
	for (int i = 0; i < n; i++)
	{
		if (!done[i] || states[i] == CALL_SCHEDULED)
			continue;			/* locked; or not run now: whoever finishes it
								 * sees */
		if (states[i] == CALL_SUCCEEDED)
			succeeded[nsucceeded++] = ids[i];
		else
		{
			failed[nfailed] = ids[i];
			failed_how[nfailed++] = states[i] == CALL_FAILED ? 'f' : 'c';
		}
	}

	/* of the others, those that are gone (pruned by hand) are done too */
	plans_prepare_kept(&present_plan,
					   "SELECT id FROM retries.call_data"
					   " WHERE id OPERATOR(pg_catalog.=) ANY ($1)",
					   1, id_types);
	if (SPI_execute_plan(present_plan, values, NULL, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not look up the finished calls whose followers wait");
	for (int i = 0; i < n; i++)
	{
		bool		present = false;

		for (uint64 row = 0; row < SPI_processed && !present; row++)
		{
			bool		isnull;

			present = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[row],
												  SPI_tuptable->tupdesc, 1, &isnull)) == ids[i];
		}
		settled[i] = done[i] || !present;
	}
	SPI_freetuptable(SPI_tuptable);

	/*
	 * The entries of the settled calls that this transaction locked, and only
	 * those: an entry of the same call with the other sign, locked by another
	 * worker, is left to it (deleting it would wait for that worker, which
	 * may be waiting for this one's)
	 */
	gone = palloc(sizeof(int64) * nraw);
	for (int i = 0; i < nraw; i++)
	{
		int64		id = noted_call(raw[i]);
		int64	   *at = bsearch(&id, ids, n, sizeof(int64), cmp_int64);

		Assert(at != NULL);
		if (settled[at - ids])
			gone[ngone++] = raw[i];
	}
	values[0] = args_id_array(gone, ngone);
	plans_prepare_kept(&done_plan,
					   "DELETE FROM retries.call_after_pending"
					   " WHERE after_id OPERATOR(pg_catalog.=) ANY ($1)",
					   1, id_types);
	if (SPI_execute_plan(done_plan, values, NULL, false, 0) != SPI_OK_DELETE)
		elog(ERROR, "could not forget the finished calls whose followers waited");
	if (ngone < nraw)
		retries_chains_deferred = true; /* look again soon */

	if (nsucceeded > 0)
		released = release_followers(succeeded, nsucceeded) > 0;
	if (nfailed > 0)
		cancel_followers(failed, failed_how, nfailed);
	return released;
}
