/*-------------------------------------------------------------------------
 *
 * flow.h
 *	  Flow control: pauses, concurrency and rate limits of functions
 *	  (src/flow/flow.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef RETRIES_FLOW_H
#define RETRIES_FLOW_H

#include "datatype/timestamp.h"

#include "core/rate.h"

typedef struct RetriesGate
{
	Oid			fn;				/* the function's key (names.c) */
	bool		paused;
	int32		max_running;	/* 0 when not limited */
	int32		max_per_key;	/* max_running_per_key; 0 when not limited */
	bool		has_rate;		/* is it rate-limited, */
	RateSpec	rate;			/* at this rate? */
} RetriesGate;

extern int	flow_load_gates(RetriesGate **gates);
extern bool flow_call_limit_key(int64 id, int64 *key);
extern void flow_hold_calls(Oid fnoid);
extern bool flow_set_gate(Oid fnoid, const bool *paused, int32 max_running,
						  int32 max_per_key, const char *rate, bool *was_paused);
extern void flow_clear_limit(Oid fnoid);
extern void flow_gate_call(int64 id);
extern TimestampTz flow_release_held(TimestampTz now, bool *gated);

/* key_window.c */
extern bool flow_key_window_allows(int64 id);

#endif							/* RETRIES_FLOW_H */
