/*-------------------------------------------------------------------------
 *
 * tables.h
 *	  The extension's tables: who may read and write them, the keys of the
 *	  functions they name, and their hold while a dump is restored.
 *
 * src/tables/access.c	acting as the extension's owner; privileges and
 *						visibility of calls
 * src/tables/names.c	retries.function_names: functions by key
 * src/tables/restore.c	holding the extension during a restore
 *
 *-------------------------------------------------------------------------
 */
#ifndef RETRIES_TABLES_H
#define RETRIES_TABLES_H

#include "access/xact.h"
#include "nodes/nodes.h"
#include "nodes/plannodes.h"
#include "utils/snapshot.h"

#include "base/base.h"

/* access.c: acting as the extension's owner (RetriesUserSwitch: base.h) */
extern void access_become_owner(RetriesUserSwitch *save);
extern void access_restore_user(const RetriesUserSwitch *save);
extern bool access_sees_all_calls(Oid roleid);
extern bool access_may_see_call(Oid roleid, Oid scheduled_by);
extern bool access_reads_all_calls(Oid roleid);
extern char *access_connection_shut(Oid role);
extern bool access_may_read_call(Oid roleid, Oid scheduled_by);
extern char *access_call_privilege(Oid fnoid, Oid role);
extern void access_check_call_privilege(Oid fnoid, Oid role);
extern char *access_login_privilege(Oid role, const char **hint);
extern char *access_hook_owner(Oid hook, Oid fn_owner, const char *what);

/*
 * calls.c: writes to the calls table and its attempts.
 *
 * CALLS_OTHERS_OF_KEY: the other calls o of the key of call $1: of its
 * role $2 and key $3 (the index call_data_key is on the key's hash), of
 * which calls_put_off_key() puts off CALLS_PUT_OFF_MAX at most: a batch
 * keeps near its time (15,000 at once took half a second).
 * CALLS_WAITING_FOR_EVENT: the calls c of role $1 that wait for its event
 * $2 (text).  CALLS_RELEASE_CHOSEN: the write that ends a release in turns
 * between roles (flow.c), a CTE "released" (id) of the calls of CTE chosen
 * (id) that no other transaction holds, released.
 */
#define CALLS_OTHERS_OF_KEY \
	" o.scheduled_by OPERATOR(pg_catalog.=) $2::pg_catalog.regrole" \
	" AND pg_catalog.md5(o.key) OPERATOR(pg_catalog.=) pg_catalog.md5($3)" \
	" AND o.key OPERATOR(pg_catalog.=) $3" \
	" AND o.id OPERATOR(pg_catalog.<>) $1"
#define CALLS_PUT_OFF_MAX		1000
#define CALLS_RELEASE_CHOSEN \
	" released AS (" \
	" UPDATE retries.call_data SET held = false" \
	" WHERE id OPERATOR(pg_catalog.=) ANY (ARRAY(" \
	"  SELECT id FROM retries.call_data" \
	"  WHERE id OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT id FROM chosen))" \
	"  AND held FOR UPDATE SKIP LOCKED))" \
	" AND held RETURNING id)"

/*
 * The calls a copy of a database brought that are left to settle (home.c;
 * calls_cancel_copied): $2 is when the copy was made, $4 the pattern of
 * the messages of the calls settled before
 */
#define COPIED_CALLS \
	" FROM retries.call_data WHERE state OPERATOR(pg_catalog.=) 'scheduled'" \
	" AND created_at OPERATOR(pg_catalog.<) $2" NOT_SETTLED
/*
 * ... and not cancelled by a settling of this database before (no error
 * leaves a message without a SQLSTATE; the message names this database's
 * OID first, $4, before any name a role chose): one that its role ran
 * again here (retry_now()), as the message says it may, is its own.  A
 * copy of this copy settles it again (the eleventh hostile review: a mark
 * that named no copy let such a call run in a copy of the copy).
 */
#define NOT_SETTLED \
	" AND NOT (last_sqlstate IS NULL" \
	"  AND last_message IS NOT NULL" \
	"  AND last_message OPERATOR(pg_catalog.~~) $4)"

/*
 * The columns of a new call (calls_insert_keyless, calls_insert_keyed,
 * calls_insert_unfinished_key), in this order: values[] and nulls[] (' ' or
 * 'n') of CALL_COLUMNS each
 */
typedef enum CallColumn
{
	CC_POLICY_ID,
	CC_ARGS,
	CC_MAX_ATTEMPTS,
	CC_NEXT_ATTEMPT,
	CC_SCHEDULED_BY,
	CC_KEY,
	CC_SCHEDULE_ID,				/* only keyless calls have one */
	CC_GATE,					/* gate and held: see flow.c */
	CC_HELD,
	CC_PRIORITY,
	CC_LIMIT_KEY,
	CC_WAITING_ON,				/* see chains.c */
	CC_ON_EVENT,				/* these four: 1.6 (events.c) */
	CC_EVENT_DEADLINE,
	CC_EVENT_WAIT,
	CC_KEY_GEN,					/* which call of its key (api/call.c,
								 * insert_keyed) */
	CC_KEY_WINDOW,				/* 1.7: the window that spaces its key's
								 * deliveries (flow/key_window.c) */
	CALL_COLUMNS
} CallColumn;

/* How often retries.call() looks again for a key whose call just finished */
#define KEY_RACE_ATTEMPTS	3

/*
 * The columns of the outcomes calls_write_outcomes() writes, one array
 * each (engine/outcome.c queues them)
 */
typedef enum CallsOutcomeColumn
{
	OC_CALL_ID, OC_ATTEMPT, OC_STARTED, OC_FINISHED, OC_OUTCOME, OC_STATE,
	OC_NEXT_ATTEMPT, OC_SQLSTATE, OC_MESSAGE, OC_DETAIL, OC_HINT, OC_CONTEXT,
	OC_DELAY, OC_RESULT, OC_COMMAND_TAG, OC_PID, OC_NCOLUMNS
} CallsOutcomeColumn;
#define CALLS_WAITING_FOR_EVENT \
	" WHERE c.scheduled_by OPERATOR(pg_catalog.=) $1::pg_catalog.regrole" \
	" AND pg_catalog.md5(c.on_event) OPERATOR(pg_catalog.=) pg_catalog.md5($2)" \
	" AND c.on_event OPERATOR(pg_catalog.=) $2" \
	" AND c.event_wait AND c.state OPERATOR(pg_catalog.=) 'scheduled'"

/* insert.c: the insertion of a call */
extern int64 calls_insert_keyless(Datum *values, const char *nulls);
extern int64 calls_insert_keyed(Datum *values, const char *nulls);
extern int64 calls_insert_unfinished_key(Datum *values, const char *nulls,
										 bool *inserted);
extern void calls_insert_pause(Node *command);
extern void calls_insert_resume(Node *command);
extern void calls_cancel(int64 id);
extern uint64 calls_cancel_copied(bool one, RetriesSchemaVersion version,
								  Datum *values);
extern void calls_release_restored_waiters(void);
extern void calls_move(int64 id, Datum run_at);
extern void calls_schedule_again(int64 id, CallState from, Datum run_at,
								 RetriesSchemaVersion version);
extern void calls_hold_of_function(Oid key, Oid fnoid);
extern void calls_hold_if_paused(int64 id);
extern void calls_hold_at_gate(int64 id, Oid gate);
extern void calls_hand_to_runner(int64 id);
extern void calls_put_back(int64 id);
extern void calls_put_off(int64 id, TimestampTz when);
extern void calls_put_off_key(int64 id, Datum role, Datum key, TimestampTz when);
extern bool calls_debounce(int64 id, Datum due, Datum args, Datum debounce_max,
						   bool has_debounce_max, Datum floor);
extern uint64 calls_release_for_event(Datum role, Datum event);
extern uint64 calls_release_timed_out(TimestampTz now, int limit);
extern uint64 calls_release_at_gate(Oid gate, int64 limit, TimestampTz now, bool keyless);
extern bool calls_runner_returned(int64 id, TimestampTz started_at);
extern void calls_hold_for_runner(int64 id);
extern int	calls_release_runner_holds(int places, Oid *last_role, const Oid *avoid,
									   int navoid, int64 *ids);
extern void calls_allow_another_attempt(int64 id);
extern void calls_note_hook_error(int64 id, int32 attempt, const char *error);
extern uint64 calls_release_followers(Datum ids, Datum sign, bool *later);
extern void calls_cancel_followers(Datum ids, Datum failed, Datum sign);
extern void calls_write_outcomes(Datum **columns, bool **nulls, int n);
extern void calls_trim_attempts(const int64 *ids, const int32 *attempts, int n, int keep);
extern uint64 calls_prune_finished(const char *retention, int limit, bool chains);
extern bool calls_fail_bad_row(int64 id, int32 attempt, const char *sqlstate,
							   const char *message, const char *detail);

/*
 * names.c.  RETRIES_KEY_OF(fn) is SQL for the key of function fn (an SQL
 * expression of type oid), NULL if it has none: as
 * names_function_key(fn, false), inside a query.
 */
#define RETRIES_ORIGIN "retries.origin()"
#define RETRIES_KEY_OF(fn) \
	"COALESCE(" \
	" (SELECT k.key FROM retries.function_names k" \
	"  WHERE k.fn OPERATOR(pg_catalog.=) " fn \
	"  AND k.fn OPERATOR(pg_catalog.<>) 0" \
	"  AND k.origin OPERATOR(pg_catalog.=) " RETRIES_ORIGIN \
	"  ORDER BY k.key LIMIT 1)," \
	" (SELECT k.key FROM retries.function_names k" \
	"  WHERE k.origin OPERATOR(pg_catalog.<>) " RETRIES_ORIGIN \
	"  AND k.fn OPERATOR(pg_catalog.<>) 0" \
	"  AND retries.resolve_function(k.signature, k.owner) OPERATOR(pg_catalog.=) " fn \
	"  ORDER BY k.key LIMIT 1))"
extern Oid	names_function_key(Oid fn, bool create);
extern Oid	names_own_key(Oid fn, Snapshot snap);
extern Oid	names_key_function(Oid key);
extern void names_refresh(void);
extern bool names_refresh_due(bool deferred, long defer_ms);
extern void names_refresh_failed(void);
extern void names_refresh_committed(void);
extern char *names_signature(Oid fn);

/*
 * What releasing a waiting call does to it, by its event (event_wait =
 * false) or its timeout (NULL): one off waiting_on, held while any is
 * left.  A call that waits no more on anything (retry_now() of a cancelled
 * call that waited) keeps its hold as it is.
 */
#define RELEASE_SET \
	" waiting_on = CASE WHEN c.waiting_on OPERATOR(pg_catalog.>) 0" \
	"  THEN c.waiting_on OPERATOR(pg_catalog.-) 1 ELSE 0 END," \
	" held = CASE WHEN c.waiting_on OPERATOR(pg_catalog.>) 0" \
	"  THEN c.waiting_on OPERATOR(pg_catalog.>) 1 ELSE c.held END," \
	" updated_at = pg_catalog.now()"

/* name_locks.c: the lock of an event or a debounced key of a role */

extern void tables_lock_name(uint16 lockclass, Oid role, text *name, bool exclusive);
extern bool tables_lock_event(Oid role, text *event);
extern void tables_emit_event(Datum *values, const char *nulls);
extern bool tables_clear_event(Oid role, text *event);
extern void tables_names_bound_waits(void);
extern void tables_names_attempt_begins(void);
extern bool tables_name_refused(void);
extern uint64 tables_prune_name_locks(int limit);

/* home.c */
extern TimestampTz tables_settle_copy(RetriesSchemaVersion version,
									  int64 **cancelled_ids, int *ncancelled);
extern bool tables_cancel_copied_call(int64 id, TimestampTz made_at);
extern void tables_note_made_database(Oid dboid, Oid template, TimestampTz made_at);
extern void tables_forget_made_database(Oid dboid);
extern void tables_restored_here(void);
extern bool tables_not_a_copy(void);

/*
 * restore.c.  A COPY FROM into one of the extension's tables: which, and,
 * for a database owner's restore, run as the extension's owner.
 */
typedef struct RestoreCopy
{
	int			table;			/* its place in config_tables, -1 if none */
	bool		as_owner;		/* a database owner's restore */
	Oid			userid;			/* the role that runs it */
	int			sec_context;
	CommandId	cid;			/* its command, as its rows' cmin */
	bool		makes_own;		/* it makes the database its own (home.c) */
} RestoreCopy;

extern void restore_hold(void);
extern bool restore_ids_scattered(void);
extern void restore_xact_end(bool committed);
extern void restore_subxact_end(bool committed, SubTransactionId mySubid,
								SubTransactionId parentSubid);
extern void restore_before_prepare(void);
extern pid_t restore_holder(void);
extern void restore_refuse(void);
extern void restore_copy_begin(Node *parsetree, bool toplevel, RestoreCopy *copy);
extern PlannedStmt *restore_copy_statement(const RestoreCopy *copy, PlannedStmt *pstmt);
extern void restore_copy_enter(RestoreCopy *copy);
extern void restore_copy_done(const RestoreCopy *copy);
extern void restore_copy_leave(const RestoreCopy *copy);

#endif							/* RETRIES_TABLES_H */
