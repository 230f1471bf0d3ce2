/*-------------------------------------------------------------------------
 *
 * status.c
 *	  What the workers are doing: the SQL functions behind retries.workers
 *	  and the running calls.
 *
 * Both read the workers' slots in shared memory (a copy of each, taken
 * under the lock) and show a slot's current call only to roles that may
 * read that call.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "base/base.h"
#include "shmem/shmem.h"
#include "tables/tables.h"

PG_FUNCTION_INFO_V1(retries_worker_status);
PG_FUNCTION_INFO_V1(retries_running_calls);

/*
 * worker_state_name -- a worker state as shown in retries.workers
 */
static const char *
worker_state_name(RetriesWorkerState state)
{
	switch (state)
	{
		case WORKER_STARTING:
			return "starting";
		case WORKER_IDLE:
			return "idle";
		case WORKER_RUNNING:
			return "running";
		case WORKER_PAUSED:
			return "paused";
	}
	return "unknown";
}

/* Columns of retries.worker_status() in each version of the extension */
#define WORKER_STATUS_COLS_V1_0	7
#define WORKER_STATUS_COLS_V1_1	8	/* busy_time */
#define WORKER_STATUS_COLS		8	/* the most of any version */

/*
 * retries_worker_status -- SQL function behind retries.workers
 *
 * One row per worker process of the cluster.  The current call is shown
 * only to roles that may see it; the state, counts and busy time, which
 * tell of every role's calls, only to roles that see every role's calls
 * (access_reads_all_calls), and to others the state only while the worker
 * runs a call of theirs.  Without the library preloaded there are
 * no workers, and a single row says why.
 *
 * The row has as many columns as the caller's declaration of the function:
 * 7 in a database still at version 1.0, 8 (busy_time added) from 1.1 on.
 * The library is shared by the whole cluster, so it serves both.
 */
Datum
retries_worker_status(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Oid			userid = GetUserId();
	RetriesWorker copy[RETRIES_MAX_SLOTS];
	TimestampTz now;
	bool		reads_all;
	int			natts;

	InitMaterializedSRF(fcinfo, 0);
	natts = rsinfo->setDesc->natts;
	if (natts != WORKER_STATUS_COLS_V1_0 && natts != WORKER_STATUS_COLS_V1_1)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("retries.worker_status() is declared with %d columns, expected %d or %d",
						natts, WORKER_STATUS_COLS_V1_0, WORKER_STATUS_COLS_V1_1),
				 errhint("Run ALTER EXTENSION retries UPDATE.")));

	if (!retries_preloaded || !shmem_attached())
	{
		Datum		values[WORKER_STATUS_COLS] = {0};
		bool		nulls[WORKER_STATUS_COLS] = {true, true, false, true, true, true, true, true};

		values[2] = CStringGetTextDatum("not running: retries is not in shared_preload_libraries");
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
		return (Datum) 0;
	}

	shmem_copy_workers(copy);
	/* after the copy: no busy period began later than this */
	now = clock_system_now();
	reads_all = access_reads_all_calls(userid);

	for (int i = 0; i < RETRIES_MAX_SLOTS; i++)
	{
		RetriesWorker *w = &copy[i];
		Datum		values[WORKER_STATUS_COLS];
		bool		nulls[WORKER_STATUS_COLS] = {false};

		/* the workers of other databases are for those who read all */
		if (!w->in_use || w->pid == 0 ||
			(w->dboid != MyDatabaseId && !reads_all))
			continue;
		values[0] = Int32GetDatum(w->pid);
		values[1] = ObjectIdGetDatum(w->dboid);
		values[2] = CStringGetTextDatum(worker_state_name(w->state));
		values[3] = Int64GetDatum(w->current_call);
		nulls[3] = w->current_call == 0 ||
			!access_may_read_call(userid, w->current_role);
		values[4] = TimestampTzGetDatum(w->since);
		nulls[4] = w->since == 0;
		values[5] = Int64GetDatum(w->calls_run);
		values[6] = Int64GetDatum(w->errors);
		if (!reads_all)
		{
			/*
			 * What the worker does, and has done, is other roles' calls as
			 * much as the role's own: as pg_stat_activity shows another
			 * role's session, the row shows the worker, and its state only
			 * while it runs a call of the role's
			 */
			for (int col = 2; col < WORKER_STATUS_COLS; col++)
				nulls[col] = true;
			if (w->current_call != 0 && access_may_read_call(userid, w->current_role))
			{
				nulls[2] = false;
				nulls[3] = false;
				nulls[4] = w->since == 0;
			}
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
			continue;
		}
		if (natts >= WORKER_STATUS_COLS_V1_1)
		{
			Interval   *busy = palloc0(sizeof(Interval));

			/* the periods that ended, and the one under way */
			busy->time = w->busy_us;
			if (w->busy_since != 0)
				busy->time += Max(now - w->busy_since, 0);
			values[7] = IntervalPGetDatum(busy);
		}
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}

/*
 * retries_running_calls -- SQL function retries.running_calls(): ids of the
 * calls the workers of this database are running now
 *
 * A running call's row says 'scheduled' until its attempt commits; the
 * views show 'running' for the ids returned here.  Like retries.workers, it
 * lists only the calls the current role may see.
 */
Datum
retries_running_calls(PG_FUNCTION_ARGS)
{
	Oid			userid = GetUserId();
	RetriesWorker copy[RETRIES_MAX_SLOTS];
	Datum		ids[RETRIES_MAX_SLOTS];
	int			n = 0;

	if (!shmem_attached())
		PG_RETURN_ARRAYTYPE_P(construct_empty_array(INT8OID));

	/* copy under the lock; the visibility check reads the catalogs */
	shmem_copy_workers(copy);

	for (int i = 0; i < RETRIES_MAX_SLOTS; i++)
	{
		RetriesWorker *w = &copy[i];

		if (w->in_use && w->dboid == MyDatabaseId && w->current_call != 0 &&
			access_may_read_call(userid, w->current_role))
			ids[n++] = Int64GetDatum(w->current_call);
	}
	PG_RETURN_ARRAYTYPE_P(construct_array(ids, n, INT8OID, 8, true, TYPALIGN_DOUBLE));
}
