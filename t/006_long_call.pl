# A call that runs for a long time while others flow.
#
# long_call() runs until the test opens a gate (t/RetriesTest.pm), at
# least 30 s here, standing for a call that runs for minutes.  While it
# runs:
#
#   - it is visible: retries.workers shows its worker 'running' it, with a
#     'since' older than 30 s, and retries.calls shows it 'running';
#   - the other calls keep flowing, measured twice in the same test, first
#     without the long call (the baseline), then with it:
#       b. throughput: 1000 calls fall due at once; calls per second from
#          their scheduling to the end of the last one;
#       a. pick-up latency: 200 calls fall due one every GAP ms; the time
#          from a call's due time to the start of its first attempt, for
#          the calls due after they were all committed.  GAP is 20 ms, or
#          three times the time one worker took per call in the baseline's
#          burst if that is longer: so one worker keeps up with the stream
#          on a slow machine too, and the latency is the pick-up's, not
#          that of a queue.
#
# What is fair to ask.  With retries.max_workers = 2 the long call takes
# one of the two workers, and the other one is left for everything else:
# the short calls here each sleep 2 ms, so one worker can do at best half
# of what two do, and the test asks for 0.2 of the baseline throughput
# (the two are measured a minute apart while other TAP tests run beside
# this one, and their load differs: 0.5 is typical, 0.3 has been seen; a
# worker held by the long call would do nothing for 30 s).  A single idle
# worker picks up a call that falls due as fast as two do, so the p95
# pick-up latency may grow only by noise: at most 5 times the baseline's
# plus 100 ms (held, it would be seconds).  Neither measure can miss a
# worker held for good: the long call waits at its gate until the test
# opens it, after the measures, so the calls would never finish.
#
# Then the gate opens, and the long call must have succeeded once, in one
# attempt of at least 30 s, with its effect there exactly once.
#
# Last, a long call that falls due in the same instant as 100 short ones,
# and so lands in the same batch of a worker: the short calls must not wait
# for it.  A worker claims the calls of a batch a few at a time, so a long
# call holds back none of them when it comes first in its batch, and at
# most twice as many as ran before it otherwise (tried with 10).

use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RetriesTest;
use Test::More;

my $LONG_SECS = 30;			# how long the long call runs at least
my $STREAM = 200;			# calls of the latency stream
my $gap_ms = 20;			# one falls due every so many ms (at the least)
my $BURST = 1000;			# calls of the throughput burst

my $node = retries_node('long_call');
$node->start;

$node->safe_psql(
	'postgres', q{
CREATE EXTENSION retries;

CREATE TABLE long_runs (call_id bigint PRIMARY KEY, started timestamptz);

-- runs until the test opens gate g (as gate_sql(g) in t/RetriesTest.pm)
CREATE FUNCTION long_call(g int) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO long_runs VALUES (retries.current_call(), clock_timestamp());
	PERFORM pg_advisory_unlock_shared(g)
	   FROM (SELECT pg_advisory_lock_shared(g) OFFSET 0) AS gate;
END $$;
SELECT retries.annotate('long_call(int)', '3 1s');

CREATE TABLE short_runs (id int PRIMARY KEY);
CREATE FUNCTION short_call(id int) RETURNS void LANGUAGE sql AS $$
	INSERT INTO short_runs VALUES (id);
	SELECT pg_sleep(0.002);		-- not a wait: the length of a call (see above)
$$;
SELECT retries.annotate('short_call(int)', '3 10ms');
});

wait_until($node, 'postgres',
	"SELECT count(*) FROM retries.workers WHERE database = 'postgres'",
	'2', 'two workers start');

# flow(NAME, FROM): the burst and the stream of short calls, numbered from
# FROM; waits for each to finish.  Returns the p95 pick-up latency of the
# stream (ms) and the throughput of the burst (calls/s).  In the baseline
# (the first flow), the stream's gap is set from the burst.
sub flow
{
	my ($name, $from) = @_;

	# b. the burst: all due at once
	my $to = $from + $BURST - 1;
	my ($first, $last) =
	  schedule_range($node, 'postgres', 'short_call(int)', $from, $to);
	wait_until(
		$node, 'postgres',
		"SELECT count(*) FROM retries.calls WHERE id BETWEEN $first AND $last"
		  . " AND state = 'succeeded'",
		$BURST, "$name: the $BURST calls of the burst succeed");
	my ($rate, $secs) = split /\|/,
	  $node->safe_psql(
		'postgres', qq{
SELECT round($BURST / s, 1), round(s::numeric, 3) FROM (
	SELECT extract(epoch FROM max(a.finished_at) - min(c.created_at)) AS s
	  FROM retries.calls c JOIN retries.attempts a ON a.call_id = c.id
	 WHERE c.id BETWEEN $first AND $last) t});
	if ($name eq 'baseline')
	{
		# two workers ran $rate calls a second: one took 2000 / $rate ms
		# per call; the stream leaves it three times that between calls
		my $per_call_ms = 2000 / $rate;
		$gap_ms = int(3 * $per_call_ms) + 1 if 3 * $per_call_ms > $gap_ms;
	}

	# a. the stream: call i falls due (i - FROM) * GAP after a start 200 ms
	# from now; only the calls due after the statement committed count
	$from = $to + 1;
	$to = $from + $STREAM - 1;
	($first, $last) = split /,/,
	  $node->safe_psql(
		'postgres', qq{
SELECT min(id) || ',' || max(id) FROM (
	SELECT retries.call('short_call(int)', jsonb_build_array(i),
						now() + interval '200 ms'
							  + (i - $from) * interval '$gap_ms ms') AS id
	  FROM generate_series($from, $to) i) s});
	my $committed = $node->safe_psql('postgres', 'SELECT now()');
	wait_until(
		$node, 'postgres',
		"SELECT count(*) FROM retries.calls WHERE id BETWEEN $first AND $last"
		  . " AND state = 'succeeded'",
		$STREAM, "$name: the $STREAM calls of the stream succeed");
	my ($p95, $p50, $max, $n) = split /\|/,
	  $node->safe_psql(
		'postgres', qq{
SELECT round(percentile_cont(0.95) WITHIN GROUP (ORDER BY ms)::numeric, 1),
	   round(percentile_cont(0.5) WITHIN GROUP (ORDER BY ms)::numeric, 1),
	   round(max(ms)::numeric, 1), count(*)
  FROM (SELECT extract(epoch FROM a.started_at - c.next_attempt) * 1000 AS ms
		  FROM retries.calls c
		  JOIN retries.attempts a ON a.call_id = c.id AND a.attempt = 1
		 WHERE c.id BETWEEN $first AND $last
		   AND c.next_attempt > '$committed') s});

	diag("$name: burst of $BURST in $secs s: $rate calls/s; stream of $STREAM"
		  . " every $gap_ms ms: pick-up latency of $n p50 $p50 ms, p95 $p95 ms,"
		  . " max $max ms");
	return ($p95, $rate);
}

###########################################################################
# Baseline: no long call
###########################################################################

my ($base_p95, $base_rate) = flow('baseline', 1);

###########################################################################
# The long call starts
###########################################################################

my $gate = close_gate($node, 'postgres', 1);
my $long = $node->safe_psql('postgres',
	"SELECT retries.call('long_call(int)', '[1]')");
wait_at_gate($node, 'postgres', 1, 1, 'the long call is picked up');
wait_until(
	$node, 'postgres',
	"SELECT count(*) FROM retries.workers WHERE current_call = $long"
	  . " AND state = 'running'",
	'1', 'retries.workers shows it running');
my $long_pid = $node->safe_psql('postgres',
	"SELECT pid FROM retries.workers WHERE current_call = $long");
is( $node->safe_psql(
		'postgres', "SELECT state, attempts FROM retries.calls WHERE id = $long"),
	'running|0',
	'retries.calls shows the long call running, in its first attempt');

###########################################################################
# Others flow meanwhile
###########################################################################

my ($long_p95, $long_rate) = flow('with the long call', 100_001);

is( $node->safe_psql(
		'postgres', qq{
SELECT state, current_call = $long FROM retries.workers WHERE pid = $long_pid}),
	"running|t",
	'the long call kept its worker all along');
cmp_ok($long_rate, '>=', 0.2 * $base_rate,
	"throughput with the long call running is at least 0.2 of the baseline"
	  . " ($long_rate vs $base_rate calls/s)");
cmp_ok($long_p95, '<=', 5 * $base_p95 + 100,
	"p95 pick-up latency with the long call running is at most 5 times the"
	  . " baseline's + 100 ms ($long_p95 vs $base_p95 ms)");

###########################################################################
# Visible all along, for minutes if need be
###########################################################################

wait_until(
	$node, 'postgres',
	"SELECT state || ',' || (since <= now() - interval '$LONG_SECS s')"
	  . " FROM retries.workers WHERE pid = $long_pid AND current_call = $long",
	'running,true',
	"retries.workers shows the long call running for more than $LONG_SECS s",
	$LONG_SECS + 60);
is( $node->safe_psql(
		'postgres', qq{
SELECT c.state, s.running
  FROM retries.calls c, retries.stats s
 WHERE c.id = $long AND s.fn = 'long_call(int)'::regprocedure}),
	'running|1',
	'retries.calls and retries.stats still show it running');
is( $node->safe_psql(
		'postgres', qq{
SELECT count(*) FROM retries.workers
 WHERE database = 'postgres' AND pid <> $long_pid
   AND coalesce(current_call, 0) <> $long}),
	'1',
	'the other worker is not held up by it');

###########################################################################
# The gate opens
###########################################################################

open_gate($gate);
wait_until($node, 'postgres',
	"SELECT state FROM retries.calls WHERE id = $long",
	'succeeded', 'the long call succeeds once released');
is( $node->safe_psql(
		'postgres', qq{
SELECT string_agg(attempt || ':' || outcome, ',')
	   || ' ' || bool_and(finished_at - started_at >= interval '$LONG_SECS s')
  FROM retries.attempts WHERE call_id = $long}),
	'1:succeeded true',
	"in one attempt, of at least $LONG_SECS s");
is($node->safe_psql('postgres', "SELECT count(*) FROM long_runs WHERE call_id = $long"),
	'1', 'its effect is there once');
is( $node->safe_psql(
		'postgres',
		"SELECT count(*), count(DISTINCT id) FROM short_runs"),
	(2 * ($STREAM + $BURST)) . '|' . (2 * ($STREAM + $BURST)),
	'every short call ran once');
wait_until(
	$node, 'postgres',
	"SELECT count(*) FILTER (WHERE state = 'idle' AND current_call IS NULL)"
	  . " FROM retries.workers WHERE database = 'postgres'",
	'2', 'both workers are idle again');

###########################################################################
# A long call claimed in the same batch as others
###########################################################################

# long_with_burst(NAME, GATE, BEFORE, AFTER, FROM): schedule BEFORE short
# calls, then long_call(GATE) 1 ms later, then AFTER short calls 1 ms later
# again, all due now, in one transaction; wait until at least AFTER -
# BEFORE of the short calls succeed, while the long call runs; then open
# the gate and wait for all.  A worker claims a batch a few calls at a
# time, so the long call holds back only as many claimed calls as it ran
# before it in the same batch: none if the long call is the first, and at
# most 2 * BEFORE in all (those before it, which commit with it, and as
# many claimed after it).
sub long_with_burst
{
	my ($name, $gate, $before, $after, $from) = @_;
	my $mid = $from + $before;
	my $to = $mid + $after - 1;
	my $session = close_gate($node, 'postgres', $gate);
	my ($long) = split /\n/,
	  $node->safe_psql(
		'postgres', qq{
BEGIN;
SELECT retries.call('long_call(int)', '[$gate]', now() + interval '1 ms');
SELECT retries.call('short_call(int)', jsonb_build_array(i),
					now() + CASE WHEN i < $mid THEN interval '0'
								 ELSE interval '2 ms' END)
  FROM generate_series($from, $to) i;
COMMIT;
});
	my $shorts =
	  "SELECT id FROM retries.calls WHERE fn = 'short_call(int)'::regprocedure"
	  . " AND (args->>0)::int BETWEEN $from AND $to";
	wait_until(
		$node, 'postgres',
		"SELECT count(*) >= $after - $before FROM retries.calls"
		  . " WHERE id IN ($shorts) AND state = 'succeeded'",
		't',
		"$name: at least $after - $before of the "
		  . ($before + $after)
		  . " short calls succeed while the long call runs");
	is($node->safe_psql('postgres',
			"SELECT state FROM retries.calls WHERE id = $long"),
		'running', "$name: the long call is still running");
	open_gate($session);
	wait_until(
		$node, 'postgres',
		"SELECT count(*) FROM retries.calls WHERE (id IN ($shorts) OR id = $long)"
		  . " AND state = 'succeeded'",
		$before + $after + 1,
		"$name: all succeed once the long call is released");
	return;
}

long_with_burst('long call first', 2, 0, 100, 200_001);
long_with_burst('long call 11th', 3, 10, 100, 300_001);

$node->stop;
done_testing();
