/*-------------------------------------------------------------------------
 *
 * handoff.h
 *	  A procedure's or command's attempt handed to a runner, and the places
 *	  of the workers that wait for one (src/engine/handoff.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef RETRIES_HANDOFF_H
#define RETRIES_HANDOFF_H

#include "engine/execute.h"

extern void handoff_init(Oid extension);
extern void handoff_set_in_runner(bool in_runner, Oid role);
extern void handoff_begin(RetriesCall *call);
extern bool handoff_pending(void);
extern bool handoff_launched(void);
extern void handoff_run(void);
extern void handoff_held_committed(void);
extern void handoff_release_held(const Oid *extra_avoid, int nextra);
extern void handoff_place_freed(void);
extern void handoff_recover_places(bool (*recover) (int slot_no));
extern void handoff_drop(void);
extern void handoff_abort(void);

#endif							/* RETRIES_HANDOFF_H */
