--
-- events: keys with windows, debounce and events (1.6)
--
CALL test.reset();
ALTER SYSTEM SET retries.enabled = on;
SELECT pg_reload_conf();
CALL test.workers_see(true);

CREATE ROLE ev_alice LOGIN;
CREATE ROLE ev_bob LOGIN;
GRANT USAGE ON SCHEMA public TO ev_alice, ev_bob;
GRANT CREATE ON SCHEMA public TO ev_bob;
CREATE TABLE ev_mail (who text, body text, event jsonb, at timestamptz DEFAULT clock_timestamp());
GRANT SELECT, INSERT ON ev_mail TO PUBLIC;
-- what it sends, and the payload of the event that let it run
CREATE FUNCTION ev_send(who text, body text) RETURNS jsonb LANGUAGE sql AS $$
	INSERT INTO ev_mail (who, body, event) VALUES (who, body, retries.event());
	SELECT jsonb_build_object('event', retries.event());
$$;
SELECT retries.annotate('ev_send(text,text)', '3 10ms');

-----------------------------------------------------------------------
-- Windows: a key dedupes only within key_window of the kept call
-----------------------------------------------------------------------
SET ROLE ev_alice;
SELECT retries.call('ev_send(text,text)', '["c1", "hello"]', key => 'mail:c1',
					key_window => '1 hour', run_at => now() + interval '1 day') AS w1 \gset
-- within the hour: the same call
SELECT retries.call('ev_send(text,text)', '["c1", "again"]', key => 'mail:c1',
					key_window => '1 hour') = :w1 AS within_window_dedupes;
RESET ROLE;
-- the kept call made two hours ago (as if time had passed)
UPDATE retries.call_data SET created_at = created_at - interval '2 hours' WHERE id = :w1;
SET ROLE ev_alice;
SELECT retries.call('ev_send(text,text)', '["c1", "later"]', key => 'mail:c1',
					key_window => '1 hour', run_at => now() + interval '1 day') AS w2 \gset
SELECT :w2 <> :w1 AS past_window_new_call;
-- both keep the key in the views; the latest holds it
SELECT id = :w1 AS first, key, args FROM retries.calls WHERE key = 'mail:c1' ORDER BY id;
-- within the new call's window: the new call
SELECT retries.call('ev_send(text,text)', '["c1", "x"]', key => 'mail:c1',
					key_window => '1 hour') = :w2 AS dedupes_to_latest;
-- a key without a window lasts as long as the holder is kept
SELECT retries.call('ev_send(text,text)', '["c1", "y"]', key => 'mail:c1') = :w2 AS no_window_dedupes;
-- the window is per call: a shorter one lets a new call through
RESET ROLE;
UPDATE retries.call_data SET created_at = created_at - interval '10 minutes' WHERE id = :w2;
SET ROLE ev_alice;
SELECT retries.call('ev_send(text,text)', '["c1", "z"]', key => 'mail:c1',
					key_window => '5 minutes', run_at => now() + interval '1 day') NOT IN (:w1, :w2)
	AS shorter_window_new_call;
SELECT count(*) AS calls_of_key FROM retries.calls WHERE key = 'mail:c1';
RESET ROLE;
-- another role's key of the same name is its own
SET ROLE ev_bob;
SELECT retries.call('ev_send(text,text)', '["c1", "bob"]', key => 'mail:c1',
					key_window => '1 hour', run_at => now() + interval '1 day') NOT IN (:w1, :w2)
	AS other_role_own_call;
SELECT count(*) AS bob_sees FROM retries.calls;
RESET ROLE;

-- annotate's key_window is the default of the function's calls
CREATE FUNCTION ev_digest(who text) RETURNS void LANGUAGE sql AS '';
SELECT retries.annotate('ev_digest(text)', '3 10ms', key_window => '1 hour');
SELECT fn, key_window FROM retries.policies WHERE fn = 'ev_digest(text)'::regprocedure;
SELECT retries.call('ev_digest(text)', '["c2"]', key => 'digest:c2',
					run_at => now() + interval '1 day') AS d1 \gset
UPDATE retries.call_data SET created_at = created_at - interval '2 hours' WHERE id = :d1;
SELECT retries.call('ev_digest(text)', '["c2"]', key => 'digest:c2',
					run_at => now() + interval '1 day') <> :d1
	AS default_window_new_call;
-- a call's own key_window wins over the function's
UPDATE retries.call_data SET created_at = created_at - interval '2 hours' WHERE key = 'digest:c2';
SELECT retries.call('ev_digest(text)', '["c2"]', key => 'digest:c2', key_window => '1 day')
	= (SELECT max(id) FROM retries.call_data WHERE key = 'digest:c2') AS own_window_dedupes;

-- bad windows are refused, and store nothing
SELECT * FROM test.stored();
CALL test.try($$SELECT retries.call('ev_digest(text)', '["c"]', key_window => '1 hour')$$);
CALL test.try($$SELECT retries.call('ev_digest(text)', '["c"]', key => 'k', key_window => '0')$$);
CALL test.try($$SELECT retries.call('ev_digest(text)', '["c"]', key => 'k', key_window => '-1 hour')$$);
CALL test.try($$SELECT retries.call('ev_digest(text)', '["c"]', key => 'k', key_window => '4000 days')$$);
CALL test.try($$SELECT retries.annotate('ev_digest(text)', '3 10ms', key_window => '0')$$);
SELECT * FROM test.stored();

-----------------------------------------------------------------------
-- Debounce: a key's call that has not started moves, with new arguments
-----------------------------------------------------------------------
SET ROLE ev_alice;
SELECT retries.call('ev_send(text,text)', '["c3", "edit 1"]', key => 'save:c3',
					debounce => '1 hour') AS b1 \gset
SELECT next_attempt > now() + interval '59 minutes' AS moved_out, args
  FROM retries.calls WHERE id = :b1;
SELECT retries.call('ev_send(text,text)', '["c3", "edit 2"]', key => 'save:c3',
					debounce => '2 hours') = :b1 AS same_call;
SELECT next_attempt > now() + interval '119 minutes' AS moved_again, args
  FROM retries.calls WHERE id = :b1;
-- a later run_at wins over now() + debounce
SELECT retries.call('ev_send(text,text)', '["c3", "edit 3"]', key => 'save:c3',
					debounce => '1 second', run_at => now() + interval '3 hours') = :b1 AS same_call;
SELECT next_attempt > now() + interval '179 minutes' AS at_run_at
  FROM retries.calls WHERE id = :b1;
RESET ROLE;
-- once it has started (an attempt made), a debounce makes a new call
UPDATE retries.call_data SET attempts = 1 WHERE id = :b1;
SET ROLE ev_alice;
SELECT retries.call('ev_send(text,text)', '["c3", "edit 4"]', key => 'save:c3',
					debounce => '1 hour') AS b2 \gset
SELECT :b2 <> :b1 AS started_new_call,
	   (SELECT args FROM retries.calls WHERE id = :b1) AS old_args,
	   (SELECT args FROM retries.calls WHERE id = :b2) AS new_args;
-- the new one has not started: it is the one that moves now
SELECT retries.call('ev_send(text,text)', '["c3", "edit 5"]', key => 'save:c3',
					debounce => '1 hour') = :b2 AS moves_new_call;
RESET ROLE;
-- finished, and within key_window: dedupes rather than making a call
UPDATE retries.call_data SET state = 'succeeded', attempts = 1 WHERE id = :b2;
SET ROLE ev_alice;
SELECT retries.call('ev_send(text,text)', '["c3", "edit 6"]', key => 'save:c3',
					debounce => '1 hour', key_window => '1 day') = :b2 AS finished_within_window;
-- finished, no window: a new call
SELECT retries.call('ev_send(text,text)', '["c3", "edit 7"]', key => 'save:c3',
					debounce => '1 hour') NOT IN (:b1, :b2) AS finished_new_call;
RESET ROLE;
CALL test.try($$SELECT retries.call('ev_digest(text)', '["c"]', debounce => '1 hour')$$);
CALL test.try($$SELECT retries.call('ev_digest(text)', '["c"]', key => 'k', debounce => '-1 s')$$);

-- debounce_max (1.7): a burst still runs at most that long after its first
-- call; the first call already: not later than now() + debounce_max
SET ROLE ev_alice;
SELECT retries.call('ev_send(text,text)', '["c8", "edit 1"]', key => 'save:c8',
					debounce => '1 hour', debounce_max => '10 minutes') AS m1 \gset
SELECT next_attempt BETWEEN now() + interval '9 minutes' AND now() + interval '10 minutes'
	   AS capped_at_first FROM retries.calls WHERE id = :m1;
RESET ROLE;
-- the burst began 8 minutes ago: the next edit, which debounces by 5
-- minutes, moves it to 2 minutes from now
UPDATE retries.call_data SET created_at = created_at - interval '8 minutes' WHERE id = :m1;
SET ROLE ev_alice;
SELECT retries.call('ev_send(text,text)', '["c8", "edit 2"]', key => 'save:c8',
					debounce => '5 minutes', debounce_max => '10 minutes') = :m1 AS same_call;
SELECT next_attempt BETWEEN now() + interval '1 minute 50 seconds' AND now() + interval '2 minutes'
	   AS capped_at_burst, args FROM retries.calls WHERE id = :m1;
RESET ROLE;
-- past it: due at once (the burst has waited long enough), with the last
-- arguments; a later run_at still wins (in one transaction, so that no
-- worker runs the call while it is due)
BEGIN;
UPDATE retries.call_data SET created_at = created_at - interval '1 hour' WHERE id = :m1;
SET ROLE ev_alice;
SELECT retries.call('ev_send(text,text)', '["c8", "edit 3"]', key => 'save:c8',
					debounce => '1 minute', debounce_max => '10 minutes') = :m1 AS same_call;
SELECT next_attempt <= now() AS due_now, args FROM retries.calls WHERE id = :m1;
SELECT retries.call('ev_send(text,text)', '["c8", "edit 4"]', key => 'save:c8',
					debounce => '1 minute', debounce_max => '10 minutes',
					run_at => now() + interval '1 day') = :m1 AS same_call;
SELECT next_attempt > now() + interval '23 hours' AS at_run_at FROM retries.calls WHERE id = :m1;
RESET ROLE;
COMMIT;
-- the function's default (annotate), which a call's own wins over
SELECT retries.annotate('ev_send(text,text)', '3 10ms', debounce_max => '5 minutes');
SELECT debounce_max FROM retries.policies WHERE fn = 'ev_send(text,text)'::regprocedure;
SET ROLE ev_alice;
SELECT retries.call('ev_send(text,text)', '["c9", "edit 1"]', key => 'save:c9',
					debounce => '1 hour') AS m2 \gset
SELECT retries.call('ev_send(text,text)', '["c10", "edit 1"]', key => 'save:c10',
					debounce => '1 hour', debounce_max => '20 minutes') AS m3 \gset
SELECT id = :m2 AS the_function_s, next_attempt <= now() + interval '5 minutes' AS capped
  FROM retries.calls WHERE id IN (:m2, :m3) ORDER BY id;
SELECT retries.cancel(:m1), retries.cancel(:m2), retries.cancel(:m3);
RESET ROLE;
SELECT retries.annotate('ev_send(text,text)', '3 10ms');
CALL test.try($$SELECT retries.call('ev_digest(text)', '["c"]', key => 'k', debounce_max => '1 hour')$$);
CALL test.try($$SELECT retries.call('ev_digest(text)', '["c"]', key => 'k', debounce => '1 s', debounce_max => '0 s')$$);
CALL test.try($$SELECT retries.annotate('ev_digest(text)', '3 1s', debounce_max => '-1 s')$$);

-----------------------------------------------------------------------
-- Events
-----------------------------------------------------------------------
SET ROLE ev_alice;
SELECT retries.call('ev_send(text,text)', '["c4", "shipped"]', on_event => 'paid:4') AS e1 \gset
SELECT state, attempts, waiting_for_event, waiting_for FROM retries.calls WHERE id = :e1;
-- another event releases nothing
SELECT retries.emit('paid:5', '{"amount": 5}') AS released_other;
SELECT state, waiting_for_event FROM retries.calls WHERE id = :e1;
-- its event releases it, and it runs with the payload
SELECT retries.emit('paid:4', '{"amount": 4}') AS released;
SELECT state, result FROM retries.wait(:e1, '180s');
SELECT waiting_for_event FROM retries.calls WHERE id = :e1;
-- a call made after the event runs at once, with the latest payload
SELECT retries.emit('paid:4', '{"amount": 44}') AS released_again;
SELECT retries.call('ev_send(text,text)', '["c4", "receipt"]', on_event => 'paid:4') AS e2 \gset
SELECT state, result FROM retries.wait(:e2, '180s');
-- an event emitted without a payload gives JSON null, not SQL NULL
SELECT retries.call('ev_send(text,text)', '["c6", "bare"]', on_event => 'bare:6') AS e3 \gset
SELECT retries.emit('bare:6') AS released;
SELECT state, result, jsonb_typeof(result -> 'event') FROM retries.wait(:e3, '180s');
-- past event_timeout it runs without: retries.event() is NULL
SELECT retries.call('ev_send(text,text)', '["c7", "refund"]', on_event => 'paid:7',
					event_timeout => '100 ms') AS e4 \gset
SELECT state, result FROM retries.wait(:e4, '180s');
-- an emit after the timeout has nothing left to release
SELECT retries.emit('paid:7') AS released_late;
-- outside a call, retries.event() is NULL
SELECT retries.event() AS outside;
RESET ROLE;

-- events are per role: alice's emit does not release bob's call
SET ROLE ev_bob;
SELECT retries.call('ev_send(text,text)', '["c8", "bob"]', on_event => 'paid:8') AS e5 \gset
RESET ROLE;
SET ROLE ev_alice;
SELECT retries.emit('paid:8', '{"from": "alice"}') AS alice_released;
SELECT count(*) AS alice_sees_bobs FROM retries.calls WHERE id = :e5;
CALL test.try($$SELECT * FROM retries.event_data$$);
RESET ROLE;
SET ROLE ev_bob;
SELECT state, waiting_for_event FROM retries.calls WHERE id = :e5;
-- bob lets alice emit his event: a SECURITY DEFINER function of his own
CREATE FUNCTION public.bob_paid(order_id int) RETURNS bigint
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
	SELECT retries.emit('paid:' || order_id, jsonb_build_object('order', order_id))
$$;
REVOKE ALL ON FUNCTION public.bob_paid(int) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION public.bob_paid(int) TO ev_alice;
RESET ROLE;
SET ROLE ev_alice;
SELECT public.bob_paid(8) AS alice_released_for_bob;
RESET ROLE;
SET ROLE ev_bob;
SELECT state, result FROM retries.wait(:e5, '180s');
RESET ROLE;
-- the payload that released it was bob's, not alice's
SELECT role, event, payload FROM retries.event_data ORDER BY role, event;

-- with after: it waits for both its event and the calls it runs after
SET ROLE ev_alice;
SELECT retries.call('ev_send(text,text)', '["c9", "first"]', run_at => now() + interval '1 day') AS before \gset
SELECT retries.call('ev_send(text,text)', '["c9", "second"]', after => ARRAY[:before],
					on_event => 'paid:9') AS e6 \gset
SELECT retries.emit('paid:9') AS released;
SELECT state, waiting_for = ARRAY[:before]::bigint[] AS waits_for_before, waiting_for_event
  FROM retries.calls WHERE id = :e6;
SELECT retries.retry_now(:before);
SELECT state FROM retries.wait(:e6, '180s');
-- a cancelled waiting call stays cancelled when its event comes
SELECT retries.call('ev_send(text,text)', '["c10", "x"]', on_event => 'paid:10') AS e7 \gset
SELECT retries.cancel(:e7);
SELECT retries.emit('paid:10') AS released_cancelled;
SELECT state, waiting_for_event FROM retries.calls WHERE id = :e7;
RESET ROLE;

-- a paused function's call released by its event waits for resume
SELECT retries.pause('ev_send(text,text)');
SET ROLE ev_alice;
SELECT retries.call('ev_send(text,text)', '["c11", "paused"]', on_event => 'paid:11') AS e8 \gset
SELECT retries.emit('paid:11') AS released;
RESET ROLE;
CALL test.wait_for(format($$(SELECT held AND gate IS NOT NULL FROM retries.call_data WHERE id = %s)$$, :e8));
SELECT state, waiting_for_event FROM retries.calls WHERE id = :e8;
SELECT retries.resume('ev_send(text,text)');
SELECT state, result FROM retries.wait(:e8, '180s');

-- retries.events lists the role's events, emitted or waited for, and
-- clear_event forgets one: a call made after it waits for the next emit (1.7)
SET ROLE ev_alice;
SELECT retries.emit('order:1', '{"n": 1}') AS released;
SELECT retries.call('ev_send(text,text)', '["c20", "x"]', on_event => 'ordr:1') AS e20 \gset
SELECT event, payload, emitted_at IS NOT NULL AS emitted, waiting
  FROM retries.events WHERE event IN ('order:1', 'ordr:1') ORDER BY event;
SELECT retries.clear_event('order:1') AS cleared;
SELECT retries.clear_event('order:1') AS cleared_again;
SELECT retries.call('ev_send(text,text)', '["c21", "y"]', on_event => 'order:1') AS e21 \gset
SELECT waiting_for_event FROM retries.calls WHERE id = :e21;
SELECT event, emitted_at IS NOT NULL AS emitted, waiting
  FROM retries.events WHERE event IN ('order:1', 'ordr:1') ORDER BY event;
RESET ROLE;
-- another role sees none of them, and clears only its own
SET ROLE ev_bob;
SELECT count(*) AS bob_sees FROM retries.events WHERE event IN ('order:1', 'ordr:1');
SELECT retries.clear_event('ordr:1') AS bob_cleared;
RESET ROLE;
SET ROLE ev_alice;
SELECT retries.emit('order:1', '{"n": 2}') AS released;
SELECT state, result FROM retries.wait(:e21, '180s');
SELECT retries.cancel(:e20);
SELECT count(*) AS left_waiting FROM retries.events WHERE event IN ('order:1', 'ordr:1') AND waiting > 0;
RESET ROLE;
CALL test.try($$SELECT retries.clear_event('')$$);
CALL test.try($$SELECT retries.clear_event(NULL)$$);

-- bad events are refused
CALL test.try($$SELECT retries.call('ev_digest(text)', '["c"]', on_event => '')$$);
CALL test.try($$SELECT retries.call('ev_digest(text)', '["c"]', event_timeout => '1 hour')$$);
CALL test.try($$SELECT retries.call('ev_digest(text)', '["c"]', on_event => 'e', event_timeout => '-1 s')$$);
CALL test.try($$SELECT retries.emit('')$$);
CALL test.try($$SELECT retries.emit(NULL)$$);

-- colocate_with and shard_key (1.7) go together, and need Citus
CALL test.try($$SELECT retries.call('ev_digest(text)', '["c"]', colocate_with => 'ev_mail')$$);
CALL test.try($$SELECT retries.call('ev_digest(text)', '["c"]', shard_key => '1')$$);
CALL test.try($$SELECT retries.call('ev_digest(text)', '["c"]', colocate_with => 'ev_mail', shard_key => '1')$$);
CALL test.try($$SELECT retries.citus_setup()$$);

-- what the mail table saw, in order of the calls
SELECT who, body, event FROM ev_mail ORDER BY at;

DROP FUNCTION public.bob_paid(int);
DROP OWNED BY ev_alice, ev_bob;
DROP ROLE ev_alice, ev_bob;
