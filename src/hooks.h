/*-------------------------------------------------------------------------
 *
 * hooks.h
 *	  PostgreSQL's hooks that the library installs when preloaded
 *	  (src/hooks.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef RETRIES_HOOKS_H
#define RETRIES_HOOKS_H

extern void hooks_install(void);

#endif							/* RETRIES_HOOKS_H */
