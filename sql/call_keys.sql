--
-- call_keys: dedupe keys make scheduling idempotent, per role
--
CALL test.reset();
CREATE FUNCTION send_mail(address text) RETURNS void LANGUAGE sql AS '';
SELECT retries.annotate('send_mail(text)', '3 1s');
CREATE ROLE keys_alice;
CREATE ROLE keys_bob;
GRANT USAGE ON SCHEMA public TO keys_alice, keys_bob;

-- the same role twice: the second call returns the first one's id
SET ROLE keys_alice;
SELECT retries.call('send_mail(text)', '["a@example.com"]', key => 'welcome:1') AS first,
	   retries.call('send_mail(text)', '["a@example.com"]', key => 'welcome:1') AS second;
-- even with other arguments: the key names the call
SELECT retries.call('send_mail(text)', '["other@example.com"]', key => 'welcome:1') AS third;
-- another key is another call
SELECT retries.call('send_mail(text)', '["a@example.com"]', key => 'welcome:2') AS other_key;
-- no key, no dedupe
SELECT retries.call('send_mail(text)', '["a@example.com"]') AS no_key_1,
	   retries.call('send_mail(text)', '["a@example.com"]') AS no_key_2;
RESET ROLE;

-- two roles with the same key: two calls, neither sees the other's
SET ROLE keys_bob;
SELECT retries.call('send_mail(text)', '["b@example.com"]', key => 'welcome:1') AS bobs;
SELECT id, key, args FROM retries.calls ORDER BY id;
RESET ROLE;
SET ROLE keys_alice;
SELECT id, key, args FROM retries.calls ORDER BY id;
RESET ROLE;

-- a key names its call for as long as the call is kept: once it has
-- succeeded, the same request gets it back and runs nothing again (the
-- worker's part is simulated here), and so once it has failed or was
-- cancelled
UPDATE retries.call_data SET state = 'succeeded' WHERE id = 1;
SET ROLE keys_alice;
SELECT retries.call('send_mail(text)', '["a@example.com"]', key => 'welcome:1') AS same_call;
RESET ROLE;
UPDATE retries.call_data SET state = 'failed' WHERE id = 1;
SET ROLE keys_alice;
SELECT retries.call('send_mail(text)', '["a@example.com"]', key => 'welcome:1') AS same_call;
-- to run it again, retry it by hand: the same call, with its key
CALL test.try($$SELECT retries.retry_now(1)$$);
SELECT id, state, key FROM retries.calls WHERE id = 1;
RESET ROLE;
-- once the call is pruned, the key may be used again
DELETE FROM retries.call_data WHERE id = 1;
SET ROLE keys_alice;
SELECT retries.call('send_mail(text)', '["a@example.com"]', key => 'welcome:1') <> 1 AS new_call;
RESET ROLE;

-- keys of any length are fine (the index holds a hash)
SET ROLE keys_alice;
SELECT retries.call('send_mail(text)', '["x"]', key => repeat('k', 10000)) =
	   retries.call('send_mail(text)', '["y"]', key => repeat('k', 10000)) AS same_call;
RESET ROLE;

-- in one transaction, a key scheduled earlier is found
BEGIN;
SET ROLE keys_bob;
SELECT retries.call('send_mail(text)', '["t"]', key => 'tx') =
	   retries.call('send_mail(text)', '["t"]', key => 'tx') AS same_call;
RESET ROLE;
COMMIT;

SELECT scheduled_by, count(*) AS calls, count(key) AS with_key
  FROM retries.calls GROUP BY 1 ORDER BY 1;

-- Calls without a key, many in one transaction: call_data and its indexes
-- stay open from one to the next.  Every call is in every index it
-- belongs to, whatever happens between them in the transaction: an index
-- made, a subtransaction rolled back; and the table may be truncated.
BEGIN;
SELECT count(retries.call('send_mail(text)', jsonb_build_array(g::text), now() + interval '1 day'))
  FROM generate_series(1, 3) g;
CREATE INDEX call_data_by_args ON retries.call_data (args);
SELECT count(retries.call('send_mail(text)', jsonb_build_array(g::text), now() + interval '1 day'))
  FROM generate_series(4, 6) g;
DO $$
BEGIN
	PERFORM retries.call('send_mail(text)', '["rolled back"]', now() + interval '1 day');
	RAISE EXCEPTION 'roll the call back';
EXCEPTION WHEN raise_exception THEN
	NULL;
END $$;
SELECT count(retries.call('send_mail(text)', jsonb_build_array(g::text), now() + interval '1 day'))
  FROM generate_series(7, 9) g;
SET LOCAL enable_seqscan = off;
SET LOCAL enable_bitmapscan = off;
-- by the new index, and by the due calls' index
EXPLAIN (COSTS OFF) SELECT count(*) FROM retries.call_data WHERE args >= '["1"]' AND args <= '["9"]';
SELECT count(*) FROM retries.call_data WHERE args >= '["1"]' AND args <= '["9"]';
SELECT count(*) FROM retries.call_data WHERE args = '["rolled back"]';
SELECT count(*) FROM retries.call_data
 WHERE state = 'scheduled' AND NOT held AND priority = 0
   AND next_attempt > now() + interval '1 hour';
ROLLBACK;
BEGIN;
SELECT retries.call('send_mail(text)', '[10]', now() + interval '1 day') > 0 AS made;
TRUNCATE retries.call_data, retries.attempt_data, retries.call_after, retries.call_after_pending;
SELECT retries.call('send_mail(text)', '[11]', now() + interval '1 day') > 0 AS made;
SELECT args FROM retries.call_data;
ROLLBACK;

-- A call rolled back with its savepoint, or its EXCEPTION block, leaves no
-- lock on call_data or its indexes behind
BEGIN;
SAVEPOINT s;
SELECT retries.call('send_mail(text)', '["s"]', now() + interval '1 day') > 0 AS made;
ROLLBACK TO SAVEPOINT s;
SELECT count(*) AS locks FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
 WHERE l.pid = pg_backend_pid() AND c.relnamespace = 'retries'::regnamespace
   AND c.relname LIKE 'call_data%' AND c.relkind <> 'S';
DO $$
BEGIN
	PERFORM retries.call('send_mail(text)', '["e"]', now() + interval '1 day');
	RAISE EXCEPTION 'roll the call back';
EXCEPTION WHEN raise_exception THEN
	NULL;
END $$;
SELECT count(*) AS locks FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
 WHERE l.pid = pg_backend_pid() AND c.relnamespace = 'retries'::regnamespace
   AND c.relname LIKE 'call_data%' AND c.relkind <> 'S';
ROLLBACK;
-- A call followed by a utility command (which closes what the calls keep
-- open) leaves only call_data's lock, as an INSERT would: none on its
-- indexes until the transaction ends
BEGIN;
SELECT retries.call('send_mail(text)', '["u"]', now() + interval '1 day') > 0 AS made;
SET LOCAL application_name = 'after a call';
SELECT c.relname AS locked FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
 WHERE l.pid = pg_backend_pid() AND c.relnamespace = 'retries'::regnamespace
   AND c.relname LIKE 'call_data%' AND c.relkind <> 'S';
ROLLBACK;

-- An event trigger that schedules a call when a command starts does not
-- keep call_data open under the command
CREATE FUNCTION note_ddl() RETURNS event_trigger LANGUAGE plpgsql AS $$
BEGIN
	PERFORM retries.call('send_mail(text)', '["ddl"]', now() + interval '1 day');
END $$;
CREATE EVENT TRIGGER note_ddl ON ddl_command_start EXECUTE FUNCTION note_ddl();
BEGIN;
CREATE INDEX call_data_by_args ON retries.call_data (args);
ALTER TABLE retries.call_data ALTER COLUMN last_message SET STATISTICS 100;
SELECT count(*) AS noted FROM retries.call_data WHERE args = '["ddl"]';
ROLLBACK;
DROP EVENT TRIGGER note_ddl;
DROP FUNCTION note_ddl();

-- What a call did, for the caller to see in the same round trip
-- (retries.call_outcome(), 1.7): made, deduplicated or debounced
SET ROLE keys_alice;
SELECT id, retries.call_outcome() AS outcome
  FROM (SELECT retries.call('send_mail(text)', '["o@example.com"]', key => 'outcome:1',
						   run_at => now() + interval '1 day') AS id OFFSET 0) c;
SELECT retries.call_outcome() AS after_the_same_key
  FROM (SELECT retries.call('send_mail(text)', '["p@example.com"]', key => 'outcome:1') OFFSET 0) c;
SELECT retries.call_outcome() AS after_a_debounce
  FROM (SELECT retries.call('send_mail(text)', '["q@example.com"]', key => 'outcome:1',
						   debounce => '1 day') OFFSET 0) c;
-- a failed call leaves no outcome behind
CALL test.try($$SELECT retries.call('send_mail(text)', '[1, 2]')$$);
SELECT retries.call_outcome() IS NULL AS none_after_an_error;
RESET ROLE;

-- A key is one function's: another function's call with the key is
-- refused (23505) rather than handed the other call's id, for as long as
-- the key's call is kept, or within its key_window
CREATE FUNCTION send_sms(phone text) RETURNS void LANGUAGE sql AS '';
SELECT retries.annotate('send_sms(text)', '3 1s');
SET ROLE keys_alice;
CALL test.try($$SELECT retries.call('send_sms(text)', '["555"]', key => 'outcome:1')$$);
CALL test.try($$SELECT retries.call('send_sms(text)', '["555"]', key => 'outcome:1', debounce => '1 s')$$);
RESET ROLE;
-- once outside the window of the key's call, the key passes on
UPDATE retries.call_data SET created_at = created_at - interval '2 hours' WHERE key = 'outcome:1';
SET ROLE keys_alice;
SELECT retries.call('send_sms(text)', '["555"]', key => 'outcome:1', key_window => '1 hour',
					run_at => now() + interval '1 day') IS NOT NULL AS passed_on,
	   retries.call_outcome() AS outcome;
RESET ROLE;
DROP FUNCTION send_sms(text);

-- A function named without its argument types: PostgreSQL's own error,
-- with a hint of the right form
SELECT retries.call('send_mail', '["a"]');

DROP FUNCTION send_mail(text);
DROP OWNED BY keys_alice, keys_bob;
DROP ROLE keys_alice, keys_bob;
