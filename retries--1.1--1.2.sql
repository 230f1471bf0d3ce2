/*
 * retries--1.1--1.2.sql
 *	  Upgrade script of the retries extension from 1.1 to 1.2.  CREATE
 *	  EXTENSION retries (1.2) runs retries--1.0.sql, retries--1.0--1.1.sql
 *	  and then this script, so new and upgraded databases get the same
 *	  objects by the same statements.
 *
 * 1.2 claims due calls fairly between roles: each batch of a worker first
 * takes the earliest due call of each role that has one (round robin,
 * which the index below serves: each role's earliest due call is one index
 * probe, whatever the number of other calls), then the rest earliest
 * first, so that one role's backlog of due calls cannot hold back another
 * role's by more than a batch.  The library serves a database still at
 * 1.1 too, without the fair part (it looks for the index).
 *
 * It also brings the first part of recurring schedules: next_runs(), the
 * instants at which a cron expression or an interval fires in a time zone.
 */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION retries UPDATE TO '1.2'" to load this file. \quit

-- what fair claiming looks for: each role's earliest due call
CREATE INDEX call_data_due_by_role ON retries.call_data (scheduled_by, next_attempt)
	WHERE state = 'scheduled';

-----------------------------------------------------------------------
-- Recurring schedules: their times
-----------------------------------------------------------------------

CREATE FUNCTION retries.next_runs(every text,
								  timezone text DEFAULT 'UTC',
								  after timestamptz DEFAULT pg_catalog.now(),
								  n integer DEFAULT 10)
RETURNS SETOF timestamptz
AS 'MODULE_PATHNAME', 'retries_next_runs'
LANGUAGE C STABLE STRICT PARALLEL SAFE ROWS 10;
COMMENT ON FUNCTION retries.next_runs(text, text, timestamptz, integer) IS
	'the next n instants after "after" at which a schedule of "every" (a cron expression or an interval) in the time zone would fire';
