/*-------------------------------------------------------------------------
 *
 * time_cap.h
 *	  A time limit that cancels code, then ends the process if the code
 *	  goes on (src/engine/time_cap.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef RETRIES_TIME_CAP_H
#define RETRIES_TIME_CAP_H

/* What the limit does, called from the SIGALRM handler: set flags only */
typedef void (*TimeCapAction) (void);

extern void time_cap_init(TimeCapAction cancel, TimeCapAction kill);
extern void time_cap_arm(int ms, int grace_ms);
extern void time_cap_disarm(void);

#endif							/* RETRIES_TIME_CAP_H */
