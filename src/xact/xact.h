/*-------------------------------------------------------------------------
 *
 * xact.h
 *	  What a transaction leaves for its end (src/xact/xact.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef RETRIES_XACT_H
#define RETRIES_XACT_H

extern void retries_install_xact_callbacks(void);
extern void retries_wake_at_commit(void);
extern void retries_gates_changed_at_commit(void);
extern void retries_wake_launcher_at_commit(void);
extern void retries_databases_changed_at_commit(void);
extern void retries_names_changed_at_commit(void);
extern void retries_stop_workers_until_end(Oid dboid);
extern void retries_call_finished(int64 id, bool notify);

#endif							/* RETRIES_XACT_H */
