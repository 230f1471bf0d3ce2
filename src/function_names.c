/*-------------------------------------------------------------------------
 *
 * function_names.c
 *	  Function references that survive pg_upgrade, pg_dump and renames.
 *
 * The extension's tables refer to functions by OID (policy_data.fn,
 * .on_exhausted, .delay_fn, schedule_data.fn, flow_data.fn, call_data.gate),
 * so that nothing on the path of a call looks a function up by name.  But
 * neither pg_upgrade nor pg_dump and restore keep the OIDs of functions
 * (and pg_upgrade refuses regprocedure columns, which pg_dump would have
 * restored by name).  So every function that those columns refer to is
 * also in retries.function_names (version 1.4), with its schema-qualified
 * signature (format_procedure_qualified: every name in it qualified, so
 * that it means the same under any search_path), its owner, and 'ext',
 * the OID of the extension when the row was written.
 *
 * Remapping.  pg_upgrade and a restore make the extension anew, with a new
 * OID: rows whose ext differs came from another cluster or database, and
 * every function OID in the tables then names nothing, or the wrong
 * function.  retries_check_function_names() finds such rows and, under an
 * exclusive lock on function_names (one remapper at a time), maps each old
 * OID to the function its signature names now (to_regprocedure, with
 * search_path pg_catalog, pg_temp) if that function has the same owner
 * (role OIDs survive pg_upgrade; regrole restores by name), so that a
 * function someone else made under that name is never taken for it; or
 * else to none: a policy of a function that is gone stops being current
 * (its calls fail as those of a dropped function), its schedules keep
 * OID 0 (their firings are skipped), its limits go.  Only a worker
 * remaps, before its batch, in a transaction of its own, and only while
 * retries.enabled is on: a restore is made with it off
 * (doc/operations.md), so no remap happens with part of the tables loaded
 * and the rest still to come with the old OIDs.  A session checks before
 * it first acts as the extension's owner, and raises 55000 while the
 * references are stale; nothing reads a function OID before that.  The
 * remap invalidates policy_data's relcache entry, so that every worker
 * drops the policies it cached.
 *
 * Renames.  A rename keeps the OID, so calls, policies and schedules are
 * unaffected; only the signature (and owner) must follow, for the next
 * upgrade.  The commands that rename, move or give away a function, or
 * rename or move a schema, a type or a table (whose row type a function
 * may take), bump the database's names_generation in shared memory as
 * they commit, and wake its workers (hooks.c); a worker that sees it
 * changed rewrites the signatures and owners that changed
 * (retries_refresh_function_names).  Other DDL makes no worker read the
 * extension's tables.
 *
 * IDENTIFICATION
 *	  src/function_names.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "commands/dbcommands.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/regproc.h"
#include "utils/syscache.h"

#include "retries.h"
#include "shmem.h"

PG_FUNCTION_INFO_V1(retries_function_signature);

/* This session found the references current (never reset: see the top) */
static bool checked = false;
/* A check is under way in this process (it acts as the owner itself) */
static bool checking = false;
/* The signatures were refreshed after this many renames in the database */
static uint64 names_seen = 0;
/* Not refreshed yet, or some rows were locked last time */
static bool names_changed = true;
/* This process is a worker, which checks before each batch itself */
static bool in_worker = false;

/*
 * retries_function_signature -- SQL function
 * retries.function_signature(oid): format_procedure_qualified, or NULL if
 * there is no such function
 */
Datum
retries_function_signature(PG_FUNCTION_ARGS)
{
	Oid			fn = PG_GETARG_OID(0);

	if (!SearchSysCacheExists1(PROCOID, ObjectIdGetDatum(fn)))
		PG_RETURN_NULL();
	PG_RETURN_TEXT_P(cstring_to_text(format_procedure_qualified(fn)));
}

/*
 * retries_function_names_available -- has this database's extension
 * function_names (1.4)?
 */
bool
retries_function_names_available(void)
{
	return OidIsValid(get_relname_relid("function_names", retries_schema_oid()));
}

/*
 * retries_register_functions -- note the signatures of the n functions of
 * 'fns' (InvalidOid entries skipped) in function_names, before a table
 * refers to them
 *
 * Call it as the extension's owner, inside SPI.  Nothing to do in a
 * database at 1.3 or older.
 */
void
retries_register_functions(const Oid *fns, int n)
{
	static SPIPlanPtr plan = NULL;
	Oid			argtypes[3] = {OIDARRAYOID, TEXTARRAYOID, OIDOID};
	Datum		values[3];
	Datum	   *oids = palloc(sizeof(Datum) * Max(n, 1));
	Datum	   *sigs = palloc(sizeof(Datum) * Max(n, 1));
	int			m = 0;

	if (!retries_function_names_available())
		return;
	for (int i = 0; i < n; i++)
	{
		if (!OidIsValid(fns[i]))
			continue;
		oids[m] = ObjectIdGetDatum(fns[i]);
		sigs[m] = CStringGetTextDatum(format_procedure_qualified(fns[i]));
		m++;
	}
	if (m == 0)
		return;
	values[0] = PointerGetDatum(construct_array(oids, m, OIDOID, sizeof(Oid),
												true, TYPALIGN_INT));
	values[1] = PointerGetDatum(construct_array(sigs, m, TEXTOID, -1,
												false, TYPALIGN_INT));
	values[2] = ObjectIdGetDatum(get_extension_oid("retries", false));
	retries_prepare_kept(&plan,
						 "INSERT INTO retries.function_names AS f (fn, signature, owner, ext)"
						 " SELECT n.fn, n.signature, p.proowner, $3"
						 " FROM ROWS FROM (pg_catalog.unnest($1), pg_catalog.unnest($2))"
						 "  AS n(fn, signature)"
						 " JOIN pg_catalog.pg_proc p ON p.oid OPERATOR(pg_catalog.=) n.fn"
						 " ON CONFLICT (fn) DO UPDATE SET signature = excluded.signature,"
						 "  owner = excluded.owner, ext = excluded.ext"
						 " WHERE f.signature OPERATOR(pg_catalog.<>) excluded.signature"
						 "  OR f.owner OPERATOR(pg_catalog.<>) excluded.owner"
						 "  OR f.ext OPERATOR(pg_catalog.<>) excluded.ext",
						 3, argtypes);
	if (SPI_execute_plan(plan, values, NULL, false, 0) != SPI_OK_INSERT)
		elog(ERROR, "retries: could not note the signatures of %d functions", m);
}

/*
 * The statements of a remap, in order, with $1 the oid[] of the old OIDs,
 * $2 that of the new ones (0: the function is gone), $3 the extension's
 * OID, $4 the int4[] of the ids of the policies that were current (made
 * not current first, so that the unique index on each function's current
 * policy is not checked against OIDs half mapped: an old OID of one
 * function may be the new OID of another), $5 the text[] of the
 * signatures and $6 flow_data as a jsonb array.  flow_data and
 * function_names, keyed by OID, are emptied and written again, for the
 * same reason, from what was read before.
 */
#define REMAP_MAP \
	"WITH m AS (SELECT * FROM ROWS FROM (pg_catalog.unnest($1::pg_catalog.oid[])," \
	" pg_catalog.unnest($2::pg_catalog.oid[])) AS m(old, new)) "
#define REMAPPED(col) \
	"coalesce((SELECT m.new FROM m WHERE m.old OPERATOR(pg_catalog.=) " col "), 0)"
#define HOOK_REMAPPED(col) \
	"CASE WHEN " col " IS NOT NULL THEN " REMAPPED(col) " END"

static const char *const remap_statements[] = {
	REMAP_MAP
	"UPDATE retries.policy_data p SET fn = " REMAPPED("p.fn") ","
	" on_exhausted = " HOOK_REMAPPED("p.on_exhausted") ","
	" delay_fn = " HOOK_REMAPPED("p.delay_fn"),
	"UPDATE retries.policy_data SET is_current = true"
	" WHERE id OPERATOR(pg_catalog.=) ANY ($4) AND fn OPERATOR(pg_catalog.<>) 0",
	REMAP_MAP
	"UPDATE retries.schedule_data s SET fn = " REMAPPED("s.fn"),
	REMAP_MAP
	"UPDATE retries.call_data c SET gate = CASE WHEN " REMAPPED("c.gate")
	"  OPERATOR(pg_catalog.<>) 0 THEN " REMAPPED("c.gate") " END,"
	" held = c.held AND " REMAPPED("c.gate") " OPERATOR(pg_catalog.<>) 0"
	" WHERE c.gate IS NOT NULL",
	"DELETE FROM retries.flow_data",
	REMAP_MAP
	"INSERT INTO retries.flow_data"
	" SELECT (pg_catalog.jsonb_populate_record(NULL::retries.flow_data,"
	"  f OPERATOR(pg_catalog.||) pg_catalog.jsonb_build_object('fn', m.new))).*"
	" FROM pg_catalog.jsonb_array_elements($6) f"
	" JOIN m ON m.old OPERATOR(pg_catalog.=)"
	"  (f OPERATOR(pg_catalog.->>) 'fn')::pg_catalog.oid"
	" WHERE m.new OPERATOR(pg_catalog.<>) 0"
	" ON CONFLICT DO NOTHING",
	"DELETE FROM retries.function_names",
	"INSERT INTO retries.function_names (fn, signature, owner, ext)"
	" SELECT n.fn, n.signature, p.proowner, $3"
	" FROM ROWS FROM (pg_catalog.unnest($2::pg_catalog.oid[]),"
	"  pg_catalog.unnest($5::pg_catalog.text[])) AS n(fn, signature)"
	" JOIN pg_catalog.pg_proc p ON p.oid OPERATOR(pg_catalog.=) n.fn"
	" ON CONFLICT DO NOTHING",
};

/*
 * datum_array -- the n Datums of 'elems' as an array of 'type' (a
 * pass-by-value type of 4 bytes, or text)
 */
static Datum
datum_array(Datum *elems, uint64 n, Oid type)
{
	if (type == TEXTOID)
		return PointerGetDatum(construct_array(elems, (int) n, TEXTOID, -1, false,
											   TYPALIGN_INT));
	return PointerGetDatum(construct_array(elems, (int) n, type, 4, true,
										   TYPALIGN_INT));
}

/*
 * column_of -- column 'col' of the n rows of SPI_tuptable, as Datums
 */
static Datum *
column_of(int col, uint64 n)
{
	Datum	   *values = palloc(sizeof(Datum) * Max(n, 1));

	for (uint64 i = 0; i < n; i++)
	{
		bool		isnull;

		values[i] = SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc,
								  col, &isnull);
	}
	return values;
}

/*
 * read_one -- the one value of a query without parameters, kept in the
 * caller's memory
 */
static Datum
read_one(SPIPlanPtr *plan, const char *query, int expected)
{
	bool		isnull;

	retries_prepare_kept(plan, query, 0, NULL);
	if (SPI_execute_plan(*plan, NULL, NULL, false, 0) != expected)
		elog(ERROR, "retries: could not run: %s", query);
	return SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
}

/*
 * remap -- map every function OID of the tables to the function that its
 * signature in function_names now names (see "Remapping" at the top).
 * Inside SPI, in a worker, function_names locked.
 */
static void
remap(Oid ext)
{
	static SPIPlanPtr plans[lengthof(remap_statements)];
	static SPIPlanPtr map_plan = NULL;
	static SPIPlanPtr uncurrent_plan = NULL;
	static SPIPlanPtr flow_plan = NULL;
	Oid			argtypes[6] = {OIDARRAYOID, OIDARRAYOID, OIDOID, INT4ARRAYOID,
	TEXTARRAYOID, JSONBOID};
	Datum		values[6];
	uint64		n;
	int			save_nestlevel;

	/* qualified signatures, read under a search_path no role controls */
	save_nestlevel = NewGUCNestLevel();
	(void) set_config_option("search_path", "pg_catalog, pg_temp",
							 PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	/* a function of the same name but of another owner is not it */
	retries_prepare_kept(&map_plan,
						 "SELECT f.fn, coalesce(p.oid, 0), f.signature"
						 " FROM retries.function_names f"
						 " LEFT JOIN pg_catalog.pg_proc p"
						 "  ON p.oid OPERATOR(pg_catalog.=) pg_catalog.to_regprocedure(f.signature)"
						 "  AND p.proowner OPERATOR(pg_catalog.=) f.owner::pg_catalog.oid",
						 0, NULL);
	if (SPI_execute_plan(map_plan, NULL, NULL, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "retries: could not read retries.function_names");
	AtEOXact_GUC(true, save_nestlevel);
	n = SPI_processed;
	values[0] = datum_array(column_of(1, n), n, OIDOID);
	values[1] = datum_array(column_of(2, n), n, OIDOID);
	values[2] = ObjectIdGetDatum(ext);
	values[4] = datum_array(column_of(3, n), n, TEXTOID);
	values[5] = read_one(&flow_plan,
						 "SELECT coalesce(pg_catalog.jsonb_agg(f), '[]')"
						 " FROM retries.flow_data f",
						 SPI_OK_SELECT);

	retries_prepare_kept(&uncurrent_plan,
						 "UPDATE retries.policy_data SET is_current = false"
						 " WHERE is_current RETURNING id",
						 0, NULL);
	if (SPI_execute_plan(uncurrent_plan, NULL, NULL, false, 0) != SPI_OK_UPDATE_RETURNING)
		elog(ERROR, "retries: could not read the current policies");
	values[3] = datum_array(column_of(1, SPI_processed), SPI_processed, INT4OID);

	for (size_t i = 0; i < lengthof(remap_statements); i++)
	{
		retries_prepare_kept(&plans[i], remap_statements[i], 6, argtypes);
		if (SPI_execute_plan(plans[i], values, NULL, false, 0) < 0)
			elog(ERROR, "retries: could not map the functions of a restored or upgraded database");
	}
	/* every worker drops the policies it cached */
	CacheInvalidateRelcacheByRelid(get_relname_relid("policy_data", retries_schema_oid()));
	ereport(LOG,
			(errmsg("retries: the function references of database \"%s\" were mapped again after an upgrade or a restore (%d functions)",
					get_database_name(MyDatabaseId), (int) n)));
}

/*
 * stale_references -- are there rows of function_names written under
 * another extension (another cluster or database)?  Inside SPI.
 */
static bool
stale_references(Oid ext)
{
	static SPIPlanPtr plan = NULL;
	Oid			argtypes[1] = {OIDOID};
	Datum		values[1] = {ObjectIdGetDatum(ext)};

	retries_prepare_kept(&plan,
						 "SELECT FROM retries.function_names"
						 " WHERE ext OPERATOR(pg_catalog.<>) $1 LIMIT 1",
						 1, argtypes);
	/* not read-only: a fresh snapshot, once the lock is had */
	if (SPI_execute_plan(plan, values, NULL, false, 1) != SPI_OK_SELECT)
		elog(ERROR, "retries: could not read retries.function_names");
	return SPI_processed > 0;
}

/*
 * retries_check_function_names -- in a worker, remap the function
 * references if they came from another cluster or database; in a session,
 * refuse to go on until a worker has (see "Remapping" at the top)
 *
 * A session checks once, and then not again (the OIDs of a database's
 * functions change only by pg_upgrade or a restore, which no session
 * lives through); it never remaps itself: that would take the lock on
 * function_names, and write, in the caller's transaction, which the caller
 * could keep open (holding every other role's calls back) or roll back
 * (undoing the remap).  A worker ('remap') checks before each batch, and
 * remaps in a transaction of its own.  Runs its own SPI connection.  In a
 * read-only transaction nothing is checked.  Returns whether it found them
 * stale (and remapped them, or waited for another worker that did): the
 * policies the caller's snapshot shows are then the old ones.
 */
bool
retries_check_function_names(bool remap_here)
{
	Oid			ext;
	volatile bool remapped = false;
	volatile bool stale = false;

	if ((checked && !remap_here) || (in_worker && !remap_here) ||
		checking || creating_extension ||
		XactReadOnly || RecoveryInProgress() ||
		!retries_function_names_available())
		return false;
	checking = true;
	PG_TRY();
	{
		ext = get_extension_oid("retries", false);
		SPI_connect();
		stale = stale_references(ext);
		if (stale && remap_here)
		{
			LockRelationOid(get_relname_relid("function_names", retries_schema_oid()),
							ExclusiveLock);
			if (stale_references(ext))
				remap(ext);
			/* or another worker did, since this transaction's snapshot */
			remapped = true;
		}
		SPI_finish();
	}
	PG_FINALLY();
	{
		checking = false;
	}
	PG_END_TRY();
	if (stale && !remap_here)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the function references of database \"%s\" come from another cluster or database",
						get_database_name(MyDatabaseId)),
				 errdetail("pg_upgrade or a restore made them; the workers map them to this database's functions at their next batch."),
				 errhint("Try again in a moment; the workers map them only while retries.enabled is on.")));
	checked = true;
	return remapped;
}

/*
 * retries_function_names_current -- are the function references current
 * (so that their signatures may be refreshed)?  Inside SPI.
 */
bool
retries_function_names_current(void)
{
	return retries_function_names_available() &&
		!stale_references(get_extension_oid("retries", false));
}

/*
 * retries_watch_function_names -- tell retries_check_function_names that
 * this process is a worker (once per worker)
 */
void
retries_watch_function_names(void)
{
	in_worker = true;
}

/*
 * The rows of function_names whose signature or owner no longer are their
 * function's (and then the current policies, whose fn_signature messages
 * show), locked, and rewritten; those that another transaction holds
 * locked (an annotate() not yet committed) are left for the next time,
 * as a worker must not wait for a role's transaction.  Each says whether
 * any was left.
 */
#define EQ " OPERATOR(pg_catalog.=) "
#define NE " OPERATOR(pg_catalog.<>) "
#define STALE_OR_LEFT \
	"SELECT (SELECT pg_catalog.count(*) FROM stale)" \
	" OPERATOR(pg_catalog.>) (SELECT pg_catalog.count(*) FROM done)"

static const char *const refresh_statements[] = {
	"WITH s AS (SELECT f.fn, retries.function_signature(f.fn) AS sig, p.proowner AS own"
	"  FROM retries.function_names f JOIN pg_catalog.pg_proc p ON p.oid" EQ "f.fn),"
	" stale AS (SELECT s.fn FROM s JOIN retries.function_names t ON t.fn" EQ "s.fn"
	"  WHERE s.sig" NE "t.signature OR s.own" NE "t.owner::pg_catalog.oid),"
	" locked AS (SELECT t.fn FROM retries.function_names t"
	"  WHERE t.fn" EQ "ANY (ARRAY(SELECT fn FROM stale)) FOR UPDATE SKIP LOCKED),"
	" done AS (UPDATE retries.function_names t SET signature = s.sig, owner = s.own"
	"  FROM s, locked l WHERE t.fn" EQ "l.fn AND s.fn" EQ "l.fn RETURNING 1) "
	STALE_OR_LEFT,
	"WITH s AS (SELECT p.id, f.signature AS sig FROM retries.policy_data p"
	"  JOIN retries.function_names f ON f.fn" EQ "p.fn"
	"  WHERE p.is_current AND p.fn_signature" NE "f.signature),"
	" stale AS (SELECT id FROM s),"
	" locked AS (SELECT t.id FROM retries.policy_data t"
	"  WHERE t.id" EQ "ANY (ARRAY(SELECT id FROM stale)) FOR UPDATE SKIP LOCKED),"
	" done AS (UPDATE retries.policy_data t SET fn_signature = s.sig"
	"  FROM s, locked l WHERE t.id" EQ "l.id AND s.id" EQ "l.id RETURNING 1) "
	STALE_OR_LEFT,
};

/*
 * retries_names_refresh_due -- has a rename committed since the last
 * refresh (or is there none yet)?
 */
bool
retries_names_refresh_due(void)
{
	return names_changed || retries_names_generation(MyDatabaseId) != names_seen;
}

/*
 * retries_names_refresh_failed -- the refresh's transaction did not commit:
 * do it again
 */
void
retries_names_refresh_failed(void)
{
	names_changed = true;
}

/*
 * retries_refresh_function_names -- once at the start, and after a rename
 * committed, rewrite the signatures and owners that changed
 *
 * Run by the workers, inside SPI, references current.  A row whose
 * function is gone keeps its signature: the drop trigger removes it.
 */
void
retries_refresh_function_names(void)
{
	static SPIPlanPtr plans[lengthof(refresh_statements)];
	uint64		generation = retries_names_generation(MyDatabaseId);

	if ((!names_changed && generation == names_seen) ||
		!retries_function_names_available())
		return;
	/* done, unless an error comes (retries_names_refresh_failed) */
	names_changed = false;
	names_seen = generation;
	for (size_t i = 0; i < lengthof(refresh_statements); i++)
	{
		bool		isnull;

		retries_prepare_kept(&plans[i], refresh_statements[i], 0, NULL);
		if (SPI_execute_plan(plans[i], NULL, NULL, false, 0) != SPI_OK_SELECT)
			elog(ERROR, "retries: could not refresh the signatures of functions");
		if (DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0],
									   SPI_tuptable->tupdesc, 1, &isnull)))
			names_changed = true;	/* some were locked: next time */
	}
}
