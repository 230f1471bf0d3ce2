--
-- manage: cancel, retry_now and reschedule, on every state
--
CALL test.reset();
CREATE FUNCTION job(n int) RETURNS void LANGUAGE sql AS '';
SELECT retries.annotate('job(int)', '3 1s');

-- one call in each state but running (engine.sql covers running calls,
-- with real workers); execution is paused here, so the states workers set
-- are set by hand.  Call 2 stands in for a running call: a row with state
-- 'running' is refused like one a worker is running.
SELECT retries.call('job(int)', jsonb_build_array(i), run_at => '2030-01-01 00:00+00')
  FROM generate_series(1, 5) i;
UPDATE retries.call_data SET state = 'running', attempts = 1 WHERE id = 2;
UPDATE retries.call_data SET state = 'succeeded', attempts = 1 WHERE id = 3;
UPDATE retries.call_data SET state = 'failed', attempts = 3 WHERE id = 4;
UPDATE retries.call_data SET state = 'cancelled', attempts = 1 WHERE id = 5;
CREATE VIEW test.calls_now AS
	SELECT id, state, attempts, max_attempts,
		   CASE WHEN next_attempt = '2030-01-01 00:00+00' THEN 'in 2030'
				WHEN next_attempt = '2031-01-01 00:00+00' THEN 'in 2031'
				WHEN next_attempt <= now() THEN 'due now'
		   END AS next_attempt
	  FROM retries.calls ORDER BY id;
SELECT * FROM test.calls_now;

-- reschedule: scheduled calls move; failed and cancelled ones are scheduled
-- again with a fresh budget of attempts (max_attempts moves on from the
-- attempts made); running and succeeded ones are refused
SELECT retries.reschedule(1, '2031-01-01 00:00+00');
CALL test.try($$SELECT retries.reschedule(2, '2031-01-01 00:00+00')$$);
CALL test.try($$SELECT retries.reschedule(3, '2031-01-01 00:00+00')$$);
SELECT retries.reschedule(4, '2031-01-01 00:00+00');
SELECT retries.reschedule(5, '2031-01-01 00:00+00');
SELECT * FROM test.calls_now;

-- retry_now: the same, at once
UPDATE retries.call_data SET state = 'failed' WHERE id = 4;
SELECT retries.retry_now(1), retries.retry_now(4), retries.retry_now(5);
CALL test.try($$SELECT retries.retry_now(2)$$);
CALL test.try($$SELECT retries.retry_now(3)$$);
SELECT * FROM test.calls_now;

-- cancel: a scheduled call is cancelled at once; finished ones are left
-- alone and give false, so a bulk cancel does not stop at them (a running
-- call waits for its attempt: see engine.sql)
SELECT retries.cancel(1) AS scheduled, retries.cancel(3) AS succeeded,
	   retries.cancel(1) AS cancelled_again;
UPDATE retries.call_data SET state = 'failed' WHERE id = 4;
SELECT retries.cancel(4) AS failed;
SELECT id, state FROM retries.call_data ORDER BY id;
SELECT id, retries.cancel(id) FROM retries.calls WHERE id <> 2 ORDER BY id;

-- a cancelled call can be retried by hand
SELECT retries.retry_now(1);
SELECT id, state FROM retries.call_data WHERE id = 1;

-- unknown ids and NULLs
CALL test.try($$SELECT retries.cancel(999)$$);
CALL test.try($$SELECT retries.retry_now(-1)$$);
CALL test.try($$SELECT retries.reschedule(999, now())$$);
CALL test.try($$SELECT retries.cancel(NULL)$$);
CALL test.try($$SELECT retries.retry_now(NULL)$$);
CALL test.try($$SELECT retries.reschedule(1, NULL)$$);
CALL test.try($$SELECT retries.reschedule(NULL, now())$$);

-- unlimited policies stay unlimited when retried by hand
SELECT retries.annotate('job(int)', '1s');
SELECT retries.call('job(int)', '[6]') AS id \gset
UPDATE retries.call_data SET state = 'failed', attempts = 7 WHERE id = :id;
SELECT retries.retry_now(:id);
SELECT state, attempts, max_attempts FROM retries.calls WHERE id = :id;

DROP VIEW test.calls_now;
DROP FUNCTION job(int);
