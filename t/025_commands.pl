# Commands and procedures end to end, as a user makes them: what pg_cron
# runs, run by retries with retries and history.
#
#   a. retries.run_command(): VACUUM, CREATE INDEX CONCURRENTLY, REFRESH
#      MATERIALIZED VIEW CONCURRENTLY and a CALL of a procedure that
#      commits three times run, each attempt recorded; as the role that
#      made them, which knows its call;
#   b. retries.schedule_command() and retries.schedule() of an annotated
#      procedure fire, and their calls run under their policies;
#   c. an error of a retryable SQLSTATE is retried per the command's
#      policy, another fails it;
#   d. a SIGKILL of the runner in the middle: the server restarts, the
#      attempt is charged interrupted and run again; what it committed
#      stays (at least once);
#   e. hostile: a command cannot SET ROLE or SET SESSION AUTHORIZATION,
#      LISTEN, or leave a temp table, a prepared statement, a setting or
#      an advisory lock to the next command (of another role); it cannot
#      outlive retries.max_attempt_time, even trapping the cancel.

use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RetriesTest;
use Test::More;
use Time::HiRes qw(time);

my $node = retries_node('commands');
$node->start;

$node->safe_psql('postgres', q{
CREATE EXTENSION retries;
CREATE ROLE alice LOGIN;
CREATE ROLE bob LOGIN;
GRANT CREATE ON SCHEMA public TO alice, bob;
SET ROLE alice;
CREATE TABLE big (id int PRIMARY KEY, v text);
INSERT INTO big SELECT g, md5(g::text) FROM generate_series(1, 50000) g;
DELETE FROM big WHERE id % 2 = 0;
CREATE MATERIALIZED VIEW big_counts AS SELECT left(v, 1) AS k, count(*) AS n FROM big GROUP BY 1;
CREATE UNIQUE INDEX ON big_counts (k);
CREATE TABLE seen (n int, xid xid8 DEFAULT pg_current_xact_id(), who text DEFAULT session_user,
				   cur text DEFAULT current_user, call bigint DEFAULT retries.current_call(),
				   attempt int DEFAULT retries.current_attempt());
GRANT INSERT, SELECT ON seen TO bob;
CREATE PROCEDURE three_commits() LANGUAGE plpgsql AS $$
BEGIN
	FOR i IN 1..3 LOOP
		INSERT INTO seen (n) VALUES (i);
		COMMIT;
	END LOOP;
END $$;
});

# run(role, command, [policy]): make a command as role; its id
sub run
{
	my ($role, $command, $policy) = @_;
	$command =~ s/'/''/g;
	return $node->safe_psql('postgres',
		"SET ROLE $role; SELECT retries.run_command('$command'"
		  . (defined $policy ? ", '$policy'" : '') . ')');
}

# outcomes(id): the outcomes of a call's attempts, with their SQLSTATEs
sub outcomes
{
	my ($id) = @_;
	return $node->safe_psql('postgres',
		"SELECT string_agg(outcome || coalesce(' ' || sqlstate, ''), ', ' ORDER BY attempt)"
		  . " FROM retries.attempts WHERE call_id = $id");
}

# finished(id, state, name): wait until the call is in that state
sub finished
{
	my ($id, $state, $name) = @_;
	return wait_until($node, 'postgres',
		"SELECT state FROM retries.calls WHERE id = $id", $state, $name);
}

###########################################################################
# a. what refuses a transaction block or a function
###########################################################################

my $vacuum = run('alice', 'VACUUM (ANALYZE) big');
finished($vacuum, 'succeeded', 'a: VACUUM runs');
is(outcomes($vacuum), 'succeeded', 'a: ... one attempt recorded');
isnt($node->safe_psql('postgres',
		"SELECT last_vacuum FROM pg_stat_user_tables WHERE relname = 'big'"),
	'', 'a: ... and the table was vacuumed');

my $cic = run('alice', 'CREATE INDEX CONCURRENTLY IF NOT EXISTS big_v ON big (v)');
finished($cic, 'succeeded', 'a: CREATE INDEX CONCURRENTLY runs');
is($node->safe_psql('postgres',
		"SELECT indisvalid FROM pg_index WHERE indexrelid = 'big_v'::regclass"),
	't', 'a: ... and the index is valid');

$node->safe_psql('postgres', 'SET ROLE alice; INSERT INTO big VALUES (2, \'zzz\')');
my $refresh = run('alice', 'REFRESH MATERIALIZED VIEW CONCURRENTLY big_counts');
finished($refresh, 'succeeded', 'a: REFRESH MATERIALIZED VIEW CONCURRENTLY runs');
is($node->safe_psql('postgres', "SELECT n FROM big_counts WHERE k = 'z'"),
	'1', 'a: ... and the view is refreshed');

my $commits = run('alice', 'CALL three_commits()');
finished($commits, 'succeeded', 'a: a CALL of a procedure that commits runs');
is($node->safe_psql('postgres',
		"SELECT count(*) || ' ' || count(DISTINCT xid) || ' ' || string_agg(DISTINCT who || '/' || cur, ',')"
		  . " || ' ' || bool_and(call = $commits)"
		  . " FROM seen WHERE n BETWEEN 1 AND 3"),
	'3 3 alice/alice true',
	'a: ... committing three times, as alice, knowing its call');
is($node->safe_psql('postgres',
		"SELECT fn || ' ' || command FROM retries.calls WHERE id = $commits"),
	'retries.command(text) CALL three_commits()', 'a: retries.calls shows the command');

###########################################################################
# b. from schedules
###########################################################################

$node->safe_psql('postgres', q{
SET ROLE alice;
SELECT retries.schedule_command('vacuum often', 'VACUUM big', '1s', policy => '2 10ms');
SELECT retries.annotate('three_commits()', '2 10ms');
SELECT retries.schedule('commit often', 'three_commits()', '1s');
});
wait_until($node, 'postgres',
	"SELECT count(*) >= 4 FROM retries.calls WHERE schedule IN ('vacuum often', 'commit often')"
	  . " AND state = 'succeeded'",
	't', 'b: a command schedule and a procedure\'s schedule fire, their calls run');
is($node->safe_psql('postgres',
		"SELECT string_agg(DISTINCT schedule || ':' || max_attempts, ',' ORDER BY schedule || ':' || max_attempts)"
		  . " FROM retries.calls WHERE schedule IS NOT NULL"),
	'commit often:3,vacuum often:3', 'b: ... each under its policy');
$node->safe_psql('postgres', q{
SET ROLE alice;
SELECT retries.unschedule('vacuum often');
SELECT retries.unschedule('commit often');
});

###########################################################################
# c. retried per the policy
###########################################################################

$node->safe_psql('postgres', q{
SET ROLE alice;
CREATE TABLE flag (tripped boolean);
});
my $twice = q{INSERT INTO flag VALUES (true); COMMIT;
	DO $$ BEGIN IF retries.current_attempt() = 1 THEN INSERT INTO flag VALUES (false);
	RAISE EXCEPTION 'not yet' USING ERRCODE = '55P03'; END IF; END $$};
my $retried = run('alice', $twice, '3 10ms');
finished($retried, 'failed', 'c: a SQLSTATE not in retry_on fails the command');
is(outcomes($retried), 'failed 55P03', 'c: ... at once');
is($node->safe_psql('postgres', 'SELECT string_agg(tripped::text, \',\') FROM flag'), 'true',
	'c: ... what it committed before the error stays, the rest is rolled back');
$node->safe_psql('postgres', 'SET ROLE alice; TRUNCATE flag');
(my $quoted = $twice) =~ s/'/''/g;
$retried = $node->safe_psql('postgres',
	"SET ROLE alice; SELECT retries.run_command('$quoted', '3 10ms', '{55P03}')");
finished($retried, 'succeeded', 'c: one in retry_on is retried');
is(outcomes($retried), 'retry 55P03, succeeded', 'c: ... each attempt recorded');
is($node->safe_psql('postgres', 'SELECT string_agg(tripped::text, \',\') FROM flag'), 'true,true',
	'c: ... the text runs again whole (at least once)');

###########################################################################
# d. a SIGKILL in the middle
###########################################################################

my $killed = run('alice',
	q{INSERT INTO seen (n) VALUES (100); COMMIT;
	  DO $$ BEGIN IF retries.current_attempt() = 1 THEN PERFORM pg_sleep(300); END IF; END $$;
	  INSERT INTO seen (n) VALUES (101)},
	'3 10ms');
wait_until($node, 'postgres', "SELECT count(*) FROM seen WHERE n = 100", '1',
	'd: a long command runs');
my $runner = $node->safe_psql('postgres',
	"SELECT pid FROM pg_stat_activity WHERE backend_type = 'retries runner'");
like($runner, qr/^\d+$/, 'd: its runner is in pg_stat_activity');
kill 'KILL', $runner;
finished($killed, 'succeeded', 'd: after the crash restart, the command runs again and succeeds');
is(outcomes($killed), 'interrupted 57P01, succeeded', 'd: ... the killed attempt charged interrupted');
is($node->safe_psql('postgres',
		"SELECT string_agg(n || ':' || attempt, ',' ORDER BY n, attempt) FROM seen WHERE n >= 100"),
	'100:1,100:2,101:2', 'd: ... what the first attempt committed stays (at least once)');

###########################################################################
# e. hostile
###########################################################################

for my $try ('SET ROLE bob', 'SET SESSION AUTHORIZATION bob', "SELECT set_config('role', 'bob', false)",
	'RESET SESSION AUTHORIZATION; SET ROLE postgres')
{
	my $id = run('alice', "$try; INSERT INTO seen (n) VALUES (200)", '1 10ms');
	finished($id, 'failed', "e: '$try' fails the command");
	is($node->safe_psql('postgres', "SELECT last_sqlstate FROM retries.calls WHERE id = $id"),
		'42501', "e: ... with 42501");
}
is($node->safe_psql('postgres', 'SELECT count(*) FROM seen WHERE n = 200'), '0',
	'e: ... and none of them wrote anything');

my $listen = run('alice', 'LISTEN channel', '1 10ms');
finished($listen, 'failed', 'e: LISTEN fails the command');
is($node->safe_psql('postgres', "SELECT last_sqlstate FROM retries.calls WHERE id = $listen"),
	'0A000', 'e: ... with 0A000');

my $leave = run('alice',
	q{CREATE TEMP TABLE left_behind (n int); PREPARE left_plan AS SELECT 1;
	  SET work_mem = '77MB'; SELECT pg_advisory_lock(4242); SELECT set_config('my.var', 'x', false)});
finished($leave, 'succeeded', 'e: a command that leaves session state succeeds');
my $check = run('bob',
	q{DO $$ BEGIN
	  IF to_regclass('pg_temp.left_behind') IS NOT NULL
		 OR EXISTS (SELECT FROM pg_prepared_statements)
		 OR current_setting('work_mem') = '77MB'
		 OR current_setting('my.var', true) IS NOT NULL
		 OR NOT pg_try_advisory_lock(4242)
		 OR EXISTS (SELECT FROM pg_class WHERE relname = 'left_behind')
	  THEN RAISE EXCEPTION 'state left behind'; END IF;
	  INSERT INTO seen (n) VALUES (300); END $$},
	'1 10ms');
finished($check, 'succeeded',
	'e: ... none of it (temp table, prepared statement, setting, advisory lock) reaches the next command');

# the cap
$node->safe_psql('postgres',
	'ALTER SYSTEM SET retries.max_attempt_time = 1; SELECT pg_reload_conf()');
my $start = time;
my $sleepy = run('alice', 'SELECT pg_sleep(60)', '1 10ms');
finished($sleepy, 'failed', 'e: a command past retries.max_attempt_time fails');
is($node->safe_psql('postgres',
		"SELECT outcome || ' ' || sqlstate || ' ' || message FROM retries.attempts WHERE call_id = $sleepy"),
	'timeout 57014 attempt ran past retries.max_attempt_time (1s)', 'e: ... a timeout');
my $trap = run('alice',
	q{DO $$ BEGIN PERFORM pg_sleep(60);
	  EXCEPTION WHEN query_canceled THEN PERFORM pg_sleep(60); END $$},
	'1 10ms');
finished($trap, 'failed', 'e: a command that traps the cancel fails too');
cmp_ok(time - $start, '<', 30, 'e: ... both ended long before their 60 s sleeps');
is($node->safe_psql('postgres', "SELECT outcome FROM retries.attempts WHERE call_id = $trap"),
	'timeout', 'e: ... the trapping one is a timeout as well');
is($node->safe_psql('postgres',
		"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'retries runner'"),
	'0', 'e: no runner is left');
$node->safe_psql('postgres',
	'ALTER SYSTEM RESET retries.max_attempt_time; SELECT pg_reload_conf()');

$node->stop;
done_testing();
