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
 * of retries.command_in(text, name), whose arguments are the text and the
 * database's name, and its runner connects there as the role.  EXECUTE on
 * retries.command_in, which PUBLIC lacks, is the privilege to make such
 * commands: the extension is installed in this database, and a database
 * that never installed it must not take commands from every role that may
 * connect to it unless a superuser said so.  The role must also have
 * CONNECT on that database, checked when the command is made and at each
 * attempt (engine/execute.c); the database is named, not numbered, so that
 * a dump and restore keeps it, and a database renamed or dropped since
 * fails the attempt (3D000).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "commands/dbcommands.h"
#include "miscadmin.h"
#include "parser/parser.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/jsonb.h"
#include "utils/memutils.h"

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
 * elsewhere -- the database 'database' names, if a command of the current
 * role may run there and it is not this one; InvalidOid for this one.
 * Raises an error that names the argument if there is no such database, or
 * if the role may not make commands in other databases (EXECUTE on
 * retries.command_in) or connect to this one.
 */
static Oid
elsewhere(const char *database)
{
	Oid			dboid = get_database_oid(database, true);
	Oid			role = GetUserId();

	if (!OidIsValid(dboid))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_DATABASE),
				 errmsg("database: database \"%s\" does not exist", database)));
	if (dboid == MyDatabaseId)
		return InvalidOid;
	if (retries_proc_aclcheck(schema_command_in_oid(), role, ACL_EXECUTE) != ACLCHECK_OK)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("database: permission denied to make commands that run in database \"%s\"",
						database),
				 errdetail("A command that runs in another database than the one it is made in needs EXECUTE on retries.command_in(text, name), which PUBLIC lacks."),
				 errhint("A superuser may grant it: GRANT EXECUTE ON PROCEDURE retries.command_in(text, name) TO %s;",
						 quote_identifier(GetUserNameFromId(role, false)))));
	if (retries_database_aclcheck(dboid, role, ACL_CONNECT) != ACLCHECK_OK)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("database: permission denied to connect to database \"%s\"", database),
				 errhint("A command runs as its role, connected to its database: the role needs CONNECT on it.")));
	return dboid;
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
	JsonbValue	elem;
	JsonbParseState *state = NULL;
	JsonbValue *array;

	*fnoid = schema_command_oid();
	elem.type = jbvString;
	elem.val.string.val = VARDATA_ANY(command);
	elem.val.string.len = VARSIZE_ANY_EXHDR(command);
	(void) pushJsonbValue(&state, WJB_BEGIN_ARRAY, NULL);
	(void) pushJsonbValue(&state, WJB_ELEM, &elem);
	if (database != NULL && OidIsValid(elsewhere(database)))
	{
		*fnoid = schema_command_in_oid();
		elem.val.string.val = (char *) database;
		elem.val.string.len = strlen(database);
		(void) pushJsonbValue(&state, WJB_ELEM, &elem);
	}
	array = pushJsonbValue(&state, WJB_END_ARRAY, NULL);
	access_check_call_privilege(*fnoid, GetUserId());
	return call_args_canonicalize(*fnoid, JsonbValueToJsonb(array));
}

/*
 * command_target -- the text and the database's name of a command that
 * runs in another database (a call of retries.command_in), from its
 * arguments, in the current memory context
 */
void
command_target(Jsonb *args, char **sql, char **database)
{
	JsonbValue *v;

	*sql = NULL;
	*database = NULL;
	v = getIthJsonbValueFromContainer(&args->root, 0);
	if (v != NULL && v->type == jbvString)
		*sql = pnstrdup(v->val.string.val, v->val.string.len);
	v = getIthJsonbValueFromContainer(&args->root, 1);
	if (v != NULL && v->type == jbvString)
		*database = pnstrdup(v->val.string.val, v->val.string.len);
	if (*sql == NULL || *database == NULL)
		elog(ERROR, "retries: a call of retries.command_in() without its text and database");
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
 * retries.command_in(text, name): they stand for commands in the tables
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
