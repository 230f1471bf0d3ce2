/*-------------------------------------------------------------------------
 *
 * outcome.h
 *	  Writing the outcomes of attempts (src/engine/outcome.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef RETRIES_OUTCOME_H
#define RETRIES_OUTCOME_H

#include "engine/execute.h"

/* The outcome of an attempt, as it is recorded */
typedef struct Outcome
{
	AttemptOutcome outcome;
	CallState	state;			/* the call's new state */
	int64		delay;			/* before the next attempt; -1 if none */
	char		sqlstate[6];
	char	   *message;
	char	   *detail;
	char	   *hint;
	char	   *context;
	Jsonb	   *result;			/* of a success; NULL for none */
	bool		notify;			/* the call's policy asks for NOTIFY */
	const char *command_tag;	/* a runner's last statement's; or NULL */
	int			pid;			/* the process that ran it: 0 for this one, -1
								 * if not known */
} Outcome;

extern void outcome_queue(const RetriesCall *call, int32 attempt,
						  TimestampTz started_at, const Outcome *out);
extern void outcome_record(const RetriesCall *call, int32 attempt,
						   TimestampTz started_at, const Outcome *out);
extern void outcome_flush(void);
extern void outcome_set_error(Outcome *out, int sqlerrcode, const char *message,
							  const char *detail, const char *hint,
							  const char *context);

#endif							/* RETRIES_OUTCOME_H */
