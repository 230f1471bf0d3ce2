/*-------------------------------------------------------------------------
 *
 * citus.c
 *	  Citus's library, reached by name, and the coordinator speaking for
 *	  the cluster: annotate, unannotate, pause and resume made on it run on
 *	  every other node too, in the same transaction.
 *
 * Citus is preloaded or absent: PostgreSQL loads a preloaded library into
 * the global symbol namespace, so its functions are found by name with
 * dlsym() and the extension neither links against Citus nor needs it.
 *
 * The coordinator (node group 0 of a database with Citus's metadata)
 * forwards a management function it ran: citus_forward_text() spells the
 * call being made (the function's qualified name, each argument by name as
 * a literal of its type, functions by their qualified signature, so that
 * each node resolves them itself), and citus_forward() sends it through
 * SendCommandToWorkersWithMetadata() to every other active node with
 * metadata, over Citus's connections as the current role (so each node
 * checks that role's rights itself), in Citus's coordinated transaction:
 * all nodes commit it in two phases with the caller's transaction, or
 * none does.  A worker node runs it without forwarding (its group is not
 * 0).  With citus.enable_ddl_propagation off, as for DDL, nothing is
 * forwarded.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <dlfcn.h>

#include "catalog/namespace.h"
#include "catalog/pg_namespace.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "fmgr.h"
#include "funcapi.h"
#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/regproc.h"
#include "utils/syscache.h"

#include "base/base.h"

/*
 * citus_symbol -- a function of Citus's library, by name; NULL if Citus is
 * not loaded
 */
void *
citus_symbol(const char *name)
{
	return dlsym(RTLD_DEFAULT, name);
}

/*
 * citus_speaks_for_cluster -- does a management function made here run on
 * every node?  On the coordinator of a database with Citus, while
 * citus.enable_ddl_propagation is on.
 */
bool
citus_speaks_for_cluster(void)
{
	int32		(*local_group) (void);
	const char *propagate;

	local_group = (int32 (*) (void)) citus_symbol("GetLocalGroupId");
	if (local_group == NULL ||
		!OidIsValid(get_relname_relid("pg_dist_local_group", PG_CATALOG_NAMESPACE)))
		return false;
	propagate = GetConfigOption("citus.enable_ddl_propagation", true, false);
	if (propagate == NULL || strcmp(propagate, "on") != 0)
		return false;
	return local_group() == 0;
}

/*
 * arg_literal -- argument 'i' of fcinfo, of type 'type', as SQL text that
 * means the same value on any node: NULL, or a quoted literal cast to the
 * type, a function spelled by its qualified signature
 */
static char *
arg_literal(FunctionCallInfo fcinfo, int i, Oid type)
{
	const char *text;
	Oid			output;
	bool		varlena;

	if (fcinfo->args[i].isnull)
		return psprintf("NULL::%s", format_type_be_qualified(type));
	if (type == REGPROCEDUREOID)
		text = format_procedure_qualified(DatumGetObjectId(fcinfo->args[i].value));

	else
	{
		getTypeOutputInfo(type, &output, &varlena);
		text = OidOutputFunctionCall(output, fcinfo->args[i].value);
	}
	return psprintf("%s::%s", quote_literal_cstr(text), format_type_be_qualified(type));
}

/*
 * citus_forward_text -- the call that fcinfo is of, as SQL text: the SQL
 * function's qualified name and every argument by name (defaults filled in,
 * as they were given to it)
 */
char *
citus_forward_text(FunctionCallInfo fcinfo)
{
	Oid			fnoid = fcinfo->flinfo->fn_oid;
	HeapTuple	tup;
	Form_pg_proc proc;
	Oid		   *types;
	char	  **names;
	char	   *modes;
	int			nargs;
	StringInfoData buf;

	tup = SearchSysCache1(PROCOID, ObjectIdGetDatum(fnoid));
	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for function %u", fnoid);
	proc = (Form_pg_proc) GETSTRUCT(tup);
	nargs = get_func_arg_info(tup, &types, &names, &modes);

	initStringInfo(&buf);
	appendStringInfo(&buf, "%s(",
					 quote_qualified_identifier(get_namespace_name(proc->pronamespace),
												NameStr(proc->proname)));
	for (int i = 0; i < nargs && i < fcinfo->nargs; i++)
	{
		if (i > 0)
			appendStringInfoString(&buf, ", ");
		if (names != NULL && names[i][0] != '\0')
			appendStringInfo(&buf, "%s => ", quote_identifier(names[i]));
		appendStringInfoString(&buf, arg_literal(fcinfo, i, types[i]));
	}
	appendStringInfoChar(&buf, ')');
	ReleaseSysCache(tup);
	return buf.data;
}

/*
 * citus_forward_call -- on the coordinator (citus_speaks_for_cluster), run
 * the call that fcinfo is of on every other node too: SELECT the call,
 * then 'tail' (a FROM and WHERE that say where it must run), if given
 */
void
citus_forward_call(FunctionCallInfo fcinfo, const char *tail)
{
	if (!citus_speaks_for_cluster())
		return;
	citus_forward(psprintf("SELECT %s%s", citus_forward_text(fcinfo), tail ? tail : ""));
}

/*
 * citus_forward -- run 'sql' on every other node with Citus's metadata, as
 * the current role, in this transaction (see the top)
 */
void
citus_forward(const char *sql)
{
	void		(*send) (const char *);

	send = (void (*) (const char *)) citus_symbol("SendCommandToWorkersWithMetadata");
	if (send == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("Citus's library has no function SendCommandToWorkersWithMetadata"),
				 errhint("Use Citus 13, or SET citus.enable_ddl_propagation = off to act on this node only.")));
	send(sql);
}
