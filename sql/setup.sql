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

-- reset(): forget every policy, call and attempt, and restart the ids
CREATE PROCEDURE test.reset()
LANGUAGE sql AS $$
	TRUNCATE retries.policy_data, retries.call_data, retries.attempt_data
		RESTART IDENTITY;
$$;

-- stored(): how many rows the extension's tables hold, to show that a
-- refused input stored nothing
CREATE FUNCTION test.stored(OUT policies bigint, OUT calls bigint, OUT attempts bigint)
LANGUAGE sql AS $$
	SELECT (SELECT count(*) FROM retries.policy_data),
		   (SELECT count(*) FROM retries.call_data),
		   (SELECT count(*) FROM retries.attempt_data);
$$;

-- the extension is there, in its own schema, with its settings
SELECT extname, extversion, extnamespace::regnamespace, extrelocatable
  FROM pg_extension WHERE extname = 'retries';
SELECT name, setting, context FROM pg_settings
 WHERE name LIKE 'retries.%' ORDER BY name;
