--
-- commands: retries.run_command() and retries.schedule_command(), SQL text
-- run by the workers as a client's simple query, as the role that made it,
-- each with its own policy; retries.command(text), which stands for them
--
SET timezone = 'UTC';
CALL test.reset();
ALTER SYSTEM SET retries.enabled = off;
SELECT pg_reload_conf();
CALL test.workers_see(false);

CREATE ROLE cmd_alice LOGIN;
CREATE ROLE cmd_bob LOGIN;
GRANT CREATE ON SCHEMA public TO cmd_alice;
SET ROLE cmd_alice;
CREATE TABLE cmd_t (n int, who text DEFAULT current_user,
					sess text DEFAULT session_user, call bigint DEFAULT retries.current_call());
INSERT INTO cmd_t (n) SELECT g FROM generate_series(1, 1000) g;
CREATE MATERIALIZED VIEW cmd_mv AS SELECT n FROM cmd_t;
CREATE UNIQUE INDEX ON cmd_mv (n);

-- a command is a call of retries.command(text), its text the argument
SELECT retries.run_command('VACUUM cmd_t') AS vacuum \gset
SELECT fn, args, command, state, attempts, max_attempts, scheduled_by, result
  FROM retries.calls WHERE id = :vacuum;

-- its policy is its own: given with it, or retries.default_policy; a
-- role's commands of one policy share a row, which is never current
SELECT retries.run_command('VACUUM cmd_t', '2 10ms 1s', '{40P01}') AS two \gset
SELECT retries.run_command('ANALYZE cmd_t', '2 10ms 1s', '{40P01}') AS three \gset
RESET ROLE;
SELECT c.id, c.max_attempts, p.min_delay, p.max_delay, p.retry_on, p.is_current,
	   p.annotated_by
  FROM retries.call_data c JOIN retries.policy_data p ON p.id = c.policy_id
 ORDER BY c.id;
SELECT count(*) AS policies FROM retries.policy_data;
SELECT count(*) AS listed FROM retries.policies;
SET ROLE cmd_alice;

-- a key makes it idempotent, as for calls
SELECT retries.run_command('VACUUM cmd_t', key => 'nightly-vacuum') AS keyed \gset
SELECT retries.run_command('VACUUM (ANALYZE) cmd_t', key => 'nightly-vacuum') = :keyed AS same_call;

-- bad input: a precise error, nothing stored
RESET ROLE;
SELECT * FROM test.stored() \gset before_
SET ROLE cmd_alice;
CALL test.try($$SELECT retries.run_command(NULL)$$);
CALL test.try($$SELECT retries.run_command('VACUUM cmd_t', run_at => NULL)$$);
CALL test.try($$SELECT retries.run_command('VACUM cmd_t')$$);
CALL test.try($$SELECT retries.run_command(' -- nothing but a comment ')$$);
CALL test.try($$SELECT retries.run_command('VACUUM cmd_t', 'twice')$$);
CALL test.try($$SELECT retries.run_command('VACUUM cmd_t', retry_on => '{"4"}')$$);
CALL test.try($$SELECT retries.run_command('VACUUM cmd_t', run_at => 'infinity')$$);
-- retries.command itself is neither annotated, called nor scheduled
CALL test.try($$SELECT retries.annotate('retries.command(text)', '3 1s')$$);
CALL test.try($$SELECT retries.unannotate('retries.command(text)')$$);
CALL test.try($$SELECT retries.call('retries.command(text)', '["VACUUM"]')$$);
CALL test.try($$SELECT retries.schedule('c', 'retries.command(text)', '1h', '["VACUUM"]')$$);
CALL test.try($$CALL retries.command('VACUUM cmd_t')$$);
RESET ROLE;
SELECT (SELECT row(s.*) FROM test.stored() s) =
	   row(:before_policies::bigint, :before_calls::bigint, :before_attempts::bigint) AS nothing_stored;
-- the text is parsed with standard_conforming_strings on, as the runner
-- parses it, whatever the caller's setting
SET standard_conforming_strings = off;
SET ROLE cmd_alice;
CALL test.try($$SELECT retries.run_command(E'SELECT ''a\\''', run_at => now() + interval '1 day')$$);
RESET standard_conforming_strings;
RESET ROLE;

-- EXECUTE on retries.command is the privilege to make commands
REVOKE EXECUTE ON PROCEDURE retries.command(text) FROM PUBLIC;
SET ROLE cmd_bob;
CALL test.try($$SELECT retries.run_command('SELECT 1')$$);
CALL test.try($$SELECT retries.schedule_command('b', 'SELECT 1', '1h')$$);
RESET ROLE;
GRANT EXECUTE ON PROCEDURE retries.command(text) TO cmd_bob;
SET ROLE cmd_bob;
SELECT retries.run_command('SELECT 1') > 0 AS granted;
RESET ROLE;
REVOKE EXECUTE ON PROCEDURE retries.command(text) FROM cmd_bob;
GRANT EXECUTE ON PROCEDURE retries.command(text) TO PUBLIC;
-- and a role sees only its own commands
SET ROLE cmd_bob;
SELECT count(*) AS bob_sees FROM retries.calls;
SET ROLE cmd_alice;

-- database: a command that runs in another database of the cluster, as
-- the role, connected there.  EXECUTE on retries.command_in, which PUBLIC
-- lacks, is the privilege to make one, and the role needs CONNECT there;
-- this database named is a plain command.  (They run in t/053.)
CALL test.try($$SELECT retries.run_command('SELECT 1', database => 'no_such_db')$$);
CALL test.try($$SELECT retries.run_command('SELECT 1', database => 'postgres')$$);
CALL test.try($$SELECT retries.schedule_command('x', 'SELECT 1', '1h', database => 'postgres')$$);
SELECT retries.run_command('SELECT 1', run_at => now() + interval '1 day',
						   database => current_database()) AS here \gset
SELECT fn, command, database FROM retries.calls WHERE id = :here;
RESET ROLE;
GRANT EXECUTE ON PROCEDURE retries.command_in(text, name, name) TO cmd_alice;
REVOKE CONNECT ON DATABASE postgres FROM PUBLIC;
SET ROLE cmd_alice;
CALL test.try($$SELECT retries.run_command('SELECT 1', database => 'postgres')$$);
RESET ROLE;
GRANT CONNECT ON DATABASE postgres TO PUBLIC;
SET ROLE cmd_alice;
SELECT retries.run_command('SELECT 1', run_at => now() + interval '1 day',
						   database => 'postgres') AS there \gset
SELECT fn, args, command, database FROM retries.calls WHERE id = :there;
SELECT retries.schedule_command('there', 'VACUUM', '0 3 * * *', database => 'postgres') > 0 AS scheduled;
SELECT name, fn, command, database FROM retries.schedules WHERE name = 'there';
CALL test.try($$SELECT retries.alter_schedule('there', args => '["VACUUM", "template1"]')$$);
CALL test.try($$SELECT retries.call('retries.command_in(text,name,name)', '["VACUUM", "postgres"]')$$);
CALL test.try($$CALL retries.command_in('VACUUM', 'postgres', 'postgres')$$);
SELECT retries.cancel(:here), retries.cancel(:there), retries.unschedule('there');
RESET ROLE;
REVOKE EXECUTE ON PROCEDURE retries.command_in(text, name, name) FROM cmd_alice;
SET ROLE cmd_alice;

-- schedule_command(): a schedule of a command with its own policy
SELECT retries.schedule_command('refresh', 'REFRESH MATERIALIZED VIEW CONCURRENTLY cmd_mv',
								'0 3 * * *', policy => '4 1s 1m', retry_on => '{55P03}') AS refresh \gset
SELECT name, fn, args, command, policy, every, timezone, overlap FROM retries.schedules;
CALL test.try($$SELECT retries.schedule_command('bad', 'REFRESH', '0 3 * * *')$$);
CALL test.try($$SELECT retries.schedule_command('bad', 'VACUUM', '0 3 * * *', policy => '1')$$);
CALL test.try($$SELECT retries.schedule_command('bad', NULL, '0 3 * * *')$$);
-- trigger() fires it now, under the schedule's policy
SELECT retries.trigger('refresh') AS fired \gset
RESET ROLE;
SELECT c.command, c.schedule, c.max_attempts, p.retry_on
  FROM retries.calls c JOIN retries.call_data d USING (id)
  JOIN retries.policy_data p ON p.id = d.policy_id WHERE c.id = :fired;
SET ROLE cmd_alice;
-- replaced by a function's schedule, it loses its command and policy
CREATE FUNCTION cmd_noop() RETURNS void LANGUAGE sql AS 'SELECT';
SELECT retries.annotate('cmd_noop()', '1 1s');
SELECT retries.schedule('refresh', 'cmd_noop()', '0 3 * * *') = :refresh AS same_id;
SELECT name, fn, command, policy FROM retries.schedules;
SELECT retries.schedule_command('refresh', 'REFRESH MATERIALIZED VIEW CONCURRENTLY cmd_mv',
								'0 3 * * *') = :refresh AS same_id_again;
SELECT name, fn, command, policy FROM retries.schedules;
-- alter_schedule keeps a command's text and policy, and refuses args for it
SELECT retries.alter_schedule('refresh', every => '0 4 * * *') = :refresh AS altered;
SELECT name, fn, command, policy, every FROM retries.schedules;
CALL test.try($$SELECT retries.alter_schedule('refresh', args => '["VACUUM"]')$$);

-- the workers run them: what refuses a transaction block or a function
-- runs, as the role that made it, in a session of its own (CREATE INDEX
-- CONCURRENTLY is in t/023: it waits for older transactions, such as one
-- that waits for it with retries.wait())
SELECT retries.cancel(id) FROM retries.calls WHERE state = 'scheduled' ORDER BY id;
RESET ROLE;
ALTER SYSTEM RESET retries.enabled;
SELECT pg_reload_conf();
CALL test.workers_see(true);
SET ROLE cmd_alice;
SELECT retries.run_command($$INSERT INTO cmd_t (n) VALUES (-1)$$) AS who \gset
SELECT retries.run_command('REFRESH MATERIALIZED VIEW CONCURRENTLY cmd_mv') AS mv \gset
SELECT retries.run_command('VACUUM (ANALYZE) cmd_t') AS vac \gset
-- several statements run as psql runs a script: each commits on its own
-- (so VACUUM runs beside others) unless the text says BEGIN ... COMMIT,
-- and the first error ends the attempt
SELECT retries.run_command($$INSERT INTO cmd_t (n) VALUES (-2); INSERT INTO cmd_t (n) VALUES (-3)$$) AS two_stmts \gset
SELECT retries.run_command('VACUUM cmd_t; ANALYZE cmd_t; INSERT INTO cmd_t (n) VALUES (-4)') AS vac2 \gset
SELECT retries.run_command($$INSERT INTO cmd_t (n) VALUES (-5); SELECT 1/0; INSERT INTO cmd_t (n) VALUES (-6)$$,
						   '1 10ms') AS autocommit \gset
SELECT retries.run_command($$BEGIN; INSERT INTO cmd_t (n) VALUES (-7); SELECT 1/0; COMMIT$$,
						   '1 10ms') AS block \gset
-- an error: retried if its SQLSTATE is in retry_on, else failed
SELECT retries.run_command($$DO 'BEGIN RAISE EXCEPTION ''later'' USING ERRCODE = ''RT001''; END'$$,
						   '1 10ms') AS retried \gset
SELECT retries.run_command('VACUUM cmd_missing', '3 10ms') AS missing \gset
SELECT (retries.wait(:retried, '180s')).state AS retried_state;
SELECT (retries.wait(:missing, '180s')).state AS missing_state;
SELECT (retries.wait(id, '180s')).state, count(*)
  FROM unnest(ARRAY[:who, :mv, :vac, :two_stmts, :vac2, :autocommit, :block]::bigint[]) id
 GROUP BY 1 ORDER BY 1;
SELECT n, who, sess, call = :who AS knows_its_call FROM cmd_t WHERE n < 0 ORDER BY n DESC;
SELECT a.call_id = :retried AS retried, a.attempt, a.outcome, a.sqlstate, a.message
  FROM retries.attempts a WHERE a.call_id IN (:retried, :missing, :autocommit, :block)
 ORDER BY a.call_id, a.attempt;
SELECT retries.result(:vac) AS no_result;
-- each attempt's last statement's completion tag (on success), and its process
SELECT a.call_id = :who AS who, a.command_tag, a.pid IS NOT NULL AS has_pid,
	   a.pid <> pg_backend_pid() AS not_this_session
  FROM retries.attempts a
 WHERE a.call_id IN (:who, :two_stmts, :vac, :vac2, :autocommit) ORDER BY a.call_id;

RESET ROLE;
DROP FUNCTION cmd_noop();
DROP MATERIALIZED VIEW cmd_mv;
DROP TABLE cmd_t;
REVOKE CREATE ON SCHEMA public FROM cmd_alice;
CALL test.reset();
DROP ROLE cmd_alice, cmd_bob;
