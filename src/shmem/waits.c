/*-------------------------------------------------------------------------
 *
 * waits.c
 *	  The backends that wait for calls, in shared memory: a cancel() that
 *	  waits for a running call (manage.c), and a retries.wait() that waits
 *	  for a call to finish (wait.c).
 *
 * Each backend has one entry (MaxBackends of them, after RetriesShared),
 * guarded by its own spinlock: the call it waits for and its latch.  The
 * worker or the committing backend looks through them and sets the
 * latches of those that wait for a call it ended.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/latch.h"
#include "storage/proc.h"

#include "base/compat.h"
#include "shmem/shmem.h"

/*
 * shmem_cancel_wait_begin -- announce that this backend's cancel() is
 * about to wait for the row of call_id (of the current database), so that
 * no worker starts another attempt of it meanwhile
 *
 * Without this, a worker that committed an attempt's retry could claim the
 * call again, before the waiting cancel() got to the row, whenever the
 * retry was due sooner than the cancel's backend ran (a short min_delay, a
 * busy machine): the call got a further attempt after all.
 */
void
shmem_cancel_wait_begin(int64 call_id)
{
	RetriesBackendWait *wait;

	if (retries_shared == NULL || retries_backend_index() < 0)
		return;
	wait = &shmem_backend_waits[retries_backend_index()];
	LWLockAcquire(retries_shared->lock, LW_EXCLUSIVE);
	if (wait->call_id == 0)
		pg_atomic_fetch_add_u32(&retries_shared->ncancel_waits, 1);
	wait->dboid = MyDatabaseId;
	wait->call_id = call_id;
	LWLockRelease(retries_shared->lock);
}

/*
 * shmem_cancel_wait_end -- this backend's cancel() no longer waits
 */
void
shmem_cancel_wait_end(void)
{
	RetriesBackendWait *wait;

	if (retries_shared == NULL || retries_backend_index() < 0)
		return;
	wait = &shmem_backend_waits[retries_backend_index()];
	LWLockAcquire(retries_shared->lock, LW_EXCLUSIVE);
	if (wait->call_id != 0)
		pg_atomic_fetch_sub_u32(&retries_shared->ncancel_waits, 1);
	wait->dboid = InvalidOid;
	wait->call_id = 0;
	LWLockRelease(retries_shared->lock);
}

/*
 * shmem_cancel_waiting -- is a cancel() waiting for this call (of the
 * current database)?  Workers ask before each attempt; the common answer,
 * no cancel() waiting anywhere, costs one read.
 */
bool
shmem_cancel_waiting(int64 call_id)
{
	bool		waiting = false;

	if (retries_shared == NULL)
		return false;
	pg_memory_barrier();
	if (pg_atomic_read_u32(&retries_shared->ncancel_waits) == 0)
		return false;
	LWLockAcquire(retries_shared->lock, LW_SHARED);
	for (int i = 0; i < MaxBackends && !waiting; i++)
		waiting = shmem_backend_waits[i].call_id == call_id &&
			shmem_backend_waits[i].dboid == MyDatabaseId;
	LWLockRelease(retries_shared->lock);
	return waiting;
}

/*
 * shmem_finish_wait_begin -- announce that this backend waits for the end
 * of call_id (of the current database), so that the commit that finishes
 * it sets this backend's latch (see shmem_wake_finish_waiters); false if
 * there is no shared memory to announce it in (the library is not
 * preloaded)
 *
 * Call it before looking at the call: a commit that comes after the look
 * then sees the entry.
 */
bool
shmem_finish_wait_begin(int64 call_id)
{
	RetriesBackendWait *wait;

	if (retries_shared == NULL || retries_backend_index() < 0)
		return false;
	wait = &shmem_backend_waits[retries_backend_index()];
	SpinLockAcquire(&wait->mutex);
	if (wait->finish_call_id == 0)
		pg_atomic_fetch_add_u32(&retries_shared->nfinish_waits, 1);
	wait->finish_dboid = MyDatabaseId;
	wait->finish_call_id = call_id;
	wait->latch = MyLatch;
	SpinLockRelease(&wait->mutex);
	pg_memory_barrier();
	return true;
}

/*
 * shmem_finish_wait_end -- this backend no longer waits for a call
 */
void
shmem_finish_wait_end(void)
{
	RetriesBackendWait *wait;

	if (retries_shared == NULL || retries_backend_index() < 0)
		return;
	wait = &shmem_backend_waits[retries_backend_index()];
	SpinLockAcquire(&wait->mutex);
	if (wait->finish_call_id != 0)
		pg_atomic_fetch_sub_u32(&retries_shared->nfinish_waits, 1);
	wait->finish_dboid = InvalidOid;
	wait->finish_call_id = 0;
	wait->latch = NULL;
	SpinLockRelease(&wait->mutex);
}

/*
 * shmem_wake_finish_waiters -- set the latch of every backend waiting for
 * the end of one of the n calls of 'ids' (of the current database), which
 * a transaction just committed as finished
 *
 * Called after the commit; when nobody waits, which is the common case,
 * it costs one read.
 */
void
shmem_wake_finish_waiters(const int64 *ids, int n)
{
	if (retries_shared == NULL || n == 0)
		return;
	pg_memory_barrier();
	if (pg_atomic_read_u32(&retries_shared->nfinish_waits) == 0)
		return;
	for (int i = 0; i < MaxBackends; i++)
	{
		RetriesBackendWait *wait = &shmem_backend_waits[i];
		int64		call_id;
		Latch	   *latch = NULL;

		SpinLockAcquire(&wait->mutex);
		call_id = wait->finish_dboid == MyDatabaseId ? wait->finish_call_id : 0;
		if (call_id != 0)
		{
			for (int j = 0; j < n && latch == NULL; j++)
				if (ids[j] == call_id)
					latch = wait->latch;
		}
		SpinLockRelease(&wait->mutex);
		if (latch != NULL)
			SetLatch(latch);
	}
}
