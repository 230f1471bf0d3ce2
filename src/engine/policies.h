/*-------------------------------------------------------------------------
 *
 * policies.h
 *	  The worker's cache of policies (src/engine/policies.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef RETRIES_POLICIES_H
#define RETRIES_POLICIES_H

#include "core/policy.h"

/* A policy as the worker uses it; rows of policy_data never change */
typedef struct CachedPolicy
{
	int32		id;				/* hash key */
	Oid			fn;				/* InvalidOid: gone */
	Oid			fn_key;			/* its key (names.c), its gate's id */
	char	   *fn_signature;
	int64		min_delay;
	int64		max_delay;		/* -1: fixed delay */
	double		multiplier;
	PolicyJitter jitter;
	int			nretry_on;
	char		(*retry_on)[POLICY_SQLSTATE_ENTRY_LEN];
	int64		timeout;		/* -1: none */
	Oid			on_exhausted;
	Oid			delay_fn;
	bool		notify;			/* NOTIFY retries_finished when a call ends */
	bool		procedure;		/* fn is a procedure: its calls run alone, in
								 * a runner (worker.c, runner.c) */
} CachedPolicy;

extern void policies_init(void);
extern CachedPolicy *policies_get(int32 policy_id);

#endif							/* RETRIES_POLICIES_H */
