# The queries file for Prometheus's postgres_exporter,
# metrics/postgres_exporter.yaml, served by the real exporter (Debian's
# prometheus-postgres-exporter) and scraped with curl:
#
#   a. a known workload, scheduled by an application role: calls that
#      succeed, calls that retry twice and then succeed, calls that fail at
#      once with 22012, calls that retry until their attempts run out with
#      RT503, and a call that sleeps 0.5 s;
#   b. the exporter connects as a monitoring role (pg_monitor and
#      retries_admin, as README recommends) and serves every metric of the
#      file with its type, and the exact counts: calls, attempts and
#      retries by function and state, failures by SQLSTATE, workers by
#      state, attempts and errors per worker; the busy time of the worker
#      that ran the sleeping call is at least the sleep; nothing is due;
#   c. with execution paused, calls scheduled in the past are due: the due
#      counts are exact, and the lag of the oldest is at least its age (and
#      no more than that plus the time the test took since).
#
# Skipped only when the exporter is not installed (scripts/test installs
# it).  The exporter listens on a port that PostgreSQL::Test::Cluster's
# get_free_port() finds free and reserves, as for the test's servers (never
# the package's own 9187), and is stopped at the end, also when the test
# dies.

use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use IPC::Run;
use POSIX qw(WNOHANG);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RetriesTest;
use Test::More;
use Time::HiRes qw(time usleep);

my $exporter_bin = '/usr/bin/prometheus-postgres-exporter';
plan skip_all =>
  "$exporter_bin is not installed (Debian package prometheus-postgres-exporter)"
  unless -x $exporter_bin;

my $queries = "$FindBin::RealBin/../metrics/postgres_exporter.yaml";
my $exporter_log = "$PostgreSQL::Test::Utils::log_path/012_exporter_prometheus.log";
my $exporter_pid;
my $port;

# the exporter goes when the test does, however it ends
END
{
	local $?;
	stop_exporter();
}

my $t0 = time();
my $node = retries_node('metrics');
$node->start;

###########################################################################
# a. the workload, scheduled by an application role
###########################################################################

$node->safe_psql('postgres', 'CREATE DATABASE app');
$node->safe_psql(
	'app', q{
CREATE EXTENSION retries;
CREATE ROLE app_user LOGIN;
-- what the README recommends for the exporter
CREATE ROLE retries_exporter LOGIN;
GRANT pg_monitor, retries_admin TO retries_exporter;
-- a monitoring role without retries_admin
CREATE ROLE nosy LOGIN;

CREATE FUNCTION ok(i int) RETURNS void LANGUAGE sql AS $$ SELECT $$;
-- retries twice, then succeeds
CREATE FUNCTION flaky(i int) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	IF retries.current_attempt() < 3 THEN
		PERFORM retries.retry('not yet');
	END IF;
END $$;
-- fails at once: 22012 is not retried
CREATE FUNCTION boom(i int) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	RAISE EXCEPTION 'division by zero, on purpose' USING ERRCODE = '22012';
END $$;
-- retried until its three attempts are used up
CREATE FUNCTION exhaust(i int) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	RAISE EXCEPTION 'service unavailable' USING ERRCODE = 'RT503';
END $$;
-- keeps its worker busy for 0.5 s, and says which worker that was
CREATE TABLE naps (pid int);
GRANT INSERT ON naps TO app_user;
CREATE FUNCTION nap() RETURNS void LANGUAGE sql AS $$
	INSERT INTO naps VALUES (pg_backend_pid());
	SELECT pg_sleep(0.5);	-- not a wait: its length, which busy time must count
$$;
CREATE FUNCTION late(i int) RETURNS void LANGUAGE sql AS $$ SELECT $$;

SELECT retries.annotate('ok(int)', '3 10ms');
SELECT retries.annotate('flaky(int)', '5 10ms');
SELECT retries.annotate('boom(int)', '5 10ms');
SELECT retries.annotate('exhaust(int)', '2 10ms');
SELECT retries.annotate('nap()', '3 10ms');
SELECT retries.annotate('late(int)', '3 10ms');
});
wait_until($node, 'app',
	"SELECT count(*) FROM retries.workers WHERE database = 'app' AND state = 'idle'",
	'2', 'a: two idle workers in app');

$node->safe_psql(
	'app', q{
SET ROLE app_user;
SELECT retries.call('ok(int)', jsonb_build_array(i)) FROM generate_series(1, 20) i;
SELECT retries.call('flaky(int)', jsonb_build_array(i)) FROM generate_series(1, 5) i;
SELECT retries.call('boom(int)', jsonb_build_array(i)) FROM generate_series(1, 3) i;
SELECT retries.call('exhaust(int)', jsonb_build_array(i)) FROM generate_series(1, 2) i;
SELECT retries.call('nap()');
});
wait_until($node, 'app',
	"SELECT count(*) FROM retries.calls WHERE state IN ('scheduled', 'running')",
	'0', 'a: every call finished');
wait_until($node, 'app',
	"SELECT count(*) FROM retries.workers WHERE database = 'app' AND state = 'idle'",
	'2', 'a: both workers idle again');
is( $node->safe_psql('app', q{SET ROLE nosy; SELECT count(*) FROM retries.calls}),
	'0',
	'a: a role without retries_admin sees none of the calls (so the exporter role needs it)');

my $napper = $node->safe_psql('app', 'SELECT pid FROM naps');
my $worker_pids = $node->safe_psql('app',
	"SELECT string_agg(pid::text, ',' ORDER BY pid) FROM retries.workers WHERE database = 'app'"
);

###########################################################################
# b. the exporter, and what it serves
###########################################################################

start_exporter();
my %m = scrape('b');

# every metric of the file, with its type
is( join(',', map { "$_:" . ($m{type}{$_} // 'missing') } sort keys %{ expected_types() }),
	join(',', map { "$_:" . expected_types()->{$_} } sort keys %{ expected_types() }),
	'b: every metric is served, with its type');
is(value(\%m, 'pg_exporter_last_scrape_error'),
	0, 'b: the exporter ran every query without an error');
my @unlabelled;
for my $name (sort keys %{ expected_types() })
{
	push @unlabelled, $name
	  if grep { ($_->{labels}{database} // '') ne 'app' } @{ $m{series}{$name} // [] };
}
is(join(',', @unlabelled), '', 'b: every series is labelled with the database');

is( summary(\%m, 'retries_calls', 'fn', 'state'),
	'boom(integer)/failed=3,exhaust(integer)/failed=2,flaky(integer)/succeeded=5,'
	  . 'nap()/succeeded=1,ok(integer)/succeeded=20',
	'b: retries_calls: calls by function and state');
is(scalar @{ $m{series}{retries_calls} },
	25, 'b: retries_calls: all five states of each of the five functions');
is( summary(\%m, 'retries_attempts', 'fn', 'state'),
	'boom(integer)/failed=3,exhaust(integer)/failed=6,flaky(integer)/succeeded=15,'
	  . 'nap()/succeeded=1,ok(integer)/succeeded=20',
	'b: retries_attempts: attempts by function and state');
is( summary(\%m, 'retries_retries', 'fn', 'state'),
	'exhaust(integer)/failed=4,flaky(integer)/succeeded=10',
	'b: retries_retries: attempts after the first');
is( summary(\%m, 'retries_failed_calls', 'fn', 'sqlstate', 1),
	'boom(integer)/22012=3,exhaust(integer)/RT503=2,flaky(integer)/RT000=0',
	'b: retries_failed_calls: failed calls by SQLSTATE');
is( summary(\%m, 'retries_failed_attempts', 'fn', 'sqlstate', 1),
	'boom(integer)/22012=3,exhaust(integer)/RT503=6,flaky(integer)/RT000=10',
	'b: retries_failed_attempts: attempts that did not succeed, by SQLSTATE');
is( summary(\%m, 'retries_due_calls', 'fn', undef, 1),
	'boom(integer)=0,exhaust(integer)=0,flaky(integer)=0,nap()=0,ok(integer)=0',
	'b: retries_due_calls: nothing is due');
is(summary(\%m, 'retries_due_lag_seconds', 'fn'),
	'', 'b: retries_due_lag_seconds: 0 for every function');
is( value(\%m, 'retries_database_due_calls', database => 'app') . ','
	  . value(\%m, 'retries_database_due_lag_seconds', database => 'app'),
	'0,0',
	'b: retries_database_due_*: no call due, lag 0');
is( summary(\%m, 'retries_workers_count', 'state', undef, 1),
	'idle=2,paused=0,running=0,starting=0',
	'b: retries_workers_count: two idle workers');

# the per-worker counters
is( join(',',
		sort { $a <=> $b }
		  map { $_->{labels}{pid} } @{ $m{series}{retries_worker_busy_seconds_total} }),
	$worker_pids,
	'b: one series per worker of the database, by pid');
is(sum_of(\%m, 'retries_worker_calls_run_total'),
	45, 'b: retries_worker_calls_run_total: 45 attempts in all');
is(sum_of(\%m, 'retries_worker_errors_total'),
	19, 'b: retries_worker_errors_total: 19 did not succeed');
my $busy = value(\%m, 'retries_worker_busy_seconds_total', pid => $napper);
cmp_ok($busy, '>=', 0.5,
	'b: the worker that ran the sleeping call was busy for at least its 0.5 s');
cmp_ok(max_of(\%m, 'retries_worker_busy_seconds_total'),
	'<=', time() - $t0, 'b: and no worker for longer than the test has run');

###########################################################################
# c. calls due and waiting
###########################################################################

$node->safe_psql('app',
	'ALTER SYSTEM SET retries.enabled = off; SELECT pg_reload_conf()');
wait_until($node, 'app',
	"SELECT count(*) FROM retries.workers WHERE database = 'app' AND state = 'paused'",
	'2', 'c: execution paused');
my $scheduled_at = time();
$node->safe_psql(
	'app', q{
SET ROLE app_user;
SELECT retries.call('late(int)', '[1]') AS hour \gset
SELECT retries.call('late(int)', '[2]') AS minutes \gset
SELECT retries.call('late(int)', '[3]') AS second \gset
SELECT retries.call('late(int)', '[4]', run_at => now() + interval '1 day');
SELECT retries.cancel(retries.call('late(int)', '[5]', run_at => now() + interval '1 day'));
RESET ROLE;
-- due in the past: run_at cannot say so (it is raised to now), the table can
UPDATE retries.call_data SET next_attempt = now() - interval '1 hour' WHERE id = :hour;
UPDATE retries.call_data SET next_attempt = now() - interval '10 minutes' WHERE id = :minutes;
UPDATE retries.call_data SET next_attempt = now() - interval '1 second' WHERE id = :second;
});
%m = scrape('c');
my $age_bound = 3600 + (time() - $scheduled_at);

is(value(\%m, 'pg_exporter_last_scrape_error'),
	0, 'c: the exporter ran every query without an error');
is( summary(\%m, 'retries_calls', 'fn', 'state'),
	'boom(integer)/failed=3,exhaust(integer)/failed=2,flaky(integer)/succeeded=5,'
	  . 'late(integer)/cancelled=1,late(integer)/scheduled=4,'
	  . 'nap()/succeeded=1,ok(integer)/succeeded=20',
	'c: retries_calls: the calls of late(), scheduled and cancelled');
is( summary(\%m, 'retries_due_calls', 'fn'),
	'late(integer)=3', 'c: retries_due_calls: three calls of late() are due');
my $lag = value(\%m, 'retries_due_lag_seconds', fn => 'late(integer)');
ok( $lag >= 3600 && $lag <= $age_bound,
	"c: retries_due_lag_seconds of late(): the age of the oldest due call ($lag s)");
is( summary(\%m, 'retries_due_lag_seconds', 'fn'),
	"late(integer)=$lag",
	'c: and 0 for every other function');
is(value(\%m, 'retries_database_due_calls', database => 'app'),
	3, 'c: retries_database_due_calls: three');
my $database_lag = value(\%m, 'retries_database_due_lag_seconds', database => 'app');
ok( $database_lag >= 3600 && $database_lag <= $age_bound,
	"c: retries_database_due_lag_seconds: the age of the oldest due call ($database_lag s)");
is( summary(\%m, 'retries_workers_count', 'state', undef, 1),
	'idle=0,paused=2,running=0,starting=0',
	'c: retries_workers_count: both workers paused');
cmp_ok(value(\%m, 'retries_worker_busy_seconds_total', pid => $napper),
	'>=', $busy, 'c: busy time never goes back');

# README's monitoring section (its table of metrics and its alert rules)
# names only metrics the exporter serves, so that it cannot drift
my $readme = slurp_file("$FindBin::RealBin/../README.md");
my ($monitoring) = $readme =~ /^## Monitoring with Prometheus\n(.*?)^## /ms;
ok(defined $monitoring, "README has a section 'Monitoring with Prometheus'");
my %documented = map { $_ => 1 } ($monitoring // '') =~ /\b(retries_\w+)/g;
delete $documented{$_} for qw(retries_admin retries_exporter);
cmp_ok(scalar(keys %documented), '>=', 12,
	'README names the metrics of the queries file');
for my $name (sort keys %documented)
{
	ok(exists $m{type}{$name}, "README's $name is a metric the exporter serves");
}
# and each row of its table gives the type the exporter declares
while (($monitoring // '') =~ /^\| (`retries_\w+`(?:, `retries_\w+`)*) \| (\w+) \|/mg)
{
	my ($names, $type) = ($1, $2);
	for my $name ($names =~ /`(\w+)`/g)
	{
		is($m{type}{$name} // 'absent', $type, "README: $name is a $type");
	}
}

stop_exporter();
unlike(slurp_file($exporter_log), qr/level=(error|warn)/,
	'the exporter logged no error');
$node->stop;
done_testing();

###########################################################################
# helpers
###########################################################################

# the metrics the file defines, and their types
sub expected_types
{
	return {
		retries_calls => 'gauge',
		retries_attempts => 'gauge',
		retries_retries => 'gauge',
		retries_failed_calls => 'gauge',
		retries_failed_attempts => 'gauge',
		retries_due_calls => 'gauge',
		retries_due_lag_seconds => 'gauge',
		retries_database_due_calls => 'gauge',
		retries_database_due_lag_seconds => 'gauge',
		retries_workers_count => 'gauge',
		retries_worker_busy_seconds_total => 'counter',
		retries_worker_calls_run_total => 'counter',
		retries_worker_errors_total => 'counter',
	};
}

# start_exporter(): the exporter, connected to database app as
# retries_exporter, serving only the metrics of the queries file; returns
# once it answers (another port is tried if this one was taken meanwhile)
sub start_exporter
{
	my $dsn = sprintf('host=%s port=%d user=retries_exporter dbname=app sslmode=disable',
		$node->host, $node->port);

	for my $try (1 .. 3)
	{
		$port = PostgreSQL::Test::Cluster::get_free_port();
		$exporter_pid = fork() // die "fork: $!";
		if ($exporter_pid == 0)
		{
			# only our settings: none of the caller's PG_EXPORTER_* or
			# DATA_SOURCE_* variables
			delete $ENV{$_} for grep { /^(PG_EXPORTER_|DATA_SOURCE_)/ } keys %ENV;
			$ENV{DATA_SOURCE_NAME} = $dsn;
			open(STDIN, '<', '/dev/null') or POSIX::_exit(126);
			open(STDOUT, '>>', $exporter_log) or POSIX::_exit(126);
			open(STDERR, '>&', \*STDOUT) or POSIX::_exit(126);
			exec($exporter_bin,
				"--web.listen-address=127.0.0.1:$port",
				"--extend.query-path=$queries",
				'--disable-default-metrics', '--disable-settings-metrics',
				'--no-collector.database', '--no-collector.bgwriter')
			  or POSIX::_exit(127);
		}
		note("exporter (pid $exporter_pid) on port $port");

		my $until = time() + $RetriesTest::DEADLINE;
		while (time() < $until)
		{
			my ($ok) = curl();
			return if $ok;
			if (waitpid($exporter_pid, WNOHANG) == $exporter_pid)
			{
				undef $exporter_pid;
				last;
			}
			usleep(100_000);    # poll
		}
		last if defined $exporter_pid;    # running, but never answered
		diag("the exporter exited at once; trying another port");
	}
	diag(slurp_file($exporter_log));
	die 'the exporter did not start';
}

# stop_exporter(): SIGTERM, then SIGKILL if it is still there after 10 s
sub stop_exporter
{
	return unless defined $exporter_pid;
	kill 'TERM', $exporter_pid;
	my $until = time() + 10;
	while (waitpid($exporter_pid, WNOHANG) == 0)
	{
		if (time() > $until)
		{
			kill 'KILL', $exporter_pid;
			waitpid($exporter_pid, 0);
			last;
		}
		usleep(50_000);    # poll
	}
	undef $exporter_pid;
	return;
}

# curl(): (success, body) of one GET of /metrics
sub curl
{
	my ($out, $err) = ('', '');
	my $ok = IPC::Run::run(
		[ 'curl', '-sS', '--max-time', '30', "http://127.0.0.1:$port/metrics" ],
		'<', \undef, '>', \$out, '2>', \$err);
	return ($ok, $ok ? $out : $err);
}

# scrape(STEP): one scrape, parsed: {type}{name} = type, {series}{name} =
# [{labels => {...}, value => number}, ...]
sub scrape
{
	my ($step) = @_;
	my ($ok, $body) = curl();
	ok($ok, "$step: curl scrapes /metrics") or diag($body);

	my %parsed = (type => {}, series => {});
	for my $line (split /\n/, $body)
	{
		if ($line =~ /^# TYPE (\S+) (\S+)$/)
		{
			$parsed{type}{$1} = $2;
		}
		elsif ($line =~ /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/)
		{
			my ($name, $labels, $value) = ($1, $2 // '', $3);
			my %labels;
			while ($labels =~ /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)
			{
				my ($k, $v) = ($1, $2);
				$v =~ s/\\(.)/$1 eq 'n' ? "\n" : $1/ge;
				$labels{$k} = $v;
			}
			push @{ $parsed{series}{$name} },
			  { labels => \%labels, value => 0 + $value };
		}
	}
	note(join("\n", grep { /^retries_/ } split /\n/, $body));
	return %parsed;
}

# value(M, NAME, LABEL => VALUE, ...): the value of the one series of NAME
# with these labels; undef (and a diagnostic) if there is not exactly one
sub value
{
	my ($m, $name, %want) = @_;
	my @found = grep {
		my $s = $_;
		!grep { ($s->{labels}{$_} // '') ne $want{$_} } keys %want
	} @{ $m->{series}{$name} // [] };

	return $found[0]{value} if @found == 1;
	diag(scalar(@found) . " series of $name match "
		  . join(',', map { "$_=$want{$_}" } sort keys %want));
	return undef;
}

# summary(M, NAME, LABEL1, [LABEL2], [WITH_ZEROS]): the series of NAME as
# 'label1/label2=value,...', sorted, leaving out those of value 0 unless
# WITH_ZEROS
sub summary
{
	my ($m, $name, $l1, $l2, $with_zeros) = @_;
	return join ',', sort map {
		$_->{labels}{$l1}
		  . (defined $l2 ? '/' . $_->{labels}{$l2} : '') . '='
		  . $_->{value}
	} grep { $with_zeros || $_->{value} != 0 } @{ $m->{series}{$name} // [] };
}

# sum_of(M, NAME), max_of(M, NAME): over every series of NAME
sub sum_of
{
	my ($m, $name) = @_;
	my $sum = 0;
	$sum += $_->{value} for @{ $m->{series}{$name} // [] };
	return $sum;
}

sub max_of
{
	my ($m, $name) = @_;
	my $max;
	for (@{ $m->{series}{$name} // [] })
	{
		$max = $_->{value} if !defined $max || $_->{value} > $max;
	}
	return $max;
}
