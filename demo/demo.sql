-- demo.sql: a guided walkthrough of retries, run by scripts/demo against a
-- private cluster (the library preloaded, a fresh database `demo`).  Read
-- it top to bottom, or its output: each step says what it shows.
--
--    0. install                                     9. chains
--    1. annotate a function with a retry policy    10. procedures that commit
--    2. call it (and wait for it)                  11. commands, as pg_cron runs them
--    3. a flaky function, retried with backoff     12. priorities
--    4. failing for good                           13. events
--    5. the statistics so far                      14. key windows
--    6. a recurring schedule                       15. debounce
--    7. flow control                               16. cancel
--    8. results and retries.wait                   17. the statistics at the end
--
-- Delays are milliseconds so that the demo runs in seconds; real policies
-- use seconds or minutes.  Every wait below is a condition with a deadline.

\pset footer off
\set ON_ERROR_STOP on

\echo
\echo '== 0. Install the extension (the server preloads the library: shared_preload_libraries);'
\echo '   the workers of this database start when CREATE EXTENSION commits.'
CREATE EXTENSION retries;

-- A helper of this demo, not of the extension: wait until a condition
-- holds, polling every 50 ms, and fail if it does not within the deadline.
CREATE PROCEDURE wait_until(condition text, deadline interval DEFAULT '10 s')
LANGUAGE plpgsql AS $$
DECLARE
	give_up timestamptz := clock_timestamp() + deadline;
	ok boolean;
BEGIN
	LOOP
		EXECUTE 'SELECT ' || condition INTO ok;
		EXIT WHEN ok;
		IF clock_timestamp() > give_up THEN
			RAISE EXCEPTION 'demo: still not true after %: %', deadline, condition;
		END IF;
		PERFORM pg_sleep(0.05);
	END LOOP;
END $$;

\echo
\echo '== 1. Annotate a function with a retry policy'
\echo '   "5 1s 1m": up to 5 retries (6 attempts), 1s, 2s, 4s, ... apart, capped at 1 minute;'
\echo '   retry_on lists the SQLSTATEs worth another attempt (retries'' own class RT is added).'
CREATE TABLE payments (order_id bigint PRIMARY KEY, amount numeric NOT NULL);
CREATE FUNCTION charge(order_id bigint, amount numeric) RETURNS void
LANGUAGE sql AS $$ INSERT INTO payments VALUES (order_id, amount) $$;
SELECT retries.annotate('charge(bigint,numeric)', '5 1s 1m',
						retry_on => '{40001, 40P01}', timeout => '30 s');
SELECT fn, policy, max_attempts, min_delay, max_delay, retry_on, timeout
  FROM retries.policies;

\echo
\echo '== 2. Call it: retries.call() schedules a call (arguments as JSON, by position'
\echo '   or by name) and returns its id; a worker runs it once the transaction commits.'
SELECT retries.call('charge(bigint,numeric)', '[1, 9.99]') AS order1 \gset
\echo '   A key makes scheduling idempotent: the same request again gets the same call.'
SELECT retries.call('charge(bigint,numeric)', '{"order_id": 2, "amount": "19.90"}',
					key => 'order-2') AS order2 \gset
SELECT retries.call('charge(bigint,numeric)', '{"order_id": 2, "amount": "19.90"}',
					key => 'order-2') = :order2 AS same_call;
\echo '   retries.wait(id, timeout) sleeps until the call has finished (more in step 8).'
SELECT id, args, state, attempts FROM retries.wait(:order1, '10 s');
SELECT id, args, state, attempts FROM retries.wait(:order2, '10 s');
SELECT * FROM payments ORDER BY order_id;
\echo '   Arguments are checked when scheduling, not when the call runs:'
\set ON_ERROR_STOP off
SELECT retries.call('charge(bigint,numeric)', '[3, "lots"]');
\set ON_ERROR_STOP on

\echo
\echo '== 3. A flaky function: it fails with a retryable SQLSTATE (RT503) until its 4th attempt.'
\echo '   Policy "5 100ms 1s": the delays double, 100ms, 200ms, 400ms.'
CREATE FUNCTION flaky_fetch(url text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	IF retries.current_attempt() < 4 THEN
		RAISE EXCEPTION 'service unavailable (attempt %)', retries.current_attempt()
			USING ERRCODE = 'RT503';
	END IF;
END $$;
SELECT retries.annotate('flaky_fetch(text)', '5 100ms 1s');
SELECT retries.call('flaky_fetch(text)', '["https://example.com/feed"]') AS flaky \gset
\echo '   Watched while it retries: a retrying call is "scheduled" with attempts > 0.'
CALL wait_until(format('(SELECT attempts >= 2 FROM retries.calls WHERE id = %s)', :flaky));
SELECT state, attempts, max_attempts, last_sqlstate, last_message
  FROM retries.calls WHERE id = :flaky;
SELECT state, attempts FROM retries.wait(:flaky, '10 s');
\echo '   Every attempt is in retries.attempts; next_delay is the backoff chosen after it,'
\echo '   and each retry started no earlier than that.'
SELECT a.attempt, a.outcome, a.sqlstate, a.message, a.next_delay,
	   n.started_at >= a.finished_at + a.next_delay AS waited
  FROM retries.attempts a
  LEFT JOIN retries.attempts n ON n.call_id = a.call_id AND n.attempt = a.attempt + 1
 WHERE a.call_id = :flaky ORDER BY a.attempt;

\echo
\echo '== 4. Failing for good: an error that retry_on does not list fails the call at once;'
\echo '   a retryable one fails it when the attempts are used up.  on_exhausted runs then.'
CREATE TABLE gave_up (call_id bigint, fn regprocedure, last_message text);
CREATE FUNCTION note_gave_up(call_id bigint) RETURNS void LANGUAGE sql AS $$
	INSERT INTO gave_up SELECT id, fn, last_message FROM retries.calls WHERE id = call_id
$$;
CREATE FUNCTION divide(a int, b int) RETURNS int LANGUAGE sql AS 'SELECT a / b';
CREATE FUNCTION always_busy() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	RAISE EXCEPTION 'busy' USING ERRCODE = 'RT503';
END $$;
SELECT retries.annotate('divide(int,int)', '5 100ms', on_exhausted => 'note_gave_up(bigint)');
SELECT retries.annotate('always_busy()', '2 10ms', on_exhausted => 'note_gave_up(bigint)');
SELECT retries.call('divide(int,int)', '[1, 0]') AS divide \gset
SELECT retries.call('always_busy()') AS busy \gset
SELECT fn, state, attempts, last_sqlstate, last_message FROM retries.wait(:divide, '10 s');
SELECT fn, state, attempts, last_sqlstate, last_message FROM retries.wait(:busy, '10 s');
SELECT c.fn, a.attempt, a.outcome, a.sqlstate, a.message, a.hint
  FROM retries.attempts a JOIN retries.calls c ON c.id = a.call_id
 WHERE a.call_id IN (:divide, :busy) ORDER BY a.call_id, a.attempt;
SELECT fn, last_message FROM gave_up ORDER BY call_id;

\echo
\echo '== 5. The statistics so far: retries.stats, per function'
SELECT fn, scheduled, succeeded, failed, attempts, retries, success_ratio
  FROM retries.stats ORDER BY fn::text;

\echo
\echo '== 6. Recurring schedules: every cron expression (in a time zone) or interval, a'
\echo '   worker makes a call of the function, with its retry policy, exactly once per firing.'
CREATE TABLE heartbeats (at timestamptz NOT NULL DEFAULT clock_timestamp());
CREATE FUNCTION beat() RETURNS void LANGUAGE sql AS $$ INSERT INTO heartbeats DEFAULT VALUES $$;
SELECT retries.annotate('beat()', '3 100ms');
\echo '   A cron schedule, weekdays at 02:30 in Paris; next_runs() says when it fires:'
SELECT retries.schedule('nightly', 'beat()', '30 2 * * mon-fri', timezone => 'Europe/Paris')
	   AS nightly \gset
SELECT name, every, timezone, (next_run AT TIME ZONE timezone)::time AS next_run_local
  FROM retries.schedules WHERE name = 'nightly';
SELECT t AT TIME ZONE 'Europe/Paris' AS paris
  FROM retries.next_runs('30 2 * * mon-fri', 'Europe/Paris', '2026-03-27 12:00+01', 3) t;
SELECT retries.unschedule('nightly');
\echo '   An interval schedule, every second: watch it fire twice, then pause it.'
SELECT retries.schedule('heartbeat', 'beat()', '1s') AS heartbeat \gset
CALL wait_until($$(SELECT firings >= 2 FROM retries.schedules WHERE name = 'heartbeat')$$);
SELECT retries.pause_schedule('heartbeat');
SELECT state FROM retries.wait((SELECT last_call FROM retries.schedules
								 WHERE name = 'heartbeat'), '10 s');
SELECT name, every, paused, firings, skipped, missed, last_state
  FROM retries.schedules WHERE name = 'heartbeat';
SELECT schedule, state, count(*) AS calls
  FROM retries.calls WHERE schedule = 'heartbeat' GROUP BY 1, 2;
SELECT round(extract(epoch FROM at - min(at) OVER ())) AS seconds_after_the_first
  FROM heartbeats ORDER BY at;
SELECT retries.unschedule('heartbeat');

\echo
\echo '== 7. Flow control: limits on the function, kept by all workers together.  A call'
\echo '   that finds no room waits, held and not charged an attempt.'
\echo '   max_running => 1: at most one attempt at a time (the database has 2 workers).'
CREATE TABLE exports (n int, started timestamptz, finished timestamptz);
CREATE FUNCTION export_report(n int) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
	t0 timestamptz := clock_timestamp();
BEGIN
	PERFORM pg_sleep(0.2);                    -- the slow part
	INSERT INTO exports VALUES (n, t0, clock_timestamp());
END $$;
SELECT retries.annotate('export_report(int)', '3 100ms', max_running => 1);
SELECT count(retries.call('export_report(int)', jsonb_build_array(n))) AS scheduled
  FROM generate_series(1, 3) n;
\echo '   While the first runs, the other two wait (without the limit, two would run at once):'
CALL wait_until($$(SELECT running = 1 FROM retries.stats
					 WHERE fn = 'export_report(int)'::regprocedure)$$);
SELECT fn, scheduled, running FROM retries.stats
 WHERE fn = 'export_report(int)'::regprocedure;
CALL wait_until($$(SELECT count(*) = 3 FROM exports)$$);
SELECT count(*) AS exports,
	   count(*) FILTER (WHERE EXISTS (SELECT FROM exports o
									   WHERE o.n <> e.n AND o.started < e.finished
										 AND e.started < o.finished)) AS overlapping,
	   (SELECT sum(attempts) FROM retries.calls
		 WHERE fn = 'export_report(int)'::regprocedure) AS attempts
  FROM exports e;
\echo '   rate => ''3/1s'': no more than 3 attempts start in any 1 second.  6 calls:'
CREATE TABLE pings (n int);
CREATE FUNCTION ping_api(n int) RETURNS void LANGUAGE sql AS $$ INSERT INTO pings VALUES (n) $$;
SELECT retries.annotate('ping_api(int)', '3 100ms', rate => '3/1s');
SELECT count(retries.call('ping_api(int)', jsonb_build_array(n))) AS scheduled
  FROM generate_series(1, 6) n;
CALL wait_until($$(SELECT count(*) = 6 FROM pings)$$);
SELECT count(*) AS starts,
	   max((SELECT count(*) FROM retries.attempts b JOIN retries.calls bc ON bc.id = b.call_id
			 WHERE bc.fn = c.fn AND b.started_at >= a.started_at
			   AND b.started_at < a.started_at + interval '1 s')) AS most_in_one_second,
	   max(a.started_at) - min(a.started_at) >= interval '1 s' AS took_over_a_second
  FROM retries.attempts a JOIN retries.calls c ON c.id = a.call_id
 WHERE c.fn = 'ping_api(int)'::regprocedure;
\echo '   pause() holds every call of a function until resume(); retries.stats shows them held.'
SELECT retries.pause('charge(bigint,numeric)');
SELECT retries.call('charge(bigint,numeric)', '[3, 30]') AS order3 \gset
SELECT fn, scheduled, held, paused FROM retries.stats WHERE fn = 'charge(bigint,numeric)'::regprocedure;
SELECT retries.resume('charge(bigint,numeric)');
SELECT state, attempts FROM retries.wait(:order3, '10 s');

\echo
\echo '== 8. Results: what the function returns is kept, as jsonb, with the call.'
\echo '   Schedule, commit, then wait: retries.wait() returns the finished call with its result.'
CREATE FUNCTION quote_shipping(for_order bigint, OUT carrier text, OUT price numeric)
LANGUAGE sql AS $$
	SELECT 'parcel post', round(2.50 + 0.10 * amount, 2) FROM payments WHERE order_id = for_order
$$;
SELECT retries.annotate('quote_shipping(bigint)', '3 100ms');
SELECT retries.call('quote_shipping(bigint)', '[2]') AS quote \gset
SELECT state, result FROM retries.wait(:quote, '10 s');
\echo '   retries.result() reads it later, without waiting:'
SELECT retries.result(:quote) ->> 'price' AS price;
\echo '   A call due in an hour: wait gives up at its timeout (57014) and the call goes on;'
\echo '   result() says it has not succeeded.'
SELECT retries.call('quote_shipping(bigint)', '[1]', run_at => now() + interval '1 hour')
	   AS later_quote \gset
\set ON_ERROR_STOP off
SELECT state FROM retries.wait(:later_quote, '100 ms');
SELECT retries.result(:later_quote);
\set ON_ERROR_STOP on

\echo
\echo '== 9. Chains: after => ARRAY[id] runs a call once those calls have succeeded.'
\echo '   Order 4 is charged in an hour and shipped after; retry_now() runs the charge now.'
CREATE TABLE shipments (order_id bigint PRIMARY KEY);
CREATE FUNCTION ship(order_id bigint) RETURNS void
LANGUAGE sql AS $$ INSERT INTO shipments VALUES (order_id) $$;
SELECT retries.annotate('ship(bigint)', '3 100ms');
SELECT retries.call('charge(bigint,numeric)', '[4, 40]',
					run_at => now() + interval '1 hour') AS charge4 \gset
SELECT retries.call('ship(bigint)', '[4]', after => ARRAY[:charge4]) AS ship4 \gset
SELECT id, fn, args, state, waiting_for
  FROM retries.calls WHERE id IN (:charge4, :ship4) ORDER BY id;
SELECT retries.retry_now(:charge4);
SELECT fn, state, attempts FROM retries.wait(:ship4, '10 s');
SELECT * FROM shipments;
\echo '   A chain stops where a call fails: charging order 1 twice fails (unique_violation,'
\echo '   not retried), and the shipment after it is cancelled, saying why.'
SELECT retries.call('charge(bigint,numeric)', '[1, 9.99]') AS charge1_again \gset
SELECT retries.call('ship(bigint)', '[1]', after => ARRAY[:charge1_again]) AS ship1 \gset
SELECT state, last_sqlstate FROM retries.wait(:charge1_again, '10 s');
SELECT state, last_message FROM retries.wait(:ship1, '10 s');

\echo
\echo '== 10. Procedures: an annotated procedure may COMMIT as it goes; each attempt runs'
\echo '   alone, in a process of its own, as the calling role.  Three batches, three commits:'
CREATE TABLE archived (batch int, at timestamptz);
CREATE PROCEDURE archive_old(batches int) LANGUAGE plpgsql AS $$
BEGIN
	FOR b IN 1 .. batches LOOP
		INSERT INTO archived VALUES (b, clock_timestamp());
		COMMIT;                               -- each batch is kept, whatever comes next
	END LOOP;
END $$;
SELECT retries.annotate('archive_old(int)', '3 100ms');
SELECT retries.call('archive_old(int)', '[3]') AS archive \gset
SELECT fn, state, attempts FROM retries.wait(:archive, '10 s');
SELECT count(*) AS batches_committed FROM archived;

\echo
\echo '== 11. Commands: SQL text run as the role, as pg_cron runs a job, but with a retry'
\echo '   policy and a record of each attempt.  VACUUM cannot run in a transaction block:'
\echo '   a command runs its statements one at a time, as psql runs a script.'
SELECT retries.run_command('VACUUM payments; ANALYZE payments', '3 100ms') AS vacuum \gset
SELECT state, attempts FROM retries.wait(:vacuum, '10 s');
SELECT command_tag FROM retries.attempts WHERE call_id = :vacuum;
\echo '   The same as a schedule, nightly at 03:00 (schedule_command), and when it fires next:'
SELECT retries.schedule_command('nightly vacuum', 'VACUUM payments', '0 3 * * *') > 0 AS nightly_scheduled;
SELECT every, next_run > now() AS in_the_future FROM retries.schedules WHERE name = 'nightly vacuum';
SELECT retries.unschedule('nightly vacuum');

\echo
\echo '== 12. Priorities: among due calls, higher runs first.  20 exports of priority 0, then'
\echo '   one of priority 10, made in one transaction: the urgent one starts first or second'
\echo '   (the database has two workers).'
CREATE TABLE reports (n int, started timestamptz);
CREATE FUNCTION build_report(n int) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO reports VALUES (n, clock_timestamp());
	PERFORM pg_sleep(0.02);
END $$;
SELECT retries.annotate('build_report(int)', '3 100ms');
BEGIN;
SELECT count(retries.call('build_report(int)', jsonb_build_array(n))) AS routine
  FROM generate_series(1, 20) n;
SELECT retries.call('build_report(int)', '[99]', priority => 10) AS urgent \gset
COMMIT;
CALL wait_until($$(SELECT count(*) = 21 FROM reports)$$);
SELECT (SELECT count(*) FROM reports r WHERE r.started < u.started) < 2 AS urgent_started_first
  FROM reports u WHERE n = 99;

\echo
\echo '== 13. Events: a call made with on_event waits, uncharged, until the role emits that'
\echo '   event; retries.event() gives the call the payload.  An order ships once it is paid:'
CREATE FUNCTION ship_paid(order_id bigint) RETURNS text LANGUAGE sql AS $$
	SELECT format('order %s paid by %s', order_id, retries.event() ->> 'method')
$$;
SELECT retries.annotate('ship_paid(bigint)', '3 100ms');
SELECT retries.call('ship_paid(bigint)', '[7]', on_event => 'paid:7') AS ship7 \gset
SELECT state, waiting_for_event FROM retries.calls WHERE id = :ship7;
\echo '   The payment webhook emits it (it returns how many calls it released):'
SELECT retries.emit('paid:7', '{"method": "card"}') AS released;
SELECT state, result FROM retries.wait(:ship7, '10 s');

\echo
\echo '== 14. Key windows: key_window spaces the deliveries of a key''s calls.  A reminder'
\echo '   per customer, at most one every 500 ms: two reminders made 500 ms apart while the'
\echo '   function was paused are both due at resume, and still start 500 ms apart.'
CREATE TABLE reminders (customer int, sent timestamptz);
CREATE FUNCTION remind(customer int) RETURNS void LANGUAGE sql AS $$
	INSERT INTO reminders VALUES (customer, clock_timestamp())
$$;
SELECT retries.annotate('remind(int)', '3 100ms', key_window => '500 ms');
SELECT retries.pause('remind(int)');
SELECT retries.call('remind(int)', '[42]', key => 'remind:42') AS first_reminder \gset
\echo '   Within the window the key dedupes: the same request again is the same call.'
SELECT retries.call('remind(int)', '[42]', key => 'remind:42') = :first_reminder AS same_call;
CALL wait_until($$(SELECT clock_timestamp() - created_at > interval '500 ms' FROM retries.calls WHERE id = $$
				|| :first_reminder || ')');
SELECT retries.call('remind(int)', '[42]', key => 'remind:42') AS second_reminder \gset
SELECT retries.resume('remind(int)');
CALL wait_until($$(SELECT count(*) = 2 FROM reminders)$$);
\echo '   The window holds between the attempts' starts (what the function does after its'
\echo '   start, here the insert, comes a little later in each):'
SELECT max(started_at) - min(started_at) >= interval '500 ms' AS started_500_ms_apart
  FROM retries.attempts WHERE call_id IN (:first_reminder, :second_reminder);

\echo
\echo '== 15. Debounce: with a key, each call moves the key''s call that has not started to'
\echo '   now() + debounce, with the new arguments.  Three edits in a row: one reindex, of the last.'
CREATE TABLE reindexed (doc int, version int);
CREATE FUNCTION reindex_doc(doc int, version int) RETURNS void LANGUAGE sql AS $$
	INSERT INTO reindexed VALUES (doc, version)
$$;
SELECT retries.annotate('reindex_doc(int,int)', '3 100ms');
SELECT count(DISTINCT retries.call('reindex_doc(int,int)', jsonb_build_array(5, v),
								   key => 'reindex:5', debounce => '300 ms')) AS calls
  FROM generate_series(1, 3) v;
CALL wait_until($$(SELECT count(*) = 1 FROM reindexed)$$);
SELECT * FROM reindexed;

\echo
\echo '== 16. Cancel: true if the call will not run again, false if it had already finished.'
\echo '   The calls that run after it go with it: here a shipment waiting for the quote of step 8.'
SELECT retries.call('ship(bigint)', '[5]', after => ARRAY[:later_quote]) AS after_quote \gset
SELECT retries.cancel(:later_quote) AS cancelled, retries.cancel(:later_quote) AS again,
	   retries.cancel(:quote) AS already_succeeded;
SELECT fn, state, last_message FROM retries.calls
 WHERE id IN (:later_quote, :after_quote) ORDER BY id;
\echo '   A cancelled call has finished: wait returns at once.'
SELECT state FROM retries.wait(:later_quote, '10 s');

\echo
\echo '== 17. Everything in retries.stats, and the workers that ran it'
SELECT fn, scheduled, succeeded, failed, cancelled, attempts, retries, held
  FROM retries.stats ORDER BY fn::text;
SELECT database, count(*) AS workers, sum(calls_run) AS attempts_run
  FROM retries.workers WHERE database = current_database() GROUP BY database;
