# The crash rule: a worker that dies in the middle of a batch loses no call
# and runs none twice; the call it was running is charged one 'interrupted'
# attempt and retried, its batch-mates are not charged, and a call that
# kills its worker every time ends 'failed' after max_attempts.
#
#   a. SIGKILL of a busy worker (the postmaster restarts the cluster)
#   b. poison calls that kill their own worker: by SIGKILL (crash restart)
#      and by SIGTERM (the worker exits FATAL, the cluster stays up)
#   c. pg_ctl stop -m immediate under load, then start
#   d. pg_ctl stop -m fast under load, then start
#
# work(id) records each run of call id in results: a second run of the same
# call would show as n = 2, so "exactly once" is checked on the effects
# themselves, not only on the calls' states.
#
# The kill in a, and the stops in c and d, come while one call of the run
# waits at a gate the test holds (t/RetriesTest.pm), at its first attempt:
# that a worker is in the middle of a call, and that the run is not over,
# is so whatever the speed of the machine.  The crash restart or the stop
# ends the session that holds the gate, and the call's next attempt
# passes.

use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RetriesTest;
use Test::More;

my $node = retries_node('crash');
$node->start;

my $GATE = 1;
# the gate the poison call that kills its worker waits at, until the
# session that made it has its COMMIT's answer: else, on a slow machine,
# the crash restart could end that session first
my $POISON_GATE = 2;
$node->safe_psql(
	'postgres', q{
CREATE EXTENSION retries;
CREATE TABLE results (id bigint PRIMARY KEY, n int NOT NULL DEFAULT 1);
-- the calls (by argument) that wait at the gate at their first attempt
CREATE TABLE gated (a bigint PRIMARY KEY);

CREATE FUNCTION work(a bigint) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO results AS r (id) VALUES (a)
		ON CONFLICT (id) DO UPDATE SET n = r.n + 1;
	IF retries.current_attempt() = 1 AND EXISTS (SELECT FROM gated g WHERE g.a = work.a) THEN
		PERFORM } . gate_sql($GATE) . q{;
	END IF;
	-- a call takes a little while, so that a kill may find the other
	-- worker in the middle of one too
	PERFORM pg_sleep(0.002);	-- not a wait: no check depends on it
END $$;
SELECT retries.annotate('work(bigint)', '10 10ms');

-- COPY TO PROGRAM runs the program through sh, whose parent is the backend
-- running the COPY: here, the worker.
CREATE FUNCTION poison_kill() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	PERFORM } . gate_sql($POISON_GATE) . q{;
	COPY (SELECT 1) TO PROGRAM 'kill -9 $PPID';
	PERFORM pg_sleep(10);		-- not a wait: not reached, the worker is killed
END $$;
SELECT retries.annotate('poison_kill()', '2 10ms');

-- SIGTERM to itself: the worker exits with FATAL at the next interrupt
-- check, in pg_sleep at the latest
CREATE FUNCTION poison_term() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	PERFORM pg_terminate_backend(pg_backend_pid());
	PERFORM pg_sleep(10);		-- not a wait: not reached, the worker exits
END $$;
SELECT retries.annotate('poison_term()', '2 10ms');
});

wait_until($node, 'postgres',
	"SELECT count(*) FROM retries.workers WHERE database = 'postgres'",
	'2', 'two workers start');

# check_exactly_once(NAME, FIRST_CALL, LAST_CALL, FROM, TO, MAX_INTERRUPTED,
#                    MAX_ATTEMPTS):
# calls FIRST_CALL..LAST_CALL of work(FROM..TO) all succeeded, each had its
# effect exactly once, and every attempt but the last of each call was
# 'interrupted': at most MAX_INTERRUPTED of them in all (one per worker that
# died while running one of these calls), and no call had more than
# MAX_ATTEMPTS attempts.
sub check_exactly_once
{
	my ($name, $first, $last, $from, $to, $max_interrupted, $bound) = @_;
	my $n = $to - $from + 1;

	is($last - $first + 1, $n, "$name: $n calls were scheduled");
	is( $node->safe_psql(
			'postgres', qq{
SELECT count(*), count(DISTINCT id), coalesce(sum(n), 0), coalesce(max(n), 0)
  FROM results WHERE id BETWEEN $from AND $to}),
		"$n|$n|$n|1",
		"$name: results has each of the $n rows exactly once (no effect twice)");
	is( $node->safe_psql(
			'postgres', qq{
SELECT count(*) FROM generate_series($from, $to) g
 WHERE NOT EXISTS (SELECT FROM results r WHERE r.id = g)}),
		'0',
		"$name: no call's effect is missing");
	is( $node->safe_psql(
			'postgres', qq{
SELECT count(*), count(*) FILTER (WHERE state = 'succeeded')
  FROM retries.calls WHERE id BETWEEN $first AND $last}),
		"$n|$n",
		"$name: every call is there and succeeded");
	is( $node->safe_psql(
			'postgres', qq{
SELECT count(*) FROM retries.calls c
 WHERE c.id BETWEEN $first AND $last
   AND (c.attempts <> (SELECT count(*) FROM retries.attempts a
                        WHERE a.call_id = c.id)
        OR NOT EXISTS (SELECT FROM retries.attempts a
                        WHERE a.call_id = c.id AND a.attempt = c.attempts
                          AND a.outcome = 'succeeded')
        OR EXISTS (SELECT FROM retries.attempts a
                    WHERE a.call_id = c.id AND a.attempt < c.attempts
                      AND a.outcome <> 'interrupted'))}),
		'0',
		"$name: each call has one attempt row per attempt, the last succeeded and any earlier one interrupted"
	);
	my $interrupted = $node->safe_psql(
		'postgres', qq{
SELECT count(*) FROM retries.attempts
 WHERE call_id BETWEEN $first AND $last AND outcome = 'interrupted'});
	cmp_ok($interrupted, '<=', $max_interrupted,
		"$name: at most $max_interrupted interrupted attempts were charged (got $interrupted)"
	);
	my $max_attempts = $node->safe_psql('postgres',
		"SELECT max(attempts) FROM retries.calls WHERE id BETWEEN $first AND $last"
	);
	cmp_ok($max_attempts, '<=', $bound,
		"$name: no call had more than $bound attempts (max $max_attempts)");
	return;
}

# succeeded_query(FIRST, LAST, CONDITION): SQL that tests how many of calls
# FIRST..LAST succeeded
sub succeeded_query
{
	my ($first, $last, $cond) = @_;
	return "SELECT count(*) $cond FROM retries.calls"
	  . " WHERE id BETWEEN $first AND $last AND state = 'succeeded'";
}

# succeeded_count(FIRST, LAST)
sub succeeded_count
{
	my ($first, $last) = @_;
	return $node->safe_psql('postgres', succeeded_query($first, $last, ''));
}

###########################################################################
# a. SIGKILL of a busy worker
###########################################################################

# gated_worker(NAME, ARG): wait until the call of work(ARG) waits at the
# gate; the pid of the worker running it
sub gated_worker
{
	my ($name, $arg) = @_;
	wait_at_gate($node, 'postgres', $GATE, 1,
		"$name: the call of work($arg) waits at the gate");
	return $node->safe_psql('postgres',
		"SELECT w.pid FROM retries.workers w JOIN retries.calls c ON c.id = w.current_call"
		  . " WHERE c.fn = 'work(bigint)'::regprocedure AND c.args->>0 = '$arg'");
}

# the 1000th call waits at the gate: its worker is in the middle of it
$node->safe_psql('postgres', 'INSERT INTO gated VALUES (1000)');
my $gate = close_gate($node, 'postgres', $GATE);
my ($first, $last) = schedule_range($node, 'postgres', 'work(bigint)', 1, 2000);
my $pid = gated_worker('a', 1000);
isnt($pid, '', 'a: found the worker running that call');
my $done_before = succeeded_count($first, $last);
my $log_offset = -s $node->logfile;
is(kill('KILL', $pid), 1, "a: sent SIGKILL to worker $pid");
cmp_ok($done_before, '<', 2000,
	"a: the worker was killed mid-run ($done_before of 2000 done)");

$node->wait_for_log(qr/\(PID $pid\) was terminated by signal 9/, $log_offset);
$node->wait_for_log(qr/all server processes terminated; reinitializing/,
	$log_offset);
pass('a: the postmaster restarted the cluster after the kill');
# (the restart ended the session that held the gate)
$gate->quit;

wait_until($node, 'postgres', succeeded_query($first, $last, '= 2000'),
	't', 'a: all 2000 calls succeed after the crash restart');
# the crash takes every worker of the database down, each possibly in the
# middle of a call
check_exactly_once('a', $first, $last, 1, 2000, 2, 2);

###########################################################################
# b. poison calls: a call that kills its worker at every attempt
###########################################################################

# poison(FN, FROM): one call of FN among 300 calls of work(FROM..),
# all scheduled in one transaction; returns the poison call's id and the
# work calls' first and last ids.
sub poison
{
	my ($fn, $from) = @_;
	my $to = $from + 299;
	my $out = $node->safe_psql(
		'postgres', qq{
BEGIN;
SELECT retries.call('$fn');
SELECT min(id) || ',' || max(id) FROM (
	SELECT retries.call('work(bigint)', jsonb_build_array(i)) AS id
	  FROM generate_series($from, $to) i) s;
COMMIT;
});
	my ($poison_id, $range) = split /\n/, $out;
	return ($poison_id, split /,/, $range);
}

# check_poison(NAME, ID): the poison call failed after 3 attempts, each of
# them interrupted
sub check_poison
{
	my ($name, $id) = @_;

	is( $node->safe_psql(
			'postgres',
			"SELECT state, attempts, max_attempts, last_sqlstate"
			  . " FROM retries.calls WHERE id = $id"),
		'failed|3|3|57P01',
		"$name: the poison call failed after its 3 attempts");
	is( $node->safe_psql(
			'postgres',
			"SELECT string_agg(attempt || ':' || outcome, ',' ORDER BY attempt)"
			  . " FROM retries.attempts WHERE call_id = $id"),
		'1:interrupted,2:interrupted,3:interrupted',
		"$name: each of its attempts is recorded as interrupted");
	return;
}

# b1. SIGKILL: each attempt crashes the whole cluster
$log_offset = -s $node->logfile;
my $poison_gate = close_gate($node, 'postgres', $POISON_GATE);
my ($poison_id, $wfirst, $wlast) = poison('poison_kill()', 100001);
# the session that holds the gate ends, which lets it go (open_gate's
# unlock could wait for an answer that the crash restart it lets loose
# never sends)
$poison_gate->quit;
wait_until(
	$node, 'postgres',
	"SELECT (SELECT state FROM retries.calls WHERE id = $poison_id) = 'failed'"
	  . " AND (" . succeeded_query($wfirst, $wlast, '= 300') . ")",
	't',
	'b1 (SIGKILL): the poison call fails and the other 300 calls succeed');
like(
	slurp_file($node->logfile, $log_offset),
	qr/was terminated by signal 9.*all server processes terminated; reinitializing/s,
	'b1: the poison call did kill its worker by SIGKILL');
check_poison('b1', $poison_id);
# each of the 3 crashes also takes the other worker down, in the middle of
# a call maybe (the same call, possibly)
check_exactly_once('b1', $wfirst, $wlast, 100001, 100300, 3, 4);

# b2. SIGTERM: the worker exits FATAL; the cluster stays up
$log_offset = -s $node->logfile;
($poison_id, $wfirst, $wlast) = poison('poison_term()', 110001);
wait_until(
	$node, 'postgres',
	"SELECT (SELECT state FROM retries.calls WHERE id = $poison_id) = 'failed'"
	  . " AND (" . succeeded_query($wfirst, $wlast, '= 300') . ")",
	't',
	'b2 (SIGTERM): the poison call fails and the other 300 calls succeed');
my $log = slurp_file($node->logfile, $log_offset);
like(
	$log,
	qr/FATAL:  terminating background worker "retries worker.*" due to administrator command/,
	'b2: the poison call did make its worker exit FATAL');
unlike($log, qr/reinitializing/, 'b2: without a crash restart');
check_poison('b2', $poison_id);
# only the worker that ran the poison call died, and only that call is
# charged
check_exactly_once('b2', $wfirst, $wlast, 110001, 110300, 0, 1);

###########################################################################
# c, d. immediate and fast shutdown under load, then start
###########################################################################

# stop_under_load(NAME, MODE, FROM): schedule 3000 calls, stop the server
# in MODE while they run (the 1500th waiting at the gate), start it again
# and check exactly-once
sub stop_under_load
{
	my ($name, $mode, $from) = @_;
	my $to = $from + 2999;
	my $held = $from + 1499;
	$node->safe_psql('postgres', "INSERT INTO gated VALUES ($held)");
	my $gate = close_gate($node, 'postgres', $GATE);
	my ($first, $last) =
	  schedule_range($node, 'postgres', 'work(bigint)', $from, $to);

	gated_worker($name, $held);
	my $done = succeeded_count($first, $last);
	$node->stop($mode);
	cmp_ok($done, '<', 3000,
		"$name: the server was stopped ($mode) mid-run ($done of 3000 done)");
	# (the stop ended the session that held the gate)
	$gate->quit;
	$node->start;
	wait_until($node, 'postgres', succeeded_query($first, $last, '= 3000'),
		't', "$name: all 3000 calls succeed after the restart");
	# the stop takes each worker down, maybe in the middle of a call
	check_exactly_once($name, $first, $last, $from, $to, 2, 2);
	return;
}

stop_under_load('c', 'immediate', 200001);
stop_under_load('d', 'fast', 300001);

# nothing else ran twice or is left over
is($node->safe_psql('postgres', 'SELECT max(n) FROM results'),
	'1', 'no effect of any call happened twice');
is( $node->safe_psql(
		'postgres',
		"SELECT count(*) FROM retries.calls WHERE state NOT IN ('succeeded', 'failed')"
	),
	'0',
	'no call is left unfinished');

$node->stop;
done_testing();
