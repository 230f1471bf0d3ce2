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

#include "catalog/dependency.h"
#include "catalog/pg_database.h"
#include "catalog/pg_extension.h"
#include "catalog/pg_proc.h"
#include "executor/executor.h"
#include "storage/proc.h"
#include "utils/acl.h"
#include "utils/guc.h"
#include "utils/guc_tables.h"
#include "utils/rel.h"
#if PG_VERSION_NUM >= 170000
#include "storage/procnumber.h"
#else
#include "storage/backendid.h"
#endif

/*
 * Versions: 15, 16, 17 and 18.  16 is built against no header here (no
 * Debian suite carries it): its branches follow the documented API changes
 * of 16 (the object_*check() functions, guc_free(), the onlySummarizing
 * argument of ExecInsertIndexTuples()).
 */
#if PG_VERSION_NUM < 150000 || PG_VERSION_NUM >= 190000
#error "retries builds on PostgreSQL 15, 16, 17 and 18"
#endif

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

/*
 * Every setting's variable and how many there are (*n): get_guc_variables()
 * counts them itself from 16 on, and returns a copy of the list
 */
#if PG_VERSION_NUM >= 160000
#define retries_guc_variables(n)	get_guc_variables(n)
#else
#define retries_guc_variables(n)	(*(n) = GetNumConfigOptions(), get_guc_variables())
#endif

/* Privilege and ownership checks: object_aclcheck/ownercheck() from 16 on */
#if PG_VERSION_NUM >= 160000
#define retries_proc_aclcheck(fnoid, roleid, mode) \
	object_aclcheck(ProcedureRelationId, (fnoid), (roleid), (mode))
#define retries_database_aclcheck(dboid, roleid, mode) \
	object_aclcheck(DatabaseRelationId, (dboid), (roleid), (mode))
#define retries_namespace_aclcheck(nspoid, roleid, mode) \
	object_aclcheck(NamespaceRelationId, (nspoid), (roleid), (mode))
#define retries_tablespace_aclcheck(spcoid, roleid, mode) \
	object_aclcheck(TableSpaceRelationId, (spcoid), (roleid), (mode))
#define retries_proc_ownercheck(fnoid, roleid) \
	object_ownercheck(ProcedureRelationId, (fnoid), (roleid))
#define retries_database_ownercheck(dboid, roleid) \
	object_ownercheck(DatabaseRelationId, (dboid), (roleid))
#define retries_extension_ownercheck(extoid, roleid) \
	object_ownercheck(ExtensionRelationId, (extoid), (roleid))
#define retries_class_ownercheck(relid, roleid) \
	object_ownercheck(RelationRelationId, (relid), (roleid))
#else
#define retries_proc_aclcheck(fnoid, roleid, mode) \
	pg_proc_aclcheck((fnoid), (roleid), (mode))
#define retries_database_aclcheck(dboid, roleid, mode) \
	pg_database_aclcheck((dboid), (roleid), (mode))
#define retries_namespace_aclcheck(nspoid, roleid, mode) \
	pg_namespace_aclcheck((nspoid), (roleid), (mode))
#define retries_tablespace_aclcheck(spcoid, roleid, mode) \
	pg_tablespace_aclcheck((spcoid), (roleid), (mode))
#define retries_proc_ownercheck(fnoid, roleid) \
	pg_proc_ownercheck((fnoid), (roleid))
#define retries_database_ownercheck(dboid, roleid) \
	pg_database_ownercheck((dboid), (roleid))
#define retries_extension_ownercheck(extoid, roleid) \
	pg_extension_ownercheck((extoid), (roleid))
#define retries_class_ownercheck(relid, roleid) \
	pg_class_ownercheck((relid), (roleid))
#endif

/* The sequence of an identity column: looked up by Relation from 17 on */
#if PG_VERSION_NUM >= 170000
#define retries_identity_sequence(rel, attnum) \
	getIdentitySequence((rel), (attnum), false)
#else
#define retries_identity_sequence(rel, attnum) \
	getIdentitySequence(RelationGetRelid(rel), (attnum), false)
#endif

/*
 * Index entries for a tuple just inserted (not an update, no arbiter
 * indexes): 16 added the onlySummarizing argument.
 */
#if PG_VERSION_NUM >= 160000
#define retries_insert_index_tuples(rri, slot, estate) \
	ExecInsertIndexTuples((rri), (slot), (estate), false, false, NULL, NIL, false)
#else
#define retries_insert_index_tuples(rri, slot, estate) \
	ExecInsertIndexTuples((rri), (slot), (estate), false, false, NULL, NIL)
#endif

/* Run a plan for up to count rows: 18 dropped the execute_once argument */
#if PG_VERSION_NUM >= 180000
#define retries_executor_run(qd, count) \
	ExecutorRun((qd), ForwardScanDirection, (count))
#else
#define retries_executor_run(qd, count) \
	ExecutorRun((qd), ForwardScanDirection, (count), false)
#endif

/* Run a portal to its end at top level: 18 dropped the run_once argument */
#if PG_VERSION_NUM >= 180000
#define retries_portal_run(portal, dest, qc) \
	PortalRun((portal), FETCH_ALL, true, (dest), (dest), (qc))
#else
#define retries_portal_run(portal, dest, qc) \
	PortalRun((portal), FETCH_ALL, true, true, (dest), (dest), (qc))
#endif

/*
 * This backend's index among the MaxBackends regular backends, or -1 for a
 * process without one: MyProcNumber (from 0) from 17 on, MyBackendId (from
 * 1) before.
 */
#if PG_VERSION_NUM >= 170000
#define retries_backend_index() \
	(MyProcNumber == INVALID_PROC_NUMBER || MyProcNumber >= MaxBackends ? \
	 -1 : (int) MyProcNumber)
#else
#define retries_backend_index() \
	(MyBackendId == InvalidBackendId || MyBackendId > MaxBackends ? \
	 -1 : (int) MyBackendId - 1)
#endif

/*
 * A setting's record, to give a built-in one a check hook: find_option()
 * is exported from 16 on; before, the table of settings is searched
 */
#if PG_VERSION_NUM >= 160000
#define retries_find_setting(name)	find_option((name), false, true, ERROR)
#else
static inline struct config_generic *
retries_find_setting(const char *name)
{
	struct config_generic **vars = get_guc_variables();
	int			n = GetNumConfigOptions();

	for (int i = 0; i < n; i++)
		if (pg_strcasecmp(vars[i]->name, name) == 0)
			return vars[i];
	return NULL;
}
#endif

/* LockHeldByMe() gained 'orstronger' in 17 */
#if PG_VERSION_NUM >= 170000
#define retries_lock_held_by_me(tag, mode) LockHeldByMe((tag), (mode), false)
#else
#define retries_lock_held_by_me(tag, mode) LockHeldByMe((tag), (mode))
#endif

#endif							/* RETRIES_COMPAT_H */
