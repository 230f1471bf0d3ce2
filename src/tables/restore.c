/*-------------------------------------------------------------------------
 *
 * restore.c
 *	  Holding the extension while a dump is restored into it.
 *
 * Restores.  A restore that is not one transaction (pg_restore without
 * --single-transaction, psql -f of a plain dump) commits the restored
 * CREATE EXTENSION before it loads the tables, with the id sequences back
 * at 1.  A policy, call or schedule that another session made meanwhile
 * would take an id that the dump's rows need: that table's data would
 * fail to load, and the restored rows that refer to those ids (a call's
 * policy_id) would name the other session's rows, so that a restored call
 * of one role could run another role's function.  So a CREATE EXTENSION
 * made by a restore (hooks.c tells it by the settings pg_dump's output
 * starts with: a superuser's CREATE EXTENSION [IF NOT EXISTS] under
 * check_function_bodies = off) holds the extension, noted in shared
 * memory, until its session ends (or the transaction of that CREATE
 * EXTENSION rolls back, undoing it); meanwhile the extension's
 * functions refuse every session (55000), the restoring one too (it runs
 * other roles' code: CHECK constraints, triggers), and the workers run
 * nothing in the database.  A restore in several sessions (pg_restore
 * --section, one run per section) outlives that hold; so the same CREATE
 * EXTENSION also moves the id sequences far above every id in use, to a
 * point drawn at random: an id taken in between is none of the dump's,
 * whose own setval() then puts each sequence back (scatter_ids).
 *
 * Rows already there.  A restore never mixes its rows with rows that the
 * extension had before it: the dump's rows would take their ids, and a
 * restored call could name another role's policy.  So a restore's CREATE
 * EXTENSION that finds the extension there with rows made before it fails
 * (55000).  A restore goes on after an error (psql without ON_ERROR_STOP,
 * pg_restore without --exit-on-error, or with -j, whose other sessions
 * load the data), so the refusal is noted for the database's extension in
 * shared memory (RetriesLoads), and while it is, every COPY FROM into the
 * extension's tables, from any session, fails the same way before it
 * loads a row.  The note lasts until the extension is dropped (a new one
 * has another OID) or the server stops.
 *
 * Without the note (a restart since, pg_restore --data-only), a COPY FROM
 * into one of the tables fails, and takes the note, if that table holds
 * rows made before any restore, or another table does that no COPY has
 * loaded since the server started: shared memory keeps which tables of
 * the extension a COPY has loaded, whose rows are then a restore's (a
 * dump loads each table once, so that each table is empty of the dump's
 * rows before its own COPY, and the dump's calls are not taken for rows
 * that its attempts, say, would mix with).  Which rows were made before
 * any restore, per table (config_tables): those whose id, or the id of
 * the call they belong to, lies below the range that scatter_ids() draws
 * from (below 2^44 in the low 48 bits for calls and schedules, below 2^29
 * for policies), so that the rows that other sessions make during a
 * restore in several runs do not count; and every row of function_names,
 * flow_data and event_data, which have no ids, unless the ids are
 * scattered (restore_ids_scattered: a restore's CREATE EXTENSION has run,
 * and the dump's setval(), which pg_dump puts after the data, has not
 * come yet).  A restore that a restart interrupts is refused when it goes
 * on: its tables loaded so far look as made before.  INSERTs (pg_dump
 * --inserts) are not caught: only a hook on every statement could.
 *
 * Events made during a restore.  From 1.7 event_data keeps one row per
 * event of a role (a unique index; the row is the event's lock, see
 * name_locks.c), and a restore may meet an event of the dump's that a role
 * emitted, or made a call wait for, while it ran (between the runs of a
 * restore in several, or during the data part of one, from another
 * session), or a 1.6 dump may hold an event twice: loaded into event_data,
 * the COPY would fail, and every role's events with it (the fourteenth
 * hostile review).  So a COPY into event_data loads into event_data_load
 * instead (restore_copy_statement), a table of the same columns with no
 * index, and once its rows are checked, they join event_data's, the
 * latest emit of each event winning (merge_loaded_events): an upsert,
 * which waits for a transaction that is making the same event's row and
 * then merges with it.  And an emit made during the restore released
 * nothing of the dump's calls, not there yet: so after a COPY into
 * event_data or call_data, the calls that wait for an event emitted after
 * they were made are released (release_restored_waiters), as the emit
 * would have.
 *
 * Restores by the database owner.  She may read the tables, and so dump
 * her database (GRANTed to pg_database_owner), but not write them: a row
 * names roles whose calls run, or whose code, or whose calls it changes,
 * and one naming a role she is not a member of (a call of a superuser's)
 * would have the extension act as that role.  A superuser makes the
 * database and the extension (not trusted, it needs one), and her restore
 * loads the rows with COPY FROM: a COPY of hers into one of the tables,
 * of data from the client, in a statement of her own, runs as the
 * extension's owner (copies_as_owner), and before it ends, every row it
 * loaded is checked (check_loaded_rows: the rows of the current
 * transaction and command, by xmin and cmin): if one names a role that she
 * is not a member of (config_tables: the roles of calls, schedules,
 * events, annotations, and the owners of the functions, calls and
 * schedules that it names, when those are there), the COPY fails (42501)
 * and its rows roll back; a row of function_names of this database's own
 * must name a function there (else it would be taken for the one another
 * role makes under that OID).  Her INSERT stays refused, and so is her
 * setval(): the COPY moves each id sequence past the ids its rows hold or
 * refer to (reserve_loaded_ids), so that a row that refers to a call not
 * there (an attempt, a link of a chain) never becomes one of a call that
 * another role makes later.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/dependency.h"
#include "catalog/namespace.h"
#include "catalog/pg_authid.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "nodes/parsenodes.h"
#include "storage/ipc.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"

#include "base/base.h"
#include "shmem/shmem.h"
#include "tables/tables.h"

/*
 * The place of a call's (or schedule's) id in its range: its low 48 bits
 * (a Citus node's ids run in a range of their own), of its absolute value
 * (a worker's entry of call_after_pending is the call's id negated); is it
 * below the ids that scatter_ids() draws, 2^44 and up?
 */
#define CALL_ID_BEFORE(id) \
	"(pg_catalog.abs(" id ") OPERATOR(pg_catalog.&)" \
	" ((pg_catalog.int8 '1' OPERATOR(pg_catalog.<<) 48) OPERATOR(pg_catalog.-) 1))" \
	" OPERATOR(pg_catalog.<) (pg_catalog.int8 '1' OPERATOR(pg_catalog.<<) 44)"

/*
 * The roles that a row x names through another row, if that row is there
 * (SQL, of type oid): the owner of the function of key k, the role of
 * call id, the owner of schedule id
 */
#define KEY_OWNER(k) \
	"(SELECT n.owner::pg_catalog.oid FROM retries.function_names n" \
	" WHERE n.key OPERATOR(pg_catalog.=) " k ")"
#define CALL_ROLE(id) \
	"(SELECT c.scheduled_by::pg_catalog.oid FROM retries.call_data c" \
	" WHERE c.id OPERATOR(pg_catalog.=) " id ")"
#define SCHEDULE_OWNER(id) \
	"(SELECT s.owner::pg_catalog.oid FROM retries.schedule_data s" \
	" WHERE s.id OPERATOR(pg_catalog.=) " id ")"

/* The roles that a row x of each table names, an SQL VALUES list */
#define POLICY_ROLES \
	"(x.annotated_by::pg_catalog.oid), (" KEY_OWNER("x.fn") ")," \
	" (" KEY_OWNER("x.on_exhausted") "), (" KEY_OWNER("x.delay_fn") ")"
#define CALL_ROLES \
	"(x.scheduled_by::pg_catalog.oid), (" KEY_OWNER("x.gate") ")," \
	" (" SCHEDULE_OWNER("x.schedule_id") ")"
#define SCHEDULE_ROLES \
	"(x.owner::pg_catalog.oid), (" KEY_OWNER("x.fn") "), (" CALL_ROLE("x.last_call") ")"
/*
 * a row of this database's origin is taken by its fn (names.c): it names
 * that function's owner, and no role (0) if there is no such function yet,
 * which would be taken for the function another role makes under that OID
 */
#define FUNCTION_ROLES \
	"(x.owner::pg_catalog.oid), (CASE WHEN x.origin OPERATOR(pg_catalog.=) " \
	RETRIES_ORIGIN " THEN COALESCE((SELECT p.proowner FROM pg_catalog.pg_proc p" \
	" WHERE p.oid OPERATOR(pg_catalog.=) x.fn), 0::pg_catalog.oid) END)"

/*
 * The extension's configuration tables; which of a table's rows x were
 * made before any restore (see "Rows already there" at the top): an SQL
 * condition, or NULL for every row unless the ids are scattered; and the
 * roles that a row names (see "Restores by the database owner"): whose
 * calls run, whose code, whose calls change.  Each table has a bit in
 * RetriesLoads.loaded, by its place here.
 */
typedef struct IdRef
{
	const char *seq;			/* an id sequence of the extension's */
	const char *id;				/* an id of it that a row x holds (SQL) */
} IdRef;

typedef struct ConfigTable
{
	const char *name;
	const char *before;
	const char *roles;
	IdRef		ids[3];			/* the ids a row x holds or refers to */
} ConfigTable;

#define POLICY_SEQ "policy_data_id_seq"
#define CALL_SEQ "call_data_id_seq"
#define SCHEDULE_SEQ "schedule_data_id_seq"

/* scatter_ids: a quarter of the maximum of an integer sequence */
#define POLICY_BEFORE \
	"x.id OPERATOR(pg_catalog.<) (pg_catalog.int4 '2147483647' OPERATOR(pg_catalog./) 4)"

static const ConfigTable config_tables[] = {
	{"policy_data", POLICY_BEFORE, POLICY_ROLES, {{POLICY_SEQ, "x.id"}}},
	{"call_data", CALL_ID_BEFORE("x.id"), CALL_ROLES,
	{{CALL_SEQ, "x.id"}, {POLICY_SEQ, "x.policy_id"}, {SCHEDULE_SEQ, "x.schedule_id"}}},
	{"schedule_data", CALL_ID_BEFORE("x.id"), SCHEDULE_ROLES,
	{{SCHEDULE_SEQ, "x.id"}, {CALL_SEQ, "x.last_call"}, {POLICY_SEQ, "x.policy_id"}}},
	{"attempt_data", CALL_ID_BEFORE("x.call_id"), "(" CALL_ROLE("x.call_id") ")",
	{{CALL_SEQ, "x.call_id"}}},
	/* before: the follower, the call made with after */
	{"call_after", CALL_ID_BEFORE("x.call_id"),
		"(" CALL_ROLE("x.after_id") "), (" CALL_ROLE("x.call_id") ")",
	{{CALL_SEQ, "x.call_id"}, {CALL_SEQ, "x.after_id"}}},
	{"call_after_pending", CALL_ID_BEFORE("x.after_id"),
		"(" CALL_ROLE("pg_catalog.abs(x.after_id)") ")",
	{{CALL_SEQ, "pg_catalog.abs(x.after_id)"}}},
	{"function_names", NULL, FUNCTION_ROLES, {{NULL, NULL}}},
	{"flow_data", NULL, "(" KEY_OWNER("x.fn") ")", {{NULL, NULL}}},
	{"event_data", NULL, "(x.role::pg_catalog.oid)", {{NULL, NULL}}},
};

/* This session holds the extension for a restore */
static bool hold_noted = false;

/* ... and took the hold in the current transaction, in this subtransaction */
static bool hold_new_in_xact = false;
static SubTransactionId hold_subxact = InvalidSubTransactionId;

/*
 * drop_hold -- the hold this session took is undone with the CREATE
 * EXTENSION that took it
 */
static void
drop_hold(void)
{
	shmem_forget_restores();
	hold_noted = false;
	hold_new_in_xact = false;
	hold_subxact = InvalidSubTransactionId;
}

/*
 * restore_subxact_end -- a subtransaction ends: a hold it took goes
 * if it rolled back (ROLLBACK TO a savepoint), else passes to its parent
 */
void
restore_subxact_end(bool committed, SubTransactionId mySubid,
					SubTransactionId parentSubid)
{
	if (!hold_new_in_xact || hold_subxact != mySubid)
		return;
	if (committed)
	{
		hold_subxact = parentSubid;
		return;
	}
	drop_hold();
}

/*
 * restore_before_prepare -- refuse PREPARE TRANSACTION of a
 * transaction that took the hold: the hold is this session's, and the
 * prepared transaction would outlive it, or be rolled back after it
 */
void
restore_before_prepare(void)
{
	if (hold_new_in_xact)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot prepare a transaction that restores extension \"retries\""),
				 errhint("Restore the extension in a transaction that commits.")));
}

/*
 * restore_xact_end -- the current transaction ends: a hold that it
 * took goes if it aborted (the CREATE EXTENSION that took it is undone)
 */
void
restore_xact_end(bool committed)
{
	if (hold_new_in_xact && !committed)
		drop_hold();
	hold_new_in_xact = false;
	hold_subxact = InvalidSubTransactionId;
}

/*
 * forget_restores -- before_shmem_exit callback: this session ends, and
 * with it any restore it made
 */
static void
forget_restores(int code, Datum arg)
{
	shmem_forget_restores();
}

/*
 * scatter_ids -- move each id sequence of the extension's tables to a point
 * drawn at random far above the ids in use (see "Restores" at the top)
 *
 * A restore sets each sequence back to its value in the dump when it loads
 * the data.  Until then, an id taken by another session is one that no
 * dumped row has: the dump's rows load, and none of them can come to name
 * that session's rows.  The point is drawn, not fixed, so that the ids
 * taken during one restore are not those taken during the restore of its
 * dump.  A sequence already past it is left alone; a rollback of the
 * CREATE EXTENSION puts them back (ALTER SEQUENCE is transactional).
 */
static void
scatter_ids(void)
{
	Oid			argtypes[1] = {OIDOID};
	Datum		values[1];
	Oid			extoid = get_extension_oid("retries", true);
	SPITupleTable *rows;
	uint64		n;

	if (!OidIsValid(extoid))
		return;
	values[0] = ObjectIdGetDatum(extoid);
	SPI_connect();
	/* the identity sequences of the extension's tables */
	if (SPI_execute_with_args("SELECT n.nspname, c.relname, q.seqmax,"
							  " pg_catalog.pg_sequence_last_value(q.seqrelid::pg_catalog.regclass)"
							  " FROM pg_catalog.pg_depend e"
							  " JOIN pg_catalog.pg_depend i"
							  "  ON i.refobjid OPERATOR(pg_catalog.=) e.objid"
							  "  AND i.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass"
							  "  AND i.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass"
							  "  AND i.deptype OPERATOR(pg_catalog.=) 'i'"
							  " JOIN pg_catalog.pg_sequence q ON q.seqrelid OPERATOR(pg_catalog.=) i.objid"
							  " JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) q.seqrelid"
							  " JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace"
							  " WHERE e.refobjid OPERATOR(pg_catalog.=) $1"
							  " AND e.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_extension'::pg_catalog.regclass"
							  " AND e.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass"
							  " AND e.deptype OPERATOR(pg_catalog.=) 'e'",
							  1, argtypes, values, NULL, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "retries: could not read the extension's sequences");
	rows = SPI_tuptable;
	n = SPI_processed;
	for (uint64 row = 0; row < n; row++)
	{
		HeapTuple	tup = rows->vals[row];
		TupleDesc	desc = rows->tupdesc;
		bool		isnull;
		bool		unused;
		int64		max = DatumGetInt64(SPI_getbinval(tup, desc, 3, &isnull));
		Datum		last = SPI_getbinval(tup, desc, 4, &unused);
		int64		low = Min(max / 4, INT64CONST(1) << 44);
		uint64		draw;
		int64		point;

		if (!pg_strong_random(&draw, sizeof(draw)))
			elog(ERROR, "retries: could not draw a random point for a sequence");
		point = low + (int64) (draw % (uint64) low);
		if (!unused && DatumGetInt64(last) >= point)
			continue;
		/* ALTER SEQUENCE, not setval(): a rollback undoes it */
		if (SPI_execute(psprintf("ALTER SEQUENCE %s RESTART WITH " INT64_FORMAT,
								 quote_qualified_identifier(SPI_getvalue(tup, desc, 1),
															SPI_getvalue(tup, desc, 2)),
								 point),
						false, 0) != SPI_OK_UTILITY)
			elog(ERROR, "retries: could not move a sequence of the extension");
	}
	SPI_finish();
}

/*
 * restore_ids_scattered -- are the ids of calls where scatter_ids() put
 * them, above 2^44: has a restore made the extension, and not yet loaded
 * the dump's data (whose setval() puts the sequence back)?  Only if a
 * database makes 2^44 calls would it be so otherwise.  On Citus a node's
 * ids run in a range of 2^48 of their own (retries.citus_id_range()):
 * what counts is the place in the range, the low 48 bits.  The sequence's
 * own last_value: pg_sequence_last_value() is NULL until a RESTART is
 * used.  Inside SPI, as the extension's owner.
 */
bool
restore_ids_scattered(void)
{
	static SPIPlanPtr plan = NULL;
	bool		isnull;
	Datum		d;

	plans_prepare_kept(&plan,
					   "SELECT (last_value OPERATOR(pg_catalog.&)"
					   "  ((pg_catalog.int8 '1' OPERATOR(pg_catalog.<<) 48) OPERATOR(pg_catalog.-) 1))"
					   " OPERATOR(pg_catalog.>=) (pg_catalog.int8 '1' OPERATOR(pg_catalog.<<) 44)"
					   " FROM retries.call_data_id_seq",
					   0, NULL);
	if (SPI_execute_plan(plan, NULL, NULL, true, 1) != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "retries: could not read the sequence of call ids");
	d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	return !isnull && DatumGetBool(d);
}

/*
 * config_table -- the index in config_tables of relation relid, one of the
 * extension's configuration tables; -1 if it is none
 */
static int
config_table(Oid relid)
{
	Oid			extoid = get_extension_oid("retries", true);
	char	   *name;

	if (!OidIsValid(extoid) || !OidIsValid(relid) ||
		getExtensionOfObject(RelationRelationId, relid) != extoid ||
		(name = get_rel_name(relid)) == NULL)
		return -1;
	for (int i = 0; i < (int) lengthof(config_tables); i++)
		if (strcmp(name, config_tables[i].name) == 0)
			return i;
	return -1;
}

/*
 * table_with_old_rows -- a configuration table of the extension that holds
 * rows made before any restore, or NULL (see "Rows already there" at the
 * top): any table but those in 'loaded' (bits of config_tables), which a
 * restore's COPY loaded, and table 'target' in any case; inside SPI, as
 * the extension's owner
 */
static const char *
table_with_old_rows(int target, uint32 loaded)
{
	Oid			nspoid = schema_retries_oid();

	for (int i = 0; i < (int) lengthof(config_tables); i++)
	{
		const ConfigTable *t = &config_tables[i];

		if ((i != target && (loaded & (1U << i)) != 0) ||
			!OidIsValid(get_relname_relid(t->name, nspoid)) ||
			(t->before == NULL && restore_ids_scattered()))
			continue;
		if (SPI_execute(psprintf("SELECT FROM retries.%s x WHERE %s LIMIT 1",
								 t->name, t->before != NULL ? t->before : "true"),
						true, 1) != SPI_OK_SELECT)
			elog(ERROR, "retries: could not read table retries.%s", t->name);
		if (SPI_processed > 0)
			return t->name;
	}
	return NULL;
}

/*
 * find_old_rows -- table_with_old_rows(), read as the extension's owner
 * (the restoring role may not read the tables)
 */
static const char *
find_old_rows(int target, uint32 loaded)
{
	RetriesUserSwitch save;
	const char *found;

	schema_switch_to_owner(&save);
	SPI_connect();
	found = table_with_old_rows(target, loaded);
	SPI_finish();
	schema_switch_back(&save);
	return found;
}

/*
 * refuse_old_rows -- 55000: a restore would mix its rows with the rows of
 * 'table' made before it (NULL: a restore into the database was refused
 * so before); noted for the database (see "Rows already there" at the top)
 */
static void
refuse_old_rows(const char *table)
{
	if (shmem_attached())
		shmem_note_loads(MyDatabaseId, get_extension_oid("retries", false), true, 0);
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("extension \"retries\" already has rows in this database"),
			 table != NULL ?
			 errdetail("Table retries.%s has rows made before this restore: the restored rows would take their ids, and a restored call could name another policy.",
					   table) :
			 errdetail("A restore into this database was refused, since its tables had rows made before it: the restored rows would take their ids, and a restored call could name another policy."),
			 errhint("Restore into a database created from template0 (createdb -T template0), or drop the extension there first. Until DROP EXTENSION retries (or a restart of the server), COPY into the extension's tables is refused in this database.")));
}

/*
 * copy_table -- the relation that the command COPYs into (FROM), if it is
 * one of the extension's configuration tables; else InvalidOid
 */
static Oid
copy_table(Node *parsetree)
{
	CopyStmt   *stmt = (CopyStmt *) parsetree;
	Oid			relid;

	if (!IsA(parsetree, CopyStmt) || !stmt->is_from || stmt->relation == NULL)
		return InvalidOid;
	relid = RangeVarGetRelid(stmt->relation, NoLock, true);
	return config_table(relid) >= 0 ? relid : InvalidOid;
}

/*
 * copies_as_owner -- is this COPY into one of the extension's tables a
 * database owner's restore, to be run as the extension's owner (see
 * "Restores by the database owner" at the top)?  Only data from the
 * client, into a table named with its schema, with no WHERE (which would
 * run her expressions with the owner's rights), in a statement of her own,
 * and in a database whose extension has the columns the check reads.
 */
static bool
copies_as_owner(CopyStmt *stmt, bool toplevel)
{
	return toplevel && stmt->filename == NULL && !stmt->is_program &&
		stmt->whereClause == NULL && stmt->relation->schemaname != NULL &&
		strcmp(stmt->relation->schemaname, "retries") == 0 &&
		!superuser() && has_privs_of_role(GetUserId(), ROLE_PG_DATABASE_OWNER) &&
		schema_retries_version() >= SCHEMA_1_6;
}

/*
 * copies_events -- is 'copy' a COPY into event_data, from 1.7 (one row per
 * event: see "Events made during a restore" at the top)?
 */
static bool
copies_events(const RestoreCopy *copy)
{
	return copy->table >= 0 && strcmp(config_tables[copy->table].name, "event_data") == 0 &&
		schema_retries_version() >= SCHEMA_1_7;
}

/*
 * restore_copy_statement -- the statement to run for 'pstmt', whose COPY
 * restore_copy_begin() looked at: one into event_data loads into
 * event_data_load instead (see "Events made during a restore" at the top)
 */
PlannedStmt *
restore_copy_statement(const RestoreCopy *copy, PlannedStmt *pstmt)
{
	PlannedStmt *load;

	if (!copies_events(copy))
		return pstmt;
	load = copyObject(pstmt);
	((CopyStmt *) load->utilityStmt)->relation =
		makeRangeVar("retries", "event_data_load", -1);
	return load;
}

/*
 * execute_as_owner -- run 'sql', a statement of the extension's own, as the
 * extension's owner, which must return 'expected'; 'what' it does, for the
 * error if not
 */
static void
execute_as_owner(const char *sql, int expected, const char *what)
{
	RetriesUserSwitch save;

	schema_switch_to_owner(&save);
	SPI_connect();
	if (SPI_execute(sql, false, 0) != expected)
		elog(ERROR, "retries: could not %s", what);
	SPI_finish();
	schema_switch_back(&save);
}

/*
 * merge_loaded_events -- after a COPY into event_data (1.7): the rows it
 * loaded into event_data_load join event_data's, the latest emit of each
 * event winning
 */
static void
merge_loaded_events(void)
{
	execute_as_owner("WITH loaded AS (DELETE FROM retries.event_data_load"
					 "  RETURNING role, event, payload, emitted_at)"
					 " INSERT INTO retries.event_data AS d (role, event, payload, emitted_at)"
					 " SELECT DISTINCT ON (role, pg_catalog.md5(event))"
					 "  role, event, payload, emitted_at FROM loaded"
					 "  ORDER BY role, pg_catalog.md5(event), emitted_at DESC NULLS LAST"
					 " ON CONFLICT (role, pg_catalog.md5(event)) DO UPDATE"
					 " SET event = excluded.event, payload = excluded.payload,"
					 " emitted_at = excluded.emitted_at"
					 " WHERE d.emitted_at IS NULL"
					 " OR excluded.emitted_at OPERATOR(pg_catalog.>) d.emitted_at",
					 SPI_OK_INSERT, "merge the events a restore loaded");
}

/*
 * release_restored_waiters -- after a COPY into event_data or call_data
 * (1.7): release the calls that wait for an event emitted after they were
 * made (calls_release_restored_waiters), as the extension's owner
 */
static void
release_restored_waiters(void)
{
	RetriesUserSwitch save;

	schema_switch_to_owner(&save);
	SPI_connect();
	calls_release_restored_waiters();
	SPI_finish();
	schema_switch_back(&save);
}

/*
 * restore_copy_begin -- before a utility command: if it is a COPY FROM
 * into one of the extension's configuration tables, fill in *copy, and
 * refuse it (55000) if its rows would mix with rows made before any
 * restore, or a restore into the database was refused (see "Rows already
 * there" at the top).  A role that may not write the table, and whose
 * COPY is not a database owner's restore, learns nothing here: PostgreSQL
 * refuses it.
 */
void
restore_copy_begin(Node *parsetree, bool toplevel, RestoreCopy *copy)
{
	uint32		loaded = 0;
	const char *table;

	Oid			relid = copy_table(parsetree);

	memset(copy, 0, sizeof(RestoreCopy));
	GetUserIdAndSecContext(&copy->userid, &copy->sec_context);
	copy->table = -1;
	if (!OidIsValid(relid))
		return;
	copy->as_owner = copies_as_owner((CopyStmt *) parsetree, toplevel);
	if (!copy->as_owner &&
		pg_class_aclcheck(relid, copy->userid, ACL_INSERT) != ACLCHECK_OK)
		return;
	copy->table = config_table(relid);
	if (shmem_attached() &&
		shmem_loads(MyDatabaseId, get_extension_oid("retries", false), &loaded))
		refuse_old_rows(NULL);
	table = find_old_rows(copy->table, loaded);
	if (table != NULL)
		refuse_old_rows(table);
	/* decided before its rows load, which are older than any note */
	copy->makes_own = tables_not_a_copy();
}

/*
 * restore_copy_enter -- the COPY of restore_copy_begin() is about to run:
 * as the extension's owner, if it is a database owner's restore
 */
void
restore_copy_enter(RestoreCopy *copy)
{
	if (!copy->as_owner)
		return;
	copy->cid = GetCurrentCommandId(false);
	SetUserIdAndSecContext(schema_retries_owner(),
						   copy->sec_context | SECURITY_LOCAL_USERID_CHANGE |
						   SECURITY_RESTRICTED_OPERATION);
}

/*
 * The rows that a database owner's COPY loaded: those of the current
 * (sub)transaction ($1) and of its command ($2) or later, none having run
 * since
 */
#define LOADED_ROWS \
	"x.xmin OPERATOR(pg_catalog.=) $1" \
	" AND x.cmin::pg_catalog.text::pg_catalog.int8 OPERATOR(pg_catalog.>=) $2"

/*
 * check_loaded_rows -- 42501 if a row that the database owner's COPY
 * loaded names a role that she is not a member of (see "Restores by the
 * database owner" at the top); the rows of the COPY are those of the
 * current (sub)transaction and of its command or later, none having run
 * since.  As the extension's owner.
 */
static void
check_loaded_rows(const RestoreCopy *copy)
{
	const ConfigTable *t = &config_tables[copy->table];
	TransactionId xid = GetCurrentTransactionIdIfAny();
	Oid			argtypes[3] = {XIDOID, INT8OID, OIDOID};
	Datum		values[3];
	char	   *role = NULL;
	MemoryContext caller = CurrentMemoryContext;

	if (!TransactionIdIsValid(xid))
		return;					/* it loaded no row */
	values[0] = TransactionIdGetDatum(xid);
	values[1] = Int64GetDatum((int64) copy->cid);
	values[2] = ObjectIdGetDatum(copy->userid);
	SPI_connect();
	if (SPI_execute_with_args(psprintf("SELECT r.role::pg_catalog.regrole::pg_catalog.text"
									   " FROM retries.%s x, LATERAL (VALUES %s) r(role)"
									   " WHERE " LOADED_ROWS
									   " AND NOT pg_catalog.pg_has_role($3, r.role, 'MEMBER')"
									   " LIMIT 1",
									   copies_events(copy) ? "event_data_load" : t->name,
									   t->roles),
							  3, argtypes, values, NULL, false, 1) != SPI_OK_SELECT)
		elog(ERROR, "retries: could not read the rows loaded into table retries.%s", t->name);
	/* copied out of SPI's memory, which SPI_finish() frees */
	if (SPI_processed > 0)
		role = MemoryContextStrdup(caller,
								   SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1));
	SPI_finish();
	if (role != NULL && strcmp(role, "-") == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied to load a row naming a function that does not exist into table retries.%s",
						t->name),
				 errdetail("A row of this database's own naming no function would be taken for the function that another role makes under that OID."),
				 errhint("Have a superuser restore the dump.")));
	if (role != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied to load a row naming role %s into table retries.%s",
						role, t->name),
				 errdetail("Role \"%s\" is not a member of role %s: the row would have the extension run code as that role, or change its calls.",
						   GetUserNameFromId(copy->userid, false), role),
				 errhint("Have a superuser restore the dump.")));
}

/*
 * reserve_loaded_ids -- move each id sequence past the ids that the rows a
 * database owner's COPY loaded hold or refer to, in its range, so that no
 * new row takes one: a row that refers to a call (or schedule, or policy)
 * not there yet would otherwise be another role's once its call took that
 * id (an attempt of hers recorded as of that call; a follower let go with
 * it).  The sequences only go forward, and only so: she may read them
 * (pg_dump), not set them.  As the extension's owner.
 */
static void
reserve_loaded_ids(const RestoreCopy *copy)
{
	const ConfigTable *t = &config_tables[copy->table];
	TransactionId xid = GetCurrentTransactionIdIfAny();
	Oid			argtypes[2] = {XIDOID, INT8OID};
	Datum		values[2];

	if (!TransactionIdIsValid(xid))
		return;					/* it loaded no row */
	values[0] = TransactionIdGetDatum(xid);
	values[1] = Int64GetDatum((int64) copy->cid);
	SPI_connect();
	for (int i = 0; i < (int) lengthof(t->ids) && t->ids[i].seq != NULL; i++)
	{
		const char *seq = t->ids[i].seq;

		if (SPI_execute_with_args(psprintf("SELECT pg_catalog.setval('retries.%s'::pg_catalog.regclass, l.m)"
										   " FROM (SELECT pg_catalog.max(%s)::pg_catalog.int8 AS m"
										   "  FROM retries.%s x WHERE " LOADED_ROWS ") l,"
										   " retries.%s s, pg_catalog.pg_sequence q"
										   " WHERE q.seqrelid OPERATOR(pg_catalog.=) 'retries.%s'::pg_catalog.regclass"
										   " AND l.m OPERATOR(pg_catalog.>=) q.seqmin"
										   " AND l.m OPERATOR(pg_catalog.<=) q.seqmax"
										   " AND l.m OPERATOR(pg_catalog.>=)"
										   "  (s.last_value OPERATOR(pg_catalog.+) s.is_called::pg_catalog.int4)",
										   seq, t->ids[i].id, t->name, seq, seq),
								  2, argtypes, values, NULL, false, 0) != SPI_OK_SELECT)
			elog(ERROR, "retries: could not move sequence retries.%s past the loaded rows", seq);
	}
	SPI_finish();
}

/*
 * restore_copy_done -- the COPY of restore_copy_begin() has run: its rows
 * are checked if it was a database owner's restore, and the sequences
 * moved past their ids; the table is noted as loaded (see the top)
 */
void
restore_copy_done(const RestoreCopy *copy)
{
	if (copy->table < 0)
		return;
	if (copy->as_owner)
	{
		check_loaded_rows(copy);
		reserve_loaded_ids(copy);
	}
	/* after the check, which reads them where they were loaded */
	if (copies_events(copy))
		merge_loaded_events();
	if (schema_retries_version() >= SCHEMA_1_7 &&
		(copies_events(copy) || strcmp(config_tables[copy->table].name, "call_data") == 0))
		release_restored_waiters();
	/* rows a restore may load: the database is not a copy (home.c) */
	if (copy->makes_own)
		tables_restored_here();
	if (shmem_attached())
		shmem_note_loads(MyDatabaseId, get_extension_oid("retries", false), false,
						 1U << copy->table);
}

/*
 * restore_copy_leave -- after the COPY of restore_copy_begin(), whether it
 * ended or failed: back to the role that runs it
 */
void
restore_copy_leave(const RestoreCopy *copy)
{
	if (copy->as_owner)
		SetUserIdAndSecContext(copy->userid, copy->sec_context);
}

/*
 * restore_hold -- this session is restoring the extension:
 * hold it until the session ends (see "Restores" at the top)
 *
 * Refused (55000) if the extension has rows made before the restore (see
 * "Rows already there" at the top).  Noted in shared memory, not as a
 * lock: PostgreSQL releases a session lock when a transaction of the
 * session aborts, and a restore goes on after errors.  Only a superuser's
 * CREATE EXTENSION may call it (hooks.c): a role that could hold the
 * extension otherwise could shut every other role out.  Without the
 * library preloaded there is no shared memory, and nothing runs the calls
 * either.
 */
void
restore_hold(void)
{
	static bool registered = false;
	const char *table = find_old_rows(-1, 0);

	if (table != NULL)
		refuse_old_rows(table);
	scatter_ids();
	if (!shmem_attached())
		return;
	if (!registered)
		before_shmem_exit(forget_restores, (Datum) 0);
	registered = true;
	if (!hold_noted)
	{
		hold_new_in_xact = true;
		hold_subxact = GetCurrentSubTransactionId();
	}
	hold_noted = true;
	if (!shmem_note_restore(MyDatabaseId))
		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("too many databases are being restored at once"),
				 errdetail("retries notes at most %d restores at a time.", RETRIES_MAX_RESTORES),
				 errhint("Restore the others first.")));
}

/*
 * restore_holder -- the PID of a session restoring this database's
 * extension, 0 if none; this one's too: a restore runs code of other roles
 * (a CHECK constraint, a trigger, a SECURITY DEFINER function they call)
 * in its own session
 */
pid_t
restore_holder(void)
{
	return shmem_attached() ? shmem_restoring(MyDatabaseId) : 0;
}

/*
 * restore_refuse -- 55000 if a session restores the extension
 */
void
restore_refuse(void)
{
	pid_t		pid = restore_holder();

	if (pid != 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("extension \"retries\" is being restored in this database"),
				 errdetail("The session of PID %d, restoring a dump, made it, and holds it until that session ends; its functions are refused meanwhile, in that session too.", (int) pid),
				 errhint("Try again once the restore is over.")));
}
