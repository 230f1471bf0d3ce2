/*
 * retries--1.0--1.1.sql
 *	  Upgrade script of the retries extension from 1.0 to 1.1.  CREATE
 *	  EXTENSION retries (1.1) runs retries--1.0.sql and then this script, so
 *	  new and upgraded databases get the same objects by the same statements.
 *
 * 1.1 makes a database's calls survive pg_dump and restore into another
 * cluster:
 *
 * - policy_data names functions by regprocedure, not oid.  Both are the
 *   same four bytes, so the C code reads either; but pg_dump writes a
 *   regprocedure as its signature ('public.send_mail(text)'), which the
 *   restore turns back into the OID the function has in the new database.
 *   A plain oid was dumped as a number, which names no function, or the
 *   wrong one, after a restore.  (Roles were already regrole.)
 * - The attempt history and the two identity sequences are dumped with
 *   the tables.  Without the sequences, the first call scheduled after a
 *   restore reused id 1 and failed on the primary key.
 *
 * The views that read policy_data.fn must be dropped to change its type;
 * they are created again as they were.
 *
 * 1.1 also shows each worker's busy time: retries.worker_status() and
 * retries.workers get a column busy_time, the time the worker process has
 * spent running calls (attempts and their commits) since it started.  The
 * library serves a database still at 1.0 too: it fills in as many columns
 * as the function is declared with there.
 *
 * Dump a 1.0 database only after updating it: its oids restore as numbers.
 * pg_upgrade refuses a cluster with regprocedure columns in user tables
 * (its check names retries.policy_data), since it keeps the OIDs of roles
 * and types but not of functions; under 1.0 it went through and left each
 * policy naming whatever function has its old OID in the new cluster.
 * Databases that use retries move to a new major version by pg_dump and
 * restore.  Restore with retries.enabled = off and turn it on afterwards,
 * so that no call runs before the tables are all loaded.
 */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION retries UPDATE TO '1.1'" to load this file. \quit

DROP VIEW retries.calls, retries.policies, retries.stats;

ALTER TABLE retries.policy_data
	ALTER COLUMN fn TYPE regprocedure,
	ALTER COLUMN on_exhausted TYPE regprocedure,
	ALTER COLUMN delay_fn TYPE regprocedure;

SELECT pg_catalog.pg_extension_config_dump('retries.attempt_data', '');
SELECT pg_catalog.pg_extension_config_dump('retries.policy_data_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('retries.call_data_id_seq', '');

CREATE VIEW retries.calls WITH (security_barrier) AS
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
	   c.last_message
  FROM retries.call_data c
  JOIN retries.policy_data p ON p.id = c.policy_id
 WHERE retries.visible_role(c.scheduled_by);
COMMENT ON VIEW retries.calls IS
	'scheduled calls: one row per call, with its state and latest error';

CREATE VIEW retries.policies AS
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
	   pg_catalog.now() - c.oldest_due AS oldest_due_lag
  FROM by_call c
  LEFT JOIN by_attempt a ON a.fn = c.fn;
COMMENT ON VIEW retries.stats IS
	'per function: calls by state, attempts, retries, success ratio, attempt times and the lag of the oldest due call';

GRANT SELECT ON retries.calls, retries.policies, retries.stats TO PUBLIC;

COMMENT ON TABLE retries.policy_data IS
	'retry policies, one row per annotation (functions by regprocedure, so they survive pg_dump); read it through retries.policies';
COMMENT ON TABLE retries.attempt_data IS
	'attempts of calls (dumped by pg_dump, as are policies and calls); read it through retries.attempts';

-- busy_time: the function gets an OUT column, so it is dropped and created
-- again, and the view over it with it
DROP VIEW retries.workers;
DROP FUNCTION retries.worker_status();

CREATE FUNCTION retries.worker_status(OUT pid integer, OUT database oid,
									  OUT state text, OUT current_call bigint,
									  OUT since timestamptz, OUT calls_run bigint,
									  OUT errors bigint, OUT busy_time interval)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'retries_worker_status'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;
COMMENT ON FUNCTION retries.worker_status() IS
	'one row per worker process (the data behind retries.workers)';

CREATE VIEW retries.workers AS
SELECT w.pid,
	   d.datname AS database,
	   w.state,
	   w.current_call,
	   w.since,
	   w.calls_run,
	   w.errors,
	   w.busy_time
  FROM retries.worker_status() w
  LEFT JOIN pg_catalog.pg_database d ON d.oid = w.database;
COMMENT ON VIEW retries.workers IS
	'worker processes of the cluster: state, current call (if the role may see it), calls run, errors and busy time';
COMMENT ON COLUMN retries.workers.busy_time IS
	'time this worker process has spent running calls (attempts and their commits) since it started';

GRANT SELECT ON retries.workers TO PUBLIC;
