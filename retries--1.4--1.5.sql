/*
 * retries--1.4--1.5.sql
 *	  Upgrade script of the retries extension from 1.4 to 1.5.
 *
 * 1.5 runs what pg_cron runs: procedures and commands.
 *
 * - An annotated procedure's calls run in a process of their own, as a
 *   top-level CALL of the role (the library does that; no table changes).
 * - A command is SQL text run as a client's simple query would be, as the
 *   role that made it.  It is stored as a call of the new procedure
 *   retries.command(text), whose one argument is the text, so every table,
 *   view and function that knows calls knows commands.  Its policy is its
 *   own: a row of policy_data that is never current, made by
 *   run_command() and schedule_command() (annotate refuses
 *   retries.command).  EXECUTE on retries.command is the privilege to make
 *   commands.
 * - schedule_data.policy_id: a command schedule's own policy (NULL for a
 *   function's schedule, whose calls take the function's current policy).
 * - retries.calls and retries.schedules gain `command`.
 * - Two indexes: policy_data_commands, for run_command() to find a role's
 *   command policy; call_data_runner_held, the calls of procedures and
 *   commands held until a place in a runner is free.
 */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION retries UPDATE TO '1.5'" to load this file. \quit

-- the strongest locks first, in the order the workers' batches take them
-- (see 1.4), and with them those that a later script of the same update
-- needs (1.6 alters policy_data and call_data: a lock made stronger after
-- CREATE INDEX below took a weaker one deadlocks with the workers)
LOCK TABLE retries.policy_data, retries.call_data, retries.schedule_data
	IN ACCESS EXCLUSIVE MODE;

-- the one table that changes (workers firing schedules lock it)
ALTER TABLE retries.schedule_data ADD COLUMN policy_id integer;
COMMENT ON COLUMN retries.schedule_data.policy_id IS
	'a command schedule''s own policy (a row of policy_data); NULL: the function''s current policy';

-- a role's command policies are looked up by what they are (run_command)
CREATE INDEX policy_data_commands ON retries.policy_data (fn, annotated_by)
	WHERE NOT is_current;

-- calls of procedures and commands held until a place in a runner is
-- free (the workers let them go in turns between roles)
CREATE INDEX call_data_runner_held ON retries.call_data (scheduled_by, next_attempt)
	WHERE state = 'scheduled' AND held AND gate IS NULL AND waiting_on = 0;

CREATE PROCEDURE retries.command(command text)
AS 'MODULE_PATHNAME', 'retries_command'
LANGUAGE C;
COMMENT ON PROCEDURE retries.command(text) IS
	'stands for commands (retries.run_command) in the views; EXECUTE on it is the privilege to make them; calling it raises an error';

CREATE FUNCTION retries.run_command(command text,
									policy text DEFAULT NULL,
									retry_on text[] DEFAULT NULL,
									run_at timestamptz DEFAULT now(),
									key text DEFAULT NULL)
RETURNS bigint
AS 'MODULE_PATHNAME', 'retries_run_command'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION retries.run_command(text, text, text[], timestamptz, text) IS
	'schedule SQL text to run as the current role, as a client''s simple query (VACUUM, CREATE INDEX CONCURRENTLY, CALL ...), with its own retry policy; returns the call id';

CREATE FUNCTION retries.schedule_command(name text,
										 command text,
										 every text,
										 timezone text DEFAULT 'UTC',
										 overlap text DEFAULT 'skip',
										 catch_up interval DEFAULT '0',
										 policy text DEFAULT NULL,
										 retry_on text[] DEFAULT NULL)
RETURNS bigint
AS 'MODULE_PATHNAME', 'retries_schedule_command'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION retries.schedule_command(text, text, text, text, text, interval, text, text[]) IS
	'create or replace the current role''s schedule of that name, which runs a command every "every" (cron or an interval) with its own retry policy; returns its id';

CREATE OR REPLACE VIEW retries.calls WITH (security_barrier) AS
SELECT c.id,
	   r.fn,
	   c.args,
	   CASE WHEN c.state = 'scheduled'
				 AND c.id = ANY (CAST((SELECT retries.running_calls()) AS bigint[]))
			THEN 'running'::retries.call_state ELSE c.state END AS state,
	   c.attempts,
	   c.max_attempts,
	   c.next_attempt,
	   c.created_at,
	   c.updated_at,
	   c.scheduled_by,
	   c.key,
	   c.last_sqlstate,
	   c.last_message,
	   (SELECT s.name FROM retries.schedule_data s
		 WHERE s.id = c.schedule_id) AS schedule,
	   c.priority,
	   c.limit_key,
	   c.result,
	   CASE WHEN c.waiting_on > 0 AND c.state = 'scheduled'
			THEN ARRAY(SELECT a.after_id
						 FROM retries.call_after a
						 JOIN retries.call_data b ON b.id = a.after_id
						WHERE a.call_id = c.id AND b.state = 'scheduled'
						ORDER BY a.after_id)
			ELSE '{}'::bigint[] END AS waiting_for,
	   CASE WHEN r.fn = 'retries.command(text)'::regprocedure
			THEN c.args ->> 0 END AS command
  FROM retries.call_data c
  JOIN retries.policy_data p ON p.id = c.policy_id
  LEFT JOIN retries.function_refs r ON r.key = p.fn
 WHERE retries.visible_role(c.scheduled_by);
COMMENT ON COLUMN retries.calls.command IS
	'the SQL text of a command (retries.run_command); NULL for a call of a function or procedure';

CREATE OR REPLACE VIEW retries.schedules WITH (security_barrier) AS
SELECT s.id,
	   s.name,
	   (SELECT r.fn FROM retries.function_refs r WHERE r.key = s.fn) AS fn,
	   s.every,
	   s.args,
	   s.timezone,
	   s.overlap,
	   s.catch_up,
	   s.paused,
	   s.next_run,
	   s.last_run,
	   s.last_call,
	   (SELECT CASE WHEN c.state = 'scheduled'
						 AND c.id = ANY (CAST((SELECT retries.running_calls()) AS bigint[]))
					THEN 'running'::retries.call_state ELSE c.state END
		  FROM retries.call_data c
		 WHERE c.id = s.last_call) AS last_state,
	   s.firings,
	   s.skipped,
	   s.missed,
	   s.owner,
	   s.created_at,
	   CASE WHEN s.policy_id IS NOT NULL THEN s.args ->> 0 END AS command,
	   p.policy,
	   p.retry_on
  FROM retries.schedule_data s
  LEFT JOIN LATERAL (SELECT retries.format_policy(d.max_attempts, d.min_delay, d.max_delay) AS policy,
							d.retry_on
					   FROM retries.policy_data d
					  WHERE d.id = s.policy_id) p ON true
 WHERE retries.visible_role(s.owner);
COMMENT ON COLUMN retries.schedules.command IS
	'the SQL text of a command schedule (retries.schedule_command); NULL for a function''s';
COMMENT ON COLUMN retries.schedules.policy IS
	'a command schedule''s own retry policy, as [count] min [max]; NULL for a function''s (its current policy applies)';
COMMENT ON COLUMN retries.schedules.retry_on IS
	'a command schedule''s retry_on, normalized; NULL for a function''s';
