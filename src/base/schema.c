/*-------------------------------------------------------------------------
 *
 * schema.c
 *	  Where the extension's objects are, and at which version.
 *
 * The library serves every database whose extension is at a version it
 * knows, the older ones until ALTER EXTENSION retries UPDATE: what a
 * newer version added (a table, an index) is used only where
 * schema_retries_version() says it exists.  That is the one probe of the
 * version; it looks at the objects themselves, not at pg_extension, so
 * that it holds inside the update script that adds them.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/namespace.h"
#include "catalog/pg_namespace.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"

#include "base/base.h"

/*
 * schema_retries_oid -- OID of schema retries, or an error if the extension
 * is not installed in this database
 */
Oid
schema_retries_oid(void)
{
	Oid			nspoid = get_namespace_oid("retries", true);

	if (!OidIsValid(nspoid))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("extension \"retries\" is not installed in this database"),
				 errhint("Run CREATE EXTENSION retries.")));
	return nspoid;
}

/*
 * schema_switch_to_owner -- act as the owner of the extension's objects,
 * with no check (access_become_owner() refuses while a session restores
 * them; a restore's own checks, restore.c and home.c, switch so);
 * schema_switch_back() undoes it
 */
void
schema_switch_to_owner(RetriesUserSwitch *save)
{
	GetUserIdAndSecContext(&save->saved_userid, &save->saved_sec_context);
	SetUserIdAndSecContext(schema_retries_owner(),
						   save->saved_sec_context | SECURITY_LOCAL_USERID_CHANGE);
}

void
schema_switch_back(const RetriesUserSwitch *save)
{
	SetUserIdAndSecContext(save->saved_userid, save->saved_sec_context);
}

/*
 * schema_retries_owner -- the owner of schema retries, who owns the
 * extension's objects
 */
Oid
schema_retries_owner(void)
{
	Oid			nspoid = schema_retries_oid();
	HeapTuple	tup;
	Oid			owner;

	tup = SearchSysCache1(NAMESPACEOID, ObjectIdGetDatum(nspoid));
	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for namespace %u", nspoid);
	owner = ((Form_pg_namespace) GETSTRUCT(tup))->nspowner;
	ReleaseSysCache(tup);
	return owner;
}

/*
 * command_oid -- OID of procedure retries.command(text) in schema nspoid,
 * InvalidOid if there is none (before 1.5)
 */
static Oid
command_oid(Oid nspoid)
{
	Oid			argtype = TEXTOID;

	return GetSysCacheOid3(PROCNAMEARGSNSP, Anum_pg_proc_oid,
						   CStringGetDatum("command"),
						   PointerGetDatum(buildoidvector(&argtype, 1)),
						   ObjectIdGetDatum(nspoid));
}

/*
 * schema_command_oid -- OID of retries.command(text), the procedure whose
 * calls are commands (its one argument is the command's text), or
 * InvalidOid before version 1.5
 */
Oid
schema_command_oid(void)
{
	return command_oid(schema_retries_oid());
}

/*
 * schema_command_in_oid -- OID of retries.command_in(text, name, name), the
 * procedure whose calls are commands run in another database (its
 * arguments are the text, the database's name and its owner's), or
 * InvalidOid before version 1.7
 */
Oid
schema_command_in_oid(void)
{
	Oid			argtypes[3] = {TEXTOID, NAMEOID, NAMEOID};

	return GetSysCacheOid3(PROCNAMEARGSNSP, Anum_pg_proc_oid,
						   CStringGetDatum("command_in"),
						   PointerGetDatum(buildoidvector(argtypes, 3)),
						   ObjectIdGetDatum(schema_retries_oid()));
}

/*
 * schema_is_command -- is fnoid one of the procedures that stand for
 * commands (retries.command, retries.command_in)?
 */
bool
schema_is_command(Oid fnoid)
{
	return OidIsValid(fnoid) &&
		(fnoid == schema_command_oid() || fnoid == schema_command_in_oid());
}

/*
 * schema_refuse_command -- raise 42809 if fnoid stands for commands:
 * commands are made by run_command() and schedule_command() only, each
 * with its own policy
 */
void
schema_refuse_command(Oid fnoid, const char *argname)
{
	if (schema_is_command(fnoid))
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("%s: %s cannot be annotated, called or scheduled as a procedure",
						argname, fnoid == schema_command_oid() ?
						"retries.command(text)" : "retries.command_in(text, name, name)"),
				 errhint("Run a command with retries.run_command(), or schedule it with retries.schedule_command().")));
}

/*
 * schema_retries_version -- the version of this database's extension, as
 * far as its objects tell: each version is known by an object it added
 */
RetriesSchemaVersion
schema_retries_version(void)
{
	Oid			nspoid = schema_retries_oid();

	if (OidIsValid(get_relname_relid("call_data_low_by_role", nspoid)))
		return SCHEMA_1_7;
	if (OidIsValid(get_relname_relid("event_data", nspoid)))
		return SCHEMA_1_6;
	if (OidIsValid(command_oid(nspoid)))
		return SCHEMA_1_5;
	if (OidIsValid(get_relname_relid("function_names", nspoid)))
		return SCHEMA_1_4;
	if (OidIsValid(get_relname_relid("call_data_held_by_role", nspoid)))
		return SCHEMA_1_3;
	if (OidIsValid(get_relname_relid("flow_data", nspoid)))
		return SCHEMA_1_2;
	return SCHEMA_1_1;
}
