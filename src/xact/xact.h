/*-------------------------------------------------------------------------
 *
 * xact.h
 *	  What a transaction leaves for its end (src/xact/xact.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef RETRIES_XACT_H
#define RETRIES_XACT_H

#include "shmem/shmem.h"		/* WAKE_CALLS, WAKE_FIRE */

extern void xact_install(void);
extern void xact_wake_workers(uint32 why);
extern void xact_wake_workers_for(Oid role);
extern void xact_gates_changed(void);
extern void xact_wake_launcher(void);
extern void xact_databases_changed(void);
extern void xact_names_changed(void);
extern void xact_stop_workers(Oid dboid);
extern void xact_call_finished(int64 id, bool notify);

#endif							/* RETRIES_XACT_H */
