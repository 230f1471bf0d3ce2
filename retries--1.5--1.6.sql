/*
 * retries--1.5--1.6.sql
 *	  Upgrade script of the retries extension from 1.5 to 1.6.
 *
 * 1.6 brings keys with windows, debounce and events (doc/reference.md,
 * retries.call; doc/cookbook.md has a workflow built of them).
 *
 * - Windows.  retries.call(key_window => ...) dedupes a key only within
 *   that long of the kept call's creation; after it the key passes to a
 *   new call, and the old one keeps it for the record.  call_data.key_gen
 *   numbers the calls of one key of a role, from 0; the latest holds the
 *   key.  The unique index call_data_key is rebuilt over (role, key,
 *   key_gen): a new call of a key never writes the row of the one before,
 *   which a worker may hold locked for as long as it runs.
 *   retries.annotate(key_window => ...) gives a function's calls their
 *   default (policy_data.key_window).
 * - Debounce.  retries.call(debounce => ...) moves the key's call that
 *   has not started to now() + debounce, with the new arguments.
 * - Events.  retries.call(on_event => ...) makes a call that waits,
 *   uncharged, until its role emits that event (retries.emit), or until
 *   event_timeout has passed.  It waits as a call that runs after another
 *   does (chains): held, with one more in waiting_on, so that nothing that
 *   releases held calls releases it early.  call_data.on_event names the
 *   event, event_deadline the timeout, event_wait says whether it still
 *   waits (true), was released by the event (false) or by its timeout
 *   (NULL).  Events are kept per role in event_data, the latest payload
 *   of each, and pruned like calls.  retries.event() gives a call its
 *   event's payload; retries.calls gains waiting_for_event.
 */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION retries UPDATE TO '1.6'" to load this file. \quit

-- the strongest locks first, in the order the workers' batches take them
-- (see 1.4): a weaker lock taken first, then made stronger, deadlocks with
-- a worker that holds one table and waits for the other
LOCK TABLE retries.policy_data, retries.call_data IN ACCESS EXCLUSIVE MODE;

ALTER TABLE retries.policy_data ADD COLUMN key_window interval;
COMMENT ON COLUMN retries.policy_data.key_window IS
	'the key_window of the function''s calls that give none (retries.annotate); NULL: a key lasts as long as its call is kept';

ALTER TABLE retries.call_data ADD COLUMN key_gen integer NOT NULL DEFAULT 0,
	ADD COLUMN on_event text,
	ADD COLUMN event_deadline timestamptz,
	ADD COLUMN event_wait boolean;
COMMENT ON COLUMN retries.call_data.key_gen IS
	'which call of its key of its role it is, from 0: the key passed on after a key_window (or a debounce of a started call); the latest holds the key';
COMMENT ON COLUMN retries.call_data.on_event IS
	'the event of its role that the call waits for, or waited for (NULL: none)';
COMMENT ON COLUMN retries.call_data.event_deadline IS
	'when the call runs without its event (NULL: it waits as long as it takes)';
COMMENT ON COLUMN retries.call_data.event_wait IS
	'true while the call waits for its event, false once the event released it, NULL after its timeout (or without an event)';

-- a key of a role names one call of each key_gen; the latest holds it
DROP INDEX retries.call_data_key;
CREATE UNIQUE INDEX call_data_key ON retries.call_data
	(scheduled_by, pg_catalog.md5(key), key_gen)
	WHERE key IS NOT NULL;

-- what an emit releases, and what the workers release at the timeouts.
-- Each predicate names a column that only its own queries test (emit's
-- on_event, the timeouts' event_deadline), so that neither index can serve
-- the other's queries: the workers keep one plan of the timeout queries,
-- and one made while no call waited scanned and sorted every waiting call
-- through the other index at each wake-up (bench/events)
CREATE INDEX call_data_event_wait ON retries.call_data
	(scheduled_by, pg_catalog.md5(on_event))
	WHERE event_wait AND state = 'scheduled' AND on_event IS NOT NULL;
CREATE INDEX call_data_event_deadline ON retries.call_data (event_deadline)
	WHERE event_wait AND state = 'scheduled' AND event_deadline IS NOT NULL;

/*
 * event_data: the latest emit of each event of each role, kept until
 * retries.retention has passed since it
 */
CREATE TABLE retries.event_data (
	role			regrole NOT NULL,
	event			text NOT NULL,
	payload			jsonb,
	emitted_at		timestamptz NOT NULL
);
-- not unique: emit() keeps one row per event of a role (it holds the
-- event's lock), and a restore in several runs may load the dump's row of
-- an event beside one that its role emitted between the runs (the latest
-- counts), instead of failing to load the whole table
CREATE INDEX event_data_event ON retries.event_data
	(role, pg_catalog.md5(event));
CREATE INDEX event_data_emitted ON retries.event_data (emitted_at);
COMMENT ON TABLE retries.event_data IS
	'the latest emit of each event of each role (retries.emit); read by retries.event() inside a call';
SELECT pg_catalog.pg_extension_config_dump('retries.event_data', '');
REVOKE ALL ON retries.event_data FROM PUBLIC;

/*
 * call and annotate gain arguments: new signatures, so the old functions
 * go.  Renamed first, so that the new ones are given the privileges that
 * the old ones had, as the user's own (see 1.2, and retries_grant_as_user
 * in src/tables/access.c)
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

ALTER FUNCTION retries.call(regprocedure, jsonb, timestamptz, text, integer, text, bigint[])
	RENAME TO call_1_5;
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
							 event_timeout interval DEFAULT NULL)
RETURNS bigint
AS 'MODULE_PATHNAME', 'retries_call'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION retries.call(regprocedure, jsonb, timestamptz, text, integer, text, bigint[],
								 interval, interval, text, interval) IS
	'schedule a call of an annotated function at run_at, as the current role; a key dedupes (within key_window), debounce moves the key''s call that has not started; on_event waits for the role''s event (up to event_timeout); returns the call id';
SELECT retries.copy_grants('retries.call_1_5(regprocedure, jsonb, timestamptz, text, integer, text, bigint[])',
						   'retries.call(regprocedure, jsonb, timestamptz, text, integer, text, bigint[], interval, interval, text, interval)');
DROP FUNCTION retries.call_1_5(regprocedure, jsonb, timestamptz, text, integer, text, bigint[]);

ALTER FUNCTION retries.annotate(regprocedure, text, integer, interval, interval, float8, text,
								text[], interval, regprocedure, regprocedure, integer, integer,
								text, boolean)
	RENAME TO annotate_1_5;
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
								 key_window interval DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'retries_annotate'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION retries.annotate(regprocedure, text, integer, interval, interval,
									 float8, text, text[], interval, regprocedure,
									 regprocedure, integer, integer, text, boolean, interval) IS
	'give a function a retry policy ''[count] min [max]'', which lets its calls be scheduled, and at most max_running of its attempts at once, max_running_per_key of one limit_key, and starts at most at rate (''100/1s''); with notify, each finished call sends NOTIFY retries_finished; key_window is its calls'' default';
SELECT retries.copy_grants('retries.annotate_1_5(regprocedure, text, integer, interval, interval, float8, text, text[], interval, regprocedure, regprocedure, integer, integer, text, boolean)',
						   'retries.annotate(regprocedure, text, integer, interval, interval, float8, text, text[], interval, regprocedure, regprocedure, integer, integer, text, boolean, interval)');
DROP FUNCTION retries.annotate_1_5(regprocedure, text, integer, interval, interval,
								   float8, text, text[], interval, regprocedure, regprocedure,
								   integer, integer, text, boolean);
DROP FUNCTION retries.copy_grants(regprocedure, regprocedure);
DROP FUNCTION retries.grant_as_user(text);

CREATE FUNCTION retries.emit(event text, payload jsonb DEFAULT NULL)
RETURNS bigint
AS 'MODULE_PATHNAME', 'retries_emit'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION retries.emit(text, jsonb) IS
	'emit an event of the current role, with a payload: its calls waiting for it run (when this transaction commits), and so do those made later; returns how many calls it released';

CREATE FUNCTION retries.event()
RETURNS jsonb
AS 'MODULE_PATHNAME', 'retries_event'
LANGUAGE C STABLE PARALLEL UNSAFE;
COMMENT ON FUNCTION retries.event() IS
	'inside a call made with on_event: the latest payload of its event (JSON null if emitted without one); NULL past its event_timeout, or outside such a call';

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
			THEN c.args ->> 0 END AS command,
	   CASE WHEN c.event_wait AND c.state = 'scheduled'
			THEN c.on_event END AS waiting_for_event
  FROM retries.call_data c
  JOIN retries.policy_data p ON p.id = c.policy_id
  LEFT JOIN retries.function_refs r ON r.key = p.fn
 WHERE retries.visible_role(c.scheduled_by);
COMMENT ON COLUMN retries.calls.waiting_for_event IS
	'the event of its role that the call waits for (retries.call''s on_event) until it is emitted or its timeout passes; NULL otherwise';

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
	   p.key_window
  FROM retries.policy_data p
  JOIN retries.function_refs r ON r.key = p.fn
  JOIN pg_catalog.pg_proc pr ON pr.oid = r.fn
  LEFT JOIN retries.flow_data f ON f.fn = p.fn
 WHERE p.is_current
   AND (retries.visible_role(pr.proowner::regrole)
		OR (pg_catalog.has_schema_privilege(pr.pronamespace, 'USAGE')
			AND pg_catalog.has_function_privilege(pr.oid, 'EXECUTE')));
COMMENT ON COLUMN retries.policies.key_window IS
	'the key_window of its calls that give none (retries.annotate); NULL: a key lasts as long as its call is kept';
