/*-------------------------------------------------------------------------
 *
 * events.c
 *	  Events (version 1.6): retries.emit(), retries.event(), and what a
 *	  call made with on_event and a worker's timeouts do.
 *
 * An event is a name of a role's own: emit(event, payload) records its
 * latest payload in event_data, keyed by the role that emits (current_user)
 * and the name, and releases the calls of that role waiting for it.  There
 * is no way to name another role: a role lets another emit its events
 * through a SECURITY DEFINER function of its own that calls emit().
 *
 * A call made with on_event waits as a call that runs after another does
 * (chains.c): held, with one more in waiting_on, so that whatever releases
 * held calls (the end of the calls it runs after, a gate, a place in a
 * runner) leaves it held until its event is emitted or its timeout passes,
 * each of which takes that one off.  call_data.event_wait says which: true
 * while it waits, false once the event released it, NULL after its timeout.
 * retries.event() gives the call the event's latest payload, read when it
 * asks, only if the event released it.  A call made after its event was
 * emitted (and not pruned) does not wait.
 *
 * Races.  A call that waits and an emit of its event must not miss each
 * other: the call is made under a share lock on (role, event), emit takes
 * it exclusively before it looks for waiting calls, and each reads with a
 * snapshot taken after its lock.  So an emit that commits first is seen by
 * the call, and a call that commits first is released by the emit.  An
 * emit rolled back releases nothing: its release is part of its
 * transaction, and the workers are woken only at its commit.  Events of
 * other names never wait for each other (see tables/name_locks.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/snapmgr.h"

#include "api/api.h"
#include "base/base.h"
#include "shmem/shmem.h"
#include "tables/tables.h"
#include "xact/xact.h"

PG_FUNCTION_INFO_V1(retries_emit);
PG_FUNCTION_INFO_V1(retries_clear_event);
PG_FUNCTION_INFO_V1(retries_event);

/* The longest event name, in bytes */
#define EVENT_NAME_MAX	1024

/* The most calls a worker releases at their timeouts in one transaction */
#define TIMEOUT_BATCH	1000

/*
 * lock_event -- below 1.7, the lock on 'event' of 'role' described at the
 * top, exclusive or shared (see tables_lock_name); inside SPI, as the
 * extension's owner
 */
static void
lock_event(Oid role, text *event, bool exclusive)
{
	tables_lock_name(RETRIES_EVENT_LOCK_CLASS, role, event, exclusive);
}

/*
 * events_check_name -- an event name (emit()'s event, call()'s on_event) is
 * not empty
 */
void
events_check_name(text *event, const char *argname)
{
	if (VARSIZE_ANY_EXHDR(event) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must not be empty", argname),
				 errhint("Name the event, such as 'payment:' followed by an order id.")));
	if (VARSIZE_ANY_EXHDR(event) > EVENT_NAME_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s is longer than %d bytes", argname, EVENT_NAME_MAX),
				 errhint("Name the event, such as 'payment:' followed by an order id; keep what it carries in its payload.")));
	args_check_encoding(VARDATA_ANY(event), VARSIZE_ANY_EXHDR(event), argname);
}

/*
 * events_lock_shared -- take the share lock on 'event' of 'role', as a call
 * made waiting for it does, to the end of the transaction: for a statement
 * that then writes a call that waits for it (a debounce, a cancel), so that
 * an emit of it waits on the event, not on the call's row.  Inside SPI, as
 * the extension's owner.
 */
void
events_lock_shared(Oid role, text *event)
{
	int			nestlevel;

	if (schema_retries_version() < SCHEMA_1_7)
	{
		lock_event(role, event, false);
		return;
	}
	nestlevel = plans_by_index_begin();
	(void) tables_lock_event(role, event);
	plans_by_index_end(nestlevel);
}

/*
 * events_emitted -- a call of 'role' is being made that waits for 'event':
 * has the role emitted it already (kept in event_data)?  Takes the share
 * lock on the event first, kept until the transaction ends.  Inside SPI,
 * as the extension's owner.
 */
bool
events_emitted(Oid role, text *event)
{
	static SPIPlanPtr plan = NULL;
	Oid			argtypes[2] = {OIDOID, TEXTOID};
	Datum		values[2] = {ObjectIdGetDatum(role), PointerGetDatum(event)};
	bool		emitted;
	int			nestlevel = plans_by_index_begin();

	if (schema_retries_version() >= SCHEMA_1_7)
	{
		emitted = tables_lock_event(role, event);
		plans_by_index_end(nestlevel);
		return emitted;
	}
	lock_event(role, event, false);
	plans_prepare_kept(&plan,
					   "SELECT FROM retries.event_data"
					   " WHERE role OPERATOR(pg_catalog.=) $1::pg_catalog.regrole"
					   " AND pg_catalog.md5(event) OPERATOR(pg_catalog.=) pg_catalog.md5($2)"
					   " AND event OPERATOR(pg_catalog.=) $2",
					   2, argtypes);
	if (SPI_execute_snapshot(plan, values, NULL, GetLatestSnapshot(),
							 InvalidSnapshot, true, false, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not look up an event");
	emitted = SPI_processed > 0;
	plans_by_index_end(nestlevel);
	return emitted;
}

/*
 * store_event -- record the event (role, name, payload: values[0..2]) and
 * take its lock exclusively; whether calls made before the lock,
 * committed, wait for it (read with a snapshot taken after it).  Inside
 * SPI, as the extension's owner.
 *
 * From 1.7 the event's row is its lock (tables_emit_event).  Below, it
 * takes the lock first, then updates the event's row, or else inserts one
 * (the index is not unique: see the update script to 1.6; under the
 * event's lock no other emit of it runs meanwhile).
 */
static bool
store_event(Datum *values, char *nulls)
{
	static SPIPlanPtr plan = NULL;
	static SPIPlanPtr waiting_plan = NULL;
	Oid			argtypes[3] = {OIDOID, TEXTOID, JSONBOID};
	bool		isnull;

	if (schema_retries_version() >= SCHEMA_1_7)
	{
		tables_emit_event(values, nulls);
		plans_prepare_kept(&waiting_plan,
						   "SELECT EXISTS (SELECT FROM retries.call_data c" CALLS_WAITING_FOR_EVENT ")",
						   2, argtypes);
		if (SPI_execute_snapshot(waiting_plan, values, NULL, GetLatestSnapshot(),
								 InvalidSnapshot, true, false, 1) != SPI_OK_SELECT ||
			SPI_processed != 1)
			elog(ERROR, "could not look for the calls waiting for an event");
		return DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	}
	lock_event(DatumGetObjectId(values[0]), DatumGetTextPP(values[1]), true);
	plans_prepare_kept(&plan,
					   "WITH updated AS ("
					   " UPDATE retries.event_data SET payload = $3, emitted_at = pg_catalog.now()"
					   " WHERE role OPERATOR(pg_catalog.=) $1::pg_catalog.regrole"
					   " AND pg_catalog.md5(event) OPERATOR(pg_catalog.=) pg_catalog.md5($2)"
					   " AND event OPERATOR(pg_catalog.=) $2 RETURNING 1),"
					   " inserted AS ("
					   " INSERT INTO retries.event_data (role, event, payload, emitted_at)"
					   " SELECT $1::pg_catalog.regrole, $2, $3, pg_catalog.now()"
					   " WHERE NOT EXISTS (SELECT FROM updated))"
					   " SELECT EXISTS (SELECT FROM retries.call_data c" CALLS_WAITING_FOR_EVENT ")",
					   3, argtypes);
	if (SPI_execute_snapshot(plan, values, nulls, GetLatestSnapshot(),
							 InvalidSnapshot, false, false, 0) != SPI_OK_SELECT ||
		SPI_processed != 1)
		elog(ERROR, "could not record an event");
	return DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
}

/*
 * retries_emit -- SQL function retries.emit(event, payload): record the
 * event of the current role and release its calls that wait for it; how
 * many
 */
Datum
retries_emit(PG_FUNCTION_ARGS)
{
	Datum		values[3];
	char		nulls[3] = {' ', ' ', ' '};
	Oid			role = GetUserId();
	text	   *event;
	RetriesUserSwitch save;
	uint64		released;
	bool		waiting;
	int			nestlevel;

	PreventCommandIfReadOnly("retries.emit()");
	PreventCommandDuringRecovery("retries.emit()");
	args_check_not_null(fcinfo, 0, "event");
	event = PG_GETARG_TEXT_PP(0);
	events_check_name(event, "event");
	values[0] = ObjectIdGetDatum(role);
	values[1] = PointerGetDatum(event);
	values[2] = PG_ARGISNULL(1) ? (Datum) 0 : PG_GETARG_DATUM(1);
	nulls[2] = PG_ARGISNULL(1) ? 'n' : ' ';
	if (!PG_ARGISNULL(1))
	{
		call_args_check_size(PG_GETARG_JSONB_P(1), "payload");
		args_check_jsonb_encoding(PG_GETARG_JSONB_P(1), "payload");
	}

	access_become_owner(&save);
	SPI_connect();
	nestlevel = plans_by_index_begin();

	/*
	 * The event's lock first: calls being made that wait for it commit first,
	 * or see it.  Then whether calls wait for it, with a snapshot taken after
	 * the lock; only then the statement that releases them, whose start opens
	 * every index of call_data: most emits release nothing.
	 */
	waiting = store_event(values, nulls);

	released = 0;
	if (waiting)
	{
		released = calls_release_for_event(values[0], values[1]);
	}
	plans_by_index_end(nestlevel);
	SPI_finish();
	access_restore_user(&save);

	if (released > 0)
		xact_wake_workers(WAKE_CALLS);
	PG_RETURN_INT64((int64) released);
}

/*
 * retries_clear_event -- SQL function retries.clear_event(event): forget
 * the current role's event, so that a call made with on_event after this
 * commits waits for its next emit; whether it had been emitted (and not
 * pruned).  Under the event's lock, as emit: a call being made that waits
 * for it sees either the event or its absence, whole.  Calls that the
 * event released already are not held again.
 */
Datum
retries_clear_event(PG_FUNCTION_ARGS)
{
	static SPIPlanPtr plan = NULL;
	Oid			argtypes[2] = {OIDOID, TEXTOID};
	Datum		values[2];
	Oid			role = GetUserId();
	text	   *event;
	RetriesUserSwitch save;
	uint64		cleared;
	int			nestlevel;

	PreventCommandIfReadOnly("retries.clear_event()");
	PreventCommandDuringRecovery("retries.clear_event()");
	args_check_not_null(fcinfo, 0, "event");
	event = PG_GETARG_TEXT_PP(0);
	events_check_name(event, "event");
	values[0] = ObjectIdGetDatum(role);
	values[1] = PointerGetDatum(event);

	access_become_owner(&save);
	SPI_connect();
	nestlevel = plans_by_index_begin();
	if (schema_retries_version() >= SCHEMA_1_7)
		cleared = tables_clear_event(role, event) ? 1 : 0;
	else
	{
		lock_event(role, event, true);
		plans_prepare_kept(&plan,
						   "DELETE FROM retries.event_data"
						   " WHERE role OPERATOR(pg_catalog.=) $1::pg_catalog.regrole"
						   " AND pg_catalog.md5(event) OPERATOR(pg_catalog.=) pg_catalog.md5($2)"
						   " AND event OPERATOR(pg_catalog.=) $2",
						   2, argtypes);
		if (SPI_execute_snapshot(plan, values, NULL, GetLatestSnapshot(),
								 InvalidSnapshot, false, false, 0) != SPI_OK_DELETE)
			elog(ERROR, "could not clear an event");
		cleared = SPI_processed;
	}
	plans_by_index_end(nestlevel);
	SPI_finish();
	access_restore_user(&save);
	PG_RETURN_BOOL(cleared > 0);
}

/*
 * retries_event -- SQL function retries.event(): inside an attempt of a
 * call that its event released, the event's latest payload (JSON null if
 * it has none), to the call's role (or a role that has its privileges):
 * code of another role that the attempt runs (a SECURITY DEFINER function
 * or trigger) gets NULL, as anywhere else
 */
Datum
retries_event(PG_FUNCTION_ARGS)
{
	static SPIPlanPtr plan = NULL;
	Oid			argtypes[1] = {INT8OID};
	Datum		values[1];
	RetriesUserSwitch save;
	Datum		payload = (Datum) 0;
	bool		isnull = true;
	Oid			asker = GetUserId();

	if (retries_current_call_id == 0 || schema_retries_version() < SCHEMA_1_6)
		PG_RETURN_NULL();
	values[0] = Int64GetDatum(retries_current_call_id);
	access_become_owner(&save);
	SPI_connect();
	plans_prepare_kept(&plan,
					   "SELECT CASE WHEN c.event_wait IS FALSE"
					   " THEN coalesce(e.payload, 'null'::pg_catalog.jsonb) END,"
					   " c.scheduled_by::pg_catalog.oid"
					   " FROM retries.call_data c"
					   " LEFT JOIN LATERAL (SELECT d.payload FROM retries.event_data d"
					   "  WHERE d.role OPERATOR(pg_catalog.=) c.scheduled_by"
					   "  AND pg_catalog.md5(d.event) OPERATOR(pg_catalog.=) pg_catalog.md5(c.on_event)"
					   "  AND d.event OPERATOR(pg_catalog.=) c.on_event"
					   "  ORDER BY d.emitted_at DESC NULLS LAST LIMIT 1) e ON true"
					   " WHERE c.id OPERATOR(pg_catalog.=) $1",
					   1, argtypes);
	if (SPI_execute_plan(plan, values, NULL, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not read the event of call " INT64_FORMAT,
			 retries_current_call_id);
	if (SPI_processed == 1)
	{
		bool		role_null;
		Oid			role = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[0],
														  SPI_tuptable->tupdesc, 2,
														  &role_null));

		/* another role's code inside the attempt reads nothing */
		if (!role_null && has_privs_of_role(asker, role))
			payload = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1,
									&isnull);
		if (!isnull)
			payload = SPI_datumTransfer(payload, false, -1);
	}
	SPI_finish();
	access_restore_user(&save);
	if (isnull)
		PG_RETURN_NULL();
	PG_RETURN_DATUM(payload);
}

/*
 * events_release_timed_out -- release the calls whose event_timeout has
 * passed by 'now' (up to TIMEOUT_BATCH; those another transaction holds
 * are left for later); when the next one passes, or 0 if none waits with a
 * timeout.  A worker's, inside its transaction and SPI connection.
 */
TimestampTz
events_release_timed_out(TimestampTz now)
{
	static SPIPlanPtr next_plan = NULL;
	Oid			argtypes[1] = {TIMESTAMPTZOID};
	Datum		values[1] = {TimestampTzGetDatum(now)};
	uint64		released;
	bool		isnull;
	Datum		next;
	int			nestlevel = plans_by_index_begin();

	released = calls_release_timed_out(now, TIMEOUT_BATCH);
	if (released > 0)
		xact_wake_workers(WAKE_CALLS);
	if (released >= TIMEOUT_BATCH)
	{
		plans_by_index_end(nestlevel);
		return now;				/* more to do at once */
	}

	plans_prepare_generic(&next_plan,
						  "SELECT event_deadline FROM retries.call_data"
						  " WHERE event_wait AND state OPERATOR(pg_catalog.=) 'scheduled'"
						  " AND event_deadline OPERATOR(pg_catalog.>) $1"
						  " ORDER BY event_deadline LIMIT 1",
						  1, argtypes);
	if (SPI_execute_plan(next_plan, values, NULL, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "retries: could not find the next event_timeout");
	plans_by_index_end(nestlevel);
	if (SPI_processed == 0)
		return 0;
	next = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	return isnull ? 0 : DatumGetTimestampTz(next);
}
