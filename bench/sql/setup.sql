-- bench/sql/setup.sql: the benchmark's database objects, the same for
-- retries, the pgbench ceilings and the peers.  Run once in a fresh
-- database by bench/run.

CREATE EXTENSION retries;

-- The workload: a trivial function that inserts one row into a table with
-- a primary key.  done_at says when the row was written, so that every
-- contender's throughput is measured the same way (first row to last row).
CREATE TABLE results (
	id		bigint PRIMARY KEY,
	done_at	timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE FUNCTION work(id bigint) RETURNS void
LANGUAGE sql AS $$ INSERT INTO results (id) VALUES (id) $$;
SELECT retries.annotate('work(bigint)');

-- Flow control: the same work under a limit of 10 attempts at once (more
-- than the workers, so it never binds), and a function whose calls a pause
-- holds beside the drain.
CREATE FUNCTION work_limited(id bigint) RETURNS void
LANGUAGE sql AS $$ INSERT INTO results (id) VALUES (id) $$;
SELECT retries.annotate('work_limited(bigint)', max_running => 10);
CREATE FUNCTION work_held(id bigint) RETURNS void
LANGUAGE sql AS $$ INSERT INTO results (id) VALUES (id) $$;
SELECT retries.annotate('work_held(bigint)');
-- Ten roles, each of which makes calls of work() through a SECURITY DEFINER
-- function it owns; schedule_as(g) makes call g as bench_role_(g % 10), so
-- that the calls of the ten roles are interleaved (the roles step).
DO $$
BEGIN
	FOR i IN 0 .. 9 LOOP
		EXECUTE format('CREATE ROLE bench_role_%s LOGIN', i);
		EXECUTE format('GRANT INSERT ON results TO bench_role_%s', i);
		EXECUTE format($f$CREATE FUNCTION schedule_as_%s(g bigint) RETURNS bigint
			LANGUAGE sql SECURITY DEFINER SET search_path = public, pg_catalog
			AS 'SELECT retries.call(''work(bigint)'', jsonb_build_array(g))'$f$, i);
		EXECUTE format('ALTER FUNCTION schedule_as_%s(bigint) OWNER TO bench_role_%s', i, i);
	END LOOP;
END $$;
CREATE FUNCTION schedule_as(g bigint) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
	id	bigint;
BEGIN
	EXECUTE format('SELECT schedule_as_%s($1)', g % 10) INTO id USING g;
	RETURN id;
END $$;

-- and a function limited to 1000 starts a second, for the rate's accuracy
CREATE FUNCTION work_rated(id bigint) RETURNS void
LANGUAGE sql AS $$ INSERT INTO results (id) VALUES (id) $$;
SELECT retries.annotate('work_rated(bigint)', rate => '1000/1s');

-- Retry-heavy load: fails twice with SQLSTATE RT000, then succeeds.
CREATE FUNCTION flaky(id bigint) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
	IF retries.current_attempt() < 3 THEN
		PERFORM retries.retry('not yet');
	END IF;
	INSERT INTO results (id) VALUES (id);
END $$;
SELECT retries.annotate('flaky(bigint)', '5 1ms');

-- Latency probes: when the call was committed (or due), when it started.
CREATE TABLE lat_sched (id bigint PRIMARY KEY, t timestamptz NOT NULL);
CREATE TABLE lat_started (id bigint PRIMARY KEY, t timestamptz NOT NULL);
CREATE FUNCTION work_lat(id bigint) RETURNS void
LANGUAGE sql AS $$ INSERT INTO lat_started VALUES (id, clock_timestamp()) $$;
SELECT retries.annotate('work_lat(bigint)');

-- Retry precision: fails on attempts 1 and 2 with delays of 20 ms and
-- 40 ms by the formula (no jitter), succeeds on attempt 3.
CREATE FUNCTION flaky_lat(id bigint) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
	IF retries.current_attempt() < 3 THEN
		RAISE EXCEPTION 'not yet' USING ERRCODE = 'RT000';
	END IF;
END $$;
SELECT retries.annotate('flaky_lat(bigint)', '3 20ms 80ms');

-- Results, waiting and chains: a step that records when it started (into
-- lat_started) and returns its id, kept as its result; what retries.wait()
-- took to return after the finishing commit; and the shapes the step runs:
-- a chain of n calls, each after the one before, a fan-out of one call
-- into n, a fan-in of n calls into one.
CREATE FUNCTION work_step(id bigint) RETURNS bigint
LANGUAGE sql AS $$ INSERT INTO lat_started VALUES (id, clock_timestamp()) RETURNING id $$;
SELECT retries.annotate('work_step(bigint)');
CREATE TABLE wake_ms (ms float8 NOT NULL);
CREATE FUNCTION bench_chain(n integer) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
	prev	bigint := retries.call('work_step(bigint)', '[1]');
BEGIN
	FOR i IN 2 .. n LOOP
		prev := retries.call('work_step(bigint)', jsonb_build_array(i), after => ARRAY[prev]);
	END LOOP;
END $$;
CREATE FUNCTION bench_fan_out(n integer) RETURNS void
LANGUAGE sql AS $$
	SELECT count(retries.call('work_step(bigint)', jsonb_build_array(i), after => ARRAY[r.root]))
	  FROM (SELECT retries.call('work_step(bigint)', '[0]') AS root OFFSET 0) r,
		   generate_series(1, n) i
$$;
CREATE FUNCTION bench_fan_in(n integer) RETURNS void
LANGUAGE sql AS $$
	SELECT retries.call('work_step(bigint)', '[0]',
						after => (SELECT array_agg(retries.call('work_step(bigint)',
																 jsonb_build_array(i)))
									FROM generate_series(1, n) i))
$$;

-- The ceilings: a plain queue table worked by pgbench clients.
CREATE TABLE queue (id bigint PRIMARY KEY);

-- The batched ceiling: claim up to n rows, call work() for each in its own
-- subtransaction (an EXCEPTION block), delete them, all in one transaction.
CREATE FUNCTION work_batch(n integer) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
	job		bigint;
	done	integer := 0;
BEGIN
	FOR job IN
		DELETE FROM queue
		 WHERE id IN (SELECT id FROM queue ORDER BY id LIMIT n
						FOR UPDATE SKIP LOCKED)
		RETURNING id
	LOOP
		BEGIN
			PERFORM work(job);
		EXCEPTION WHEN OTHERS THEN
			NULL;
		END;
		done := done + 1;
	END LOOP;
	RETURN done;
END $$;

