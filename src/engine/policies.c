/*-------------------------------------------------------------------------
 *
 * policies.c
 *	  The worker's cache of policies, by id.
 *
 * A row of policy_data is never changed, only superseded by a new one
 * (annotate), so a policy read once is kept for as long as the worker
 * lives; only a TRUNCATE, DROP or replacement of policy_data, which may
 * reuse ids, empties the cache (a relcache callback sets a flag, and the
 * next lookup starts a new cache, so that no entry in use disappears under
 * its user).  The functions a policy names are stored by key (names.c) and
 * resolved here; a policy whose function cannot be found (a restore under
 * way) is not kept, and looked up again next time.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_proc.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"

#include "base/base.h"
#include "engine/policies.h"
#include "tables/tables.h"

/*
 * The policy cache: a hash table and the strings of its entries, all in
 * policy_cache_cxt, which is deleted whole when the cache goes stale
 */
static MemoryContext policy_cache_cxt = NULL;
static HTAB *policy_cache = NULL;
static Oid	policy_data_relid = InvalidOid;
static bool policy_cache_stale = true;	/* look up policy_data first */

/*
 * policy_cache_invalidate -- relcache callback: policy_data was truncated,
 * dropped or replaced, so cached ids may now mean other policies
 *
 * Only a flag is set here; policies_get() drops the cache at its next call,
 * so that no entry in use disappears under its user.
 */
static void
policy_cache_invalidate(Datum arg, Oid relid)
{
	if (relid == InvalidOid || relid == policy_data_relid ||
		!OidIsValid(policy_data_relid))
		policy_cache_stale = true;
}

/*
 * create_policy_cache -- an empty policy cache, in a memory context of its
 * own (whatever was in the previous one goes with it)
 */
static void
create_policy_cache(void)
{
	HASHCTL		ctl;

	if (policy_cache_cxt != NULL)
		MemoryContextDelete(policy_cache_cxt);
	policy_cache_cxt = AllocSetContextCreate(TopMemoryContext,
											 "retries policy cache",
											 ALLOCSET_SMALL_SIZES);
	ctl.keysize = sizeof(int32);
	ctl.entrysize = sizeof(CachedPolicy);
	ctl.hcxt = policy_cache_cxt;
	policy_cache = hash_create("retries policies", 64, &ctl,
							   HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
}

/*
 * policies_get -- a policy by id, read once and kept (policy rows are never
 * changed, only superseded; a TRUNCATE, which may reuse ids, empties the
 * cache), or NULL if there is no such policy.  Runs inside SPI.  The entry
 * returned stays valid until the next call.
 */
CachedPolicy *
policies_get(int32 policy_id)
{
	static SPIPlanPtr plans[2];
	static CachedPolicy unresolved;
	bool		notify;
	Oid			argtypes[1] = {INT4OID};
	Datum		values[1] = {Int32GetDatum(policy_id)};
	Oid			fn_key;
	Oid			fn;
	Oid			on_exhausted;
	Oid			delay_fn;
	CachedPolicy *p;
	bool		found;
	HeapTuple	row;
	TupleDesc	desc;
	bool		isnull;
	Datum		d;
	MemoryContext oldcxt;

	if (policy_cache_stale)
	{
		create_policy_cache();
		policy_data_relid = get_relname_relid("policy_data", schema_retries_oid());
		policy_cache_stale = false;
	}
	p = hash_search(policy_cache, &policy_id, HASH_FIND, NULL);
	if (p != NULL)
		return p;
	notify = (schema_retries_version() >= SCHEMA_1_2);

	/* notify: from version 1.2 */
	if (plans[notify] == NULL)
		plans_prepare_kept(&plans[notify],
						   psprintf("SELECT fn, fn_signature, min_delay, max_delay, multiplier,"
									" jitter, retry_on, timeout, on_exhausted, delay_fn, %s"
									" FROM retries.policy_data WHERE id OPERATOR(pg_catalog.=) $1",
									notify ? "notify" : "false"),
						   1, argtypes);
	if (SPI_execute_plan(plans[notify], values, NULL, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "retries: could not read policy %d", policy_id);
	if (SPI_processed != 1)
		return NULL;			/* someone deleted it by hand */
	row = SPI_tuptable->vals[0];
	desc = SPI_tuptable->tupdesc;

	/*
	 * The functions, by their keys (names.c); a function not found (a restore
	 * under way) is looked up again next time
	 */
	fn_key = DatumGetObjectId(SPI_getbinval(row, desc, 1, &isnull));
	fn = names_key_function(fn_key);
	d = SPI_getbinval(row, desc, 9, &isnull);
	on_exhausted = isnull ? InvalidOid : names_key_function(DatumGetObjectId(d));
	d = SPI_getbinval(row, desc, 10, &isnull);
	delay_fn = isnull ? InvalidOid : names_key_function(DatumGetObjectId(d));

	oldcxt = MemoryContextSwitchTo(policy_cache_cxt);
	if (OidIsValid(fn))
		p = hash_search(policy_cache, &policy_id, HASH_ENTER, &found);
	else
		p = &unresolved;
	p->fn = fn;
	p->fn_key = fn_key;
	p->fn_signature = SPI_getvalue(row, desc, 2);
	(void) args_interval_to_usecs(DatumGetIntervalP(SPI_getbinval(row, desc, 3, &isnull)),
								  &p->min_delay);
	d = SPI_getbinval(row, desc, 4, &isnull);
	p->max_delay = -1;
	if (!isnull)
		(void) args_interval_to_usecs(DatumGetIntervalP(d), &p->max_delay);
	p->multiplier = DatumGetFloat8(SPI_getbinval(row, desc, 5, &isnull));
	(void) policy_parse_jitter(SPI_getvalue(row, desc, 6), &p->jitter);
	{
		Datum	   *elems;
		bool	   *nulls;
		int			n;

		deconstruct_array(DatumGetArrayTypeP(SPI_getbinval(row, desc, 7, &isnull)),
						  TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls, &n);
		p->retry_on = palloc0(sizeof(*p->retry_on) * Max(n, 1));
		p->nretry_on = n;
		for (int i = 0; i < n; i++)
			strlcpy(p->retry_on[i], TextDatumGetCString(elems[i]),
					POLICY_SQLSTATE_ENTRY_LEN);
	}
	d = SPI_getbinval(row, desc, 8, &isnull);
	p->timeout = -1;
	if (!isnull)
		(void) args_interval_to_usecs(DatumGetIntervalP(d), &p->timeout);
	p->on_exhausted = on_exhausted;
	p->delay_fn = delay_fn;
	p->notify = DatumGetBool(SPI_getbinval(row, desc, 11, &isnull));
	p->procedure = OidIsValid(fn) && get_func_prokind(fn) == PROKIND_PROCEDURE;
	MemoryContextSwitchTo(oldcxt);
	return p;
}

/*
 * policies_init -- an empty cache, invalidated with policy_data (once per
 * worker)
 */
void
policies_init(void)
{
	create_policy_cache();
	CacheRegisterRelcacheCallback(policy_cache_invalidate, (Datum) 0);
}
