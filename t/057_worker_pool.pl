# Workers on demand and one bounded pool of them for all databases
# (retries.worker_idle_timeout, retries.max_cluster_workers,
# retries.max_databases), as a cluster of many databases uses them:
#
#   a. a database with nothing due holds no worker; a call committed there
#      starts one, which runs it, and leaves once idle again;
#   b. a call due later: the worker leaves, and one comes back when the
#      call is due, which then runs (not before its time);
#   c. a schedule's next firing, in a database whose worker left between
#      two, starts one;
#   d. twelve databases with calls at once, a pool of four: every call
#      runs, and never more than four workers at a time;
#   e. a pool of one, held by a database whose calls are due again and
#      again for ever: another database's call runs all the same (the
#      worker leaves after a second of work while another waits);
#   f. more databases than the old fixed limit of 128 (here 140, each made
#      from a template that has the extension, each with a call): all run.

use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RetriesTest;
use Test::More;
use Time::HiRes qw(time usleep);

my $node = PostgreSQL::Test::Cluster->new('pool');
$node->init;
$node->append_conf('postgresql.conf', q{
shared_preload_libraries = 'retries'
max_worker_processes = 40
retries.max_workers = 2
retries.max_extra_workers = 0
retries.worker_idle_timeout = 1
retries.max_cluster_workers = 4
});
$node->start;

# pool_workers(): SQL counting the workers of every database
my $pool_workers = "SELECT count(*) FROM pg_stat_activity"
  . " WHERE backend_type IN ('retries worker', 'retries extra worker')";

# a database with the extension, a table and a function that writes to it
sub make_db
{
	my ($db) = @_;
	$node->safe_psql('postgres', "CREATE DATABASE $db");
	$node->safe_psql($db, q{
CREATE EXTENSION retries;
CREATE TABLE done (n int, at timestamptz DEFAULT clock_timestamp());
CREATE FUNCTION w(n int) RETURNS void LANGUAGE sql AS 'INSERT INTO done (n) VALUES (n)';
SELECT retries.annotate('w(int)', '3 10ms');
});
	return;
}

###########################################################################
# a. on demand
###########################################################################

make_db('d1');
wait_until($node, 'postgres', workers_query('d1'), '0',
	'a: an idle database holds no worker');
my $id = $node->safe_psql('d1', "SELECT retries.call('w(int)', '[1]')");
wait_until($node, 'd1', "SELECT state FROM retries.calls WHERE id = $id", 'succeeded',
	'a: a call committed there starts a worker, which runs it');
wait_until($node, 'postgres', workers_query('d1'), '0',
	'a: ... and leaves once idle again');

###########################################################################
# b. a call due later
###########################################################################

$node->safe_psql('d1', q{
CREATE TABLE due (at timestamptz);
INSERT INTO due VALUES (clock_timestamp() + interval '15 seconds');
});
$id = $node->safe_psql('d1', "SELECT retries.call('w(int)', '[2]', run_at => (SELECT at FROM due))");
wait_until($node, 'd1',
	"SELECT (" . workers_query('d1') . ") = 0"
	  . " AND (SELECT state FROM retries.calls WHERE id = $id) <> 'succeeded'",
	't', 'b: the worker leaves before the call is due');
is($node->safe_psql('d1', "SELECT state FROM retries.calls WHERE id = $id"),
	'scheduled', 'b: ... the call waiting');
wait_until($node, 'd1', "SELECT state FROM retries.calls WHERE id = $id", 'succeeded',
	'b: a worker comes back when it is due, and runs it');
is($node->safe_psql('d1',
		"SELECT min(started_at) >= (SELECT at FROM due) FROM retries.attempts WHERE call_id = $id"),
	't', 'b: ... not before its time');

###########################################################################
# c. a schedule's firing
###########################################################################

wait_until($node, 'postgres', workers_query('d1'), '0', 'c: no worker');
$node->safe_psql('d1', "SELECT retries.schedule('soon', 'w(int)', '4s', '[3]')");
wait_until($node, 'd1', "SELECT count(*) >= 1 FROM done WHERE n = 3", 't',
	'c: a schedule made there fires');
wait_until($node, 'postgres', workers_query('d1'), '0',
	'c: the worker leaves between two firings');
my $fired = $node->safe_psql('d1', "SELECT count(*) FROM done WHERE n = 3");
wait_until($node, 'd1', "SELECT count(*) > $fired FROM done WHERE n = 3", 't',
	'c: the next firing starts a worker again, and runs');
$node->safe_psql('d1', "SELECT retries.unschedule('soon')");

###########################################################################
# d. a pool of four, twelve databases with work at once
###########################################################################

my @dbs = map { "p$_" } 1 .. 12;
make_db($_) for @dbs;
wait_until($node, 'postgres', $pool_workers, '0', 'd: no worker while nothing is due');
$node->safe_psql($_, "SELECT count(retries.call('w(int)', jsonb_build_array(g)))"
	  . " FROM generate_series(1, 300) g")
  for @dbs;
my $most = 0;
my $until = time() + $RetriesTest::DEADLINE;
my $left = 1;
my %poll = map { $_ => poller($node, $_) } ('postgres', @dbs);
while ($left && time() < $until)
{
	my $now = ($poll{postgres}->($pool_workers))[0] // 0;
	$most = $now if $now > $most;
	$left = 0;
	for my $db (@dbs)
	{
		$left ||= (($poll{$db}->("SELECT count(*) < 300 FROM done"))[0] // 't') eq 't';
	}
	usleep(50_000);    # poll
}
$_->() for values %poll;
ok(!$left, 'd: every call of the twelve databases runs');
cmp_ok($most, '<=', 4, "d: never more than the pool's four workers (at most $most seen)");
# more than one at a time: a call waits at a gate in each of four of them,
# all four at once, while a fifth database's call waits for the pool.
# (Sampling the count of workers during the drain above instead once saw at
# most one on a loaded machine: a database's 300 calls take less time
# than the next worker takes to start.)
my @gates = map { close_gate($node, $_, 57) } @dbs[0 .. 3];
sub gated_call
{
	my ($db) = @_;
	$node->safe_psql($db, q{
CREATE FUNCTION gated(n int) RETURNS void LANGUAGE sql AS $$ SELECT } . gate_sql(57) . q{ $$;
SELECT retries.annotate('gated(int)', '1 10ms');
SELECT retries.call('gated(int)', '[1]');
});
	return;
}
gated_call($_) for @dbs[0 .. 3];
wait_at_gate($node, $_, 57, 1, "d: a call waits at the gate in $_") for @dbs[0 .. 3];
is(join(' ', map { $node->safe_psql($_, gate_waiters(57)) } @dbs[0 .. 3]), '1 1 1 1',
	'd: ... and more than one at a time: four databases\' calls run at once');
gated_call($dbs[4]);
stays_true($node, $dbs[4],
	"SELECT state = 'scheduled' FROM retries.calls WHERE fn = 'gated(int)'::regprocedure", 1,
	'd: ... and a fifth database\'s call waits for the pool');
open_gate($_) for @gates;
wait_until($node, $dbs[4], "SELECT state FROM retries.calls WHERE fn = 'gated(int)'::regprocedure",
	'succeeded', 'd: ... and runs once the others are done');

###########################################################################
# e. a pool of one, held by a database whose calls are due for ever
###########################################################################

$node->safe_psql('postgres',
	'ALTER SYSTEM SET retries.max_cluster_workers = 1; SELECT pg_reload_conf()');
wait_until($node, 'postgres', 'SHOW retries.max_cluster_workers', '1', 'e: a pool of one');
make_db('q1');
make_db('q2');
$node->safe_psql('q1', q{
CREATE FUNCTION again(n int) RETURNS void LANGUAGE plpgsql AS $$
BEGIN RAISE EXCEPTION 'again' USING ERRCODE = 'RT001'; END $$;
SELECT retries.annotate('again(int)', '10ms 10ms');
SELECT count(retries.call('again(int)', jsonb_build_array(g))) FROM generate_series(1, 2000) g;
});
wait_until($node, 'q1',
	"SELECT count(*) FROM retries.calls WHERE fn = 'again(int)'::regprocedure AND attempts >= 2",
	'2000', 'e: q1\'s calls fail and are due again, on and on');
$id = $node->safe_psql('q2', "SELECT retries.call('w(int)', '[5]')");
wait_until($node, 'q2', "SELECT state FROM retries.calls WHERE id = $id", 'succeeded',
	'e: q2\'s call runs while q1 would keep the one worker for ever');
is($node->safe_psql('q1',
		"SELECT count(*) FROM retries.calls WHERE fn = 'again(int)'::regprocedure"
		  . " AND state NOT IN ('scheduled', 'running')"),
	'0', 'e: (q1\'s calls were all still due)');
$node->safe_psql('q1', "SELECT count(retries.cancel(id)) FROM retries.calls WHERE state = 'scheduled'");
$node->safe_psql('postgres',
	'ALTER SYSTEM SET retries.max_cluster_workers = 8; SELECT pg_reload_conf()');

###########################################################################
# f. more databases than the old limit
###########################################################################

$node->safe_psql('template1', 'CREATE EXTENSION retries');
$node->safe_psql('template1', q{
CREATE TABLE done (n int, at timestamptz DEFAULT clock_timestamp());
CREATE FUNCTION w(n int) RETURNS void LANGUAGE sql AS 'INSERT INTO done (n) VALUES (n)';
SELECT retries.annotate('w(int)', '3 10ms');
});
my @many = map { "m$_" } 1 .. 140;
# one psql each for the 140 databases, the 140 calls and each look at what
# ran (\c from one to the next): a psql per database, 140 of them a look,
# took most of the suite's slowest test on a loaded machine
$node->safe_psql('postgres', join('', map { "CREATE DATABASE $_;\n" } @many));
$node->safe_psql('postgres',
	join('', map { "\\c $_\nSELECT retries.call('w(int)', '[7]');\n" } @many));
my $count_all = join('', map { "\\c $_\nSELECT count(*) FROM done;\n" } @many);
# the 140 workers' starts take as long as the machine takes: the wait
# gives up only when no more ran for $DEADLINE seconds
wait_progressing_by(
	sub {
		# (140 connections: psql's own time is the deadline's, not
		# query_value's 30 s)
		my ($ret, $out, $err) = $node->psql('postgres', $count_all,
			timeout => $RetriesTest::DEADLINE);
		return (undef, $err) if $ret != 0;
		my $ran = 0;
		$ran += $_ for split /\n/, $out;
		return $ran;
	},
	scalar @many, 'f: a call in each of 140 databases runs',
	'the count of done in each database', 0.5);

$node->stop;
done_testing();
