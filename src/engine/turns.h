/*-------------------------------------------------------------------------
 *
 * turns.h
 *	  Whose calls a worker may claim first (src/engine/turns.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef RETRIES_TURNS_H
#define RETRIES_TURNS_H

#include "engine/execute.h"

extern int	turns_claim_first(RetriesCall *calls, TimestampTz now, bool *below_zero);
extern int	turns_running_roles(Oid *roles);
extern bool turns_extra_wanted(void);
extern bool turns_idle_in_reserve(TimestampTz ran_at);
extern bool turns_extra_passes_over(Oid role, Oid holder);
extern bool turns_reserve_passes_over(Oid role, Oid holder);
extern void turns_capped_due(TimestampTz claimed_at, TimestampTz *due);
extern Oid	turns_capped(TimestampTz *until, Oid *holder);
extern bool turns_reserve_passed_over(void);

#endif							/* RETRIES_TURNS_H */
