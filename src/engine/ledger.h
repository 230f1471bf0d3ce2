/*-------------------------------------------------------------------------
 *
 * ledger.h
 *	  The crash ledger (src/engine/ledger.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef RETRIES_LEDGER_H
#define RETRIES_LEDGER_H

#include "engine/execute.h"

/* What the in-flight file holds */
typedef struct InFlight
{
	int64		call_id;		/* 0: nothing in flight */
	int32		attempt;
	Oid			extension;		/* the extension the call belongs to */
	int32		hook;			/* an ExecuteHook: the hook that was running */
	int32		stopped;		/* the extension stopped the worker (in what
								 * was padding: files of older libraries hold
								 * 0 there) */
	TimestampTz started;		/* when the attempt started */
} InFlight;

extern void ledger_open(int slot_no, Oid extension);
extern void ledger_move(int slot_no);
extern void ledger_write(int64 call_id, int32 attempt);
extern void ledger_write_hook(int64 call_id, int32 attempt, ExecuteHook hook,
							  TimestampTz started);
extern void ledger_hook_phase(int64 call_id, int32 attempt, ExecuteHook which);
extern const InFlight *ledger_in_flight(void);
extern void ledger_note_stopped(void);
extern bool ledger_read_slot(int slot_no, InFlight *rec);
extern void ledger_clear_slot(int slot_no);
extern void ledger_note_interrupted(const InFlight *rec, int keep_ms, bool stopped);
extern bool ledger_take_interrupted(Oid extension, int64 call_id, int32 attempt,
									ExecuteHook *hook, TimestampTz *started,
									bool *stopped);

#endif							/* RETRIES_LEDGER_H */
