/*-------------------------------------------------------------------------
 *
 * retention.h
 *	  Deleting finished calls past retries.retention
 *	  (src/engine/retention.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef RETRIES_RETENTION_H
#define RETRIES_RETENTION_H

extern uint64 retention_prune(int limit);
extern uint64 retention_prune_events(int limit);
extern void retention_prune_round(Oid served);

#endif							/* RETRIES_RETENTION_H */
