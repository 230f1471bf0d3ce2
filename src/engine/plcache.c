/*-------------------------------------------------------------------------
 *
 * plcache.c
 *	  PL/pgSQL's compiled functions do not cross from one context of a
 *	  worker's calls to another.
 *
 * PL/pgSQL compiles a function once per process and keeps it for as long
 * as the function's pg_proc row is unchanged.  The compilation resolves
 * the types its variables are declared with (DECLARE v text) by the
 * search_path then in force, and later calls reuse them.  In a backend that
 * is one role's session, which chose that search_path; a worker runs the
 * calls of every role in one process, each under its role's settings.
 * Left alone, a function compiled in one role's call (mallory's, under her
 * search_path, where text is her domain whose check is her code) would be
 * run by another role's later calls (alice's, of her own function): her
 * check would run as alice.
 *
 * So a worker's calls run in contexts, a context being the role the call
 * runs as and the owner of the function it runs (sandbox.c).  Every PL/pgSQL
 * function that runs in a context is noted, through PL/pgSQL's plugin
 * interface (its func_setup runs at the start of every execution, right
 * after the function was found or compiled); when the next attempt runs in
 * another context, every function noted is marked out of date, as
 * PostgreSQL marks one whose pg_proc row changed: its next call compiles
 * it anew, under the settings of that call.  Within a context, functions
 * are compiled once, as in a session.
 *
 * One more way compiles a function without running it: PL/pgSQL's
 * validator (CREATE FUNCTION, or a call of plpgsql_validator(), which any
 * role with EXECUTE on a function may make), which keeps what it compiled.
 * Inside a call it runs through plcache_validate, which marks what it
 * compiled out of date at once.
 *
 * Another plugin (a debugger, a profiler) may use PL/pgSQL's plugin
 * interface: it keeps working, called from here.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_language.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "commands/event_trigger.h"
#include "commands/trigger.h"
#include "fmgr.h"
#include "plpgsql.h"
#include "storage/itemptr.h"
#include "utils/guc.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/syscache.h"

#include "engine/plcache.h"

typedef PLpgSQL_function *(*CompileFunction) (FunctionCallInfo fcinfo,
											  bool forValidator);

/* The compiled functions that ran in the current context */
static HTAB *noted = NULL;

/* PL/pgSQL's plugin slot, ours, and the plugin that had it before us */
static PLpgSQL_plugin **plugin_slot = NULL;
static PLpgSQL_plugin our_plugin;
static PLpgSQL_plugin *next_plugin = NULL;

/* plpgsql_validator: its OID here (looked up per context) and PL/pgSQL's */
static Oid	validator_oid = InvalidOid;
static PGFunction real_validator = NULL;
static CompileFunction compile_function = NULL;

static void note_function(PLpgSQL_execstate *estate, PLpgSQL_function *func);
static void forward_func_beg(PLpgSQL_execstate *estate,
							 PLpgSQL_function *func);
static void forward_func_end(PLpgSQL_execstate *estate,
							 PLpgSQL_function *func);
static void forward_stmt_beg(PLpgSQL_execstate *estate, PLpgSQL_stmt *stmt);
static void forward_stmt_end(PLpgSQL_execstate *estate, PLpgSQL_stmt *stmt);

/*
 * mark_out_of_date -- 'func''s next use compiles it again
 *
 * PL/pgSQL keeps a compiled function while its fn_xmin and fn_tid are
 * those of the function's pg_proc row; no row has xmin 0.  The struct
 * itself is never freed (PL/pgSQL reuses it), so a pointer noted stays
 * valid; a DO block's is, and is never noted (note_function).
 */
static void
mark_out_of_date(PLpgSQL_function *func)
{
#if PG_VERSION_NUM >= 180000
	func->cfunc.fn_xmin = InvalidTransactionId;
	ItemPointerSetInvalid(&func->cfunc.fn_tid);
#else
	func->fn_xmin = InvalidTransactionId;
	ItemPointerSetInvalid(&func->fn_tid);
#endif
}

/*
 * take_plugin_slot -- be PL/pgSQL's plugin, in front of the one that was
 * (a library loaded later may have taken the slot since)
 */
static void
take_plugin_slot(void)
{
	if (*plugin_slot == &our_plugin)
		return;
	next_plugin = *plugin_slot;
	memset(&our_plugin, 0, sizeof(our_plugin));
	our_plugin.func_setup = note_function;
	if (next_plugin != NULL)
	{
		our_plugin.func_beg = next_plugin->func_beg ? forward_func_beg : NULL;
		our_plugin.func_end = next_plugin->func_end ? forward_func_end : NULL;
		our_plugin.stmt_beg = next_plugin->stmt_beg ? forward_stmt_beg : NULL;
		our_plugin.stmt_end = next_plugin->stmt_end ? forward_stmt_end : NULL;
	}
	*plugin_slot = &our_plugin;
}

/*
 * note_function -- the plugin's func_setup: 'func' runs in the current
 * context
 *
 * Not a DO block's (no OID): PL/pgSQL compiles it for its statement alone,
 * in the statement's memory, and frees it with the statement; a pointer
 * to it kept here would be written through after it was freed (the
 * thirtieth hostile review).
 */
static void
note_function(PLpgSQL_execstate *estate, PLpgSQL_function *func)
{
	if (OidIsValid(func->fn_oid))
		(void) hash_search(noted, &func, HASH_ENTER, NULL);
	if (next_plugin == NULL)
		return;
	/* what PL/pgSQL gave us, the plugin behind us gets too */
	next_plugin->error_callback = our_plugin.error_callback;
	next_plugin->assign_expr = our_plugin.assign_expr;
	next_plugin->assign_value = our_plugin.assign_value;
	next_plugin->eval_datum = our_plugin.eval_datum;
	next_plugin->cast_value = our_plugin.cast_value;
	if (next_plugin->func_setup)
		next_plugin->func_setup(estate, func);
}

static void
forward_func_beg(PLpgSQL_execstate *estate, PLpgSQL_function *func)
{
	if (next_plugin->func_beg)
		next_plugin->func_beg(estate, func);
}

static void
forward_func_end(PLpgSQL_execstate *estate, PLpgSQL_function *func)
{
	if (next_plugin->func_end)
		next_plugin->func_end(estate, func);
}

static void
forward_stmt_beg(PLpgSQL_execstate *estate, PLpgSQL_stmt *stmt)
{
	if (next_plugin->stmt_beg)
		next_plugin->stmt_beg(estate, stmt);
}

static void
forward_stmt_end(PLpgSQL_execstate *estate, PLpgSQL_stmt *stmt)
{
	if (next_plugin->stmt_end)
		next_plugin->stmt_end(estate, stmt);
}

/*
 * plcache_init -- take PL/pgSQL's plugin slot (once per worker)
 */
void
plcache_init(void)
{
	HASHCTL		ctl;

	ctl.keysize = sizeof(PLpgSQL_function *);
	ctl.entrysize = sizeof(PLpgSQL_function *);
	ctl.hcxt = TopMemoryContext;
	noted = hash_create("retries: PL/pgSQL functions of the context", 64,
						&ctl, HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	plugin_slot = (PLpgSQL_plugin **) find_rendezvous_variable("PLpgSQL_plugin");
	take_plugin_slot();
}

/*
 * lookup_validator -- plpgsql_validator's OID in this database, if PL/pgSQL
 * is installed
 */
static Oid
lookup_validator(void)
{
	HeapTuple	tup;
	Oid			oid = InvalidOid;

	tup = SearchSysCache1(LANGNAME, CStringGetDatum("plpgsql"));
	if (HeapTupleIsValid(tup))
	{
		oid = ((Form_pg_language) GETSTRUCT(tup))->lanvalidator;
		ReleaseSysCache(tup);
	}
	return oid;
}

/*
 * plcache_new_context -- the next attempt runs in another context than the
 * last: every PL/pgSQL function that ran since is compiled anew on its
 * next call
 */
void
plcache_new_context(void)
{
	HASH_SEQ_STATUS status;
	PLpgSQL_function **entry;

	hash_seq_init(&status, noted);
	while ((entry = hash_seq_search(&status)) != NULL)
	{
		mark_out_of_date(*entry);
		(void) hash_search(noted, entry, HASH_REMOVE, NULL);
	}
	take_plugin_slot();
	validator_oid = lookup_validator();
}

/*
 * plcache_is_validator -- is 'fnoid' PL/pgSQL's validator?  Inside a call,
 * it must run through plcache_validate (sandbox.c routes it).
 */
bool
plcache_is_validator(Oid fnoid)
{
	return OidIsValid(fnoid) && fnoid == validator_oid;
}

/*
 * forget_validated -- mark out of date what PL/pgSQL's validator compiled
 * of function 'fnoid', found again as the validator found it (a second
 * lookup of a valid function compiles nothing)
 */
static void
forget_validated(Oid fnoid)
{
	LOCAL_FCINFO(fake, 0);
	HeapTuple	tup;
	Oid			rettype;
	FmgrInfo	flinfo;
	TriggerData trigdata;
	EventTriggerData etrigdata;

	tup = SearchSysCache1(PROCOID, ObjectIdGetDatum(fnoid));
	if (!HeapTupleIsValid(tup))
		return;
	rettype = ((Form_pg_proc) GETSTRUCT(tup))->prorettype;
	ReleaseSysCache(tup);

	MemSet(&flinfo, 0, sizeof(flinfo));
	flinfo.fn_oid = fnoid;
	flinfo.fn_mcxt = CurrentMemoryContext;
	InitFunctionCallInfoData(*fake, &flinfo, 0, InvalidOid, NULL, NULL);
	if (rettype == TRIGGEROID)
	{
		MemSet(&trigdata, 0, sizeof(trigdata));
		trigdata.type = T_TriggerData;
		fake->context = (Node *) &trigdata;
	}
	else if (rettype == EVENT_TRIGGEROID)
	{
		MemSet(&etrigdata, 0, sizeof(etrigdata));
		etrigdata.type = T_EventTriggerData;
		fake->context = (Node *) &etrigdata;
	}
	mark_out_of_date(compile_function(fake, true));
}

/*
 * plcache_validate -- PL/pgSQL's validator, as a call's code reaches it:
 * the validator, then what it compiled is marked out of date
 */
Datum
plcache_validate(PG_FUNCTION_ARGS)
{
	Datum		result;

	if (real_validator == NULL)
	{
		real_validator = (PGFunction)
			load_external_function("$libdir/plpgsql", "plpgsql_validator",
								   true, NULL);
		compile_function = (CompileFunction)
			load_external_function("$libdir/plpgsql", "plpgsql_compile",
								   true, NULL);
	}
	result = real_validator(fcinfo);
	/* it compiles only with check_function_bodies */
	if (check_function_bodies && !PG_ARGISNULL(0))
		forget_validated(PG_GETARG_OID(0));
	return result;
}
