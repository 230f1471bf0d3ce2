-- demo.sql: a scripted session with retries, run by scripts/demo against a
-- private cluster.  It annotates a function, schedules calls of it and
-- shows the views.

\pset footer off
\echo
\echo '== 1. Install the extension (the cluster preloads the library)'
CREATE EXTENSION retries;

\echo
\echo '== 2. A function that does the work, and its retry policy'
\echo '   "5 1s 1m": up to 5 retries, backing off 1s, 2s, 4s, ... capped at 1 minute'
CREATE TABLE payments (order_id bigint PRIMARY KEY, amount numeric NOT NULL);
CREATE FUNCTION charge(order_id bigint, amount numeric) RETURNS void
LANGUAGE sql AS $$ INSERT INTO payments VALUES (order_id, amount) $$;
SELECT retries.annotate('charge(bigint,numeric)', '5 1s 1m',
						retry_on => '{40001, 40P01}', timeout => '30s');
SELECT fn, policy, max_attempts, min_delay, max_delay, retry_on, timeout
  FROM retries.policies;

\echo
\echo '== 3. Schedule calls: arguments by position or by name, now or later'
SELECT retries.call('charge(bigint,numeric)', '[1, 9.99]') AS call_id;
SELECT retries.call('charge(bigint,numeric)', '{"order_id": 2, "amount": "19.90"}',
					run_at => now() + interval '1 hour') AS call_id;

\echo
\echo '== 4. A dedupe key makes scheduling idempotent: the same id comes back'
SELECT retries.call('charge(bigint,numeric)', '[3, 5]', key => 'order-3') AS first,
	   retries.call('charge(bigint,numeric)', '[3, 5]', key => 'order-3') AS again;

\echo
\echo '== 5. Bulk scheduling in one statement'
SELECT count(retries.call('charge(bigint,numeric)', jsonb_build_array(i, i * 1.5)))
	   AS scheduled
  FROM generate_series(100, 1099) i;

\echo
\echo '== 6. Bad arguments are refused when scheduling, naming the argument'
\set ON_ERROR_STOP off
SELECT retries.call('charge(bigint,numeric)', '[4, "lots"]');
SELECT retries.annotate('charge(bigint,numeric)', '5 1x');
\set ON_ERROR_STOP on

\echo
\echo '== 7. Managing calls: cancel one, move another'
SELECT retries.cancel(1) AS cancelled;
SELECT retries.reschedule(2, now() + interval '5 minutes') AS moved;

\echo
\echo '== 8. The views'
SELECT id, fn, args, state, attempts, max_attempts, key
  FROM retries.calls ORDER BY id LIMIT 5;
SELECT fn, scheduled, running, succeeded, failed, cancelled FROM retries.stats;
