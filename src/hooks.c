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
 * - DROP DATABASE and ALTER DATABASE RENAME fail while other sessions are
 *   connected, so the workers of that database are stopped first, and the
 *   launcher keeps away from it for a while.
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
#include "nodes/parsenodes.h"
#include "tcop/utility.h"
#include "utils/builtins.h"

#include "retries.h"
#include "shmem.h"

/* How long the launcher keeps away from a database being dropped/renamed */
#define STOP_PAUSE_SECS			30

static bool wake_workers_at_commit = false;
static bool wake_launcher_at_commit = false;

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
 * xact_callback -- deliver the wake-ups of a committed transaction
 */
static void
xact_callback(XactEvent event, void *arg)
{
	switch (event)
	{
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
			break;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
			wake_workers_at_commit = false;
			wake_launcher_at_commit = false;
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
 * database_being_changed -- the database a DROP DATABASE or ALTER DATABASE
 * RENAME is about, or InvalidOid
 */
static Oid
database_being_changed(Node *parsetree)
{
	if (IsA(parsetree, DropdbStmt))
		return get_database_oid(((DropdbStmt *) parsetree)->dbname, true);
	if (IsA(parsetree, RenameStmt) &&
		((RenameStmt *) parsetree)->renameType == OBJECT_DATABASE)
		return get_database_oid(((RenameStmt *) parsetree)->subname, true);
	return InvalidOid;
}

/*
 * process_utility -- stop the workers of a database about to be dropped or
 * renamed, then run the command
 */
static void
process_utility(PlannedStmt *pstmt, const char *queryString, bool readOnlyTree,
				ProcessUtilityContext context, ParamListInfo params,
				QueryEnvironment *queryEnv, DestReceiver *dest,
				QueryCompletion *qc)
{
	Oid			dboid = database_being_changed(pstmt->utilityStmt);

	if (OidIsValid(dboid))
		retries_stop_workers(dboid, STOP_PAUSE_SECS);

	if (prev_ProcessUtility)
		prev_ProcessUtility(pstmt, queryString, readOnlyTree, context, params,
							queryEnv, dest, qc);
	else
		standard_ProcessUtility(pstmt, queryString, readOnlyTree, context,
								params, queryEnv, dest, qc);

	/* a rename is done: the workers may come back at once */
	if (OidIsValid(dboid) && IsA(pstmt->utilityStmt, RenameStmt))
	{
		RetriesDatabase *db;

		LWLockAcquire(retries_shared->lock, LW_EXCLUSIVE);
		db = retries_find_database(dboid, false);
		if (db != NULL)
			db->paused_until = 0;
		LWLockRelease(retries_shared->lock);
		retries_wake_launcher();
	}
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
