/*-------------------------------------------------------------------------
 *
 * calls.c
 *	  Writes to the calls table (retries.call_data) and its attempts
 *	  (retries.attempt_data), as one module owns them.
 *
 * The statements that change a call's row are gathered here, one function
 * each, named for what they do to the call, so that what the table can go
 * through is read in one place: the changes of state that a role asks for
 * (cancel, reschedule, schedule again: manage.c); the holds and releases
 * of flow control (a paused function's calls, a call at its gate, a gate's
 * release: flow.c, whose releases in turns between roles end in
 * CALLS_RELEASE_CHOSEN); the runner's hand-off (a call due at 'infinity'
 * while its runner runs, put back, held for a place, released in turns);
 * an attempt given back; a hook's error; calls put off by their key's
 * window (key_window.c) and a debounced call moved (api/call.c); the
 * releases of calls waiting for an event or past its timeout (events.c);
 * the followers of finished calls released or cancelled (chains.c); the
 * outcomes of attempts, the one writer of them (engine/outcome.c queues
 * them), and their trimming; a call failed for a bad row (lone.c); and the
 * finished calls pruned (retention.c); the calls of a copied database
 * cancelled as it settles (home.c), and the calls a restore loaded released
 * if their event was emitted (restore.c), both run as the extension's
 * owner.  The insertion of a call is the module's too, in insert.c (it
 * writes the row past the executor when it can).  No other file writes
 * call_data or attempt_data.
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
#include "storage/lmgr.h"
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
 * calls_put_off_key -- call 'id' (whose row this transaction holds) and
 * the other calls of its role's key that would come due before 'when'
 * moved to 'when', uncharged (a key's window: key_window.c): of those,
 * the ones that no other transaction holds (another worker's claim is its
 * own to put off) and no gate holds, CALLS_PUT_OFF_MAX at most.  Once
 * another call of the key runs, one look puts the key's backlog off
 * instead of one look per call (100 calls behind a running one took a
 * third of a core, looked at one by one every 100 ms).
 */
void
calls_put_off_key(int64 id, Datum role, Datum key, TimestampTz when)
{
	static SPIPlanPtr plan = NULL;
	Oid			argtypes[4] = {INT8OID, OIDOID, TEXTOID, TIMESTAMPTZOID};
	Datum		values[4] = {Int64GetDatum(id), role, key, TimestampTzGetDatum(when)};

	calls_put_off(id, when);
	update_call(&plan,
				"UPDATE retries.call_data c SET next_attempt = $4,"
				" updated_at = pg_catalog.now()"
				" FROM (SELECT o.id FROM retries.call_data o WHERE" CALLS_OTHERS_OF_KEY
				"  AND o.state OPERATOR(pg_catalog.=) 'scheduled' AND NOT o.held"
				"  AND o.next_attempt OPERATOR(pg_catalog.<) $4"
				"  LIMIT " CppAsString2(CALLS_PUT_OFF_MAX) " FOR NO KEY UPDATE SKIP LOCKED) f"
				" WHERE c.id OPERATOR(pg_catalog.=) f.id",
				4, argtypes, values, id, "put off the key's other calls with");
}

/*
 * calls_debounce -- call 'id', made with a debounced key and not yet
 * tried, due at 'due' instead (but no later than 'debounce_max', if not
 * null, after it was made, nor before 'floor'), with 'args': a later call
 * of its key took its place (api/call.c); false if the call has started,
 * or another transaction holds it.  Read committed, as the key's lock was
 * taken.
 */
bool
calls_debounce(int64 id, Datum due, Datum args, Datum debounce_max,
			   bool has_debounce_max, Datum floor)
{
	static SPIPlanPtr plan = NULL;
	Oid			argtypes[5] = {INT8OID, TIMESTAMPTZOID, JSONBOID, INTERVALOID, TIMESTAMPTZOID};
	Datum		values[5] = {Int64GetDatum(id), due, args, debounce_max, floor};
	char		nulls[5] = {' ', ' ', ' ', has_debounce_max ? ' ' : 'n', ' '};

	plans_prepare_kept(&plan,
					   "UPDATE retries.call_data c SET next_attempt ="
					   "  CASE WHEN $4::pg_catalog.interval IS NULL THEN $2"
					   "  ELSE GREATEST($5, LEAST($2, c.created_at OPERATOR(pg_catalog.+) $4)) END,"
					   " args = $3, updated_at = pg_catalog.now()"
					   " FROM (SELECT id FROM retries.call_data"
					   "  WHERE id OPERATOR(pg_catalog.=) $1"
					   "  AND state OPERATOR(pg_catalog.=) 'scheduled'"
					   "  AND attempts OPERATOR(pg_catalog.=) 0"
					   "  AND next_attempt OPERATOR(pg_catalog.<>) 'infinity'::pg_catalog.timestamptz"
					   "  FOR KEY SHARE SKIP LOCKED) f"
					   " WHERE c.id OPERATOR(pg_catalog.=) f.id"
					   " AND c.state OPERATOR(pg_catalog.=) 'scheduled'"
					   " AND c.attempts OPERATOR(pg_catalog.=) 0"
					   " AND c.next_attempt OPERATOR(pg_catalog.<>) 'infinity'::pg_catalog.timestamptz",
					   5, argtypes);
	if (plans_execute_read_committed(plan, values, nulls) != SPI_OK_UPDATE)
		elog(ERROR, "could not move call " INT64_FORMAT, id);
	return SPI_processed == 1;
}

/*
 * calls_release_for_event -- the calls of 'role' that wait for its event
 * 'event' (text) released (RELEASE_SET), as seen by a snapshot taken now,
 * after the event's lock (events.c); how many
 */
uint64
calls_release_for_event(Datum role, Datum event)
{
	static SPIPlanPtr plan = NULL;
	Oid			argtypes[2] = {OIDOID, TEXTOID};
	Datum		values[2] = {role, event};

	plans_prepare_kept(&plan,
					   "UPDATE retries.call_data c SET event_wait = false," RELEASE_SET
					   CALLS_WAITING_FOR_EVENT,
					   2, argtypes);
	if (SPI_execute_snapshot(plan, values, NULL, GetLatestSnapshot(),
							 InvalidSnapshot, false, false, 0) != SPI_OK_UPDATE)
		elog(ERROR, "could not release the calls waiting for an event");
	return SPI_processed;
}

/*
 * calls_release_timed_out -- up to 'limit' of the calls whose event's
 * timeout has passed by 'now' released (RELEASE_SET; those that another
 * transaction holds are left for later); how many
 */
uint64
calls_release_timed_out(TimestampTz now, int limit)
{
	static SPIPlanPtr plan = NULL;
	Oid			argtypes[2] = {TIMESTAMPTZOID, INT4OID};
	Datum		values[2] = {TimestampTzGetDatum(now), Int32GetDatum(limit)};

	plans_prepare_generic(&plan,
						  "WITH due AS (SELECT id FROM retries.call_data"
						  " WHERE event_wait AND state OPERATOR(pg_catalog.=) 'scheduled'"
						  " AND event_deadline OPERATOR(pg_catalog.<=) $1"
						  " ORDER BY event_deadline LIMIT $2 FOR UPDATE SKIP LOCKED)"
						  " UPDATE retries.call_data c SET event_wait = NULL," RELEASE_SET
						  " FROM due WHERE c.id OPERATOR(pg_catalog.=) due.id",
						  2, argtypes);
	if (SPI_execute_plan(plan, values, NULL, false, 0) != SPI_OK_UPDATE)
		elog(ERROR, "retries: could not release the calls past their event_timeout");
	return SPI_processed;
}

/*
 * calls_release_at_gate -- release up to 'limit' of gate's held calls due
 * by 'now', earliest first (only those without a limit_key if 'keyless');
 * how many (flow.c)
 */
uint64
calls_release_at_gate(Oid gate, int64 limit, TimestampTz now, bool keyless)
{
	static SPIPlanPtr plans[2];
	Oid			argtypes[3] = {OIDOID, INT8OID, TIMESTAMPTZOID};
	Datum		values[3];

	values[0] = ObjectIdGetDatum(gate);
	values[1] = Int64GetDatum(limit);
	values[2] = TimestampTzGetDatum(now);
	if (plans[keyless] == NULL)
		plans_prepare_kept(&plans[keyless],
						   psprintf("UPDATE retries.call_data SET held = false"
									" WHERE id OPERATOR(pg_catalog.=) ANY (ARRAY("
									"  SELECT id FROM retries.call_data"
									"  WHERE gate OPERATOR(pg_catalog.=) $1::pg_catalog.oid"
									"  AND state OPERATOR(pg_catalog.=) 'scheduled' AND held%s"
									"  AND next_attempt OPERATOR(pg_catalog.<=) $3"
									"  ORDER BY next_attempt LIMIT $2 FOR UPDATE SKIP LOCKED))"
									" AND held",
									keyless ? " AND limit_key IS NULL" : ""),
						   3, argtypes);
	if (SPI_execute_plan(plans[keyless], values, NULL, false, 0) != SPI_OK_UPDATE)
		elog(ERROR, "retries: could not release the calls of gate %u", gate);
	return SPI_processed;
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
 * it sets; returns how many, their ids into ids[] (room for 'places').  A
 * call that another transaction holds locked is left for the next time,
 * and so are the calls of the 'navoid' roles of 'avoid', and those not due
 * yet (moved on by reschedule(), which leaves them held: a place offered
 * to such a call would wait for it in vain, t/072).
 */
int
calls_release_runner_holds(int places, Oid *last_role, const Oid *avoid, int navoid,
						   int64 *ids)
{
	static SPIPlanPtr plan = NULL;
	Oid			argtypes[3] = {OIDOID, OIDARRAYOID, TIMESTAMPTZOID};
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
					   "  AND next_attempt OPERATOR(pg_catalog.<=) $3"
					   "  ORDER BY scheduled_by::pg_catalog.oid OPERATOR(pg_catalog.<=) $1,"
					   "  scheduled_by, next_attempt LIMIT 1 FOR UPDATE SKIP LOCKED)"
					   " RETURNING c.scheduled_by::pg_catalog.oid, c.id",
					   3, argtypes);
	for (; released < places; released++)
	{
		Datum		values[3] = {ObjectIdGetDatum(*last_role), avoided,
		TimestampTzGetDatum(clock_now())};
		bool		isnull;

		if (SPI_execute_plan(plan, values, NULL, false, 0) != SPI_OK_UPDATE_RETURNING)
			elog(ERROR, "retries: could not release calls held for a runner");
		if (SPI_processed == 0)
			break;
		*last_role = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[0],
													SPI_tuptable->tupdesc, 1, &isnull));
		ids[released] = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0],
													SPI_tuptable->tupdesc, 2, &isnull));
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
 * lock_calls_first -- take call_data's lock before a statement that writes
 * attempt_data and call_data together: a kept plan locks its relations in
 * the order of its range table, where the INSERT's attempt_data comes
 * before the call_data of its WITH, and a transaction that had not locked
 * call_data yet (a lone call's failure, an outcome) then held attempt_data
 * while it waited for call_data: the order of the batches is call_data
 * first (doc/architecture.md, "Order"), as the update scripts' is.
 */
static void
lock_calls_first(void)
{
	Oid			relid = get_relname_relid("call_data", schema_retries_oid());

	if (OidIsValid(relid))
		LockRelationOid(relid, RowExclusiveLock);
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
	lock_calls_first();
	if (SPI_execute_plan(plan, values, NULL, false, 0) != SPI_OK_INSERT)
		elog(ERROR, "retries: could not fail call " INT64_FORMAT, id);
	return SPI_processed > 0;
}

/* The types of the columns of calls_write_outcomes(), by CallsOutcomeColumn */
static const Oid outcome_column_type[OC_NCOLUMNS] = {
	INT8OID, INT4OID, TIMESTAMPTZOID, TIMESTAMPTZOID, TEXTOID, TEXTOID,
	TIMESTAMPTZOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID, INT8OID, JSONBOID,
	TEXTOID, INT4OID
};

/*
 * calls_write_outcomes -- the outcomes of 'n' attempts written: each
 * call's new state (columns[OC_STATE], checked by the caller against the
 * transition table), its attempts, last error and result, and an attempt
 * row each, all in one statement; 'columns' and 'nulls' hold one array of
 * n per CallsOutcomeColumn.  The one writer of outcomes (outcome_flush()).
 *
 * Planned once: a custom plan for each batch cost more than the statement
 * ran, and with calls of a small table a custom plan joined call_data by
 * reading all of it.  The generic plan looks each call up by its key,
 * planned so whatever the table's size then (plans_execute_by_index).
 */
void
calls_write_outcomes(Datum **columns, bool **nulls, int n)
{
	static SPIPlanPtr plans[3];

	/* results from version 1.2, the tag and process from 1.7 */
	int			version = schema_retries_version() >= SCHEMA_1_7 ? 2 :
	schema_retries_version() >= SCHEMA_1_2 ? 1 : 0;
	Oid			argtypes[OC_NCOLUMNS];
	Datum		values[OC_NCOLUMNS];

	plans_columns_to_arrays(OC_NCOLUMNS, outcome_column_type, columns, nulls, n,
							argtypes, values);
	if (plans[version] == NULL)
		plans_prepare_generic(&plans[version],
							  psprintf("WITH done AS ("
									   " SELECT * FROM ROWS FROM (pg_catalog.unnest($1),"
									   "  pg_catalog.unnest($2), pg_catalog.unnest($3),"
									   "  pg_catalog.unnest($4), pg_catalog.unnest($5),"
									   "  pg_catalog.unnest($6), pg_catalog.unnest($7),"
									   "  pg_catalog.unnest($8), pg_catalog.unnest($9),"
									   "  pg_catalog.unnest($10), pg_catalog.unnest($11),"
									   "  pg_catalog.unnest($12), pg_catalog.unnest($13),"
									   "  pg_catalog.unnest($14), pg_catalog.unnest($15),"
									   "  pg_catalog.unnest($16))"
									   "  AS d(call_id, attempt, started_at, finished_at, outcome,"
									   "   state, next_attempt, sqlstate, message, detail, hint,"
									   "   context, delay, result, command_tag, pid)),"
									   " c AS ("
									   " UPDATE retries.call_data c SET"
									   "  state = d.state::retries.call_state, attempts = d.attempt,"
									   "  next_attempt = coalesce(d.next_attempt, c.next_attempt),"
									   "  last_sqlstate = coalesce(d.sqlstate, c.last_sqlstate),"
									   "  last_message = coalesce(d.message, c.last_message),"
									   "  updated_at = d.finished_at%s"
									   " FROM done d WHERE c.id OPERATOR(pg_catalog.=) d.call_id)"
									   " INSERT INTO retries.attempt_data (call_id, attempt, started_at,"
									   "  finished_at, outcome, sqlstate, message, detail, hint, context,"
									   "  next_delay%s)"
									   " SELECT call_id, attempt, started_at, finished_at,"
									   "  outcome::retries.attempt_outcome, sqlstate, message, detail,"
									   "  hint, context,"
									   "  pg_catalog.make_interval(secs => delay OPERATOR(pg_catalog./) 1000000.0)%s"
									   " FROM done",
									   version >= 1 ? ", result = d.result" : "",
									   version >= 2 ? ", command_tag, pid" : "",
									   version >= 2 ? ", command_tag, pid" : ""),
							  OC_NCOLUMNS, argtypes);
	lock_calls_first();
	if (plans_execute_by_index(plans[version], values, false, 0) != SPI_OK_INSERT)
		elog(ERROR, "retries: could not record the outcomes of attempts");
}

/*
 * calls_trim_attempts -- of each of the 'n' calls of 'ids', whose attempt
 * attempts[i] is being written, delete the attempt rows older than its
 * last 'keep' (retries.max_kept_attempts; outcome.c)
 */
void
calls_trim_attempts(const int64 *ids, const int32 *attempts, int n, int keep)
{
	static SPIPlanPtr plan = NULL;
	Oid			argtypes[3] = {INT8ARRAYOID, INT4ARRAYOID, INT4OID};
	Datum		values[3];
	Datum	   *att = palloc(sizeof(Datum) * Max(n, 1));

	for (int i = 0; i < n; i++)
		att[i] = Int32GetDatum(attempts[i]);
	values[0] = args_id_array(ids, n);
	values[1] = PointerGetDatum(construct_array(att, n, INT4OID, sizeof(int32),
												true, TYPALIGN_INT));
	values[2] = Int32GetDatum(keep);
	plans_prepare_kept(&plan,
					   "DELETE FROM retries.attempt_data a"
					   " USING ROWS FROM (pg_catalog.unnest($1), pg_catalog.unnest($2))"
					   "  AS d(call_id, attempt)"
					   " WHERE a.call_id OPERATOR(pg_catalog.=) d.call_id"
					   " AND a.attempt OPERATOR(pg_catalog.<=)"
					   "  (d.attempt OPERATOR(pg_catalog.-) $3)",
					   3, argtypes);
	if (SPI_execute_plan(plan, values, NULL, false, 0) != SPI_OK_DELETE)
		elog(ERROR, "retries: could not delete the oldest attempt rows of calls");
}

/*
 * calls_release_followers -- the calls of 'ids' (int8[]) succeeded: their
 * rows of call_after go, and each of their followers has one fewer call
 * to wait for, and is released when it has none left; how many were
 * released.  Followers that another transaction holds are left for later
 * (call_after_pending, under 'sign' times their first's id: *later is set
 * then).  The statements of chains (api/chains.c).
 */
uint64
calls_release_followers(Datum ids, Datum sign, bool *later)
{
	static SPIPlanPtr plan = NULL;
	Oid			argtypes[2] = {INT8ARRAYOID, INT8OID};
	Datum		values[2] = {ids, sign};
	bool		isnull;
	uint64		released;

	plans_prepare_kept(&plan,
					   "WITH followers AS ("
					   " SELECT c.id FROM retries.call_data c"
					   " WHERE c.id OPERATOR(pg_catalog.=) ANY (ARRAY("
					   "  SELECT a.call_id FROM retries.call_after a"
					   "  WHERE a.after_id OPERATOR(pg_catalog.=) ANY ($1)))"
					   " AND c.state OPERATOR(pg_catalog.=) 'scheduled'"
					   " FOR UPDATE SKIP LOCKED),"
					   " done AS ("
					   " DELETE FROM retries.call_after a USING followers f"
					   " WHERE a.call_id OPERATOR(pg_catalog.=) f.id"
					   " AND a.after_id OPERATOR(pg_catalog.=) ANY ($1)"
					   " RETURNING a.call_id),"
					   " counts AS ("
					   " SELECT call_id, pg_catalog.count(*)::integer AS n FROM done"
					   " GROUP BY call_id),"
					   " released AS ("
					   " UPDATE retries.call_data c"
					   " SET waiting_on = c.waiting_on OPERATOR(pg_catalog.-) n.n,"
					   "  held = c.waiting_on OPERATOR(pg_catalog.>) n.n"
					   " FROM counts n WHERE c.id OPERATOR(pg_catalog.=) n.call_id"
					   " RETURNING c.held),"
					   " later AS ("
					   " INSERT INTO retries.call_after_pending (after_id)"
					   " SELECT DISTINCT $2 OPERATOR(pg_catalog.*) a.after_id"
					   " FROM retries.call_after a"
					   " WHERE a.after_id OPERATOR(pg_catalog.=) ANY ($1)"
					   " AND NOT EXISTS (SELECT FROM followers f"
					   "  WHERE f.id OPERATOR(pg_catalog.=) a.call_id)"
					   " ON CONFLICT DO NOTHING RETURNING after_id)"
					   " SELECT (SELECT pg_catalog.count(*) FROM released WHERE NOT held),"
					   "  (SELECT pg_catalog.count(*) FROM later)",
					   2, argtypes);
	if (SPI_execute_plan(plan, values, NULL, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not release the calls that run after calls that succeeded");
	released = (uint64) DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0],
													SPI_tuptable->tupdesc, 1, &isnull));
	*later = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc,
										 2, &isnull)) > 0;
	SPI_freetuptable(SPI_tuptable);
	return released;
}

/*
 * calls_cancel_followers -- the calls of 'ids' (int8[]) failed or were
 * cancelled ('failed', bool[], says which of each): cancel their
 * followers, each naming the call it ran after; followers that another
 * transaction holds are left for later (call_after_pending, under 'sign'
 * times their first's id).  SPI_tuptable holds, for the caller, a row
 * (id, notify, left for later) per cancelled call, or one with a NULL id
 * if none was.
 */
void
calls_cancel_followers(Datum ids, Datum failed, Datum sign)
{
	static SPIPlanPtr plan = NULL;
	Oid			argtypes[3] = {INT8ARRAYOID, BOOLARRAYOID, INT8OID};
	Datum		values[3] = {ids, failed, sign};

	plans_prepare_kept(&plan,
					   "WITH firsts AS ("
					   " SELECT f.id, f.failed FROM ROWS FROM (pg_catalog.unnest($1),"
					   "  pg_catalog.unnest($2)) AS f(id, failed)),"
					   " followers AS ("
					   " SELECT c.id FROM retries.call_data c"
					   " WHERE c.id OPERATOR(pg_catalog.=) ANY (ARRAY("
					   "  SELECT a.call_id FROM retries.call_after a"
					   "  WHERE a.after_id OPERATOR(pg_catalog.=) ANY ($1)))"
					   " AND c.state OPERATOR(pg_catalog.=) 'scheduled'"
					   " FOR UPDATE SKIP LOCKED),"
					   " cancelled AS ("
					   " UPDATE retries.call_data c SET state = 'cancelled', held = false,"
					   "  waiting_on = 0, updated_at = pg_catalog.now(),"
					   "  last_message = (SELECT pg_catalog.format("
					   "   'call %s, which this call runs after, %s', f.id,"
					   "   CASE WHEN f.failed THEN 'failed' ELSE 'was cancelled' END)"
					   "   FROM retries.call_after a JOIN firsts f"
					   "   ON f.id OPERATOR(pg_catalog.=) a.after_id"
					   "   WHERE a.call_id OPERATOR(pg_catalog.=) c.id"
					   "   ORDER BY f.id LIMIT 1)"
					   " FROM followers x WHERE c.id OPERATOR(pg_catalog.=) x.id"
					   " RETURNING c.id, c.policy_id),"
					   " gone AS ("
					   " DELETE FROM retries.call_after a USING cancelled x"
					   " WHERE a.call_id OPERATOR(pg_catalog.=) x.id),"
					   " later AS ("
					   " INSERT INTO retries.call_after_pending (after_id)"
					   " SELECT DISTINCT $3 OPERATOR(pg_catalog.*) a.after_id"
					   " FROM retries.call_after a"
					   " WHERE a.after_id OPERATOR(pg_catalog.=) ANY ($1)"
					   " AND NOT EXISTS (SELECT FROM followers f"
					   "  WHERE f.id OPERATOR(pg_catalog.=) a.call_id)"
					   " ON CONFLICT DO NOTHING RETURNING after_id)"
					   " SELECT x.id, p.notify, (SELECT pg_catalog.count(*) FROM later)"
					   " FROM cancelled x"
					   " JOIN retries.policy_data p ON p.id OPERATOR(pg_catalog.=) x.policy_id"
					   " UNION ALL"
					   " SELECT NULL, NULL, (SELECT pg_catalog.count(*) FROM later)"
					   " WHERE NOT EXISTS (SELECT FROM cancelled)",
					   3, argtypes);
	(void) call_state_change(CALL_SCHEDULED, CALL_CANCELLED);
	if (SPI_execute_plan(plan, values, NULL, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not cancel the calls that run after calls that failed");
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

/* How copied calls are cancelled: which, then how */
#define CANCEL_COPIED(which, held) \
	"UPDATE retries.call_data SET state = 'cancelled'," held \
	" last_message = $3, last_sqlstate = NULL, updated_at = pg_catalog.now()" \
	" WHERE " which " RETURNING id"
/* all that no other transaction holds ($1 unused) */
#define ALL_COPIED \
	"id OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT id" COPIED_CALLS " FOR UPDATE SKIP LOCKED))"
/* call $1, which this transaction holds (a worker's claim) */
#define ONE_COPIED \
	"id OPERATOR(pg_catalog.=) $1 AND state OPERATOR(pg_catalog.=) 'scheduled'" \
	" AND created_at OPERATOR(pg_catalog.<) $2" NOT_SETTLED

/*
 * calls_cancel_copied -- a copy of a database settles (home.c): cancel the
 * copied calls not yet settled, all that no other transaction holds, or
 * ('one') call values[0], which this transaction holds, with the copy's
 * moment values[1] and message values[2], past those settled before
 * (values[3], a LIKE pattern; see NOT_SETTLED); how many
 */
uint64
calls_cancel_copied(bool one, RetriesSchemaVersion version, Datum *values)
{
	Oid			argtypes[4] = {INT8OID, TIMESTAMPTZOID, TEXTOID, TEXTOID};

	/* by 'one', then whether the table has 'held' (1.2) */
	static const char *const sql[2][2] = {
		{CANCEL_COPIED(ALL_COPIED, ""), CANCEL_COPIED(ALL_COPIED, " held = false,")},
		{CANCEL_COPIED(ONE_COPIED, ""), CANCEL_COPIED(ONE_COPIED, " held = false,")},
	};

	if (SPI_execute_with_args(sql[one][version >= SCHEMA_1_2], 4, argtypes, values,
							  NULL, false, 0) != SPI_OK_UPDATE_RETURNING)
		elog(ERROR, "retries: could not cancel the calls of a copied database");
	return SPI_processed;
}

/*
 * calls_release_restored_waiters -- after a COPY into event_data or
 * call_data (1.7, restore.c): release the calls that wait for an event
 * emitted after they were made, as its emit would have (RELEASE_SET); the
 * workers find them at their next look.  Inside SPI, as the extension's
 * owner.
 */
void
calls_release_restored_waiters(void)
{
	if (SPI_execute("UPDATE retries.call_data c SET event_wait = false," RELEASE_SET
					" WHERE c.event_wait AND c.state OPERATOR(pg_catalog.=) 'scheduled'"
					" AND EXISTS (SELECT FROM retries.event_data d"
					"  WHERE d.role OPERATOR(pg_catalog.=) c.scheduled_by"
					"  AND pg_catalog.md5(d.event) OPERATOR(pg_catalog.=) pg_catalog.md5(c.on_event)"
					"  AND d.event OPERATOR(pg_catalog.=) c.on_event"
					"  AND d.emitted_at OPERATOR(pg_catalog.>) c.created_at)",
					false, 0) != SPI_OK_UPDATE)
		elog(ERROR, "retries: could not release the restored calls whose event was emitted");
}
