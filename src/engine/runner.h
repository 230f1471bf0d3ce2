/*-------------------------------------------------------------------------
 *
 * runner.h
 *	  Running a role's procedure or command in a process of its own, as a
 *	  script would be run by psql (runner.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef RETRIES_RUNNER_H
#define RETRIES_RUNNER_H

#include "postgres.h"

#include "nodes/nodes.h"
#include "tcop/dest.h"
#include "utils/jsonb.h"

#include "base/base.h"

/* How a run ended */
typedef enum RunnerStatus
{
	RUNNER_SUCCEEDED,			/* every statement ran and committed */
	RUNNER_FAILED,				/* an ERROR or FATAL, in sqlstate and message */
	RUNNER_LOST					/* the process ended without a word (killed) */
} RunnerStatus;

#define RUNNER_TEXT_LEN		ERROR_TEXT_LEN	/* bytes of each text of an error */

typedef struct RunnerOutcome
{
	RunnerStatus status;
	bool		capped;			/* it ended because it reached its cap */
	int64		retry_after;	/* retries.retry()'s 'after' (usecs); -1 */
	int			sqlerrcode;
	char		message[RUNNER_TEXT_LEN];
	char		detail[RUNNER_TEXT_LEN];
	char		hint[RUNNER_TEXT_LEN];
	char		context[RUNNER_TEXT_LEN];
	char		command_tag[COMPLETION_TAG_BUFSIZE];	/* the last statement's,
														 * as psql shows it; ""
														 * for none */
	int			pid;			/* the process's; 0 if it said nothing */
	int			encoding;		/* of the texts: the runner's database's */
} RunnerOutcome;

extern bool runner_launch(Oid role, const char *text, int cap_ms);
extern bool runner_launch_call(Oid role, Oid fnoid, Jsonb *args, int cap_ms,
							   int64 call_id, int32 attempt);
extern bool runner_launch_in(Oid dboid, Oid role, const char *text, int cap_ms,
							 int64 call_id, int32 attempt);
extern bool runner_busy(void);
extern bool runner_poll(RunnerOutcome *outcome);
extern void runner_outcome_here(RunnerOutcome *outcome);
extern void runner_stop(void);
extern bool runner_is_child(void);
extern PGDLLEXPORT void retries_runner_main(Datum arg);
extern void runner_check_utility(Node *parsetree);

#endif							/* RETRIES_RUNNER_H */
