/*-------------------------------------------------------------------------
 *
 * calls.c
 *	  Writes to the calls table (retries.call_data) and its attempts
 *	  (retries.attempt_data), as one module owns them.
 *
 * The statements that change a call's row are gathered here, one function
 * each, named for what they do to the call, so that what the table can go
 * through is read in one place.  So far: the changes of state that a
 * role asks for (cancel, reschedule, schedule again: manage.c), the holds
 * of flow control (a paused function's calls, a call at its gate: flow.c),
 * the runner's hand-off (a call due at 'infinity' while its runner runs, put
 * back, held for a place, released in turns), an attempt given back, a
 * hook's error, a call put off by its key's window (key_window.c), a call
 * failed for a bad row (lone.c), and the finished calls pruned
 * (retention.c).  The other writes of api/ and flow/ and the outcome
 * writer (engine/outcome.c) come here next.
 *
 * A change of state is an UPDATE ... WHERE state = 'from': the change is
 * checked against the transition table (call_state_change) and against
 * the row's real state, and a row that is not in 'from' any more is an
 * error, not a silent no-op (the callers hold the row locked, so this is
 * a bug's net, not a race's).
 *
 * Each runs inside the caller's transaction and SPI connection, with its
 * plan kept (plans_prepare_kept), and raises an error if its statement
 * fails.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/snapmgr.h"

#include "base/base.h"
#include "tables/tables.h"

/*
 * update_call -- run one UPDATE of call 'id' (or of its attempts), the
 * query prepared in *plan with 'nargs' parameters; 'what' says what it
 * does, for the error if it fails
 */
static void
update_call(SPIPlanPtr *plan, const char *query, int nargs, Oid *argtypes,
			Datum *values, int64 id, const char *what)
{
	plans_prepare_kept(plan, query, nargs, argtypes);
	if (SPI_execute_plan(*plan, values, NULL, false, 0) != SPI_OK_UPDATE)
		elog(ERROR, "retries: could not %s call " INT64_FORMAT, what, id);
}

/*
 * update_by_id -- update_call() of a query whose one parameter ($1) is
 * the call's id
 */
static void
update_by_id(SPIPlanPtr *plan, const char *query, int64 id, const char *what)
{
	Oid			argtypes[1] = {INT8OID};
	Datum		values[1] = {Int64GetDatum(id)};

	update_call(plan, query, 1, argtypes, values, id, what);
}

/*
 * calls_change_state -- run one UPDATE of call 'id' (query, prepared in
 * *plan: $1 the id, $2 'run_at', $3 the state the row must be in), whose
 * stored state must be 'from'; an error if it is not
 */
static void
calls_change_state(SPIPlanPtr *plan, const char *query, int64 id, CallState from,
				   Datum run_at)
{
	Oid			argtypes[3] = {INT8OID, TIMESTAMPTZOID, TEXTOID};
	Datum		values[3];

	values[0] = Int64GetDatum(id);
	values[1] = run_at;
	values[2] = CStringGetTextDatum(call_state_name(from));
	update_call(plan, query, 3, argtypes, values, id, "update");
	if (SPI_processed != 1)
		elog(ERROR, "retries: call " INT64_FORMAT " is no longer %s",
			 id, call_state_name(from));
}

/*
 * calls_cancel -- a scheduled call cancelled (retries.cancel)
 */
void
calls_cancel(int64 id)
{
	static SPIPlanPtr plan = NULL;

	(void) call_state_change(CALL_SCHEDULED, CALL_CANCELLED);
	calls_change_state(&plan,
					   "UPDATE retries.call_data"
					   " SET state = 'cancelled', updated_at = pg_catalog.now()"
					   " WHERE id OPERATOR(pg_catalog.=) $1"
					   " AND state::pg_catalog.text OPERATOR(pg_catalog.=) $3",
					   id, CALL_SCHEDULED, (Datum) 0);
}

/*
 * calls_move -- a scheduled call due at 'run_at' instead
 * (retries.reschedule, retries.retry_now)
 */
void
calls_move(int64 id, Datum run_at)
{
	static SPIPlanPtr plan = NULL;

	(void) call_state_change(CALL_SCHEDULED, CALL_SCHEDULED);
	calls_change_state(&plan,
					   "UPDATE retries.call_data"
					   " SET next_attempt = $2, updated_at = pg_catalog.now()"
					   " WHERE id OPERATOR(pg_catalog.=) $1"
					   " AND state::pg_catalog.text OPERATOR(pg_catalog.=) $3",
					   id, CALL_SCHEDULED, run_at);
}

/*
 * calls_schedule_again -- a call that failed or was cancelled ('from')
 * scheduled again, due at 'run_at', with as many attempts again as its
 * policy allows (retries.reschedule, retries.retry_now); in a database of
 * the tables of 'version'
 *
 * A call that waited for others (chains.c) waits no more, nor one that
 * waited for its event (it runs without it, as after its timeout) or for a
 * place in a runner (a worker holds it again if it must).
 */
void
calls_schedule_again(int64 id, CallState from, Datum run_at, RetriesSchemaVersion version)
{
	static SPIPlanPtr plans[3];
	bool		chains = (version >= SCHEMA_1_2);
	int			form = version >= SCHEMA_1_6 ? 2 : chains ? 1 : 0;

	(void) call_state_change(from, CALL_SCHEDULED);
	calls_change_state(&plans[form], plans[form] != NULL ? NULL :
					   psprintf("UPDATE retries.call_data c"
								" SET state = 'scheduled', next_attempt = $2,"
								" max_attempts = c.attempts OPERATOR(pg_catalog.+) p.max_attempts,"
								" updated_at = pg_catalog.now()%s%s"
								" FROM retries.policy_data p"
								" WHERE c.id OPERATOR(pg_catalog.=) $1"
								" AND c.state::pg_catalog.text OPERATOR(pg_catalog.=) $3"
								" AND p.id OPERATOR(pg_catalog.=) c.policy_id",
								chains ?
								", held = c.held AND c.waiting_on OPERATOR(pg_catalog.=) 0"
								" AND c.gate IS NOT NULL,"
								" waiting_on = 0" : "",
								form == 2 ?
								", event_wait = CASE WHEN c.event_wait THEN NULL"
								" ELSE c.event_wait END" : ""),
					   id, from, run_at);
}

/*
 * calls_set_next_attempt -- make call 'id' due at 'when' (an SQL
 * expression), by the statement prepared in *plan
 */
static void
calls_set_next_attempt(SPIPlanPtr *plan, int64 id, const char *when)
{
	update_by_id(plan, *plan != NULL ? NULL :
				 psprintf("UPDATE retries.call_data SET next_attempt = %s"
						  " WHERE id OPERATOR(pg_catalog.=) $1", when),
				 id, "update");
}

/*
 * calls_hand_to_runner -- call 'id' is handed to a runner: due at
 * 'infinity', out of every claim's reach, until calls_runner_returned()
 */
void
calls_hand_to_runner(int64 id)
{
	static SPIPlanPtr plan = NULL;

	calls_set_next_attempt(&plan, id, "'infinity'::pg_catalog.timestamptz");
}

/*
 * calls_put_back -- call 'id' could not start now (no background worker
 * slot for its runner, or the other workers wait for theirs): due again a
 * second later, its attempt not charged
 */
void
calls_put_back(int64 id)
{
	static SPIPlanPtr plan = NULL;

	calls_set_next_attempt(&plan, id,
						   "pg_catalog.clock_timestamp()"
						   " OPERATOR(pg_catalog.+) '1 second'::pg_catalog.interval");
}

/*
 * calls_put_off -- call 'id' (whose row this transaction holds) due at
 * 'when' instead, uncharged (a key's window: key_window.c)
 */
void
calls_put_off(int64 id, TimestampTz when)
{
	static SPIPlanPtr plan = NULL;
	Oid			argtypes[2] = {INT8OID, TIMESTAMPTZOID};
	Datum		values[2] = {Int64GetDatum(id), TimestampTzGetDatum(when)};

	update_call(&plan,
				"UPDATE retries.call_data SET next_attempt = $2,"
				" updated_at = pg_catalog.now()"
				" WHERE id OPERATOR(pg_catalog.=) $1",
				2, argtypes, values, id, "put off");
}

/*
 * calls_runner_returned -- the runner of call 'id' has ended: due again at
 * 'started_at', when its attempt started (a retry moves it on); true if a
 * cancel() came meanwhile (the call stays cancelled)
 *
 * Only a call still due at 'infinity' is changed: a cancel() that came
 * after the hand-off committed stands.
 */
bool
calls_runner_returned(int64 id, TimestampTz started_at)
{
	static SPIPlanPtr plan = NULL;
	Oid			argtypes[2] = {INT8OID, TIMESTAMPTZOID};
	Datum		values[2] = {Int64GetDatum(id), TimestampTzGetDatum(started_at)};
	bool		isnull;

	plans_prepare_kept(&plan,
					   "UPDATE retries.call_data SET next_attempt = $2"
					   " WHERE id OPERATOR(pg_catalog.=) $1"
					   " AND next_attempt OPERATOR(pg_catalog.=) 'infinity'::pg_catalog.timestamptz"
					   " RETURNING state OPERATOR(pg_catalog.=) 'cancelled'",
					   2, argtypes);
	if (SPI_execute_plan(plan, values, NULL, false, 0) != SPI_OK_UPDATE_RETURNING)
		elog(ERROR, "retries: could not update call " INT64_FORMAT, id);
	return SPI_processed == 1 &&
		DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1,
								   &isnull));
}

/*
 * calls_hold_for_runner -- call 'id' waits for a place in a runner (the
 * other workers wait for theirs): held, out of every index the workers
 * claim from, uncharged, until calls_release_runner_holds() lets it go
 * (held with no gate and waiting for no call is held for a runner alone:
 * a gate it passed is no longer its hold, and its release is not the
 * gate's; pass_gate() holds it at its gate again if the gate is closed
 * when it is next claimed)
 */
void
calls_hold_for_runner(int64 id)
{
	static SPIPlanPtr plan = NULL;

	update_by_id(&plan,
				 "UPDATE retries.call_data SET held = true, gate = NULL"
				 " WHERE id OPERATOR(pg_catalog.=) $1",
				 id, "hold");
}

/*
 * calls_release_runner_holds -- let go of up to 'places' calls held for a
 * runner, in turns between roles: each the earliest of the first role
 * after *last_role that has one (then from the first role again), which
 * it sets; returns how many.  A call that another transaction holds
 * locked is left for the next time, and so are the calls of the 'navoid'
 * roles of 'avoid'.
 */
int
calls_release_runner_holds(int places, Oid *last_role, const Oid *avoid, int navoid)
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
 * calls_allow_another_attempt -- one more attempt for call 'id', if it has
 * a limit (an attempt given back: cut short by the extension's own stop)
 */
void
calls_allow_another_attempt(int64 id)
{
	static SPIPlanPtr plan = NULL;

	update_by_id(&plan,
				 "UPDATE retries.call_data SET max_attempts = max_attempts OPERATOR(pg_catalog.+) 1"
				 " WHERE id OPERATOR(pg_catalog.=) $1 AND max_attempts IS NOT NULL",
				 id, "give another attempt to");
}

/*
 * calls_note_hook_error -- add the error of its on_exhausted hook to the
 * row of attempt 'attempt' of call 'id'
 */
void
calls_note_hook_error(int64 id, int32 attempt, const char *error)
{
	static SPIPlanPtr plan = NULL;
	Oid			argtypes[3] = {INT8OID, INT4OID, TEXTOID};
	Datum		values[3];

	values[0] = Int64GetDatum(id);
	values[1] = Int32GetDatum(attempt);
	values[2] = CStringGetTextDatum(error);
	update_call(&plan,
				"UPDATE retries.attempt_data SET on_exhausted_error = $3"
				" WHERE call_id OPERATOR(pg_catalog.=) $1"
				" AND attempt OPERATOR(pg_catalog.=) $2",
				3, argtypes, values, id, "record the on_exhausted error of");
}

/*
 * calls_hold_of_function -- hold every scheduled call of function 'fnoid'
 * (whose key is 'key') that is not held yet, at its gate: the function is
 * paused.  A call due at 'infinity' (its runner runs it) is left to its
 * worker.  Rows a worker holds are waited for.
 */
void
calls_hold_of_function(Oid key, Oid fnoid)
{
	static SPIPlanPtr plan = NULL;
	Oid			argtypes[1] = {OIDOID};
	Datum		values[1] = {ObjectIdGetDatum(key)};

	plans_prepare_kept(&plan,
					   "UPDATE retries.call_data SET gate = $1::pg_catalog.oid,"
					   " held = true"
					   " WHERE state OPERATOR(pg_catalog.=) 'scheduled' AND NOT held"
					   " AND next_attempt OPERATOR(pg_catalog.<>) 'infinity'::pg_catalog.timestamptz"
					   " AND policy_id OPERATOR(pg_catalog.=) ANY (ARRAY("
					   "  SELECT id FROM retries.policy_data"
					   "  WHERE fn OPERATOR(pg_catalog.=) $1::pg_catalog.oid))",
					   1, argtypes);
	if (SPI_execute_plan(plan, values, NULL, false, 0) != SPI_OK_UPDATE)
		elog(ERROR, "retries: could not hold the calls of function %u", fnoid);
}

/*
 * calls_hold_if_paused -- hold call 'id' at its gate if its function is
 * paused now, read with the latest snapshot (as retries.call() reads it)
 */
void
calls_hold_if_paused(int64 id)
{
	static SPIPlanPtr plan = NULL;
	Oid			argtypes[1] = {INT8OID};
	Datum		values[1] = {Int64GetDatum(id)};

	plans_prepare_kept(&plan,
					   "UPDATE retries.call_data c SET gate = p.fn, held = true"
					   " FROM retries.policy_data p, retries.flow_data f"
					   " WHERE c.id OPERATOR(pg_catalog.=) $1"
					   " AND p.id OPERATOR(pg_catalog.=) c.policy_id"
					   " AND f.fn OPERATOR(pg_catalog.=) p.fn AND f.paused",
					   1, argtypes);
	if (SPI_execute_snapshot(plan, values, NULL, GetLatestSnapshot(),
							 InvalidSnapshot, false, false, 0) != SPI_OK_UPDATE)
		elog(ERROR, "retries: could not hold call " INT64_FORMAT, id);
}

/*
 * calls_hold_at_gate -- hold call 'id', which a worker claimed (its row is
 * locked), under 'gate' (its function's key: see names.c), instead of
 * running it (pass_gate)
 */
void
calls_hold_at_gate(int64 id, Oid gate)
{
	static SPIPlanPtr plan = NULL;
	Oid			argtypes[2] = {INT8OID, OIDOID};
	Datum		values[2] = {Int64GetDatum(id), ObjectIdGetDatum(gate)};

	update_call(&plan,
				"UPDATE retries.call_data SET gate = $2::pg_catalog.oid,"
				" held = true WHERE id OPERATOR(pg_catalog.=) $1",
				2, argtypes, values, id, "hold");
}

/*
 * calls_fail_bad_row -- fail call 'id' for good at attempt 'attempt', with
 * the worker's error (sqlstate, message, detail), unless it has been
 * charged or claimed since; true if it was failed
 *
 * Not through the outcome writer (engine/outcome.c), which every other
 * outcome goes through: this is the way out for a bad row, such as an
 * attempt's row that is already there, which its INSERT passes over (ON
 * CONFLICT DO NOTHING) so that the call fails all the same; every other
 * outcome must meet such a row as an error.
 */
bool
calls_fail_bad_row(int64 id, int32 attempt, const char *sqlstate, const char *message,
				   const char *detail)
{
	static SPIPlanPtr plan = NULL;
	Oid			argtypes[5] = {INT8OID, INT4OID, TEXTOID, TEXTOID, TEXTOID};
	Datum		values[5];

	values[0] = Int64GetDatum(id);
	values[1] = Int32GetDatum(attempt);
	values[2] = CStringGetTextDatum(sqlstate);
	values[3] = CStringGetTextDatum(message);
	values[4] = CStringGetTextDatum(detail);
	plans_prepare_kept(&plan,
					   "WITH l AS ("
					   " SELECT id FROM retries.call_data"
					   " WHERE id OPERATOR(pg_catalog.=) $1"
					   " AND state OPERATOR(pg_catalog.=) 'scheduled'"
					   " AND attempts OPERATOR(pg_catalog.<) $2"
					   " FOR UPDATE SKIP LOCKED),"
					   " c AS ("
					   " UPDATE retries.call_data d SET state = 'failed', attempts = $2,"
					   "  last_sqlstate = $3, last_message = $4,"
					   "  updated_at = pg_catalog.now()"
					   " FROM l WHERE d.id OPERATOR(pg_catalog.=) l.id"
					   " RETURNING d.id)"
					   " INSERT INTO retries.attempt_data (call_id, attempt, started_at,"
					   "  finished_at, outcome, sqlstate, message, detail)"
					   " SELECT id, $2, pg_catalog.now(), pg_catalog.clock_timestamp(),"
					   "  'failed', $3, $4, $5 FROM c"
					   " ON CONFLICT DO NOTHING",
					   5, argtypes);
	/* its last attempt was interrupted: it ran, and fails */
	(void) call_state_change(CALL_RUNNING, CALL_FAILED);
	if (SPI_execute_plan(plan, values, NULL, false, 0) != SPI_OK_INSERT)
		elog(ERROR, "retries: could not fail call " INT64_FORMAT, id);
	return SPI_processed > 0;
}

/*
 * calls_prune_finished -- delete up to 'limit' finished calls whose last
 * change is older than 'retention' (an interval's text), and their
 * attempts; how many calls were deleted.  With 'chains' (1.2), a call that
 * others still wait for (retries.call_after) is kept.
 */
uint64
calls_prune_finished(const char *retention, int limit, bool chains)
{
	static SPIPlanPtr plans[2];
	Oid			argtypes[2] = {TEXTOID, INT4OID};
	Datum		values[2];

	values[0] = CStringGetTextDatum(retention);
	values[1] = Int32GetDatum(limit);
	if (plans[chains] == NULL)
		plans_prepare_kept(&plans[chains],
						   psprintf("WITH doomed AS ("
									" SELECT id FROM retries.call_data c"
									" WHERE state OPERATOR(pg_catalog.=)"
									" ANY ('{succeeded,failed,cancelled}')"
									" AND updated_at OPERATOR(pg_catalog.<) (pg_catalog.now()"
									"  OPERATOR(pg_catalog.-) $1::pg_catalog.interval)%s"
									" LIMIT $2 FOR UPDATE SKIP LOCKED),"
									" gone AS (DELETE FROM retries.attempt_data"
									"  WHERE call_id OPERATOR(pg_catalog.=) ANY (SELECT id FROM doomed))"
									" DELETE FROM retries.call_data"
									" WHERE id OPERATOR(pg_catalog.=) ANY (SELECT id FROM doomed)",
									chains ?
									" AND NOT EXISTS (SELECT FROM retries.call_after a"
									"  WHERE a.after_id OPERATOR(pg_catalog.=) c.id)" : ""),
						   2, argtypes);
	if (SPI_execute_plan(plans[chains], values, NULL, false, 0) != SPI_OK_DELETE)
		elog(ERROR, "retries: could not prune finished calls");
	return SPI_processed;
}
