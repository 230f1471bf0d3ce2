# The forty-fifth hostile review (of bd9b4ab, by a reviewer who did not
# write the code), its Medium: one role's long calls at the pool's cap left
# every other role of the cluster one place between them.
#
#   1. (Medium) mallory (CREATEDB) holds fifteen of the pool's sixteen places
#      (retries.max_cluster_workers) with long calls in eight databases of
#      hers.  The databases where other roles' calls were due took the last
#      place in turns, a second of work and a worker's start each: alice's
#      and bob's calls in six databases ran p50 1.1 to 2.4 s, p99 4.1 to
#      7.5 s late, and bob's schedule every second missed 11 to 15 of 21 to
#      34 firings.  Now the smaller roles (each with fewer places than a
#      quarter of the pool) keep half the pool: while the big ones' batches
#      hold more than the pool less half, the pool grows for the others by
#      as many places (launcher.c, pool_extra), and shrinks back as theirs
#      end (t/077: two big roles).  Checks 2 to 4 (alice and bob, three
#      places each); 5: with the places given back, idle workers beyond
#      the pool leave at once, not after their idle timeout.
#   2. (part of it) her capped databases got a worker at each commit of
#      hers there (a call made), which found only her calls held back and
#      took the others' place for a moment.  A commit that makes only calls
#      of the role the cap holds back now starts no worker there.  Check 1.
#
# Each check waits for a condition; none assumes how fast the machine is.
# Check 1's gaps give the code reviewed time to start a worker, which the
# code now never does.

use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Utils;
use Test::More;
use RetriesTest;

my $node = pool_review_node('review_39');
my $log_offset = -s $node->logfile;

my $pool_sql = q{SELECT count(*) FROM pg_stat_activity
  WHERE backend_type IN ('retries worker', 'retries extra worker')};

# mallory's 15 long calls, held at a gate: two in each of seven databases
# of hers and one in an eighth (two workers a database)
$node->safe_psql('tpl', 'CREATE FUNCTION public.gated() RETURNS boolean LANGUAGE sql AS '
	  . '$$SELECT ' . gate_sql(75) . '$$;'
	  . q{SELECT retries.annotate('public.gated()', '1 10ms');});
my @gates;
for my $i (1 .. 9)
{
	as_role($node, 'postgres', 'mallory', "CREATE DATABASE hog$i TEMPLATE tpl");
	push @gates, close_gate($node, "hog$i", 75);
}
for my $i (1 .. 8)
{
	as_role($node, "hog$i", 'mallory',
		"SELECT count(retries.call('public.gated()')) FROM generate_series(1, "
		  . ($i < 8 ? 2 : 1) . ')');
}
wait_until($node, 'postgres',
	"SELECT count(*) FROM pg_stat_activity WHERE backend_type ~ '^retries'"
	  . " AND datname ~ '^hog' AND wait_event_type = 'Lock'",
	'15', "0: (setup) mallory's 15 long calls hold the pool's cap");

# 1. mallory's commits in a database of hers whose due calls the cap holds
# back start no worker there (one a commit before)
my $hog9 = $node->safe_psql('postgres', "SELECT oid FROM pg_database WHERE datname = 'hog9'");
my $starts_re = qr/starting background worker process "retries (?:extra )?worker \d+ for database $hog9"/;
reload_setting($node, 'postgres', 'log_min_messages', 'debug1', 'debug1',
	'1: (setup) the postmaster logs the workers it starts');
my $hog9_workers = "SELECT count(*) FROM pg_stat_activity WHERE backend_type ~ '^retries' AND datname = 'hog9'";
# (the workers that came at its creation, idle, leave first: her first
# call then wakes the launcher, not one of them)
wait_until($node, 'postgres', $hog9_workers, '0', '1: (setup) hog9 has no worker');
my $before = -s $node->logfile;
as_role($node, 'hog9', 'mallory', q{SELECT retries.call('public.gated()')});
# the worker her first call woke finds it held back by the cap, and leaves
$node->wait_for_log($starts_re, $before);
pass('1: (setup) a worker came for her first call in hog9');
wait_until($node, 'postgres', $hog9_workers, '0',
	'1: (setup) hog9 is held back by the cap, and its worker left');
my $capped = -s $node->logfile;
for (1 .. 3)
{
	as_role($node, 'hog9', 'mallory', q{SELECT retries.call('public.gated()')});
	# not a wait: time for a worker to start, which it must not
	$node->safe_psql('postgres', 'SELECT pg_sleep(1.5)');
}
my @starts = slurp_file($node->logfile, $capped) =~ /$starts_re/g;
is(scalar @starts, 0,
	"1: mallory's three commits in her capped database started no worker there");
$node->safe_psql('postgres',
	'ALTER SYSTEM RESET log_min_messages; SELECT pg_reload_conf()');
# ... and a superuser's call there still runs (a commit of another role)
$node->safe_psql('hog9', q{
CREATE FUNCTION public.su() RETURNS int LANGUAGE sql AS 'SELECT 1';
SELECT retries.annotate('public.su()', '1 10ms');
SELECT retries.call('public.su()');
});
wait_until($node, 'hog9',
	q{SELECT count(*) FROM retries.calls WHERE fn = 'public.su()'::regprocedure
	    AND state = 'succeeded'},
	'1', "1: a superuser's call in mallory's capped database runs");

# the other roles: alice in postgres and two databases of hers, bob in
# three of his, a call each held at a gate of its database (each holds
# three places: below a quarter of the pool, where a role counts as big)
my $held_sql = q{
CREATE FUNCTION %1$s.held() RETURNS boolean LANGUAGE sql AS $$SELECT %2$s$$;
SELECT retries.annotate('%1$s.held()', '1 10ms');
};
my %victims = (postgres => 'alice', alice1 => 'alice', alice2 => 'alice',
	bob1 => 'bob', bob2 => 'bob', bob3 => 'bob');
for my $db (sort keys %victims)
{
	my $role = $victims{$db};

	if ($db ne 'postgres')
	{
		$node->safe_psql('postgres', "CREATE DATABASE $db TEMPLATE tpl OWNER $role");
		$node->safe_psql($db, "CREATE SCHEMA $role AUTHORIZATION $role");
	}
	push @gates, close_gate($node, $db, 76);
	as_role($node, $db, $role, sprintf($held_sql, $role, gate_sql(76)));
	as_role($node, $db, $role, "SELECT retries.call('$role.held()')");
}

# 2. all six run at once beside mallory's fifteen (one at a time before:
# the others' one place, which the first of them kept)
my $victims_sql = q{SELECT count(*) FROM pg_stat_activity
  WHERE backend_type ~ '^retries' AND wait_event_type = 'Lock'
    AND datname IN ('postgres', 'alice1', 'alice2', 'bob1', 'bob2', 'bob3')};
wait_until($node, 'postgres', $victims_sql, '6',
	"2: the other roles' calls in six databases run at once beside mallory's 15 long calls");

# 3. she still holds fifteen, not more: a sixteenth call of hers (in hog8,
# which has a worker free) waits, whatever the places added for the others
as_role($node, 'hog8', 'mallory', q{SELECT retries.call('public.gated()')});
$node->safe_psql('hog8', 'SELECT pg_sleep(1)');    # not a wait: room to break the cap
is($node->safe_psql('postgres',
		"SELECT count(*) FROM pg_stat_activity WHERE backend_type ~ '^retries'"
		  . " AND datname ~ '^hog' AND wait_event_type = 'Lock'"),
	'15', "3: mallory's batches stay at the cap (15) beside the places added for the others");

# 4. the pool grows by as many places as she holds of the others' half
# (7: 15 of 16 is 7 beyond 8), no more
my $pool = $node->safe_psql('postgres', $pool_sql);
cmp_ok($pool, '<=', 16 + 7, "4: the pool grows by at most 7 places ($pool workers)");

# 5. her calls end: the places added go back.  With idle workers kept an
# hour, those beyond the pool still leave at once (the other roles' six
# calls still run).
reload_setting($node, 'postgres', 'retries.worker_idle_timeout', '3600', '1h',
	'5: (setup) idle workers stay an hour');
open_gate($_) for @gates[0 .. 8];
wait_until($node, 'postgres', "SELECT ($pool_sql) <= 16", 't',
	"5: with mallory's calls ended, the workers beyond the pool leave");
is($node->safe_psql('postgres', $victims_sql), '6',
	"5: the other roles' six calls still run");

open_gate($_) for @gates[9 .. $#gates];
no_crash($node, $log_offset, 'z: no backend or worker crashed');
$node->stop;

done_testing();
