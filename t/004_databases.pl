# Workers follow the extension from database to database, without a
# restart:
#
#   a. CREATE EXTENSION in a new database starts its workers, which run its
#      calls;
#   b. DROP EXTENSION stops them (under load), and they stay stopped;
#   c. CREATE EXTENSION brings them back; DROP DATABASE is not held up by
#      them and they are gone afterwards;
#   d. ALTER DATABASE ... RENAME is not held up by them either, and they
#      come back in the renamed database;
#   e. a call left in flight by a killed worker is not charged to another
#      call after DROP EXTENSION and CREATE EXTENSION reuse its id;
#   f. no worker ever connects to a template, to a database that does not
#      allow connections, or to a dropped database: with the extension in
#      template1, CREATE DATABASE right after CREATE DATABASE ... TEMPLATE
#      template1 is not held up by a worker there: the postmaster, made to
#      log each background worker it starts, starts none for template1, for
#      template0 or for a database that refuses connections, and none tries
#      to connect to a dropped database.
#
# The extension is also installed in 'postgres', whose workers must not be
# disturbed by any of this.
#
# No step depends on the machine's speed: the workers are busy in b, c and
# e because a call of theirs waits at a gate the test holds (in b and e,
# t/RetriesTest.pm) or sleeps for an hour (in c, where no session of the
# test may stay in the database); a worker that must NOT start is watched
# for at least as long as workers took to start in this run; workers that
# must be back "at once" after a command must be back before the 30 s
# pause that stopping them sets would have ended; and the launcher having
# started the workers of a database created last shows that it has gone
# past those created before.

use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RetriesTest;
use Test::More;
use Time::HiRes qw(time);

my $node = retries_node('databases');
$node->start;

# setup_db(DB): the extension, a results table, an annotated work(id), and
# hold(), which waits at gate 1 (at its first attempt), and long(), which
# sleeps for an hour
sub setup_db
{
	my ($db) = @_;
	$node->safe_psql(
		$db, q{
CREATE EXTENSION retries;
CREATE TABLE results (id bigint PRIMARY KEY);
CREATE FUNCTION work(id bigint) RETURNS void LANGUAGE sql AS $$
	INSERT INTO results VALUES ($1);
	SELECT pg_sleep(0.002);		-- not a wait: no check depends on it
$$;
SELECT retries.annotate('work(bigint)', '3 10ms');
CREATE FUNCTION hold() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	IF retries.current_attempt() = 1 THEN
		PERFORM } . gate_sql(1) . q{;
	END IF;
END $$;
SELECT retries.annotate('hold()', '5 10s');
CREATE FUNCTION long() RETURNS void LANGUAGE sql AS $$
	SELECT pg_sleep(3600);		-- not a wait: the command under test cuts it short
$$;
SELECT retries.annotate('long()', '3 10ms');
});
	return;
}

# call_runs(DB, ID, NAME): schedule work(ID) in DB and wait until it succeeds
sub call_runs
{
	my ($db, $id, $name) = @_;
	my $call =
	  $node->safe_psql($db, "SELECT retries.call('work(bigint)', '[$id]')");
	wait_until($node, $db,
		"SELECT c.state || ',' || (SELECT count(*) FROM results WHERE id = $id)"
		  . " FROM retries.calls c WHERE c.id = $call",
		'succeeded,1', $name);
	return;
}

# workers of 'postgres': they must outlive all that follows
setup_db('postgres');
wait_until($node, 'postgres', workers_query('postgres'),
	'2', "postgres: two workers start");
my $postgres_pids = worker_pids($node, 'postgres');

###########################################################################
# a. CREATE EXTENSION starts workers
###########################################################################

$node->safe_psql('postgres', 'CREATE DATABASE db2');
# the launcher may start one worker to look for the extension in a new
# database; it leaves when it finds none (it was seen there once in a
# loaded run: the count is not 0 at every moment)
wait_until($node, 'postgres', workers_query('db2'),
	'0', 'a: no workers in db2 before CREATE EXTENSION');
my $t0 = time();
setup_db('db2');
wait_until($node, 'db2',
	"SELECT count(*) FROM retries.workers WHERE database = 'db2'",
	'2', 'a: retries.workers shows two workers for db2');
# how long that took: the least time to watch for workers that must not
# start (2 s at the least)
my $startup = time() - $t0;
my $watch = $startup > 2 ? sprintf('%.1f', $startup) : 2;
is($node->safe_psql('postgres', workers_query('db2')),
	'2', 'a: and pg_stat_activity two retries workers in db2');
call_runs('db2', 1, 'a: a call in db2 runs');

###########################################################################
# b. DROP EXTENSION stops them, while they are busy
###########################################################################

# a call of one worker waits at the gate, the other has the rest to run
my $gate = close_gate($node, 'db2', 1);
$node->safe_psql('db2', "SELECT retries.call('hold()')");
schedule_range($node, 'db2', 'work(bigint)', 1001, 2000);
wait_at_gate($node, 'db2', 1, 1, 'b: a worker of db2 is in the middle of a call');
my $log_offset = -s $node->logfile;
$node->safe_psql('db2', 'DROP EXTENSION retries', timeout => 60);
pass('b: DROP EXTENSION retries completes');
wait_until($node, 'postgres', workers_query('db2'),
	'0', 'b: the workers of db2 exit');
stays_true($node, 'postgres', 'SELECT (' . workers_query('db2') . ') = 0',
	$watch, 'b: and none start again in db2');
open_gate($gate);
# they see the extension gone and exit (or the launcher stops them): none
# trips over the dropped tables with an error (and, the launcher taking
# that for a crash, is started again)
unlike(
	slurp_file($node->logfile, $log_offset),
	qr/ERROR|PANIC|terminated by signal|exited with exit code [^01]/,
	'b: the workers of db2 exit without errors');

###########################################################################
# c. CREATE EXTENSION brings them back; DROP DATABASE
###########################################################################

$node->safe_psql('db2',
	'DROP TABLE results; DROP FUNCTION work(bigint), hold(), long()');
setup_db('db2');
wait_until($node, 'postgres', workers_query('db2'),
	'2', 'c: CREATE EXTENSION again: two workers in db2 again');
call_runs('db2', 2, 'c: a call in db2 runs again');

# busy workers, one of them in a call that sleeps for an hour, then DROP
# DATABASE
my $long = $node->safe_psql('db2', "SELECT retries.call('long()')");
schedule_range($node, 'db2', 'work(bigint)', 1001, 3000);
wait_until($node, 'db2',
	"SELECT count(*) FROM retries.workers WHERE current_call = $long",
	'1', 'c: a worker of db2 is in the middle of a call');
my $db2_oid = $node->safe_psql('postgres',
	"SELECT oid FROM pg_database WHERE datname = 'db2'");
my ($ret, $stdout, $stderr) =
  $node->psql('postgres', 'DROP DATABASE db2', timeout => 60);
is($ret, 0, 'c: DROP DATABASE db2 succeeds while db2 has busy workers')
  or diag($stderr);
is( $node->safe_psql(
		'postgres', "SELECT count(*) FROM pg_database WHERE datname = 'db2'"),
	'0',
	'c: db2 is gone');
wait_until(
	$node, 'postgres',
	"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'retries worker'"
	  . " AND (datid = $db2_oid OR datid NOT IN (SELECT oid FROM pg_database))",
	'0', 'c: no worker of db2 is left');
is( $node->safe_psql(
		'postgres',
		"SELECT count(*) FROM retries.workers WHERE database IS DISTINCT FROM 'postgres'"
	),
	'0',
	'c: retries.workers lists only the workers of postgres');

###########################################################################
# d. ALTER DATABASE RENAME
###########################################################################

$node->safe_psql('postgres', 'CREATE DATABASE db3');
setup_db('db3');
wait_until($node, 'postgres', workers_query('db3'),
	'2', 'd: two workers in db3');
# a call that is due in an hour waits across the rename
my $later = $node->safe_psql('db3',
	"SELECT retries.call('work(bigint)', '[3]', run_at => now() + interval '1 hour')"
);
$t0 = time();
($ret, $stdout, $stderr) =
  $node->psql('postgres', 'ALTER DATABASE db3 RENAME TO db4', timeout => 60);
is($ret, 0, 'd: ALTER DATABASE db3 RENAME TO db4 succeeds while db3 has workers')
  or diag($stderr);
workers_back_before_pause($node, 'db4', $t0, 'd: two workers come back in db4, at once');
is( $node->safe_psql(
		'db4', "SELECT count(*) FROM retries.workers WHERE database = 'db4'"),
	'2',
	'd: retries.workers shows them under the new name');
is($node->safe_psql('db4', "SELECT retries.retry_now($later)"),
	't', 'd: the call due later can be run now');
wait_until($node, 'db4',
	"SELECT state FROM retries.calls WHERE id = $later",
	'succeeded', 'd: it runs in db4');
call_runs('db4', 4, 'd: a new call in db4 runs');

###########################################################################
# e. a worker killed in the middle of a call just before DROP EXTENSION:
#    the call it left in flight belonged to the dropped extension, and
#    nothing is charged to the call of the same id of the extension created
#    again
###########################################################################

$node->safe_psql('postgres', 'CREATE DATABASE db5');
setup_db('db5');
wait_until($node, 'postgres', workers_query('db5'),
	'2', 'e: two workers in db5');
# the first call of db5 waits at the gate; DROP EXTENSION stops its worker
# there, in the middle of it, and keeps the launcher from starting another
# one (which would charge the call) until the DROP commits
$gate = close_gate($node, 'db5', 1);
$log_offset = -s $node->logfile;
my $held = $node->safe_psql('db5', "SELECT retries.call('hold()')");
wait_at_gate($node, 'db5', 1, 1, 'e: a worker of db5 is in the middle of a call');
$node->safe_psql('db5', 'DROP EXTENSION retries', timeout => 60);
like(
	slurp_file($node->logfile, $log_offset),
	qr/FATAL:  terminating background worker "retries worker" due to administrator command/,
	'e: DROP EXTENSION stopped the worker in the middle of the call');
wait_until($node, 'postgres', workers_query('db5'),
	'0', 'e: DROP EXTENSION: the workers of db5 exit');
open_gate($gate);
$node->safe_psql('db5',
	'DROP TABLE results; DROP FUNCTION work(bigint), hold(), long()');
setup_db('db5');
my $again = $node->safe_psql('db5', "SELECT retries.call('work(bigint)', '[5]')");
is($again, $held, 'e: the new extension gives its first call the same id');
wait_until($node, 'db5',
	"SELECT state || ',' || attempts FROM retries.calls WHERE id = $again",
	'succeeded,1', 'e: it succeeds at its first attempt');
is( $node->safe_psql(
		'db5',
		"SELECT string_agg(attempt || ':' || outcome, ',') FROM retries.attempts"),
	'1:succeeded',
	'e: no interrupted attempt was charged to it');

###########################################################################
# f. templates, databases that refuse connections, dropped databases
###########################################################################

# the postmaster logs each background worker it starts (the name of a
# worker says its database); a new session has the setting once the
# postmaster has it
$node->safe_psql('postgres',
	'ALTER SYSTEM SET log_min_messages = debug1; SELECT pg_reload_conf()');
wait_until($node, 'postgres', 'SHOW log_min_messages',
	'debug1', 'f: the postmaster logs the background workers it starts');
my $f_offset = -s $node->logfile;

# started_in(OIDS): the lines since f began that tell of a worker started
# in one of the databases OIDS (comma-separated)
sub started_in
{
	my ($oids) = @_;
	my %oid = map { $_ => 1 } split /,/, $oids;
	return grep {
		/starting background worker process "retries worker \d+ for database (\d+)"/
		  && $oid{$1}
	} split /\n/, slurp_file($node->logfile, $f_offset);
}

# create_pairs(TAG): five times, CREATE DATABASE ... TEMPLATE template1 and
# right after it a plain CREATE DATABASE (template1 too); the seconds the
# plain ones took, in all (for the record)
sub create_pairs
{
	my ($tag) = @_;
	my $total = 0;

	for my $i (1 .. 5)
	{
		$node->safe_psql('postgres', "CREATE DATABASE ${tag}_x$i TEMPLATE template1");
		my $t0 = time();
		$node->safe_psql('postgres', "CREATE DATABASE ${tag}_y$i");
		$total += time() - $t0;
	}
	return $total;
}

# (a worker in template1 held each plain CREATE DATABASE up to 5 s: 10.36
# s in all against 1.03 s without the extension, once; timings depend on
# the machine, so they are only noted, and the test looks at the workers
# started instead)
$node->safe_psql('template1', 'CREATE EXTENSION retries');
my $with = create_pairs('with');
is( $node->safe_psql(
		'with_y1', "SELECT count(*) FROM pg_extension WHERE extname = 'retries'"),
	'1', 'f: the databases copied from template1 have the extension');
# the launcher has gone past template1 since CREATE EXTENSION there: it
# started the workers of a database made afterwards
wait_until($node, 'postgres', workers_query('with_y1'),
	'2', 'f: and their workers');
my $template1 = $node->safe_psql('postgres',
	"SELECT oid FROM pg_database WHERE datname = 'template1'");
my @bad = started_in($template1);
is(scalar(@bad), 0,
	'f: with the extension in template1, CREATE EXTENSION there and CREATE DATABASE'
	  . ' ... TEMPLATE template1 start no worker there')
  or diag(join("\n", @bad));
$node->safe_psql('template1', 'DROP EXTENSION retries');
my $without = create_pairs('without');
note(sprintf('CREATE DATABASE after a copy of template1 took %.2f s in all with'
		  . ' the extension in template1, %.2f s without it', $with, $without));

$node->safe_psql('postgres', 'CREATE DATABASE from0 TEMPLATE template0');
$node->safe_psql('postgres', 'CREATE DATABASE closed ALLOW_CONNECTIONS false');
$node->safe_psql('postgres',
	"DROP DATABASE $_") for (map { ("with_x$_", "with_y$_") } 1 .. 5);
# the launcher has gone past all of them: it started the workers of a
# database made afterwards
$node->safe_psql('postgres', 'CREATE DATABASE last_f');
setup_db('last_f');
wait_until($node, 'postgres', workers_query('last_f'),
	'2', 'f: the workers of a database made after them start');
# (and the log shows them: it would show any other)
cmp_ok(
	scalar(
		started_in(
			$node->safe_psql('postgres',
				"SELECT oid FROM pg_database WHERE datname = 'last_f'"))),
	'>=', 2,
	'f: the postmaster logged the start of those workers');
@bad = started_in(
	$node->safe_psql(
		'postgres',
		"SELECT string_agg(oid::text, ',') FROM pg_database"
		  . " WHERE datistemplate OR NOT datallowconn"));
is(scalar(@bad), 0,
	'f: no worker started in template0, template1 or a database that refuses connections')
  or diag(join("\n", @bad));
$node->safe_psql('postgres',
	'ALTER SYSTEM RESET log_min_messages; SELECT pg_reload_conf()');
my $log = slurp_file($node->logfile);
my @refused = $log =~ /^.*(?:is not currently accepting connections|database \d+ does not exist).*$/mg;
is(scalar(@refused), 0,
	'f: no worker tried to connect to a template, a closed or a dropped database')
  or diag(join("\n", @refused));

###########################################################################
# through all this, the workers of postgres carried on
###########################################################################

is(worker_pids($node, 'postgres'),
	$postgres_pids, 'the workers of postgres were never restarted');
call_runs('postgres', 1, 'a call in postgres runs');

$node->stop;
done_testing();
