# Recurring schedules fire exactly once, across everything that can
# interrupt the workers:
#
#   a. workers killed with SIGKILL again and again while 40 schedules fire
#      every second: every firing made exactly one call, each call's effect
#      happened once, and every occurrence is accounted for (fired, skipped
#      or missed);
#   b. the server stopped across firings: without catch_up they are all
#      missed; with it the latest one fires once, right after the start;
#   c. the same across a period of retries.enabled = off;
#   d. a standby fires nothing; promoted, it fires the schedules it
#      replayed, and the invariants of a. hold across the failover;
#   e. (before d.) one role's thousands of due schedules do not hold back
#      another role's firing;
#   f. (before d.) overlap 'skip' of a call longer than the period, with
#      one of the two workers idle: the occurrences passed while the call
#      runs are skipped, none missed, and next_run never falls behind;
#   g. (before d.) a wake-up is not lost when the worker's latch is reset
#      by a call that waits on it (pg_sleep here; a lock or a buffer read by
#      another process does the same): a schedule and a call made while the
#      only worker runs such a call are decided right after it, not after
#      the worker's idle sleep.

use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RetriesTest;
use Test::More;
use Time::HiRes qw(usleep);

my $node = retries_node('main', allows_streaming => 1);
$node->start;
$node->safe_psql(
	'postgres', q{
CREATE EXTENSION retries;
CREATE TABLE fired (schedule text, call bigint, at timestamptz DEFAULT clock_timestamp());
CREATE FUNCTION note(s text) RETURNS void LANGUAGE sql AS $$
	INSERT INTO fired (schedule, call) VALUES (s, retries.current_call());
$$;
SELECT retries.annotate('note(text)', '5 10ms');
});

# accounted(NODE, PATTERN): for the interval schedules whose names match
# PATTERN, the schedules where something does not add up: calls made other
# than firings, effects other than one per succeeded call, or occurrences
# up to next_run other than fired + skipped + missed.  Empty when all is
# well.  (Interval schedules fire at origin + k * every.)
sub accounted
{
	my ($n, $pattern) = @_;
	return $n->safe_psql(
		'postgres', qq{
SELECT coalesce(string_agg(format('%s: firings %s calls %s effects %s/%s occurrences %s = %s + %s + %s',
								  s.name, s.firings, c.calls, c.effects, c.succeeded,
								  s.occurrences, s.firings, s.skipped, s.missed), E'\\n'), '')
  FROM (SELECT *, round(extract(epoch FROM next_run - origin)
						/ extract(epoch FROM every::interval))::bigint - 1 AS occurrences
		  FROM retries.schedule_data WHERE name ~ '$pattern') s
  CROSS JOIN LATERAL (
	SELECT count(*) AS calls,
		   count(*) FILTER (WHERE cd.state = 'succeeded') AS succeeded,
		   coalesce(sum((SELECT count(*) FROM fired f WHERE f.call = cd.id)), 0) AS effects
	  FROM retries.call_data cd WHERE cd.schedule_id = s.id) c
 WHERE c.calls <> s.firings OR c.effects <> c.succeeded
	OR s.occurrences <> s.firings + s.skipped + s.missed});
}

# all_finished(PATTERN): SQL true once every call of those schedules ended
sub all_finished
{
	my ($pattern) = @_;
	return "SELECT count(*) = 0 FROM retries.call_data c"
	  . " JOIN retries.schedule_data s ON s.id = c.schedule_id"
	  . " WHERE s.name ~ '$pattern' AND c.state = 'scheduled'";
}

###########################################################################
# a. SIGKILL while firing
###########################################################################

$node->safe_psql('postgres',
	    "SELECT retries.schedule('kill' || i, 'note(text)', '1s',"
	  . " jsonb_build_array('kill' || i), overlap => 'allow')"
	  . " FROM generate_series(1, 40) i");
wait_until($node, 'postgres',
	"SELECT min(firings) >= 1 FROM retries.schedules WHERE name ~ '^kill'",
	't', 'a: 40 schedules fire every second');

# value_when_up(SQL): SQL's output, once the server takes connections again
sub value_when_up
{
	my ($sql) = @_;
	my $until = time() + $RetriesTest::DEADLINE;
	for (;;)
	{
		my ($out, $err) = query_value($node, 'postgres', $sql);
		return $out if defined $out;
		die "no answer to $sql: $err" if time() > $until;
		usleep(50_000);
	}
}

my $offset = -s $node->logfile;
my $kills = 0;
for my $round (1 .. 8)
{
	my $before = value_when_up(
		"SELECT sum(firings) FROM retries.schedule_data WHERE name ~ '^kill'");
	# wait for firings after the last restart, then kill a worker while
	# they go on (a worker killed by a signal makes the postmaster restart
	# every process, as a crash does)
	wait_until($node, 'postgres',
		"SELECT sum(firings) > $before FROM retries.schedule_data WHERE name ~ '^kill'",
		't', "a: round $round: firings go on");
	my @pids = split /,/, value_when_up(
		"SELECT coalesce(string_agg(pid::text, ','), '') FROM pg_stat_activity"
		  . " WHERE backend_type = 'retries worker' AND datname = 'postgres'");
	next unless @pids;
	usleep(int(rand(900_000)));
	kill 'KILL', $pids[ int(rand(@pids)) ];
	$kills++;
}
wait_until($node, 'postgres', workers_query('postgres'),
	'2', 'a: the workers are back after the last kill');
value_when_up(
	"SELECT count(retries.pause_schedule(name)) FROM retries.schedules WHERE name ~ '^kill'");
wait_until($node, 'postgres', all_finished('^kill'), 't',
	'a: every call fired has finished');
ok($kills >= 6, "a: $kills workers killed");
my $killed_restarts = grep { /terminating any other active server processes/ }
  split /\n/, slurp_file($node->logfile, $offset);
ok($killed_restarts >= 6, "a: $killed_restarts crash restarts");
is(accounted($node, '^kill'), '',
	'a: one call per firing, one effect per call, every occurrence fired, skipped or missed'
);
my ($firings, $missed) = split /\|/,
  $node->safe_psql('postgres',
	"SELECT sum(firings), sum(missed) FROM retries.schedule_data WHERE name ~ '^kill'");
note("a: $firings firings and $missed missed over the $kills kills");
$node->safe_psql('postgres',
	"SELECT retries.unschedule(name) FROM retries.schedules WHERE name ~ '^kill'");

###########################################################################
# b. the server stopped across firings, with and without catch_up
###########################################################################

# two schedules made in one transaction: the same origin, the same
# occurrences every 10 s; they differ only in catch_up.  Each outage below
# starts right after a firing, at occurrence T, and ends at T + 13 s, 3 s
# after the occurrence it misses: the latest missed one is well past the
# slack, and the start has 6.5 s before the next one, at T + 20 s, is made
# (half a second ahead).
$node->safe_psql(
	'postgres', q{
BEGIN;
SELECT retries.schedule('nocatch', 'note(text)', '10s', '["nocatch"]');
SELECT retries.schedule('catch', 'note(text)', '10s', '["catch"]', catch_up => '1 hour');
COMMIT;
});

# both fired past now, together
my $caught_up =
    "SELECT count(DISTINCT next_run) = 1 AND bool_and(next_run > now())"
  . " FROM retries.schedule_data WHERE name IN ('catch', 'nocatch')";
# firings and missed of catch minus those of nocatch, and nocatch's missed
my $difference =
    "SELECT sum(firings) FILTER (WHERE name = 'catch') - sum(firings) FILTER (WHERE name = 'nocatch')"
  . " || ',' || sum(missed) FILTER (WHERE name = 'nocatch') - sum(missed) FILTER (WHERE name = 'catch')"
  . " || ',' || sum(missed) FILTER (WHERE name = 'nocatch')"
  . " FROM retries.schedule_data WHERE name IN ('catch', 'nocatch')";

# sleep_until(T): sleep until Unix time T (now, if it is past)
sub sleep_until
{
	my ($t) = @_;
	my $left = $t - Time::HiRes::time();
	usleep(int($left * 1e6)) if $left > 0;
	return;
}

# outage_test(LABEL, OUTAGE): OUTAGE->(END) stops the firings until END (a
# Unix time) and returns when they could start again
sub outage_test
{
	my ($label, $outage) = @_;

	# wait for a firing of both, then start the outage at once
	my $fired = $node->safe_psql('postgres',
		"SELECT sum(firings) FROM retries.schedule_data WHERE name IN ('catch', 'nocatch')");
	# (firings are made half a second ahead: wait for their calls to run)
	wait_until($node, 'postgres',
		"SELECT sum(firings) > $fired AND count(DISTINCT next_run) = 1"
		  . " AND bool_and(last_state = 'succeeded')"
		  . " FROM retries.schedules WHERE name IN ('catch', 'nocatch')",
		't', "$label: both schedules fire");
	my ($fired_before, $missed_before) = split /,/,
	  $node->safe_psql('postgres', $difference);
	# the occurrence the outage misses, and when the outage ends
	my ($missed_at, $end) = split /\|/,
	  $node->safe_psql('postgres',
		"SELECT max(next_run), extract(epoch FROM max(next_run) + interval '3 s')"
		  . " FROM retries.schedule_data WHERE name IN ('catch', 'nocatch')");
	my $outage_end = $outage->($end);
	wait_until($node, 'postgres', $caught_up, 't',
		"$label: both schedules are fired past now after it");
	my ($fired_after, $missed_after, $nocatch_missed) = split /,/,
	  $node->safe_psql('postgres', $difference);
	is($fired_after - $fired_before, 1,
		"$label: with catch_up, exactly one firing of the outage ran");
	is($missed_after - $missed_before, 1,
		"$label: without catch_up, that one was missed too");
	ok($nocatch_missed >= 1,
		"$label: without catch_up, $nocatch_missed firings missed so far");
	is( $node->safe_psql(
			'postgres',
			"SELECT count(*) FILTER (WHERE s.name = 'catch') || ','"
			  . " || count(*) FILTER (WHERE s.name = 'nocatch')"
			  . " FROM retries.call_data c"
			  . " JOIN retries.schedule_data s ON s.id = c.schedule_id"
			  . " WHERE c.created_at >= '$outage_end'"
			  . " AND c.created_at < '$missed_at'::timestamptz + interval '9.4 s'"
		),
		'1,0',
		"$label: the catch-up firing ran after the outage, and only it, before the next occurrence"
	);
	return;
}

outage_test(
	'b',
	sub {
		my ($end) = @_;
		$node->stop('fast');
		sleep_until($end);
		$node->start;
		return $node->safe_psql('postgres', 'SELECT pg_postmaster_start_time()');
	});

outage_test(
	'c',
	sub {
		my ($end) = @_;
		$node->safe_psql('postgres',
			"ALTER SYSTEM SET retries.enabled = off; SELECT pg_reload_conf()");
		wait_until($node, 'postgres',
			"SELECT count(*) FROM retries.workers WHERE state = 'paused'",
			'2', 'c: the workers are paused');
		sleep_until($end);
		my $resumed = $node->safe_psql('postgres', 'SELECT clock_timestamp()');
		$node->safe_psql('postgres',
			"ALTER SYSTEM RESET retries.enabled; SELECT pg_reload_conf()");
		return $resumed;
	});
is(accounted($node, '^(no)?catch$'), '',
	'b, c: one call per firing, one effect per call, every occurrence accounted for');
$node->safe_psql('postgres',
	"SELECT retries.unschedule('catch'), retries.unschedule('nocatch')");

###########################################################################
# e. one role's many due schedules do not hold back another role's one:
#    5,000 of role hog and one of role fair, all due (fair's the latest),
#    appear together; fair's firing is in the first firing transaction
#    (fewer than 1,000 of hog's calls made before it, in transactions that
#    started earlier: call ids come from per-worker blocks of the
#    sequence, so they do not tell), not after every one of hog's
###########################################################################

$node->safe_psql(
	'postgres', q{
CREATE ROLE hog;
CREATE ROLE fair;
GRANT INSERT ON fired TO hog, fair;
BEGIN;
SELECT count(retries.schedule('hog' || i, 'note(text)', '1h', '["hog"]',
								catch_up => '1 day'))
  FROM generate_series(1, 5000) i;
SELECT retries.schedule('fair', 'note(text)', '1h', '["fair"]', catch_up => '1 day');
UPDATE retries.schedule_data SET owner = 'hog', next_run = now() - interval '2 minutes'
 WHERE name ~ '^hog';
UPDATE retries.schedule_data SET owner = 'fair', next_run = now() - interval '1 minute'
 WHERE name = 'fair';
COMMIT;
});
wait_until($node, 'postgres',
	"SELECT count(*) FROM retries.schedule_data"
	  . " WHERE name ~ '^(hog|fair)' AND firings = 1", '5001',
	'e: every schedule of both roles fires once');
is( $node->safe_psql(
		'postgres',
		"SELECT count(*) FROM retries.call_data c"
		  . " JOIN retries.schedule_data s ON s.id = c.schedule_id"
		  . " WHERE s.name ~ '^hog' AND c.created_at < (SELECT f.created_at"
		  . "  FROM retries.call_data f JOIN retries.schedule_data fs"
		  . "  ON fs.last_call = f.id WHERE fs.name = 'fair')") < 1000,
	1,
	"e: fair's firing is made among the first 1,000, not behind hog's 5,000");
$node->safe_psql('postgres',
	"SELECT count(retries.unschedule(name)) FROM retries.schedule_data"
	  . " WHERE name ~ '^(hog|fair)'");

###########################################################################
# f. overlap 'skip' counts what it skips, and next_run keeps time: a 2.5 s
#    call every second, made right after another schedule was dropped (the
#    two workers then race for the first firing).  The worker that fires
#    goes on to run the call; the idle one must decide the occurrences that
#    pass meanwhile, within a second of each.
###########################################################################

$node->safe_psql(
	'postgres', q{
CREATE FUNCTION long_note(s text) RETURNS void LANGUAGE sql AS $$
	SELECT note(s); SELECT pg_sleep(2.5);
$$;
SELECT retries.annotate('long_note(text)', '5 10ms');
SELECT retries.schedule('warmup', 'note(text)', '1s', '["warmup"]');
});
wait_until($node, 'postgres',
	"SELECT firings >= 2 FROM retries.schedules WHERE name = 'warmup'",
	't', 'f: a first schedule fires');
$node->safe_psql(
	'postgres', q{
SELECT retries.unschedule('warmup');
SELECT retries.schedule('long', 'long_note(text)', '1s', '["long"]',
						overlap => 'skip');
});
my $max_lag = 0;
my $deadline = time() + $RetriesTest::DEADLINE;
my $counts;
while (time() < $deadline)
{
	my ($lag, $err) = query_value($node, 'postgres',
		"SELECT extract(epoch FROM now() - next_run), firings || ' ' || skipped"
		  . " || ' ' || missed FROM retries.schedules WHERE name = 'long'");
	next if !defined $lag;
	($lag, $counts) = split /\|/, $lag;
	chomp $counts;
	$max_lag = $lag if $lag > $max_lag;
	last if (split / /, $counts)[0] >= 3;
	usleep(100_000);
}
my ($long_fired, $long_skipped, $long_missed) = split / /, $counts // '0 0 0';
cmp_ok($long_fired, '>=', 3, 'f: the long schedule fired three times');
is($long_missed, 0, "f: nothing counted missed with a worker up ($counts)");
cmp_ok($long_skipped, '>=', 2 * ($long_fired - 1),
	'f: each second that passed while a call ran was skipped');
cmp_ok($max_lag, '<=', 1.0,
	'f: next_run was never more than a second behind now');
$node->safe_psql('postgres', "SELECT retries.unschedule('long')");

###########################################################################
# g. one worker, asleep in a call's pg_sleep() when a schedule and a call
#    are made: pg_sleep() resets the latch that woke it.  Then its loop
#    must still fire the schedule and run the call (here within 5 s; the
#    idle sleep they waited for was 10 s), though a call an hour ahead
#    gives the worker a reason to sleep.
###########################################################################

is($node->safe_psql('postgres', "SELECT count(*) FROM retries.schedule_data"),
	'0', 'g: no schedule left from before');
$node->safe_psql(
	'postgres', q{
ALTER SYSTEM SET retries.max_workers = 1;
SELECT pg_reload_conf();
CREATE FUNCTION napper() RETURNS void LANGUAGE sql AS $$ SELECT pg_sleep(0.5) $$;
SELECT retries.annotate('napper()', '1 1s');
CREATE TABLE woken (what text, made timestamptz);
});
wait_until($node, 'postgres', workers_query('postgres'), '1',
	'g: one worker left');
my $later = $node->safe_psql('postgres',
	"SELECT retries.call('note(text)', '[\"later\"]', run_at => now() + interval '1 hour')");
my $nap = $node->safe_psql('postgres', "SELECT retries.call('napper()')");
wait_until($node, 'postgres',
	"SELECT count(*) FROM retries.workers WHERE current_call = $nap", '1',
	'g: the worker runs the call that sleeps');
$node->safe_psql(
	'postgres', q{
INSERT INTO woken VALUES ('woken', clock_timestamp());
SELECT retries.schedule('woken', 'note(text)', '1s', '["woken"]');
INSERT INTO woken VALUES ('call', clock_timestamp());
SELECT retries.call('note(text)', '["call"]');
});
is( $node->safe_psql('postgres',
		"SELECT state FROM retries.calls WHERE id = $nap"),
	'running', 'g: both were made while the call slept');
wait_until($node, 'postgres',
	"SELECT count(DISTINCT schedule) FROM fired WHERE schedule IN ('woken', 'call')",
	'2', 'g: the schedule fired and the call ran');
is( $node->safe_psql(
		'postgres', q{
SELECT string_agg(w.what || ' ' || (f.first - w.made < interval '5 s'), ', ' ORDER BY w.what)
  FROM woken w,
	   LATERAL (SELECT min(at) AS first FROM fired WHERE schedule = w.what) f}),
	'call true, woken true',
	'g: the schedule fired and the call ran within 5 s, not after the idle sleep');
$node->safe_psql(
	'postgres', qq{
SELECT retries.unschedule('woken');
SELECT retries.cancel($later);
ALTER SYSTEM RESET retries.max_workers;
SELECT pg_reload_conf();
});
wait_until($node, 'postgres', workers_query('postgres'), '2',
	'g: two workers again');

###########################################################################
# d. a standby fires nothing; promoted, it fires
###########################################################################

$node->safe_psql('postgres',
	"SELECT retries.schedule('failover', 'note(text)', '1s', '[\"failover\"]')");
wait_until($node, 'postgres',
	"SELECT firings >= 1 FROM retries.schedules WHERE name = 'failover'",
	't', 'd: a schedule fires on the primary');
$node->backup('backup');
my $standby = PostgreSQL::Test::Cluster->new('standby');
$standby->init_from_backup($node, 'backup', has_streaming => 1);
$standby->start;
$node->wait_for_catchup($standby);
# the standby's rows move only by replay: while the primary is stopped,
# nothing changes on the standby
$node->stop('fast');
# (the stop waits for the standby to receive the last WAL, not to replay it)
wait_until($standby, 'postgres',
	"SELECT pg_last_wal_replay_lsn() >= pg_last_wal_receive_lsn()",
	't', 'd: the standby has replayed all it received');
my $frozen =
  $standby->safe_psql('postgres',
	"SELECT firings || ',' || next_run FROM retries.schedule_data WHERE name = 'failover'");
stays_true($standby, 'postgres',
	"SELECT firings || ',' || next_run = '$frozen' FROM retries.schedule_data WHERE name = 'failover'",
	3, 'd: the standby fires nothing');
$standby->promote;
wait_until($standby, 'postgres',
	"SELECT firings > " . (split /,/, $frozen)[0]
	  . " AND next_run > now() FROM retries.schedule_data WHERE name = 'failover'",
	't', 'd: promoted, it fires the schedule');
$standby->safe_psql('postgres', "SELECT retries.pause_schedule('failover')");
wait_until($standby, 'postgres', all_finished('^failover$'), 't',
	'd: its calls finish');
is(accounted($standby, '^failover$'), '',
	'd: one call per firing across the failover, every occurrence accounted for');
no_crash($standby, 0, 'd: the promoted standby crashed nowhere');

done_testing();
