--
-- flow: pause and resume, max_running, and what they do to calls: held
-- calls are neither run nor charged, run when let go, re-enter the limit
-- when retried; retry_now, cancel, schedules and dropped functions
--
CALL test.reset();
ALTER SYSTEM SET retries.enabled = on;
SELECT pg_reload_conf();
CALL test.workers_see(true);

CREATE TABLE flow_log (call bigint DEFAULT retries.current_call(), note text,
					   started timestamptz DEFAULT clock_timestamp(), ended timestamptz);
GRANT ALL ON flow_log TO PUBLIC;
CREATE FUNCTION flow_note(note text) RETURNS void LANGUAGE sql AS $$
	INSERT INTO flow_log (note) VALUES (note)
$$;
SELECT retries.annotate('flow_note(text)', '3 10ms');
-- takes a while, and says when it started and ended
CREATE FUNCTION flow_slow(secs float8) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
	t timestamptz := clock_timestamp();
BEGIN
	-- not a wait: the attempt's length, in which another would overlap it
	PERFORM pg_sleep(secs);
	INSERT INTO flow_log (note, started, ended) VALUES ('slow', t, clock_timestamp());
END
$$;
-- fails with a retryable error on its first attempt
CREATE FUNCTION flow_flaky() RETURNS void LANGUAGE plpgsql AS $$
DECLARE
	t timestamptz := clock_timestamp();
BEGIN
	-- not a wait: the attempt's length, in which another would overlap it
	PERFORM pg_sleep(0.05);
	INSERT INTO flow_log (note, started, ended) VALUES ('flaky', t, clock_timestamp());
	IF retries.current_attempt() = 1 THEN
		PERFORM retries.retry('once more', after => '10 ms');
	END IF;
END
$$;

-- bad input: a clear error, nothing stored
CALL test.try($$SELECT retries.annotate('flow_slow(float8)', '3 10ms', max_running => 0)$$);
CALL test.try($$SELECT retries.pause(NULL)$$);
SELECT count(*) AS gates FROM retries.flow_data;

-- only the owner (or retries_admin) pauses
CREATE ROLE flow_stranger;
SET ROLE flow_stranger;
CALL test.try($$SELECT retries.pause('flow_note(text)')$$);
CALL test.try($$SELECT retries.resume('flow_note(text)')$$);
RESET ROLE;

-- pause: true the first time; a call of it is held, neither run nor
-- charged, while a call made after it of another function runs
SELECT retries.pause('flow_note(text)') AS paused, retries.pause('flow_note(text)') AS again;
SELECT retries.call('flow_note(text)', '["held"]') AS held_call \gset
SELECT retries.annotate('flow_slow(float8)', '3 10ms');
SELECT retries.call('flow_slow(float8)', '[0]') AS other \gset
CALL test.wait_finished(:other);
SELECT state, attempts FROM retries.calls WHERE id = :held_call;
SELECT fn, scheduled, running, held, paused FROM retries.stats ORDER BY fn::text;

-- retry_now of a failed call of a paused function: scheduled, still held
SELECT retries.cancel(retries.call('flow_note(text)', '["again"]')) AS cancelled_call \gset
SELECT retries.call('flow_note(text)', '["retried"]') AS retried \gset
SELECT retries.cancel(:retried);
SELECT retries.retry_now(:retried);
SELECT state, attempts FROM retries.calls WHERE id = :retried;
SELECT held FROM retries.call_data WHERE id = :retried;

-- cancel a held call: it never runs
SELECT retries.call('flow_note(text)', '["never"]') AS never \gset
SELECT retries.cancel(:never);

-- a schedule of a paused function fires, and its call waits
SELECT retries.schedule('flow_sched', 'flow_note(text)', '1h', '["fired"]') AS sched \gset
SELECT retries.trigger('flow_sched') AS fired \gset
SELECT held, state FROM retries.call_data WHERE id = :fired;
SELECT retries.unschedule('flow_sched');

-- resume: the held calls run, once each
SELECT retries.resume('flow_note(text)') AS resumed, retries.resume('flow_note(text)') AS again;
CALL test.wait_finished(:held_call);
CALL test.wait_finished(:retried);
CALL test.wait_finished(:fired);
SELECT note, count(*) FROM flow_log WHERE note <> 'slow' GROUP BY note ORDER BY note;
SELECT state, attempts FROM retries.calls WHERE id IN (:held_call, :retried, :fired, :never)
 ORDER BY id;
SELECT fn, held, paused FROM retries.stats WHERE fn = 'flow_note(text)'::regprocedure;

-- max_running 1: of 6 calls of 0.1 s, no two attempts overlap, with 2
-- workers; a retried call re-enters the limit
TRUNCATE flow_log;
SELECT retries.annotate('flow_slow(float8)', '3 10ms', max_running => 1);
SELECT retries.annotate('flow_flaky()', '3 10ms', max_running => 1);
SELECT count(retries.call('flow_slow(float8)', '[0.1]')) FROM generate_series(1, 6);
SELECT retries.call('flow_flaky()') AS flaky1 \gset
SELECT retries.call('flow_flaky()') AS flaky2 \gset
CALL test.wait_for($$(SELECT count(*) = 0 FROM retries.call_data
						WHERE state = 'scheduled')$$);
SELECT note, count(*) FROM flow_log GROUP BY note ORDER BY note;
SELECT count(*) AS overlapping FROM flow_log a JOIN flow_log b
	ON a.ctid < b.ctid AND a.note = b.note AND a.started < b.ended AND b.started < a.ended;
SELECT state, attempts FROM retries.calls WHERE id IN (:flaky1, :flaky2) ORDER BY id;

-- calls held for want of room are released when it frees, even while a
-- call of the function waits an hour to retry (it takes no room)
CREATE FUNCTION flow_mixed(mode text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	IF mode = 'later' AND retries.current_attempt() = 1 THEN
		PERFORM retries.retry('come back in an hour', after => '1 hour');
	ELSIF mode = 'slow' THEN
		PERFORM pg_advisory_xact_lock_shared(4343);	-- until this session lets go
	END IF;
	INSERT INTO flow_log (note) VALUES (mode);
END
$$;
SELECT retries.annotate('flow_mixed(text)', '3 10ms', max_running => 1);
SELECT retries.pause('flow_mixed(text)');
SELECT retries.call('flow_mixed(text)', '["later"]') AS later \gset
SELECT retries.resume('flow_mixed(text)');
CALL test.wait_for($$(SELECT attempts = 1 FROM retries.call_data WHERE id = $$ || :later || $$)$$);
SELECT pg_advisory_lock(4343);
SELECT retries.call('flow_mixed(text)', '["slow"]') AS slow \gset
CALL test.wait_for($$(SELECT state = 'running' FROM retries.calls WHERE id = $$ || :slow || $$)$$);
SELECT count(retries.call('flow_mixed(text)', '["quick"]')) FROM generate_series(1, 3);
SELECT pg_advisory_unlock(4343);
CALL test.wait_for($$(SELECT count(*) = 3 FROM flow_log WHERE note = 'quick')$$);
SELECT state, attempts FROM retries.calls WHERE id = :later;
SELECT retries.cancel(:later);

-- a new annotation without max_running lifts the limit
SELECT retries.annotate('flow_slow(float8)', '3 10ms');
SELECT max_running FROM retries.flow_data WHERE fn = test.key('flow_slow(float8)');

-- a dropped function's held calls are let go, and fail as any call of a
-- dropped function when the workers next look (within 10 s; here, the
-- next call made wakes them)
CREATE FUNCTION flow_doomed() RETURNS void LANGUAGE sql AS 'SELECT';
SELECT retries.annotate('flow_doomed()', '1 10ms');
SELECT retries.pause('flow_doomed()');
SELECT retries.call('flow_doomed()') AS doomed \gset
DROP FUNCTION flow_doomed();
SELECT retries.call('flow_note(text)', '["wake"]') AS wake \gset
CALL test.wait_finished(:doomed);
SELECT state, attempts, last_sqlstate FROM retries.calls WHERE id = :doomed;
SELECT count(*) AS gates_of_dropped FROM retries.flow_data WHERE fn NOT IN (SELECT key FROM retries.function_refs WHERE fn IS NOT NULL);

-- priority: 0 unless given, shown in retries.calls, never null; with a key
-- too; the key names the call, whatever priority a second call asks
SELECT retries.call('flow_note(text)', '["p"]', priority => NULL);
SELECT retries.call('flow_note(text)', '["p"]', now() + interval '1 hour') AS p0 \gset
SELECT retries.call('flow_note(text)', '["p"]', now() + interval '1 hour',
					priority => -2) AS pm2 \gset
SELECT retries.call('flow_note(text)', '["p"]', now() + interval '1 hour',
					key => 'flow-p', priority => 3) AS p3 \gset
SELECT retries.call('flow_note(text)', '["p"]', key => 'flow-p', priority => 5) = :p3 AS same_call;
SELECT CASE id WHEN :p0 THEN 'p0' WHEN :pm2 THEN 'pm2' ELSE 'p3' END AS call, priority
  FROM retries.calls WHERE id IN (:p0, :pm2, :p3) ORDER BY id;
SELECT retries.cancel(id) FROM retries.calls WHERE id IN (:p0, :pm2, :p3);

-- max_running_per_key: at least 1; stored beside max_running, and lifted
-- with it by a new annotation without them; limit_key is shown in
-- retries.calls (and counts only where the function has such a limit)
SELECT retries.annotate('flow_note(text)', '3 10ms', max_running_per_key => 0);
SELECT retries.annotate('flow_note(text)', '3 10ms', max_running => 4, max_running_per_key => 1);
SELECT max_running, max_running_per_key FROM retries.flow_data
 WHERE fn = test.key('flow_note(text)');
SELECT retries.call('flow_note(text)', '["k0"]', limit_key => repeat('k', 257));
SELECT retries.call('flow_note(text)', '["k1"]', limit_key => 'acct-1') AS k1 \gset
SELECT retries.call('flow_note(text)', '["k2"]', limit_key => 'acct-1') AS k2 \gset
SELECT retries.call('flow_note(text)', '["k3"]', key => 'flow-k3', limit_key => 'acct-2') AS k3 \gset
CALL test.wait_finished(:k1);
CALL test.wait_finished(:k2);
CALL test.wait_finished(:k3);
SELECT args, state, attempts, limit_key FROM retries.calls WHERE id IN (:k1, :k2, :k3) ORDER BY id;
SELECT retries.annotate('flow_note(text)', '3 10ms');
SELECT max_running, max_running_per_key FROM retries.flow_data
 WHERE fn = test.key('flow_note(text)');

-- rate: 'count/duration', stored in its canonical form; a bad one names
-- its bad part; a new annotation without it lifts it
SELECT retries.annotate('flow_note(text)', '3 10ms', rate => '100');
SELECT retries.annotate('flow_note(text)', '3 10ms', rate => '0/1s');
SELECT retries.annotate('flow_note(text)', '3 10ms', rate => '10/1 second');
SELECT retries.annotate('flow_note(text)', '3 10ms', rate => '10/0.5ms');
SELECT retries.annotate('flow_note(text)', '3 10ms', rate => ' 100 / 1000ms ');
SELECT rate FROM retries.flow_data WHERE fn = test.key('flow_note(text)');
SELECT retries.call('flow_note(text)', '["paced"]') AS paced \gset
CALL test.wait_finished(:paced);
SELECT state, attempts FROM retries.calls WHERE id = :paced;
SELECT retries.annotate('flow_note(text)', '3 10ms');
SELECT rate FROM retries.flow_data WHERE fn = test.key('flow_note(text)');

DROP ROLE flow_stranger;
