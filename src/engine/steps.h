/*-------------------------------------------------------------------------
 *
 * steps.h
 *	  A worker's steps beside its batches (src/engine/steps.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef RETRIES_STEPS_H
#define RETRIES_STEPS_H

#include "shmem/shmem.h"

/* After an error, wait this long before trying again, doubling up to the max */
#define ERROR_DELAY_MS			1000
#define MAX_ERROR_DELAY_MS		30000
/* Housekeeping waits at most this long while the pool is contended */
#define HOUSEKEEPING_DEFER_MS	(10 * 60 * 1000)
/* Longest time between two looks at the schedules */
#define FIRE_CHECK_MS			1000

extern void steps_fire(Oid extension, bool *gated);
extern void steps_names(Oid extension);
extern bool steps_serving(Oid extension);
extern bool steps_housekeeping_deferred(void);
extern const RetriesDbMemo *steps_memo_read(void);
extern void steps_memo_write_pruned(TimestampTz at);
extern void steps_look_soon(void);
extern TimestampTz steps_next_fire(void);
extern bool steps_fire_waiting(void);
extern int	steps_fire_errors(void);
extern void steps_fire_late_from(TimestampTz at);
extern TimestampTz steps_copy_made_at(void);
extern void steps_finish_cancelled(int64 *ids, int n);

#endif							/* RETRIES_STEPS_H */
