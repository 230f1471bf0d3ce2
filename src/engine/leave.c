/*-------------------------------------------------------------------------
 *
 * leave.c
 *	  When a worker leaves its database: workers on demand, and the pool's
 *	  turns between databases.
 *
 * A database with nothing due holds no worker: a worker that has had
 * nothing to do for retries.worker_idle_timeout, with nothing it must look
 * after (LeaveNeeds: a firing that waits, calls held at a gate or for a
 * runner, an error to retry, a copy settling), leaves (leave_database):
 * under the exclusive lock it looks at its wake-up flag (a commit just woke
 * it: it stays), marks itself leaving, lowers the database's count of
 * wanted workers, and, the last to leave, writes when the database's next
 * call or firing is due (due_at; at most IDLE_RECHECK_MS ahead, for what
 * nothing wakes: retention, calls a restore loaded).  The launcher starts
 * a worker again at due_at, or at once when a commit finds no worker that
 * stays.  Nothing due within IDLE_AFTER_MS, it leaves the database idle
 * (idle_until): its entry of the database table may go to another
 * database, and the launcher wakes it when its work is due (revisits.c).
 * All workers of all databases together are at most
 * retries.max_cluster_workers (runner places aside): a database whose work
 * finds the pool full waits, the longest waiting first, and while any
 * waits a worker leaves its database when it has nothing to do, or after
 * POOL_SLICE_MS of work (its database, due again at once, takes its turn
 * behind the others), an idle extra worker after a second, and one in a
 * reserved worker once nothing is due within a moment.  With
 * retries.worker_idle_timeout 0 no worker leaves: the pool only bounds.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/spin.h"
#include "utils/timestamp.h"

#include "base/base.h"
#include "engine/leave.h"
#include "engine/wslot.h"
#include "shmem/shmem.h"

/* The furthest ahead a database with no worker is looked at again */
#define IDLE_RECHECK_MS			(10 * 60 * 1000)
/* How long a worker serves its database while others wait for the pool */
#define POOL_SLICE_MS			1000
/* A worker whose database has work due this soon does not leave it */
#define STAY_FOR_DUE_MS			1000
/* Work due later than this leaves a database idle (idle_until) */
#define IDLE_AFTER_MS			2000
/* How soon a database looked after is looked at again, at first and at most */
#define LOOK_AGAIN_MS			1000
#define LOOK_AGAIN_MAX_MS		16000
/*
 * How soon a database whose due calls the pool's cap holds back, left
 * idle, is looked at again, at first (then as a gate is: up to
 * LOOK_AGAIN_MAX_MS while those looks run nothing)
 */
#define CAPPED_LOOK_MS			4000

/*
 * leave_pool_contended -- do databases with due work wait for room in the pool
 * of workers (retries.max_cluster_workers)?
 */
bool
leave_pool_contended(void)
{
	return shmem_pool_contended();
}

/*
 * may_leave -- may this worker leave its database now?  Not an extra one
 * (it has its own rule), nor one that must look after something ('needs':
 * a firing that waits, calls held at a gate, an error to retry, a bad
 * row's one-by-one batches, a copy settling), nor calls held for a runner
 * or a runner place to charge.
 */
static bool
may_leave(const LeaveNeeds *needs)
{
	if (wslot_is_extra() || !retries_enabled)
		return false;
	if (needs->looks_after || needs->runs_alone)
		return false;
	return !shmem_runner_work_pending(MyDatabaseId);
}

/*
 * look_after_soon -- may this worker leave its database although it looks
 * after something (may_leave says not): its database is due again within
 * FIRE_CHECK_MS, and takes its turn in the pool, so that no database's
 * gates or queued firings hold a worker idle for good (the twenty-fourth
 * hostile review, t/058: sixteen databases of a role's, with a full rate
 * gate each, or a command schedule queued behind its held command, kept
 * the pool)
 */
static bool
look_after_soon(const LeaveNeeds *needs)
{
	return !wslot_is_extra() && retries_enabled && !needs->runs_alone;
}

/*
 * leave_database -- exit, leaving the database 'due_at' as when its work
 * is next due if no other worker of it stays, unless a commit woke this
 * worker meanwhile (then false: it goes on).  With 'for_others', the
 * database is due again at once and it leaves whatever woke it: a role's
 * stream of calls, each committing the next, woke the worker at every
 * batch and kept it from the databases that waited (the twenty-ninth
 * hostile review, t/063 1).  With 'idle' (idle_until, not 0), its entry
 * may go to another database once no worker of it stays; 'idle_look' says
 * whether what is due then is only a look (idle_until).
 */
static bool
leave_database(TimestampTz due_at, bool for_others, const LeaveNeeds *needs,
			   TimestampTz idle, bool idle_look)
{
	/*
	 * The last free worker of a database whose others are busy stays, so that
	 * a call made now has one (the twenty-fourth hostile review, t/058: the
	 * idle worker left, and alice's call waited for mallory's long one); not
	 * while other databases wait for the pool (the twenty-fifth, t/059: one
	 * long call in each of eight databases kept the pool of sixteen): there a
	 * call made now waits its database's turn in the pool.  The last, or the
	 * last free, leaves its database due at due_at: the launcher starts one
	 * more then if its others are still held (manage_database).  Its due
	 * calls all of a role that the pool's cap holds back, the launcher starts
	 * no worker for them while it still does (a worker a second in each of
	 * such databases kept the last place of the pool from the others: the
	 * thirtieth hostile review, t/064 7).
	 */
	if (!shmem_slot_leave(worker_slot, due_at, for_others,
						  needs != NULL ? needs->capped_role : InvalidOid,
						  needs != NULL ? needs->capped_holder : InvalidOid,
						  needs != NULL ? needs->capped_until : 0, idle, idle_look))
		return false;
	proc_exit(shmem_exit_code());
	return true;				/* not reached */
}

/*
 * idle_from -- 'next', when the database's work is next due ('look': only
 * a look at what its workers look after), if that leaves it idle: beyond
 * IDLE_AFTER_MS, or a look while other databases wait for an entry (its
 * first looks, a second or two apart, held each of sixteen entries for
 * seconds after a launcher restart while a call due waited for one: the
 * forty-second hostile review, t/074 5); else 0
 */
static TimestampTz
idle_from(TimestampTz next, bool look)
{
	if (clock_ms_until(next) > IDLE_AFTER_MS)
		return next;
	return look && shmem_entries_contended() ? next : 0;
}

/*
 * idle_until -- has the database nothing due within IDLE_AFTER_MS ('due':
 * its next call, event timeout or release of a gate, 0 if none; or a
 * firing) and nothing a worker must look after?  Then when its work is
 * next due (DT_NOEND if never), else 0.  Its last worker leaves it idle,
 * and its entry may go to a database that needs one (shmem/shmem.c,
 * evictable_database) until a commit there wakes it, or, kept by the
 * launcher (revisits.c), until its work is due: an entry is for a
 * database served now, not one that waits.  Copies of a template with a
 * call due in ten years took every entry of retries.max_databases, and a
 * database made after them got no worker (the thirty-eighth hostile
 * review, t/072 1); so did copies with a schedule every five minutes
 * while only work due beyond ten minutes left a database idle (the
 * thirty-ninth, t/072 3).  One whose due calls are all of a role the
 * pool's cap holds back (needs->capped_role) is idle too, looked at again
 * CAPPED_LOOK_MS on (backing off as the looks at a gate do, up to 16 s),
 * or when a call not held back is due if sooner: a role at its cap kept
 * the entries of its databases, and bob's database, made after them, got
 * no worker for minutes (the fortieth hostile review, t/074 2).  While it
 * keeps its entry the launcher starts a worker as soon as the cap lets
 * one, and none for its looks before (launcher.c, still_capped,
 * capped_idle).  *look says whether what is due then is only such a look
 * (at a gate, a waiting firing, calls the cap holds back), not a call or a
 * firing due: the launcher serves those first (revisits.c).
 */
static TimestampTz
idle_until(const LeaveNeeds *needs, TimestampTz due, bool *look)
{
	TimestampTz next = due;

	*look = false;
	if (OidIsValid(needs->capped_role))
	{
		next = TimestampTzPlusMilliseconds(clock_now(),
										   Max(CAPPED_LOOK_MS, needs->look_again_ms));
		*look = true;
		if (needs->capped_until != 0 && needs->capped_until < next)
		{
			next = needs->capped_until;
			*look = false;
		}
		return idle_from(next, *look);
	}
	if (needs->next_fire != 0 && (next == 0 || needs->next_fire < next))
		next = needs->next_fire;

	/*
	 * What it looks after (a full gate, a firing that waits) is due when it
	 * is looked at again (leave_look_again_ms): once that is seconds away,
	 * the database is idle too, or databases with a full gate each would keep
	 * their entries for good
	 */
	if (!may_leave(needs))
	{
		TimestampTz look_at;

		if (!look_after_soon(needs))
			return 0;
		look_at = TimestampTzPlusMilliseconds(clock_now(), needs->look_again_ms);
		*look = next == 0 || look_at < next;
		next = *look ? look_at : next;
	}
	if (next == 0)
		return DT_NOEND;
	return idle_from(next, *look);
}

/*
 * next_visit -- when the database needs a worker again if this one leaves
 * now: its next call ('due', 0 if none) or firing, a moment from now if
 * the worker looks after something that lets it leave (look_again_ms), or
 * IDLE_RECHECK_MS on; 0 if it must not leave (may_leave)
 */
static TimestampTz
next_visit(const LeaveNeeds *needs, TimestampTz now, TimestampTz due)
{
	TimestampTz due_at = TimestampTzPlusMilliseconds(now, IDLE_RECHECK_MS);

	if (!may_leave(needs))
	{
		if (!look_after_soon(needs))
			return 0;
		due_at = TimestampTzPlusMilliseconds(now, needs->look_again_ms);
	}
	if (due != 0)
		due_at = Min(due_at, due);
	if (retries_enabled && needs->next_fire != 0)
		due_at = Min(due_at, needs->next_fire);
	return due_at;
}

/*
 * leave_look_again_ms -- how soon this database, which its worker looks
 * after (a full gate, a firing that waits), is looked at again once the
 * worker leaves it: LOOK_AGAIN_MS, doubled for each visit in a row that
 * ran nothing, up to LOOK_AGAIN_MAX_MS; a commit there starts again from
 * the first (shmem_wake_workers).  A look a second in each of 32 databases
 * with a full rate gate, in turns on a contended pool, kept 0.9 of a core
 * busy starting and ending workers (the thirty-ninth hostile review, t/072
 * 4).
 */
int
leave_look_again_ms(void)
{
	int			looks = shmem_db_idle_looks(MyDatabaseId);
	int			ms = LOOK_AGAIN_MS;

	while (looks-- > 0 && ms < LOOK_AGAIN_MAX_MS)
		ms *= 2;
	return Min(ms, LOOK_AGAIN_MAX_MS);
}

/*
 * note_look -- a worker that looks after something leaves: its visit ran
 * a call ('ran_at', after 'started_at') or did not (leave_look_again_ms)
 */
static void
note_look(const LeaveNeeds *needs, TimestampTz ran_at, TimestampTz started_at)
{
	if ((!may_leave(needs) && look_after_soon(needs)) || OidIsValid(needs->capped_role))
		shmem_db_note_look(MyDatabaseId, ran_at > started_at);
}

/*
 * leave_reserve -- a worker of the database's own in a reserved worker
 * that found nothing to run ('ran_at': when it last ran something, or
 * started) gives the reserve back: its database due again when its work
 * is (next_visit).  It stays up to a second for work due within one, and
 * after a claim that passed over roles that run in other reserved workers
 * (their calls may be due), then leaves, its database due again a second
 * later.  Not "a second later" whatever it found: a database with nothing
 * due came back every second for good, taking its turn for the reserve
 * ahead of the others (the twenty-seventh hostile review, t/061 1).  Work
 * due within a second keeps it only in its first POOL_SLICE_MS while
 * other databases wait ('started_at': when it started), as in
 * leave_when_idle: a stream of calls each due a moment after the last kept
 * both reserved workers for good (the twenty-ninth, t/063 1).
 */
void
leave_reserve(const LeaveNeeds *needs, TimestampTz due, TimestampTz ran_at,
			  TimestampTz started_at, bool passed_over)
{
	TimestampTz now = clock_system_now();
	TimestampTz due_at = next_visit(needs, now, due);
	bool		idle = TimestampDifferenceExceeds(ran_at, now, RETRIES_HELD_AFTER_MS);
	TimestampTz idle_at;
	bool		look;

	if (due_at == 0)
		return;
	if (passed_over)
	{
		if (!idle)
			return;
		due_at = Min(due_at, TimestampTzPlusMilliseconds(now, RETRIES_HELD_AFTER_MS));
	}
	else if (!idle && due_at <= TimestampTzPlusMilliseconds(now, STAY_FOR_DUE_MS) &&
			 (!TimestampDifferenceExceeds(started_at, now, POOL_SLICE_MS) ||
			  !leave_pool_contended()))
		return;
	idle_at = idle_until(needs, due, &look);
	note_look(needs, ran_at, started_at);
	(void) leave_database(due_at, false, needs, idle_at, look);
}

/*
 * leave_when_idle -- after a round that found nothing to run (due, when
 * the next call is due, 0 if none is): leave if idle for
 * retries.worker_idle_timeout, or at once while the pool is contended, or
 * while other databases wait for an entry of the database table and this
 * one would leave its own free (idle_until); never with
 * retries.worker_idle_timeout 0.  An idle worker kept its database's
 * entry for the whole timeout while a hundred databases waited for one:
 * a look at each full gate held an entry ten seconds, the sixteen entries
 * served 1.6 looks a second where 6 fell due, and bob's call due in one
 * of them ran 15-89 s late (the forty-second hostile review, t/074 4).
 */
void
leave_when_idle(const LeaveNeeds *needs, TimestampTz ran_at, TimestampTz due,
				TimestampTz started_at)
{
	TimestampTz now = clock_system_now();
	TimestampTz due_at;
	TimestampTz idle;
	bool		look;
	bool		contended;
	bool		timed_out;

	/* 0: workers stay, whatever waits (as before 1.7) */
	if (retries_worker_idle_timeout == 0)
		return;
	contended = leave_pool_contended();
	timed_out = TimestampDifferenceExceeds(ran_at, now,
										   retries_worker_idle_timeout * 1000);
	if (!timed_out && !contended && !shmem_entries_contended())
		return;
	idle = idle_until(needs, due, &look);
	/* for the databases that wait for an entry: only if it frees its own */
	if (!timed_out && !contended && idle == 0)
		return;
	due_at = next_visit(needs, now, due);
	if (due_at == 0)
		return;

	/*
	 * Work due in a moment (a worker started ahead of its firing): leaving
	 * now would only have the launcher start another for it.  In its first
	 * slice only: work that is always due in a moment (a schedule every
	 * second) kept the worker, and the pool from the others, for good (the
	 * twenty-seventh hostile review, t/061 2)
	 */
	if (contended && due_at < TimestampTzPlusMilliseconds(now, STAY_FOR_DUE_MS) &&
		!TimestampDifferenceExceeds(started_at, now, POOL_SLICE_MS) &&
		!OidIsValid(needs->capped_role))
		return;
	note_look(needs, ran_at, started_at);
	(void) leave_database(due_at, false, needs, idle, look);
}

/*
 * leave_idle_left_ms -- how long until this worker, which last ran calls
 * at 'ran_at', may leave idle (leave_when_idle), plus a little; 'longest'
 * if it has been idle long enough already, or never leaves
 */
long
leave_idle_left_ms(TimestampTz ran_at, long longest)
{
	long		left;

	if (retries_worker_idle_timeout == 0)
		return longest;
	left = clock_system_ms_until(TimestampTzPlusMilliseconds(ran_at,
															 retries_worker_idle_timeout * 1000));
	return left > 0 ? left + 10 : longest;
}

/*
 * leave_for_others -- after a round that ran calls: leave, the database
 * due again at once, if it has been served for POOL_SLICE_MS while other
 * databases wait for the pool
 */
void
leave_for_others(const LeaveNeeds *needs, TimestampTz served_since)
{
	if (retries_worker_idle_timeout == 0 ||
		!TimestampDifferenceExceeds(served_since, clock_system_now(), POOL_SLICE_MS) ||
		!leave_pool_contended() || !look_after_soon(needs))
		return;
	(void) leave_database(clock_system_now(), true, NULL, 0, false);
}

/*
 * leave_idle_extra -- an extra worker that has run nothing since
 * 'ran_at', RETRIES_HELD_AFTER_MS ago or more, while other databases wait
 * for room in the pool, gives its place back: it exits, and its database
 * waits for an extra in turn, after them (launcher.c, start_extra).  Its
 * database wants one for a call that may come; the others have work due
 * now.  An idle extra kept its place in the pool for as long as the long
 * calls that made it wanted ran (the twenty-ninth hostile review, t/063 8).
 * Not with retries.worker_idle_timeout 0, where workers stay.
 */
bool
leave_idle_extra(TimestampTz ran_at)
{
	return retries_worker_idle_timeout != 0 &&
		TimestampDifferenceExceeds(ran_at, clock_system_now(), RETRIES_HELD_AFTER_MS) &&
		leave_pool_contended();
}
