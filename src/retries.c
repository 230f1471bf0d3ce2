/*-------------------------------------------------------------------------
 *
 * retries.c
 *	  Module initialization: the retries.* settings (base/settings.c), and,
 *	  when the library is preloaded, shared memory, the hooks and the
 *	  launcher (without preloading, calls can be scheduled but never run,
 *	  and CREATE EXTENSION says so).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/datetime.h"
#include "utils/guc.h"
#include "utils/memutils.h"

#include "base/base.h"
#include "engine/engine.h"
#include "hooks.h"
#include "shmem/shmem.h"

PG_MODULE_MAGIC;

void		_PG_init(void);

static shmem_request_hook_type prev_shmem_request_hook = NULL;

/*
 * shmem_request -- ask for shared memory (PostgreSQL 15's shmem_request_hook)
 */
static void
shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	shmem_request_space();
}

/*
 * _PG_init -- define the retries.* settings; when preloaded, also set up
 * shared memory, the hooks and the launcher
 *
 * A library loaded on demand (by CREATE EXTENSION or a call of one of its
 * functions) serves the SQL API alone: without preloading there are no
 * workers.
 */
void
_PG_init(void)
{
	retries_preloaded = process_shared_preload_libraries_in_progress;

	settings_define();

	if (!retries_preloaded)
		return;
	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = shmem_request;
	shmem_install();
	hooks_install();

	/*
	 * No calls run while pg_upgrade has a server up: it is there to read or
	 * write the schema, and a call's effects would be lost or made twice.
	 */
	if (!IsBinaryUpgrade)
	{
		launcher_register();
		reserve_register();
	}
}
