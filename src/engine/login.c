/*-------------------------------------------------------------------------
 *
 * login.c
 *	  The settings a login session of a role starts with, as the sandbox
 *	  applies them to each attempt of the role's (sandbox.c).
 *
 * ALTER ROLE ALL SET, ALTER DATABASE ... SET, ALTER ROLE ... SET and ALTER
 * ROLE ... IN DATABASE ... SET, read from pg_db_role_setting once per
 * transaction (a worker's batch), so that a change or a RESET of any of
 * them reaches the attempts of workers already running, and applied in
 * that order as session values, at PGC_SUSET, as PostgreSQL does at login:
 * who may store a setting was checked when it was stored.
 *
 * Under them, the server's settings, not the worker's own login's.  A
 * worker connects as the bootstrap superuser, so its connection took that
 * role's ALTER ROLE ... SET (and ... IN DATABASE ... SET) too, which no
 * other role's login has: session_replication_role = replica there would
 * turn off every role's triggers in its attempts, and
 * default_transaction_read_only = on would make them all read-only.  So
 * the worker notes the server's settings before it connects
 * (login_note_server_settings) and, once connected, sets back every
 * setting that its role's settings, or every role's (ALTER ROLE ALL SET,
 * applied at each attempt as read then), chose (login_forget_own_settings),
 * the database's value over it where the database has one.  A setting the
 * role's settings made up (a custom placeholder no loaded module defines)
 * cannot be removed: it is set to the empty string.  One that only a new
 * connection can change (PGC_BACKEND: ignore_system_indexes,
 * log_connections) keeps the worker's value, for the worker's own process.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/indexing.h"
#include "catalog/namespace.h"
#include "catalog/pg_authid.h"
#include "catalog/pg_database.h"
#include "catalog/pg_namespace.h"
#include "catalog/pg_db_role_setting.h"
#include "catalog/pg_type.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "nodes/pg_list.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"
#include "utils/varlena.h"
#include "utils/memutils.h"
#include "utils/rel.h"

#include "base/base.h"
#include "base/compat.h"
#include "engine/login.h"

/* The login settings of one role, as read for the current transaction */
typedef struct RoleSettings
{
	Oid			role;
	ArrayType  *everywhere;		/* ALTER ROLE ... SET, or NULL */
	ArrayType  *here;			/* ALTER ROLE ... IN DATABASE ... SET, or NULL */
} RoleSettings;

/*
 * Settings read from pg_db_role_setting, in TopTransactionContext: a login
 * session reads them once, when it starts; a worker once per batch, so
 * that a change shows in calls within a batch or so.
 */
static struct
{
	LocalTransactionId lxid;	/* the transaction they were read in */
	ArrayType  *global;			/* ALTER ROLE ALL SET, or NULL */
	ArrayType  *database;		/* ALTER DATABASE ... SET, or NULL */
	List	   *roles;			/* RoleSettings */
}			settings;

/* A setting's value, as the server gave it to the worker before it connected */
typedef struct ServerSetting
{
	char	   *name;
	char	   *value;
} ServerSetting;

static ServerSetting *server_settings;
static int	n_server_settings;

/*
 * fetch_settings -- the settings pg_db_role_setting holds for a database
 * and role (either may be InvalidOid, meaning all), copied into the
 * transaction's memory; NULL if none
 */
static ArrayType *
fetch_settings(Relation rel, Oid databaseid, Oid roleid)
{
	ScanKeyData keys[2];
	SysScanDesc scan;
	HeapTuple	tup;
	ArrayType  *result = NULL;

	ScanKeyInit(&keys[0], Anum_pg_db_role_setting_setdatabase,
				BTEqualStrategyNumber, F_OIDEQ, ObjectIdGetDatum(databaseid));
	ScanKeyInit(&keys[1], Anum_pg_db_role_setting_setrole,
				BTEqualStrategyNumber, F_OIDEQ, ObjectIdGetDatum(roleid));
	scan = systable_beginscan(rel, DbRoleSettingDatidRolidIndexId, true,
							  NULL, 2, keys);
	tup = systable_getnext(scan);
	if (HeapTupleIsValid(tup))
	{
		bool		isnull;
		Datum		d = heap_getattr(tup, Anum_pg_db_role_setting_setconfig,
									 RelationGetDescr(rel), &isnull);

		if (!isnull)
		{
			MemoryContext oldcxt = MemoryContextSwitchTo(TopTransactionContext);

			result = DatumGetArrayTypePCopy(d);
			MemoryContextSwitchTo(oldcxt);
		}
	}
	systable_endscan(scan);
	return result;
}

/*
 * role_settings -- the login settings of a role, as read once in this
 * transaction (and the database's, in settings.database)
 */
static RoleSettings *
role_settings(Oid role)
{
	ListCell   *lc;
	Relation	rel;
	RoleSettings *rs;
	MemoryContext oldcxt;

	if (settings.lxid != retries_local_xid())
	{
		/* the previous transaction's lists went with its memory */
		settings.lxid = retries_local_xid();
		settings.roles = NIL;
		rel = table_open(DbRoleSettingRelationId, AccessShareLock);
		settings.global = fetch_settings(rel, InvalidOid, InvalidOid);
		settings.database = fetch_settings(rel, MyDatabaseId, InvalidOid);
		table_close(rel, AccessShareLock);
	}
	foreach(lc, settings.roles)
	{
		rs = (RoleSettings *) lfirst(lc);
		if (rs->role == role)
			return rs;
	}

	rel = table_open(DbRoleSettingRelationId, AccessShareLock);
	oldcxt = MemoryContextSwitchTo(TopTransactionContext);
	rs = palloc(sizeof(RoleSettings));
	rs->role = role;
	rs->everywhere = fetch_settings(rel, InvalidOid, role);
	rs->here = fetch_settings(rel, MyDatabaseId, role);
	settings.roles = lappend(settings.roles, rs);
	MemoryContextSwitchTo(oldcxt);
	table_close(rel, AccessShareLock);
	return rs;
}

/*
 * named_in -- is a setting's name in a list of names?
 */
static bool
named_in(List *names, const char *name)
{
	ListCell   *lc;

	foreach(lc, names)
	{
		if (pg_strcasecmp((const char *) lfirst(lc), name) == 0)
			return true;
	}
	return false;
}

/*
 * apply_settings -- apply an array of name=value settings in the current
 * GUC nest level, as a login session applies them at start
 *
 * They are applied as session values (PGC_S_SESSION), so that rolling the
 * nest level back undoes them; so RESET in a call goes back to the
 * server's and database's value, not the role's.  At PGC_SUSET, as
 * PostgreSQL does at login: who may store a setting was checked when it
 * was stored.  Those that cannot apply in a running session (ones that
 * only take effect at connection start, and role and
 * session_authorization: a call runs as the role that scheduled it) are
 * skipped, as a login skips a setting it cannot apply, with a message
 * only at DEBUG1: a worker has no client to warn.  'source' and 'only'
 * are for login_forget_own_settings: another source, and only the
 * settings named there (NIL: all).
 */
static void
apply_settings(ArrayType *array, GucSource source, List *only)
{
	Datum	   *elems;
	bool	   *nulls;
	int			n;

	if (array == NULL)
		return;
	deconstruct_array(array, TEXTOID, -1, false, TYPALIGN_INT,
					  &elems, &nulls, &n);
	for (int i = 0; i < n; i++)
	{
		char	   *s;
		char	   *name;
		char	   *value;

		if (nulls[i])
			continue;
		s = TextDatumGetCString(elems[i]);
		ParseLongOption(s, &name, &value);
		if (value != NULL &&
			pg_strcasecmp(name, "role") != 0 &&
			pg_strcasecmp(name, "session_authorization") != 0 &&
			(only == NIL || named_in(only, name)))
			(void) set_config_option(name, value, PGC_SUSET, source,
									 GUC_ACTION_SET, true, DEBUG1, false);
		pfree(s);
		retries_free_guc_string(name);
		if (value)
			retries_free_guc_string(value);
	}
}

/*
 * login_apply_settings -- apply the settings a login session of 'role'
 * starts with, in the current GUC nest level: every role's (ALTER ROLE ALL
 * SET), the database's, the role's everywhere, the role's in this
 * database, from the least to the most specific, as at login
 */
void
login_apply_settings(Oid role)
{
	RoleSettings *rs = role_settings(role);

	apply_settings(settings.global, PGC_S_SESSION, NIL);
	apply_settings(settings.database, PGC_S_SESSION, NIL);
	apply_settings(rs->everywhere, PGC_S_SESSION, NIL);
	apply_settings(rs->here, PGC_S_SESSION, NIL);
}

/*
 * login_note_server_settings -- note every setting's value, before the
 * worker connects: the server's settings (postgresql.conf, the command
 * line, the defaults)
 */
void
login_note_server_settings(void)
{
	MemoryContext oldcxt = MemoryContextSwitchTo(TopMemoryContext);
	struct config_generic **vars = retries_guc_variables(&n_server_settings);

	server_settings = palloc(n_server_settings * sizeof(ServerSetting));
	for (int i = 0; i < n_server_settings; i++)
	{
		const char *value = GetConfigOption(vars[i]->name, true, false);

		server_settings[i].name = pstrdup(vars[i]->name);
		server_settings[i].value = value != NULL ? pstrdup(value) : NULL;
	}
	MemoryContextSwitchTo(oldcxt);
}

/*
 * server_value -- the server's value of a setting, as noted; "" for one
 * the server had not (a placeholder that the worker's login made up)
 */
static const char *
server_value(const char *name)
{
	for (int i = 0; i < n_server_settings; i++)
	{
		if (strcmp(server_settings[i].name, name) == 0)
			return server_settings[i].value != NULL ? server_settings[i].value : "";
	}
	return "";
}

/*
 * login_forget_own_settings -- set back what the worker's own role's login
 * settings chose, to the server's value, then the database's where it has
 * one; in a transaction, after login_note_server_settings()
 *
 * Set as the worker's defaults (PGC_S_DATABASE_USER, the source the role's
 * settings had or one below it), so that an attempt's RESET and the end
 * of its nest level come back to them.
 */
void
login_forget_own_settings(void)
{
	int			n;
	struct config_generic **vars = retries_guc_variables(&n);
	List	   *reset = NIL;
	ListCell   *lc;
	Relation	rel;
	ArrayType  *database;

	/*
	 * The role and session user that the database's owner named (ALTER
	 * DATABASE ... SET role, or session_authorization), applied as the worker
	 * connected: the worker's own again, for good.  Otherwise every statement
	 * of the worker's own ran as her, and failed: no call of any role in her
	 * database ran (the thirty-second hostile review).
	 */
	if (GetSessionUserId() != GetAuthenticatedUserId())
		SetConfigOption("session_authorization",
						GetUserNameFromId(GetAuthenticatedUserId(), false),
						PGC_SUSET, PGC_S_OVERRIDE);
	if (OidIsValid(GetCurrentRoleId()))
		SetConfigOption("role", "none", PGC_SUSET, PGC_S_OVERRIDE);

	for (int i = 0; i < n; i++)
	{
		if (vars[i]->source == PGC_S_GLOBAL ||
			vars[i]->source == PGC_S_USER ||
			vars[i]->source == PGC_S_DATABASE_USER)
			reset = lappend(reset, pstrdup(vars[i]->name));
	}
	if (reset == NIL)
		return;
	foreach(lc, reset)
	{
		const char *name = lfirst(lc);

		(void) set_config_option(name, server_value(name), PGC_SUSET,
								 PGC_S_DATABASE_USER, GUC_ACTION_SET, true,
								 DEBUG1, false);
	}
	rel = table_open(DbRoleSettingRelationId, AccessShareLock);
	database = fetch_settings(rel, MyDatabaseId, InvalidOid);
	table_close(rel, AccessShareLock);
	apply_settings(database, PGC_S_DATABASE_USER, reset);
	list_free_deep(reset);
}

/*
 * schema_trusted_by -- may code that runs as 'owner' find names in schema
 * 'nspname' (as its search_path names it): the schema is the owner's, or
 * a superuser's, or the database owner's (pg_database_owner's) when that
 * owner is 'owner' or a superuser; a schema that does not exist is not.
 *
 * Never trusted, whoever owns them: a temporary schema named by its own
 * name (pg_temp_6: owned by the bootstrap superuser, filled by whichever
 * session uses it, and searched for functions and operators where pg_temp
 * never is: the thirty-sixth hostile review, t/070 1), and a schema in
 * which every role may create (CREATE granted to PUBLIC, as public was
 * before PostgreSQL 15 and stays after pg_upgrade).  Who else may create
 * in the schema by a grant to a role is its owner's to answer for, as for
 * a SECURITY DEFINER function's path (doc/reference.md, delay_fn).
 */
static bool
schema_trusted_by(const char *nspname, Oid owner)
{
	HeapTuple	tup = SearchSysCache1(NAMESPACENAME, CStringGetDatum(nspname));
	Form_pg_namespace nsp;
	Oid			nspowner;
	bool		isnull;
	Datum		acl;
	bool		untrusted;

	if (!HeapTupleIsValid(tup))
		return false;
	nsp = (Form_pg_namespace) GETSTRUCT(tup);
	nspowner = nsp->nspowner;
	untrusted = isAnyTempNamespace(nsp->oid);
	acl = SysCacheGetAttr(NAMESPACENAME, tup, Anum_pg_namespace_nspacl, &isnull);
	if (!untrusted && !isnull)
		untrusted = aclmask(DatumGetAclP(acl), ACL_ID_PUBLIC, nspowner,
							ACL_CREATE, ACLMASK_ANY) != 0;
	ReleaseSysCache(tup);
	if (untrusted)
		return false;
	if (nspowner == ROLE_PG_DATABASE_OWNER)
	{
		tup = SearchSysCache1(DATABASEOID, ObjectIdGetDatum(MyDatabaseId));
		if (!HeapTupleIsValid(tup))
			return false;
		nspowner = ((Form_pg_database) GETSTRUCT(tup))->datdba;
		ReleaseSysCache(tup);
	}
	return nspowner == owner || superuser_arg(nspowner);
}

/*
 * login_trust_search_path -- keep, of the search_path in force (the login
 * settings of 'owner', just applied), only the schemas that code running
 * as 'owner' may trust, pg_temp last; for a hook (sandbox_enter), which
 * runs as the owner of the annotated function whenever any role that may
 * call the function makes a call of it fail
 *
 * A hook is a SECURITY DEFINER function in all but name.  Under its owner's
 * login search_path ("$user", public, or what the database's owner set),
 * a schema named after the owner that another role made, or public in a
 * copy of the database (the copier owns it: pg_database_owner), held the
 * caller's operator, which the hook's own operator lookup preferred (an
 * exact match beats pg_catalog's with a cast: CVE-2018-1058's shape): the
 * thirty-second hostile review made mallory a superuser through a
 * superuser's delay_fn.  The schemas of the owner, of superusers, and the
 * database owner's when that owner is the hook's or a superuser stay, so
 * that a hook that names its owner's tables unqualified works as before.
 * A hook's own SET search_path applies when it is called, over this.
 */
void
login_trust_search_path(Oid owner)
{
	char	   *rawpath = pstrdup(namespace_search_path);
	List	   *elems;
	ListCell   *lc;
	StringInfoData kept;

	initStringInfo(&kept);
	if (!SplitIdentifierString(rawpath, ',', &elems))
		elems = NIL;			/* checked when it was set: cannot happen */
	foreach(lc, elems)
	{
		char	   *name = (char *) lfirst(lc);

		if (strcmp(name, "$user") == 0)
		{
			char	   *rolname = GetUserNameFromId(owner, true);

			if (rolname == NULL || !schema_trusted_by(rolname, owner))
				continue;
			name = rolname;
		}
		else if (strcmp(name, "pg_temp") == 0)
			continue;			/* last, below */
		else if (strcmp(name, "pg_catalog") != 0 && !schema_trusted_by(name, owner))
			continue;
		appendStringInfo(&kept, "%s, ", quote_identifier(name));
	}
	appendStringInfoString(&kept, "pg_temp");
	(void) set_config_option("search_path", kept.data, PGC_USERSET,
							 PGC_S_SESSION, GUC_ACTION_SET, true, 0, false);
}
