/*-------------------------------------------------------------------------
 *
 * conns.h
 *	  dblink's connections closed at a change of context
 *	  (src/engine/conns.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef RETRIES_CONNS_H
#define RETRIES_CONNS_H

extern void conns_forget_all(void);

#endif							/* RETRIES_CONNS_H */
