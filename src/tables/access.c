/*-------------------------------------------------------------------------
 *
 * access.c
 *	  Who may do what with the extension's tables: acting as their owner,
 *	  privileges, and which calls a role sees.
 *
 * Ordinary roles have no privileges on retries.*_data.  The SQL functions
 * check what the calling role may do, then read and write the tables as the
 * extension's owner (the owner of schema retries), the way PostgreSQL's own
 * referential-integrity triggers act as a table's owner.  Every query they
 * run names its objects and operators with their schema, so the caller's
 * search_path cannot redirect them.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "common/int.h"
#include "catalog/pg_authid.h"
#include "catalog/pg_database.h"
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

#include "base/base.h"
#include "base/compat.h"
#include "tables/tables.h"

PG_FUNCTION_INFO_V1(retries_visible_role);
PG_FUNCTION_INFO_V1(retries_visible_roles);
PG_FUNCTION_INFO_V1(retries_grant_as_user);

/*
 * access_become_owner -- act as the owner of the extension's objects,
 * unless another session is restoring them (55000)
 *
 * Saves the current identity in *save; access_restore_user() puts it back.
 * On error, transaction abort restores it, so no PG_TRY is needed.
 */
void
access_become_owner(RetriesUserSwitch *save)
{
	/*
	 * every time: a transaction begun before a restore that drops and makes
	 * the extension again (pg_dump --clean) lives on through it
	 */
	restore_refuse();
	schema_switch_to_owner(save);
}

/*
 * access_restore_user -- undo access_become_owner(), after checking
 * again that no session restores the extension: a statement that passed
 * the first check may have waited for a restore's DROP EXTENSION and then
 * written into the tables it made again (so what it wrote rolls back)
 */
void
access_restore_user(const RetriesUserSwitch *save)
{
	restore_refuse();
	schema_switch_back(save);
}

/*
 * access_sees_all_calls -- may this role see and manage every role's calls?
 *
 * Superusers may, and so may roles with the privileges of retries_admin.
 */
bool
access_sees_all_calls(Oid roleid)
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
 * access_call_privilege -- NULL if 'role' may call function fnoid as a
 * direct call would (lacked_call_privilege), else a message that says
 * what it lacks; the function must exist
 */
char *
access_call_privilege(Oid fnoid, Oid role)
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
 * access_check_call_privilege -- raise 42501, with the error a direct
 * call would give, unless 'role' may call function fnoid
 */
void
access_check_call_privilege(Oid fnoid, Oid role)
{
	ObjectType	what;
	Oid			nspoid;

	if (lacked_call_privilege(fnoid, role, &what, &nspoid))
		aclcheck_error(ACLCHECK_NO_PRIV, what,
					   what == OBJECT_SCHEMA ? get_namespace_name(nspoid) :
					   get_func_name(fnoid));
}

/*
 * access_hook_owner -- NULL if function 'hook' may be a hook (on_exhausted,
 * delay_fn, named by 'what') of a function owned by 'fn_owner', else a
 * message that says why not
 *
 * A hook runs as the owner of the function it is set on (doc/architecture.md,
 * "Trust"), so its code must be that owner's, or a superuser's: a hook of
 * another role would run that role's code with the owner's rights, as
 * would one left behind when the function changed hands.
 */
char *
access_hook_owner(Oid hook, Oid fn_owner, const char *what)
{
	HeapTuple	tup = SearchSysCache1(PROCOID, ObjectIdGetDatum(hook));
	Oid			owner;

	if (!HeapTupleIsValid(tup))
		return psprintf("function %u no longer exists", hook);
	owner = ((Form_pg_proc) GETSTRUCT(tup))->proowner;
	ReleaseSysCache(tup);
	if (owner == fn_owner || superuser_arg(owner))
		return NULL;
	return psprintf("%s %s is owned by role \"%s\", which is neither the owner of the function, \"%s\", nor a superuser",
					what, format_procedure_qualified(hook),
					GetUserNameFromId(owner, false), GetUserNameFromId(fn_owner, false));
}

/*
 * access_connection_shut -- does a CONNECTION LIMIT of 0, of 'role' or of
 * this database, keep a session of 'role' out, as it keeps its login out
 * (superusers aside, as PostgreSQL has it)?  If so, the message of the
 * refusal, as PostgreSQL words it; else NULL.  A runner, a session of the
 * role, obeys it (runner.c); a limit above 0 is not counted: background
 * workers are not (PostgreSQL's own rule).
 */
char *
access_connection_shut(Oid role)
{
	HeapTuple	tup;
	char	   *shut = NULL;

	if (superuser_arg(role))
		return NULL;
	tup = SearchSysCache1(AUTHOID, ObjectIdGetDatum(role));
	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for role %u", role);
	if (((Form_pg_authid) GETSTRUCT(tup))->rolconnlimit == 0)
		shut = psprintf("too many connections for role \"%s\"",
						NameStr(((Form_pg_authid) GETSTRUCT(tup))->rolname));
	ReleaseSysCache(tup);
	if (shut != NULL)
		return shut;
	tup = SearchSysCache1(DATABASEOID, ObjectIdGetDatum(MyDatabaseId));
	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for database %u", MyDatabaseId);
	if (((Form_pg_database) GETSTRUCT(tup))->datconnlimit == 0)
		shut = psprintf("too many connections for database \"%s\"",
						NameStr(((Form_pg_database) GETSTRUCT(tup))->datname));
	ReleaseSysCache(tup);
	return shut;
}

/*
 * access_login_privilege -- what 'role' lacks to log in to this database
 * now, as a login would find it: LOGIN, a VALID UNTIL not yet past, CONNECT
 * on the database.  NULL if nothing, else a message and *hint.  (The
 * connection limits are a runner's, as a session of the role: see
 * access_connection_shut.)
 */
char *
access_login_privilege(Oid role, const char **hint)
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
	else if (!isnull && DatumGetTimestampTz(until) < clock_system_now())
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
 * access_may_see_call -- may 'roleid' see a call that 'scheduled_by'
 * scheduled?  Only its own, unless it sees all.
 */
bool
access_may_see_call(Oid roleid, Oid scheduled_by)
{
	return roleid == scheduled_by || access_sees_all_calls(roleid);
}

/*
 * access_reads_all_calls -- may this role read every role's calls, in the
 * views and through retries.wait() and retries.result(), and see the
 * workers of every database?
 *
 * Those that see and manage them all may, and so may roles with the
 * privileges of pg_read_all_stats, which PostgreSQL lets read every
 * session's activity; they may not manage other roles' calls.
 */
bool
access_reads_all_calls(Oid roleid)
{
	return access_sees_all_calls(roleid) ||
		has_privs_of_role(roleid, ROLE_PG_READ_ALL_STATS);
}

/*
 * access_may_read_call -- may 'roleid' read a call that 'scheduled_by'
 * scheduled?
 */
bool
access_may_read_call(Oid roleid, Oid scheduled_by)
{
	return roleid == scheduled_by || access_reads_all_calls(roleid);
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
		cache->sees_all = access_reads_all_calls(userid);
	}
	PG_RETURN_BOOL(cache->sees_all || scheduled_by == userid);
}

/*
 * retries_visible_roles -- SQL function retries.visible_roles() (1.7): the
 * roles that retries.visible_role() lets the current role see, as an array
 * of OIDs: its own, or every role for one that sees everything.  A view
 * that compares a role column with it (= ANY) finds the rows by index,
 * where visible_role() filters every row (retries.events: alice's look at
 * her event read mallory's 20,000).
 */
Datum
retries_visible_roles(PG_FUNCTION_ARGS)
{
	Oid			userid = GetUserId();
	Datum	   *oids;
	int			n = 0;
	int			size = 64;
	Relation	rel;
	SysScanDesc scan;
	HeapTuple	tup;

	if (!access_reads_all_calls(userid))
	{
		Datum		own = ObjectIdGetDatum(userid);

		PG_RETURN_ARRAYTYPE_P(construct_array(&own, 1, OIDOID, sizeof(Oid), true,
											  TYPALIGN_INT));
	}
	oids = palloc(sizeof(Datum) * size);
	rel = table_open(AuthIdRelationId, AccessShareLock);
	scan = systable_beginscan(rel, InvalidOid, false, NULL, 0, NULL);
	while (HeapTupleIsValid(tup = systable_getnext(scan)))
	{
		if (n == size)
		{
			size *= 2;
			oids = repalloc(oids, sizeof(Datum) * size);
		}
		oids[n++] = ObjectIdGetDatum(((Form_pg_authid) GETSTRUCT(tup))->oid);
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	PG_RETURN_ARRAYTYPE_P(construct_array(oids, n, OIDOID, sizeof(Oid), true,
										  TYPALIGN_INT));
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
