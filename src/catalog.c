/*-------------------------------------------------------------------------
 *
 * catalog.c
 *	  The extension's tables, roles and visibility rules.
 *
 * Ordinary roles have no privileges on retries.*_data.  The SQL functions
 * check what the calling role may do, then read and write the tables as the
 * extension's owner (the owner of schema retries), the way PostgreSQL's own
 * referential-integrity triggers act as a table's owner.  Every query they
 * run names its objects and operators with their schema, so the caller's
 * search_path cannot redirect them.
 *
 * Restores.  A restore that is not one transaction (pg_restore without
 * --single-transaction, psql -f of a plain dump) commits the restored
 * CREATE EXTENSION before it loads the tables, with the id sequences back
 * at 1.  A policy, call or schedule that another session made meanwhile
 * would take an id that the dump's rows need: that table's data would
 * fail to load, and the restored rows that refer to those ids (a call's
 * policy_id) would name the other session's rows, so that a restored call
 * of one role could run another role's function.  So a CREATE EXTENSION
 * made by a restore (hooks.c tells it by the settings pg_dump's output
 * starts with: a superuser's CREATE EXTENSION [IF NOT EXISTS] under
 * check_function_bodies = off) holds the extension, noted in shared
 * memory, until its session ends (or the transaction of that CREATE
 * EXTENSION rolls back, undoing it); meanwhile the extension's
 * functions refuse every session (55000), the restoring one too (it runs
 * other roles' code: CHECK constraints, triggers), and the workers run
 * nothing in the database.  A restore in several sessions (pg_restore
 * --section, one run per section) outlives that hold; so the same CREATE
 * EXTENSION also moves the id sequences far above every id in use, to a
 * point drawn at random: an id taken in between is none of the dump's,
 * whose own setval() then puts each sequence back (scatter_ids).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "common/int.h"
#include "catalog/pg_authid.h"
#include "catalog/pg_extension.h"
#include "catalog/pg_namespace.h"
#include "catalog/pg_type.h"
#include "commands/dbcommands.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/regproc.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"

#include "compat.h"
#include "policy.h"
#include "retries.h"
#include "shmem.h"

PG_FUNCTION_INFO_V1(retries_visible_role);
PG_FUNCTION_INFO_V1(retries_grant_as_user);

/*
 * retries_schema_oid -- OID of schema retries, or an error if the extension
 * is not installed in this database
 */
Oid
retries_schema_oid(void)
{
	Oid			nspoid = get_namespace_oid("retries", true);

	if (!OidIsValid(nspoid))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("extension \"retries\" is not installed in this database"),
				 errhint("Run CREATE EXTENSION retries.")));
	return nspoid;
}

/* This session holds the extension for a restore */
static bool hold_noted = false;

/* ... and took the hold in the current transaction, in this subtransaction */
static bool hold_new_in_xact = false;
static SubTransactionId hold_subxact = InvalidSubTransactionId;

/*
 * drop_hold -- the hold this session took is undone with the CREATE
 * EXTENSION that took it
 */
static void
drop_hold(void)
{
	retries_forget_restores();
	hold_noted = false;
	hold_new_in_xact = false;
	hold_subxact = InvalidSubTransactionId;
}

/*
 * retries_restore_subxact_end -- a subtransaction ends: a hold it took goes
 * if it rolled back (ROLLBACK TO a savepoint), else passes to its parent
 */
void
retries_restore_subxact_end(bool committed, SubTransactionId mySubid,
							SubTransactionId parentSubid)
{
	if (!hold_new_in_xact || hold_subxact != mySubid)
		return;
	if (committed)
	{
		hold_subxact = parentSubid;
		return;
	}
	drop_hold();
}

/*
 * retries_restore_before_prepare -- refuse PREPARE TRANSACTION of a
 * transaction that took the hold: the hold is this session's, and the
 * prepared transaction would outlive it, or be rolled back after it
 */
void
retries_restore_before_prepare(void)
{
	if (hold_new_in_xact)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot prepare a transaction that restores extension \"retries\""),
				 errhint("Restore the extension in a transaction that commits.")));
}

/*
 * retries_restore_xact_end -- the current transaction ends: a hold that it
 * took goes if it aborted (the CREATE EXTENSION that took it is undone)
 */
void
retries_restore_xact_end(bool committed)
{
	if (hold_new_in_xact && !committed)
		drop_hold();
	hold_new_in_xact = false;
	hold_subxact = InvalidSubTransactionId;
}

/*
 * forget_restores -- before_shmem_exit callback: this session ends, and
 * with it any restore it made
 */
static void
forget_restores(int code, Datum arg)
{
	retries_forget_restores();
}

/*
 * scatter_ids -- move each id sequence of the extension's tables to a point
 * drawn at random far above the ids in use (see "Restores" at the top)
 *
 * A restore sets each sequence back to its value in the dump when it loads
 * the data.  Until then, an id taken by another session is one that no
 * dumped row has: the dump's rows load, and none of them can come to name
 * that session's rows.  The point is drawn, not fixed, so that the ids
 * taken during one restore are not those taken during the restore of its
 * dump.  A sequence already past it is left alone; a rollback of the
 * CREATE EXTENSION puts them back (ALTER SEQUENCE is transactional).
 */
static void
scatter_ids(void)
{
	Oid			argtypes[1] = {OIDOID};
	Datum		values[1];
	Oid			extoid = get_extension_oid("retries", true);
	SPITupleTable *rows;
	uint64		n;

	if (!OidIsValid(extoid))
		return;
	values[0] = ObjectIdGetDatum(extoid);
	SPI_connect();
	/* the identity sequences of the extension's tables */
	if (SPI_execute_with_args("SELECT n.nspname, c.relname, q.seqmax,"
							  " pg_catalog.pg_sequence_last_value(q.seqrelid::pg_catalog.regclass)"
							  " FROM pg_catalog.pg_depend e"
							  " JOIN pg_catalog.pg_depend i"
							  "  ON i.refobjid OPERATOR(pg_catalog.=) e.objid"
							  "  AND i.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass"
							  "  AND i.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass"
							  "  AND i.deptype OPERATOR(pg_catalog.=) 'i'"
							  " JOIN pg_catalog.pg_sequence q ON q.seqrelid OPERATOR(pg_catalog.=) i.objid"
							  " JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) q.seqrelid"
							  " JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace"
							  " WHERE e.refobjid OPERATOR(pg_catalog.=) $1"
							  " AND e.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_extension'::pg_catalog.regclass"
							  " AND e.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass"
							  " AND e.deptype OPERATOR(pg_catalog.=) 'e'",
							  1, argtypes, values, NULL, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "retries: could not read the extension's sequences");
	rows = SPI_tuptable;
	n = SPI_processed;
	for (uint64 row = 0; row < n; row++)
	{
		HeapTuple	tup = rows->vals[row];
		TupleDesc	desc = rows->tupdesc;
		bool		isnull;
		bool		unused;
		int64		max = DatumGetInt64(SPI_getbinval(tup, desc, 3, &isnull));
		Datum		last = SPI_getbinval(tup, desc, 4, &unused);
		int64		low = Min(max / 4, INT64CONST(1) << 44);
		uint64		draw;
		int64		point;

		if (!pg_strong_random(&draw, sizeof(draw)))
			elog(ERROR, "retries: could not draw a random point for a sequence");
		point = low + (int64) (draw % (uint64) low);
		if (!unused && DatumGetInt64(last) >= point)
			continue;
		/* ALTER SEQUENCE, not setval(): a rollback undoes it */
		if (SPI_execute(psprintf("ALTER SEQUENCE %s RESTART WITH " INT64_FORMAT,
								 quote_qualified_identifier(SPI_getvalue(tup, desc, 1),
															SPI_getvalue(tup, desc, 2)),
								 point),
						false, 0) != SPI_OK_UTILITY)
			elog(ERROR, "retries: could not move a sequence of the extension");
	}
	SPI_finish();
}

/*
 * retries_hold_for_restore -- this session is restoring the extension:
 * hold it until the session ends (see "Restores" at the top)
 *
 * Noted in shared memory, not as a lock: PostgreSQL releases a session
 * lock when a transaction of the session aborts, and a restore goes on
 * after errors.  Only a superuser's CREATE EXTENSION may call it
 * (hooks.c): a role that could hold the extension otherwise could shut
 * every other role out.  Without the library preloaded there is no
 * shared memory, and nothing runs the calls either.
 */
void
retries_hold_for_restore(void)
{
	static bool registered = false;

	scatter_ids();
	if (retries_shared == NULL)
		return;
	if (!registered)
		before_shmem_exit(forget_restores, (Datum) 0);
	registered = true;
	if (!hold_noted)
	{
		hold_new_in_xact = true;
		hold_subxact = GetCurrentSubTransactionId();
	}
	hold_noted = true;
	if (!retries_note_restore(MyDatabaseId))
		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("too many databases are being restored at once"),
				 errdetail("retries notes at most %d restores at a time.", RETRIES_MAX_DATABASES),
				 errhint("Restore the others first.")));
}

/*
 * retries_being_restored -- the PID of a session restoring this database's
 * extension, 0 if none; this one's too: a restore runs code of other roles
 * (a CHECK constraint, a trigger, a SECURITY DEFINER function they call)
 * in its own session
 */
pid_t
retries_being_restored(void)
{
	return retries_shared != NULL ? retries_restoring(MyDatabaseId) : 0;
}

/*
 * refuse_while_restored -- 55000 if a session restores the extension
 */
static void
refuse_while_restored(void)
{
	pid_t		pid = retries_being_restored();

	if (pid != 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("extension \"retries\" is being restored in this database"),
				 errdetail("The session of PID %d, restoring a dump, made it, and holds it until that session ends; its functions are refused meanwhile, in that session too.", (int) pid),
				 errhint("Try again once the restore is over.")));
}

/*
 * retries_become_owner -- act as the owner of the extension's objects,
 * unless another session is restoring them (55000)
 *
 * Saves the current identity in *save; retries_restore_user() puts it back.
 * On error, transaction abort restores it, so no PG_TRY is needed.
 */
void
retries_become_owner(RetriesUserSwitch *save)
{
	HeapTuple	tup;
	Oid			owner;
	Oid			nspoid = retries_schema_oid();

	/*
	 * every time: a transaction begun before a restore that drops and makes
	 * the extension again (pg_dump --clean) lives on through it
	 */
	refuse_while_restored();

	tup = SearchSysCache1(NAMESPACEOID, ObjectIdGetDatum(nspoid));
	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for namespace %u", nspoid);
	owner = ((Form_pg_namespace) GETSTRUCT(tup))->nspowner;
	ReleaseSysCache(tup);

	GetUserIdAndSecContext(&save->saved_userid, &save->saved_sec_context);
	SetUserIdAndSecContext(owner,
						   save->saved_sec_context | SECURITY_LOCAL_USERID_CHANGE);
}

/*
 * retries_restore_user -- undo retries_become_owner(), after checking
 * again that no session restores the extension: a statement that passed
 * the first check may have waited for a restore's DROP EXTENSION and then
 * written into the tables it made again (so what it wrote rolls back)
 */
void
retries_restore_user(const RetriesUserSwitch *save)
{
	refuse_while_restored();
	SetUserIdAndSecContext(save->saved_userid, save->saved_sec_context);
}

/*
 * retries_sees_all_calls -- may this role see and manage every role's calls?
 *
 * Superusers may, and so may roles with the privileges of retries_admin.
 */
bool
retries_sees_all_calls(Oid roleid)
{
	Oid			admin;

	if (superuser_arg(roleid))
		return true;
	admin = get_role_oid("retries_admin", true);
	return OidIsValid(admin) && has_privs_of_role(roleid, admin);
}

/*
 * lacked_call_privilege -- which privilege of a direct call of function
 * fnoid 'role' lacks, as a direct call checks them: USAGE on its schema
 * (OBJECT_SCHEMA: a direct call names the function, and a name is looked
 * up only in schemas the role may use; retries takes an OID, so it checks
 * that too), then EXECUTE on it (OBJECT_FUNCTION); false if neither
 */
static bool
lacked_call_privilege(Oid fnoid, Oid role, ObjectType *what, Oid *nspoid)
{
	*nspoid = get_func_namespace(fnoid);
	*what = OBJECT_SCHEMA;
	if (retries_namespace_aclcheck(*nspoid, role, ACL_USAGE) != ACLCHECK_OK)
		return true;
	*what = OBJECT_FUNCTION;
	return retries_proc_aclcheck(fnoid, role, ACL_EXECUTE) != ACLCHECK_OK;
}

/*
 * retries_call_privilege -- NULL if 'role' may call function fnoid as a
 * direct call would (lacked_call_privilege), else a message that says
 * what it lacks; the function must exist
 */
char *
retries_call_privilege(Oid fnoid, Oid role)
{
	ObjectType	what;
	Oid			nspoid;

	if (!lacked_call_privilege(fnoid, role, &what, &nspoid))
		return NULL;
	if (what == OBJECT_SCHEMA)
		return psprintf("role \"%s\" has no USAGE privilege on schema %s of function %s",
						GetUserNameFromId(role, false),
						quote_identifier(get_namespace_name(nspoid)),
						format_procedure_qualified(fnoid));
	return psprintf("role \"%s\" has no EXECUTE privilege on function %s",
					GetUserNameFromId(role, false), format_procedure_qualified(fnoid));
}

/*
 * retries_check_call_privilege -- raise 42501, with the error a direct
 * call would give, unless 'role' may call function fnoid
 */
void
retries_check_call_privilege(Oid fnoid, Oid role)
{
	ObjectType	what;
	Oid			nspoid;

	if (lacked_call_privilege(fnoid, role, &what, &nspoid))
		aclcheck_error(ACLCHECK_NO_PRIV, what,
					   what == OBJECT_SCHEMA ? get_namespace_name(nspoid) :
					   get_func_name(fnoid));
}

/*
 * retries_login_privilege -- what 'role' lacks to log in to this database
 * now, as a login would find it: LOGIN, a VALID UNTIL not yet past, CONNECT
 * on the database.  NULL if nothing, else a message and *hint.
 */
char *
retries_login_privilege(Oid role, const char **hint)
{
	HeapTuple	tup = SearchSysCache1(AUTHOID, ObjectIdGetDatum(role));
	Form_pg_authid form;
	char	   *name;
	bool		isnull;
	Datum		until;
	char	   *lacks = NULL;

	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for role %u", role);
	form = (Form_pg_authid) GETSTRUCT(tup);
	name = pstrdup(NameStr(form->rolname));
	until = SysCacheGetAttr(AUTHOID, tup, Anum_pg_authid_rolvaliduntil, &isnull);
	if (!form->rolcanlogin)
	{
		lacks = psprintf("role \"%s\" that scheduled the call is not permitted to log in", name);
		*hint = "Calls run as the role that scheduled them; give it LOGIN, or schedule as a role that has it.";
	}
	else if (!isnull && DatumGetTimestampTz(until) < GetCurrentTimestamp())
	{
		lacks = psprintf("role \"%s\" that scheduled the call has expired (VALID UNTIL %s)",
						 name, timestamptz_to_str(DatumGetTimestampTz(until)));
		*hint = "ALTER ROLE ... VALID UNTIL a later time, or schedule as another role.";
	}
	else if (retries_database_aclcheck(MyDatabaseId, role, ACL_CONNECT) != ACLCHECK_OK)
	{
		lacks = psprintf("role \"%s\" that scheduled the call may not connect to database \"%s\"",
						 name, get_database_name(MyDatabaseId));
		*hint = "GRANT CONNECT ON DATABASE to the role, or schedule as another role.";
	}
	ReleaseSysCache(tup);
	return lacks;
}

/*
 * retries_may_see_call -- may 'roleid' see a call that 'scheduled_by'
 * scheduled?  Only its own, unless it sees all.
 */
bool
retries_may_see_call(Oid roleid, Oid scheduled_by)
{
	return roleid == scheduled_by || retries_sees_all_calls(roleid);
}

/*
 * retries_call_not_found -- raise the error of a call that does not exist
 * or that the current role may not see: the same for both, so that the ids
 * of other roles' calls reveal nothing; 'argname' names the argument that
 * gave the id, if it is not the function's only one
 */
void
retries_call_not_found(int64 id, const char *argname)
{
	ereport(ERROR,
			(errcode(ERRCODE_UNDEFINED_OBJECT),
			 argname ?
			 errmsg("%s: call " INT64_FORMAT " does not exist", argname, id) :
			 errmsg("call " INT64_FORMAT " does not exist", id),
			 errdetail("A role sees only the calls it scheduled, unless it is a superuser or a member of retries_admin.")));
}

/*
 * retries_id_array -- n ids as an int8[] Datum
 */
Datum
retries_id_array(const int64 *ids, int n)
{
	Datum	   *d = palloc(sizeof(Datum) * Max(n, 1));

	for (int i = 0; i < n; i++)
		d[i] = Int64GetDatum(ids[i]);
	return PointerGetDatum(construct_array(d, n, INT8OID, sizeof(int64),
										   FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
}

/*
 * retries_reads_all_calls -- may this role read every role's calls, in the
 * views and through retries.wait() and retries.result(), and see the
 * workers of every database?
 *
 * Those that see and manage them all may, and so may roles with the
 * privileges of pg_read_all_stats, which PostgreSQL lets read every
 * session's activity; they may not manage other roles' calls.
 */
bool
retries_reads_all_calls(Oid roleid)
{
	return retries_sees_all_calls(roleid) ||
		has_privs_of_role(roleid, ROLE_PG_READ_ALL_STATS);
}

/*
 * retries_may_read_call -- may 'roleid' read a call that 'scheduled_by'
 * scheduled?
 */
bool
retries_may_read_call(Oid roleid, Oid scheduled_by)
{
	return roleid == scheduled_by || retries_reads_all_calls(roleid);
}

/*
 * VisibleRoleCache -- what retries_visible_role() remembers between rows
 */
typedef struct VisibleRoleCache
{
	Oid			userid;
	bool		sees_all;
} VisibleRoleCache;

/*
 * retries_visible_role -- SQL function retries.visible_role(regrole)
 *
 * The filter of every view.  The answer for "sees everything" is worked out
 * once per query (per call site) and kept in fn_extra, since a view over a
 * million calls calls this a million times.
 */
Datum
retries_visible_role(PG_FUNCTION_ARGS)
{
	Oid			scheduled_by = PG_GETARG_OID(0);
	Oid			userid = GetUserId();
	VisibleRoleCache *cache = (VisibleRoleCache *) fcinfo->flinfo->fn_extra;

	if (cache == NULL || cache->userid != userid)
	{
		if (cache == NULL)
		{
			cache = MemoryContextAlloc(fcinfo->flinfo->fn_mcxt,
									   sizeof(VisibleRoleCache));
			fcinfo->flinfo->fn_extra = cache;
		}
		cache->userid = userid;
		cache->sees_all = retries_reads_all_calls(userid);
	}
	PG_RETURN_BOOL(cache->sees_all || scheduled_by == userid);
}

/*
 * retries_check_not_null -- raise an error naming the argument if it is NULL
 *
 * The SQL functions are not STRICT, so that leaving out a required value is
 * an error rather than a silent NULL result.
 */
void
retries_check_not_null(FunctionCallInfo fcinfo, int argno, const char *argname)
{
	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not be null", argname)));
}

/*
 * retries_interval_to_usecs -- an interval as microseconds
 *
 * Months count as 30 days and days as 24 hours, as in PostgreSQL's own
 * interval comparisons.  Returns false if the result is negative or longer
 * than POLICY_MAX_DURATION, the longest delay a policy may use.
 */
bool
retries_interval_to_usecs(const Interval *span, int64 *usecs)
{
	int64		days = (int64) span->month * DAYS_PER_MONTH + span->day;
	int64		result;

	/* |days| < 2^37, so this product cannot overflow */
	if (days > POLICY_MAX_DURATION / USECS_PER_DAY + 1 ||
		days < -(POLICY_MAX_DURATION / USECS_PER_DAY + 1))
		return false;
	result = days * USECS_PER_DAY;
	if (pg_add_s64_overflow(result, span->time, &result))
		return false;
	if (result < 0 || result > POLICY_MAX_DURATION)
		return false;
	*usecs = result;
	return true;
}

/*
 * retries_interval_to_delay -- an interval as a delay, clamped to
 * 0 .. POLICY_MAX_DURATION
 *
 * For a delay that user code returns while a call runs (delay_fn's result),
 * where refusing it is not an option: a negative interval means no delay,
 * and one longer than the longest delay ('1000000 years') means the longest
 * delay, never a wrapped or zero one.  Months count as 30 days, as in
 * retries_interval_to_usecs.  When the sum overflows int64 its sign is the
 * sign of the days part, which is then far larger than any time part.
 */
int64
retries_interval_to_delay(const Interval *span)
{
	int64		days = (int64) span->month * DAYS_PER_MONTH + span->day;
	int64		usecs;

	if (pg_mul_s64_overflow(days, USECS_PER_DAY, &usecs) ||
		pg_add_s64_overflow(usecs, span->time, &usecs))
		return days < 0 ? 0 : POLICY_MAX_DURATION;
	return Max(0, Min(usecs, POLICY_MAX_DURATION));
}

/*
 * retries_usecs_to_interval -- microseconds as an interval of pure time
 *
 * Delays are stored as time only (no days or months), so they compare and
 * add exactly.
 */
Interval *
retries_usecs_to_interval(int64 usecs)
{
	Interval   *span = palloc0(sizeof(Interval));

	span->time = usecs;
	return span;
}

/*
 * retries_prepare_kept -- prepare a query once per backend and keep the plan
 *
 * The plan is re-planned by the plan cache if our tables are dropped and
 * created again, so a static pointer is safe.  Call it inside SPI_connect().
 */
SPIPlanPtr
retries_prepare_kept(SPIPlanPtr *plan, const char *query, int nargs,
					 Oid *argtypes)
{
	if (*plan == NULL)
	{
		SPIPlanPtr	p = SPI_prepare(query, nargs, argtypes);

		if (p == NULL || SPI_keepplan(p) != 0)
			elog(ERROR, "could not prepare query \"%s\": %s", query,
				 SPI_result_code_string(SPI_result));
		*plan = p;
	}
	return *plan;
}

/*
 * retries_prepare_unheld -- retries_prepare_kept() of a query about the
 * calls that the workers may claim, whose text says NOT_HELD where it
 * means "and no gate holds the call", and PRIORITY_ZERO where it means
 * "and its priority is 0": "AND NOT held" and "AND priority = 0" in a
 * database whose extension has flow control (1.2), which the partial
 * indexes of due calls need to be used, and nothing before (when no call
 * is held and all have priority 0).  plans[1] keeps the first, plans[0]
 * the second.
 */
SPIPlanPtr
retries_prepare_unheld(SPIPlanPtr *plans, const char *query, int nargs, Oid *argtypes)
{
	static const char *const markers[2][2] = {
		{NOT_HELD, " AND NOT held"},
		{PRIORITY_ZERO, " AND priority OPERATOR(pg_catalog.=) 0"},
	};
	bool		flow = retries_flow_available();
	StringInfoData buf;
	const char *p = query;

	if (plans[flow] != NULL)
		return plans[flow];
	initStringInfo(&buf);
	for (;;)
	{
		const char *hit = NULL;
		int			which = 0;

		/* the next marker of either kind */
		for (int m = 0; m < 2; m++)
		{
			const char *h = strstr(p, markers[m][0]);

			if (h != NULL && (hit == NULL || h < hit))
			{
				hit = h;
				which = m;
			}
		}
		if (hit == NULL)
			break;
		appendBinaryStringInfo(&buf, p, hit - p);
		if (flow)
			appendStringInfoString(&buf, markers[which][1]);
		p = hit + strlen(markers[which][0]);
	}
	appendStringInfoString(&buf, p);
	(void) retries_prepare_kept(&plans[flow], buf.data, nargs, argtypes);
	pfree(buf.data);
	return plans[flow];
}

/*
 * retries_columns_to_arrays -- turn 'ncolumns' columns of 'n' rows each
 * (cols[c][i], nulls[c][i], of types[c]) into one-dimensional arrays:
 * values[c], of type argtypes[c], to pass to a statement that unnests them
 * and writes all the rows at once
 */
void
retries_columns_to_arrays(int ncolumns, const Oid *types, Datum **cols,
						  bool **nulls, int n, Oid *argtypes, Datum *values)
{
	int			dims[1] = {n};
	int			lbs[1] = {1};

	for (int c = 0; c < ncolumns; c++)
	{
		int16		typlen;
		bool		typbyval;
		char		typalign;

		get_typlenbyvalalign(types[c], &typlen, &typbyval, &typalign);
		argtypes[c] = get_array_type(types[c]);
		values[c] = PointerGetDatum(construct_md_array(cols[c], nulls[c], 1, dims, lbs,
													   types[c], typlen, typbyval,
													   typalign));
	}
}

/*
 * retries_ms_until -- milliseconds from now until 'when', rounded up; 0 if
 * past
 */
long
retries_ms_until(TimestampTz when)
{
	long		secs;
	int			usecs;

	TimestampDifference(GetCurrentTimestamp(), when, &secs, &usecs);
	return secs * 1000 + (usecs + 999) / 1000;
}

/*
 * retries_clamp_run_at -- a call's first due time: run_at, but no earlier
 * than now() (the transaction's start)
 *
 * Due calls run earliest first: a run_at far in the past ('-infinity')
 * would put a call ahead of every other role's calls that fell due before
 * it was scheduled.
 */
Datum
retries_clamp_run_at(Datum run_at)
{
	TimestampTz now = GetCurrentTransactionStartTimestamp();

	return TimestampTzGetDatum(Max(DatumGetTimestampTz(run_at), now));
}

/*
 * retries_grant_as_user -- run a GRANT or REVOKE from an update script as
 * if a user had typed it
 *
 * A GRANT in an extension's script is recorded as one of the extension's
 * initial privileges (pg_init_privs), which pg_dump leaves out.  The 1.2
 * script gives the functions it makes again the privileges that the user
 * gave the old ones: those must stay the user's, or a dump and restore
 * would bring back the defaults (a REVOKE EXECUTE ... FROM PUBLIC lost).
 * Only callable from the script, which drops its SQL function at its end.
 */
Datum
retries_grant_as_user(PG_FUNCTION_ARGS)
{
	char	   *stmt = text_to_cstring(PG_GETARG_TEXT_PP(0));

	if (!creating_extension)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("retries_grant_as_user can only run in the extension's scripts")));
	if (pg_strncasecmp(stmt, "GRANT ", 6) != 0 && pg_strncasecmp(stmt, "REVOKE ", 7) != 0)
		elog(ERROR, "retries_grant_as_user runs GRANT and REVOKE only");

	creating_extension = false;
	PG_TRY();
	{
		SPI_connect();
		if (SPI_execute(stmt, false, 0) != SPI_OK_UTILITY)
			elog(ERROR, "could not run \"%s\"", stmt);
		SPI_finish();
	}
	PG_FINALLY();
	{
		creating_extension = true;
	}
	PG_END_TRY();
	PG_RETURN_VOID();
}
