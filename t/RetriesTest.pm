# Helpers shared by the TAP tests of retries.
#
# PGXS runs prove from the top of the source tree with -I there, not in t/,
# so the tests load this module with:
#
#     use FindBin;
#     use lib $FindBin::RealBin;
#     use RetriesTest;
#
# Everything that waits does so in a loop with a deadline, never with a
# bare sleep: a condition that does not come true within the deadline fails
# the test with the last output seen.  No test may assume how fast the
# machine is: where one step must happen while a call is in the middle of
# its work, the call waits at a gate the test holds (close_gate, below)
# instead of sleeping for a time that the step is hoped to fit in.
# scripts/waitcheck fails on a sleep in a test that is not marked as one
# that no outcome depends on.

package RetriesTest;

use strict;
use warnings;

use Exporter 'import';
use Fcntl qw(:flock);
use File::Path qw(rmtree);
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep time);

our @EXPORT = qw(
  retries_node
  query_value
  poller
  wait_until
  wait_progressing
  wait_progressing_by
  reload_setting
  stays_true
  worker_pids
  workers_query
  workers_back_before_pause
  schedule_range
  crash_lines
  no_crash
  has_library
  as_role
  in_each
  wait_each
  cap_hogs
  try_as
  call_reaches
  close_gate
  open_gate
  gate_waiters
  wait_at_gate
  gate_sql
  start_parallel_hog
  review_node
  pool_review_node
  hooked_job_sql
  superuser_operator_sql
  hook_leaves_mallory
  latin1_bad_name
  review_roles
  paused_reboot_schedule
  pg_cron_node
  workers_sql
  serving_off
  serving_on
  command_elsewhere
);

# initdb's work, done once per run of the suite: a node's cluster is a copy
# of one that initdb made, with the same options and by the same initdb, in
# tmp_check, as PostgreSQL's own suites do from 17 on (INITDB_TEMPLATE).
# initdb costs some 1.4 s of CPU here, a copy 0.05 s, and the suites make
# over a hundred clusters.  A node that gives initdb options of its own
# (init's extra) has it run.  The copies share their system identifier, as
# PostgreSQL's do.
{
	no warnings 'redefine';
	my $system_or_bail = \&PostgreSQL::Test::Utils::system_or_bail;

	*PostgreSQL::Test::Utils::system_or_bail = sub {
		my @cmd = @_;

		return $system_or_bail->(@cmd)
		  unless @cmd == 6
		  && $cmd[0] eq 'initdb'
		  && "@cmd[1, 3, 4, 5]" eq '-D -A trust -N';
		return $system_or_bail->('cp', '-RPp', initdb_template($system_or_bail), $cmd[2]);
	};
}

# initdb_template(SYSTEM_OR_BAIL): the directory of the cluster that the
# initdb found first in PATH made (made now if need be: the tests that run
# at once take turns through a lock)
sub initdb_template
{
	my ($system_or_bail) = @_;
	my ($bindir) = grep { -x "$_/initdb" } split /:/, $ENV{PATH};
	my $key = $bindir // 'initdb';
	$key =~ s/[^A-Za-z0-9]+/_/g;
	my $dir = "$PostgreSQL::Test::Utils::tmp_check/initdb_template$key";

	return $dir if -d $dir;
	open my $lock, '>', "$dir.lock" or die "could not open $dir.lock: $!";
	flock($lock, LOCK_EX) or die "could not lock $dir.lock: $!";
	if (!-d $dir)
	{
		rmtree("$dir.new");
		$system_or_bail->('initdb', '-D', "$dir.new", '-A', 'trust', '-N');
		rename("$dir.new", $dir) or die "could not rename $dir.new: $!";
	}
	close $lock;
	return $dir;
}

# How long a wait may take before the test fails (seconds): the TAP
# framework's default timeout (180 s, or PG_TEST_TIMEOUT_DEFAULT).
# Generous: a passing run waits far less, even on a slow machine under
# load, and a failing one should not hang forever.
our $DEADLINE = $PostgreSQL::Test::Utils::timeout_default;

# retries_node(NAME, [init options]): a new node with the library preloaded
# and crash restarts on (PostgreSQL::Test::Cluster turns them off), whose
# workers stay in their databases, idle or not, as many as the databases
# want (retries.worker_idle_timeout 0, no bound on the pool that matters):
# the tests of what workers do count on them.  Workers on demand and the
# pool are t/057_worker_pool.pl's.  Not started.
sub retries_node
{
	my ($name, %init) = @_;
	my $node = PostgreSQL::Test::Cluster->new($name);

	$node->init(%init);
	$node->append_conf(
		'postgresql.conf', qq{
shared_preload_libraries = 'retries'
restart_after_crash = on
max_worker_processes = 16
retries.worker_idle_timeout = 0
retries.max_cluster_workers = 192
});
	return $node;
}

# has_library(NODE, NAME): whether the server of NODE has the loadable
# module NAME (a contrib module such as pg_stat_statements, or llvmjit):
# a PostgreSQL built from source may lack them.
sub has_library
{
	my ($node, $name) = @_;
	return -e $node->config_data('--pkglibdir') . "/$name.so";
}

# as_role(NODE, DB, ROLE, SQL): SQL run as ROLE (SET ROLE first); its
# output, the test dying if it fails
sub as_role
{
	my ($node, $db, $role, $sql) = @_;
	return $node->safe_psql($db, "SET ROLE $role;\n$sql");
}

# in_each(NODE, ROLE, DBS, SQL): SQL run as ROLE (none: the superuser) in
# each database of the list DBS, one after another, by one psql that
# connects to each in turn (a psql started for each of a hundred databases
# costs more than the work); a hash of each database's output, the test
# dying if any fails
sub in_each
{
	my ($node, $role, $dbs, $sql) = @_;
	my $set_role = defined $role ? "SET ROLE $role;\n" : '';
	my $out = $node->safe_psql('postgres',
		join('', map { "\\connect $_\n\\echo <<$_>>\n$set_role$sql;\n" } @$dbs));
	# (-1: an empty output of the last database is kept)
	my (undef, %each) = split /^<<(\S+)>>\n?/m, "$out\n", -1;

	chomp %each;
	return \%each;
}

# wait_each(NODE, DBS, SQL, EXPECTED, NAME): one test named NAME, passed
# once SQL gives EXPECTED in every database of the list DBS (asked by one
# psql at a time, as in_each), failed with those that do not at the
# deadline
sub wait_each
{
	my ($node, $dbs, $sql, $expected, $name) = @_;
	my $until = time() + $DEADLINE;
	my $nap = 0.1;
	my @behind;

	for (;;)
	{
		my $each = in_each($node, undef, $dbs, $sql);
		@behind = grep { ($each->{$_} // '') ne $expected } @$dbs;
		return pass($name) if !@behind;
		last if time() > $until;
		usleep($nap * 1_000_000);    # poll
		$nap = $nap * 1.5 < 1 ? $nap * 1.5 : 1;
	}
	fail($name);
	diag("waited $DEADLINE s for: $sql\nexpected: $expected\nnot yet in: @behind");
	return 0;
}

# cap_hogs(NODE, N): mallory's databases hog1 .. hogN (N >= 8) of tpl, in
# each a gate (77) closed on public.gated(), the superuser's function
# that waits at it (made in tpl, annotated '1 10ms'); her 15 long calls
# of it, two in each of hog1..hog7 and one in hog8, hold 15 places of a
# pool of 16 (pool_review_node): the pool's cap.  Returns the gates' sessions
# and SQL giving how many workers of the hog databases wait at a lock.
sub cap_hogs
{
	my ($node, $n) = @_;
	my @hogs = map { "hog$_" } 1 .. $n;
	my @gates;

	$node->safe_psql('tpl', 'CREATE FUNCTION public.gated() RETURNS boolean LANGUAGE sql AS '
		  . '$$SELECT ' . gate_sql(77) . '$$;'
		  . q{SELECT retries.annotate('public.gated()', '1 10ms');});
	as_role($node, 'postgres', 'mallory',
		join('', map { "CREATE DATABASE $_ TEMPLATE tpl;\n" } @hogs));
	push @gates, close_gate($node, $_, 77) for @hogs;
	in_each($node, 'mallory', [ @hogs[ 0 .. 6 ] ],
		q{SELECT count(retries.call('public.gated()')) FROM generate_series(1, 2)});
	as_role($node, 'hog8', 'mallory', q{SELECT retries.call('public.gated()')});
	my $held_sql = q{SELECT count(*) FROM pg_stat_activity WHERE backend_type ~ '^retries'
  AND datname ~ '^hog' AND wait_event_type = 'Lock'};
	wait_until($node, 'postgres', $held_sql, '15',
		"0: (setup) mallory's 15 long calls hold the pool's cap");
	return (\@gates, $held_sql);
}

# paused_reboot_schedule(NODE, DB, NAME, N): a database DB of mallory's,
# with the extension, where alice's '@reboot' schedule NAME, made paused,
# calls alice.pay(N), which writes N into alice.t
sub paused_reboot_schedule
{
	my ($node, $db, $name, $n) = @_;
	$node->safe_psql('postgres', "CREATE DATABASE $db OWNER mallory");
	$node->safe_psql($db, 'CREATE EXTENSION retries; CREATE SCHEMA alice AUTHORIZATION alice;');
	as_role($node, $db, 'alice', "CREATE TABLE alice.t (n int);"
		  . " CREATE FUNCTION alice.pay(n int) RETURNS void LANGUAGE sql AS 'INSERT INTO alice.t VALUES (n)';"
		  . " SELECT retries.annotate('alice.pay(int)', '3 10ms');"
		  . " SELECT retries.schedule('$name', 'alice.pay(int)', '\@reboot', '[$n]');"
		  . " SELECT retries.pause_schedule('$name');");
	return;
}

# pg_cron_node(NAME, CRON_DB): a started server that preloads retries and
# pg_cron, whose jobs live in CRON_DB (cron.database_name; made by the
# caller), with two workers and two extra ones; the test is skipped where
# pg_cron is not installed
sub pg_cron_node
{
	my ($name, $cron_db) = @_;
	my $node = retries_node($name);
	my $control = $node->config_data('--sharedir') . '/extension/pg_cron.control';

	Test::More::plan(skip_all =>
		  "pg_cron is not installed ($control is missing; Debian's postgresql-15-cron provides it)")
	  unless -e $control;
	$node->append_conf('postgresql.conf', qq{
retries.max_workers = 2
retries.max_extra_workers = 2
shared_preload_libraries = 'retries,pg_cron'
cron.database_name = '$cron_db'
});
	$node->start;
	return $node;
}

# workers_sql(DB): a query of how many workers, extra workers and runners
# of the extension are connected to DB
sub workers_sql
{
	my ($db) = @_;
	return "SELECT count(*) FROM pg_stat_activity WHERE datname = '$db'"
	  . " AND backend_type IN ('retries worker', 'retries extra worker', 'retries runner')";
}

# command_elsewhere(NODE, ROLE, COMMAND, DATABASE, [MORE]): ROLE's command
# COMMAND made in database postgres to run in DATABASE
# (retries.run_command's database), with MORE named arguments ("policy =>
# '1 10ms'"); its id
sub command_elsewhere
{
	my ($node, $role, $command, $database, $more) = @_;
	$command =~ s/'/''/g;
	return as_role($node, 'postgres', $role,
		"SELECT retries.run_command('$command', database => '$database'"
		  . (defined $more ? ", $more" : '') . ')');
}

# review_node(NAME, [CONF], [init params]): the started server of a hostile
# review: two workers, two extra workers, prepared transactions, and the
# settings CONF adds
sub review_node
{
	my ($name, $conf, %init) = @_;
	my $node = retries_node($name, %init);

	$node->append_conf('postgresql.conf', q{
retries.max_workers = 2
retries.max_extra_workers = 2
max_prepared_transactions = 10
} . ($conf // ''));
	$node->start;
	return $node;
}

# pool_review_node(NAME, [CONF]): a review_node with the DEFAULTS of the pool,
# written out (workers leave idle databases; 16 for all), two reserved
# workers, room for them all; alice, bob and mallory (review_roles), mallory
# with CREATEDB; and database tpl, a template with the extension in it
# (what a cluster of tenants' databases has)
sub pool_review_node
{
	my ($name, $conf) = @_;
	my $node = review_node($name, q{
max_worker_processes = 48
retries.worker_idle_timeout = 10
retries.max_cluster_workers = 16
retries.reserved_workers = 2
} . ($conf // ''));

	review_roles($node, 'postgres');
	$node->safe_psql('postgres', q{
ALTER ROLE mallory CREATEDB;
CREATE DATABASE tpl IS_TEMPLATE true;
});
	$node->safe_psql('tpl', 'CREATE EXTENSION retries');
	return $node;
}

# hooked_job_sql(SCHEMA): SQL that makes SCHEMA (USAGE to PUBLIC) with
# SCHEMA.job(int), which fails with RT001 below 0, annotated with 2
# attempts and delay_fn SCHEMA.backoff, "SELECT attempt * interval '10
# ms'" (integer * interval: an operator a caller's schema may match better
# than pg_catalog's float8 * interval), no SET search_path
sub hooked_job_sql
{
	my ($schema) = @_;
	return qq{
CREATE SCHEMA $schema;
GRANT USAGE ON SCHEMA $schema TO PUBLIC;
CREATE FUNCTION $schema.job(n int) RETURNS int LANGUAGE plpgsql AS \$\$
BEGIN
	IF n < 0 THEN RAISE EXCEPTION 'negative' USING ERRCODE = 'RT001'; END IF;
	RETURN n;
END \$\$;
CREATE FUNCTION $schema.backoff(attempt integer, sqlstate text, message text)
  RETURNS interval LANGUAGE sql AS \$\$SELECT attempt * interval '10 ms'\$\$;
SELECT retries.annotate('$schema.job(int)', max_attempts => 2,
						delay_fn => '$schema.backoff(integer,text,text)');
};
}

# superuser_operator_sql(SCHEMA): SQL that makes in SCHEMA (a quoted name
# as needed) the operator integer * interval, whose function runs ALTER
# ROLE mallory SUPERUSER (and succeeds only as a superuser)
sub superuser_operator_sql
{
	my ($schema) = @_;
	return qq{
CREATE FUNCTION $schema.pwn(integer, interval) RETURNS interval LANGUAGE plpgsql AS \$\$
BEGIN
	BEGIN
		EXECUTE 'ALTER ROLE mallory SUPERUSER';
	EXCEPTION WHEN insufficient_privilege THEN NULL;
	END;
	RETURN \$2;
END \$\$;
CREATE OPERATOR $schema.* (LEFTARG = integer, RIGHTARG = interval, FUNCTION = $schema.pwn);
};
}

# hook_leaves_mallory(NODE, DB, SCHEMA, LABEL, WHAT): mallory calls
# SCHEMA.job(-1) of hooked_job_sql in DB, so that its delay_fn runs once as
# the annotation's owner; two tests: LABEL: the call ended, and LABEL:
# WHAT, that mallory is no superuser then (made one, she is one no more
# after)
sub hook_leaves_mallory
{
	my ($node, $db, $schema, $label, $what) = @_;
	my $id = $node->safe_psql($db, qq{SELECT retries.call('$schema.job(int)', '[-1]')},
		extra_params => [ '-U', 'mallory' ]);

	wait_until($node, $db,
		"SELECT state IN ('succeeded', 'failed', 'cancelled') FROM retries.call_data WHERE id = $id",
		't', "$label: mallory's call of $schema.job(-1) ended (its delay_fn ran once)");
	is($node->safe_psql('postgres', q{SELECT rolsuper FROM pg_roles WHERE rolname = 'mallory'}),
		'f', "$label: $what");
	$node->safe_psql('postgres', 'ALTER ROLE mallory NOSUPERUSER');
	return;
}

# latin1_bad_name(NODE, ROLE): text not valid in UTF8 as ROLE can read it,
# the text of a query of a session of hers in a LATIN1 database (latin,
# made here) in pg_stat_activity: ROLE.bad_name(prefix) gives prefix and
# 'caf' with byte 0xE9.  Returns the session, for the caller to quit.
sub latin1_bad_name
{
	my ($node, $role) = @_;

	$node->safe_psql('postgres',
		"CREATE DATABASE latin ENCODING 'LATIN1' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0");
	my $session = $node->background_psql('latin', extra_params => [ '-U', $role ]);
	$session->query_safe("SET client_encoding = 'LATIN1'");
	$session->query_safe("SELECT 'caf\xe9' AS bad_name_marker");
	as_role($node, 'postgres', $role, qq{
CREATE FUNCTION $role.bad_name(prefix text) RETURNS text LANGUAGE sql AS \$\$
SELECT prefix || substr(query, 9, 4) FROM pg_stat_activity
 WHERE datname = 'latin' AND query LIKE '%bad_name_marker%' LIMIT 1 \$\$;
});
	return $session;
}

# serving_off(NODE, DB): retries.enabled off (the workers serve nothing,
# each database's first worker settles no copy), once the server says so;
# serving_on(NODE, DB): back to the default
sub serving_off
{
	my ($node, $db) = @_;
	$node->safe_psql($db, 'ALTER SYSTEM SET retries.enabled = off; SELECT pg_reload_conf()');
	wait_until($node, $db, 'SHOW retries.enabled', 'off', 'the workers are told to serve nothing');
	return;
}

sub serving_on
{
	my ($node, $db) = @_;
	$node->safe_psql($db, 'ALTER SYSTEM RESET retries.enabled; SELECT pg_reload_conf()');
	return;
}

# review_roles(NODE, DB): the setup of the hostile reviews: the extension
# in DB, the roles alice, mallory and bob (LOGIN, made in that order: alice
# has the lowest OID), each with a schema of its name that every role may
# use, and alice.pay(n), annotated '3 10ms', which inserts n into alice.t
sub review_roles
{
	my ($node, $db) = @_;
	$node->safe_psql($db, q{
CREATE EXTENSION retries;
CREATE ROLE alice LOGIN;
CREATE ROLE mallory LOGIN;
CREATE ROLE bob LOGIN;
CREATE SCHEMA alice AUTHORIZATION alice;
CREATE SCHEMA mallory AUTHORIZATION mallory;
CREATE SCHEMA bob AUTHORIZATION bob;
GRANT USAGE ON SCHEMA alice, mallory, bob TO PUBLIC;
});
	as_role($node, $db, 'alice', q{
CREATE TABLE alice.t (n int);
CREATE FUNCTION alice.pay(n int) RETURNS void LANGUAGE sql AS 'INSERT INTO alice.t VALUES (n)';
SELECT retries.annotate('alice.pay(int)', '3 10ms');
});
	return;
}

# try_as(NODE, DB, ROLE, SQL): (output, error) of SQL run as ROLE, with
# verbose errors (SQLSTATEs); the output undef if it failed
sub try_as
{
	my ($node, $db, $role, $sql) = @_;
	my ($ret, $out, $err) = $node->psql($db,
		"\\set VERBOSITY verbose\nSET ROLE $role;\n$sql", on_error_stop => 1);
	return ($ret == 0 ? $out : undef, $err);
}

# call_reaches(NODE, DB, ID, STATE, NAME, [DEADLINE]): a test that call ID
# reaches STATE (in call_data) before the deadline
sub call_reaches
{
	my ($node, $db, $id, $state, $name, $deadline) = @_;
	return wait_until($node, $db,
		"SELECT state FROM retries.call_data WHERE id = $id", $state, $name, $deadline);
}

# query_value(NODE, DB, SQL): run SQL once; its output, or undef (with the
# error as second value in list context) if it failed or could not connect.
sub query_value
{
	my ($node, $db, $sql) = @_;
	my ($stdout, $stderr, $timed_out);

	# psql reads SQL from its stdin: when the server refuses the connection
	# (a crash restart) psql may exit before IPC::Run has written it, and
	# IPC::Run dies of the broken pipe.  That is a failed connection too.
	my $ret = eval {
		$node->psql(
			$db, $sql,
			stdout => \$stdout,
			stderr => \$stderr,
			timeout => 30,
			timed_out => \$timed_out);
	};
	return (undef, $@) if !defined $ret && $@ =~ /Broken pipe/;
	die $@ if !defined $ret && $@;

	return (undef, 'timed out') if $timed_out;
	return (undef, $stderr) if !defined $ret || $ret != 0;
	return ($stdout, $stderr);
}

# A poll's session.  The query that a wait repeats runs, from its second
# time on, in one psql session that the wait opens and closes when it ends,
# rather than in a psql and a backend of its own each time: a query in a
# session costs about 0.2 ms of CPU, a new psql and backend about 13 ms
# (with IPC::Run's fork, more), and on a loaded machine, where the waits
# are long, the polls' CPU came near the tests' own.  Each query is sent
# as a script's would be, followed by a marker that psql echoes on both
# its outputs: what comes before the marker on stdout is the output, and
# an ERROR or FATAL before it on stderr makes it a failure, as a psql that
# stops on the error.  A session that fails (its server restarted, its
# backend terminated, a query past the 30 s of query_value) is closed; the
# next poll starts with a new one.

# poll_open(NODE, DB): a session, or undef if psql could not start
sub poll_open
{
	my ($node, $db) = @_;
	my $s = { in => '', out => '', err => '', n => 0, timer => IPC::Run::timer(30) };

	$s->{run} = eval {
		IPC::Run::start([ $node->installed_command('psql'), '-XAtq', '-d', $node->connstr($db) ],
			'<', \$s->{in}, '>', \$s->{out}, '2>', \$s->{err}, $s->{timer});
	};
	return $s->{run} ? $s : undef;
}

# poll_close(SESSION): the session ended (its psql told to quit, or killed)
sub poll_close
{
	my ($s) = @_;

	return if !defined $s;
	eval {
		$s->{in} .= "\\q\n";
		$s->{timer}->start(10);
		$s->{run}->finish;
		1;
	} or eval { $s->{run}->kill_kill; 1 };
	return;
}

# poll_query(SESSION, SQL): query_value's answer, SQL run in the session;
# the session is closed (and undef put in its place) if it failed
sub poll_query
{
	my ($sref, $sql) = @_;
	my $s = $$sref;
	my $mark = 'retries_poll_mark_' . ++$s->{n};
	my $done = qr/^$mark\n/m;

	$sql =~ s/[;\s]+\z//;
	$s->{out} = '';
	$s->{err} = '';
	$s->{in} .= "$sql\n;\n\\echo $mark\n\\warn $mark\n";
	$s->{timer}->start(30);
	my $ok = eval {
		$s->{run}->pump
		  until ($s->{out} =~ $done && $s->{err} =~ $done) || $s->{timer}->is_expired;
		1;
	};
	if (!$ok || $s->{timer}->is_expired)
	{
		my $err = $ok ? 'timed out' : "$s->{err}$@";
		poll_close($s);
		$$sref = undef;
		return (undef, $err);
	}
	my ($out) = $s->{out} =~ /\A(.*?)^$mark\n/ms;
	my ($err) = $s->{err} =~ /\A(.*?)^$mark\n/ms;
	chomp $out;
	return (undef, $err) if $err =~ /^(?:psql:[^\n]*: )?(?:ERROR|FATAL|PANIC):  /m;
	return ($out, $err);
}

# poller(NODE, DB): a sub that runs SQL as query_value does, the first time
# in a psql of its own, from then on in a session (above); called with no
# SQL, it closes its session
sub poller
{
	my ($node, $db) = @_;
	my $session;
	my $polls = 0;

	return sub {
		my ($sql) = @_;
		if (!defined $sql)
		{
			poll_close($session);
			$session = undef;
			return;
		}
		return query_value($node, $db, $sql) if $polls++ == 0;
		$session //= poll_open($node, $db);
		return query_value($node, $db, $sql) if !defined $session;
		return poll_query(\$session, $sql);
	};
}

# start_parallel_hog(NODE, DB, ROLE, NAME): ROLE's parallel query, in a
# background session, over ROLE.big (a table with parallel_workers = 64)
# filtered by ROLE.slow(id) (a PARALLEL SAFE function that sleeps), with
# every parallel setting at its most: it takes every free background-worker
# slot, until it is cancelled.  One test named NAME: every slot of
# max_worker_processes is taken (the reserved workers, not in
# pg_stat_activity as they connect to nothing, and the processes below;
# the Gather registers all it can at once).  Returns the session and its
# backend's pid.
sub start_parallel_hog
{
	my ($node, $db, $role, $name) = @_;
	# (its psql goes on after the cancel that ends the query)
	my $query = $node->background_psql($db, on_error_stop => 0);
	$query->query_safe(qq{
SET ROLE $role;
SET max_parallel_workers = 64;
SET max_parallel_workers_per_gather = 64;
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0;
});
	my $pid = $query->query_safe('SELECT pg_backend_pid()');
	$query->query_until(qr/started/, qq{
\\echo started
SELECT count(*) FROM $role.big WHERE $role.slow(id);
});
	wait_until($node, $db,
		"SELECT count(*) + current_setting('retries.reserved_workers')::int"
		  . " >= current_setting('max_worker_processes')::int"
		  . " FROM pg_stat_activity WHERE backend_type IN"
		  . " ('parallel worker', 'logical replication launcher', 'retries launcher',"
		  . " 'retries worker', 'retries extra worker', 'retries runner')",
		't', $name);
	return ($query, $pid);
}

# wait_until(NODE, DB, SQL, EXPECTED, NAME, [DEADLINE]): run SQL until its
# output is EXPECTED (connection failures, e.g. during a crash restart, are
# retried); one test named NAME, which fails at the deadline.  Returns
# whether it passed.  It polls after 50 ms, then a quarter longer each time
# up to every 0.3 s: each poll starts a psql and a backend (the suite's
# clients took 786 s of CPU in a run of 1,669 s on two cores, polling
# every 50 ms).
sub wait_until
{
	my ($node, $db, $sql, $expected, $name, $deadline) = @_;
	my $until = time() + ($deadline // $DEADLINE);
	my $nap = 0.05;
	my $poll = poller($node, $db);
	my ($out, $err);

	for (;;)
	{
		($out, $err) = $poll->($sql);
		if (defined $out && $out eq $expected)
		{
			$poll->();
			return pass($name);
		}
		last if time() > $until;
		usleep($nap * 1_000_000);    # poll
		$nap = $nap * 1.25 < 0.3 ? $nap * 1.25 : 0.3;
	}
	$poll->();
	fail($name);
	diag(
		"waited " . ($deadline // $DEADLINE) . " s for: $sql\n"
		  . "expected: $expected\n"
		  . "last output: " . ($out // '(none)') . "\n"
		  . "last error: " . ($err // '') . "\n");
	diag_workers($node, $db);
	return 0;
}

# diag_workers(NODE, DB): after a failed wait, what the server's retries
# processes were doing (a wait on workers that failed once in CI could not
# be told apart from its one line of output)
sub diag_workers
{
	my ($node, $db) = @_;
	my ($rc, $out, $err) = $node->psql(
		$db, q{
SELECT pid, backend_type, datname, state, wait_event_type, wait_event,
       backend_start, left(query, 60) AS query
  FROM pg_stat_activity WHERE backend_type ~ '^retries' ORDER BY pid;
SELECT * FROM retries.workers ORDER BY 1;
});
	diag("retries processes:\n" . ($out // '') . "\n" . ($err // ''));
	return;
}

# wait_progressing(NODE, DB, SQL, TARGET, NAME): waits until SQL, a count
# of work done, gives TARGET, however long that takes while the count grows:
# it fails only when the count stays the same for $DEADLINE seconds.  For a
# backlog whose draining time depends on the machine (thousands of calls
# under AddressSanitizer or valgrind), where one deadline for the whole of
# it would be a guess at the machine's speed.
sub wait_progressing
{
	my ($node, $db, $sql, $target, $name) = @_;
	my $poll = poller($node, $db);
	my $ok = wait_progressing_by(sub { return $poll->($sql) }, $target, $name, $sql, 0.1);

	$poll->();
	return $ok;
}

# wait_progressing_by(PROBE, TARGET, NAME, WHAT, POLL): wait_progressing's
# wait, with PROBE (a sub returning the count, or undef and an error) in
# place of a query, run every POLL seconds; WHAT names it in the diagnostic
sub wait_progressing_by
{
	my ($probe, $target, $name, $what, $poll) = @_;
	my $last;
	my $moved = time();
	my ($out, $err);

	for (;;)
	{
		($out, $err) = $probe->();
		return pass($name) if defined $out && $out eq $target;
		if (defined $out && (!defined $last || $out ne $last))
		{
			$last = $out;
			$moved = time();
		}
		last if time() > $moved + $DEADLINE;
		usleep($poll * 1_000_000);    # poll
	}
	fail($name);
	diag("no progress for $DEADLINE s towards $target of: $what\n"
		  . "last output: " . ($out // '(none)') . "\n"
		  . "last error: " . ($err // '') . "\n");
	return 0;
}

# reload_setting(NODE, DB, SETTING, VALUE, SHOWN, NAME): ALTER SYSTEM SET
# SETTING to VALUE (RESET when VALUE is undef) and reload; then waits (a
# test named NAME) until a new backend's SHOW gives SHOWN.  Once it does,
# the postmaster has signalled every worker, and each reads the value
# before its next batch.
sub reload_setting
{
	my ($node, $db, $setting, $value, $shown, $name) = @_;
	my $alter = defined $value
	  ? "ALTER SYSTEM SET $setting = '$value'"
	  : "ALTER SYSTEM RESET $setting";

	$node->safe_psql($db, "$alter; SELECT pg_reload_conf()");
	return wait_until($node, $db, "SHOW $setting", $shown, $name);
}

# stays_true(NODE, DB, SQL, SECONDS, NAME): SQL must give 't' each time it
# is run for SECONDS (every 100 ms); for things that must NOT happen, such
# as workers on a standby.
sub stays_true
{
	my ($node, $db, $sql, $seconds, $name) = @_;
	my $until = time() + $seconds;
	my $checks = 0;
	my $poll = poller($node, $db);

	while (time() < $until)
	{
		my ($out, $err) = $poll->($sql);

		if (!defined $out || $out ne 't')
		{
			$poll->();
			fail($name);
			diag("after $checks checks, $sql gave: "
				  . ($out // '(error)') . " " . ($err // ''));
			return 0;
		}
		$checks++;
		usleep(100_000);    # poll
	}
	$poll->();
	return pass("$name ($checks checks over $seconds s)");
}

# worker_pids(NODE, DB): pids of the retries workers connected to DB, in
# order, as a comma-separated string ('' if none).
sub worker_pids
{
	my ($node, $db) = @_;
	return $node->safe_psql('postgres',
		"SELECT coalesce(string_agg(pid::text, ',' ORDER BY pid), '')"
		  . " FROM pg_stat_activity"
		  . " WHERE backend_type = 'retries worker' AND datname = '$db'");
}

# workers_query(DB): SQL (for 'postgres') counting DB's workers
sub workers_query
{
	my ($db) = @_;
	return "SELECT count(*) FROM pg_stat_activity"
	  . " WHERE backend_type = 'retries worker' AND datname = '$db'";
}

# workers_back_before_pause(NODE, DB, T0, NAME): a test that the two
# workers of DB are back before 25 s have passed since T0, when the command
# that stopped them started.  Stopping them keeps the launcher away for 30 s
# (STOP_PAUSE_SECS in src/xact/xact.c) unless the command's transaction
# ends first: back before that, they came back because it ended.  The
# command and their return take a second or two, even on a slow machine.
sub workers_back_before_pause
{
	my ($node, $db, $t0, $name) = @_;
	my $left = $t0 + 25 - time();
	return wait_until($node, 'postgres', workers_query($db), '2', $name,
		$left > 0 ? $left : 0);
}

# schedule_range(NODE, DB, FN, FROM, TO): schedule FN(i) for i in FROM..TO
# in one statement; returns the first and last call ids.
sub schedule_range
{
	my ($node, $db, $fn, $from, $to) = @_;
	my $out = $node->safe_psql($db,
		"SELECT min(id) || ',' || max(id) FROM ("
		  . " SELECT retries.call('$fn', jsonb_build_array(i)) AS id"
		  . " FROM generate_series($from, $to) i) s");
	return split /,/, $out;
}

# crash_lines(NODE, OFFSET): the lines of NODE's server log since OFFSET
# that tell of a crash: a process killed by a signal, a PANIC, an exit code
# other than 0 and 1 (a worker told to stop exits FATAL, with 1), a crash
# restart.
sub crash_lines
{
	my ($node, $offset) = @_;
	return grep {
		/terminated by signal/
		  || /PANIC/
		  || /exited with exit code (?![01]\b)/
		  || /server process \(PID \d+\) was terminated/
		  || /terminating any other active server processes/
		  || /all server processes terminated/
	} split /\n/, slurp_file($node->logfile, $offset);
}

# no_crash(NODE, OFFSET, NAME): a test that NODE's server log since OFFSET
# tells of no crash (the first ten crash lines shown if it does)
sub no_crash
{
	my ($node, $offset, $name) = @_;
	my @bad = crash_lines($node, $offset);
	ok(!@bad, $name) or diag(join("\n", @bad[ 0 .. ($#bad < 9 ? $#bad : 9) ]));
	return;
}

# Under scripts/coverage (RETRIES_COVERAGE set) the nodes still running at
# the end are stopped in fast mode before the framework's own END block
# stops them in immediate mode: a process that immediate mode ends writes
# no coverage counts, and the workers live until then.  (END blocks run
# last-defined first: this module's after PostgreSQL::Test::Cluster's.)
END
{
	if ($ENV{RETRIES_COVERAGE})
	{
		my $exit_code = $?;
		for my $node (@PostgreSQL::Test::Cluster::all_nodes)
		{
			eval { $node->stop('fast') if defined $node->{_pid}; 1 };
		}
		$? = $exit_code;
	}
}

# Gates: the order of events made explicit with a lock the test holds.
#
#   my $gate = close_gate($node, 'postgres', 41);
#   ... a call whose function passes the gate (gate_sql(41)) starts, and
#   waits there until the test opens it ...
#   wait_at_gate($node, 'postgres', 41, 1, 'the call is at the gate');
#   ... whatever must happen while the call is in the middle of its work ...
#   open_gate($gate);
#
# A gate is the session-level advisory lock KEY (a positive integer) of
# database DB, held in exclusive mode by a session of the test; passing it
# takes the lock in share mode and lets it go at once, so any number of
# processes pass an open gate and wait at a closed one.  A wait for a lock
# also resets the waiting process's latch, as pg_sleep() does.

# close_gate(NODE, DB, KEY): a background session holding gate KEY
sub close_gate
{
	my ($node, $db, $key) = @_;
	my $session = $node->background_psql($db);

	$session->query_safe("SELECT pg_advisory_lock($key)");
	$session->{retries_gate} = $key;
	return $session;
}

# open_gate(SESSION): let everything waiting at the gate pass, and end the
# session that held it.  (Where what passes the gate crashes the server,
# $session->quit lets it go instead: the answer to the unlock may never
# come.)
sub open_gate
{
	my ($session) = @_;

	$session->query_safe("SELECT pg_advisory_unlock($session->{retries_gate})");
	$session->quit;
	return;
}

# gate_waiters(KEY): SQL giving how many processes of the current database
# wait at gate KEY
sub gate_waiters
{
	my ($key) = @_;
	return "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'"
	  . " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
	  . " AND classid = 0 AND objid = $key AND objsubid = 1 AND NOT granted";
}

# wait_at_gate(NODE, DB, KEY, N, NAME): a test that N processes wait at
# gate KEY
sub wait_at_gate
{
	my ($node, $db, $key, $n, $name) = @_;
	return wait_until($node, $db, "SELECT (" . gate_waiters($key) . ") >= $n",
		't', $name);
}

# gate_sql(KEY): an SQL expression that passes gate KEY (waits while it is
# closed), true: `SELECT <it>` in an SQL function, `PERFORM <it>` in
# PL/pgSQL (the lock is taken in the sub-select first, then let go)
sub gate_sql
{
	my ($key) = @_;
	return "(SELECT pg_advisory_unlock_shared($key)"
	  . " FROM (SELECT pg_advisory_lock_shared($key) OFFSET 0) AS gate)";
}

1;
