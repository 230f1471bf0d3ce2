# Fortieth hostile review (rv41, of cbe2224: databases idle between the
# looks at their gates, t/072 3; issues 42 and 44; by a reviewer who did
# not write the code).
#
# Each numbered check failed on the code reviewed and holds since its fix.
#
# Findings:
#   1. (Medium) the looks at a database's full gate did not back off once
#      its worker had left it idle: the launcher, waking it when its look
#      was due (revisit_due), woke it as a commit there does, which starts
#      its looks over at a second; and one whose entry had gone to another
#      database started over with its new entry.  So they went 1, 2, 4 s
#      and over again, each a worker or two started and ended (the
#      reviewer's 96 databases, each a call held at a full '1/1d' gate,
#      retries.max_databases 16: 1,207 workers started in 30 s).  Fixed:
#      the launcher's own wake (WAKE_REVISIT, shmem.h) keeps the looks
#      backing off, up to 16 s, and their count is kept with the due time
#      while the database has no entry (revisits.c), and given back with
#      one.  Check 1: 24 such databases, retries.max_databases 16, start
#      fewer than seven workers each in 48 s (85 in all with the fix, 212
#      before it).
#   2. (Medium) a database whose due calls were all of a role at the
#      pool's cap (its batches in all places of the pool but one) kept its
#      entry: its worker left it, none came back while the cap held, and it
#      was never idle; mallory's long calls in three databases and a due
#      call in each of more took every entry of retries.max_databases, and
#      bob's database, made after them, got no worker for as long as her
#      long calls ran.  Fixed: such a database is idle, looked at again 4 s
#      on (leave.c, idle_until).  Check 2.
#   (Medium, no check here) a database woken by a commit while no entry
#      could be had counted as one not looked at yet, in pg_database's
#      order, and shared the list of such wakes (64) with the launcher's
#      own wakes of the databases due for a look: behind a hundred
#      databases at full gates, bob's database, made last, lost its turn
#      at every read, and his call waited.  Fixed: a database woken by a
#      commit ranks before those not looked at yet (RANK_WOKEN,
#      launcher.c), and is noted again until it has an entry; the
#      launcher's own wakes are its own list.  With 24 gated databases here
#      bob's call ran before the fix as after it (h below); a hundred
#      databases are not made here.
#
# Held: h. bob's call in a database made after the 24 gated ones runs.

use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RetriesTest;
use Test::More;

# gated_copies(NODE, PREFIX, N): mallory's copies PREFIX1 .. PREFIXN of
# tpl, each with two calls held at a full gate ('1/1d': after a start of
# the server, a rate's first call waits one spacing, a day), once a worker
# has found them held; returns their names
sub gated_copies
{
	my ($node, $prefix, $n) = @_;
	my @made = map { "$prefix$_" } 1 .. $n;

	for my $db (@made)
	{
		as_role($node, 'postgres', 'mallory', "CREATE DATABASE $db TEMPLATE tpl");
		as_role($node, $db, 'mallory',
			q{SELECT retries.call('public.paced()') FROM generate_series(1, 2)});
	}
	for my $db (@made)
	{
		wait_until($node, $db,
			q{SELECT count(*) FROM retries.call_data WHERE held AND state = 'scheduled'},
			'2', "(setup) $db: the calls wait at the gate");
	}
	return @made;
}

# worker_starts(NODE, OFFSET, PREFIX): how many workers the postmaster
# logged starting (log_min_messages debug1) since log offset OFFSET in the
# databases named PREFIX<n>
sub worker_starts
{
	my ($node, $offset, $prefix) = @_;
	my %oid = map { split /\|/ } split /\n/, $node->safe_psql('postgres',
		"SELECT oid, datname FROM pg_database WHERE datname ~ '^${prefix}[0-9]+\$'");
	my $log = slurp_file($node->logfile, $offset);
	my $n = 0;

	while ($log =~ /starting background worker process "retries worker \d+ for database (\d+)"/g)
	{
		$n++ if $oid{$1};
	}
	return $n;
}

# ---------------------------------------------------------------------
# 1: databases with calls held at a full gate, more than
#    retries.max_databases
# ---------------------------------------------------------------------
my $node = pool_review_node('review_37', q{
retries.max_databases = 16
retries.reserved_workers = 0
});
my $log_offset = -s $node->logfile;
$node->safe_psql('tpl', q{
CREATE FUNCTION public.paced() RETURNS int LANGUAGE sql AS 'SELECT 1';
SELECT retries.annotate('public.paced()', '1 10ms', rate => '1/1d');
SELECT retries.annotate('pg_catalog.now()');
});
my $NGATED = 24;
my @gated = gated_copies($node, 'g', $NGATED);

# 1. The looks back off to 16 s: in 48 s after a first 40 s (looks 1, 2,
# 4, 8, 16 s apart), each database is looked at three or four times, each
# look a worker, or two for a database given an entry again (fewer than
# seven a database: 85 in all here).  Before the fix they started over
# at a second (212).
# not a wait: time for the looks to back off (a slower machine only looks less often)
$node->safe_psql('postgres', 'SELECT pg_sleep(40)');
my $window = 48;
my $window_offset = -s $node->logfile;
$node->safe_psql('postgres',
	"ALTER SYSTEM SET log_min_messages = debug1; SELECT pg_reload_conf()");
# not a wait: the window the workers started are counted in (an upper bound)
$node->safe_psql('postgres', "SELECT pg_sleep($window)");
$node->safe_psql('postgres',
	"ALTER SYSTEM RESET log_min_messages; SELECT pg_reload_conf()");
my $starts = worker_starts($node, $window_offset, 'g');
cmp_ok($starts, '<', 7 * $NGATED,
	"1: the looks at $NGATED full gates back off ($starts workers started in $window s)");

# h. bob's call in a database made after them runs
$node->safe_psql('postgres', 'CREATE DATABASE late TEMPLATE tpl OWNER bob');
my $bobs = as_role($node, 'late', 'bob', q{SELECT retries.call('pg_catalog.now()')});
call_reaches($node, 'late', $bobs, 'succeeded',
	"h: bob's call in a database made after $NGATED gated ones runs");

no_crash($node, $log_offset, 'z: no backend or worker crashed');
$node->stop;

# ---------------------------------------------------------------------
# 2. mallory at the pool's cap: her long calls in three databases, a due
#    call in each of more, and bob's database made after them
# ---------------------------------------------------------------------
my $cap = pool_review_node('review_37_cap', q{
retries.max_databases = 16
retries.max_cluster_workers = 4
});
my $cap_log_offset = -s $cap->logfile;
$cap->safe_psql('tpl', 'CREATE FUNCTION public.gated() RETURNS boolean LANGUAGE sql AS '
	  . "\$\$SELECT " . gate_sql(74) . "\$\$;"
	  . q{SELECT retries.annotate('public.gated()', '1 10ms');
SELECT retries.annotate('pg_catalog.now()');});
my $nall = $cap->safe_psql('postgres',
	'SELECT count(*) FROM pg_database WHERE datallowconn AND NOT datistemplate');
my (@gates, @long);
for my $i (1 .. 3)
{
	as_role($cap, 'postgres', 'mallory', "CREATE DATABASE long$i TEMPLATE tpl");
	push @gates, close_gate($cap, "long$i", 74);
	as_role($cap, "long$i", 'mallory', q{SELECT retries.call('public.gated()')});
	wait_at_gate($cap, "long$i", 74, 1, "2: (setup) mallory's long call in long$i runs");
}
# her three batches hold the pool's cap (all four places but one): her
# calls in further copies are due and wait
my @capped = map { "c$_" } 1 .. (18 - $nall - 3);
for my $db (@capped)
{
	as_role($cap, 'postgres', 'mallory', "CREATE DATABASE $db TEMPLATE tpl");
	as_role($cap, $db, 'mallory', q{SELECT retries.call('pg_catalog.now()')});
}
wait_until($cap, 'postgres',
	"SELECT count(*) = 0 FROM pg_stat_activity WHERE backend_type = 'retries worker'"
	  . " AND datname ~ '^c[0-9]+\$'",
	't', '2: (setup) the copies\' workers left them, their calls held back by the cap');
is(join(',', map { $cap->safe_psql($_, q{SELECT string_agg(state::text, ',') FROM retries.call_data}) }
	  @capped),
	join(',', map { 'scheduled' } @capped), '2: (setup) mallory\'s calls in the copies wait');
$cap->safe_psql('postgres', 'CREATE DATABASE late TEMPLATE tpl OWNER bob');
my $late = as_role($cap, 'late', 'bob', q{SELECT retries.call('pg_catalog.now()')});
call_reaches($cap, 'late', $late, 'succeeded',
	"2: bob's call in a database made after mallory's capped ones runs");

# her calls run once her long ones end
open_gate($_) for @gates;
for my $db (@capped)
{
	wait_until($cap, $db, q{SELECT string_agg(state::text, ',') FROM retries.call_data},
		'succeeded', "2: mallory's call in $db runs once her long calls end");
}

no_crash($cap, $cap_log_offset, 'z: no backend or worker crashed (second node)');

done_testing();
