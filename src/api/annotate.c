/*-------------------------------------------------------------------------
 *
 * annotate.c
 *	  retries.annotate() and retries.unannotate(): giving a function a retry
 *	  policy, which is what lets its calls be scheduled.
 *
 * A policy starts from the string '[count] min [max]' (or
 * retries.default_policy), and the named arguments override its parts.  Each
 * annotation is a new row of retries.policy_data; the previous one stops
 * being current but stays, because the calls scheduled under it keep their
 * policy for their whole life.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "access/htup_details.h"
#include "catalog/namespace.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/float.h"
#include "utils/lsyscache.h"
#include "utils/regproc.h"
#include "utils/syscache.h"

#include "api/api.h"
#include "base/base.h"
#include "base/compat.h"
#include "core/policy.h"
#include "core/rate.h"
#include "flow/flow.h"
#include "tables/tables.h"
#include "xact/xact.h"

PG_FUNCTION_INFO_V1(retries_annotate);
PG_FUNCTION_INFO_V1(retries_unannotate);
PG_FUNCTION_INFO_V1(retries_format_policy);

/* Positions of retries.annotate()'s arguments */
enum
{
	ANN_FN,
	ANN_POLICY,
	ANN_MAX_ATTEMPTS,
	ANN_MIN_DELAY,
	ANN_MAX_DELAY,
	ANN_MULTIPLIER,
	ANN_JITTER,
	ANN_RETRY_ON,
	ANN_TIMEOUT,
	ANN_ON_EXHAUSTED,
	ANN_DELAY_FN,
	ANN_MAX_RUNNING,			/* version 1.2 */
	ANN_MAX_RUNNING_PER_KEY,	/* version 1.2 */
	ANN_RATE,					/* version 1.2 */
	ANN_NOTIFY,					/* version 1.2 */
	ANN_KEY_WINDOW,				/* version 1.6 */
	ANN_DEBOUNCE_MAX			/* version 1.7 */
};

/* Most entries a retry_on list may have (normalizing it is quadratic) */
#define MAX_RETRY_ON	1000

/* A policy after all checks, ready to be stored */
typedef struct Policy
{
	int32		max_attempts;	/* 0 when unlimited */
	int64		min_delay;
	int64		max_delay;		/* -1 for a fixed delay */
	double		multiplier;
	PolicyJitter jitter;
	Datum		retry_on;		/* text[] */
	int64		timeout;		/* -1 for none */
	Oid			on_exhausted;
	Oid			delay_fn;
	bool		notify;			/* NOTIFY retries_finished as calls finish */
} Policy;

/*
 * lookup_function -- the pg_proc row of a function given by OID, or an error
 * naming the argument it came from
 */
static HeapTuple
lookup_function(Oid fnoid, const char *argname)
{
	HeapTuple	tup = SearchSysCache1(PROCOID, ObjectIdGetDatum(fnoid));

	if (!HeapTupleIsValid(tup))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_FUNCTION),
				 errmsg("%s: function with OID %u does not exist", argname, fnoid)));
	return tup;
}

/*
 * type_is_temporary -- is the type one of a temporary schema (a temp
 * table's row type, say)?
 */
static bool
type_is_temporary(Oid typid)
{
	HeapTuple	tup = SearchSysCache1(TYPEOID, ObjectIdGetDatum(typid));
	bool		temporary = false;

	if (HeapTupleIsValid(tup))
	{
		temporary = isAnyTempNamespace(((Form_pg_type) GETSTRUCT(tup))->typnamespace);
		ReleaseSysCache(tup);
	}
	return temporary;
}

/*
 * check_plain_function -- refuse what a worker cannot call with plain
 * arguments: aggregates, window functions, procedures, set-returning
 * functions, and functions with pseudo-type parameters or results
 * (polymorphic, internal, trigger, ...)
 *
 * 'what' names the role of the function in messages ("function",
 * "on_exhausted function", ...).
 */
static void
check_plain_function(HeapTuple tup, Oid fnoid, const char *what)
{
	Form_pg_proc proc = (Form_pg_proc) GETSTRUCT(tup);
	char	   *name = format_procedure(fnoid);
	const char *kind = NULL;

	switch (proc->prokind)
	{
		case PROKIND_AGGREGATE:
			kind = "an aggregate function";
			break;
		case PROKIND_WINDOW:
			kind = "a window function";
			break;
		case PROKIND_PROCEDURE:
			/* a call's own procedure runs in a process of its own (runner.c) */
			if (strcmp(what, "function") != 0)
				kind = "a procedure";
			else if (proc->prorettype != VOIDOID)
				kind = "a procedure with OUT parameters";
			break;
	}
	if (kind)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("%s %s is %s", what, name, kind),
				 errhint("Only plain functions can be called by retries; wrap it in one.")));

	/*
	 * A temporary function, or one of a temporary type, goes with its
	 * session, without the drop trigger: what refers to it would be left
	 * naming nothing (and its signature could be read by no one)
	 */
	if (isAnyTempNamespace(proc->pronamespace))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("%s %s is temporary", what,
						quote_identifier(NameStr(proc->proname))),
				 errhint("Calls run in other sessions, maybe after this one ended: use a function of a permanent schema.")));
	for (int i = 0; i < proc->pronargs; i++)
		if (type_is_temporary(proc->proargtypes.values[i]))
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("%s %s has a parameter of temporary type %s",
							what, name, format_type_be(proc->proargtypes.values[i])),
					 errhint("Calls run in other sessions, maybe after this one ended: use types of a permanent schema.")));
	if (type_is_temporary(proc->prorettype))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("%s %s returns temporary type %s",
						what, name, format_type_be(proc->prorettype)),
				 errhint("Calls run in other sessions, maybe after this one ended: use types of a permanent schema.")));

	if (proc->proretset)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("%s %s returns a set", what, name),
				 errhint("Only functions returning a single value can be called by retries; wrap it in one.")));

	for (int i = 0; i < proc->pronargs; i++)
	{
		Oid			argtype = proc->proargtypes.values[i];

		if (get_typtype(argtype) == TYPTYPE_PSEUDO)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("%s %s has a parameter of pseudo-type %s",
							what, name, format_type_be(argtype)),
					 errhint("Calls need concrete parameter types; wrap it in a function that has them.")));
	}

	if (get_typtype(proc->prorettype) == TYPTYPE_PSEUDO &&
		proc->prorettype != VOIDOID && proc->prorettype != RECORDOID)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("%s %s returns pseudo-type %s",
						what, name, format_type_be(proc->prorettype)),
				 errhint("Only functions that can be called from SQL can be called by retries.")));
}

/*
 * check_hook -- validate an on_exhausted or delay_fn function of function
 * 'annotated': it must be a plain function with exactly these parameter
 * types (and, if 'rettype' is valid, this result type), the annotating role
 * must be allowed to execute it, and it must be the code of the annotated
 * function's owner or of a superuser, since it runs as that owner
 * (access_hook_owner)
 */
static void
check_hook(Oid fnoid, const char *argname, int nargs, const Oid *argtypes,
		   Oid rettype, const char *expected, Oid annotated)
{
	char	   *wrong_owner;
	HeapTuple	tup = lookup_function(fnoid, argname);
	Form_pg_proc proc = (Form_pg_proc) GETSTRUCT(tup);
	bool		ok;
	char		what[NAMEDATALEN + 16];

	snprintf(what, sizeof(what), "%s function", argname);
	check_plain_function(tup, fnoid, what);

	ok = proc->pronargs == nargs &&
		(!OidIsValid(rettype) || proc->prorettype == rettype);
	for (int i = 0; ok && i < nargs; i++)
		ok = proc->proargtypes.values[i] == argtypes[i];
	ReleaseSysCache(tup);

	if (!ok)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s function %s has the wrong signature",
						argname, format_procedure(fnoid)),
				 errdetail("It must be %s.", expected)));

	access_check_call_privilege(fnoid, GetUserId());

	wrong_owner = access_hook_owner(fnoid, schema_function_owner(annotated), argname);
	if (wrong_owner != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("%s", wrong_owner),
				 errhint("A hook runs as the owner of the function it is set on: use a function of that owner's, or of a superuser's.")));
}

/*
 * check_owner -- only the function's owner (or a superuser) may change its
 * annotation
 */
static void
check_owner(Oid fnoid)
{
	if (!retries_proc_ownercheck(fnoid, GetUserId()))
		aclcheck_error(ACLCHECK_NOT_OWNER, OBJECT_FUNCTION, get_func_name(fnoid));
}

/*
 * interval_arg -- an interval argument as microseconds, checked to be in
 * [lowest, POLICY_MAX_DURATION]
 */
static int64
interval_arg(FunctionCallInfo fcinfo, int argno, const char *argname,
			 int64 lowest)
{
	Interval   *span = PG_GETARG_INTERVAL_P(argno);
	int64		usecs;
	char	   *text = DatumGetCString(DirectFunctionCall1(interval_out,
														   IntervalPGetDatum(span)));

	if (!args_interval_to_usecs(span, &usecs) || usecs < lowest)
	{
		char		maxbuf[POLICY_FORMAT_LEN];

		policy_format_duration(POLICY_MAX_DURATION, maxbuf, sizeof(maxbuf));
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must be %s and at most %s, not \"%s\"",
						argname, lowest > 0 ? "positive" : "zero or more",
						maxbuf, text)));
	}
	return usecs;
}

/*
 * build_retry_on -- check and normalize the retry_on array
 */
static Datum
build_retry_on(ArrayType *array)
{
	Datum	   *elems;
	bool	   *nulls;
	int			n;
	const char **entries;
	char		(*out)[POLICY_SQLSTATE_ENTRY_LEN];
	int			nout;
	PolicyError err;
	Datum	   *result;

	if (ARR_NDIM(array) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("retry_on must be a one-dimensional array")));
	deconstruct_array(array, TEXTOID, -1, false, TYPALIGN_INT,
					  &elems, &nulls, &n);
	if (n > MAX_RETRY_ON)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("retry_on has %d elements, more than the %d allowed",
						n, MAX_RETRY_ON),
				 errhint("List classes such as \"08\" instead of their SQLSTATEs.")));

	entries = palloc(sizeof(char *) * Max(n, 1));
	for (int i = 0; i < n; i++)
		entries[i] = nulls[i] ? NULL : TextDatumGetCString(elems[i]);

	out = palloc(sizeof(*out) * (n + 1));
	nout = policy_normalize_retry_on(entries, n, out, &err);
	if (nout < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid retry_on: %s", err.message),
				 err.hint[0] ? errhint("%s", err.hint) : 0));

	result = palloc(sizeof(Datum) * Max(nout, 1));
	for (int i = 0; i < nout; i++)
		result[i] = CStringGetTextDatum(out[i]);
	return PointerGetDatum(construct_array(result, nout, TEXTOID, -1, false,
										   TYPALIGN_INT));
}

/*
 * parse_policy -- the count and delays of the policy string 'source'
 * (NULL: retries.default_policy) into *policy
 */
static void
parse_policy(const char *source, Policy *policy)
{
	PolicySpec	spec;
	PolicyError err;

	if (source == NULL)
		source = retries_default_policy;
	if (!policy_parse(source, &spec, &err))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid retry policy \"%s\": %s",
						args_quotable(source, strlen(source)), err.message),
				 err.hint[0] ? errhint("%s", err.hint) : 0));
	policy->max_attempts = spec.has_count ? spec.count + 1 : 0;
	policy->min_delay = spec.min_delay;
	policy->max_delay = spec.has_max ? spec.max_delay : -1;
}

/*
 * build_policy -- the policy that annotate()'s arguments describe
 */
static void
build_policy(FunctionCallInfo fcinfo, Policy *policy)
{

	/* the string, or the default one */
	parse_policy(PG_ARGISNULL(ANN_POLICY) ? NULL
				 : text_to_cstring(PG_GETARG_TEXT_PP(ANN_POLICY)), policy);

	/* the named arguments override the parts of the string */
	if (!PG_ARGISNULL(ANN_MAX_ATTEMPTS))
	{
		int32		max_attempts = PG_GETARG_INT32(ANN_MAX_ATTEMPTS);

		if (max_attempts < 1 || max_attempts > POLICY_MAX_ATTEMPTS)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("max_attempts must be between 1 and %d, not %d",
							POLICY_MAX_ATTEMPTS, max_attempts),
					 errhint("Leave out the count of the policy string for unlimited attempts.")));
		policy->max_attempts = max_attempts;
	}
	if (!PG_ARGISNULL(ANN_MIN_DELAY))
		policy->min_delay = interval_arg(fcinfo, ANN_MIN_DELAY, "min_delay", 1);
	if (!PG_ARGISNULL(ANN_MAX_DELAY))
		policy->max_delay = interval_arg(fcinfo, ANN_MAX_DELAY, "max_delay", 1);
	if (policy->max_delay >= 0 && policy->max_delay < policy->min_delay)
	{
		char		minbuf[POLICY_FORMAT_LEN];
		char		maxbuf[POLICY_FORMAT_LEN];

		policy_format_duration(policy->min_delay, minbuf, sizeof(minbuf));
		policy_format_duration(policy->max_delay, maxbuf, sizeof(maxbuf));
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("max_delay %s is less than min_delay %s", maxbuf, minbuf)));
	}

	policy->multiplier = PG_ARGISNULL(ANN_MULTIPLIER) ? 2.0
		: PG_GETARG_FLOAT8(ANN_MULTIPLIER);
	if (isnan(policy->multiplier) || isinf(policy->multiplier) ||
		policy->multiplier < 1.0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("multiplier must be a finite number of at least 1, not %s",
						float8out_internal(policy->multiplier))));

	policy->jitter = POLICY_JITTER_NONE;
	if (!PG_ARGISNULL(ANN_JITTER))
	{
		char	   *jitter = text_to_cstring(PG_GETARG_TEXT_PP(ANN_JITTER));

		if (!policy_parse_jitter(jitter, &policy->jitter))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("unknown jitter \"%s\"", args_quotable(jitter, strlen(jitter))),
					 errhint("Use \"none\", \"full\" or \"equal\".")));
	}

	if (PG_ARGISNULL(ANN_RETRY_ON))
		policy->retry_on = build_retry_on(construct_empty_array(TEXTOID));
	else
		policy->retry_on = build_retry_on(PG_GETARG_ARRAYTYPE_P(ANN_RETRY_ON));

	policy->timeout = -1;
	if (!PG_ARGISNULL(ANN_TIMEOUT))
	{
		policy->timeout = interval_arg(fcinfo, ANN_TIMEOUT, "timeout", 1);
		/* it becomes statement_timeout, an int of milliseconds */
		if (policy->timeout / 1000 > INT_MAX)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("timeout must be at most %d milliseconds", INT_MAX)));
	}

	policy->on_exhausted = InvalidOid;
	if (!PG_ARGISNULL(ANN_ON_EXHAUSTED))
	{
		Oid			argtypes[1] = {INT8OID};

		policy->on_exhausted = PG_GETARG_OID(ANN_ON_EXHAUSTED);
		check_hook(policy->on_exhausted, "on_exhausted", 1, argtypes,
				   InvalidOid, "on_exhausted(call_id bigint)", PG_GETARG_OID(ANN_FN));
	}

	policy->delay_fn = InvalidOid;
	if (!PG_ARGISNULL(ANN_DELAY_FN))
	{
		Oid			argtypes[3] = {INT4OID, TEXTOID, TEXTOID};

		policy->delay_fn = PG_GETARG_OID(ANN_DELAY_FN);
		check_hook(policy->delay_fn, "delay_fn", 3, argtypes, INTERVALOID,
				   "delay_fn(attempt integer, sqlstate text, message text) RETURNS interval",
				   PG_GETARG_OID(ANN_FN));
	}

	/* version 1.2; NULL means false, as the default does */
	policy->notify = PG_NARGS() > ANN_NOTIFY && !PG_ARGISNULL(ANN_NOTIFY) &&
		PG_GETARG_BOOL(ANN_NOTIFY);
}

/*
 * clear_current_policy -- make a function's current policy (if any) no
 * longer current; returns how many rows changed (0 or 1).  Call it as the
 * extension's owner, inside SPI_connect().
 */
static uint64
clear_current_policy(Oid fnoid)
{
	static SPIPlanPtr plan = NULL;
	Oid			argtypes[1] = {OIDOID};
	Datum		values[1] = {ObjectIdGetDatum(names_function_key(fnoid, false))};

	/* retries.call() must not go on using the policy it looked up last */
	retries_policy_generation++;
	if (!OidIsValid(DatumGetObjectId(values[0])))
		return 0;
	plans_prepare_kept(&plan,
					   "UPDATE retries.policy_data SET is_current = false"
					   " WHERE fn OPERATOR(pg_catalog.=) $1 AND is_current",
					   1, argtypes);
	if (SPI_execute_plan(plan, values, NULL, false, 0) != SPI_OK_UPDATE)
		elog(ERROR, "could not clear the policy of function %u", fnoid);
	return SPI_processed;
}

/*
 * The columns of policy_data that a new policy fills in, in the order of
 * policy_values(): fn, fn_signature, max_attempts, min_delay, max_delay,
 * multiplier, jitter, retry_on, timeout, on_exhausted, delay_fn,
 * annotated_by, notify (1.2)
 */
#define POLICY_COLUMNS	13
static Oid	policy_types[POLICY_COLUMNS] = {OIDOID, TEXTOID, INT4OID,
	INTERVALOID, INTERVALOID, FLOAT8OID, TEXTOID, TEXTARRAYOID, INTERVALOID,
OIDOID, OIDOID, OIDOID, BOOLOID};

/*
 * policy_values -- the values (and nulls, ' ' or 'n') of a policy_data
 * row for 'policy' of fnoid, made by 'role'; the functions by OID, until
 * policy_keys()
 */
static void
policy_values(Oid fnoid, const Policy *policy, Oid role, Datum *values, char *nulls)
{
	memset(nulls, ' ', POLICY_COLUMNS);
	values[0] = ObjectIdGetDatum(fnoid);
	values[1] = CStringGetTextDatum(names_signature(fnoid));
	values[2] = Int32GetDatum(policy->max_attempts);
	nulls[2] = policy->max_attempts > 0 ? ' ' : 'n';
	values[3] = IntervalPGetDatum(args_usecs_to_interval(policy->min_delay));
	values[4] = IntervalPGetDatum(args_usecs_to_interval(Max(policy->max_delay, 0)));
	nulls[4] = policy->max_delay >= 0 ? ' ' : 'n';
	values[5] = Float8GetDatum(policy->multiplier);
	values[6] = CStringGetTextDatum(policy_jitter_name(policy->jitter));
	values[7] = policy->retry_on;
	values[8] = IntervalPGetDatum(args_usecs_to_interval(Max(policy->timeout, 0)));
	nulls[8] = policy->timeout >= 0 ? ' ' : 'n';
	values[9] = ObjectIdGetDatum(policy->on_exhausted);
	nulls[9] = OidIsValid(policy->on_exhausted) ? ' ' : 'n';
	values[10] = ObjectIdGetDatum(policy->delay_fn);
	nulls[10] = OidIsValid(policy->delay_fn) ? ' ' : 'n';
	values[11] = ObjectIdGetDatum(role);
	values[12] = BoolGetDatum(policy->notify);
}

/*
 * policy_keys -- the functions of policy_values() by their keys, as the
 * tables refer to functions (names.c); inside SPI, as the extension's owner
 */
static void
policy_keys(const Policy *policy, Datum *values)
{
	values[0] = ObjectIdGetDatum(names_function_key(DatumGetObjectId(values[0]), true));
	values[9] = ObjectIdGetDatum(names_function_key(policy->on_exhausted, true));
	values[10] = ObjectIdGetDatum(names_function_key(policy->delay_fn, true));
}

/*
 * store_policy -- make 'policy' the current one of fnoid
 */
static void
store_policy(Oid fnoid, const Policy *policy)
{
	static SPIPlanPtr insert_plans[2];
	Datum		values[POLICY_COLUMNS];
	char		nulls[POLICY_COLUMNS];
	RetriesUserSwitch save;
	bool		with_notify;

	policy_values(fnoid, policy, GetUserId(), values, nulls);
	access_become_owner(&save);
	SPI_connect();
	/* notify: version 1.2 */
	with_notify = (schema_retries_version() >= SCHEMA_1_2);
	if (!with_notify && policy->notify)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("notify needs version 1.2 of extension retries"),
				 errhint("ALTER EXTENSION retries UPDATE.")));
	if (insert_plans[with_notify] == NULL)
		plans_prepare_kept(&insert_plans[with_notify],
						   psprintf("INSERT INTO retries.policy_data (fn, fn_signature,"
									" max_attempts, min_delay, max_delay, multiplier,"
									" jitter, retry_on, timeout, on_exhausted, delay_fn,"
									" annotated_by%s)"
									" VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11,"
									" $12::pg_catalog.regrole%s)",
									with_notify ? ", notify" : "",
									with_notify ? ", $13" : ""),
						   with_notify ? POLICY_COLUMNS : POLICY_COLUMNS - 1, policy_types);
	policy_keys(policy, values);
	(void) clear_current_policy(fnoid);
	if (SPI_execute_plan(insert_plans[with_notify], values, nulls, false, 0) != SPI_OK_INSERT)
		elog(ERROR, "could not store the policy of function %u", fnoid);
	SPI_finish();
	access_restore_user(&save);
}

/*
 * annotate_command_policy -- the id of a policy of retries.command(text)
 * (fnoid) for the commands of 'role': policy string 'source' (NULL:
 * retries.default_policy) and retry_on (NULL: the retry class only), the
 * rest as annotate's defaults.  Never current (only a command given it
 * uses it); a row the role already has with the same policy is used
 * again, else one is made (annotate refuses retries.command, so every row
 * of it is one of these, and differs from another only in what is
 * compared).  Inside SPI, as the extension's owner.
 */
int32
annotate_command_policy(Oid fnoid, const char *source, ArrayType *retry_on, Oid role)
{
	static SPIPlanPtr find_plan = NULL;
	static SPIPlanPtr insert_plan = NULL;
	Policy		policy;
	Datum		values[POLICY_COLUMNS];
	char		nulls[POLICY_COLUMNS];
	bool		isnull;

	memset(&policy, 0, sizeof(policy));
	parse_policy(source, &policy);
	policy.multiplier = 2.0;
	policy.jitter = POLICY_JITTER_NONE;
	policy.retry_on = build_retry_on(retry_on != NULL ? retry_on
									 : construct_empty_array(TEXTOID));
	policy.timeout = -1;
	policy_values(fnoid, &policy, role, values, nulls);
	policy_keys(&policy, values);

	plans_prepare_kept(&find_plan,
					   "SELECT id FROM retries.policy_data"
					   " WHERE fn OPERATOR(pg_catalog.=) $1 AND NOT is_current"
					   " AND annotated_by OPERATOR(pg_catalog.=) $12::pg_catalog.regrole"
					   " AND coalesce(max_attempts, 0) OPERATOR(pg_catalog.=) coalesce($3, 0)"
					   " AND min_delay OPERATOR(pg_catalog.=) $4"
					   " AND coalesce(max_delay, '-1s') OPERATOR(pg_catalog.=) coalesce($5, '-1s')"
					   " AND retry_on OPERATOR(pg_catalog.=) $8"
					   " ORDER BY id LIMIT 1",
					   POLICY_COLUMNS, policy_types);
	if (SPI_execute_plan(find_plan, values, nulls, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not look up a policy of retries.command(text)");
	if (SPI_processed == 1)
		return DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0],
										   SPI_tuptable->tupdesc, 1, &isnull));

	plans_prepare_kept(&insert_plan,
					   "INSERT INTO retries.policy_data (fn, fn_signature,"
					   " max_attempts, min_delay, max_delay, multiplier,"
					   " jitter, retry_on, timeout, on_exhausted, delay_fn,"
					   " annotated_by, notify, is_current)"
					   " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11,"
					   " $12::pg_catalog.regrole, $13, false) RETURNING id",
					   POLICY_COLUMNS, policy_types);
	if (SPI_execute_plan(insert_plan, values, nulls, false, 0) != SPI_OK_INSERT_RETURNING)
		elog(ERROR, "could not store a policy of retries.command(text)");
	return DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0],
									   SPI_tuptable->tupdesc, 1, &isnull));
}

/*
 * limit_arg -- annotate()'s argument 'argno', a limit named 'name',
 * checked; 0 if not given (or if the database's extension is older than
 * 1.2, which lacks it)
 */
static int32
limit_arg(FunctionCallInfo fcinfo, int argno, const char *name)
{
	int32		limit;

	if (PG_NARGS() <= argno || PG_ARGISNULL(argno))
		return 0;
	limit = PG_GETARG_INT32(argno);
	if (limit < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid %s: %d is not a positive number of attempts", name, limit),
				 errhint("Leave it NULL for no limit.")));
	return limit;
}

/*
 * rate_arg -- annotate()'s rate, checked, in its canonical form
 * ('count/duration', the duration as policy_format_duration writes it);
 * NULL if not given
 */
static char *
rate_arg(FunctionCallInfo fcinfo)
{
	char	   *given;
	RateSpec	rate;
	PolicyError err;
	char		window[64];

	if (PG_NARGS() <= ANN_RATE || PG_ARGISNULL(ANN_RATE))
		return NULL;
	given = text_to_cstring(PG_GETARG_TEXT_PP(ANN_RATE));
	if (!rate_parse(given, &rate, &err))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid rate: %s", err.message),
				 err.hint[0] ? errhint("%s", err.hint) : 0));
	(void) policy_format_duration(rate.window, window, sizeof(window));
	return psprintf("%d/%s", rate.count, window);
}

/*
 * store_limits -- store the flow limits that annotate() was given (see
 * flow.c); the workers apply them to the attempts that start from then on
 */
static void
store_limits(FunctionCallInfo fcinfo, Oid fnoid)
{
	int32		max_running = limit_arg(fcinfo, ANN_MAX_RUNNING, "max_running");
	int32		per_key = limit_arg(fcinfo, ANN_MAX_RUNNING_PER_KEY, "max_running_per_key");
	char	   *rate = rate_arg(fcinfo);
	RetriesUserSwitch save;
	bool		was_paused;

	if (schema_retries_version() < SCHEMA_1_2)
		return;
	access_become_owner(&save);
	SPI_connect();
	if (max_running == 0 && per_key == 0 && rate == NULL)
		flow_clear_limit(fnoid);
	else
	{
		(void) flow_set_gate(fnoid, NULL, max_running, per_key, rate, &was_paused);
		xact_wake_workers(WAKE_FIRE);	/* a new limit may leave more room */
	}
	SPI_finish();
	access_restore_user(&save);
}

/*
 * store_interval -- annotate()'s interval argument 'argno', named 'name' and
 * stored by 'query' (which sets it as $2 on the policy of function key
 * $1), more than zero and at most 3650 days, into the function's current
 * policy, just stored; *plan keeps the query's plan
 */
static void
store_interval(FunctionCallInfo fcinfo, Oid fnoid, int argno, const char *name,
			   SPIPlanPtr *plan, const char *query)
{
	Oid			argtypes[2] = {OIDOID, INTERVALOID};
	Datum		values[2];
	RetriesUserSwitch save;

	if (PG_NARGS() <= argno || PG_ARGISNULL(argno))
		return;
	(void) args_interval_arg(fcinfo, argno, name, true);
	access_become_owner(&save);
	SPI_connect();
	values[0] = ObjectIdGetDatum(names_function_key(fnoid, true));
	values[1] = PG_GETARG_DATUM(argno);
	plans_prepare_kept(plan, query, 2, argtypes);
	if (SPI_execute_plan(*plan, values, NULL, false, 0) != SPI_OK_UPDATE)
		elog(ERROR, "could not store the %s of function %u", name, fnoid);
	SPI_finish();
	access_restore_user(&save);
}

/*
 * store_key_defaults -- annotate()'s key_window (1.6) and debounce_max (1.7),
 * its calls' defaults
 */
static void
store_key_defaults(FunctionCallInfo fcinfo, Oid fnoid)
{
	static SPIPlanPtr window_plan = NULL;
	static SPIPlanPtr debounce_plan = NULL;

	store_interval(fcinfo, fnoid, ANN_KEY_WINDOW, "key_window", &window_plan,
				   "UPDATE retries.policy_data SET key_window = $2"
				   " WHERE fn OPERATOR(pg_catalog.=) $1 AND is_current");
	store_interval(fcinfo, fnoid, ANN_DEBOUNCE_MAX, "debounce_max", &debounce_plan,
				   "UPDATE retries.policy_data SET debounce_max = $2"
				   " WHERE fn OPERATOR(pg_catalog.=) $1 AND is_current");
}

/*
 * resolved_policy_args -- set the policy's arguments of fcinfo to the
 * policy resolved from them: its min_delay as the policy text, and its
 * count and max_delay as max_attempts and max_delay (NULL: unlimited, none)
 */
static void
resolved_policy_args(FunctionCallInfo fcinfo, const Policy *policy)
{
	char		buf[POLICY_FORMAT_LEN];

	policy_format(0, policy->min_delay, -1, buf, sizeof(buf));
	fcinfo->args[ANN_POLICY].value = PointerGetDatum(cstring_to_text(buf));
	fcinfo->args[ANN_POLICY].isnull = false;
	fcinfo->args[ANN_MAX_ATTEMPTS].value = Int32GetDatum(policy->max_attempts);
	fcinfo->args[ANN_MAX_ATTEMPTS].isnull = policy->max_attempts == 0;
	fcinfo->args[ANN_MIN_DELAY].value = PointerGetDatum(args_usecs_to_interval(policy->min_delay));
	fcinfo->args[ANN_MIN_DELAY].isnull = false;
	fcinfo->args[ANN_MAX_DELAY].value =
		policy->max_delay >= 0 ? PointerGetDatum(args_usecs_to_interval(policy->max_delay)) : (Datum) 0;
	fcinfo->args[ANN_MAX_DELAY].isnull = policy->max_delay < 0;
}

/*
 * retries_annotate -- SQL function retries.annotate()
 *
 * Checks the function (exists, caller owns it, a worker can call it), builds
 * the policy from the string and the named arguments, and stores it as a new
 * current policy.  A lock on the function serializes concurrent annotations
 * of it and keeps it from being dropped meanwhile.
 */
Datum
retries_annotate(PG_FUNCTION_ARGS)
{
	Oid			fnoid;
	HeapTuple	tup;
	Policy		policy;

	args_check_not_null(fcinfo, ANN_FN, "fn");
	fnoid = PG_GETARG_OID(ANN_FN);
	schema_refuse_command(fnoid, "fn");

	tup = lookup_function(fnoid, "fn");
	ReleaseSysCache(tup);
	check_owner(fnoid);
	LockDatabaseObject(ProcedureRelationId, fnoid, 0, ShareUpdateExclusiveLock);

	/* look again: it may have been dropped while we waited for the lock */
	tup = lookup_function(fnoid, "fn");
	check_plain_function(tup, fnoid, "function");
	ReleaseSysCache(tup);

	build_policy(fcinfo, &policy);
	store_policy(fnoid, &policy);
	store_limits(fcinfo, fnoid);
	store_key_defaults(fcinfo, fnoid);

	/*
	 * on a Citus coordinator, every node gets the same policy: the one
	 * resolved here, not the arguments, which may leave parts to
	 * retries.default_policy, a setting of the caller's session (t/citus/008
	 * 7)
	 */
	if (citus_speaks_for_cluster())
	{
		LOCAL_FCINFO(forward, FUNC_MAX_ARGS);

		memcpy(forward, fcinfo, SizeForFunctionCallInfo(fcinfo->nargs));
		resolved_policy_args(forward, &policy);
		citus_forward_call(forward, NULL);
	}

	PG_RETURN_VOID();
}

/*
 * retries_unannotate -- SQL function retries.unannotate()
 *
 * The function's calls already scheduled keep their policy and still run;
 * new ones cannot be scheduled.
 */
Datum
retries_unannotate(PG_FUNCTION_ARGS)
{
	Oid			fnoid;
	HeapTuple	tup;
	RetriesUserSwitch save;
	uint64		cleared;

	args_check_not_null(fcinfo, 0, "fn");
	fnoid = PG_GETARG_OID(0);
	schema_refuse_command(fnoid, "fn");
	tup = lookup_function(fnoid, "fn");
	ReleaseSysCache(tup);
	check_owner(fnoid);
	LockDatabaseObject(ProcedureRelationId, fnoid, 0, ShareUpdateExclusiveLock);

	access_become_owner(&save);
	SPI_connect();
	cleared = clear_current_policy(fnoid);
	SPI_finish();
	access_restore_user(&save);

	if (cleared == 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("function %s is not annotated", format_procedure(fnoid))));

	/*
	 * on a Citus coordinator, on every node where it is annotated (an
	 * operator named by its schema: the caller's search_path on a node could
	 * hold another '=' for regprocedure, the twenty-eighth hostile review,
	 * t/citus/008 8)
	 */
	citus_forward_call(fcinfo,
					   psprintf(" FROM retries.policies p"
								" WHERE p.fn::pg_catalog.oid OPERATOR(pg_catalog.=)"
								" %s::pg_catalog.regprocedure::pg_catalog.oid",
								quote_literal_cstr(format_procedure_qualified(fnoid))));

	PG_RETURN_VOID();
}

/*
 * retries_format_policy -- SQL function retries.format_policy()
 *
 * The '[count] min [max]' text of a stored policy, for retries.policies.
 */
Datum
retries_format_policy(PG_FUNCTION_ARGS)
{
	int32		max_attempts = PG_ARGISNULL(0) ? 0 : PG_GETARG_INT32(0);
	int64		min_delay;
	int64		max_delay = -1;
	char		buf[POLICY_FORMAT_LEN];

	if (PG_ARGISNULL(1) ||
		!args_interval_to_usecs(PG_GETARG_INTERVAL_P(1), &min_delay) ||
		(!PG_ARGISNULL(2) &&
		 !args_interval_to_usecs(PG_GETARG_INTERVAL_P(2), &max_delay)))
		PG_RETURN_NULL();

	policy_format(max_attempts, min_delay, max_delay, buf, sizeof(buf));
	PG_RETURN_TEXT_P(cstring_to_text(buf));
}
