/*-------------------------------------------------------------------------
 *
 * engine.h
 *	  The engine's entry points for module initialization and the hooks:
 *	  the launcher (src/engine/launcher.c), which starts the per-database
 *	  workers (worker.c), and the reserved workers (reserve.c); claim.h,
 *	  execute.h and sandbox.h are its parts.
 *
 *-------------------------------------------------------------------------
 */
#ifndef RETRIES_ENGINE_H
#define RETRIES_ENGINE_H

extern void launcher_register(void);
extern void reserve_register(void);

#endif							/* RETRIES_ENGINE_H */
