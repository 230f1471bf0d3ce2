/*-------------------------------------------------------------------------
 *
 * launcher.c
 *	  The launcher: one background worker per cluster that starts and stops
 *	  the per-database workers.
 *
 * Registered from _PG_init to start once recovery has finished, so no
 * worker ever runs on a standby and all start after promotion.  It connects
 * to no database, only reading pg_database: each database that allows
 * connections and is not a template is probed by starting one worker,
 * which looks for the extension and reports back through shared memory.
 * Databases with the extension get retries.max_workers workers; the others
 * are left alone until CREATE EXTENSION wakes the launcher at commit.
 * A database whose workers were stopped (DROP DATABASE, DROP EXTENSION)
 * stays paused for a while, so that the launcher does not race the command.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/pg_database.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "tcop/tcopprot.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "retries.h"
#include "shmem.h"

/* How long to wait between looks at pg_database when nothing is pending */
#define LAUNCHER_NAPTIME_MS		5000
/* How long to wait before starting workers again in a database */
#define RESTART_DELAY_MS		1000
/* How often to look again at a database that had no extension */
#define REPROBE_MS				(5 * 60 * 1000)
/* How often at most to log that no background worker could be had */
#define COMPLAINT_INTERVAL_MS	(60 * 1000)

/* Handles of the workers this launcher started, by slot */
static BackgroundWorkerHandle *handles[RETRIES_MAX_SLOTS];

PGDLLEXPORT void retries_launcher_main(Datum main_arg);

/*
 * retries_register_launcher -- register the launcher (from _PG_init)
 */
void
retries_register_launcher(void)
{
	BackgroundWorker worker;

	memset(&worker, 0, sizeof(worker));
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker.bgw_restart_time = 5;
	snprintf(worker.bgw_library_name, BGW_MAXLEN, "retries");
	snprintf(worker.bgw_function_name, BGW_MAXLEN, "retries_launcher_main");
	snprintf(worker.bgw_name, BGW_MAXLEN, "retries launcher");
	snprintf(worker.bgw_type, BGW_MAXLEN, "retries launcher");
	RegisterBackgroundWorker(&worker);
}

/*
 * start_worker -- start the worker for slot 'slot_no' of a database
 *
 * Returns false if no slot or no background worker could be had (the
 * launcher tries again later).  Caller holds the lock exclusively.
 */
static bool
start_worker(Oid dboid, int slot_no)
{
	BackgroundWorker worker;
	int			slot = -1;

	for (int i = 0; i < RETRIES_MAX_SLOTS; i++)
	{
		if (!retries_shared->workers[i].in_use)
		{
			slot = i;
			break;
		}
	}
	if (slot < 0)
		return false;

	memset(&worker, 0, sizeof(worker));
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker.bgw_restart_time = BGW_NEVER_RESTART;
	worker.bgw_main_arg = Int32GetDatum(slot);
	worker.bgw_notify_pid = MyProcPid;
	snprintf(worker.bgw_library_name, BGW_MAXLEN, "retries");
	snprintf(worker.bgw_function_name, BGW_MAXLEN, "retries_worker_main");
	snprintf(worker.bgw_name, BGW_MAXLEN, "retries worker %d for database %u",
			 slot_no, dboid);
	snprintf(worker.bgw_type, BGW_MAXLEN, "retries worker");

	/*
	 * Fill the slot in before the worker exists: the postmaster may start it
	 * before RegisterDynamicBackgroundWorker returns here, and it reads its
	 * database from the slot.
	 */
	memset(&retries_shared->workers[slot], 0, sizeof(RetriesWorker));
	retries_shared->workers[slot].in_use = true;
	retries_shared->workers[slot].dboid = dboid;
	retries_shared->workers[slot].slot_no = slot_no;
	retries_shared->workers[slot].state = WORKER_STARTING;

	if (!RegisterDynamicBackgroundWorker(&worker, &handles[slot]))
	{
		static TimestampTz last_complaint = 0;

		retries_shared->workers[slot].in_use = false;
		if (TimestampDifferenceExceeds(last_complaint, GetCurrentTimestamp(),
									   COMPLAINT_INTERVAL_MS))
		{
			ereport(LOG,
					(errmsg("retries: could not start a worker for database %u", dboid),
					 errhint("Raise max_worker_processes to at least 1 + retries.max_workers times the number of databases with the extension.")));
			last_complaint = GetCurrentTimestamp();
		}
		return false;
	}
	return true;
}

/*
 * reap_workers -- free the slots of workers that have exited; a probe that
 * exited without saying what it found leaves its database to be probed again
 */
static void
reap_workers(void)
{
	for (int i = 0; i < RETRIES_MAX_SLOTS; i++)
	{
		RetriesWorker *w = &retries_shared->workers[i];
		pid_t		pid;

		if (!w->in_use || handles[i] == NULL)
			continue;
		if (GetBackgroundWorkerPid(handles[i], &pid) != BGWH_STOPPED)
			continue;

		pfree(handles[i]);
		handles[i] = NULL;
		w->in_use = false;

		{
			RetriesDatabase *db = retries_find_database(w->dboid, false);

			if (db != NULL && db->state == DB_PROBING)
				db->state = DB_UNKNOWN;
			if (db != NULL)
				db->next_start = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
															 RESTART_DELAY_MS);
		}
	}
}

/*
 * stop_slot -- ask a worker to exit (it was ours to start)
 */
static void
stop_slot(int i)
{
	if (handles[i] != NULL)
		TerminateBackgroundWorker(handles[i]);
}

/*
 * manage_database -- start or stop workers of one database as its state
 * asks; caller holds the lock exclusively
 */
static void
manage_database(RetriesDatabase *db, TimestampTz now)
{
	bool		have[RETRIES_MAX_SLOTS] = {false};
	int			wanted;

	for (int i = 0; i < RETRIES_MAX_SLOTS; i++)
	{
		RetriesWorker *w = &retries_shared->workers[i];

		if (!w->in_use || w->dboid != db->dboid)
			continue;
		/* paused, or more workers than now wanted: stop them */
		if (now < db->paused_until || db->state == DB_NO_EXTENSION ||
			(db->state == DB_ACTIVE && w->slot_no >= retries_max_workers))
			stop_slot(i);
		else if (w->slot_no < RETRIES_MAX_SLOTS)
			have[w->slot_no] = true;
	}

	if (now < db->paused_until || now < db->next_start)
		return;

	switch (db->state)
	{
		case DB_UNKNOWN:
			if (!have[0] && start_worker(db->dboid, 0))
				db->state = DB_PROBING;
			break;
		case DB_ACTIVE:
			wanted = Min(retries_max_workers, RETRIES_MAX_SLOTS);
			for (int n = 0; n < wanted; n++)
				if (!have[n] && !start_worker(db->dboid, n))
					break;
			break;
		case DB_NO_EXTENSION:

			/*
			 * CREATE EXTENSION wakes us; looking again now and then also
			 * covers a CREATE that committed as the last worker was leaving.
			 */
			if (now >= db->next_start + (int64) REPROBE_MS * 1000)
				db->state = DB_UNKNOWN;
			break;
		case DB_PROBING:
			break;
	}
}

/*
 * scan_databases -- bring the database table in line with pg_database:
 * add new databases, drop vanished ones, and manage each
 */
static void
scan_databases(void)
{
	Relation	rel;
	SysScanDesc scan;
	HeapTuple	tup;
	Oid			seen[RETRIES_MAX_DATABASES];
	int			nseen = 0;
	TimestampTz now = GetCurrentTimestamp();

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	rel = table_open(DatabaseRelationId, AccessShareLock);
	scan = systable_beginscan(rel, InvalidOid, false, NULL, 0, NULL);
	while (HeapTupleIsValid(tup = systable_getnext(scan)) &&
		   nseen < RETRIES_MAX_DATABASES)
	{
		Form_pg_database dat = (Form_pg_database) GETSTRUCT(tup);

		if (dat->datallowconn && !dat->datistemplate)
			seen[nseen++] = dat->oid;
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	PopActiveSnapshot();
	CommitTransactionCommand();

	LWLockAcquire(retries_shared->lock, LW_EXCLUSIVE);
	reap_workers();

	/* forget databases that are gone or no longer allow connections */
	for (int i = 0; i < RETRIES_MAX_DATABASES; i++)
	{
		RetriesDatabase *db = &retries_shared->dbs[i];
		bool		present = false;

		if (!OidIsValid(db->dboid))
			continue;
		for (int j = 0; j < nseen && !present; j++)
			present = seen[j] == db->dboid;
		if (!present)
		{
			db->state = DB_NO_EXTENSION;
			manage_database(db, now);
			db->dboid = InvalidOid;
		}
	}

	for (int j = 0; j < nseen; j++)
	{
		RetriesDatabase *db = retries_find_database(seen[j], true);

		if (db != NULL)
			manage_database(db, now);
	}
	LWLockRelease(retries_shared->lock);
}

/*
 * retries_launcher_main -- entry point of the launcher
 */
void
retries_launcher_main(Datum main_arg)
{
	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, SignalHandlerForShutdownRequest);
	BackgroundWorkerUnblockSignals();

	/* no database: only shared catalogs such as pg_database */
	BackgroundWorkerInitializeConnection(NULL, NULL, 0);
	pgstat_report_appname("retries launcher");

	LWLockAcquire(retries_shared->lock, LW_EXCLUSIVE);
	retries_shared->launcher_pid = MyProcPid;
	retries_shared->launcher_latch = &MyProc->procLatch;
	LWLockRelease(retries_shared->lock);

	while (!ShutdownRequestPending)
	{
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}

		scan_databases();

		(void) WaitLatch(MyLatch,
						 WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 LAUNCHER_NAPTIME_MS / 5,
						 PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}

	/* the workers exit on their own as the server shuts down */
	LWLockAcquire(retries_shared->lock, LW_EXCLUSIVE);
	retries_shared->launcher_pid = 0;
	retries_shared->launcher_latch = NULL;
	LWLockRelease(retries_shared->lock);
	proc_exit(0);
}
