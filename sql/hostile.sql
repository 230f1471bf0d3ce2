--
-- hostile: what an unprivileged role can try against the SQL surface.
--
--   1. search_path hijacking: operators and functions planted in public (as
--      in a database from before PostgreSQL 15, where anyone may create
--      there) and put before pg_catalog, while the role uses every function
--      and view, and while the workers run calls of every outcome; the
--      planted objects record in hijacked whenever they run, and it must
--      stay empty
--   2. a schema named retries created by someone else before CREATE
--      EXTENSION, also once given to a superuser (as a restore does), and
--      one open to others' objects
--   3. scheduling a function the role cannot execute, directly, through a
--      view and through a SECURITY DEFINER wrapper
--   4. forging another role's calls through the views and functions
--   5. oversized and odd input: 1 MB arguments, 10,000-element arrays,
--      10 kB keys, keys over 16 kB, hostile text in every string argument
--   6. code that runs as a call's result is kept: a cast to json of the
--      role's own type, which to_jsonb() calls, runs as the role, in the
--      call's sandbox, whatever it tries; and code that a function's owner
--      chose (that cast, the delay_fn and on_exhausted hooks) runs as the
--      owner when another role calls it, a superuser too
--
CALL test.reset();
\set regression_db :DBNAME
-- paused until the workers' part, so that calls stay as scheduled
ALTER SYSTEM SET retries.enabled = off;
SELECT pg_reload_conf();
CALL test.workers_see(false);
CREATE ROLE hostile_mallory LOGIN;
CREATE ROLE hostile_victim LOGIN;
GRANT CREATE, USAGE ON SCHEMA public TO hostile_mallory, hostile_victim;
CREATE TABLE public.hijacked (who name, what text, backend text, query text);
GRANT INSERT, SELECT ON public.hijacked TO PUBLIC;

-- 1. the planted objects: each records who ran it, then behaves like the
-- real one so that nothing else breaks
SET ROLE hostile_mallory;
CREATE FUNCTION public.planted(what text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO public.hijacked
	SELECT current_user, what, backend_type, query
	  FROM pg_catalog.pg_stat_activity WHERE pid OPERATOR(pg_catalog.=) pg_catalog.pg_backend_pid();
END
$$;
CREATE FUNCTION public.state_eq(retries.call_state, retries.call_state) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
	PERFORM public.planted('call_state = call_state');
	RETURN $1::text OPERATOR(pg_catalog.=) $2::text;
END
$$;
CREATE OPERATOR public.= (FUNCTION = public.state_eq,
						  LEFTARG = retries.call_state, RIGHTARG = retries.call_state);
CREATE FUNCTION public.outcome_eq(retries.attempt_outcome, retries.attempt_outcome)
RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
	PERFORM public.planted('attempt_outcome = attempt_outcome');
	RETURN $1::text OPERATOR(pg_catalog.=) $2::text;
END
$$;
CREATE OPERATOR public.= (FUNCTION = public.outcome_eq,
						  LEFTARG = retries.attempt_outcome, RIGHTARG = retries.attempt_outcome);
CREATE FUNCTION public.int8_eq(bigint, bigint) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
	PERFORM public.planted('bigint = bigint');
	RETURN $1 OPERATOR(pg_catalog.=) $2;
END
$$;
CREATE OPERATOR public.= (FUNCTION = public.int8_eq, LEFTARG = bigint, RIGHTARG = bigint);
CREATE FUNCTION public.oid_eq(oid, oid) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
	PERFORM public.planted('oid = oid');
	RETURN $1 OPERATOR(pg_catalog.=) $2;
END
$$;
CREATE OPERATOR public.= (FUNCTION = public.oid_eq, LEFTARG = oid, RIGHTARG = oid);
CREATE FUNCTION public.text_eq(text, text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
	PERFORM public.planted('text = text');
	RETURN $1 OPERATOR(pg_catalog.=) $2;
END
$$;
CREATE OPERATOR public.= (FUNCTION = public.text_eq, LEFTARG = text, RIGHTARG = text);
CREATE FUNCTION public.ts_le(timestamptz, timestamptz) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
	PERFORM public.planted('timestamptz <= timestamptz');
	RETURN $1 OPERATOR(pg_catalog.<=) $2;
END
$$;
CREATE OPERATOR public.<= (FUNCTION = public.ts_le, LEFTARG = timestamptz, RIGHTARG = timestamptz);
CREATE FUNCTION public.ts_lt(timestamptz, timestamptz) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
	PERFORM public.planted('timestamptz < timestamptz');
	RETURN $1 OPERATOR(pg_catalog.<) $2;
END
$$;
CREATE OPERATOR public.< (FUNCTION = public.ts_lt, LEFTARG = timestamptz, RIGHTARG = timestamptz);
CREATE FUNCTION public.ts_gt(timestamptz, timestamptz) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
	PERFORM public.planted('timestamptz > timestamptz');
	RETURN $1 OPERATOR(pg_catalog.>) $2;
END
$$;
CREATE OPERATOR public.> (FUNCTION = public.ts_gt, LEFTARG = timestamptz, RIGHTARG = timestamptz);
CREATE FUNCTION public.md5(text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	PERFORM public.planted('md5(text)');
	RETURN pg_catalog.md5($1);
END
$$;
CREATE FUNCTION public.now() RETURNS timestamptz LANGUAGE plpgsql AS $$
BEGIN
	PERFORM public.planted('now()');
	RETURN pg_catalog.now();
END
$$;
CREATE FUNCTION public.unnest(anyarray) RETURNS SETOF anyelement LANGUAGE plpgsql AS $$
BEGIN
	PERFORM public.planted('unnest(anyarray)');
	RETURN QUERY SELECT pg_catalog.unnest($1);
END
$$;
-- mallory's own function, whose body is safe from the planted objects
CREATE FUNCTION public.mallory_task(n int) RETURNS void
LANGUAGE sql SET search_path = pg_catalog AS 'SELECT';
CREATE FUNCTION public.mallory_busy(n int) RETURNS void
LANGUAGE sql SET search_path = pg_catalog AS $$ SELECT retries.retry('busy', '1 ms') $$;
CREATE FUNCTION public.mallory_exhausted(id bigint) RETURNS void
LANGUAGE sql SET search_path = pg_catalog AS 'SELECT';
CREATE FUNCTION public.mallory_delay(n int, s text, m text) RETURNS interval
LANGUAGE sql SET search_path = pg_catalog AS $$ SELECT interval '1 ms' $$;

-- with the planted objects first, every function and view of the extension
SET search_path = public, pg_catalog;
SELECT retries.annotate('mallory_task(int)', '2 1ms');
SELECT retries.annotate('mallory_busy(int)', '1 1ms', on_exhausted => 'mallory_exhausted(bigint)',
						delay_fn => 'mallory_delay(int,text,text)');
SELECT retries.call('mallory_task(int)', '[1]', run_at => pg_catalog.now() + interval '1 hour') AS later \gset
SELECT retries.call('mallory_task(int)', '[2]', key => 'k') AS keyed \gset
SELECT retries.call('mallory_task(int)', '[3]', key => 'k') = :keyed AS same_key_same_call;
SELECT retries.reschedule(:later, pg_catalog.now() + interval '2 hours');
SELECT retries.retry_now(:later);
SELECT retries.cancel(:later);
SELECT retries.retry_now(:later);
SELECT retries.cancel(:later);
SELECT retries.current_call(), retries.current_attempt(), retries.running_calls() IS NOT NULL;
SELECT retries.format_policy(3, '1s', '1m');
SELECT count(*) >= 0 FROM retries.worker_status();
SELECT count(*) > 0 FROM retries.calls;
SELECT count(*) >= 0 FROM retries.attempts;
SELECT count(*) > 0 FROM retries.policies;
SELECT count(*) > 0 FROM retries.stats;
SELECT count(*) > 0 FROM retries.workers;
DO $$
BEGIN
	PERFORM retries.retry('not inside a call');
EXCEPTION WHEN OTHERS THEN
	RAISE NOTICE '%: %', SQLSTATE, SQLERRM;
END
$$;
SELECT retries.unannotate('mallory_task(int)');
SELECT retries.annotate('mallory_task(int)', '3 1ms');
RESET search_path;
RESET ROLE;

-- (this session's own queries below compare states as text: an operator
-- on retries.call_state planted in public beats PostgreSQL's polymorphic
-- one for enums even when pg_catalog comes first, which is why the
-- extension's queries name pg_catalog's operators explicitly)

-- the workers, with the planted objects first in their search_path too (a
-- careless database default), run calls of every outcome: a success, a
-- retry then on_exhausted and delay_fn, and a pruned finished call
ALTER SYSTEM RESET retries.enabled;
SELECT pg_reload_conf();
CALL test.workers_see(true);
ALTER DATABASE :"DBNAME" SET search_path = public, pg_catalog;
CREATE TEMP TABLE old_workers AS
	SELECT pid FROM retries.workers WHERE database = current_database();
SELECT count(pg_terminate_backend(pid)) AS terminated FROM old_workers;
CALL test.wait_for($$(SELECT count(*) FROM retries.workers
					   WHERE database = current_database()
						 AND pid NOT IN (SELECT pid FROM old_workers)) = 2$$);
SET ROLE hostile_mallory;
SELECT retries.call('public.mallory_task(int)', '[4]') AS ok_call,
	   retries.call('public.mallory_busy(int)', '[5]') AS busy_call \gset
RESET ROLE;
CALL test.wait_for(format($$(SELECT count(*) = 3 FROM retries.call_data
							  WHERE id IN (%s, %s, %s) AND state::text IN ('succeeded', 'failed'))$$,
						  :ok_call, :busy_call, :keyed));
SELECT id = :busy_call AS busy, state, attempts FROM retries.calls
 WHERE id IN (:ok_call, :busy_call) ORDER BY id;
ALTER SYSTEM SET retries.retention = '0';
SELECT pg_reload_conf();
CALL test.wait_for(format($$(SELECT count(*) = 0 FROM retries.call_data WHERE id IN (%s, %s))$$,
						  :ok_call, :busy_call));
ALTER SYSTEM RESET retries.retention;
SELECT pg_reload_conf();
ALTER DATABASE :"DBNAME" RESET search_path;

-- none of the planted objects ever ran
SELECT who, what, backend, query FROM public.hijacked;

-- 2. a schema named retries that someone else made first is refused: its
-- owner could otherwise drop or replace the extension's objects
CREATE DATABASE hostile_squatted;
GRANT CREATE ON DATABASE hostile_squatted TO hostile_mallory;
\c hostile_squatted
SET ROLE hostile_mallory;
CREATE SCHEMA retries;
RESET ROLE;
DO $$
BEGIN
	CREATE EXTENSION retries;
EXCEPTION WHEN OTHERS THEN
	RAISE NOTICE '%: %', SQLSTATE, SQLERRM;
END
$$;
SELECT count(*) AS extensions FROM pg_extension WHERE extname = 'retries';
-- the same schema given to a superuser (as a restore's ALTER SCHEMA ...
-- OWNER TO does for every schema it dumped) still holds what its maker
-- put there: refused
SET ROLE hostile_mallory;
CREATE FUNCTION retries.planted() RETURNS void LANGUAGE sql AS 'SELECT';
RESET ROLE;
ALTER SCHEMA retries OWNER TO CURRENT_USER;
DO $$
BEGIN
	CREATE EXTENSION retries;
EXCEPTION WHEN OTHERS THEN
	RAISE NOTICE '%: %', SQLSTATE, SQLERRM;
END
$$;
-- empty, a superuser's, but open to others' objects: refused
DROP FUNCTION retries.planted();
GRANT CREATE ON SCHEMA retries TO PUBLIC;
DO $$
BEGIN
	CREATE EXTENSION retries;
EXCEPTION WHEN OTHERS THEN
	RAISE NOTICE '%: %', SQLSTATE, SQLERRM;
END
$$;
-- empty, and a superuser's alone: the extension goes there
REVOKE CREATE ON SCHEMA retries FROM PUBLIC;
CREATE EXTENSION retries;
SELECT count(*) AS extensions FROM pg_extension WHERE extname = 'retries';
\c :regression_db
DROP DATABASE hostile_squatted;

-- 3. a function the role may not execute cannot be scheduled by it, not
-- directly, not through another role's view, not through its own SECURITY
-- DEFINER wrapper; the victim's own wrapper schedules it as the victim
SET ROLE hostile_victim;
CREATE FUNCTION public.victim_secret() RETURNS void LANGUAGE sql AS 'SELECT';
REVOKE EXECUTE ON FUNCTION public.victim_secret() FROM PUBLIC;
SELECT retries.annotate('public.victim_secret()', '1 1s');
CREATE VIEW public.victim_view AS
	SELECT retries.call('public.victim_secret()', run_at => now() + interval '100 years') AS id;
GRANT SELECT ON public.victim_view TO hostile_mallory;
CREATE FUNCTION public.victim_wrapper() RETURNS bigint LANGUAGE sql SECURITY DEFINER
	SET search_path = pg_catalog
	AS $$ SELECT retries.call('public.victim_secret()', run_at => now() + interval '100 years') $$;
GRANT EXECUTE ON FUNCTION public.victim_wrapper() TO hostile_mallory;
RESET ROLE;
SET ROLE hostile_mallory;
CALL test.try($$SELECT retries.call('public.victim_secret()')$$);
CALL test.try($$SELECT * FROM public.victim_view$$);
CREATE FUNCTION public.mallory_wrapper() RETURNS bigint LANGUAGE sql SECURITY DEFINER
	SET search_path = pg_catalog AS $$ SELECT retries.call('public.victim_secret()') $$;
CALL test.try($$SELECT public.mallory_wrapper()$$);
SELECT public.victim_wrapper() AS victim_call \gset
SELECT count(*) AS mallory_sees_victim_call FROM retries.calls WHERE id = :victim_call;
RESET ROLE;
SELECT scheduled_by FROM retries.calls WHERE id = :victim_call;

-- 4. forging: the views take no writes, the tables no reads or writes, and
-- the management functions do not touch the victim's call
SET ROLE hostile_mallory;
CALL test.try($$INSERT INTO retries.calls (id) VALUES (1)$$);
CALL test.try(format($$UPDATE retries.calls SET scheduled_by = 'hostile_mallory' WHERE id = %s$$, :victim_call));
CALL test.try($$DELETE FROM retries.attempts$$);
CALL test.try($$UPDATE retries.policies SET max_attempts = 1$$);
CALL test.try($$DELETE FROM retries.stats$$);
CALL test.try($$DELETE FROM retries.workers$$);
CALL test.try($$INSERT INTO retries.call_data (policy_id, args, scheduled_by) VALUES (1, '[]', 'hostile_victim')$$);
CALL test.try($$UPDATE retries.policy_data SET max_attempts = 1$$);
CALL test.try($$SELECT * FROM retries.policy_data$$);
CALL test.try(format('SELECT retries.cancel(%s)', :victim_call));
CALL test.try(format('SELECT retries.retry_now(%s)', :victim_call));
CALL test.try(format($$SELECT retries.reschedule(%s, now())$$, :victim_call));
CALL test.try($$SELECT retries.annotate('public.victim_secret()', '9 1s')$$);
CALL test.try($$SELECT retries.unannotate('public.victim_secret()')$$);
CALL test.try($$SELECT retries.start_workers()$$);
RESET ROLE;
SELECT state, next_attempt > now() + interval '99 years' AS untouched FROM retries.calls WHERE id = :victim_call;
-- a running call of the victim's: mallory sees neither its id in
-- running_calls() nor its worker's current call; the victim sees both
SELECT pg_advisory_lock(4242);
SET ROLE hostile_victim;
CREATE FUNCTION public.victim_slow() RETURNS void LANGUAGE sql
	SET search_path = pg_catalog AS 'SELECT pg_advisory_lock_shared(4242)';
SELECT retries.annotate('public.victim_slow()', '1 1s');
SELECT retries.call('public.victim_slow()') AS slow_call \gset
RESET ROLE;
CALL test.wait_for(format('%s = ANY (retries.running_calls())', :slow_call));
SET ROLE hostile_mallory;
SELECT retries.running_calls() AS mallory_running,
	   count(*) FILTER (WHERE current_call IS NOT NULL) AS mallory_current
  FROM retries.workers;
RESET ROLE;
SET ROLE hostile_victim;
SELECT retries.running_calls() = ARRAY[:slow_call]::bigint[] AS victim_running,
	   count(*) FILTER (WHERE current_call = :slow_call) AS victim_current
  FROM retries.workers;
SELECT state FROM retries.calls WHERE id = :slow_call;
RESET ROLE;
SELECT pg_advisory_unlock(4242);
CALL test.wait_for(format($$(SELECT state::text = 'succeeded' FROM retries.call_data WHERE id = %s)$$,
						  :slow_call));
SELECT fn, max_attempts FROM retries.policies WHERE fn = 'victim_secret()'::regprocedure;

-- 5. oversized and odd input; sink() records what a worker passed it
CREATE TABLE public.sink_log (call_id bigint, t text, a int[], j jsonb);
CREATE FUNCTION public.sink(t text, a int[], j jsonb) RETURNS void
LANGUAGE sql SET search_path = pg_catalog
AS 'INSERT INTO public.sink_log VALUES (retries.current_call(), t, a, j)';
SELECT retries.annotate('public.sink(text,int[],jsonb)', '1 1s');
ALTER SYSTEM SET retries.enabled = off;
SELECT pg_reload_conf();
CALL test.workers_see(false);
-- arguments over retries.max_args_size (1MB by default) are refused
CALL test.try($$SELECT retries.call('public.sink(text,int[],jsonb)',
	jsonb_build_array(repeat('x', 1024 * 1024), '{}', '{}'))$$);
-- under a limit a superuser raised, a 1 MB text argument and a
-- 10,000-element array are stored whole
SET retries.max_args_size = '4MB';
SELECT retries.call('public.sink(text,int[],jsonb)',
					jsonb_build_array(repeat('x', 1024 * 1024),
									  (SELECT jsonb_agg(i) FROM generate_series(1, 10000) i),
									  (SELECT jsonb_object_agg(i::text, repeat('y', 100))
										 FROM generate_series(1, 10000) i))) AS big \gset
RESET retries.max_args_size;
SELECT length(args->>0) AS text_length, array_length((args->>1)::int[], 1) AS array_length,
	   (SELECT count(*) FROM jsonb_object_keys(args->2)) AS object_keys
  FROM retries.calls WHERE id = :big;
-- 10,000 positional arguments for a function of three
CALL test.try($$SELECT retries.call('public.sink(text,int[],jsonb)',
	(SELECT jsonb_agg(i) FROM generate_series(1, 10000) i))$$);
-- arrays nested deeper than PostgreSQL allows (6 dimensions), as text and as JSON
CALL test.try($$SELECT retries.call('public.sink(text,int[],jsonb)',
	jsonb_build_array('t', repeat('[', 10) || '1' || repeat(']', 10), '{}'))$$);
CALL test.try($$SELECT retries.call('public.sink(text,int[],jsonb)',
	jsonb_build_array('t', (repeat('[', 10) || '1' || repeat(']', 10))::jsonb, '{}'))$$);
-- 10 kB keys deduplicate like short ones, and differ by their last byte
SELECT retries.call('public.sink(text,int[],jsonb)', '["k", [], {}]',
					key => repeat('k', 10240)) AS k1 \gset
SELECT retries.call('public.sink(text,int[],jsonb)', '["k", [], {}]',
					key => repeat('k', 10240)) = :k1 AS same,
	   retries.call('public.sink(text,int[],jsonb)', '["k", [], {}]',
					key => repeat('k', 10239) || 'K') <> :k1 AS different;
-- a key over 16 kB is refused (54000), a byte over as a megabyte, and
-- nothing is stored
SELECT calls AS calls_before FROM test.stored() \gset
SELECT retries.call('public.sink(text,int[],jsonb)', '["k", [], {}]',
					key => repeat('k', 16 * 1024)) IS NOT NULL AS key_of_16_kb;
SELECT retries.call('public.sink(text,int[],jsonb)', '["k", [], {}]',
					key => repeat('k', 16 * 1024 + 1));
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT retries.call('public.sink(text,int[],jsonb)', '["k", [], {}]',
					key => repeat('k', 1024 * 1024));
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT calls = :calls_before + 1 AS only_the_16_kb_one FROM test.stored();
-- hostile text in every string argument: quotes, backslashes, format
-- specifiers, SQL, control characters and non-ASCII; each is either taken as
-- data or refused with an error that quotes it
CREATE TEMP TABLE odd (s text);
INSERT INTO odd VALUES ($q$'; DROP TABLE public.hijacked; --$q$), ('%s%n%x%%'),
	(E'\\\\'), (E'a\tb\nc\rd\x01e'), ('Ωμέγα ☃ 𝄞'), (repeat('é', 5000)), (''), (' ');
SELECT count(*) AS distinct_keys FROM
	(SELECT DISTINCT retries.call('public.sink(text,int[],jsonb)',
								  jsonb_build_array(s, '{}'::int[], jsonb_build_object(s, s)),
								  key => s) FROM odd) c;
SELECT count(*) AS stored_as_given FROM retries.calls c JOIN odd ON c.key = odd.s
 WHERE c.args->>0 = odd.s AND c.args->2->>odd.s = odd.s;
DO $$
DECLARE
	s text;
	res text;
	label text;
BEGIN
	FOR s IN SELECT odd.s FROM odd ORDER BY odd.s LOOP
		-- control characters shown as ? (clients print them differently)
		label := left(quote_literal(regexp_replace(s, '[[:cntrl:]]', '?', 'g')), 20);
		BEGIN
			PERFORM retries.annotate('public.sink(text,int[],jsonb)', s);
			res := 'accepted';
		EXCEPTION WHEN OTHERS THEN
			res := SQLSTATE;
		END;
		RAISE NOTICE 'policy %: %', label, res;
		BEGIN
			PERFORM retries.annotate('public.sink(text,int[],jsonb)', jitter => s);
			res := 'accepted';
		EXCEPTION WHEN OTHERS THEN
			res := SQLSTATE;
		END;
		RAISE NOTICE 'jitter %: %', label, res;
		BEGIN
			PERFORM retries.annotate('public.sink(text,int[],jsonb)', retry_on => ARRAY[s]);
			res := 'accepted';
		EXCEPTION WHEN OTHERS THEN
			res := SQLSTATE;
		END;
		RAISE NOTICE 'retry_on %: %', label, res;
		BEGIN
			PERFORM retries.call(s);
			res := 'accepted';
		EXCEPTION WHEN OTHERS THEN
			res := SQLSTATE;
		END;
		RAISE NOTICE 'fn %: %', label, res;
		BEGIN
			PERFORM retries.call('public.sink(text,int[],jsonb)', jsonb_build_object(s, 1));
			res := 'accepted';
		EXCEPTION WHEN OTHERS THEN
			res := SQLSTATE;
		END;
		RAISE NOTICE 'argument name %: %', label, res;
		BEGIN
			PERFORM retries.retry(s);
		EXCEPTION WHEN OTHERS THEN
			res := SQLSTATE;
		END;
		RAISE NOTICE 'retry message %: %', label, res;
	END LOOP;
END
$$;
-- the messages quote the bad input as it was given
CALL test.try($$SELECT retries.annotate('public.sink(text,int[],jsonb)', E'5 1s\tx')$$);
CALL test.try($$SELECT retries.annotate('public.sink(text,int[],jsonb)', jitter => '%s%n')$$);
CALL test.try($$SELECT retries.call('public.sink(text,int[],jsonb)', '{"%s\\u00e9": 1}')$$);
-- the workers run them all, and sink() gets every argument as it was given
ALTER SYSTEM RESET retries.enabled;
SELECT pg_reload_conf();
CALL test.wait_for($$(SELECT count(*) = 0 FROM retries.call_data c
					   JOIN retries.policy_data p ON p.id = c.policy_id
					  WHERE p.fn = test.key('public.sink(text,int[],jsonb)')
						AND c.state::text = 'scheduled')$$);
SELECT c.state, count(*) FROM retries.calls c
 WHERE c.fn = 'public.sink(text,int[],jsonb)'::regprocedure GROUP BY c.state;
SELECT length(t), cardinality(a), (SELECT count(*) FROM jsonb_object_keys(j)) AS keys
  FROM public.sink_log WHERE call_id = :big;
SELECT count(*) AS received_as_given FROM public.sink_log l JOIN odd ON l.t = odd.s
 WHERE l.j->>odd.s = odd.s AND l.a = '{}';

-- 6. mallory's type has a cast to json, which converting the result of
-- her function runs: it records who it runs as and the application_name it
-- finds, sets application_name for the session, and (for the greedy one)
-- tries to make mallory a superuser
SET ROLE hostile_mallory;
CREATE TYPE public.loot AS ENUM ('plain', 'greedy');
CREATE TABLE public.loot_log (n int, who name, session_who name, app text);
CREATE FUNCTION public.loot_json(l public.loot) RETURNS json LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO public.loot_log
	SELECT count(*) OVER () + 1, current_user, session_user,
		   current_setting('application_name')
	  FROM (SELECT FROM public.loot_log UNION ALL SELECT) s LIMIT 1;
	PERFORM set_config('application_name', 'looted', false);
	IF l OPERATOR(pg_catalog.=) 'greedy' THEN
		ALTER ROLE hostile_mallory SUPERUSER;
	END IF;
	RETURN to_json(l::text OPERATOR(pg_catalog.||) ' as json');
END
$$;
CREATE CAST (public.loot AS json) WITH FUNCTION public.loot_json(public.loot);
CREATE FUNCTION public.grab(l public.loot) RETURNS public.loot LANGUAGE sql AS 'SELECT l';
SELECT retries.annotate('public.grab(public.loot)', '3 10ms', retry_on => '{RT, 42}');
SELECT retries.call('public.grab(public.loot)', '["plain"]') AS plain_loot \gset
SELECT retries.call('public.grab(public.loot)', '["greedy"]') AS greedy_loot \gset
SELECT retries.call('public.grab(public.loot)', '["plain"]') AS plain_again \gset
RESET ROLE;
CALL test.wait_for($$(SELECT count(*) = 3 FROM retries.call_data
					   WHERE id IN ($$ || :plain_loot || $$, $$ || :greedy_loot || $$, $$ ||
									 :plain_again || $$) AND state::text <> 'scheduled')$$);
-- the casts ran as mallory (in a session of hers, as it were), and each
-- found the application_name a new session has, not the one the cast
-- before it set; the greedy one failed, not retried, and left mallory as
-- she was
SELECT count(*) AS casts_kept, bool_and(who = 'hostile_mallory' AND session_who = 'hostile_mallory') AS as_mallory,
	   bool_and(app <> 'looted') AS setting_gone
  FROM public.loot_log;
-- (the message of the refusal differs between PostgreSQL versions)
SELECT CASE id WHEN :greedy_loot THEN 'greedy' ELSE 'plain' END AS call, state, result,
	   last_sqlstate
  FROM retries.calls WHERE id IN (:plain_loot, :greedy_loot, :plain_again) ORDER BY id;
SELECT rolsuper FROM pg_roles WHERE rolname = 'hostile_mallory';

-- 6b. code that a function's owner chose never runs with the rights of a
-- caller of another role, be it a superuser: the delay_fn and on_exhausted
-- hooks she annotated her SECURITY DEFINER function with run as her, and
-- the cast of her type (above) does not run at all for another role's call
-- (a direct call runs no cast: the result is the value's text form).  Each
-- tries to read the callers' secrets and to make mallory a superuser, and
-- records who it ran as and the search_path it found (the victim's login
-- path names the victim's own schema first).
CREATE SCHEMA victim_first AUTHORIZATION hostile_victim;
SET ROLE hostile_victim;
CREATE TABLE victim_first.victim_secret (s text);
INSERT INTO victim_first.victim_secret VALUES ('the victim''s secret');
RESET ROLE;
ALTER ROLE hostile_victim SET search_path = victim_first, public;
CREATE TABLE public.admin_secret (s text);
INSERT INTO public.admin_secret VALUES ('the superuser''s secret');
SET ROLE hostile_mallory;
TRUNCATE public.loot_log;
CREATE TABLE public.owner_log (hook text, who name, session_who name, path text, loot text);
GRANT INSERT ON public.owner_log TO PUBLIC;
CREATE FUNCTION public.owner_hook_log(hook text) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
	loot text := 'none';
BEGIN
	BEGIN
		SELECT s INTO loot FROM victim_first.victim_secret;
	EXCEPTION WHEN insufficient_privilege THEN
		BEGIN
			SELECT s INTO loot FROM public.admin_secret;
		EXCEPTION WHEN insufficient_privilege THEN
			loot := 'denied';
		END;
	END;
	INSERT INTO public.owner_log
	VALUES (hook, current_user, session_user, current_setting('search_path'), loot);
	BEGIN
		ALTER ROLE hostile_mallory SUPERUSER;
	EXCEPTION WHEN insufficient_privilege THEN
		NULL;
	END;
END
$$;
CREATE FUNCTION public.owner_delay(a int, st text, m text) RETURNS interval
LANGUAGE plpgsql AS $$
BEGIN
	PERFORM public.owner_hook_log('delay_fn');
	RETURN interval '10 ms';
END
$$;
CREATE FUNCTION public.owner_exhausted(id bigint) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	PERFORM public.owner_hook_log('on_exhausted');
END
$$;
-- 0: always busy (two retries, then the call fails for good); 1 and 2: a
-- result of her type, which has a cast to json
CREATE FUNCTION public.api(n int) RETURNS public.loot LANGUAGE plpgsql SECURITY DEFINER
	SET search_path = pg_catalog AS $$
BEGIN
	IF n OPERATOR(pg_catalog.=) 0 THEN
		RAISE EXCEPTION 'busy' USING ERRCODE = 'RT000';
	END IF;
	RETURN (ARRAY['plain', 'greedy']::public.loot[])[n];
END
$$;
SELECT retries.annotate('public.api(integer)', '2 10ms',
						delay_fn => 'public.owner_delay(integer,text,text)',
						on_exhausted => 'public.owner_exhausted(bigint)');
RESET ROLE;
SET ROLE hostile_victim;
SELECT retries.call('public.api(integer)', '[0]') AS victim_busy \gset
SELECT retries.call('public.api(integer)', '[1]') AS victim_plain \gset
SELECT retries.call('public.api(integer)'::regprocedure::oid::regprocedure, '[2]') AS victim_greedy \gset
RESET ROLE;
SELECT retries.call('public.api(integer)', '[0]') AS admin_busy \gset
SELECT retries.call('public.api(integer)', '[1]') AS admin_plain \gset
SELECT retries.call('public.api(integer)'::regprocedure::oid::regprocedure, '[2]') AS admin_greedy \gset
CALL test.wait_for($$(SELECT count(*) = 6 FROM retries.call_data
					   WHERE id IN ($$ || :victim_busy || $$, $$ || :victim_plain || $$, $$ ||
									 :victim_greedy || $$, $$ || :admin_busy || $$, $$ ||
									 :admin_plain || $$, $$ || :admin_greedy || $$)
						 AND state::text IN ('succeeded', 'failed'))$$);
-- the hooks (two delay_fn, then an on_exhausted, for each busy call) ran
-- as mallory, in a session of hers (the search_path of her login, not the
-- victim's), and took nothing
SELECT hook, count(*), bool_and(who = 'hostile_mallory' AND session_who = 'hostile_mallory') AS as_mallory,
	   string_agg(DISTINCT path, ' / ') AS search_path, string_agg(DISTINCT loot, ' / ') AS loot
  FROM public.owner_log GROUP BY hook ORDER BY hook;
-- her cast ran for none of them: their results are the text form, the
-- greedy ones too
SELECT count(*) AS casts FROM public.loot_log;
SELECT CASE id WHEN :victim_busy THEN 'victim busy' WHEN :victim_plain THEN 'victim plain'
			   WHEN :victim_greedy THEN 'victim greedy' WHEN :admin_busy THEN 'admin busy'
			   WHEN :admin_plain THEN 'admin plain' ELSE 'admin greedy' END AS call,
	   state, attempts, result, last_sqlstate
  FROM retries.calls
 WHERE id IN (:victim_busy, :victim_plain, :victim_greedy, :admin_busy, :admin_plain, :admin_greedy)
 ORDER BY id;
SELECT rolsuper FROM pg_roles WHERE rolname = 'hostile_mallory';
-- nor does a SECURITY DEFINER cast of hers (PostgreSQL switches to her
-- before the extension sees the function), and the SET seed clause that
-- PostgreSQL applies before it does not fix the random() of the caller's
-- next call (PostgreSQL 17 and later refuse to apply SET seed in a
-- function, and fail the call: there the clause is not made)
SET ROLE hostile_mallory;
CREATE TYPE public.gem AS ENUM ('ruby');
CREATE FUNCTION public.gem_json(g public.gem) RETURNS json LANGUAGE plpgsql
	SECURITY DEFINER AS $$
BEGIN
	INSERT INTO public.loot_log VALUES (0, current_user, session_user, 'gem');
	RETURN to_json('CAST RAN'::text);
END
$$;
DO $$
BEGIN
	IF current_setting('server_version_num')::int < 170000 THEN
		ALTER FUNCTION public.gem_json(public.gem) SET seed = 0.5;
	END IF;
END
$$;
CREATE CAST (public.gem AS json) WITH FUNCTION public.gem_json(public.gem);
RESET ROLE;
CREATE FUNCTION public.admin_gem() RETURNS public.gem LANGUAGE sql AS $$ SELECT 'ruby'::public.gem $$;
CREATE FUNCTION public.admin_random() RETURNS float8 LANGUAGE sql AS 'SELECT random()';
SELECT retries.annotate('public.admin_gem()', '1 10ms');
SELECT retries.annotate('public.admin_random()', '1 10ms');
BEGIN;
SELECT retries.call('public.admin_gem()') AS gem \gset
SELECT retries.call('public.admin_random()') AS rnd \gset
COMMIT;
CALL test.wait_for($$(SELECT count(*) = 2 FROM retries.call_data
					   WHERE id IN ($$ || :gem || $$, $$ || :rnd || $$)
						 AND state::text IN ('succeeded', 'failed'))$$);
SELECT (SELECT result FROM retries.calls WHERE id = :gem) AS gem_result,
	   (SELECT count(*) FROM public.loot_log WHERE app OPERATOR(pg_catalog.=) 'gem') AS gem_casts;
SELECT 'seeded' AS as_the_clause_would FROM setseed(0.5);
SELECT (SELECT result::float8 FROM retries.calls WHERE id = :rnd) <> random() AS random_not_fixed;
DROP CAST (public.gem AS json);
DROP FUNCTION public.admin_gem(), public.admin_random();
-- a cast of the caller's own runs as the caller, and so does what it calls:
-- mallory's function that logs who runs it runs as the victim
SET ROLE hostile_victim;
CREATE TYPE victim_first.mood AS ENUM ('calm');
CREATE FUNCTION victim_first.mood_json(m victim_first.mood) RETURNS json LANGUAGE plpgsql AS $$
BEGIN
	PERFORM public.owner_hook_log('victim''s own cast');
	RETURN to_json(m::text OPERATOR(pg_catalog.||) ' as json');
END
$$;
CREATE CAST (victim_first.mood AS json) WITH FUNCTION victim_first.mood_json(victim_first.mood);
CREATE FUNCTION victim_first.mood() RETURNS victim_first.mood LANGUAGE sql AS $$ SELECT 'calm'::victim_first.mood $$;
SELECT retries.annotate('victim_first.mood()', '1 10ms');
SELECT retries.call('victim_first.mood()') AS own_cast \gset
RESET ROLE;
-- (waits compare the state as text: public holds mallory's = for the
-- extension's enum types, which an exact match prefers to pg_catalog's)
CALL test.wait_for($$(SELECT state::text IN ('succeeded', 'failed') FROM retries.call_data
					   WHERE id = $$ || :own_cast || $$)$$);
SELECT state, result FROM retries.calls WHERE id = :own_cast;
SELECT who, session_who, loot FROM public.owner_log WHERE hook = 'victim''s own cast';
-- an output function met in the conversion runs if it is a superuser's
-- (trusted code), and fails the attempt (42501) once another role owns it:
-- converting the result would run her code with the caller's rights (the
-- NOTICEs of a shell type differ between versions)
SET client_min_messages = warning;
CREATE TYPE public.htext;
CREATE FUNCTION public.htext_in(cstring) RETURNS public.htext
	LANGUAGE internal IMMUTABLE STRICT AS 'textin';
CREATE FUNCTION public.htext_out(public.htext) RETURNS cstring
	LANGUAGE internal IMMUTABLE STRICT AS 'textout';
CREATE TYPE public.htext (INPUT = public.htext_in, OUTPUT = public.htext_out, LIKE = text);
RESET client_min_messages;
CREATE FUNCTION public.admin_htext() RETURNS public.htext LANGUAGE sql
	AS $$ SELECT 'plain'::public.htext $$;
SELECT retries.annotate('public.admin_htext()', '1 10ms');
SELECT retries.call('public.admin_htext()') AS ht_trusted \gset
CALL test.wait_for($$(SELECT state::text IN ('succeeded', 'failed') FROM retries.call_data
					   WHERE id = $$ || :ht_trusted || $$)$$);
ALTER FUNCTION public.htext_out(public.htext) OWNER TO hostile_mallory;
SELECT retries.call('public.admin_htext()') AS ht_foreign \gset
CALL test.wait_for($$(SELECT state::text IN ('succeeded', 'failed') FROM retries.call_data
					   WHERE id = $$ || :ht_foreign || $$)$$);
SELECT CASE id WHEN :ht_trusted THEN 'trusted' ELSE 'foreign' END AS output_function,
	   state, result, last_sqlstate, last_message
  FROM retries.calls WHERE id IN (:ht_trusted, :ht_foreign) ORDER BY id;
DROP FUNCTION public.admin_htext();
SET client_min_messages = warning;
DROP TYPE public.htext CASCADE;
RESET client_min_messages;
-- a hook must be the code of the function's owner or of a superuser: the
-- victim may not set mallory's on her function (it would run mallory's
-- code with the victim's rights)
SET ROLE hostile_victim;
SELECT retries.annotate('victim_first.mood()', '1 10ms',
						on_exhausted => 'public.owner_exhausted(bigint)');
\echo SQLSTATE :LAST_ERROR_SQLSTATE
RESET ROLE;
-- nor does mallory's hook run once her function has changed hands: taken
-- over by the superuser, it would run as the superuser; it is refused,
-- and the refusal recorded
CREATE TEMP TABLE owner_log_before AS SELECT count(*) AS n FROM public.owner_log;
ALTER FUNCTION public.api(integer) OWNER TO CURRENT_USER;
SELECT retries.call('public.api(integer)', '[0]') AS taken_over \gset
CALL test.wait_for($$(SELECT state::text IN ('succeeded', 'failed') FROM retries.call_data
					   WHERE id = $$ || :taken_over || $$)$$);
SELECT state, last_sqlstate,
	   last_message LIKE 'delay_fn % failed: delay_fn public.owner_delay(%) is owned by role "hostile_mallory", which is neither the owner of the function, "%", nor a superuser' AS says_why
  FROM retries.calls WHERE id = :taken_over;
SELECT on_exhausted_error LIKE '42501: on_exhausted public.owner_exhausted(bigint) is owned by role "hostile_mallory", which is neither %' AS hook_refused
  FROM retries.attempts WHERE call_id = :taken_over AND on_exhausted_error IS NOT NULL;
SELECT count(*) - (SELECT n FROM owner_log_before) AS hooks_run FROM public.owner_log;
SELECT rolsuper FROM pg_roles WHERE rolname = 'hostile_mallory';
ALTER FUNCTION public.api(integer) OWNER TO hostile_mallory;
DROP CAST (victim_first.mood AS json);
ALTER ROLE hostile_victim RESET search_path;
DROP TABLE public.admin_secret;
DROP CAST (public.loot AS json);

-- 7. a worker's batch holds its calls locked until it writes their
-- outcomes, and code that it runs is inside that transaction: a call that
-- cancels, retries or reschedules itself, or a call of the same batch,
-- would find it unlocked and change it under the batch (which then wrote
-- the attempt's outcome over a cancel: cancelled, yet run and succeeded).
-- Each is refused (55000); a call of another batch waits as from any
-- session, and is not cancelled either once it has succeeded.
SET ROLE hostile_mallory;
CREATE TABLE public.manage_log (n int, what text, outcome text);
-- (its body names pg_catalog's now(): a worker started in 1 may still have
-- public first in its search_path, and would run the planted one)
CREATE FUNCTION public.manage_calls(other bigint) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
	me bigint := retries.current_call();
	tries text[] := ARRAY[
		'cancel itself', format('SELECT retries.cancel(%s)', me),
		'retry itself', format('SELECT retries.retry_now(%s)', me),
		'reschedule itself', format('SELECT retries.reschedule(%s, pg_catalog.now())', me),
		'cancel the other', format('SELECT retries.cancel(%s)', other)];
	done boolean;
BEGIN
	FOR i IN 1 .. cardinality(tries) / 2 LOOP
		BEGIN
			EXECUTE tries[2 * i] INTO done;
			INSERT INTO public.manage_log VALUES (i, tries[2 * i - 1], 'returned ' || done);
		EXCEPTION WHEN OTHERS THEN
			INSERT INTO public.manage_log VALUES (i, tries[2 * i - 1], SQLSTATE);
		END;
	END LOOP;
END
$$;
CREATE FUNCTION public.bystander() RETURNS text LANGUAGE sql AS $$ SELECT 'ran' $$;
SELECT retries.annotate('public.manage_calls(bigint)', '1 1s'),
	   retries.annotate('public.bystander()', '1 1s');
BEGIN;
SELECT retries.call('public.bystander()', priority => 5) AS bystander \gset
SELECT retries.call('public.manage_calls(bigint)', jsonb_build_array(:bystander),
					priority => 10) AS manager \gset
COMMIT;
RESET ROLE;
CALL test.wait_for(format($$(SELECT count(*) = 2 FROM retries.call_data
							  WHERE id IN (%s, %s) AND state::text IN ('succeeded', 'failed', 'cancelled'))$$,
						  :bystander, :manager));
-- the other call is of the same batch (refused), or of another, which it
-- waited for (and found succeeded), or not claimed yet, which the cancel
-- takes before it runs (which one depends on how fast another worker
-- claims it): never cancelled once run, nor run once cancelled
SELECT what, CASE WHEN what = 'cancel the other' AND outcome IN ('55000', 'returned false', 'returned true')
				  THEN 'refused, or cancelled unrun' ELSE outcome END AS outcome
  FROM public.manage_log ORDER BY n;
SELECT CASE id WHEN :manager THEN 'manager' ELSE 'bystander' END AS call,
	   CASE WHEN id = :manager THEN state::text || ' ' || attempts
			WHEN state::text = 'succeeded' AND attempts = 1 AND result = '"ran"'
			  AND (SELECT outcome FROM public.manage_log WHERE what = 'cancel the other') <> 'returned true'
			THEN 'ran once, or cancelled unrun'
			WHEN state::text = 'cancelled' AND attempts = 0 AND result IS NULL
			  AND (SELECT outcome FROM public.manage_log WHERE what = 'cancel the other') = 'returned true'
			THEN 'ran once, or cancelled unrun'
			ELSE format('%s %s %s', state, attempts, result) END AS outcome
  FROM retries.calls WHERE id IN (:bystander, :manager) ORDER BY id;
DROP TABLE public.manage_log;

-- nothing was hijacked by all of that either
SELECT count(*) AS hijacked FROM public.hijacked;

DROP TABLE public.hijacked, public.sink_log, public.loot_log;
DROP VIEW public.victim_view;
DROP FUNCTION public.sink(text, int[], jsonb);
DROP OWNED BY hostile_mallory, hostile_victim;
DROP ROLE hostile_mallory, hostile_victim;

-- retries.call() writes a call without a key past the executor: a
-- trigger, rule, CHECK constraint, NOT NULL, row security or default added to
-- retries.call_data (by a superuser, by hand) would not be honoured, so
-- such a table is refused instead
CREATE FUNCTION public.plain_call() RETURNS void LANGUAGE sql AS 'SELECT';
SELECT retries.annotate('public.plain_call()', '1 1s');
CREATE FUNCTION public.call_data_watch() RETURNS trigger LANGUAGE plpgsql
	AS $$BEGIN RAISE NOTICE 'the trigger fired'; RETURN NEW; END$$;
CREATE TRIGGER watch BEFORE INSERT ON retries.call_data
	FOR EACH ROW EXECUTE FUNCTION public.call_data_watch();
SELECT retries.call('public.plain_call()', '[]') > 0 AS called;
DROP TRIGGER watch ON retries.call_data;
ALTER TABLE retries.call_data ADD CONSTRAINT no_huge_args CHECK (pg_column_size(args) < 100000);
SELECT retries.call('public.plain_call()', '[]') > 0 AS called;
ALTER TABLE retries.call_data DROP CONSTRAINT no_huge_args;
SELECT retries.call('public.plain_call()', '[]') > 0 AS called;
ALTER TABLE retries.call_data ADD COLUMN by_hand int;
UPDATE retries.call_data SET by_hand = 0;
ALTER TABLE retries.call_data ALTER COLUMN by_hand SET NOT NULL;
SELECT retries.call('public.plain_call()', '[]') > 0 AS called;
ALTER TABLE retries.call_data DROP COLUMN by_hand;
SELECT retries.call('public.plain_call()', '[]') > 0 AS called;
SELECT retries.unannotate('public.plain_call()');
DROP FUNCTION public.plain_call(), public.call_data_watch();
