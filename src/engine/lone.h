/*-------------------------------------------------------------------------
 *
 * lone.h
 *	  Calls run one a batch after a batch failed, and calls left alone
 *	  (src/engine/lone.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef RETRIES_LONE_H
#define RETRIES_LONE_H

#include "engine/execute.h"

/* How many calls a worker leaves alone at most; one more ends it */
#define LONE_SKIP_MAX			1024

extern bool lone_skip(int64 id);
extern const int64 *lone_skipped(int *n);
extern int	lone_nskipped(void);
extern void lone_next_set(int64 id);
extern bool lone_next_pending(void);
extern int64 lone_next_take(void);
extern bool lone_one_by_one(void);
extern void lone_batch_begin(void);
extern int	lone_batch_limit(void);
extern bool lone_claimed(const RetriesCall *first);
extern void lone_batch_ran(Oid role, int n);
extern bool lone_after_error(const ErrorData *edata, Oid commit_role, Oid extension);

#endif							/* RETRIES_LONE_H */
