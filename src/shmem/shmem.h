/*-------------------------------------------------------------------------
 *
 * shmem.h
 *	  State shared by the launcher, the workers and ordinary backends.
 *
 * One LWLock protects the database table and the assignment of worker
 * slots: the launcher assigns a slot to a worker it starts, the worker
 * fills in its pid and latch when it starts and frees the slot itself when
 * it exits (before_shmem_exit), whatever the way out.  What a worker is
 * doing (state, current call, counters), which changes with every attempt,
 * is behind a spinlock of its own slot instead, so that attempts of
 * different workers never wait for each other.  Backends read the slots to
 * wake workers, to list them in retries.workers and to know which calls
 * are running.
 *
 *-------------------------------------------------------------------------
 */
#ifndef RETRIES_SHMEM_H
#define RETRIES_SHMEM_H

#include "datatype/timestamp.h"
#include "port/atomics.h"
#include "storage/latch.h"
#include "storage/lockdefs.h"
#include "storage/lock.h"
#include "storage/lwlock.h"
#include "storage/spin.h"

#include "core/rate.h"

/*
 * Most restores of databases noted at once (the databases themselves:
 * retries.max_databases, shmem_dbs), and worker slots
 */
#define RETRIES_MAX_RESTORES	128
/*
 * Most databases noted at once as woken by a commit while every entry of
 * the database table was taken (shmem_wake_workers, shmem_take_unserved)
 */
#define RETRIES_MAX_UNSERVED	64
#define RETRIES_MAX_SLOTS		256
/*
 * A worker's bgw_main_arg: its slot in the low 8 bits, the slot's
 * generation (mod 2^24) above
 */
#define RETRIES_WORKER_ARG(slot, generation) \
	((uint32) (slot) | ((uint32) (generation) << 8))
#define RETRIES_WORKER_ARG_SLOT(arg)		((int) ((arg) & 0xFF))
#define RETRIES_WORKER_ARG_GENERATION(arg)	((arg) >> 8)
#define RETRIES_GENERATION_MASK			0xFFFFFF
StaticAssertDecl(RETRIES_MAX_SLOTS <= 256, "a slot must fit in 8 bits");

/*
 * A worker that waits for a runner (a procedure's or command's attempt,
 * worker.c "Runner places") moves to a slot_no from this one on, and the
 * launcher starts another worker in the place it left: above every base
 * and extra worker's slot_no (retries.max_workers and
 * retries.max_extra_workers are at most 64 each), below
 * RETRIES_MAX_SLOTS by retries.max_runners' most
 */
#define RETRIES_RUNNER_SLOT_BASE	128
#define RETRIES_IS_RUNNER_SLOT(slot_no)	((slot_no) >= RETRIES_RUNNER_SLOT_BASE)
/* Most runner places (retries.max_runners) */
#define RETRIES_MAX_RUNNERS		64
StaticAssertDecl(RETRIES_RUNNER_SLOT_BASE + RETRIES_MAX_RUNNERS <= RETRIES_MAX_SLOTS,
				 "runner places must fit in the slots");

/* Most attempts left behind by exiting workers remembered at once */
#define RETRIES_MAX_INTERRUPTED	64

/* A role may hold 1 / RATE_QUOTA_SHARE of the rate slots (see shmem.c) */
#define RATE_QUOTA_SHARE		8


/*
 * What a database's workers did that its next workers need not do again:
 * with workers on demand each visit of a database is a new process, which
 * would otherwise redo them all at its start (shmem_memo_read,
 * shmem_memo_write)
 */
typedef struct RetriesDbMemo
{
	uint64		names_done;		/* 1 + the names_generation at which a refresh
								 * of the signatures committed; 0: none since
								 * the entry was made (names.c) */
	TimestampTz names_done_at;	/* when that refresh began */
	TimestampTz stale_done_at;	/* when stale rows were last looked for */
	TimestampTz pruned_at;		/* when finished calls were last pruned */
	bool		armed;			/* '@reboot' schedules armed since the server
								 * started */
} RetriesDbMemo;

/*
 * What the launcher knows of a database.  Changed only by
 * shmem_set_db_state(), which asserts that the change is one of these:
 *
 *	UNKNOWN -> PROBING			the launcher starts a worker to look
 *	PROBING -> UNKNOWN			the looking worker exited without saying
 *	UNKNOWN, PROBING, ACTIVE -> ACTIVE	a worker found the extension
 *	NO_EXTENSION -> UNKNOWN		CREATE EXTENSION committed, or time to look again
 *	any -> NO_EXTENSION			a worker found none, or it was dropped
 */
typedef enum RetriesDbState
{
	DB_UNKNOWN,					/* not probed yet: start one worker to look */
	DB_PROBING,					/* a worker is looking for the extension */
	DB_ACTIVE,					/* the extension is there: keep workers */
	DB_NO_EXTENSION				/* not there: wait for CREATE EXTENSION */
} RetriesDbState;

typedef struct RetriesDatabase
{
	Oid			dboid;			/* InvalidOid when the entry is free */
	RetriesDbState state;
	bool		recovered;		/* interrupted attempts charged since start */
	TimestampTz paused_until;	/* no workers until then (DROP DATABASE, ...) */
	TimestampTz next_start;		/* do not start workers before this */
	TimestampTz reserve_extra_after;	/* give no reserved worker to an extra
										 * worker before this (see worker.c,
										 * idle_in_reserve) */
	bool		listed;			/* in the launcher's last read of pg_database
								 * (allows connections, not a template) */
	uint64		names_generation;	/* bumped when a rename commits (see
									 * names.c) */
	RetriesDbMemo memo;			/* what its workers did, for the next ones */
	uint32		creates;		/* bumped when CREATE EXTENSION retries
								 * commits, so that a worker that looked
								 * before does not report the extension absent */
	uint32		runner_held;	/* bumped when a worker has held a call for a
								 * runner (worker.c), */
	uint32		runner_seen;	/* what it was when a worker last found none
								 * held: different, there may be some */
	Oid			runner_role;	/* whose held call was let go last */
	int			wanted;			/* base workers it wants now: as many as
								 * retries.max_workers while it has work,
								 * fewer as idle ones leave; 0: none until
								 * due_at or a wake (worker.c, "Workers on
								 * demand") */
	TimestampTz due_at;			/* with wanted 0, or every worker it has held:
								 * when its work is next due */
	bool		woken;			/* a change committed for it found no worker */
	TimestampTz extra_idle_until;	/* its last extra worker left with nothing
									 * due before then, and no commit woke it
									 * since: no extra starts before
									 * (launcher.c, start_extra); 0 if none */
	Oid			woken_for;		/* ... the role whose calls alone the commits
								 * since made, or InvalidOid */
	TimestampTz waiting_since;	/* it has work, no worker, and the pool no
								 * room (retries.max_cluster_workers) */
	uint64		runners_lost;	/* a bit per runner place whose worker exited
								 * with its attempt in flight, uncharged
								 * (worker.c, "Runner places") */
	Oid			capped_role;	/* its last worker left with only calls of
								 * this role due, which the pool's cap held
								 * back (leave.c); InvalidOid if not */
	Oid			capped_holder;	/* ... of this role's code (the role, or the
								 * owner of the other role's functions) */
	TimestampTz capped_until;	/* ... and when its next firing, or a call of
								 * any role, is due; 0 if none */
	bool		idle;			/* its last worker left it with nothing due
								 * within two seconds (leave.c) and nothing to
								 * look after: its entry may go to another
								 * database (evictable_database) until a
								 * commit there wakes it, or its work falls
								 * due */
	TimestampTz far_due;		/* idle: when its work is due (on the clock of
								 * base/clock.c), 0 if never */
	bool		far_look;		/* what is due at far_due is only a look at a
								 * gate, a waiting firing or capped calls */
	bool		far_noted;		/* the launcher keeps far_due (revisits.c):
								 * only then may the entry go */
	int			idle_looks;		/* visits in a row that looked after something
								 * (a full gate, a waiting firing) and ran
								 * nothing: the next one comes later (leave.c,
								 * look_again); 0 after a commit there */
	bool		revisited;		/* its entry was given it by the launcher for
								 * its work due (engine/revisits.c): found
								 * anew, it wants one worker, more once that
								 * one is busy */
} RetriesDatabase;

/* What a worker is doing, for retries.workers */
typedef enum RetriesWorkerState
{
	WORKER_STARTING,
	WORKER_IDLE,
	WORKER_RUNNING,
	WORKER_PAUSED				/* retries.enabled = off */
} RetriesWorkerState;

/* How long a worker's batch runs before the worker counts as held */
#define RETRIES_HELD_AFTER_MS	1000

/*
 * The longest an extra worker that left idle keeps another from starting
 * in its database (shmem_extra_left_idle): work may fall due that it did
 * not know of (a retry that a worker's batch made, a call a gate lets
 * through), which an extra then finds this much later at most
 */
#define RETRIES_EXTRA_IDLE_MS	10000

/* What shmem_workers_held() counts */
typedef struct RetriesHeld
{
	int			base;			/* workers below slot_no 'base' there */
	int			base_busy;		/* ... in a batch */
	int			base_held;		/* ... held: in one batch for HELD_AFTER */
	int			runners_held;	/* ... held, waiting for a runner */
	int			extras;			/* extra workers there (slot_no >= base) */
	int			extras_held;	/* ... held */
	TimestampTz next;			/* when a worker busy now will count as held,
								 * 0 if none will */
} RetriesHeld;

/* What holds a worker that runs a batch (shmem_worker_holds) */
typedef struct RetriesHold
{
	Oid			role;			/* the role whose calls the batch holds */
	Oid			holder;			/* whose code it runs (the role, or the
								 * functions' owner) */
} RetriesHold;

typedef struct RetriesWorker
{
	/* under the LWLock: assigned by the launcher, freed by the worker */
	bool		in_use;			/* slot assigned to a worker */
	Oid			dboid;
	int			slot_no;		/* within dboid: 0 .. retries.max_workers - 1,
								 * then extras, then runner places
								 * (RETRIES_RUNNER_SLOT_BASE) */
	uint32		generation;		/* tells this assignment from earlier ones */
	TimestampTz assigned_at;	/* when the launcher assigned it */
	pid_t		pid;			/* 0 until the worker has started */
	Latch	   *latch;
	Oid			gate_fn;		/* the limited function whose attempt it runs
								 * (see flow.c), set only by the worker
								 * itself, under the LWLock */
	bool		gate_keyed;		/* that attempt's call has a limit_key, */
	int64		gate_key;		/* whose hash this is */
	bool		leaving;		/* it exits, idle: wake the launcher, not it */
	int			moved_from;		/* the slot_no it left for a runner place
								 * (RETRIES_RUNNER_SLOT_BASE) while it moves
								 * its in-flight record, or -1 */
	bool		stopped;		/* asked to exit by the extension itself
								 * (shmem_stop_workers, the launcher): its
								 * attempt in flight does not use up one of
								 * its call's (worker.c, worker_exit) */

	/*
	 * Why the worker was woken (WAKE_CALLS, WAKE_FIRE): set by
	 * shmem_wake_workers() before it sets the latch, taken by the worker
	 * before it sleeps and when the latch wakes it.  The latch alone can be
	 * lost: a call that waits (pg_sleep(), a lock, a buffer being read by
	 * another process) sleeps on the same latch and resets it.
	 */
	pg_atomic_uint32 woken;

	/* under mutex: what the worker is doing */
	slock_t		mutex;
	RetriesWorkerState state;
	int64		current_call;	/* 0 when none */
	Oid			current_role;	/* who scheduled current_call */
	Oid			holder_role;	/* whose code its batch runs: batch_role, or
								 * the owner of another role's functions that
								 * its calls run (worker.c, other_holds) */
	Oid			batch_role;		/* whose calls its batch runs */
	bool		pool_counted;	/* ... counted by the pool's cap (taken by
								 * shmem_pool_take: not a superuser's) */
	Oid			last_role;		/* ... the holder when it last ran a call,
								 * while it is idle since */
	Oid			last_batch_role;	/* ... and whose calls those were */
	TimestampTz since;			/* when state or current_call last changed */
	bool		in_runner;		/* current_call runs in a runner (worker.c) */
	Oid			runner_role;	/* ... whose call it is */
	int64		calls_run;
	int64		errors;

	/*
	 * Time spent running calls since the process started: busy_us for the
	 * busy periods that ended, plus now - busy_since while one lasts (from
	 * the first attempt of a batch until its commit; 0 when none does).
	 */
	int64		busy_us;
	TimestampTz busy_since;
	TimestampTz stretch_since;	/* when it began the batches it runs back to
								 * back; 0 while it rests (shmem_slot_rest) */
} RetriesWorker;

/*
 * An attempt that a worker left unfinished when it exited (see worker.c):
 * the first worker to claim the call charges it.  A ring: when it is full,
 * the oldest entry is overwritten.
 */
typedef struct RetriesInterrupted
{
	Oid			dboid;			/* InvalidOid when the entry is free */
	Oid			extension;		/* the extension the call belongs to */
	int64		call_id;
	int32		attempt;
	int32		hook;			/* the hook that was running (execute.h) */
	TimestampTz started;		/* when the attempt started */
	TimestampTz keep_until;		/* forgotten after this, if no one took it */
	bool		stopped;		/* the extension stopped its worker */
} RetriesInterrupted;

/*
 * What a backend waits for, one entry per backend, after RetriesShared:
 * the row of a call that a worker may be running, for cancel() (see
 * manage.c), under the LWLock; and the end of a call, for retries.wait()
 * (see wait.c), under the entry's spinlock
 */
typedef struct RetriesBackendWait
{
	Oid			dboid;
	int64		call_id;		/* cancel(): 0 when none */

	slock_t		mutex;
	Oid			finish_dboid;
	int64		finish_call_id; /* wait(): 0 when none */
	Latch	   *latch;			/* the waiting backend's */
} RetriesBackendWait;

/*
 * The starts of the attempts of a rate-limited function (see rate.h), under
 * the LWLock
 */
typedef struct RetriesRateSlot
{
	Oid			dboid;
	Oid			fn;				/* InvalidOid when the slot is free */
	Oid			owner;			/* the function's owner, for the quota */
	RateSpec	rate;			/* the rate last applied */
	RateRing	ring;
} RetriesRateSlot;

/* A session restoring a database's extension (see restore.c) */
typedef struct RetriesRestore
{
	Oid			dboid;			/* InvalidOid: free */
	pid_t		pid;
} RetriesRestore;

/*
 * What restores did to a database's extension (see "Rows already there"
 * in restore.c): whether one was refused, and which of its tables a COPY
 * has loaded.  A ring: when it is full, the oldest entry is forgotten.
 */
typedef struct RetriesLoads
{
	Oid			dboid;			/* InvalidOid: free */
	Oid			extoid;			/* the extension, of the database */
	bool		refused;		/* a restore was refused */
	uint32		loaded;			/* a bit per table (restore.c) */
} RetriesLoads;

/* Most reserved background workers (retries.reserved_workers) */
#define RETRIES_MAX_RESERVES	32

/* What a reserved background worker is given to run (engine/reserve.c) */
typedef enum RetriesReserveJob
{
	RESERVE_NONE,
	RESERVE_WORKER,				/* retries_worker_main(arg) */
	RESERVE_RUNNER				/* retries_runner_main(arg) */
} RetriesReserveJob;

/* A reserved background worker, under the LWLock */
typedef struct RetriesReserve
{
	pid_t		pid;			/* 0 while none is there (starting again) */
	Latch	   *latch;
	uint32		generation;		/* bumped when it is given a job, and when its
								 * process ends */
	RetriesReserveJob job;		/* RESERVE_NONE: free for one */
	Datum		arg;
	Oid			role;			/* a runner's: whose call it runs */
	TimestampTz started_at;		/* when its process began */
	bool		had_job;		/* its process was given a job */
} RetriesReserve;

/*
 * A runner place let go to a call held for one (shmem_runner_holds_done),
 * offered to that call until it takes one or RETRIES_OFFER_MS pass; with
 * call_id 0, a place that worker 'owner' (its index in workers[], of
 * 'generation') is letting go now, call not known yet (shmem/places.c)
 */
typedef struct RetriesOffer
{
	Oid			dboid;
	int64		call_id;
	int			owner;
	uint32		generation;
	TimestampTz until;
} RetriesOffer;

/* How long a place let go to a held call is offered to it */
#define RETRIES_OFFER_MS	RETRIES_HELD_AFTER_MS
/* ... and how many offers there may be, in all databases */
#define RETRIES_MAX_OFFERS	(4 * RETRIES_MAX_RUNNERS)

typedef struct RetriesShared
{
	LWLock	   *lock;
	pg_atomic_uint32 ncancel_waits; /* entries waiting for a cancel() */
	pg_atomic_uint32 nfinish_waits; /* entries waiting for a call's end */
	pg_atomic_uint64 gates_generation;	/* bumped when a pause or limit
										 * commits (see flow.c) */
	pid_t		launcher_pid;
	Latch	   *launcher_latch;
	bool		reread_databases;	/* pg_database changed: read it again */
	Oid			unserved[RETRIES_MAX_UNSERVED]; /* woken with no entry to be
												 * had: the launcher looks at
												 * them as new */
	int			nunserved;
	int			pool_waiting;	/* databases with work waiting for room in the
								 * pool (set by the launcher) */
	bool		pool_over;		/* more workers run than the pool allows now
								 * (set by the launcher): as if databases
								 * waited, they leave soon */
	int			entries_waiting;	/* databases with work waiting for an
									 * entry of the database table (set by the
									 * launcher) */
	uint32		next_generation;	/* of worker slots */
	pg_atomic_uint32 nrestores; /* entries of restores[] in use */
	RetriesRestore restores[RETRIES_MAX_RESTORES];
	int			next_loads;		/* where the next entry goes */
	RetriesLoads loads[RETRIES_MAX_RESTORES];
	RetriesWorker workers[RETRIES_MAX_SLOTS];
	int			ninterrupted;	/* entries in use */
	int			next_interrupted;	/* where the next entry goes */
	RetriesInterrupted interrupted[RETRIES_MAX_INTERRUPTED];
	TimestampTz started_at;		/* when this shared memory was made */
	uint8		lock_secret[32];	/* keys the tags of private locks */
	RetriesReserve reserves[RETRIES_MAX_RESERVES];
	int			noffers;		/* entries of offers[] in use */
	RetriesOffer offers[RETRIES_MAX_OFFERS];
} RetriesShared;

extern RetriesShared *retries_shared;

/*
 * after it: a wait entry per backend (waits.c), the rate slots (gates.c),
 * and the databases (retries.max_databases of them, under the LWLock)
 */
extern RetriesBackendWait *shmem_backend_waits;
extern RetriesRateSlot *shmem_rate_slots;
extern RetriesDatabase *shmem_dbs;

/*
 * shmem_attached -- is the shared state there (the library preloaded)?
 */
static inline bool
shmem_attached(void)
{
	return retries_shared != NULL;
}

/*
 * shmem_set_launcher_latch -- wake the launcher, if there is one; under the
 * LWLock, which the caller holds (shmem_wake_launcher takes it)
 */
static inline void
shmem_set_launcher_latch(void)
{
	if (retries_shared->launcher_latch != NULL)
		SetLatch(retries_shared->launcher_latch);
}

/*
 * shmem_lock_database -- take the LWLock in 'mode' and return the entry of
 * database 'dboid', NULL if it has none; the caller releases the lock
 */
static inline RetriesDatabase *
shmem_lock_database(Oid dboid, LWLockMode mode)
{
	extern RetriesDatabase *shmem_find_database(Oid dboid, bool create);

	LWLockAcquire(retries_shared->lock, mode);
	return shmem_find_database(dboid, false);
}

/*
 * shmem_lock -- take the LWLock of the shared state in 'mode';
 * shmem_unlock releases it
 */
static inline void
shmem_lock(LWLockMode mode)
{
	LWLockAcquire(retries_shared->lock, mode);
}

static inline void
shmem_unlock(void)
{
	LWLockRelease(retries_shared->lock);
}

/*
 * shmem_next_worker -- the next worker slot after *i that is in use, by a
 * worker of database dboid (of any database if InvalidOid), or NULL; the
 * caller holds the LWLock.  The one way to go through the slots:
 *
 *		for (int i = -1; (w = shmem_next_worker(dboid, &i)) != NULL;)
 */
static inline RetriesWorker *
shmem_next_worker(Oid dboid, int *i)
{
	while (++*i < RETRIES_MAX_SLOTS)
	{
		RetriesWorker *w = &retries_shared->workers[*i];

		if (w->in_use && (!OidIsValid(dboid) || w->dboid == dboid))
			return w;
	}
	return NULL;
}

extern void shmem_request_space(void);
extern void shmem_install(void);
extern RetriesDatabase *shmem_find_database(Oid dboid, bool create);
extern bool shmem_recovery_begin(Oid dboid);
extern void shmem_recovery_end(Oid dboid);
extern bool shmem_recovered(Oid dboid);
extern bool shmem_slot_stopped(const RetriesWorker *w);
extern void shmem_set_db_state(RetriesDatabase *db, RetriesDbState state);
extern void shmem_copy_workers(RetriesWorker *copy);
extern RetriesWorker *shmem_slot_assign(int slot, Oid dboid, int slot_no,
										uint32 generation, TimestampTz now);
extern TimestampTz shmem_slot_working_since(RetriesWorker *w, bool *running);
extern void shmem_slot_rest(RetriesWorker *me);
extern void shmem_wake_idle_workers(void);
extern void shmem_note_pool(int waiting, bool over);
extern int	shmem_pool_waiting(void);
extern uint32 shmem_next_generation(void);
extern bool shmem_reread_pending(void);
extern RetriesDatabase *shmem_db_entry(int i);
extern bool shmem_db_tracked(Oid dboid, bool *quiet);
extern void shmem_launcher_here(void);
extern void shmem_launcher_gone(void);
extern bool shmem_take_reread(void);
extern int	shmem_take_unserved(Oid *dboids);
extern void shmem_let_workers_back(Oid dboid, bool extension_gone);
extern void shmem_extension_created(Oid dboid);
extern void shmem_wake_launcher(void);
extern RetriesWorker *shmem_worker_slot(int i);
extern uint32 shmem_db_creates(Oid dboid);
extern TimestampTz shmem_db_probed(Oid dboid, bool present, uint32 creates);
extern void shmem_db_left(Oid dboid, bool gone);
extern void shmem_reread_databases(void);
extern void shmem_names_changed(Oid dboid);
extern uint64 shmem_names_generation(Oid dboid);
extern void shmem_memo_read(Oid dboid, RetriesDbMemo *memo);
extern void shmem_memo_write(Oid dboid, const RetriesDbMemo *memo);
extern bool shmem_note_restore(Oid dboid);
extern void shmem_forget_restores(void);
extern pid_t shmem_restoring(Oid dboid);
extern void shmem_note_loads(Oid dboid, Oid extoid, bool refused, uint32 loaded);
extern bool shmem_loads(Oid dboid, Oid extoid, uint32 *loaded);

/*
 * Why a database's workers are woken: calls made or due again, which a
 * batch claims; or schedules, gates or names changed, or followers left
 * for later, which the short transaction at the top of the loop sees to
 * as well (worker.c)
 */
#define WAKE_CALLS				0x1
#define WAKE_FIRE				0x2

/*
 * The launcher's own wake of a database whose work it kept
 * (engine/revisits.c, revisits_wake_due): its work is due now, as its last
 * worker left it, but the database's looks keep backing off (leave.c,
 * leave_look_again_ms), one whose calls the pool's cap holds back still
 * gets no worker, and, with no entry to be had, it is not listed as woken
 * by a commit: the launcher tries again itself
 */
#define WAKE_REVISIT			0x4
/*
 * The launcher's wake, in its turn, of a database woken by a commit while
 * no entry could be had, or not looked at yet (engine/revisits.c): as a
 * commit's, but with no entry to be had it is not listed again either
 */
#define WAKE_TURN				0x8
extern void shmem_workers_held(Oid dboid, int base, TimestampTz now, RetriesHeld *held);
extern bool shmem_extras_wanted(Oid dboid, int base, TimestampTz now, RetriesHeld *held);
extern long shmem_reserve_pause(int index);
extern bool shmem_in_reserve(void);
extern int	shmem_reserve_roles(Oid *roles);
extern RetriesReserveJob shmem_reserve_job(int index, Datum *arg);
extern bool shmem_reserve_give_runner(Datum arg, Oid role, int *index,
									  uint32 *generation);
extern int	shmem_pool_roles(Oid *roles);
extern int	shmem_pool_heavy(void);
extern bool shmem_pool_refuses(Oid role, Oid holder);
extern void shmem_pool_refused(const Oid *roles, const Oid *holders, int n,
							   bool *refused);
extern int	shmem_pool_cap(void);
extern int	shmem_pool_share(void);
extern bool shmem_pool_take(RetriesWorker *self, Oid role, Oid holder,
							TimestampTz now);
extern void shmem_reserve_begin(int index);
extern bool shmem_reserve_give(RetriesReserveJob job, Datum arg, Oid role, int *index,
							   uint32 *generation);
extern pid_t shmem_reserve_running(int index, uint32 generation);
extern void shmem_reserve_terminate(int index, uint32 generation);
extern int	shmem_exit_code(void);
extern void shmem_wake_workers(Oid dboid, uint32 why, Oid role);
extern int	shmem_db_idle_looks(Oid dboid);
extern void shmem_db_note_look(Oid dboid, bool ran);
extern bool shmem_db_revisited(Oid dboid, bool given, int looks,
							   TimestampTz since, bool one_worker);
extern void shmem_runner_lock_tag(LOCKTAG *tag, Oid dboid, int64 call_id,
								  uint16 lockclass);

/*
 * Their tags name the call by a keyed hash (shmem_runner_lock_tag), not by
 * its id: pg_locks shows them to every role (the twenty-third hostile
 * review, t/056: another role read the ids of a role's running commands)
 */
#define SET_LOCKTAG_RUNNER(tag, call_id) \
	shmem_runner_lock_tag(&(tag), MyDatabaseId, (call_id), RETRIES_RUNNER_LOCK_CLASS)
/*
 * And the one the runner itself holds while it runs the call: a cancel()
 * waits for it first, so that a cancel that holds a lock the procedure
 * waits for is a deadlock that PostgreSQL detects (unless the runner's own
 * code drops it with pg_advisory_unlock_all(): then a cancel that holds a
 * lock the procedure waits for waits until the attempt's time limit, which
 * only the role's own sessions can do to its own call)
 */
#define SET_LOCKTAG_RUNNER_PROCESS(tag, call_id) \
	SET_LOCKTAG_RUNNER_PROCESS_IN(tag, MyDatabaseId, call_id)
/* ... of a call of database dboid (a runner in another database holds it) */
#define SET_LOCKTAG_RUNNER_PROCESS_IN(tag, dboid, call_id) \
	shmem_runner_lock_tag(&(tag), (dboid), (call_id), RETRIES_RUNNER_LOCK_CLASS + 1)

extern void shmem_stop_workers(Oid dboid, int pause_secs);
extern bool shmem_call_is_running(int64 call_id);
extern void shmem_private_lock(uint16 lockclass, Oid role, const char *name,
							   int len, LOCKMODE mode);
extern bool shmem_try_name_lock(uint16 lockclass, Oid role, const char *name, int len);
extern int	shmem_gate_running(Oid fnoid);
extern bool shmem_gate_enter(RetriesWorker *me, Oid fnoid, int32 max_running,
							 bool keyed, int64 key, int32 max_per_key,
							 const RateSpec *rate, Oid owner);
extern int32 shmem_gate_rate_room(Oid fnoid, Oid owner, const RateSpec *rate,
								  TimestampTz now, TimestampTz *next);
extern int	shmem_gate_key_counts(Oid fnoid, int64 **keys, int32 **counts);
extern void shmem_gate_leave(RetriesWorker *me);
extern void shmem_gates_changed(void);
extern uint64 shmem_gates_generation(void);

/* slots.c: a worker's own slot */
extern bool shmem_slot_take(RetriesWorker *me, uint32 generation,
							TimestampTz now);
extern bool shmem_slot_release(RetriesWorker *me);
extern bool shmem_slot_set_state(RetriesWorker *me, RetriesWorkerState state,
								 int64 call_id, Oid role, Oid holder,
								 bool *ended);
extern void shmem_slot_count_call(RetriesWorker *me, bool succeeded);
extern int	shmem_workers_all_busy(Oid dboid, TimestampTz now);
extern void shmem_workers_batch_done(Oid dboid, int raised_from,
									 TimestampTz now);
extern int	shmem_worker_holds(const RetriesWorker *me, Oid dboid,
							   TimestampTz recent, RetriesHold *holds);
extern bool shmem_pool_contended(void);
extern bool shmem_entries_contended(void);
extern void shmem_set_entries_waiting(int waiting);
extern void shmem_forget_far_noted(void);
extern bool shmem_slot_leave(RetriesWorker *me, TimestampTz due_at,
							 bool for_others, Oid capped_role,
							 Oid capped_holder, TimestampTz capped_until, TimestampTz idle_until,
							 bool idle_look);
extern bool shmem_db_wants_extras(Oid dboid, TimestampTz now);
extern void shmem_extra_left_idle(Oid dboid, TimestampTz due);
extern void shmem_reserve_extra_backoff(Oid dboid, TimestampTz until);

/* interrupted.c: attempts left unfinished by exiting workers */
extern void shmem_interrupted_note(const RetriesInterrupted *entry);
extern bool shmem_interrupted_take(Oid dboid, Oid extension, int64 call_id,
								   int32 attempt, TimestampTz now,
								   RetriesInterrupted *out);

/* places.c: runner places */
extern uint64 shmem_runner_place_bit(int slot_no);
extern void shmem_set_in_runner(RetriesWorker *me, bool in_runner, Oid role);
extern bool shmem_slot_is_extra(const RetriesWorker *w);
extern bool shmem_reserve_runner(RetriesWorker *me, Oid role, int64 call_id);
extern bool shmem_runner_work_pending(Oid dboid);
extern void shmem_runner_held(Oid dboid);
extern bool shmem_runner_holds(RetriesWorker *me, bool probe, uint32 *held,
							   Oid *last_role, int *places, Oid *avoid,
							   int *navoid);
extern void shmem_runner_holds_done(RetriesWorker *me, int released,
									const int64 *ids, Oid last_role,
									bool passed_over, uint32 held);
extern int	shmem_runner_move(RetriesWorker *me);
extern void shmem_runner_moved(RetriesWorker *me);
extern int	shmem_runner_waiting_dbs(Oid *dbs);
extern void shmem_runner_place_lost(Oid dboid, uint64 bit);
extern uint64 shmem_runner_places_lost(Oid dboid);
extern void shmem_runner_places_found(Oid dboid, uint64 bits);
extern bool shmem_runner_place_was_lost(const RetriesWorker *w);
extern void shmem_cancel_wait_begin(int64 call_id);
extern void shmem_cancel_wait_end(void);
extern bool shmem_cancel_waiting(int64 call_id);
extern bool shmem_finish_wait_begin(int64 call_id);
extern void shmem_finish_wait_end(void);
extern void shmem_wake_finish_waiters(const int64 *ids, int n);

#endif							/* RETRIES_SHMEM_H */
