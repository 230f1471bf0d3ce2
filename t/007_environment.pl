# The world changes under scheduled and running calls: each change ends
# with a recorded outcome for every call whose data survives it, no worker
# left stuck, and no crash or restart loop.
#
#   a. ALTER DATABASE ... RENAME with a call running: the rename succeeds
#      (the workers get out of its way); a rename that fails for a user's
#      session leaves the workers back at once; the workers come back and
#      run everything;
#   b. DROP DATABASE with a call running: it succeeds, the workers are gone
#      for good, the launcher does not start them again; WITH (FORCE) too;
#   c. ALLOW_CONNECTIONS false: the workers leave (the database is closed,
#      to them as to everyone) without filling the log, and come back when
#      connections are allowed again;
#   d. the role that scheduled calls is dropped, or loses LOGIN: its
#      pending calls fail, saying why; LOGIN given back, they can be run
#      again;
#   e. the function is dropped and created again with another signature
#      between two attempts: the call fails naming the function; replaced
#      with the same signature (CREATE OR REPLACE), the next attempt runs
#      the new body;
#   f. DROP EXTENSION with a call running: it neither waits for the call
#      nor fails; the workers stop; a DROP rolled back brings them back;
#      CREATE EXTENSION again starts them.
#
# Throughout, the workers of 'postgres' must carry on undisturbed, and the
# server log must show no crash: no process terminated by a signal, no exit
# code other than 0 or 1 (a worker told to stop exits FATAL, with 1), no
# crash restart.
#
# results(id, n) counts the runs of each call's effects: n = 2 would be a
# call whose effects committed twice.
#
# No step depends on the machine's speed.  A call that a command must find
# running sleeps for 300 s, which the command cuts short (its first attempt
# is then interrupted), or, where the test keeps a session in the database,
# waits at a gate the test holds (t/RetriesTest.pm).  Workers that must be
# back "at once" after a command must be back before the 30 s pause that
# stopping them sets would have ended since the command started.  Workers
# that must NOT start are watched for at least as long as workers took to
# start in this run.

use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RetriesTest;
use Test::More;
use Time::HiRes qw(time);

my $node = retries_node('environment');
$node->start;

# setup_db(DB): the extension, results, and three annotated functions:
#   work(id)       records its run;
#   slow(id, secs) sleeps 'secs' at its first attempt, then records its run;
#   held(id)       waits at gate 1 at its first attempt, then records its
#                  run.
sub setup_db
{
	my ($db) = @_;
	$node->safe_psql(
		$db, q{
CREATE EXTENSION retries;
CREATE TABLE results (id bigint PRIMARY KEY, n int NOT NULL DEFAULT 1,
	note text);
CREATE FUNCTION work(id bigint) RETURNS void LANGUAGE sql AS $$
	INSERT INTO results AS r (id) VALUES ($1)
		ON CONFLICT (id) DO UPDATE SET n = r.n + 1;
$$;
SELECT retries.annotate('work(bigint)', '3 10ms');
CREATE FUNCTION slow(k bigint, secs float8) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	IF retries.current_attempt() = 1 THEN
		PERFORM pg_sleep(secs);		-- not a wait: the command under test cuts it short
	END IF;
	INSERT INTO results AS r (id, note) VALUES (k, 'slow')
		ON CONFLICT (id) DO UPDATE SET n = r.n + 1;
END $$;
SELECT retries.annotate('slow(bigint,float8)', '5 100ms');
CREATE FUNCTION held(k bigint) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	IF retries.current_attempt() = 1 THEN
		PERFORM } . gate_sql(1) . q{;
	END IF;
	INSERT INTO results AS r (id, note) VALUES (k, 'held')
		ON CONFLICT (id) DO UPDATE SET n = r.n + 1;
END $$;
SELECT retries.annotate('held(bigint)', '5 100ms');
});
	return;
}

# How long slow() sleeps when a command must cut it short: a command that
# waited for it would take minutes
my $SLOW = 300;

# start_slow(DB, ID, SECS, [ROLE]): schedule slow(ID, SECS), as ROLE if
# given, and wait until a worker runs it; returns the call id.  slow's
# results are apart from work's: its row is ID + 1,000,000.
sub start_slow
{
	my ($db, $id, $secs, $role) = @_;
	my $set_role = defined $role ? "SET ROLE $role; " : '';
	$id += 1_000_000;
	my $call = $node->safe_psql($db,
		"${set_role}SELECT retries.call('slow(bigint,float8)', '[$id, $secs]')");
	wait_until($node, $db,
		"SELECT state FROM retries.calls WHERE id = $call",
		'running', "$db: call $call (slow) is running");
	return $call;
}

# start_held(DB, ID, ROLE): schedule held(ID) as ROLE, and wait until it
# waits at gate 1 (which the caller holds); returns the call id.  Its row
# of results is ID + 1,000,000.
sub start_held
{
	my ($db, $id, $role) = @_;
	$id += 1_000_000;
	my $call = $node->safe_psql($db,
		"SET ROLE $role; SELECT retries.call('held(bigint)', '[$id]')");
	wait_at_gate($node, $db, 1, 1, "$db: call $call (held) waits at the gate");
	return $call;
}

# schedule_later(DB, ROLE, FROM, TO): as ROLE, the work calls of ids
# FROM..TO, due in an hour
sub schedule_later
{
	my ($db, $role, $from, $to) = @_;
	$node->safe_psql($db,
		"SET ROLE $role; SELECT retries.call('work(bigint)', jsonb_build_array(i),"
		  . " run_at => now() + interval '1 hour') FROM generate_series($from, $to) i");
	return;
}

# retry_work_now(DB, CONDITION): retry_now every work call that meets
# CONDITION (SQL over retries.calls)
sub retry_work_now
{
	my ($db, $condition) = @_;
	$node->safe_psql($db,
		"SELECT retries.retry_now(id) FROM retries.calls"
		  . " WHERE fn = 'work(bigint)'::regprocedure AND $condition");
	return;
}

# history(DB, CALL): the call's attempts, as '1:interrupted,2:succeeded'
sub history
{
	my ($db, $call) = @_;
	return $node->safe_psql($db,
		"SELECT string_agg(attempt || ':' || outcome, ',' ORDER BY attempt)"
		  . " FROM retries.attempts WHERE call_id = $call");
}

# all_ran_once(DB, FROM, TO, NAME): the work calls of ids FROM..TO all
# succeed, and each committed its effects exactly once
sub all_ran_once
{
	my ($db, $from, $to, $name) = @_;
	my $n = $to - $from + 1;
	wait_until(
		$node, $db,
		"SELECT count(*) FILTER (WHERE c.state = 'succeeded')"
		  . " || ',' || (SELECT count(*) FROM results r"
		  . "   WHERE r.id BETWEEN $from AND $to AND r.n = 1)"
		  . " || ',' || (SELECT count(*) FROM results r"
		  . "   WHERE r.id BETWEEN $from AND $to AND r.n > 1)"
		  . " FROM retries.calls c WHERE c.fn = 'work(bigint)'::regprocedure"
		  . " AND (c.args->>0)::bigint BETWEEN $from AND $to",
		"$n,$n,0", $name);
	return;
}

# count_log(OFFSET, REGEX): lines of the server log since OFFSET matching,
# leaving out this test's own statements (log_statement = all)
sub count_log
{
	my ($offset, $re) = @_;
	return scalar grep { /$re/ && !/ 007_environment\.pl / && !/^\s/ }
	  split /\n/, slurp_file($node->logfile, $offset);
}

my $launcher_query =
  "SELECT pid FROM pg_stat_activity WHERE backend_type = 'retries launcher'";

# workers of 'postgres': they must outlive all that follows
my $t0 = time();
setup_db('postgres');
wait_until($node, 'postgres', workers_query('postgres'),
	'2', 'postgres: two workers start');
# how long that took: the least time to watch for workers that must not
# start
my $startup = time() - $t0;

# watch(SECONDS): SECONDS, or longer if workers took longer to start
sub watch
{
	my ($seconds) = @_;
	return $startup > $seconds ? sprintf('%.1f', $startup) : $seconds;
}
my $postgres_pids = worker_pids($node, 'postgres');
my $launcher_pid = $node->safe_psql('postgres', $launcher_query);

###########################################################################
# a. ALTER DATABASE ... RENAME
###########################################################################

my $offset = -s $node->logfile;
$node->safe_psql('postgres', 'CREATE DATABASE ren_a');
setup_db('ren_a');
wait_until($node, 'postgres', workers_query('ren_a'),
	'2', 'a: two workers in ren_a');

# a user's session in the database: the rename fails, as it would without
# the extension, and the workers it stopped come back at once, not after
# some pause
my $slow1 = start_slow('ren_a', 1, $SLOW);
my $session = $node->background_psql('ren_a');
$t0 = time();
my ($ret, $stdout, $stderr) =
  $node->psql('postgres', 'ALTER DATABASE ren_a RENAME TO ren_b',
	timeout => 60);
isnt($ret, 0, 'a: the rename fails while a user is connected');
like(
	$stderr,
	qr/database "ren_a" is being accessed by other users/,
	'a: for the user session, as without the extension');
workers_back_before_pause($node, 'ren_a', $t0, 'a: the workers are back at once');
wait_until($node, 'ren_a',
	"SELECT state FROM retries.calls WHERE id = $slow1",
	'succeeded', 'a: the call they were running is run again');
is(history('ren_a', $slow1), '1:interrupted,2:succeeded',
	'a: its first attempt is recorded as interrupted');
$session->quit;

# with no session left, the rename succeeds while a call runs and others
# are scheduled; they all run in the renamed database
my $slow2 = start_slow('ren_a', 2, $SLOW);
$node->safe_psql('ren_a',
	"SELECT retries.call('work(bigint)', jsonb_build_array(i),"
	  . " run_at => now() + interval '2 s') FROM generate_series(101, 300) i");
$t0 = time();
($ret, $stdout, $stderr) =
  $node->psql('postgres', 'ALTER DATABASE ren_a RENAME TO ren_b',
	timeout => 60);
is($ret, 0, 'a: ALTER DATABASE RENAME succeeds while a call runs')
  or diag($stderr);
# (the call sleeps for minutes: a command that waited for it would not end
# within the minute allowed; its interrupted attempt, below, shows it too)
cmp_ok(time() - $t0, '<', 60, 'a: without waiting for the call');
workers_back_before_pause($node, 'ren_b', $t0, 'a: the workers come back in ren_b, at once');
wait_until($node, 'ren_b',
	"SELECT state FROM retries.calls WHERE id = $slow2",
	'succeeded', 'a: the call that was running succeeds');
is(history('ren_b', $slow2), '1:interrupted,2:succeeded',
	'a: its attempt cut short by the rename counts as interrupted');
all_ran_once('ren_b', 101, 300,
	'a: the calls scheduled across the rename all run, once');

# the other commands that need the database to themselves: the workers
# get out of their way too, and come back
my $tablespace = PostgreSQL::Test::Utils::tempdir();
$node->safe_psql('postgres', "CREATE TABLESPACE elsewhere LOCATION '$tablespace'");
my $n = 10;
for my $cmd ('ALTER DATABASE ren_b SET TABLESPACE elsewhere',
	'CREATE DATABASE copy_a TEMPLATE ren_b')
{
	my $slow = start_slow('ren_b', ++$n, $SLOW);
	$t0 = time();
	($ret, $stdout, $stderr) = $node->psql('postgres', $cmd, timeout => 60);
	is($ret, 0, "a: $cmd succeeds while a call runs") or diag($stderr);
	cmp_ok(time() - $t0, '<', 60, "a: $cmd does not wait for the call");
	workers_back_before_pause($node, 'ren_b', $t0, "a: after $cmd the workers come back, at once");
	wait_until($node, 'ren_b',
		"SELECT state FROM retries.calls WHERE id = $slow",
		'succeeded', "a: after $cmd the call that was running succeeds");
	is(history('ren_b', $slow), '1:interrupted,2:succeeded',
		"a: $cmd: the attempt it cut short counts as interrupted");
}
# the copy is a database with the extension like any other: it gets
# workers of its own
wait_until($node, 'postgres', workers_query('copy_a'),
	'2', 'a: the copy has workers of its own');
no_crash($node, $offset, 'a: no crash in the server log');

###########################################################################
# b. DROP DATABASE
###########################################################################

$offset = -s $node->logfile;
$node->safe_psql('postgres', 'CREATE DATABASE drop_b');
setup_db('drop_b');
wait_until($node, 'postgres', workers_query('drop_b'),
	'2', 'b: two workers in drop_b');
start_slow('drop_b', 1, $SLOW);
schedule_range($node, 'drop_b', 'work(bigint)', 1, 2000);
my $gone_query =
    "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'retries worker'"
  . " AND (datname IS NULL OR datname NOT IN"
  . "  (SELECT datname FROM pg_database WHERE datname <> 'drop_b'))";

# a failed DROP DATABASE (a user is connected) leaves the workers back at
# once too
$session = $node->background_psql('drop_b');
$t0 = time();
($ret, $stdout, $stderr) =
  $node->psql('postgres', 'DROP DATABASE drop_b', timeout => 60);
isnt($ret, 0, 'b: DROP DATABASE fails while a user is connected');
workers_back_before_pause($node, 'drop_b', $t0, 'b: the workers are back at once');
$session->quit;

$t0 = time();
($ret, $stdout, $stderr) =
  $node->psql('postgres', 'DROP DATABASE drop_b', timeout => 60);
is($ret, 0, 'b: DROP DATABASE succeeds while a call runs') or diag($stderr);
cmp_ok(time() - $t0, '<', 60, 'b: without waiting for the call');
wait_until($node, 'postgres', $gone_query, '0',
	'b: no worker of drop_b is left');
stays_true($node, 'postgres', "SELECT ($gone_query) = 0", watch(3),
	'b: and the launcher starts none again');

# WITH (FORCE): the user session is ended by PostgreSQL, the workers by
# the extension
$node->safe_psql('postgres', 'CREATE DATABASE drop_c');
setup_db('drop_c');
wait_until($node, 'postgres', workers_query('drop_c'),
	'2', 'b: two workers in drop_c');
start_slow('drop_c', 1, $SLOW);
$session = $node->background_psql('drop_c', on_error_stop => 0);
($ret, $stdout, $stderr) =
  $node->psql('postgres', 'DROP DATABASE drop_c WITH (FORCE)',
	timeout => 60);
is($ret, 0, 'b: DROP DATABASE WITH (FORCE) succeeds while a call runs')
  or diag($stderr);
wait_until($node, 'postgres', $gone_query, '0',
	'b: no worker of drop_c is left');
eval { $session->quit; };

is($node->safe_psql('postgres', $launcher_query),
	$launcher_pid, 'b: the launcher never restarted');
cmp_ok(count_log($offset, qr/database .* does not exist/),
	'<=', 2, 'b: no worker keeps trying to connect to a dropped database');
no_crash($node, $offset, 'b: no crash in the server log');

###########################################################################
# c. ALLOW_CONNECTIONS false, then true
###########################################################################

$offset = -s $node->logfile;
$node->safe_psql('postgres', 'CREATE DATABASE closed_c');
setup_db('closed_c');
wait_until($node, 'postgres', workers_query('closed_c'),
	'2', 'c: two workers in closed_c');
my $slow3 = start_slow('closed_c', 1, $SLOW);
$node->safe_psql('closed_c',
	"SELECT retries.call('work(bigint)', jsonb_build_array(i),"
	  . " run_at => now() + interval '1 s') FROM generate_series(1, 500) i");
my $closed_pids = join '|', split /,/, worker_pids($node, 'closed_c');
$node->safe_psql('postgres',
	'ALTER DATABASE closed_c WITH ALLOW_CONNECTIONS false');
wait_until($node, 'postgres', workers_query('closed_c'),
	'0', 'c: the workers leave a database that allows no connections');
my $closed_offset = -s $node->logfile;
stays_true($node, 'postgres',
	'SELECT (' . workers_query('closed_c') . ') = 0',
	watch(5), 'c: and none comes back while it allows none');
# (lines of the workers that left, or about them, may still come: a worker
# leaves pg_stat_activity before its process ends, and the postmaster logs
# the exit of one that was stopped only when it reaps it; under ASan that
# is after the leak check, which takes a while)
is( count_log(
		$closed_offset,
		qr/^(?!.*(?:\[(?:$closed_pids)\]|\(PID (?:$closed_pids)\) exited))./),
	0,
	'c: meanwhile nothing is logged (no worker tries to connect)');
$node->safe_psql('postgres',
	'ALTER DATABASE closed_c WITH ALLOW_CONNECTIONS true');
wait_until($node, 'postgres', workers_query('closed_c'),
	'2', 'c: connections allowed again: the workers come back');
wait_until($node, 'closed_c',
	"SELECT state FROM retries.calls WHERE id = $slow3",
	'succeeded', 'c: the call they were running succeeds');
is(history('closed_c', $slow3), '1:interrupted,2:succeeded',
	'c: its attempt cut short counts as interrupted');
all_ran_once('closed_c', 1, 500,
	'c: the calls due while it was closed all run, once');
no_crash($node, $offset, 'c: no crash in the server log');

###########################################################################
# d. roles: dropped, NOLOGIN
###########################################################################

$offset = -s $node->logfile;
$node->safe_psql('postgres', 'CREATE DATABASE roles_d');
setup_db('roles_d');
$node->safe_psql(
	'roles_d', q{
CREATE ROLE alice LOGIN;
CREATE ROLE bob LOGIN;
GRANT SELECT, INSERT, UPDATE ON results TO alice, bob;
});
wait_until($node, 'postgres', workers_query('roles_d'),
	'2', 'd: two workers in roles_d');

# alice: a call running (at the gate) when she is dropped, ten calls due
# in an hour
schedule_later('roles_d', 'alice', 1, 10);
my $gate = close_gate($node, 'roles_d', 1);
my $alice_running = start_held('roles_d', 100, 'alice');
$node->safe_psql('roles_d', 'DROP OWNED BY alice; DROP ROLE alice');
pass('d: DROP ROLE alice succeeds while she has calls');
open_gate($gate);
wait_until(
	$node, 'roles_d',
	"SELECT state IN ('succeeded', 'failed') FROM retries.calls"
	  . " WHERE id = $alice_running",
	't', 'd: her running call ends with a recorded outcome');
note('the running call: '
	  . $node->safe_psql('roles_d',
		"SELECT state || ' ' || coalesce(last_sqlstate, '') || ' '"
		  . " || coalesce(last_message, '')"
		  . " FROM retries.calls WHERE id = $alice_running"));
retry_work_now('roles_d', "state = 'scheduled'");
wait_until(
	$node, 'roles_d',
	"SELECT count(*) FROM retries.calls WHERE fn = 'work(bigint)'::regprocedure"
	  . " AND state = 'failed' AND attempts = 1 AND last_sqlstate = '42704'"
	  . " AND last_message ~ '^role [0-9]+ that scheduled the call no longer exists\$'",
	'10', 'd: her pending calls fail: the role no longer exists');
is($node->safe_psql('roles_d', 'SELECT count(*) FROM results WHERE id <= 10'),
	'0', 'd: and none of them ran');

# bob: loses LOGIN with a call running and ten due in an hour.  Calls run
# as the role that scheduled them, as a session of that role would: a role
# that may not log in (the usual way to disable an account) runs none.
schedule_later('roles_d', 'bob', 11, 20);
$gate = close_gate($node, 'roles_d', 1);
my $bob_running = start_held('roles_d', 200, 'bob');
$node->safe_psql('roles_d', 'ALTER ROLE bob NOLOGIN');
open_gate($gate);
wait_until($node, 'roles_d',
	"SELECT state || ',' || (SELECT n FROM results WHERE id = 1000200)"
	  . " FROM retries.calls WHERE id = $bob_running",
	'succeeded,1', 'd: the attempt that was running when bob lost LOGIN completes');
retry_work_now('roles_d', "state = 'scheduled'");
wait_until(
	$node, 'roles_d',
	"SELECT count(*) FROM retries.calls WHERE fn = 'work(bigint)'::regprocedure"
	  . " AND state = 'failed' AND last_sqlstate = '42501'"
	  . " AND last_message = 'role \"bob\" that scheduled the call is not permitted to log in'",
	'10', 'd: his pending calls fail: he may not log in');
$node->safe_psql('roles_d', 'ALTER ROLE bob LOGIN');
retry_work_now('roles_d', "state = 'failed' AND last_sqlstate = '42501'");
all_ran_once('roles_d', 11, 20,
	'd: LOGIN given back, retried by hand, they run, once');
no_crash($node, $offset, 'd: no crash in the server log');

###########################################################################
# e. the function replaced between two attempts
###########################################################################

$offset = -s $node->logfile;
$node->safe_psql('postgres', 'CREATE DATABASE funcs_e');
setup_db('funcs_e');
$node->safe_psql(
	'funcs_e', q{
CREATE FUNCTION f(a int) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO results (id, note) VALUES (a, 'f(int)');
	IF retries.current_attempt() = 1 THEN
		RAISE EXCEPTION 'not yet' USING ERRCODE = 'RT001';
	END IF;
END $$;
SELECT retries.annotate('f(int)', '5 1h');
CREATE FUNCTION g(a int) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO results (id, note) VALUES (a, 'g version 1');
	IF retries.current_attempt() = 1 THEN
		RAISE EXCEPTION 'not yet' USING ERRCODE = 'RT001';
	END IF;
END $$;
SELECT retries.annotate('g(int)', '5 1h');
});
wait_until($node, 'postgres', workers_query('funcs_e'),
	'2', 'e: two workers in funcs_e');

# f(int) becomes f(text): its call, between attempts, and one due later
# (the backoff is an hour: a second attempt runs only when retry_now asks,
# after the change, however slow the machine; with 2 s it ran before the
# change under ASan, and retry_now found the call succeeded)
my $f_retrying = $node->safe_psql('funcs_e', "SELECT retries.call('f(int)', '[1]')");
my $f_later = $node->safe_psql('funcs_e',
	"SELECT retries.call('f(int)', '[2]', run_at => now() + interval '1 hour')");
wait_until($node, 'funcs_e',
	"SELECT state || ',' || attempts FROM retries.calls WHERE id = $f_retrying",
	'scheduled,1', 'e: the call of f(int) waits for its second attempt');
$node->safe_psql(
	'funcs_e', q{
DROP FUNCTION f(int);
CREATE FUNCTION f(a text) RETURNS void LANGUAGE sql AS
	$$ INSERT INTO results (id, note) VALUES (length(a), 'f(text)') $$;
});
$node->safe_psql('funcs_e',
	"SELECT retries.retry_now($f_retrying), retries.retry_now($f_later)");
wait_until(
	$node, 'funcs_e',
	"SELECT string_agg(state || ' ' || last_sqlstate || ' ' || last_message, '; '"
	  . " ORDER BY id) FROM retries.calls WHERE id IN ($f_retrying, $f_later)",
	'failed 42883 function public.f(integer) no longer exists; '
	  . 'failed 42883 function public.f(integer) no longer exists',
	'e: f(int) replaced by f(text): its calls fail, naming the function');
is($node->safe_psql('funcs_e', 'SELECT count(*) FROM results WHERE id IN (1, 2)'),
	'0', 'e: f(text) was not called in its place');

# g(int) gets a new body: the next attempt runs it, under the same policy
my $g_retrying = $node->safe_psql('funcs_e', "SELECT retries.call('g(int)', '[3]')");
wait_until($node, 'funcs_e',
	"SELECT state || ',' || attempts FROM retries.calls WHERE id = $g_retrying",
	'scheduled,1', 'e: the call of g(int) waits for its second attempt');
$node->safe_psql(
	'funcs_e', q{
CREATE OR REPLACE FUNCTION g(a int) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO results (id, note) VALUES (a, 'g version 2');
END $$;
});
$node->safe_psql('funcs_e', "SELECT retries.retry_now($g_retrying)");
wait_until($node, 'funcs_e',
	"SELECT state || ',' || attempts FROM retries.calls WHERE id = $g_retrying",
	'succeeded,2', 'e: replaced by CREATE OR REPLACE, g(int) runs again');
is($node->safe_psql('funcs_e', 'SELECT note FROM results WHERE id = 3'),
	'g version 2', 'e: its second attempt ran the new body');
is($node->safe_psql('funcs_e',
		"SELECT policy FROM retries.policies WHERE fn = 'g(int)'::regprocedure"),
	'5 1h', 'e: and g(int) keeps its policy');
no_crash($node, $offset, 'e: no crash in the server log');

###########################################################################
# f. DROP EXTENSION with a call running
###########################################################################

$offset = -s $node->logfile;
$node->safe_psql('postgres', 'CREATE DATABASE ext_f');
setup_db('ext_f');
wait_until($node, 'postgres', workers_query('ext_f'),
	'2', 'f: two workers in ext_f');

# a DROP that is rolled back: the workers are back at once and the call
# they were running runs again
my $slow4 = start_slow('ext_f', 1, $SLOW);
$t0 = time();
$node->safe_psql('ext_f', 'BEGIN; DROP EXTENSION retries; ROLLBACK',
	timeout => 60);
cmp_ok(time() - $t0, '<', 60,
	'f: DROP EXTENSION does not wait for the running call');
workers_back_before_pause($node, 'ext_f', $t0, 'f: rolled back, the workers are back at once');
wait_until($node, 'ext_f',
	"SELECT state FROM retries.calls WHERE id = $slow4",
	'succeeded', 'f: the call they were running succeeds');
is(history('ext_f', $slow4), '1:interrupted,2:succeeded',
	'f: its attempt cut short counts as interrupted');

# the real thing, under load
start_slow('ext_f', 2, $SLOW);
schedule_range($node, 'ext_f', 'work(bigint)', 1001, 3000);
$t0 = time();
($ret, $stdout, $stderr) =
  $node->psql('ext_f', 'DROP EXTENSION retries', timeout => 60);
is($ret, 0, 'f: DROP EXTENSION succeeds while a call runs') or diag($stderr);
cmp_ok(time() - $t0, '<', 60, 'f: without waiting for the call');
wait_until($node, 'postgres', workers_query('ext_f'),
	'0', 'f: the workers of ext_f stop');
stays_true($node, 'postgres', 'SELECT (' . workers_query('ext_f') . ') = 0',
	watch(3), 'f: and none starts again');

# CREATE EXTENSION again: workers again
$node->safe_psql('ext_f',
	'DROP TABLE results; DROP FUNCTION work(bigint), slow(bigint, float8), held(bigint)');
setup_db('ext_f');
wait_until($node, 'postgres', workers_query('ext_f'),
	'2', 'f: CREATE EXTENSION again: two workers again');
schedule_range($node, 'ext_f', 'work(bigint)', 1, 100);
all_ran_once('ext_f', 1, 100, 'f: and they run calls');
is($node->safe_psql('postgres', $launcher_query),
	$launcher_pid, 'f: the launcher never restarted');
no_crash($node, $offset, 'f: no crash in the server log');

###########################################################################
# through all this, the workers of postgres carried on
###########################################################################

is(worker_pids($node, 'postgres'),
	$postgres_pids, 'the workers of postgres were never restarted');
schedule_range($node, 'postgres', 'work(bigint)', 1, 100);
all_ran_once('postgres', 1, 100, 'calls in postgres run');

$node->stop;
done_testing();
