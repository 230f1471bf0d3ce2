/*-------------------------------------------------------------------------
 *
 * sandbox.h
 *	  Running a call's code as its role, as if in a fresh login session of
 *	  that role, and leaving nothing of it behind (sandbox.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef RETRIES_SANDBOX_H
#define RETRIES_SANDBOX_H

/* What sandbox_enter() saved, for sandbox_leave() to restore */
typedef struct Sandbox
{
	Oid			role;			/* the call's role */
	Oid			saved_userid;
	int			saved_sec_context;
	int			guc_nestlevel;	/* the settings of the attempt start here */
	int			saved_xact_flags;	/* MyXactFlags' temp-namespace bit */
	bool		pin_path;		/* a hook: search_path pinned (set by the
								 * caller before sandbox_enter) */
} Sandbox;

#include "nodes/nodes.h"

extern void sandbox_init(void);
extern void sandbox_note_utility(Node *stmt);
extern void sandbox_begin_transaction(void);
extern void sandbox_enter(Sandbox *sb, Oid role, Oid fnoid);
extern void sandbox_leave(Sandbox *sb);
extern void sandbox_timeout_over(void);
extern void sandbox_reset_session(const Sandbox *sb);
extern void sandbox_abort(void);
extern void sandbox_note_error(const ErrorData *edata);
extern bool sandbox_transaction_changed(void);
extern bool sandbox_active(void);
extern void sandbox_convert_result(bool converting);
extern void sandbox_make_args(bool making);

#endif							/* RETRIES_SANDBOX_H */
