# The runner (src/engine/runner.c): SQL text run as a role in a process of
# its own, as psql runs a script: each statement commits on its own unless
# the text says BEGIN ... COMMIT, and the first error ends the run.  What cannot run in a transaction
# block or a function runs; the role cannot become another; the cap holds,
# even against code that traps its cancel; the outcome comes back.
#
# Driven through two C entry points bound by hand (not part of the
# extension's SQL): runner_start(text, role, cap_ms) and runner_poll().
#
# Where a step must happen while a procedure runs (a cancel, a call made
# after it, a schedule's firing), the procedure waits at a gate the test
# holds (RetriesTest's close_gate), never for a time the step is hoped to
# fit in.

use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RetriesTest;
use Test::More;
use Time::HiRes qw(time usleep);

my $node = PostgreSQL::Test::Cluster->new('runner');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'retries'
max_prepared_transactions = 2
restart_after_crash = on
});
$node->start;

$node->safe_psql('postgres', q{
CREATE EXTENSION retries;
CREATE FUNCTION runner_start(text, regrole, integer) RETURNS void
	AS 'retries', 'retries_debug_runner_start' LANGUAGE C STRICT;
CREATE FUNCTION runner_start_call(regprocedure, jsonb, regrole, integer) RETURNS void
	AS 'retries', 'retries_debug_runner_start_call' LANGUAGE C STRICT;
CREATE FUNCTION runner_poll() RETURNS text
	AS 'retries', 'retries_debug_runner_poll' LANGUAGE C;
CREATE ROLE alice LOGIN;
CREATE ROLE bob;
GRANT bob TO alice;
CREATE ROLE nologin_role NOLOGIN;
GRANT CREATE ON SCHEMA public TO alice;
CREATE SCHEMA hidden;
CREATE PROCEDURE hidden.p() LANGUAGE sql AS 'SELECT 1';
GRANT EXECUTE ON PROCEDURE hidden.p() TO alice;
CREATE PROCEDURE public.not_alices() LANGUAGE sql AS 'SELECT 1';
REVOKE EXECUTE ON PROCEDURE public.not_alices() FROM PUBLIC;
SET ROLE alice;
CREATE TABLE big (id int PRIMARY KEY, v text);
INSERT INTO big SELECT g, md5(g::text) FROM generate_series(1, 20000) g;
CREATE MATERIALIZED VIEW big_counts AS SELECT left(v, 1) AS k, count(*) AS n FROM big GROUP BY 1;
CREATE UNIQUE INDEX ON big_counts (k);
CREATE TABLE seen (n int, xid xid8 DEFAULT pg_current_xact_id(), who text DEFAULT session_user,
				   cur text DEFAULT current_user);
CREATE PROCEDURE three_commits() LANGUAGE plpgsql AS $$
BEGIN
	FOR i IN 1..3 LOOP
		INSERT INTO seen (n) VALUES (i);
		COMMIT;
	END LOOP;
END $$;
CREATE PROCEDURE add_rows(n int, tag text DEFAULT 'default tag') LANGUAGE plpgsql AS $$
BEGIN
	FOR i IN 1..n LOOP
		INSERT INTO seen (n, who) VALUES (i, tag);
		COMMIT;
	END LOOP;
	IF n > 3 THEN
		RAISE EXCEPTION 'too many' USING ERRCODE = 'RT001';
	END IF;
END $$;
-- both loop until the cap's cancel (trap_once) or the end of the process
-- after it (trap_cancel) stops them
CREATE FUNCTION trap_once() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	LOOP
		BEGIN
			PERFORM pg_sleep(0.05);    -- not a wait: the cap's cancel ends the loop
		EXCEPTION WHEN query_canceled THEN
			RETURN;
		END;
	END LOOP;
END $$;
CREATE FUNCTION trap_cancel() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	LOOP
		BEGIN
			PERFORM pg_sleep(0.05);    -- not a wait: the end of the process ends the loop
		EXCEPTION WHEN query_canceled THEN
			NULL;
		END;
	END LOOP;
END $$;
});

# (its timeout counts per query, not from its start: on a slow machine the
# runs below may together take longer than one query's timeout)
my $session = $node->background_psql('postgres');
$session->set_query_timer_restart();

# run(role, text, cap_ms): start the text, poll until it ends (no snapshot
# is held between polls: CREATE INDEX CONCURRENTLY waits for any)
sub run
{
	my ($role, $text, $cap) = @_;
	my $quoted = $text =~ s/'/''/gr;

	$session->query_safe("SELECT runner_start('$quoted', '$role', " . ($cap // 0) . ")");
	return outcome("\"$text\"");
}

# outcome(what): poll the run started until it ends, with a deadline
sub outcome
{
	my ($what) = @_;
	my $deadline = time + $PostgreSQL::Test::Utils::timeout_default;

	while (time < $deadline)
	{
		my $r = $session->query_safe("SELECT coalesce(runner_poll(), '-')");
		return $r if $r ne '-';
		usleep(20_000);    # poll
	}
	die "the runner of $what did not end in time";
}

is(run('alice', 'VACUUM (ANALYZE) big'), 'succeeded', 'VACUUM runs');
is($node->safe_psql('postgres',
		"SELECT last_vacuum IS NOT NULL FROM pg_stat_user_tables WHERE relname = 'big'"),
	't', '... and the table was vacuumed');

is(run('alice', 'CREATE INDEX CONCURRENTLY big_v ON big (v)'), 'succeeded',
	'CREATE INDEX CONCURRENTLY runs');
is($node->safe_psql('postgres',
		"SELECT indisvalid FROM pg_index WHERE indexrelid = 'big_v'::regclass"),
	't', '... and the index is valid');

is(run('alice', 'REFRESH MATERIALIZED VIEW CONCURRENTLY big_counts'), 'succeeded',
	'REFRESH MATERIALIZED VIEW CONCURRENTLY runs');

is(run('alice', 'CALL three_commits()'), 'succeeded', 'a procedure that commits runs');
is($node->safe_psql('postgres',
		"SELECT count(*), count(DISTINCT xid), min(who), min(cur) FROM seen"),
	'3|3|alice|alice', '... committing three times, as alice');
$node->safe_psql('postgres', 'TRUNCATE seen');

like(run('alice', 'INSERT INTO seen (n) VALUES (1); SELECT 1/0; INSERT INTO seen (n) VALUES (0)'),
	qr/^failed 22012: division by zero/, 'an error fails the run');
is($node->safe_psql('postgres', 'SELECT string_agg(n::text, \',\') FROM seen'), '1',
	'... the statement before it committed on its own, the one after it did not run');
$node->safe_psql('postgres', 'TRUNCATE seen');
like(run('alice', 'BEGIN; INSERT INTO seen (n) VALUES (1); SELECT 1/0; COMMIT'),
	qr/^failed 22012: division by zero/, 'an error in a block the text opened fails the run');
is($node->safe_psql('postgres', 'SELECT count(*) FROM seen'), '0',
	'... and the block is rolled back');

like(run('alice', 'BEGIN; INSERT INTO seen (n) VALUES (2)'),
	qr/^failed 25000: the command left a transaction block open/,
	'a transaction block left open fails the run');
is($node->safe_psql('postgres', 'SELECT count(*) FROM seen'), '0', '... and is rolled back');

is(run('alice', 'INSERT INTO seen (n) VALUES (3); COMMIT; INSERT INTO seen (n) VALUES (4)'),
	'succeeded', 'statements around a COMMIT run as a client\'s would');
is($node->safe_psql('postgres', 'SELECT string_agg(n::text, \',\' ORDER BY n) FROM seen'),
	'3,4', '... both committed');

# a procedure, called with a call's arguments, defaults filled in
sub run_call
{
	my ($role, $proc, $args, $cap) = @_;

	$session->query_safe(
		"SELECT runner_start_call('$proc', '$args', '$role', " . ($cap // 0) . ")");
	return outcome($proc);
}

$node->safe_psql('postgres', 'TRUNCATE seen');
is(run_call('alice', 'add_rows(int,text)', '[3]'), 'succeeded',
	'a procedure runs with its arguments');
is($node->safe_psql('postgres',
		"SELECT count(*), count(DISTINCT xid), min(who), min(cur) FROM seen"),
	'3|3|default tag|alice', '... committing after each row, its default filled in, as alice');
$node->safe_psql('postgres', 'TRUNCATE seen');
like(run_call('alice', 'add_rows(int,text)', '{"n": 4, "tag": "named"}'),
	qr/^failed RT001: too many/, 'its error comes back, by name too');
is($node->safe_psql('postgres', "SELECT count(*) FROM seen WHERE who = 'named'"), '4',
	'... after what it committed, which stays (at least once)');
$node->safe_psql('postgres', q{SET ROLE alice;
CREATE PROCEDURE add_many(VARIADIC ns int[]) LANGUAGE sql AS 'INSERT INTO seen (n) SELECT unnest(ns)';});
$node->safe_psql('postgres', 'TRUNCATE seen');
is(run_call('alice', 'add_many(int[])', '[[7, 8]]'), 'succeeded', 'a variadic procedure runs');
is($node->safe_psql('postgres', "SELECT string_agg(n::text, ',' ORDER BY n) FROM seen"), '7,8',
	'... with its array');
like(run_call('alice', 'hidden.p()', '[]'), qr/^failed 42501: permission denied for schema hidden/,
	'a procedure in a schema the role may not use is refused, though given by OID');
like(run_call('alice', 'not_alices()', '[]'), qr/^failed 42501: permission denied for (function|procedure) not_alices/,
	'one the role may not execute is refused');

# the role, and only the role
like(run('alice', 'SET ROLE bob'), qr/^failed 42501: a command run by retries cannot change its role/,
	'SET ROLE is refused, even to a role alice may become');
like(run('alice', 'SET "ROLE" = bob'), qr/^failed 42501: a command run by retries cannot change its role/,
	'... however it is spelt');
like(run('alice', 'SET SESSION AUTHORIZATION bob'), qr/^failed 42501/,
	'SET SESSION AUTHORIZATION is refused');
like(run('alice', "SELECT set_config('role', 'bob', false)"), qr/^failed 42501/,
	'set_config of role is refused');
$node->safe_psql('postgres', q{
CREATE FUNCTION public.as_bob() RETURNS text LANGUAGE sql SET role = 'bob' AS 'SELECT current_user';
GRANT EXECUTE ON FUNCTION public.as_bob() TO alice;});
like(run('alice', 'SELECT as_bob()'), qr/^failed 42501/, 'a function SET role clause is refused');
$node->safe_psql('postgres', q{
CREATE FUNCTION public.as_alice() RETURNS text LANGUAGE sql SET role = 'alice' AS 'SELECT current_user';
GRANT EXECUTE ON FUNCTION public.as_alice() TO alice;});
is(run('alice', 'SELECT as_alice()'), 'succeeded', '... unless it names the role itself');
is(run('alice', 'RESET ROLE; SET ROLE NONE; SET SESSION AUTHORIZATION DEFAULT; DISCARD ALL'),
	'succeeded', 'going back to the role itself is not refused (DISCARD ALL as in psql -f)');
is(run('alice', 'BEGIN; DISCARD ALL; COMMIT'),
	'failed 25001: DISCARD ALL cannot run inside a transaction block',
	'DISCARD ALL in a block the text opened fails as a client\'s would');
$node->safe_psql('postgres', 'ALTER ROLE alice SET role = bob; TRUNCATE seen');
is(run('alice', 'INSERT INTO seen (n) VALUES (10)'), 'succeeded',
	'a role whose login setting is SET role runs ...');
is($node->safe_psql('postgres', 'SELECT who, cur FROM seen'), 'alice|alice', '... as itself');
$node->safe_psql('postgres', 'ALTER ROLE alice RESET role; TRUNCATE seen');
like(run('alice', 'COPY seen FROM STDIN'), qr/^failed 0A000: a command run by retries cannot COPY from the client/,
	'COPY FROM STDIN is refused (the postmaster\'s standard input is no client)');
like(run('alice', 'COPY (SELECT repeat(\'x\', 100)) TO STDOUT'),
	qr/^failed 0A000: a command run by retries cannot COPY to the client/,
	'COPY TO STDOUT is refused (it would write into the server log)');
my $long = run('alice', q{DO $$BEGIN RAISE EXCEPTION '%', repeat('é', 9000); END $$});
like($long, qr/^failed P0001: (?:\xc3\xa9)+\.\.\.$/,
	'a long message comes back cut between characters, marked as cut');
cmp_ok(do { use bytes; length($long) - length('failed P0001: ') }, '==', 16383,
	'... at 16 kB');
like(run('alice', "BEGIN; INSERT INTO seen (n) VALUES (5); PREPARE TRANSACTION 'p'"),
	qr/^failed 0A000: a command run by retries cannot prepare a transaction/,
	'PREPARE TRANSACTION is refused');
is($node->safe_psql('postgres', 'SELECT count(*) FROM pg_prepared_xacts'), '0',
	'... and nothing is left prepared');
like(run('alice', 'LISTEN somewhere'), qr/^failed 0A000: cannot execute LISTEN within a background process/,
	'LISTEN is refused');
like(run('nologin_role', 'SELECT 1'), qr/^failed 28000: role "nologin_role" is not permitted to log in/,
	'a role that may not log in: the run fails with why');
$node->safe_psql('postgres', "CREATE ROLE expired LOGIN VALID UNTIL '2000-01-01'");
like(run('expired', 'SELECT 1'), qr/^failed 42501: role "expired" that scheduled the call has expired/,
	'so does a role past its VALID UNTIL');
like(run('alice', 'VACUUM pg_authid'), qr/^succeeded$/,
	'a VACUUM of what alice does not own skips it, as for a client');

# the cap.  The bounds on the time taken are robust: the cap is 0.3 s and
# the grace after it 2 s, so a run ends in about 0.5 s and 2.5 s, seconds
# even on a machine ten times slower; 30 s is far beyond that, and still
# half the 60 s sleep that the cancel must cut short (trap_cancel never
# ends by itself: the process must end it)
my $t0 = time;
# not a wait: the cap cuts the sleep short
like(run('alice', 'SELECT pg_sleep(60)', 300),
	qr/^failed 57014: canceling the command: it reached its time limit/,
	'a run past its cap is cancelled');
cmp_ok(time - $t0, '<', 30, '... long before its sleep would end');
$t0 = time;
like(run('alice', 'SELECT trap_cancel()', 300),
	qr/^failed 57P01: terminating the command: it went on past its time limit/,
	'code that traps its cancel ends with its process, 2 s after the cap');
cmp_ok(time - $t0, '<', 30, '... in time');

$node->safe_psql('postgres', 'TRUNCATE seen');
like(run('alice', 'BEGIN; INSERT INTO seen (n) VALUES (9); SELECT trap_once(); COMMIT', 300),
	qr/^failed 57014: canceling the command: it reached its time limit/,
	'a statement that traps the cap\'s cancel and ends within the grace fails all the same');
is($node->safe_psql('postgres', 'SELECT count(*) FROM seen'), '0', '... its work rolled back');

# a FATAL is known whatever log_min_messages says
$node->safe_psql('postgres', "ALTER SYSTEM SET log_min_messages = panic; SELECT pg_reload_conf()");
like(run('alice', 'SELECT trap_cancel()', 300),
	qr/^failed 57P01: terminating the command: it went on past its time limit/,
	'with log_min_messages = panic, the end after the cap is reported');
like(run('nologin_role', 'SELECT 1'), qr/^failed 28000/, '... and so is a refused login');
$node->safe_psql('postgres', "ALTER SYSTEM RESET log_min_messages; SELECT pg_reload_conf()");

# end to end: an annotated procedure, called, runs in a runner; its
# retryable error is retried; each attempt recorded
$node->safe_psql('postgres', q{
SET ROLE alice;
CREATE TABLE maint (n int, xid xid8 DEFAULT pg_current_xact_id());
CREATE PROCEDURE maintain(rounds int) LANGUAGE plpgsql AS $$
BEGIN
	IF NOT EXISTS (SELECT FROM maint WHERE n = 0) THEN
		INSERT INTO maint (n) VALUES (0);
		COMMIT;
		RAISE EXCEPTION 'not yet' USING ERRCODE = 'RT001';
	END IF;
	FOR i IN 1..rounds LOOP
		INSERT INTO maint (n) VALUES (i);
		COMMIT;
	END LOOP;
END $$;
SELECT retries.annotate('maintain(int)', '3 10ms');
});
my $call = $node->safe_psql('postgres',
	"SET ROLE alice; SELECT retries.call('maintain(int)', '[3]')");
ok($node->poll_query_until('postgres',
		"SELECT state = 'succeeded' FROM retries.calls WHERE id = $call"),
	'a called procedure succeeds');
is($node->safe_psql('postgres',
		"SELECT string_agg(outcome || coalesce(' ' || sqlstate, ''), ', ' ORDER BY attempt)"
		. " FROM retries.attempts WHERE call_id = $call"),
	'retry RT001, succeeded', '... after a retry, both attempts recorded');
is($node->safe_psql('postgres',
		'SELECT count(*), count(DISTINCT xid) FROM maint WHERE n > 0'),
	'3|3', '... its three commits made');

# cancel() of a call that a runner runs waits for its attempt, then acts
# as for a call of a batch: a retry does not happen.  The attempt waits at
# gate 1 until the cancel() waits for it.
my $gate = close_gate($node, 'postgres', 1);
$node->safe_psql('postgres', q{
SET ROLE alice;
CREATE PROCEDURE slow_fail() LANGUAGE plpgsql AS $$
BEGIN
	PERFORM } . gate_sql(1) . q{;
	RAISE EXCEPTION 'again' USING ERRCODE = 'RT001';
END $$;
SELECT retries.annotate('slow_fail()', '5 10ms');
});
$call = $node->safe_psql('postgres', "SET ROLE alice; SELECT retries.call('slow_fail()')");
wait_at_gate($node, 'postgres', 1, 1, 'a slow procedure runs');
my $canceller = $node->background_psql('postgres');
$canceller->query_until(qr/sent\n/,
	"\\echo sent\nSET ROLE alice;\nSELECT retries.cancel($call);\n");
wait_until($node, 'postgres',
	"SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
	  . " AND query LIKE '%retries.cancel($call)%' AND pid <> pg_backend_pid()",
	'1', 'cancel() of it waits for its attempt ...');
open_gate($gate);
like($canceller->query_until(qr/^[tf]\n/m, ''), qr/^t$/m,
	'... which fails, and cancel() returns true');
$canceller->quit;
is($node->safe_psql('postgres',
		"SELECT c.state, (SELECT string_agg(outcome::text, ',') FROM retries.attempts WHERE call_id = c.id)"
		. " FROM retries.calls c WHERE id = $call"),
	'cancelled|retry', '... and the call is cancelled instead of retried');

$session->quit;
my $log = slurp_file($node->logfile);
unlike($log, qr/terminated by signal|server process .* was terminated/,
	'no process was killed by a signal');

# long procedures do not hold back the calls of functions, nor each other:
# both run at once, in runner places, while the database's workers run the
# calls.  The procedures run until the test opens gate 4.
$gate = close_gate($node, 'postgres', 4);
$node->safe_psql('postgres', q{
SET ROLE alice;
CREATE TABLE quick_done (n int);
CREATE FUNCTION quick(n int) RETURNS void LANGUAGE sql AS 'INSERT INTO quick_done VALUES (n)';
SELECT retries.annotate('quick(int)', '3 10ms');
CREATE PROCEDURE long_proc() LANGUAGE sql AS 'SELECT } . gate_sql(4) . q{';
SELECT retries.annotate('long_proc()', '3 10ms');
SELECT retries.call('long_proc()') FROM generate_series(1, 2);
});
wait_at_gate($node, 'postgres', 4, 2, 'two long procedures run at once');
is($node->safe_psql('postgres',
		"SELECT count(*) FROM retries.calls WHERE fn = 'long_proc()'::regprocedure AND state = 'running'"),
	'2', '... both');
$node->safe_psql('postgres',
	"SET ROLE alice; SELECT retries.call('quick(int)', jsonb_build_array(g)) FROM generate_series(1, 50) g");
ok($node->poll_query_until('postgres', 'SELECT count(*) = 50 FROM quick_done'),
	'calls of a function made after it run');
is($node->safe_psql('postgres',
		"SELECT count(*) FROM retries.calls WHERE fn = 'long_proc()'::regprocedure AND state = 'succeeded'"),
	'0', '... before the procedures end');
open_gate($gate);
ok($node->poll_query_until('postgres',
		"SELECT count(*) = 2 FROM retries.calls WHERE fn = 'long_proc()'::regprocedure AND state = 'succeeded'"),
	'then both procedures run');

# a role's open transaction that makes a call after a procedure's call
# that a runner runs does not keep its worker from recording its outcome
$node->safe_psql('postgres', 'TRUNCATE quick_done');
$gate = close_gate($node, 'postgres', 4);
$call = $node->safe_psql('postgres', "SET ROLE alice; SELECT retries.call('long_proc()')");
wait_at_gate($node, 'postgres', 4, 1, 'a procedure runs');
my $open = $node->background_psql('postgres');
$open->query_safe('BEGIN');
$open->query_safe("SET ROLE alice; SELECT retries.call('quick(int)', '[1]', after => ARRAY[$call])");
open_gate($gate);
ok($node->poll_query_until('postgres',
		"SELECT state = 'succeeded' FROM retries.calls WHERE id = $call"),
	'... and its outcome is recorded while a transaction that made a call after it stays open');
$open->query_safe('COMMIT');
$open->quit;
ok($node->poll_query_until('postgres', 'SELECT count(*) = 1 FROM quick_done'),
	'... then the call made after it runs');

# cancel() from a session holding a lock that the procedure waits for: a
# deadlock that PostgreSQL detects, not a wait until the time limit
$node->safe_psql('postgres', q{
SET ROLE alice;
CREATE TABLE guarded (n int);
CREATE PROCEDURE needs_guarded() LANGUAGE sql AS 'INSERT INTO guarded VALUES (1)';
SELECT retries.annotate('needs_guarded()', '1 10ms');
});
my $holder = $node->background_psql('postgres');
$holder->query_safe('BEGIN');
$holder->query_safe('LOCK TABLE guarded');
$call = $node->safe_psql('postgres', "SET ROLE alice; SELECT retries.call('needs_guarded()')");
ok($node->poll_query_until('postgres',
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'retries runner'"
		. " AND wait_event_type = 'Lock'"),
	'a procedure waits for a lock a session holds');
# (the deadlock is found after deadlock_timeout, 1 s, so seconds even on a
# slow machine; undetected, the cancel() would wait for the procedure's
# time limit, retries.max_attempt_time's hour)
my $t1 = time;
my ($ok_cancel) = eval { $holder->query("SELECT retries.cancel($call)") };
cmp_ok(time - $t1, '<', 60, 'that session\'s cancel() ends: the deadlock is detected');
$holder->quit;
# (the detector ends the process whose wait found the cycle: the
# procedure's, and the call is cancelled or fails, or, when the cancel()
# began to wait more than deadlock_timeout after the procedure, the
# session's cancel(), and the procedure then runs once the session ends)
ok($node->poll_query_until('postgres',
		"SELECT state IN ('succeeded', 'failed', 'cancelled') FROM retries.calls WHERE id = $call"),
	'... and the call ends');

# a schedule of a procedure with overlap 'skip' does not start it again
# while it runs: its first call waits at gate 3 while the firings of the
# next seconds come, and they make no call
$gate = close_gate($node, 'postgres', 3);
$node->safe_psql('postgres', q{
SET ROLE alice;
CREATE TABLE runs (started timestamptz, ended timestamptz);
CREATE PROCEDURE gated_run() LANGUAGE plpgsql AS $$
DECLARE
	t timestamptz := clock_timestamp();
BEGIN
	PERFORM } . gate_sql(3) . q{;
	INSERT INTO runs VALUES (t, clock_timestamp());
END $$;
SELECT retries.annotate('gated_run()', '1 10ms');
SELECT retries.schedule('often', 'gated_run()', '1s');
});
wait_at_gate($node, 'postgres', 3, 1, 'a procedure scheduled every second runs');
wait_until($node, 'postgres',
	"SELECT firings || ' ' || (skipped > 0) FROM retries.schedules WHERE name = 'often'",
	'1 true', '... and the firings that come while it runs make no call (overlap skip)');
open_gate($gate);
ok($node->poll_query_until('postgres', 'SELECT count(*) >= 2 FROM runs'),
	'... then it runs again');
$node->safe_psql('postgres', "SET ROLE alice; SELECT retries.unschedule('often')");
is($node->safe_psql('postgres',
		'SELECT count(*) FROM runs a JOIN runs b ON a.ctid < b.ctid'
		. ' AND a.started < b.ended AND b.started < a.ended'),
	'0', '... never twice at once (overlap skip)');

# an error in the worker while its runner runs: the worker exits, its
# successor charges the attempt, and the call runs again.  The first
# attempt waits at gate 2, which stays closed: the worker's end ends it.
$gate = close_gate($node, 'postgres', 2);
$node->safe_psql('postgres', q{
SET ROLE alice;
CREATE TABLE tries (attempt int);
CREATE PROCEDURE slow_once() LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO tries VALUES (retries.current_attempt());
	COMMIT;
	IF retries.current_attempt() = 1 THEN
		PERFORM } . gate_sql(2) . q{;
	END IF;
END $$;
SELECT retries.annotate('slow_once()', '3 10ms');
});
$call = $node->safe_psql('postgres', "SET ROLE alice; SELECT retries.call('slow_once()')");
wait_at_gate($node, 'postgres', 2, 1, 'a slow procedure started');
is($node->safe_psql('postgres',
		"SELECT pg_cancel_backend(pid) FROM retries.workers WHERE current_call = $call"),
	't', 'its worker is cancelled');
ok($node->poll_query_until('postgres',
		"SELECT state = 'succeeded' FROM retries.calls WHERE id = $call"),
	'... meanwhile, and the call still ends');
open_gate($gate);
is($node->safe_psql('postgres',
		"SELECT string_agg(outcome::text, ',' ORDER BY attempt) FROM retries.attempts WHERE call_id = $call"),
	'interrupted,succeeded', '... its attempt charged interrupted, then run again');

# a procedure's time limit: its policy's timeout, and
# retries.max_attempt_time, each named in the attempt's message
$node->safe_psql('postgres', q{
SET ROLE alice;
-- not a wait: the timeout cuts the sleep short
CREATE PROCEDURE nap() LANGUAGE sql AS 'SELECT pg_sleep(300)';
SELECT retries.annotate('nap()', '1 10ms', timeout => '1s');
-- not a wait: retries.max_attempt_time cuts the sleep short
CREATE PROCEDURE nap_long() LANGUAGE sql AS 'SELECT pg_sleep(300)';
SELECT retries.annotate('nap_long()', '1 10ms');
});
$call = $node->safe_psql('postgres', "SET ROLE alice; SELECT retries.call('nap()')");
ok($node->poll_query_until('postgres',
		"SELECT state = 'failed' FROM retries.calls WHERE id = $call"),
	'a procedure past its timeout fails');
is($node->safe_psql('postgres',
		"SELECT outcome || ' ' || sqlstate || ' ' || message FROM retries.attempts WHERE call_id = $call"),
	'timeout 57014 attempt timed out after 1s', '... its attempt a timeout');
$node->safe_psql('postgres',
	"ALTER SYSTEM SET retries.max_attempt_time = 1; SELECT pg_reload_conf()");
my $log_at = -s $node->logfile;
$call = $node->safe_psql('postgres', "SET ROLE alice; SELECT retries.call('nap_long()')");
ok($node->poll_query_until('postgres',
		"SELECT state = 'failed' FROM retries.calls WHERE id = $call"),
	'a procedure past retries.max_attempt_time fails');
is($node->safe_psql('postgres',
		"SELECT outcome || ' ' || sqlstate || ' ' || message FROM retries.attempts WHERE call_id = $call"),
	'timeout 57014 attempt ran past retries.max_attempt_time (1s)',
	'... its attempt says the cap stopped it');
ok($node->log_contains(qr/attempt 1 of call $call ran past retries\.max_attempt_time/, $log_at),
	'... and the cap is logged');
$node->safe_psql('postgres',
	"ALTER SYSTEM RESET retries.max_attempt_time; SELECT pg_reload_conf()");

# a procedure knows its call and attempt; killed in the middle (the server
# restarts), its attempt is charged interrupted and it runs again: what the
# first attempt committed stays (at least once)
$node->safe_psql('postgres', q{
SET ROLE alice;
CREATE TABLE steps (what text, call bigint, attempt int);
CREATE PROCEDURE long_job() LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO steps VALUES ('start', retries.current_call(), retries.current_attempt());
	COMMIT;
	IF retries.current_attempt() = 1 THEN
		PERFORM pg_sleep(300);    -- not a wait: the SIGKILL below cuts it short
	END IF;
	INSERT INTO steps VALUES ('done', retries.current_call(), retries.current_attempt());
END $$;
SELECT retries.annotate('long_job()', '3 10ms');
});
$call = $node->safe_psql('postgres', "SET ROLE alice; SELECT retries.call('long_job()')");
ok($node->poll_query_until('postgres',
		"SELECT count(*) = 1 FROM steps WHERE what = 'start' AND call = $call AND attempt = 1"),
	'a procedure sees its call and attempt');
my $runner = $node->safe_psql('postgres',
	"SELECT pid FROM pg_stat_activity WHERE backend_type = 'retries runner'");
like($runner, qr/^\d+$/, 'its runner is listed in pg_stat_activity');
is($node->safe_psql('postgres', "SELECT state FROM pg_stat_activity WHERE pid = $runner"),
	'active', '... as active');
kill 'KILL', $runner;
# (wait_until, not poll_query_until: psql of a poll that meets the crash
# restart may exit before its query is written, and the broken pipe would
# end the test)
call_reaches($node, 'postgres', $call, 'succeeded',
	'after the server restarts, the call runs again and succeeds');
is($node->safe_psql('postgres',
		"SELECT string_agg(outcome::text, ',' ORDER BY attempt) FROM retries.attempts WHERE call_id = $call"),
	'interrupted,succeeded', '... its killed attempt charged interrupted');
is($node->safe_psql('postgres',
		"SELECT string_agg(what || attempt, ',' ORDER BY what DESC, attempt) FROM steps"),
	'start1,start2,done2', '... what the first attempt committed kept (at least once)');
$node->stop;
done_testing();
