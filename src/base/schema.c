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
 * What it finds (the schema, the version, the procedures that stand for
 * commands) is kept until a catalog change could change it: any relation's
 * invalidation (an index or table made or dropped: the objects that tell
 * the versions apart), or a schema's or a function's, by the invalidation
 * callbacks PostgreSQL runs at the command that made the change, in this
 * session as in others (at their next transaction).  So the probes cost a
 * lookup per catalog change, not per call.
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
#include "utils/inval.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"

#include "base/base.h"

/* What the probes found, while no catalog change has made it stale */
static struct
{
	bool		valid;
	Oid			nspoid;			/* schema retries */
	RetriesSchemaVersion version;
	Oid			command;		/* retries.command(text), or InvalidOid */
	Oid			command_in;		/* retries.command_in(text, name, name) */
}			found;

static bool callbacks_registered = false;

/* how many invalidations have come: one during a look makes it stale */
static uint64 invalidations = 0;

/* invalidation callbacks: whatever changed, look again */
static void
forget_relation(Datum arg, Oid relid)
{
	found.valid = false;
	invalidations++;
}

static void
forget_syscache(Datum arg, int cacheid, uint32 hashvalue)
{
	found.valid = false;
	invalidations++;
}

static RetriesSchemaVersion probe_version(Oid nspoid);
static Oid	command_oid(Oid nspoid);
static Oid	command_in_oid(Oid nspoid);

/*
 * look -- fill 'found' if it is not valid; false if schema retries does not
 * exist (then nothing is kept)
 */
static bool
look(void)
{
	Oid			nspoid;
	uint64		before = invalidations;

	if (found.valid)
		return true;
	if (!callbacks_registered)
	{
		CacheRegisterRelcacheCallback(forget_relation, (Datum) 0);
		CacheRegisterSyscacheCallback(NAMESPACEOID, forget_syscache, (Datum) 0);
		CacheRegisterSyscacheCallback(PROCOID, forget_syscache, (Datum) 0);
		callbacks_registered = true;
	}
	nspoid = get_namespace_oid("retries", true);
	if (!OidIsValid(nspoid))
		return false;
	found.nspoid = nspoid;
	found.version = probe_version(nspoid);
	found.command = command_oid(nspoid);
	found.command_in = command_in_oid(nspoid);
	/* kept only if nothing changed while it looked */
	found.valid = invalidations == before;
	return true;
}

/*
 * schema_retries_oid -- OID of schema retries, or an error if the extension
 * is not installed in this database
 */
Oid
schema_retries_oid(void)
{
	if (!look())
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("extension \"retries\" is not installed in this database"),
				 errhint("Run CREATE EXTENSION retries.")));
	return found.nspoid;
}

/*
 * schema_switch_to_owner -- act as the owner of the extension's objects,
 * with no check (access_become_owner() refuses while a session restores
 * them; a restore's own checks, restore.c and home.c, switch so);
 * schema_switch_back() undoes it
 *
 * The search_path is pinned meanwhile: pg_catalog first, then the
 * session's own, then pg_temp (named, so that it comes last).  The owner's
 * SQL runs in a role's session, whose search_path the role chose (and the
 * database's owner, by ALTER DATABASE SET), and a name that the SQL left
 * unqualified would otherwise resolve to the role's object, run as the
 * owner, a superuser: a type name did (INT8 '1': pg_temp is searched
 * first for types unless the path names it; a domain pg_temp.int8 whose
 * CHECK made its role a superuser, from any retries.call with a new key:
 * the thirty-first hostile review).  Every name in that SQL is qualified
 * all the same; this is the net.  The session's own schemas stay in the
 * path, after pg_catalog, so that the names in messages (format_procedure)
 * read as the role would write them.
 */
void
schema_switch_to_owner(RetriesUserSwitch *save)
{
	const char *path = namespace_search_path;

	GetUserIdAndSecContext(&save->saved_userid, &save->saved_sec_context);
	save->guc_nestlevel = NewGUCNestLevel();
	(void) set_config_option("search_path",
							 path == NULL || path[0] == '\0' ? "pg_catalog, pg_temp" :
							 psprintf("pg_catalog, %s, pg_temp", path),
							 PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
	SetUserIdAndSecContext(schema_retries_owner(),
						   save->saved_sec_context | SECURITY_LOCAL_USERID_CHANGE);
}

void
schema_switch_back(const RetriesUserSwitch *save)
{
	SetUserIdAndSecContext(save->saved_userid, save->saved_sec_context);
	AtEOXact_GUC(true, save->guc_nestlevel);
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
	(void) schema_retries_oid();
	return found.command;
}

/*
 * command_in_oid -- OID of retries.command_in(text, name, name) in schema
 * nspoid, InvalidOid if there is none (before 1.7)
 */
static Oid
command_in_oid(Oid nspoid)
{
	Oid			argtypes[3] = {TEXTOID, NAMEOID, NAMEOID};

	return GetSysCacheOid3(PROCNAMEARGSNSP, Anum_pg_proc_oid,
						   CStringGetDatum("command_in"),
						   PointerGetDatum(buildoidvector(argtypes, 3)),
						   ObjectIdGetDatum(nspoid));
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
	(void) schema_retries_oid();
	return found.command_in;
}

/*
 * schema_function_owner -- the owner of function fnoid (InvalidOid if it
 * is gone)
 */
Oid
schema_function_owner(Oid fnoid)
{
	HeapTuple	tup = SearchSysCache1(PROCOID, ObjectIdGetDatum(fnoid));
	Oid			owner;

	if (!HeapTupleIsValid(tup))
		return InvalidOid;
	owner = ((Form_pg_proc) GETSTRUCT(tup))->proowner;
	ReleaseSysCache(tup);
	return owner;
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
	(void) schema_retries_oid();
	return found.version;
}

/*
 * probe_version -- the version of the extension in schema nspoid, by its
 * objects (see schema_retries_version)
 */
static RetriesSchemaVersion
probe_version(Oid nspoid)
{
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
