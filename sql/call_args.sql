--
-- call_args: retries.call() and its jsonb arguments, converted to the
-- parameter types when the call is scheduled
--
CALL test.reset();
SET TimeZone = 'UTC';
CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy');
CREATE DOMAIN positive AS int CHECK (VALUE > 0);
CREATE TYPE pair AS (a int, b text);

-- one parameter of each family users pass; all have defaults
CREATE FUNCTION typed(i2 smallint DEFAULT NULL, i4 int DEFAULT NULL,
					  i8 bigint DEFAULT NULL, num numeric DEFAULT NULL,
					  f8 float8 DEFAULT NULL, t text DEFAULT NULL,
					  b boolean DEFAULT NULL, ts timestamptz DEFAULT NULL,
					  u uuid DEFAULT NULL, j json DEFAULT NULL,
					  jb jsonb DEFAULT NULL, ia int[] DEFAULT NULL,
					  ta text[] DEFAULT NULL, m mood DEFAULT NULL,
					  p positive DEFAULT NULL, pr pair DEFAULT NULL,
					  iv interval DEFAULT NULL)
RETURNS void LANGUAGE sql AS '';
SELECT retries.annotate('typed'::regproc::oid);

-- positional: JSON numbers, strings and booleans reach the input functions
-- as text; json and jsonb parameters get the JSON value itself
SELECT retries.call('typed'::regproc::oid,
	'[1, 2, 3, 4.50, 1.5e3, "hello", true, "2026-01-02 03:04:05+02",
	  "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", {"k": [1, 2]}, {"k": null},
	  [1, 2, 3], ["a", "b\"c", null], "happy", 7, "(1,x)", "1 day 2 hours"]');
SELECT args FROM retries.calls WHERE id = 1;

-- named: any subset, in any order; the others take their defaults when the
-- call runs
SELECT retries.call('typed'::regproc::oid, '{"t": "by name", "i4": 42}');
SELECT args FROM retries.calls WHERE id = 2;
SELECT retries.call('typed'::regproc::oid);
SELECT retries.call('typed'::regproc::oid, '{}');
SELECT id, args FROM retries.calls WHERE id IN (3, 4) ORDER BY id;

-- JSON null is SQL NULL; arrays may come as JSON arrays (nested ones are
-- more dimensions) or as array literals; numbers may come as strings
SELECT retries.call('typed'::regproc::oid,
	'{"ia": [[1, 2], [3, 4]], "ta": "{x,y}", "i8": "9007199254740993",
	  "num": 0.1000000000000000000001, "jb": "a JSON string", "i2": null}');
SELECT args FROM retries.calls WHERE id = 5;

-- values are stored in a form that does not depend on the session's
-- DateStyle, IntervalStyle or extra_float_digits
SET DateStyle = 'SQL, DMY';
SET IntervalStyle = 'sql_standard';
SET extra_float_digits = -3;
SELECT retries.call('typed'::regproc::oid,
	'{"ts": "02/01/2026 10:00", "iv": "1 day 2 hours", "f8": 0.1}');
RESET DateStyle;
RESET IntervalStyle;
RESET extra_float_digits;
SELECT args FROM retries.calls WHERE id = 6;

-- bad arguments: each error names the argument, the function and the type,
-- keeps the type's own SQLSTATE, and stores nothing
SELECT * FROM test.stored();
CALL test.try($$SELECT retries.call('typed'::regproc::oid, '{"i2": 70000}')$$);
CALL test.try($$SELECT retries.call('typed'::regproc::oid, '{"i4": "forty"}')$$);
CALL test.try($$SELECT retries.call('typed'::regproc::oid, '{"i4": 1.5}')$$);
CALL test.try($$SELECT retries.call('typed'::regproc::oid, '{"i8": 1e30}')$$);
CALL test.try($$SELECT retries.call('typed'::regproc::oid, '{"num": "ten"}')$$);
CALL test.try($$SELECT retries.call('typed'::regproc::oid, '{"b": "perhaps"}')$$);
CALL test.try($$SELECT retries.call('typed'::regproc::oid, '{"ts": "yesterday-ish"}')$$);
CALL test.try($$SELECT retries.call('typed'::regproc::oid, '{"u": "not-a-uuid"}')$$);
CALL test.try($$SELECT retries.call('typed'::regproc::oid, '{"m": "angry"}')$$);
CALL test.try($$SELECT retries.call('typed'::regproc::oid, '{"p": 0}')$$);
CALL test.try($$SELECT retries.call('typed'::regproc::oid, '{"p": -5}')$$);
CALL test.try($$SELECT retries.call('typed'::regproc::oid, '{"ia": [[1, 2], [3]]}')$$);
CALL test.try($$SELECT retries.call('typed'::regproc::oid, '{"ia": [1, "two"]}')$$);
CALL test.try($$SELECT retries.call('typed'::regproc::oid, '{"ia": [{"a": 1}]}')$$);
CALL test.try($$SELECT retries.call('typed'::regproc::oid, '{"i4": [1]}')$$);
CALL test.try($$SELECT retries.call('typed'::regproc::oid, '{"t": {"a": 1}}')$$);
CALL test.try($$SELECT retries.call('typed'::regproc::oid, '{"pr": {"a": 1, "b": "x"}}')$$);
CALL test.try($$SELECT retries.call('typed'::regproc::oid, '{"pr": "(1,x,extra)"}')$$);
CALL test.try($$SELECT retries.call('typed'::regproc::oid, '{"iv": "forever"}')$$);
SELECT * FROM test.stored();

-- the shape of args: too many, unknown names, scalars, NULL
CREATE FUNCTION two(a int, b text DEFAULT 'x') RETURNS void LANGUAGE sql AS '';
CREATE FUNCTION unnamed(int, text) RETURNS void LANGUAGE sql AS '';
SELECT retries.annotate('two(int,text)'), retries.annotate('unnamed(int,text)');
SELECT retries.call('two(int,text)', '[1]');
SELECT retries.call('unnamed(int,text)', '[1, "a"]');
CALL test.try($$SELECT retries.call('two(int,text)', '[1, "a", 3]')$$);
CALL test.try($$SELECT retries.call('two(int,text)', '[]')$$);
CALL test.try($$SELECT retries.call('two(int,text)', '{"b": "only b"}')$$);
CALL test.try($$SELECT retries.call('two(int,text)', '{"a": 1, "c": 3}')$$);
CALL test.try($$SELECT retries.call('two(int,text)', '{"A": 1}')$$);
CALL test.try($$SELECT retries.call('unnamed(int,text)', '{"a": 1}')$$);
CALL test.try($$SELECT retries.call('two(int,text)', '5')$$);
CALL test.try($$SELECT retries.call('two(int,text)', '"[1]"')$$);
CALL test.try($$SELECT retries.call('two(int,text)', 'null')$$);
CALL test.try($$SELECT retries.call('two(int,text)', NULL)$$);
CALL test.try($$SELECT retries.call(NULL, '[1]')$$);
CALL test.try($$SELECT retries.call('two(int,text)', '[1]', run_at => NULL)$$);
CALL test.try($$SELECT retries.call('no_such(int)', '[1]')$$);
CALL test.try($$SELECT retries.call(4294967295::oid, '[1]')$$);

-- variadic parameters take an array
CREATE FUNCTION var(VARIADIC ids int[]) RETURNS void LANGUAGE sql AS '';
SELECT retries.annotate('var(int[])');
SELECT retries.call('var(int[])', '[[1, 2, 3]]');

-- only annotated functions can be scheduled
CREATE FUNCTION plain(a int) RETURNS void LANGUAGE sql AS '';
CALL test.try($$SELECT retries.call('plain(int)', '[1]')$$);

-- the scheduling role needs EXECUTE on the function
CREATE ROLE call_args_user;
GRANT USAGE ON SCHEMA public TO call_args_user;
REVOKE EXECUTE ON FUNCTION two(int, text) FROM PUBLIC;
SET ROLE call_args_user;
CALL test.try($$SELECT retries.call('two(int,text)', '[1]')$$);
RESET ROLE;
GRANT EXECUTE ON FUNCTION two(int, text) TO call_args_user;
SET ROLE call_args_user;
SELECT retries.call('two(int,text)', '[2]') IS NOT NULL AS scheduled;
RESET ROLE;
SELECT scheduled_by, args FROM retries.calls ORDER BY id DESC LIMIT 1;

-- run_at sets the first attempt's time
SELECT retries.call('two(int,text)', '[3]', run_at => '2030-01-01 00:00+00') AS id \gset
SELECT next_attempt, state, attempts FROM retries.calls WHERE id = :id;
-- but no earlier than now: a call due in the past would go ahead of every
-- call that fell due before it was scheduled
BEGIN;
SELECT retries.call('two(int,text)', '[3]', run_at => '-infinity') AS id \gset
SELECT retries.call('two(int,text)', '[3]', run_at => now() - interval '1 day') AS id2 \gset
SELECT next_attempt = now() AS due_now FROM retries.calls WHERE id IN (:id, :id2);
SELECT retries.reschedule(:id, '2000-01-01') AS rescheduled;
SELECT next_attempt = now() AS still_now FROM retries.calls WHERE id = :id;
ROLLBACK;

-- 'infinity' is refused: a call due then is one a runner runs
CALL test.try($$SELECT retries.call('two(int,text)', '[3]', run_at => 'infinity')$$);

-- scheduling is transactional: a rolled-back call never existed
SELECT count(*) AS before FROM retries.calls \gset
BEGIN;
SELECT retries.call('two(int,text)', '[4]') IS NOT NULL AS scheduled;
ROLLBACK;
SELECT count(*) - :before AS added FROM retries.calls;

-- a call is there for the next statement of its transaction, with the
-- columns' defaults filled in (created_at: the statement that made it, after
-- the transaction's start); a policy changed in between applies to the
-- calls scheduled after it
BEGIN;
SELECT retries.call('two(int,text)', '[5]') AS a \gset
SELECT state, attempts,
       created_at > now() AND created_at < statement_timestamp() AS created_now,
       updated_at = created_at AS updated_now, next_attempt = now() AS due_now,
       max_attempts, key IS NULL AS no_key
  FROM retries.calls WHERE id = :a;
SELECT retries.annotate('two(int,text)', '2 1s');
SELECT retries.call('two(int,text)', '[6]') AS b \gset
SELECT id = :b AS second, max_attempts FROM retries.calls WHERE id IN (:a, :b) ORDER BY id;
ROLLBACK;

-- nothing is scheduled in a read-only transaction
BEGIN READ ONLY;
CALL test.try($$SELECT retries.call('two(int,text)', '[7]')$$);
ROLLBACK;

-- bulk scheduling in one statement
SELECT count(retries.call('two(int,text)', jsonb_build_array(i)))
  FROM generate_series(1, 1000) i;
SELECT count(*) - :before AS added FROM retries.calls;

-- values that name objects are read with the caller's search_path and
-- stored schema-qualified, so that they name the same object when the call
-- runs, whatever search_path anyone has then (pg_catalog's objects keep
-- their bare names); arrays, domains and composites of them too
CREATE SCHEMA ledgers;
CREATE TABLE ledgers.ledger (x int);
CREATE TYPE ledgers.entry AS (tbl regclass, note text);
CREATE DOMAIN ledgers.table_name AS regclass;
CREATE FUNCTION names(t regclass, ty regtype, f regprocedure, ts regclass[],
                      d ledgers.table_name, e ledgers.entry, r regrole)
RETURNS void LANGUAGE sql AS 'SELECT';
SELECT retries.annotate('names(regclass,regtype,regprocedure,regclass[],ledgers.table_name,ledgers.entry,regrole)');
SET search_path = ledgers, public;
SELECT retries.call('names'::regproc::oid, '["ledger", "entry", "upper(text)", ["ledger", "pg_class"],
                               "ledger", "(ledger,hi)", "call_args_user"]') AS named \gset
RESET search_path;
SELECT args FROM retries.calls WHERE id = :named;
-- whose path decides is the caller's, when it schedules: here "ledger" is public.ledger
CREATE TABLE public.ledger (x int);
SET search_path = public, ledgers;
SELECT retries.call('names'::regproc::oid, '["ledgers.ledger", "int4", "upper(text)", [], "ledger", "(ledger,hi)", "call_args_user"]') AS qualified \gset
RESET search_path;
SELECT args FROM retries.calls WHERE id = :qualified;
DROP TABLE public.ledger;

DROP FUNCTION typed, two(int, text), unnamed(int, text), var(int[]), plain(int), names;
DROP SCHEMA ledgers CASCADE;
DROP TYPE mood, pair;
DROP DOMAIN positive;
DROP OWNED BY call_args_user;
DROP ROLE call_args_user;
RESET TimeZone;
