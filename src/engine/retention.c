/*-------------------------------------------------------------------------
 *
 * retention.c
 *	  Deleting finished calls, and their attempts, once retries.retention
 *	  has passed.
 *
 * The worker prunes a small batch at a time, each in a transaction of its
 * own, so that pruning never holds the calls up (retention_prune_round).  Rows
 * are taken FOR UPDATE SKIP LOCKED: a session that holds a finished call
 * locked keeps it until a later round.  A finished call with followers
 * not yet released or cancelled (chains.c) is kept until they are.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/builtins.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "base/base.h"
#include "engine/batch.h"
#include "engine/retention.h"
#include "engine/wslot.h"
#include "tables/tables.h"

/* How many calls a pruning transaction deletes at most */
#define PRUNE_BATCH				1000

/*
 * retention_prune -- delete up to 'limit' finished calls older than
 * retries.retention, and their attempts; how many calls were deleted.
 * Runs inside the caller's transaction and SPI connection.
 */
uint64
retention_prune(int limit)
{
	return calls_prune_finished(retries_retention, limit,
								schema_retries_version() >= SCHEMA_1_2);
}

/*
 * retention_prune_events -- delete up to 'limit' events (1.6) emitted
 * longer than retries.retention ago; how many.  Runs inside the caller's
 * transaction and SPI connection.
 */
uint64
retention_prune_events(int limit)
{
	static SPIPlanPtr plan = NULL;
	Oid			argtypes[2] = {TEXTOID, INT4OID};
	Datum		values[2];

	values[0] = CStringGetTextDatum(retries_retention);
	values[1] = Int32GetDatum(limit);
	plans_prepare_kept(&plan,
					   "DELETE FROM retries.event_data"
					   " WHERE ctid OPERATOR(pg_catalog.=) ANY (ARRAY("
					   "  SELECT ctid FROM retries.event_data"
					   "  WHERE emitted_at OPERATOR(pg_catalog.<) (pg_catalog.now()"
					   "   OPERATOR(pg_catalog.-) $1::pg_catalog.interval)"
					   "  LIMIT $2 FOR UPDATE SKIP LOCKED))",
					   2, argtypes);
	if (SPI_execute_plan(plan, values, NULL, false, 0) != SPI_OK_DELETE)
		elog(ERROR, "retries: could not prune events");
	return SPI_processed;
}

/*
 * retention_prune_round -- delete finished calls (and their attempts) older
 * than retries.retention, and the events and name locks done with, a small
 * batch per transaction so that pruning never holds up the calls; in the
 * worker, outside any transaction, for the extension it serves
 */
void
retention_prune_round(Oid served)
{
	TimestampTz start = clock_system_now();

	for (;;)
	{
		uint64		deleted;

		wslot_start_transaction();
		SPI_connect();
		PushActiveSnapshot(GetTransactionSnapshot());
		if (wslot_lock_extension() != served)
		{
			/* dropped: the batch will see it */
			PopActiveSnapshot();
			SPI_finish();
			wslot_commit_transaction();
			break;
		}

		deleted = retention_prune(PRUNE_BATCH);
		if (schema_retries_version() >= SCHEMA_1_6)
			deleted = Max(deleted, retention_prune_events(PRUNE_BATCH));
		if (schema_retries_version() >= SCHEMA_1_7)
			deleted = Max(deleted, tables_prune_name_locks(PRUNE_BATCH));
		PopActiveSnapshot();
		SPI_finish();
		wslot_commit_transaction();

		if (deleted < PRUNE_BATCH ||
			TimestampDifferenceExceeds(start, clock_system_now(), BATCH_TIME_MS))
			break;
	}
}
