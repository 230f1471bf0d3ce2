/*-------------------------------------------------------------------------
 *
 * xact.c
 *	  What a transaction leaves for its end: the effects that take place
 *	  only if it commits, and the undoing of what it did to the workers.
 *
 * - A transaction that scheduled or re-armed calls wakes the workers of
 *   its database at commit, so that a call committed while they sleep
 *   starts within milliseconds (no polling); one that changed a pause or
 *   a limit tells them too, so that an attempt that starts after the
 *   commit sees it.
 * - One that finished calls wakes the backends waiting for them in
 *   retries.wait() (and sends NOTIFY retries_finished, which PostgreSQL
 *   delivers at commit or drops).
 * - One that made the extension (CREATE EXTENSION) wakes the launcher; one
 *   that renamed functions or changed databases has them read again.
 * - The workers that a command stopped (hooks.c) are let back when the
 *   (sub)transaction that ran it ends, committed or not.
 * - A restore's hold on the extension ends with the CREATE EXTENSION that
 *   took it, if that rolls back (restore.c).
 *
 * Nothing here runs before the commit is visible to all, but the reading
 * of the catalogs at pre-commit.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "commands/async.h"
#include "commands/extension.h"
#include "miscadmin.h"
#include "utils/memutils.h"

#include "base/compat.h"
#include "shmem/shmem.h"
#include "tables/tables.h"
#include "xact/xact.h"

/*
 * How long the launcher keeps away from a database whose workers were
 * stopped, at most: the end of the transaction lets them back sooner.
 */
#define STOP_PAUSE_SECS			30

static uint32 wake_workers_at_commit = 0;	/* WAKE_CALLS, WAKE_FIRE */
static Oid	wake_for = InvalidOid;	/* ... for the calls of this role alone */
static bool wake_for_others = false;	/* ... or for more */
static bool gates_changed_at_commit = false;
static bool wake_launcher_at_commit = false;
static bool databases_changed_at_commit = false;
static bool names_changed_at_commit = false;

/* A database whose workers this transaction stopped */
typedef struct StoppedDatabase
{
	Oid			dboid;
	SubTransactionId subid;		/* the subtransaction that stopped them */
} StoppedDatabase;

/* StoppedDatabase entries, in TopMemoryContext */
static List *stopped_databases = NIL;

/* Set before commit: the transaction leaves this database without the extension */
static bool extension_gone = false;

/* The channel of retries.annotate(notify => true) */
#define FINISHED_CHANNEL		"retries_finished"

/*
 * The calls that the current transaction finished, for their waiters, in
 * TopTransactionContext
 */
static struct
{
	LocalTransactionId lxid;	/* the transaction the list belongs to */
	int			n;
	int			size;
	int64	   *ids;
}			finished;

/*
 * xact_wake_workers -- wake this database's workers when the current
 * transaction commits: WAKE_CALLS when a call is scheduled or re-armed,
 * WAKE_FIRE when what the top of their loop sees to changed (see
 * shmem.h)
 */
void
xact_wake_workers(uint32 why)
{
	wake_workers_at_commit |= why;
	wake_for_others = true;
}

/*
 * xact_wake_workers_for -- xact_wake_workers(WAKE_CALLS), for the calls of
 * role 'role' that the transaction made: if those are all it woke them
 * for, a database whose due calls are all that role's, held back by the
 * pool's cap, gets no worker for it (engine/launcher.c, capped_wake)
 */
void
xact_wake_workers_for(Oid role)
{
	if (wake_workers_at_commit != 0 && wake_for != role)
		wake_for_others = true;
	wake_workers_at_commit |= WAKE_CALLS;
	wake_for = role;
}

/*
 * xact_gates_changed -- tell the workers, once the current
 * transaction commits, that the pauses or limits of functions changed, so
 * that an attempt that starts after the commit sees them (flow.c)
 */
void
xact_gates_changed(void)
{
	gates_changed_at_commit = true;
	xact_wake_workers(WAKE_FIRE);
}

/*
 * finished_at_end -- the transaction ends (from xact_callback, after the
 * commit is visible to all): wake the waiters of the calls it finished if
 * it committed, and forget them
 */
static void
finished_at_end(bool committed)
{
	/*
	 * The list is this transaction's: every transaction end empties it (the
	 * local transaction id, cleared by the commit already, cannot tell)
	 */
	if (finished.ids != NULL && committed)
		shmem_wake_finish_waiters(finished.ids, finished.n);
	finished.ids = NULL;
	finished.n = 0;
	finished.lxid = InvalidLocalTransactionId;
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
	foreach(lc, stopped_databases)
	{
		StoppedDatabase *stopped = (StoppedDatabase *) lfirst(lc);

		shmem_let_workers_back(stopped->dboid,
							   committed && extension_gone &&
							   stopped->dboid == MyDatabaseId);
	}
	list_free_deep(stopped_databases);
	stopped_databases = NIL;
	extension_gone = false;
	/* a dropped database must be forgotten before any worker starts */
	shmem_reread_databases();
}

/*
 * subxact_callback -- a subtransaction that stopped workers was rolled
 * back (ROLLBACK TO a savepoint): let them back now, not when the whole
 * transaction ends; one that committed hands its stops to its parent
 */
static void
subxact_callback(SubXactEvent event, SubTransactionId mySubid,
				 SubTransactionId parentSubid, void *arg)
{
	ListCell   *lc;
	bool		let_back = false;

	if (event == SUBXACT_EVENT_COMMIT_SUB || event == SUBXACT_EVENT_ABORT_SUB)
		restore_subxact_end(event == SUBXACT_EVENT_COMMIT_SUB,
							mySubid, parentSubid);
	if (stopped_databases == NIL)
		return;
	if (event == SUBXACT_EVENT_COMMIT_SUB)
	{
		foreach(lc, stopped_databases)
		{
			StoppedDatabase *stopped = (StoppedDatabase *) lfirst(lc);

			if (stopped->subid == mySubid)
				stopped->subid = parentSubid;
		}
		return;
	}
	if (event != SUBXACT_EVENT_ABORT_SUB)
		return;

	foreach(lc, stopped_databases)
	{
		StoppedDatabase *stopped = (StoppedDatabase *) lfirst(lc);

		if (stopped->subid != mySubid)
			continue;
		shmem_let_workers_back(stopped->dboid, false);
		stopped_databases = foreach_delete_current(stopped_databases, lc);
		pfree(stopped);
		let_back = true;
	}
	if (let_back)
		shmem_wake_launcher();
}

/*
 * stopped_here -- did this transaction stop the workers of its own database?
 */
static bool
stopped_here(void)
{
	ListCell   *lc;

	foreach(lc, stopped_databases)
	{
		if (((StoppedDatabase *) lfirst(lc))->dboid == MyDatabaseId)
			return true;
	}
	return false;
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
			if (stopped_here())
				extension_gone = !OidIsValid(get_extension_oid("retries", true));
			break;
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
			if (wake_launcher_at_commit)
			{
				/* a new extension: its workers do all anew */
				shmem_extension_created(MyDatabaseId);
				databases_changed_at_commit = true;
			}
			if (databases_changed_at_commit)
				shmem_reread_databases();
			if (names_changed_at_commit)
				shmem_names_changed(MyDatabaseId);
			/* a resume may let held calls go: the workers look at once */
			if (gates_changed_at_commit)
			{
				shmem_gates_changed();
				xact_wake_workers(WAKE_FIRE);
			}
			if (wake_workers_at_commit != 0)
				shmem_wake_workers(MyDatabaseId, wake_workers_at_commit,
								   wake_for_others ? InvalidOid : wake_for);
			finished_at_end(true);
			restore_xact_end(true);
			gates_changed_at_commit = false;
			wake_workers_at_commit = 0;
			wake_for = InvalidOid;
			wake_for_others = false;
			wake_launcher_at_commit = false;
			databases_changed_at_commit = false;
			names_changed_at_commit = false;
			let_workers_back(true);
			break;
		case XACT_EVENT_PRE_PREPARE:
			restore_before_prepare();
			break;
		case XACT_EVENT_PREPARE:
			/* finished at COMMIT PREPARED, elsewhere: its waiters time out */
			finished_at_end(false);
			/* the COMMIT PREPARED wakes the workers (hooks.c) */
			wake_workers_at_commit = 0;
			wake_for = InvalidOid;
			wake_for_others = false;
			break;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
			finished_at_end(false);
			restore_xact_end(false);
			gates_changed_at_commit = false;
			wake_workers_at_commit = 0;
			wake_for = InvalidOid;
			wake_for_others = false;
			wake_launcher_at_commit = false;
			databases_changed_at_commit = false;
			names_changed_at_commit = false;
			let_workers_back(false);
			break;
		default:
			break;
	}
}

/*
 * xact_call_finished -- the current transaction finishes call 'id':
 * wake its waiters when the transaction commits, and send NOTIFY
 * retries_finished with its id if 'notify'
 */
void
xact_call_finished(int64 id, bool notify)
{
	if (finished.lxid != retries_local_xid() || finished.ids == NULL)
	{
		finished.lxid = retries_local_xid();
		finished.n = 0;
		finished.size = 64;
		finished.ids = MemoryContextAlloc(TopTransactionContext,
										  sizeof(int64) * finished.size);
	}
	else if (finished.n == finished.size)
	{
		finished.size *= 2;
		finished.ids = repalloc(finished.ids, sizeof(int64) * finished.size);
	}
	finished.ids[finished.n++] = id;

	if (notify)
	{
		char		payload[32];

		snprintf(payload, sizeof(payload), INT64_FORMAT, id);
		Async_Notify(FINISHED_CHANNEL, payload);
	}
}


/*
 * xact_wake_launcher -- the launcher looks at this database
 * again when the transaction commits (CREATE EXTENSION)
 */
void
xact_wake_launcher(void)
{
	wake_launcher_at_commit = true;
}

/*
 * xact_databases_changed -- the launcher reads the list of
 * databases again when the transaction commits
 */
void
xact_databases_changed(void)
{
	databases_changed_at_commit = true;
}

/*
 * xact_names_changed -- the transaction renamed functions:
 * the workers read their signatures again once it commits
 */
void
xact_names_changed(void)
{
	names_changed_at_commit = true;
}

/*
 * xact_stop_workers -- stop the workers of database 'dboid'
 * and keep the launcher away from it until the current subtransaction
 * ends (let_workers_back)
 */
void
xact_stop_workers(Oid dboid)
{
	MemoryContext oldcxt = MemoryContextSwitchTo(TopMemoryContext);
	StoppedDatabase *stopped = palloc(sizeof(StoppedDatabase));

	stopped->dboid = dboid;
	stopped->subid = GetCurrentSubTransactionId();
	stopped_databases = lappend(stopped_databases, stopped);
	MemoryContextSwitchTo(oldcxt);
	shmem_stop_workers(dboid, STOP_PAUSE_SECS);
}

/*
 * xact_install -- from _PG_init, when preloaded
 */
void
xact_install(void)
{
	RegisterXactCallback(xact_callback, NULL);
	RegisterSubXactCallback(subxact_callback, NULL);
}
