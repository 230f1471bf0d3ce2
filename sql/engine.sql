--
-- engine: workers run calls as the role that scheduled them, retry with
-- backoff, and record every attempt
--
CALL test.reset();
ALTER SYSTEM SET retries.enabled = on;
SELECT pg_reload_conf();
CALL test.workers_see(true);

-- history(id): a call's attempts, with the delays as planned and as they
-- happened (to 10 ms on a busy machine: the gap is checked separately)
CREATE FUNCTION test.history(call bigint)
RETURNS TABLE (attempt int, outcome retries.attempt_outcome, sqlstate text,
			   message text, next_delay interval)
LANGUAGE sql AS $$
	SELECT attempt, outcome, sqlstate, message, next_delay
	  FROM retries.attempts WHERE call_id = call ORDER BY attempt
$$;

-- gaps_ok(id): did each retry start no sooner than its planned delay, and
-- less than 5 s after it?  A worker sleeps until the retry is due; one that
-- missed it would wake only at the end of its idle sleep, up to 10 s later.
-- What comes between is the worker's own work (recording the attempt,
-- claiming the retry): milliseconds, and less than the 2 s that this test
-- allowed before under valgrind too; 5 s leaves room for a server slower
-- still, and tells the two apart.
CREATE FUNCTION test.gaps_ok(call bigint) RETURNS boolean
LANGUAGE sql AS $$
	SELECT bool_and(n.started_at - a.finished_at >= a.next_delay - interval '1 ms'
					AND n.started_at - a.finished_at < a.next_delay + interval '5 s')
	  FROM retries.attempts a
	  JOIN retries.attempts n ON n.call_id = a.call_id AND n.attempt = a.attempt + 1
	 WHERE a.call_id = call
$$;

CREATE TABLE engine_log (call_id bigint, attempt int, note text);

-- success at once; inside, current_call() and current_attempt() say which
CREATE FUNCTION ok(note text) RETURNS void LANGUAGE sql AS $$
	INSERT INTO engine_log VALUES (retries.current_call(), retries.current_attempt(), note)
$$;
SELECT retries.annotate('ok(text)', '3 10ms');
SELECT retries.call('ok(text)', '["hello"]') AS id \gset
CALL test.wait_finished(:id);
SELECT state, attempts, last_sqlstate FROM retries.calls WHERE id = :id;
SELECT * FROM test.history(:id);
SELECT call_id = :id AS right_call, attempt, note FROM engine_log;
SELECT retries.current_call() IS NULL AS no_call_outside, retries.current_attempt() IS NULL AS no_attempt_outside;

-- retries, then success: exponential backoff 100 ms, 200 ms, ...
CREATE FUNCTION flaky(succeed_at int) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	IF retries.current_attempt() < succeed_at THEN
		RAISE EXCEPTION 'not yet (attempt %)', retries.current_attempt()
			USING ERRCODE = 'RT503';
	END IF;
	INSERT INTO engine_log VALUES (retries.current_call(), retries.current_attempt(), 'flaky done');
END
$$;
SELECT retries.annotate('flaky(int)', '5 100ms 1s');
SELECT retries.call('flaky(int)', '[4]') AS id \gset
CALL test.wait_finished(:id);
SELECT state, attempts, last_sqlstate, last_message FROM retries.calls WHERE id = :id;
SELECT * FROM test.history(:id);
SELECT test.gaps_ok(:id) AS delays_kept;
SELECT count(*) AS effects FROM engine_log WHERE call_id = :id;

-- a fixed delay, and the two jitters: full draws from [0, d], equal from
-- [d/2, d]
SELECT retries.annotate('flaky(int)', '5 50ms');
SELECT retries.call('flaky(int)', '[3]') AS fixed \gset
SELECT retries.annotate('flaky(int)', '5 200ms', jitter => 'full');
SELECT retries.call('flaky(int)', '[4]') AS full_jitter \gset
SELECT retries.annotate('flaky(int)', '5 200ms', jitter => 'equal');
SELECT retries.call('flaky(int)', '[4]') AS equal_jitter \gset
CALL test.wait_finished(:fixed);
CALL test.wait_finished(:full_jitter);
CALL test.wait_finished(:equal_jitter);
SELECT * FROM test.history(:fixed);
SELECT test.gaps_ok(:fixed) AS delays_kept;
SELECT bool_and(next_delay BETWEEN '0' AND '200 ms') AS full_in_range, count(*)
  FROM retries.attempts WHERE call_id = :full_jitter AND outcome = 'retry';
SELECT bool_and(next_delay BETWEEN '100 ms' AND '200 ms') AS equal_in_range, count(*)
  FROM retries.attempts WHERE call_id = :equal_jitter AND outcome = 'retry';

-- an error that is not retryable fails the call at once
CREATE FUNCTION broken() RETURNS void LANGUAGE sql AS 'SELECT 1/0';
SELECT retries.annotate('broken()', '5 10ms');
SELECT retries.call('broken()') AS id \gset
CALL test.wait_finished(:id);
SELECT state, attempts, last_sqlstate, last_message FROM retries.calls WHERE id = :id;
SELECT * FROM test.history(:id);

-- attempts exhausted: 2 retries means 3 attempts
CREATE FUNCTION always_busy() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	RAISE EXCEPTION 'busy' USING ERRCODE = 'RT429';
END
$$;
SELECT retries.annotate('always_busy()', '2 10ms');
SELECT retries.call('always_busy()') AS id \gset
CALL test.wait_finished(:id);
SELECT state, attempts, max_attempts, last_sqlstate FROM retries.calls WHERE id = :id;
SELECT * FROM test.history(:id);
SELECT hint FROM retries.attempts WHERE call_id = :id AND attempt = 3;

-- retry_on: extra SQLSTATEs are retried, and "-RT" removes the RT class
SELECT retries.annotate('broken()', '1 10ms', retry_on => '{22012}');
SELECT retries.call('broken()') AS id \gset
CALL test.wait_finished(:id);
SELECT attempt, outcome, sqlstate FROM test.history(:id);
SELECT retries.annotate('always_busy()', '3 10ms', retry_on => '{-RT}');
SELECT retries.call('always_busy()') AS id \gset
CALL test.wait_finished(:id);
SELECT attempt, outcome, sqlstate FROM test.history(:id);

-- retries.retry(after => ...) sets the next delay, overriding the formula
CREATE FUNCTION later() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	IF retries.current_attempt() = 1 THEN
		PERFORM retries.retry('come back later', after => '300 ms');
	END IF;
END
$$;
SELECT retries.annotate('later()', '3 10ms');
SELECT retries.call('later()') AS id \gset
CALL test.wait_finished(:id);
SELECT * FROM test.history(:id);
SELECT test.gaps_ok(:id) AS delay_kept;

-- delay_fn replaces the formula; NULL stops the retries; an error in it
-- fails the call with a message that names it
CREATE FUNCTION linear(attempt int, sqlstate text, message text) RETURNS interval
	LANGUAGE sql AS $$ SELECT attempt * interval '50 ms' $$;
CREATE FUNCTION give_up(attempt int, sqlstate text, message text) RETURNS interval
	LANGUAGE sql AS $$ SELECT CASE WHEN attempt < 2 THEN interval '10 ms' END $$;
CREATE FUNCTION bad_delay(attempt int, sqlstate text, message text) RETURNS interval
	LANGUAGE sql AS $$ SELECT (1/0) * interval '1 s' $$;
SELECT retries.annotate('flaky(int)', '5 1h', delay_fn => 'linear(int,text,text)');
SELECT retries.call('flaky(int)', '[3]') AS linear \gset
SELECT retries.annotate('always_busy()', '5 1h', delay_fn => 'give_up(int,text,text)');
SELECT retries.call('always_busy()') AS give_up \gset
SELECT retries.annotate('always_busy()', '5 1h', delay_fn => 'bad_delay(int,text,text)');
SELECT retries.call('always_busy()') AS bad_delay \gset
CALL test.wait_finished(:linear);
CALL test.wait_finished(:give_up);
CALL test.wait_finished(:bad_delay);
SELECT * FROM test.history(:linear);
SELECT test.gaps_ok(:linear) AS delays_kept;
SELECT state, attempts FROM retries.calls WHERE id = :give_up;
SELECT attempt, outcome, hint FROM retries.attempts WHERE call_id = :give_up ORDER BY attempt;
SELECT state, attempts FROM retries.calls WHERE id = :bad_delay;
SELECT attempt, outcome, sqlstate, message, detail FROM retries.attempts WHERE call_id = :bad_delay;

-- on_exhausted runs once when a call fails for good, as the call's owner;
-- its own error is recorded and changes nothing else
CREATE TABLE exhausted (call_id bigint, state retries.call_state, by_role name);
CREATE FUNCTION note_exhausted(call_id bigint) RETURNS void LANGUAGE sql AS $$
	INSERT INTO public.exhausted SELECT call_id, state, current_user FROM retries.calls WHERE id = call_id
$$;
CREATE FUNCTION bad_exhausted(call_id bigint) RETURNS void LANGUAGE sql AS 'SELECT 1/0';
SELECT retries.annotate('always_busy()', '1 10ms', on_exhausted => 'note_exhausted(bigint)');
SELECT retries.call('always_busy()') AS id \gset
SELECT retries.annotate('broken()', '3 10ms', on_exhausted => 'note_exhausted(bigint)');
SELECT retries.call('broken()') AS id2 \gset
SELECT retries.annotate('broken()', '3 10ms', on_exhausted => 'bad_exhausted(bigint)');
SELECT retries.call('broken()') AS id3 \gset
CALL test.wait_finished(:id);
CALL test.wait_finished(:id2);
CALL test.wait_finished(:id3);
SELECT call_id IN (:id, :id2) AS ours, state, by_role FROM exhausted ORDER BY call_id;
SELECT state, attempts FROM retries.calls WHERE id = :id3;
SELECT outcome, sqlstate, on_exhausted_error FROM retries.attempts WHERE call_id = :id3;

-- timeout: the attempt is cancelled and recorded as a timeout; retried only
-- if 57014 is in retry_on
-- not a wait: the attempt's timeout (100 ms) cuts the 30 s sleep short
CREATE FUNCTION slow(secs float8) RETURNS void LANGUAGE sql AS 'SELECT pg_sleep(secs)';
SELECT retries.annotate('slow(float8)', '3 10ms', timeout => '100 ms');
SELECT retries.call('slow(float8)', '[30]') AS id \gset
CALL test.wait_finished(:id);
SELECT state, attempts FROM retries.calls WHERE id = :id;
SELECT attempt, outcome, sqlstate, message FROM retries.attempts WHERE call_id = :id;
SELECT retries.annotate('slow(float8)', '1 10ms', timeout => '100 ms', retry_on => '{57014}');
SELECT retries.call('slow(float8)', '[30]') AS id \gset
CALL test.wait_finished(:id);
SELECT attempt, outcome, sqlstate FROM retries.attempts WHERE call_id = :id ORDER BY attempt;

-- cancel of a scheduled call: it never runs
SELECT retries.call('ok(text)', '["never"]', run_at => now() + interval '1 hour') AS id \gset
SELECT retries.cancel(:id);
SELECT state, attempts FROM retries.calls WHERE id = :id;

-- a running call: shown as running (also in retries.workers); retry_now is
-- refused; cancel waits for the attempt, then gives it no further one.  The
-- attempt waits for an advisory lock this session holds until it has looked
-- at the running call, so that a slow server (valgrind) sees it running
-- too; its retry is a minute away, so that the outcome is the same if the
-- cancel comes only after the attempt.
CREATE FUNCTION slow_then_busy() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	PERFORM pg_advisory_xact_lock_shared(4242);
	-- not a wait: the cancel may come during it or after it, to the same outcome
	PERFORM pg_sleep(0.5);
	RAISE EXCEPTION 'busy' USING ERRCODE = 'RT429';
END
$$;
SELECT retries.annotate('slow_then_busy()', '5 1m');
SELECT pg_advisory_lock(4242);
SELECT retries.call('slow_then_busy()') AS id \gset
CALL test.wait_for(format($$(SELECT state = 'running' FROM retries.calls WHERE id = %s)$$, :id));
SELECT count(*) AS shown_in_workers FROM retries.workers WHERE current_call = :id AND state = 'running';
CALL test.try(format('SELECT retries.retry_now(%s)', :id));
SELECT pg_advisory_unlock(4242);
SELECT retries.cancel(:id);
SELECT state, attempts FROM retries.calls WHERE id = :id;
SELECT attempt, outcome FROM retries.attempts WHERE call_id = :id;

-- a failed call retried by hand runs again with a fresh budget
SELECT retries.annotate('broken()', '5 10ms');
SELECT retries.call('broken()') AS id \gset
CALL test.wait_finished(:id);
SELECT retries.retry_now(:id);
CALL test.wait_for(format($$(SELECT attempts = 2 AND state = 'failed' FROM retries.calls WHERE id = %s)$$, :id));
SELECT state, attempts, max_attempts FROM retries.calls WHERE id = :id;

-- defaults are evaluated when the call runs; named arguments work
CREATE FUNCTION with_default(a int, b text DEFAULT 'the default') RETURNS void
	LANGUAGE sql AS $$ INSERT INTO engine_log VALUES (retries.current_call(), a, b) $$;
SELECT retries.annotate('with_default(int,text)');
SELECT retries.call('with_default(int,text)', '{"a": 7}') AS id \gset
CALL test.wait_finished(:id);
SELECT attempt AS a, note AS b FROM engine_log WHERE call_id = :id;

-- calls that can no longer run fail for good, saying why: the function was
-- dropped, EXECUTE was revoked, the role cannot log in, the arguments no
-- longer convert
CREATE ROLE engine_user LOGIN;
GRANT USAGE ON SCHEMA public TO engine_user;
CREATE FUNCTION doomed() RETURNS void LANGUAGE sql AS '';
CREATE FUNCTION revoked() RETURNS void LANGUAGE sql AS '';
CREATE TYPE engine_mood AS ENUM ('happy', 'sad');
CREATE FUNCTION moody(m engine_mood) RETURNS void LANGUAGE sql AS '';
SELECT retries.annotate('doomed()'), retries.annotate('revoked()'), retries.annotate('moody(engine_mood)');
SELECT retries.call('doomed()', run_at => now() + interval '1 hour') AS dropped \gset
SELECT retries.call('moody(engine_mood)', '["happy"]', run_at => now() + interval '1 hour') AS renamed \gset
SET ROLE engine_user;
SELECT retries.call('revoked()', run_at => now() + interval '1 hour') AS revoked \gset
RESET ROLE;
DROP FUNCTION doomed();
REVOKE EXECUTE ON FUNCTION revoked() FROM PUBLIC;
ALTER TYPE engine_mood RENAME VALUE 'happy' TO 'glad';
SELECT retries.retry_now(:dropped), retries.retry_now(:renamed);
SET ROLE engine_user;
SELECT retries.retry_now(:revoked);
RESET ROLE;
CALL test.wait_finished(:dropped);
CALL test.wait_finished(:renamed);
CALL test.wait_finished(:revoked);
SELECT id = :dropped AS dropped, id = :renamed AS renamed, state, last_sqlstate, last_message
  FROM retries.calls WHERE id IN (:dropped, :renamed, :revoked) ORDER BY id;
GRANT EXECUTE ON FUNCTION revoked() TO PUBLIC;
ALTER ROLE engine_user NOLOGIN;
SET ROLE engine_user;
SELECT retries.call('revoked()') AS nologin \gset
RESET ROLE;
CALL test.wait_finished(:nologin);
SELECT state, last_sqlstate, last_message FROM retries.calls WHERE id = :nologin;
ALTER ROLE engine_user LOGIN;

-- a call runs as the role that scheduled it, never as a superuser: it
-- cannot touch a table that role may not
CREATE TABLE secret (x int);
CREATE FUNCTION touch_secret() RETURNS void LANGUAGE sql AS 'INSERT INTO secret VALUES (1)';
SELECT retries.annotate('touch_secret()');
SET ROLE engine_user;
SELECT retries.call('touch_secret()') AS id \gset
RESET ROLE;
CALL test.wait_finished(:id);
SELECT state, last_sqlstate, last_message FROM retries.calls WHERE id = :id;
SELECT count(*) AS rows_in_secret FROM secret;

-- the workers show up in pg_stat_activity and retries.workers (the
-- database's own: on a slow machine an extra one may have started while
-- the calls above ran)
SELECT backend_type, application_name, count(*)
  FROM pg_stat_activity WHERE backend_type LIKE 'retries%' AND (datname = current_database() OR datname IS NULL)
   AND backend_type <> 'retries extra worker'
 GROUP BY 1, 2 ORDER BY 1;
SELECT count(*) AS workers, sum(calls_run) > 0 AS ran_calls
  FROM retries.workers WHERE database = current_database()
   AND pid IN (SELECT pid FROM pg_stat_activity WHERE backend_type = 'retries worker');

-- busy_time: how long each worker has spent running calls.  A call that
-- sleeps 0.2 s adds at least that much to the busy time of the worker that
-- ran it (shown at once: the time of a batch still committing counts too),
-- and no worker's busy time goes back.
CREATE TEMP TABLE busy_before AS
	SELECT pid, busy_time FROM retries.workers WHERE database = current_database();
CREATE TABLE sleeper (pid int);
CREATE FUNCTION sleep_a_while() RETURNS void LANGUAGE sql AS
	-- not a wait: the time the call spends, which its worker's busy time counts
	$$ INSERT INTO sleeper VALUES (pg_backend_pid()); SELECT pg_sleep(0.2) $$;
SELECT retries.annotate('sleep_a_while()');
SELECT retries.call('sleep_a_while()') AS id \gset
CALL test.wait_finished(:id);
SELECT w.busy_time - b.busy_time >= interval '200 ms' AS sleeper_busy_for_the_sleep,
	   w.busy_time < interval '1 hour' AS plausible
  FROM retries.workers w JOIN busy_before b USING (pid) JOIN sleeper s USING (pid);
SELECT bool_and(w.busy_time >= b.busy_time) AS never_goes_back
  FROM retries.workers w JOIN busy_before b USING (pid);
-- and an idle worker's busy time stands still: its batch's end stopped it
CALL test.wait_for($$(SELECT count(*) >= 1 FROM retries.workers
					   WHERE database = current_database() AND state = 'idle')$$);
CREATE TEMP TABLE idle_before AS
	SELECT pid, busy_time, calls_run FROM retries.workers
	 WHERE database = current_database() AND state = 'idle';
SELECT pg_sleep(0.3) AS idle_for_a_while;  -- not a wait: time an idle worker must not count
SELECT bool_and(w.busy_time = i.busy_time) AS idle_time_not_counted
  FROM retries.workers w JOIN idle_before i USING (pid)
 WHERE w.state = 'idle' AND w.calls_run = i.calls_run;

-- now() inside a call is the time of the worker's transaction, not of the
-- worker's start
CREATE TABLE stamps (call_id bigint, at timestamptz);
CREATE FUNCTION stamp() RETURNS void LANGUAGE sql AS
	$$ INSERT INTO stamps VALUES (retries.current_call(), now()) $$;
SELECT retries.annotate('stamp()');
SELECT retries.call('stamp()') AS id \gset
CALL test.wait_finished(:id);
SELECT s.at >= c.created_at AS now_is_current
  FROM stamps s JOIN retries.calls c ON c.id = s.call_id;
DROP TABLE stamps;
DROP FUNCTION stamp();

-- pruning: finished calls and their attempts go once retries.retention
-- has passed since they finished; scheduled calls stay
SELECT retries.call('ok(text)', '["keep me"]', run_at => now() + interval '1 hour') AS kept \gset
SELECT count(*) > 0 AS finished_before FROM retries.calls WHERE state <> 'scheduled';
ALTER SYSTEM SET retries.retention = '0';
SELECT pg_reload_conf();
CALL test.wait_for($$(SELECT count(*) = 0 FROM retries.call_data WHERE state <> 'scheduled')$$);
SELECT count(*) AS attempts_left FROM retries.attempt_data;
SELECT id = :kept AS kept, state FROM retries.calls;
ALTER SYSTEM RESET retries.retention;

-- a collation-sensitive function gets its arguments' collation, as in SQL
-- (lower() refuses to run without one)
SELECT retries.annotate('pg_catalog.lower(text)', '1 1s');
SELECT retries.call('pg_catalog.lower(text)', '["ABC"]') AS id \gset
CALL test.wait_finished(:id);
SELECT state, attempts, last_sqlstate FROM retries.calls WHERE id = :id;
SELECT retries.unannotate('pg_catalog.lower(text)');

-- a delay_fn's result is clamped to 0 .. 3650 days: '1000000 years' is the
-- longest delay (not a wrapped or zero one), a negative interval no delay,
-- which retries.min_delay then raises to 10 ms
CREATE FUNCTION forever(attempt int, sqlstate text, message text) RETURNS interval
	LANGUAGE sql AS $$ SELECT interval '1000000 years' $$;
CREATE FUNCTION backwards(attempt int, sqlstate text, message text) RETURNS interval
	LANGUAGE sql AS $$ SELECT interval '-178000000 years' $$;
SELECT retries.annotate('always_busy()', '1 1h', delay_fn => 'forever(int,text,text)');
SELECT retries.call('always_busy()') AS forever \gset
SELECT retries.annotate('always_busy()', '1 1h', delay_fn => 'backwards(int,text,text)');
SELECT retries.call('always_busy()') AS backwards \gset
CALL test.wait_for('EXISTS (SELECT FROM retries.attempts WHERE outcome = ''retry'' AND call_id = ' || :forever || ')');
CALL test.wait_finished(:backwards);
SELECT attempt, outcome, next_delay FROM retries.attempts WHERE call_id = :forever;
SELECT state, next_attempt > now() + interval '3649 days' AS far_ahead
FROM retries.calls WHERE id = :forever;
SELECT retries.cancel(:forever);
SELECT attempt, outcome, next_delay FROM retries.attempts WHERE call_id = :backwards ORDER BY attempt;

ALTER SYSTEM RESET retries.enabled;
SELECT pg_reload_conf();
DROP TABLE engine_log, exhausted, secret;
DROP FUNCTION ok(text), flaky(int), broken(), always_busy(), later(), linear(int, text, text),
	give_up(int, text, text), bad_delay(int, text, text), note_exhausted(bigint),
	bad_exhausted(bigint), slow(float8), slow_then_busy(), with_default(int, text),
	revoked(), moody(engine_mood), touch_secret(), forever(int, text, text),
	backwards(int, text, text);
DROP TYPE engine_mood;
DROP FUNCTION test.history(bigint), test.gaps_ok(bigint);
DROP OWNED BY engine_user;
DROP ROLE engine_user;
