/*-------------------------------------------------------------------------
 *
 * insert.c
 *	  The insertion of a call into the calls table (retries.call_data):
 *	  the calls module's (calls.c) one way in.
 *
 * A call without a key goes straight into the heap and the indexes of
 * call_data (calls_insert_keyless), past the executor, whose start-up and
 * shutdown cost more than the insertion when one statement schedules many
 * calls; the table and its indexes stay open for the rest of the
 * transaction (kept_insert).  A call with a key is an INSERT ... ON
 * CONFLICT DO NOTHING of the key's next number, from 1.6
 * (calls_insert_keyed: api/call.c decides whether to make it, from the
 * key's holder), or of one unfinished call per key before
 * (calls_insert_unfinished_key).  retries.call(), a schedule's firing and
 * a command's call all come here (api/call.c's insert_call).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "commands/sequence.h"
#include "executor/executor.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "utils/builtins.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/resowner.h"

#include "base/base.h"
#include "base/compat.h"
#include "tables/tables.h"

/* The types of the columns of a call, in CallColumn's order */
static Oid	call_column_types[CALL_COLUMNS] = {INT4OID, JSONBOID, INT4OID,
	TIMESTAMPTZOID, OIDOID, TEXTOID, INT8OID, OIDOID, BOOLOID, INT4OID, TEXTOID,
INT4OID, TEXTOID, TIMESTAMPTZOID, BOOLOID, INT4OID, INTERVALOID};

/*
 * What calls_insert_keyless() needs to know about call_data, looked up again
 * whenever the table is not the one it was for (the extension was dropped
 * and created again).
 */
static struct
{
	Oid			relid;
	int			natts;			/* a column added by an update: look again */
	Oid			seqid;			/* of the identity column id */
	Datum		scheduled;		/* the enum value 'scheduled' */
	AttrNumber	att_id,
				att_policy_id,
				att_args,
				att_state,
				att_attempts,
				att_max_attempts,
				att_next_attempt,
				att_created_at,
				att_updated_at,
				att_scheduled_by,
				att_schedule_id,	/* these six: InvalidAttrNumber at 1.1 */
				att_gate,
				att_held,
				att_priority,
				att_limit_key,
				att_waiting_on,
				att_on_event,	/* these four: InvalidAttrNumber before 1.6 */
				att_event_deadline,
				att_event_wait,
				att_key_gen;
}			call_data_info;

/*
 * call_data as calls_insert_keyless() keeps it open for the rest of the
 * (sub)transaction: the table, its indexes (their IndexInfo, with their
 * predicates and expressions ready to evaluate) and the executor state
 * they are evaluated in.  Opening the indexes and preparing the partial
 * indexes' predicates for each call cost more than the insertion (45 % of
 * scheduling 100,000 calls in one statement).
 *
 * They are opened under the transaction's resource owner, so that the end
 * of a statement does not release them, and closed:
 *	- before the transaction commits or prepares (insert_xact);
 *	- when the subtransaction they were opened in aborts
 *	  (insert_subxact); a subtransaction that commits hands them to
 *	  its parent;
 *	- before a utility command (calls_insert_pause, from the ProcessUtility
 *	  hook), since a command that drops, truncates or alters call_data
 *	  refuses a table that its own session holds open; and they are not
 *	  kept while one runs (an event trigger, or a function the command
 *	  calls, may schedule calls), except CALL and DO, which run code
 *	  rather than change tables;
 *	- after a relcache invalidation of the table or one of its indexes,
 *	  when the next call opens them again.
 * When the transaction aborts, its resource owner closes them.  Only when
 * the library is preloaded, which installs that hook.
 */
static struct
{
	LocalTransactionId lxid;	/* the transaction they are open in */
	SubTransactionId subid;		/* the subtransaction that holds them */
	Relation	rel;			/* NULL when closed; set once all are open */
	EState	   *estate;
	ResultRelInfo *rri;
	bool		stale;			/* invalidated: close before the next use */
	int			paused;			/* utility commands running */
	bool		callbacks;		/* the callbacks below are registered */
}			kept_insert;

/*
 * kept_insert_invalidate -- relcache callback: the table or one of its
 * indexes changed (or every relation did)
 */
static void
kept_insert_invalidate(Datum arg, Oid relid)
{
	if (kept_insert.rel == NULL)
		return;
	if (!OidIsValid(relid) || relid == RelationGetRelid(kept_insert.rel))
		kept_insert.stale = true;
	else
	{
		for (int i = 0; i < kept_insert.rri->ri_NumIndices; i++)
		{
			if (RelationGetRelid(kept_insert.rri->ri_IndexRelationDescs[i]) == relid)
				kept_insert.stale = true;
		}
	}
}

/*
 * kept_insert_close -- close what calls_insert_keyless() keeps open, if
 * anything, and release the locks it took to keep it
 *
 * Those are extra: each statement that made a call holds its own lock on
 * call_data, as its (sub)transaction's, until that ends, and the indexes'
 * are held only while they are kept open (kept_insert_open releases the
 * ones it takes first), as an INSERT holds them only while it runs
 * (ExecCloseIndices).  So a call rolled back with its savepoint, or one
 * followed by any utility command, leaves no lock on an index behind.
 */
static void
kept_insert_close(void)
{
	ResourceOwner oldowner = CurrentResourceOwner;
	Relation	rel = kept_insert.rel;

	if (rel == NULL)
		return;
	kept_insert.rel = NULL;
	if (kept_insert.lxid != retries_local_xid())
		return;					/* an earlier transaction's: gone with it */
	CurrentResourceOwner = TopTransactionResourceOwner;
	ExecCloseIndices(kept_insert.rri);
	table_close(rel, RowExclusiveLock);
	CurrentResourceOwner = oldowner;
	FreeExecutorState(kept_insert.estate);
}

/*
 * pauses_kept_insert -- does nothing stay open while 'command' runs?  All
 * utility commands but CALL and DO, which run code rather than change
 * tables
 */
static bool
pauses_kept_insert(Node *command)
{
	return !IsA(command, CallStmt) && !IsA(command, DoStmt);
}

/*
 * calls_insert_pause -- a utility command is about to run: close what
 * calls_insert_keyless() keeps open, and keep nothing open until
 * calls_insert_resume(), unless the command is CALL or DO
 */
void
calls_insert_pause(Node *command)
{
	kept_insert_close();
	if (pauses_kept_insert(command))
		kept_insert.paused++;
}

/*
 * calls_insert_resume -- the utility command given to calls_insert_pause()
 * has ended, or failed
 */
void
calls_insert_resume(Node *command)
{
	if (pauses_kept_insert(command) && kept_insert.paused > 0)
		kept_insert.paused--;
}

/*
 * insert_xact -- transaction callback: close what calls_insert_keyless()
 * keeps open before the transaction commits or prepares; forget it when it
 * aborts (its resource owner closes it, and its memory goes)
 */
static void
insert_xact(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_PRE_COMMIT:
		case XACT_EVENT_PARALLEL_PRE_COMMIT:
		case XACT_EVENT_PRE_PREPARE:
			kept_insert_close();
			break;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
			kept_insert.rel = NULL;
			break;
		default:
			break;
	}
}

/*
 * insert_subxact -- subtransaction callback: what the subtransaction
 * that ends kept open is closed if it aborts, and handed to its parent if
 * it commits
 */
static void
insert_subxact(SubXactEvent event, SubTransactionId mySubid,
			   SubTransactionId parentSubid, void *arg)
{
	if (kept_insert.rel == NULL || kept_insert.subid < mySubid)
		return;
	if (event == SUBXACT_EVENT_ABORT_SUB)
		kept_insert_close();
	else if (event == SUBXACT_EVENT_COMMIT_SUB)
		kept_insert.subid = parentSubid;
}

/*
 * kept_insert_open -- call_data ('rel', opened by the caller) with its
 * indexes, kept open for the rest of the transaction (see kept_insert);
 * false if they are not kept now (a utility command runs)
 */
static bool
kept_insert_open(Relation rel)
{
	ResourceOwner oldowner = CurrentResourceOwner;
	MemoryContext oldcxt;
	List	   *indexes;
	ListCell   *lc;
	EState	   *estate;
	ResultRelInfo *rri;
	Relation	kept;

	if (kept_insert.paused > 0)
		return false;
	if (kept_insert.rel != NULL &&
		(kept_insert.stale || kept_insert.lxid != retries_local_xid() ||
		 RelationGetRelid(kept_insert.rel) != RelationGetRelid(rel)))
		kept_insert_close();
	if (kept_insert.rel != NULL)
		return true;
	if (!kept_insert.callbacks)
	{
		CacheRegisterRelcacheCallback(kept_insert_invalidate, (Datum) 0);
		RegisterXactCallback(insert_xact, NULL);
		RegisterSubXactCallback(insert_subxact, NULL);
		kept_insert.callbacks = true;
	}

	/*
	 * The indexes' locks first, as the current subtransaction's: waiting for
	 * one may end in an error (a cancel, lock_timeout), which must come
	 * before anything is kept.  Then nothing below waits; interrupts are held
	 * off too, and kept_insert.rel is set last, so that the indexes are kept
	 * open all or none, and the invalidation callback (which runs whenever a
	 * lock is taken) never sees them half open.
	 */
	indexes = RelationGetIndexList(rel);
	foreach(lc, indexes)
		LockRelationOid(lfirst_oid(lc), RowExclusiveLock);

	HOLD_INTERRUPTS();
	oldcxt = MemoryContextSwitchTo(TopTransactionContext);
	CurrentResourceOwner = TopTransactionResourceOwner;
	estate = CreateExecutorState();
	rri = makeNode(ResultRelInfo);
	kept = table_open(RelationGetRelid(rel), RowExclusiveLock);
	InitResultRelInfo(rri, kept, 1, NULL, 0);
	ExecOpenIndices(rri, false);
	CurrentResourceOwner = oldowner;
	MemoryContextSwitchTo(oldcxt);

	/*
	 * The indexes are locked again as the top transaction's, open: the first
	 * locks are no longer needed, and held on they would last until this
	 * subtransaction ends, where an INSERT's last until its statement does.
	 */
	foreach(lc, indexes)
		UnlockRelationOid(lfirst_oid(lc), RowExclusiveLock);
	list_free(indexes);
	kept_insert.estate = estate;
	kept_insert.rri = rri;
	kept_insert.lxid = retries_local_xid();
	kept_insert.subid = GetCurrentSubTransactionId();
	kept_insert.stale = false;
	kept_insert.rel = kept;
	RESUME_INTERRUPTS();
	return true;
}

/*
 * call_data_attnum -- the number of a column of call_data
 */
static AttrNumber
call_data_attnum(Relation rel, const char *name)
{
	AttrNumber	attnum = get_attnum(RelationGetRelid(rel), name);

	if (attnum == InvalidAttrNumber)
		elog(ERROR, "retries: column %s of retries.call_data is missing", name);
	return attnum;
}

/*
 * direct_insert_check -- refuse to insert into call_data past the executor
 * if it has anything that only the executor honours: a trigger, a rule, a
 * CHECK constraint, row security, or a default of a column that
 * calls_insert_keyless() does not set (a bug, or a change of the table by
 * hand)
 */
static void
direct_insert_check(Relation rel)
{
	TupleDesc	desc = RelationGetDescr(rel);
	const char *what = NULL;

	if (rel->trigdesc != NULL)
		what = "a trigger";
	else if (rel->rd_rules != NULL)
		what = "a rule";
	else if (rel->rd_rel->relrowsecurity)
		what = "row security";
	else if (desc->constr != NULL)
	{
		/*
		 * The one CHECK of the extension's own, waiting_on >= 0 (1.2), holds
		 * by construction: waiting_on is a count of calls
		 */
		for (int i = 0; i < desc->constr->num_check; i++)
		{
			if (strcmp(desc->constr->check[i].ccname, "call_data_waiting_on_check") != 0)
				what = psprintf("the CHECK constraint %s", desc->constr->check[i].ccname);
		}
		for (int i = 0; i < desc->constr->num_defval; i++)
		{
			AttrNumber	att = desc->constr->defval[i].adnum;

			if (att != call_data_info.att_id && att != call_data_info.att_state &&
				att != call_data_info.att_attempts &&
				att != call_data_info.att_next_attempt &&
				att != call_data_info.att_created_at &&
				att != call_data_info.att_updated_at &&
				att != call_data_info.att_held &&
				att != call_data_info.att_priority &&
				att != call_data_info.att_waiting_on &&
				att != call_data_info.att_key_gen)
				what = psprintf("a default of column %s",
								NameStr(TupleDescAttr(desc, att - 1)->attname));
		}
	}
	if (what != NULL)
		elog(ERROR, "retries: retries.call_data has %s, which retries.call() cannot honour",
			 what);
}

/*
 * direct_insert_not_null -- refuse a row for call_data that leaves NULL in
 * a column declared NOT NULL, which table_tuple_insert() does not check
 * (a NOT NULL added by hand to a column that calls_insert_keyless() leaves
 * unset)
 */
static void
direct_insert_not_null(TupleDesc desc, TupleTableSlot *slot)
{
	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);

		if (att->attnotnull && !att->attisdropped && slot->tts_isnull[i])
			elog(ERROR, "retries: column %s of retries.call_data is NOT NULL, which retries.call() cannot honour",
				 NameStr(att->attname));
	}
}

/*
 * insert_direct -- insert a call that has no key: straight into the
 * heap and the indexes of call_data, filling in the columns' defaults here
 *
 * Nothing can conflict without a key, and this costs a fraction of an
 * INSERT statement, whose executor start-up and shutdown dominate the cost
 * of scheduling many calls in one statement.  call_data has no triggers,
 * rules, foreign keys, row security, CHECK constraints but one that holds
 * by construction, or defaults but those of the columns set here: its
 * indexes and NOT NULLs are all there is, and this honours them.
 * direct_insert_check() makes sure of it each time, and refuses a table
 * that has more; direct_insert_not_null() refuses a row that leaves a
 * NOT NULL column empty.
 */
static int64
insert_direct(Oid relid, Datum *values, const char *nulls)
{
	Relation	rel = table_open(relid, RowExclusiveLock);
	TupleDesc	desc = RelationGetDescr(rel);
	TupleTableSlot *slot;
	EState	   *estate;
	ResultRelInfo *rri;
	TimestampTz now = clock_system_statement_start();
	int64		id;
	bool		kept;

	if (call_data_info.relid != relid || call_data_info.natts != desc->natts)
	{
		call_data_info.relid = InvalidOid;
		call_data_info.att_id = call_data_attnum(rel, "id");
		call_data_info.att_policy_id = call_data_attnum(rel, "policy_id");
		call_data_info.att_args = call_data_attnum(rel, "args");
		call_data_info.att_state = call_data_attnum(rel, "state");
		call_data_info.att_attempts = call_data_attnum(rel, "attempts");
		call_data_info.att_max_attempts = call_data_attnum(rel, "max_attempts");
		call_data_info.att_next_attempt = call_data_attnum(rel, "next_attempt");
		call_data_info.att_created_at = call_data_attnum(rel, "created_at");
		call_data_info.att_updated_at = call_data_attnum(rel, "updated_at");
		call_data_info.att_scheduled_by = call_data_attnum(rel, "scheduled_by");
		call_data_info.att_schedule_id = get_attnum(relid, "schedule_id");
		call_data_info.att_gate = get_attnum(relid, "gate");
		call_data_info.att_held = get_attnum(relid, "held");
		call_data_info.att_priority = get_attnum(relid, "priority");
		call_data_info.att_limit_key = get_attnum(relid, "limit_key");
		call_data_info.att_waiting_on = get_attnum(relid, "waiting_on");
		call_data_info.att_on_event = get_attnum(relid, "on_event");
		call_data_info.att_event_deadline = get_attnum(relid, "event_deadline");
		call_data_info.att_event_wait = get_attnum(relid, "event_wait");
		call_data_info.att_key_gen = get_attnum(relid, "key_gen");
		call_data_info.seqid = retries_identity_sequence(rel, call_data_info.att_id);
		call_data_info.scheduled =
			DirectFunctionCall2(enum_in, CStringGetDatum(call_state_name(CALL_SCHEDULED)),
								ObjectIdGetDatum(TupleDescAttr(desc, call_data_info.att_state - 1)->atttypid));
		call_data_info.natts = desc->natts;
		call_data_info.relid = relid;
	}

	/* each time: a trigger or a constraint changes no column */
	direct_insert_check(rel);

	slot = MakeSingleTupleTableSlot(desc, &TTSOpsVirtual);
	ExecClearTuple(slot);
	for (int i = 0; i < desc->natts; i++)
	{
		slot->tts_values[i] = (Datum) 0;
		slot->tts_isnull[i] = true;
	}
#define SET_COLUMN(att, value) \
	do { \
		slot->tts_values[call_data_info.att - 1] = (value); \
		slot->tts_isnull[call_data_info.att - 1] = false; \
	} while (0)
	id = nextval_internal(call_data_info.seqid, false);
	SET_COLUMN(att_id, Int64GetDatum(id));
	SET_COLUMN(att_policy_id, values[CC_POLICY_ID]);
	SET_COLUMN(att_args, values[CC_ARGS]);
	SET_COLUMN(att_state, call_data_info.scheduled);
	SET_COLUMN(att_attempts, Int32GetDatum(0));
	if (nulls[CC_MAX_ATTEMPTS] != 'n')
		SET_COLUMN(att_max_attempts, values[CC_MAX_ATTEMPTS]);
	SET_COLUMN(att_next_attempt, values[CC_NEXT_ATTEMPT]);
	SET_COLUMN(att_created_at, TimestampTzGetDatum(now));
	SET_COLUMN(att_updated_at, TimestampTzGetDatum(now));
	SET_COLUMN(att_scheduled_by, values[CC_SCHEDULED_BY]);
	if (nulls[CC_SCHEDULE_ID] != 'n')
	{
		if (call_data_info.att_schedule_id == InvalidAttrNumber)
			elog(ERROR, "retries: column schedule_id of retries.call_data is missing");
		SET_COLUMN(att_schedule_id, values[CC_SCHEDULE_ID]);
	}
	if (call_data_info.att_held != InvalidAttrNumber)
	{
		/* NOT NULL, and no executor here to fill in its default */
		SET_COLUMN(att_held, values[CC_HELD]);
		if (nulls[CC_GATE] != 'n')
			SET_COLUMN(att_gate, values[CC_GATE]);
	}
	else if (nulls[CC_GATE] != 'n')
		elog(ERROR, "retries: column gate of retries.call_data is missing");
	if (call_data_info.att_priority != InvalidAttrNumber)
		SET_COLUMN(att_priority, values[CC_PRIORITY]);
	else if (DatumGetInt32(values[CC_PRIORITY]) != 0)
		elog(ERROR, "retries: column priority of retries.call_data is missing");
	if (nulls[CC_LIMIT_KEY] != 'n')
	{
		if (call_data_info.att_limit_key == InvalidAttrNumber)
			elog(ERROR, "retries: column limit_key of retries.call_data is missing");
		SET_COLUMN(att_limit_key, values[CC_LIMIT_KEY]);
	}
	if (call_data_info.att_waiting_on != InvalidAttrNumber)
		SET_COLUMN(att_waiting_on, values[CC_WAITING_ON]);
	else if (DatumGetInt32(values[CC_WAITING_ON]) != 0)
		elog(ERROR, "retries: column waiting_on of retries.call_data is missing");
	if (call_data_info.att_key_gen != InvalidAttrNumber)
		SET_COLUMN(att_key_gen, Int32GetDatum(0));	/* NOT NULL, no key */
	if (nulls[CC_ON_EVENT] != 'n')
	{
		if (call_data_info.att_on_event == InvalidAttrNumber ||
			call_data_info.att_event_deadline == InvalidAttrNumber ||
			call_data_info.att_event_wait == InvalidAttrNumber)
			elog(ERROR, "retries: column on_event of retries.call_data is missing");
		SET_COLUMN(att_on_event, values[CC_ON_EVENT]);
		SET_COLUMN(att_event_wait, values[CC_EVENT_WAIT]);
		if (nulls[CC_EVENT_DEADLINE] != 'n')
			SET_COLUMN(att_event_deadline, values[CC_EVENT_DEADLINE]);
	}
#undef SET_COLUMN
	ExecStoreVirtualTuple(slot);
	direct_insert_not_null(desc, slot);

	kept = retries_preloaded && kept_insert_open(rel);
	if (kept)
	{
		/* the indexes as the transaction keeps them open */
		estate = kept_insert.estate;
		rri = kept_insert.rri;
	}
	else
	{
		estate = CreateExecutorState();
		rri = makeNode(ResultRelInfo);
		InitResultRelInfo(rri, rel, 1, NULL, 0);
		ExecOpenIndices(rri, false);
	}
	table_tuple_insert(rel, slot, GetCurrentCommandId(true), 0, NULL);
	(void) retries_insert_index_tuples(rri, slot, estate);
	if (kept)
		ResetPerTupleExprContext(estate);
	else
	{
		ExecCloseIndices(rri);
		FreeExecutorState(estate);
	}
	ExecDropSingleTupleTableSlot(slot);
	table_close(rel, NoLock);

	/* as after any statement: later ones of this transaction see the call */
	CommandCounterIncrement();
	return id;
}

/*
 * calls_insert_keyless -- insert a call without a key (values and nulls
 * in CallColumn's order) and return its id
 */
int64
calls_insert_keyless(Datum *values, const char *nulls)
{
	return insert_direct(get_relname_relid("call_data", schema_retries_oid()),
						 values, nulls);
}

/*
 * calls_insert_keyed -- insert a call with a key as the key's call number
 * values[CC_KEY_GEN], from version 1.6, and return its id; 0 if another
 * transaction made that number meanwhile (the unique index call_data_key:
 * the caller looks again)
 */
int64
calls_insert_keyed(Datum *values, const char *nulls)
{
	static SPIPlanPtr plans[2];
	bool		windows = (schema_retries_version() >= SCHEMA_1_7);
	SPIPlanPtr	plan;
	bool		isnull;

#define INSERT_KEYED(window_column, window_value) \
	"INSERT INTO retries.call_data" \
	" (policy_id, args, max_attempts, next_attempt, scheduled_by, key," \
	"  gate, held, priority, limit_key, waiting_on," \
	"  on_event, event_deadline, event_wait, key_gen, created_at, updated_at" \
	window_column ")" \
	" VALUES ($1, $2, $3, $4, $5::pg_catalog.regrole, $6," \
	"  $8::pg_catalog.oid, $9, $10, $11, $12, $13, $14, $15, $16," \
	"  pg_catalog.statement_timestamp(), pg_catalog.statement_timestamp()" \
	window_value ")" \
	" ON CONFLICT (scheduled_by, pg_catalog.md5(key), key_gen)" \
	" WHERE key IS NOT NULL" \
	" DO NOTHING RETURNING id"
	if (windows)
		plan = plans_prepare_kept(&plans[1], INSERT_KEYED(", key_window", ", $17"),
								  CALL_COLUMNS, call_column_types);
	else
		plan = plans_prepare_kept(&plans[0], INSERT_KEYED("", ""),
								  CALL_COLUMNS, call_column_types);
#undef INSERT_KEYED

	if (SPI_execute_plan(plan, values, nulls, false, 0) != SPI_OK_INSERT_RETURNING)
		elog(ERROR, "could not insert a call");
	if (SPI_processed != 1)
		return 0;
	return DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0],
									   SPI_tuptable->tupdesc, 1, &isnull));
}

/*
 * calls_insert_unfinished_key -- insert a call with a key before version
 * 1.6, unless the role has a call of that key (unfinished, at 1.1; kept,
 * from 1.2), whose id it returns instead with *inserted false; 0 if the
 * key changed hands each time it looked (KEY_RACE_ATTEMPTS)
 */
int64
calls_insert_unfinished_key(Datum *values, const char *nulls, bool *inserted)
{
	static SPIPlanPtr insert_plan = NULL;
	static SPIPlanPtr gated_insert_plan = NULL;
	static SPIPlanPtr find_plans[2];
	SPIPlanPtr	plan;
	bool		lasting = (schema_retries_version() >= SCHEMA_1_2);
	bool		isnull;

	*inserted = true;

	/*
	 * The conflict clause names the index of 1.1, among unfinished calls; it
	 * implies that of 1.2, among all calls, which it then names.
	 */
	if (nulls[CC_GATE] == 'n' && DatumGetInt32(values[CC_PRIORITY]) == 0 && nulls[CC_LIMIT_KEY] == 'n' &&
		DatumGetInt32(values[CC_WAITING_ON]) == 0)
		plan = plans_prepare_kept(&insert_plan,
								  "INSERT INTO retries.call_data"
								  " (policy_id, args, max_attempts, next_attempt, scheduled_by, key)"
								  " VALUES ($1, $2, $3, $4, $5::pg_catalog.regrole, $6)"
								  " ON CONFLICT (scheduled_by, pg_catalog.md5(key))"
								  " WHERE key IS NOT NULL"
								  " AND state OPERATOR(pg_catalog.=) ANY ('{scheduled,running}')"
								  " DO NOTHING RETURNING id",
								  6, call_column_types);
	else
		plan = plans_prepare_kept(&gated_insert_plan,
								  "INSERT INTO retries.call_data"
								  " (policy_id, args, max_attempts, next_attempt, scheduled_by, key,"
								  "  gate, held, priority, limit_key, waiting_on)"
								  " VALUES ($1, $2, $3, $4, $5::pg_catalog.regrole, $6,"
								  "  $8::pg_catalog.oid, $9, $10, $11, $12)"
								  " ON CONFLICT (scheduled_by, pg_catalog.md5(key))"
								  " WHERE key IS NOT NULL"
								  " AND state OPERATOR(pg_catalog.=) ANY ('{scheduled,running}')"
								  " DO NOTHING RETURNING id",
								  CALL_COLUMNS, call_column_types);

	for (int i = 0; i < KEY_RACE_ATTEMPTS; i++)
	{
		if (SPI_execute_plan(plan, values, nulls, false, 0) != SPI_OK_INSERT_RETURNING)
			elog(ERROR, "could not insert a call");
		if (SPI_processed == 1)
			break;

		/* a conflict: find the call holding the key */
		*inserted = false;
		if (find_plans[lasting] == NULL)
			plans_prepare_kept(&find_plans[lasting],
							   psprintf("SELECT id FROM retries.call_data"
										" WHERE scheduled_by OPERATOR(pg_catalog.=) $5::pg_catalog.regrole"
										" AND pg_catalog.md5(key)"
										" OPERATOR(pg_catalog.=) pg_catalog.md5($6)"
										" AND key OPERATOR(pg_catalog.=) $6%s",
										lasting ? "" :
										" AND state OPERATOR(pg_catalog.=) ANY ('{scheduled,running}')"),
							   6, call_column_types);
		if (SPI_execute_plan(find_plans[lasting], values, nulls, false, 1) != SPI_OK_SELECT)
			elog(ERROR, "could not look up a call by key");
		if (SPI_processed == 1)
			break;
		/* that call finished (or was pruned) meanwhile: try to insert again */
		*inserted = true;
	}
	if (SPI_processed != 1)
		return 0;
	return DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0],
									   SPI_tuptable->tupdesc, 1, &isnull));
}
