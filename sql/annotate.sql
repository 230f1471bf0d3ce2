--
-- annotate: giving functions retry policies, and taking them away
--
CALL test.reset();
CREATE FUNCTION charge(order_id bigint, amount numeric) RETURNS void
	LANGUAGE sql AS '';
CREATE FUNCTION on_gave_up(call_id bigint) RETURNS void LANGUAGE sql AS '';
CREATE FUNCTION backoff(attempt int, sqlstate text, message text) RETURNS interval
	LANGUAGE sql AS $$ SELECT attempt * interval '1 second' $$;

-- every named argument at once
SELECT retries.annotate('charge(bigint,numeric)', '10 5s 10m',
						multiplier => 3,
						jitter => 'full',
						retry_on => '{40001, 40P01, 08, rt429}',
						timeout => '30 seconds',
						on_exhausted => 'on_gave_up(bigint)',
						delay_fn => 'backoff(int,text,text)');
SELECT * FROM retries.policies;

-- annotating again replaces the policy; the old version stays for the
-- calls scheduled under it
SELECT retries.annotate('charge(bigint,numeric)', '2 1s', jitter => 'equal');
SELECT fn, max_attempts, min_delay, max_delay, multiplier, jitter, retry_on, timeout,
	   on_exhausted, delay_fn, policy
  FROM retries.policies;
SELECT id, is_current, max_attempts FROM retries.policy_data ORDER BY id;

-- retry_on: the class RT is always there unless excluded with "-RT";
-- an exact SQLSTATE beats its class
SELECT retries.annotate('charge(bigint,numeric)', '5s', retry_on => '{}');
SELECT retry_on FROM retries.policies;
SELECT retries.annotate('charge(bigint,numeric)', '5s', retry_on => NULL);
SELECT retry_on FROM retries.policies;
SELECT retries.annotate('charge(bigint,numeric)', '5s', retry_on => '{40001,-RT}');
SELECT retry_on FROM retries.policies;
SELECT retries.annotate('charge(bigint,numeric)', '5s', retry_on => '{-RT500,rt,RT}');
SELECT retry_on FROM retries.policies;

-- bad arguments: each names what is wrong, and nothing is stored
SELECT * FROM test.stored();
CALL test.try($$SELECT retries.annotate(NULL)$$);
CALL test.try($$SELECT retries.annotate('no_such_function(int)')$$);
CALL test.try($$SELECT retries.annotate(4294967295::oid::regprocedure)$$);
CALL test.try($$SELECT retries.annotate('charge(bigint,numeric)', 'soon')$$);
CALL test.try($$SELECT retries.annotate('charge(bigint,numeric)', max_attempts => 0)$$);
CALL test.try($$SELECT retries.annotate('charge(bigint,numeric)', max_attempts => -3)$$);
CALL test.try($$SELECT retries.annotate('charge(bigint,numeric)', max_attempts => 2000000000)$$);
CALL test.try($$SELECT retries.annotate('charge(bigint,numeric)', min_delay => '-1 second')$$);
CALL test.try($$SELECT retries.annotate('charge(bigint,numeric)', min_delay => '0')$$);
CALL test.try($$SELECT retries.annotate('charge(bigint,numeric)', max_delay => '-1 day')$$);
CALL test.try($$SELECT retries.annotate('charge(bigint,numeric)', min_delay => '100 years')$$);
CALL test.try($$SELECT retries.annotate('charge(bigint,numeric)', '5s', max_delay => '1s')$$);
CALL test.try($$SELECT retries.annotate('charge(bigint,numeric)', multiplier => 0.5)$$);
CALL test.try($$SELECT retries.annotate('charge(bigint,numeric)', multiplier => -2)$$);
CALL test.try($$SELECT retries.annotate('charge(bigint,numeric)', multiplier => 'NaN')$$);
CALL test.try($$SELECT retries.annotate('charge(bigint,numeric)', multiplier => 'Infinity')$$);
CALL test.try($$SELECT retries.annotate('charge(bigint,numeric)', jitter => 'some')$$);
CALL test.try($$SELECT retries.annotate('charge(bigint,numeric)', jitter => 'FULL ')$$);
CALL test.try($$SELECT retries.annotate('charge(bigint,numeric)', retry_on => '{4000}')$$);
CALL test.try($$SELECT retries.annotate('charge(bigint,numeric)', retry_on => '{400011}')$$);
CALL test.try($$SELECT retries.annotate('charge(bigint,numeric)', retry_on => '{40-01}')$$);
CALL test.try($$SELECT retries.annotate('charge(bigint,numeric)', retry_on => '{40001,NULL}')$$);
CALL test.try($$SELECT retries.annotate('charge(bigint,numeric)', retry_on => '{00000}')$$);
CALL test.try($$SELECT retries.annotate('charge(bigint,numeric)', retry_on => '{01}')$$);
CALL test.try($$SELECT retries.annotate('charge(bigint,numeric)', retry_on => '{RT429,-RT429}')$$);
CALL test.try($$SELECT retries.annotate('charge(bigint,numeric)', retry_on => '{{40001},{08000}}')$$);
CALL test.try($$SELECT retries.annotate('charge(bigint,numeric)', retry_on => array_fill('40001'::text, ARRAY[1001]))$$);
CALL test.try($$SELECT retries.annotate('charge(bigint,numeric)', timeout => '0')$$);
CALL test.try($$SELECT retries.annotate('charge(bigint,numeric)', timeout => '-5 minutes')$$);
CALL test.try($$SELECT retries.annotate('charge(bigint,numeric)', timeout => '30 days')$$);
SELECT * FROM test.stored();

-- hooks must have the documented signatures
CREATE FUNCTION bad_hook(call_id int) RETURNS void LANGUAGE sql AS '';
CREATE FUNCTION bad_delay(attempt int, sqlstate text, message text) RETURNS int
	LANGUAGE sql AS 'SELECT 1';
CREATE FUNCTION set_hook(call_id bigint) RETURNS SETOF int LANGUAGE sql AS 'SELECT 1';
CALL test.try($$SELECT retries.annotate('charge(bigint,numeric)', on_exhausted => 'bad_hook(int)')$$);
CALL test.try($$SELECT retries.annotate('charge(bigint,numeric)', on_exhausted => 'set_hook(bigint)')$$);
CALL test.try($$SELECT retries.annotate('charge(bigint,numeric)', on_exhausted => 'no_hook(bigint)')$$);
CALL test.try($$SELECT retries.annotate('charge(bigint,numeric)', delay_fn => 'bad_delay(int,text,text)')$$);
CALL test.try($$SELECT retries.annotate('charge(bigint,numeric)', delay_fn => 'on_gave_up(bigint)')$$);
SELECT * FROM test.stored();

-- functions a worker cannot call are refused
CREATE AGGREGATE total(int) (sfunc = int4pl, stype = int);
CREATE FUNCTION ranked() RETURNS int LANGUAGE internal WINDOW AS 'window_rank';
CREATE PROCEDURE proc(INOUT n int) LANGUAGE sql AS 'SELECT 1';
CREATE FUNCTION many() RETURNS SETOF int LANGUAGE sql AS 'SELECT 1';
CREATE FUNCTION poly(anyelement) RETURNS void LANGUAGE sql AS '';
CREATE FUNCTION trig() RETURNS trigger LANGUAGE plpgsql AS 'BEGIN RETURN NULL; END';
CALL test.try($$SELECT retries.annotate('total(int)')$$);
CALL test.try($$SELECT retries.annotate('ranked()')$$);
CALL test.try($$SELECT retries.annotate('proc(int)')$$);
CALL test.try($$SELECT retries.annotate('many()')$$);
CALL test.try($$SELECT retries.annotate('poly(anyelement)')$$);
CALL test.try($$SELECT retries.annotate('trig()')$$);
SELECT * FROM test.stored();

-- functions with OUT parameters, variadic ones and ones returning records
-- are fine
CREATE FUNCTION with_out(a int, OUT b int, OUT c text) LANGUAGE sql AS 'SELECT a, ''x''';
CREATE FUNCTION with_variadic(VARIADIC ids int[]) RETURNS void LANGUAGE sql AS '';
SELECT retries.annotate('with_out(int)'), retries.annotate('with_variadic(int[])');

-- only the owner (or a superuser) may annotate or unannotate
CREATE ROLE annotate_owner;
CREATE ROLE annotate_other;
CREATE FUNCTION owned() RETURNS void LANGUAGE sql AS '';
ALTER FUNCTION owned() OWNER TO annotate_owner;
SET ROLE annotate_other;
CALL test.try($$SELECT retries.annotate('owned()')$$);
RESET ROLE;
SET ROLE annotate_owner;
SELECT retries.annotate('owned()', '3 1s');
-- a hook the annotating role may not execute is refused
RESET ROLE;
REVOKE EXECUTE ON FUNCTION on_gave_up(bigint) FROM PUBLIC;
SET ROLE annotate_owner;
CALL test.try($$SELECT retries.annotate('owned()', on_exhausted => 'on_gave_up(bigint)')$$);
RESET ROLE;
SET ROLE annotate_other;
CALL test.try($$SELECT retries.unannotate('owned()')$$);
RESET ROLE;
SELECT fn, owner, policy FROM retries.policies WHERE fn = 'owned()'::regprocedure;

-- ordinary roles cannot write (or read) the tables behind the views
SET ROLE annotate_owner;
CALL test.try($$INSERT INTO retries.policy_data (fn, fn_signature, min_delay, multiplier, jitter, retry_on, annotated_by) VALUES (1, 'x', '1s', 2, 'none', '{RT}', 'annotate_owner')$$);
CALL test.try($$UPDATE retries.policy_data SET max_attempts = 100$$);
CALL test.try($$DELETE FROM retries.call_data$$);
CALL test.try($$SELECT * FROM retries.call_data$$);
RESET ROLE;

-- unannotate: new calls can no longer be scheduled
SELECT retries.unannotate('charge(bigint,numeric)');
SELECT count(*) FROM retries.policies WHERE fn = 'charge(bigint,numeric)'::regprocedure;
CALL test.try($$SELECT retries.unannotate('charge(bigint,numeric)')$$);
CALL test.try($$SELECT retries.call('charge(bigint,numeric)', '[1, 9.99]')$$);
CALL test.try($$SELECT retries.unannotate(NULL)$$);

-- dropping a function clears its annotation
SELECT retries.annotate('charge(bigint,numeric)', '3 1s');
DROP FUNCTION charge(bigint, numeric);
SELECT count(*) AS current FROM retries.policy_data WHERE is_current AND fn_signature = 'public.charge(bigint,numeric)';

-- a temporary function, or one of a temporary type, is refused: it goes
-- with its session, and no drop trigger fires for it
CREATE FUNCTION pg_temp.temp_fn() RETURNS void LANGUAGE sql AS 'SELECT';
CALL test.try($$SELECT retries.annotate('pg_temp.temp_fn()', '3 1s')$$);
CREATE TEMP TABLE temp_row (a int);
CREATE FUNCTION temp_typed(x temp_row) RETURNS void LANGUAGE sql AS 'SELECT';
CALL test.try($$SELECT retries.annotate('temp_typed(temp_row)', '3 1s')$$);
DROP TABLE temp_row CASCADE;
DROP FUNCTION pg_temp.temp_fn();

DROP FUNCTION owned(), with_out(int), with_variadic(int[]), on_gave_up(bigint),
	backoff(int, text, text), bad_hook(int), bad_delay(int, text, text),
	set_hook(bigint), ranked(), many(), poly(anyelement), trig();
DROP AGGREGATE total(int);
DROP PROCEDURE proc(int);
DROP ROLE annotate_owner, annotate_other;
