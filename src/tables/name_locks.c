/*-------------------------------------------------------------------------
 *
 * name_locks.c
 *	  The lock of a name of a role: an event (emitting it, making a call
 *	  that waits for it, clearing it) or a debounced key.
 *
 * An emit and a call made waiting for the same event must not miss each
 * other, and two debounces of one key must not both make a call (events.c,
 * call.c): each takes the name's lock, held until its transaction ends,
 * then reads with a snapshot taken after it.  Names that differ must never
 * wait for each other, in whatever order transactions take them, or two
 * transactions that take two names each in opposite orders deadlock.
 *
 * From version 1.7 the lock is a row lock, kept in the row itself: a
 * transaction may hold any number without taking room in the server's lock
 * table, which another role's transactions share.  An event's lock is its
 * row of event_data, the one that keeps its latest emit: an emit records
 * itself and takes the lock in one statement (INSERT ... ON CONFLICT DO
 * UPDATE), the way most emits pay for (until the row of a name_lock table
 * besides was dropped, a drain of calls that each emit an event of their
 * own ran 1.2 times as slow).  A call made to wait for an event locks it
 * FOR SHARE, so that waiters of one event do not wait for each other,
 * making it first if it is missing, empty (payload and emitted_at NULL);
 * the workers delete empty rows that nobody holds (FOR UPDATE SKIP
 * LOCKED), so a waiter that finds its row gone between its two statements
 * makes it again.  A key's lock is its row of name_lock (role, class 'k',
 * md5 of the key), which a debounce locks as an update would (ON CONFLICT
 * DO UPDATE ... WHERE false, which makes the row if it is missing and
 * locks it in one statement), never updated; the workers delete rows made
 * over an hour ago that nobody holds.  Only the first use of a name may
 * wait for another first use of the same name (the unique index).
 *
 * A name's row is a lock, not data that the transaction reads: the
 * statements that take it follow the row to its latest version, as READ
 * COMMITTED does, whatever the transaction's isolation level, so that two
 * REPEATABLE READ or SERIALIZABLE transactions that use one name (an
 * emit updates its row) wait for each other instead of failing with 40001;
 * what they read next, they read with a snapshot taken after the lock.
 *
 * A worker runs many calls in one transaction, its batch, which holds
 * the names its calls took until it ends: two batches that each took a
 * name in one call and wanted the other's in a later call deadlocked,
 * though each call took one name, and so did a batch with a client that
 * took its names in order (the ninth hostile review: 63 of 3,000 calls
 * failed with 40P01).  So an attempt whose batch holds names from earlier
 * calls waits for a name at most BOUNDED_NAME_WAIT: if it is held, the
 * attempt fails with 55P03, which the worker takes to mean "not now": the
 * call is not charged, stays due, and the batch ends (execute.c,
 * worker.c), so that the next batch runs it holding no other name.  A
 * batch thus never waits for a name while it holds one that another
 * call took.
 *
 * Databases whose extension is older than 1.7 keep 1.6's lock, one of 16
 * advisory locks of the role and class (shmem_private_lock), until they
 * are updated.
 *
 * IDENTIFICATION
 *	  src/tables/name_locks.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/transam.h"
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "storage/lmgr.h"
#include "utils/guc.h"
#include "utils/snapmgr.h"

#include "base/base.h"
#include "shmem/shmem.h"
#include "tables/tables.h"

/* How often a waiter looks again for a row pruned under it, at most */
#define NAME_LOCK_TRIES 100

/* The top transaction that last took a name's lock */
static TransactionId names_locked_by = InvalidTransactionId;

/*
 * In a worker (tables_names_bound_waits): whether the batch held names
 * before the current attempt began, and whether a wait for a name was cut
 * short in it (see tables_lock_name)
 */
static bool bound_waits = false;
static bool held_before_attempt = false;
static bool name_refused = false;

/* How long a worker's attempt may wait for a name while its batch holds others */
#define BOUNDED_NAME_WAIT	"1ms"

/*
 * lock_row -- run 'plan' (of the parameters 'values', 'nulls' as in
 * SPI_execute_plan), which locks or makes a name's row, with a snapshot
 * taken now, as READ COMMITTED (see the top); how many rows it locked or
 * made
 */
static uint64
lock_row(SPIPlanPtr plan, Datum *values, const char *nulls, int expected)
{
	int			nestlevel = -1;

	names_locked_by = GetTopTransactionId();
	if (bound_waits && held_before_attempt)
	{
		nestlevel = NewGUCNestLevel();
		(void) set_config_option("lock_timeout", BOUNDED_NAME_WAIT, PGC_USERSET,
								 PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
		name_refused = true;	/* unless the statement returns */
	}
	if (plans_execute_read_committed(plan, values, nulls) != expected)
		elog(ERROR, "retries: could not lock a name");
	if (nestlevel >= 0)
	{
		name_refused = false;
		AtEOXact_GUC(true, nestlevel);
	}
	return SPI_processed;
}

/*
 * tables_lock_name -- take, until the current transaction ends, the lock
 * of the name 'name' (a text) of class 'lockclass' (RETRIES_KEY_LOCK_CLASS
 * or, below 1.7, RETRIES_EVENT_LOCK_CLASS) of role 'role': exclusive, or,
 * below 1.7, shared with the other holders that are not.  From 1.7 an
 * event's lock is tables_lock_event's.  Inside SPI, as the extension's
 * owner.
 */
void
tables_lock_name(uint16 lockclass, Oid role, text *name, bool exclusive)
{
	static SPIPlanPtr plan = NULL;
	Oid			argtypes[3] = {OIDOID, CHAROID, TEXTOID};
	Datum		values[3];

	if (schema_retries_version() < SCHEMA_1_7)
	{
		names_locked_by = GetTopTransactionId();
		shmem_private_lock(lockclass, role, VARDATA_ANY(name),
						   VARSIZE_ANY_EXHDR(name),
						   exclusive ? ExclusiveLock : ShareLock);
		return;
	}
	if (lockclass != RETRIES_KEY_LOCK_CLASS || !exclusive)
		elog(ERROR, "retries: a name's lock of class %u is not kept in name_lock", lockclass);
	values[0] = ObjectIdGetDatum(role);
	values[1] = CharGetDatum('k');
	values[2] = PointerGetDatum(name);
	plans_prepare_kept(&plan,
					   "INSERT INTO retries.name_lock AS l (role, class, name_hash)"
					   " VALUES ($1, $2, pg_catalog.md5($3)::pg_catalog.uuid)"
					   " ON CONFLICT (role, class, name_hash)"
					   " DO UPDATE SET made_at = l.made_at WHERE false",
					   3, argtypes);
	(void) lock_row(plan, values, NULL, SPI_OK_INSERT);
}

/* The row of event $2 of role $1 in event_data (1.7: one per event) */
#define EVENT_ROW \
	" role OPERATOR(pg_catalog.=) $1::pg_catalog.regrole" \
	" AND pg_catalog.md5(event) OPERATOR(pg_catalog.=) pg_catalog.md5($2)"

/*
 * tables_lock_event -- from 1.7: take, until the current transaction ends,
 * the share lock of event 'event' of role 'role', its row in event_data,
 * made empty if there is none; whether the event has been emitted (and not
 * pruned or cleared since).  Inside SPI, as the extension's owner.
 *
 * Two names of a role with one MD5 share a row; a role only meets that
 * with names it chose both of, and then its event waits for the other's
 * emits too.
 */
bool
tables_lock_event(Oid role, text *event)
{
	static SPIPlanPtr insert_plan = NULL;
	static SPIPlanPtr share_plan = NULL;
	Oid			argtypes[2] = {OIDOID, TEXTOID};
	Datum		values[2] = {ObjectIdGetDatum(role), PointerGetDatum(event)};
	bool		isnull;
	int			tries;

	plans_prepare_kept(&insert_plan,
					   "INSERT INTO retries.event_data (role, event)"
					   " VALUES ($1::pg_catalog.regrole, $2)"
					   " ON CONFLICT (role, pg_catalog.md5(event)) DO NOTHING",
					   2, argtypes);
	plans_prepare_kept(&share_plan,
					   "SELECT emitted_at IS NOT NULL AND event OPERATOR(pg_catalog.=) $2"
					   " FROM retries.event_data WHERE" EVENT_ROW " FOR SHARE",
					   2, argtypes);

	/*
	 * A row this transaction made is its own until it ends; one that was
	 * there is locked, unless the workers pruned it meanwhile
	 */
	for (tries = 0; tries < NAME_LOCK_TRIES; tries++)
	{
		if (lock_row(insert_plan, values, NULL, SPI_OK_INSERT) == 1)
			return false;
		if (lock_row(share_plan, values, NULL, SPI_OK_SELECT) == 1)
			return DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0],
											  SPI_tuptable->tupdesc, 1, &isnull));
	}
	elog(ERROR, "retries: could not lock an event: its row was deleted %d times in a row",
		 NAME_LOCK_TRIES);
	return false;				/* keep the compiler quiet */
}

/*
 * tables_emit_event -- from 1.7: record an emit of event values[1] of role
 * values[0] with payload values[2] ('nulls' as SPI's), taking the event's
 * lock exclusively, until the current transaction ends, in the same
 * statement.  Inside SPI, as the extension's owner.
 */
void
tables_emit_event(Datum *values, const char *nulls)
{
	static SPIPlanPtr plan = NULL;
	Oid			argtypes[3] = {OIDOID, TEXTOID, JSONBOID};

	plans_prepare_kept(&plan,
					   "INSERT INTO retries.event_data AS d (role, event, payload, emitted_at)"
					   " VALUES ($1::pg_catalog.regrole, $2, $3, pg_catalog.now())"
					   " ON CONFLICT (role, pg_catalog.md5(event)) DO UPDATE"
					   " SET event = excluded.event, payload = excluded.payload,"
					   " emitted_at = excluded.emitted_at",
					   3, argtypes);
	(void) lock_row(plan, values, nulls, SPI_OK_INSERT);
}

/*
 * tables_clear_event -- from 1.7: delete event 'event' of role 'role',
 * which takes its lock exclusively; whether it had been emitted.  Inside
 * SPI, as the extension's owner.
 */
bool
tables_clear_event(Oid role, text *event)
{
	static SPIPlanPtr plan = NULL;
	Oid			argtypes[2] = {OIDOID, TEXTOID};
	Datum		values[2] = {ObjectIdGetDatum(role), PointerGetDatum(event)};
	bool		isnull;

	plans_prepare_kept(&plan,
					   "DELETE FROM retries.event_data WHERE" EVENT_ROW
					   " AND event OPERATOR(pg_catalog.=) $2"
					   " RETURNING emitted_at IS NOT NULL",
					   2, argtypes);
	if (lock_row(plan, values, NULL, SPI_OK_DELETE_RETURNING) == 0)
		return false;
	return DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1,
									  &isnull));
}

/*
 * names_locked -- has the current transaction taken a name's lock (it holds
 * it until it ends)?
 */
static bool
names_locked(void)
{
	TransactionId xid = GetTopTransactionIdIfAny();

	return TransactionIdIsValid(xid) && TransactionIdEquals(xid, names_locked_by);
}

/*
 * tables_names_bound_waits -- this process is a worker, whose batches run
 * many calls in one transaction: see tables_lock_name
 */
void
tables_names_bound_waits(void)
{
	bound_waits = true;
}

/*
 * tables_names_attempt_begins -- a worker's attempt begins in its batch's
 * transaction
 */
void
tables_names_attempt_begins(void)
{
	held_before_attempt = names_locked();
	name_refused = false;
}

/*
 * tables_name_refused -- was a wait for a name cut short in the current
 * attempt?  The worker puts the call back, uncharged, and ends its batch.
 */
bool
tables_name_refused(void)
{
	return name_refused;
}

/*
 * tables_prune_name_locks -- delete up to 'limit' rows of name_lock made
 * over an hour ago, and as many empty rows of event_data (events that calls
 * were made to wait for, not emitted since), that no transaction holds;
 * how many of either, at most.  Runs inside the caller's transaction and
 * SPI connection.
 */
uint64
tables_prune_name_locks(int limit)
{
	static SPIPlanPtr plan = NULL;
	static SPIPlanPtr events_plan = NULL;
	Oid			argtypes[1] = {INT4OID};
	Datum		values[1] = {Int32GetDatum(limit)};
	uint64		deleted;

	plans_prepare_kept(&events_plan,
					   "DELETE FROM retries.event_data"
					   " WHERE ctid OPERATOR(pg_catalog.=) ANY (ARRAY("
					   "  SELECT ctid FROM retries.event_data WHERE emitted_at IS NULL"
					   "  LIMIT $1 FOR UPDATE SKIP LOCKED))",
					   1, argtypes);
	if (SPI_execute_plan(events_plan, values, NULL, false, 0) != SPI_OK_DELETE)
		elog(ERROR, "retries: could not prune the empty rows of event_data");
	deleted = SPI_processed;

	plans_prepare_kept(&plan,
					   "DELETE FROM retries.name_lock"
					   " WHERE ctid OPERATOR(pg_catalog.=) ANY (ARRAY("
					   "  SELECT ctid FROM retries.name_lock"
					   "  WHERE made_at OPERATOR(pg_catalog.<) (pg_catalog.now()"
					   "   OPERATOR(pg_catalog.-) '1 hour'::pg_catalog.interval)"
					   "  LIMIT $1 FOR UPDATE SKIP LOCKED))",
					   1, argtypes);
	if (SPI_execute_plan(plan, values, NULL, false, 0) != SPI_OK_DELETE)
		elog(ERROR, "retries: could not prune name_lock");
	return Max(deleted, SPI_processed);
}
