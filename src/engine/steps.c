/*-------------------------------------------------------------------------
 *
 * steps.c
 *	  What a worker does at the top of each loop, beside its batches: fire
 *	  the due schedules (steps_fire), write function references anew
 *	  (steps_names), settle a copy of a database and arm the '@reboot'
 *	  schedules before it serves (steps_serving); and the memo a database's
 *	  workers leave each other (see "Schedules" in worker.c).
 *
 * Each step runs in a transaction of its own: an error is logged, and the
 * step is tried again later, never stopping the batches.  The state here
 * is the worker's own: when the next schedule is due, whether a queued
 * firing waits for a call, whether to look at its next loop
 * (steps_look_soon), the errors in a row, and a copy's settling.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "api/api.h"
#include "base/base.h"
#include "engine/leave.h"
#include "engine/steps.h"
#include "engine/wslot.h"
#include "flow/flow.h"
#include "schedules/schedules.h"
#include "shmem/shmem.h"
#include "tables/tables.h"

/*
 * Schedules: when the next one is due (0: none known), whether a queued
 * firing waits for a call, when the worker last looked, whether it must
 * look at its next loop, and the errors in a row
 */
static TimestampTz next_fire = 0;
static bool fire_waiting = false;
static TimestampTz last_fire_check = 0;
static bool fire_check = true;
static int	fire_errors = 0;

/*
 * When the database's work was next due as its last worker left it (on
 * demand: see "Workers on demand" in worker.c), for the first firing step
 * of a worker started for it: firings from then on are on time however
 * late, since no worker was there to see them (schedule_fire_due); 0
 * otherwise
 */
static TimestampTz fire_late_from = 0;

/*
 * While this database is a copy that is not settled yet: when it was made
 * (the calls and schedules made before it are the ones it brought), and
 * when to try to settle it again; 0 otherwise (see tables_settle_copy)
 */
static TimestampTz copy_made_at = 0;
static TimestampTz copy_settle_next = 0;

/* How often a worker tries again to settle a copy whose rows were locked */
#define COPY_SETTLE_MS			10000

/* steps_look_soon -- look at the schedules at the next loop */
void
steps_look_soon(void)
{
	fire_check = true;
}

/* steps_next_fire -- when the next schedule is due; 0 if none is known */
TimestampTz
steps_next_fire(void)
{
	return next_fire;
}

/* steps_fire_waiting -- does a queued firing wait for a call to finish? */
bool
steps_fire_waiting(void)
{
	return fire_waiting;
}

/* steps_fire_errors -- the firing steps that failed in a row */
int
steps_fire_errors(void)
{
	return fire_errors;
}

/*
 * steps_fire_late_from -- the database's work was due at 'at' when its last
 * worker left it: the first firing step fires from then on, on time
 */
void
steps_fire_late_from(TimestampTz at)
{
	fire_late_from = at;
}

/*
 * steps_copy_made_at -- when this database was made, if it is a copy not
 * settled yet; 0 otherwise
 */
TimestampTz
steps_copy_made_at(void)
{
	return copy_made_at;
}

/*
 * steps_finish_cancelled -- the n calls of 'ids' that a copy brought are
 * cancelled: what follows them is too, as after cancel() (chains.c)
 */
void
steps_finish_cancelled(int64 *ids, int n)
{
	char	   *how = palloc(Max(n, 1));

	memset(how, 'c', Max(n, 1));
	chains_calls_finished(n, ids, how, NULL);
	pfree(how);
}

/*
 * steps_fire -- fire the due schedules in a transaction of its own (see
 * schedule.c); an error is logged and tried again later, after a delay
 * that grows with the errors in a row, and never stops the batches
 */
void
steps_fire(Oid extension, bool *gated)
{
	MemoryContext oldcxt = CurrentMemoryContext;
	TimestampTz now = clock_now();

	/* the clock set back (see clock.c): the times kept are ahead of it */
	if (now < last_fire_check)
	{
		last_fire_check = 0;
		next_fire = 0;
	}
	if (!fire_check && !fire_waiting &&
		(next_fire == 0 || next_fire > now) &&
		!TimestampDifferenceExceeds(last_fire_check, now, FIRE_CHECK_MS))
		return;
	if (fire_errors > 0 &&
		!TimestampDifferenceExceeds(last_fire_check, now,
									Min(ERROR_DELAY_MS << Min(fire_errors - 1, 10),
										MAX_ERROR_DELAY_MS)))
		return;
	last_fire_check = now;
	fire_check = false;

	PG_TRY();
	{
		wslot_start_transaction();
		SPI_connect();
		PushActiveSnapshot(GetTransactionSnapshot());
		next_fire = 0;
		fire_waiting = false;
		if (wslot_lock_extension() == extension && !restore_holder() &&
			schema_retries_version() >= SCHEMA_1_2)
		{
			TimestampTz tx_now = clock_xact_now();
			TimestampTz release;

			next_fire = schedule_fire_due(tx_now, copy_made_at, fire_late_from,
										  &fire_waiting);
			release = flow_release_held(tx_now, gated);
			(void) chains_pending();
			if (release != 0 && (next_fire == 0 || release < next_fire))
				next_fire = release;
			/* calls past their event_timeout (1.6) */
			release = schema_retries_version() >= SCHEMA_1_6 ?
				events_release_timed_out(tx_now) : 0;
			if (release != 0 && (next_fire == 0 || release < next_fire))
				next_fire = release;
		}
		PopActiveSnapshot();
		SPI_finish();
		wslot_commit_transaction();
		fire_errors = 0;
		fire_late_from = 0;
	}
	PG_CATCH();
	{
		wslot_recover_from_error(oldcxt, NULL);
		fire_errors++;
		next_fire = 0;
		fire_waiting = false;
	}
	PG_END_TRY();
}

/*
 * steps_housekeeping_deferred -- do other databases wait for room in the pool
 * (leave_pool_contended)?  Then a worker's housekeeping (pruning, the refresh of
 * signatures and of stale rows) waits, up to HOUSEKEEPING_DEFER_MS since
 * the database's last, so that a visit of a database among many due at
 * once costs little more than its calls
 */
bool
steps_housekeeping_deferred(void)
{
	return retries_worker_idle_timeout != 0 && leave_pool_contended();
}

/*
 * steps_memo_read -- what the database's earlier workers did (RetriesDbMemo),
 * as it was when this worker first asked
 */
const RetriesDbMemo *
steps_memo_read(void)
{
	static RetriesDbMemo memo;
	static bool read = false;

	if (!read)
	{
		shmem_memo_read(MyDatabaseId, &memo);
		read = true;
	}
	return &memo;
}

/* steps_memo_write_pruned -- finished calls were pruned at 'at' */
void
steps_memo_write_pruned(TimestampTz at)
{
	RetriesDbMemo memo = {0};

	memo.pruned_at = at;
	shmem_memo_write(MyDatabaseId, &memo);
}

/* memo_write_armed -- the '@reboot' schedules are armed (committed) */
static void
memo_write_armed(void)
{
	RetriesDbMemo memo = {0};

	memo.armed = true;
	shmem_memo_write(MyDatabaseId, &memo);
}

/*
 * steps_names -- paused or not, at the start, after each rename that
 * committed, and every few seconds, write the function references that a
 * restore or pg_upgrade brought anew and rewrite the signatures that
 * renames changed (see names.c), in a transaction of its own;
 * an error is logged, the worker carries on, and tries again at its next
 * turn
 */
void
steps_names(Oid extension)
{
	MemoryContext oldcxt = CurrentMemoryContext;

	if (!names_refresh_due(steps_housekeeping_deferred(), HOUSEKEEPING_DEFER_MS))
		return;
	PG_TRY();
	{
		wslot_start_transaction();
		PushActiveSnapshot(GetTransactionSnapshot());
		if (wslot_lock_extension() == extension && !restore_holder())
		{
			SPI_connect();
			names_refresh();
			SPI_finish();
		}
		PopActiveSnapshot();
		wslot_commit_transaction();
		names_refresh_committed();
	}
	PG_CATCH();
	{
		wslot_recover_from_error(oldcxt, NULL);
		names_refresh_failed();
	}
	PG_END_TRY();
}

/*
 * steps_serving -- may the worker fire schedules and run calls?  Not while
 * retries.enabled is off.  The first time, in a database that is a copy of
 * another, only once it has settled the calls and schedules that the copy
 * brought (home.c), those that no other transaction holds: the others are
 * settled as the worker claims them, and it tries again now and then.  The
 * first time, too, unless an earlier worker of the database did since the
 * server started (memo_read), the schedules of '@reboot' are made due if
 * the server started since they last fired, and since they were made or
 * resumed (schedule_arm_at_start: the schedules say so, so a worker's own
 * start, or a database closed to connections and opened again, makes none
 * due twice).  On an error, logged, the worker does not serve until it tries
 * again.
 */
bool
steps_serving(Oid extension)
{
	static bool settled = false;
	static bool armed_done = false;
	MemoryContext oldcxt = CurrentMemoryContext;
	volatile bool armed = false;

	if (!retries_enabled)
		return false;
	if (settled && armed_done &&
		(copy_made_at == 0 || clock_system_now() < copy_settle_next))
		return true;
	PG_TRY();
	{
		TimestampTz made_at = 0;

		wslot_start_transaction();
		PushActiveSnapshot(GetTransactionSnapshot());
		if (wslot_lock_extension() == extension)
		{
			int64	   *ids;
			int			n;

			SPI_connect();
			made_at = tables_settle_copy(schema_retries_version(), &ids, &n);
			steps_finish_cancelled(ids, n);
			/* not while a restore loads the schedules: after it (t/060 3) */
			if (steps_memo_read()->armed)
				armed_done = true;
			else if (!armed_done && !restore_holder())
			{
				schedule_arm_at_start();
				armed = true;
			}
			SPI_finish();
		}
		PopActiveSnapshot();
		wslot_commit_transaction();
		if (armed)
		{
			memo_write_armed();
			armed_done = true;
		}
		if (made_at == 0)
			tables_forget_made_database(MyDatabaseId);
		copy_made_at = made_at;
		copy_settle_next = TimestampTzPlusMilliseconds(clock_system_now(), COPY_SETTLE_MS);
		settled = true;
	}
	PG_CATCH();
	{
		wslot_recover_from_error(oldcxt, NULL);
	}
	PG_END_TRY();
	return settled;
}
