/*-------------------------------------------------------------------------
 *
 * call_args.c
 *	  Converting a call's jsonb arguments to its function's parameter types.
 *
 * retries.call() takes the arguments as jsonb: an array gives them by
 * position, an object by parameter name.  Each value is converted to its
 * parameter's type when the call is scheduled, so that a bad argument is an
 * error naming that argument then, not a failed call hours later:
 *
 *	- a json or jsonb parameter (or a domain over one) receives the JSON value;
 *	- any other parameter receives the text of a JSON scalar through its
 *	  type's input function (domain constraints included);
 *	- an array parameter may also receive a JSON array, element by element
 *	  (nested arrays give more dimensions);
 *	- JSON null is SQL NULL; missing parameters take their defaults when the
 *	  call runs; extra ones are an error.
 *
 * What is stored is the canonical form: the same array or object, with each
 * non-JSON value replaced by its type's output text, written with settings
 * (DateStyle ISO, IntervalStyle postgres, full float precision) whose output
 * any session reads back to the same value.  A worker converts that text
 * again when each attempt starts.
 *
 * Values that name database objects (the reg* types: regclass, regproc,
 * regtype, ..., and arrays, domains, composites and ranges of them) are
 * read under the search_path of whoever schedules the call, and written
 * and read back under a fixed one, OBJECT_NAME_PATH, in which every object
 * outside pg_catalog is written schema-qualified: so the stored text names
 * the object that the caller meant, whatever search_path the worker, the
 * role or anyone else has when the call runs.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "funcapi.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/float.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/regproc.h"
#include "utils/syscache.h"
#include "utils/typcache.h"

#include "api/api.h"
#include "base/base.h"
#include "core/policy.h"
#include "flow/flow.h"

/* The search_path under which values naming objects are written and read */
#define OBJECT_NAME_PATH		"pg_catalog, pg_temp"

/* The input parameters of one function, as needed to convert arguments */
typedef struct FuncParams
{
	Oid			fnoid;
	int			nargs;			/* number of input parameters */
	Oid		   *types;			/* their types */
	char	  **names;			/* their names, "" when unnamed */
	int			ndefaults;		/* trailing parameters with defaults */
	bool	   *names_objects;	/* type_names_objects() of each type */
} FuncParams;

/*
 * type_names_objects -- do values of this type name database objects
 * (reg* types), or contain values that do?
 */
static bool
type_names_objects(Oid typid)
{
	Oid			base = getBaseType(typid);
	Oid			elemtype;
	bool		result = false;

	/* composites nest */
	check_stack_depth();

	switch (base)
	{
		case REGCLASSOID:
		case REGCOLLATIONOID:
		case REGCONFIGOID:
		case REGDICTIONARYOID:
		case REGNAMESPACEOID:
		case REGOPERATOROID:
		case REGOPEROID:
		case REGPROCEDUREOID:
		case REGPROCOID:
		case REGROLEOID:
		case REGTYPEOID:
			return true;
		default:
			break;
	}
	elemtype = get_element_type(base);
	if (OidIsValid(elemtype))
		return type_names_objects(elemtype);

	switch (get_typtype(base))
	{
		case TYPTYPE_COMPOSITE:
			{
				TupleDesc	desc = lookup_rowtype_tupdesc(base, -1);

				for (int i = 0; i < desc->natts && !result; i++)
				{
					Form_pg_attribute att = TupleDescAttr(desc, i);

					if (!att->attisdropped)
						result = type_names_objects(att->atttypid);
				}
				ReleaseTupleDesc(desc);
				break;
			}
		case TYPTYPE_RANGE:
			result = type_names_objects(get_range_subtype(base));
			break;
		case TYPTYPE_MULTIRANGE:
			result = type_names_objects(get_multirange_range(base));
			break;
		default:
			break;
	}
	return result;
}

/*
 * push_object_name_path -- set search_path to OBJECT_NAME_PATH in a new GUC
 * nest level, which the caller closes with AtEOXact_GUC(true, level)
 */
static int
push_object_name_path(void)
{
	int			nestlevel = NewGUCNestLevel();

	(void) set_config_option("search_path", OBJECT_NAME_PATH, PGC_USERSET,
							 PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
	return nestlevel;
}

/*
 * load_params -- look up the input parameters of a function
 */
static void
load_params(Oid fnoid, FuncParams *params)
{
	HeapTuple	tup;
	Form_pg_proc proc;
	bool		isnull;
	Datum		argnames;
	Datum		argmodes;
	char	  **names = NULL;
	int			nnames;

	tup = SearchSysCache1(PROCOID, ObjectIdGetDatum(fnoid));
	if (!HeapTupleIsValid(tup))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_FUNCTION),
				 errmsg("function with OID %u does not exist", fnoid)));
	proc = (Form_pg_proc) GETSTRUCT(tup);

	params->fnoid = fnoid;
	params->nargs = proc->pronargs;
	params->ndefaults = proc->pronargdefaults;
	params->types = palloc(sizeof(Oid) * Max(params->nargs, 1));
	memcpy(params->types, proc->proargtypes.values, sizeof(Oid) * params->nargs);

	argnames = SysCacheGetAttr(PROCOID, tup, Anum_pg_proc_proargnames, &isnull);
	if (isnull)
		argnames = PointerGetDatum(NULL);
	argmodes = SysCacheGetAttr(PROCOID, tup, Anum_pg_proc_proargmodes, &isnull);
	if (isnull)
		argmodes = PointerGetDatum(NULL);
	nnames = get_func_input_arg_names(argnames, argmodes, &names);

	params->names = palloc(sizeof(char *) * Max(params->nargs, 1));
	for (int i = 0; i < params->nargs; i++)
		params->names[i] = (i < nnames && names[i] != NULL) ? names[i] : "";

	ReleaseSysCache(tup);

	params->names_objects = palloc(sizeof(bool) * Max(params->nargs, 1));
	for (int i = 0; i < params->nargs; i++)
		params->names_objects[i] = type_names_objects(params->types[i]);
}

/*
 * signature -- the function's signature, for messages
 *
 * Formatted only when an error needs it: a worker loads the parameters on
 * every attempt.
 */
static char *
signature(const FuncParams *params)
{
	return format_procedure(params->fnoid);
}

/*
 * describe_arg -- 'argument 2 ("qty")', or 'argument 2' when unnamed
 */
static char *
describe_arg(const FuncParams *params, int i)
{
	if (params->names[i][0] != '\0')
		return psprintf("argument %d (\"%s\")", i + 1, params->names[i]);
	return psprintf("argument %d", i + 1);
}

static List *function_defaults(Oid fnoid);
static void check_omitted_defaults(const FuncParams *params, Jsonb *args);

/*
 * foreign_domain -- the first domain with checks, owned by a role other
 * than 'role' that is not a superuser, that a value of type typid is
 * checked against when it is made from text: the type itself and the
 * domains it is over, the elements of an array, the fields of a composite,
 * the subtype of a range, however deep; InvalidOid if none.  Each type is
 * looked at once ('*seen'): a composite of two fields of a composite of
 * two fields, and so on, must not take exponential time.
 */
static Oid
foreign_domain(Oid typid, Oid role, List **seen)
{
	HeapTuple	tup;
	Form_pg_type form;
	char		typtype;
	Oid			owner;
	Oid			base;
	Oid			relid;
	Oid			found = InvalidOid;

	check_stack_depth();
	if (!OidIsValid(typid) || list_member_oid(*seen, typid))
		return InvalidOid;
	*seen = lappend_oid(*seen, typid);
	tup = SearchSysCache1(TYPEOID, ObjectIdGetDatum(typid));
	if (!HeapTupleIsValid(tup))
		return InvalidOid;
	form = (Form_pg_type) GETSTRUCT(tup);
	typtype = form->typtype;
	owner = form->typowner;
	base = form->typbasetype;
	relid = form->typrelid;
	ReleaseSysCache(tup);

	if (typtype == TYPTYPE_DOMAIN)
	{
		if (owner != role && !superuser_arg(owner) && DomainHasConstraints(typid))
			return typid;
		return foreign_domain(base, role, seen);
	}
	if (OidIsValid(get_element_type(typid)))
		return foreign_domain(get_element_type(typid), role, seen);
	if (typtype == TYPTYPE_RANGE)
		return foreign_domain(get_range_subtype(typid), role, seen);
	if (typtype == TYPTYPE_MULTIRANGE)
		return foreign_domain(get_multirange_range(typid), role, seen);
	if (typtype == TYPTYPE_COMPOSITE && OidIsValid(relid))
	{
		TupleDesc	desc = lookup_rowtype_tupdesc(typid, -1);

		for (int i = 0; i < desc->natts && !OidIsValid(found); i++)
		{
			Form_pg_attribute att = TupleDescAttr(desc, i);

			if (!att->attisdropped)
				found = foreign_domain(att->atttypid, role, seen);
		}
		ReleaseTupleDesc(desc);
	}
	return found;
}

/*
 * type_owner -- the owner of type typid
 */
static Oid
type_owner(Oid typid)
{
	HeapTuple	tup = SearchSysCache1(TYPEOID, ObjectIdGetDatum(typid));
	Oid			owner;

	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for type %u", typid);
	owner = ((Form_pg_type) GETSTRUCT(tup))->typowner;
	ReleaseSysCache(tup);
	return owner;
}

/*
 * call_args_foreign_domain -- foreign_domain() for type typid and the
 * current user: the first domain with checks of another role (not a
 * superuser) that a value of the type is checked against when it is read
 * from text; InvalidOid if none
 */
Oid
call_args_foreign_domain(Oid typid)
{
	List	   *seen = NIL;
	Oid			domain = foreign_domain(typid, GetUserId(), &seen);

	list_free(seen);
	return domain;
}

/*
 * check_trusted_params -- the function's parameters are of no domain whose
 * checks another role chose (foreign_domain): such a check is SQL of the
 * domain's owner, which would run with the rights of the role that makes
 * the call's arguments (the caller, when it schedules the call, and in
 * each attempt), up to a superuser's, and may call any function the
 * caller may (a superuser's own that runs SQL text among them)
 */
static void
check_trusted_params(const FuncParams *params)
{
	Oid			role = GetUserId();
	List	   *seen = NIL;

	for (int i = 0; i < params->nargs; i++)
	{
		Oid			domain = foreign_domain(params->types[i], role, &seen);

		if (OidIsValid(domain))
			ereport(ERROR,
					(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
					 errmsg("%s of %s is of domain %s, whose checks are code of role %s",
							describe_arg(params, i), signature(params),
							format_type_be(domain),
							GetUserNameFromId(type_owner(domain), false)),
					 errdetail("A call's arguments are made with the caller's rights: only the caller's code and a superuser's may run then."),
					 errhint("Have the function take the domain's base type, or have the domain owned by the caller or by a superuser.")));
	}
}

/*
 * trusted_default -- may the default of parameter i (its expression
 * 'expr') be evaluated for a call: the function is the caller's or a
 * superuser's, or the default is a constant?  Any other default is SQL
 * that the function's owner chose, which would run with the rights of the
 * call's role, and may call any function that role may.
 */
static bool
trusted_default(const FuncParams *params, Node *expr)
{
	Oid			owner;

	if (expr != NULL && IsA(expr, Const))
		return true;
	owner = schema_function_owner(params->fnoid);
	return !OidIsValid(owner) || owner == GetUserId() || superuser_arg(owner);
}

/*
 * refuse_default -- the error for a default that trusted_default refuses
 */
static void
refuse_default(const FuncParams *params, int i)
{
	ereport(ERROR,
			(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
			 errmsg("the default of %s of %s is code of the function's owner, role %s",
					describe_arg(params, i), signature(params),
					GetUserNameFromId(schema_function_owner(params->fnoid), false)),
			 errdetail("A call's arguments are made with the caller's rights: a default of another role's function runs only if it is a constant."),
			 errhint("Pass the argument.")));
}


/*
 * is_json_type -- is this type (or the base type of this domain) json or jsonb?
 */
static bool
is_json_type(Oid typid)
{
	Oid			base = getBaseType(typid);

	return base == JSONOID || base == JSONBOID;
}

/*
 * json_kind -- a JSON value's kind, for messages
 */
static const char *
json_kind(const JsonbValue *v)
{
	switch (v->type)
	{
		case jbvNull:
			return "null";
		case jbvString:
			return "string";
		case jbvNumeric:
			return "number";
		case jbvBool:
			return "boolean";
		case jbvBinary:
			return JsonContainerIsArray(v->val.binary.data) ? "array" : "object";
		default:
			return "value";
	}
}

/*
 * json_text -- a JSON value written as JSON text
 */
static char *
json_text(JsonbValue *v)
{
	Jsonb	   *jb = JsonbValueToJsonb(v);

	return JsonbToCString(NULL, &jb->root, VARSIZE(jb));
}

/*
 * scalar_text -- the text a type's input function gets for a JSON scalar
 */
static char *
scalar_text(const JsonbValue *v)
{
	switch (v->type)
	{
		case jbvString:
			return pnstrdup(v->val.string.val, v->val.string.len);
		case jbvNumeric:
			return DatumGetCString(DirectFunctionCall1(numeric_out,
													   NumericGetDatum(v->val.numeric)));
		case jbvBool:
			return pstrdup(v->val.boolean ? "true" : "false");
		default:
			elog(ERROR, "unexpected JSON value type %d", (int) v->type);
	}
	return NULL;				/* keep compiler quiet */
}

/*
 * append_quoted_element -- add one element to an array literal, quoted
 */
static void
append_quoted_element(StringInfo buf, const char *text)
{
	appendStringInfoChar(buf, '"');
	for (const char *p = text; *p; p++)
	{
		if (*p == '"' || *p == '\\')
			appendStringInfoChar(buf, '\\');
		appendStringInfoChar(buf, *p);
	}
	appendStringInfoChar(buf, '"');
}

/*
 * append_array_literal -- write a JSON array as an array literal
 *
 * For an element type that is json or jsonb, each element is one JSON
 * value; otherwise a nested JSON array is one more dimension (array_in
 * checks that the dimensions match) and objects are refused, as is nesting
 * deeper than the MAXDIM dimensions an array may have.  depth is the
 * dimension this array is, from 1.
 */
static void
append_array_literal(StringInfo buf, JsonbContainer *array, bool elem_is_json,
					 Oid elemtype, int depth)
{
	int			n = JsonContainerSize(array);

	if (depth > MAXDIM)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("JSON arrays nested %d deep make more than the %d dimensions an array of type %s may have",
						depth, MAXDIM, format_type_be(elemtype))));

	appendStringInfoChar(buf, '{');
	for (int i = 0; i < n; i++)
	{
		JsonbValue *elem = getIthJsonbValueFromContainer(array, i);

		if (i > 0)
			appendStringInfoChar(buf, ',');
		if (elem->type == jbvNull)
			appendStringInfoString(buf, "NULL");
		else if (elem_is_json)
			append_quoted_element(buf, json_text(elem));
		else if (elem->type == jbvBinary &&
				 JsonContainerIsArray(elem->val.binary.data))
			append_array_literal(buf, elem->val.binary.data, false, elemtype,
								 depth + 1);
		else if (elem->type == jbvBinary)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("a JSON object cannot be an element of type %s",
							format_type_be(elemtype))));
		else
			append_quoted_element(buf, scalar_text(elem));
	}
	appendStringInfoChar(buf, '}');
}

/*
 * input_text -- the text to give the input function of 'typid' for one
 * JSON value, or NULL for JSON null
 */
static char *
input_text(JsonbValue *v, Oid typid)
{
	Oid			base = getBaseType(typid);
	Oid			elemtype;

	if (v->type == jbvNull)
		return NULL;
	if (base == JSONOID || base == JSONBOID)
		return json_text(v);
	if (v->type != jbvBinary)
		return scalar_text(v);

	elemtype = get_element_type(base);
	if (OidIsValid(elemtype) && JsonContainerIsArray(v->val.binary.data))
	{
		StringInfoData buf;

		initStringInfo(&buf);
		append_array_literal(&buf, v->val.binary.data, is_json_type(elemtype),
							 elemtype, 1);
		return buf.data;
	}
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("a JSON %s cannot be converted to type %s",
					json_kind(v), format_type_be(typid)),
			 errhint("Pass the value as a JSON string holding its text form.")));
	return NULL;				/* keep compiler quiet */
}

/*
 * convert_arg -- convert one JSON value to parameter i and return the
 * canonical JSON value to store for it
 *
 * Errors of the conversion (bad syntax, out of range, a domain's CHECK) are
 * raised again with a message that names the argument, the function and the
 * type, keeping their SQLSTATE; the original message becomes the detail.
 */
static JsonbValue *
convert_arg(const FuncParams *params, int i, JsonbValue *v)
{
	Oid			typid = params->types[i];
	MemoryContext oldcxt = CurrentMemoryContext;
	JsonbValue *result = NULL;

	if (get_typtype(typid) == TYPTYPE_PSEUDO)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("%s of %s has pseudo-type %s, which calls cannot pass",
						describe_arg(params, i), signature(params),
						format_type_be(typid))));

	PG_TRY();
	{
		char	   *text = input_text(v, typid);
		Oid			infunc;
		Oid			ioparam;
		Datum		value;

		getTypeInputInfo(typid, &infunc, &ioparam);
		value = OidInputFunctionCall(infunc, text, ioparam, -1);

		if (text == NULL)
		{
			result = palloc(sizeof(JsonbValue));
			result->type = jbvNull;
		}
		else if (is_json_type(typid))
			result = v;
		else
		{
			Oid			outfunc;
			bool		isvarlena;
			char	   *out;
			int			nestlevel = -1;

			getTypeOutputInfo(typid, &outfunc, &isvarlena);
			if (params->names_objects[i])
				nestlevel = push_object_name_path();
			out = OidOutputFunctionCall(outfunc, value);
			if (nestlevel >= 0)
				AtEOXact_GUC(true, nestlevel);
			result = palloc(sizeof(JsonbValue));
			result->type = jbvString;
			result->val.string.val = out;
			result->val.string.len = strlen(out);
		}
	}
	PG_CATCH();
	{
		ErrorData  *edata;
		int			category;

		MemoryContextSwitchTo(oldcxt);
		edata = CopyErrorData();
		category = ERRCODE_TO_CATEGORY(edata->sqlerrcode);
		if (category != ERRCODE_DATA_EXCEPTION &&
			category != ERRCODE_INTEGRITY_CONSTRAINT_VIOLATION)
			PG_RE_THROW();
		FlushErrorState();
		ereport(ERROR,
				(errcode(edata->sqlerrcode),
				 errmsg("%s of %s cannot be converted to type %s",
						describe_arg(params, i), signature(params),
						format_type_be(typid)),
				 errdetail_internal("%s", edata->message),
				 edata->hint ? errhint("%s", edata->hint) : 0));
	}
	PG_END_TRY();

	return result;
}

/*
 * push_stable_output_settings -- make output functions write text that any
 * session reads back to the same value
 *
 * Returns a GUC nest level for AtEOXact_GUC(), or -1 if the session's
 * settings already do (the common case, which costs nothing).
 */
static int
push_stable_output_settings(void)
{
	int			nestlevel;

	if (DateStyle == USE_ISO_DATES && IntervalStyle == INTSTYLE_POSTGRES &&
		extra_float_digits >= 1)
		return -1;

	nestlevel = NewGUCNestLevel();
	(void) set_config_option("datestyle", "ISO", PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	(void) set_config_option("intervalstyle", "postgres", PGC_USERSET,
							 PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
	(void) set_config_option("extra_float_digits", "1", PGC_USERSET,
							 PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
	return nestlevel;
}

/*
 * canonicalize_positional -- convert arguments given as a JSON array
 */
static Jsonb *
canonicalize_positional(const FuncParams *params, Jsonb *args)
{
	int			n = JB_ROOT_COUNT(args);
	JsonbParseState *state = NULL;
	JsonbValue *res;

	if (n > params->nargs)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("too many arguments for %s: %d given, %d accepted",
						signature(params), n, params->nargs)));
	if (n < params->nargs - params->ndefaults)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s of %s is missing and has no default",
						describe_arg(params, n), signature(params))));

	pushJsonbValue(&state, WJB_BEGIN_ARRAY, NULL);
	for (int i = 0; i < n; i++)
	{
		JsonbValue *v = getIthJsonbValueFromContainer(&args->root, i);

		pushJsonbValue(&state, WJB_ELEM, convert_arg(params, i, v));
	}
	res = pushJsonbValue(&state, WJB_END_ARRAY, NULL);
	return JsonbValueToJsonb(res);
}

/*
 * canonicalize_named -- convert arguments given as a JSON object
 */
static Jsonb *
canonicalize_named(const FuncParams *params, Jsonb *args)
{
	JsonbParseState *state = NULL;
	JsonbValue *res;
	JsonbIterator *it;
	JsonbValue	v;
	JsonbIteratorToken tok;

	/* every key must name a parameter */
	it = JsonbIteratorInit(&args->root);
	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		bool		found = false;

		if (tok != WJB_KEY)
			continue;
		for (int i = 0; i < params->nargs && !found; i++)
			found = strlen(params->names[i]) == (size_t) v.val.string.len &&
				memcmp(params->names[i], v.val.string.val, v.val.string.len) == 0;
		if (!found)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("%s has no parameter named \"%s\"",
							signature(params),
							args_quotable(v.val.string.val, v.val.string.len))));
	}

	/* convert in parameter order; each missing one needs a default */
	pushJsonbValue(&state, WJB_BEGIN_OBJECT, NULL);
	for (int i = 0; i < params->nargs; i++)
	{
		const char *name = params->names[i];
		JsonbValue	key;
		JsonbValue *value = NULL;

		if (name[0] != '\0')
			value = getKeyJsonValueFromContainer(&args->root, name,
												 strlen(name), NULL);
		if (value == NULL)
		{
			if (i >= params->nargs - params->ndefaults)
				continue;
			if (name[0] == '\0')
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("%s of %s has no name, so it cannot be passed by name",
								describe_arg(params, i), signature(params)),
						 errhint("Pass the arguments as a JSON array.")));
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("%s of %s is missing and has no default",
							describe_arg(params, i), signature(params))));
		}
		key.type = jbvString;
		key.val.string.val = (char *) name;
		key.val.string.len = strlen(name);
		pushJsonbValue(&state, WJB_KEY, &key);
		pushJsonbValue(&state, WJB_VALUE, convert_arg(params, i, value));
	}
	res = pushJsonbValue(&state, WJB_END_OBJECT, NULL);
	return JsonbValueToJsonb(res);
}

/*
 * call_args_check_size -- raise 54000 if a call's arguments (or an event's
 * payload, 'what'), as jsonb, are larger than retries.max_args_size: a
 * worker reads a call's arguments into its memory, and the workers run
 * every role's calls
 */
void
call_args_check_size(const Jsonb *args, const char *what)
{
	Size		limit = (Size) retries_max_args_size * 1024;
	char		max[64];

	if (VARSIZE(args) <= limit)
		return;
	if (retries_max_args_size % 1024 == 0)
		snprintf(max, sizeof(max), "%dMB", retries_max_args_size / 1024);
	else
		snprintf(max, sizeof(max), "%dkB", retries_max_args_size);
	ereport(ERROR,
			(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
			 errmsg("%s is %zu bytes as jsonb, more than retries.max_args_size (%s)",
					what, (Size) VARSIZE(args), max),
			 errhint("Keep large data in a table and pass its key, or have a superuser raise retries.max_args_size.")));
}

/*
 * call_args_canonicalize -- check a call's arguments against its function
 * and return them in the canonical form that is stored
 */
Jsonb *
call_args_canonicalize(Oid fnoid, Jsonb *args)
{
	FuncParams	params;
	Jsonb	   *result;
	int			nestlevel;

	call_args_check_size(args, "args");
	load_params(fnoid, &params);
	check_trusted_params(&params);

	if (JB_ROOT_IS_SCALAR(args))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("args must be a JSON array or object, not a scalar"),
				 errhint("Pass positional arguments as an array, as in '[1, \"a\"]', or named ones as an object, as in '{\"id\": 1}'.")));

	nestlevel = push_stable_output_settings();
	if (JB_ROOT_IS_ARRAY(args))
		result = canonicalize_positional(&params, args);
	else
		result = canonicalize_named(&params, args);
	if (nestlevel >= 0)
		AtEOXact_GUC(true, nestlevel);
	check_omitted_defaults(&params, result);

	call_args_check_size(result, "args");
	args_check_jsonb_encoding(result, "args");
	return result;
}

/*
 * stored_value_const -- a Const of parameter i's type from one stored
 * (canonical) JSON value, converted again by the type's input function
 */
static Const *
stored_value_const(const FuncParams *params, int i, JsonbValue *v)
{
	Oid			typid = params->types[i];
	char	   *text = input_text(v, typid);
	Oid			infunc;
	Oid			ioparam;
	int16		typlen;
	bool		typbyval;
	Datum		value;
	int			nestlevel = -1;

	getTypeInputInfo(typid, &infunc, &ioparam);
	if (params->names_objects[i])
		nestlevel = push_object_name_path();
	value = OidInputFunctionCall(infunc, text, ioparam, -1);
	if (nestlevel >= 0)
		AtEOXact_GUC(true, nestlevel);
	get_typlenbyval(typid, &typlen, &typbyval);
	return makeConst(typid, -1, get_typcollation(typid), typlen, value,
					 text == NULL, typbyval);
}

/*
 * function_defaults -- the default expressions of a function's parameters,
 * which belong to its last pronargdefaults parameters (NIL if none)
 */
static List *
function_defaults(Oid fnoid)
{
	HeapTuple	tup;
	bool		isnull;
	Datum		d;
	List	   *defaults = NIL;

	tup = SearchSysCache1(PROCOID, ObjectIdGetDatum(fnoid));
	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for function %u", fnoid);
	d = SysCacheGetAttr(PROCOID, tup, Anum_pg_proc_proargdefaults, &isnull);
	if (!isnull)
		defaults = castNode(List, stringToNode(TextDatumGetCString(d)));
	ReleaseSysCache(tup);
	return defaults;
}

/*
 * check_omitted_defaults -- the parameters that the canonical arguments
 * 'args' leave out take defaults that trusted_default allows: refused
 * when the call is made, not at its first attempt
 */
static void
check_omitted_defaults(const FuncParams *params, Jsonb *args)
{
	List	   *defaults = NIL;
	int			first_default = params->nargs - params->ndefaults;

	for (int i = Max(first_default, 0); i < params->nargs; i++)
	{
		const char *name = params->names[i];
		bool		given;

		if (JB_ROOT_IS_ARRAY(args))
			given = i < (int) JB_ROOT_COUNT(args);
		else
			given = name[0] != '\0' &&
				getKeyJsonValueFromContainer(&args->root, name, strlen(name), NULL) != NULL;
		if (given)
			continue;
		if (defaults == NIL)
			defaults = function_defaults(params->fnoid);
		if (i - (params->nargs - list_length(defaults)) >= 0 &&
			!trusted_default(params, list_nth(defaults, i - (params->nargs - list_length(defaults)))))
			refuse_default(params, i);
	}
}

/*
 * call_args_build -- the argument expressions of one attempt
 *
 * Each stored value becomes a Const, converted again from its canonical
 * text (so an enum label renamed or a domain constraint tightened since
 * scheduling shows up here, as an error); each parameter left out gets the
 * function's default expression, evaluated when the call runs.  Errors
 * propagate: the caller records them as "arguments no longer convertible".
 */
List *
call_args_build(Oid fnoid, Jsonb *args)
{
	FuncParams	params;
	Node	  **exprs;
	List	   *defaults = NULL;
	List	   *result = NIL;

	load_params(fnoid, &params);
	check_trusted_params(&params);
	exprs = palloc0(sizeof(Node *) * Max(params.nargs, 1));

	if (JB_ROOT_IS_ARRAY(args))
	{
		int			n = Min((int) JB_ROOT_COUNT(args), params.nargs);

		for (int i = 0; i < n; i++)
			exprs[i] = (Node *) stored_value_const(&params, i,
												   getIthJsonbValueFromContainer(&args->root, i));
	}
	else
	{
		for (int i = 0; i < params.nargs; i++)
		{
			const char *name = params.names[i];
			JsonbValue *v;

			if (name[0] == '\0')
				continue;
			v = getKeyJsonValueFromContainer(&args->root, name, strlen(name), NULL);
			if (v != NULL)
				exprs[i] = (Node *) stored_value_const(&params, i, v);
		}
	}

	for (int i = 0; i < params.nargs; i++)
	{
		if (exprs[i] == NULL)
		{
			int			first_default;

			if (defaults == NULL)
				defaults = function_defaults(fnoid);
			first_default = params.nargs - list_length(defaults);
			if (i < first_default)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("%s of %s is missing and has no default",
								describe_arg(&params, i), signature(&params))));
			exprs[i] = copyObject(list_nth(defaults, i - first_default));
			if (!trusted_default(&params, exprs[i]))
				refuse_default(&params, i);
		}
		result = lappend(result, exprs[i]);
	}
	return result;
}
