/*-------------------------------------------------------------------------
 *
 * command.c
 *	  Commands: retries.run_command(), and retries.command(text), the
 *	  procedure that stands for them.
 *
 * A command is SQL text that a worker's runner runs as a client's simple
 * query, as the role that made it (engine/runner.c), so that statements
 * that refuse a transaction block or a function (VACUUM, CREATE INDEX
 * CONCURRENTLY, a CALL that commits) work.  It is stored as a call of
 * retries.command(text) whose one argument is the text: everything that
 * holds for calls (keys, cancel, wait, the views, retention, dump and
 * restore) holds for commands, and EXECUTE on retries.command is the
 * privilege to make them.  Each command has its own policy, given with
 * it (annotate_command_policy), never the procedure's: the procedure cannot
 * be annotated, called with retries.call() or scheduled with
 * retries.schedule() (schema_refuse_command).
 *
 * The text is parsed (not analyzed) when the command is made, so that a
 * syntax error is the caller's error, not a failed attempt later; with
 * standard_conforming_strings on, as the runner parses it.
 *
 * A command may run in another database of the cluster (version 1.7: the
 * argument database, as pg_cron's schedule_in_database): it is then a call
 * of retries.command_in(text, name, name), whose arguments are the text,
 * the database's name and the name of its owner then, and its runner
 * connects there as the role.  EXECUTE on retries.command_in, which PUBLIC
 * lacks, is the privilege to make such commands, beside EXECUTE on
 * retries.command, which every command needs: the extension is installed
 * in this database, and a database that never installed it must not take
 * commands from every role that may connect to it unless a superuser said
 * so.  The role must also be able to log in there (command_elsewhere_lacks),
 * checked when the command is made and at each attempt (engine/execute.c).
 * The database is named, not numbered, so that a dump and restore keeps
 * it; and its owner is named with it, so that a database dropped or
 * renamed, and another made under its name since by a role that may
 * create databases, does not take the command, with its owner's code
 * (triggers, functions that the text reaches) run as the role: such an
 * attempt fails, as one whose database is gone (3D000).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_database.h"
#include "commands/dbcommands.h"
#include "miscadmin.h"
#include "parser/parser.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/jsonb.h"
#include "utils/memutils.h"
#include "utils/syscache.h"

#include "api/api.h"
#include "base/base.h"
#include "base/compat.h"
#include "tables/tables.h"
#include "xact/xact.h"

PG_FUNCTION_INFO_V1(retries_run_command);
PG_FUNCTION_INFO_V1(retries_command);
PG_FUNCTION_INFO_V1(retries_command_statements);

/* Positions of retries.run_command()'s arguments */
enum
{
	RC_COMMAND,
	RC_POLICY,
	RC_RETRY_ON,
	RC_RUN_AT,
	RC_KEY,
	RC_DATABASE
};

/*
 * command_check_syntax -- raise the syntax error of 'text', as an error of
 * the command argument, or 22023 if it holds no statement; how many it
 * holds
 */
int
command_check_syntax(const char *text)
{
	MemoryContext cxt = CurrentMemoryContext;
	List	   *stmts = NIL;
	int			nestlevel = NewGUCNestLevel();

	/* as the runner parses it, whatever the caller's setting */
	(void) set_config_option("standard_conforming_strings", "on", PGC_USERSET,
							 PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
	PG_TRY();
	{
		stmts = raw_parser(text, RAW_PARSE_DEFAULT);
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		FlushErrorState();
		AtEOXact_GUC(false, nestlevel);
		ereport(ERROR,
				(errcode(edata->sqlerrcode),
				 errmsg("invalid command: %s", edata->message),
				 edata->cursorpos > 0 ? internalerrposition(edata->cursorpos) : 0,
				 internalerrquery(text)));
	}
	PG_END_TRY();
	AtEOXact_GUC(true, nestlevel);
	if (stmts == NIL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid command: it holds no statement")));
	return list_length(stmts);
}

/*
 * retries_command_statements -- SQL function
 * retries.command_statements(command): how many statements a command's
 * text holds, as the runner parses it (retries.import_pg_cron wraps a text
 * of several in one transaction, as pg_cron ran it); its syntax error if
 * it has one
 */
Datum
retries_command_statements(PG_FUNCTION_ARGS)
{
	args_check_not_null(fcinfo, 0, "command");
	PG_RETURN_INT32(command_check_syntax(text_to_cstring(PG_GETARG_TEXT_PP(0))));
}

/*
 * command_elsewhere_lacks -- what a command of 'role' that runs in database
 * 'database' lacks now: NULL if nothing, else a message, with its SQLSTATE
 * in *sqlerrcode and a hint in *hint.  The database's OID goes into *dboid
 * (InvalidOid if there is none), the name of its owner into *owner_now.
 * 'owner' is the name of the owner it had when the command was made, or
 * NULL while it is being made.  It lacks:
 *   - the database (3D000): there is none of that name, or one of another
 *     owner than when the command was made (dropped or renamed, and
 *     another made since under its name);
 *   - the privilege (42501): EXECUTE on retries.command and on
 *     retries.command_in;
 *   - CONNECT on the database (42501).
 * (The runner, connected there, checks what a login would be refused for
 * besides: VALID UNTIL, a CONNECTION LIMIT of 0, ALLOW_CONNECTIONS.)
 */
char *
command_elsewhere_lacks(Oid role, const char *database, const char *owner,
						Oid *dboid, const char **owner_now, int *sqlerrcode,
						const char **hint)
{
	HeapTuple	tup;
	Form_pg_database form;
	char	   *lacks = NULL;

	*dboid = get_database_oid(database, true);
	*owner_now = NULL;
	*sqlerrcode = ERRCODE_INSUFFICIENT_PRIVILEGE;
	*hint = NULL;
	tup = OidIsValid(*dboid) ?
		SearchSysCache1(DATABASEOID, ObjectIdGetDatum(*dboid)) : NULL;
	if (!HeapTupleIsValid(tup))
	{
		*dboid = InvalidOid;
		*sqlerrcode = ERRCODE_UNDEFINED_DATABASE;
		if (owner != NULL)
			*hint = "It was dropped or renamed since the command was made.";
		return psprintf("database \"%s\" does not exist", database);
	}
	form = (Form_pg_database) GETSTRUCT(tup);
	*owner_now = GetUserNameFromId(form->datdba, false);
	if (owner != NULL && strcmp(owner, *owner_now) != 0)
	{
		*sqlerrcode = ERRCODE_UNDEFINED_DATABASE;
		*hint = "It was dropped and made again, or given another owner, since the command was made; make the command again if it is the command's database.";
		lacks = psprintf("database \"%s\" is owned by role \"%s\", not by \"%s\" as when the command was made",
						 database, *owner_now, owner);
	}
	else if (retries_proc_aclcheck(schema_command_oid(), role, ACL_EXECUTE) != ACLCHECK_OK ||
			 retries_proc_aclcheck(schema_command_in_oid(), role, ACL_EXECUTE) != ACLCHECK_OK)
	{
		*hint = psprintf("A superuser may grant it: GRANT EXECUTE ON PROCEDURE retries.command(text), retries.command_in(text, name, name) TO %s;",
						 quote_identifier(GetUserNameFromId(role, false)));
		lacks = psprintf("role \"%s\" may not make commands that run in another database: that needs EXECUTE on retries.command(text) and on retries.command_in(text, name, name), which PUBLIC lacks",
						 GetUserNameFromId(role, false));
	}
	else if (retries_database_aclcheck(*dboid, role, ACL_CONNECT) != ACLCHECK_OK)
	{
		*hint = "A command runs as its role, connected to its database: GRANT CONNECT ON DATABASE to the role.";
		lacks = psprintf("role \"%s\" may not connect to database \"%s\"",
						 GetUserNameFromId(role, false), database);
	}
	ReleaseSysCache(tup);
	return lacks;
}

/*
 * elsewhere -- the database 'database' names, if a command of the current
 * role may run there and it is not this one; InvalidOid for this one.  Its
 * owner's name into *owner.  Raises the error of command_elsewhere_lacks(),
 * naming the argument.
 */
static Oid
elsewhere(const char *database, const char **owner)
{
	Oid			dboid;
	int			sqlerrcode;
	const char *hint;
	char	   *lacks = command_elsewhere_lacks(GetUserId(), database, NULL, &dboid,
												owner, &sqlerrcode, &hint);

	if (OidIsValid(dboid) && dboid == MyDatabaseId)
		return InvalidOid;
	if (lacks != NULL)
		ereport(ERROR,
				(errcode(sqlerrcode),
				 errmsg("database: %s", lacks),
				 hint != NULL ? errhint("%s", hint) : 0));
	return dboid;
}

/* push_string -- push a string element to an array being made */
static void
push_string(JsonbParseState **state, const char *s, int len)
{
	JsonbValue	elem;

	elem.type = jbvString;
	elem.val.string.val = (char *) s;
	elem.val.string.len = len;
	(void) pushJsonbValue(state, WJB_ELEM, &elem);
}

/*
 * command_args -- the call of a command: into *fnoid the procedure that
 * stands for it (retries.command, or retries.command_in if 'database' is
 * given and is not this database), and its arguments, in canonical form
 * (checked against retries.max_args_size); the privileges to make it
 * checked (EXECUTE on that procedure, USAGE on schema retries)
 */
Jsonb *
command_args(text *command, const char *database, Oid *fnoid)
{
	JsonbParseState *state = NULL;
	JsonbValue *array;
	const char *owner;

	*fnoid = schema_command_oid();
	(void) pushJsonbValue(&state, WJB_BEGIN_ARRAY, NULL);
	push_string(&state, VARDATA_ANY(command), VARSIZE_ANY_EXHDR(command));
	if (database != NULL && OidIsValid(elsewhere(database, &owner)))
	{
		*fnoid = schema_command_in_oid();
		push_string(&state, database, strlen(database));
		push_string(&state, owner, strlen(owner));
	}
	array = pushJsonbValue(&state, WJB_END_ARRAY, NULL);
	access_check_call_privilege(*fnoid, GetUserId());
	return call_args_canonicalize(*fnoid, JsonbValueToJsonb(array));
}

/* string_at -- the i-th element of array 'args' if it is a string, else NULL */
static char *
string_at(Jsonb *args, int i)
{
	JsonbValue *v = getIthJsonbValueFromContainer(&args->root, i);

	return v != NULL && v->type == jbvString ?
		pnstrdup(v->val.string.val, v->val.string.len) : NULL;
}

/*
 * command_target -- the text, the database's name and its owner's of a
 * command that runs in another database (a call of retries.command_in),
 * from its arguments, in the current memory context
 */
void
command_target(Jsonb *args, char **sql, char **database, char **owner)
{
	*sql = string_at(args, 0);
	*database = string_at(args, 1);
	*owner = string_at(args, 2);
	if (*sql == NULL || *database == NULL || *owner == NULL)
		elog(ERROR, "retries: a call of retries.command_in() without its text, database and owner");
}

/*
 * retries_run_command -- SQL function retries.run_command(command, policy,
 * retry_on, run_at, key, database): schedule a command as the current role;
 * returns the call's id (with a key, that of the role's call holding it)
 */
Datum
retries_run_command(PG_FUNCTION_ARGS)
{
	Oid			fnoid;
	text	   *command;
	Jsonb	   *args;
	int32		policy_id;
	RetriesUserSwitch save;
	Datum		run_at;
	int64		id;

	PreventCommandIfReadOnly("retries.run_command()");
	PreventCommandDuringRecovery("retries.run_command()");
	args_check_not_null(fcinfo, RC_COMMAND, "command");
	args_check_not_null(fcinfo, RC_RUN_AT, "run_at");
	command = PG_GETARG_TEXT_PP(RC_COMMAND);
	command_check_syntax(text_to_cstring(command));
	/* database (1.7): absent before */
	args = command_args(command,
						PG_NARGS() > RC_DATABASE && !PG_ARGISNULL(RC_DATABASE) ?
						NameStr(*PG_GETARG_NAME(RC_DATABASE)) : NULL,
						&fnoid);
	run_at = PG_GETARG_DATUM(RC_RUN_AT);

	access_become_owner(&save);
	SPI_connect();
	policy_id = annotate_command_policy(fnoid,
										PG_ARGISNULL(RC_POLICY) ? NULL :
										text_to_cstring(PG_GETARG_TEXT_PP(RC_POLICY)),
										PG_ARGISNULL(RC_RETRY_ON) ? NULL :
										PG_GETARG_ARRAYTYPE_P(RC_RETRY_ON),
										save.saved_userid);
	id = call_insert_command(fnoid, policy_id, args, run_at, save.saved_userid,
							 PG_ARGISNULL(RC_KEY) ? (Datum) 0 : PG_GETARG_DATUM(RC_KEY));
	xact_wake_workers(WAKE_CALLS);
	SPI_finish();
	access_restore_user(&save);
	PG_RETURN_INT64(id);
}

/*
 * retries_command -- SQL procedures retries.command(text) and
 * retries.command_in(text, name, name): they stand for commands in the tables
 * and views; a runner runs their text, never them
 */
Datum
retries_command(PG_FUNCTION_ARGS)
{
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("retries.command() runs nothing itself"),
			 errdetail("It stands for the commands that retries' workers run."),
			 errhint("Run a command with retries.run_command(), or schedule it with retries.schedule_command().")));
	PG_RETURN_VOID();
}
