--
-- setup: helpers shared by the regression tests (they run in order, in one
-- database where pg_regress has created the extension)
--

-- try(sql): run a statement; on error, show its SQLSTATE, message, detail
-- and hint, so that the expected output pins the exact error code
CREATE SCHEMA test;
GRANT USAGE ON SCHEMA test TO PUBLIC;
CREATE PROCEDURE test.try(sql text)
LANGUAGE plpgsql AS $$
DECLARE
	state text;
	msg text;
	detail text;
	hint text;
BEGIN
	EXECUTE sql;
	RAISE NOTICE 'ok';
EXCEPTION WHEN OTHERS THEN
	GET STACKED DIAGNOSTICS state = RETURNED_SQLSTATE, msg = MESSAGE_TEXT,
		detail = PG_EXCEPTION_DETAIL, hint = PG_EXCEPTION_HINT;
	RAISE NOTICE '%', state || ': ' || msg
		|| coalesce(E'\nDETAIL: ' || nullif(detail, ''), '')
		|| coalesce(E'\nHINT: ' || nullif(hint, ''), '');
END
$$;

-- the key by which the extension's tables refer to a function (1.4)
CREATE FUNCTION test.key(fn regprocedure) RETURNS oid
LANGUAGE sql STABLE AS $$ SELECT key FROM retries.function_refs r WHERE r.fn = key.fn $$;

-- reset(): forget every policy, call and attempt, and restart the ids.
--
-- The workers may be running, and they lock these tables in more than one
-- order (a schedule's firing takes schedule_data before call_data, a batch
-- call_data before attempt_data and the followers' tables, a follower's
-- release call_after_pending before call_after): a TRUNCATE, which locks
-- the tables one by one in the order it names them, deadlocked with a
-- worker that held one and then wanted one that it already held (a loaded
-- run: a firing held schedule_data).  So reset takes every lock at once or
-- none (NOWAIT, in a subtransaction that a refusal rolls back), and tries
-- again after a pause, until its deadline.
CREATE PROCEDURE test.reset(deadline interval DEFAULT '180s')
LANGUAGE plpgsql AS $$
DECLARE
	give_up timestamptz := clock_timestamp() + deadline;
BEGIN
	LOOP
		BEGIN
			LOCK TABLE retries.schedule_data, retries.policy_data, retries.call_data,
				retries.flow_data, retries.attempt_data, retries.call_after,
				retries.call_after_pending, retries.event_data
				IN ACCESS EXCLUSIVE MODE NOWAIT;
			EXIT;
		EXCEPTION WHEN lock_not_available THEN
			IF clock_timestamp() > give_up THEN
				RAISE EXCEPTION 'test.reset: the workers held the tables for %', deadline;
			END IF;
		END;
		PERFORM pg_sleep(0.01);	-- poll
	END LOOP;
	TRUNCATE retries.schedule_data, retries.policy_data, retries.call_data,
		retries.flow_data, retries.attempt_data, retries.call_after,
		retries.call_after_pending, retries.event_data RESTART IDENTITY;
END
$$;

-- stored(): how many rows the extension's tables hold, to show that a
-- refused input stored nothing
CREATE FUNCTION test.stored(OUT policies bigint, OUT calls bigint, OUT attempts bigint)
LANGUAGE sql AS $$
	SELECT (SELECT count(*) FROM retries.policy_data),
		   (SELECT count(*) FROM retries.call_data),
		   (SELECT count(*) FROM retries.attempt_data);
$$;

-- wait_for(condition): wait until a query is true, polling every 10 ms at
-- first and less often as the wait goes on (up to every 100 ms: on a slow
-- server, under valgrind, the polling must not take the workers' time),
-- and fail after a deadline (never a bare sleep).  The deadline only ends a
-- wait that would never end: 180 s, as the TAP tests', for a server that
-- valgrind makes 50 times slower.
CREATE PROCEDURE test.wait_for(condition text, deadline interval DEFAULT '180s')
LANGUAGE plpgsql AS $$
DECLARE
	give_up timestamptz := clock_timestamp() + deadline;
	ok boolean;
	pause float8 := 0.01;
BEGIN
	LOOP
		EXECUTE 'SELECT (' || condition || ')' INTO ok;
		EXIT WHEN ok;
		IF clock_timestamp() > give_up THEN
			RAISE EXCEPTION 'timed out after % waiting for: %', deadline, condition;
		END IF;
		PERFORM pg_sleep(pause);	-- poll
		pause := least(pause * 1.2, 0.1);
	END LOOP;
END
$$;

-- wait_finished(id): wait until a call has succeeded, failed or been
-- cancelled
CREATE PROCEDURE test.wait_finished(id bigint)
LANGUAGE plpgsql AS $$
BEGIN
	CALL test.wait_for(format(
		$q$(SELECT state IN ('succeeded', 'failed', 'cancelled')
			 FROM retries.call_data WHERE id = %s)$q$, id));
END
$$;

-- workers_see(enabled): after ALTER SYSTEM SET retries.enabled and a
-- reload, wait until every worker of this database has seen the setting
CREATE PROCEDURE test.workers_see(enabled boolean)
LANGUAGE plpgsql AS $$
BEGIN
	CALL test.wait_for(format(
		$q$(SELECT count(*) FROM retries.workers
			 WHERE database = current_database() AND (state = 'paused') = NOT %L) = %s$q$,
		enabled, current_setting('retries.max_workers')));
END
$$;

-- the extension is there, in its own schema, with its settings (shown
-- before the reload below: this session applies a reload only between two
-- statements after the postmaster signals it, which on a loaded machine
-- can come after the workers have seen it, and after the next statement)
SELECT extname, extversion, extnamespace::regnamespace, extrelocatable
  FROM pg_extension WHERE extname = 'retries';
SELECT name, setting, context FROM pg_settings
 WHERE name LIKE 'retries.%' ORDER BY name;

-- the tests of the SQL surface run with execution paused, so that no
-- worker changes a call under them; engine.sql turns it on
CALL test.wait_for($$(SELECT count(*) FROM retries.workers
					   WHERE database = current_database()) = 2$$);
ALTER SYSTEM SET retries.enabled = off;
SELECT pg_reload_conf();
CALL test.workers_see(false);

