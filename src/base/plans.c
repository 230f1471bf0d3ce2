/*-------------------------------------------------------------------------
 *
 * plans.c
 *	  Queries prepared once per session and kept.
 *
 * Every query names its objects and operators with their schema, so that
 * the caller's search_path cannot redirect them; a kept plan is replanned
 * by PostgreSQL when the objects it uses change.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "executor/spi.h"
#include "lib/stringinfo.h"
#include "utils/array.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/snapmgr.h"

#include "base/base.h"

/*
 * prepare_kept -- plans_prepare_kept() with the plan cache's options
 */
static SPIPlanPtr
prepare_kept(SPIPlanPtr *plan, const char *query, int nargs, Oid *argtypes,
			 int cursor_options)
{
	if (*plan == NULL)
	{
		SPIPlanPtr	p = SPI_prepare_cursor(query, nargs, argtypes, cursor_options);

		if (p == NULL || SPI_keepplan(p) != 0)
			elog(ERROR, "could not prepare query \"%s\": %s", query,
				 SPI_result_code_string(SPI_result));
		*plan = p;
	}
	return *plan;
}

/*
 * plans_prepare_kept -- prepare a query once per backend and keep the plan
 *
 * The plan is re-planned by the plan cache if our tables are dropped and
 * created again, so a static pointer is safe.  Call it inside SPI_connect().
 */
SPIPlanPtr
plans_prepare_kept(SPIPlanPtr *plan, const char *query, int nargs,
				   Oid *argtypes)
{
	return prepare_kept(plan, query, nargs, argtypes, 0);
}

/*
 * plans_prepare_generic -- plans_prepare_kept() of a query planned once,
 * for any values of its parameters
 *
 * The plan cache plans a query anew for each execution (a custom plan)
 * while the custom plans cost less than the generic one, which a LIMIT $n
 * or an array parameter always makes them seem to; for the queries that
 * claim calls that was 5 % of a worker's time in a drain
 * (doc/benchmarks-drain.md).  Only for a query whose predicates name
 * in constants every partial index it needs (as NOT_HELD does), or that
 * reads its tables by key alone, so that the generic plan has the custom
 * plan's shape: index scans bounded by the parameters.  A scan of every
 * future call instead would show in bench/run's idle CPU beside 1,000,000
 * future calls.
 */
SPIPlanPtr
plans_prepare_generic(SPIPlanPtr *plan, const char *query, int nargs,
					  Oid *argtypes)
{
	return prepare_kept(plan, query, nargs, argtypes, CURSOR_OPT_GENERIC_PLAN);
}

/*
 * plans_prepare_unheld -- plans_prepare_generic() of a query about the
 * calls that the workers may claim, whose text says NOT_HELD where it
 * means "and no gate holds the call", PRIORITY_ZERO where it means "and
 * its priority is 0", PRIORITY_COLUMN where it means the call's priority,
 * and KEY_WINDOW where it means the call's key_window column: "AND NOT
 * held", "AND priority = 0" and the priority column in a database whose
 * extension has flow control (1.2), which the partial indexes of due calls
 * need to be used, and nothing (and 0) before (when no call is held and
 * all have priority 0); the key_window column from 1.7, and a NULL interval before (when no
 * call had one).  'plans' has UNHELD_PLANS entries, one for each of those
 * kinds of database.
 */
SPIPlanPtr
plans_prepare_unheld(SPIPlanPtr *plans, const char *query, int nargs, Oid *argtypes)
{
	static const char *const markers[4] = {NOT_HELD, PRIORITY_ZERO, KEY_WINDOW,
	PRIORITY_COLUMN};
	RetriesSchemaVersion version = schema_retries_version();
	bool		flow = (version >= SCHEMA_1_2);
	bool		windows = (version >= SCHEMA_1_7);
	const char *const texts[4] = {
		flow ? " AND NOT held" : "",
		flow ? " AND priority OPERATOR(pg_catalog.=) 0" : "",
		windows ? " key_window" : " NULL::pg_catalog.interval",
		flow ? " priority" : " 0",
	};
	int			which_plan = windows ? 2 : flow ? 1 : 0;
	StringInfoData buf;
	const char *p = query;

	if (plans[which_plan] != NULL)
		return plans[which_plan];
	initStringInfo(&buf);
	for (;;)
	{
		const char *hit = NULL;
		int			which = 0;

		/* the next marker of any kind */
		for (int m = 0; m < (int) lengthof(markers); m++)
		{
			const char *h = strstr(p, markers[m]);

			if (h != NULL && (hit == NULL || h < hit))
			{
				hit = h;
				which = m;
			}
		}
		if (hit == NULL)
			break;
		appendBinaryStringInfo(&buf, p, hit - p);
		appendStringInfoString(&buf, texts[which]);
		p = hit + strlen(markers[which]);
	}
	appendStringInfoString(&buf, p);
	(void) plans_prepare_generic(&plans[which_plan], buf.data, nargs, argtypes);
	pfree(buf.data);
	return plans[which_plan];
}

/*
 * plans_columns_to_arrays -- turn 'ncolumns' columns of 'n' rows each
 * (cols[c][i], nulls[c][i], of types[c]) into one-dimensional arrays:
 * values[c], of type argtypes[c], to pass to a statement that unnests them
 * and writes all the rows at once
 */
void
plans_columns_to_arrays(int ncolumns, const Oid *types, Datum **cols,
						bool **nulls, int n, Oid *argtypes, Datum *values)
{
	int			dims[1] = {n};
	int			lbs[1] = {1};

	for (int c = 0; c < ncolumns; c++)
	{
		int16		typlen;
		bool		typbyval;
		char		typalign;

		get_typlenbyvalalign(types[c], &typlen, &typbyval, &typalign);
		argtypes[c] = get_array_type(types[c]);
		values[c] = PointerGetDatum(construct_md_array(cols[c], nulls[c], 1, dims, lbs,
													   types[c], typlen, typbyval,
													   typalign));
	}
}

/*
 * plans_by_index_begin -- until plans_by_index_end(), plan the queries run
 * as if a scan of a whole table, or a sort, cost more than any index scan
 * (enable_seqscan and enable_sort off, for this transaction's nest level);
 * its nest level
 *
 * For a kept plan that must use its partial index however the table looked
 * when it was made: a generic plan is made once, when the query is first
 * run, and kept until the table changes shape, not when it grows.  One made
 * while no call waited for an event chose a scan of every row, and kept it
 * beside 100,000 waiting calls (bench/events); the workers' claims, made
 * while call_data was empty, walked every due call through another index
 * and sorted them, at each claim.  The plan cache plans again
 * only when a query is run, so every plan of the queries run in between is
 * made so.  An error in between ends the nest level with the transaction.
 */
int
plans_by_index_begin(void)
{
	int			nestlevel = NewGUCNestLevel();

	(void) set_config_option("enable_seqscan", "off", PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	(void) set_config_option("enable_sort", "off", PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	return nestlevel;
}

/*
 * plans_by_index_end -- back to the planner settings of before
 * plans_by_index_begin(), which returned nestlevel
 */
void
plans_by_index_end(int nestlevel)
{
	AtEOXact_GUC(true, nestlevel);
}

/*
 * plans_execute_by_index -- SPI_execute_plan() of a kept plan, planned (if
 * the plan cache plans it now) as plans_by_index_begin() says; its result
 *
 * For a plan of plans_prepare_generic() run outside the claims: a generic
 * plan made while call_data held a few rows joined it by reading every row
 * (a hash join), and kept doing so at each batch once the table had grown
 * (23 ms a batch beside 150,000 calls: the tenth hostile review's delay of
 * every role's calls beside a fresh backlog, until an ANALYZE replanned it).
 */
int
plans_execute_by_index(SPIPlanPtr plan, Datum *values, bool read_only, long count)
{
	int			nestlevel = plans_by_index_begin();
	int			result = SPI_execute_plan(plan, values, NULL, read_only, count);

	plans_by_index_end(nestlevel);
	return result;
}

/*
 * plans_execute_read_committed -- SPI_execute_snapshot() of 'plan', which
 * writes, with a snapshot taken now, as READ COMMITTED whatever the
 * transaction's isolation level: a row that another transaction changed
 * since the transaction's snapshot is followed to its latest version,
 * never a 40001.  For the extension's own rows that a statement takes
 * under a lock of its own and reads after it (a name's row, tables/
 * name_locks.c; a debounced key's call, api/call.c): two REPEATABLE READ
 * transactions that use one name wait for each other, and both go on.
 */
int
plans_execute_read_committed(SPIPlanPtr plan, Datum *values, const char *nulls)
{
	int			isolation = XactIsoLevel;
	volatile int result;

	XactIsoLevel = XACT_READ_COMMITTED;
	PG_TRY();
	{
		result = SPI_execute_snapshot(plan, values, nulls, GetLatestSnapshot(),
									  InvalidSnapshot, false, false, 0);
	}
	PG_CATCH();
	{
		XactIsoLevel = isolation;
		PG_RE_THROW();
	}
	PG_END_TRY();
	XactIsoLevel = isolation;
	return result;
}
