/*-------------------------------------------------------------------------
 *
 * proctext.h
 *	  The text a runner runs for a procedure's or command's call
 *	  (src/engine/proctext.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef RETRIES_PROCTEXT_H
#define RETRIES_PROCTEXT_H

extern char *proctext_build(Oid fnoid, const char *args_text);
extern void proctext_check_domains(Oid fnoid);

#endif							/* RETRIES_PROCTEXT_H */
