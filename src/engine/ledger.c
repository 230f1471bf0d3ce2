/*-------------------------------------------------------------------------
 *
 * ledger.c
 *	  The crash ledger: the attempt each worker has in flight, kept where a
 *	  crash cannot lose it, so that whoever comes next charges it.
 *
 * Each worker slot of a database has a file, pg_retries/<database>.<slot>,
 * mapped into the worker's memory: the call and attempt in flight are
 * written there before the attempt starts and cleared when its outcome is
 * recorded (a store, not a system call).  A process kill leaves the file
 * behind, and the next worker to start in that slot charges the attempt
 * (worker.c, "The crash rule").  A worker that exits on its own notes its
 * attempt in shared memory as well, before its transaction is rolled back,
 * for the worker that claims the call next (ledger_note_interrupted and
 * ledger_take_interrupted).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/file_perm.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "storage/fd.h"
#include "storage/lwlock.h"
#include "utils/timestamp.h"

#include "base/base.h"
#include "engine/ledger.h"
#include "shmem/shmem.h"

/* The in-flight file, mapped (see "The crash rule" above) */
static volatile InFlight *inflight_map = NULL;

/* What the in-flight file holds now */
static InFlight inflight = {0, 0, InvalidOid, 0, 0, 0};

/* The extension whose calls this worker runs (ledger_open) */
static Oid	ledger_extension = InvalidOid;


/*
 * ledger_path -- the in-flight file of a slot of a database
 */
static void
ledger_path(char *path, size_t len, Oid dboid, int slot_no)
{
	snprintf(path, len, "%s/%u.%d", RETRIES_DIR, dboid, slot_no);
}


/*
 * ledger_write -- note the call and attempt now in flight (0 for none)
 *
 * The call id goes last, after the rest, and is cleared first: a process
 * killed between two of these stores leaves either no call in flight (its
 * attempt had not started) or a whole record, never a call with another
 * call's attempt.  No fsync: the file has to survive the death of this
 * process, not of the machine.
 */
void
ledger_write(int64 call_id, int32 attempt)
{
	ledger_write_hook(call_id, attempt, HOOK_NONE,
					  call_id != 0 ? clock_system_now() : 0);
}


/*
 * ledger_write_hook -- ledger_write(), saying whether the call's
 * on_exhausted hook is what runs, and when the attempt started (so that an
 * interrupted attempt is recorded with its real start)
 */
void
ledger_write_hook(int64 call_id, int32 attempt, ExecuteHook hook, TimestampTz started)
{
	InFlight	rec = {call_id, attempt, call_id != 0 ? ledger_extension : InvalidOid,
	(int32) hook, 0, started};

	inflight_map->call_id = 0;
	if (call_id != 0)
	{
		pg_write_barrier();
		inflight_map->attempt = rec.attempt;
		inflight_map->extension = rec.extension;
		inflight_map->hook = rec.hook;
		inflight_map->stopped = 0;
		inflight_map->started = rec.started;
		pg_write_barrier();
		inflight_map->call_id = call_id;
	}
	inflight = rec;
}


/*
 * ledger_hook_phase -- execute.c's callback: a hook of this attempt of a call
 * starts ('which') or ends (HOOK_NONE)
 *
 * A worker that exits, or a crash, while a hook runs must not run the
 * hook again: the batch that recorded the attempt is rolled back with the
 * hook, and charging the attempt would run the hook again (on_exhausted
 * when the attempts are used up, delay_fn to choose the delay), and so on
 * for ever if it is what ends the worker (one that catches its cancel past
 * its time limit).  So the in-flight record names the hook, and whoever
 * charges the attempt fails the call without running it again
 * (execute_interrupted).  After a hook the record is what it was before
 * (nothing, when the hook ran for a charged attempt).
 */
void
ledger_hook_phase(int64 call_id, int32 attempt, ExecuteHook which)
{
	static InFlight saved;

	if (which != HOOK_NONE)
	{
		saved = inflight;
		ledger_write_hook(call_id, attempt, which,
						  saved.call_id == call_id ? saved.started : clock_system_now());
	}
	else
		ledger_write_hook(saved.call_id, saved.attempt, HOOK_NONE, saved.started);
}


/*
 * ledger_open -- open (creating if need be) the in-flight file of this
 * worker's slot, for the calls of 'extension'
 */
void
ledger_open(int slot_no, Oid extension)
{
	char		path[MAXPGPATH];
	int			fd;
	struct stat st;
	InFlight	empty;
	void	   *map;

	/* zeroed whole: its padding is written to the file too */
	memset(&empty, 0, sizeof(empty));

	if (MakePGDirectory(RETRIES_DIR) < 0 && errno != EEXIST)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("retries: could not create directory \"%s\": %m", RETRIES_DIR)));
	ledger_path(path, sizeof(path), MyDatabaseId, slot_no);
	fd = BasicOpenFile(path, O_RDWR | O_CREAT | PG_BINARY);
	if (fd < 0)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("retries: could not open \"%s\": %m", path)));

	/*
	 * A new file is empty: give it its record, then map it.  One that an
	 * older library wrote, without the attempt's start, keeps its record, and
	 * the start reads 0: unknown.
	 */
	if (fstat(fd, &st) < 0 ||
		(st.st_size < (off_t) sizeof(InFlight) &&
		 pwrite(fd, (char *) &empty + st.st_size, sizeof(empty) - st.st_size,
				st.st_size) != (ssize_t) (sizeof(empty) - st.st_size)))
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("retries: could not write \"%s\": %m", path)));
	map = mmap(NULL, sizeof(InFlight), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("retries: could not map \"%s\": %m", path)));
	close(fd);					/* the mapping stays */
	inflight_map = (volatile InFlight *) map;
	ledger_extension = extension;
}


/*
 * ledger_move -- this worker takes slot_no 'slot_no' of its database (a
 * runner place: worker.c, "Runner places"): the record in flight is
 * written into that slot's file, then cleared from the file left.  A
 * worker killed in between leaves it in both, and it is charged once:
 * whoever comes second finds the attempt counted (charge_interrupted).
 */
void
ledger_move(int slot_no)
{
	volatile InFlight *left = inflight_map;
	InFlight	rec = inflight;

	ledger_open(slot_no, ledger_extension);
	ledger_write_hook(rec.call_id, rec.attempt, (ExecuteHook) rec.hook, rec.started);
	left->call_id = 0;
	(void) munmap((void *) left, sizeof(InFlight));
}


/*
 * ledger_clear_slot -- clear the in-flight file of a slot whose charge has
 * committed
 *
 * Not before the commit: a worker killed in between would lose the charge.
 * A file left behind by a kill after the commit is harmless, since
 * charge_interrupted() sees that the attempt is already counted.
 */
void
ledger_clear_slot(int slot_no)
{
	char		path[MAXPGPATH];
	int			fd;
	InFlight	empty;

	memset(&empty, 0, sizeof(empty));

	ledger_path(path, sizeof(path), MyDatabaseId, slot_no);
	fd = BasicOpenFile(path, O_RDWR | PG_BINARY);
	if (fd < 0 || pwrite(fd, &empty, sizeof(empty), 0) != sizeof(empty))
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("retries: could not clear \"%s\": %m", path)));
	close(fd);
}


/*
 * ledger_note_interrupted -- remember, for 'keep_ms', that this attempt of a call
 * was interrupted and is not charged yet, for ledger_take_interrupted();
 * 'stopped': by the extension itself
 */
void
ledger_note_interrupted(const InFlight *rec, int keep_ms, bool stopped)
{
	RetriesInterrupted e = {
		.dboid = MyDatabaseId,
		.extension = rec->extension,
		.call_id = rec->call_id,
		.attempt = rec->attempt,
		.hook = rec->hook,
		.started = rec->started,
		.keep_until = TimestampTzPlusMilliseconds(clock_system_now(), keep_ms),
		.stopped = stopped,
	};

	shmem_interrupted_note(&e);
}


/*
 * ledger_take_interrupted -- whether this attempt of a call was left unfinished by
 * a worker that exited (see recovery_note_exit); if so, the entry is removed, and
 * the caller charges the attempt
 *
 * Called with the call claimed, so its row is locked: the entry, made
 * before the lock was released, is there to be seen; and by a worker that
 * charges the attempt from its predecessor's in-flight file, so that the
 * entry goes.  An entry that no one took in time (INTERRUPTED_KEEP_MS: the
 * call was cancelled meanwhile, say) goes too: otherwise every attempt
 * would look through the entries, under the lock, forever.
 *
 * One attempt may have two entries: the exiting worker's, and the one its
 * slot's next worker notes when it finds the call locked (by the worker
 * that claimed it meanwhile: charge_interrupted).  Both are taken, and the
 * attempt was stopped by the extension if either says so (once, the second
 * entry's 'false' won, and a stop used up an attempt: t/045 1).
 */
bool
ledger_take_interrupted(Oid extension, int64 call_id, int32 attempt, ExecuteHook *hook,
						TimestampTz *started, bool *stopped)
{
	RetriesInterrupted e;
	bool		found = shmem_interrupted_take(MyDatabaseId, extension, call_id,
											   attempt, clock_system_now(), &e);

	*hook = found ? (ExecuteHook) e.hook : HOOK_NONE;
	*started = found ? e.started : 0;
	*stopped = found && e.stopped;
	return found;
}

/*
 * ledger_note_stopped -- the extension stopped this worker: the attempt in
 * flight does not use up one of its call's (execute_interrupted), whoever
 * charges it, from the file or from the ring, however late
 */
void
ledger_note_stopped(void)
{
	inflight_map->stopped = 1;
	inflight.stopped = 1;
}

/*
 * ledger_in_flight -- what this worker's in-flight file holds now
 */
const InFlight *
ledger_in_flight(void)
{
	return &inflight;
}

/*
 * ledger_read_slot -- what the in-flight file of a slot of this database
 * holds; false if nothing is in flight there (or there is no file)
 */
bool
ledger_read_slot(int slot_no, InFlight *rec)
{
	char		path[MAXPGPATH];
	int			fd;
	bool		held;
	ssize_t		n;

	ledger_path(path, sizeof(path), MyDatabaseId, slot_no);
	fd = BasicOpenFile(path, O_RDONLY | PG_BINARY);
	if (fd < 0)
		return false;
	memset(rec, 0, sizeof(*rec));
	n = pread(fd, rec, sizeof(*rec), 0);
	/* an older library's record ends before the start: unknown, 0 */
	held = n >= (ssize_t) offsetof(InFlight, started) && rec->call_id != 0;
	close(fd);
	return held;
}
