/*-------------------------------------------------------------------------
 *
 * shmem.h
 *	  State shared by the launcher, the workers and ordinary backends.
 *
 * One LWLock protects everything here.  The launcher owns the database
 * table and assigns worker slots; a worker fills in its own slot (pid,
 * latch, what it is running); backends read the slots to wake workers, to
 * list them in retries.workers and to know which calls are running.
 *
 *-------------------------------------------------------------------------
 */
#ifndef RETRIES_SHMEM_H
#define RETRIES_SHMEM_H

#include "datatype/timestamp.h"
#include "port/atomics.h"
#include "storage/latch.h"
#include "storage/lwlock.h"

/* Most databases and worker slots tracked at once */
#define RETRIES_MAX_DATABASES	128
#define RETRIES_MAX_SLOTS		256
/* Most attempts left behind by exiting workers remembered at once */
#define RETRIES_MAX_INTERRUPTED	64

/* What the launcher knows of a database */
typedef enum RetriesDbState
{
	DB_UNKNOWN,					/* not probed yet: start one worker to look */
	DB_PROBING,					/* a worker is looking for the extension */
	DB_ACTIVE,					/* the extension is there: keep workers */
	DB_NO_EXTENSION				/* not there: wait for CREATE EXTENSION */
} RetriesDbState;

typedef struct RetriesDatabase
{
	Oid			dboid;			/* InvalidOid when the entry is free */
	RetriesDbState state;
	bool		recovered;		/* interrupted attempts charged since start */
	TimestampTz paused_until;	/* no workers until then (DROP DATABASE, ...) */
	TimestampTz next_start;		/* do not start workers before this */
} RetriesDatabase;

/* What a worker is doing, for retries.workers */
typedef enum RetriesWorkerState
{
	WORKER_STARTING,
	WORKER_IDLE,
	WORKER_RUNNING,
	WORKER_PAUSED				/* retries.enabled = off */
} RetriesWorkerState;

typedef struct RetriesWorker
{
	bool		in_use;			/* slot assigned by the launcher */
	Oid			dboid;
	int			slot_no;		/* 0 .. retries.max_workers - 1 within dboid */
	pid_t		pid;			/* 0 until the worker has started */
	Latch	   *latch;
	RetriesWorkerState state;
	int64		current_call;	/* 0 when none */
	Oid			current_role;	/* who scheduled current_call */
	TimestampTz since;			/* when state or current_call last changed */
	int64		calls_run;
	int64		errors;

	/*
	 * Time spent running calls since the process started: busy_us for the
	 * busy periods that ended, plus now - busy_since while one lasts (from
	 * the first attempt of a batch until its commit; 0 when none does).
	 */
	int64		busy_us;
	TimestampTz busy_since;
} RetriesWorker;

/*
 * An attempt that a worker left unfinished when it exited (see worker.c):
 * the first worker to claim the call charges it.  A ring: when it is full,
 * the oldest entry is overwritten.
 */
typedef struct RetriesInterrupted
{
	Oid			dboid;			/* InvalidOid when the entry is free */
	Oid			extension;		/* the extension the call belongs to */
	int64		call_id;
	int32		attempt;
} RetriesInterrupted;

/*
 * A backend's cancel() waiting for the row of a call that a worker may be
 * running (see manage.c); one per backend, after RetriesShared
 */
typedef struct RetriesCancelWait
{
	Oid			dboid;
	int64		call_id;		/* 0 when none */
} RetriesCancelWait;

typedef struct RetriesShared
{
	LWLock	   *lock;
	pg_atomic_uint32 ncancel_waits; /* entries of cancel_waits in use */
	pid_t		launcher_pid;
	Latch	   *launcher_latch;
	RetriesDatabase dbs[RETRIES_MAX_DATABASES];
	RetriesWorker workers[RETRIES_MAX_SLOTS];
	int			ninterrupted;	/* entries in use */
	int			next_interrupted;	/* where the next entry goes */
	RetriesInterrupted interrupted[RETRIES_MAX_INTERRUPTED];
} RetriesShared;

extern RetriesShared *retries_shared;

extern void retries_shmem_request(void);
extern void retries_shmem_startup(void);
extern RetriesDatabase *retries_find_database(Oid dboid, bool create);
extern void retries_wake_launcher(void);
extern void retries_wake_workers(Oid dboid);
extern void retries_stop_workers(Oid dboid, int pause_secs);
extern bool retries_call_is_running(int64 call_id);
extern void retries_cancel_wait_begin(int64 call_id);
extern void retries_cancel_wait_end(void);
extern bool retries_cancel_waiting(int64 call_id);

#endif							/* RETRIES_SHMEM_H */
