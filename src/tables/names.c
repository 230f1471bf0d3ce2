/*-------------------------------------------------------------------------
 *
 * names.c
 *	  Function references that survive pg_upgrade, pg_dump and renames.
 *
 * From version 1.4 the extension's tables refer to functions by key
 * (policy_data.fn, .on_exhausted, .delay_fn, schedule_data.fn,
 * flow_data.fn, call_data.gate): a number of the extension's own, which
 * pg_dump and pg_upgrade keep as they keep any number.  Only
 * retries.function_names knows, for each key, the function's OID, its
 * schema-qualified signature (format_procedure_qualified: every name in
 * it qualified, so that it means the same under any search_path), its
 * owner, and its 'origin', the instance of the extension it was written
 * under: a hash of the cluster's system identifier (which initdb draws at
 * random, and pg_upgrade does not carry over), the database's OID (two
 * databases made from one template have the same extension OID) and the
 * extension's OID (a database's extension dropped and made again),
 * retries.origin().
 *
 * A row is current when its origin is this database's: its fn is the
 * function (0: dropped, for good).  pg_upgrade and a restore make the
 * extension anew, in another cluster or database, so every row they
 * bring is stale, even when the new extension's OID happens to be the
 * old one's (two clusters made alike draw the same OIDs): its
 * fn is an OID of another cluster or database, which means nothing here,
 * or a function someone else made.  A stale row names its function by
 * signature, to a function of the same owner only (role OIDs survive
 * pg_upgrade, and regrole restores by name), so that a function another
 * role made under that name, or under that OID, is never taken for it
 * (retries_resolve_function).  The workers write stale rows anew
 * (refresh_stale), but nothing waits for them: every reader resolves a
 * stale row itself, so there is no moment, during a restore or after,
 * at which some references are mapped and others not, and no other table
 * is ever rewritten.  Version 1.3 and older store OIDs: there, a key is
 * the function's OID.
 *
 * Renames keep the OID, so calls, policies and schedules are unaffected;
 * only the signature (and owner) must follow, for the next upgrade.  The
 * commands that rename, move or give away a function, or rename or move
 * a schema, a type or a relation (whose row type a function may take),
 * bump the database's names_generation in shared memory as they commit,
 * and wake its workers (hooks.c); a worker that sees it changed rewrites
 * the signatures and owners that changed.  Other DDL makes no worker read
 * the extension's tables.
 *
 * IDENTIFICATION
 *	  src/tables/names.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "common/hashfn.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "commands/dbcommands.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/regproc.h"
#include "utils/rel.h"
#include "utils/resowner.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"

#include "base/base.h"
#include "shmem/shmem.h"
#include "tables/tables.h"

PG_FUNCTION_INFO_V1(retries_function_signature);
PG_FUNCTION_INFO_V1(retries_resolve_function);
PG_FUNCTION_INFO_V1(retries_origin);

/* How often a worker looks for stale rows to write anew, at most */
#define STALE_CHECK_MS 10000

/*
 * ... and rewrite the signatures that changed at least this often, renames
 * or not: a rename that committed without waking the workers (COMMIT
 * PREPARED runs in another session than its PREPARE, without this
 * library's commit callback for it) is caught up with then
 */
#define RENAME_CHECK_MS 60000

/* The signatures were refreshed after this many renames in the database */
static uint64 names_seen = 0;

/* Not refreshed yet, or some rows were locked last time */
static bool names_changed = true;

/* When this worker last looked for stale rows */
static TimestampTz stale_checked_at = 0;
static TimestampTz renames_checked_at = 0;

/*
 * When to rewrite the signatures once more after a rename: the commit
 * callback that bumps names_generation runs before the renaming
 * transaction sends its cache invalidations, so a worker woken at once may
 * still read the old name from its caches (the twenty-fifth hostile
 * review, t/059); 0: none pending
 */
#define RENAME_RECHECK_MS 1000
static TimestampTz recheck_at = 0;

/*
 * retries_function_signature -- SQL function
 * retries.function_signature(oid): format_procedure_qualified, or NULL if
 * there is no such function, or if its signature is not valid in the
 * database's encoding (a row keeps the signature it had: names_refresh)
 */
Datum
retries_function_signature(PG_FUNCTION_ARGS)
{
	Oid			fn = PG_GETARG_OID(0);
	char	   *signature;

	if (!SearchSysCacheExists1(PROCOID, ObjectIdGetDatum(fn)))
		PG_RETURN_NULL();
	signature = format_procedure_qualified(fn);
	/* a name the tables may not hold (see names_function_key) */
	if (!pg_verifymbstr(signature, strlen(signature), true))
		PG_RETURN_NULL();
	PG_RETURN_TEXT_P(cstring_to_text(signature));
}

/*
 * own_origin -- this instance of the extension (see the top)
 */
static int64
own_origin(void)
{
	uint64		parts[3];

	parts[0] = GetSystemIdentifier();
	parts[1] = MyDatabaseId;
	parts[2] = get_extension_oid("retries", false);
	return (int64) hash_bytes_extended((const unsigned char *) parts,
									   sizeof(parts), 0);
}

/*
 * retries_origin -- SQL function retries.origin(): own_origin()
 */
Datum
retries_origin(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT64(own_origin());
}

/*
 * names_own_key -- the key this instance of the extension gave function
 * fn (its row of this origin), as of 'snap'; InvalidOid if it has none
 * (then only RETRIES_KEY_OF, which resolves stale rows too, can tell)
 *
 * The first half of RETRIES_KEY_OF, read through function_names_fn
 * without SPI: a session's first retries.call() parses and plans no
 * statement for it.
 */
Oid
names_own_key(Oid fn, Snapshot snap)
{
	Oid			nspoid = schema_retries_oid();
	Relation	rel = table_open(get_relname_relid("function_names", nspoid),
								 AccessShareLock);
	ScanKeyData keys[2];
	SysScanDesc scan;
	HeapTuple	tup;
	Oid			key = InvalidOid;

	ScanKeyInit(&keys[0], get_attnum(RelationGetRelid(rel), "fn"),
				BTEqualStrategyNumber, F_OIDEQ, ObjectIdGetDatum(fn));
	ScanKeyInit(&keys[1], get_attnum(RelationGetRelid(rel), "origin"),
				BTEqualStrategyNumber, F_INT8EQ, Int64GetDatum(own_origin()));
	scan = systable_beginscan(rel, get_relname_relid("function_names_fn", nspoid),
							  true, snap, 2, keys);
	tup = systable_getnext(scan);
	if (HeapTupleIsValid(tup))
	{
		bool		isnull;
		Datum		d = heap_getattr(tup, get_attnum(RelationGetRelid(rel), "key"),
									 RelationGetDescr(rel), &isnull);

		if (!isnull)
			key = DatumGetObjectId(d);
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return key;
}

/*
 * about_the_name -- may an error that reading a signature raised be taken
 * to mean that it names nothing?  Not a cancel or a shutdown (class 57), a
 * lack of memory or disk (53), a system or internal error (58, XX)
 */
static bool
about_the_name(int sqlerrcode)
{
	static const char *const other_classes[] = {"57", "53", "58", "XX"};
	const char *state = unpack_sql_state(sqlerrcode);

	for (size_t i = 0; i < lengthof(other_classes); i++)
		if (strncmp(state, other_classes[i], 2) == 0)
			return false;
	return true;
}

/*
 * lookup_signature -- the function a qualified signature names, under a
 * search_path no role controls; InvalidOid if none (PostgreSQL 15's
 * to_regprocedure raises an error for an unknown argument type: caught,
 * in a subtransaction of its own)
 */
static Oid
lookup_signature(text *signature)
{
	MemoryContext oldcxt = CurrentMemoryContext;
	ResourceOwner oldowner = CurrentResourceOwner;
	volatile Oid fn = InvalidOid;
	int			save_nestlevel = NewGUCNestLevel();

	(void) set_config_option("search_path", "pg_catalog, pg_temp",
							 PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(oldcxt);
	PG_TRY();
	{
		LOCAL_FCINFO(fcinfo, 1);
		Datum		result;

		InitFunctionCallInfoData(*fcinfo, NULL, 1, InvalidOid, NULL, NULL);
		fcinfo->args[0].value = PointerGetDatum(signature);
		fcinfo->args[0].isnull = false;
		result = to_regprocedure(fcinfo);
		if (!fcinfo->isnull)
			fn = DatumGetObjectId(result);
		ReleaseCurrentSubTransaction();
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(oldcxt);
		edata = CopyErrorData();

		/*
		 * A name that names nothing here, whatever the error says of it (a
		 * type or schema unknown, 3F000 for the schema of an argument's type,
		 * a bad name): a row must never make its readers fail.  What is not
		 * about the name goes on, or it would be taken for "dropped".
		 */
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(oldcxt);
		CurrentResourceOwner = oldowner;
		if (!about_the_name(edata->sqlerrcode))
			ReThrowError(edata);
		FreeErrorData(edata);
	}
	PG_END_TRY();
	MemoryContextSwitchTo(oldcxt);
	CurrentResourceOwner = oldowner;
	AtEOXact_GUC(true, save_nestlevel);
	return fn;
}

/*
 * retries_resolve_function -- SQL function
 * retries.resolve_function(signature text, owner regrole): the OID of the
 * function the signature names, if 'owner' owns it; NULL otherwise
 */
Datum
retries_resolve_function(PG_FUNCTION_ARGS)
{
	Oid			fn = lookup_signature(PG_GETARG_TEXT_PP(0));
	Oid			owner = PG_GETARG_OID(1);
	HeapTuple	tup;
	bool		same_owner;

	if (!OidIsValid(fn))
		PG_RETURN_NULL();
	tup = SearchSysCache1(PROCOID, ObjectIdGetDatum(fn));
	if (!HeapTupleIsValid(tup))
		PG_RETURN_NULL();
	same_owner = ((Form_pg_proc) GETSTRUCT(tup))->proowner == owner;
	ReleaseSysCache(tup);
	if (!same_owner)
		PG_RETURN_NULL();
	PG_RETURN_OID(fn);
}

#define ORIGIN RETRIES_ORIGIN
#define EQ " OPERATOR(pg_catalog.=) "
#define NE " OPERATOR(pg_catalog.<>) "

/*
 * read_oid -- run a kept plan with one oid argument; the oid of its first
 * row's first column, InvalidOid if no row (or NULL)
 */
static Oid
read_oid(SPIPlanPtr *plan, const char *query, Oid arg)
{
	Oid			argtypes[1] = {OIDOID};
	Datum		values[1] = {ObjectIdGetDatum(arg)};
	bool		isnull;
	Datum		d;

	plans_prepare_kept(plan, query, 1, argtypes);
	if (SPI_execute_plan(*plan, values, NULL, false, 1) < 0)
		elog(ERROR, "retries: could not run: %s", query);
	if (SPI_processed == 0)
		return InvalidOid;
	d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	return isnull ? InvalidOid : DatumGetObjectId(d);
}

/*
 * names_signature -- function fn's schema-qualified signature, as the
 * extension's tables keep it; 22021 if it is not valid in the database's
 * encoding (PostgreSQL does not check names made in dynamic SQL): the
 * tables hold every role's rows, and a restore of them checks every text
 * (the twenty-fourth and twenty-fifth hostile reviews, t/058 and t/059:
 * annotate, hooks, gates)
 */
char *
names_signature(Oid fn)
{
	char	   *signature = format_procedure_qualified(fn);

	args_check_encoding(signature, strlen(signature),
						psprintf("the name of function %u", fn));
	return signature;
}

/*
 * names_function_key -- the key of function fn (InvalidOid if none);
 * with 'create', made if it has none yet
 *
 * A new key is drawn at random (pg_strong_random), never from a sequence:
 * a restore that is not one transaction loads function_names after
 * CREATE EXTENSION has committed, and a key that a role's annotate() took
 * meanwhile must not be one that the restored references use (the
 * restore's row would then fail to load, and those references name the
 * role's function).  Which key a role gets is out of its hands, and the
 * odds that it equals one of n keys of the dump are n in 2^32.
 *
 * A current row first; else a stale one whose signature names fn (a
 * restored or upgraded database that no worker has written anew yet).
 * Call it as the extension's owner, inside SPI.  In a database at 1.3 or
 * older, fn itself.
 */
Oid
names_function_key(Oid fn, bool create)
{
	static SPIPlanPtr find_plan = NULL;
	static SPIPlanPtr insert_plan = NULL;
	Oid			key;

	if (!OidIsValid(fn) || schema_retries_version() < SCHEMA_1_4)
		return fn;
	key = read_oid(&find_plan, "SELECT " RETRIES_KEY_OF("$1"), fn);
	if (OidIsValid(key) || !create)
		return key;
	if (!SearchSysCacheExists1(PROCOID, ObjectIdGetDatum(fn)))
		elog(ERROR, "retries: function %u does not exist", fn);

	(void) names_signature(fn);
	for (int tries = 0; tries < 16; tries++)
	{
		Oid			argtypes[2] = {OIDOID, OIDOID};
		Datum		values[2];
		uint32		drawn;

		if (!pg_strong_random(&drawn, sizeof(drawn)))
			elog(ERROR, "retries: could not draw a random key");
		if (drawn == InvalidOid)
			continue;
		values[0] = ObjectIdGetDatum(fn);
		values[1] = ObjectIdGetDatum((Oid) drawn);
		plans_prepare_kept(&insert_plan,
						   "INSERT INTO retries.function_names (key, fn, signature, owner, origin)"
						   " SELECT $2, p.oid, retries.function_signature(p.oid), p.proowner, " ORIGIN
						   " FROM pg_catalog.pg_proc p WHERE p.oid" EQ "$1"
						   " ON CONFLICT DO NOTHING RETURNING key",
						   2, argtypes);
		if (SPI_execute_plan(insert_plan, values, NULL, false, 0) != SPI_OK_INSERT_RETURNING)
			elog(ERROR, "retries: could not note function %u", fn);
		if (SPI_processed == 1)
			return (Oid) drawn;
		/* another transaction noted it meanwhile, or the key is taken */
		key = names_function_key(fn, false);
		if (OidIsValid(key))
			return key;
	}
	elog(ERROR, "retries: could not draw a free key for function %u", fn);
	return InvalidOid;			/* keep the compiler quiet */
}

/*
 * names_key_function -- the function that key stands for here and now,
 * InvalidOid if it is gone.  Inside SPI.  In a database at 1.3 or older,
 * the key itself.
 */
Oid
names_key_function(Oid key)
{
	static SPIPlanPtr plan = NULL;

	if (!OidIsValid(key) || schema_retries_version() < SCHEMA_1_4)
		return key;
	return read_oid(&plan,
					"SELECT CASE WHEN k.origin" EQ ORIGIN " THEN k.fn"
					" WHEN k.fn" NE "0 THEN retries.resolve_function(k.signature, k.owner) END"
					" FROM retries.function_names k WHERE k.key" EQ "$1",
					key);
}

/*
 * Rows written under another extension, written anew: the function their
 * signature names (0 if none, or if it was dropped there), under this
 * extension.  A row whose
 * function already has a current row (one was made while a restore was
 * under way) is left stale: readers still resolve it.  Rows another
 * transaction holds are left for the next time.
 */
static const char *const stale_statement =
"WITH s AS (SELECT k.key, coalesce(CASE WHEN k.fn" NE "0"
"  THEN retries.resolve_function(k.signature, k.owner) END, 0) AS fn"
"  FROM retries.function_names k WHERE k.origin" NE ORIGIN
"  FOR UPDATE SKIP LOCKED),"
" r AS (SELECT s.key, s.fn, pg_catalog.row_number() OVER (PARTITION BY s.fn ORDER BY s.key) AS n"
"  FROM s)"
" UPDATE retries.function_names k SET fn = r.fn, origin = " ORIGIN
" FROM r WHERE k.key" EQ "r.key AND (r.fn" EQ "0 OR (r.n" EQ "1 AND NOT EXISTS"
"  (SELECT FROM retries.function_names c"
"   WHERE c.fn" EQ "r.fn AND c.origin" EQ ORIGIN ")))";

/*
 * The current rows whose signature or owner no longer are their
 * function's (and then the current policies, whose fn_signature messages
 * show), locked, and rewritten; those that another transaction holds
 * locked (an annotate() not yet committed) are left for the next time,
 * as a worker must not wait for a role's transaction.  Each says whether
 * any was left.
 */
#define STALE_OR_LEFT \
	"SELECT (SELECT pg_catalog.count(*) FROM stale)" \
	" OPERATOR(pg_catalog.>) (SELECT pg_catalog.count(*) FROM done)"

static const char *const refresh_statements[] = {
	"WITH s AS (SELECT f.key, retries.function_signature(f.fn) AS sig, p.proowner AS own"
	"  FROM retries.function_names f JOIN pg_catalog.pg_proc p ON p.oid" EQ "f.fn"
	"  WHERE f.origin" EQ ORIGIN "),"
	" stale AS (SELECT s.key FROM s JOIN retries.function_names t ON t.key" EQ "s.key"
	"  WHERE s.sig" NE "t.signature OR s.own" NE "t.owner::pg_catalog.oid),"
	" locked AS (SELECT t.key FROM retries.function_names t"
	"  WHERE t.key" EQ "ANY (ARRAY(SELECT key FROM stale)) FOR UPDATE SKIP LOCKED),"
	" done AS (UPDATE retries.function_names t SET signature = s.sig, owner = s.own"
	"  FROM s, locked l WHERE t.key" EQ "l.key AND s.key" EQ "l.key RETURNING 1) "
	STALE_OR_LEFT,
	"WITH s AS (SELECT p.id, f.signature AS sig FROM retries.policy_data p"
	"  JOIN retries.function_names f ON f.key" EQ "p.fn"
	"  WHERE p.is_current AND p.fn_signature" NE "f.signature),"
	" stale AS (SELECT id FROM s),"
	" locked AS (SELECT t.id FROM retries.policy_data t"
	"  WHERE t.id" EQ "ANY (ARRAY(SELECT id FROM stale)) FOR UPDATE SKIP LOCKED),"
	" done AS (UPDATE retries.policy_data t SET fn_signature = s.sig"
	"  FROM s, locked l WHERE t.id" EQ "l.id AND s.id" EQ "l.id RETURNING 1) "
	STALE_OR_LEFT,
};

/*
 * names_refresh_due -- has a rename committed since the last
 * refresh (or is there none yet), or is it time to look for stale rows?
 * With 'deferred' (other databases wait for workers), only what has waited
 * for 'defer_ms' is due, or a first refresh since the server started:
 * readers resolve stale rows themselves, and the signatures matter only to
 * the next upgrade or dump, so a visit of many at once spends its time on
 * the calls.
 */
bool
names_refresh_due(bool deferred, long defer_ms)
{
	static bool shared_read = false;

	if (!shared_read)
	{
		RetriesDbMemo memo;

		/* what the database's earlier workers did (see names_refresh) */
		shmem_memo_read(MyDatabaseId, &memo);
		stale_checked_at = memo.stale_done_at;
		if (memo.names_done != 0)
		{
			names_changed = false;
			names_seen = memo.names_done - 1;
			renames_checked_at = memo.names_done_at;
		}
		shared_read = true;
	}
	if (deferred && !names_changed)
		return TimestampDifferenceExceeds(stale_checked_at, clock_system_now(),
										  defer_ms);
	return names_changed ||
		shmem_names_generation(MyDatabaseId) != names_seen ||
		(recheck_at != 0 && clock_system_now() >= recheck_at) ||
		TimestampDifferenceExceeds(stale_checked_at, clock_system_now(),
								   STALE_CHECK_MS);
}

/*
 * names_refresh_failed -- the refresh's transaction did not commit:
 * do it again
 */
void
names_refresh_failed(void)
{
	names_changed = true;
}

/*
 * names_refresh_committed -- the refresh's transaction committed: tell
 * the database's next workers, so that a worker that starts does not do
 * again what another did a moment ago (with workers on demand, each visit
 * of a database is a new process)
 */
void
names_refresh_committed(void)
{
	RetriesDbMemo memo = {0};

	memo.names_done = names_changed ? 0 : names_seen + 1;
	/* a recheck still to come: the next workers do it with their first */
	memo.names_done_at = recheck_at != 0 ?
		TimestampTzPlusMilliseconds(recheck_at, -RENAME_CHECK_MS) : renames_checked_at;
	memo.stale_done_at = stale_checked_at;
	shmem_memo_write(MyDatabaseId, &memo);
}

/*
 * names_refresh -- write stale rows anew (see the top);
 * once at the start (unless another worker of the database did since the
 * server started, and no rename committed since: names_refresh_committed),
 * and after a rename committed, rewrite the signatures and owners that
 * changed
 *
 * Run by the workers, inside SPI.  A current row whose function is gone
 * keeps its signature: the drop trigger sets its fn to 0.
 */
void
names_refresh(void)
{
	static SPIPlanPtr stale_plan = NULL;
	static SPIPlanPtr plans[lengthof(refresh_statements)];
	uint64		generation = shmem_names_generation(MyDatabaseId);

	stale_checked_at = clock_system_now();
	if (schema_retries_version() < SCHEMA_1_4)
		return;
	plans_prepare_kept(&stale_plan, stale_statement, 0, NULL);
	if (SPI_execute_plan(stale_plan, NULL, NULL, false, 0) != SPI_OK_UPDATE)
		elog(ERROR, "retries: could not write the function references of a restored or upgraded database anew");
	if (SPI_processed > 0)
		ereport(LOG,
				(errmsg("retries: %d function references of database \"%s\" written anew after an upgrade or a restore",
						(int) SPI_processed, get_database_name(MyDatabaseId))));
	if (!names_changed && generation == names_seen &&
		(recheck_at == 0 || stale_checked_at < recheck_at) &&
		!TimestampDifferenceExceeds(renames_checked_at, stale_checked_at,
									RENAME_CHECK_MS))
		return;
	/* after a rename, once more in a moment (see recheck_at) */
	recheck_at = generation != names_seen ?
		TimestampTzPlusMilliseconds(stale_checked_at, RENAME_RECHECK_MS) : 0;
	/* done, unless an error comes (names_refresh_failed) */
	names_changed = false;
	names_seen = generation;
	renames_checked_at = stale_checked_at;
	for (size_t i = 0; i < lengthof(refresh_statements); i++)
	{
		bool		isnull;

		plans_prepare_kept(&plans[i], refresh_statements[i], 0, NULL);
		if (SPI_execute_plan(plans[i], NULL, NULL, false, 0) != SPI_OK_SELECT)
			elog(ERROR, "retries: could not refresh the signatures of functions");
		if (DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0],
									   SPI_tuptable->tupdesc, 1, &isnull)))
			names_changed = true;	/* some were locked: next time */
	}
}
