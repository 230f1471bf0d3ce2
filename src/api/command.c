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
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "parser/parser.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/jsonb.h"
#include "utils/memutils.h"

#include "api/api.h"
#include "base/base.h"
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
	RC_KEY
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
 * command_args -- the arguments of retries.command(text) that stand for
 * 'command', in canonical form (checked against retries.max_args_size)
 */
Jsonb *
command_args(Oid fnoid, text *command)
{
	JsonbValue	elem;
	JsonbParseState *state = NULL;
	JsonbValue *array;

	elem.type = jbvString;
	elem.val.string.val = VARDATA_ANY(command);
	elem.val.string.len = VARSIZE_ANY_EXHDR(command);
	(void) pushJsonbValue(&state, WJB_BEGIN_ARRAY, NULL);
	(void) pushJsonbValue(&state, WJB_ELEM, &elem);
	array = pushJsonbValue(&state, WJB_END_ARRAY, NULL);
	return call_args_canonicalize(fnoid, JsonbValueToJsonb(array));
}

/*
 * retries_run_command -- SQL function retries.run_command(command, policy,
 * retry_on, run_at, key): schedule a command as the current role; returns
 * the call's id (with a key, that of the role's call holding it)
 */
Datum
retries_run_command(PG_FUNCTION_ARGS)
{
	Oid			fnoid = schema_command_oid();
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
	access_check_call_privilege(fnoid, GetUserId());
	args = command_args(fnoid, command);
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
 * retries_command -- SQL procedure retries.command(text): it stands for
 * commands in the tables and views; a runner runs their text, never it
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
