# No role can starve the others or fill the disk through the workers:
#
#   a. retries.max_attempt_time caps every attempt, whatever its policy:
#      a call that sleeps with no timeout is cut short, recorded as a
#      timeout that names the setting, and the worker is free again; the
#      log says so once;
#   b. retries.min_delay is the floor of every retry delay: a call that
#      asks for retries.retry(after => '0') in a loop is retried no more
#      often than that, and the log says so once;
#   c. retries.max_kept_attempts bounds the attempt rows of one call (a
#      second storm, after the worker said it read the setting);
#   d. one role's backlog of due calls does not hold back another role's
#      due call by more than a batch: with 20,000 calls of one role due,
#      a call of another role scheduled after them runs within the next
#      batch, long before the backlog is drained.

use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RetriesTest;
use Test::More;
use Time::HiRes qw(time usleep);

my $node = retries_node('fairness');
$node->append_conf(
	'postgresql.conf', q{
retries.max_workers = 1
retries.max_attempt_time = '2s'
# no call's attempt rows trimmed before c. lowers it (the worker says so once)
retries.max_kept_attempts = 1000000
});
$node->start;

$node->safe_psql(
	'postgres', q{
CREATE EXTENSION retries;
CREATE TABLE results (id bigint PRIMARY KEY, at timestamptz NOT NULL DEFAULT clock_timestamp());
CREATE FUNCTION work(id bigint) RETURNS void LANGUAGE sql AS $$
	INSERT INTO results (id) VALUES ($1);
$$;
SELECT retries.annotate('work(bigint)', '3 10ms');
-- not a wait: the cap cuts it short, and a.'s check is that it does
CREATE FUNCTION runaway() RETURNS void LANGUAGE sql AS $$ SELECT pg_sleep(600) $$;
SELECT retries.annotate('runaway()', '1 10ms');
CREATE FUNCTION storm() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	PERFORM retries.retry('again', after => '0');
END $$;
SELECT retries.annotate('storm()', '1ms');
});
wait_until($node, 'postgres', workers_query('postgres'), '1', 'one worker');
my $offset = 0;

###########################################################################
# a. retries.max_attempt_time
###########################################################################

my $t0 = time();
my $runaway = $node->safe_psql('postgres', "SELECT retries.call('runaway()')");
wait_until($node, 'postgres',
	"SELECT state FROM retries.calls WHERE id = $runaway", 'failed',
	'a: the runaway call ends');
# (the call sleeps 600 s, far past the deadline of the wait above, 180 s:
# that it ended at all shows the cap cut it short, on any machine)
cmp_ok(time() - $t0, '<', 600, 'a: after the cap, not after its 600 s');
is( $node->safe_psql(
		'postgres',
		"SELECT string_agg(outcome || ' ' || sqlstate || ' ' || message, '; ' ORDER BY attempt)"
		  . " FROM retries.attempts WHERE call_id = $runaway"),
	'timeout 57014 attempt ran past retries.max_attempt_time (2s)',
	'a: recorded as a timeout that names the setting');
my $w = $node->safe_psql('postgres', "SELECT retries.call('work(bigint)', '[1]')");
wait_until($node, 'postgres', "SELECT count(*) FROM results WHERE id = 1", '1',
	'a: the worker runs the next call');
my @said = grep { /LOG:  retries: attempt \d+ of call \d+ ran past retries.max_attempt_time \(2s\)/ }
  split /\n/, slurp_file($node->logfile);
is(scalar(@said), 1, 'a: the log says so, once');

###########################################################################
# b. retries.min_delay
###########################################################################

my $storm = $node->safe_psql('postgres', "SELECT retries.call('storm()')");
wait_until($node, 'postgres',
	"SELECT attempts >= 50 FROM retries.calls WHERE id = $storm", 't',
	'b: the storm retries');
my ($attempts, $span) = split /\|/,
  $node->safe_psql('postgres',
	    "SELECT count(*), extract(epoch FROM max(finished_at) - min(finished_at))"
	  . " FROM retries.attempts WHERE call_id = $storm");
cmp_ok(($attempts - 1) / $span, '<=', 110,
	"b: no more than about one retry per 10 ms ($attempts attempts in $span s)");
is( $node->safe_psql(
		'postgres',
		"SELECT count(*) FROM retries.attempts WHERE call_id = $storm AND attempt > 1"
		  . " AND next_delay IS NOT NULL AND next_delay < interval '10ms'"),
	'0', 'b: every delay recorded is at least 10 ms');
like(slurp_file($node->logfile),
	qr/waits retries.min_delay \(10ms\), not the 0s its policy asked for/,
	'b: the log says so');
$node->safe_psql('postgres', "SELECT retries.cancel($storm)");

###########################################################################
# c. retries.max_kept_attempts
###########################################################################

# A new storm, once the worker has read the new setting: it says so in
# the log when it first trims a call's attempt rows (once per worker; no
# call reached the bound of the server's configuration).  Then more than
# 100 attempts, the last of them made after that.
$node->safe_psql('postgres',
	"ALTER SYSTEM SET retries.max_kept_attempts = 20; SELECT pg_reload_conf()");
$storm = $node->safe_psql('postgres', "SELECT retries.call('storm()')");
my $trimmed = qr/only its last 20 attempt rows are kept \(retries.max_kept_attempts\)/;
my $until = time() + $RetriesTest::DEADLINE;
usleep(50_000) while slurp_file($node->logfile) !~ $trimmed && time() < $until;    # poll
like(slurp_file($node->logfile), $trimmed, 'c: the log says so');
my $before = $node->safe_psql('postgres',
	"SELECT attempts FROM retries.calls WHERE id = $storm");
wait_until($node, 'postgres',
	"SELECT attempts > greatest(100, $before + 1) FROM retries.calls WHERE id = $storm",
	't', 'c: the storm goes on');
cmp_ok(
	$node->safe_psql('postgres',
		"SELECT count(*) FROM retries.attempts WHERE call_id = $storm"),
	'<=', 20, 'c: its attempt rows stay within the bound');
is( $node->safe_psql(
		'postgres',
		"SELECT max(attempt) = (SELECT attempts FROM retries.calls WHERE id = $storm)"
		  . " FROM retries.attempts WHERE call_id = $storm"),
	't', 'c: the newest attempts are the ones kept');
$node->safe_psql('postgres', "SELECT retries.cancel($storm)");

###########################################################################
# d. one role's backlog does not hold back another role's due call
###########################################################################

$node->safe_psql(
	'postgres', q{
CREATE ROLE busy LOGIN;
CREATE ROLE patient LOGIN;
GRANT INSERT ON results TO busy;
CREATE TABLE seen (backlog_done bigint NOT NULL);
GRANT INSERT ON seen TO patient;
GRANT SELECT ON results TO patient;
CREATE FUNCTION look() RETURNS void LANGUAGE sql AS $$
	INSERT INTO seen SELECT count(*) FROM results WHERE id >= 100000;
$$;
SELECT retries.annotate('look()', '3 10ms');
ALTER SYSTEM SET retries.enabled = off;
SELECT pg_reload_conf();
});
wait_until($node, 'postgres',
	"SELECT count(*) FROM retries.workers WHERE state = 'paused'", '1',
	'd: execution paused');
$node->safe_psql('postgres',
	"SET ROLE busy; SELECT count(retries.call('work(bigint)', jsonb_build_array(i)))"
	  . " FROM generate_series(100000, 119999) i");
$node->safe_psql('postgres', "SET ROLE patient; SELECT retries.call('look()')");
$node->safe_psql('postgres',
	"ALTER SYSTEM SET retries.enabled = on; SELECT pg_reload_conf()");
wait_until($node, 'postgres', 'SELECT count(*) FROM seen', '1',
	'd: the patient role\'s call runs');
cmp_ok($node->safe_psql('postgres', 'SELECT backlog_done FROM seen'),
	'<=', 200, 'd: with at most two batches of the 20,000 calls of the busy role before it');
# (20,000 calls: the deadline counts from the last progress, not from the
# start, so that a slow machine has the time it needs and a stall fails)
my ($done, $last, $stalled) = (0, -1, time() + $RetriesTest::DEADLINE);
while ($done < 20000 && time() < $stalled)
{
	$done = $node->safe_psql('postgres', 'SELECT count(*) FROM results WHERE id >= 100000');
	($last, $stalled) = ($done, time() + $RetriesTest::DEADLINE) if $done > $last;
	usleep(100_000) if $done < 20000;    # poll
}
is($done, 20000, 'd: and the backlog runs, all of it');

###########################################################################
# the log
###########################################################################

no_crash($node, $offset, 'no crash in the server log');

$node->stop;
done_testing();
