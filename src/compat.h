/*-------------------------------------------------------------------------
 *
 * compat.h
 *	  Every difference between the PostgreSQL versions that retries builds
 *	  on, as small wrappers, so that the rest of the code reads as if there
 *	  were one version.
 *
 *-------------------------------------------------------------------------
 */
#ifndef RETRIES_COMPAT_H
#define RETRIES_COMPAT_H

#include "storage/proc.h"
#include "utils/guc.h"

/* This backend's local transaction id: in MyProc->vxid from 17 on */
#if PG_VERSION_NUM >= 170000
#define retries_local_xid()	(MyProc->vxid.lxid)
#else
#define retries_local_xid()	(MyProc->lxid)
#endif

/*
 * Strings from ParseLongOption(): malloc'ed up to 15, in the GUC memory
 * context from 16 on.
 */
#if PG_VERSION_NUM >= 160000
#define retries_free_guc_string(s)	guc_free(s)
#else
#define retries_free_guc_string(s)	free(s)
#endif

/* Ownership checks: one object_ownercheck() from 16 on */
#if PG_VERSION_NUM >= 160000
#include "catalog/pg_database.h"
#include "catalog/pg_extension.h"
#include "utils/acl.h"
#define retries_database_ownercheck(dboid, roleid) \
	object_ownercheck(DatabaseRelationId, (dboid), (roleid))
#define retries_extension_ownercheck(extoid, roleid) \
	object_ownercheck(ExtensionRelationId, (extoid), (roleid))
#else
#include "utils/acl.h"
#define retries_database_ownercheck(dboid, roleid) \
	pg_database_ownercheck((dboid), (roleid))
#define retries_extension_ownercheck(extoid, roleid) \
	pg_extension_ownercheck((extoid), (roleid))
#endif

#endif							/* RETRIES_COMPAT_H */
