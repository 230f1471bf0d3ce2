/*
 * retries--1.3--1.4.sql
 *	  Upgrade script of the retries extension from 1.3 to 1.4.
 *
 * 1.4 lets pg_upgrade upgrade a cluster that uses retries in place.
 *
 * - The extension's tables refer to functions by key, no longer by
 *   regprocedure: pg_upgrade refuses user tables with regproc or
 *   regprocedure columns, because it keeps the OIDs of types, relations
 *   and roles but not those of functions.  Columns policy_data.fn,
 *   .on_exhausted, .delay_fn, schedule_data.fn, flow_data.fn and
 *   call_data.gate become type oid (the same four bytes: no table is
 *   rewritten) and hold keys of the new table retries.function_names,
 *   numbers of the extension's own, drawn at random, that pg_dump and
 *   pg_upgrade keep.  The
 *   functions referred to before the update keep their OIDs as keys, so
 *   no row of those tables changes.
 * - retries.function_names keeps, for each key, its function's OID, its
 *   schema-qualified signature, its owner, and the OID of the extension
 *   the row was written under.  After pg_upgrade, or pg_dump and restore,
 *   the extension has another OID: such a row names its function by
 *   signature and owner, until a worker writes the new OID (see
 *   src/function_names.c).  No other row has to change, so there is no
 *   moment at which half the references are mapped.  Signatures follow
 *   ALTER FUNCTION ... RENAME / SET SCHEMA and ALTER SCHEMA ... RENAME.
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

CREATE FUNCTION retries.origin()
RETURNS bigint
AS 'MODULE_PATHNAME', 'retries_origin'
LANGUAGE C STABLE PARALLEL SAFE;
COMMENT ON FUNCTION retries.origin() IS
	'this instance of the extension, as retries.function_names marks its rows: a hash of the cluster''s system identifier and the extension''s OID';

CREATE FUNCTION retries.resolve_function(signature text, owner regrole)
RETURNS oid
AS 'MODULE_PATHNAME', 'retries_resolve_function'
LANGUAGE C STABLE STRICT PARALLEL RESTRICTED;
COMMENT ON FUNCTION retries.resolve_function(text, regrole) IS
	'the OID of the function that a qualified signature names, if owner owns it; NULL otherwise';

/*
 * function_names: every function the extension's tables refer to.  Those
 * tables hold its key (a number of this table's own, which pg_dump and
 * pg_upgrade keep as any number), never its OID; only this table knows
 * the OID, and knows it only under the extension that wrote it (origin: a
 * hash of the cluster's system identifier and the extension's OID): a
 * row written under another (another cluster, pg_upgrade; another
 * database, a restore) names its function by signature and owner until a
 * worker writes the OID anew (src/function_names.c).  fn = 0: the
 * function was dropped, for good.
 */
CREATE TABLE retries.function_names (
	key				oid PRIMARY KEY,
	fn				oid NOT NULL,
	signature		text NOT NULL,
	owner			regrole NOT NULL,
	origin			bigint NOT NULL
);
CREATE UNIQUE INDEX function_names_fn ON retries.function_names (fn, origin)
	WHERE fn <> 0;
COMMENT ON TABLE retries.function_names IS
	'the functions the extension refers to, by key, with their qualified signatures and owners, so that pg_upgrade and pg_dump keep the references';
REVOKE ALL ON retries.function_names FROM PUBLIC;
SELECT pg_catalog.pg_extension_config_dump('retries.function_names', '');

/*
 * The functions referred to so far keep their OIDs as their keys: the
 * tables need no change, and a worker or session that read a reference
 * just before this update committed reads the same function after it.
 * Later keys are drawn at random (src/function_names.c).
 */
INSERT INTO retries.function_names (key, fn, signature, owner, origin)
SELECT r.fn, r.fn, retries.function_signature(r.fn), pr.proowner, retries.origin()
  FROM (SELECT fn FROM retries.policy_data
		UNION SELECT on_exhausted FROM retries.policy_data
		UNION SELECT delay_fn FROM retries.policy_data
		UNION SELECT fn FROM retries.schedule_data
		UNION SELECT fn FROM retries.flow_data
		UNION SELECT gate FROM retries.call_data WHERE gate IS NOT NULL) r
  JOIN pg_catalog.pg_proc pr ON pr.oid = r.fn
 ORDER BY r.fn;

/*
 * function_refs: the function each key stands for here and now (NULL: it
 * is gone): the stored OID under this extension, else the function that
 * the signature names, if the same role owns it.  The views read function
 * names through it.
 */
CREATE VIEW retries.function_refs AS
SELECT k.key,
	   CASE WHEN k.origin = retries.origin() THEN NULLIF(k.fn, 0)
			WHEN k.fn <> 0
			THEN retries.resolve_function(k.signature, k.owner)
	   END::regprocedure AS fn
  FROM retries.function_names k;
COMMENT ON VIEW retries.function_refs IS
	'the function that each key of retries.function_names stands for in this database (NULL: it is gone); read by the other views';
REVOKE ALL ON retries.function_refs FROM PUBLIC;

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
			ELSE '{}'::bigint[] END AS waiting_for
  FROM retries.call_data c
  JOIN retries.policy_data p ON p.id = c.policy_id
  LEFT JOIN retries.function_refs r ON r.key = p.fn
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
SELECT (SELECT r.fn FROM retries.function_refs r WHERE r.key = c.fn) AS fn,
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
	   p.notify
  FROM retries.policy_data p
  JOIN retries.function_refs r ON r.key = p.fn
  JOIN pg_catalog.pg_proc pr ON pr.oid = r.fn
  LEFT JOIN retries.flow_data f ON f.fn = p.fn
 WHERE p.is_current
   AND (retries.visible_role(pr.proowner::regrole)
		OR (pg_catalog.has_schema_privilege(pr.pronamespace, 'USAGE')
			AND pg_catalog.has_function_privilege(pr.oid, 'EXECUTE')));

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
	   s.created_at
  FROM retries.schedule_data s
 WHERE retries.visible_role(s.owner);

/*
 * A dropped function takes its schedules with it (see 1.3 for the
 * NOTICEs).  The dropped objects are looked at first: a DROP that drops
 * no function reads none of the extension's tables.  The keys of the
 * dropped functions keep their rows in function_names, with fn = 0: a
 * function made later under the same name is another one.
 */
CREATE OR REPLACE FUNCTION retries.forget_dropped_functions()
RETURNS event_trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	fns oid[];
	keys oid[];
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
	-- the keys of those the extension refers to; a row written under
	-- another extension (not yet written anew after a restore or an
	-- upgrade) by its signature, the dropped function's identity (it is
	-- gone from pg_proc already: resolve_function would find nothing)
	WITH hit AS (
		SELECT k.key, d.objid AS fn
		  FROM retries.function_names k
		  JOIN pg_catalog.pg_event_trigger_dropped_objects() d
			ON d.classid = 'pg_catalog.pg_proc'::pg_catalog.regclass
		   AND ((k.origin = retries.origin() AND k.fn = d.objid)
				OR (k.origin <> retries.origin() AND k.signature = d.object_identity))
		 WHERE k.fn <> 0
	), forgotten AS (
		UPDATE retries.function_names k SET fn = 0, origin = retries.origin()
		  FROM hit
		 WHERE k.key = hit.key
	)
	SELECT array_agg(hit.key), array_agg(hit.fn) INTO keys, fns FROM hit;
	IF keys IS NULL THEN
		RETURN;
	END IF;
	UPDATE retries.policy_data p
	   SET is_current = false
	 WHERE p.is_current AND p.fn = ANY (keys);
	-- its held calls are let go, to fail as any call of a dropped function
	UPDATE retries.call_data c
	   SET gate = NULL, held = false
	 WHERE c.gate = ANY (keys) AND c.state = 'scheduled';
	DELETE FROM retries.flow_data f WHERE f.fn = ANY (keys);
	SELECT r.oid, r.rolsuper OR pg_catalog.pg_has_role(r.oid, a.oid, 'USAGE')
	  INTO dropper, sees_all
	  FROM pg_catalog.pg_roles r
	  LEFT JOIN pg_catalog.pg_roles a ON a.rolname = 'retries_admin'
	 WHERE r.rolname = coalesce(NULLIF(pg_catalog.current_setting('role'), 'none'),
								session_user);
	FOR gone IN
		DELETE FROM retries.schedule_data s
		 USING ROWS FROM (pg_catalog.unnest(keys), pg_catalog.unnest(fns)) AS m(key, fn),
			   pg_catalog.pg_event_trigger_dropped_objects() d
		 WHERE s.fn = m.key
		   AND d.classid = 'pg_catalog.pg_proc'::pg_catalog.regclass
		   AND d.objid = m.fn
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
