/*-------------------------------------------------------------------------
 *
 * name_locks.c
 *	  The lock of a name of a role: an event (emitting it, making a call
 *	  that waits for it) or a debounced key.
 *
 * An emit and a call made waiting for the same event must not miss each
 * other, and two debounces of one key must not both make a call (events.c,
 * call.c): each takes the name's lock, held until its transaction ends,
 * then reads with a snapshot taken after it.  Names that differ must never
 * wait for each other, in whatever order transactions take them, or two
 * transactions that take two names each in opposite orders deadlock.
 *
 * From version 1.7 the lock is a row lock on the name's row of name_lock
 * (role, class, md5 of the name): a waiter locks it FOR SHARE, so that
 * waiters of one event do not wait for each other; an emit or a debounce
 * locks it as an update would (ON CONFLICT DO UPDATE ... WHERE false, which
 * makes the row if it is missing and locks it in one statement).  A row
 * lock is kept in the row itself: a transaction may hold any number
 * without taking room in the server's lock table, which another role's
 * transactions share.  The row is made on the name's first use and never
 * updated; the workers delete rows made over an hour ago that nobody holds
 * (FOR UPDATE SKIP LOCKED), so a waiter that finds its row gone between
 * its two statements makes it again.  Only the first use of a name may
 * wait for another first use of the same name (the unique index), and
 * under REPEATABLE READ such a meeting fails one of them with 40001, as
 * any two inserts of one key would.
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
 * lock_row -- run 'plan' (of the parameters role, class, name) with a
 * snapshot taken now; how many rows it locked or made
 */
static uint64
lock_row(SPIPlanPtr plan, Datum *values, int expected)
{
	int			nestlevel = -1;

	if (bound_waits && held_before_attempt)
	{
		nestlevel = NewGUCNestLevel();
		(void) set_config_option("lock_timeout", BOUNDED_NAME_WAIT, PGC_USERSET,
								 PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
		name_refused = true;	/* unless the statement returns */
	}
	if (SPI_execute_snapshot(plan, values, NULL, GetLatestSnapshot(),
							 InvalidSnapshot, false, false, 0) != expected)
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
 * or RETRIES_EVENT_LOCK_CLASS) of role 'role': exclusive, or shared with
 * the other holders that are not.  Inside SPI, as the extension's owner.
 */
void
tables_lock_name(uint16 lockclass, Oid role, text *name, bool exclusive)
{
	static SPIPlanPtr update_plan = NULL;
	static SPIPlanPtr insert_plan = NULL;
	static SPIPlanPtr share_plan = NULL;
	Oid			argtypes[3] = {OIDOID, CHAROID, TEXTOID};
	Datum		values[3];
	int			tries;

	names_locked_by = GetTopTransactionId();
	if (schema_retries_version() < SCHEMA_1_7)
	{
		shmem_private_lock(lockclass, role, VARDATA_ANY(name),
						   VARSIZE_ANY_EXHDR(name),
						   exclusive ? ExclusiveLock : ShareLock);
		return;
	}
	values[0] = ObjectIdGetDatum(role);
	values[1] = CharGetDatum(lockclass == RETRIES_KEY_LOCK_CLASS ? 'k' : 'e');
	values[2] = PointerGetDatum(name);

	if (exclusive)
	{
		plans_prepare_kept(&update_plan,
						   "INSERT INTO retries.name_lock AS l (role, class, name_hash)"
						   " VALUES ($1, $2, pg_catalog.md5($3)::pg_catalog.uuid)"
						   " ON CONFLICT (role, class, name_hash)"
						   " DO UPDATE SET made_at = l.made_at WHERE false",
						   3, argtypes);
		(void) lock_row(update_plan, values, SPI_OK_INSERT);
		return;
	}
	plans_prepare_kept(&insert_plan,
					   "INSERT INTO retries.name_lock (role, class, name_hash)"
					   " VALUES ($1, $2, pg_catalog.md5($3)::pg_catalog.uuid)"
					   " ON CONFLICT (role, class, name_hash) DO NOTHING",
					   3, argtypes);
	plans_prepare_kept(&share_plan,
					   "SELECT FROM retries.name_lock"
					   " WHERE role OPERATOR(pg_catalog.=) $1"
					   " AND class OPERATOR(pg_catalog.=) $2"
					   " AND name_hash OPERATOR(pg_catalog.=) pg_catalog.md5($3)::pg_catalog.uuid"
					   " FOR SHARE",
					   3, argtypes);

	/*
	 * A row this transaction made is its own until it ends; one that was
	 * there is locked, unless the workers pruned it meanwhile
	 */
	for (tries = 0; tries < NAME_LOCK_TRIES; tries++)
		if (lock_row(insert_plan, values, SPI_OK_INSERT) == 1 ||
			lock_row(share_plan, values, SPI_OK_SELECT) == 1)
			return;
	elog(ERROR, "retries: could not lock a name: its row was deleted %d times in a row",
		 NAME_LOCK_TRIES);
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
 * over an hour ago that no transaction holds; how many.  Runs inside the
 * caller's transaction and SPI connection.
 */
uint64
tables_prune_name_locks(int limit)
{
	static SPIPlanPtr plan = NULL;
	Oid			argtypes[1] = {INT4OID};
	Datum		values[1] = {Int32GetDatum(limit)};

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
	return SPI_processed;
}
