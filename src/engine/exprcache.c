/*-------------------------------------------------------------------------
 *
 * exprcache.c
 *	  PostgreSQL's planned expressions, kept per process, do not cross from
 *	  one context of a worker's calls to another.
 *
 * PostgreSQL plans some expressions once per process and keeps them: a
 * domain's CHECKs (the type cache), an index's expressions and predicate,
 * a partition key and the partition constraints made from it (the relation
 * cache).  Planning inlines the SQL functions they call (LANGUAGE sql, no
 * SET clause, not BEGIN ATOMIC), and an inlined body's names (an operator,
 * a function, a type) are resolved by the search_path of whoever used the
 * expression first.  In a session that is the session's role; in a worker,
 * any role's call: mallory's call with her search_path, merely planning a
 * query of alice's table (refused after planning), left alice's index
 * expression calling mallory's lower(), which alice's next insert ran as
 * alice (and the superuser's domain check running mallory's operator as
 * the superuser).  So when an attempt runs in another context than the
 * last (another role, or a function of another owner: sandbox.c), those
 * entries are invalidated, and planned again, under the new context's
 * settings, at their next use.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/pg_index.h"
#include "catalog/pg_inherits.h"
#include "catalog/pg_partitioned_table.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/plancache.h"
#include "utils/rel.h"
#include "utils/relcache.h"
#include "utils/syscache.h"

#include "base/base.h"
#include "engine/exprcache.h"

/*
 * The relations whose entries in the relation cache keep planned
 * expressions (indexes with expressions or a predicate, partitioned tables
 * whose key has expressions and every partition under them), other than
 * the extension's own: found in the catalogs when first needed, and again
 * after any invalidation of the relation cache (CREATE INDEX, a new
 * partition, ALTER TABLE ... send one), in TopMemoryContext.
 */
static List *expression_rels = NIL;
static bool expression_rels_valid = false;

static void
forget_expression_rels(Datum arg, Oid relid)
{
	expression_rels_valid = false;
}

/*
 * expression_relations -- the relations whose cache entries keep planned
 * expressions, as found in pg_index and pg_partitioned_table
 */
static List *
expression_relations(void)
{
	static bool registered = false;
	Oid			own = schema_retries_oid();
	List	   *found = NIL;
	Relation	rel;
	SysScanDesc scan;
	HeapTuple	tup;
	MemoryContext oldcxt;

	if (expression_rels_valid)
		return expression_rels;
	if (!registered)
	{
		CacheRegisterRelcacheCallback(forget_expression_rels, (Datum) 0);
		registered = true;
	}
	expression_rels_valid = true;	/* unless invalidated while looking */

	rel = table_open(IndexRelationId, AccessShareLock);
	scan = systable_beginscan(rel, InvalidOid, false, NULL, 0, NULL);
	while (HeapTupleIsValid(tup = systable_getnext(scan)))
	{
		Form_pg_index index = (Form_pg_index) GETSTRUCT(tup);

		if ((!heap_attisnull(tup, Anum_pg_index_indexprs, NULL) ||
			 !heap_attisnull(tup, Anum_pg_index_indpred, NULL)) &&
			get_rel_namespace(index->indrelid) != own)
			found = lappend_oid(found, index->indexrelid);
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);

	rel = table_open(PartitionedRelationId, AccessShareLock);
	scan = systable_beginscan(rel, InvalidOid, false, NULL, 0, NULL);
	while (HeapTupleIsValid(tup = systable_getnext(scan)))
	{
		if (!heap_attisnull(tup, Anum_pg_partitioned_table_partexprs, NULL))
			found = list_concat(found,
								find_all_inheritors(((Form_pg_partitioned_table) GETSTRUCT(tup))->partrelid,
													NoLock, NULL));
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);

	oldcxt = MemoryContextSwitchTo(TopMemoryContext);
	list_free(expression_rels);
	expression_rels = list_copy(found);
	MemoryContextSwitchTo(oldcxt);
	list_free(found);
	return expression_rels;
}

/*
 * exprcache_new_context -- the next attempt runs in another context
 * than the last (sandbox.c), in the same transaction as the last if
 * 'within_transaction': have PostgreSQL plan anew, when next used,
 * the expressions it keeps planned per process: a domain's CHECKs (the
 * type cache), an index's expressions and predicate, a partition key and
 * the partition constraints made from it (the relation cache)
 *
 * Planned with the SQL functions they call inlined, their bodies' names
 * resolved by the search_path of whoever first used them: in a worker,
 * any role's call.  Invalidated as a change of their catalog rows would
 * (the domains' all at once, as a change of any constraint does; the
 * relations' one by one, expression_relations()), so that the next
 * context loads its own.  The extension's own indexes are left alone:
 * their predicates are its own, every name in them qualified.  What is
 * invalidated is rebuilt at its next use.  (A whole
 * InvalidateSystemCaches() did the same, and halved the drain rate of ten
 * roles' interleaved calls: every catalog entry and plan was rebuilt.)
 *
 * And the expressions that the plan cache keeps without a search_path to
 * check (CachedExpression: PL/pgSQL's casts, planned once per process
 * with the SQL cast functions they call inlined) are marked for planning
 * anew: those that depend on a function (a PROCOID callback, as a change
 * of any function would), or, within one transaction, every one and every
 * plan (ResetPlanCache).  Within a transaction, PL/pgSQL also keeps each
 * cast compiled (get_cast_hashentry, one ExprState per transaction), with
 * a domain's CHECKs baked in as the type cache had them: the superuser's
 * on_exhausted hook, run as its owner in mallory's batch, reused the cast
 * to the superuser's domain that mallory's call had compiled under her
 * search_path, and ran her operator as the superuser (the thirty-second
 * hostile review, t/066 5).  Only a plan cache reset makes PL/pgSQL
 * compile such a cast again within the transaction.  It is kept for a
 * change inside one transaction (a hook of another owner), which is rare:
 * at every change it cost the drain of ten roles' interleaved calls a
 * third (every saved plan planned anew).
 *
 * Also the current text search configuration, which PostgreSQL looks up
 * by the name default_text_search_config gives and keeps (ts_cache.c): a
 * name without a schema ('english', as ALTER SYSTEM writes it) was found
 * under mallory's search_path, and alice's to_tsvector() used mallory's
 * configuration (t/066 1).
 */
void
exprcache_new_context(bool within_transaction)
{
	ListCell   *lc;

	CallSyscacheCallbacks(CONSTROID, 0);
	foreach(lc, expression_relations())
		RelationCacheInvalidateEntry(lfirst_oid(lc));
	if (within_transaction)
		ResetPlanCache();
	else
		CallSyscacheCallbacks(PROCOID, 0);
	/* the text search configuration of the last context's search_path */
	CallSyscacheCallbacks(TSCONFIGOID, 0);
}
