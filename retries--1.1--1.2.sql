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
 * Flow control (doc/operations.md, "Flow control"): retries.pause() and resume(),
 * max_running, max_running_per_key and rate on retries.annotate(), and
 * priority and limit_key on retries.call() (due calls of a higher
 * priority are claimed first; see src/claim.c).  The
 * calls of a function that is paused or limited carry its name in
 * call_data.gate and wait held (out of the indexes the workers claim
 * from) until the workers release them, no more at a time than the limit
 * allows; see src/flow.c.
 *
 * It also brings recurring schedules (doc/operations.md, "Recurring
 * schedules"): a
 * table of schedules, the functions that manage them, the view
 * retries.schedules, and a column schedule_id in call_data naming the
 * schedule that fired a call.  The workers fire due schedules in short
 * transactions of their own: the call a firing makes and the advance of
 * the schedule's next_run commit together, so each firing happens once.
 *
 * Results, waiting and chains (doc/operations.md, "Results, waiting and
 * chains"): a
 * call's return value is kept as jsonb in call_data.result, committed with
 * its success; retries.wait() waits for a call to finish and
 * retries.result() returns its result; retries.call(after => ...) holds a
 * call until the calls it names have succeeded (table call_after, and
 * call_data.waiting_on, the number of them not succeeded yet); and
 * retries.annotate(notify => true) has each finished call of the function
 * send NOTIFY retries_finished, '<id>' at its commit (policy_data.notify).
 *
 * Keys last as long as their calls (doc/reference.md, retries.call, key): the
 * unique index call_data_key covers finished calls too, so that a request
 * sent again after its call succeeded gets that call back instead of
 * running it again.  Before the index is made, a key that 1.1 let two or
 * more kept calls of a role share stays with one of them (the unfinished
 * one, or else the latest); the older finished ones lose it (key = NULL).
 */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION retries UPDATE TO '1.2'" to load this file. \quit

-- whether each finished call of the function sends NOTIFY retries_finished
-- (retries.annotate's notify).  First of all: the workers lock policy_data
-- before call_data (see worker.c), and so must this script.
ALTER TABLE retries.policy_data ADD COLUMN notify boolean NOT NULL DEFAULT false;

-- the schedule that fired a call (NULL for one-off calls).  Next, so that
-- the update takes call_data's strongest lock before any other: CREATE
-- INDEX below holds a SHARE lock, which, taken before ADD COLUMN's ACCESS
-- EXCLUSIVE, deadlocked with workers writing their outcomes meanwhile.
-- Flow control (see below): gate names the function whose limits or
-- pause hold the call back, held says that they do now; a held call is in
-- no index the workers claim from.
-- priority orders due calls, higher first (retries.call's priority);
-- limit_key is what max_running_per_key counts attempts by.
ALTER TABLE retries.call_data ADD COLUMN schedule_id bigint,
	ADD COLUMN gate regprocedure,
	ADD COLUMN held boolean NOT NULL DEFAULT false,
	ADD COLUMN priority integer NOT NULL DEFAULT 0,
	ADD COLUMN limit_key text,
	ADD COLUMN result jsonb,
	ADD COLUMN waiting_on integer NOT NULL DEFAULT 0 CHECK (waiting_on >= 0);
-- result: the function's return value, as to_jsonb() gives it, written with
-- the success (NULL for void, and until then).  waiting_on: how many of the
-- calls named by retries.call's after have not succeeded yet; a call
-- waiting on any is held (with no gate), and released when the last one
-- succeeds (see src/chains.c).

-- a key names one call for as long as the call is kept: of the calls of a
-- role that 1.1 let share a key, the unfinished one keeps it, or else the
-- latest
WITH ranked AS (
	SELECT id, pg_catalog.row_number() OVER (
			   PARTITION BY scheduled_by, key
			   ORDER BY state IN ('scheduled', 'running') DESC, id DESC) AS rank
	  FROM retries.call_data
	 WHERE key IS NOT NULL
)
UPDATE retries.call_data c SET key = NULL
  FROM ranked r
 WHERE c.id = r.id AND r.rank > 1;
DROP INDEX retries.call_data_key;
CREATE UNIQUE INDEX call_data_key ON retries.call_data
	(scheduled_by, pg_catalog.md5(key))
	WHERE key IS NOT NULL;

-- what the workers claim from: due calls that nothing holds, earliest
-- first; those of priority 0 here, the others in call_data_prioritized,
-- one priority after another (see src/claim.c)
DROP INDEX retries.call_data_due;
CREATE INDEX call_data_due ON retries.call_data (next_attempt)
	WHERE state = 'scheduled' AND NOT held AND priority = 0;
CREATE INDEX call_data_prioritized ON retries.call_data (priority, next_attempt)
	WHERE state = 'scheduled' AND NOT held AND priority <> 0;
-- what fair claiming looks for: each role's earliest due call (of
-- priority 0 or above: those below run only when nothing else is due)
CREATE INDEX call_data_due_by_role ON retries.call_data (scheduled_by, next_attempt)
	WHERE state = 'scheduled' AND NOT held AND priority >= 0;
-- what a gate releases, earliest first (by key, for a limit per key), and
-- what it has released
CREATE INDEX call_data_held ON retries.call_data (gate, next_attempt)
	WHERE state = 'scheduled' AND held;
CREATE INDEX call_data_held_by_key ON retries.call_data (gate, limit_key, next_attempt)
	WHERE state = 'scheduled' AND held;
CREATE INDEX call_data_released ON retries.call_data (gate, limit_key)
	WHERE state = 'scheduled' AND NOT held AND gate IS NOT NULL;

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

-----------------------------------------------------------------------
-- Recurring schedules
-----------------------------------------------------------------------

/*
 * schedule_data: one row per schedule, named per role (owner).  origin is
 * where an interval schedule counts from (its creation or replacement);
 * next_run is the next firing the workers will make, queued says that a
 * firing of an overlap 'queue' schedule waits for the previous call.
 */
CREATE TABLE retries.schedule_data (
	id				bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	name			text NOT NULL CHECK (name <> ''),
	owner			regrole NOT NULL,
	fn				regprocedure NOT NULL,
	every			text NOT NULL,
	args			jsonb NOT NULL,
	timezone		text NOT NULL,
	overlap			text NOT NULL CHECK (overlap IN ('skip', 'queue', 'allow')),
	catch_up		interval NOT NULL,
	paused			boolean NOT NULL DEFAULT false,
	origin			timestamptz NOT NULL,
	next_run		timestamptz NOT NULL,
	queued			boolean NOT NULL DEFAULT false,
	last_run		timestamptz,
	last_call		bigint,
	firings			bigint NOT NULL DEFAULT 0,
	skipped			bigint NOT NULL DEFAULT 0,
	missed			bigint NOT NULL DEFAULT 0,
	created_at		timestamptz NOT NULL DEFAULT pg_catalog.now(),
	UNIQUE (owner, name)
);
-- what the workers look for: the next firing, each role's due firings (taken
-- in turns between roles), and firings waiting in a queue
CREATE INDEX schedule_data_due ON retries.schedule_data (next_run) WHERE NOT paused;
CREATE INDEX schedule_data_due_by_owner ON retries.schedule_data (owner, next_run)
	WHERE NOT paused;
CREATE INDEX schedule_data_queued ON retries.schedule_data (id) WHERE queued AND NOT paused;
COMMENT ON TABLE retries.schedule_data IS
	'recurring schedules; read it through retries.schedules';
COMMENT ON SEQUENCE retries.schedule_data_id_seq IS 'ids of schedules';
REVOKE ALL ON retries.schedule_data FROM PUBLIC;
SELECT pg_catalog.pg_extension_config_dump('retries.schedule_data', '');
SELECT pg_catalog.pg_extension_config_dump('retries.schedule_data_id_seq', '');


-----------------------------------------------------------------------
-- Chains: calls that run after others
-----------------------------------------------------------------------

/*
 * call_after: one row for each call that a scheduled call still waits for
 * (the 'after' of retries.call()).  Looked up both ways: by the call that
 * runs first (which calls to release or cancel when it finishes) and by
 * the call that waits (what it is waiting for).  A row goes when the
 * first call succeeds (and the waiting call's waiting_on goes down by
 * one) or when the waiting call is cancelled or finishes otherwise.
 */
CREATE TABLE retries.call_after (
	after_id		bigint NOT NULL,	-- the call that must succeed first
	call_id			bigint NOT NULL,	-- the call that waits for it
	PRIMARY KEY (after_id, call_id)
);
CREATE INDEX call_after_call ON retries.call_after (call_id);
COMMENT ON TABLE retries.call_after IS
	'which calls run after which (retries.call''s after), until the first one finishes; read it through retries.calls.waiting_for';

/*
 * call_after_pending: calls that finished while a call that runs after
 * them was locked by another transaction, so that the transaction that
 * finished them could not release or cancel it without waiting; the
 * workers do it once the lock is gone (see src/chains.c).
 */
CREATE TABLE retries.call_after_pending (
	after_id		bigint PRIMARY KEY
);
COMMENT ON TABLE retries.call_after_pending IS
	'finished calls whose followers the workers have yet to release or cancel';
REVOKE ALL ON retries.call_after, retries.call_after_pending FROM PUBLIC;
SELECT pg_catalog.pg_extension_config_dump('retries.call_after', '');
SELECT pg_catalog.pg_extension_config_dump('retries.call_after_pending', '');

CREATE FUNCTION retries.schedule(name text,
								 fn regprocedure,
								 every text,
								 args jsonb DEFAULT '[]',
								 timezone text DEFAULT 'UTC',
								 overlap text DEFAULT 'skip',
								 catch_up interval DEFAULT '0')
RETURNS bigint
AS 'MODULE_PATHNAME', 'retries_schedule'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION retries.schedule(text, regprocedure, text, jsonb, text, text, interval) IS
	'create or replace the current role''s schedule of that name, which calls an annotated function every "every" (cron or an interval); returns its id';

CREATE FUNCTION retries.unschedule(name text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'retries_unschedule'
LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
COMMENT ON FUNCTION retries.unschedule(text) IS
	'drop a schedule; the calls it fired stay';

CREATE FUNCTION retries.pause_schedule(name text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'retries_pause_schedule'
LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
COMMENT ON FUNCTION retries.pause_schedule(text) IS
	'stop a schedule''s firings until resume_schedule: true if it was not paused';

CREATE FUNCTION retries.resume_schedule(name text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'retries_resume_schedule'
LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
COMMENT ON FUNCTION retries.resume_schedule(text) IS
	'let a paused schedule fire again, from its next time after now: true if it was paused';

CREATE FUNCTION retries.trigger(name text)
RETURNS bigint
AS 'MODULE_PATHNAME', 'retries_trigger'
LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
COMMENT ON FUNCTION retries.trigger(text) IS
	'fire a schedule once now, whatever its overlap and pause; its next_run is unchanged; returns the call id';

CREATE VIEW retries.schedules WITH (security_barrier) AS
SELECT s.id,
	   s.name,
	   s.fn,
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
	   s.created_at
  FROM retries.schedule_data s
 WHERE retries.visible_role(s.owner);
COMMENT ON VIEW retries.schedules IS
	'recurring schedules: one row per schedule, with its next and last firing and its counters';

-- retries.calls gains the name of the schedule that fired each call,
-- each call's priority and limit_key, its result, and the calls it still
-- waits for (those of its 'after' that have not succeeded: only a call
-- waiting on some looks them up)
CREATE OR REPLACE VIEW retries.calls WITH (security_barrier) AS
SELECT c.id,
	   p.fn,
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
			ELSE '{}'::bigint[] END AS waiting_for
  FROM retries.call_data c
  JOIN retries.policy_data p ON p.id = c.policy_id
 WHERE retries.visible_role(c.scheduled_by);
COMMENT ON COLUMN retries.calls.result IS
	'the function''s return value as jsonb (to_jsonb), kept with the success; NULL for void and until it succeeds';
COMMENT ON COLUMN retries.calls.waiting_for IS
	'the calls of its after list that have not succeeded yet: it runs once they all have';

GRANT SELECT ON retries.schedules TO PUBLIC;

/*
 * A dropped function takes its schedules with it, with a NOTICE naming
 * each (a schedule of a function that no longer exists could only fail),
 * and loses its annotation, as before.
 */
CREATE OR REPLACE FUNCTION retries.forget_dropped_functions()
RETURNS event_trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	gone record;
BEGIN
	IF pg_catalog.to_regclass('retries.policy_data') IS NULL THEN
		RETURN;
	END IF;
	UPDATE retries.policy_data p
	   SET is_current = false
	  FROM pg_catalog.pg_event_trigger_dropped_objects() d
	 WHERE p.is_current
	   AND d.classid = 'pg_catalog.pg_proc'::pg_catalog.regclass
	   AND d.objid = p.fn;
	IF pg_catalog.to_regclass('retries.schedule_data') IS NULL THEN
		RETURN;
	END IF;
	-- its held calls are let go, to fail as any call of a dropped function
	UPDATE retries.call_data c
	   SET gate = NULL, held = false
	  FROM pg_catalog.pg_event_trigger_dropped_objects() d
	 WHERE d.classid = 'pg_catalog.pg_proc'::pg_catalog.regclass
	   AND c.gate = d.objid
	   AND c.state = 'scheduled';
	DELETE FROM retries.flow_data f
	 USING pg_catalog.pg_event_trigger_dropped_objects() d
	 WHERE d.classid = 'pg_catalog.pg_proc'::pg_catalog.regclass
	   AND f.fn = d.objid;
	FOR gone IN
		DELETE FROM retries.schedule_data s
		 USING pg_catalog.pg_event_trigger_dropped_objects() d
		 WHERE d.classid = 'pg_catalog.pg_proc'::pg_catalog.regclass
		   AND d.objid = s.fn
		RETURNING s.name, s.owner, d.object_identity
	LOOP
		RAISE NOTICE 'schedule "%" of role % dropped with function %',
			gone.name, gone.owner, gone.object_identity;
	END LOOP;
END
$$;
COMMENT ON FUNCTION retries.forget_dropped_functions() IS
	'event trigger: clear the annotations and drop the schedules of dropped functions';

-----------------------------------------------------------------------
-- Flow control
-----------------------------------------------------------------------

/*
 * flow_data: one row per function that has been paused or limited.  A row
 * whose function is neither paused nor limited any more stays: the
 * workers release what it still holds.
 */
CREATE TABLE retries.flow_data (
	fn				regprocedure PRIMARY KEY,
	paused			boolean NOT NULL DEFAULT false,
	max_running		integer CHECK (max_running > 0),
	max_running_per_key integer CHECK (max_running_per_key > 0),
	rate			text			-- 'count/duration', as annotate() wrote it
);
COMMENT ON TABLE retries.flow_data IS
	'pauses and limits of functions; read them through retries.stats and retries.policies';
REVOKE ALL ON retries.flow_data FROM PUBLIC;
SELECT pg_catalog.pg_extension_config_dump('retries.flow_data', '');

CREATE FUNCTION retries.pause(fn regprocedure)
RETURNS boolean
AS 'MODULE_PATHNAME', 'retries_pause'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION retries.pause(regprocedure) IS
	'hold the calls of a function: none starts until retries.resume(); true if it was not paused';

CREATE FUNCTION retries.resume(fn regprocedure)
RETURNS boolean
AS 'MODULE_PATHNAME', 'retries_resume'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION retries.resume(regprocedure) IS
	'let the calls of a paused function run again; true if it was paused';

/*
 * annotate gains max_running, max_running_per_key and rate, and call priority
 * and limit_key: new signatures, so the old functions go.  Renamed first,
 * so that the new ones can be given the privileges that the old ones had
 * (a REVOKE EXECUTE ON retries.call FROM PUBLIC, say, must not be undone
 * by the update), as the user's own: a GRANT in this script would be
 * taken for the extension's, which pg_dump leaves out (see
 * retries_grant_as_user in src/catalog.c).
 */
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

ALTER FUNCTION retries.annotate(regprocedure, text, integer, interval, interval,
								float8, text, text[], interval, regprocedure, regprocedure)
	RENAME TO annotate_1_1;
ALTER FUNCTION retries.call(regprocedure, jsonb, timestamptz, text) RENAME TO call_1_1;

CREATE FUNCTION retries.call(fn regprocedure,
							 args jsonb DEFAULT '[]',
							 run_at timestamptz DEFAULT pg_catalog.now(),
							 key text DEFAULT NULL,
							 priority integer DEFAULT 0,
							 limit_key text DEFAULT NULL,
							 after bigint[] DEFAULT NULL)
RETURNS bigint
AS 'MODULE_PATHNAME', 'retries_call'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION retries.call(regprocedure, jsonb, timestamptz, text, integer, text, bigint[]) IS
	'schedule a call of an annotated function at run_at, as the current role; among due calls higher priority runs first; limit_key is what max_running_per_key counts; it runs only after the calls in after have succeeded; returns the call id';
SELECT retries.copy_grants('retries.call_1_1(regprocedure, jsonb, timestamptz, text)',
						   'retries.call(regprocedure, jsonb, timestamptz, text, integer, text, bigint[])');
DROP FUNCTION retries.call_1_1(regprocedure, jsonb, timestamptz, text);

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
								 notify boolean DEFAULT false)
RETURNS void
AS 'MODULE_PATHNAME', 'retries_annotate'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION retries.annotate(regprocedure, text, integer, interval, interval,
									 float8, text, text[], interval, regprocedure,
									 regprocedure, integer, integer, text, boolean) IS
	'give a function a retry policy ''[count] min [max]'', which lets its calls be scheduled, and at most max_running of its attempts at once, max_running_per_key of one limit_key, and starts at most at rate (''100/1s''); with notify, each finished call sends NOTIFY retries_finished';
SELECT retries.copy_grants('retries.annotate_1_1(regprocedure, text, integer, interval, interval, float8, text, text[], interval, regprocedure, regprocedure)',
						   'retries.annotate(regprocedure, text, integer, interval, interval, float8, text, text[], interval, regprocedure, regprocedure, integer, integer, text, boolean)');
DROP FUNCTION retries.annotate_1_1(regprocedure, text, integer, interval, interval,
								   float8, text, text[], interval, regprocedure, regprocedure);
DROP FUNCTION retries.copy_grants(regprocedure, regprocedure);
DROP FUNCTION retries.grant_as_user(text);

-- stats gains held (due calls held back now) and paused
CREATE OR REPLACE VIEW retries.stats WITH (security_barrier) AS
WITH visible AS (
	SELECT c.id, c.next_attempt, p.fn, c.held,
		   CASE WHEN c.state = 'scheduled'
				 AND c.id = ANY (CAST((SELECT retries.running_calls()) AS bigint[]))
				THEN 'running'::retries.call_state ELSE c.state END AS state
	  FROM retries.call_data c
	  JOIN retries.policy_data p ON p.id = c.policy_id
	 WHERE retries.visible_role(c.scheduled_by)
), by_call AS (
	SELECT v.fn,
		   count(*) FILTER (WHERE v.state = 'scheduled') AS scheduled,
		   count(*) FILTER (WHERE v.state = 'running') AS running,
		   count(*) FILTER (WHERE v.state = 'succeeded') AS succeeded,
		   count(*) FILTER (WHERE v.state = 'failed') AS failed,
		   count(*) FILTER (WHERE v.state = 'cancelled') AS cancelled,
		   min(v.next_attempt) FILTER (WHERE v.state = 'scheduled'
									  AND v.next_attempt <= pg_catalog.now()) AS oldest_due,
		   count(*) FILTER (WHERE v.state = 'scheduled' AND v.held
							AND v.next_attempt <= pg_catalog.now()) AS held
	  FROM visible v
	 GROUP BY v.fn
), by_attempt AS (
	SELECT v.fn,
		   count(*) AS attempts,
		   count(*) FILTER (WHERE a.attempt > 1) AS retries,
		   avg(a.finished_at - a.started_at) AS mean_time,
		   percentile_cont(0.95) WITHIN GROUP
			   (ORDER BY a.finished_at - a.started_at) AS p95_time
	  FROM visible v
	  JOIN retries.attempt_data a ON a.call_id = v.id
	 WHERE a.finished_at IS NOT NULL
	 GROUP BY v.fn
)
SELECT c.fn,
	   c.scheduled,
	   c.running,
	   c.succeeded,
	   c.failed,
	   c.cancelled,
	   coalesce(a.attempts, 0) AS attempts,
	   coalesce(a.retries, 0) AS retries,
	   CASE WHEN c.succeeded + c.failed > 0
			THEN round(c.succeeded::numeric / (c.succeeded + c.failed), 4)
	   END AS success_ratio,
	   a.mean_time AS mean_attempt_time,
	   a.p95_time AS p95_attempt_time,
	   pg_catalog.now() - c.oldest_due AS oldest_due_lag,
	   c.held,
	   coalesce(f.paused, false) AS paused
  FROM by_call c
  LEFT JOIN by_attempt a ON a.fn = c.fn
  LEFT JOIN retries.flow_data f ON f.fn = c.fn;
COMMENT ON VIEW retries.stats IS
	'per function: calls by state, attempts, retries, success ratio, attempt times, the lag of the oldest due call, due calls held back and whether it is paused';

-- policies gains the flow limits and pause of each function, and notify
CREATE OR REPLACE VIEW retries.policies AS
SELECT p.fn,
	   pr.proowner::regrole AS owner,
	   p.max_attempts,
	   p.min_delay,
	   p.max_delay,
	   p.multiplier,
	   p.jitter,
	   p.retry_on,
	   p.timeout,
	   p.on_exhausted,
	   p.delay_fn,
	   retries.format_policy(p.max_attempts, p.min_delay, p.max_delay) AS policy,
	   f.max_running,
	   f.max_running_per_key,
	   f.rate,
	   coalesce(f.paused, false) AS paused,
	   p.notify
  FROM retries.policy_data p
  JOIN pg_catalog.pg_proc pr ON pr.oid = p.fn
  LEFT JOIN retries.flow_data f ON f.fn = p.fn
 WHERE p.is_current;

-----------------------------------------------------------------------
-- Results and waiting
-----------------------------------------------------------------------

CREATE FUNCTION retries.wait(id bigint, timeout interval DEFAULT NULL)
RETURNS retries.calls
AS 'MODULE_PATHNAME', 'retries_wait'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;
COMMENT ON FUNCTION retries.wait(bigint, interval) IS
	'wait until a call has finished (succeeded, failed or cancelled) and return its row; raises 57014 past timeout';

CREATE FUNCTION retries.result(id bigint)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'retries_result'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;
COMMENT ON FUNCTION retries.result(bigint) IS
	'the return value of a call that has succeeded, as jsonb (NULL for void); an error if it has not succeeded';
