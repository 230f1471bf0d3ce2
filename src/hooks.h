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

extern void retries_install_hooks(void);

#endif							/* RETRIES_HOOKS_H */
