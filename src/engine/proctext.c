/*-------------------------------------------------------------------------
 *
 * proctext.c
 *	  The text a runner runs for a procedure's or command's call: CALL of
 *	  the procedure with the call's arguments as literals, or the command.
 *
 * Run in the runner's process, as the call's role (runner.c): the
 * arguments are converted as an attempt converts them, the defaults that
 * the CALL takes may call no function of another role, and the literals
 * read back as the same values whatever the role's settings.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/pg_constraint.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/regproc.h"
#include "utils/rel.h"
#include "utils/ruleutils.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
#include "utils/typcache.h"

#include "api/api.h"
#include "base/base.h"
#include "engine/proctext.h"
#include "tables/tables.h"

/*
 * foreign_checker, foreign_walker -- does an expression call a function
 * (not built in) of a role other than the runner's, that is not a
 * superuser, itself or in the CHECK of a domain it converts to?
 */
static bool
foreign_checker(Oid func_id, void *context)
{
	Oid			owner;

	if (func_id < FirstNormalObjectId)
		return false;
	owner = schema_function_owner(func_id);
	return OidIsValid(owner) && owner != GetUserId() && !superuser_arg(owner);
}

static bool foreign_walker(Node *node, void *context);

/*
 * domain_base -- the type a domain is over (a domain, maybe)
 */
static Oid
domain_base(Oid typid)
{
	HeapTuple	tup = SearchSysCache1(TYPEOID, ObjectIdGetDatum(typid));
	Oid			base;

	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for type %u", typid);
	base = ((Form_pg_type) GETSTRUCT(tup))->typbasetype;
	ReleaseSysCache(tup);
	return base;
}

/*
 * domain_checks_foreign -- do the CHECKs of a domain, or of the domains it
 * is over, call a function of another role?  Read as stored (conbin), not
 * as the type cache keeps them planned, where an SQL function of another
 * role may be inlined out of sight.
 */
static bool
domain_checks_foreign(Oid typid)
{
	bool		found = false;
	Relation	rel = table_open(ConstraintRelationId, AccessShareLock);

	while (!found && get_typtype(typid) == TYPTYPE_DOMAIN)
	{
		ScanKeyData key;
		SysScanDesc scan;
		HeapTuple	tup;

		ScanKeyInit(&key, Anum_pg_constraint_contypid, BTEqualStrategyNumber,
					F_OIDEQ, ObjectIdGetDatum(typid));
		scan = systable_beginscan(rel, ConstraintTypidIndexId, true, NULL, 1, &key);
		while (!found && HeapTupleIsValid(tup = systable_getnext(scan)))
		{
			bool		isnull;
			Datum		bin = heap_getattr(tup, Anum_pg_constraint_conbin,
										   RelationGetDescr(rel), &isnull);

			if (((Form_pg_constraint) GETSTRUCT(tup))->contype == CONSTRAINT_CHECK &&
				!isnull)
				found = foreign_walker(stringToNode(TextDatumGetCString(bin)), NULL);
		}
		systable_endscan(scan);
		typid = domain_base(typid);
	}
	table_close(rel, AccessShareLock);
	return found;
}

/*
 * type_checks_foreign -- is a value of type typid checked, when it is read
 * from text, against a domain whose CHECKs call a function of another
 * role: the type itself and the domains it is over, the elements of an
 * array, the fields of a composite, the subtype of a range, however deep
 * (each type looked at once, '*seen')?
 */
static bool
type_checks_foreign(Oid typid, List **seen)
{
	char		typtype;
	bool		found = false;

	check_stack_depth();
	if (!OidIsValid(typid) || list_member_oid(*seen, typid))
		return false;
	*seen = lappend_oid(*seen, typid);
	typtype = get_typtype(typid);
	if (typtype == TYPTYPE_DOMAIN)
		return domain_checks_foreign(typid) ||
			type_checks_foreign(getBaseType(typid), seen);
	if (OidIsValid(get_element_type(typid)))
		return type_checks_foreign(get_element_type(typid), seen);
	if (typtype == TYPTYPE_RANGE)
		return type_checks_foreign(get_range_subtype(typid), seen);
	if (typtype == TYPTYPE_MULTIRANGE)
		return type_checks_foreign(get_multirange_range(typid), seen);
	if (typtype == TYPTYPE_COMPOSITE && OidIsValid(get_typ_typrelid(typid)))
	{
		TupleDesc	desc = lookup_rowtype_tupdesc(typid, -1);

		for (int i = 0; i < desc->natts && !found; i++)
		{
			Form_pg_attribute att = TupleDescAttr(desc, i);

			if (!att->attisdropped)
				found = type_checks_foreign(att->atttypid, seen);
		}
		ReleaseTupleDesc(desc);
	}
	return found;
}

/* type_checks_foreign() of one type */
static bool
type_reaches_foreign(Oid typid)
{
	List	   *seen = NIL;
	bool		found = type_checks_foreign(typid, &seen);

	list_free(seen);
	return found;
}

static bool
foreign_walker(Node *node, void *context)
{
	if (node == NULL)
		return false;
	if (check_functions_in_node(node, foreign_checker, context))
		return true;
	if (IsA(node, CoerceToDomain) &&
		type_reaches_foreign(((CoerceToDomain *) node)->resulttype))
		return true;

	/*
	 * A literal of a type that reaches another role's domain (an array, a
	 * composite): the CALL's text reads it again, and its domain's checks run
	 * then (the thirty-second hostile review, t/066 2)
	 */
	if (IsA(node, Const) &&
		(OidIsValid(call_args_foreign_domain(((Const *) node)->consttype)) ||
		 type_reaches_foreign(((Const *) node)->consttype)))
		return true;
#if PG_VERSION_NUM >= 160000
	return expression_tree_walker(node, foreign_walker, context);
#else
	/* PostgreSQL 15 declares the walker without a prototype */
	return expression_tree_walker(node, (bool (*) ()) (void (*) (void)) foreign_walker,
								  context);
#endif
}

/*
 * check_defaults -- the defaults that a procedure's call takes (the
 * arguments that are not Consts) call no function of another role: a
 * default is SQL that the procedure's owner wrote, and runs in the CALL,
 * as the caller (a worker's attempt refuses such a function as it runs:
 * sandbox_make_args)
 */
static void
check_defaults(Oid fnoid, List *args)
{
	ListCell   *lc;

	foreach(lc, args)
	{
		if (!IsA(lfirst(lc), Const) && foreign_walker(lfirst(lc), NULL))
			ereport(ERROR,
					(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
					 errmsg("making the call's arguments would run a function of another role, in a default of %s",
							format_procedure(fnoid)),
					 errdetail("Only the caller's code and a superuser's make a call's arguments."),
					 errhint("Pass the argument whose default calls it, or have its owner give the function to the caller or to a superuser.")));
	}
}

/*
 * proctext_check_domains -- the parameters of function or procedure fnoid
 * are of no domain whose checks call a function of another role: the
 * caller's own domain may call one.  A runner converts a procedure's
 * arguments, and reads them back from the CALL's text, without the
 * worker's routing (sandbox_make_args), which fails an attempt that
 * reaches such a function while it makes its arguments (the thirty-second
 * hostile review, t/066 3); and a worker that makes a function's
 * arguments may run a check that the type cache planned before, outside
 * the routing, with another role's SQL function inlined in it, which no
 * routing then sees (the thirty-sixth, t/073 2).  Made before the
 * arguments are converted, which runs the checks (the thirty-third, t/067
 * 2), and through arrays, composites and ranges (t/067 1).
 */
void
proctext_check_domains(Oid fnoid)
{
	Oid		   *types;
	char	  **names;
	char	   *modes;
	HeapTuple	tup = SearchSysCache1(PROCOID, ObjectIdGetDatum(fnoid));
	int			n;

	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for function %u", fnoid);
	n = get_func_arg_info(tup, &types, &names, &modes);
	ReleaseSysCache(tup);
	for (int i = 0; i < n; i++)
	{
		Oid			type = types[i];

		if (modes != NULL && modes[i] == PROARGMODE_OUT)
			continue;			/* passed as NULL */
		if (type_reaches_foreign(type))
			ereport(ERROR,
					(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
					 errmsg("making the call's arguments would run a function of another role, in a check of a domain that type %s reaches, of %s",
							format_type_be(type), format_procedure(fnoid)),
					 errdetail("Only the caller's code and a superuser's make a call's arguments."),
					 errhint("Have the domain's checks call only the caller's functions or a superuser's.")));
	}
}

/*
 * proctext_build -- "CALL <procedure>(<arguments>)" for fnoid with the
 * arguments stored in args_text (a call's canonical jsonb), converted here,
 * by the role, as an attempt converts them (call_args_build), and written
 * back as literals of their types (ruleutils): the text then runs as any
 * other (runner.c, run_script), a top-level CALL, so that COMMIT and ROLLBACK
 * in the procedure work.  The privileges are checked as for a call's
 * function: USAGE on its schema too, since it is given by OID.  A command
 * (a call of retries.command) is its text, after the same checks.
 */
char *
proctext_build(Oid fnoid, const char *args_text)
{
	List	   *args;
	Oid			collation = InvalidOid;
	ListCell   *lc;
	FuncExpr   *fexpr;
	char	   *call_text;
	int			nestlevel;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	access_check_call_privilege(fnoid, GetUserId());
	/* before the arguments are made: their conversion runs the checks */
	proctext_check_domains(fnoid);
	args = call_args_build(fnoid,
						   DatumGetJsonbP(DirectFunctionCall1(jsonb_in,
															  CStringGetDatum(args_text))));
	if (fnoid == schema_command_oid())
	{
		/* a command (api/command.c): its text is its one argument */
		char	   *command = TextDatumGetCString(castNode(Const, linitial(args))->constvalue);

		command = MemoryContextStrdup(TopMemoryContext, command);
		PopActiveSnapshot();
		CommitTransactionCommand();
		return command;
	}
	check_defaults(fnoid, args);
	foreach(lc, args)
	{
		if (!OidIsValid(collation))
			collation = exprCollation(lfirst(lc));
	}
	fexpr = makeFuncExpr(fnoid, get_func_rettype(fnoid), args, InvalidOid,
						 collation, COERCE_EXPLICIT_CALL);
	/* a variadic parameter takes an array (call_args): VARIADIC in the text */
	fexpr->funcvariadic = OidIsValid(get_func_variadictype(fnoid));

	/*
	 * Literals that read back as the same values whatever the role's
	 * settings: every digit of a float, dates and intervals in formats that
	 * every style reads
	 */
	nestlevel = args_portable_literals();
	call_text = MemoryContextStrdup(TopMemoryContext,
									psprintf("CALL %s",
											 deparse_expression((Node *) fexpr, NIL,
																false, false)));
	AtEOXact_GUC(true, nestlevel);

	PopActiveSnapshot();
	CommitTransactionCommand();
	return call_text;
}
