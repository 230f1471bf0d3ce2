/*-------------------------------------------------------------------------
 *
 * schedule.c
 *	  Recurring schedules: retries.schedule(), unschedule(),
 *	  pause_schedule(), resume_schedule(), trigger(), and the firing that
 *	  the workers do (see doc/operations.md, "Recurring schedules").
 *
 * A schedule is a row of retries.schedule_data: a function, its arguments
 * (converted to the parameter types when the schedule is made, as for
 * retries.call()), `every` (a cron expression or an interval, see
 * recurring.c) in a time zone, and next_run, the next instant it fires.
 * Names are per role; the owner is current_user when it is made.
 *
 * Firing.  Every worker of a database, at the top of each of its loops,
 * runs schedule_fire_due() in a short transaction of its own: it finds
 * the due schedules, in turns between their owners (find_due), locks them
 * (FOR UPDATE SKIP LOCKED, so that two workers never take the same one),
 * makes each one's call and moves its next_run on, and commits.  The call and the advance commit together or not at all, so a
 * firing happens once across crashes, restarts and promotion; a worker
 * killed in the middle leaves the schedule due, and the next worker fires
 * it.  A firing runs no user code: the arguments are already converted,
 * and the role's EXECUTE privilege is checked when the attempt starts, as
 * for any call.  The fired call is an ordinary call of the role, due now,
 * under the function's current policy.
 *
 * Ahead of time.  A firing is made up to FIRE_AHEAD_USECS (half a second)
 * before its time, as a call due at that time, so that the call starts on
 * the dot, through the claim path that picks up due calls within a
 * millisecond, and the firing's own work is done by then.  Only a firing
 * that overlap lets go now is made early: if the previous call is still
 * unfinished (and overlap is not 'allow'), it is decided when due.
 * Pausing, replacing or dropping a schedule leaves a call already made for
 * the next half second alone.
 *
 * Missed firings.  A firing that a worker sees more than FIRING_SLACK
 * after its time (the server was down, retries.enabled was off, every
 * worker was busy) is missed, unless it is the latest one due and within
 * catch_up of now: then it fires once.  The others are counted in
 * `missed`.  With the default catch_up of 0, an outage's firings are all
 * missed, as with cron.  A database whose workers left it idle (on
 * demand) is no outage: the firings due from when its last worker left,
 * which the worker started for them sees late, fire (late_from).
 *
 * Overlap.  The previous firing's call (last_call) still unfinished:
 * 'skip' counts the firing as skipped; 'queue' marks the schedule queued
 * (one firing at most waits; a second is skipped), and the worker fires it
 * as soon as it sees that call finished; 'allow' fires regardless.  Under
 * 'skip' and 'queue', firings that pass while that call is unfinished are
 * skipped, never missed, however late a worker sees them: they would not
 * have run anyway.  A worker that finds a due schedule locked by another
 * (which is firing it, and may then go on to run a call for seconds)
 * looks again within FIRE_LOCKED_USECS, so that an idle worker decides the
 * next firing on time and next_run never lags behind.
 *
 * IDENTIFICATION
 *	  src/schedules/schedule.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/regproc.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"

#include "api/api.h"
#include "base/base.h"
#include "schedules/recurring.h"
#include "schedules/schedules.h"
#include "tables/tables.h"
#include "xact/xact.h"

PG_FUNCTION_INFO_V1(retries_schedule);
PG_FUNCTION_INFO_V1(retries_schedule_command);
PG_FUNCTION_INFO_V1(retries_unschedule);
PG_FUNCTION_INFO_V1(retries_pause_schedule);
PG_FUNCTION_INFO_V1(retries_resume_schedule);
PG_FUNCTION_INFO_V1(retries_trigger);
PG_FUNCTION_INFO_V1(retries_alter_schedule);

/* Firings due from then on are on time however late (schedule_fire_due) */
static TimestampTz fire_late_from = 0;

/* How late a firing may be seen and still be on time, catch_up aside */
#define FIRING_SLACK_USECS		(1 * USECS_PER_SEC)
/* How long before its time a firing makes its call */
#define FIRE_AHEAD_USECS		(500 * INT64CONST(1000))
/* Longest name of a schedule, in bytes */
#define SCHEDULE_NAME_MAX		200
/* Most schedules one firing transaction handles */
#define FIRE_BATCH				1000
/* How long to leave a full batch of due firings to the worker firing them */
#define FIRE_BUSY_USECS			(10 * INT64CONST(1000))
/* How soon to look again at schedules that another worker had locked */
#define FIRE_LOCKED_USECS		(100 * INT64CONST(1000))
/* Most missed firings of a cron schedule counted one by one */
#define MISSED_SCAN_MAX			1000000
/* A schedule's own policy (a command's), a column from 1.5 */
#define POLICY_ID_COLUMN(policies) \
	((policies) ? "policy_id" : "NULL::pg_catalog.int4")

/* A schedule as the management functions find it by name */
typedef struct FoundSchedule
{
	int64		id;
	Oid			owner;
	Oid			fn;
	Datum		args;			/* jsonb, in the SPI result's memory */
	bool		paused;
	TimestampTz origin;
	char	   *every;
	char	   *timezone;
	int32		policy_id;		/* a command's own policy; 0: the current */
	Oid			fn_key;			/* fn's key, as schedule_data holds it */
	char	   *overlap;
	Interval   *catch_up;		/* in the SPI result's memory */
} FoundSchedule;

static void find_own_schedule(const char *name, Oid caller, FoundSchedule *found);

/*
 * check_function -- the function exists and the current role may call it
 * (USAGE on its schema, EXECUTE on it)
 */
static void
check_function(Oid fnoid)
{
	if (!SearchSysCacheExists1(PROCOID, ObjectIdGetDatum(fnoid)))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_FUNCTION),
				 errmsg("fn: function with OID %u does not exist", fnoid)));
	access_check_call_privilege(fnoid, GetUserId());
}

/*
 * first_run -- the first firing of a schedule of 'every' in 'tz' made or
 * resumed at 'now', counting an interval from 'origin'
 */
static TimestampTz
first_run(const RetriesEvery *every, pg_tz *tz, TimestampTz origin, TimestampTz now)
{
	TimestampTz next = recurring_every_next(every, tz, origin, now);

	if (every->at_start)
		return next;			/* 'infinity': at the server's next start */
	if (TIMESTAMP_NOT_FINITE(next))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid every: it never fires after %s",
						timestamptz_to_str(now))));
	return next;
}

/* A schedule as retries.schedule() and schedule_command() are given it */
typedef struct ScheduleSpec
{
	char	   *name;
	Oid			fnoid;
	Jsonb	   *args;			/* as given; canonical once checked */
	char	   *every;
	char	   *timezone;
	char	   *overlap;
	Interval   *catch_up;
	int32		policy_id;		/* a command's own policy; 0: the current */
} ScheduleSpec;

/*
 * check_schedule -- check a schedule's name, every, time zone, overlap
 * and catch_up, and that the current role may call its function; the
 * arguments converted as the caller; its first firing after 'now' into
 * *first_run, its catch_up in *catch_up_usecs
 */
static void
check_schedule(ScheduleSpec *spec, TimestampTz now, TimestampTz *first,
			   int64 *catch_up_usecs)
{
	RetriesEvery every;
	pg_tz	   *tz;

	if (spec->name[0] == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid name: a schedule's name must not be empty")));
	if (strlen(spec->name) > SCHEDULE_NAME_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid name: a schedule's name must be at most %d bytes, not %zu",
						SCHEDULE_NAME_MAX, strlen(spec->name))));
	args_check_encoding(spec->name, strlen(spec->name), "name");
	check_function(spec->fnoid);
	recurring_every_parse(spec->every, &every);
	tz = recurring_time_zone(spec->timezone);
	if (strcmp(spec->overlap, "skip") != 0 && strcmp(spec->overlap, "queue") != 0 &&
		strcmp(spec->overlap, "allow") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid overlap: \"%s\" is not skip, queue or allow",
						args_quotable(spec->overlap, strlen(spec->overlap)))));
	if (!args_interval_to_usecs(spec->catch_up, catch_up_usecs))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid catch_up: %s is negative or out of range",
						DatumGetCString(DirectFunctionCall1(interval_out,
															IntervalPGetDatum(spec->catch_up)))),
				 errhint("Use '0' to skip the firings of an outage, or how long after its time a missed firing may still run.")));
	*first = first_run(&every, tz, now, now);

	/* the arguments are converted as the caller, under its settings */
	spec->args = call_args_canonicalize(spec->fnoid, spec->args);
}

/*
 * store_schedule -- create the current role's schedule of that name, or
 * replace it (keeping its id, counters and pause); its id.  Inside SPI, as
 * the extension's owner ('owner' is the caller).
 */
static int64
store_schedule(const ScheduleSpec *spec, Oid owner, Oid fn_key, TimestampTz now,
			   TimestampTz first, int64 catch_up_usecs)
{
	static SPIPlanPtr plans[2];
	Oid			argtypes[11] = {TEXTOID, OIDOID, OIDOID, TEXTOID, JSONBOID,
		TEXTOID, TEXTOID, INTERVALOID, TIMESTAMPTZOID, TIMESTAMPTZOID,
	INT4OID};
	Datum		values[11];
	char		nulls[11];
	bool		policies = (schema_retries_version() >= SCHEMA_1_5);
	bool		isnull;

	memset(nulls, ' ', sizeof(nulls));
	values[0] = CStringGetTextDatum(spec->name);
	values[1] = ObjectIdGetDatum(owner);
	values[2] = ObjectIdGetDatum(fn_key);
	values[3] = CStringGetTextDatum(spec->every);
	values[4] = JsonbPGetDatum(spec->args);
	values[5] = CStringGetTextDatum(spec->timezone);
	values[6] = CStringGetTextDatum(spec->overlap);
	values[7] = IntervalPGetDatum(args_usecs_to_interval(catch_up_usecs));
	values[8] = TimestampTzGetDatum(now);
	values[9] = TimestampTzGetDatum(first);
	values[10] = Int32GetDatum(spec->policy_id);
	nulls[10] = spec->policy_id == 0 ? 'n' : ' ';
	/* policy_id: from 1.5 */
	if (plans[policies] == NULL)
		plans_prepare_kept(&plans[policies],
						   psprintf("INSERT INTO retries.schedule_data AS s (name, owner, fn, every,"
									" args, timezone, overlap, catch_up, origin, next_run%s)"
									" VALUES ($1, $2::pg_catalog.regrole, $3::pg_catalog.oid,"
									" $4, $5, $6, $7, $8, $9, $10%s)"
									" ON CONFLICT (owner, name) DO UPDATE SET fn = excluded.fn,"
									" every = excluded.every, args = excluded.args,"
									" timezone = excluded.timezone, overlap = excluded.overlap,"
									" catch_up = excluded.catch_up, origin = excluded.origin,"
									" next_run = excluded.next_run, queued = false%s"
									" RETURNING id",
									policies ? ", policy_id" : "",
									policies ? ", $11" : "",
									policies ? ", policy_id = excluded.policy_id" : ""),
						   policies ? 11 : 10, argtypes);
	if (SPI_execute_plan(plans[policies], values, nulls, false, 0) != SPI_OK_INSERT_RETURNING ||
		SPI_processed != 1)
		elog(ERROR, "retries: could not store schedule \"%s\"", spec->name);
	xact_wake_workers(WAKE_FIRE);
	return DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc,
									   1, &isnull));
}

/*
 * retries_schedule -- SQL function retries.schedule(name, fn, every, args,
 * timezone, overlap, catch_up): create the current role's schedule of that
 * name, or replace it (keeping its id, counters and pause); returns its id
 */
Datum
retries_schedule(PG_FUNCTION_ARGS)
{
	ScheduleSpec spec;
	TimestampTz now = clock_xact_now();
	TimestampTz first;
	int64		catch_up_usecs;
	RetriesUserSwitch save;
	int64		id;
	RetriesPolicyRef policy;

	PreventCommandIfReadOnly("retries.schedule()");
	PreventCommandDuringRecovery("retries.schedule()");
	args_check_not_null(fcinfo, 0, "name");
	args_check_not_null(fcinfo, 1, "fn");
	args_check_not_null(fcinfo, 2, "every");
	args_check_not_null(fcinfo, 3, "args");
	args_check_not_null(fcinfo, 4, "timezone");
	args_check_not_null(fcinfo, 5, "overlap");
	args_check_not_null(fcinfo, 6, "catch_up");

	spec.name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	spec.fnoid = PG_GETARG_OID(1);
	spec.every = text_to_cstring(PG_GETARG_TEXT_PP(2));
	spec.args = PG_GETARG_JSONB_P(3);
	spec.timezone = text_to_cstring(PG_GETARG_TEXT_PP(4));
	spec.overlap = text_to_cstring(PG_GETARG_TEXT_PP(5));
	spec.catch_up = PG_GETARG_INTERVAL_P(6);
	spec.policy_id = 0;
	schema_refuse_command(spec.fnoid, "fn");
	check_schedule(&spec, now, &first, &catch_up_usecs);

	access_become_owner(&save);
	SPI_connect();
	call_require_policy(spec.fnoid, NULL, &policy);
	id = store_schedule(&spec, save.saved_userid, policy.fn_key, now, first,
						catch_up_usecs);
	SPI_finish();
	access_restore_user(&save);
	PG_RETURN_INT64(id);
}

/*
 * retries_alter_schedule -- SQL function retries.alter_schedule(name, every,
 * args, timezone, overlap, catch_up) (version 1.7): the caller's schedule
 * of that name replaced as retries.schedule() would replace it, with its
 * current values for the arguments given as NULL (an interval schedule
 * counts from now); its id.  A command's schedule keeps its text and
 * policy (schedule_command() replaces them).
 */
Datum
retries_alter_schedule(PG_FUNCTION_ARGS)
{
	ScheduleSpec spec;
	TimestampTz now = clock_xact_now();
	TimestampTz first;
	int64		catch_up_usecs;
	RetriesUserSwitch save;
	FoundSchedule found;
	MemoryContext callercxt = CurrentMemoryContext;
	MemoryContext oldcxt;
	int64		id;

	PreventCommandIfReadOnly("retries.alter_schedule()");
	PreventCommandDuringRecovery("retries.alter_schedule()");
	args_check_not_null(fcinfo, 0, "name");
	spec.name = text_to_cstring(PG_GETARG_TEXT_PP(0));

	/* the caller's own schedule of that name, locked, in the caller's memory */
	access_become_owner(&save);
	SPI_connect();
	find_own_schedule(spec.name, save.saved_userid, &found);
	oldcxt = MemoryContextSwitchTo(callercxt);
	spec.fnoid = found.fn;
	spec.every = PG_ARGISNULL(1) ? pstrdup(found.every) : text_to_cstring(PG_GETARG_TEXT_PP(1));
	spec.args = PG_ARGISNULL(2) ? DatumGetJsonbPCopy(found.args) : PG_GETARG_JSONB_P(2);
	spec.timezone = PG_ARGISNULL(3) ? pstrdup(found.timezone) :
		text_to_cstring(PG_GETARG_TEXT_PP(3));
	spec.overlap = PG_ARGISNULL(4) ? pstrdup(found.overlap) :
		text_to_cstring(PG_GETARG_TEXT_PP(4));
	if (PG_ARGISNULL(5))
	{
		spec.catch_up = palloc(sizeof(Interval));
		*spec.catch_up = *found.catch_up;
	}
	else
		spec.catch_up = PG_GETARG_INTERVAL_P(5);
	spec.policy_id = found.policy_id;
	MemoryContextSwitchTo(oldcxt);
	SPI_finish();
	access_restore_user(&save);

	if (!PG_ARGISNULL(2) && schema_is_command(spec.fnoid))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid args: schedule \"%s\" runs a command, whose text is not args", spec.name),
				 errhint("retries.schedule_command() replaces a command's schedule, its text and policy with it.")));
	check_schedule(&spec, now, &first, &catch_up_usecs);

	access_become_owner(&save);
	SPI_connect();
	id = store_schedule(&spec, save.saved_userid, found.fn_key, now, first, catch_up_usecs);
	SPI_finish();
	access_restore_user(&save);
	PG_RETURN_INT64(id);
}

/*
 * retries_schedule_command -- SQL function retries.schedule_command(name,
 * command, every, timezone, overlap, catch_up, policy, retry_on, database):
 * as retries.schedule(), of a command (command.c) with its own policy, run
 * in this database or the one named
 */
Datum
retries_schedule_command(PG_FUNCTION_ARGS)
{
	ScheduleSpec spec;
	TimestampTz now = clock_xact_now();
	TimestampTz first;
	int64		catch_up_usecs;
	RetriesUserSwitch save;
	int64		id;
	text	   *command;

	PreventCommandIfReadOnly("retries.schedule_command()");
	PreventCommandDuringRecovery("retries.schedule_command()");
	args_check_not_null(fcinfo, 0, "name");
	args_check_not_null(fcinfo, 1, "command");
	args_check_not_null(fcinfo, 2, "every");
	args_check_not_null(fcinfo, 3, "timezone");
	args_check_not_null(fcinfo, 4, "overlap");
	args_check_not_null(fcinfo, 5, "catch_up");

	command = PG_GETARG_TEXT_PP(1);
	command_check_syntax(text_to_cstring(command));
	spec.name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	spec.every = text_to_cstring(PG_GETARG_TEXT_PP(2));
	/* database (1.7): absent before */
	spec.args = command_args(command,
							 PG_NARGS() > 8 && !PG_ARGISNULL(8) ?
							 NameStr(*PG_GETARG_NAME(8)) : NULL,
							 &spec.fnoid);
	spec.timezone = text_to_cstring(PG_GETARG_TEXT_PP(3));
	spec.overlap = text_to_cstring(PG_GETARG_TEXT_PP(4));
	spec.catch_up = PG_GETARG_INTERVAL_P(5);
	check_schedule(&spec, now, &first, &catch_up_usecs);

	access_become_owner(&save);
	SPI_connect();
	spec.policy_id = annotate_command_policy(spec.fnoid,
											 PG_ARGISNULL(6) ? NULL :
											 text_to_cstring(PG_GETARG_TEXT_PP(6)),
											 PG_ARGISNULL(7) ? NULL :
											 PG_GETARG_ARRAYTYPE_P(7),
											 save.saved_userid);
	id = store_schedule(&spec, save.saved_userid,
						names_function_key(spec.fnoid, true), now, first,
						catch_up_usecs);
	SPI_finish();
	access_restore_user(&save);
	PG_RETURN_INT64(id);
}

/* A schedule's columns as FoundSchedule has them (%s: POLICY_ID_COLUMN) */
#define SCHEDULE_COLUMNS \
	"SELECT id, owner::pg_catalog.oid, fn::pg_catalog.oid, args, paused, origin," \
	" every, timezone, %s, overlap, catch_up FROM retries.schedule_data"

/*
 * read_found -- the schedule that the last statement (SCHEDULE_COLUMNS)
 * found, into *found
 */
static void
read_found(FoundSchedule *found)
{
	HeapTuple	row;
	TupleDesc	desc;
	bool		isnull;
	Datum		policy_id;

	row = SPI_tuptable->vals[0];
	desc = SPI_tuptable->tupdesc;
	found->id = DatumGetInt64(SPI_getbinval(row, desc, 1, &isnull));
	found->owner = DatumGetObjectId(SPI_getbinval(row, desc, 2, &isnull));
	found->fn = DatumGetObjectId(SPI_getbinval(row, desc, 3, &isnull));
	found->args = SPI_getbinval(row, desc, 4, &isnull);
	found->paused = DatumGetBool(SPI_getbinval(row, desc, 5, &isnull));
	found->origin = DatumGetTimestampTz(SPI_getbinval(row, desc, 6, &isnull));
	found->every = SPI_getvalue(row, desc, 7);
	found->timezone = SPI_getvalue(row, desc, 8);
	policy_id = SPI_getbinval(row, desc, 9, &isnull);
	found->policy_id = isnull ? 0 : DatumGetInt32(policy_id);
	found->overlap = SPI_getvalue(row, desc, 10);
	found->catch_up = DatumGetIntervalP(SPI_getbinval(row, desc, 11, &isnull));
	/* schedule_data holds the function's key (names.c) */
	found->fn_key = found->fn;
	found->fn = names_key_function(found->fn);
}

/*
 * lookup_own_schedule -- lock the schedule named 'name' of role 'caller',
 * the last statement's result (SCHEDULE_COLUMNS); whether there is one
 */
static bool
lookup_own_schedule(const char *name, Oid caller)
{
	static SPIPlanPtr plans[2];
	Datum		values[2] = {CStringGetTextDatum(name), ObjectIdGetDatum(caller)};
	bool		policies = (schema_retries_version() >= SCHEMA_1_5);

	if (plans[policies] == NULL)
		plans_prepare_kept(&plans[policies],
						   psprintf(SCHEDULE_COLUMNS
									" WHERE name OPERATOR(pg_catalog.=) $1"
									" AND owner OPERATOR(pg_catalog.=) $2::pg_catalog.regrole"
									" FOR UPDATE", POLICY_ID_COLUMN(policies)),
						   2, (Oid[]) {TEXTOID, OIDOID});
	if (SPI_execute_plan(plans[policies], values, NULL, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "retries: could not look up schedule \"%s\"", name);
	return SPI_processed > 0;
}

/*
 * find_own_schedule -- as find_schedule(), among the caller's own
 * schedules only
 */
static void
find_own_schedule(const char *name, Oid caller, FoundSchedule *found)
{
	if (!lookup_own_schedule(name, caller))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("schedule \"%s\" does not exist", args_quotable(name, strlen(name))),
				 errhint("retries.alter_schedule() changes a schedule of the current role's own; retries.schedules lists them.")));
	read_found(found);
}

/*
 * find_schedule -- lock the schedule named 'name' that the current role
 * manages and describe it in *found; raise 42704 if there is none
 *
 * A name is looked up among the current role's own schedules first; a role
 * that sees every role's calls (retries_admin, superusers) then finds
 * another role's, if exactly one role has a schedule of that name.
 * Inside SPI, as the extension's owner; 'caller' is the calling role.
 */
static void
find_schedule(const char *name, Oid caller, FoundSchedule *found)
{
	static SPIPlanPtr any_plans[2];
	static SPIPlanPtr by_id_plans[2];
	Oid			argtypes[2] = {TEXTOID, OIDOID};
	Datum		values[2] = {CStringGetTextDatum(name), ObjectIdGetDatum(caller)};
	bool		isnull;
	bool		policies = (schema_retries_version() >= SCHEMA_1_5);

	if (!lookup_own_schedule(name, caller) && access_sees_all_calls(caller))
	{
		/*
		 * Which roles have one, without locking: locking every row of the
		 * name waited for whichever role kept its own row locked, while
		 * this held the other's, whose schedule then did not fire
		 */
		if (any_plans[policies] == NULL)
			plans_prepare_kept(&any_plans[policies],
							   "SELECT id FROM retries.schedule_data"
							   " WHERE name OPERATOR(pg_catalog.=) $1"
							   " ORDER BY owner LIMIT 2",
							   1, argtypes);
		if (SPI_execute_plan(any_plans[policies], values, NULL, false, 0) != SPI_OK_SELECT)
			elog(ERROR, "retries: could not look up schedule \"%s\"", name);
		if (SPI_processed > 1)
			ereport(ERROR,
					(errcode(ERRCODE_AMBIGUOUS_PARAMETER),
					 errmsg("schedule name \"%s\" is ambiguous", name),
					 errdetail("More than one role has a schedule of that name."),
					 errhint("Its owner manages it (SET ROLE to the role named in retries.schedules, as a superuser or a member of that role), or cancel its calls with retries.cancel().")));
		if (SPI_processed == 1)
		{
			Datum		id = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1,
										   &isnull);

			if (by_id_plans[policies] == NULL)
				plans_prepare_kept(&by_id_plans[policies],
								   psprintf(SCHEDULE_COLUMNS
											" WHERE id OPERATOR(pg_catalog.=) $1"
											" AND name OPERATOR(pg_catalog.=) $2::pg_catalog.text"
											" FOR UPDATE",
											POLICY_ID_COLUMN(policies)),
								   2, (Oid[]) {INT8OID, TEXTOID});
			if (SPI_execute_plan(by_id_plans[policies], (Datum[]) {id, values[0]}, NULL,
								 false, 0) != SPI_OK_SELECT)
				elog(ERROR, "retries: could not look up schedule \"%s\"", name);
		}
	}
	if (SPI_processed == 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("schedule \"%s\" does not exist", args_quotable(name, strlen(name))),
				 errhint("retries.schedules lists the schedules you may manage.")));
	read_found(found);
}

/*
 * find_schedule_by_id -- as find_schedule(), the schedule of id 'id': one
 * of the current role's own, or any role's for a role that sees every
 * role's calls (which thus manages a schedule whose name two roles use)
 */
static void
find_schedule_by_id(int64 id, Oid caller, FoundSchedule *found)
{
	static SPIPlanPtr plans[2];
	bool		policies = (schema_retries_version() >= SCHEMA_1_5);
	Datum		values[3] = {Int64GetDatum(id), ObjectIdGetDatum(caller),
	BoolGetDatum(access_sees_all_calls(caller))};

	if (plans[policies] == NULL)
		plans_prepare_kept(&plans[policies],
						   psprintf(SCHEDULE_COLUMNS
									" WHERE id OPERATOR(pg_catalog.=) $1"
									" AND (owner OPERATOR(pg_catalog.=) $2::pg_catalog.regrole OR $3)"
									" FOR UPDATE", POLICY_ID_COLUMN(policies)),
						   3, (Oid[]) {INT8OID, OIDOID, BOOLOID});
	if (SPI_execute_plan(plans[policies], values, NULL, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "retries: could not look up schedule " INT64_FORMAT, id);
	if (SPI_processed == 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("schedule " INT64_FORMAT " does not exist", id),
				 errhint("retries.schedules lists the schedules you may manage, with their ids.")));
	read_found(found);
}


/*
 * update_schedule -- run 'query' on schedule 'id' ($1), with one more
 * parameter $2 if 'when' is given (a timestamptz)
 */
static void
update_schedule(SPIPlanPtr *plan, const char *query, int64 id, const Datum *when)
{
	Oid			argtypes[2] = {INT8OID, TIMESTAMPTZOID};
	Datum		values[2] = {Int64GetDatum(id), when ? *when : (Datum) 0};

	plans_prepare_kept(plan, query, when ? 2 : 1, argtypes);
	if (SPI_execute_plan(*plan, values, NULL, false, 0) < 0)
		elog(ERROR, "retries: could not update schedule " INT64_FORMAT, id);
}

/*
 * The management functions share one frame: act as the extension's owner,
 * find the schedule by its name (argument 0, a text) or, for the SQL
 * functions of a bigint (version 1.7), its id, act on it, go back.
 */
typedef void (*ScheduleAction) (const FoundSchedule *found, Datum *result);

static Datum
manage_schedule(FunctionCallInfo fcinfo, const char *what, ScheduleAction action)
{
	bool		by_id = get_fn_expr_argtype(fcinfo->flinfo, 0) == INT8OID;
	RetriesUserSwitch save;
	FoundSchedule found;
	Datum		result;

	args_check_not_null(fcinfo, 0, by_id ? "id" : "name");
	PreventCommandIfReadOnly(what);
	PreventCommandDuringRecovery(what);
	access_become_owner(&save);
	SPI_connect();
	if (by_id)
		find_schedule_by_id(PG_GETARG_INT64(0), save.saved_userid, &found);
	else
		find_schedule(text_to_cstring(PG_GETARG_TEXT_PP(0)), save.saved_userid, &found);
	action(&found, &result);
	xact_wake_workers(WAKE_FIRE);
	SPI_finish();
	access_restore_user(&save);
	return result;
}

static void
drop_action(const FoundSchedule *found, Datum *result)
{
	static SPIPlanPtr plan = NULL;

	update_schedule(&plan,
					"DELETE FROM retries.schedule_data WHERE id OPERATOR(pg_catalog.=) $1",
					found->id, NULL);
	*result = BoolGetDatum(true);
}

static void
pause_action(const FoundSchedule *found, Datum *result)
{
	static SPIPlanPtr plan = NULL;

	update_schedule(&plan,
					"UPDATE retries.schedule_data SET paused = true, queued = false"
					" WHERE id OPERATOR(pg_catalog.=) $1",
					found->id, NULL);
	*result = BoolGetDatum(!found->paused);
}

static void
resume_action(const FoundSchedule *found, Datum *result)
{
	static SPIPlanPtr plan = NULL;
	RetriesEvery every;
	pg_tz	   *tz;
	TimestampTz now = clock_xact_now();
	Datum		next;

	*result = BoolGetDatum(found->paused);
	if (!found->paused)
		return;
	recurring_every_parse(found->every, &every);
	tz = recurring_time_zone(found->timezone);
	next = TimestampTzGetDatum(first_run(&every, tz, found->origin, now));
	/*
	 * An '@reboot' schedule resumed waits for the next start of the server:
	 * its origin, now, is after this one (schedule_arm_at_start)
	 */
	update_schedule(&plan,
					"UPDATE retries.schedule_data SET paused = false, next_run = $2,"
					" origin = CASE WHEN every OPERATOR(pg_catalog.~) '" EVERY_AT_START_REGEX "'"
					"  THEN pg_catalog.now() ELSE origin END"
					" WHERE id OPERATOR(pg_catalog.=) $1",
					found->id, &next);
}

static void
trigger_action(const FoundSchedule *found, Datum *result)
{
	static SPIPlanPtr plan = NULL;
	Oid			argtypes[2] = {INT8OID, INT8OID};
	Datum		values[2];
	int64		call_id;

	/* the call runs as the schedule's owner, who must be able to call it */
	check_function(found->fn);
	access_check_call_privilege(found->fn, found->owner);
	if (!call_insert_fired(found->fn, found->policy_id, found->args, found->owner,
						   found->id, clock_xact_now(), &call_id))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("function %s is not annotated", format_procedure(found->fn)),
				 errhint("Its owner can give it a retry policy with retries.annotate().")));
	values[0] = Int64GetDatum(found->id);
	values[1] = Int64GetDatum(call_id);
	plans_prepare_kept(&plan,
					   "UPDATE retries.schedule_data SET last_call = $2,"
					   " last_run = pg_catalog.now(), firings = firings OPERATOR(pg_catalog.+) 1"
					   " WHERE id OPERATOR(pg_catalog.=) $1",
					   2, argtypes);
	if (SPI_execute_plan(plan, values, NULL, false, 0) != SPI_OK_UPDATE)
		elog(ERROR, "retries: could not update schedule " INT64_FORMAT, found->id);
	*result = Int64GetDatum(call_id);
}

/*
 * retries_unschedule -- SQL function retries.unschedule(name or id): drop a
 * schedule; the calls it fired stay, as one-off calls
 */
Datum
retries_unschedule(PG_FUNCTION_ARGS)
{
	return manage_schedule(fcinfo, "retries.unschedule()", drop_action);
}

/*
 * retries_pause_schedule -- SQL function retries.pause_schedule(name or id): no
 * firings until resumed; true if it was not paused
 */
Datum
retries_pause_schedule(PG_FUNCTION_ARGS)
{
	return manage_schedule(fcinfo, "retries.pause_schedule()", pause_action);
}

/*
 * retries_resume_schedule -- SQL function retries.resume_schedule(name or id):
 * fire again from the next time after now (the firings of the pause are
 * neither run nor counted); true if it was paused
 */
Datum
retries_resume_schedule(PG_FUNCTION_ARGS)
{
	return manage_schedule(fcinfo, "retries.resume_schedule()", resume_action);
}

/*
 * retries_trigger -- SQL function retries.trigger(name or id): one call of the
 * schedule now, whatever its overlap and pause, counted as a firing;
 * next_run stays; returns the call's id
 */
Datum
retries_trigger(PG_FUNCTION_ARGS)
{
	return manage_schedule(fcinfo, "retries.trigger()", trigger_action);
}

/*
 * A due schedule as the firing reads it, and what its firing changes
 */
typedef struct Firing
{
	int64		id;
	Oid			fn;
	Datum		args;
	Oid			owner;
	char	   *name;
	char	   *every;
	char	   *timezone;
	char		overlap;		/* 's'kip, 'q'ueue or 'a'llow */
	int64		catch_up;
	TimestampTz origin;
	TimestampTz next_run;		/* in: the due time; out: the next one */
	bool		queued;
	bool		busy;			/* the last firing's call is unfinished */
	bool		paused;			/* out: paused because it cannot be read */
	int64		last_call;		/* out: 0 if no call was made */
	int32		policy_id;		/* a command's own policy; 0: the current */
	int64		fired;
	int64		skipped;
	int64		missed;
} Firing;

/*
 * read_firing -- a row of the due-schedules query as a Firing (InvalidOid
 * as its fn if the function is gone)
 */
static void
read_firing(HeapTuple row, TupleDesc desc, Firing *f)
{
	bool		isnull;
	char	   *overlap;
	Datum		policy_id;

	memset(f, 0, sizeof(*f));
	f->id = DatumGetInt64(SPI_getbinval(row, desc, 1, &isnull));
	f->args = SPI_getbinval(row, desc, 3, &isnull);
	f->owner = DatumGetObjectId(SPI_getbinval(row, desc, 4, &isnull));
	f->name = SPI_getvalue(row, desc, 5);
	f->every = SPI_getvalue(row, desc, 6);
	f->timezone = SPI_getvalue(row, desc, 7);
	overlap = SPI_getvalue(row, desc, 8);
	f->overlap = overlap[0];
	(void) args_interval_to_usecs(DatumGetIntervalP(SPI_getbinval(row, desc, 9, &isnull)),
								  &f->catch_up);
	f->origin = DatumGetTimestampTz(SPI_getbinval(row, desc, 10, &isnull));
	f->next_run = DatumGetTimestampTz(SPI_getbinval(row, desc, 11, &isnull));
	f->queued = DatumGetBool(SPI_getbinval(row, desc, 12, &isnull));
	f->busy = DatumGetBool(SPI_getbinval(row, desc, 13, &isnull));
	policy_id = SPI_getbinval(row, desc, 14, &isnull);
	f->policy_id = isnull ? 0 : DatumGetInt32(policy_id);
	/* by its key (names.c); runs a query: read last */
	f->fn = names_key_function(DatumGetObjectId(SPI_getbinval(row, desc, 2, &isnull)));
}

/*
 * advance -- for a schedule due at or before 'now': move next_run past
 * now, count the missed firings, and say whether the latest due one fires
 * (see "Missed firings" at the top)
 */
static bool
advance(Firing *f, TimestampTz now)
{
	RetriesEvery every;
	pg_tz	   *tz = pg_tzset(f->timezone);
	TimestampTz latest = f->next_run;
	TimestampTz next = f->next_run;
	int64		due = 0;
	bool		on_time;

	if (tz == NULL)
	{
		/* a time zone that the server's tzdata no longer has */
		ereport(LOG,
				(errmsg("retries: schedule \"%s\" paused: time zone \"%s\" is no longer known",
						f->name, f->timezone)));
		f->paused = true;
		return false;
	}
	recurring_every_parse(f->every, &every);
	if (every.at_start)
	{
		/* armed at the server's start (schedule_arm_at_start): once */
		due = 1;
		next = DT_NOEND;
	}
	else if (!every.is_cron)
	{
		/* a fixed rate: count, do not walk */
		due = (now - f->next_run) / every.usecs + 1;
		latest = f->next_run + (due - 1) * every.usecs;
		next = latest + every.usecs;
	}
	else
	{
		while (next <= now && due < MISSED_SCAN_MAX)
		{
			latest = next;
			due++;
			next = recurring_every_next(&every, tz, f->origin, next);
		}
		if (next <= now)
			next = recurring_every_next(&every, tz, f->origin, now);
	}
	on_time = now - latest <= f->catch_up + FIRING_SLACK_USECS ||
		(fire_late_from != 0 && latest >= fire_late_from);
	f->next_run = next;

	/*
	 * The firings passed, but the latest one when it is on time (fire_one
	 * decides that one).  With the previous call unfinished, they would not
	 * have run had a worker looked on time: skipped, not missed.
	 */
	if (f->busy && f->overlap != 'a')
		f->skipped += on_time ? due - 1 : due;
	else
		f->missed += on_time ? due - 1 : due;
	return on_time;
}

/*
 * fire -- make the schedule's call, due at 'at', unless its function lost
 * its policy
 */
static void
fire(Firing *f, TimestampTz at)
{
	int64		call_id;
	char	   *lacks;

	if (!OidIsValid(f->fn))
	{
		ereport(LOG,
				(errmsg("retries: schedule \"%s\" skipped a firing: its function no longer exists",
						f->name),
				 errhint("Drop the schedule with retries.unschedule().")));
		f->skipped++;
		return;
	}
	/* the owner may no longer call it: as for a call, no call is made */
	if (SearchSysCacheExists1(PROCOID, ObjectIdGetDatum(f->fn)) &&
		SearchSysCacheExists1(AUTHOID, ObjectIdGetDatum(f->owner)) &&
		(lacks = access_call_privilege(f->fn, f->owner)) != NULL)
	{
		ereport(LOG,
				(errmsg("retries: schedule \"%s\" skipped a firing: %s",
						f->name, lacks),
				 errhint("Grant the privilege again, or drop the schedule with retries.unschedule().")));
		f->skipped++;
		return;
	}
	if (!call_insert_fired(f->fn, f->policy_id, f->args, f->owner, f->id, at, &call_id))
	{
		ereport(LOG,
				(errmsg("retries: schedule \"%s\" skipped a firing: function %s is not annotated",
						f->name, format_procedure(f->fn)),
				 errhint("Annotate the function again with retries.annotate(), or drop the schedule with retries.unschedule().")));
		f->skipped++;
		return;
	}
	f->last_call = call_id;
	f->fired++;
	f->busy = true;
}

/*
 * fire_one -- decide and make the firings of one locked schedule whose
 * next_run is before 'horizon' (see "Ahead of time" at the top); false if
 * nothing about it changed.  *wait_until is lowered to the time a schedule
 * that could not be fired ahead must be looked at again.
 */
static bool
fire_one(Firing *f, TimestampTz now, TimestampTz horizon, TimestampTz *wait_until)
{
	bool		was_queued = f->queued;
	bool		due = f->next_run <= now;
	bool		on_time = false;
	TimestampTz at = now;

	/* a queued firing whose wait is over goes first */
	if (f->queued && !f->busy)
	{
		f->queued = false;
		fire(f, now);
	}
	if (due)
		on_time = advance(f, now);
	else if (!f->busy || f->overlap == 'a')
	{
		/* ahead of its time: the call waits for it in the table */
		at = f->next_run;
		on_time = advance(f, f->next_run);
	}
	else if (f->next_run < *wait_until)
		*wait_until = f->next_run;	/* decided when due, as overlap says */

	if (on_time && !f->paused)
	{
		if (!f->busy || f->overlap == 'a')
			fire(f, at);
		else if (f->overlap == 'q' && !f->queued)
			f->queued = true;
		else
			f->skipped++;
	}
	Assert(f->paused || !due || f->next_run > now);
	return due || on_time || f->fired > 0 || f->paused || f->queued != was_queued;
}

/* The columns of schedule_data that a firing changes, one array each */
enum
{
	FC_ID, FC_NEXT_RUN, FC_QUEUED, FC_LAST_CALL, FC_FIRED, FC_SKIPPED,
	FC_MISSED, FC_PAUSED, FC_NCOLUMNS
};

/*
 * write_firings -- write what the firings of fs[0..n-1] changed, in one
 * statement
 */
static void
write_firings(const Firing *fs, int n)
{
	static SPIPlanPtr plan = NULL;
	static const Oid types[FC_NCOLUMNS] = {INT8OID, TIMESTAMPTZOID, BOOLOID,
	INT8OID, INT8OID, INT8OID, INT8OID, BOOLOID};
	Oid			argtypes[FC_NCOLUMNS];
	Datum		values[FC_NCOLUMNS];
	Datum	   *cols[FC_NCOLUMNS];
	bool	   *nulls[FC_NCOLUMNS];

	if (n == 0)
		return;
	for (int c = 0; c < FC_NCOLUMNS; c++)
	{
		cols[c] = palloc(sizeof(Datum) * n);
		nulls[c] = palloc0(sizeof(bool) * n);
	}
	for (int i = 0; i < n; i++)
	{
		cols[FC_ID][i] = Int64GetDatum(fs[i].id);
		cols[FC_NEXT_RUN][i] = TimestampTzGetDatum(fs[i].next_run);
		cols[FC_QUEUED][i] = BoolGetDatum(fs[i].queued);
		cols[FC_LAST_CALL][i] = Int64GetDatum(fs[i].last_call);
		nulls[FC_LAST_CALL][i] = fs[i].last_call == 0;
		cols[FC_FIRED][i] = Int64GetDatum(fs[i].fired);
		cols[FC_SKIPPED][i] = Int64GetDatum(fs[i].skipped);
		cols[FC_MISSED][i] = Int64GetDatum(fs[i].missed);
		cols[FC_PAUSED][i] = BoolGetDatum(fs[i].paused);
	}
	plans_columns_to_arrays(FC_NCOLUMNS, types, cols, nulls, n, argtypes, values);
	plans_prepare_kept(&plan,
					   "UPDATE retries.schedule_data s SET next_run = d.next_run,"
					   " queued = d.queued, last_call = coalesce(d.last_call, s.last_call),"
					   " last_run = CASE WHEN d.last_call IS NULL THEN s.last_run"
					   "  ELSE pg_catalog.now() END,"
					   " firings = s.firings OPERATOR(pg_catalog.+) d.fired,"
					   " skipped = s.skipped OPERATOR(pg_catalog.+) d.skipped,"
					   " missed = s.missed OPERATOR(pg_catalog.+) d.missed,"
					   " paused = s.paused OR d.paused"
					   " FROM ROWS FROM (pg_catalog.unnest($1), pg_catalog.unnest($2),"
					   "  pg_catalog.unnest($3), pg_catalog.unnest($4),"
					   "  pg_catalog.unnest($5), pg_catalog.unnest($6),"
					   "  pg_catalog.unnest($7), pg_catalog.unnest($8))"
					   "  AS d(id, next_run, queued, last_call, fired, skipped, missed, paused)"
					   " WHERE s.id OPERATOR(pg_catalog.=) d.id",
					   FC_NCOLUMNS, argtypes);
	if (SPI_execute_plan(plan, values, NULL, false, 0) != SPI_OK_UPDATE ||
		SPI_processed != (uint64) n)
		elog(ERROR, "retries: could not update %d fired schedules", n);
}

/*
 * fire_rows -- fire the schedules that 'plan' locks, run with 'values',
 * given now and the horizon of firings ahead of time; returns how many it
 * locked
 */
static uint64
fire_rows(SPIPlanPtr plan, Datum *values, TimestampTz now, TimestampTz horizon,
		  TimestampTz *wait_until)
{
	SPITupleTable *rows;
	uint64		n;
	Firing	   *fs;
	int			changed = 0;

	if (SPI_execute_plan(plan, values, NULL, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "retries: could not find the due schedules");
	/* the rows stay until SPI_finish(), whatever runs after */
	rows = SPI_tuptable;
	n = SPI_processed;
	fs = palloc(sizeof(Firing) * Max(n, 1));
	for (uint64 i = 0; i < n; i++)
	{
		CHECK_FOR_INTERRUPTS();

		/*
		 * Each schedule's time zone stays cached in the process once fired:
		 * past retries.max_worker_memory, leave the rest (due still) to the
		 * fresh worker that replaces this one (t/060 8)
		 */
		if (i % 16 == 15 && retries_max_worker_memory > 0 &&
			MemoryContextMemAllocated(TopMemoryContext, true) >
			(Size) retries_max_worker_memory * 1024)
		{
			n = i;
			break;
		}
		read_firing(rows->vals[i], rows->tupdesc, &fs[changed]);
		if (fire_one(&fs[changed], now, horizon, wait_until))
			changed++;
	}
	write_firings(fs, changed);
	return n;
}

#define FIRING_COLUMNS \
	"SELECT s.id, s.fn::pg_catalog.oid, s.args, s.owner::pg_catalog.oid, s.name," \
	" s.every, s.timezone, s.overlap, s.catch_up, s.origin, s.next_run, s.queued," \
	" EXISTS (SELECT FROM retries.call_data c" \
	"  WHERE c.id OPERATOR(pg_catalog.=) s.last_call" \
	"  AND c.state OPERATOR(pg_catalog.=) 'scheduled') AS busy, %s" \
	" FROM retries.schedule_data s"

/*
 * find_due -- the ids of up to FIRE_BATCH schedules due by 'horizon',
 * taken in turns between their owners: the earliest due of each owner,
 * then the second earliest of each, and so on; without locking them
 *
 * One role's thousands of due schedules must not hold back another
 * role's one.  The recursive CTE walks the owners through index
 * schedule_data_due_by_owner, one probe each (the owners that have
 * schedules, not their schedules), and each owner's due ones are read
 * from the same index, earliest first, at most FIRE_BATCH of them.
 * Returns an int8[]; *found is how many.
 */
static Datum
find_due(TimestampTz horizon, int *found)
{
	static SPIPlanPtr plan = NULL;
	Oid			argtypes[2] = {TIMESTAMPTZOID, INT4OID};
	Datum		values[2] = {TimestampTzGetDatum(horizon), Int32GetDatum(FIRE_BATCH)};
	Datum	   *ids;
	int			n;

	plans_prepare_kept(&plan,
					   "WITH RECURSIVE owners(o) AS ("
					   "  SELECT (SELECT owner::pg_catalog.oid FROM retries.schedule_data"
					   "   WHERE NOT paused ORDER BY owner LIMIT 1)"
					   "  UNION ALL"
					   "  SELECT (SELECT owner::pg_catalog.oid FROM retries.schedule_data"
					   "   WHERE NOT paused AND owner::pg_catalog.oid OPERATOR(pg_catalog.>) w.o"
					   "   ORDER BY owner LIMIT 1)"
					   "  FROM owners w WHERE w.o IS NOT NULL)"
					   " SELECT d.id FROM owners w,"
					   " LATERAL (SELECT id, next_run,"
					   "   pg_catalog.row_number() OVER (ORDER BY owner, next_run) AS turn"
					   "  FROM retries.schedule_data WHERE NOT paused"
					   "  AND (owner::pg_catalog.oid, next_run)"
					   "   OPERATOR(pg_catalog.>=) (w.o, '-infinity'::pg_catalog.timestamptz)"
					   "  AND (owner::pg_catalog.oid, next_run)"
					   "   OPERATOR(pg_catalog.<=) (w.o, $1)"
					   "  ORDER BY owner, next_run LIMIT $2) d"
					   " WHERE w.o IS NOT NULL"
					   " ORDER BY d.turn, d.next_run LIMIT $2",
					   2, argtypes);
	if (SPI_execute_plan(plan, values, NULL, true, 0) != SPI_OK_SELECT)
		elog(ERROR, "retries: could not find the due schedules");
	n = (int) SPI_processed;
	ids = palloc(sizeof(Datum) * Max(n, 1));
	for (int i = 0; i < n; i++)
	{
		bool		isnull;

		ids[i] = SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull);
	}
	SPI_freetuptable(SPI_tuptable);
	*found = n;
	return PointerGetDatum(construct_array(ids, n, INT8OID, sizeof(int64),
										   FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
}

/*
 * schedule_arm_at_start -- make due now the schedules of '@reboot' that
 * are not paused and have not fired since the server started (nor been
 * made, declared again, resumed or armed since: their origin is then after
 * the start): a worker runs this when it first serves, unless an earlier
 * worker of the database did since the start (worker.c, serving, and the
 * database's memo, cleared by CREATE EXTENSION), and their firing takes
 * them back to 'infinity'.  Arming moves
 * the origin: a firing that made no call (skipped, its last call busy)
 * leaves last_run as it was, and the next worker's start armed it again
 * (the eighteenth hostile review).  So they fire once per
 * start of the server, however many workers start again meanwhile, and
 * whatever the number of databases (a list of the databases that had
 * armed theirs, in shared memory, filled up: the sixteenth and
 * seventeenth hostile reviews).  Inside SPI, in a transaction.
 */
void
schedule_arm_at_start(void)
{
	static SPIPlanPtr plan = NULL;
	Oid			argtypes[1] = {TIMESTAMPTZOID};
	Datum		values[1] = {TimestampTzGetDatum(clock_xact_now())};

	if (schema_retries_version() < SCHEMA_1_2)
		return;
	plans_prepare_kept(&plan,
					   "UPDATE retries.schedule_data SET next_run = $1, origin = pg_catalog.now()"
					   " WHERE every OPERATOR(pg_catalog.~) '" EVERY_AT_START_REGEX "'"
					   " AND NOT paused"
					   " AND next_run OPERATOR(pg_catalog.=) 'infinity'::pg_catalog.timestamptz"
					   " AND coalesce(last_run, created_at)"
					   "  OPERATOR(pg_catalog.<) pg_catalog.pg_postmaster_start_time()"
					   " AND origin OPERATOR(pg_catalog.<) pg_catalog.pg_postmaster_start_time()",
					   1, argtypes);
	if (SPI_execute_plan(plan, values, NULL, false, 0) != SPI_OK_UPDATE)
		elog(ERROR, "retries: could not arm the schedules of @reboot");
}

/*
 * firing_plan -- the statement that locks the schedules to fire: the due
 * ones among an int8[] of ids ('queued' false), or the queued ones whose
 * previous call finished; prepared when first needed, as a worker's visit
 * of a database often needs neither
 */
static SPIPlanPtr
firing_plan(bool queued)
{
	static SPIPlanPtr plans[2][2];
	bool		policies = (schema_retries_version() >= SCHEMA_1_5);
	Oid			due_types[3] = {INT8ARRAYOID, TIMESTAMPTZOID, TIMESTAMPTZOID};
	Oid			queued_types[3] = {TIMESTAMPTZOID, INT4OID, TIMESTAMPTZOID};

	if (plans[queued][policies] != NULL)
		return plans[queued][policies];
	if (!queued)
		plans_prepare_kept(&plans[queued][policies],
						   psprintf(FIRING_COLUMNS
									" WHERE s.id OPERATOR(pg_catalog.=) ANY ($1)"
									" AND NOT s.paused AND s.next_run OPERATOR(pg_catalog.<=) $2"
									" AND s.created_at OPERATOR(pg_catalog.>=) $3"
									" ORDER BY s.next_run"
									" FOR UPDATE OF s SKIP LOCKED",
									POLICY_ID_COLUMN(policies)),
						   3, due_types);
	else
		plans_prepare_kept(&plans[queued][policies],
						   psprintf(FIRING_COLUMNS
									" WHERE s.queued AND NOT s.paused"
									" AND s.next_run OPERATOR(pg_catalog.>) $1"
									" AND NOT EXISTS (SELECT FROM retries.call_data c"
									"  WHERE c.id OPERATOR(pg_catalog.=) s.last_call"
									"  AND c.state OPERATOR(pg_catalog.=) 'scheduled')"
									" AND s.created_at OPERATOR(pg_catalog.>=) $3"
									" LIMIT $2 FOR UPDATE OF s SKIP LOCKED",
									POLICY_ID_COLUMN(policies)),
						   3, queued_types);
	return plans[queued][policies];
}

/*
 * next_firing -- lower *wait_until to the first firing beyond 'horizon'
 * (to be fired ahead of its time), and say whether a queued firing waits
 * for a call to finish
 */
static bool
next_firing(TimestampTz horizon, TimestampTz *wait_until)
{
	static SPIPlanPtr next_plan = NULL;
	Oid			argtypes[1] = {TIMESTAMPTZOID};
	Datum		values[1] = {TimestampTzGetDatum(horizon)};
	bool		isnull;
	bool		queued_null;
	Datum		next;
	bool		waiting;

	plans_prepare_kept(&next_plan,
					   "SELECT (SELECT pg_catalog.min(next_run) FROM retries.schedule_data"
					   "  WHERE NOT paused AND next_run OPERATOR(pg_catalog.>) $1),"
					   " EXISTS (SELECT FROM retries.schedule_data"
					   "  WHERE queued AND NOT paused)",
					   1, argtypes);
	if (SPI_execute_plan(next_plan, values, NULL, false, 1) != SPI_OK_SELECT)
		elog(ERROR, "retries: could not find the next schedule");
	next = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	waiting = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0],
										 SPI_tuptable->tupdesc, 2, &queued_null));
	if (!isnull)
		*wait_until = Min(*wait_until, DatumGetTimestampTz(next) - FIRE_AHEAD_USECS);
	return waiting;
}

/*
 * schedule_fire_due -- fire the schedules due by 'now' or within
 * FIRE_AHEAD_USECS of it, and the queued ones whose previous call
 * finished, in the caller's transaction (a worker's, with SPI connected
 * and a snapshot set, as the worker's superuser)
 *
 * The due ones are found in turns between roles (find_due), then locked
 * (SKIP LOCKED: another worker is firing those) and fired.  Returns when
 * to look again: 'now' if more were due than one transaction takes, 0 if
 * no schedule is active.  *waiting says whether a queued firing waits for
 * a call to finish.  A schedule made before 'made_before' (0: none) is not
 * fired: a copy of a database brought it, and it is to be paused
 * (home.c).  A firing due at 'late_from' or later (0: none) is on time
 * however late: its database had no worker to see it (worker.c, "Workers
 * on demand"), which is no outage.
 */
TimestampTz
schedule_fire_due(TimestampTz now, TimestampTz made_before, TimestampTz late_from,
				  bool *waiting)
{
	Datum		due_values[3];
	int			found;
	Datum		values[3];
	TimestampTz horizon = now + FIRE_AHEAD_USECS;
	TimestampTz wait_until = DT_NOEND;

	fire_late_from = late_from;
	due_values[0] = find_due(horizon, &found);
	due_values[1] = TimestampTzGetDatum(horizon);
	due_values[2] = TimestampTzGetDatum(made_before != 0 ? made_before : DT_NOBEGIN);
	if (found == FIRE_BATCH)
	{
		/* more to fire: at once, or, if another worker holds these, soon */
		*waiting = false;
		if (fire_rows(firing_plan(false), due_values, now, horizon, &wait_until) == 0)
			return now + FIRE_BUSY_USECS;
		return now;
	}

	/*
	 * Some of them locked by another worker, which is firing them: look again
	 * soon, so that this worker, maybe the only idle one, decides their next
	 * firing on time even if that worker goes on to run a call
	 */
	if (found > 0 &&
		fire_rows(firing_plan(false), due_values, now, horizon, &wait_until) < (uint64) found)
		wait_until = Min(wait_until, now + FIRE_LOCKED_USECS);

	/* the queued firings whose previous call finished, if any is queued */
	*waiting = next_firing(horizon, &wait_until);
	if (*waiting)
	{
		values[0] = TimestampTzGetDatum(horizon);
		values[1] = Int32GetDatum(FIRE_BATCH);
		values[2] = due_values[2];
		if (fire_rows(firing_plan(true), values, now, horizon, &wait_until) > 0)
			*waiting = next_firing(horizon, &wait_until);
	}
	return TIMESTAMP_NOT_FINITE(wait_until) ? 0 : wait_until;
}
