/*-------------------------------------------------------------------------
 *
 * restore.c
 *	  Holding the extension while a dump is restored into it.
 *
 * Restores.  A restore that is not one transaction (pg_restore without
 * --single-transaction, psql -f of a plain dump) commits the restored
 * CREATE EXTENSION before it loads the tables, with the id sequences back
 * at 1.  A policy, call or schedule that another session made meanwhile
 * would take an id that the dump's rows need: that table's data would
 * fail to load, and the restored rows that refer to those ids (a call's
 * policy_id) would name the other session's rows, so that a restored call
 * of one role could run another role's function.  So a CREATE EXTENSION
 * made by a restore (hooks.c tells it by the settings pg_dump's output
 * starts with: a superuser's CREATE EXTENSION [IF NOT EXISTS] under
 * check_function_bodies = off) holds the extension, noted in shared
 * memory, until its session ends (or the transaction of that CREATE
 * EXTENSION rolls back, undoing it); meanwhile the extension's
 * functions refuse every session (55000), the restoring one too (it runs
 * other roles' code: CHECK constraints, triggers), and the workers run
 * nothing in the database.  A restore in several sessions (pg_restore
 * --section, one run per section) outlives that hold; so the same CREATE
 * EXTENSION also moves the id sequences far above every id in use, to a
 * point drawn at random: an id taken in between is none of the dump's,
 * whose own setval() then puts each sequence back (scatter_ids).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "utils/builtins.h"

#include "base/base.h"
#include "shmem/shmem.h"
#include "tables/tables.h"

/* This session holds the extension for a restore */
static bool hold_noted = false;

/* ... and took the hold in the current transaction, in this subtransaction */
static bool hold_new_in_xact = false;
static SubTransactionId hold_subxact = InvalidSubTransactionId;

/*
 * drop_hold -- the hold this session took is undone with the CREATE
 * EXTENSION that took it
 */
static void
drop_hold(void)
{
	shmem_forget_restores();
	hold_noted = false;
	hold_new_in_xact = false;
	hold_subxact = InvalidSubTransactionId;
}

/*
 * restore_subxact_end -- a subtransaction ends: a hold it took goes
 * if it rolled back (ROLLBACK TO a savepoint), else passes to its parent
 */
void
restore_subxact_end(bool committed, SubTransactionId mySubid,
					SubTransactionId parentSubid)
{
	if (!hold_new_in_xact || hold_subxact != mySubid)
		return;
	if (committed)
	{
		hold_subxact = parentSubid;
		return;
	}
	drop_hold();
}

/*
 * restore_before_prepare -- refuse PREPARE TRANSACTION of a
 * transaction that took the hold: the hold is this session's, and the
 * prepared transaction would outlive it, or be rolled back after it
 */
void
restore_before_prepare(void)
{
	if (hold_new_in_xact)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot prepare a transaction that restores extension \"retries\""),
				 errhint("Restore the extension in a transaction that commits.")));
}

/*
 * restore_xact_end -- the current transaction ends: a hold that it
 * took goes if it aborted (the CREATE EXTENSION that took it is undone)
 */
void
restore_xact_end(bool committed)
{
	if (hold_new_in_xact && !committed)
		drop_hold();
	hold_new_in_xact = false;
	hold_subxact = InvalidSubTransactionId;
}

/*
 * forget_restores -- before_shmem_exit callback: this session ends, and
 * with it any restore it made
 */
static void
forget_restores(int code, Datum arg)
{
	shmem_forget_restores();
}

/*
 * scatter_ids -- move each id sequence of the extension's tables to a point
 * drawn at random far above the ids in use (see "Restores" at the top)
 *
 * A restore sets each sequence back to its value in the dump when it loads
 * the data.  Until then, an id taken by another session is one that no
 * dumped row has: the dump's rows load, and none of them can come to name
 * that session's rows.  The point is drawn, not fixed, so that the ids
 * taken during one restore are not those taken during the restore of its
 * dump.  A sequence already past it is left alone; a rollback of the
 * CREATE EXTENSION puts them back (ALTER SEQUENCE is transactional).
 */
static void
scatter_ids(void)
{
	Oid			argtypes[1] = {OIDOID};
	Datum		values[1];
	Oid			extoid = get_extension_oid("retries", true);
	SPITupleTable *rows;
	uint64		n;

	if (!OidIsValid(extoid))
		return;
	values[0] = ObjectIdGetDatum(extoid);
	SPI_connect();
	/* the identity sequences of the extension's tables */
	if (SPI_execute_with_args("SELECT n.nspname, c.relname, q.seqmax,"
							  " pg_catalog.pg_sequence_last_value(q.seqrelid::pg_catalog.regclass)"
							  " FROM pg_catalog.pg_depend e"
							  " JOIN pg_catalog.pg_depend i"
							  "  ON i.refobjid OPERATOR(pg_catalog.=) e.objid"
							  "  AND i.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass"
							  "  AND i.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass"
							  "  AND i.deptype OPERATOR(pg_catalog.=) 'i'"
							  " JOIN pg_catalog.pg_sequence q ON q.seqrelid OPERATOR(pg_catalog.=) i.objid"
							  " JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) q.seqrelid"
							  " JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace"
							  " WHERE e.refobjid OPERATOR(pg_catalog.=) $1"
							  " AND e.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_extension'::pg_catalog.regclass"
							  " AND e.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass"
							  " AND e.deptype OPERATOR(pg_catalog.=) 'e'",
							  1, argtypes, values, NULL, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "retries: could not read the extension's sequences");
	rows = SPI_tuptable;
	n = SPI_processed;
	for (uint64 row = 0; row < n; row++)
	{
		HeapTuple	tup = rows->vals[row];
		TupleDesc	desc = rows->tupdesc;
		bool		isnull;
		bool		unused;
		int64		max = DatumGetInt64(SPI_getbinval(tup, desc, 3, &isnull));
		Datum		last = SPI_getbinval(tup, desc, 4, &unused);
		int64		low = Min(max / 4, INT64CONST(1) << 44);
		uint64		draw;
		int64		point;

		if (!pg_strong_random(&draw, sizeof(draw)))
			elog(ERROR, "retries: could not draw a random point for a sequence");
		point = low + (int64) (draw % (uint64) low);
		if (!unused && DatumGetInt64(last) >= point)
			continue;
		/* ALTER SEQUENCE, not setval(): a rollback undoes it */
		if (SPI_execute(psprintf("ALTER SEQUENCE %s RESTART WITH " INT64_FORMAT,
								 quote_qualified_identifier(SPI_getvalue(tup, desc, 1),
															SPI_getvalue(tup, desc, 2)),
								 point),
						false, 0) != SPI_OK_UTILITY)
			elog(ERROR, "retries: could not move a sequence of the extension");
	}
	SPI_finish();
}

/*
 * restore_ids_scattered -- are the ids of calls where scatter_ids() put
 * them, above 2^44: has a restore made the extension, and not yet loaded
 * the dump's data (whose setval() puts the sequence back)?  Only if a
 * database makes 2^44 calls would it be so otherwise.  On Citus a node's
 * ids run in a range of 2^48 of their own (retries.citus_id_range()):
 * what counts is the place in the range, the low 48 bits.  The sequence's
 * own last_value: pg_sequence_last_value() is NULL until a RESTART is
 * used.  Inside SPI, as the extension's owner.
 */
bool
restore_ids_scattered(void)
{
	static SPIPlanPtr plan = NULL;
	bool		isnull;
	Datum		d;

	plans_prepare_kept(&plan,
					   "SELECT (last_value OPERATOR(pg_catalog.&)"
					   "  ((INT8 '1' OPERATOR(pg_catalog.<<) 48) OPERATOR(pg_catalog.-) 1))"
					   " OPERATOR(pg_catalog.>=) (INT8 '1' OPERATOR(pg_catalog.<<) 44)"
					   " FROM retries.call_data_id_seq",
					   0, NULL);
	if (SPI_execute_plan(plan, NULL, NULL, true, 1) != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "retries: could not read the sequence of call ids");
	d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	return !isnull && DatumGetBool(d);
}

/*
 * restore_hold -- this session is restoring the extension:
 * hold it until the session ends (see "Restores" at the top)
 *
 * Noted in shared memory, not as a lock: PostgreSQL releases a session
 * lock when a transaction of the session aborts, and a restore goes on
 * after errors.  Only a superuser's CREATE EXTENSION may call it
 * (hooks.c): a role that could hold the extension otherwise could shut
 * every other role out.  Without the library preloaded there is no
 * shared memory, and nothing runs the calls either.
 */
void
restore_hold(void)
{
	static bool registered = false;

	scatter_ids();
	if (retries_shared == NULL)
		return;
	if (!registered)
		before_shmem_exit(forget_restores, (Datum) 0);
	registered = true;
	if (!hold_noted)
	{
		hold_new_in_xact = true;
		hold_subxact = GetCurrentSubTransactionId();
	}
	hold_noted = true;
	if (!shmem_note_restore(MyDatabaseId))
		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("too many databases are being restored at once"),
				 errdetail("retries notes at most %d restores at a time.", RETRIES_MAX_DATABASES),
				 errhint("Restore the others first.")));
}

/*
 * restore_holder -- the PID of a session restoring this database's
 * extension, 0 if none; this one's too: a restore runs code of other roles
 * (a CHECK constraint, a trigger, a SECURITY DEFINER function they call)
 * in its own session
 */
pid_t
restore_holder(void)
{
	return retries_shared != NULL ? shmem_restoring(MyDatabaseId) : 0;
}

/*
 * restore_refuse -- 55000 if a session restores the extension
 */
void
restore_refuse(void)
{
	pid_t		pid = restore_holder();

	if (pid != 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("extension \"retries\" is being restored in this database"),
				 errdetail("The session of PID %d, restoring a dump, made it, and holds it until that session ends; its functions are refused meanwhile, in that session too.", (int) pid),
				 errhint("Try again once the restore is over.")));
}
