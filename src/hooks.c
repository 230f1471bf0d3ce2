/*-------------------------------------------------------------------------
 *
 * hooks.c
 *	  What ordinary backends do for the workers, through PostgreSQL's hooks.
 *
 * - At commit, a transaction that scheduled or re-armed calls wakes the
 *   workers of its database, so that a call committed while they sleep
 *   starts within milliseconds (no polling).
 * - CREATE EXTENSION wakes the launcher at commit; DROP EXTENSION wakes the
 *   workers at commit, and they find the extension gone and exit.
 * - The commands that need a database to themselves (DROP DATABASE, ALTER
 *   DATABASE RENAME or SET TABLESPACE, CREATE DATABASE from it as a
 *   template) fail while other sessions are connected, so the workers of
 *   that database are stopped first.  So are they before DROP EXTENSION,
 *   which would otherwise wait for the call each of them is running, for
 *   minutes maybe.  The launcher keeps away from the database until the
 *   transaction ends, committed or not; a command that failed or was rolled
 *   back has the workers back at once, and the attempts it cut short count
 *   as interrupted, like any other.
 *
 * - Inside a worker, the sandbox of an attempt learns of the commands that
 *   leave something for the end of the transaction (sandbox.c).
 *
 * Installed only when the library is preloaded (there are no workers
 * otherwise).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/objectaccess.h"
#include "catalog/pg_extension.h"
#include "commands/dbcommands.h"
#include "commands/extension.h"
#include "miscadmin.h"
#include "commands/defrem.h"
#include "nodes/parsenodes.h"
#include "tcop/utility.h"
#include "utils/builtins.h"
#include "utils/memutils.h"

#include "retries.h"
#include "sandbox.h"
#include "shmem.h"

/*
 * How long the launcher keeps away from a database whose workers were
 * stopped, at most: the end of the transaction lets them back sooner.
 */
#define STOP_PAUSE_SECS			30

static bool wake_workers_at_commit = false;
static bool wake_launcher_at_commit = false;
/* Databases whose workers this transaction stopped (in TopMemoryContext) */
static List *stopped_databases = NIL;
/* Set before commit: the transaction leaves this database without the extension */
static bool extension_gone = false;

static ProcessUtility_hook_type prev_ProcessUtility = NULL;
static object_access_hook_type prev_object_access_hook = NULL;

PG_FUNCTION_INFO_V1(retries_start_workers);

/*
 * retries_wake_at_commit -- wake this database's workers when the current
 * transaction commits (called when a call is scheduled or re-armed)
 */
void
retries_wake_at_commit(void)
{
	wake_workers_at_commit = true;
}

/*
 * let_workers_back -- at the end of a transaction, let the launcher start
 * workers again in the databases whose workers it stopped
 *
 * After a DROP DATABASE the database is gone and the launcher forgets it;
 * after a committed DROP EXTENSION it is told that the extension is gone
 * (otherwise the workers it would start would find that out and exit).
 */
static void
let_workers_back(bool committed)
{
	ListCell   *lc;

	if (stopped_databases == NIL)
		return;
	LWLockAcquire(retries_shared->lock, LW_EXCLUSIVE);
	foreach(lc, stopped_databases)
	{
		RetriesDatabase *db = retries_find_database(lfirst_oid(lc), false);

		if (db == NULL)
			continue;
		db->paused_until = 0;
		if (committed && extension_gone && db->dboid == MyDatabaseId)
			db->state = DB_NO_EXTENSION;
	}
	LWLockRelease(retries_shared->lock);
	list_free(stopped_databases);
	stopped_databases = NIL;
	extension_gone = false;
	retries_wake_launcher();
}

/*
 * xact_callback -- deliver the wake-ups of a committed transaction
 */
static void
xact_callback(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_PRE_COMMIT:
			/* catalogs can still be read here, not at commit */
			if (list_member_oid(stopped_databases, MyDatabaseId))
				extension_gone = !OidIsValid(get_extension_oid("retries", true));
			break;
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
			if (wake_launcher_at_commit)
			{
				RetriesDatabase *db;

				LWLockAcquire(retries_shared->lock, LW_EXCLUSIVE);
				db = retries_find_database(MyDatabaseId, true);
				if (db != NULL && db->state == DB_NO_EXTENSION)
					db->state = DB_UNKNOWN;
				if (db != NULL)
					db->paused_until = 0;
				LWLockRelease(retries_shared->lock);
				retries_wake_launcher();
			}
			if (wake_workers_at_commit)
				retries_wake_workers(MyDatabaseId);
			wake_workers_at_commit = false;
			wake_launcher_at_commit = false;
			let_workers_back(true);
			break;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
			wake_workers_at_commit = false;
			wake_launcher_at_commit = false;
			let_workers_back(false);
			break;
		default:
			break;
	}
}

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
		wake_launcher_at_commit = true;
	PG_RETURN_VOID();
}

/*
 * object_access -- on DROP EXTENSION retries, wake the workers at commit so
 * that they notice and exit
 */
static void
object_access(ObjectAccessType access, Oid classId, Oid objectId, int subId,
			  void *arg)
{
	if (prev_object_access_hook)
		prev_object_access_hook(access, classId, objectId, subId, arg);

	if (access == OAT_DROP && classId == ExtensionRelationId &&
		objectId == get_extension_oid("retries", true))
		wake_workers_at_commit = true;
}

/*
 * find_option -- the option called NAME in a list of DefElems, or NULL
 */
static DefElem *
find_option(List *options, const char *name)
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
	ListCell   *lc;
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
			opt = find_option(((CreatedbStmt *) parsetree)->options, "template");
			if (opt != NULL && opt->arg != NULL)
				return get_database_oid(defGetString(opt), true);
			break;
		case T_AlterDatabaseStmt:
			if (find_option(((AlterDatabaseStmt *) parsetree)->options,
							"tablespace") != NULL)
				return get_database_oid(((AlterDatabaseStmt *) parsetree)->dbname,
										true);
			break;
		case T_DropStmt:
			if (((DropStmt *) parsetree)->removeType != OBJECT_EXTENSION ||
				!OidIsValid(get_extension_oid("retries", true)))
				break;
			foreach(lc, ((DropStmt *) parsetree)->objects)
			{
				if (strcmp(strVal(lfirst(lc)), "retries") == 0)
					return MyDatabaseId;
			}
			break;
		default:
			break;
	}
	return InvalidOid;
}

/*
 * process_utility -- stop the workers that would be in the way of the
 * command, then run it; the launcher lets them back when the transaction
 * ends
 */
static void
process_utility(PlannedStmt *pstmt, const char *queryString, bool readOnlyTree,
				ProcessUtilityContext context, ParamListInfo params,
				QueryEnvironment *queryEnv, DestReceiver *dest,
				QueryCompletion *qc)
{
	Oid			dboid = workers_in_the_way(pstmt->utilityStmt);

	sandbox_note_utility(pstmt->utilityStmt);
	if (OidIsValid(dboid))
	{
		MemoryContext oldcxt = MemoryContextSwitchTo(TopMemoryContext);

		stopped_databases = list_append_unique_oid(stopped_databases, dboid);
		MemoryContextSwitchTo(oldcxt);
		retries_stop_workers(dboid, STOP_PAUSE_SECS);
	}

	if (prev_ProcessUtility)
		prev_ProcessUtility(pstmt, queryString, readOnlyTree, context, params,
							queryEnv, dest, qc);
	else
		standard_ProcessUtility(pstmt, queryString, readOnlyTree, context,
								params, queryEnv, dest, qc);
}

/*
 * retries_install_hooks -- install the hooks and the transaction callback
 * (from _PG_init, when preloaded)
 */
void
retries_install_hooks(void)
{
	RegisterXactCallback(xact_callback, NULL);
	prev_ProcessUtility = ProcessUtility_hook;
	ProcessUtility_hook = process_utility;
	prev_object_access_hook = object_access_hook;
	object_access_hook = object_access;
}
