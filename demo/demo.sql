-- demo.sql: a scripted session with retries, run by scripts/demo against a
-- private cluster.  It annotates functions, schedules calls, watches the
-- workers retry a flaky one with growing delays until it succeeds and fail
-- another for good, and shows the views.

\pset footer off
\echo
\echo '== 1. Install the extension (the cluster preloads the library)'
CREATE EXTENSION retries;
-- the workers start when CREATE EXTENSION commits; hold them for a moment
-- so that the steps below can show calls before they run
ALTER SYSTEM SET retries.enabled = off;
SELECT pg_reload_conf();

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
\echo '== 8. Let the workers run: the calls that are due run at once'
ALTER SYSTEM RESET retries.enabled;
SELECT pg_reload_conf();
CREATE PROCEDURE wait_until(condition text) LANGUAGE plpgsql AS $$
DECLARE
	give_up timestamptz := clock_timestamp() + interval '60 s';
	ok boolean;
BEGIN
	LOOP
		EXECUTE 'SELECT ' || condition INTO ok;
		EXIT WHEN ok OR clock_timestamp() > give_up;
		PERFORM pg_sleep(0.05);
	END LOOP;
END $$;
CALL wait_until($$(SELECT count(*) = 1001 FROM payments)$$);
SELECT count(*) AS payments_made FROM payments;
SELECT id, fn, args, state, attempts, max_attempts, key
  FROM retries.calls ORDER BY id LIMIT 5;

\echo
\echo '== 9. A flaky function: it fails with SQLSTATE RT503 until its 4th attempt'
\echo '   policy "5 200ms 5s": the delays grow 200ms, 400ms, 800ms'
CREATE FUNCTION flaky_fetch(url text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	IF retries.current_attempt() < 4 THEN
		RAISE EXCEPTION 'service unavailable (attempt %)', retries.current_attempt()
			USING ERRCODE = 'RT503';
	END IF;
END $$;
SELECT retries.annotate('flaky_fetch(text)', '5 200ms 5s');
SELECT retries.call('flaky_fetch(text)', '["https://example.com"]') AS flaky_id \gset
CALL wait_until(format($$(SELECT state = 'succeeded' FROM retries.calls WHERE id = %s)$$, :flaky_id));
SELECT attempt, outcome, sqlstate, message, next_delay,
	   round(extract(epoch FROM started_at - lag(finished_at) OVER (ORDER BY attempt)) * 1000)
		   AS waited_ms
  FROM retries.attempts WHERE call_id = :flaky_id ORDER BY attempt;

\echo
\echo '== 10. Failing for good: a non-retryable error at once, and a retryable one'
\echo '   that uses up its attempts (on_exhausted records both)'
CREATE TABLE gave_up (call_id bigint, fn regprocedure, message text);
CREATE FUNCTION record_give_up(call_id bigint) RETURNS void LANGUAGE sql AS $$
	INSERT INTO gave_up SELECT id, fn, last_message FROM retries.calls WHERE id = call_id
$$;
CREATE FUNCTION divide(a int, b int) RETURNS int LANGUAGE sql AS 'SELECT a / b';
CREATE FUNCTION always_busy() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	PERFORM retries.retry('still busy');
END $$;
SELECT retries.annotate('divide(int,int)', '3 100ms', on_exhausted => 'record_give_up(bigint)');
SELECT retries.annotate('always_busy()', '2 100ms', on_exhausted => 'record_give_up(bigint)');
SELECT retries.call('divide(int,int)', '[1, 0]') AS divide_id,
	   retries.call('always_busy()') AS busy_id \gset
CALL wait_until($$(SELECT count(*) = 2 FROM gave_up)$$);
SELECT call_id, attempt, outcome, sqlstate, message
  FROM retries.attempts WHERE call_id IN (:divide_id, :busy_id) ORDER BY call_id, attempt;
SELECT * FROM gave_up ORDER BY call_id;

\echo
\echo '== 11. The views: per-function statistics, and the workers'
SELECT fn, scheduled, running, succeeded, failed, cancelled, attempts, retries,
	   success_ratio
  FROM retries.stats ORDER BY fn::text;
SELECT database, state, calls_run, errors FROM retries.workers ORDER BY pid;
