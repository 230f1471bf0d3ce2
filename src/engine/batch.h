/*-------------------------------------------------------------------------
 *
 * batch.h
 *	  A worker's batch of one role's calls (src/engine/batch.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef RETRIES_BATCH_H
#define RETRIES_BATCH_H

#include "datatype/timestamp.h"

/* A batch stops taking new calls after this long */
#define BATCH_TIME_MS			50

extern void batch_init(Oid extension);
extern int	batch_run(TimestampTz *due);
extern bool batch_extension_replaced(void);
extern Oid	batch_after_error(void);
extern bool batch_take_gate_touched(void);

#endif							/* RETRIES_BATCH_H */
