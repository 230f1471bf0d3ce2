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
 * a literal of its type, written under fixed settings, so that no
 * session's extra_float_digits, IntervalStyle or DateStyle changes a value
 * on its way; functions by their qualified signature, so that each node
 * resolves them itself; the function acted on, its first argument fn,
 * through retries.citus_owned() with its owner here, so that a node where
 * that signature is another role's function refuses it, whoever calls:
 * the twenty-eighth hostile review, t/citus/008), and citus_forward() sends it through
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
#include "catalog/pg_authid.h"
#include "catalog/pg_namespace.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "fmgr.h"
#include "funcapi.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/regproc.h"
#include "utils/syscache.h"

#include "base/base.h"

PG_FUNCTION_INFO_V1(retries_citus_forward);

/* Citus 13's TargetWorkerSet: every active primary node with metadata but the coordinator */
#define CITUS_NON_COORDINATOR_METADATA_NODES 0

/*
 * role_can_login -- has role the LOGIN attribute?
 */
static bool
role_can_login(Oid role)
{
	HeapTuple	tup = SearchSysCache1(AUTHOID, ObjectIdGetDatum(role));
	bool		can;

	if (!HeapTupleIsValid(tup))
		return false;
	can = ((Form_pg_authid) GETSTRUCT(tup))->rolcanlogin;
	ReleaseSysCache(tup);
	return can;
}

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
 * citus_here -- is Citus loaded, and this database one of its cluster's
 * (its metadata is here)?
 */
bool
citus_here(void)
{
	return citus_symbol("GetLocalGroupId") != NULL &&
		OidIsValid(get_relname_relid("pg_dist_local_group", PG_CATALOG_NAMESPACE));
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

	if (!citus_here())
		return false;
	local_group = (int32 (*) (void)) citus_symbol("GetLocalGroupId");
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
 * citus_owned_text -- function fnoid as the nodes are to find it: its
 * qualified signature through retries.citus_owned() with its owner here,
 * which refuses (42501) a node where it is another role's
 */
char *
citus_owned_text(Oid fnoid)
{
	Oid			owner = schema_function_owner(fnoid);

	if (!OidIsValid(owner))
		elog(ERROR, "cache lookup failed for function %u", fnoid);
	return psprintf("retries.citus_owned(%s::pg_catalog.regprocedure, %s::pg_catalog.regrole)",
					quote_literal_cstr(format_procedure_qualified(fnoid)),
					quote_literal_cstr(quote_identifier(GetUserNameFromId(owner, false))));
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
	int			nestlevel;
	StringInfoData buf;

	tup = SearchSysCache1(PROCOID, ObjectIdGetDatum(fnoid));
	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for function %u", fnoid);
	proc = (Form_pg_proc) GETSTRUCT(tup);
	nargs = get_func_arg_info(tup, &types, &names, &modes);

	/* values written the same whatever the session's settings */
	nestlevel = args_portable_literals();

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
		if (i == 0 && types[i] == REGPROCEDUREOID && !fcinfo->args[i].isnull)
			appendStringInfoString(&buf, citus_owned_text(DatumGetObjectId(fcinfo->args[i].value)));
		else
			appendStringInfoString(&buf, arg_literal(fcinfo, i, types[i]));
	}
	appendStringInfoChar(&buf, ')');
	AtEOXact_GUC(true, nestlevel);
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
	Oid			role = GetUserId();

	/*
	 * A role that may not log in (a group role that owns the functions, used
	 * through SET ROLE): over the session user's connections, as that role
	 * there (SET LOCAL ROLE, which each node allows only to a member of it,
	 * as this one did)
	 */
	if (role != GetSessionUserId() && !role_can_login(role))
	{
		void		(*send_as) (int, const char *, const char *);

		send_as = (void (*) (int, const char *, const char *))
			citus_symbol("SendCommandToWorkersAsUser");
		if (send_as != NULL)
		{
			send_as(CITUS_NON_COORDINATOR_METADATA_NODES,
					GetUserNameFromId(GetSessionUserId(), false),
					psprintf("SET LOCAL ROLE %s; %s; RESET ROLE",
							 quote_identifier(GetUserNameFromId(role, false)), sql));
			return;
		}
	}

	send = (void (*) (const char *)) citus_symbol("SendCommandToWorkersWithMetadata");
	if (send == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("Citus's library has no function SendCommandToWorkersWithMetadata"),
				 errhint("Use Citus 13, or SET citus.enable_ddl_propagation = off to act on this node only.")));
	send(sql);
}

/*
 * retries_citus_forward -- SQL function retries.citus_forward(command):
 * run 'command' on every other node with Citus's metadata, in this
 * transaction (retries.citus_setup() replays the coordinator's policies
 * so, all nodes or none); superusers only (EXECUTE revoked from PUBLIC)
 */
Datum
retries_citus_forward(PG_FUNCTION_ARGS)
{
	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("command must not be NULL")));
	if (!citus_here())
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("retries.citus_forward() needs Citus"),
				 errhint("Run CREATE EXTENSION citus first.")));
	citus_forward(text_to_cstring(PG_GETARG_TEXT_PP(0)));
	PG_RETURN_VOID();
}
