/*-------------------------------------------------------------------------
 *
 * claim.h
 *	  Claiming due calls for a batch (claim.c), for the worker loop.
 *
 *-------------------------------------------------------------------------
 */
#ifndef RETRIES_CLAIM_H
#define RETRIES_CLAIM_H

#include "datatype/timestamp.h"

#include "engine/execute.h"

typedef struct Claim Claim;

extern int	claim_of_role(RetriesCall *calls, TimestampTz now, Oid role,
						  const int64 *skip, int nskip, bool *low);
extern int	claim_heads(RetriesCall *calls, TimestampTz now, Oid *last_role,
						const Oid *avoid, int navoid, const int64 *skip, int nskip,
						bool strict, bool *low);
extern int	claim_prioritized(RetriesCall *calls, int limit, TimestampTz now,
							  bool above, Oid role, const int64 *skip, int nskip);
extern TimestampTz claim_next_prioritized(TimestampTz after);
extern Claim *claim_begin(int limit, TimestampTz now, Oid role,
						  const int64 *skip, int nskip);
extern int	claim_more(Claim *claim, RetriesCall *calls, int count);
extern void claim_end(Claim *claim);
extern int	claim_ids(RetriesCall *calls, const int64 *ids, int nids,
					  TimestampTz now);

#endif							/* RETRIES_CLAIM_H */
