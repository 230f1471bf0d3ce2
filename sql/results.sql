--
-- results: a call's return value kept as jsonb, retries.wait() and
-- retries.result(), calls that run after others, and keys that last
--
CALL test.reset();
ALTER SYSTEM SET retries.enabled = on;
SELECT pg_reload_conf();
CALL test.workers_see(true);

-- results convert as to_jsonb() would: scalars, composites, arrays, jsonb,
-- records with OUT parameters; void and NULL keep no result
CREATE TYPE res_point AS (x int, label text);
CREATE FUNCTION res_int(a int, b int) RETURNS int LANGUAGE sql AS 'SELECT a + b';
CREATE FUNCTION res_text(s text) RETURNS text LANGUAGE sql AS $$ SELECT 'hello ' || s $$;
CREATE FUNCTION res_point(x int) RETURNS res_point LANGUAGE sql AS $$ SELECT (x, 'p' || x)::res_point $$;
CREATE FUNCTION res_array(n int) RETURNS int[] LANGUAGE sql AS $$ SELECT array_agg(i) FROM generate_series(1, n) i $$;
CREATE FUNCTION res_jsonb() RETURNS jsonb LANGUAGE sql AS $$ SELECT '{"ok": true, "n": [1, 2]}'::jsonb $$;
CREATE FUNCTION res_out(x int, OUT doubled int, OUT squared int) LANGUAGE sql AS 'SELECT x * 2, x * x';
CREATE FUNCTION res_void() RETURNS void LANGUAGE sql AS '';
CREATE FUNCTION res_null() RETURNS int LANGUAGE sql AS 'SELECT NULL::int';
CREATE FUNCTION res_big(n int) RETURNS text LANGUAGE sql AS $$ SELECT repeat('x', n) $$;
SELECT retries.annotate(f, '3 10ms', retry_on => '{RT, 54}')
  FROM unnest(ARRAY['res_int(int,int)', 'res_text(text)', 'res_point(int)', 'res_array(int)',
					'res_jsonb()', 'res_out(int)', 'res_void()', 'res_null()',
					'res_big(int)']::regprocedure[]) f;

CREATE TABLE res_calls (name text, id bigint);
GRANT SELECT ON res_calls TO PUBLIC;
INSERT INTO res_calls VALUES
	('int', retries.call('res_int(int,int)', '[2, 3]')),
	('text', retries.call('res_text(text)', '["world"]')),
	('point', retries.call('res_point(int)', '[7]')),
	('array', retries.call('res_array(int)', '[3]')),
	('jsonb', retries.call('res_jsonb()')),
	('out', retries.call('res_out(int)', '[4]')),
	('void', retries.call('res_void()')),
	('null', retries.call('res_null()'));
-- wait() returns the call's row in retries.calls once it has finished
SELECT r.name, w.state, w.result, jsonb_typeof(w.result) AS type
  FROM res_calls r, LATERAL retries.wait(r.id, '180s') w ORDER BY r.id;
-- result() returns the result alone
SELECT name, retries.result(id) FROM res_calls ORDER BY id;
-- at once for a call that has finished
SELECT state, attempts FROM retries.wait((SELECT id FROM res_calls WHERE name = 'int'), '0');

-- result() of a call that has not succeeded says what it is instead
CREATE FUNCTION res_fail() RETURNS int LANGUAGE plpgsql AS $$
BEGIN
	RAISE EXCEPTION 'no result today' USING ERRCODE = '22012';
END
$$;
SELECT retries.annotate('res_fail()', '3 10ms');
SELECT retries.call('res_fail()') AS failing \gset
SELECT state, result FROM retries.wait(:failing, '180s');
CALL test.try($$SELECT retries.result($$ || :failing || $$)$$);
SELECT retries.call('res_int(int,int)', '[1, 1]', run_at => now() + interval '1 hour') AS later \gset
CALL test.try($$SELECT retries.result($$ || :later || $$)$$);
SELECT retries.cancel(:later);
CALL test.try($$SELECT retries.result($$ || :later || $$)$$);

-- wait() past its timeout raises 57014 and leaves the call as it is
SELECT retries.call('res_int(int,int)', '[1, 2]', run_at => now() + interval '1 hour') AS later \gset
SELECT retries.wait(:later, '50ms');
SELECT state FROM retries.calls WHERE id = :later;
-- a statement timeout ends it too
SET statement_timeout = '100ms';
SELECT retries.wait(:later);
RESET statement_timeout;
-- a call scheduled, re-armed or locked by the waiter's own transaction
-- cannot finish before the transaction ends: refused, not waited for
BEGIN;
SELECT retries.call('res_int(int,int)', '[3, 3]') AS mine \gset
CALL test.try($$SELECT retries.wait($$ || :mine || $$, '10s')$$);
ROLLBACK;
BEGIN;
SELECT retries.reschedule(:later, now());
CALL test.try($$SELECT retries.wait($$ || :later || $$, '10s')$$);
ROLLBACK;
BEGIN;
SELECT retries.call('res_int(int,int)', '[3, 4]', after => ARRAY[:later]::bigint[]) > 0 AS follower;
CALL test.try($$SELECT retries.wait($$ || :later || $$, '10s')$$);
ROLLBACK;
-- bad arguments
CALL test.try($$SELECT retries.wait(NULL)$$);
CALL test.try($$SELECT retries.wait($$ || :later || $$, '-1s')$$);
CALL test.try($$SELECT retries.wait(123456789)$$);
CALL test.try($$SELECT retries.result(123456789)$$);
CALL test.try($$SELECT retries.result(NULL)$$);
SELECT retries.cancel(:later);

-- another role sees neither the calls nor their results, and cannot wait
-- for them or run after them; the errors are those of a call that does
-- not exist
CREATE ROLE res_mallory;
GRANT USAGE ON SCHEMA public TO res_mallory;
GRANT EXECUTE ON FUNCTION res_int(int, int) TO res_mallory;
SELECT min(id) AS theirs FROM res_calls \gset
SET ROLE res_mallory;
SELECT count(*) AS seen FROM retries.calls;
CALL test.try($$SELECT retries.wait($$ || :theirs || $$, '1s')$$);
CALL test.try($$SELECT retries.result($$ || :theirs || $$)$$);
CALL test.try($$SELECT retries.call('res_int(int,int)', '[1, 1]', after => ARRAY[$$ || :theirs || $$]::bigint[])$$);
SELECT count(*) AS scheduled FROM retries.calls;
RESET ROLE;

--
-- calls that run after others
--
CREATE TABLE chain_log (step text, at timestamptz DEFAULT clock_timestamp());
CREATE FUNCTION chain_step(step text) RETURNS text LANGUAGE sql AS $$
	INSERT INTO chain_log (step) VALUES (step) RETURNING step
$$;
CREATE FUNCTION chain_fail(step text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO chain_log (step) VALUES (step);
	RAISE EXCEPTION 'step % failed', step USING ERRCODE = '22012';
END
$$;
SELECT retries.annotate('chain_step(text)', '3 10ms');
SELECT retries.annotate('chain_fail(text)', '3 10ms');

-- a chain: b after a, c after b; b and c wait, held, and show what for
-- (a is due in an hour, so that it is still scheduled when looked at, and
-- then made due)
SELECT retries.call('chain_step(text)', '["a"]', run_at => now() + interval '1 hour') AS a \gset
SELECT retries.call('chain_step(text)', '["b"]', after => ARRAY[:a]::bigint[]) AS b \gset
SELECT retries.call('chain_step(text)', '["c"]', after => ARRAY[:b]::bigint[]) AS c \gset
SELECT id = :a AS is_a, state, waiting_for = '{}' AS waits_for_none,
	   waiting_for = ARRAY[:a]::bigint[] AS waits_for_a,
	   waiting_for = ARRAY[:b]::bigint[] AS waits_for_b
  FROM retries.calls WHERE id IN (:a, :b, :c) ORDER BY id;
SELECT held FROM retries.stats WHERE fn = 'chain_step(text)'::regprocedure;
SELECT retries.reschedule(:a, now()) AS a_due;
SELECT state, result FROM retries.wait(:c, '180s');
SELECT string_agg(step, ' ' ORDER BY at) AS order_run FROM chain_log;
SELECT id, state, waiting_for FROM retries.calls WHERE id IN (:a, :b, :c) ORDER BY id;

-- fan-in: one call after several; fan-out: several after one
TRUNCATE chain_log;
SELECT array_agg(retries.call('chain_step(text)', format('["in%s"]', i)::jsonb,
						   run_at => now() + interval '200 ms')) AS parents
  FROM generate_series(1, 5) i \gset
SELECT retries.call('chain_step(text)', '["joined"]', after => :'parents') AS joined \gset
SELECT state FROM retries.wait(:joined, '180s');
SELECT count(*) AS steps_before_join FROM chain_log
 WHERE at < (SELECT at FROM chain_log WHERE step = 'joined');
SELECT retries.call('chain_step(text)', '["root"]', run_at => now() + interval '200 ms') AS root \gset
SELECT retries.call('chain_step(text)', format('["out%s"]', i)::jsonb, after => ARRAY[:root]::bigint[])
  FROM generate_series(1, 5) i;
SELECT count(*) FILTER (WHERE (retries.wait(id, '180s')).state = 'succeeded') AS out_succeeded
  FROM retries.calls WHERE args->>0 LIKE 'out%';
SELECT bool_and(at > (SELECT at FROM chain_log WHERE step = 'root')) AS all_after_root
  FROM chain_log WHERE step LIKE 'out%';

-- the same call listed twice waits once; calls already succeeded are not
-- waited for
SELECT retries.call('chain_step(text)', '["twice"]', after => ARRAY[:a, :a, :b]::bigint[]) AS twice \gset
SELECT state, waiting_for FROM retries.wait(:twice, '180s');

-- a failure cancels what runs after it, naming it, and what runs after
-- those in turn; a call scheduled after a failed call is cancelled at once
SELECT retries.call('chain_fail(text)', '["f"]', run_at => now() + interval '200 ms') AS f \gset
SELECT retries.call('chain_step(text)', '["after f"]', after => ARRAY[:f]::bigint[]) AS g \gset
SELECT retries.call('chain_step(text)', '["after g"]', after => ARRAY[:g, :a]::bigint[]) AS h \gset
SELECT state, last_message FROM retries.wait(:h, '180s');
SELECT id = :f AS is_f, state, last_message = format('call %s, which this call runs after, failed', :f) AS names_f,
	   last_message = format('call %s, which this call runs after, was cancelled', :g) AS names_g
  FROM retries.calls WHERE id IN (:f, :g, :h) ORDER BY id;
SELECT retries.call('chain_step(text)', '["after failed"]', after => ARRAY[:f]::bigint[]) AS k \gset
SELECT state, last_message = format('call %s, which this call runs after, failed', :f) AS names_f
  FROM retries.calls WHERE id = :k;
SELECT count(*) AS ran_after_failure FROM chain_log WHERE step LIKE 'after%';

-- cancelling a call cancels those that run after it
SELECT retries.call('chain_step(text)', '["never"]', run_at => now() + interval '1 hour') AS n \gset
SELECT retries.call('chain_step(text)', '["after never"]', after => ARRAY[:n]::bigint[]) AS m \gset
SELECT retries.cancel(:n);
SELECT state, last_message = format('call %s, which this call runs after, was cancelled', :n) AS names_n
  FROM retries.calls WHERE id = :m;
-- a call cancelled by hand while it waits waits no more; retried by hand,
-- it runs without waiting
SELECT retries.call('chain_step(text)', '["never 2"]', run_at => now() + interval '1 hour') AS n2 \gset
SELECT retries.call('chain_step(text)', '["by hand"]', after => ARRAY[:n2]::bigint[]) AS m2 \gset
SELECT retries.cancel(:m2);
SELECT retries.retry_now(:m2);
SELECT state, waiting_for FROM retries.wait(:m2, '180s');
SELECT count(*) FROM retries.call_after WHERE after_id = :n2;
SELECT retries.cancel(:n2);

-- a key that names an existing call returns it, and records nothing more
SELECT retries.call('chain_step(text)', '["keyed"]', key => 'chain-key') AS keyed \gset
SELECT retries.call('chain_step(text)', '["keyed"]', key => 'chain-key',
					after => ARRAY[:n2]::bigint[]) = :keyed AS same_call;
SELECT count(*) AS recorded FROM retries.call_after WHERE call_id = :keyed;

-- bad lists
SELECT count(*) AS calls_before FROM retries.call_data \gset
CALL test.try($$SELECT retries.call('chain_step(text)', '["x"]', after => ARRAY[1, NULL]::bigint[])$$);
CALL test.try($$SELECT retries.call('chain_step(text)', '["x"]', after => ARRAY[[1], [2]]::bigint[])$$);
CALL test.try($$SELECT retries.call('chain_step(text)', '["x"]', after => ARRAY[987654321]::bigint[])$$);
SELECT count(*) = :calls_before AS nothing_stored FROM retries.call_data;
-- an empty list waits for nothing
SELECT retries.call('chain_step(text)', '["empty"]', after => '{}') AS empty \gset
SELECT state FROM retries.wait(:empty, '180s');

-- a result larger than retries.max_result_size fails the attempt, and is
-- not retried even when retry_on lists its SQLSTATE; the function's
-- effects are rolled back.  Every worker must have read the new limit:
-- it comes in the same reload as a pause, and a worker shows paused only
-- once it has read them both (a loop that waited for one failed call saw
-- one worker only: the other ran the next call with the old limit)
ALTER SYSTEM SET retries.max_result_size = '1kB';
ALTER SYSTEM SET retries.enabled = off;
SELECT pg_reload_conf();
CALL test.workers_see(false);
ALTER SYSTEM SET retries.enabled = on;
SELECT pg_reload_conf();
CALL test.workers_see(true);
CREATE TABLE res_effects (n int);
CREATE FUNCTION res_big_effect(n int) RETURNS text LANGUAGE sql AS $$
	INSERT INTO res_effects VALUES (n);
	SELECT repeat('y', n)
$$;
SELECT retries.annotate('res_big_effect(int)', '3 10ms', retry_on => '{RT, 54}');
SELECT retries.call('res_big_effect(int)', '[2000]') AS big \gset
SELECT state, attempts, last_sqlstate, last_message FROM retries.wait(:big, '180s');
SELECT outcome, sqlstate, message, detail, hint FROM retries.attempts WHERE call_id = :big;
SELECT count(*) AS effects_kept FROM res_effects;
-- a result just under the limit is kept
SELECT retries.call('res_big_effect(int)', '[900]') AS small \gset
SELECT state, length(result #>> '{}') FROM retries.wait(:small, '180s');
ALTER SYSTEM RESET retries.max_result_size;
SELECT pg_reload_conf();

DROP OWNED BY res_mallory;
DROP ROLE res_mallory;
