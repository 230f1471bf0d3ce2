/*-------------------------------------------------------------------------
 *
 * revisits.h
 *	  When the databases that gave their entries up have work due again
 *	  (src/engine/revisits.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef RETRIES_REVISITS_H
#define RETRIES_REVISITS_H

#include "datatype/timestamp.h"

extern void revisits_note(Oid dboid, TimestampTz due, int looks);
extern TimestampTz revisits_first(void);
extern int	revisits_take(int ahead_ms, Oid *dboids, int *looks, int max);
extern void revisits_listed(Oid dboid);
extern void revisits_sweep(void);

#endif							/* RETRIES_REVISITS_H */
