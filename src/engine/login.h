/*-------------------------------------------------------------------------
 *
 * login.h
 *	  The settings a login session of a role starts with
 *	  (src/engine/login.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef RETRIES_LOGIN_H
#define RETRIES_LOGIN_H

extern void login_apply_settings(Oid role);
extern void login_note_server_settings(void);
extern void login_forget_own_settings(void);

extern void login_trust_search_path(Oid owner);

#endif							/* RETRIES_LOGIN_H */
