/*-------------------------------------------------------------------------
 *
 * reserve.c
 *	  Background-worker slots that no one else can take: reserved workers
 *	  that run an extra worker or a runner when no other slot is free.
 *
 * Extra workers (worker.c) and runners (runner.c) are dynamic background
 * workers, started when they are needed, each in a free slot of
 * max_worker_processes.  Any role can take every free slot: a parallel
 * query launches as many workers as max_parallel_workers allows, and
 * that is a setting every role may raise (and the owner of a table sets
 * its parallel_workers).  Then no extra worker and no runner starts, and
 * a role's due procedure or command waits until the query ends.
 *
 * So, when preloaded, the library registers retries.reserved_workers
 * static background workers.  PostgreSQL gives a static worker a slot of
 * its own for good (a dynamic registration never takes it), and starts it
 * again at once when it exits with code 1 (bgw_restart_time 0: a stream of
 * short jobs, each of which ends its process, must not leave every
 * reserved worker a second in its restart; one that fails without a job
 * waits out a second, shmem_reserve_pause).  A reserved worker connects
 * to no database: it waits until it is given a job (reserve_give), and
 * then runs it in its own process, as the dynamic worker would have:
 * retries_worker_main() for a worker of a database, retries_runner_main()
 * for a runner, each connecting to its database as it does.  When the job
 * ends, the process exits with code 1 (not 0, which would give the slot up), and PostgreSQL starts a new one in its slot.
 * The launcher and the workers use a reserved worker only when
 * RegisterDynamicBackgroundWorker finds no slot free, so that reserved
 * workers stay free for when they are needed; the log's line about a
 * background worker that "exited with exit code 1" says that one was.
 *
 * Whoever gives a job (shmem_reserve_give) notes the reserved worker's
 * generation, which a job and the end of a process bump: the job is
 * running while the generation is the one it was given
 * (shmem_reserve_running), and may be ended with a signal while it is
 * (shmem_reserve_terminate).  A process whose work is done exits with
 * shmem_exit_code().
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <signal.h>

#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "tcop/tcopprot.h"

#include "base/base.h"
#include "engine/engine.h"
#include "engine/runner.h"
#include "shmem/shmem.h"

PGDLLEXPORT void retries_reserve_main(Datum main_arg);
PGDLLEXPORT void retries_worker_main(Datum main_arg);

/*
 * reserve_register -- register the reserved workers (from _PG_init, when
 * preloaded)
 */
void
reserve_register(void)
{
	for (int i = 0; i < Min(retries_reserved_workers, RETRIES_MAX_RESERVES); i++)
	{
		BackgroundWorker worker;

		memset(&worker, 0, sizeof(worker));
		worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
		worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
		worker.bgw_restart_time = 0;	/* see shmem_reserve_pause */
		worker.bgw_main_arg = Int32GetDatum(i);
		snprintf(worker.bgw_library_name, BGW_MAXLEN, "retries");
		snprintf(worker.bgw_function_name, BGW_MAXLEN, "retries_reserve_main");
		snprintf(worker.bgw_name, BGW_MAXLEN, "retries reserve %d", i);
		snprintf(worker.bgw_type, BGW_MAXLEN, "retries reserve");
		RegisterBackgroundWorker(&worker);
	}
}

/*
 * wait_for_job -- wait until reserved worker 'index' (this one) is given a
 * job; its argument into *arg
 */
static RetriesReserveJob
wait_for_job(int index, Datum *arg)
{
	for (;;)
	{
		RetriesReserveJob job;

		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}
		job = shmem_reserve_job(index, arg);
		if (job != RESERVE_NONE)
			return job;
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_EXIT_ON_PM_DEATH, -1,
						 PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
}

/*
 * retries_reserve_main -- entry point of a reserved worker: wait for a
 * job, run it, and exit to be started again
 */
void
retries_reserve_main(Datum main_arg)
{
	RetriesReserveJob job;
	Datum		arg;
	long		pause_ms;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();

	pause_ms = shmem_reserve_pause(DatumGetInt32(main_arg));
	if (pause_ms > 0)
		(void) WaitLatch(MyLatch, WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, pause_ms,
						 PG_WAIT_EXTENSION);
	shmem_reserve_begin(DatumGetInt32(main_arg));
	job = wait_for_job(DatumGetInt32(main_arg), &arg);

	/*
	 * named as what it runs in its own copy of the registration, which the
	 * log's %b reads; pg_stat_activity reads the postmaster's, and shows
	 * "retries reserve" (the launcher gives a reserved worker only extra
	 * workers)
	 */
	snprintf(MyBgworkerEntry->bgw_type, BGW_MAXLEN, "%s",
			 job == RESERVE_RUNNER ? "retries runner" : "retries extra worker");
	if (job == RESERVE_RUNNER)
		retries_runner_main(arg);
	else
		retries_worker_main(arg);
	proc_exit(shmem_exit_code());
}
