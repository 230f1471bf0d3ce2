/*-------------------------------------------------------------------------
 *
 * leave.h
 *	  When a worker leaves its database (src/engine/leave.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef RETRIES_LEAVE_H
#define RETRIES_LEAVE_H

#include "datatype/timestamp.h"

/* What the worker looks after, which keeps it in its database */
typedef struct LeaveNeeds
{
	bool		looks_after;	/* a firing that waits, a gate, an error to
								 * retry, a copy settling */
	bool		runs_alone;		/* a bad row's one-by-one batches, or a call
								 * to run alone next */
	TimestampTz next_fire;		/* its next firing, 0 if none */
	int			look_again_ms;	/* how soon it looks after them again */
	Oid			capped_role;	/* its due calls are all this role's, which
								 * the pool's cap holds back; or InvalidOid */
	Oid			capped_holder;	/* ... of this role's code (the role, or the
								 * owner of the other role's functions) */
	TimestampTz capped_until;	/* ... until then at least: its next firing or
								 * call due later, of any role; 0 if none */
} LeaveNeeds;

extern bool leave_pool_contended(void);
extern void leave_reserve(const LeaveNeeds *needs, TimestampTz due,
						  TimestampTz ran_at, TimestampTz started_at,
						  bool passed_over);
extern void leave_when_idle(const LeaveNeeds *needs, TimestampTz ran_at,
							TimestampTz due, TimestampTz started_at);
extern long leave_idle_left_ms(TimestampTz ran_at, long longest);
extern void leave_for_others(const LeaveNeeds *needs, TimestampTz served_since);
extern bool leave_idle_extra(TimestampTz ran_at);
extern int	leave_look_again_ms(void);

#endif							/* RETRIES_LEAVE_H */
