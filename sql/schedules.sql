--
-- schedules: recurring schedules (retries.schedule and friends), the view
-- retries.schedules, and their firing by the workers: overlap, trigger,
-- pause, ownership, a dropped or unannotated function
--
SET timezone = 'UTC';
CALL test.reset();
ALTER SYSTEM SET retries.enabled = off;
SELECT pg_reload_conf();
CALL test.workers_see(false);

CREATE TABLE sched_log (at timestamptz DEFAULT clock_timestamp(), note text,
						call bigint DEFAULT retries.current_call());
GRANT INSERT, SELECT ON sched_log TO PUBLIC;
CREATE FUNCTION sched_note(note text) RETURNS void LANGUAGE sql AS $$
	INSERT INTO sched_log (note) VALUES (note)
$$;
SELECT retries.annotate('sched_note(text)', '3 1s');
CREATE FUNCTION sched_unannotated() RETURNS void LANGUAGE sql AS 'SELECT';

-- schedule(): returns the id; names are per role
SELECT retries.schedule('nightly', 'sched_note(text)', '30 2 * * *', '["nightly"]',
						'America/New_York') AS nightly \gset
SELECT retries.schedule('often', 'sched_note(text)', '90s', '{"note": "often"}') AS often \gset
SELECT name, fn, every, args, timezone, overlap, catch_up, paused, firings, skipped,
	   missed, owner, last_run, last_call, last_state,
	   next_run = (SELECT t FROM retries.next_runs(every, timezone, created_at, 1) t) AS next_run_ok
  FROM retries.schedules ORDER BY id;

-- the same name again replaces it, keeping its id
SELECT retries.schedule('often', 'sched_note(text)', '2 minutes', '["often, again"]',
						overlap => 'allow', catch_up => '5 min') = :often AS same_id;
SELECT name, every, args, overlap, catch_up FROM retries.schedules WHERE id = :often;
-- alter_schedule (1.7): what is given, the rest as it was
SELECT retries.alter_schedule('often', every => '3 minutes') = :often AS same_id,
	   retries.alter_schedule('often') = :often AS nothing_given;
SELECT name, every, args, overlap, catch_up FROM retries.schedules WHERE id = :often;
SELECT retries.alter_schedule('often', args => '["often, altered"]', catch_up => '0') = :often;
SELECT name, every, args, overlap, catch_up FROM retries.schedules WHERE id = :often;
CALL test.try($$SELECT retries.alter_schedule('no such schedule', every => '1h')$$);
CALL test.try($$SELECT retries.alter_schedule('often', every => 'never')$$);
CALL test.try($$SELECT retries.alter_schedule('often', overlap => 'sometimes')$$);
CALL test.try($$SELECT retries.alter_schedule(NULL)$$);

-- the last day of the month (L), in the schedule's zone
SELECT retries.schedule('month_end', 'sched_note(text)', '45 23 L * *', '["month end"]',
						'Asia/Tokyo') AS month_end \gset
SELECT every, extract(day FROM (next_run AT TIME ZONE timezone) + interval '1 day') AS day_after,
	   (next_run AT TIME ZONE timezone)::time AS at
  FROM retries.schedules WHERE id = :month_end;
SELECT retries.unschedule('month_end');

-- bad input: a clear error naming the bad part, and nothing stored
CALL test.try($$SELECT retries.schedule('x', 'sched_note(text)', '61 * * * *')$$);
CALL test.try($$SELECT retries.schedule('x', 'sched_note(text)', '* * * * * *')$$);
CALL test.try($$SELECT retries.schedule('x', 'sched_note(text)', '500ms')$$);
CALL test.try($$SELECT retries.schedule('x', 'sched_note(text)', '1 month')$$);
CALL test.try($$SELECT retries.schedule('x', 'sched_note(text)', '0 * * * *', timezone => 'Mars/Olympus_Mons')$$);
CALL test.try($$SELECT retries.schedule('x', 'sched_note(text)', '0 * * * *', overlap => 'replace')$$);
CALL test.try($$SELECT retries.schedule('x', 'sched_note(text)', '0 * * * *', catch_up => '-1 minute')$$);
CALL test.try($$SELECT retries.schedule('x', 'sched_note(text)', '0 * * * *', '[1, 2]')$$);
CALL test.try($$SELECT retries.schedule('x', 'sched_unannotated()', '0 * * * *')$$);
CALL test.try($$SELECT retries.schedule('', 'sched_note(text)', '0 * * * *')$$);
CALL test.try($$SELECT retries.schedule(repeat('n', 201), 'sched_note(text)', '0 * * * *')$$);
CALL test.try($$SELECT retries.schedule('x', 'sched_note(text)', NULL)$$);
CALL test.try($$SELECT retries.schedule('x', 12345, '0 * * * *')$$);
SELECT count(*) AS schedules FROM retries.schedule_data;

-- pause, resume, unschedule: true when they changed something
SELECT retries.pause_schedule('nightly'), retries.pause_schedule('nightly');
SELECT paused FROM retries.schedules WHERE id = :nightly;
SELECT retries.resume_schedule('nightly'), retries.resume_schedule('nightly');
SELECT paused, next_run > now() AS future FROM retries.schedules WHERE id = :nightly;
CALL test.try($$SELECT retries.unschedule('no such schedule')$$);
CALL test.try($$SELECT retries.pause_schedule('no such schedule')$$);
-- ... and by id (1.7)
SELECT retries.pause_schedule(:nightly), retries.pause_schedule(:nightly::bigint);
SELECT retries.resume_schedule(:nightly), retries.resume_schedule(:nightly);
CALL test.try($$SELECT retries.unschedule(0)$$);
CALL test.try($$SELECT retries.trigger(-1)$$);

-- trigger: one call now, whatever the pause; next_run stays
SELECT retries.pause_schedule('nightly');
SELECT next_run AS nightly_next FROM retries.schedules WHERE id = :nightly \gset
SELECT retries.trigger('nightly') AS triggered \gset
SELECT id = :triggered AS is_call, fn, args, state, schedule FROM retries.calls;
SELECT firings, last_call = :triggered AS last_call_ok, last_state, paused,
	   next_run = :'nightly_next' AS next_run_kept
  FROM retries.schedules WHERE id = :nightly;
SELECT retries.resume_schedule('nightly');

-- ownership: another role neither sees nor manages them; names are per
-- role; retries_admin sees and manages every role's
CREATE ROLE sched_alice;
CREATE ROLE sched_admin IN ROLE retries_admin;
SET ROLE sched_alice;
SELECT count(*) AS alice_sees FROM retries.schedules;
CALL test.try($$SELECT retries.unschedule('nightly')$$);
CALL test.try($$SELECT retries.trigger('nightly')$$);
SELECT retries.schedule('nightly', 'sched_note(text)', '0 3 * * *', '["alice"]') AS alice_nightly \gset
SELECT name, owner, every FROM retries.schedules;
RESET ROLE;
SELECT name, owner, every FROM retries.schedules WHERE name = 'nightly' ORDER BY id;
-- no EXECUTE: refused
REVOKE EXECUTE ON FUNCTION sched_note(text) FROM PUBLIC;
SET ROLE sched_alice;
CALL test.try($$SELECT retries.schedule('other', 'sched_note(text)', '0 3 * * *', '["x"]')$$);
RESET ROLE;
GRANT EXECUTE ON FUNCTION sched_note(text) TO PUBLIC;
-- the admin: two roles have 'nightly', so it must say whose
SET ROLE sched_admin;
SELECT count(*) AS admin_sees FROM retries.schedules;
CALL test.try($$SELECT retries.pause_schedule('nightly')$$);
SELECT retries.pause_schedule('often');
RESET ROLE;
SET ROLE sched_alice;
SELECT retries.unschedule('nightly');
RESET ROLE;
SELECT name, owner, paused FROM retries.schedules ORDER BY id;

--
-- firing: the workers make the calls
--
SELECT retries.unschedule('nightly'), retries.unschedule('often');
CALL test.reset();
SELECT retries.annotate('sched_note(text)', '3 1s');
ALTER SYSTEM SET retries.enabled = on;
SELECT pg_reload_conf();
CALL test.workers_see(true);

-- The schedules below have a period of an hour; instead of waiting for
-- their firings, the test moves the engine's clock on an hour at a time
-- (retries.debug_clock_offset), waiting after each step for what it made.
-- Each step lands on an occurrence as late as the real time since the
-- schedule was made, past the second of slack on a slow machine: catch_up
-- keeps it from being missed.
-- advance(hours): the offset set, and the configuration reloaded (the
-- two statements, run by \gexec)
CREATE FUNCTION test.advance(hours int, OUT set_offset text, OUT reload text)
LANGUAGE sql AS $$
	SELECT format('ALTER SYSTEM SET retries.debug_clock_offset = %L', hours || 'h'),
		   'SELECT pg_reload_conf()'
$$;

-- an interval schedule fires every period, each firing a call of its own
SELECT retries.schedule('tick', 'sched_note(text)', '1h', '["tick"]', catch_up => '1 hour') AS tick \gset
SELECT * FROM test.advance(1) \gexec
-- (its call finished before the next step: under the default overlap,
-- 'skip', a firing while it runs would be skipped)
CALL test.wait_for($$(SELECT firings = 1 AND last_state = 'succeeded'
					   FROM retries.schedules WHERE name = 'tick')$$);
SELECT * FROM test.advance(2) \gexec
CALL test.wait_for($$(SELECT firings = 2 FROM retries.schedules WHERE name = 'tick')$$);
SELECT retries.pause_schedule('tick');
SELECT count(*) = s.firings AS one_call_per_firing,
	   bool_and(c.schedule = 'tick') AS named,
	   count(DISTINCT c.id) = count(*) AS distinct_calls,
	   s.missed
  FROM retries.calls c, retries.schedules s
 WHERE s.name = 'tick' AND c.schedule = 'tick'
 GROUP BY s.firings, s.missed;
-- each call serves a firing of its own (the origin plus whole hours, on
-- the engine's clock), is due no earlier than it, and ran
CALL test.wait_for($$(SELECT bool_and(state = 'succeeded') FROM retries.calls WHERE schedule = 'tick')$$);
SELECT bool_and(c.next_attempt >= s.origin + n * interval '1 hour'
				AND c.next_attempt < s.origin + (n + 1) * interval '1 hour') AS one_per_firing,
	   count(l.call) = count(*) AS all_ran,
	   s.next_run = s.origin + interval '3 hours' AS next_run
  FROM (SELECT *, row_number() OVER (ORDER BY id) AS n
		  FROM retries.calls WHERE schedule = 'tick') c
  JOIN retries.schedule_data s ON s.name = c.schedule
  LEFT JOIN sched_log l ON l.call = c.id
 GROUP BY s.origin, s.next_run;
SELECT retries.unschedule('tick');

-- overlap: a function that waits for a lock this session holds keeps its
-- call running for as long as the test wants
CREATE FUNCTION sched_blocked(note text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	PERFORM pg_advisory_xact_lock_shared(4242);
	INSERT INTO sched_log (note) VALUES (note);
END
$$;
SELECT retries.annotate('sched_blocked(text)', '3 1s');

-- skip: while the first call runs, the later firings are skipped
SELECT pg_advisory_lock(4242);
SELECT retries.schedule('skipper', 'sched_blocked(text)', '1h', '["skip"]', catch_up => '1 hour', overlap => 'skip');
SELECT * FROM test.advance(3) \gexec
CALL test.wait_for($$(SELECT last_state = 'running' FROM retries.schedules WHERE name = 'skipper')$$);
SELECT * FROM test.advance(4) \gexec
CALL test.wait_for($$(SELECT skipped = 1 FROM retries.schedules WHERE name = 'skipper')$$);
SELECT * FROM test.advance(5) \gexec
CALL test.wait_for($$(SELECT skipped = 2 FROM retries.schedules WHERE name = 'skipper')$$);
SELECT firings, skipped, missed, last_state FROM retries.schedules WHERE name = 'skipper';
SELECT retries.pause_schedule('skipper');
SELECT pg_advisory_unlock(4242);
CALL test.wait_for($$(SELECT last_state = 'succeeded' FROM retries.schedules WHERE name = 'skipper')$$);
SELECT count(*) AS calls FROM retries.calls WHERE schedule = 'skipper';
SELECT retries.unschedule('skipper');

-- queue: one firing waits for the running call and fires when it ends;
-- a second one meanwhile is skipped
SELECT pg_advisory_lock(4242);
SELECT retries.schedule('queuer', 'sched_blocked(text)', '1h', '["queue"]', catch_up => '1 hour', overlap => 'queue');
SELECT * FROM test.advance(6) \gexec
CALL test.wait_for($$(SELECT last_state = 'running' FROM retries.schedules WHERE name = 'queuer')$$);
SELECT * FROM test.advance(7) \gexec
CALL test.wait_for($$(SELECT queued FROM retries.schedule_data WHERE name = 'queuer')$$);
SELECT * FROM test.advance(8) \gexec
CALL test.wait_for($$(SELECT skipped = 1 AND queued FROM retries.schedule_data WHERE name = 'queuer')$$);
SELECT firings FROM retries.schedules WHERE name = 'queuer';
SELECT pg_advisory_unlock(4242);
CALL test.wait_for($$(SELECT firings = 2 FROM retries.schedules WHERE name = 'queuer')$$);
SELECT retries.pause_schedule('queuer');
CALL test.wait_for($$(SELECT bool_and(state = 'succeeded') FROM retries.calls WHERE schedule = 'queuer')$$);
-- never two of its calls at once: the second started after the first ended
SELECT bool_and(a.started_at >= p.finished_at) AS one_at_a_time, count(*) AS pairs
  FROM retries.attempts a
  JOIN retries.calls c ON c.id = a.call_id AND c.schedule = 'queuer'
  JOIN LATERAL (SELECT max(pa.finished_at) AS finished_at
				  FROM retries.attempts pa JOIN retries.calls pc ON pc.id = pa.call_id
				 WHERE pc.schedule = 'queuer' AND pc.id < c.id) p ON p.finished_at IS NOT NULL;
SELECT retries.unschedule('queuer');

-- allow: firings go on while the first call runs
SELECT pg_advisory_lock(4242);
SELECT retries.schedule('allower', 'sched_blocked(text)', '1h', '["allow"]', catch_up => '1 hour', overlap => 'allow');
SELECT * FROM test.advance(9) \gexec
CALL test.wait_for($$(SELECT last_state = 'running' FROM retries.schedules WHERE name = 'allower')$$);
SELECT * FROM test.advance(10) \gexec
CALL test.wait_for($$(SELECT count(*) = 2 FROM retries.calls
					   WHERE schedule = 'allower' AND state IN ('scheduled', 'running'))$$);
SELECT retries.pause_schedule('allower');
SELECT skipped FROM retries.schedules WHERE name = 'allower';
SELECT pg_advisory_unlock(4242);
CALL test.wait_for($$(SELECT bool_and(state = 'succeeded') FROM retries.calls WHERE schedule = 'allower')$$);
SELECT retries.unschedule('allower');

-- a function that loses its policy: its firings are skipped (and logged)
-- (in one transaction: no firing can come between)
BEGIN;
SELECT retries.schedule('orphan', 'sched_note(text)', '1h', '["orphan"]', catch_up => '1 hour');
SELECT retries.unannotate('sched_note(text)');
COMMIT;
SELECT * FROM test.advance(11) \gexec
CALL test.wait_for($$(SELECT skipped = 1 FROM retries.schedules WHERE name = 'orphan')$$);
SELECT firings FROM retries.schedules WHERE name = 'orphan';
SELECT retries.annotate('sched_note(text)', '3 1s');

-- a dropped function takes its schedules with it, saying so
SELECT retries.pause_schedule('orphan');
DROP FUNCTION sched_note(text);
SELECT count(*) AS left FROM retries.schedules WHERE name = 'orphan';

DROP FUNCTION sched_blocked(text);
DROP FUNCTION test.advance(int);
DROP ROLE sched_alice, sched_admin;
CALL test.reset();
ALTER SYSTEM RESET retries.debug_clock_offset;
ALTER SYSTEM RESET retries.enabled;
SELECT pg_reload_conf();
