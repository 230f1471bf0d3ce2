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

extern void exprcache_new_context(bool within_transaction);

#endif							/* RETRIES_EXPRCACHE_H */
