/*
 * retries--1.3--1.4.sql
 *	  Upgrade script of the retries extension from 1.3 to 1.4.
 *
 * 1.4 lets pg_upgrade upgrade a cluster that uses retries in place.
 *
 * - The extension's tables refer to functions by OID (type oid), no longer
 *   by regprocedure: pg_upgrade refuses user tables with regproc or
 *   regprocedure columns, because it keeps the OIDs of types, relations
 *   and roles but not those of functions.  Columns policy_data.fn,
 *   .on_exhausted, .delay_fn, schedule_data.fn, flow_data.fn and
 *   call_data.gate change type.  Both types are the same four bytes: the
 *   change rewrites no table and rebuilds no index.
 * - retries.function_names keeps, for each function those columns refer
 *   to, its qualified signature and the OID of the extension it was
 *   written under.  After pg_upgrade, or pg_dump and restore, the
 *   extension has another OID; the first worker or session that uses
 *   the database then maps every stored OID to the function that the
 *   signature now names (see src/function_names.c), before anything runs.
 *   The signatures follow ALTER FUNCTION ... RENAME / SET SCHEMA and
 *   ALTER SCHEMA ... RENAME.
 * - The drop event trigger reads the extension's tables only when a
 *   function was dropped, and then looks the dropped functions up in
 *   function_names (its primary key) before anything else: DDL that drops
 *   no function runs no statement on them, and a DROP of functions that
 *   the extension does not refer to one index lookup.
 *
 * The views that show those columns keep their columns, types, grants and
 * comments: each is first replaced by an empty one with the same columns
 * (a view that reads a column keeps it from changing type), then by its
 * definition reading the new columns.
 */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION retries UPDATE TO '1.4'" to load this file. \quit

-- in the order the workers' batches take them: policy_data, then call_data
LOCK TABLE retries.policy_data, retries.call_data, retries.flow_data,
	retries.schedule_data IN ACCESS EXCLUSIVE MODE;

DO $$
DECLARE
	v regclass;
	cols text;
BEGIN
	FOREACH v IN ARRAY ARRAY['retries.calls', 'retries.policies', 'retries.stats',
							 'retries.schedules']::regclass[]
	LOOP
		SELECT string_agg(pg_catalog.format('NULL::%s AS %I',
								pg_catalog.format_type(a.atttypid, a.atttypmod),
								a.attname), ', ' ORDER BY a.attnum)
		  INTO cols
		  FROM pg_catalog.pg_attribute a
		 WHERE a.attrelid = v AND a.attnum > 0 AND NOT a.attisdropped;
		EXECUTE pg_catalog.format('CREATE OR REPLACE VIEW %s AS SELECT %s WHERE false',
								  v, cols);
	END LOOP;
END
$$;

ALTER TABLE retries.policy_data
	ALTER COLUMN fn TYPE oid,
	ALTER COLUMN on_exhausted TYPE oid,
	ALTER COLUMN delay_fn TYPE oid;
ALTER TABLE retries.call_data ALTER COLUMN gate TYPE oid;
ALTER TABLE retries.flow_data ALTER COLUMN fn TYPE oid;
ALTER TABLE retries.schedule_data ALTER COLUMN fn TYPE oid;
-- a dropped function's schedules are found by it
CREATE INDEX schedule_data_fn ON retries.schedule_data (fn);

CREATE FUNCTION retries.function_signature(fn oid)
RETURNS text
AS 'MODULE_PATHNAME', 'retries_function_signature'
LANGUAGE C STABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION retries.function_signature(oid) IS
	'the schema-qualified signature of a function, as retries.function_names keeps it; NULL if there is no such function';

/*
 * function_names: the functions that the extension's tables refer to, by
 * OID, by qualified signature and by owner.  ext is the OID of the
 * extension when the row was written: a row with another one came from
 * another cluster (pg_upgrade) or database (pg_dump), and its fn means
 * nothing here until it is mapped again by signature, to a function of
 * the same owner only (role OIDs are kept by pg_upgrade, and regrole
 * restores by name).
 */
CREATE TABLE retries.function_names (
	fn				oid PRIMARY KEY,
	signature		text NOT NULL,
	owner			regrole NOT NULL,
	ext				oid NOT NULL
);
COMMENT ON TABLE retries.function_names IS
	'the qualified signature of every function the extension refers to, so that pg_upgrade and pg_dump keep the references';
REVOKE ALL ON retries.function_names FROM PUBLIC;
SELECT pg_catalog.pg_extension_config_dump('retries.function_names', '');

INSERT INTO retries.function_names (fn, signature, owner, ext)
SELECT r.fn, retries.function_signature(r.fn), pr.proowner, e.oid
  FROM (SELECT fn FROM retries.policy_data
		UNION SELECT on_exhausted FROM retries.policy_data
		UNION SELECT delay_fn FROM retries.policy_data
		UNION SELECT fn FROM retries.schedule_data
		UNION SELECT fn FROM retries.flow_data) r
  JOIN pg_catalog.pg_proc pr ON pr.oid = r.fn,
	   pg_catalog.pg_extension e
 WHERE e.extname = 'retries';

CREATE OR REPLACE VIEW retries.calls WITH (security_barrier) AS
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
	   pg_catalog.now() - c.oldest_due AS oldest_due_lag,
	   c.held,
	   coalesce(f.paused, false) AS paused
  FROM by_call c
  LEFT JOIN by_attempt a ON a.fn = c.fn
  LEFT JOIN retries.flow_data f ON f.fn = c.fn;

CREATE OR REPLACE VIEW retries.policies WITH (security_barrier) AS
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
	   retries.format_policy(p.max_attempts, p.min_delay, p.max_delay) AS policy,
	   f.max_running,
	   f.max_running_per_key,
	   f.rate,
	   coalesce(f.paused, false) AS paused,
	   p.notify
  FROM retries.policy_data p
  JOIN pg_catalog.pg_proc pr ON pr.oid = p.fn
  LEFT JOIN retries.flow_data f ON f.fn = p.fn
 WHERE p.is_current
   AND (retries.visible_role(pr.proowner::regrole)
		OR (pg_catalog.has_schema_privilege(pr.pronamespace, 'USAGE')
			AND pg_catalog.has_function_privilege(pr.oid, 'EXECUTE')));

CREATE OR REPLACE VIEW retries.schedules WITH (security_barrier) AS
SELECT s.id,
	   s.name,
	   s.fn::regprocedure AS fn,
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

/*
 * A dropped function takes its schedules with it (see 1.3 for the
 * NOTICEs).  The dropped objects are looked at first: a DROP that drops
 * no function reads none of the extension's tables.
 */
CREATE OR REPLACE FUNCTION retries.forget_dropped_functions()
RETURNS event_trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	fns oid[];
	gone record;
	dropper oid;
	sees_all boolean;
BEGIN
	SELECT array_agg(d.objid) INTO fns
	  FROM pg_catalog.pg_event_trigger_dropped_objects() d
	 WHERE d.classid = 'pg_catalog.pg_proc'::pg_catalog.regclass;
	IF fns IS NULL OR pg_catalog.to_regclass('retries.function_names') IS NULL THEN
		RETURN;
	END IF;
	-- of those, the ones the extension refers to: all are in function_names
	-- (under this extension: rows from before a restore name other OIDs)
	SELECT array_agg(f.fn) INTO fns
	  FROM retries.function_names f
	 WHERE f.fn = ANY (fns)
	   AND f.ext = (SELECT e.oid FROM pg_catalog.pg_extension e
					 WHERE e.extname = 'retries');
	IF fns IS NULL THEN
		RETURN;
	END IF;
	DELETE FROM retries.function_names WHERE fn = ANY (fns);
	UPDATE retries.policy_data p
	   SET is_current = false
	 WHERE p.is_current AND p.fn = ANY (fns);
	-- its held calls are let go, to fail as any call of a dropped function
	UPDATE retries.call_data c
	   SET gate = NULL, held = false
	 WHERE c.gate = ANY (fns) AND c.state = 'scheduled';
	DELETE FROM retries.flow_data f WHERE f.fn = ANY (fns);
	SELECT r.oid, r.rolsuper OR pg_catalog.pg_has_role(r.oid, a.oid, 'USAGE')
	  INTO dropper, sees_all
	  FROM pg_catalog.pg_roles r
	  LEFT JOIN pg_catalog.pg_roles a ON a.rolname = 'retries_admin'
	 WHERE r.rolname = coalesce(NULLIF(pg_catalog.current_setting('role'), 'none'),
								session_user);
	FOR gone IN
		DELETE FROM retries.schedule_data s
		 USING pg_catalog.pg_event_trigger_dropped_objects() d
		 WHERE s.fn = ANY (fns)
		   AND d.classid = 'pg_catalog.pg_proc'::pg_catalog.regclass
		   AND d.objid = s.fn
		RETURNING s.name, s.owner, d.object_identity
	LOOP
		IF gone.owner::oid = dropper OR sees_all THEN
			RAISE NOTICE 'schedule "%" of role % dropped with function %',
				gone.name, gone.owner, gone.object_identity;
		ELSE
			RAISE NOTICE 'a schedule of another role dropped with function %',
				gone.object_identity;
		END IF;
	END LOOP;
END
$$;
