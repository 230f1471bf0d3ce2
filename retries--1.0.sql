/*
 * retries--1.0.sql
 *	  Install script of the retries extension: the data model (types,
 *	  tables), the SQL API (C functions) and the monitoring views.
 *
 * Ordinary roles get no privileges on the tables: every change goes through
 * the C functions, which check the caller's rights and then write as the
 * extension's owner.  The views are security barriers that show each role
 * only its own calls (all calls to superusers and members of retries_admin).
 */

-- complain if script is sourced in psql, rather than via CREATE EXTENSION
\echo Use "CREATE EXTENSION retries" to load this file. \quit

/*
 * Refuse a schema named retries that a role other than a superuser created
 * before CREATE EXTENSION: PostgreSQL would install into it, and its owner
 * could then drop or replace the extension's objects, which the workers use
 * as a superuser.  Operators are named with their schema, since the schema
 * is on this script's search_path.
 */
DO $$
DECLARE
	culprit text;
BEGIN
	IF NOT (SELECT r.rolsuper
			  FROM pg_catalog.pg_namespace n
			  JOIN pg_catalog.pg_roles r ON r.oid OPERATOR(pg_catalog.=) n.nspowner
			 WHERE n.nspname OPERATOR(pg_catalog.=) 'retries') THEN
		RAISE EXCEPTION 'schema "retries" is owned by role "%", which is not a superuser',
			(SELECT nspowner::pg_catalog.regrole FROM pg_catalog.pg_namespace
			  WHERE nspname OPERATOR(pg_catalog.=) 'retries')
			USING ERRCODE = 'insufficient_privilege',
				  HINT = 'The extension must own or trust its schema: drop or rename that schema, '
					  || 'or make a superuser its owner, before CREATE EXTENSION retries.';
	END IF;
	-- Owned by a superuser is not enough: a role may have made it and
	-- filled it before a restore's ALTER SCHEMA ... OWNER TO gave it away
	-- (pg_dump writes one for every schema)
	SELECT i.type OPERATOR(pg_catalog.||) ' ' OPERATOR(pg_catalog.||) i.identity INTO culprit
	  FROM pg_catalog.pg_namespace n,
		   LATERAL (SELECT 'pg_catalog.pg_class'::pg_catalog.regclass, oid
					  FROM pg_catalog.pg_class WHERE relnamespace OPERATOR(pg_catalog.=) n.oid
					UNION ALL
					SELECT 'pg_catalog.pg_proc'::pg_catalog.regclass, oid
					  FROM pg_catalog.pg_proc WHERE pronamespace OPERATOR(pg_catalog.=) n.oid
					UNION ALL
					SELECT 'pg_catalog.pg_type'::pg_catalog.regclass, oid
					  FROM pg_catalog.pg_type WHERE typnamespace OPERATOR(pg_catalog.=) n.oid
					UNION ALL
					SELECT 'pg_catalog.pg_operator'::pg_catalog.regclass, oid
					  FROM pg_catalog.pg_operator WHERE oprnamespace OPERATOR(pg_catalog.=) n.oid
					UNION ALL
					SELECT 'pg_catalog.pg_collation'::pg_catalog.regclass, oid
					  FROM pg_catalog.pg_collation WHERE collnamespace OPERATOR(pg_catalog.=) n.oid
					UNION ALL
					SELECT 'pg_catalog.pg_conversion'::pg_catalog.regclass, oid
					  FROM pg_catalog.pg_conversion WHERE connamespace OPERATOR(pg_catalog.=) n.oid
					UNION ALL
					SELECT 'pg_catalog.pg_opfamily'::pg_catalog.regclass, oid
					  FROM pg_catalog.pg_opfamily WHERE opfnamespace OPERATOR(pg_catalog.=) n.oid
					UNION ALL
					SELECT 'pg_catalog.pg_opclass'::pg_catalog.regclass, oid
					  FROM pg_catalog.pg_opclass WHERE opcnamespace OPERATOR(pg_catalog.=) n.oid
					UNION ALL
					SELECT 'pg_catalog.pg_ts_config'::pg_catalog.regclass, oid
					  FROM pg_catalog.pg_ts_config WHERE cfgnamespace OPERATOR(pg_catalog.=) n.oid
					UNION ALL
					SELECT 'pg_catalog.pg_ts_dict'::pg_catalog.regclass, oid
					  FROM pg_catalog.pg_ts_dict WHERE dictnamespace OPERATOR(pg_catalog.=) n.oid
					UNION ALL
					SELECT 'pg_catalog.pg_statistic_ext'::pg_catalog.regclass, oid
					  FROM pg_catalog.pg_statistic_ext WHERE stxnamespace OPERATOR(pg_catalog.=) n.oid)
			AS o(classid, objid),
		   pg_catalog.pg_identify_object(o.classid, o.objid, 0) i
	 WHERE n.nspname OPERATOR(pg_catalog.=) 'retries'
	 LIMIT 1;
	IF culprit IS NOT NULL THEN
		RAISE EXCEPTION 'schema "retries" already holds %', culprit
			USING ERRCODE = 'insufficient_privilege',
				  HINT = 'The extension needs a schema of its own: drop or rename that schema '
					  || 'before CREATE EXTENSION retries.';
	END IF;
	SELECT CASE WHEN a.grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC'
				ELSE 'role ' OPERATOR(pg_catalog.||) pg_catalog.quote_ident(r.rolname) END
	  INTO culprit
	  FROM pg_catalog.pg_namespace n,
		   pg_catalog.aclexplode(n.nspacl) a
	  LEFT JOIN pg_catalog.pg_roles r ON r.oid OPERATOR(pg_catalog.=) a.grantee
	 WHERE n.nspname OPERATOR(pg_catalog.=) 'retries'
	   AND a.privilege_type OPERATOR(pg_catalog.=) 'CREATE'
	   AND NOT coalesce(r.rolsuper, false)
	 ORDER BY a.grantee
	 LIMIT 1;
	IF culprit IS NOT NULL THEN
		RAISE EXCEPTION '% may create objects in schema "retries"', culprit
			USING ERRCODE = 'insufficient_privilege',
				  HINT = 'Revoke CREATE on schema retries from it (and from PUBLIC), '
					  || 'or drop that schema, before CREATE EXTENSION retries.';
	END IF;
END
$$;

/*
 * The role whose members see and manage every role's calls.  Roles are
 * cluster-wide, so a second database's CREATE EXTENSION finds it already.
 */
DO $$
BEGIN
	IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'retries_admin') THEN
		CREATE ROLE retries_admin NOLOGIN;
	END IF;
END
$$;

COMMENT ON SCHEMA retries IS
	'retries: reliable function calls with retry policies, run by background workers';

-----------------------------------------------------------------------
-- Types
-----------------------------------------------------------------------

CREATE TYPE retries.call_state AS ENUM
	('scheduled', 'running', 'succeeded', 'failed', 'cancelled');
COMMENT ON TYPE retries.call_state IS
	'state of a scheduled call: scheduled, running, succeeded, failed or cancelled';

CREATE TYPE retries.attempt_outcome AS ENUM
	('succeeded', 'retry', 'failed', 'timeout', 'interrupted');
COMMENT ON TYPE retries.attempt_outcome IS
	'outcome of one attempt: succeeded, retry, failed, timeout or interrupted';

-----------------------------------------------------------------------
-- Tables
-----------------------------------------------------------------------

/*
 * policy_data: one row per annotation.  Rows are never changed once written,
 * except that re-annotating or unannotating a function clears is_current;
 * each call refers to the row it was scheduled under and keeps that policy
 * for its whole life.  Functions are stored by OID (fn) and, for people and
 * for dump/restore diagnostics, by qualified signature (fn_signature).
 */
CREATE TABLE retries.policy_data (
	id				integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	fn				oid NOT NULL,
	fn_signature	text NOT NULL,
	is_current		boolean NOT NULL DEFAULT true,
	max_attempts	integer CHECK (max_attempts >= 1),
	min_delay		interval NOT NULL,
	max_delay		interval,
	multiplier		float8 NOT NULL CHECK (multiplier >= 1),
	jitter			text NOT NULL CHECK (jitter IN ('none', 'full', 'equal')),
	retry_on		text[] NOT NULL,
	timeout			interval,
	on_exhausted	oid,
	delay_fn		oid,
	annotated_by	regrole NOT NULL,
	annotated_at	timestamptz NOT NULL DEFAULT pg_catalog.now()
);
CREATE UNIQUE INDEX policy_data_current ON retries.policy_data (fn) WHERE is_current;
COMMENT ON TABLE retries.policy_data IS
	'retry policies, one row per annotation; read it through retries.policies';
COMMENT ON SEQUENCE retries.policy_data_id_seq IS 'ids of policy versions';

/*
 * call_data: one row per scheduled call, kept after it finishes until
 * retries.retention has passed.  args holds the arguments in canonical form
 * (already converted once to the parameter types).  max_attempts is the
 * attempt number after which the call fails: the policy's budget, moved
 * forward when a finished call is retried by hand.
 */
CREATE TABLE retries.call_data (
	id				bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	policy_id		integer NOT NULL,
	args			jsonb NOT NULL,
	state			retries.call_state NOT NULL DEFAULT 'scheduled',
	attempts		integer NOT NULL DEFAULT 0,
	max_attempts	integer,
	next_attempt	timestamptz NOT NULL,
	created_at		timestamptz NOT NULL DEFAULT pg_catalog.now(),
	updated_at		timestamptz NOT NULL DEFAULT pg_catalog.now(),
	scheduled_by	regrole NOT NULL,
	key				text,
	last_sqlstate	text,
	last_message	text
);
/*
 * A call being run keeps state 'scheduled' in this table until its attempt
 * commits (its row is locked meanwhile); the views show it as 'running'
 * while a worker reports it in shared memory.
 */
-- what the workers look for: due calls, earliest first
CREATE INDEX call_data_due ON retries.call_data (next_attempt)
	WHERE state = 'scheduled';
-- dedupe keys: unique per role among unfinished calls; hashed, so keys of
-- any length fit in the index
CREATE UNIQUE INDEX call_data_key ON retries.call_data
	(scheduled_by, pg_catalog.md5(key))
	WHERE key IS NOT NULL AND state IN ('scheduled', 'running');
-- what the workers prune once retries.retention has passed
CREATE INDEX call_data_finished ON retries.call_data (updated_at)
	WHERE state IN ('succeeded', 'failed', 'cancelled');
-- No index on scheduled_by: the views filter through visible_role(),
-- which no index can serve, and every index costs each call an insertion
-- when it is scheduled and when it finishes.
COMMENT ON TABLE retries.call_data IS
	'scheduled calls; read it through retries.calls';
COMMENT ON SEQUENCE retries.call_data_id_seq IS 'ids of calls (not gapless)';

/*
 * attempt_data: one row per attempt of a call, numbered from 1 and never
 * renumbered (a call retried by hand goes on counting).
 */
CREATE TABLE retries.attempt_data (
	call_id			bigint NOT NULL,
	attempt			integer NOT NULL,
	started_at		timestamptz NOT NULL,
	finished_at		timestamptz,
	outcome			retries.attempt_outcome,
	sqlstate		text,
	message			text,
	detail			text,
	hint			text,
	context			text,
	next_delay		interval,
	on_exhausted_error text,
	PRIMARY KEY (call_id, attempt)
);
COMMENT ON TABLE retries.attempt_data IS
	'attempts of calls; read it through retries.attempts';

-- policies and calls survive pg_dump (attempt history is not dumped)
SELECT pg_catalog.pg_extension_config_dump('retries.policy_data', '');
SELECT pg_catalog.pg_extension_config_dump('retries.call_data', '');

REVOKE ALL ON retries.policy_data, retries.call_data, retries.attempt_data FROM PUBLIC;

-----------------------------------------------------------------------
-- Annotating functions
-----------------------------------------------------------------------

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
								 delay_fn regprocedure DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'retries_annotate'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION retries.annotate(regprocedure, text, integer, interval, interval,
									 float8, text, text[], interval, regprocedure, regprocedure) IS
	'give a function a retry policy ''[count] min [max]'', which lets its calls be scheduled';

CREATE FUNCTION retries.unannotate(fn regprocedure)
RETURNS void
AS 'MODULE_PATHNAME', 'retries_unannotate'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION retries.unannotate(regprocedure) IS
	'remove a function''s retry policy; calls already scheduled keep theirs';

-----------------------------------------------------------------------
-- Scheduling calls
-----------------------------------------------------------------------

CREATE FUNCTION retries.call(fn regprocedure,
							 args jsonb DEFAULT '[]',
							 run_at timestamptz DEFAULT pg_catalog.now(),
							 key text DEFAULT NULL)
RETURNS bigint
AS 'MODULE_PATHNAME', 'retries_call'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION retries.call(regprocedure, jsonb, timestamptz, text) IS
	'schedule a call of an annotated function at run_at, as the current role; returns the call id';

-----------------------------------------------------------------------
-- Inside a called function
-----------------------------------------------------------------------

CREATE FUNCTION retries.retry(message text DEFAULT 'retry requested',
							  after interval DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'retries_retry'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;
COMMENT ON FUNCTION retries.retry(text, interval) IS
	'raise SQLSTATE RT000 so the current call is retried, not sooner than after';

CREATE FUNCTION retries.current_call()
RETURNS bigint
AS 'MODULE_PATHNAME', 'retries_current_call'
LANGUAGE C STABLE PARALLEL RESTRICTED;
COMMENT ON FUNCTION retries.current_call() IS
	'id of the call being run by this worker, or NULL outside a worker';

CREATE FUNCTION retries.current_attempt()
RETURNS integer
AS 'MODULE_PATHNAME', 'retries_current_attempt'
LANGUAGE C STABLE PARALLEL RESTRICTED;
COMMENT ON FUNCTION retries.current_attempt() IS
	'number of the attempt being run (1 for the first), or NULL outside a worker';

-----------------------------------------------------------------------
-- Managing calls
-----------------------------------------------------------------------

CREATE FUNCTION retries.cancel(id bigint)
RETURNS boolean
AS 'MODULE_PATHNAME', 'retries_cancel'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION retries.cancel(bigint) IS
	'cancel a call: true if it will not run again, false if it had already finished';

CREATE FUNCTION retries.retry_now(id bigint)
RETURNS boolean
AS 'MODULE_PATHNAME', 'retries_retry_now'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION retries.retry_now(bigint) IS
	'run a scheduled call now, or schedule a failed or cancelled call again now with a fresh attempt budget';

CREATE FUNCTION retries.reschedule(id bigint, run_at timestamptz)
RETURNS boolean
AS 'MODULE_PATHNAME', 'retries_reschedule'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION retries.reschedule(bigint, timestamptz) IS
	'move a scheduled call to run_at, or schedule a failed or cancelled call again at run_at with a fresh attempt budget';

-----------------------------------------------------------------------
-- Internal functions
-----------------------------------------------------------------------

CREATE FUNCTION retries.format_policy(max_attempts integer, min_delay interval,
									  max_delay interval)
RETURNS text
AS 'MODULE_PATHNAME', 'retries_format_policy'
LANGUAGE C IMMUTABLE PARALLEL SAFE;
COMMENT ON FUNCTION retries.format_policy(integer, interval, interval) IS
	'write a policy''s attempts and delays as ''[count] min [max]''';

CREATE FUNCTION retries.start_workers()
RETURNS void
AS 'MODULE_PATHNAME', 'retries_start_workers'
LANGUAGE C VOLATILE;
COMMENT ON FUNCTION retries.start_workers() IS
	'start this database''s workers when the transaction commits; warn if the library is not preloaded';

CREATE FUNCTION retries.running_calls()
RETURNS bigint[]
AS 'MODULE_PATHNAME', 'retries_running_calls'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;
COMMENT ON FUNCTION retries.running_calls() IS
	'ids of the calls the workers of this database are running now';

CREATE FUNCTION retries.worker_status(OUT pid integer, OUT database oid,
									  OUT state text, OUT current_call bigint,
									  OUT since timestamptz, OUT calls_run bigint,
									  OUT errors bigint)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'retries_worker_status'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;
COMMENT ON FUNCTION retries.worker_status() IS
	'one row per worker process (the data behind retries.workers)';

/*
 * Dropping a function clears its annotation, so that a function created
 * later with a reused OID does not inherit it.  The guard covers DROP
 * EXTENSION, during which the table is already gone.
 */
CREATE FUNCTION retries.forget_dropped_functions()
RETURNS event_trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
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
END
$$;
COMMENT ON FUNCTION retries.forget_dropped_functions() IS
	'event trigger: clear the annotations of dropped functions';
REVOKE ALL ON FUNCTION retries.forget_dropped_functions() FROM PUBLIC;

CREATE EVENT TRIGGER retries_forget_dropped_functions ON sql_drop
	EXECUTE FUNCTION retries.forget_dropped_functions();
COMMENT ON EVENT TRIGGER retries_forget_dropped_functions IS
	'clear the annotations of dropped functions';

-----------------------------------------------------------------------
-- Views
-----------------------------------------------------------------------

/*
 * Every view filters on retries.visible_role(): true for the current role's
 * own calls, and for every call if the current role is a superuser or has
 * the privileges of retries_admin.  The views are security barriers, so a
 * user's own functions in a WHERE clause never see hidden rows.
 */
CREATE FUNCTION retries.visible_role(r regrole)
RETURNS boolean
AS 'MODULE_PATHNAME', 'retries_visible_role'
LANGUAGE C STABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION retries.visible_role(regrole) IS
	'may the current role see calls scheduled by this role?';

CREATE VIEW retries.calls WITH (security_barrier) AS
SELECT c.id,
	   p.fn::regprocedure AS fn,
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
	   c.last_message
  FROM retries.call_data c
  JOIN retries.policy_data p ON p.id = c.policy_id
 WHERE retries.visible_role(c.scheduled_by);
COMMENT ON VIEW retries.calls IS
	'scheduled calls: one row per call, with its state and latest error';

CREATE VIEW retries.attempts WITH (security_barrier) AS
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
	   a.on_exhausted_error
  FROM retries.attempt_data a
  JOIN retries.call_data c ON c.id = a.call_id
 WHERE retries.visible_role(c.scheduled_by);
COMMENT ON VIEW retries.attempts IS
	'attempts of calls: one row per attempt, with its outcome and error';

CREATE VIEW retries.policies AS
SELECT p.fn::regprocedure AS fn,
	   pr.proowner::regrole AS owner,
	   p.max_attempts,
	   p.min_delay,
	   p.max_delay,
	   p.multiplier,
	   p.jitter,
	   p.retry_on,
	   p.timeout,
	   p.on_exhausted::regprocedure AS on_exhausted,
	   p.delay_fn::regprocedure AS delay_fn,
	   retries.format_policy(p.max_attempts, p.min_delay, p.max_delay) AS policy
  FROM retries.policy_data p
  JOIN pg_catalog.pg_proc pr ON pr.oid = p.fn
 WHERE p.is_current;
COMMENT ON VIEW retries.policies IS
	'retry policies of annotated functions';

CREATE VIEW retries.stats WITH (security_barrier) AS
WITH visible AS (
	SELECT c.id, c.next_attempt, p.fn,
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
									  AND v.next_attempt <= pg_catalog.now()) AS oldest_due
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
SELECT c.fn::regprocedure AS fn,
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
	   pg_catalog.now() - c.oldest_due AS oldest_due_lag
  FROM by_call c
  LEFT JOIN by_attempt a ON a.fn = c.fn;
COMMENT ON VIEW retries.stats IS
	'per function: calls by state, attempts, retries, success ratio, attempt times and the lag of the oldest due call';

CREATE VIEW retries.workers AS
SELECT w.pid,
	   d.datname AS database,
	   w.state,
	   w.current_call,
	   w.since,
	   w.calls_run,
	   w.errors
  FROM retries.worker_status() w
  LEFT JOIN pg_catalog.pg_database d ON d.oid = w.database;
COMMENT ON VIEW retries.workers IS
	'worker processes of the cluster: state, current call (if the role may see it), calls run and errors';

GRANT USAGE ON SCHEMA retries TO PUBLIC;
GRANT SELECT ON retries.calls, retries.attempts, retries.policies, retries.stats,
	retries.workers TO PUBLIC;

-- say so now if calls cannot run in this cluster
SELECT retries.start_workers();
