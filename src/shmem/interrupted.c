/*-------------------------------------------------------------------------
 *
 * interrupted.c
 *	  The ring of attempts that workers left unfinished when they exited.
 *
 * A worker that exits with an attempt in flight notes it here (engine's
 * ledger.c, recovery_note_exit), and the first worker to claim the call
 * takes the note and charges the attempt.  The ring has
 * RETRIES_MAX_INTERRUPTED entries: when it is full, the oldest is
 * overwritten; an entry that no one took by its keep_until goes at the next
 * look.  Under the shared lock, exclusively, as every change of it.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "base/base.h"
#include "shmem/shmem.h"

/*
 * shmem_interrupted_note -- put 'entry' (dboid valid) into the ring
 */
void
shmem_interrupted_note(const RetriesInterrupted *entry)
{
	RetriesInterrupted *e;

	Assert(OidIsValid(entry->dboid));
	LWLockAcquire(retries_shared->lock, LW_EXCLUSIVE);
	e = &retries_shared->interrupted[retries_shared->next_interrupted];
	if (!OidIsValid(e->dboid))
		retries_shared->ninterrupted++;
	*e = *entry;
	retries_shared->next_interrupted =
		(retries_shared->next_interrupted + 1) % RETRIES_MAX_INTERRUPTED;
	LWLockRelease(retries_shared->lock);
}

/*
 * shmem_interrupted_take -- take the entries of attempt 'attempt' of call
 * 'call_id' of extension 'extension' in database 'dboid' out of the ring,
 * and whether there was one; into *out what they say together: the hook
 * and start of the first, stopped if any says so (one attempt may have two
 * entries, see ledger.c).  Entries past their keep_until ('now' is later)
 * go too.
 */
bool
shmem_interrupted_take(Oid dboid, Oid extension, int64 call_id,
					   int32 attempt, TimestampTz now,
					   RetriesInterrupted *out)
{
	bool		found = false;

	memset(out, 0, sizeof(*out));
	if (retries_shared->ninterrupted == 0)
		return false;			/* unlocked read: entries exist before the
								 * claim */

	LWLockAcquire(retries_shared->lock, LW_EXCLUSIVE);
	for (int i = 0; i < RETRIES_MAX_INTERRUPTED; i++)
	{
		RetriesInterrupted *e = &retries_shared->interrupted[i];
		bool		match;

		if (!OidIsValid(e->dboid))
			continue;
		match = e->dboid == dboid && e->extension == extension &&
			e->call_id == call_id && e->attempt == attempt;
		if (!match && now <= e->keep_until)
			continue;
		e->dboid = InvalidOid;
		retries_shared->ninterrupted--;
		if (!match)
			continue;
		if (!found)
			*out = *e;
		else
		{
			if (out->hook == 0)
				out->hook = e->hook;
			if (out->started == 0)
				out->started = e->started;
			out->stopped |= e->stopped;
		}
		found = true;
	}
	LWLockRelease(retries_shared->lock);
	return found;
}
