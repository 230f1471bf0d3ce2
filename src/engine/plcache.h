/*-------------------------------------------------------------------------
 *
 * plcache.h
 *	  PL/pgSQL's compiled functions do not cross from one context of a
 *	  worker's calls to another (src/engine/plcache.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef RETRIES_PLCACHE_H
#define RETRIES_PLCACHE_H

#include "fmgr.h"

extern void plcache_init(void);
extern void plcache_new_context(void);
extern bool plcache_is_validator(Oid fnoid);
extern Datum plcache_validate(PG_FUNCTION_ARGS);

#endif							/* RETRIES_PLCACHE_H */
