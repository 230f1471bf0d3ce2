/*-------------------------------------------------------------------------
 *
 * claim.c
 *	  Claiming due calls for a batch, a few at a time, with an executor
 *	  that only the worker can reach.
 *
 * A batch claims its calls in steps (see worker.c): the claiming query
 * runs once, and each step fetches a few more of its rows, locking them
 * (FOR UPDATE SKIP LOCKED) as it goes.  Running the query again for each
 * step would scan again, each time, past every row that this batch and the
 * other workers have locked: with calls all due at the same moment, that
 * cost three times what the step itself does.
 *
 * A cursor (a portal) would keep the query's place, but portals are a
 * namespace that the called functions share with the worker: a call could
 * find it in pg_cursors, fetch other roles' calls from it, close it with
 * CLOSE ALL, or open one of its own under its name and have the worker run
 * forged rows as the superuser.  So the worker runs the query's executor
 * itself, as a portal would but without one: the plan, the executor state
 * and the rows it returns are in the worker's memory only, its resources
 * belong to the batch transaction, and the steps run between calls, never
 * inside one.  Each row is copied into the batch's array of calls as it
 * comes out.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/executor.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "nodes/params.h"
#include "tcop/dest.h"
#include "utils/array.h"
#include "utils/memutils.h"
#include "utils/plancache.h"
#include "utils/resowner.h"
#include "utils/snapmgr.h"

#include "claim.h"
#include "retries.h"

/* Receives the claimed rows and copies them into the batch's calls */
typedef struct ClaimReceiver
{
	DestReceiver pub;
	RetriesCall *calls;			/* where the next row goes */
	int			got;			/* rows received in this step */
} ClaimReceiver;

struct Claim
{
	MemoryContext cxt;			/* everything below lives here */
	CachedPlan *cplan;
	Snapshot	snapshot;
	QueryDesc  *query;
	ClaimReceiver receiver;
	bool		done;			/* the query returned all its rows */
};

/*
 * claim_receive -- DestReceiver method: one claimed row
 *
 * Columns: id, policy_id, args, attempts, max_attempts, scheduled_by.  The
 * arguments are copied into the transaction's memory, which the calls'
 * subtransactions do not free.
 */
static bool
claim_receive(TupleTableSlot *slot, DestReceiver *self)
{
	ClaimReceiver *r = (ClaimReceiver *) self;
	RetriesCall *call = &r->calls[r->got];
	MemoryContext oldcxt = MemoryContextSwitchTo(TopTransactionContext);

	slot_getallattrs(slot);
	call->id = DatumGetInt64(slot->tts_values[0]);
	call->policy_id = DatumGetInt32(slot->tts_values[1]);
	call->args = DatumGetJsonbPCopy(slot->tts_values[2]);
	call->attempts = DatumGetInt32(slot->tts_values[3]);
	call->max_attempts = slot->tts_isnull[4] ? 0 : DatumGetInt32(slot->tts_values[4]);
	call->role = DatumGetObjectId(slot->tts_values[5]);
	MemoryContextSwitchTo(oldcxt);
	r->got++;
	return true;
}

static void
claim_startup(DestReceiver *self, int operation, TupleDesc typeinfo)
{
}

static void
claim_shutdown(DestReceiver *self)
{
}

static void
claim_destroy(DestReceiver *self)
{
}

/*
 * claim_begin -- start the query that claims up to 'limit' calls due by
 * 'now', earliest first, leaving out the 'nskip' calls of 'skip';
 * claim_more() fetches them
 *
 * Called in the batch transaction, outside any call's subtransaction.  The
 * time is a parameter, not clock_timestamp() in the query: a volatile
 * function cannot bound the index scan, and a million future calls would
 * be read on every wake-up.
 */
Claim *
claim_begin(int limit, TimestampTz now, const int64 *skip, int nskip)
{
	static SPIPlanPtr plan = NULL;
	Oid			argtypes[3] = {INT4OID, TIMESTAMPTZOID, INT8ARRAYOID};
	CachedPlanSource *source;
	ParamListInfo params;
	Claim	   *claim;
	MemoryContext oldcxt;

	retries_prepare_kept(&plan,
						 "SELECT id, policy_id, args, attempts, max_attempts,"
						 " scheduled_by::pg_catalog.oid"
						 " FROM retries.call_data"
						 " WHERE state OPERATOR(pg_catalog.=) 'scheduled'"
						 " AND next_attempt OPERATOR(pg_catalog.<=) $2"
						 " AND id OPERATOR(pg_catalog.<>) ALL ($3)"
						 " ORDER BY next_attempt"
						 " LIMIT $1"
						 " FOR UPDATE SKIP LOCKED",
						 3, argtypes);
	source = linitial(SPI_plan_get_plan_sources(plan));

	oldcxt = MemoryContextSwitchTo(TopTransactionContext);
	claim = palloc0(sizeof(Claim));
	claim->cxt = AllocSetContextCreate(TopTransactionContext, "retries claim",
									   ALLOCSET_DEFAULT_SIZES);
	MemoryContextSwitchTo(claim->cxt);

	params = makeParamList(3);
	params->numParams = 3;
	params->params[0].value = Int32GetDatum(limit);
	params->params[0].isnull = false;
	params->params[0].pflags = PARAM_FLAG_CONST;
	params->params[0].ptype = INT4OID;
	params->params[1].value = TimestampTzGetDatum(now);
	params->params[1].isnull = false;
	params->params[1].pflags = PARAM_FLAG_CONST;
	params->params[1].ptype = TIMESTAMPTZOID;
	{
		Datum	   *ids = palloc(sizeof(Datum) * Max(nskip, 1));

		for (int i = 0; i < nskip; i++)
			ids[i] = Int64GetDatum(skip[i]);
		params->params[2].value =
			PointerGetDatum(construct_array(ids, nskip, INT8OID, sizeof(int64),
											FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
	}
	params->params[2].isnull = false;
	params->params[2].pflags = PARAM_FLAG_CONST;
	params->params[2].ptype = INT8ARRAYOID;

	claim->receiver.pub.receiveSlot = claim_receive;
	claim->receiver.pub.rStartup = claim_startup;
	claim->receiver.pub.rShutdown = claim_shutdown;
	claim->receiver.pub.rDestroy = claim_destroy;
	claim->receiver.pub.mydest = DestNone;

	/* the batch's resources: no call's subtransaction releases them */
	Assert(CurrentResourceOwner == TopTransactionResourceOwner);
	claim->cplan = GetCachedPlan(source, params, CurrentResourceOwner, NULL);
	claim->snapshot = RegisterSnapshot(GetTransactionSnapshot());
	claim->query = CreateQueryDesc(linitial_node(PlannedStmt, claim->cplan->stmt_list),
								   source->query_string, claim->snapshot,
								   InvalidSnapshot, &claim->receiver.pub,
								   params, NULL, 0);
	PushActiveSnapshot(claim->snapshot);
	ExecutorStart(claim->query, 0);
	PopActiveSnapshot();

	MemoryContextSwitchTo(oldcxt);
	return claim;
}

/*
 * claim_more -- claim up to 'count' more calls into calls[0..]; returns
 * how many it got, fewer than 'count' once no more are due
 */
int
claim_more(Claim *claim, RetriesCall *calls, int count)
{
	MemoryContext oldcxt;

	if (claim->done || count <= 0)
		return 0;
	Assert(CurrentResourceOwner == TopTransactionResourceOwner);

	claim->receiver.calls = calls;
	claim->receiver.got = 0;
	oldcxt = MemoryContextSwitchTo(claim->cxt);
	PushActiveSnapshot(claim->snapshot);
	ExecutorRun(claim->query, ForwardScanDirection, (uint64) count, false);
	PopActiveSnapshot();
	MemoryContextSwitchTo(oldcxt);

	if (claim->receiver.got < count)
		claim->done = true;
	return claim->receiver.got;
}

/*
 * claim_end -- finish the query and free what it held; the claimed rows
 * stay locked until the batch ends
 */
void
claim_end(Claim *claim)
{
	MemoryContext oldcxt = MemoryContextSwitchTo(claim->cxt);

	PushActiveSnapshot(claim->snapshot);
	ExecutorFinish(claim->query);
	ExecutorEnd(claim->query);
	PopActiveSnapshot();
	FreeQueryDesc(claim->query);
	UnregisterSnapshot(claim->snapshot);
	ReleaseCachedPlan(claim->cplan, CurrentResourceOwner);
	MemoryContextSwitchTo(oldcxt);
	MemoryContextDelete(claim->cxt);
	pfree(claim);
}
