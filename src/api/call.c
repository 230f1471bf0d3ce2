/*-------------------------------------------------------------------------
 *
 * call.c
 *	  retries.call(): scheduling a call of an annotated function.
 *
 * The call is checked completely before anything is stored: the function
 * exists, the current role may execute it, it is annotated, and its
 * arguments convert to the parameter types.  The call runs as the role that
 * scheduled it (current_user here), under the policy current now.
 *
 * A dedupe key makes scheduling idempotent per role: while that role has a
 * call with the same key, the existing call's id is returned and nothing
 * is scheduled.  From version 1.2 that holds for as long as the call is
 * kept, finished or not, so that a request sent again after its call
 * succeeded does not run it again; 1.1 compared unfinished calls only.  A
 * unique index over (role, hash of the key) settles races between
 * concurrent transactions.
 *
 * With after, the call waits for other calls to succeed first (see
 * chains.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/dependency.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "commands/sequence.h"
#include "executor/executor.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "storage/proc.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/regproc.h"
#include "utils/rel.h"
#include "utils/resowner.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"

#include "api/api.h"
#include "base/base.h"
#include "base/compat.h"
#include "shmem/shmem.h"
#include "tables/tables.h"
#include "xact/xact.h"

PG_FUNCTION_INFO_V1(retries_call);
PG_FUNCTION_INFO_V1(retries_call_outcome);

/*
 * What the latest retries.call() of this transaction did
 * (retries.call_outcome): NULL before any, or when the call was made on
 * another node (colocate.c); with the role that made it, and the
 * subtransaction it was made in (see forget_outcome)
 */
static const char *last_outcome = NULL;
static Oid	outcome_role = InvalidOid;
static SubTransactionId outcome_subid = InvalidSubTransactionId;
static bool outcome_callbacks = false;

/*
 * forget_outcome -- at the end of the transaction, or when the
 * subtransaction that made the call (or one around it) rolls back, the
 * outcome is gone: a worker's batch runs several roles' attempts in one
 * process, and a call rolled back to a savepoint was not made
 */
static void
forget_outcome_xact(XactEvent event, void *arg)
{
	last_outcome = NULL;
}

static void
forget_outcome_subxact(SubXactEvent event, SubTransactionId mySubid,
					   SubTransactionId parentSubid, void *arg)
{
	if (event == SUBXACT_EVENT_ABORT_SUB && outcome_subid >= mySubid)
		last_outcome = NULL;
}

/*
 * call_forget_outcome -- a worker starts an attempt: the outcome of a call
 * an earlier attempt of its batch made is not this attempt's (the
 * transaction is the batch's)
 */
void
call_forget_outcome(void)
{
	last_outcome = NULL;
}

/*
 * note_outcome -- what this retries.call() did
 */
static void
note_outcome(const char *outcome)
{
	if (!outcome_callbacks)
	{
		RegisterXactCallback(forget_outcome_xact, NULL);
		RegisterSubXactCallback(forget_outcome_subxact, NULL);
		outcome_callbacks = true;
	}
	last_outcome = outcome;
	outcome_role = GetUserId();
	outcome_subid = GetCurrentSubTransactionId();
}

/* Did the latest insert_keyed() move the key's call (debounce)? */
static bool key_debounced = false;


/* What retries.call() says of a call's key besides the key (1.6) */
typedef struct KeyRule
{
	bool		has_window;
	Datum		window;			/* interval: dedupe only within it */
	bool		has_debounce;	/* move the key's call that has not started */
	bool		has_debounce_max;	/* 1.7: but not further than */
	Datum		debounce_max;	/* interval: this long after its creation */
	Datum		run_at;			/* retries.call()'s run_at, as clamped */
} KeyRule;

/*
 * The longest limit_key, in bytes: it is a column of indexes (by gate and
 * key) whose entries must fit a btree page
 */
#define LIMIT_KEY_MAX		256

/*
 * The longest idempotency key, in bytes: like the arguments, it is kept
 * with the call and read by every call made with it, and must not let a
 * role fill the table or a worker's memory (30 MB keys were accepted)
 */
#define KEY_MAX				(16 * 1024)

/* The key_gen of a new key's call made between the runs of a restore */
#define RESTORE_KEY_GEN		(1 << 30)

/* Bumped by annotate and unannotate, which make the cached policy stale */
uint64		retries_policy_generation = 0;

/*
 * The current policy last looked up, and for which statement: one
 * statement that schedules many calls of a function (the bulk path) reads
 * its policy once, as of the statement's snapshot, like any other row the
 * statement reads.  The next statement looks again.
 */
static struct
{
	Oid			fn;
	LocalTransactionId lxid;
	CommandId	curcid;			/* of the calling statement's snapshot */
	uint64		generation;
	RetriesPolicyRef ref;
}			last_policy;

/*
 * The columns of a policy that a new call takes, as read_policy_ref()
 * reads them: id, max_attempts, whether the function is paused, its key
 */
#define POLICY_REF_COLUMNS \
	"SELECT p.id, p.max_attempts, EXISTS (SELECT FROM retries.flow_data f" \
	"  WHERE f.fn OPERATOR(pg_catalog.=) p.fn AND f.paused)," \
	"  p.fn::pg_catalog.oid FROM retries.policy_data p"

/*
 * read_policy_ref -- the first row of a query of POLICY_REF_COLUMNS (or
 * the same columns) into *ref
 */
static void
read_policy_ref(RetriesPolicyRef *ref)
{
	HeapTuple	row = SPI_tuptable->vals[0];
	TupleDesc	desc = SPI_tuptable->tupdesc;
	bool		isnull;

	ref->policy_id = DatumGetInt32(SPI_getbinval(row, desc, 1, &isnull));
	ref->max_attempts = DatumGetInt32(SPI_getbinval(row, desc, 2, &ref->unlimited));
	if (ref->unlimited)
		ref->max_attempts = 0;
	ref->gated = DatumGetBool(SPI_getbinval(row, desc, 3, &isnull));
	ref->fn_key = DatumGetObjectId(SPI_getbinval(row, desc, 4, &isnull));
}

/*
 * remember_policy -- keep what current_policy() found for the rest of the
 * statement whose snapshot is 'stmt' (none if NULL)
 */
static void
remember_policy(Oid fnoid, Snapshot stmt, const RetriesPolicyRef *ref)
{
	last_policy.fn = InvalidOid;
	if (stmt != NULL)
	{
		last_policy.lxid = retries_local_xid();
		last_policy.curcid = stmt->curcid;
		last_policy.generation = retries_policy_generation;
		last_policy.ref = *ref;
		last_policy.fn = fnoid;
	}
}

/*
 * first_row -- the first row that an index of the extension's, named
 * 'index', finds with column 'column' of 'rel' equal to the oid 'value',
 * as of 'snap', copied; NULL if none
 */
static HeapTuple
first_row(Relation rel, const char *index, const char *column, Oid value,
		  Snapshot snap)
{
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tup;

	ScanKeyInit(&key, get_attnum(RelationGetRelid(rel), column),
				BTEqualStrategyNumber, F_OIDEQ, ObjectIdGetDatum(value));
	scan = systable_beginscan(rel, get_relname_relid(index, schema_retries_oid()),
							  true, snap, 1, &key);
	tup = systable_getnext(scan);
	if (HeapTupleIsValid(tup))
		tup = heap_copytuple(tup);
	systable_endscan(scan);
	return tup;
}

/*
 * column_value -- a column of a row of rel, by name
 */
static Datum
column_value(Relation rel, HeapTuple tup, const char *column, bool *isnull)
{
	return heap_getattr(tup, get_attnum(RelationGetRelid(rel), column),
						RelationGetDescr(rel), isnull);
}

/*
 * current_policy_direct -- what current_policy() reads, read through the
 * tables' indexes without SPI (from version 1.4); false if it cannot tell
 * (the function has no key of this instance of the extension: a stale
 * row that only RETRIES_KEY_OF resolves, or none), else *found says
 * whether the function has a current policy, in *ref
 *
 * A session's first retries.call() spent two thirds of its time parsing
 * and planning the statement that current_policy() runs (PREPARE of
 * POLICY_REF_COLUMNS and RETRIES_KEY_OF's sublinks); three index lookups
 * need none of it.
 */
static bool
current_policy_direct(Oid fnoid, RetriesPolicyRef *ref, bool *found)
{
	Snapshot	snap = RegisterSnapshot(GetLatestSnapshot());
	Oid			nspoid = schema_retries_oid();
	Oid			key = names_own_key(fnoid, snap);
	Relation	rel;
	HeapTuple	tup;
	bool		isnull;

	if (!OidIsValid(key))
	{
		UnregisterSnapshot(snap);
		return false;
	}
	rel = table_open(get_relname_relid("policy_data", nspoid), AccessShareLock);
	tup = first_row(rel, "policy_data_current", "fn", key, snap);
	*found = HeapTupleIsValid(tup);
	if (*found)
	{
		ref->policy_id = DatumGetInt32(column_value(rel, tup, "id", &isnull));
		ref->max_attempts = DatumGetInt32(column_value(rel, tup, "max_attempts",
													   &ref->unlimited));
		if (ref->unlimited)
			ref->max_attempts = 0;
		ref->fn_key = key;
		heap_freetuple(tup);
	}
	table_close(rel, AccessShareLock);
	if (*found)
	{
		rel = table_open(get_relname_relid("flow_data", nspoid), AccessShareLock);
		tup = first_row(rel, "flow_data_pkey", "fn", key, snap);
		ref->gated = HeapTupleIsValid(tup) &&
			DatumGetBool(column_value(rel, tup, "paused", &isnull));
		if (HeapTupleIsValid(tup))
			heap_freetuple(tup);
		table_close(rel, AccessShareLock);
	}
	UnregisterSnapshot(snap);
	return true;
}

/*
 * current_policy -- id and attempt budget of a function's current policy,
 * and whether it is paused, so that its calls are made held (see flow.c);
 * false if it is not annotated
 *
 * 'stmt' is the snapshot of the statement that called retries.call() (NULL
 * if there is none, which disables the reuse of the last lookup).
 *
 * Whether the function is paused is read with the latest snapshot, and no
 * lock on the function: a call made while a pause commits may miss it, and
 * be made unheld; the worker that claims it sees the pause and holds it
 * then, uncharged (see flow.c).  A lock held until the caller's transaction
 * ended (a share lock, which pause() took exclusively) let any role that
 * may call the function keep its owner from pausing, replacing or dropping
 * it, with an open or prepared transaction (the eleventh hostile review);
 * PostgreSQL itself takes no lock on a function a transaction calls.
 */
static bool
current_policy(Oid fnoid, Snapshot stmt, RetriesPolicyRef *ref)
{
	static SPIPlanPtr plans[2];
	static SPIPlanPtr gated_plans[2];
	Oid			argtypes[1] = {OIDOID};
	Datum		values[1] = {ObjectIdGetDatum(fnoid)};
	bool		flow = (schema_retries_version() >= SCHEMA_1_2);

	/* from 1.4 the tables hold keys (names.c) */
	bool		names = (schema_retries_version() >= SCHEMA_1_4);
	const char *fn_is = names ? " OPERATOR(pg_catalog.=) " RETRIES_KEY_OF("$1")
	: " OPERATOR(pg_catalog.=) $1";

	if (stmt != NULL && last_policy.fn == fnoid &&
		last_policy.lxid == retries_local_xid() && last_policy.curcid == stmt->curcid &&
		last_policy.generation == retries_policy_generation)
	{
		*ref = last_policy.ref;
		return true;
	}

	if (names && flow)
	{
		bool		found;

		if (current_policy_direct(fnoid, ref, &found))
		{
			if (!found)
				return false;
			remember_policy(fnoid, stmt, ref);
			return true;
		}
	}
	if (flow)
	{
		if (gated_plans[names] == NULL)
			plans_prepare_kept(&gated_plans[names],
							   psprintf(POLICY_REF_COLUMNS
										" WHERE p.fn%s AND p.is_current", fn_is),
							   1, argtypes);
		if (SPI_execute_snapshot(gated_plans[names], values, NULL, GetLatestSnapshot(),
								 InvalidSnapshot, false, false, 1) != SPI_OK_SELECT)
			elog(ERROR, "could not look up the policy of function %u", fnoid);
	}
	else
	{
		if (plans[names] == NULL)
			plans_prepare_kept(&plans[names],
							   psprintf("SELECT id, max_attempts, false, fn::pg_catalog.oid"
										" FROM retries.policy_data"
										" WHERE fn%s AND is_current", fn_is),
							   1, argtypes);
		if (SPI_execute_plan(plans[names], values, NULL, false, 1) != SPI_OK_SELECT)
			elog(ERROR, "could not look up the policy of function %u", fnoid);
	}
	if (SPI_processed == 0)
		return false;
	read_policy_ref(ref);
	remember_policy(fnoid, stmt, ref);
	return true;
}

/*
 * call_require_policy -- current_policy(), raising 55000 if the function
 * is not annotated
 */
void
call_require_policy(Oid fnoid, Snapshot stmt, RetriesPolicyRef *ref)
{
	if (!current_policy(fnoid, stmt, ref))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("function %s is not annotated", format_procedure(fnoid)),
				 errhint("Its owner can give it a retry policy with retries.annotate().")));
}

/*
 * policy_by_id -- what a new call of fnoid takes from its policy of id
 * policy_id (a command's, from 1.5), whether or not it is current; false if
 * there is no such policy.  Read as current_policy() reads.
 */
static bool
policy_by_id(Oid fnoid, int32 policy_id, RetriesPolicyRef *ref)
{
	static SPIPlanPtr plan = NULL;
	Oid			argtypes[1] = {INT4OID};
	Datum		values[1] = {Int32GetDatum(policy_id)};

	plans_prepare_kept(&plan,
					   POLICY_REF_COLUMNS " WHERE p.id OPERATOR(pg_catalog.=) $1",
					   1, argtypes);
	if (SPI_execute_snapshot(plan, values, NULL, GetLatestSnapshot(),
							 InvalidSnapshot, false, false, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not look up policy %d", policy_id);
	if (SPI_processed == 0)
		return false;
	read_policy_ref(ref);
	return true;
}


/*
 * set_policy_columns -- fill in the columns of a new call that
 * come from its current policy: policy_id, max_attempts, gate and held;
 * and priority 0, no limit_key, waiting for no other call
 */
static void
set_policy_columns(const RetriesPolicyRef *ref, Datum *values, char *nulls)
{
	values[CC_POLICY_ID] = Int32GetDatum(ref->policy_id);
	values[CC_MAX_ATTEMPTS] = Int32GetDatum(ref->max_attempts);
	nulls[CC_MAX_ATTEMPTS] = ref->unlimited ? 'n' : ' ';
	values[CC_GATE] = ObjectIdGetDatum(ref->fn_key);	/* the gate */
	nulls[CC_GATE] = ref->gated ? ' ' : 'n';
	values[CC_HELD] = BoolGetDatum(ref->gated);
	nulls[CC_HELD] = ' ';
	values[CC_PRIORITY] = Int32GetDatum(0);
	nulls[CC_PRIORITY] = ' ';
	values[CC_LIMIT_KEY] = (Datum) 0;
	nulls[CC_LIMIT_KEY] = 'n';
	values[CC_WAITING_ON] = Int32GetDatum(0);
	nulls[CC_WAITING_ON] = ' ';
	nulls[CC_ON_EVENT] = 'n';
	nulls[CC_EVENT_DEADLINE] = 'n';
	nulls[CC_EVENT_WAIT] = 'n';
	values[CC_KEY_GEN] = Int32GetDatum(0);
	nulls[CC_KEY_GEN] = ' ';
	values[CC_KEY_WINDOW] = (Datum) 0;
	nulls[CC_KEY_WINDOW] = 'n';
}


/*
 * key_race_failed -- raise 40001: the key of values[CC_KEY] changed hands
 * each time this transaction looked
 */
static void
key_race_failed(const Datum *values)
{
	ereport(ERROR,
			(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
			 errmsg("could not schedule a call with key \"%s\" because of concurrent changes",
					TextDatumGetCString(values[CC_KEY])),
			 errhint("Try again.")));
}

/* The call that holds a key now (key_holder) */
typedef struct KeyHolder
{
	int64		id;
	int32		gen;			/* its key_gen */
	bool		within;			/* made within the key_window (none: true) */
	bool		same_fn;		/* a call of the same function */
	bool		fresh;			/* scheduled, no attempt has started, and a
								 * call of the same function */
	text	   *on_event;		/* the event it waits for, or NULL */
} KeyHolder;

/*
 * key_holder -- the call of the role and key of values[] that holds the key
 * now: the latest of the key's calls (the highest key_gen); false if the
 * role has none kept
 */
static bool
key_holder(const Datum *values, const KeyRule *rule, KeyHolder *h)
{
	static SPIPlanPtr plan = NULL;
	Oid			argtypes[4] = {OIDOID, TEXTOID, INTERVALOID, INT4OID};
	Datum		args[4] = {values[CC_SCHEDULED_BY], values[CC_KEY], rule->window,
	values[CC_POLICY_ID]};
	char		nulls[4] = {' ', ' ', rule->has_window ? ' ' : 'n', ' '};
	HeapTuple	row;
	TupleDesc	desc;
	bool		isnull;
	Datum		d;
	int			nestlevel = plans_by_index_begin();

	plans_prepare_kept(&plan,
					   "SELECT id, key_gen,"
					   " $3::pg_catalog.interval IS NULL OR created_at OPERATOR(pg_catalog.+) $3"
					   "  OPERATOR(pg_catalog.>) pg_catalog.statement_timestamp(),"
					   " state OPERATOR(pg_catalog.=) 'scheduled'"
					   "  AND attempts OPERATOR(pg_catalog.=) 0"
					   "  AND next_attempt OPERATOR(pg_catalog.<>) 'infinity'::pg_catalog.timestamptz,"
					   " (SELECT p.fn FROM retries.policy_data p"
					   "  WHERE p.id OPERATOR(pg_catalog.=) c.policy_id)"
					   "  OPERATOR(pg_catalog.=) (SELECT q.fn FROM retries.policy_data q"
					   "  WHERE q.id OPERATOR(pg_catalog.=) $4),"
					   " CASE WHEN event_wait THEN on_event END"
					   " FROM retries.call_data c"
					   " WHERE scheduled_by OPERATOR(pg_catalog.=) $1::pg_catalog.regrole"
					   " AND pg_catalog.md5(key) OPERATOR(pg_catalog.=) pg_catalog.md5($2)"
					   " AND key OPERATOR(pg_catalog.=) $2"
					   " ORDER BY key_gen DESC LIMIT 1",
					   4, argtypes);
	if (SPI_execute_plan(plan, args, nulls, false, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not look up a call by key");
	plans_by_index_end(nestlevel);
	if (SPI_processed == 0)
		return false;
	row = SPI_tuptable->vals[0];
	desc = SPI_tuptable->tupdesc;
	h->id = DatumGetInt64(SPI_getbinval(row, desc, 1, &isnull));
	h->gen = DatumGetInt32(SPI_getbinval(row, desc, 2, &isnull));
	h->within = DatumGetBool(SPI_getbinval(row, desc, 3, &isnull));
	h->same_fn = DatumGetBool(SPI_getbinval(row, desc, 5, &isnull));
	h->fresh = DatumGetBool(SPI_getbinval(row, desc, 4, &isnull)) && h->same_fn;
	d = SPI_getbinval(row, desc, 6, &isnull);
	h->on_event = isnull ? NULL : DatumGetTextPCopy(d);
	return true;
}

/*
 * key_of_other_function -- raise 23505: the key of values[] is held by
 * call h, of another function (a key names one piece of work: returning
 * that call's id would tell the caller its call was made); the function's
 * name is read for the message only
 */
static void
key_of_other_function(const Datum *values, const KeyHolder *h)
{
	static SPIPlanPtr plan = NULL;
	Oid			argtypes[1] = {INT8OID};
	Datum		args[1] = {Int64GetDatum(h->id)};
	char	   *fn = NULL;

	plans_prepare_kept(&plan,
					   "SELECT r.fn::pg_catalog.text FROM retries.call_data c"
					   " JOIN retries.policy_data p ON p.id OPERATOR(pg_catalog.=) c.policy_id"
					   " JOIN retries.function_refs r ON r.key OPERATOR(pg_catalog.=) p.fn"
					   " WHERE c.id OPERATOR(pg_catalog.=) $1",
					   1, argtypes);
	if (SPI_execute_plan(plan, args, NULL, true, 1) == SPI_OK_SELECT && SPI_processed == 1)
		fn = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
	ereport(ERROR,
			(errcode(ERRCODE_UNIQUE_VIOLATION),
			 errmsg("key \"%s\" is held by call " INT64_FORMAT " of another function, %s",
					text_to_cstring(DatumGetTextPP(values[CC_KEY])), h->id,
					fn != NULL ? fn : "(dropped)"),
			 errdetail("A key dedupes the calls of one function; it is the other call's for as long as it is kept, or within its key_window."),
			 errhint("Make the key name the function too, such as 'send_email:' || customer_id.")));
}

/*
 * debounce_call -- move call h (of the same function as values[]) to
 * values[CC_NEXT_ATTEMPT], with the arguments of values[], if it has not
 * started: true if so, false if it has, or if a worker holds its row (it
 * claimed it, and runs it now or soon; that counts as started), or if a
 * runner runs it (due at 'infinity' meanwhile, its row unlocked: moving it
 * wrote the new arguments over those the attempt runs with, the ninth
 * hostile review).  With a
 * debounce_max, not further than that after the call's creation (the
 * burst's first call), unless run_at is later.
 *
 * A worker's claim locks the row FOR UPDATE; other writers of a call's row
 * (a pause() of its function, a cancel()) lock it FOR NO KEY UPDATE.  The
 * row is locked FOR KEY SHARE, which skips only the first: a pause() that
 * another role left uncommitted is waited for, as any writer of the row
 * waits, instead of taking the call for started and making a second call
 * of the burst (the seventh hostile review: both ran).  The lock also keeps
 * the workers from claiming the call until this transaction ends.
 *
 * A call that waits for an event is moved under the event's share lock, as
 * a call made waiting for it is: an emit of it, which locks the event
 * exclusively and then the rows of the calls it releases, then waits on
 * the name, not on the row this transaction holds.  Without it a debounce
 * of two keys whose calls wait for one event, and an emit of that event,
 * each locked one row the other needed, with no name in common (the ninth
 * hostile review: 40P01).
 */
static bool
debounce_call(const KeyHolder *h, const Datum *values, const KeyRule *rule)
{
	if (h->on_event != NULL)
		events_lock_shared(DatumGetObjectId(values[CC_SCHEDULED_BY]), h->on_event);

	/* under the key's lock: as READ COMMITTED, as the lock was taken */
	return calls_debounce(h->id, values[CC_NEXT_ATTEMPT], values[CC_ARGS],
						  rule->debounce_max, rule->has_debounce_max, rule->run_at);
}

/*
 * insert_keyed -- insert_call() of a call with a key, from version 1.6,
 * under 'rule' (NULL: a key that lasts as long as its call is kept)
 *
 * A key's calls are numbered by key_gen, from 0, and the latest holds the
 * key: the index call_data_key is unique over (role, key, key_gen).  The
 * holder is looked up first.  Within its window (or with no window and no
 * debounce) the call dedupes to it; with debounce, a holder of the same
 * function that has not started is moved and takes the new arguments (one
 * of another function, whose arguments these are not, counts as started;
 * concurrent debounces of a key wait for each other on the key's lock);
 * otherwise the new call is inserted as the next key_gen, which never
 * writes the holder's row (a worker may hold it for as long as it runs).  Two transactions that make
 * the same key_gen at once meet in the unique index: the second inserts
 * nothing, looks again and finds the first's call.
 */
static int64
insert_keyed(Datum *values, char *nulls, const KeyRule *rule, bool *inserted)
{
	static const KeyRule lasting = {false, (Datum) 0, false, false, (Datum) 0, (Datum) 0};
	int64		id;

	key_debounced = false;
	if (rule == NULL)
		rule = &lasting;
	if (rule->has_debounce)
		tables_lock_name(RETRIES_KEY_LOCK_CLASS, DatumGetObjectId(values[CC_SCHEDULED_BY]),
						 DatumGetTextPP(values[CC_KEY]), true);

	for (int i = 0; i < KEY_RACE_ATTEMPTS; i++)
	{
		KeyHolder	h;

		if (key_holder(values, rule, &h))
		{
			*inserted = false;
			if (!h.same_fn && (!rule->has_window || h.within))
				key_of_other_function(values, &h);
			if (rule->has_debounce && h.fresh && debounce_call(&h, values, rule))
			{
				key_debounced = true;
				return h.id;
			}
			if (rule->has_window ? h.within : !rule->has_debounce)
				return h.id;
			values[CC_KEY_GEN] = Int32GetDatum(h.gen + 1);
			*inserted = true;
		}

		/*
		 * A new key's first call is numbered 0; but between the runs of a
		 * restore in several runs, whose dump may hold the role's call of
		 * that key numbered 0 still to load (restore.c), far above, out of
		 * the dump's way (it holds the key once the dump's is loaded)
		 */
		else
			values[CC_KEY_GEN] = Int32GetDatum(restore_ids_scattered() ? RESTORE_KEY_GEN : 0);
		id = calls_insert_keyed(values, nulls);
		if (id != 0)
			return id;
		/* another transaction made that key_gen meanwhile: look again */
	}
	key_race_failed(values);
	return 0;					/* keep compiler quiet */
}

/*
 * insert_call -- insert the call and return its id; with a key, return
 * the id of the role's call with that key instead if there is one (kept,
 * from 1.2; unfinished, at 1.1), and set *inserted to false
 *
 * values and nulls (' ' or 'n') hold, in this order: policy_id, args,
 * max_attempts, next_attempt, scheduled_by, key, schedule_id (which
 * only keyless calls have), gate and held (see flow.c), priority,
 * limit_key and waiting_on (see chains.c).  Held calls, gated ones, those
 * of a priority other than 0, those with a limit_key and those that wait
 * for others need version 1.2, whose retries.call() is the only one that
 * makes them.
 */
static int64
insert_call(Datum *values, char *nulls, const KeyRule *rule, bool *inserted)
{
	RetriesSchemaVersion version = schema_retries_version();
	int64		id;

	*inserted = true;
	if (nulls[CC_KEY] != 'n' &&
		VARSIZE_ANY_EXHDR(DatumGetTextPP(values[CC_KEY])) > KEY_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("key is %zu bytes, more than %d kB",
						(Size) VARSIZE_ANY_EXHDR(DatumGetTextPP(values[CC_KEY])),
						KEY_MAX / 1024),
				 errhint("Use a short key, such as an order id, or a hash of a long one.")));
	if (nulls[CC_KEY] != 'n')
		args_check_encoding(VARDATA_ANY(DatumGetTextPP(values[CC_KEY])),
							VARSIZE_ANY_EXHDR(DatumGetTextPP(values[CC_KEY])), "key");
	/* without a key, nothing can conflict */
	if (nulls[CC_KEY] == 'n')
		return calls_insert_keyless(values, nulls);
	if (version >= SCHEMA_1_6)
		return insert_keyed(values, nulls, rule, inserted);

	id = calls_insert_unfinished_key(values, nulls, inserted);
	if (id == 0)
		key_race_failed(values);
	return id;
}

/* retries.call()'s arguments from 1.6, by position */
#define CALL_KEY_WINDOW		7
#define CALL_DEBOUNCE		8
#define CALL_ON_EVENT		9
#define CALL_EVENT_TIMEOUT	10
#define CALL_DEBOUNCE_MAX	13	/* 1.7, after colocate.c's two */

/*
 * interval_option -- retries.call()'s interval argument 'argno', named
 * 'name', checked (args_interval_arg), its length in *usecs if 'usecs' is
 * not NULL; false if not given
 */
static bool
interval_option(FunctionCallInfo fcinfo, int argno, const char *name,
				bool positive, int64 *usecs)
{
	int64		length;

	if (PG_ARGISNULL(argno))
		return false;
	length = args_interval_arg(fcinfo, argno, name, positive);
	if (usecs != NULL)
		*usecs = length;
	return true;
}

/*
 * policy_interval -- an interval column of policy 'policy_id' (annotate's),
 * read by 'query' ($1 the policy's id), in *value; false if it is NULL
 */
static bool
policy_interval(int32 policy_id, SPIPlanPtr *plan, const char *query, Datum *value)
{
	Oid			argtypes[1] = {INT4OID};
	Datum		values[1] = {Int32GetDatum(policy_id)};
	bool		isnull = true;

	plans_prepare_kept(plan, query, 1, argtypes);
	if (SPI_execute_plan(*plan, values, NULL, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not look up policy %d", policy_id);
	if (SPI_processed == 1)
	{
		*value = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1,
							   &isnull);
		if (!isnull)
			*value = SPI_datumTransfer(*value, false, sizeof(Interval));
	}
	return !isnull;
}

/*
 * policy_key_window -- the key_window of policy 'policy_id' (annotate's), in
 * *window; false if it has none
 */
static bool
policy_key_window(int32 policy_id, Datum *window)
{
	static SPIPlanPtr plan = NULL;

	return policy_interval(policy_id, &plan,
						   "SELECT key_window FROM retries.policy_data"
						   " WHERE id OPERATOR(pg_catalog.=) $1", window);
}

/*
 * policy_debounce_max -- the debounce_max of policy 'policy_id' (annotate's,
 * from 1.7), in *max; false if it has none
 */
static bool
policy_debounce_max(int32 policy_id, Datum *max)
{
	static SPIPlanPtr plan = NULL;

	if (schema_retries_version() < SCHEMA_1_7)
		return false;
	return policy_interval(policy_id, &plan,
						   "SELECT debounce_max FROM retries.policy_data"
						   " WHERE id OPERATOR(pg_catalog.=) $1", max);
}

/*
 * call_options -- retries.call()'s key_window, debounce, on_event and
 * event_timeout (1.6) into *rule and the columns of the new call (values
 * and nulls, set for the rest); with SPI connected, as the extension's
 * owner, the role's id in values[CC_SCHEDULED_BY]
 */
static void
call_options(FunctionCallInfo fcinfo, const RetriesPolicyRef *ref,
			 Datum *values, char *nulls, KeyRule *rule)
{
	bool		has_key = nulls[CC_KEY] != 'n';
	bool		has_timeout;
	int64		timeout = 0;

	rule->has_window = interval_option(fcinfo, CALL_KEY_WINDOW, "key_window", true, NULL);
	if (rule->has_window)
		rule->window = PG_GETARG_DATUM(CALL_KEY_WINDOW);
	rule->has_debounce = interval_option(fcinfo, CALL_DEBOUNCE, "debounce", false, NULL);
	rule->has_debounce_max = PG_NARGS() > CALL_DEBOUNCE_MAX &&
		interval_option(fcinfo, CALL_DEBOUNCE_MAX, "debounce_max", true, NULL);
	if (rule->has_debounce_max)
		rule->debounce_max = PG_GETARG_DATUM(CALL_DEBOUNCE_MAX);
	rule->run_at = values[CC_NEXT_ATTEMPT];
	/* as long as it is by the check: a month is 30 days, whatever the date */
	has_timeout = interval_option(fcinfo, CALL_EVENT_TIMEOUT, "event_timeout",
								  false, &timeout);
	if (!has_key && (rule->has_window || rule->has_debounce))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s needs a key", rule->has_window ? "key_window" : "debounce"),
				 errhint("Give the calls that it applies to the same key.")));
	if (rule->has_debounce_max && !rule->has_debounce)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("debounce_max needs debounce"),
				 errhint("debounce_max bounds how long a debounced burst of calls waits.")));
	if (has_timeout && PG_ARGISNULL(CALL_ON_EVENT))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("event_timeout needs on_event"),
				 errhint("Name the event that the call waits for in on_event.")));

	/* no window given: the function's, if annotate gave it one */
	if (has_key && !rule->has_window)
		rule->has_window = policy_key_window(ref->policy_id, &rule->window);
	if (rule->has_window)
	{
		/* kept with the call: its key's deliveries are spaced by it */
		values[CC_KEY_WINDOW] = rule->window;
		nulls[CC_KEY_WINDOW] = ' ';
	}

	/*
	 * a debounced call runs once the calls of its key stop for so long, or
	 * debounce_max after the first of them (the function's, if annotate gave
	 * it one)
	 */
	if (rule->has_debounce)
	{
		Datum		now = TimestampTzGetDatum(clock_xact_now());
		Datum		later = DirectFunctionCall2(timestamptz_pl_interval, now,
												PG_GETARG_DATUM(CALL_DEBOUNCE));

		if (!rule->has_debounce_max)
			rule->has_debounce_max = policy_debounce_max(ref->policy_id, &rule->debounce_max);
		if (rule->has_debounce_max)
			later = DirectFunctionCall2(timestamp_smaller, later,
										DirectFunctionCall2(timestamptz_pl_interval, now,
															rule->debounce_max));
		if (DatumGetTimestampTz(later) > DatumGetTimestampTz(values[CC_NEXT_ATTEMPT]))
			values[CC_NEXT_ATTEMPT] = later;
	}

	if (!PG_ARGISNULL(CALL_ON_EVENT))
	{
		text	   *event = PG_GETARG_TEXT_PP(CALL_ON_EVENT);

		events_check_name(event, "on_event");
		values[CC_ON_EVENT] = PointerGetDatum(event);
		nulls[CC_ON_EVENT] = ' ';
		nulls[CC_EVENT_WAIT] = ' ';
		if (events_emitted(DatumGetObjectId(values[CC_SCHEDULED_BY]), event))
			values[CC_EVENT_WAIT] = BoolGetDatum(false);
		else
		{
			/* it waits as a chained call does: held, one more to wait on */
			values[CC_EVENT_WAIT] = BoolGetDatum(true);
			values[CC_HELD] = BoolGetDatum(true);
			nulls[CC_GATE] = 'n';
			values[CC_WAITING_ON] = Int32GetDatum(DatumGetInt32(values[CC_WAITING_ON]) + 1);
			if (has_timeout)
			{
				values[CC_EVENT_DEADLINE] =
					TimestampTzGetDatum(clock_xact_now() + timeout);
				nulls[CC_EVENT_DEADLINE] = ' ';
				/* the workers learn of its timeout as of a schedule's time */
				xact_wake_workers(WAKE_FIRE);
			}
		}
	}
}

/*
 * retries_call -- SQL function retries.call(fn, args, run_at, key, priority,
 * limit_key, after) (1.2; the first four before)
 *
 * Returns the id of the scheduled call (or, with a key, of the existing
 * call with that key).
 */
Datum
retries_call(PG_FUNCTION_ARGS)
{
	Oid			fnoid;
	Jsonb	   *args;
	HeapTuple	tup;
	RetriesPolicyRef ref;
	Datum		values[CALL_COLUMNS];
	char		nulls[CALL_COLUMNS];
	Oid			userid = GetUserId();
	Snapshot	stmt = ActiveSnapshotSet() ? GetActiveSnapshot() : NULL;
	RetriesUserSwitch save;
	int64		id;
	bool		inserted;
	RetriesAfter after;
	bool		has_after = PG_NARGS() > 6 && !PG_ARGISNULL(6);
	bool		is_procedure;
	KeyRule		rule = {false, (Datum) 0, false, false, (Datum) 0, (Datum) 0};

	last_outcome = NULL;

	/* the insert may not go through the executor, which would check these */
	PreventCommandIfReadOnly("retries.call()");
	PreventCommandDuringRecovery("retries.call()");

	args_check_not_null(fcinfo, 0, "fn");
	args_check_not_null(fcinfo, 1, "args");
	args_check_not_null(fcinfo, 2, "run_at");
	if (PG_NARGS() > 4)
		args_check_not_null(fcinfo, 4, "priority");
	if (PG_NARGS() > 5 && !PG_ARGISNULL(5) &&
		VARSIZE_ANY_EXHDR(PG_GETARG_TEXT_PP(5)) > LIMIT_KEY_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("limit_key is longer than %d bytes", LIMIT_KEY_MAX),
				 errhint("Use a short name for what the limit counts, such as an account id or a host name.")));
	if (PG_NARGS() > 5 && !PG_ARGISNULL(5))
		args_check_encoding(VARDATA_ANY(PG_GETARG_TEXT_PP(5)),
							VARSIZE_ANY_EXHDR(PG_GETARG_TEXT_PP(5)), "limit_key");
	fnoid = PG_GETARG_OID(0);
	args = PG_GETARG_JSONB_P(1);

	tup = SearchSysCache1(PROCOID, ObjectIdGetDatum(fnoid));
	if (!HeapTupleIsValid(tup))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_FUNCTION),
				 errmsg("fn: function with OID %u does not exist", fnoid)));
	/* only a procedure can be retries.command: no look-up for a function */
	is_procedure = ((Form_pg_proc) GETSTRUCT(tup))->prokind == PROKIND_PROCEDURE;
	ReleaseSysCache(tup);
	if (is_procedure)
		schema_refuse_command(fnoid, "fn");

	access_check_call_privilege(fnoid, userid);

	/* the arguments are converted as the caller, under its settings */
	args = call_args_canonicalize(fnoid, args);

	/* on Citus, to be made on another node (colocate.c) */
	if (colocate_call(fcinfo, fnoid, args, &id))
		PG_RETURN_INT64(id);

	memset(nulls, ' ', sizeof(nulls));
	access_become_owner(&save);
	SPI_connect();

	call_require_policy(fnoid, stmt, &ref);
	if (has_after)
		chains_after_check(PG_GETARG_ARRAYTYPE_P(6), userid, &after);

	set_policy_columns(&ref, values, nulls);
	values[CC_ARGS] = JsonbPGetDatum(args);
	values[CC_NEXT_ATTEMPT] = clock_clamp_run_at(PG_GETARG_DATUM(2));
	values[CC_SCHEDULED_BY] = ObjectIdGetDatum(userid);
	values[CC_KEY] = PG_ARGISNULL(3) ? (Datum) 0 : PG_GETARG_DATUM(3);
	nulls[CC_KEY] = PG_ARGISNULL(3) ? 'n' : ' ';
	nulls[CC_SCHEDULE_ID] = 'n';
	if (PG_NARGS() > 4)
		values[CC_PRIORITY] = PG_GETARG_DATUM(4);
	if (PG_NARGS() > 5 && !PG_ARGISNULL(5))
	{
		values[CC_LIMIT_KEY] = PG_GETARG_DATUM(5);
		nulls[CC_LIMIT_KEY] = ' ';
	}
	if (has_after && (after.nwaiting > 0 || after.failed != 0))
	{
		/* held, with no gate: what it waits for releases it (chains.c) */
		values[CC_HELD] = BoolGetDatum(true);
		nulls[CC_GATE] = 'n';
		values[CC_WAITING_ON] = Int32GetDatum(after.nwaiting + (after.failed != 0 ? 1 : 0));
	}

	if (PG_NARGS() > 7)
		call_options(fcinfo, &ref, values, nulls, &rule);

	key_debounced = false;
	id = insert_call(values, nulls, &rule, &inserted);
	if (has_after && inserted)
		chains_after_record(id, &after);
	xact_wake_workers_for(userid);

	SPI_finish();
	access_restore_user(&save);

	note_outcome(inserted ? "made" : key_debounced ? "debounced" : "deduplicated");
	PG_RETURN_INT64(id);
}

/*
 * retries_call_outcome -- SQL function retries.call_outcome() (1.7): what
 * the latest retries.call() of this transaction, by the current role, did:
 * 'made' (a new call), 'deduplicated' (its key's call, whose id it
 * returned, was left as it was) or 'debounced' (that call was moved, with
 * the new arguments); NULL before any, after one that failed or was rolled
 * back to a savepoint, and when it made the call on another node of a Citus
 * cluster
 */
Datum
retries_call_outcome(PG_FUNCTION_ARGS)
{
	if (last_outcome == NULL || outcome_role != GetUserId())
		PG_RETURN_NULL();
	PG_RETURN_TEXT_P(cstring_to_text(last_outcome));
}

/*
 * insert_with_policy -- insert a call under policy 'ref' with arguments
 * already in canonical form, as 'role', due at run_at (not before now),
 * with 'key' (0: none) or for schedule schedule_id (0: none); its id
 */
static int64
insert_with_policy(const RetriesPolicyRef *ref, Datum args, Datum run_at, Oid role,
				   Datum key, int64 schedule_id)
{
	Datum		values[CALL_COLUMNS];
	char		nulls[CALL_COLUMNS];
	bool		inserted;

	memset(nulls, ' ', sizeof(nulls));
	set_policy_columns(ref, values, nulls);
	values[CC_ARGS] = args;
	values[CC_NEXT_ATTEMPT] = clock_clamp_run_at(run_at);
	values[CC_SCHEDULED_BY] = ObjectIdGetDatum(role);
	values[CC_KEY] = key;
	nulls[CC_KEY] = key == (Datum) 0 ? 'n' : ' ';
	values[CC_SCHEDULE_ID] = Int64GetDatum(schedule_id);
	nulls[CC_SCHEDULE_ID] = schedule_id == 0 ? 'n' : ' ';
	return insert_call(values, nulls, NULL, &inserted);
}

/*
 * call_insert_fired -- schedule a call of fnoid with arguments
 * already in canonical form, as 'role', due at run_at (not before now), for
 * schedule 'schedule_id' (see schedule.c), under its policy of id
 * policy_id (a command's), or if 0 under its current policy; false, and
 * nothing scheduled, if there is no such policy
 *
 * The caller acts as the extension's owner, in a transaction with SPI
 * connected.  No code of the function's owner or of the role runs here:
 * the arguments were converted when the schedule was made, and the role's
 * privileges are checked when each attempt starts, as for any call.
 */
bool
call_insert_fired(Oid fnoid, int32 policy_id, Datum args, Oid role,
				  int64 schedule_id, TimestampTz run_at, int64 *id)
{
	RetriesPolicyRef ref;

	/* many firings of one function in one statement read its policy once */
	if (policy_id != 0 ? !policy_by_id(fnoid, policy_id, &ref) :
		!current_policy(fnoid, ActiveSnapshotSet() ? GetActiveSnapshot() : NULL, &ref))
		return false;
	*id = insert_with_policy(&ref, args, TimestampTzGetDatum(run_at), role,
							 (Datum) 0, schedule_id);
	return true;
}

/*
 * call_insert_command -- schedule a command (a call of retries.command,
 * fnoid, whose one argument is the text, in 'args') as the current role,
 * under its policy of id policy_id (annotate_command_policy), due at
 * run_at, with 'key' (0: none); returns the call's id, or with a key, that
 * of the role's call already holding it
 *
 * The caller acts as the extension's owner, with SPI connected.
 */
int64
call_insert_command(Oid fnoid, int32 policy_id, Jsonb *args, Datum run_at,
					Oid role, Datum key)
{
	RetriesPolicyRef ref;

	if (!policy_by_id(fnoid, policy_id, &ref))
		elog(ERROR, "retries: policy %d of a command is gone", policy_id);
	return insert_with_policy(&ref, JsonbPGetDatum(args), run_at, role, key, 0);
}
