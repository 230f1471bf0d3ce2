/*-------------------------------------------------------------------------
 *
 * schedules.h
 *	  Recurring schedules: retries.schedule() and their firing
 *	  (src/schedules/schedule.c; `every` and time zones in recurring.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef RETRIES_SCHEDULES_H
#define RETRIES_SCHEDULES_H

#include "datatype/timestamp.h"

extern void schedule_arm_at_start(void);
extern TimestampTz schedule_fire_due(TimestampTz now, TimestampTz made_before,
									 TimestampTz late_from,
									 bool *waiting);

#endif							/* RETRIES_SCHEDULES_H */
