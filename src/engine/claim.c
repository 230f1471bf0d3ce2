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
 * One role per batch (doc/operations.md, "Containment").  A batch transaction
 * holds the calls of one role only: what one call does to its transaction or
 * its process (a FATAL error, a worker that must exit) can then roll back or
 * run again only calls of the same role.  A batch first picks its role and
 * that role's earliest due call (claim_heads), then takes more of the same
 * role's calls (claim_prioritized and claim_begin, given the role).
 *
 * Fairness between roles.  Earliest first alone would let one role's
 * backlog of due calls hold back every other role's due calls until it is
 * drained.  So claim_heads goes round the roles that have due calls, from
 * the one after the role of the worker's last batch, through index
 * call_data_due_by_role (version 1.2): each role with a due call has a
 * batch in turn, whatever the others have due.  A role that the worker
 * loop says to pass over (one that holds all the other workers of the
 * database) is taken only if no other role has a call to claim.  Without
 * the index (a database at 1.1), or when every role's earliest due call is
 * locked by another worker, the batch takes the role of the first call it
 * can claim at all.
 *
 * Priorities (version 1.2).  Within a role's batch, its due calls of
 * priority above 0 come first, highest first, then those of priority 0,
 * earliest first.  A role's calls below 0 run when it has no call of
 * priority 0 or above due: its turn then makes a batch of its calls below
 * 0 (version 1.7; before, they gave up their role's turn and ran only when
 * no call of 0 or above was due, of any role, so that another role's
 * stream of due calls held them back for as long as it lasted).  Fairness
 * comes first: a role cannot take the other roles' turns by raising its
 * calls' priority, and another role's calls cannot take its turn by their
 * number.
 * Calls of priority 0 are in index call_data_due, the others in
 * call_data_prioritized, on (priority, next_attempt): claim_prioritized
 * walks the distinct priorities in it (one index probe each, as
 * claim_heads walks roles) and reads only the due calls of each, so that
 * neither future calls of a high priority nor a backlog of low ones are
 * scanned by every batch.
 *
 * Arguments.  A claimed call's arguments are copied into the batch's
 * memory only if they are small (CLAIM_INLINE_ARGS); larger ones stay on
 * disk, and are read when the call's attempt starts (execute.c), so that a
 * batch never holds more than a bounded amount of other calls' arguments.
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

#include "access/detoast.h"
#include "catalog/pg_type.h"
#include "executor/executor.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "nodes/params.h"
#include "tcop/dest.h"
#include "utils/array.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/plancache.h"
#include "utils/resowner.h"
#include "utils/snapmgr.h"

#include "base/base.h"
#include "base/compat.h"
#include "engine/claim.h"
#include "engine/execute.h"

/* Receives the claimed rows and copies them into the batch's calls */
typedef struct ClaimReceiver
{
	DestReceiver pub;
	RetriesCall *calls;			/* where the next row goes */
	int			got;			/* rows received in this step */
} ClaimReceiver;

static void copy_call(RetriesCall *call, Datum *values, bool *nulls);

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
 */
static bool
claim_receive(TupleTableSlot *slot, DestReceiver *self)
{
	ClaimReceiver *r = (ClaimReceiver *) self;

	slot_getallattrs(slot);
	copy_call(&r->calls[r->got], slot->tts_values, slot->tts_isnull);
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
 * What claim_heads() looks at: calls of priority 0 and above (the
 * predicate of call_data_due_by_role; it runs only from version 1.2)
 */
#define HEAD_PRIORITY " AND priority OPERATOR(pg_catalog.>=) 0"

/* ... and at calls below 0 (call_data_low_by_role's, version 1.7) */
#define LOW_PRIORITY " AND priority OPERATOR(pg_catalog.<) 0"

/* Most roles claim_heads() looks at in one batch */
#define HEADS_MAX_ROLES			32

/* Largest arguments (as stored, uncompressed) copied when claimed */
#define CLAIM_INLINE_ARGS		(64 * 1024)

/*
 * The columns every claim returns, in copy_call()'s order; the one before
 * last says whether the call's last attempt was interrupted, the last
 * whether a key_window spaces its key's deliveries (flow/key_window.c)
 */
#define CLAIM_COLUMNS \
	"id, policy_id, args, attempts, max_attempts, scheduled_by::pg_catalog.oid," \
	" coalesce(attempts OPERATOR(pg_catalog.>) 0" \
	"  AND last_sqlstate OPERATOR(pg_catalog.=) '57P01', false)," \
	KEY_WINDOW " IS NOT NULL," PRIORITY_COLUMN
#define CLAIM_NCOLUMNS			9

/*
 * The due calls of one role: the row comparisons bound an index scan of
 * call_data_due_by_role to the role's due calls ($4 is the role)
 */
#define OF_ROLE(due) \
	" AND (scheduled_by::pg_catalog.oid, next_attempt)" \
	"  OPERATOR(pg_catalog.>=) ($4, '-infinity'::pg_catalog.timestamptz)" \
	" AND (scheduled_by::pg_catalog.oid, next_attempt)" \
	"  OPERATOR(pg_catalog.<=) ($4, " due ")"

/*
 * copy_call -- copy a claimed row (CLAIM_COLUMNS) into a RetriesCall; the
 * arguments, if small, go into the transaction's memory, which the calls'
 * subtransactions do not free; large ones are left to be read later
 */
static void
copy_call(RetriesCall *call, Datum *values, bool *nulls)
{
	MemoryContext oldcxt = MemoryContextSwitchTo(TopTransactionContext);
	struct varlena *args = (struct varlena *) DatumGetPointer(values[2]);

	call->id = DatumGetInt64(values[0]);
	call->policy_id = DatumGetInt32(values[1]);
	call->args_deferred = VARATT_IS_EXTENDED(args) &&
		toast_raw_datum_size(values[2]) > CLAIM_INLINE_ARGS;
	call->args = call->args_deferred ? NULL : DatumGetJsonbPCopy(values[2]);
	call->attempts = DatumGetInt32(values[3]);
	call->max_attempts = nulls[4] ? 0 : DatumGetInt32(values[4]);
	call->role = DatumGetObjectId(values[5]);
	call->lone = DatumGetBool(values[6]);
	call->windowed = DatumGetBool(values[7]);
	call->priority = DatumGetInt32(values[8]);
	MemoryContextSwitchTo(oldcxt);
}

/*
 * copy_claimed -- copy the rows of the last SPI statement, a claim's
 * (CLAIM_COLUMNS), into calls[0..]; returns how many
 */
static int
copy_claimed(RetriesCall *calls)
{
	int			n = (int) SPI_processed;

	for (int i = 0; i < n; i++)
	{
		Datum		row[CLAIM_NCOLUMNS];
		bool		nulls[CLAIM_NCOLUMNS];

		for (int c = 0; c < CLAIM_NCOLUMNS; c++)
			row[c] = SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc,
								   c + 1, &nulls[c]);
		copy_call(&calls[i], row, nulls);
	}
	SPI_freetuptable(SPI_tuptable);
	return n;
}

/*
 * lock_claimed -- lock the calls of 'ids' (nids Datums) that are still due
 * by 'now' and not locked by another worker, leaving out the 'nskip' of
 * 'skip' (which this batch may hold already: SKIP LOCKED does not skip
 * its own locks), and copy them into calls[0..], highest priority first,
 * then earliest; returns how many
 */
static int
lock_claimed(Datum *ids, int nids, TimestampTz now, const int64 *skip, int nskip,
			 RetriesCall *calls)
{
	static SPIPlanPtr plans[UNHELD_PLANS];
	SPIPlanPtr	plan;
	Oid			types[3] = {INT8ARRAYOID, TIMESTAMPTZOID, INT8ARRAYOID};
	Datum		values[3];

	values[0] = PointerGetDatum(construct_array(ids, nids, INT8OID, sizeof(int64),
												FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
	values[1] = TimestampTzGetDatum(now);
	values[2] = args_id_array(skip, nskip);
	/* version 1.2 and later only: its callers look for its indexes first */
	plan = plans_prepare_unheld(plans,
								"SELECT " CLAIM_COLUMNS
								" FROM retries.call_data"
								" WHERE id OPERATOR(pg_catalog.=) ANY ($1)"
								" AND id OPERATOR(pg_catalog.<>) ALL ($3)"
								" AND state OPERATOR(pg_catalog.=) 'scheduled'" NOT_HELD
								" AND next_attempt OPERATOR(pg_catalog.<=) $2"
								" ORDER BY priority DESC, next_attempt"
								" FOR UPDATE SKIP LOCKED",
								3, types);
	if (SPI_execute_plan(plan, values, NULL, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "retries: could not claim due calls");
	return copy_claimed(calls);
}

/*
 * The distinct priorities of claimable calls between $1 and $2 (other
 * than 0), highest first: one probe of call_data_prioritized each, of the
 * PRIORITIES_MAX highest at most (claims of any role, and databases older
 * than 1.7).  A walk of every priority in use, due or
 * not, cost 3.3 s beside 100,000 distinct ones, at every claim while a
 * call of a priority is due (or running, or locked: the twelfth hostile
 * review); calls of priorities below those are claimed by their role's
 * turn (claim_heads), as calls of priority 0 are.
 */
#define PRIORITIES_MAX	100
#define PRIORITIES_CTE \
	"WITH RECURSIVE p(priority, depth) AS (" \
	" SELECT (SELECT priority FROM retries.call_data" \
	"  WHERE state OPERATOR(pg_catalog.=) 'scheduled' AND NOT held" \
	"  AND priority OPERATOR(pg_catalog.<>) 0" \
	"  AND priority OPERATOR(pg_catalog.>=) $1 AND priority OPERATOR(pg_catalog.<=) $2" \
	"  ORDER BY priority DESC LIMIT 1), 1" \
	" UNION ALL" \
	" SELECT (SELECT c.priority FROM retries.call_data c" \
	"  WHERE c.state OPERATOR(pg_catalog.=) 'scheduled' AND NOT c.held" \
	"  AND c.priority OPERATOR(pg_catalog.<>) 0" \
	"  AND c.priority OPERATOR(pg_catalog.>=) $1" \
	"  AND c.priority OPERATOR(pg_catalog.<) p.priority" \
	"  ORDER BY c.priority DESC LIMIT 1), p.depth OPERATOR(pg_catalog.+) 1" \
	" FROM p WHERE p.priority IS NOT NULL" \
	"  AND p.depth OPERATOR(pg_catalog.<) " CppAsString2(PRIORITIES_MAX) ")"

/*
 * The same walk over the calls of one role ($6), through
 * call_data_prioritized_by_role (version 1.7): the PRIORITIES_MAX highest
 * priorities of the role's own.  Over every role's (before), 100 calls of
 * as many high priorities that another role made due next year filled the
 * walk, and a role's due call of a lower priority waited for its role's
 * next turn, behind its calls of priority 0 (the thirteenth hostile
 * review).
 */
#define ROLE_PRIORITIES_CTE \
	"WITH RECURSIVE p(priority, depth) AS (" \
	" SELECT (SELECT priority FROM retries.call_data" \
	"  WHERE state OPERATOR(pg_catalog.=) 'scheduled' AND NOT held" \
	"  AND priority OPERATOR(pg_catalog.<>) 0" \
	"  AND (scheduled_by::pg_catalog.oid, priority) OPERATOR(pg_catalog.>=) ($6, $1)" \
	"  AND (scheduled_by::pg_catalog.oid, priority) OPERATOR(pg_catalog.<=) ($6, $2)" \
	"  ORDER BY scheduled_by DESC, priority DESC LIMIT 1), 1" \
	" UNION ALL" \
	" SELECT (SELECT c.priority FROM retries.call_data c" \
	"  WHERE c.state OPERATOR(pg_catalog.=) 'scheduled' AND NOT c.held" \
	"  AND c.priority OPERATOR(pg_catalog.<>) 0" \
	"  AND (c.scheduled_by::pg_catalog.oid, c.priority) OPERATOR(pg_catalog.>=) ($6, $1)" \
	"  AND (c.scheduled_by::pg_catalog.oid, c.priority) OPERATOR(pg_catalog.<) ($6, p.priority)" \
	"  ORDER BY c.scheduled_by DESC, c.priority DESC LIMIT 1), p.depth OPERATOR(pg_catalog.+) 1" \
	" FROM p WHERE p.priority IS NOT NULL" \
	"  AND p.depth OPERATOR(pg_catalog.<) " CppAsString2(PRIORITIES_MAX) ")"

/* The claimable calls of a priority other than 0 */
#define PRIORITIZED \
	" FROM retries.call_data WHERE state OPERATOR(pg_catalog.=) 'scheduled'" \
	" AND NOT held AND priority OPERATOR(pg_catalog.<>) 0"

/*
 * any_prioritized -- is there a claimable call of a priority other than 0,
 * due by 'now' (from version 1.7; before, due or not)?
 *
 * Mostly there is none, and this probe of call_data_prioritized_due (or
 * call_data_prioritized), a plan of two nodes, then spares the walk of
 * priorities below, whose plan takes longer to start than to run: with a
 * call made at a time, those two were 15 % of a worker's time between a
 * call's commit and its start.  And the walk visits every priority that a
 * claimable call has, due or not: 100,000 calls of as many priorities due
 * next year made each walk last 3.3 s, at every claim of every role (the
 * eleventh hostile review); it runs only when one of them is due.
 */
static bool
any_prioritized(TimestampTz now)
{
	static SPIPlanPtr plans[2];
	bool		due = schema_retries_version() >= SCHEMA_1_7;
	Datum		values[1] = {TimestampTzGetDatum(now)};
	bool		isnull;
	bool		any;

	if (plans[due] == NULL)
		plans_prepare_generic(&plans[due],
							  due ? "SELECT EXISTS (SELECT" PRIORITIZED
							  " AND next_attempt OPERATOR(pg_catalog.<=) $1)"
							  : "SELECT EXISTS (SELECT" PRIORITIZED ")",
							  due ? 1 : 0, (Oid[]) {TIMESTAMPTZOID});
	if (plans_execute_by_index(plans[due], values, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "retries: could not look for calls of a priority");
	any = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc,
									 1, &isnull));
	SPI_freetuptable(SPI_tuptable);
	return any;
}

/*
 * claim_prioritized -- claim up to 'limit' due calls of priority above 0
 * ('above') or below it, of 'role' (or of any role, if InvalidOid),
 * highest priority first, then earliest, into calls[0..], leaving out the
 * 'nskip' calls of 'skip'; returns how many
 *
 * Two statements, as claim_heads(): the first finds the calls and locks
 * them, skipping those another batch holds (its running calls, which stay
 * due: the first of a priority, found and then skipped by the second
 * statement, kept a role's other calls of it from being claimed, the
 * thirteenth hostile review), the second reads them in order.  Returns 0
 * in a database whose extension is older than 1.2, where every call has
 * priority 0.
 */
int
claim_prioritized(RetriesCall *calls, int limit, TimestampTz now, bool above,
				  Oid role, const int64 *skip, int nskip)
{
	static SPIPlanPtr any_role_plan = NULL;
	static SPIPlanPtr role_plan = NULL;
	Oid			types[6] = {INT4OID, INT4OID, TIMESTAMPTZOID, INT8ARRAYOID, INT4OID,
	OIDOID};
	Datum		values[6];
	Datum	   *ids;
	int			nids;
	SPIPlanPtr	plan;

	if (limit <= 0 || schema_retries_version() < SCHEMA_1_2 || !any_prioritized(now))
		return 0;
	values[0] = Int32GetDatum(above ? 1 : PG_INT32_MIN);
	values[1] = Int32GetDatum(above ? PG_INT32_MAX : -1);
	values[2] = TimestampTzGetDatum(now);
	values[3] = args_id_array(skip, nskip);
	values[4] = Int32GetDatum(limit);
	values[5] = ObjectIdGetDatum(role);
	if (OidIsValid(role) && schema_retries_version() >= SCHEMA_1_7)
	{
		plans_prepare_generic(&role_plan,
							  ROLE_PRIORITIES_CTE
							  " SELECT d.id FROM p CROSS JOIN LATERAL"
							  " (SELECT id FROM retries.call_data"
							  "  WHERE state OPERATOR(pg_catalog.=) 'scheduled' AND NOT held"
							  "  AND priority OPERATOR(pg_catalog.<>) 0"
							  "  AND (scheduled_by::pg_catalog.oid, priority, next_attempt)"
							  "   OPERATOR(pg_catalog.>=)"
							  "   ($6, p.priority, '-infinity'::pg_catalog.timestamptz)"
							  "  AND (scheduled_by::pg_catalog.oid, priority, next_attempt)"
							  "   OPERATOR(pg_catalog.<=) ($6, p.priority, $3)"
							  "  AND id OPERATOR(pg_catalog.<>) ALL ($4)"
							  "  ORDER BY scheduled_by, priority, next_attempt LIMIT $5"
							  "  FOR UPDATE SKIP LOCKED) d"
							  " WHERE p.priority IS NOT NULL"
							  " LIMIT $5",
							  6, types);
		plan = role_plan;
	}
	else
	{
		plans_prepare_generic(&any_role_plan,
							  PRIORITIES_CTE
							  " SELECT d.id FROM p CROSS JOIN LATERAL"
							  " (SELECT id FROM retries.call_data"
							  "  WHERE state OPERATOR(pg_catalog.=) 'scheduled' AND NOT held"
							  "  AND priority OPERATOR(pg_catalog.<>) 0"
							  "  AND (priority, next_attempt)"
							  "   OPERATOR(pg_catalog.>=) (p.priority, '-infinity'::pg_catalog.timestamptz)"
							  "  AND (priority, next_attempt)"
							  "   OPERATOR(pg_catalog.<=) (p.priority, $3)"
							  "  AND id OPERATOR(pg_catalog.<>) ALL ($4)"
							  "  AND ($6 OPERATOR(pg_catalog.=) 0"
							  "   OR scheduled_by::pg_catalog.oid OPERATOR(pg_catalog.=) $6)"
							  "  ORDER BY priority, next_attempt LIMIT $5"
							  "  FOR UPDATE SKIP LOCKED) d"
							  " WHERE p.priority IS NOT NULL"
							  " LIMIT $5",
							  6, types);
		plan = any_role_plan;
	}
	if (plans_execute_by_index(plan, values, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "retries: could not look for due calls by priority");
	nids = (int) SPI_processed;
	if (nids == 0)
		return 0;
	ids = palloc(sizeof(Datum) * nids);
	for (int i = 0; i < nids; i++)
	{
		bool		isnull;

		ids[i] = SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull);
	}
	SPI_freetuptable(SPI_tuptable);
	return lock_claimed(ids, nids, now, skip, nskip, calls);
}

/*
 * claim_next_prioritized -- when the earliest claimable call of a priority
 * other than 0 is due, of those due after 'after'; 0 if none is (or the
 * extension is older than 1.2)
 */
TimestampTz
claim_next_prioritized(TimestampTz after)
{
	static SPIPlanPtr plan = NULL;
	static SPIPlanPtr next_plan = NULL;
	Oid			types[3] = {INT4OID, INT4OID, TIMESTAMPTZOID};
	Datum		values[3];
	bool		isnull;
	Datum		d;

	if (schema_retries_version() < SCHEMA_1_2)
		return 0;
	if (schema_retries_version() >= SCHEMA_1_7)
	{
		/* the first entry after 'after' of call_data_prioritized_due */
		values[0] = TimestampTzGetDatum(after);
		plans_prepare_generic(&next_plan,
							  "SELECT pg_catalog.min(next_attempt)" PRIORITIZED
							  " AND next_attempt OPERATOR(pg_catalog.>) $1",
							  1, (Oid[]) {TIMESTAMPTZOID});
		if (plans_execute_by_index(next_plan, values, false, 1) != SPI_OK_SELECT)
			elog(ERROR, "retries: could not find the next due call by priority");
		d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
		return isnull ? 0 : DatumGetTimestampTz(d);
	}
	if (!any_prioritized(0))
		return 0;
	values[0] = Int32GetDatum(PG_INT32_MIN);
	values[1] = Int32GetDatum(PG_INT32_MAX);
	values[2] = TimestampTzGetDatum(after);
	plans_prepare_generic(&plan,
						  PRIORITIES_CTE
						  " SELECT pg_catalog.min(d.next_attempt) FROM p CROSS JOIN LATERAL"
						  " (SELECT next_attempt FROM retries.call_data"
						  "  WHERE state OPERATOR(pg_catalog.=) 'scheduled' AND NOT held"
						  "  AND priority OPERATOR(pg_catalog.<>) 0"
						  "  AND (priority, next_attempt) OPERATOR(pg_catalog.>) (p.priority, $3)"
						  "  AND (priority, next_attempt)"
						  "   OPERATOR(pg_catalog.<=) (p.priority, 'infinity'::pg_catalog.timestamptz)"
						  "  ORDER BY priority, next_attempt LIMIT 1) d"
						  " WHERE p.priority IS NOT NULL",
						  3, types);
	if (plans_execute_by_index(plan, values, false, 1) != SPI_OK_SELECT)
		elog(ERROR, "retries: could not find the next due call by priority");
	if (SPI_processed == 0)
		return 0;
	d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	return isnull ? 0 : DatumGetTimestampTz(d);
}

/*
 * The next role after 'after' (SQL text: "" for the first) that has
 * scheduled calls of 'which' priorities, through the index whose predicate
 * they are: call_data_due_by_role (HEAD_PRIORITY) or call_data_low_by_role
 * (LOW_PRIORITY)
 */
#define NEXT_ROLE(which, after) \
	"(SELECT scheduled_by::pg_catalog.oid FROM retries.call_data" \
	" WHERE state OPERATOR(pg_catalog.=) 'scheduled'" NOT_HELD which after \
	" ORDER BY scheduled_by LIMIT 1)"

/* ... of any priority: from version 1.7, those below 0 too */
#define NEXT_ROLE_ANY(after) \
	"LEAST(" NEXT_ROLE(HEAD_PRIORITY, after) ", " \
	NEXT_ROLE(LOW_PRIORITY, after) ")"

/* The earliest due call of 'which' priorities of role r.role, and 'low' */
#define ROLE_HEAD(which, low) \
	"(SELECT id, " low " AS low FROM retries.call_data" \
	" WHERE state OPERATOR(pg_catalog.=) 'scheduled'" NOT_HELD which \
	" AND (scheduled_by::pg_catalog.oid, next_attempt)" \
	"  OPERATOR(pg_catalog.>=) (r.role, '-infinity'::pg_catalog.timestamptz)" \
	" AND (scheduled_by::pg_catalog.oid, next_attempt)" \
	"  OPERATOR(pg_catalog.<=) (r.role, $2)" \
	" ORDER BY scheduled_by, next_attempt LIMIT 1)"

/*
 * The query of claim_heads(): the roles in turn, each with its head, using
 * 'next' to go from role to role and 'head' to find a role's head
 */
#define HEADS_QUERY(next, head) \
	"WITH RECURSIVE" \
	" after_last(role) AS (" \
	"  SELECT " next(" AND scheduled_by OPERATOR(pg_catalog.>) $1") \
	"  UNION ALL" \
	"  SELECT " next(" AND scheduled_by OPERATOR(pg_catalog.>) a.role") \
	"  FROM after_last a WHERE a.role IS NOT NULL)," \
	" up_to_last(role) AS (" \
	"  SELECT " next("") \
	"  UNION ALL" \
	"  SELECT " next(" AND scheduled_by OPERATOR(pg_catalog.>) u.role") \
	"  FROM up_to_last u WHERE u.role OPERATOR(pg_catalog.<) $1)," \
	" roles AS (" \
	"  SELECT role, 1 AS lap FROM after_last WHERE role IS NOT NULL" \
	"  UNION ALL" \
	"  SELECT role, 2 FROM up_to_last" \
	"   WHERE role OPERATOR(pg_catalog.<=) $1 AND $1 OPERATOR(pg_catalog.<>) 0" \
	"  LIMIT $3)" \
	" SELECT r.role, h.id, h.low FROM roles r" \
	" LEFT JOIN LATERAL " head " h ON true" \
	" ORDER BY r.lap, r.role"

#define NEXT_ROLE_HIGH(after) NEXT_ROLE(HEAD_PRIORITY, after)

/*
 * claim_of_role -- claim the first due call of 'role' (or of any role, if
 * InvalidOid) that can be claimed, of a priority above 0, then of 0, then
 * below 0 (*low then set), leaving out the 'nskip' calls of 'skip';
 * returns 1, or 0 if none can be
 */
int
claim_of_role(RetriesCall *calls, TimestampTz now, Oid role,
			  const int64 *skip, int nskip, bool *low)
{
	int			n = claim_prioritized(calls, 1, now, true, role, skip, nskip);

	if (n == 0)
	{
		Claim	   *claim = claim_begin(1, now, role, skip, nskip);

		n = claim_more(claim, calls, 1);
		claim_end(claim);
	}
	if (n == 0)
	{
		n = claim_prioritized(calls, 1, now, false, role, skip, nskip);
		*low = n > 0;
	}
	return n;
}

/*
 * claim_heads -- claim the earliest due call of one role: the first, going
 * round the roles that have due calls, whose earliest due call is not
 * locked by another worker; returns 1, or 0 if none is.  A role's head is
 * its earliest due call of priority 0 or above, or if it has none, from
 * version 1.7, its earliest below 0 (*low is then set: the batch is of
 * such calls).  Before 1.7, roles with due calls below 0 only have no turn
 * (their calls run when no call of 0 or above is due: claim_first).
 *
 * The roles are taken in OID order, round from the one after *last_role,
 * which is left at the role claimed (or at the last one looked at), so
 * that the next batch goes on from there; at most HEADS_MAX_ROLES roles
 * are looked at.  The 'navoid' roles of 'avoid' are taken only if no
 * other role's call can be claimed, and never if 'strict'; a role whose
 * head is locked gives, at its turn, its first due call that is not
 * (claim_of_role).  The first statement walks the roles
 * that have scheduled calls, one index probe each (the recursive CTEs
 * skip from one role to the next in call_data_due_by_role, and in
 * call_data_low_by_role), and finds each one's earliest due call (the row
 * comparisons bound that scan to the role's due calls; "scheduled_by = r
 * AND next_attempt <= now" could have the planner walk call_data_due
 * through every other role's due calls instead); then they are locked one
 * at a time (SKIP LOCKED: a call that another worker holds is being
 * served), until one is: a batch holds the calls of one role only.  Leaves
 * out the 'nskip' calls of 'skip'.  Does nothing (and returns 0) in a
 * database whose extension is older than 1.2, which lacks the index that
 * makes this cheap.
 */
int
claim_heads(RetriesCall *calls, TimestampTz now, Oid *last_role,
			const Oid *avoid, int navoid, const int64 *skip, int nskip,
			bool strict, bool *low)
{
	static SPIPlanPtr high_plans[UNHELD_PLANS];
	static SPIPlanPtr any_plans[UNHELD_PLANS];
	SPIPlanPtr	plan;
	Oid			find_types[3] = {OIDOID, TIMESTAMPTZOID, INT4OID};
	Datum		find_values[3];
	Oid		   *roles;
	Datum	   *ids;
	bool	   *lows;
	int			nids;

	*low = false;
	if (schema_retries_version() < SCHEMA_1_2)
		return 0;

	find_values[0] = ObjectIdGetDatum(*last_role);
	find_values[1] = TimestampTzGetDatum(now);
	find_values[2] = Int32GetDatum(HEADS_MAX_ROLES);
	if (schema_retries_version() >= SCHEMA_1_7)
		plan = plans_prepare_unheld(any_plans,
									HEADS_QUERY(NEXT_ROLE_ANY,
												"(SELECT * FROM (" ROLE_HEAD(HEAD_PRIORITY, "false")
												" UNION ALL " ROLE_HEAD(LOW_PRIORITY, "true")
												") b ORDER BY low LIMIT 1)"),
									3, find_types);
	else
		plan = plans_prepare_unheld(high_plans,
									HEADS_QUERY(NEXT_ROLE_HIGH, ROLE_HEAD(HEAD_PRIORITY, "false")),
									3, find_types);
	if (SPI_execute_plan(plan, find_values, NULL, true, 0) != SPI_OK_SELECT)
		elog(ERROR, "retries: could not look for the due calls of each role");
	if (SPI_processed == 0)
		return 0;

	roles = palloc(sizeof(Oid) * SPI_processed);
	ids = palloc(sizeof(Datum) * SPI_processed);
	lows = palloc(sizeof(bool) * SPI_processed);
	nids = 0;
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		bool		isnull;
		Datum		d;

		*last_role = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[i],
													SPI_tuptable->tupdesc, 1, &isnull));
		d = SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2, &isnull);
		if (!isnull)
		{
			roles[nids] = *last_role;
			lows[nids] = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[i],
													SPI_tuptable->tupdesc, 3, &isnull));
			ids[nids++] = d;
		}
	}
	SPI_freetuptable(SPI_tuptable);

	/* the roles not to pass over first, then those (unless strict) */
	for (int pass = 0; pass < (strict ? 1 : 2); pass++)
		for (int i = 0; i < nids; i++)
		{
			bool		avoided = false;

			for (int a = 0; a < navoid; a++)
				avoided |= avoid[a] == roles[i];
			if (avoided != (pass == 1))
				continue;
			if (lock_claimed(&ids[i], 1, now, skip, nskip, calls) == 1)
			{
				*last_role = roles[i];
				*low = lows[i];
				return 1;
			}

			/*
			 * Its head is locked: another worker runs it (a long call; a call
			 * of another role's function, which that role may keep waiting),
			 * and the role may still have other calls due: its first one that
			 * can be claimed, at its turn (else a role whose head stayed
			 * locked would wait for every other role's backlog)
			 */
			if (claim_of_role(calls, now, roles[i], skip, nskip, low) == 1)
			{
				*last_role = roles[i];
				return 1;
			}
		}
	return 0;
}

/*
 * claim_begin -- start the query that claims up to 'limit' calls of
 * priority 0 due by 'now', of 'role' (or of any role, if InvalidOid),
 * earliest first, leaving out the 'nskip' calls of 'skip'; claim_more()
 * fetches them
 *
 * Called in the batch transaction, outside any call's subtransaction.  The
 * time is a parameter, not clock_timestamp() in the query: a volatile
 * function cannot bound the index scan, and a million future calls would
 * be read on every wake-up.
 *
 * The query reads with the batch's snapshot (the active one), as the rest
 * of the batch does: a call it claims is then one that the batch's reads
 * see, its policy and limit_key too.  With a newer snapshot, it claimed
 * calls made (of functions annotated) after the batch began, whose policy
 * and limit_key the batch then could not see: their per-key limit was not
 * applied (t/018 d).
 */
Claim *
claim_begin(int limit, TimestampTz now, Oid role, const int64 *skip, int nskip)
{
	static SPIPlanPtr any_plans[UNHELD_PLANS];
	static SPIPlanPtr role_plans[UNHELD_PLANS];
	SPIPlanPtr	plan;
	Oid			argtypes[4] = {INT4OID, TIMESTAMPTZOID, INT8ARRAYOID, OIDOID};
	int			nargs = OidIsValid(role) ? 4 : 3;
	CachedPlanSource *source;
	ParamListInfo params;
	Claim	   *claim;
	MemoryContext oldcxt;

	if (OidIsValid(role))
		plan = plans_prepare_unheld(role_plans,
									"SELECT " CLAIM_COLUMNS
									" FROM retries.call_data"
									" WHERE state OPERATOR(pg_catalog.=) 'scheduled'" NOT_HELD PRIORITY_ZERO
									OF_ROLE("$2")
									" AND id OPERATOR(pg_catalog.<>) ALL ($3)"
									" ORDER BY scheduled_by, next_attempt"
									" LIMIT $1"
									" FOR UPDATE SKIP LOCKED",
									4, argtypes);
	else
		plan = plans_prepare_unheld(any_plans,
									"SELECT " CLAIM_COLUMNS
									" FROM retries.call_data"
									" WHERE state OPERATOR(pg_catalog.=) 'scheduled'" NOT_HELD PRIORITY_ZERO
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

	params = makeParamList(nargs);
	params->numParams = nargs;
	params->params[0].value = Int32GetDatum(limit);
	params->params[0].isnull = false;
	params->params[0].pflags = PARAM_FLAG_CONST;
	params->params[0].ptype = INT4OID;
	params->params[1].value = TimestampTzGetDatum(now);
	params->params[1].isnull = false;
	params->params[1].pflags = PARAM_FLAG_CONST;
	params->params[1].ptype = TIMESTAMPTZOID;
	params->params[2].value = args_id_array(skip, nskip);
	params->params[2].isnull = false;
	params->params[2].pflags = PARAM_FLAG_CONST;
	params->params[2].ptype = INT8ARRAYOID;
	if (OidIsValid(role))
	{
		params->params[3].value = ObjectIdGetDatum(role);
		params->params[3].isnull = false;
		params->params[3].pflags = PARAM_FLAG_CONST;
		params->params[3].ptype = OIDOID;
	}

	claim->receiver.pub.receiveSlot = claim_receive;
	claim->receiver.pub.rStartup = claim_startup;
	claim->receiver.pub.rShutdown = claim_shutdown;
	claim->receiver.pub.rDestroy = claim_destroy;
	claim->receiver.pub.mydest = DestNone;

	/* the batch's resources: no call's subtransaction releases them */
	Assert(CurrentResourceOwner == TopTransactionResourceOwner);
	claim->cplan = GetCachedPlan(source, params, CurrentResourceOwner, NULL);
	claim->snapshot = RegisterSnapshot(GetActiveSnapshot());
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
	retries_executor_run(claim->query, (uint64) count);
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

/*
 * claim_ids -- claim those of the calls of 'ids' (nids) that are due by
 * 'now' and not locked by another worker, into calls[0..]; returns how
 * many
 */
int
claim_ids(RetriesCall *calls, const int64 *ids, int nids, TimestampTz now)
{
	static SPIPlanPtr plans[UNHELD_PLANS];
	SPIPlanPtr	plan;
	Oid			types[2] = {INT8ARRAYOID, TIMESTAMPTZOID};
	Datum		values[2];

	values[0] = args_id_array(ids, nids);
	values[1] = TimestampTzGetDatum(now);
	plan = plans_prepare_unheld(plans,
								"SELECT " CLAIM_COLUMNS
								" FROM retries.call_data"
								" WHERE id OPERATOR(pg_catalog.=) ANY ($1)"
								" AND state OPERATOR(pg_catalog.=) 'scheduled'" NOT_HELD
								" AND next_attempt OPERATOR(pg_catalog.<=) $2"
								" ORDER BY next_attempt"
								" FOR UPDATE SKIP LOCKED",
								2, types);
	if (plans_execute_by_index(plan, values, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "retries: could not claim calls by id");
	return copy_claimed(calls);
}
