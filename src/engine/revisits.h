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

/* A database whose kept work is due (revisits_take) */
typedef struct RevisitDue
{
	Oid			dboid;
	TimestampTz since;			/* when it first fell due */
	int			looks;			/* its looks in a row that ran nothing */
} RevisitDue;

extern void revisits_note(Oid dboid, TimestampTz due, TimestampTz since, int looks);
extern TimestampTz revisits_first(void);
extern int	revisits_take(int ahead_ms, RevisitDue *due, int max);
extern void revisits_listed(Oid dboid);
extern void revisits_sweep(void);

#endif							/* RETRIES_REVISITS_H */
