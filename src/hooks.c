/*-------------------------------------------------------------------------
 *
 * hooks.c
 *	  What ordinary backends do for the workers, through PostgreSQL's hooks.
 *
 * - CREATE EXTENSION wakes the launcher at commit; DROP EXTENSION wakes the
 *   workers at commit, and they find the extension gone and exit (the
 *   effects at commit are xact.c's).
 * - The commands that need a database to themselves (DROP DATABASE, ALTER
 *   DATABASE RENAME or SET TABLESPACE, CREATE DATABASE from it as a
 *   template) fail while other sessions are connected, so the workers of
 *   that database are stopped first.  So are they before DROP EXTENSION,
 *   which would otherwise wait for the call each of them is running, for
 *   minutes maybe.  Check, then act: the workers are stopped only once the
 *   command's own checks would pass (the role may run it, here and now:
 *   ownership, CREATEDB, not in a transaction block where it cannot run),
 *   so that a command refused to its role leaves them and their calls
 *   alone.  The launcher keeps away from the database until the
 *   (sub)transaction that ran the command ends, committed or not; a command
 *   that failed or was rolled back, also to a savepoint, has the workers
 *   back at once, and the attempts it cut short count as interrupted, like
 *   any other.
 *
 * - The commands that lock a table strongly before they check their role
 *   may (CREATE RULE, CREATE TRIGGER, a foreign key that references it)
 *   are refused before they lock one of the extension's tables, so that a
 *   role cannot queue a lock that every worker would wait behind.
 *
 * - CREATE DATABASE leaves a note of the database it made, and of its
 *   template, for the new database's workers; DROP DATABASE removes it, and
 *   so does CREATE EXTENSION retries there (home.c: a copy settles the
 *   calls and schedules it brought).
 *
 * - A restore's CREATE EXTENSION holds the extension, or is refused if it
 *   has rows already, and a COPY FROM into its tables is refused then; a
 *   database owner's COPY FROM into them runs as their owner, its rows
 *   checked (restore.c).
 *
 * - Inside a worker, the sandbox of an attempt learns of the commands that
 *   leave something for the end of the transaction (sandbox.c).
 *
 * - A function named without its argument types where a regprocedure is
 *   read (retries.call('notify_user', ...)) fails in PostgreSQL's input
 *   function, before the extension's code runs, with "expected a left
 *   parenthesis": in a statement that names retries, the error gets a hint
 *   of the right form (emit_log, as the error is reported).
 *
 * Installed only when the library is preloaded (there are no workers
 * otherwise).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/catalog.h"
#include "catalog/namespace.h"
#include "catalog/objectaccess.h"
#include "catalog/objectaddress.h"
#include "catalog/pg_authid.h"
#include "catalog/pg_database.h"
#include "catalog/pg_extension.h"
#include "catalog/pg_tablespace.h"
#include "commands/dbcommands.h"
#include "commands/extension.h"
#include "commands/tablespace.h"
#include "miscadmin.h"
#include "commands/defrem.h"
#include "nodes/parsenodes.h"
#include "storage/lmgr.h"
#include "tcop/utility.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/syscache.h"

#include "api/api.h"
#include "base/base.h"
#include "base/compat.h"
#include "hooks.h"
#include "engine/runner.h"
#include "engine/sandbox.h"
#include "tables/tables.h"
#include "xact/xact.h"

static ProcessUtility_hook_type prev_ProcessUtility = NULL;
static object_access_hook_type prev_object_access_hook = NULL;
static emit_log_hook_type prev_emit_log_hook = NULL;

/* The database that the running CREATE DATABASE made (object_access) */
static Oid	made_database = InvalidOid;

PG_FUNCTION_INFO_V1(retries_start_workers);

/*
 * retries_start_workers -- SQL function retries.start_workers(), run by
 * the install script
 *
 * Warns if the library is not preloaded (calls would never run); otherwise
 * has the launcher start this database's workers once CREATE EXTENSION
 * commits.
 */
Datum
retries_start_workers(PG_FUNCTION_ARGS)
{
	if (!retries_preloaded)
		ereport(WARNING,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("retries is not loaded through shared_preload_libraries"),
				 errdetail("Calls can be scheduled, but none will run until the server is started with the library preloaded."),
				 errhint("Add 'retries' to shared_preload_libraries in postgresql.conf and restart the server.")));
	else
		xact_wake_launcher();
	PG_RETURN_VOID();
}

/*
 * object_access -- on DROP EXTENSION retries, wake the workers at commit so
 * that they notice and exit; note the database that CREATE DATABASE made
 */
static void
object_access(ObjectAccessType access, Oid classId, Oid objectId, int subId,
			  void *arg)
{
	if (prev_object_access_hook)
		prev_object_access_hook(access, classId, objectId, subId, arg);

	if (access == OAT_DROP && classId == ExtensionRelationId &&
		objectId == get_extension_oid("retries", true))
		xact_wake_workers(WAKE_FIRE);
	if (access == OAT_POST_CREATE && classId == DatabaseRelationId)
		made_database = objectId;
}

/*
 * names_this_extension -- does this utility command act on extension
 * retries itself (DROP, ALTER ... UPDATE, SET SCHEMA, ADD or DROP a member)?
 */
static bool
names_this_extension(Node *parsetree)
{
	ListCell   *lc;

	switch (nodeTag(parsetree))
	{
		case T_DropStmt:
			if (((DropStmt *) parsetree)->removeType != OBJECT_EXTENSION)
				return false;
			foreach(lc, ((DropStmt *) parsetree)->objects)
			{
				if (strcmp(strVal(lfirst(lc)), "retries") == 0)
					return true;
			}
			return false;
		case T_AlterObjectSchemaStmt:
			return ((AlterObjectSchemaStmt *) parsetree)->objectType == OBJECT_EXTENSION &&
				strcmp(strVal(((AlterObjectSchemaStmt *) parsetree)->object), "retries") == 0;
		case T_AlterExtensionStmt:
			return strcmp(((AlterExtensionStmt *) parsetree)->extname, "retries") == 0;
		case T_AlterExtensionContentsStmt:
			return strcmp(((AlterExtensionContentsStmt *) parsetree)->extname, "retries") == 0;
		case T_AlterObjectDependsStmt:
			/* [NO] DEPENDS ON EXTENSION retries: locks it, checks the object */
			return ((AlterObjectDependsStmt *) parsetree)->extname != NULL &&
				strcmp(strVal(((AlterObjectDependsStmt *) parsetree)->extname),
					   "retries") == 0;
		default:
			return false;
	}
}

/*
 * find_defelem -- the option called NAME in a list of DefElems, or NULL
 */
static DefElem *
find_defelem(List *options, const char *name)
{
	ListCell   *lc;

	foreach(lc, options)
	{
		DefElem    *opt = (DefElem *) lfirst(lc);

		if (strcmp(opt->defname, name) == 0)
			return opt;
	}
	return NULL;
}

/*
 * workers_in_the_way -- the database whose workers must stop before this
 * command runs, or InvalidOid
 *
 * Those are the commands that fail while other sessions are connected to a
 * database, and DROP EXTENSION retries, which would wait for the workers'
 * running calls (their transactions hold the extension locked).
 */
static Oid
workers_in_the_way(Node *parsetree)
{
	DefElem    *opt;

	switch (nodeTag(parsetree))
	{
		case T_DropdbStmt:
			return get_database_oid(((DropdbStmt *) parsetree)->dbname, true);
		case T_RenameStmt:
			if (((RenameStmt *) parsetree)->renameType == OBJECT_DATABASE)
				return get_database_oid(((RenameStmt *) parsetree)->subname, true);
			break;
		case T_CreatedbStmt:
			/* without TEMPLATE, template1 is copied */
			opt = find_defelem(((CreatedbStmt *) parsetree)->options, "template");
			return get_database_oid(opt != NULL && opt->arg != NULL ?
									defGetString(opt) : "template1", true);
		case T_AlterDatabaseStmt:
			if (find_defelem(((AlterDatabaseStmt *) parsetree)->options,
							 "tablespace") != NULL)
				return get_database_oid(((AlterDatabaseStmt *) parsetree)->dbname,
										true);
			break;
		case T_DropStmt:
			if (names_this_extension(parsetree) &&
				OidIsValid(get_extension_oid("retries", true)))
				return MyDatabaseId;
			break;
		default:
			break;
	}
	return InvalidOid;
}

/*
 * database_is_template -- is this database a template?
 */
static bool
database_is_template(Oid dboid)
{
	HeapTuple	tup = SearchSysCache1(DATABASEOID, ObjectIdGetDatum(dboid));
	bool		result = false;

	if (HeapTupleIsValid(tup))
	{
		result = ((Form_pg_database) GETSTRUCT(tup))->datistemplate;
		ReleaseSysCache(tup);
	}
	return result;
}

/*
 * may_create_databases -- does the current role have CREATEDB (or is it a
 * superuser)?
 */
static bool
may_create_databases(void)
{
	HeapTuple	tup;
	bool		result = false;

	if (superuser())
		return true;
	tup = SearchSysCache1(AUTHOID, ObjectIdGetDatum(GetUserId()));
	if (HeapTupleIsValid(tup))
	{
		result = ((Form_pg_authid) GETSTRUCT(tup))->rolcreatedb;
		ReleaseSysCache(tup);
	}
	return result;
}

/*
 * may_move_database -- would ALTER DATABASE ... SET TABLESPACE of 'dboid'
 * go as far as its look for other sessions: a tablespace that exists, is
 * not the database's, and on which 'userid' has CREATE?
 */
static bool
may_move_database(Oid dboid, AlterDatabaseStmt *stmt, Oid userid)
{
	DefElem    *opt = find_defelem(stmt->options, "tablespace");
	Oid			tablespace;
	HeapTuple	tup;
	bool		moves = false;

	if (opt == NULL || opt->arg == NULL)
		return false;
	tablespace = get_tablespace_oid(defGetString(opt), true);
	if (!OidIsValid(tablespace) ||
		retries_tablespace_aclcheck(tablespace, userid, ACL_CREATE) != ACLCHECK_OK)
		return false;
	tup = SearchSysCache1(DATABASEOID, ObjectIdGetDatum(dboid));
	if (HeapTupleIsValid(tup))
	{
		moves = ((Form_pg_database) GETSTRUCT(tup))->dattablespace != tablespace;
		ReleaseSysCache(tup);
	}
	return moves;
}

/*
 * command_would_run -- would the command's own checks let it run, for the
 * current role, here and now?  The checks that PostgreSQL makes before it
 * looks for other sessions in the database (dbcommands.c, extension.c),
 * and only those: the workers are stopped for a command that may then
 * still fail for its own reasons (another session connected), not for one
 * that its role may not run at all.
 */
static bool
command_would_run(Node *parsetree, Oid dboid, bool isTopLevel)
{
	Oid			userid = GetUserId();

	/* the commands that PreventInTransactionBlock() */
	bool		outside_block = isTopLevel && !IsTransactionBlock() &&
	!IsSubTransaction();

	switch (nodeTag(parsetree))
	{
		case T_DropdbStmt:
			return outside_block && dboid != MyDatabaseId &&
				retries_database_ownercheck(dboid, userid) &&
				!database_is_template(dboid);
		case T_RenameStmt:
			return dboid != MyDatabaseId &&
				retries_database_ownercheck(dboid, userid) &&
				may_create_databases() &&
				!OidIsValid(get_database_oid(((RenameStmt *) parsetree)->newname, true));
		case T_CreatedbStmt:
			return outside_block && may_create_databases() &&
				(database_is_template(dboid) ||
				 retries_database_ownercheck(dboid, userid)) &&
				!OidIsValid(get_database_oid(((CreatedbStmt *) parsetree)->dbname, true));
		case T_AlterDatabaseStmt:
			return outside_block && dboid != MyDatabaseId &&
				retries_database_ownercheck(dboid, userid) &&
				may_move_database(dboid, (AlterDatabaseStmt *) parsetree, userid);
		case T_DropStmt:
			return retries_extension_ownercheck(get_extension_oid("retries", true),
												userid);
		default:
			return false;
	}
}

/*
 * check_guarded_relation -- raise 42501, as PostgreSQL would after
 * locking it, if 'rv' names a relation of the extension's schema, or a
 * system catalog (which the workers read in every transaction), on which
 * the current role lacks the privilege 'mode' (ACL_REFERENCES,
 * ACL_TRIGGER), or ownership for ACL_NO_RIGHTS
 */
static void
check_guarded_relation(const RangeVar *rv, AclMode mode)
{
	Oid			relid;
	Oid			relnsp;

	if (rv == NULL)
		return;
	relid = RangeVarGetRelid(rv, NoLock, true);
	if (!OidIsValid(relid) || superuser())
		return;
	relnsp = get_rel_namespace(relid);
	if (!IsCatalogNamespace(relnsp) && relnsp != get_namespace_oid("retries", true))
		return;
	if (mode == ACL_NO_RIGHTS ?
		!retries_class_ownercheck(relid, GetUserId()) :
		pg_class_aclcheck(relid, GetUserId(), mode) != ACLCHECK_OK)
		aclcheck_error(mode == ACL_NO_RIGHTS ? ACLCHECK_NOT_OWNER : ACLCHECK_NO_PRIV,
					   get_relkind_objtype(get_rel_relkind(relid)), get_rel_name(relid));
}

/*
 * check_foreign_keys -- check_guarded_relation() for the tables that the
 * foreign keys among these constraints (Constraint nodes, or ColumnDefs
 * with theirs) reference
 */
static void
check_foreign_keys(List *elements)
{
	ListCell   *lc;

	foreach(lc, elements)
	{
		Node	   *node = lfirst(lc);
		List	   *constraints = NIL;
		ListCell   *c;

		if (IsA(node, Constraint))
			constraints = list_make1(node);
		else if (IsA(node, ColumnDef))
			constraints = ((ColumnDef *) node)->constraints;
		foreach(c, constraints)
		{
			Constraint *con = lfirst_node(Constraint, c);

			if (con->contype == CONSTR_FOREIGN)
				check_guarded_relation(con->pktable, ACL_REFERENCES);
		}
	}
}

/*
 * may_reach_extension_tables -- would VACUUM FULL or REINDEX of the whole
 * database reach the extension's tables, which the current role does not
 * own?  As the database's owner, not a superuser, where the extension is.
 */
static bool
may_reach_extension_tables(void)
{
	Oid			extoid = get_extension_oid("retries", true);

	return OidIsValid(extoid) && !superuser() &&
		retries_database_ownercheck(MyDatabaseId, GetUserId()) &&
		!retries_extension_ownercheck(extoid, GetUserId());
}

/*
 * option_is_true -- the boolean option 'name' of a command's list of
 * options, as PostgreSQL reads it: the last one given wins
 */
static bool
option_is_true(List *options, const char *name)
{
	ListCell   *lc;
	bool		value = false;

	foreach(lc, options)
	{
		DefElem    *opt = lfirst_node(DefElem, lc);

		if (strcmp(opt->defname, name) == 0)
			value = defGetBoolean(opt);
	}
	return value;
}

/*
 * refuse_vacuum_full -- VACUUM FULL of the extension's tables (or of a
 * system catalog) by a role that does not own them: PostgreSQL lets a
 * database's owner rewrite every table of her database under ACCESS
 * EXCLUSIVE, and one queued behind a lock of her own open transaction
 * held every worker and retries.call() behind it (the seventeenth hostile
 * review).  Of the whole database, it is refused to her, since it would
 * come to those tables too.
 */
static void
refuse_vacuum_full(VacuumStmt *stmt)
{
	ListCell   *lc;

	if (!stmt->is_vacuumcmd || !option_is_true(stmt->options, "full"))
		return;
	if (stmt->rels == NIL && may_reach_extension_tables())
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied to VACUUM FULL the whole database"),
				 errdetail("It would rewrite the tables of extension retries, which every worker uses, under ACCESS EXCLUSIVE locks."),
				 errhint("Name the tables to VACUUM FULL.")));
	foreach(lc, stmt->rels)
		check_guarded_relation(lfirst_node(VacuumRelation, lc)->relation, ACL_NO_RIGHTS);
}

/*
 * refuse_reindex_database -- REINDEX DATABASE, not CONCURRENTLY, and
 * REINDEX SYSTEM, by the database's owner where the extension is (not
 * hers): they would lock the extension's tables or the system catalogs
 * (SHARE) and their indexes (ACCESS EXCLUSIVE), queued as VACUUM FULL is
 * (refuse_vacuum_full): behind a catalog's index, every new connection
 * waits (the eighteenth hostile review).  REINDEX of a table or an index
 * checks ownership before it locks.
 */
static void
refuse_reindex_database(ReindexStmt *stmt)
{
	if ((stmt->kind != REINDEX_OBJECT_DATABASE && stmt->kind != REINDEX_OBJECT_SYSTEM) ||
		option_is_true(stmt->params, "concurrently") || !may_reach_extension_tables())
		return;
	ereport(ERROR,
			(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
			 errmsg("permission denied to REINDEX %s",
					stmt->kind == REINDEX_OBJECT_SYSTEM ? "the system catalogs" : "the whole database"),
			 errdetail("It would lock tables and indexes that every worker of extension retries reads."),
			 errhint("Use REINDEX DATABASE CONCURRENTLY, or name the tables.")));
}

/*
 * refuse_lock_before_check -- refuse, before PostgreSQL locks anything,
 * the commands that lock one of the extension's tables strongly before
 * they check their role's right to: CREATE RULE, ALTER ... DEPENDS ON
 * EXTENSION, CREATE TABLE ... PARTITION OF, ATTACH and DETACH PARTITION
 * (ACCESS EXCLUSIVE), CREATE TRIGGER and a foreign key referencing it
 * (SHARE ROW EXCLUSIVE); and INHERIT, which PostgreSQL refuses to all but
 * the owner too; and those that a database's owner may run, VACUUM FULL
 * and REINDEX DATABASE or SYSTEM (refuse_vacuum_full,
 * refuse_reindex_database).  The system catalogs are guarded the same way,
 * since the workers read them in every transaction (a role would stall the
 * whole server so, not only the workers).
 *
 * A role that holds a lock on the table in another transaction (reading
 * retries.calls is enough) would have such a command wait for it, and
 * every worker, retries.call() and reader of the views queue behind that
 * waiting lock for as long as the role likes, to be refused in the end
 * (doc/operations.md, "Containment").  Refused now, with the error
 * PostgreSQL would give.
 */
static void
refuse_lock_before_check(Node *parsetree)
{
	switch (nodeTag(parsetree))
	{
		case T_RuleStmt:
			check_guarded_relation(((RuleStmt *) parsetree)->relation, ACL_NO_RIGHTS);
			break;
		case T_CreateTrigStmt:
			check_guarded_relation(((CreateTrigStmt *) parsetree)->relation, ACL_TRIGGER);
			break;
		case T_AlterObjectDependsStmt:
			check_guarded_relation(((AlterObjectDependsStmt *) parsetree)->relation,
								   ACL_NO_RIGHTS);
			break;
		case T_CreateStmt:
			{
				ListCell   *lc;

				check_foreign_keys(((CreateStmt *) parsetree)->tableElts);
				check_foreign_keys(((CreateStmt *) parsetree)->constraints);
				/* INHERITS and PARTITION OF: the parent's owner only */
				foreach(lc, ((CreateStmt *) parsetree)->inhRelations)
					check_guarded_relation(lfirst_node(RangeVar, lc), ACL_NO_RIGHTS);
				break;
			}
		case T_AlterTableStmt:
			{
				ListCell   *lc;

				foreach(lc, ((AlterTableStmt *) parsetree)->cmds)
				{
					AlterTableCmd *cmd = lfirst_node(AlterTableCmd, lc);

					if (cmd->def != NULL &&
						(cmd->subtype == AT_AddConstraint || cmd->subtype == AT_AddColumn))
						check_foreign_keys(list_make1(cmd->def));
					else if (cmd->subtype == AT_AttachPartition ||
							 cmd->subtype == AT_DetachPartition ||
							 cmd->subtype == AT_DetachPartitionFinalize)
						check_guarded_relation(castNode(PartitionCmd, cmd->def)->name,
											   ACL_NO_RIGHTS);
					else if (cmd->subtype == AT_AddInherit)
						check_guarded_relation(castNode(RangeVar, cmd->def),
											   ACL_NO_RIGHTS);
				}
				break;
			}
		case T_VacuumStmt:
			refuse_vacuum_full((VacuumStmt *) parsetree);
			break;
		case T_ReindexStmt:
			refuse_reindex_database((ReindexStmt *) parsetree);
			break;
		default:
			break;
	}
}

/*
 * refuse_unless_owner -- refuse a command on extension retries to a role
 * that does not own it, as PostgreSQL would, but before PostgreSQL locks
 * the extension
 *
 * PostgreSQL takes the lock on the extension first and checks ownership
 * afterwards.  Every worker transaction holds that extension locked (see
 * worker.c), so such a command by any role would wait for the longest call
 * running, and, waiting, keep every worker's next batch from taking the
 * lock: any role could stall all workers of a database that way.  ALTER
 * ... DEPENDS ON EXTENSION retries is refused too, though PostgreSQL asks
 * only for the ownership of the object it names: it holds the extension
 * locked until its transaction ends, every worker waiting meanwhile, and
 * has DROP EXTENSION drop the object, which is the extension owner's
 * business.
 */
static void
refuse_unless_owner(Node *parsetree)
{
	Oid			extoid;

	if (!names_this_extension(parsetree))
		return;
	extoid = get_extension_oid("retries", true);
	if (OidIsValid(extoid) && !retries_extension_ownercheck(extoid, GetUserId()))
		aclcheck_error(ACLCHECK_NOT_OWNER, OBJECT_EXTENSION, "retries");
}

/*
 * lock_extension_for_update -- ALTER EXTENSION retries UPDATE takes the
 * extension's lock, exclusive, before its scripts run: every worker
 * transaction takes that lock first (wslot_lock_extension), so the update
 * waits for those under way and none begins while it runs.  PostgreSQL
 * takes no lock on an extension it updates; the scripts lock the tables
 * one after another, in orders that differ between versions (1.2 to 1.3
 * call_data first, 1.3 to 1.4 policy_data first), and a worker transaction
 * that had locked one of them meanwhile, and then waited for another,
 * deadlocked with the update, which failed (t/021 e, in two runs of the
 * suites here).  Only the extension's owner gets here (refuse_unless_owner).
 */
static void
lock_extension_for_update(Node *parsetree)
{
	Oid			extoid;

	if (!IsA(parsetree, AlterExtensionStmt) || !names_this_extension(parsetree))
		return;
	extoid = get_extension_oid("retries", true);
	if (OidIsValid(extoid))
		LockDatabaseObject(ExtensionRelationId, extoid, 0, AccessExclusiveLock);
}

/*
 * changes_databases -- does the command create, drop or alter a database
 * (its template flag or whether it allows connections), so that the
 * launcher must read pg_database again once it commits?
 */
static bool
changes_databases(Node *parsetree)
{
	switch (nodeTag(parsetree))
	{
		case T_CreatedbStmt:
		case T_DropdbStmt:
		case T_AlterDatabaseStmt:
			return true;
		default:
			return false;
	}
}

/*
 * renames_functions -- may the command change the signature or the owner
 * of a function: rename it, move it or give it away, or rename or move
 * its schema or a type of its arguments (a relation's row type too)?
 */
static bool
renames_functions(Node *parsetree)
{
	ObjectType	type;

	if (IsA(parsetree, ReassignOwnedStmt))
		return true;
	if (IsA(parsetree, RenameStmt))
		type = ((RenameStmt *) parsetree)->renameType;
	else if (IsA(parsetree, AlterObjectSchemaStmt))
		type = ((AlterObjectSchemaStmt *) parsetree)->objectType;
	else if (IsA(parsetree, AlterOwnerStmt))
	{
		type = ((AlterOwnerStmt *) parsetree)->objectType;
		return type == OBJECT_FUNCTION || type == OBJECT_PROCEDURE ||
			type == OBJECT_ROUTINE;
	}
	else
		return false;
	return type == OBJECT_FUNCTION || type == OBJECT_PROCEDURE ||
		type == OBJECT_ROUTINE || type == OBJECT_SCHEMA ||
		type == OBJECT_TYPE || type == OBJECT_DOMAIN || type == OBJECT_TABLE ||
		type == OBJECT_VIEW || type == OBJECT_MATVIEW ||
		type == OBJECT_FOREIGN_TABLE || type == OBJECT_EXTENSION;
}

/*
 * commits_prepared -- is the command COMMIT PREPARED?  What the prepared
 * transaction did (calls made, an emit's release) wakes no worker at its
 * PREPARE: the workers are woken when this command's transaction commits,
 * as if it had made a call (in this database: COMMIT PREPARED runs only in
 * the prepared transaction's)
 */
static bool
commits_prepared(Node *parsetree)
{
	return IsA(parsetree, TransactionStmt) &&
		((TransactionStmt *) parsetree)->kind == TRANS_STMT_COMMIT_PREPARED;
}

/*
 * restores_extension -- is the command CREATE EXTENSION [IF NOT EXISTS]
 * retries run by a restore, as a superuser?  Told by the setting that the
 * output of pg_dump (restored by pg_restore or psql) makes first:
 * check_function_bodies off.  Only a superuser's session, who alone may
 * create the extension, may take the restore hold (another role could shut
 * every other role out with it), and only with a statement of its own, as
 * a restore sends them: not through a function, which a superuser may have
 * made SECURITY DEFINER for others to call.
 */
static bool
restores_extension(Node *parsetree, ProcessUtilityContext context)
{
	return IsA(parsetree, CreateExtensionStmt) &&
		strcmp(((CreateExtensionStmt *) parsetree)->extname, "retries") == 0 &&
		!check_function_bodies && context == PROCESS_UTILITY_TOPLEVEL &&
		superuser() && superuser_arg(GetSessionUserId());
}

/*
 * note_databases -- after CREATE DATABASE, leave the note of the database it
 * made from 'template' (not in a binary upgrade, whose databases are not
 * copies: home.c); after DROP DATABASE of 'dboid', remove its note; after
 * a CREATE EXTENSION that made retries here ('had_extension' says whether
 * it was here before), remove this database's: its extension is not the
 * template's; after a restore's that found it, the database is its own
 * (tables_restored_here)
 */
static void
note_databases(Node *parsetree, Oid dboid, bool had_extension, bool restoring)
{
	if (IsA(parsetree, CreatedbStmt) && OidIsValid(made_database) && !IsBinaryUpgrade)
		tables_note_made_database(made_database, dboid, clock_system_now());
	else if (IsA(parsetree, DropdbStmt) && OidIsValid(dboid))
		tables_forget_made_database(dboid);
	else if (IsA(parsetree, CreateExtensionStmt) &&
			 (!had_extension || restoring) &&
			 OidIsValid(get_extension_oid("retries", true)))
	{
		if (had_extension)
			tables_restored_here();
		else
			tables_forget_made_database(MyDatabaseId);
	}
	made_database = InvalidOid;
}

/*
 * process_utility -- stop the workers that would be in the way of the
 * command, if it would run, then run it; the launcher lets them back when
 * the (sub)transaction ends
 */
static void
process_utility(PlannedStmt *pstmt, const char *queryString, bool readOnlyTree,
				ProcessUtilityContext context, ParamListInfo params,
				QueryEnvironment *queryEnv, DestReceiver *dest,
				QueryCompletion *qc)
{
	Oid			dboid;
	RestoreCopy copy;
	volatile bool had_extension = false;
	bool		restoring = restores_extension(pstmt->utilityStmt, context);

	if (runner_is_child())
		runner_check_utility(pstmt->utilityStmt);
	refuse_unless_owner(pstmt->utilityStmt);
	refuse_lock_before_check(pstmt->utilityStmt);
	lock_extension_for_update(pstmt->utilityStmt);
	/* a restore's rows never mix with rows there before (restore.c) */
	restore_copy_begin(pstmt->utilityStmt, context == PROCESS_UTILITY_TOPLEVEL,
					   &copy);
	if (IsA(pstmt->utilityStmt, DropStmt) && names_this_extension(pstmt->utilityStmt))
		colocate_drop_mailboxes();
	dboid = workers_in_the_way(pstmt->utilityStmt);
	sandbox_note_utility(pstmt->utilityStmt);
	if (changes_databases(pstmt->utilityStmt))
		xact_databases_changed();
	if (renames_functions(pstmt->utilityStmt))
		xact_names_changed();
	if (commits_prepared(pstmt->utilityStmt))
		xact_wake_workers(WAKE_CALLS | WAKE_FIRE);
	if (OidIsValid(dboid) &&
		command_would_run(pstmt->utilityStmt, dboid,
						  context == PROCESS_UTILITY_TOPLEVEL))
		xact_stop_workers(dboid);

	/* a command may drop, truncate or alter call_data: not held open */
	calls_insert_pause(pstmt->utilityStmt);
	made_database = InvalidOid;
	if (IsA(pstmt->utilityStmt, CreateExtensionStmt))
		had_extension = OidIsValid(get_extension_oid("retries", true));
	PG_TRY();
	{
		PlannedStmt *run = restore_copy_statement(&copy, pstmt);

		restore_copy_enter(&copy);
		if (prev_ProcessUtility)
			prev_ProcessUtility(run, queryString, readOnlyTree, context, params,
								queryEnv, dest, qc);
		else
			standard_ProcessUtility(run, queryString, readOnlyTree, context,
									params, queryEnv, dest, qc);
		restore_copy_done(&copy);
	}
	PG_FINALLY();
	{
		restore_copy_leave(&copy);
		calls_insert_resume(pstmt->utilityStmt);
	}
	PG_END_TRY();
	note_databases(pstmt->utilityStmt, dboid, had_extension, restoring);

	/*
	 * A restore: the extension made (or found: IF NOT EXISTS, with the
	 * extension in the template) is held before this transaction commits, so
	 * that no other session sees it unheld (see "Restores" in restore.c)
	 */
	if (restoring &&
		OidIsValid(get_extension_oid("retries", true)))
		restore_hold();
}

/*
 * emit_log -- the hint of a regprocedure read without its argument types,
 * in a statement that names retries (see the top), when it has none
 */
static void
emit_log(ErrorData *edata)
{
	if (edata->elevel == ERROR && edata->hint == NULL &&
		edata->sqlerrcode == ERRCODE_INVALID_TEXT_REPRESENTATION &&
		edata->message_id != NULL &&
		strcmp(edata->message_id, "expected a left parenthesis") == 0 &&
		debug_query_string != NULL && strstr(debug_query_string, "retries") != NULL)
	{
		MemoryContext oldcxt = MemoryContextSwitchTo(ErrorContext);

		edata->hint = pstrdup("Name the function with its argument types, as in retries.call('notify_user(bigint,text)', ...): \\df notify_user lists them.");
		MemoryContextSwitchTo(oldcxt);
	}
	if (prev_emit_log_hook)
		prev_emit_log_hook(edata);
}

/*
 * hooks_install -- install the hooks and the transaction callback
 * (from _PG_init, when preloaded)
 */
void
hooks_install(void)
{
	xact_install();
	prev_ProcessUtility = ProcessUtility_hook;
	ProcessUtility_hook = process_utility;
	prev_object_access_hook = object_access_hook;
	object_access_hook = object_access;
	prev_emit_log_hook = emit_log_hook;
	emit_log_hook = emit_log;
}
