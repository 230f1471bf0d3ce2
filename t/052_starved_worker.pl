# A worker that did not run for a while keeps the grace of its attempt's
# time limit.  An attempt's limit cancels it; code that traps the cancel
# and goes on ends with the worker ATTEMPT_KILL_GRACE_MS (2 s) after the
# cancel (execute.c).  On a loaded machine a process may not run for
# longer than that: the signal of both timers then came at once, late,
# and the worker ended although its attempt had never seen the cancel
# (charged 'interrupted', its batch rolled back and run again).  Seen once
# in CI, under valgrind: regress/engine's timeout check.  The grace counts
# from the cancel as made since (time_cap.c), for attempts and runners.
#
# Here the worker is stopped (SIGSTOP) while its attempt waits on a lock
# the test holds, before the attempt's limit is due, and continued once
# the limit and the grace have both passed.  No step assumes how fast the
# machine is: a round whose stop came after the limit was due (the test
# could not see the attempt running in time) says nothing, and the next
# round tries again with a limit twice as long.
#
#   a. the stopped attempt ends as a timeout (outcome 'timeout', 57014),
#      not 'interrupted', and the worker that ran it is still the one
#      serving (1.7 before this: it exited);
#   b. (control) an attempt that traps its cancel still ends with the
#      worker: the grace holds, and so does the end after it.

use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RetriesTest;
use Test::More;
use Time::HiRes qw(time usleep);

my $DB = 'postgres';
my $node = retries_node('starved');
$node->append_conf('postgresql.conf', "retries.max_workers = 1\n");
$node->start;
$node->safe_psql(
	$DB, q{
CREATE EXTENSION retries;
ALTER SYSTEM SET retries.enabled = on;
SELECT pg_reload_conf();
CREATE FUNCTION public.waits() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	PERFORM } . gate_sql(52) . q{;
END
$$;
CREATE FUNCTION public.traps() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	LOOP
		BEGIN
			-- not a wait: the cancel or the end of the worker cuts it short
			PERFORM pg_sleep(3600);
		EXCEPTION WHEN query_canceled THEN
			NULL;
		END;
	END LOOP;
END
$$;
});

# The worker serving the database, and when its current call's attempt
# began (the database's clock, as an epoch)
sub running_worker
{
	my ($id) = @_;
	my ($out) = query_value($node, $DB,
		"SELECT pid || ' ' || extract(epoch FROM since) FROM retries.workers"
		  . " WHERE current_call = $id AND state = 'running'");
	return defined $out && $out ne '' ? split(/ /, $out) : ();
}

# a. rounds with limits of 2, 4, 8 ... s until one's stop came in time
my $limit = 2;
my $done = 0;
while (!$done && $limit <= 64)
{
	my $gate = close_gate($node, $DB, 52);
	$node->safe_psql($DB,
		"SELECT retries.annotate('public.waits()', '1 10ms', timeout => '$limit s')");
	my $id = $node->safe_psql($DB, "SELECT retries.call('public.waits()')");
	my ($pid, $since);
	my $until = time() + $RetriesTest::DEADLINE;
	while (!defined $pid && time() < $until)
	{
		($pid, $since) = running_worker($id);
		usleep(10_000) if !defined $pid;    # poll
	}
	die "call $id never ran" if !defined $pid;
	kill 'STOP', $pid;
	my $stopped_at = time();
	if ($stopped_at >= $since + $limit)
	{
		kill 'CONT', $pid;
		note("round of $limit s: stopped too late, the next round doubles the limit");
		open_gate($gate);
		wait_until($node, $DB, "SELECT state IN ('failed', 'succeeded') FROM retries.calls WHERE id = $id",
			't', "a: round of $limit s over");
		$limit *= 2;
		next;
	}

	# not a wait: the stop must outlast the limit and the grace (2 s)
	usleep(int(($since + $limit + 3 - $stopped_at) * 1_000_000));
	kill 'CONT', $pid;
	wait_until($node, $DB,
		"SELECT state FROM retries.calls WHERE id = $id", 'failed',
		"a: the stopped attempt ends (limit $limit s)");
	is( $node->safe_psql($DB,
			"SELECT outcome || ' ' || sqlstate FROM retries.attempts WHERE call_id = $id"),
		'timeout 57014',
		'a: as a timeout, not interrupted');
	is($node->safe_psql($DB, "SELECT count(*) FROM retries.workers WHERE pid = $pid"),
		'1', 'a: its worker did not exit');
	open_gate($gate);
	$done = 1;
}
ok($done, 'a: a round stopped the worker before its limit was due');

# b. code that traps its cancel ends with the worker, after the grace
$node->safe_psql($DB,
	"SELECT retries.annotate('public.traps()', '1 10ms', timeout => '1 s')");
my $before = $node->safe_psql($DB, "SELECT pid FROM retries.workers");
my $id = $node->safe_psql($DB, "SELECT retries.call('public.traps()')");
wait_until($node, $DB,
	"SELECT outcome FROM retries.attempts WHERE call_id = $id", 'interrupted',
	'b: an attempt that traps its cancel is cut short by the end of its worker');
isnt($node->safe_psql($DB, "SELECT pid FROM pg_stat_activity WHERE backend_type = 'retries worker' AND datname = '$DB'"),
	$before, 'b: its worker was replaced');

$node->stop;
done_testing();
