# Recurring schedules fire exactly once, across everything that can
# interrupt the workers:
#
#   a. workers killed with SIGKILL again and again while 40 schedules fire
#      every second: every firing made exactly one call, each call's effect
#      happened once, and every occurrence is accounted for (fired, skipped
#      or missed);
#   b. the server stopped across firings (the extension's clock moved past
#      two of them meanwhile): without catch_up they are all missed; with
#      it the latest one fires once, right after the start;
#   c. the same across a period of retries.enabled = off;
#   d. a standby fires nothing; promoted, it fires the schedules it
#      replayed, and the invariants of a. hold across the failover;
#   e. (before d.) one role's thousands of due schedules do not hold back
#      another role's firing;
#   f. (before d.) overlap 'skip' of a call longer than the period (it
#      waits at a gate the test holds), with one of the two workers idle:
#      the occurrences passed while the call runs are skipped, none missed,
#      and next_run never falls behind;
#   g. (before d.) a wake-up is not lost when the worker's latch is reset
#      by a call that waits on it (a lock here, at a gate the test holds;
#      pg_sleep() or a buffer read by another process does the same): a
#      schedule and a call made while the only worker runs such a call are
#      decided right after it, not after the worker's idle sleep;
#   h. (before d.) '@reboot' fires once per start of the server: not when
#      made, once after a restart, not again when the workers start again
#      (terminated) or after a crash restart, once more after the next
#      restart; a paused one not at all.
#
# No step depends on how fast the machine is: what must happen while a call
# runs happens while the call waits at a gate, and the outages of b. and c.
# move the extension's clock (retries.debug_clock_offset) past the firings
# they miss instead of lasting through them.

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
		usleep(50_000);    # poll
	}
}

my $offset = -s $node->logfile;

# crash_restarts(): how many crash restarts the server log tells of since
# the kills began
sub crash_restarts
{
	return scalar grep { /terminating any other active server processes/ }
	  split /\n/, slurp_file($node->logfile, $offset);
}

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
	usleep(int(rand(900_000)));    # not a wait: a random moment for the kill
	next unless kill 'KILL', $pids[ int(rand(@pids)) ];
	$kills++;

	# the postmaster has begun the crash restart before the next round
	# reads the firings: a round that read them before it reacted (it may
	# lag on a slow machine) could see firings of the processes it is
	# about to end, and find no worker left to kill
	my $until = time() + $RetriesTest::DEADLINE;
	usleep(50_000) while crash_restarts() < $kills && time() < $until;    # poll
}
wait_until($node, 'postgres', workers_query('postgres'),
	'2', 'a: the workers are back after the last kill');
value_when_up(
	"SELECT count(retries.pause_schedule(name)) FROM retries.schedules WHERE name ~ '^kill'");
wait_until($node, 'postgres', all_finished('^kill'), 't',
	'a: every call fired has finished');
ok($kills >= 6, "a: $kills workers killed");
my $killed_restarts = crash_restarts();
is($killed_restarts, $kills, "a: $killed_restarts crash restarts, one per kill");
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

# Two schedules made in one transaction: the same origin, the same
# occurrences every hour; they differ only in catch_up.  Each outage below
# moves the extension's clock (retries.debug_clock_offset) on to half an
# hour past the second occurrence due: the two firings it passes are late
# by far more than the second of slack (an hour and a half, half an hour),
# the latest well within catch_up, and the next one is half an hour of the
# clock away.  The clock moves only when the test moves it, so these are
# the firings of the outage however long its steps take; none is due
# before it.
$node->safe_psql(
	'postgres', q{
BEGIN;
SELECT retries.schedule('nocatch', 'note(text)', '1h', '["nocatch"]');
SELECT retries.schedule('catch', 'note(text)', '1h', '["catch"]', catch_up => '1 hour');
COMMIT;
});

# firings and missed of catch, then of nocatch
my $firing_counts =
    "SELECT string_agg(firings || ',' || missed, ',' ORDER BY name)"
  . " FROM retries.schedule_data WHERE name IN ('catch', 'nocatch')";

# outage_test(LABEL, OUTAGE): OUTAGE->(OFFSET) stops the firings, moves
# the clock to OFFSET (an ALTER SYSTEM SET of it) and lets them start
# again; it returns when they could start again
sub outage_test
{
	my ($label, $outage) = @_;

	my ($next_run, $same) = split /\|/,
	  $node->safe_psql('postgres',
		"SELECT max(next_run), count(DISTINCT next_run) = 1"
		  . " FROM retries.schedule_data WHERE name IN ('catch', 'nocatch')");
	is($same, 't', "$label: both schedules are due at the same time");
	my @before = split /,/, $node->safe_psql('postgres', $firing_counts);
	# the clock, once the outage is over: half an hour past the second
	# occurrence from now on (the system's clock plus this offset, in ms)
	my $set_offset = $node->safe_psql('postgres',
		"SELECT format('ALTER SYSTEM SET retries.debug_clock_offset = %s',"
		  . " round(extract(epoch FROM '$next_run'::timestamptz"
		  . " + interval '1 hour 30 minutes' - clock_timestamp()) * 1000)::bigint)");
	my $outage_end = $outage->($set_offset);
	wait_until($node, 'postgres',
		"SELECT count(DISTINCT next_run) = 1"
		  . " AND min(next_run) = '$next_run'::timestamptz + interval '2 hours'"
		  . " FROM retries.schedule_data WHERE name IN ('catch', 'nocatch')",
		't', "$label: both schedules are decided past the outage");
	wait_until($node, 'postgres', all_finished('^(no)?catch$'), 't',
		"$label: the calls fired have finished");
	my @after = split /,/, $node->safe_psql('postgres', $firing_counts);
	is( join(',', map { $after[$_] - $before[$_] } 0 .. 3),
		'1,1,0,2',
		"$label: with catch_up, the latest firing of the outage ran and the one"
		  . " before was missed; without, both were missed");
	is( $node->safe_psql(
			'postgres',
			"SELECT count(*) FILTER (WHERE s.name = 'catch') || ','"
			  . " || count(*) FILTER (WHERE s.name = 'nocatch')"
			  . " || ',' || bool_and(c.state = 'succeeded')"
			  . " FROM retries.call_data c"
			  . " JOIN retries.schedule_data s ON s.id = c.schedule_id"
			  . " WHERE c.created_at >= '$outage_end'"),
		'1,0,true',
		"$label: the catch-up firing was made after the outage, and only it, and ran"
	);
	return;
}

outage_test(
	'b',
	sub {
		my ($set_offset) = @_;
		# set, not reloaded: the processes of the server started next read it
		$node->safe_psql('postgres', $set_offset);
		$node->stop('fast');
		$node->start;
		return $node->safe_psql('postgres', 'SELECT pg_postmaster_start_time()');
	});

outage_test(
	'c',
	sub {
		my ($set_offset) = @_;
		$node->safe_psql('postgres',
			"ALTER SYSTEM SET retries.enabled = off; SELECT pg_reload_conf()");
		wait_until($node, 'postgres',
			"SELECT count(*) FROM retries.workers WHERE state = 'paused'",
			'2', 'c: the workers are paused');
		# paused workers fire nothing, whatever their clock says
		$node->safe_psql('postgres', "$set_offset; SELECT pg_reload_conf()");
		my $resumed = $node->safe_psql('postgres', 'SELECT clock_timestamp()');
		$node->safe_psql('postgres',
			"ALTER SYSTEM RESET retries.enabled; SELECT pg_reload_conf()");
		return $resumed;
	});
is(accounted($node, '^(no)?catch$'), '',
	'b, c: one call per firing, one effect per call, every occurrence accounted for');
$node->safe_psql('postgres',
	"SELECT retries.unschedule('catch'), retries.unschedule('nocatch')");

# the clock back to the system's, in every process: a restart, rather than
# a reload that a worker might not have read yet when the next sections
# make schedules by the system's clock
$node->safe_psql('postgres', 'ALTER SYSTEM RESET retries.debug_clock_offset');
$node->restart;
wait_until($node, 'postgres', workers_query('postgres'), '2',
	'b, c: the workers are back, on the system\'s clock');

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
# f. overlap 'skip' counts what it skips, and next_run keeps time: a call
#    every second that runs until the test lets it go, made right after
#    another schedule was dropped (the two workers then race for the first
#    firing).  The n-th call waits at gate 50 + n, which the test opens
#    once two more occurrences were decided while it waits.  The worker
#    that fires goes on to run the call; the idle one must decide the
#    occurrences that pass meanwhile, each as it comes.  How late it
#    decides them is a time, so the bound (5 s) is far from both sides:
#    the idle worker decides an occurrence within FIRE_LOCKED_USECS (0.1 s)
#    and a short transaction, a fraction of a second even on a machine ten
#    times slower than ours; a worker that lost track of it would leave it
#    to its idle sleep (10 s), or to the end of the call, which here comes
#    only after the idle worker decided two occurrences.
###########################################################################

my @long_gates = map { close_gate($node, 'postgres', 50 + $_) } 1 .. 3;
$node->safe_psql(
	'postgres', q{
CREATE FUNCTION long_note(s text) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
	k int;
BEGIN
	PERFORM note(s);
	-- the n-th call (its note the n-th) waits at gate 50 + n
	k := 50 + (SELECT count(*) FROM fired WHERE schedule = s);
	PERFORM } . gate_sql('k') . q{;
END $$;
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
my @long = (0, 0, 0);    # firings, skipped and missed of the long schedule

# watch_long(COND, NAME): a test that COND->(firings, skipped, missed) of
# the long schedule comes true; meanwhile, the most its next_run was seen
# behind now is kept in $max_lag
sub watch_long
{
	my ($cond, $name) = @_;
	my $until = time() + $RetriesTest::DEADLINE;
	for (;;)
	{
		my ($row) = query_value($node, 'postgres',
			"SELECT extract(epoch FROM now() - next_run) || ' ' || firings"
			  . " || ' ' || skipped || ' ' || missed"
			  . " FROM retries.schedules WHERE name = 'long'");
		if (defined $row && $row =~ /^(\S+) (\d+) (\d+) (\d+)$/)
		{
			$max_lag = $1 if $1 > $max_lag;
			@long = ($2, $3, $4);
			return pass($name) if $cond->(@long);
		}
		if (time() > $until)
		{
			fail($name);
			diag("firings, skipped, missed: @long");
			return 0;
		}
		usleep(50_000);    # poll
	}
}

for my $n (1 .. 3)
{
	watch_long(sub { $_[0] >= $n }, "f: firing $n");
	wait_at_gate($node, 'postgres', 50 + $n, 1, "f: its call waits at its gate");
	my $skipped = $long[1];
	watch_long(sub { $_[1] >= $skipped + 2 },
		"f: the idle worker skips two occurrences while call $n runs");
	is($long[0], $n, "f: no firing while call $n runs");
	$node->safe_psql('postgres', "SELECT retries.unschedule('long')") if $n == 3;
	open_gate($long_gates[ $n - 1 ]);
}
my ($long_fired, $long_skipped, $long_missed) = @long;
is($long_missed, 0, "f: nothing counted missed with a worker up (@long)");
cmp_ok($long_skipped, '>=', 2 * $long_fired,
	'f: each second that passed while a call ran was skipped');
cmp_ok($max_lag, '<=', 5,
	'f: next_run was never far behind now (the bound: see above)');
note("f: next_run was at most $max_lag s behind now");
wait_until($node, 'postgres',
	"SELECT count(*) FROM fired WHERE schedule = 'long'"
	  . " AND call IN (SELECT id FROM retries.calls WHERE state = 'succeeded')",
	'3', 'f: the three calls finish once let go');

###########################################################################
# g. one worker, its call waiting for a lock (at a gate the test holds)
#    when a schedule and a call are made: the lock wait resets the latch
#    that woke it, as pg_sleep() does.  Then its loop must still fire the
#    schedule and run the call once the call is let go (here within 5 s of
#    the gate's opening), though a call an hour ahead gives the worker a
#    reason to sleep.  The bound is far from both sides: the worker that
#    kept its wake-up fires the schedule at its first occurrence (a second
#    after it was made at most, or the next one if the test was slow to
#    open the gate) and runs the call within a turn of its loop, a fraction
#    of a second even on a machine ten times slower; one that lost it
#    sleeps its idle sleep, 10 s, after the call.
###########################################################################

is($node->safe_psql('postgres', "SELECT count(*) FROM retries.schedule_data"),
	'0', 'g: no schedule left from before');
my $nap_gate = close_gate($node, 'postgres', 60);
$node->safe_psql(
	'postgres', q{
ALTER SYSTEM SET retries.max_workers = 1;
SELECT pg_reload_conf();
CREATE FUNCTION napper() RETURNS void LANGUAGE sql AS $$ SELECT } . gate_sql(60) . q{ $$;
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
	'g: the worker runs the call that waits');
wait_at_gate($node, 'postgres', 60, 1, 'g: the call waits at the gate');
$node->safe_psql(
	'postgres', q{
INSERT INTO woken VALUES ('woken', clock_timestamp());
SELECT retries.schedule('woken', 'note(text)', '1s', '["woken"]');
INSERT INTO woken VALUES ('call', clock_timestamp());
SELECT retries.call('note(text)', '["call"]');
});
is( $node->safe_psql(
		'postgres',
		"SELECT state || ' ' || (" . gate_waiters(60) . ") FROM retries.calls WHERE id = $nap"),
	'running 1', 'g: both were made while the call waited');
my $opened = $nap_gate->query_safe('SELECT clock_timestamp()');
open_gate($nap_gate);
wait_until($node, 'postgres',
	"SELECT count(DISTINCT schedule) FROM fired WHERE schedule IN ('woken', 'call')",
	'2', 'g: the schedule fired and the call ran');
is( $node->safe_psql(
		'postgres', qq{
SELECT string_agg(w.what || ' ' || (f.first - '$opened'::timestamptz < interval '5 s'), ', ' ORDER BY w.what)
  FROM woken w,
	   LATERAL (SELECT min(at) AS first FROM fired WHERE schedule = w.what) f}),
	'call true, woken true',
	'g: the schedule fired and the call ran within 5 s of the call\'s end, not after the idle sleep'
);
note('g: after the gate opened, '
	  . $node->safe_psql(
		'postgres', qq{
SELECT string_agg(what || ' in ' || round(extract(epoch FROM first - '$opened'::timestamptz), 3) || ' s', ', ' ORDER BY what)
  FROM (SELECT schedule AS what, min(at) AS first FROM fired
		 WHERE schedule IN ('woken', 'call') GROUP BY schedule) f}));
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
# h. '@reboot': once per start of the server
###########################################################################

$node->safe_psql('postgres', q{
SELECT retries.schedule('reboot_one', 'note(text)', '@reboot', '["reboot_one"]');
SELECT retries.schedule('reboot_paused', 'note(text)', '@Reboot ', '["reboot_paused"]');
SELECT retries.pause_schedule('reboot_paused');
});
is($node->safe_psql('postgres',
		"SELECT string_agg(next_run::text, ',') FROM retries.schedules WHERE name ~ '^reboot_'"),
	'infinity,infinity', 'h: a schedule of @reboot is due at no time');
# (the workers of this start served long before it was made)
stays_true($node, 'postgres',
	"SELECT count(*) = 0 FROM fired WHERE schedule ~ '^reboot_'", 2,
	'h: made, it does not fire');
my $reboot_fired = "SELECT count(*) FROM fired WHERE schedule = 'reboot_one'";
$node->restart;
wait_until($node, 'postgres', $reboot_fired, '1', 'h: after a restart it fires');
$node->safe_psql('postgres',
	"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE backend_type = 'retries worker'");
wait_until($node, 'postgres', workers_query('postgres'), '2', 'h: the workers start again');
my $crashes = crash_restarts();
my $t_kill = $node->safe_psql('postgres', 'SELECT now()');
kill 'KILL', $node->safe_psql('postgres',
	"SELECT pid FROM pg_stat_activity WHERE backend_type = 'retries worker' LIMIT 1");
my $until = time() + $RetriesTest::DEADLINE;
usleep(50_000) while crash_restarts() <= $crashes && time() < $until;    # poll
cmp_ok(crash_restarts(), '>', $crashes, 'h: a crash restart');
# (idle: they have served, and found nothing due)
wait_until($node, 'postgres',
	"SELECT count(*) FROM retries.workers w JOIN pg_stat_activity a USING (pid)"
	  . " WHERE w.database = 'postgres' AND w.state = 'idle' AND a.backend_start > '$t_kill'",
	'2', 'h: the workers serve again after it');
stays_true($node, 'postgres', "SELECT ($reboot_fired) = 1", 2,
	'h: neither the workers\' new start nor a crash restart fires it again');
$node->restart;
wait_until($node, 'postgres', $reboot_fired, '2', 'h: the next restart fires it once more');
is($node->safe_psql('postgres',
		"SELECT count(*) FROM fired WHERE schedule = 'reboot_paused'"),
	'0', 'h: a paused one never fired');
is($node->safe_psql('postgres',
		"SELECT firings || ' ' || next_run FROM retries.schedules WHERE name = 'reboot_one'"),
	'2 infinity', 'h: two firings, and due at no time again');
$node->safe_psql('postgres',
	"SELECT retries.unschedule('reboot_one'), retries.unschedule('reboot_paused')");

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
