/*-------------------------------------------------------------------------
 *
 * colocate.c
 *	  retries.call(..., colocate_with, shard_key) on Citus (1.7): a call
 *	  made on, and run by, the node that holds a value's shard.
 *
 * The call travels as a row inserted into a mailbox: a table that
 * retries.citus_setup() distributes beside colocate_with (in its
 * colocation group), retries.call_mailbox_N for group N.  Citus routes
 * the INSERT to the node holding the shard of shard_key, over its
 * connection as the calling role, in the caller's transaction.  There the
 * mailbox's trigger (retries.mailbox_deliver, before the insert) makes
 * the call with retries.call() as that role, on that node, with every
 * check a call made there has, and gives the row the call's id, which the
 * INSERT returns; after the insert it deletes the row: a mailbox is always
 * empty once its inserting statement ends, so a shard move has nothing of
 * it to move.
 *
 * Exactly once: the caller's transaction and the remote one commit
 * together through Citus's two-phase commit.  Citus uses it on its own
 * only when a transaction writes through more than one connection; an
 * INSERT of one row into one shard would otherwise be committed on its
 * node before the caller's local commit, so a crash between the two would
 * keep a call whose caller's transaction did not commit.  The insert asks
 * for it (Use2PCForCoordinatedTransaction, looked up in Citus's library).
 *
 * A call whose shard is on this node is made here directly.
 *
 * Call ids name their node: retries.citus_setup() gives each node group's
 * ids a range of their own (the group id times 2^48 and up).  So
 * retries.wait(), result() and cancel() of a call that another node keeps
 * are forwarded there (colocate_forward), as the role, over a connection
 * of Citus's (master_run_on_worker), to retries.node_op(), which hands
 * back the value or the error with its SQLSTATE.  DROP EXTENSION drops
 * the mailboxes through Citus first (colocate_drop_mailboxes).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_namespace.h"
#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "storage/proc.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/regproc.h"
#include "utils/snapmgr.h"

#include "api/api.h"
#include "base/base.h"
#include "base/compat.h"
#include "tables/tables.h"

PG_FUNCTION_INFO_V1(retries_mailbox_deliver);

/* retries.call()'s arguments, by position, and how many it has from 1.7 */
#define CALL_COLOCATE_WITH	11
#define CALL_SHARD_KEY		12
#define CALL_DEBOUNCE_MAX_ARG	13

/*
 * The columns of a mailbox that a call fills: shard_key, then retries.call()'s
 * arguments but colocate_with and shard_key
 */
#define MAILBOX_COLUMNS		13
#define CALL_NARGS_1_7		13

/*
 * The ids of the calls that this transaction made on other nodes: until it
 * commits, those nodes' other sessions cannot see them (made_here_lxid
 * says which transaction the list, kept in its memory, is of)
 */
static List *made_elsewhere = NIL;
static LocalTransactionId made_elsewhere_lxid = InvalidLocalTransactionId;

/* Where the shard of a call's value is */
typedef struct ShardPlace
{
	int32		colocation;		/* colocate_with's colocation group */
	int32		group;			/* the node group holding the shard */
	int32		local_group;	/* this node's */
} ShardPlace;

/* error context callback of shard_key's conversion */
static void
shard_key_context(void *arg)
{
	errcontext("shard_key, converted to the type of the distribution column of table %s",
			   (const char *) arg);
}

/*
 * shard_place -- where the shard of 'key' of distributed table 'rel' is;
 * errors name colocate_with and shard_key.  With SPI connected.
 */
static void
shard_place(Oid rel, text *key, ShardPlace *place)
{
	static SPIPlanPtr table_plan = NULL;
	static SPIPlanPtr shard_plan = NULL;
	Oid			argtypes[2] = {REGCLASSOID, TEXTOID};
	Datum		values[2] = {ObjectIdGetDatum(rel), PointerGetDatum(key)};
	bool		isnull;
	TupleDesc	desc;
	HeapTuple	tup;
	ErrorContextCallback context;

	if (!citus_here())
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("colocate_with needs Citus"),
				 errhint("Make calls with colocate_with on a Citus cluster, after CREATE EXTENSION citus and SELECT retries.citus_setup(colocate_with).")));
	plans_prepare_kept(&table_plan,
					   "SELECT p.colocationid, p.partmethod,"
					   " (SELECT l.groupid FROM pg_catalog.pg_dist_local_group l)"
					   " FROM pg_catalog.pg_dist_partition p"
					   " WHERE p.logicalrelid OPERATOR(pg_catalog.=) $1",
					   1, argtypes);
	if (SPI_execute_plan(table_plan, values, NULL, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "retries: could not read Citus's metadata of a table");
	if (SPI_processed != 1 ||
		strcmp(SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2), "h") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("colocate_with: table %s is not a hash-distributed table",
						DatumGetCString(DirectFunctionCall1(regclassout, ObjectIdGetDatum(rel)))),
				 errhint("Give a table made with create_distributed_table().")));
	tup = SPI_tuptable->vals[0];
	desc = SPI_tuptable->tupdesc;
	place->colocation = DatumGetInt32(SPI_getbinval(tup, desc, 1, &isnull));
	place->local_group = DatumGetInt32(SPI_getbinval(tup, desc, 3, &isnull));

	/* the shard's placement: get_shard_id_... converts the value as text */
	context.callback = shard_key_context;
	context.arg = DatumGetCString(DirectFunctionCall1(regclassout, ObjectIdGetDatum(rel)));
	context.previous = error_context_stack;
	error_context_stack = &context;
	plans_prepare_kept(&shard_plan,
					   "SELECT pl.groupid FROM pg_catalog.pg_dist_placement pl"
					   " WHERE pl.shardid OPERATOR(pg_catalog.=)"
					   "  pg_catalog.get_shard_id_for_distribution_column($1, $2)"
					   " ORDER BY pl.groupid OPERATOR(pg_catalog.=) $3 DESC LIMIT 1",
					   3, (Oid[]) {REGCLASSOID, TEXTOID, INT4OID});
	if (SPI_execute_plan(shard_plan,
						 (Datum[]) {values[0], values[1], Int32GetDatum(place->local_group)},
						 NULL, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "retries: could not find the shard of a value");
	error_context_stack = context.previous;
	if (SPI_processed != 1)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("shard_key: the shard of \"%s\" in table %s has no placement",
						text_to_cstring(key), get_rel_name(rel))));
	place->group = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc,
											   1, &isnull));
}

/*
 * mailbox_insert -- the INSERT into the mailbox of colocation group
 * 'colocation', its shard key cast to the distribution column's type,
 * prepared and kept (for one mailbox at a time: most databases make calls
 * beside one colocation group's tables); error if retries.citus_setup()
 * has not made that mailbox
 */
static SPIPlanPtr
mailbox_insert(Oid rel, int32 colocation)
{
	static Oid	kept_mailbox = InvalidOid;
	static SPIPlanPtr kept_plan = NULL;
	char	   *name = psprintf("call_mailbox_%d", colocation);
	Oid			mailbox = get_relname_relid(name, schema_retries_oid());
	Oid			argtypes[MAILBOX_COLUMNS] = {TEXTOID, TEXTOID, JSONBOID, TIMESTAMPTZOID, TEXTOID,
		INT4OID, TEXTOID, INT8ARRAYOID, INTERVALOID, INTERVALOID, TEXTOID, INTERVALOID,
	INTERVALOID};
	Oid			keytype;
	int32		keytypmod;
	Oid			keycoll;
	SPIPlanPtr	plan;

	if (!OidIsValid(mailbox))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("colocate_with: no mailbox for the colocation group of table %s",
						get_rel_name(rel)),
				 errhint("A superuser runs SELECT retries.citus_setup('%s') once on the coordinator.",
						 get_rel_name(rel))));
	if (mailbox == kept_mailbox && kept_plan != NULL)
		return kept_plan;
	get_atttypetypmodcoll(mailbox, get_attnum(mailbox, "shard_key"),
						  &keytype, &keytypmod, &keycoll);
	plan = SPI_prepare(psprintf("INSERT INTO retries.%s (shard_key, fn, args, run_at, key, priority,"
								" limit_key, after, key_window, debounce, on_event, event_timeout,"
								" debounce_max)"
								" VALUES (CAST($1 AS %s), $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12,"
								" $13)"
								" RETURNING id",
								quote_identifier(name),
								format_type_with_typemod(keytype, keytypmod)),
					   MAILBOX_COLUMNS, argtypes);
	if (plan == NULL)
		elog(ERROR, "retries: could not prepare the insert into a mailbox: %s",
			 SPI_result_code_string(SPI_result));
	if (SPI_keepplan(plan) != 0)
		elog(ERROR, "retries: could not keep the plan of the insert into a mailbox");
	if (kept_plan != NULL)
		SPI_freeplan(kept_plan);
	kept_plan = plan;
	kept_mailbox = mailbox;
	return plan;
}

/*
 * note_made_elsewhere -- this transaction made call 'id' on another node
 */
static void
note_made_elsewhere(int64 id)
{
	MemoryContext old;

	if (made_elsewhere_lxid != retries_local_xid())
	{
		made_elsewhere = NIL;	/* its memory went with its transaction */
		made_elsewhere_lxid = retries_local_xid();
	}
	old = MemoryContextSwitchTo(TopTransactionContext);
	made_elsewhere = lappend(made_elsewhere, palloc(sizeof(int64)));
	*(int64 *) llast(made_elsewhere) = id;
	MemoryContextSwitchTo(old);
}

/*
 * made_elsewhere_here -- did this transaction make call 'id' on another
 * node?
 */
static bool
made_elsewhere_here(int64 id)
{
	ListCell   *lc;

	if (made_elsewhere_lxid != retries_local_xid())
		return false;
	foreach(lc, made_elsewhere)
	{
		if (*(int64 *) lfirst(lc) == id)
			return true;
	}
	return false;
}

/*
 * colocate_call -- retries.call()'s colocate_with and shard_key: false if
 * the call is to be made here (none given, or the shard is on this node);
 * else the call is made on the shard's node and its id is in *id.
 * 'args' are the call's arguments, already converted as the caller.
 */
bool
colocate_call(FunctionCallInfo fcinfo, Oid fnoid, Jsonb *args, int64 *id)
{
	Oid			rel;
	text	   *key;
	ShardPlace	place;
	SPIPlanPtr	insert;
	Datum		values[MAILBOX_COLUMNS];
	char		nulls[MAILBOX_COLUMNS];
	bool		isnull;
	void		(*use_2pc) (void);

	if (PG_NARGS() < CALL_NARGS_1_7 ||
		(PG_ARGISNULL(CALL_COLOCATE_WITH) && PG_ARGISNULL(CALL_SHARD_KEY)))
		return false;
	if (PG_ARGISNULL(CALL_COLOCATE_WITH) || PG_ARGISNULL(CALL_SHARD_KEY))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s needs %s",
						PG_ARGISNULL(CALL_SHARD_KEY) ? "colocate_with" : "shard_key",
						PG_ARGISNULL(CALL_SHARD_KEY) ? "shard_key" : "colocate_with"),
				 errhint("Give both: the distributed table, and the value of its distribution column whose shard's node is to run the call.")));
	rel = PG_GETARG_OID(CALL_COLOCATE_WITH);
	key = PG_GETARG_TEXT_PP(CALL_SHARD_KEY);

	SPI_connect();
	shard_place(rel, key, &place);
	if (place.group == place.local_group)
	{
		SPI_finish();
		return false;
	}
	insert = mailbox_insert(rel, place.colocation);

	values[0] = PointerGetDatum(key);
	values[1] = CStringGetTextDatum(names_signature(fnoid));
	values[2] = JsonbPGetDatum(args);
	for (int i = 3; i < MAILBOX_COLUMNS; i++)
	{
		/* retries.call()'s arguments 2 to 10 and, after colocate's, 13 */
		int			argno = i < 12 ? i - 1 : CALL_DEBOUNCE_MAX_ARG;
		bool		given = PG_NARGS() > argno && !PG_ARGISNULL(argno);

		values[i] = given ? PG_GETARG_DATUM(argno) : (Datum) 0;
		nulls[i] = given ? ' ' : 'n';
	}
	nulls[0] = nulls[1] = nulls[2] = ' ';

	if (SPI_execute_plan(insert, values, nulls, false, 1) != SPI_OK_INSERT_RETURNING ||
		SPI_processed != 1)
		elog(ERROR, "retries: the mailbox of a Citus node returned no call id");
	*id = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	if (isnull)
		elog(ERROR, "retries: the mailbox of a Citus node returned no call id");
	note_made_elsewhere(*id);
	/* both commit, or neither: two-phase commit (see the top) */
	use_2pc = (void (*) (void)) citus_symbol("Use2PCForCoordinatedTransaction");
	if (use_2pc == NULL)
		elog(ERROR, "retries: Citus's library has no Use2PCForCoordinatedTransaction()");
	use_2pc();
	SPI_finish();
	return true;
}

/*
 * deliver -- make the call of a mailbox row 'tup' here, as the current
 * role, through retries.call(); its id
 */
static int64
deliver(TupleDesc desc, HeapTuple tup)
{
	static const char *const columns[MAILBOX_COLUMNS - 1] = {"fn", "args", "run_at", "key",
		"priority", "limit_key", "after", "key_window", "debounce", "on_event", "event_timeout",
	"debounce_max"};
	static SPIPlanPtr plan = NULL;
	Oid			argtypes[MAILBOX_COLUMNS - 1] = {TEXTOID, JSONBOID, TIMESTAMPTZOID, TEXTOID,
		INT4OID, TEXTOID, INT8ARRAYOID, INTERVALOID, INTERVALOID, TEXTOID, INTERVALOID,
	INTERVALOID};
	Datum		values[MAILBOX_COLUMNS - 1];
	char		nulls[MAILBOX_COLUMNS - 1];
	bool		isnull;
	int64		id;

	for (int i = 0; i < MAILBOX_COLUMNS - 1; i++)
	{
		int			att = SPI_fnumber(desc, columns[i]);

		if (att <= 0 || SPI_gettypeid(desc, att) != argtypes[i])
			elog(ERROR, "retries: column %s of a mailbox is missing or not of its type", columns[i]);
		values[i] = SPI_getbinval(tup, desc, att, &isnull);
		nulls[i] = isnull ? 'n' : ' ';
	}
	/* as the inserting role: the executor checks EXECUTE on retries.call */
	plans_prepare_kept(&plan,
					   "SELECT retries.call(CAST($1 AS pg_catalog.regprocedure),"
					   " $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, debounce_max => $12)",
					   MAILBOX_COLUMNS - 1, argtypes);
	if (SPI_execute_plan(plan, values, nulls, false, 1) != SPI_OK_SELECT ||
		SPI_processed != 1)
		elog(ERROR, "retries: could not make the call of a mailbox");
	id = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	return id;
}

/*
 * check_mailbox -- the column id of 'rel', if it is a mailbox or a shard
 * of one (a table of schema retries named call_mailbox_N or
 * call_mailbox_N_SHARDID, whose column id is a bigint: the trigger writes
 * the call's id there); error otherwise
 */
static AttrNumber
check_mailbox(Relation rel)
{
	const char *name = RelationGetRelationName(rel);
	int			att = SPI_fnumber(RelationGetDescr(rel), "id");
	size_t		digits;

	digits = strncmp(name, "call_mailbox_", 13) == 0 ? strspn(name + 13, "0123456789_") : 0;
	if (RelationGetNamespace(rel) != schema_retries_oid() || digits == 0 ||
		name[13 + digits] != '\0' || att <= 0 ||
		TupleDescAttr(RelationGetDescr(rel), att - 1)->atttypid != INT8OID)
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("retries.mailbox_deliver() fires only on the mailboxes of retries, not on table %s",
						name),
				 errhint("retries.citus_setup() makes the mailboxes.")));
	return att;
}

/*
 * retries_mailbox_deliver -- trigger of a mailbox's shards (see the top):
 * before the insert of a row, make its call and give the row its id;
 * after it, delete the row
 */
Datum
retries_mailbox_deliver(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;
	Relation	rel;
	HeapTuple	tup;
	int			att;
	Datum		value;
	bool		isnull = false;

	if (!CALLED_AS_TRIGGER(fcinfo) || !TRIGGER_FIRED_BY_INSERT(trigdata->tg_event) ||
		!TRIGGER_FIRED_FOR_ROW(trigdata->tg_event))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("retries.mailbox_deliver() must be fired for each row inserted")));
	rel = trigdata->tg_relation;
	tup = trigdata->tg_trigtuple;
	att = check_mailbox(rel);

	if (TRIGGER_FIRED_AFTER(trigdata->tg_event))
	{
		/* this transaction's own row, just inserted: no one else sees it */
		CommandCounterIncrement();
		simple_table_tuple_delete(rel, &tup->t_self, GetActiveSnapshot());
		return PointerGetDatum(NULL);
	}

	SPI_connect();
	value = Int64GetDatum(deliver(RelationGetDescr(rel), tup));
	SPI_finish();
	return PointerGetDatum(heap_modify_tuple_by_cols(tup, RelationGetDescr(rel), 1, &att,
													 &value, &isnull));
}

/*
 * node_of_call -- the node group that call 'id' is kept on, if that is
 * another node than this: on Citus the ids of each node group run in a
 * range of their own (retries.citus_id_range(): the group id times 2^48
 * and up).  A call kept here is this node's whatever its id (one made
 * before the ranges were given).  With SPI connected.
 */
static bool
node_of_call(int64 id, int32 *group)
{
	Oid			argtypes[2] = {INT8OID, INT4OID};
	Datum		values[2];
	bool		isnull;
	RetriesUserSwitch save;

	if (!citus_here() || id <= 0)
		return false;
	*group = (int32) (id >> 48);
	values[0] = Int64GetDatum(id);
	values[1] = Int32GetDatum(*group);
	/* whose the call is, the node that keeps it says */
	access_become_owner(&save);
	if (SPI_execute_with_args("SELECT $2 OPERATOR(pg_catalog.<>) l.groupid"
							  "  AND NOT EXISTS (SELECT FROM retries.call_data c"
							  "   WHERE c.id OPERATOR(pg_catalog.=) $1)"
							  " FROM pg_catalog.pg_dist_local_group l",
							  2, argtypes, values, NULL, true, 1) != SPI_OK_SELECT ||
		SPI_processed != 1)
		elog(ERROR, "retries: could not read Citus's group of this node");
	access_restore_user(&save);
	return DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
}

/*
 * raise_node_error -- raise the error that retries.node_op() returned
 * from node group 'group' (its fields in 'reply'), with its SQLSTATE
 */
static void
raise_node_error(int32 group, HeapTuple reply, TupleDesc desc)
{
	char	   *state = SPI_getvalue(reply, desc, 2);
	char	   *message = SPI_getvalue(reply, desc, 3);
	char	   *detail = SPI_getvalue(reply, desc, 4);
	char	   *hint = SPI_getvalue(reply, desc, 5);
	int			code = ERRCODE_INTERNAL_ERROR;

	if (state != NULL && strlen(state) == 5)
		code = MAKE_SQLSTATE(state[0], state[1], state[2], state[3], state[4]);
	ereport(ERROR,
			(errcode(code),
			 errmsg_internal("%s", message != NULL ? message : "(no message)"),
			 detail != NULL ? errdetail_internal("%s", detail) : 0,
			 hint != NULL ? errhint("%s", hint) : 0,
			 errcontext("the call's node, in Citus node group %d", group)));
}

/*
 * colocate_forward -- run retries.wait(), result() or cancel() ('op') of
 * call 'id' on the node that keeps it, if that is another Citus node;
 * false if the call is this node's.  The call's value (jsonb) is in
 * *value, NULL in *isnull.  Through Citus's master_run_on_worker(), as the
 * role, on a connection of its own: a cancel there commits at once.
 */
bool
colocate_forward(const char *op, int64 id, FunctionCallInfo fcinfo, int timeout_arg,
				 Datum *value, bool *isnull)
{
	int32		group;
	char	   *command;
	HeapTuple	reply;
	TupleDesc	desc;
	bool		null;

	SPI_connect();
	if (!node_of_call(id, &group))
	{
		SPI_finish();
		return false;
	}
	if (made_elsewhere_here(id))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("call " INT64_FORMAT " was made on another node by this transaction, which has not committed",
						id),
				 errdetail("The call's node (Citus node group %d) is reached over a connection of its own, which sees the call once this transaction commits.",
						   group),
				 errhint("%s it after COMMIT.", strcmp(op, "cancel") == 0 ? "Cancel" :
						 strcmp(op, "wait") == 0 ? "Wait for" : "Read its result")));
	command = psprintf("SELECT retries.node_op('%s', " INT64_FORMAT ", %s)", op, id,
					   timeout_arg < 0 || PG_ARGISNULL(timeout_arg) ? "NULL" :
					   quote_literal_cstr(DatumGetCString(DirectFunctionCall1(interval_out,
																			  PG_GETARG_DATUM(timeout_arg)))));
	if (SPI_execute_with_args("SELECT a.success, r.v OPERATOR(pg_catalog.->>) 'sqlstate',"
							  "  r.v OPERATOR(pg_catalog.->>) 'message',"
							  "  r.v OPERATOR(pg_catalog.->>) 'detail',"
							  "  r.v OPERATOR(pg_catalog.->>) 'hint',"
							  "  r.v OPERATOR(pg_catalog.?) 'value',"
							  "  CASE WHEN pg_catalog.jsonb_typeof(r.v OPERATOR(pg_catalog.->) 'value')"
							  "   OPERATOR(pg_catalog.<>) 'null' THEN r.v OPERATOR(pg_catalog.->) 'value' END,"
							  "  a.result"
							  " FROM pg_catalog.pg_dist_node n,"
							  "  pg_catalog.master_run_on_worker(ARRAY[n.nodename], ARRAY[n.nodeport],"
							  "   ARRAY[$2], false) a,"
							  "  LATERAL (SELECT CASE WHEN a.success THEN CAST(a.result AS pg_catalog.jsonb) END) r(v)"
							  " WHERE n.groupid OPERATOR(pg_catalog.=) $1"
							  "  AND n.noderole OPERATOR(pg_catalog.=) 'primary'",
							  2, (Oid[]) {INT4OID, TEXTOID},
							  (Datum[]) {Int32GetDatum(group), CStringGetTextDatum(command)},
							  NULL, false, 1) != SPI_OK_SELECT)
		elog(ERROR, "retries: could not reach the node of a call");
	if (SPI_processed != 1)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("call " INT64_FORMAT " does not exist", id),
				 errdetail("Its id names Citus node group %d, which has no primary node.", group)));
	reply = SPI_tuptable->vals[0];
	desc = SPI_tuptable->tupdesc;
	if (!DatumGetBool(SPI_getbinval(reply, desc, 1, &null)))
		ereport(ERROR,
				(errcode(ERRCODE_CONNECTION_FAILURE),
				 errmsg("could not reach the node of call " INT64_FORMAT " (Citus node group %d): %s",
						id, group, SPI_getvalue(reply, desc, 8)),
				 errhint("The call is kept on that node; try again once it is up.")));
	if (!DatumGetBool(SPI_getbinval(reply, desc, 6, &null)))
		raise_node_error(group, reply, desc);
	*value = SPI_getbinval(reply, desc, 7, isnull);
	if (!*isnull)
		*value = SPI_datumTransfer(*value, false, -1);
	SPI_finish();
	return true;
}

/*
 * colocate_calls_row -- a row of retries.calls from its jsonb form, as
 * retries.node_op() returns it for a wait
 */
Datum
colocate_calls_row(Datum value)
{
	bool		isnull;
	Datum		row;

	SPI_connect();
	if (SPI_execute_with_args("SELECT pg_catalog.jsonb_populate_record(CAST(NULL AS retries.calls), $1)",
							  1, (Oid[]) {JSONBOID}, &value, NULL, true, 1) != SPI_OK_SELECT ||
		SPI_processed != 1)
		elog(ERROR, "retries: could not read the row of a call of another node");
	row = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	row = SPI_datumTransfer(row, false, -1);
	SPI_finish();
	return row;
}

/*
 * colocate_drop_mailboxes -- before DROP EXTENSION retries, on a Citus
 * coordinator: drop the mailboxes that retries.citus_setup() made, through
 * Citus, which drops their shards on the nodes.  They are not members of
 * the extension: dropped with it, Citus would forget them and leave their
 * shards, in a schema retries, on the worker nodes.  The shards that a
 * shard move left on their old node, which Citus drops in its own time,
 * are dropped first: their triggers would keep DROP EXTENSION from
 * dropping the trigger function there.
 */
void
colocate_drop_mailboxes(void)
{
	SPITupleTable *rows;
	uint64		n;

	if (!citus_here() || !OidIsValid(get_extension_oid("retries", true)))
		return;
	SPI_connect();
	if (SPI_execute("SELECT pg_catalog.format('retries.%I', c.relname)"
					" FROM pg_catalog.pg_class c, pg_catalog.pg_dist_local_group l"
					" WHERE c.relnamespace OPERATOR(pg_catalog.=) 'retries'::pg_catalog.regnamespace"
					"  AND c.relname OPERATOR(pg_catalog.~) '^call_mailbox_[0-9]+$'"
					"  AND c.relkind OPERATOR(pg_catalog.=) 'r'"
					"  AND l.groupid OPERATOR(pg_catalog.=) 0",
					true, 0) != SPI_OK_SELECT)
		elog(ERROR, "retries: could not list the mailboxes");
	rows = SPI_tuptable;
	n = SPI_processed;
	/* the shards a move left behind, which Citus drops later, first */
	if (n > 0 && SPI_execute("CALL pg_catalog.citus_cleanup_orphaned_resources()",
							 false, 0) != SPI_OK_UTILITY)
		elog(ERROR, "retries: could not drop the shards that shard moves left");
	for (uint64 i = 0; i < n; i++)
	{
		if (SPI_execute(psprintf("DROP TABLE %s", SPI_getvalue(rows->vals[i], rows->tupdesc, 1)),
						false, 0) != SPI_OK_UTILITY)
			elog(ERROR, "retries: could not drop a mailbox");
	}
	SPI_finish();
}
