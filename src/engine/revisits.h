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
	bool		look;			/* only a look is due, no call or firing */
} RevisitDue;

extern void revisits_note(Oid dboid, TimestampTz due, TimestampTz since,
						  int looks, bool look);
extern TimestampTz revisits_first(void);
extern int	revisits_take(int ahead_ms, bool looks_too, RevisitDue *due, int max);
extern bool revisits_kept(Oid dboid);
extern int	revisits_waiting(void);
extern void revisits_listed(Oid dboid);
extern void revisits_sweep(void);

#endif							/* RETRIES_REVISITS_H */
