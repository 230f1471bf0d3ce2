/*
 * retries--1.6--1.7.sql
 *	  Upgrade script of the retries extension from 1.6 to 1.7.
 *
 * 1.7 runs calls beside their data on Citus (doc/operations.md, "Running
 * on Citus"; the design: doc/architecture.md, "On Citus").
 *
 * - retries.call(..., colocate_with, shard_key) stores the call on, and
 *   runs it on, the node holding that value's shard of a distributed
 *   table.  The call travels in the caller's transaction as an INSERT into
 *   a mailbox table distributed beside that table (colocated with it); a
 *   trigger on the mailbox's shard, on the node holding it, makes the call
 *   there with retries.call() as the inserting role, and removes the row.
 * - retries.citus_setup() gives each node's call ids a range of their
 *   own (the node's group id in the top bits) and makes the mailbox of a
 *   distributed table's colocation group.
 * - Calls of a priority below 0 take their role's turn when the role has
 *   no call of 0 or above due (1.6: only when no role had one): another
 *   role's stream of due calls cannot hold them back.  Index
 *   call_data_low_by_role finds each role's earliest such call, as
 *   call_data_due_by_role does for the others.
 * - Events and debounced keys of different names never wait for each
 *   other.  In 1.6 emit(), a call made with on_event and a call made with
 *   debounce locked one of 16 advisory locks per role, by the name's hash,
 *   until the transaction ended: two transactions that took two disjoint
 *   names each, in opposite orders, deadlocked whenever the names shared
 *   locks.  From 1.7 each name has a row of its own, locked as a row, so
 *   that only the same name waits, and a transaction that holds many names
 *   takes no room in the server's lock table: an event's row of event_data,
 *   now one per event (unique; a call made to wait for an event not
 *   emitted makes it empty, emitted_at NULL, and locks it FOR SHARE; an
 *   emit writes it as an upsert), and a debounced key's row of name_lock
 *   (locked as an update).
 * - A key_window spaces the deliveries of a key's calls, not only their
 *   creation: an attempt of a call of a key starts only when no other call
 *   of the key is running and at least the window has passed since the
 *   latest attempt of the key's other calls began (a call that may not
 *   start yet is put off, uncharged: src/flow/key_window.c).  The window a
 *   call was made with is kept in call_data.key_window, and a key's window
 *   is measured from the statement that made its call (1.6: its
 *   transaction's start).
 * - retries.call(..., debounce_max) and annotate(..., debounce_max), its
 *   calls' default (policy_data.debounce_max): a debounced burst still
 *   runs at most that long after its first call.
 * - retries.home: a copy of a database (CREATE DATABASE ... TEMPLATE) does
 *   not run the calls and schedules it brought (see below).
 *
 * And the database owner may dump and restore her database with the
 * extension in it (doc/operations.md, "Restore from pg_dump").
 */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION retries UPDATE TO '1.7'" to load this file. \quit

/*
 * The database the extension was made in.  CREATE DATABASE ... TEMPLATE
 * copies the extension's tables with every role's scheduled calls and
 * schedules, into a database whose settings are its new owner's: the
 * first worker of a copy cancels the calls and pauses the schedules that
 * it brought, before it runs anything (src/tables/home.c).  Not dumped: a
 * restore's CREATE EXTENSION writes the new database's.  pg_upgrade keeps
 * database OIDs.
 */
CREATE TABLE retries.home (datid oid NOT NULL);
INSERT INTO retries.home
SELECT oid FROM pg_catalog.pg_database WHERE datname OPERATOR(pg_catalog.=) pg_catalog.current_database();
COMMENT ON TABLE retries.home IS
	'the OID of the database the extension was made in; another in a copy of it (CREATE DATABASE ... TEMPLATE) until its workers have cancelled the calls and paused the schedules the copy brought';

CREATE FUNCTION retries.call_outcome()
RETURNS text
AS 'MODULE_PATHNAME', 'retries_call_outcome'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;
COMMENT ON FUNCTION retries.call_outcome() IS
	'what the latest retries.call() of this transaction by the current role did: made (a new call), deduplicated (returned its key''s call) or debounced (moved its key''s call); NULL before any, after one rolled back, or for a call made on another Citus node';

-- the most a debounced burst of the function's calls waits, as a default
ALTER TABLE retries.policy_data ADD COLUMN debounce_max interval;
COMMENT ON COLUMN retries.policy_data.debounce_max IS
	'the debounce_max of the function''s calls that debounce and give none (retries.annotate); NULL: a burst waits as long as it lasts';

CREATE OR REPLACE VIEW retries.policies WITH (security_barrier) AS
SELECT r.fn,
	   pr.proowner::regrole AS owner,
	   p.max_attempts,
	   p.min_delay,
	   p.max_delay,
	   p.multiplier,
	   p.jitter,
	   p.retry_on,
	   p.timeout,
	   (SELECT h.fn FROM retries.function_refs h
		 WHERE h.key = p.on_exhausted) AS on_exhausted,
	   (SELECT h.fn FROM retries.function_refs h
		 WHERE h.key = p.delay_fn) AS delay_fn,
	   retries.format_policy(p.max_attempts, p.min_delay, p.max_delay) AS policy,
	   f.max_running,
	   f.max_running_per_key,
	   f.rate,
	   coalesce(f.paused, false) AS paused,
	   p.notify,
	   p.key_window,
	   p.debounce_max
  FROM retries.policy_data p
  JOIN retries.function_refs r ON r.key = p.fn
  JOIN pg_catalog.pg_proc pr ON pr.oid = r.fn
  LEFT JOIN retries.flow_data f ON f.fn = p.fn
 WHERE p.is_current
   AND (retries.visible_role(pr.proowner::regrole)
		OR (pg_catalog.has_schema_privilege(pr.pronamespace, 'USAGE')
			AND pg_catalog.has_function_privilege(pr.oid, 'EXECUTE')));
COMMENT ON COLUMN retries.policies.debounce_max IS
	'the debounce_max of its calls that debounce and give none (retries.annotate); NULL: a burst waits as long as it lasts';

-- the window that spaces the deliveries of a key's calls (see above)
ALTER TABLE retries.call_data ADD COLUMN key_window interval;
COMMENT ON COLUMN retries.call_data.key_window IS
	'with key: the key_window the call was made with (its own or its function''s); its attempts start at least that long after those of the key''s other calls began, and never while one runs (NULL: none)';

-- what ran each attempt: the process, and a command's completion tag
ALTER TABLE retries.attempt_data ADD COLUMN command_tag text, ADD COLUMN pid integer;
COMMENT ON COLUMN retries.attempt_data.command_tag IS
	'of a procedure''s or command''s attempt that succeeded: its last statement''s completion tag, as psql shows it (INSERT 0 3, VACUUM)';
COMMENT ON COLUMN retries.attempt_data.pid IS
	'the process that ran the attempt: a worker, or a procedure''s or command''s runner (NULL if not known)';
CREATE OR REPLACE VIEW retries.attempts WITH (security_barrier) AS
SELECT a.call_id,
	   a.attempt,
	   a.started_at,
	   a.finished_at,
	   a.outcome,
	   a.sqlstate,
	   a.message,
	   a.detail,
	   a.hint,
	   a.context,
	   a.next_delay,
	   a.on_exhausted_error,
	   a.command_tag,
	   a.pid
  FROM retries.attempt_data a
  JOIN retries.call_data c ON c.id = a.call_id
 WHERE retries.visible_role(c.scheduled_by);

-- the claimable calls of a priority other than 0 by due time: whether one
-- is due, and when the next is, without a walk of every priority that one
-- has (see src/engine/claim.c)
CREATE INDEX call_data_prioritized_due ON retries.call_data (next_attempt)
	WHERE state = 'scheduled' AND NOT held AND priority <> 0;

-- each role's calls of a priority other than 0, by priority: a role's
-- claim walks its own priorities only (see src/engine/claim.c)
CREATE INDEX call_data_prioritized_by_role ON retries.call_data
	(scheduled_by, priority, next_attempt)
	WHERE state = 'scheduled' AND NOT held AND priority <> 0;

-- each role's earliest due call of a priority below 0 (see src/engine/claim.c)
CREATE INDEX call_data_low_by_role ON retries.call_data (scheduled_by, next_attempt)
	WHERE state = 'scheduled' AND NOT held AND priority < 0;

CREATE FUNCTION retries.grant_as_user(stmt text)
RETURNS void
AS 'MODULE_PATHNAME', 'retries_grant_as_user'
LANGUAGE C VOLATILE STRICT;
REVOKE ALL ON FUNCTION retries.grant_as_user(text) FROM PUBLIC;
CREATE FUNCTION retries.copy_grants(old regprocedure, new regprocedure)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	g record;
BEGIN
	IF NOT EXISTS (SELECT FROM pg_proc p,
					   aclexplode(coalesce(p.proacl, acldefault('f', p.proowner))) a
				    WHERE p.oid = old AND a.grantee = 0 AND a.privilege_type = 'EXECUTE') THEN
		PERFORM retries.grant_as_user(format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', new));
	END IF;
	FOR g IN
		SELECT a.grantee, a.is_grantable
		  FROM pg_proc p,
			   aclexplode(coalesce(p.proacl, acldefault('f', p.proowner))) a
		 WHERE p.oid = old AND a.privilege_type = 'EXECUTE'
		   AND a.grantee <> p.proowner AND a.grantee <> 0
	LOOP
		PERFORM retries.grant_as_user(format('GRANT EXECUTE ON FUNCTION %s TO %s%s', new,
					   g.grantee::regrole::text,
					   CASE WHEN g.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END));
	END LOOP;
END
$$;

ALTER FUNCTION retries.call(regprocedure, jsonb, timestamptz, text, integer, text, bigint[],
							 interval, interval, text, interval)
	RENAME TO call_1_6;
CREATE FUNCTION retries.call(fn regprocedure,
							 args jsonb DEFAULT '[]',
							 run_at timestamptz DEFAULT pg_catalog.now(),
							 key text DEFAULT NULL,
							 priority integer DEFAULT 0,
							 limit_key text DEFAULT NULL,
							 after bigint[] DEFAULT NULL,
							 key_window interval DEFAULT NULL,
							 debounce interval DEFAULT NULL,
							 on_event text DEFAULT NULL,
							 event_timeout interval DEFAULT NULL,
							 colocate_with regclass DEFAULT NULL,
							 shard_key text DEFAULT NULL,
							 debounce_max interval DEFAULT NULL)
RETURNS bigint
AS 'MODULE_PATHNAME', 'retries_call'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION retries.call(regprocedure, jsonb, timestamptz, text, integer, text, bigint[],
								 interval, interval, text, interval, regclass, text, interval) IS
	'schedule a call of an annotated function at run_at, as the current role; a key dedupes (within key_window) and spaces its calls'' starts by it; debounce moves the key''s call that has not started (up to debounce_max after the first); on_event waits for the role''s event (up to event_timeout); on Citus, colocate_with and shard_key make and run it on the node holding that value''s shard; returns the call id';
SELECT retries.copy_grants('retries.call_1_6(regprocedure, jsonb, timestamptz, text, integer, text, bigint[], interval, interval, text, interval)',
						   'retries.call(regprocedure, jsonb, timestamptz, text, integer, text, bigint[], interval, interval, text, interval, regclass, text, interval)');
DROP FUNCTION retries.call_1_6(regprocedure, jsonb, timestamptz, text, integer, text, bigint[],
							   interval, interval, text, interval);

ALTER FUNCTION retries.annotate(regprocedure, text, integer, interval, interval, float8, text,
								text[], interval, regprocedure, regprocedure, integer, integer,
								text, boolean, interval)
	RENAME TO annotate_1_6;
CREATE FUNCTION retries.annotate(fn regprocedure,
								 policy text DEFAULT NULL,
								 max_attempts integer DEFAULT NULL,
								 min_delay interval DEFAULT NULL,
								 max_delay interval DEFAULT NULL,
								 multiplier float8 DEFAULT 2.0,
								 jitter text DEFAULT 'none',
								 retry_on text[] DEFAULT '{RT}',
								 timeout interval DEFAULT NULL,
								 on_exhausted regprocedure DEFAULT NULL,
								 delay_fn regprocedure DEFAULT NULL,
								 max_running integer DEFAULT NULL,
								 max_running_per_key integer DEFAULT NULL,
								 rate text DEFAULT NULL,
								 notify boolean DEFAULT false,
								 key_window interval DEFAULT NULL,
								 debounce_max interval DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'retries_annotate'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION retries.annotate(regprocedure, text, integer, interval, interval,
									 float8, text, text[], interval, regprocedure,
									 regprocedure, integer, integer, text, boolean, interval,
									 interval) IS
	'give a function a retry policy ''[count] min [max]'', which lets its calls be scheduled, and at most max_running of its attempts at once, max_running_per_key of one limit_key, and starts at most at rate (''100/1s''); with notify, each finished call sends NOTIFY retries_finished; key_window and debounce_max are its calls'' defaults';
SELECT retries.copy_grants('retries.annotate_1_6(regprocedure, text, integer, interval, interval, float8, text, text[], interval, regprocedure, regprocedure, integer, integer, text, boolean, interval)',
						   'retries.annotate(regprocedure, text, integer, interval, interval, float8, text, text[], interval, regprocedure, regprocedure, integer, integer, text, boolean, interval, interval)');
DROP FUNCTION retries.annotate_1_6(regprocedure, text, integer, interval, interval,
								   float8, text, text[], interval, regprocedure, regprocedure,
								   integer, integer, text, boolean, interval);

/*
 * The management functions of schedules, of a schedule's id: a role's own,
 * or any role's for retries_admin (who may then manage a schedule whose
 * name two roles use); with the privileges of the functions of a name
 */
CREATE FUNCTION retries.unschedule(id bigint)
RETURNS boolean
AS 'MODULE_PATHNAME', 'retries_unschedule'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION retries.unschedule(bigint) IS
	'drop the schedule of that id (retries.schedules.id); the calls it fired stay';
CREATE FUNCTION retries.pause_schedule(id bigint)
RETURNS boolean
AS 'MODULE_PATHNAME', 'retries_pause_schedule'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION retries.pause_schedule(bigint) IS
	'stop the firings of the schedule of that id until resume_schedule: true if it was not paused';
CREATE FUNCTION retries.resume_schedule(id bigint)
RETURNS boolean
AS 'MODULE_PATHNAME', 'retries_resume_schedule'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION retries.resume_schedule(bigint) IS
	'let the paused schedule of that id fire again, from its next time after now: true if it was paused';
CREATE FUNCTION retries.trigger(id bigint)
RETURNS bigint
AS 'MODULE_PATHNAME', 'retries_trigger'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION retries.trigger(bigint) IS
	'fire the schedule of that id once now, whatever its overlap and pause; its next_run is unchanged; returns the call id';
-- a NULL name is refused (22004), as every required argument is, not
-- answered with NULL
ALTER FUNCTION retries.unschedule(text) CALLED ON NULL INPUT;
ALTER FUNCTION retries.pause_schedule(text) CALLED ON NULL INPUT;
ALTER FUNCTION retries.resume_schedule(text) CALLED ON NULL INPUT;
ALTER FUNCTION retries.trigger(text) CALLED ON NULL INPUT;
SELECT retries.copy_grants(('retries.' || f || '(text)')::pg_catalog.regprocedure,
						   ('retries.' || f || '(bigint)')::pg_catalog.regprocedure)
  FROM unnest(ARRAY['unschedule', 'pause_schedule', 'resume_schedule', 'trigger']) f;

-- a schedule changed in part, with the privileges of retries.schedule()
CREATE FUNCTION retries.alter_schedule(name text,
									   every text DEFAULT NULL,
									   args jsonb DEFAULT NULL,
									   timezone text DEFAULT NULL,
									   overlap text DEFAULT NULL,
									   catch_up interval DEFAULT NULL)
RETURNS bigint
AS 'MODULE_PATHNAME', 'retries_alter_schedule'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION retries.alter_schedule(text, text, jsonb, text, text, interval) IS
	'change the current role''s schedule of that name in what is given (not NULL), as retries.schedule would replace it; returns its id';
SELECT retries.copy_grants('retries.schedule(text, regprocedure, text, jsonb, text, text, interval)',
						   'retries.alter_schedule(text, text, jsonb, text, text, interval)');

/*
 * Commands that run in another database of the cluster (src/api/command.c):
 * calls of retries.command_in(text, name, name) (the text, the database,
 * and its owner when the command was made), whose EXECUTE, which PUBLIC
 * lacks, is the privilege to make them, beside retries.command's;
 * run_command() and schedule_command() gain database, with the privileges
 * they had
 */
CREATE PROCEDURE retries.command_in(command text, database name, owner name)
AS 'MODULE_PATHNAME', 'retries_command'
LANGUAGE C;
REVOKE ALL ON PROCEDURE retries.command_in(text, name, name) FROM PUBLIC;
COMMENT ON PROCEDURE retries.command_in(text, name, name) IS
	'stands for commands that run in another database (run_command and schedule_command with database) in the views: its arguments are the text, the database and the database''s owner; EXECUTE on it, which PUBLIC lacks, is the privilege to make them; calling it raises an error';

-- retries.command(text) paused holds every command: those made from now on
-- in another database too
SELECT retries.pause('retries.command_in(text,name,name)'::pg_catalog.regprocedure)
  FROM retries.flow_data f
  JOIN retries.function_refs r ON r.key OPERATOR(pg_catalog.=) f.fn
 WHERE r.fn OPERATOR(pg_catalog.=) 'retries.command(text)'::pg_catalog.regprocedure
   AND f.paused;

ALTER FUNCTION retries.run_command(text, text, text[], timestamptz, text)
	RENAME TO run_command_1_6;
CREATE FUNCTION retries.run_command(command text,
									policy text DEFAULT NULL,
									retry_on text[] DEFAULT NULL,
									run_at timestamptz DEFAULT now(),
									key text DEFAULT NULL,
									database name DEFAULT NULL)
RETURNS bigint
AS 'MODULE_PATHNAME', 'retries_run_command'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION retries.run_command(text, text, text[], timestamptz, text, name) IS
	'schedule SQL text to run as the current role, as a client''s simple query (VACUUM, CREATE INDEX CONCURRENTLY, CALL ...), in this database or the one named, with its own retry policy; returns the call id';
SELECT retries.copy_grants('retries.run_command_1_6(text, text, text[], timestamptz, text)',
						   'retries.run_command(text, text, text[], timestamptz, text, name)');
DROP FUNCTION retries.run_command_1_6(text, text, text[], timestamptz, text);

ALTER FUNCTION retries.schedule_command(text, text, text, text, text, interval, text, text[])
	RENAME TO schedule_command_1_6;
CREATE FUNCTION retries.schedule_command(name text,
										 command text,
										 every text,
										 timezone text DEFAULT 'UTC',
										 overlap text DEFAULT 'skip',
										 catch_up interval DEFAULT '0',
										 policy text DEFAULT NULL,
										 retry_on text[] DEFAULT NULL,
										 database name DEFAULT NULL)
RETURNS bigint
AS 'MODULE_PATHNAME', 'retries_schedule_command'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION retries.schedule_command(text, text, text, text, text, interval, text, text[], name) IS
	'create or replace the current role''s schedule of that name, which runs a command every "every" (cron or an interval), in this database or the one named, with its own retry policy; returns its id';
SELECT retries.copy_grants('retries.schedule_command_1_6(text, text, text, text, text, interval, text, text[])',
						   'retries.schedule_command(text, text, text, text, text, interval, text, text[], name)');
DROP FUNCTION retries.schedule_command_1_6(text, text, text, text, text, interval, text, text[]);

-- the views show where a command runs
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
	   CASE WHEN r.fn IN ('retries.command(text)'::regprocedure,
						  'retries.command_in(text,name,name)'::regprocedure)
			THEN c.args ->> 0 END AS command,
	   CASE WHEN c.event_wait AND c.state = 'scheduled'
			THEN c.on_event END AS waiting_for_event,
	   CASE WHEN r.fn = 'retries.command_in(text,name,name)'::regprocedure
			THEN (c.args ->> 1)::name END AS database
  FROM retries.call_data c
  JOIN retries.policy_data p ON p.id = c.policy_id
  LEFT JOIN retries.function_refs r ON r.key = p.fn
 WHERE retries.visible_role(c.scheduled_by);
COMMENT ON COLUMN retries.calls.command IS
	'the SQL text of a command (retries.run_command); NULL for a call of a function or procedure';
COMMENT ON COLUMN retries.calls.database IS
	'the database a command runs in, if not this one (run_command''s database); NULL otherwise';

/*
 * retries.calls, newest first: a page of the newest calls (a LIMIT, with
 * no ORDER BY of its own) reads only the rows it shows, by the primary
 * key.  retries.calls is a security barrier, planned apart from the query
 * that reads it: its rows all come and are sorted before a LIMIT takes 50
 * (two seconds for a role with a million calls).  The columns are
 * retries.calls' (t/013 checks that they stay alike).
 */
CREATE VIEW retries.recent_calls WITH (security_barrier) AS
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
	   CASE WHEN r.fn IN ('retries.command(text)'::regprocedure,
						  'retries.command_in(text,name,name)'::regprocedure)
			THEN c.args ->> 0 END AS command,
	   CASE WHEN c.event_wait AND c.state = 'scheduled'
			THEN c.on_event END AS waiting_for_event,
	   CASE WHEN r.fn = 'retries.command_in(text,name,name)'::regprocedure
			THEN (c.args ->> 1)::name END AS database
  FROM retries.call_data c
  JOIN retries.policy_data p ON p.id = c.policy_id
  LEFT JOIN retries.function_refs r ON r.key = p.fn
 WHERE retries.visible_role(c.scheduled_by)
 ORDER BY c.id DESC;
COMMENT ON VIEW retries.recent_calls IS
	'retries.calls, newest first: SELECT ... LIMIT n, without ORDER BY, reads only the n newest calls by index';
GRANT SELECT ON retries.recent_calls TO PUBLIC;

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
	   p.retry_on,
	   CASE WHEN s.policy_id IS NOT NULL THEN (s.args ->> 1)::name END AS database
  FROM retries.schedule_data s
  LEFT JOIN LATERAL (SELECT retries.format_policy(d.max_attempts, d.min_delay, d.max_delay) AS policy,
							d.retry_on
					   FROM retries.policy_data d
					  WHERE d.id = s.policy_id) p ON true
 WHERE retries.visible_role(s.owner);
COMMENT ON COLUMN retries.schedules.database IS
	'the database a command schedule runs its command in, if not this one (schedule_command''s database); NULL otherwise';

DROP FUNCTION retries.copy_grants(regprocedure, regprocedure);
DROP FUNCTION retries.grant_as_user(text);

/*
 * The trigger of the mailboxes: before the insert, it makes the call (as
 * the inserting role) and gives the row its id, which the INSERT returns;
 * after it, it deletes the row (src/api/colocate.c).
 */
CREATE FUNCTION retries.mailbox_deliver()
RETURNS trigger
AS 'MODULE_PATHNAME', 'retries_mailbox_deliver'
LANGUAGE C;
-- a trigger of a table of a role's own would make calls as that role
-- anyway; the function refuses any table but a mailbox all the same
REVOKE ALL ON FUNCTION retries.mailbox_deliver() FROM PUBLIC;
COMMENT ON FUNCTION retries.mailbox_deliver() IS
	'trigger of the Citus mailboxes (retries.call_mailbox_N): makes the call on the node holding the shard, as the inserting role';

CREATE FUNCTION retries.citus_id_range()
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	g bigint;
	lo bigint;
	last bigint;
BEGIN
	IF pg_catalog.to_regclass('pg_catalog.pg_dist_local_group') IS NULL THEN
		RAISE EXCEPTION USING ERRCODE = '55000',
			MESSAGE = 'retries.citus_id_range() needs Citus',
			HINT = 'Run CREATE EXTENSION citus first.';
	END IF;
	SELECT groupid INTO g FROM pg_catalog.pg_dist_local_group;
	IF g < 0 OR g >= 32767 THEN
		RAISE EXCEPTION USING ERRCODE = '55000',
			MESSAGE = format('node group %s has no range of call ids', g),
			HINT = 'A range is kept for each of the node groups 0 to 32766.';
	END IF;
	lo := (g << 48) + 1;
	SELECT last_value INTO last FROM retries.call_data_id_seq;
	EXECUTE format('ALTER SEQUENCE retries.call_data_id_seq MINVALUE %s MAXVALUE %s START WITH %s%s',
				   lo, ((g + 1) << 48) - 1, lo,
				   CASE WHEN last < lo THEN format(' RESTART WITH %s', lo) ELSE '' END);
END
$$;
REVOKE ALL ON FUNCTION retries.citus_id_range() FROM PUBLIC;
COMMENT ON FUNCTION retries.citus_id_range() IS
	'on a Citus node: give this node''s call ids their range (group id times 2^48 and up); retries.citus_setup() runs it on every node';

/*
 * What the coordinator forwards to the other nodes (annotate, unannotate,
 * pause, resume: src/base/citus.c) and citus_setup()'s replay of its
 * policies name their function through this check, so that a function of
 * the same signature owned by another role on a node (made there, or with
 * citus.enable_ddl_propagation off) is not given a policy or a pause that
 * its owner did not choose, whoever calls (a superuser too).  Any role may
 * run it (it reads pg_proc, as any role may).
 */
CREATE FUNCTION retries.citus_owned(fn regprocedure, owner regrole)
RETURNS regprocedure
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	here regrole;
BEGIN
	SELECT proowner::regrole INTO here FROM pg_proc WHERE oid = fn;
	IF here IS DISTINCT FROM owner THEN
		RAISE EXCEPTION USING ERRCODE = '42501',
			MESSAGE = format('function %s is owned by role %s on this node, not by role %s as on the coordinator',
							 fn, here, owner),
			HINT = 'Give the function the same owner on every node, or unannotate it on the coordinator.';
	END IF;
	RETURN fn;
END
$$;
COMMENT ON FUNCTION retries.citus_owned(regprocedure, regrole) IS
	'on a Citus node: fn, if owner owns it here, else 42501 (what the coordinator forwards names its function through it)';

/*
 * Run a command on every other node with Citus's metadata, in the
 * caller's transaction (Citus's two-phase commit): citus_setup()'s replay,
 * all nodes or none
 */
CREATE FUNCTION retries.citus_forward(command text)
RETURNS void
AS 'MODULE_PATHNAME', 'retries_citus_forward'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
REVOKE ALL ON FUNCTION retries.citus_forward(text) FROM PUBLIC;
COMMENT ON FUNCTION retries.citus_forward(text) IS
	'on a Citus coordinator: run command on every other node with metadata, as the current role, in this transaction (superusers only)';

CREATE FUNCTION retries.citus_setup(colocate_with regclass DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
-- the replay's values, written the same whatever the caller's settings
SET extra_float_digits = 3
SET IntervalStyle = postgres
SET DateStyle = 'ISO, MDY'
AS $$
DECLARE
	node record;
	sync text;
	msg text;
	colocation integer;
	keytype text;
	mailbox text;
BEGIN
	IF pg_catalog.to_regclass('pg_catalog.pg_dist_partition') IS NULL THEN
		RAISE EXCEPTION USING ERRCODE = '55000',
			MESSAGE = 'retries.citus_setup() needs Citus',
			HINT = 'Run CREATE EXTENSION citus first.';
	END IF;
	FOR node IN
		SELECT * FROM pg_catalog.run_command_on_all_nodes('SELECT retries.citus_id_range()')
	LOOP
		IF NOT node.success THEN
			RAISE EXCEPTION USING ERRCODE = '55000',
				MESSAGE = format('could not give node %s its range of call ids: %s',
								 node.nodeid, node.result),
				HINT = 'Install retries on every node (CREATE EXTENSION on the coordinator does so once the nodes are added).';
		END IF;
	END LOOP;
	-- the coordinator's policies and pauses, to every worker node (one added
	-- since, too): annotate, unannotate, pause and resume made here reach
	-- only the nodes that were there when they were made.  One statement (a
	-- row of VALUES per function, run in order), run on every node in this
	-- transaction: all nodes take it, or none.  The policy as stored: its
	-- count, min_delay and max_delay as such (a policy text cannot say one
	-- attempt, nor leave nothing to retries.default_policy)
	SELECT 'SELECT pg_catalog.count(*) FROM (VALUES '
		   || pg_catalog.string_agg(pg_catalog.format(
			 '(retries.annotate(fn => retries.citus_owned(%1$L, %2$L), policy => %3$L,'
			 ' max_attempts => %17$L::pg_catalog.int4, min_delay => %18$L::pg_catalog.interval,'
			 ' max_delay => %19$L::pg_catalog.interval,'
			 ' multiplier => %4$L::pg_catalog.float8, jitter => %5$L, retry_on => %6$L::pg_catalog.text[],'
			 ' timeout => %7$L::pg_catalog.interval, on_exhausted => %8$L::pg_catalog.regprocedure,'
			 ' delay_fn => %9$L::pg_catalog.regprocedure, max_running => %10$L::pg_catalog.int4,'
			 ' max_running_per_key => %11$L::pg_catalog.int4, rate => %12$L, notify => %13$L::pg_catalog.bool,'
			 ' key_window => %14$L::pg_catalog.interval, debounce_max => %15$L::pg_catalog.interval),'
			 ' retries.%16$s(retries.citus_owned(%1$L, %2$L)))',
			 p.fn, p.owner, retries.format_policy(NULL, p.min_delay, NULL), p.multiplier,
			 p.jitter, p.retry_on, p.timeout, p.on_exhausted, p.delay_fn, p.max_running,
			 p.max_running_per_key, p.rate, p.notify, p.key_window, p.debounce_max,
			 CASE WHEN p.paused THEN 'pause' ELSE 'resume' END, p.max_attempts, p.min_delay,
			 p.max_delay), ', ')
		   || ') v'
	  INTO sync
	  FROM retries.policies p;
	IF sync IS NOT NULL THEN
		BEGIN
			PERFORM retries.citus_forward(sync);
		EXCEPTION WHEN OTHERS THEN
			GET STACKED DIAGNOSTICS msg = MESSAGE_TEXT;
			RAISE EXCEPTION USING ERRCODE = '55000',
				MESSAGE = format('could not give the worker nodes the policies of the coordinator: %s', msg),
				HINT = 'Each function annotated on the coordinator must exist on every node with the same owner (Citus propagates CREATE FUNCTION made on the coordinator); no node took any of them.';
		END;
	END IF;
	IF colocate_with IS NULL THEN
		RETURN;
	END IF;
	SELECT p.colocationid, format_type(a.atttypid, a.atttypmod)
	  INTO colocation, keytype
	  FROM pg_dist_partition p
	  JOIN pg_attribute a ON a.attrelid = p.logicalrelid
		   AND a.attname = column_to_column_name(p.logicalrelid, p.partkey)
	 WHERE p.logicalrelid = colocate_with AND p.partmethod = 'h';
	IF NOT FOUND THEN
		RAISE EXCEPTION USING ERRCODE = '22023',
			MESSAGE = format('colocate_with: table %s is not a hash-distributed table', colocate_with),
			HINT = 'Give a table made with create_distributed_table().';
	END IF;
	mailbox := format('retries.call_mailbox_%s', colocation);
	IF pg_catalog.to_regclass(mailbox) IS NOT NULL THEN
		RETURN;
	END IF;
	EXECUTE format('CREATE TABLE %s (shard_key %s NOT NULL, fn text NOT NULL, args jsonb NOT NULL,'
				   ' run_at timestamptz NOT NULL, key text, priority integer NOT NULL,'
				   ' limit_key text, after bigint[], key_window interval, debounce interval,'
				   ' on_event text, event_timeout interval, id bigint, debounce_max interval)',
				   mailbox, keytype);
	PERFORM create_distributed_table(mailbox, 'shard_key', colocate_with => colocate_with::text);
	SET LOCAL citus.enable_unsafe_triggers = on;
	EXECUTE format('CREATE TRIGGER deliver BEFORE INSERT ON %s'
				   ' FOR EACH ROW EXECUTE FUNCTION retries.mailbox_deliver()', mailbox);
	EXECUTE format('CREATE TRIGGER delivered AFTER INSERT ON %s'
				   ' FOR EACH ROW EXECUTE FUNCTION retries.mailbox_deliver()', mailbox);
	-- the INSERT returns the id: SELECT on that column (no row outlives its statement)
	EXECUTE format('GRANT INSERT, SELECT (id) ON %s TO PUBLIC', mailbox);
	EXECUTE format('COMMENT ON TABLE %s IS %L', mailbox,
				   format('mailbox of retries.call(colocate_with => ...) for colocation group %s (always empty)',
						  colocation));
END
$$;
REVOKE ALL ON FUNCTION retries.citus_setup(regclass) FROM PUBLIC;
COMMENT ON FUNCTION retries.citus_setup(regclass) IS
	'on a Citus coordinator: give every node''s call ids a range of their own, and every worker node the coordinator''s policies and pauses; with colocate_with, make the mailbox through which retries.call(colocate_with => ...) reaches the nodes of that table''s shards';

/*
 * wait, result and cancel of a call on another Citus node: the function
 * forwards them there (src/api/colocate.c) to this one, which runs them
 * as the role and hands back the value, or the error with its SQLSTATE.
 */
CREATE FUNCTION retries.node_op(op text, id bigint, timeout interval DEFAULT NULL)
RETURNS jsonb
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	v jsonb;
	st text;
	msg text;
	det text;
	hnt text;
BEGIN
	CASE op
		WHEN 'wait' THEN
			SELECT to_jsonb(w) INTO v FROM retries.wait(id, timeout) w;
		WHEN 'result' THEN
			v := retries.result(id);
		WHEN 'cancel' THEN
			v := to_jsonb(retries.cancel(id));
		ELSE
			RAISE EXCEPTION USING ERRCODE = '22023',
				MESSAGE = format('op: %s is not wait, result or cancel', left(op, 200));
	END CASE;
	RETURN jsonb_build_object('value', v);
EXCEPTION WHEN OTHERS OR query_canceled THEN
	GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT,
		det = PG_EXCEPTION_DETAIL, hnt = PG_EXCEPTION_HINT;
	RETURN jsonb_build_object('sqlstate', st, 'message', msg,
							  'detail', nullif(det, ''), 'hint', nullif(hnt, ''));
END
$$;
COMMENT ON FUNCTION retries.node_op(text, bigint, interval) IS
	'on a Citus node: run retries.wait, result or cancel of a call of this node for another node''s retries.wait, result or cancel; returns {"value": ...} or the error';

/*
 * Every node's calls, on Citus: each node's retries.calls as the role sees
 * it there, read through Citus's connections (without Citus, this
 * database's).  A node that cannot be read is left out with a warning.
 */
CREATE FUNCTION retries.cluster_call_rows()
RETURNS TABLE (node_group integer, calls jsonb)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	r record;
BEGIN
	IF to_regclass('pg_catalog.pg_dist_node') IS NULL THEN
		RETURN QUERY SELECT 0, coalesce(jsonb_agg(c), '[]') FROM retries.calls c;
		RETURN;
	END IF;
	FOR r IN EXECUTE
		'SELECT n.groupid, a.success, a.result'
		' FROM pg_catalog.run_command_on_all_nodes(''SELECT COALESCE(pg_catalog.jsonb_agg(c), ''''[]'''') FROM retries.calls c'') a'
		' JOIN pg_catalog.pg_dist_node n ON n.nodeid = a.nodeid'
	LOOP
		IF r.success THEN
			node_group := r.groupid;
			calls := r.result::jsonb;
			RETURN NEXT;
		ELSE
			RAISE WARNING 'retries.cluster_calls: could not read the calls of node group %: %',
				r.groupid, r.result;
		END IF;
	END LOOP;
END
$$;
COMMENT ON FUNCTION retries.cluster_call_rows() IS
	'the rows of retries.cluster_calls, as one jsonb array per node group';

CREATE VIEW retries.cluster_calls AS
SELECT r.node_group, c.*
  FROM retries.cluster_call_rows() r,
	   jsonb_populate_recordset(NULL::retries.calls, r.calls) c;
COMMENT ON VIEW retries.cluster_calls IS
	'on Citus: retries.calls of every node, as the current role sees them there, with the node group of each';
COMMENT ON COLUMN retries.cluster_calls.node_group IS
	'the Citus node group whose node holds and runs the call (0: the coordinator; without Citus, 0)';
GRANT SELECT ON retries.cluster_calls TO PUBLIC;

/*
 * The database owner may pg_dump her database: a dump holds every role's
 * calls, so whoever may dump the database reads them, and she reads the
 * tables, every role's rows (doc/reference.md, "Security model").  She
 * may not INSERT, nor set the id sequences: her restore's COPY is checked,
 * and moves the sequences past the ids it loads (src/hooks.c,
 * src/tables/restore.c).
 */
GRANT SELECT ON retries.policy_data, retries.call_data, retries.attempt_data,
	retries.schedule_data, retries.call_after, retries.call_after_pending,
	retries.flow_data, retries.function_names, retries.event_data
	TO pg_database_owner;
GRANT SELECT ON SEQUENCE retries.policy_data_id_seq, retries.call_data_id_seq,
	retries.schedule_data_id_seq TO pg_database_owner;

/*
 * event_data: one row per event of a role, whose row lock is the event's
 * lock (src/tables/name_locks.c): an emit records itself with an upsert;
 * a call made to wait for an event that has no row makes it empty
 * (emitted_at NULL) and locks it; the workers delete empty rows that
 * nobody holds, and pg_dump leaves them out.  Rows that 1.6 kept twice
 * (an event emitted between two runs of a restore, beside the dump's row
 * of it) keep the latest emit.
 */
LOCK TABLE retries.event_data IN EXCLUSIVE MODE;
DELETE FROM retries.event_data d
 USING retries.event_data n
 WHERE n.role = d.role AND pg_catalog.md5(n.event) = pg_catalog.md5(d.event)
   AND (n.emitted_at, n.ctid) > (d.emitted_at, d.ctid);
DROP INDEX retries.event_data_event;
ALTER TABLE retries.event_data ALTER emitted_at DROP NOT NULL;
CREATE UNIQUE INDEX event_data_event ON retries.event_data
	(role, pg_catalog.md5(event));
SELECT pg_catalog.pg_extension_config_dump('retries.event_data',
	'WHERE emitted_at IS NOT NULL'
	' AND role OPERATOR(pg_catalog.=) ANY (SELECT oid FROM pg_catalog.pg_roles)');

/*
 * A dump leaves out the calls, schedules and events of roles dropped since
 * they were made: a role column shows a dropped role as its bare OID, which
 * a restore into another cluster would take for whichever role has that
 * OID there (the fourteenth hostile review: it read the dropped role's
 * event payloads and could retry its calls).  Their attempts and links
 * name calls by id only, which no role then sees.
 */
SELECT pg_catalog.pg_extension_config_dump('retries.call_data',
	'WHERE scheduled_by OPERATOR(pg_catalog.=) ANY (SELECT oid FROM pg_catalog.pg_roles)');
SELECT pg_catalog.pg_extension_config_dump('retries.schedule_data',
	'WHERE owner OPERATOR(pg_catalog.=) ANY (SELECT oid FROM pg_catalog.pg_roles)');

/*
 * event_data_load: where a restore's COPY into event_data loads the dump's
 * rows, which then join event_data's, the latest emit of each event
 * winning, in the COPY's transaction (src/tables/restore.c): loaded
 * straight into event_data they could meet, in its unique index, an event
 * that a role emitted (or made a call wait for) during the restore, or a
 * 1.6 dump's event kept twice, and the COPY would fail whole.  Empty
 * outside a COPY's transaction; not dumped.
 */
CREATE TABLE retries.event_data_load (LIKE retries.event_data);
COMMENT ON TABLE retries.event_data_load IS
	'where a restore''s COPY into event_data loads the dump''s events, merged into event_data in the same transaction; always empty otherwise';
REVOKE ALL ON retries.event_data_load FROM PUBLIC;
COMMENT ON TABLE retries.event_data IS
	'one row per event of a role: its latest emit (retries.emit), read by retries.event() inside a call; empty (emitted_at NULL) while only calls wait for it; its row lock is the event''s lock';

/*
 * name_lock: a row per debounced key of a role that a transaction has
 * locked lately, for its row lock (src/tables/name_locks.c).  Made on
 * first use, never updated; the workers delete rows older than an hour
 * that nobody holds (no index on made_at: the prune reads the table in its
 * physical order, where rows lie mostly oldest first, while every debounce
 * of a new key would pay the index).
 * Not dumped: a restore makes them anew as they are used.
 */
CREATE TABLE retries.name_lock (
	role			oid NOT NULL,
	class			"char" NOT NULL,	-- 'k' a key (events lock their rows of event_data)
	name_hash		uuid NOT NULL,		-- md5 of the name
	made_at			timestamptz NOT NULL DEFAULT pg_catalog.now(),
	PRIMARY KEY (role, class, name_hash)
);
COMMENT ON TABLE retries.name_lock IS
	'a row per debounced key of a role lately used, locked by the transactions that debounce it';
REVOKE ALL ON retries.name_lock FROM PUBLIC;

/*
 * events: the role's events, emitted or waited for, and clear_event()
 * (src/api/events.c)
 */
-- the roles a role sees, for the views to find their rows by index
CREATE FUNCTION retries.visible_roles()
RETURNS oid[]
AS 'MODULE_PATHNAME', 'retries_visible_roles'
LANGUAGE C STABLE PARALLEL SAFE;
COMMENT ON FUNCTION retries.visible_roles() IS
	'the roles whose calls, schedules and events the current role sees: its own, or every role''s for one that sees all';

CREATE VIEW retries.events WITH (security_barrier) AS
SELECT n.role,
	   n.event,
	   e.payload,
	   e.emitted_at,
	   (SELECT pg_catalog.count(*) FROM retries.call_data c
		 WHERE c.event_wait AND c.state OPERATOR(pg_catalog.=) 'scheduled'
		   AND c.scheduled_by OPERATOR(pg_catalog.=) n.role
		   AND pg_catalog.md5(c.on_event) OPERATOR(pg_catalog.=) pg_catalog.md5(n.event)
		   AND c.on_event OPERATOR(pg_catalog.=) n.event) AS waiting
  FROM (SELECT d.role, d.event FROM retries.event_data d
		 WHERE d.emitted_at IS NOT NULL
		   AND d.role::pg_catalog.oid OPERATOR(pg_catalog.=) ANY (retries.visible_roles())
		UNION
		SELECT c.scheduled_by, c.on_event FROM retries.call_data c
		 WHERE c.event_wait AND c.state OPERATOR(pg_catalog.=) 'scheduled'
		   AND c.on_event IS NOT NULL
		   AND c.scheduled_by::pg_catalog.oid OPERATOR(pg_catalog.=) ANY (retries.visible_roles())) n
  LEFT JOIN LATERAL (SELECT d.payload, d.emitted_at FROM retries.event_data d
					  WHERE d.role OPERATOR(pg_catalog.=) n.role
						AND pg_catalog.md5(d.event) OPERATOR(pg_catalog.=) pg_catalog.md5(n.event)
						AND d.event OPERATOR(pg_catalog.=) n.event
						AND d.emitted_at IS NOT NULL) e ON true
 WHERE retries.visible_role(n.role);
COMMENT ON VIEW retries.events IS
	'the events of the roles whose calls the current role sees: each emitted one (its latest payload and emit, kept for retries.retention) and each that calls wait for, with how many wait';
COMMENT ON COLUMN retries.events.emitted_at IS
	'its latest emit; NULL while it has none (calls wait for it)';
COMMENT ON COLUMN retries.events.waiting IS
	'how many of the role''s calls wait for it';
GRANT SELECT ON retries.events TO PUBLIC;

CREATE FUNCTION retries.clear_event(event text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'retries_clear_event'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION retries.clear_event(text) IS
	'forget the current role''s event: calls made with on_event after this wait for its next emit; whether it had been emitted';

CREATE FUNCTION retries.command_statements(command text)
RETURNS integer
AS 'MODULE_PATHNAME', 'retries_command_statements'
LANGUAGE C STABLE PARALLEL SAFE;
COMMENT ON FUNCTION retries.command_statements(text) IS
	'how many statements a command''s text holds, as a runner parses it (used by retries.import_pg_cron)';

-- pg_cron's jobs moved into schedules, in one call (see doc/reference.md,
-- retries.import_pg_cron): each job that the current role may act for
-- becomes a command schedule of its user, in the job's database (that
-- user needs EXECUTE on retries.command_in for a job of another), with pg_cron's
-- overlap (a run waits for the one before) and its transaction (a text of
-- several statements is one), and the job is turned off in pg_cron
-- (cron.alter_job, if the caller may run it; else cron.unschedule); the
-- others are reported with why.  Runs as the caller; as each job's user
-- (SET LOCAL ROLE, of which the caller must be a member) for that job.
CREATE FUNCTION retries.import_pg_cron(policy text DEFAULT NULL,
									   retry_on text[] DEFAULT NULL,
									   deactivate boolean DEFAULT true)
RETURNS TABLE (jobid bigint, jobname text, moved boolean, schedule bigint, why text)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	caller name := current_user;
	-- pg_cron's own setting (1.5); a placeholder of that name, which any
	-- session may set, is not in pg_settings: pg_cron 1.4 runs in GMT
	zone text := coalesce((SELECT nullif(setting, '') FROM pg_settings
						   WHERE pg_settings.name = 'cron.timezone'), 'GMT');
	superuser_jobs text := (SELECT setting FROM pg_settings
							WHERE pg_settings.name = 'cron.enable_superuser_jobs');
	cron oid;
	job_table regclass;
	alter_job regprocedure;
	unschedule regprocedure;
	j record;
	job_role regrole;
	sched_name text;
	command text;
	state text;
	message text;
BEGIN
	-- pg_cron's objects, the extension's own: never objects of those names
	-- that a role with CREATE on the database made
	SELECT e.oid INTO cron FROM pg_extension e WHERE e.extname = 'pg_cron';
	SELECT d.objid::regclass INTO job_table
	  FROM pg_depend d JOIN pg_class c ON c.oid = d.objid
	 WHERE d.classid = 'pg_class'::regclass AND d.refclassid = 'pg_extension'::regclass
	   AND d.refobjid = cron AND d.deptype = 'e' AND c.relname = 'job' AND c.relkind = 'r';
	IF job_table IS NULL THEN
		RAISE EXCEPTION USING ERRCODE = '55000',
			MESSAGE = 'pg_cron is not installed in this database',
			HINT = 'Run retries.import_pg_cron() in the database that cron.database_name names.';
	END IF;
	SELECT d.objid::regprocedure INTO alter_job
	  FROM pg_depend d JOIN pg_proc p ON p.oid = d.objid
	 WHERE d.classid = 'pg_proc'::regclass AND d.refclassid = 'pg_extension'::regclass
	   AND d.refobjid = cron AND d.deptype = 'e' AND p.proname = 'alter_job'
	   AND p.proargtypes = '20 25 25 25 25 16'::oidvector;
	SELECT d.objid::regprocedure INTO unschedule
	  FROM pg_depend d JOIN pg_proc p ON p.oid = d.objid
	 WHERE d.classid = 'pg_proc'::regclass AND d.refclassid = 'pg_extension'::regclass
	   AND d.refobjid = cron AND d.deptype = 'e' AND p.proname = 'unschedule'
	   AND p.proargtypes = '20'::oidvector;
	FOR j IN EXECUTE format('SELECT jobid, jobname::text AS jobname, schedule, command, database,'
							' username::text AS username, active, nodename, nodeport'
							' FROM %s ORDER BY jobid', job_table)
	LOOP
		jobid := j.jobid;
		jobname := j.jobname;
		moved := false;
		schedule := NULL;
		why := NULL;
		sched_name := coalesce(j.jobname, 'pg_cron ' || j.jobid);
		job_role := CASE WHEN j.username <> '' THEN to_regrole(quote_ident(j.username)) END;
		IF (j.nodename IS NOT NULL AND j.nodename NOT IN ('', 'localhost', '127.0.0.1', '::1')
			   AND left(j.nodename, 1) <> '/')
			  OR j.nodeport IS DISTINCT FROM current_setting('port')::integer THEN
			why := format('it runs on another server (nodename %s, nodeport %s)', j.nodename,
						  j.nodeport);
		ELSIF job_role IS NULL THEN
			why := format('its role %s does not exist', quote_ident(j.username));
		ELSIF superuser_jobs = 'off' AND (SELECT r.rolsuper FROM pg_roles r WHERE r.oid = job_role) THEN
			why := format('pg_cron does not run it: its role %s is a superuser, and cron.enable_superuser_jobs is off',
						  quote_ident(j.username));
		ELSIF j.username IS DISTINCT FROM caller
			  AND NOT (pg_has_role(caller, job_role, 'MEMBER')
					   AND pg_has_role(session_user, job_role, 'MEMBER')) THEN
			why := format('it is role %s''s: run the import as that role, or as a superuser',
						  quote_ident(j.username));
		END IF;
		IF why IS NULL THEN
			BEGIN
				EXECUTE format('SET LOCAL ROLE %I', j.username);
			EXCEPTION WHEN OTHERS THEN
				GET STACKED DIAGNOSTICS state = RETURNED_SQLSTATE, message = MESSAGE_TEXT;
				why := state || ': ' || message;
			END;
		END IF;
		IF why IS NULL THEN
			IF EXISTS (SELECT FROM retries.schedules s
						WHERE s.owner = job_role AND s.name = sched_name) THEN
				why := format('role %s has a schedule named %s already', quote_ident(j.username),
							  quote_literal(sched_name));
			ELSE
				BEGIN
					command := j.command;
					IF retries.command_statements(command) > 1 THEN
						command := 'BEGIN;' || command || E'\n;COMMIT';
					END IF;
					schedule := retries.schedule_command(sched_name, command, j.schedule, zone,
														 overlap => 'queue', policy => policy,
														 retry_on => retry_on,
														 database => j.database);
					IF NOT j.active THEN
						PERFORM retries.pause_schedule(schedule);
					END IF;
					-- off in pg_cron: turned off by the caller if she may (a
					-- superuser, by default), else removed by its role
					IF deactivate AND j.active THEN
						EXECUTE format('SET LOCAL ROLE %I', caller);
						BEGIN
							IF alter_job IS NULL OR NOT has_function_privilege(alter_job, 'EXECUTE') THEN
								RAISE insufficient_privilege;
							END IF;
							EXECUTE format('SELECT %s(job_id => $1, active => false)',
										   alter_job::regproc) USING j.jobid;
						EXCEPTION WHEN insufficient_privilege THEN
							-- not hers, or pg_cron refuses it to a superuser
							-- (cron.enable_superuser_jobs off)
							EXECUTE format('SET LOCAL ROLE %I', j.username);
							EXECUTE format('SELECT %s($1)', unschedule::regproc) USING j.jobid;
						END;
					END IF;
					moved := true;
				EXCEPTION WHEN OTHERS THEN
					GET STACKED DIAGNOSTICS state = RETURNED_SQLSTATE, message = MESSAGE_TEXT;
					schedule := NULL;
					why := state || ': ' || message;
				END;
			END IF;
			EXECUTE format('SET LOCAL ROLE %I', caller);
		END IF;
		RETURN NEXT;
	END LOOP;
END
$$;
COMMENT ON FUNCTION retries.import_pg_cron(text, text[], boolean) IS
	'move the pg_cron jobs of this database into command schedules of their users (turning them off in pg_cron), one row per job: whether it moved, and why not';

-- Only the install script (and a superuser) starts a database's workers
-- by hand: its commit clears the pause that DROP DATABASE and ALTER
-- DATABASE put on them and forgets the database's memo.
REVOKE ALL ON FUNCTION retries.start_workers() FROM PUBLIC;
