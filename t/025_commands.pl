# Commands and procedures end to end, as a user makes them: what pg_cron
# runs, run by retries with retries and history.
#
#   a. retries.run_command(): VACUUM, CREATE INDEX CONCURRENTLY, REFRESH
#      MATERIALIZED VIEW CONCURRENTLY and a CALL of a procedure that
#      commits three times run, each attempt recorded; as the role that
#      made them, which knows its call; a text of several statements runs
#      as psql runs a script: an invalid index dropped CONCURRENTLY and
#      made again CONCURRENTLY in one text;
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
#      outlive retries.max_attempt_time, even trapping the cancel;
#   g. (before f) with one runner place (retries.max_runners 1): the
#      workers always run batches; calls that wait for a place in a runner
#      are held, once, and places go to roles in turns;
#   h. runner places beside the workers: four commands run at once, none
#      out of the database's workers (a function's call runs beside them);
#      one role holds at most three quarters of the places; a worker that
#      waits in a runner place and is terminated has its attempt charged
#      by the database's other workers, and the command runs again;
#   f. a database's owner who plants aggregates and operators ahead of
#      pg_catalog in the database's search_path (which the workers, as a
#      superuser, connect with) does not run them as the workers: every
#      query of theirs names pg_catalog's.
#
# Where a step must happen while a command runs (another call, a held
# call), the command waits at a gate the test holds (RetriesTest's
# close_gate), never for a time the step is hoped to fit in.

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

# an index that a failed CREATE INDEX CONCURRENTLY left invalid, dropped
# and made again in one text: two statements that refuse a transaction
# block (a simple query of both failed with 25001)
$node->safe_psql('postgres',
	"UPDATE pg_index SET indisvalid = false WHERE indexrelid = 'big_v'::regclass");
my $remade = run('alice',
	'DROP INDEX CONCURRENTLY IF EXISTS big_v; CREATE INDEX CONCURRENTLY big_v ON big (v)');
finished($remade, 'succeeded', 'a: DROP and CREATE INDEX CONCURRENTLY run in one text');
is($node->safe_psql('postgres',
		"SELECT indisvalid FROM pg_index WHERE indexrelid = 'big_v'::regclass"),
	't', 'a: ... and the index made again is valid');

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
	  /* not a wait: the SIGKILL below cuts the sleep short */
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

# the cap.  Its time is robust: the cap is 1 s and the grace after it 2 s,
# so both commands end in about 5 s, and in well under 120 s even on a
# machine ten times slower, while their sleeps, which the cap must cut
# short, last 600 s (the trapping one never ends by itself)
$node->safe_psql('postgres',
	'ALTER SYSTEM SET retries.max_attempt_time = 1; SELECT pg_reload_conf()');
my $start = time;
# not a wait: the cap cuts the sleep short
my $sleepy = run('alice', 'SELECT pg_sleep(600)', '1 10ms');
finished($sleepy, 'failed', 'e: a command past retries.max_attempt_time fails');
is($node->safe_psql('postgres',
		"SELECT outcome || ' ' || sqlstate || ' ' || message FROM retries.attempts WHERE call_id = $sleepy"),
	'timeout 57014 attempt ran past retries.max_attempt_time (1s)', 'e: ... a timeout');
my $trap = run('alice',
	q{DO $$ BEGIN PERFORM pg_sleep(600);    /* not a wait: the cap cuts it short */
	  EXCEPTION WHEN query_canceled THEN
	  PERFORM pg_sleep(600);    /* not a wait: the end of the process cuts it short */
	  END $$},
	'1 10ms');
finished($trap, 'failed', 'e: a command that traps the cancel fails too');
cmp_ok(time - $start, '<', 120, 'e: ... both ended long before their 600 s sleeps');
is($node->safe_psql('postgres', "SELECT outcome FROM retries.attempts WHERE call_id = $trap"),
	'timeout', 'e: ... the trapping one is a timeout as well');
is($node->safe_psql('postgres',
		"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'retries runner'"),
	'0', 'e: no runner is left');
my $late_commit = run('alice',
	q{DO $$ BEGIN
	  BEGIN PERFORM pg_sleep(600);    /* not a wait: the cap cuts it short */
	  EXCEPTION WHEN query_canceled THEN NULL; END;
	  INSERT INTO seen (n) VALUES (400); COMMIT; END $$},
	'1 10ms');
finished($late_commit, 'failed', 'e: a command that traps the cancel and then commits fails');
is($node->safe_psql('postgres', 'SELECT count(*) FROM seen WHERE n = 400'), '0',
	'e: ... and its COMMIT after the cap commits nothing');
$node->safe_psql('postgres',
	'ALTER SYSTEM RESET retries.max_attempt_time; SELECT pg_reload_conf()');

# a command cannot cancel or wait for its own call (it would wait for itself)
my $self = run('alice', 'SELECT retries.cancel(retries.current_call())', '1 10ms');
finished($self, 'failed', 'e: a command that cancels its own call fails at once');
like($node->safe_psql('postgres', "SELECT last_sqlstate || ' ' || last_message FROM retries.calls WHERE id = $self"),
	qr/^55000 call $self is running this code/, 'e: ... with 55000');
$self = run('alice', "SELECT retries.wait(retries.current_call(), '1 hour')", '1 10ms');
finished($self, 'failed', 'e: and one that waits for it');

# a procedure's arguments reach it exactly, whatever the role's settings
$node->safe_psql('postgres', q{
SET ROLE alice;
CREATE TABLE got (x float8, d date, i interval);
CREATE PROCEDURE exact(x float8, d date, i interval) LANGUAGE sql
	AS 'INSERT INTO got VALUES (x, d, i)';
SELECT retries.annotate('exact(float8,date,interval)', '1 10ms');
RESET ROLE;
ALTER ROLE alice SET extra_float_digits = -10;
ALTER ROLE alice SET datestyle = 'SQL, DMY';
ALTER ROLE alice SET intervalstyle = 'sql_standard';
});
my $exact = $node->safe_psql('postgres', q{SET ROLE alice;
SELECT retries.call('exact(float8,date,interval)',
	'[0.123456789012345, "2024-01-02", "-1 days +02:03:04"]')});
finished($exact, 'succeeded', 'e: a procedure called under other datestyles and float digits runs');
is($node->safe_psql('postgres',
		"SELECT x = 0.123456789012345, d = '2024-01-02', i = '-1 days +02:03:04' FROM got"),
	't|t|t', 'e: ... with its arguments exactly as given');
$node->safe_psql('postgres', 'ALTER ROLE alice RESET ALL');

###########################################################################
# g. one place in a runner: the workers always run batches; calls
# waiting for a place are held, not claimed again and again, and places go
# to roles in turns.  The command that takes the place runs until the test
# opens the gate it waits at.  Without extra workers, which would run
# another role's held command meanwhile (t/020_containment.pl m).
###########################################################################

$node->safe_psql('postgres',
	'ALTER SYSTEM SET retries.max_extra_workers = 0;'
	  . ' ALTER SYSTEM SET retries.max_runners = 1; SELECT pg_reload_conf()');
wait_until($node, 'postgres', 'SHOW retries.max_runners', '1',
	'g: no extra workers, one runner place');

# a command that waits at gate KEY
sub gated { my ($key) = @_; return 'SELECT ' . gate_sql($key); }

my $upd_before = $node->safe_psql('postgres',
	"SELECT n_tup_upd FROM pg_stat_all_tables WHERE relid = 'retries.call_data'::regclass");
my $gate = close_gate($node, 'postgres', 1);
my @alices = split /\n/, $node->safe_psql('postgres',
	"SET ROLE alice; SELECT retries.run_command('" . gated(1) . "', '1 10ms')"
	  . " FROM generate_series(1, 4)");
wait_at_gate($node, 'postgres', 1, 1, 'g: one command runs');
is($node->safe_psql('postgres',
		"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'retries runner'"),
	'1', 'g: ... in a runner');
my $bobs = run('bob', 'SELECT 1', '1 10ms');
$node->safe_psql('postgres', q{
SET ROLE bob;
CREATE TABLE bob_done (n int);
CREATE FUNCTION bob_quick(n int) RETURNS void LANGUAGE sql AS 'INSERT INTO bob_done VALUES (n)';
SELECT retries.annotate('bob_quick(int)', '1 10ms');
SELECT retries.call('bob_quick(int)', '[1]');
});
wait_until($node, 'postgres', 'SELECT count(*) FROM bob_done', '1',
	'g: a function\'s call of another role runs meanwhile');
is($node->safe_psql('postgres', gate_waiters(1)), '1',
	'g: ... while the command still runs (it waits at the gate), not after it');
# (whichever of alice's four took the place: they were made in one
# statement, and the claim does not promise the first id)
wait_until($node, 'postgres',
	"SELECT count(*) FILTER (WHERE held) || ' ' || count(*) FILTER (WHERE NOT held)"
	  . " FROM retries.call_data WHERE id IN (" . join(',', @alices, $bobs) . ")",
	'4 1', 'g: the other commands wait for the place, held');
stays_true($node, 'postgres',
	"SELECT count(*) <= 1 FROM pg_stat_activity WHERE backend_type = 'retries runner'", 1,
	'g: never two runners at once with one place');
my $upd_mid = $node->safe_psql('postgres',
	"SELECT n_tup_upd FROM pg_stat_all_tables WHERE relid = 'retries.call_data'::regclass");
cmp_ok($upd_mid - $upd_before, '<', 30,
	'g: the waiting commands are held once, not put back again and again');
open_gate($gate);
finished($bobs, 'succeeded', 'g: bob\'s command runs');
for my $id (@alices) { finished($id, 'succeeded', "g: alice's command $id runs"); }
is($node->safe_psql('postgres',
		"SELECT count(*) <= 2 FROM retries.attempts WHERE call_id IN (" . join(',', @alices) . ")"
		  . " AND started_at < (SELECT started_at FROM retries.attempts WHERE call_id = $bobs)"),
	't', 'g: bob\'s command, made after four of alice\'s, ran before her third: turns between roles');

# turns kept over many places freed one after the other: with several
# workers woken at each, two of them once let go of a call each for the one
# place free (bob's, then alice's, which took it first)
$gate = close_gate($node, 'postgres', 4);
my $first = run('alice', gated(4), '1 10ms');
wait_at_gate($node, 'postgres', 4, 1, 'g: a command holds the place');
my @turns = split /\n/, $node->safe_psql('postgres',
	"SET ROLE alice; SELECT retries.run_command('SELECT 1', '1 10ms') FROM generate_series(1, 8);"
	  . " SET ROLE bob; SELECT retries.run_command('SELECT 2', '1 10ms') FROM generate_series(1, 8)");
wait_until($node, 'postgres',
	"SELECT count(*) FROM retries.call_data WHERE id IN (" . join(',', @turns) . ") AND held",
	'16', 'g: sixteen commands of two roles wait for the place, held');
open_gate($gate);
for my $id (@turns) { finished($id, 'succeeded', "g: command $id runs"); }
# the roles in the order their commands started: each the other's turn
my $order = $node->safe_psql('postgres',
	"SELECT string_agg(CASE WHEN c.scheduled_by = 'alice'::regrole THEN 'a' ELSE 'b' END, ''"
	  . " ORDER BY a.started_at) FROM retries.attempts a JOIN retries.call_data c ON c.id = a.call_id"
	  . " WHERE a.call_id IN (" . join(',', @turns) . ")");
like($order, qr/^(?:(?:ab){8}|(?:ba){8})$/,
	'g: with places freed one after the other, the roles take them in turns');

# a held command cancelled, then retried once the place is free, runs
$gate = close_gate($node, 'postgres', 2);
my $busy = run('alice', gated(2), '1 10ms');
wait_until($node, 'postgres', "SELECT state FROM retries.calls WHERE id = $busy", 'running',
	'g: a command takes the place');
my $waiting = run('bob', 'SELECT 2', '1 10ms');
wait_until($node, 'postgres', "SELECT held FROM retries.call_data WHERE id = $waiting", 't',
	'g: another is held');
$node->safe_psql('postgres', "SET ROLE bob; SELECT retries.cancel($waiting)");
open_gate($gate);
finished($busy, 'succeeded', 'g: the first ends');
$node->safe_psql('postgres', "SET ROLE bob; SELECT retries.retry_now($waiting)");
finished($waiting, 'succeeded', 'g: the cancelled one, retried, runs');

# calls of a limited procedure that wait for a place are held for the
# place, not let go by their gate (which has room) again and again
$node->safe_psql('postgres', q{
SET ROLE alice;
CREATE PROCEDURE limited() LANGUAGE sql AS 'SELECT 1';
SELECT retries.annotate('limited()', '1 10ms', max_running => 5);
});
$gate = close_gate($node, 'postgres', 3);
$busy = run('alice', gated(3), '1 10ms');
wait_until($node, 'postgres', "SELECT state FROM retries.calls WHERE id = $busy", 'running',
	'g: a command takes the place again');
# made while the procedure is paused (held at its gate), then let go
my @limited = split /\n/, $node->safe_psql('postgres',
	"SET ROLE alice; SELECT retries.pause('limited()');"
	  . " SELECT retries.call('limited()') FROM generate_series(1, 3)");
shift @limited;
$node->safe_psql('postgres', "SET ROLE alice; SELECT retries.resume('limited()')");
wait_until($node, 'postgres',
	"SELECT count(*) FROM retries.call_data WHERE id IN (" . join(',', @limited) . ") AND held",
	'3', 'g: the limited procedure\'s calls are held');
$upd_before = $node->safe_psql('postgres',
	"SELECT n_tup_upd FROM pg_stat_all_tables WHERE relid = 'retries.call_data'::regclass");
stays_true($node, 'postgres',
	"SELECT count(*) = 3 FROM retries.call_data WHERE id IN (" . join(',', @limited) . ") AND held",
	1, 'g: ... and stay held while the place is taken');
cmp_ok($node->safe_psql('postgres',
		"SELECT n_tup_upd FROM pg_stat_all_tables WHERE relid = 'retries.call_data'::regclass")
	  - $upd_before, '<', 10, 'g: ... without being written again and again');
open_gate($gate);
for my $id (@limited) { finished($id, 'succeeded', "g: the limited procedure's call $id runs"); }

###########################################################################
# h. runner places beside the workers: with four places, alice's commands
# take three (her share: all but a quarter), bob's the fourth, and the
# database's two workers still run function calls (the workers waiting
# for the runners leave their places to new ones after a second).  Then the worker that
# waits for one of alice's is terminated: the workers charge its attempt
# from its place's file, and the command runs again.
###########################################################################

$node->safe_psql('postgres',
	'ALTER SYSTEM SET retries.max_runners = 4; SELECT pg_reload_conf()');
wait_until($node, 'postgres', 'SHOW retries.max_runners', '4', 'h: four runner places');
$gate = close_gate($node, 'postgres', 4);
my @many = split /\n/, $node->safe_psql('postgres',
	"SET ROLE alice; SELECT retries.run_command('" . gated(4) . "', '3 10ms')"
	  . " FROM generate_series(1, 4)");
wait_at_gate($node, 'postgres', 4, 3, 'h: three of alice\'s commands run at once');
wait_until($node, 'postgres',
	"SELECT count(*) FROM retries.call_data WHERE id IN (" . join(',', @many) . ") AND held",
	'1', 'h: ... her fourth is held: her share is three of four places');
my $bob_many = run('bob', gated(4), '1 10ms');
wait_at_gate($node, 'postgres', 4, 4, 'h: bob\'s command takes the fourth place');
$node->safe_psql('postgres', "SET ROLE bob; SELECT retries.call('bob_quick(int)', '[2]')");
wait_until($node, 'postgres', 'SELECT count(*) FROM bob_done', '2',
	'h: a function\'s call runs beside four commands');
wait_until($node, 'postgres',
	"SELECT count(*) FILTER (WHERE query LIKE '%in a runner') || ' of ' || count(*)"
	  . " FROM pg_stat_activity WHERE backend_type = 'retries worker'",
	'4 of 6', 'h: four workers wait in runner places, beside the database\'s own two');

# the worker of one of alice's running commands is terminated
my ($lost_call) = $node->safe_psql('postgres',
	"SELECT substring(query from 'call (\\d+) attempt') FROM pg_stat_activity"
	  . " WHERE backend_type = 'retries worker' AND query LIKE '%in a runner'"
	  . " AND substring(query from 'call (\\d+) attempt')::bigint IN (" . join(',', @many) . ")"
	  . " LIMIT 1");
$node->safe_psql('postgres',
	"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE backend_type = 'retries worker'"
	  . " AND query LIKE 'retries: call $lost_call attempt %'");
wait_until($node, 'postgres',
	"SELECT outcome FROM retries.attempts WHERE call_id = $lost_call AND attempt = 1",
	'interrupted', 'h: its attempt is charged, by the other workers, from its place');
open_gate($gate);
for my $id (@many, $bob_many) { finished($id, 'succeeded', "h: command $id runs"); }
is($node->safe_psql('postgres',
		"SELECT string_agg(outcome::text, ',' ORDER BY attempt) FROM retries.attempts"
		  . " WHERE call_id = $lost_call"),
	'interrupted,succeeded', 'h: ... and it ran again');
$node->safe_psql('postgres',
	'ALTER SYSTEM RESET retries.max_extra_workers;'
	  . ' ALTER SYSTEM RESET retries.max_runners; SELECT pg_reload_conf()');

###########################################################################
# f. the workers' own queries under a planted search_path
###########################################################################

$node->safe_psql('postgres', q{
CREATE ROLE dbo LOGIN;
CREATE DATABASE owned OWNER dbo;
});
$node->safe_psql('owned', 'CREATE EXTENSION retries');
$node->safe_psql('owned', q{
SET ROLE dbo;
CREATE SCHEMA evil;
CREATE TABLE evil.ran (who text, what text);
GRANT INSERT ON evil.ran TO PUBLIC;
GRANT USAGE ON SCHEMA evil TO PUBLIC;
CREATE FUNCTION evil.note(what text) RETURNS void LANGUAGE sql
	AS $$ INSERT INTO evil.ran VALUES (current_user, what) $$;
CREATE FUNCTION evil.fin_ts(timestamptz) RETURNS timestamptz LANGUAGE plpgsql
	AS $$ BEGIN PERFORM evil.note('min'); RETURN $1; END $$;
CREATE AGGREGATE evil.min(timestamptz) (sfunc = pg_catalog.timestamptz_smaller,
										stype = timestamptz, finalfunc = evil.fin_ts);
CREATE FUNCTION evil.fin_count(bigint) RETURNS bigint LANGUAGE plpgsql
	AS $$ BEGIN PERFORM evil.note('count'); RETURN $1; END $$;
CREATE FUNCTION evil.count_step(bigint) RETURNS bigint LANGUAGE sql AS 'SELECT $1 + 1';
CREATE AGGREGATE evil.count(*) (sfunc = evil.count_step, stype = bigint, initcond = '0',
								finalfunc = evil.fin_count);
CREATE FUNCTION evil.eq(bigint, bigint) RETURNS boolean LANGUAGE plpgsql
	AS $$ BEGIN PERFORM evil.note('='); RETURN $1 OPERATOR(pg_catalog.=) $2; END $$;
CREATE OPERATOR evil.= (leftarg = bigint, rightarg = bigint, function = evil.eq);
ALTER DATABASE owned SET search_path = evil, pg_catalog, public;
CREATE TABLE done (n int);
CREATE FUNCTION work(n int) RETURNS void LANGUAGE sql AS 'INSERT INTO public.done VALUES (n)';
});
# the workers connect again, with the database's search_path
$node->safe_psql('postgres',
	"SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
	  . " WHERE backend_type = 'retries worker' AND datname = 'owned'");
$node->safe_psql('owned', q{
SET ROLE dbo;
SELECT retries.annotate('public.work(int)', '3 10ms', max_running => 1);
SELECT retries.schedule('often', 'public.work(int)', '1s', '[0]');
SELECT retries.pause('public.work(int)');
SELECT count(retries.call('public.work(int)', jsonb_build_array(g))) FROM generate_series(1, 20) g;
SELECT retries.call('public.work(int)', '[100]', run_at => now() + interval '2 seconds');
SELECT retries.resume('public.work(int)');
});
# (this test's own queries, as a superuser, name pg_catalog's too)
wait_until($node, 'owned',
	"SELECT pg_catalog.count(*) OPERATOR(pg_catalog.>=) 23 FROM public.done", 't',
	'f: calls held by a gate, released and limited, and a schedule run in the database');
is($node->safe_psql('owned',
		"SELECT pg_catalog.string_agg(r.what, ',') FROM evil.ran r"
		  . " JOIN pg_catalog.pg_roles o ON o.rolname OPERATOR(pg_catalog.=) r.who WHERE o.rolsuper"),
	'', 'f: no planted aggregate or operator ran as a superuser');
is($node->safe_psql('postgres', "SELECT rolsuper FROM pg_roles WHERE rolname = 'dbo'"),
	'f', 'f: the database\'s owner is still no superuser');

$node->stop;
done_testing();
