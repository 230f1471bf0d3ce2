/*-------------------------------------------------------------------------
 *
 * wslot.h
 *	  The worker's own place: its slot, its memory, its transactions
 *	  (wslot.c)
 *
 *-------------------------------------------------------------------------
 */
#ifndef RETRIES_WSLOT_H
#define RETRIES_WSLOT_H

#include "shmem/shmem.h"

extern RetriesWorker *worker_slot;
extern int	worker_slot_index;
extern MemoryContext worker_cxt;
extern MemoryContext worker_loop_cxt;

extern void wslot_start_transaction(void);
extern void wslot_commit_transaction(void);
extern void wslot_recover_from_error(MemoryContext oldcxt, ErrorData **edata);
extern Oid	wslot_lock_extension(void);
extern bool wslot_is_extra(void);
extern void wslot_set_state(RetriesWorkerState state, int64 call_id, Oid role, Oid holder);
extern void wslot_count_call(bool succeeded);
extern void wslot_rest(void);
extern bool wslot_take(uint32 generation);
extern void wslot_release(int code, Datum arg);

#endif							/* RETRIES_WSLOT_H */
