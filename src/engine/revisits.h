/*-------------------------------------------------------------------------
 *
 * revisits.h
 *	  When the databases that gave their entries up have work due again,
 *	  and waking them (src/engine/revisits.c); the launcher's timings.
 *
 *-------------------------------------------------------------------------
 */
#ifndef RETRIES_REVISITS_H
#define RETRIES_REVISITS_H

#include "datatype/timestamp.h"

/* How long before a database's work is due its worker is started */
#define START_AHEAD_MS			500
/* How long to wait before starting workers again in a database */
#define RESTART_DELAY_MS		1000

struct RetriesDatabase;

extern void revisits_note_far_due(struct RetriesDatabase *db);
extern void revisits_forget_noted(void);
extern void revisits_note_woken(TimestampTz now);
extern void revisits_wake_due(TimestampTz now, bool looks_too);
extern void revisits_note_new(Oid dboid, TimestampTz since);
extern void revisits_note_waiting(void);
extern TimestampTz revisits_next(TimestampTz now);
extern bool revisits_kept(Oid dboid);
extern void revisits_listed(Oid dboid, Oid owner);
extern void revisits_sweep(void);

#endif							/* RETRIES_REVISITS_H */
