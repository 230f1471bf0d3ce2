/*-------------------------------------------------------------------------
 *
 * time_cap.c
 *	  A time limit that cancels code, then ends the process if the code
 *	  goes on: an attempt's (execute.c) and a runner's (runner.c).
 *
 * When the limit passes, 'cancel' runs (it asks for a cancel, as a
 * statement timeout does); code may trap that cancel, so if it is still
 * running grace_ms after the cancel, 'kill' runs (it asks for the end of
 * the process, as SIGTERM does).  The grace counts from the moment the
 * cancel was made, not from the moment it was due: a process that did not
 * run for a while (a loaded machine, a process stopped and continued) gets
 * both timers' signal at once, late, and must have its grace all the same,
 * or code that never trapped anything ends with the process.  So the kill
 * is a check that repeats every KILL_CHECK_MS from the moment the limit
 * plus the grace is due, and acts only once the cancel is grace_ms old.
 *
 * One limit per process: the worker arms it around each attempt and hook,
 * a runner once for its run.  The actions run in the signal handler.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/timeout.h"
#include "utils/timestamp.h"

#include "base/base.h"
#include "engine/time_cap.h"

/* How often the kill's check looks again, once it is due */
#define KILL_CHECK_MS	100

static TimeoutId cancel_id;
static TimeoutId kill_check_id;
static TimeCapAction cancel_action;
static TimeCapAction kill_action;
static int	grace;

/*
 * When the cancel was made; 0 while it has not been.  Written in the
 * SIGALRM handler and by time_cap_arm() while no timer of the limit is
 * armed.
 */
static volatile TimestampTz cancelled_at = 0;

/* cancel_handler -- the limit has passed: cancel */
static void
cancel_handler(void)
{
	cancelled_at = clock_system_now();
	cancel_action();
}

/* kill_check_handler -- end the process once the cancel is grace old */
static void
kill_check_handler(void)
{
	if (cancelled_at != 0 &&
		TimestampDifferenceExceeds(cancelled_at, clock_system_now(), grace))
		kill_action();
}

/*
 * time_cap_init -- register the limit's timers and actions (once per
 * process)
 */
void
time_cap_init(TimeCapAction cancel, TimeCapAction kill)
{
	cancel_action = cancel;
	kill_action = kill;
	cancel_id = RegisterTimeout(USER_TIMEOUT, cancel_handler);
	kill_check_id = RegisterTimeout(USER_TIMEOUT, kill_check_handler);
}

/*
 * time_cap_arm -- cancel in 'ms', and end the process if the code still
 * runs 'grace_ms' after that cancel
 */
void
time_cap_arm(int ms, int grace_ms)
{
	TimestampTz now = clock_system_now();

	ms = Min(ms, PG_INT32_MAX - grace_ms);
	cancelled_at = 0;
	grace = grace_ms;
	enable_timeout_after(cancel_id, ms);
	enable_timeout_every(kill_check_id,
						 TimestampTzPlusMilliseconds(now, (int64) ms + grace_ms),
						 KILL_CHECK_MS);
}

/* time_cap_disarm -- stop both */
void
time_cap_disarm(void)
{
	disable_timeout(cancel_id, false);
	disable_timeout(kill_check_id, false);
}
