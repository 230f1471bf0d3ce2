/*-------------------------------------------------------------------------
 *
 * wslot.c
 *	  The worker's own place: its slot in shared memory (what it is doing,
 *	  for retries.workers and the launcher), its memory, and its
 *	  transactions.
 *
 * The worker loop (worker.c) and the parts it hands work to reach their
 * slot and their transactions through here only, so that these are the
 * bottom of the engine's worker files: none of them is called from here.
 *
 * A worker's slot is RetriesWorker worker_slot (shmem.h), given by the
 * launcher and made its own by wslot_take(); wslot_release() frees it
 * however the process exits.  Its state changes (wslot_set_state) are under
 * the slot's own spinlock, so attempts of different workers never wait for
 * each other; they also keep its busy time, and raise or lower its
 * database's count of wanted workers when it is busy or done (workers on
 * demand: note_all_busy, note_batch_done).
 *
 * Memory: worker_cxt lives as long as the process (what it must remember
 * across loops); worker_loop_cxt is reset at the top of every loop of
 * retries_worker_main(), and is where the worker is between its
 * transactions, so that whatever a loop allocates outside a transaction
 * goes with it.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_extension.h"
#include "commands/extension.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "storage/proc.h"
#include "utils/elog.h"
#include "utils/memutils.h"

#include "base/base.h"
#include "engine/sandbox.h"
#include "engine/wslot.h"
#include "shmem/shmem.h"

RetriesWorker *worker_slot = NULL;
int			worker_slot_index = -1;
MemoryContext worker_cxt = NULL;
MemoryContext worker_loop_cxt = NULL;

/*
 * wslot_start_transaction -- start a transaction of the worker
 *
 * A background worker gets no statement start time from a client, so it
 * sets one: otherwise now() (the transaction's start) would stay the
 * worker's start time forever, for pruning and for the functions it calls.
 * The transaction is read-write whatever default_transaction_read_only
 * says (see sandbox_begin_transaction).
 */
void
wslot_start_transaction(void)
{
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	sandbox_begin_transaction();
}

/*
 * wslot_commit_transaction -- commit a transaction of the worker, and be back in
 * the loop's memory (a commit leaves TopMemoryContext current)
 */
void
wslot_commit_transaction(void)
{
	CommitTransactionCommand();
	MemoryContextSwitchTo(worker_loop_cxt);
}

/*
 * wslot_lock_extension -- the OID of the extension as installed here now, locked
 * until the end of the transaction so that DROP EXTENSION waits for it;
 * InvalidOid if it is not installed.  Called inside a transaction.
 */
Oid
wslot_lock_extension(void)
{
	for (;;)
	{
		Oid			extoid = get_extension_oid("retries", true);

		if (!OidIsValid(extoid))
			return InvalidOid;
		/* takes in the invalidations of a DROP that committed meanwhile */
		LockDatabaseObject(ExtensionRelationId, extoid, 0, AccessShareLock);
		if (get_extension_oid("retries", true) == extoid)
			return OidIsValid(get_namespace_oid("retries", true)) ?
				extoid : InvalidOid;
		/* dropped (and maybe created again) while this waited */
		UnlockDatabaseObject(ExtensionRelationId, extoid, 0, AccessShareLock);
	}
}



/*
 * wslot_is_extra -- is this worker an extra one (worker.c, "Extra workers")?
 */
bool
wslot_is_extra(void)
{
	return shmem_slot_is_extra(worker_slot);
}

/*
 * What the database's wanted was before this worker's batch raised it
 * (note_all_busy), -1 if it did not
 */
static int	raised_from = -1;

/*
 * note_batch_done -- this worker's batch has ended: if it raised the
 * database's count of wanted workers and no other worker has come since,
 * lower it again, so that a short batch (a schedule's firing in each of
 * many databases) does not start a second worker that would find nothing
 * to do; a long one (a call that runs for minutes) has it by now, or as
 * soon as the pool has room
 */
static void
note_batch_done(void)
{
	if (raised_from < 0)
		return;
	shmem_workers_batch_done(MyDatabaseId, raised_from, clock_system_now());
	raised_from = -1;
}

/*
 * note_all_busy -- this worker has begun a batch: if the database's other
 * workers are all busy too, wake the launcher, which then looks again when
 * they will count as held, to start an extra worker (see "Extra workers")
 */
static void
note_all_busy(void)
{
	raised_from = shmem_workers_all_busy(MyDatabaseId, clock_system_now());
}


/*
 * wslot_set_state -- publish what this worker is doing
 *
 * It also keeps the worker's busy time (shmem_slot_set_state), and the
 * database's count of wanted workers as its batch begins and ends.  Only
 * this slot's spinlock is taken unless the count changes: attempts of
 * different workers never wait for each other.
 */
void
wslot_set_state(RetriesWorkerState state, int64 call_id, Oid role, Oid holder)
{
	bool		ended;
	bool		began = shmem_slot_set_state(worker_slot, state, call_id, role,
											 holder, &ended);

	if (began && !wslot_is_extra())
		note_all_busy();
	else if (ended)
		note_batch_done();
}

/*
 * wslot_rest -- this worker sleeps: the batches it ran back to back are
 * over (the launcher starts a second worker only for a stretch that
 * lasts: launcher.c, manage_database)
 */
void
wslot_rest(void)
{
	shmem_slot_rest(worker_slot);
}

/*
 * wslot_count_call -- add to the counters shown in retries.workers
 */
void
wslot_count_call(bool succeeded)
{
	shmem_slot_count_call(worker_slot, succeeded);
}

/*
 * wslot_take -- make the slot the launcher assigned this worker its own;
 * false if the launcher has given up on it meanwhile (and may have
 * assigned the slot to another worker)
 *
 * From then on the slot is freed by wslot_release() however the worker
 * exits, also if it cannot even connect to its database.
 */
bool
wslot_take(uint32 generation)
{
	return shmem_slot_take(worker_slot, generation, clock_system_now());
}

/*
 * wslot_release -- free this worker's slot (before_shmem_exit callback,
 * registered first, so it runs last)
 */
void
wslot_release(int code, Datum arg)
{
	bool		lost = shmem_slot_release(worker_slot);

	/*
	 * A runner place it marked lost (recovery_note_exit) is free now: the
	 * database's workers charge its attempt (handoff_recover_places)
	 */
	if (lost)
		shmem_wake_workers(MyDatabaseId, WAKE_CALLS, InvalidOid);
}

/*
 * wslot_recover_from_error -- in a PG_CATCH block: report the error (and copy it
 * into *edata, in oldcxt, unless edata is NULL), roll back the transaction,
 * undo what the sandbox changed and go back to oldcxt, the context that was
 * current before the PG_TRY
 */
void
wslot_recover_from_error(MemoryContext oldcxt, ErrorData **edata)
{
	HOLD_INTERRUPTS();
	MemoryContextSwitchTo(oldcxt);
	if (edata != NULL)
		*edata = CopyErrorData();
	EmitErrorReport();
	FlushErrorState();
	AbortCurrentTransaction();
	sandbox_abort();
	if (worker_slot != NULL)
		shmem_gate_leave(worker_slot);	/* an attempt it entered is over */
	MemoryContextSwitchTo(oldcxt);
	RESUME_INTERRUPTS();
}
