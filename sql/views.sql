--
-- views: calls, attempts, policies and stats, and the comments that
-- explain every object
--
CALL test.reset();
CREATE FUNCTION fetch_page(url text) RETURNS void LANGUAGE sql AS '';
SELECT retries.annotate('fetch_page(text)', '4 1s 1m', jitter => 'equal',
						retry_on => '{08}', timeout => '10s');

-- the columns of each view
SELECT table_name, string_agg(column_name, ', ' ORDER BY ordinal_position)
  FROM information_schema.columns
 WHERE table_schema = 'retries' AND table_name IN ('calls', 'attempts', 'policies', 'stats', 'workers')
 GROUP BY table_name ORDER BY table_name;

SELECT * FROM retries.policies;

-- a call with a history of attempts (recorded here as a worker would)
SELECT retries.call('fetch_page(text)', '["https://example.com"]', key => 'page-1');
SELECT retries.call('fetch_page(text)', '["https://example.org"]');
INSERT INTO retries.attempt_data VALUES
	(1, 1, '2026-01-01 00:00:00+00', '2026-01-01 00:00:00.2+00', 'retry', '08006',
	 'connection lost', 'peer reset', 'check the network', 'SQL function "fetch_page"', '1 second'),
	(1, 2, '2026-01-01 00:00:01.2+00', '2026-01-01 00:00:01.6+00', 'succeeded',
	 NULL, NULL, NULL, NULL, NULL, NULL),
	(2, 1, '2026-01-01 00:00:00+00', '2026-01-01 00:00:01+00', 'failed', '22012',
	 'division by zero', NULL, NULL, NULL, NULL);
UPDATE retries.call_data SET state = 'succeeded', attempts = 2 WHERE id = 1;
UPDATE retries.call_data SET state = 'failed', attempts = 1, last_sqlstate = '22012',
	last_message = 'division by zero' WHERE id = 2;
-- a call due a minute ago (run_at cannot be in the past: it is set by hand)
SELECT retries.call('fetch_page(text)', '["https://example.net"]') AS due \gset
UPDATE retries.call_data SET next_attempt = now() - interval '1 minute' WHERE id = :due;

SELECT id, fn, args, state, attempts, max_attempts, scheduled_by, key, last_sqlstate, last_message
  FROM retries.calls ORDER BY id;
SELECT * FROM retries.attempts ORDER BY call_id, attempt;
SELECT fn, scheduled, running, succeeded, failed, cancelled, attempts, retries,
	   success_ratio, mean_attempt_time, p95_attempt_time,
	   oldest_due_lag >= interval '1 minute' AS lagging
  FROM retries.stats;

-- every object of the extension explains itself in \df+ and \d+ (this
-- lists those that do not)
SELECT pg_describe_object(d.classid, d.objid, 0) AS object
  FROM pg_depend d
 WHERE d.refclassid = 'pg_extension'::regclass
   AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'retries')
   AND d.deptype = 'e'
   AND obj_description(d.objid, d.classid::regclass::name) IS NULL
   -- row types of tables and views and array types come with them (from
   -- PostgreSQL 17 on they are members of the extension too)
   AND NOT EXISTS (SELECT FROM pg_type t
				   WHERE d.classid = 'pg_type'::regclass AND t.oid = d.objid
					 AND (t.typrelid <> 0 OR t.typcategory = 'A'))
 ORDER BY 1;
SELECT obj_description('retries'::regnamespace, 'pg_namespace') IS NOT NULL AS schema_commented;

DROP FUNCTION fetch_page(text);
