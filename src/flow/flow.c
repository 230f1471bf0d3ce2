/*-------------------------------------------------------------------------
 *
 * flow.c
 *	  Flow control: retries.pause() and retries.resume(), the limits
 *	  max_running and max_running_per_key that retries.annotate() sets,
 *	  and the holding and release of calls that the workers do (see
 *	  doc/operations.md, "Flow control").
 *
 * Gates.  A function that is paused or limited has a row in
 * retries.flow_data, its gate.  A call can be held: call_data.held, with
 * call_data.gate naming the function (by its key, from version 1.4: see
 * names.c; the gates in memory are keyed by it too).  A held call is in none of the
 * indexes that the workers claim from (their predicates say NOT held), so
 * held calls cost the claiming nothing, however many there are, and are
 * never claimed, so never charged an attempt.
 *
 * Pausing.  retries.pause() holds every scheduled call of the function,
 * and a call made while it is paused is made held.  retries.call() reads
 * whether a function is paused with its policy, with the latest snapshot
 * and no lock (pause() takes the function's lock exclusively against
 * other pauses, resumes and annotations only: a lock that a caller held
 * until its transaction ended let any caller keep the owner from pausing,
 * replacing or dropping the function, the eleventh hostile review), so a
 * call made while a pause commits can slip past it, unheld; so a worker
 * that claims a call of a function that its batch sees paused (such a
 * call, or one made by a library older than 1.2) holds it instead of
 * running it.  Holding them waits for the
 * calls that a worker has claimed (their rows are locked), so when pause()
 * returns no attempt of the function runs.
 *
 * Limiting.  max_running is enforced when an attempt starts: the worker
 * counts, under the exclusive LWLock of shared memory, the workers of the
 * database running an attempt of the function, and enters only if there
 * are fewer than max_running (shmem_gate_enter, shmem.c); it leaves when
 * the attempt ends.  Attempts in flight are exactly what the count sees,
 * so the bound holds across workers, and a crash restart, which ends every
 * attempt, starts the count afresh.  A call that finds no room is held
 * (uncharged) and the worker goes on with its batch: calls of a function
 * at its limit cost one write each, once, instead of being claimed again
 * and again.  Calls of a limited function that finds room are never held,
 * so a limit that does not bind costs nothing but the count.
 * max_running_per_key is checked in the same step: a worker running an
 * attempt of a call with a limit_key records a 64-bit hash of the key
 * beside the function (equal hashes of different keys would make the
 * limit stricter, never looser), and the attempt starts only if fewer
 * than the limit of the attempts running have that key.
 *
 * Releasing.  flow_release_held() runs in the workers' short
 * transaction at the top of their loop (with the firing of schedules): it
 * locks each gate row that is not paused (FOR UPDATE SKIP LOCKED: one
 * worker releases for a gate at a time) and releases (held = false) the
 * earliest due of its held calls: all of them, 1,000 a transaction, for a
 * gate that no longer limits; for a limited one, max_running less the
 * attempts running and the calls released and not yet claimed, so that
 * released calls rarely meet a full gate again.  With a limit per key,
 * those without a key first, then those whose key has room, key by key
 * (release_keys), so that neither a busy key's held calls hold back
 * another key's nor are they released only to be held again.  The workers do this when
 * woken (a call scheduled, a resume), after each batch while a gate lets
 * calls go (its attempts' ends leave room), when the next held call falls
 * due, and once a second at the latest.
 *
 * IDENTIFICATION
 *	  src/flow/flow.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/regproc.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"

#include "base/base.h"
#include "base/compat.h"
#include "core/policy.h"
#include "core/rate.h"
#include "flow/flow.h"
#include "shmem/shmem.h"
#include "tables/tables.h"
#include "xact/xact.h"

PG_FUNCTION_INFO_V1(retries_pause);
PG_FUNCTION_INFO_V1(retries_resume);

/* Most calls one gate releases in one transaction */
#define RELEASE_BATCH			1000

/*
 * flow_hold_calls -- hold every scheduled call of fnoid that is not
 * held, the released ones too, under its gate (its key: see
 * names.c)
 *
 * Call it as the extension's owner, inside SPI, with the function locked
 * exclusively (see the top of the file).  A call that a worker has claimed
 * is waited for: its row is locked until its attempt ends.  A call that a
 * runner runs (due at 'infinity') is left alone: its worker writes its
 * row when the attempt ends, and must not wait for this transaction, which
 * may stay open, or prepared, as long as the function's owner likes (the
 * ninth hostile review); its next attempt meets the gate when claimed.
 */
void
flow_hold_calls(Oid fnoid)
{
	Oid			key = names_function_key(fnoid, false);

	if (!OidIsValid(key))
		return;					/* no policy refers to it */
	calls_hold_of_function(key, fnoid);
}

/*
 * flow_set_gate -- store fnoid's gate: paused (unless NULL, which keeps
 * it), max_running, max_running_per_key (0 for none) and rate (NULL for
 * none; max_running -1 keeps all three); returns whether the gate was
 * closed before (paused or limited), and *was_paused
 *
 * Call it as the extension's owner, inside SPI.
 */
bool
flow_set_gate(Oid fnoid, const bool *paused, int32 max_running, int32 max_per_key,
			  const char *rate, bool *was_paused)
{
	static SPIPlanPtr plan = NULL;
	Oid			argtypes[6] = {OIDOID, BOOLOID, INT4OID, BOOLOID, INT4OID, TEXTOID};
	Datum		values[6];
	char		nulls[6] = {' ', ' ', ' ', ' ', ' ', ' '};
	bool		isnull;
	bool		was_limited;

	values[0] = ObjectIdGetDatum(names_function_key(fnoid, true));
	values[1] = BoolGetDatum(paused != NULL && *paused);
	nulls[1] = paused == NULL ? 'n' : ' ';
	values[2] = Int32GetDatum(max_running);
	nulls[2] = max_running <= 0 ? 'n' : ' ';
	values[3] = BoolGetDatum(max_running >= 0);
	values[4] = Int32GetDatum(max_per_key);
	nulls[4] = max_per_key <= 0 ? 'n' : ' ';
	values[5] = rate != NULL ? CStringGetTextDatum(rate) : (Datum) 0;
	nulls[5] = rate != NULL ? ' ' : 'n';
	/* the old row, locked, then the new one */
	plans_prepare_kept(&plan,
					   "WITH old AS ("
					   " SELECT paused, max_running, max_running_per_key, rate FROM retries.flow_data"
					   " WHERE fn OPERATOR(pg_catalog.=) $1::pg_catalog.oid"
					   " FOR UPDATE),"
					   " new AS ("
					   " INSERT INTO retries.flow_data AS f"
					   "  (fn, paused, max_running, max_running_per_key, rate)"
					   " VALUES ($1::pg_catalog.oid, coalesce($2, false),"
					   "  CASE WHEN $4 THEN $3 END, CASE WHEN $4 THEN $5 END,"
					   "  CASE WHEN $4 THEN $6 END)"
					   " ON CONFLICT (fn) DO UPDATE SET"
					   "  paused = coalesce($2, f.paused),"
					   "  max_running = CASE WHEN $4 THEN $3 ELSE f.max_running END,"
					   "  max_running_per_key = CASE WHEN $4 THEN $5"
					   "   ELSE f.max_running_per_key END,"
					   "  rate = CASE WHEN $4 THEN $6 ELSE f.rate END)"
					   " SELECT coalesce((SELECT paused FROM old), false),"
					   "  (SELECT max_running IS NOT NULL OR max_running_per_key IS NOT NULL"
					   "   OR rate IS NOT NULL FROM old) IS TRUE",
					   6, argtypes);
	if (SPI_execute_plan(plan, values, nulls, false, 0) != SPI_OK_SELECT ||
		SPI_processed != 1)
		elog(ERROR, "retries: could not store the gate of function %u", fnoid);
	xact_gates_changed();
	*was_paused = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0],
											 SPI_tuptable->tupdesc, 1, &isnull));
	was_limited = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0],
											 SPI_tuptable->tupdesc, 2, &isnull));
	return *was_paused || was_limited;
}

/*
 * flow_gate_call -- hold call 'id', scheduled again by retry_now(), if
 * its function is paused now
 *
 * Call it as the extension's owner, inside SPI, with the call's row
 * locked.  Read with the latest snapshot, as retries.call() reads it: a
 * pause that commits meanwhile is seen by the worker that claims the call.
 */
void
flow_gate_call(int64 id)
{
	if (schema_retries_version() < SCHEMA_1_2)
		return;
	calls_hold_if_paused(id);
}

/*
 * flow_clear_limit -- fnoid is no longer limited (if it has a gate)
 *
 * Call it as the extension's owner, inside SPI.
 */
void
flow_clear_limit(Oid fnoid)
{
	static SPIPlanPtr plan = NULL;
	Oid			argtypes[1] = {OIDOID};
	Datum		values[1] = {ObjectIdGetDatum(names_function_key(fnoid, false))};

	if (!OidIsValid(DatumGetObjectId(values[0])))
		return;					/* it has no gate */
	plans_prepare_kept(&plan,
					   "UPDATE retries.flow_data SET max_running = NULL,"
					   " max_running_per_key = NULL, rate = NULL"
					   " WHERE fn OPERATOR(pg_catalog.=) $1::pg_catalog.oid"
					   " AND (max_running IS NOT NULL OR max_running_per_key IS NOT NULL"
					   "  OR rate IS NOT NULL)",
					   1, argtypes);
	if (SPI_execute_plan(plan, values, NULL, false, 0) != SPI_OK_UPDATE)
		elog(ERROR, "retries: could not clear the limit of function %u", fnoid);
	/* the workers release what it held */
	if (SPI_processed > 0)
		xact_gates_changed();
}

/*
 * check_may_manage -- the function exists, and the caller owns it or is a
 * retries_admin (or a superuser)
 */
static void
check_may_manage(Oid fnoid)
{
	if (!SearchSysCacheExists1(PROCOID, ObjectIdGetDatum(fnoid)))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_FUNCTION),
				 errmsg("fn: function with OID %u does not exist", fnoid)));
	if (!retries_proc_ownercheck(fnoid, GetUserId()) &&
		!access_sees_all_calls(GetUserId()))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("must be owner of function %s or a member of retries_admin to pause or resume it",
						format_procedure(fnoid))));
}

/*
 * pause_or_resume -- what retries.pause() and resume() share
 *
 * retries.command(text) stands for every command: pausing or resuming it
 * does the same to retries.command_in(text, name, name), which stands for
 * the commands that run in another database (the twenty-first review,
 * t/054: they ran on through the documented pause).
 */
static bool
pause_or_resume(FunctionCallInfo fcinfo, bool pause)
{
	Oid			fnoid;
	Oid			command_in;
	RetriesUserSwitch save;
	bool		was_paused;
	bool		in_was_paused;

	PreventCommandIfReadOnly(pause ? "retries.pause()" : "retries.resume()");
	PreventCommandDuringRecovery(pause ? "retries.pause()" : "retries.resume()");
	args_check_not_null(fcinfo, 0, "fn");
	fnoid = PG_GETARG_OID(0);
	check_may_manage(fnoid);
	if (schema_retries_version() < SCHEMA_1_2)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("pausing needs version 1.2 of extension retries"),
				 errhint("ALTER EXTENSION retries UPDATE.")));

	command_in = fnoid == schema_command_oid() ? schema_command_in_oid() : InvalidOid;

	/* no retries.call() of it may be under way, unseen (see the top) */
	LockDatabaseObject(ProcedureRelationId, fnoid, 0,
					   pause ? AccessExclusiveLock : ShareUpdateExclusiveLock);
	if (OidIsValid(command_in))
		LockDatabaseObject(ProcedureRelationId, command_in, 0,
						   pause ? AccessExclusiveLock : ShareUpdateExclusiveLock);
	check_may_manage(fnoid);	/* dropped while we waited? */

	access_become_owner(&save);
	SPI_connect();
	(void) flow_set_gate(fnoid, &pause, -1, 0, NULL, &was_paused);
	if (pause)
		flow_hold_calls(fnoid);
	if (OidIsValid(command_in))
	{
		(void) flow_set_gate(command_in, &pause, -1, 0, NULL, &in_was_paused);
		if (pause)
			flow_hold_calls(command_in);
		/* paused already: both were; resumed: either was paused */
		was_paused = pause ? was_paused && in_was_paused : was_paused || in_was_paused;
	}
	SPI_finish();
	access_restore_user(&save);

	/* the workers release what it held */
	if (!pause && was_paused)
		xact_wake_workers(WAKE_FIRE);

	/* on a Citus coordinator, every node pauses or resumes it too */
	citus_forward_call(fcinfo, NULL);
	return pause != was_paused;
}

/*
 * retries_pause -- SQL function retries.pause(fn): no call of fn starts
 * until retries.resume(fn); true if it was not paused
 *
 * Returns once no attempt of fn is running (it waits for those that are).
 */
Datum
retries_pause(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(pause_or_resume(fcinfo, true));
}

/*
 * retries_resume -- SQL function retries.resume(fn); true if it was paused
 */
Datum
retries_resume(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(pause_or_resume(fcinfo, false));
}

/*
 * gate_rate -- the rate in column 'col' of a flow_data row into *rate;
 * false if it has none (or one that no longer parses, which annotate()
 * would not have stored)
 */
static bool
gate_rate(HeapTuple row, TupleDesc desc, int col, RateSpec *rate)
{
	bool		isnull;
	Datum		d = SPI_getbinval(row, desc, col, &isnull);
	PolicyError err;

	if (isnull)
		return false;
	if (!rate_parse(TextDatumGetCString(d), rate, &err))
	{
		elog(WARNING, "retries: ignoring a stored rate: %s", err.message);
		return false;
	}
	return true;
}

/*
 * flow_load_gates -- the gates that hold or limit something now, for a
 * worker's batch: *gates (in the current memory context) and how many
 *
 * Called inside SPI, in the batch transaction, with a snapshot of its own
 * (so that one loaded again within a batch sees a change committed since);
 * none in a database whose extension is older than 1.2.
 */
int
flow_load_gates(RetriesGate **gates)
{
	static SPIPlanPtr plan = NULL;
	int			n;

	*gates = NULL;
	if (schema_retries_version() < SCHEMA_1_2)
		return 0;
	plans_prepare_kept(&plan,
					   "SELECT fn::pg_catalog.oid, paused, coalesce(max_running, 0),"
					   " coalesce(max_running_per_key, 0), rate"
					   " FROM retries.flow_data"
					   " WHERE paused OR max_running IS NOT NULL OR max_running_per_key IS NOT NULL"
					   " OR rate IS NOT NULL",
					   0, NULL);
	if (SPI_execute_plan(plan, NULL, NULL, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "retries: could not read the gates");
	n = (int) SPI_processed;
	if (n == 0)
		return 0;
	*gates = palloc(sizeof(RetriesGate) * n);
	for (int i = 0; i < n; i++)
	{
		HeapTuple	row = SPI_tuptable->vals[i];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		bool		isnull;

		(*gates)[i].fn = DatumGetObjectId(SPI_getbinval(row, desc, 1, &isnull));
		(*gates)[i].paused = DatumGetBool(SPI_getbinval(row, desc, 2, &isnull));
		(*gates)[i].max_running = DatumGetInt32(SPI_getbinval(row, desc, 3, &isnull));
		(*gates)[i].max_per_key = DatumGetInt32(SPI_getbinval(row, desc, 4, &isnull));
		(*gates)[i].has_rate = gate_rate(row, desc, 5, &(*gates)[i].rate);
	}
	SPI_freetuptable(SPI_tuptable);
	return n;
}

/*
 * flow_call_limit_key -- does call 'id' have a limit_key?  If so, its
 * hash into *key (what the workers running its attempts are counted by)
 */
bool
flow_call_limit_key(int64 id, int64 *key)
{
	static SPIPlanPtr plan = NULL;
	Oid			argtypes[1] = {INT8OID};
	Datum		values[1] = {Int64GetDatum(id)};
	bool		isnull = true;
	Datum		d = (Datum) 0;

	plans_prepare_kept(&plan,
					   "SELECT pg_catalog.hashtextextended(limit_key, 0)"
					   " FROM retries.call_data WHERE id OPERATOR(pg_catalog.=) $1",
					   1, argtypes);
	if (SPI_execute_plan(plan, values, NULL, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "retries: could not read the limit_key of call " INT64_FORMAT, id);
	if (SPI_processed == 1)
		d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	SPI_freetuptable(SPI_tuptable);
	if (isnull)
		return false;
	*key = DatumGetInt64(d);
	return true;
}

/*
 * release_gate -- release up to 'room' of gate's held calls due by now,
 * earliest first (only those without a limit_key if 'keyless'); returns
 * how many
 */
static uint64
release_gate(Oid gate, int64 room, TimestampTz now, bool keyless)
{
	return calls_release_at_gate(gate, Min(room, RELEASE_BATCH), now, keyless);
}

/*
 * The end of a release in turns between roles (release_fairly,
 * release_keys): the calls of CTE chosen (id, role, pos) released by
 * CALLS_RELEASE_CHOSEN (CTE released), and LAST_RELEASED_ROLE is the role
 * of the last of them in turn, where the next release goes on from
 */
#define LAST_RELEASED_ROLE \
	"(SELECT c.role FROM chosen c JOIN released r ON r.id OPERATOR(pg_catalog.=) c.id" \
	" ORDER BY c.pos DESC LIMIT 1)"

/*
 * Where each gate's releases go on from, in the worker's memory, for up to
 * GATE_CURSORS gates: the key after which its last walk of keys stopped
 * (release_keys), and the role whose call it released last
 * (release_fairly, release_keys)
 */
#define GATE_CURSORS			16
typedef struct GateCursor
{
	Oid			fn;
	char	   *key;			/* NULL: from the first key */
	Oid			role;			/* InvalidOid: from the first role */
} GateCursor;
static GateCursor gate_cursors[GATE_CURSORS];

/*
 * gate_cursor -- the cursor of 'gate', made if need be (NULL if there
 * is no room for it: then every release starts from the first key and
 * role)
 */
static GateCursor *
gate_cursor(Oid gate)
{
	for (int i = 0; i < GATE_CURSORS; i++)
		if (gate_cursors[i].fn == gate)
			return &gate_cursors[i];
	for (int i = 0; i < GATE_CURSORS; i++)
		if (!OidIsValid(gate_cursors[i].fn))
		{
			gate_cursors[i].fn = gate;
			gate_cursors[i].key = NULL;
			gate_cursors[i].role = InvalidOid;
			return &gate_cursors[i];
		}
	return NULL;
}

/*
 * release_fairly -- as release_gate(), but in turns between the roles that
 * scheduled the held calls, so that limits that roles share are shared fairly
 * (doc/operations.md, "Authorization"): the earliest due held call of each
 * role, going round the roles from the one after the role released last, then
 * the second earliest of each, and so on; returns how many
 *
 * The roles are walked through index call_data_held_by_role (version 1.3),
 * one probe each, and each role's due held calls read from it, earliest
 * first, at most 'room' of each.  Without the index, release_gate().
 */
static uint64
release_fairly(Oid gate, int64 room, TimestampTz now, bool keyless)
{
	static SPIPlanPtr plans[2];
	Oid			argtypes[4] = {OIDOID, INT8OID, TIMESTAMPTZOID, OIDOID};
	Datum		values[4];
	GateCursor *cursor;
	uint64		released;
	bool		isnull;
	Datum		last;

	if (schema_retries_version() < SCHEMA_1_3)
		return release_gate(gate, room, now, keyless);
	cursor = gate_cursor(gate);
	values[0] = ObjectIdGetDatum(gate);
	values[1] = Int64GetDatum(Min(room, RELEASE_BATCH));
	values[2] = TimestampTzGetDatum(now);
	values[3] = ObjectIdGetDatum(cursor != NULL ? cursor->role : InvalidOid);
	if (plans[keyless] == NULL)
		plans_prepare_kept(&plans[keyless],
						   psprintf("WITH RECURSIVE roles(r) AS ("
									" SELECT (SELECT scheduled_by::pg_catalog.oid FROM retries.call_data"
									"  WHERE gate OPERATOR(pg_catalog.=) $1::pg_catalog.oid"
									"  AND state OPERATOR(pg_catalog.=) 'scheduled' AND held"
									"  ORDER BY gate, scheduled_by LIMIT 1)"
									" UNION ALL"
									" SELECT (SELECT scheduled_by::pg_catalog.oid FROM retries.call_data"
									"  WHERE gate OPERATOR(pg_catalog.=) $1::pg_catalog.oid"
									"  AND state OPERATOR(pg_catalog.=) 'scheduled' AND held"
									"  AND scheduled_by::pg_catalog.oid OPERATOR(pg_catalog.>) roles.r"
									"  ORDER BY gate, scheduled_by LIMIT 1)"
									" FROM roles WHERE roles.r IS NOT NULL),"
									" picked AS ("
									" SELECT c.id, roles.r AS role, pg_catalog.row_number() OVER (ORDER BY c.turn,"
									"  roles.r OPERATOR(pg_catalog.<=) $4, roles.r, c.next_attempt) AS pos"
									" FROM roles CROSS JOIN LATERAL"
									" (SELECT id, next_attempt,"
									"   pg_catalog.row_number() OVER (ORDER BY next_attempt) AS turn"
									"  FROM retries.call_data"
									"  WHERE gate OPERATOR(pg_catalog.=) $1::pg_catalog.oid"
									"  AND state OPERATOR(pg_catalog.=) 'scheduled' AND held%s"
									"  AND (scheduled_by::pg_catalog.oid, next_attempt)"
									"   OPERATOR(pg_catalog.>=) (roles.r, '-infinity'::pg_catalog.timestamptz)"
									"  AND (scheduled_by::pg_catalog.oid, next_attempt)"
									"   OPERATOR(pg_catalog.<=) (roles.r, $3)"
									"  ORDER BY gate, scheduled_by, next_attempt LIMIT $2) c"
									" WHERE roles.r IS NOT NULL),"
									" chosen AS (SELECT id, role, pos FROM picked ORDER BY pos LIMIT $2),"
									CALLS_RELEASE_CHOSEN
									" SELECT (SELECT pg_catalog.count(*) FROM released), "
									LAST_RELEASED_ROLE,
									keyless ? " AND limit_key IS NULL" : ""),
						   4, argtypes);
	if (SPI_execute_plan(plans[keyless], values, NULL, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "retries: could not release the calls of gate %u", gate);
	released = (uint64) DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0],
													SPI_tuptable->tupdesc, 1, &isnull));
	last = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull);
	if (cursor != NULL && !isnull)
		cursor->role = DatumGetObjectId(last);
	SPI_freetuptable(SPI_tuptable);
	return released;
}

/*
 * The distinct keys of gate's held calls, in order (after $6 in the
 * second form): one probe of call_data_held_by_key each
 */
#define HELD_KEYS_CTE(after) \
	"WITH RECURSIVE k(key) AS (" \
	" SELECT (SELECT limit_key FROM retries.call_data" \
	"  WHERE gate OPERATOR(pg_catalog.=) $1::pg_catalog.oid" \
	"  AND state OPERATOR(pg_catalog.=) 'scheduled' AND held" \
	"  AND limit_key IS NOT NULL" after \
	"  ORDER BY limit_key LIMIT 1)" \
	" UNION ALL" \
	" SELECT (SELECT c.limit_key FROM retries.call_data c" \
	"  WHERE c.gate OPERATOR(pg_catalog.=) $1::pg_catalog.oid" \
	"  AND c.state OPERATOR(pg_catalog.=) 'scheduled' AND c.held" \
	"  AND c.limit_key OPERATOR(pg_catalog.>) k.key" \
	"  ORDER BY c.limit_key LIMIT 1)" \
	" FROM k WHERE k.key IS NOT NULL)"

/*
 * What release_keys runs after HELD_KEYS_CTE: for up to $7 keys, the room
 * of each ($2, less its attempts running, whose key hashes and counts are
 * $3 and $4, less its calls released, due and not claimed yet), and the
 * earliest due held calls of each that fit in it, up to $8 in all, in
 * turns between the roles that scheduled them (the earliest of each role,
 * from the role after $9, then the second of each, ...; the roles of a
 * key walked through call_data_held_by_key, one probe each, version 1.3);
 * they are released (SKIP LOCKED), and the number released, the keys
 * looked at, the last of them and the role released last are returned
 */
#define RELEASE_KEYS_QUERY \
	", keys AS (" \
	" SELECT k.key, $2" \
	"  OPERATOR(pg_catalog.-) coalesce((SELECT r.n FROM ROWS FROM (pg_catalog.unnest($3), pg_catalog.unnest($4)) r(h, n)" \
	"   WHERE r.h OPERATOR(pg_catalog.=) pg_catalog.hashtextextended(k.key, 0)), 0)" \
	"  OPERATOR(pg_catalog.-) (SELECT pg_catalog.count(*) FROM retries.call_data c" \
	"   WHERE c.gate OPERATOR(pg_catalog.=) $1::pg_catalog.oid" \
	"   AND c.limit_key OPERATOR(pg_catalog.=) k.key" \
	"   AND c.state OPERATOR(pg_catalog.=) 'scheduled' AND NOT c.held" \
	"   AND c.next_attempt OPERATOR(pg_catalog.<=) $5)::integer AS room" \
	" FROM k WHERE k.key IS NOT NULL LIMIT $7)," \
	" picked AS (" \
	" SELECT t.id, t.role, t.pos FROM keys CROSS JOIN LATERAL" \
	" (SELECT x.id, x.role, pg_catalog.row_number() OVER (ORDER BY x.turn," \
	"   x.role OPERATOR(pg_catalog.<=) $9, x.role, x.next_attempt) AS pos" \
	"  FROM (WITH RECURSIVE rr(role) AS (" \
	"   SELECT (SELECT scheduled_by::pg_catalog.oid FROM retries.call_data" \
	"    WHERE gate OPERATOR(pg_catalog.=) $1::pg_catalog.oid" \
	"    AND limit_key OPERATOR(pg_catalog.=) keys.key" \
	"    AND state OPERATOR(pg_catalog.=) 'scheduled' AND held" \
	"    ORDER BY gate, limit_key, scheduled_by LIMIT 1)" \
	"   UNION ALL" \
	"   SELECT (SELECT scheduled_by::pg_catalog.oid FROM retries.call_data" \
	"    WHERE gate OPERATOR(pg_catalog.=) $1::pg_catalog.oid" \
	"    AND limit_key OPERATOR(pg_catalog.=) keys.key" \
	"    AND state OPERATOR(pg_catalog.=) 'scheduled' AND held" \
	"    AND scheduled_by::pg_catalog.oid OPERATOR(pg_catalog.>) rr.role" \
	"    ORDER BY gate, limit_key, scheduled_by LIMIT 1)" \
	"   FROM rr WHERE rr.role IS NOT NULL)" \
	"   SELECT c.id, c.next_attempt, c.turn, rr.role FROM rr CROSS JOIN LATERAL" \
	"   (SELECT id, next_attempt," \
	"     pg_catalog.row_number() OVER (ORDER BY next_attempt) AS turn" \
	"    FROM retries.call_data" \
	"    WHERE gate OPERATOR(pg_catalog.=) $1::pg_catalog.oid" \
	"    AND limit_key OPERATOR(pg_catalog.=) keys.key" \
	"    AND scheduled_by::pg_catalog.oid OPERATOR(pg_catalog.=) rr.role" \
	"    AND state OPERATOR(pg_catalog.=) 'scheduled' AND held" \
	"    AND next_attempt OPERATOR(pg_catalog.<=) $5" \
	"    ORDER BY gate, limit_key, scheduled_by, next_attempt" \
	"    LIMIT CASE WHEN keys.room OPERATOR(pg_catalog.>) 0 THEN keys.room ELSE 0 END) c" \
	"   WHERE rr.role IS NOT NULL) x) t" \
	"  WHERE t.pos OPERATOR(pg_catalog.<=) keys.room)," \
	" chosen AS (SELECT id, role, pos FROM picked ORDER BY pos LIMIT $8)," \
	CALLS_RELEASE_CHOSEN \
	" SELECT (SELECT pg_catalog.count(*) FROM released)," \
	"  (SELECT pg_catalog.count(*) FROM keys)," \
	"  (SELECT pg_catalog.max(key) FROM keys), " \
	LAST_RELEASED_ROLE

/* Most keys release_keys looks at in one transaction */
#define RELEASE_KEYS			1000

/*
 * release_keys -- release, of gate's held calls that have a limit_key,
 * those due by 'now' that the room of their key lets go, in turns between
 * roles within each key, earliest first within each role, up to 'room' in
 * all; returns how many
 *
 * The keys are walked in order, RELEASE_KEYS a time, from where this
 * worker's last walk of the gate stopped, so that every key has its turn
 * however many there are; a walk costs one index probe per key, whatever
 * the number of held calls each has.
 */
static uint64
release_keys(Oid gate, int32 max_per_key, int64 room, TimestampTz now)
{
	static SPIPlanPtr plans[2];
	Oid			argtypes[9] = {OIDOID, INT4OID, INT8ARRAYOID, INT4ARRAYOID,
	TIMESTAMPTZOID, TEXTOID, INT4OID, INT8OID, OIDOID};
	Datum		values[9];
	char		nulls[9] = {' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' '};
	GateCursor *cursor = gate_cursor(gate);
	bool		after = cursor != NULL && cursor->key != NULL;
	int64	   *hashes;
	int32	   *counts;
	int			nrunning;
	Datum	   *hd;
	Datum	   *cd;
	uint64		released;
	int64		looked;
	bool		isnull;
	bool		role_isnull;
	Datum		last;
	Datum		role;

	nrunning = shmem_gate_key_counts(gate, &hashes, &counts);
	hd = palloc(sizeof(Datum) * Max(nrunning, 1));
	cd = palloc(sizeof(Datum) * Max(nrunning, 1));
	for (int i = 0; i < nrunning; i++)
	{
		hd[i] = Int64GetDatum(hashes[i]);
		cd[i] = Int32GetDatum(counts[i]);
	}
	values[0] = ObjectIdGetDatum(gate);
	values[1] = Int32GetDatum(max_per_key);
	values[2] = PointerGetDatum(construct_array(hd, nrunning, INT8OID, sizeof(int64),
												FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
	values[3] = PointerGetDatum(construct_array(cd, nrunning, INT4OID, sizeof(int32),
												true, TYPALIGN_INT));
	values[4] = TimestampTzGetDatum(now);
	values[5] = after ? CStringGetTextDatum(cursor->key) : (Datum) 0;
	nulls[5] = after ? ' ' : 'n';
	values[6] = Int32GetDatum(RELEASE_KEYS);
	values[7] = Int64GetDatum(Min(room, RELEASE_BATCH));
	values[8] = ObjectIdGetDatum(cursor != NULL ? cursor->role : InvalidOid);
	if (plans[after] == NULL)
		plans_prepare_kept(&plans[after],
						   after ? HELD_KEYS_CTE("  AND limit_key OPERATOR(pg_catalog.>) $6")
						   RELEASE_KEYS_QUERY
						   : HELD_KEYS_CTE("  AND $6::pg_catalog.text IS NULL")
						   RELEASE_KEYS_QUERY,
						   9, argtypes);
	if (SPI_execute_plan(plans[after], values, nulls, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "retries: could not release the calls of gate %u by key", gate);
	released = (uint64) DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0],
													SPI_tuptable->tupdesc, 1, &isnull));
	looked = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc,
										 2, &isnull));
	role = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 4, &role_isnull);
	if (cursor != NULL && !role_isnull)
		cursor->role = DatumGetObjectId(role);
	last = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 3, &isnull);

	/* the next walk goes on after the last key, or from the first */
	if (cursor != NULL)
	{
		if (cursor->key != NULL)
			pfree(cursor->key);
		cursor->key = NULL;
		if (looked == RELEASE_KEYS && !isnull)
			cursor->key = MemoryContextStrdup(TopMemoryContext, TextDatumGetCString(last));
	}
	SPI_freetuptable(SPI_tuptable);
	return released;
}

/*
 * gate_value -- the value of a query of one row and one column about a
 * gate's calls, $1 the gate and $2 'now', as prepared in *plan ('what' for
 * the error); read_only as for SPI_execute_plan()
 */
static Datum
gate_value(SPIPlanPtr *plan, const char *query, const char *what, bool read_only,
		   Oid gate, TimestampTz now, bool *isnull)
{
	Oid			argtypes[2] = {OIDOID, TIMESTAMPTZOID};
	Datum		values[2] = {ObjectIdGetDatum(gate), TimestampTzGetDatum(now)};
	Datum		value;

	plans_prepare_kept(plan, query, 2, argtypes);
	if (SPI_execute_plan(*plan, values, NULL, read_only, 1) != SPI_OK_SELECT ||
		SPI_processed != 1)
		elog(ERROR, "retries: could not %s", what);
	value = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, isnull);
	SPI_freetuptable(SPI_tuptable);
	return value;
}

/*
 * held_due -- has gate held calls due by 'now'?
 */
static bool
held_due(Oid gate, TimestampTz now)
{
	static SPIPlanPtr plan = NULL;
	bool		isnull;

	return DatumGetBool(gate_value(&plan,
								   "SELECT EXISTS (SELECT FROM retries.call_data"
								   " WHERE gate OPERATOR(pg_catalog.=) $1::pg_catalog.oid"
								   " AND state OPERATOR(pg_catalog.=) 'scheduled' AND held"
								   " AND next_attempt OPERATOR(pg_catalog.<=) $2)",
								   "look for held calls", true, gate, now, &isnull));
}

/*
 * A gate as flow_release_held() reads it from flow_data: the function's
 * key, and its limits (each only if set)
 */
typedef struct HeldGate
{
	Oid			gate;
	bool		limited;		/* max_running is set */
	int32		max_running;
	bool		keyed;			/* max_running_per_key is set */
	int32		max_per_key;
	bool		has_rate;
	RateSpec	rate;
} HeldGate;

/*
 * lock_held_gates -- lock the gates that are not paused and hold calls
 * (SKIP LOCKED: another worker releases for those it has locked); *gates
 * and how many
 *
 * Only gates that hold calls: one that holds none has nothing to release,
 * and is neither locked nor looked at further (a limit that does not bind
 * then costs one index probe here).
 */
static uint64
lock_held_gates(SPITupleTable **gates)
{
	static SPIPlanPtr plan = NULL;

	plans_prepare_kept(&plan,
					   "SELECT f.fn::pg_catalog.oid, f.max_running, f.max_running_per_key, f.rate"
					   " FROM retries.flow_data f"
					   " WHERE NOT f.paused"
					   " AND EXISTS (SELECT FROM retries.call_data c"
					   "  WHERE c.gate OPERATOR(pg_catalog.=) f.fn"
					   "  AND c.state OPERATOR(pg_catalog.=) 'scheduled' AND c.held)"
					   " FOR UPDATE OF f SKIP LOCKED",
					   0, NULL);
	if (SPI_execute_plan(plan, NULL, NULL, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "retries: could not read the gates");
	*gates = SPI_tuptable;
	return SPI_processed;
}

/*
 * read_held_gate -- a row of lock_held_gates() into *g
 */
static void
read_held_gate(HeapTuple row, TupleDesc desc, HeldGate *g)
{
	bool		isnull;

	g->gate = DatumGetObjectId(SPI_getbinval(row, desc, 1, &isnull));
	g->max_running = DatumGetInt32(SPI_getbinval(row, desc, 2, &isnull));
	g->limited = !isnull;
	g->max_per_key = DatumGetInt32(SPI_getbinval(row, desc, 3, &isnull));
	g->keyed = !isnull;
	g->has_rate = gate_rate(row, desc, 4, &g->rate);
}

/*
 * count_unclaimed -- how many of gate's calls are released, due by 'now'
 * and not claimed yet (a retry waiting its delay is not due)
 */
static int64
count_unclaimed(Oid gate, TimestampTz now)
{
	static SPIPlanPtr plan = NULL;
	bool		isnull;

	return DatumGetInt64(gate_value(&plan,
									"SELECT pg_catalog.count(*) FROM retries.call_data"
									" WHERE gate OPERATOR(pg_catalog.=) $1::pg_catalog.oid"
									" AND state OPERATOR(pg_catalog.=) 'scheduled' AND NOT held"
									" AND next_attempt OPERATOR(pg_catalog.<=) $2",
									"count the released calls", false, gate, now, &isnull));
}

/*
 * gate_room -- how many of g's held calls may be released now (0 or less
 * for none): a batch if g does not limit, else max_running less the
 * attempts running and the calls released and not claimed yet, and no more
 * than its rate lets start now (*rate_next: when the rate lets more start)
 */
static int64
gate_room(const HeldGate *g, TimestampTz now, TimestampTz *rate_next)
{
	int64		room = RELEASE_BATCH;
	int64		unclaimed = 0;

	if (g->limited || g->has_rate)
		unclaimed = count_unclaimed(g->gate, now);
	if (g->limited)
		room = g->max_running - shmem_gate_running(g->gate) - unclaimed;
	if (g->has_rate)
	{
		/* as many as may start now; the time frees more, not a batch */
		int64		rate_room = shmem_gate_rate_room(g->gate, schema_function_owner(names_key_function(g->gate)),
													 &g->rate, now, rate_next) -
		unclaimed;

		room = Min(room, rate_room);
	}
	return room;
}

/*
 * release_room -- release up to 'room' of g's held calls due by 'now', in
 * the way its limits ask; returns how many
 *
 * With a limit per key, *gated is set while g holds due calls, which the
 * ends of a key's attempts may let go.
 */
static uint64
release_room(const HeldGate *g, int64 room, TimestampTz now, bool *gated)
{
	uint64		released;

	if (room <= 0)
		return 0;
	if (!g->limited && !g->has_rate && !g->keyed)
		return release_gate(g->gate, room, now, false); /* all of them */
	if (!g->keyed)
		return release_fairly(g->gate, room, now, false);

	/* those without a key, then those whose key has room */
	released = release_fairly(g->gate, room, now, true);
	if ((int64) released < room)
		released += release_keys(g->gate, g->max_per_key, room - released, now);
	/* a key's attempts' ends may leave room for more */
	if (held_due(g->gate, now))
		*gated = true;
	return released;
}

/*
 * next_held -- the earlier of 'again' (0 for none) and the time the next
 * of gate's held calls falls due after 'now'
 */
static TimestampTz
next_held(Oid gate, TimestampTz now, TimestampTz again)
{
	static SPIPlanPtr plan = NULL;
	bool		isnull;
	Datum		next = gate_value(&plan,
								  "SELECT pg_catalog.min(next_attempt) FROM retries.call_data"
								  " WHERE gate OPERATOR(pg_catalog.=) $1::pg_catalog.oid"
								  " AND state OPERATOR(pg_catalog.=) 'scheduled' AND held"
								  " AND next_attempt OPERATOR(pg_catalog.>) $2",
								  "find the next held call", false, gate, now, &isnull);

	if (!isnull && (again == 0 || DatumGetTimestampTz(next) < again))
		again = DatumGetTimestampTz(next);
	return again;
}

/*
 * flow_release_held -- release the held calls that the gates let go
 * now, in the caller's transaction (a worker's, with SPI connected and a
 * snapshot set, as the worker's superuser)
 *
 * Returns when to look again: 'now' if a gate had more to release than one
 * transaction does, the time the next held call falls due, or 0 if none
 * will before something wakes the workers.  *gated says whether a gate
 * is full while it may hold due calls, which makes the worker look again
 * after each batch (whose attempts' ends may leave room).
 */
TimestampTz
flow_release_held(TimestampTz now, bool *gated)
{
	SPITupleTable *gates;
	uint64		ngates;
	TimestampTz again = 0;

	*gated = false;
	if (schema_retries_version() < SCHEMA_1_2)
		return 0;
	ngates = lock_held_gates(&gates);
	for (uint64 i = 0; i < ngates; i++)
	{
		HeldGate	g;
		TimestampTz rate_next = 0;
		int64		room;
		uint64		released;
		bool		full;

		read_held_gate(gates->vals[i], gates->tupdesc, &g);
		CHECK_FOR_INTERRUPTS();
		room = gate_room(&g, now, &rate_next);
		released = release_room(&g, room, now, gated);
		full = room <= 0 || released == (uint64) room;

		/* when to look again */
		if (g.has_rate && full && (again == 0 || rate_next < again) &&
			held_due(g.gate, now))
			again = rate_next;
		if (released == RELEASE_BATCH)
		{
			again = now;
			*gated = true;
		}
		else if (full)
			*gated = true;		/* full: a batch's end may leave room */
		else if (again != now)	/* else looking again at once anyway */
			again = next_held(g.gate, now, again);
	}
	return again;
}
