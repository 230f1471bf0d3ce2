/*-------------------------------------------------------------------------
 *
 * exprcache.h
 *	  PostgreSQL's planned expressions kept to one context of calls
 *	  (src/engine/exprcache.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef RETRIES_EXPRCACHE_H
#define RETRIES_EXPRCACHE_H

extern void exprcache_new_context(void);

#endif							/* RETRIES_EXPRCACHE_H */
