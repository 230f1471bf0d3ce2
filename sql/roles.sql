--
-- roles: each role sees and manages only its own calls; retries_admin and
-- superusers see and manage all; a call needs what a direct call of its
-- function needs
--
CALL test.reset();
CREATE FUNCTION task(n int) RETURNS void LANGUAGE sql AS '';
SELECT retries.annotate('task(int)', '3 1s');
CREATE ROLE roles_alice;
CREATE ROLE roles_bob;
CREATE ROLE roles_admin IN ROLE retries_admin;
GRANT USAGE ON SCHEMA public TO roles_alice, roles_bob, roles_admin;

SET ROLE roles_alice;
SELECT retries.call('task(int)', '[1]') AS alice_1, retries.call('task(int)', '[2]') AS alice_2;
RESET ROLE;
SET ROLE roles_bob;
SELECT retries.call('task(int)', '[3]') AS bob_1;
RESET ROLE;
-- an attempt of each role's first call (as a worker would record it)
INSERT INTO retries.attempt_data (call_id, attempt, started_at, finished_at, outcome, sqlstate, message)
VALUES (1, 1, now(), now(), 'retry', 'RT000', 'alice''s secret'),
	   (3, 1, now(), now(), 'retry', 'RT000', 'bob''s secret');

-- each role sees its own calls, attempts and stats only
SET ROLE roles_alice;
SELECT id, scheduled_by FROM retries.calls ORDER BY id;
SELECT call_id, message FROM retries.attempts;
SELECT fn, scheduled FROM retries.stats;
RESET ROLE;
SET ROLE roles_bob;
SELECT id, scheduled_by FROM retries.calls ORDER BY id;
SELECT call_id, message FROM retries.attempts;
SELECT fn, scheduled FROM retries.stats;
-- the workers are listed, but their state, counts and busy time tell of
-- every role's calls: NULL for a role that does not see them all
SELECT count(*) > 0 AS workers, count(state) AS states, count(calls_run) AS counts,
	   count(errors) AS errors, count(busy_time) AS busy FROM retries.workers;

-- and cannot manage the other's: the error is the one for an id that does
-- not exist, so it reveals nothing
CALL test.try($$SELECT retries.cancel(1)$$);
CALL test.try($$SELECT retries.retry_now(1)$$);
CALL test.try($$SELECT retries.reschedule(1, now())$$);
CALL test.try($$SELECT retries.cancel(12345)$$);

-- a function of one's own in a WHERE clause cannot peek at hidden rows:
-- the views are security barriers
CREATE FUNCTION pg_temp.peek(m text) RETURNS boolean LANGUAGE plpgsql
	COST 0.0000001 AS $$ BEGIN RAISE NOTICE 'peeked at: %', m; RETURN true; END $$;
SELECT call_id FROM retries.attempts WHERE pg_temp.peek(message);
SELECT id FROM retries.calls WHERE pg_temp.peek(args::text);
DROP FUNCTION pg_temp.peek(text);

-- nor read or write the tables
CALL test.try($$SELECT * FROM retries.attempt_data$$);
CALL test.try($$UPDATE retries.call_data SET scheduled_by = 'roles_bob' WHERE id = 1$$);
RESET ROLE;

-- a member of retries_admin sees and manages every role's calls
SET ROLE roles_admin;
SELECT id, scheduled_by FROM retries.calls ORDER BY id;
SELECT call_id, message FROM retries.attempts ORDER BY call_id;
SELECT fn, scheduled FROM retries.stats;
SELECT retries.cancel(1), retries.cancel(3);
RESET ROLE;

-- and so does a superuser
SELECT id, scheduled_by, state FROM retries.calls ORDER BY id;

-- the role that scheduled a call is current_user, also inside a SECURITY
-- DEFINER function: the call will run as that function's owner
CREATE FUNCTION schedule_as_owner() RETURNS bigint LANGUAGE sql SECURITY DEFINER
	SET search_path = pg_catalog AS $$ SELECT retries.call('public.task(int)', '[9]') $$;
ALTER FUNCTION schedule_as_owner() OWNER TO roles_bob;
GRANT EXECUTE ON FUNCTION schedule_as_owner() TO roles_alice;
SET ROLE roles_alice;
SELECT schedule_as_owner() AS id \gset
SELECT count(*) AS alice_sees_it FROM retries.calls WHERE id = :id;
RESET ROLE;
SELECT scheduled_by FROM retries.calls WHERE id = :id;

-- objects named like the extension's in a schema earlier in the
-- search_path change nothing
CREATE SCHEMA evil;
CREATE TABLE evil.call_data (id bigint);
CREATE FUNCTION evil.md5(text) RETURNS text LANGUAGE sql AS $$ SELECT 'same' $$;
SET search_path = evil, public, pg_catalog;
SELECT retries.call('public.task(int)', '[10]', key => 'a') <>
	   retries.call('public.task(int)', '[11]', key => 'b') AS distinct_keys;
RESET search_path;
DROP SCHEMA evil CASCADE;

-- a call needs what a direct call needs: USAGE on the function's schema
-- too, also when the function is given by OID; and a role sees in
-- retries.policies only the functions it may call
CREATE SCHEMA roles_private;
CREATE FUNCTION roles_private.secret(dest text) RETURNS text LANGUAGE sql
	SECURITY DEFINER AS $$ SELECT 'secret for ' || dest $$;
SELECT retries.annotate('roles_private.secret(text)', '3 1s');
SELECT 'roles_private.secret(text)'::regprocedure::oid AS secret_oid \gset
SET ROLE roles_alice;
CALL test.try(format($$SELECT retries.call(%s, '["alice"]')$$, :secret_oid));
CALL test.try(format($$SELECT retries.schedule('steal', %s, '1h', '["alice"]')$$, :secret_oid));
SELECT fn FROM retries.policies ORDER BY fn::text;
RESET ROLE;
GRANT USAGE ON SCHEMA roles_private TO roles_alice;
SET ROLE roles_alice;
SELECT retries.call(:secret_oid, '["alice"]') > 0 AS scheduled;
SELECT fn FROM retries.policies ORDER BY fn::text;
RESET ROLE;
REVOKE EXECUTE ON FUNCTION roles_private.secret(text) FROM PUBLIC;
SET ROLE roles_alice;
CALL test.try(format($$SELECT retries.call(%s, '["alice"]')$$, :secret_oid));
SELECT fn FROM retries.policies ORDER BY fn::text;
RESET ROLE;
-- a member of retries_admin sees every policy
SET ROLE roles_admin;
SELECT fn FROM retries.policies ORDER BY fn::text;
RESET ROLE;
DROP SCHEMA roles_private CASCADE;

-- dropping a function names only one's own schedules: another role's is
-- counted, not named
CREATE ROLE roles_owner;
GRANT CREATE, USAGE ON SCHEMA public TO roles_owner;
SET ROLE roles_owner;
CREATE FUNCTION public.roles_tick() RETURNS void LANGUAGE sql AS '';
SELECT retries.annotate('public.roles_tick()', '3 1s');
SELECT retries.schedule('owners-own', 'public.roles_tick()', '1h') > 0 AS made;
RESET ROLE;
SET ROLE roles_bob;
SELECT retries.schedule('bobs-private-plan', 'public.roles_tick()', '1h') > 0 AS made;
RESET ROLE;
SET ROLE roles_owner;
DROP FUNCTION public.roles_tick();
RESET ROLE;
SELECT count(*) AS schedules_left FROM retries.schedule_data;

-- retries_admin sees them
SET ROLE roles_admin;
SELECT count(*) > 0 AS workers, count(state) = count(*) AS states,
	   count(calls_run) = count(*) AS counts, count(busy_time) = count(*) AS busy
  FROM retries.workers;
RESET ROLE;

DROP FUNCTION task(int), schedule_as_owner();
DROP OWNED BY roles_alice, roles_bob, roles_admin, roles_owner;
DROP ROLE roles_alice, roles_bob, roles_admin, roles_owner;
