/*-------------------------------------------------------------------------
 *
 * recovery.h
 *	  Interrupted attempts, noted and charged (src/engine/recovery.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef RETRIES_RECOVERY_H
#define RETRIES_RECOVERY_H

#include "engine/execute.h"

/* What recovery_lock_call found */
typedef enum
{
	CALL_GONE,					/* finished, or gone */
	CALL_LOCKED,				/* scheduled, locked by another transaction */
	CALL_LOCKED_NOW				/* scheduled, and now locked by this one */
} LockedCall;

extern LockedCall recovery_lock_call(int64 id, RetriesCall *call, bool *handed_over);
extern void recovery_charge(Oid extension);
extern bool recovery_charge_slot(int slot_no);
extern void recovery_wait(void);
extern void recovery_note_exit(int code, Datum arg);

#endif							/* RETRIES_RECOVERY_H */
