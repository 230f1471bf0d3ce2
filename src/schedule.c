/*-------------------------------------------------------------------------
 *
 * schedule.c
 *	  retries.call(): scheduling a call of an annotated function.
 *
 * The call is checked completely before anything is stored: the function
 * exists, the current role may execute it, it is annotated, and its
 * arguments convert to the parameter types.  The call runs as the role that
 * scheduled it (current_user here), under the policy current now.
 *
 * A dedupe key makes scheduling idempotent per role: while that role has an
 * unfinished call with the same key, the existing call's id is returned and
 * nothing is scheduled.  A unique index over (role, hash of the key) among
 * unfinished calls settles races between concurrent transactions.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/regproc.h"
#include "utils/syscache.h"

#include "retries.h"

PG_FUNCTION_INFO_V1(retries_call);

/* How often retries.call() looks again for a key whose call just finished */
#define KEY_RACE_ATTEMPTS	3

/*
 * current_policy -- id and attempt budget of a function's current policy;
 * false if it is not annotated
 */
static bool
current_policy(Oid fnoid, int32 *policy_id, Datum *max_attempts, bool *unlimited)
{
	static SPIPlanPtr plan = NULL;
	Oid			argtypes[1] = {OIDOID};
	Datum		values[1] = {ObjectIdGetDatum(fnoid)};
	bool		isnull;

	retries_prepare_kept(&plan,
				 "SELECT id, max_attempts FROM retries.policy_data"
				 " WHERE fn OPERATOR(pg_catalog.=) $1 AND is_current",
				 1, argtypes);
	if (SPI_execute_plan(plan, values, NULL, false, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not look up the policy of function %u", fnoid);
	if (SPI_processed == 0)
		return false;

	*policy_id = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0],
											 SPI_tuptable->tupdesc, 1, &isnull));
	*max_attempts = SPI_getbinval(SPI_tuptable->vals[0],
								  SPI_tuptable->tupdesc, 2, unlimited);
	return true;
}

/*
 * insert_call -- insert the call; with a key, return the id of the role's
 * unfinished call with that key instead if there is one
 */
static int64
insert_call(Datum *values, const char *nulls)
{
	static SPIPlanPtr insert_plan = NULL;
	static SPIPlanPtr find_plan = NULL;
	Oid			argtypes[6] = {INT4OID, JSONBOID, INT4OID, TIMESTAMPTZOID,
	OIDOID, TEXTOID};
	bool		isnull;

	retries_prepare_kept(&insert_plan,
				 "INSERT INTO retries.call_data"
				 " (policy_id, args, max_attempts, next_attempt, scheduled_by, key)"
				 " VALUES ($1, $2, $3, $4, $5::pg_catalog.regrole, $6)"
				 " ON CONFLICT (scheduled_by, pg_catalog.md5(key))"
				 " WHERE key IS NOT NULL AND state IN ('scheduled', 'running')"
				 " DO NOTHING RETURNING id",
				 6, argtypes);

	for (int i = 0; i < KEY_RACE_ATTEMPTS; i++)
	{
		if (SPI_execute_plan(insert_plan, values, nulls, false, 0) != SPI_OK_INSERT_RETURNING)
			elog(ERROR, "could not insert a call");
		if (SPI_processed == 1)
			break;

		/* a conflict: find the call holding the key */
		retries_prepare_kept(&find_plan,
					 "SELECT id FROM retries.call_data"
					 " WHERE scheduled_by OPERATOR(pg_catalog.=) $5::pg_catalog.regrole"
					 " AND pg_catalog.md5(key)"
					 " OPERATOR(pg_catalog.=) pg_catalog.md5($6)"
					 " AND key OPERATOR(pg_catalog.=) $6"
					 " AND state IN ('scheduled', 'running')",
					 6, argtypes);
		if (SPI_execute_plan(find_plan, values, nulls, false, 1) != SPI_OK_SELECT)
			elog(ERROR, "could not look up a call by key");
		if (SPI_processed == 1)
			break;
		/* that call finished meanwhile: try to insert again */
	}
	if (SPI_processed != 1)
		ereport(ERROR,
				(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
				 errmsg("could not schedule a call with key \"%s\" because of concurrent changes",
						TextDatumGetCString(values[5])),
				 errhint("Try again.")));

	return DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0],
									   SPI_tuptable->tupdesc, 1, &isnull));
}

/*
 * retries_call -- SQL function retries.call(fn, args, run_at, key)
 *
 * Returns the id of the scheduled call (or, with a key, of the existing
 * unfinished call with that key).
 */
Datum
retries_call(PG_FUNCTION_ARGS)
{
	Oid			fnoid;
	Jsonb	   *args;
	AclResult	aclresult;
	HeapTuple	tup;
	int32		policy_id;
	Datum		max_attempts;
	bool		unlimited;
	Datum		values[6];
	char		nulls[6];
	Oid			userid = GetUserId();
	RetriesUserSwitch save;
	int64		id;

	retries_check_not_null(fcinfo, 0, "fn");
	retries_check_not_null(fcinfo, 1, "args");
	retries_check_not_null(fcinfo, 2, "run_at");
	fnoid = PG_GETARG_OID(0);
	args = PG_GETARG_JSONB_P(1);

	tup = SearchSysCache1(PROCOID, ObjectIdGetDatum(fnoid));
	if (!HeapTupleIsValid(tup))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_FUNCTION),
				 errmsg("fn: function with OID %u does not exist", fnoid)));
	ReleaseSysCache(tup);

	aclresult = pg_proc_aclcheck(fnoid, userid, ACL_EXECUTE);
	if (aclresult != ACLCHECK_OK)
		aclcheck_error(aclresult, OBJECT_FUNCTION, get_func_name(fnoid));

	/* the arguments are converted as the caller, under its settings */
	args = call_args_canonicalize(fnoid, args);

	memset(nulls, ' ', sizeof(nulls));
	retries_become_owner(&save);
	SPI_connect();

	if (!current_policy(fnoid, &policy_id, &max_attempts, &unlimited))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("function %s is not annotated", format_procedure(fnoid)),
				 errhint("Its owner can give it a retry policy with retries.annotate().")));

	values[0] = Int32GetDatum(policy_id);
	values[1] = JsonbPGetDatum(args);
	values[2] = max_attempts;
	nulls[2] = unlimited ? 'n' : ' ';
	values[3] = PG_GETARG_DATUM(2);
	values[4] = ObjectIdGetDatum(userid);
	values[5] = PG_ARGISNULL(3) ? (Datum) 0 : PG_GETARG_DATUM(3);
	nulls[5] = PG_ARGISNULL(3) ? 'n' : ' ';

	id = insert_call(values, nulls);
	retries_wake_at_commit();

	SPI_finish();
	retries_restore_user(&save);

	PG_RETURN_INT64(id);
}
