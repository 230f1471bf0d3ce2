/*
 * retries--1.2--1.3.sql
 *	  Upgrade script of the retries extension from 1.2 to 1.3.  CREATE
 *	  EXTENSION retries (1.3) runs retries--1.0.sql and the update scripts
 *	  after it, so new and upgraded databases get the same objects by the
 *	  same statements.
 *
 * Containment and authorization (doc/operations.md): what one role's calls
 * can reach or learn of the others'.  Most of it is in the library, which
 * serves databases still at 1.2 too; what needs the schema is here:
 *
 * - a gate (see src/flow.c) releases the calls it holds in turns between
 *   the roles that scheduled them, also within each limit_key, so that one
 *   role's backlog of calls of a limited function, or of a key, cannot
 *   keep another role's calls of it waiting (index call_data_held_by_role,
 *   and call_data_held_by_key by role too; without them, at 1.2, earliest
 *   first);
 * - retries.policies lists only the annotated functions that the role may
 *   call (EXECUTE on the function, USAGE on its schema) or whose owner's
 *   calls it may read;
 * - dropping a function names, in its NOTICEs, only the dropped schedules
 *   of the role that drops it (every one, for retries_admin): another
 *   role's schedule is counted, not named.
 */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION retries UPDATE TO '1.3'" to load this file. \quit

-- what a limited gate releases: in turns between the roles whose calls it
-- holds (one index probe per role), earliest first within each role; and,
-- for a limit per key, the same within each key.  The DROP first: it
-- takes call_data's strongest lock before any other, as the workers'
-- batches lock their tables in another order (see retries--1.1--1.2.sql).
DROP INDEX retries.call_data_held_by_key;
CREATE INDEX call_data_held_by_key ON retries.call_data (gate, limit_key, scheduled_by, next_attempt)
	WHERE state = 'scheduled' AND held;
CREATE INDEX call_data_held_by_role ON retries.call_data (gate, scheduled_by, next_attempt)
	WHERE state = 'scheduled' AND held;

-- a role sees the policies of the functions it may call, and those that
-- the roles whose calls it may read own
CREATE OR REPLACE VIEW retries.policies WITH (security_barrier) AS
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
 WHERE p.is_current
   AND (retries.visible_role(pr.proowner::regrole)
		OR (pg_catalog.has_schema_privilege(pr.pronamespace, 'USAGE')
			AND pg_catalog.has_function_privilege(pr.oid, 'EXECUTE')));
COMMENT ON VIEW retries.policies IS
	'the retry policy, limits and pause of each annotated function that the current role may call';

/*
 * A dropped function takes its schedules with it.  The NOTICE names a
 * schedule only to the role that drops the function if it owns the
 * schedule or may see every role's calls (the role, here: SET ROLE's, or
 * the session's; this function runs as the extension's owner).
 */
CREATE OR REPLACE FUNCTION retries.forget_dropped_functions()
RETURNS event_trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	gone record;
	dropper oid;
	sees_all boolean;
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
	SELECT r.oid, r.rolsuper OR pg_catalog.pg_has_role(r.oid, a.oid, 'USAGE')
	  INTO dropper, sees_all
	  FROM pg_catalog.pg_roles r
	  LEFT JOIN pg_catalog.pg_roles a ON a.rolname = 'retries_admin'
	 WHERE r.rolname = coalesce(NULLIF(pg_catalog.current_setting('role'), 'none'),
								session_user);
	FOR gone IN
		DELETE FROM retries.schedule_data s
		 USING pg_catalog.pg_event_trigger_dropped_objects() d
		 WHERE d.classid = 'pg_catalog.pg_proc'::pg_catalog.regclass
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
