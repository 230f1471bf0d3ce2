# Workers killed at random points of their loop, 20 times in a row, under
# load: every call ends exactly once, its effects happen exactly once, and
# its attempts are counted as doc/operations.md, "Crashes", says.
#
# A few thousand calls of work(arg) and work_exhaust(arg) are scheduled over
# some 12 s (a little less than the kills take), partly spread out and partly in bursts (so that workers run
# whole batches), with a mix of kinds planned per call in table plan:
#
#   quick     succeeds at once
#   sleep     sleeps 5-30 ms first, so that kills land in the middle of calls
#   retry     raises an RT error on its first one or two attempts
#   fail      raises division_by_zero, which the policy does not retry
#   exhaust   work_exhaust(): raises an RT error every time; its policy
#             ('3 10ms') allows 4 attempts
#   gated     the first call only: at its first attempt, waits at a gate
#             the test holds (t/RetriesTest.pm)
#
# Then a worker is sent SIGKILL (the postmaster restarts the whole cluster)
# or SIGTERM (the worker exits, the launcher starts a new one), alternately,
# 0-300 ms after the workers are back from the previous kill; 20 kills in
# all.  Kills land while a worker runs a call, between calls of a batch,
# while it records outcomes, and while it sleeps.  The first kill is sent
# to the worker of the gated call, once it waits at the gate: at least one
# kill lands in the middle of a call, however fast the machine (the crash
# restart ends the session that holds the gate).
#
# The choices (which worker, how long to wait, the plan) come from a random
# seed that is printed; RETRIES_KILL_SEED=N repeats them.  The timing of the
# kills against the workers' work cannot be repeated exactly.
#
# At the end, every call must be finished, and:
#   - its state is what its kind calls for (succeeded, or failed for 'fail'
#     and 'exhaust');
#   - the function's effects (rows of results) exist exactly once for each
#     succeeded call and not at all for the others;
#   - its attempt rows are numbered 1..n with n = calls.attempts, each
#     attempt before the last is 'retry' or 'interrupted', the last is the
#     one that decided the state (succeeded; failed; or interrupted when it
#     was the last one allowed), and 'retry' appears only where the plan
#     asked for one;
#   - an exhausted call used exactly its 4 attempts, interrupted ones
#     included (interrupted attempts count toward max_attempts);
#   - each 'interrupted' attempt was started (logged by the function) by a
#     worker process that was then killed, and there are no more of them
#     than processes killed;
#   - conversely, each attempt that a kill cut short (its process logged
#     the function's start but not its end) is recorded as interrupted;
#   - no call is left running and no worker is stuck on a call.

use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RetriesTest;
use Test::More;
use Time::HiRes qw(usleep time);

my $KILLS = 20;
my $NCALLS = 3000;
my $SPREAD_MS = 12_000;		# calls fall due over this long

my $seed = $ENV{RETRIES_KILL_SEED} // (int(time() * 1000) ^ $$) % 1_000_000;
srand($seed);
diag("random seed $seed (set RETRIES_KILL_SEED=$seed to repeat the choices)");

my $node = retries_node('kill_loop');
$node->start;

$node->safe_psql(
	'postgres', q{
CREATE EXTENSION retries;

-- what each call is to do
CREATE TABLE plan (
	arg			int PRIMARY KEY,
	kind		text NOT NULL,
	sleep_ms	int NOT NULL,
	fail_first	int NOT NULL,	-- RT error on attempts 1..fail_first
	due_ms		int NOT NULL,	-- when it falls due, after the start
	call_id		bigint UNIQUE
);
-- the calls' effects: a second committed run of a call shows as n = 2
CREATE TABLE results (arg int PRIMARY KEY, n int NOT NULL DEFAULT 1);

-- The LOG lines go to the server log whatever happens to the transaction:
-- they tell which process started which attempt, and whether it got to the
-- end of the function (which does nothing slow after its 'end').
CREATE FUNCTION work(a int) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
	p	plan;
BEGIN
	RAISE LOG 'kill-loop: start %/%',
		retries.current_call(), retries.current_attempt();
	SELECT * INTO STRICT p FROM plan WHERE plan.arg = a;
	INSERT INTO results AS r VALUES (a)
		ON CONFLICT (arg) DO UPDATE SET n = r.n + 1;
	IF p.kind = 'gated' AND retries.current_attempt() = 1 THEN
		PERFORM } . gate_sql(1) . q{;
	END IF;
	IF p.sleep_ms > 0 THEN
		-- not a wait: so that kills land in the middle of calls, at random
		PERFORM pg_sleep(p.sleep_ms / 1000.0);
	END IF;
	RAISE LOG 'kill-loop: end %/%',
		retries.current_call(), retries.current_attempt();
	IF retries.current_attempt() <= p.fail_first THEN
		RAISE EXCEPTION 'not yet' USING ERRCODE = 'RT001';
	END IF;
	IF p.kind = 'fail' THEN
		PERFORM 1 / 0;
	END IF;
END $$;
SELECT retries.annotate('work(int)', '10 10ms');

CREATE FUNCTION work_exhaust(a int) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	RAISE LOG 'kill-loop: start %/%',
		retries.current_call(), retries.current_attempt();
	INSERT INTO results AS r VALUES (a)
		ON CONFLICT (arg) DO UPDATE SET n = r.n + 1;
	RAISE LOG 'kill-loop: end %/%',
		retries.current_call(), retries.current_attempt();
	RAISE EXCEPTION 'never' USING ERRCODE = 'RT002';
END $$;
SELECT retries.annotate('work_exhaust(int)', '3 10ms');
});

wait_until($node, 'postgres',
	"SELECT count(*) FROM retries.workers WHERE database = 'postgres'",
	'2', 'two workers start');

###########################################################################
# The plan and the calls
###########################################################################

my @rows;
my $bursts = 6;
my $burst_size = 150;
for my $arg (1 .. $NCALLS)
{
	my $r = rand();
	my ($kind, $sleep, $fail_first) = ('quick', 0, 0);

	if ($r < 0.12) { ($kind, $sleep) = ('sleep', 5 + int(rand(26))); }
	elsif ($r < 0.22) { ($kind, $fail_first) = ('retry', 1); }
	elsif ($r < 0.30) { ($kind, $fail_first) = ('retry', 2); }
	elsif ($r < 0.37) { $kind = 'fail'; }
	elsif ($r < 0.42) { $kind = 'exhaust'; }
	# a sleep now and then in the other kinds too
	$sleep = 5 + int(rand(20)) if $kind ne 'sleep' && rand() < 0.05;
	($kind, $sleep, $fail_first) = ('gated', 0, 0) if $arg == 1;

	# the first calls come in bursts that fall due at once, the rest spread
	my $due =
	  $arg <= $bursts * $burst_size
	  ? int(($arg - 1) / $burst_size) * ($SPREAD_MS / $bursts)
	  : int(rand($SPREAD_MS));
	push @rows, "($arg, '$kind', $sleep, $fail_first, $due)";
}
$node->safe_psql('postgres',
	"INSERT INTO plan (arg, kind, sleep_ms, fail_first, due_ms) VALUES "
	  . join(',', @rows));

# the gated call waits there until the first kill
my $gate = close_gate($node, 'postgres', 1);

# one transaction, so that the start time is the same for all
$node->safe_psql(
	'postgres', q{
UPDATE plan SET call_id = retries.call(
	CASE kind WHEN 'exhaust' THEN 'work_exhaust(int)' ELSE 'work(int)' END::regprocedure,
	jsonb_build_array(arg),
	now() + due_ms * interval '1 ms');
});
is($node->safe_psql('postgres', 'SELECT count(call_id) FROM plan'),
	$NCALLS, "$NCALLS calls are scheduled");
note($node->safe_psql('postgres',
	"SELECT string_agg(kind || ': ' || n, ', ') FROM"
	  . " (SELECT kind, count(*) n FROM plan GROUP BY kind ORDER BY kind) s"));

###########################################################################
# The kills
###########################################################################

# current_workers([POLL]): pids of the workers of 'postgres' (empty while
# the server restarts), asked through POLL (a poller) if given
sub current_workers
{
	my ($query) = @_;
	my ($out) = ($query // sub { return query_value($node, 'postgres', $_[0]) })->(
		"SELECT string_agg(pid::text, ',' ORDER BY pid) FROM pg_stat_activity"
		  . " WHERE backend_type = 'retries worker' AND datname = 'postgres'");
	return () if !defined $out || $out eq '';
	return split /,/, $out;
}

# workers_back(KILLED): wait until both workers of 'postgres' run and none
# of them is a process in KILLED (a hash of pids); their pids, or () at the
# deadline
sub workers_back
{
	my ($killed) = @_;
	my $until = time() + $RetriesTest::DEADLINE;
	my $poll = poller($node, 'postgres');

	while (time() < $until)
	{
		my @pids = current_workers($poll);

		if (@pids == 2 && !grep { $killed->{$_} } @pids)
		{
			$poll->();
			return @pids;
		}
		usleep(20_000);    # poll
	}
	$poll->();
	return ();
}

# succeeded_or_failed(): how many calls are finished
sub finished_count
{
	my ($out) = query_value($node, 'postgres',
		"SELECT count(*) FROM retries.calls WHERE state IN ('succeeded', 'failed')"
	);
	return $out // '?';
}

my %killed;			# pid => signal, every worker process killed
my %was_doing;		# worker state => how many targets were in it
my $killed_procs = 0;
my @recovery_times;
my $start = time();
for my $k (1 .. $KILLS)
{
	my $signal = $k % 2 ? 'KILL' : 'TERM';
	my @pids = workers_back(\%killed);

	if (!@pids)
	{
		fail("kill $k: the workers are back from the previous kill");
		last;
	}
	my $target;
	if ($k == 1)
	{
		# the worker of the gated call, waiting at the gate
		wait_at_gate($node, 'postgres', 1, 1, 'the gated call waits at the gate');
		$target = $node->safe_psql('postgres',
			"SELECT w.pid FROM retries.workers w JOIN plan p ON p.call_id = w.current_call"
			  . " WHERE p.kind = 'gated'");
		# (a SIGKILL: the crash restart ends the session that holds the gate)
		die 'the first kill must be a SIGKILL' if $signal ne 'KILL';
	}
	else
	{
		usleep(int(rand(300_000)));    # not a wait: a random moment for the kill
		$target = $pids[ int(rand(@pids)) ];
	}
	my $done = finished_count();
	# what it was doing just before (for the record only: it moves on)
	my ($was) = query_value($node, 'postgres',
		"SELECT state FROM retries.workers WHERE pid = $target");
	$was_doing{ $was // '?' }++;

	# a SIGKILL takes every worker down with it (crash restart)
	for my $pid ($signal eq 'KILL' ? @pids : ($target))
	{
		$killed{$pid} = $signal;
		$killed_procs++;
	}
	my $sent = time();
	if (kill($signal, $target) != 1)
	{
		fail("kill $k: SIG$signal to worker $target");
		last;
	}
	my @back = workers_back(\%killed);
	my $took = time() - $sent;
	push @recovery_times, $took;
	note(sprintf("kill %2d: SIG%s to %d at %.1f s (%s calls finished);"
		  . " workers back in %.2f s",
		$k, $signal, $target, $sent - $start, $done, $took));
	if (!@back)
	{
		fail("kill $k: the workers come back after SIG$signal");
		last;
	}
}
is(scalar(@recovery_times), $KILLS, "$KILLS kills, each followed by the workers' return");
$gate->quit;
diag(sprintf("kills took %.1f s; slowest return %.2f s; targets were: %s",
	time() - $start, (sort { $b <=> $a } @recovery_times)[0] // 0,
	join(', ', map { "$_ $was_doing{$_}" } sort keys %was_doing)));

###########################################################################
# The outcome
###########################################################################

wait_until($node, 'postgres',
	"SELECT count(*) FROM retries.calls WHERE state NOT IN ('succeeded', 'failed')",
	'0', 'every call finishes', 240);

# violations(NAME, SQL): SQL lists offending calls (one column of text); it
# must list none
sub violations
{
	my ($name, $sql) = @_;
	my $out = $node->safe_psql('postgres',
		"SELECT count(*) || coalesce(': ' || string_agg(v, '; '), '')"
		  . " FROM (SELECT v FROM ($sql) s(v) LIMIT 10) l");
	return is($out, '0', $name);
}

# calls joined with their plan and their last attempt
my $calls = q{
SELECT p.arg, p.kind, p.fail_first, c.id, c.state, c.attempts,
	   c.max_attempts, c.last_sqlstate,
	   (SELECT a.outcome FROM retries.attempts a
		 WHERE a.call_id = c.id ORDER BY a.attempt DESC LIMIT 1) AS last_outcome
  FROM plan p JOIN retries.calls c ON c.id = p.call_id
};

is($node->safe_psql('postgres', "SELECT count(*) FROM ($calls) c"),
	$NCALLS, 'no call is lost');

violations(
	'every call ends in the state its kind calls for', qq{
SELECT id || ' (' || kind || '): ' || state FROM ($calls) c
 WHERE state::text <> CASE WHEN kind IN ('fail', 'exhaust') THEN 'failed'
						   ELSE 'succeeded' END});

violations(
	"'fail' calls fail at once with division_by_zero", qq{
SELECT id || ': ' || coalesce(last_sqlstate, '-') || '/' || last_outcome
  FROM ($calls) c
 WHERE kind = 'fail' AND (last_sqlstate <> '22012' OR last_outcome <> 'failed')});

violations(
	"'exhaust' calls use exactly their 4 attempts, interrupted ones included",
	qq{
SELECT id || ': ' || attempts || '/' || max_attempts || ' ' || last_outcome
  FROM ($calls) c
 WHERE kind = 'exhaust'
   AND (attempts <> 4 OR max_attempts <> 4
		OR last_outcome NOT IN ('failed', 'interrupted'))});

violations(
	'effects: one row of results for each succeeded call, none for the others',
	qq{
SELECT coalesce(c.id::text, '?') || ' ' || coalesce(c.state::text, '-')
	   || ' n=' || coalesce(r.n, 0)
  FROM ($calls) c FULL JOIN results r ON r.arg = c.arg
 WHERE coalesce(r.n, 0) <> CASE WHEN c.state = 'succeeded' THEN 1 ELSE 0 END});

violations(
	'attempt rows are numbered 1..n, n = calls.attempts', q{
SELECT c.id || ': ' || c.attempts || ' vs ' || count(a.*) || ' rows, '
	   || coalesce(min(a.attempt), 0) || '..' || coalesce(max(a.attempt), 0)
  FROM plan p JOIN retries.calls c ON c.id = p.call_id
  LEFT JOIN retries.attempts a ON a.call_id = c.id
 GROUP BY c.id, c.attempts
HAVING count(a.*) <> c.attempts OR min(a.attempt) <> 1
	OR max(a.attempt) <> c.attempts OR c.attempts < 1});

violations(
	'every attempt but the last was retried or interrupted', q{
SELECT a.call_id || '/' || a.attempt || ': ' || a.outcome
  FROM plan p JOIN retries.calls c ON c.id = p.call_id
  JOIN retries.attempts a ON a.call_id = c.id
 WHERE a.attempt < c.attempts AND a.outcome NOT IN ('retry', 'interrupted')});

violations(
	'the last attempt decided the state (succeeded, failed, or interrupted as the last allowed)',
	qq{
SELECT id || ': ' || state || ' after ' || last_outcome FROM ($calls) c
 WHERE NOT ((state = 'succeeded' AND last_outcome = 'succeeded')
			OR (state = 'failed' AND last_outcome = 'failed')
			OR (state = 'failed' AND last_outcome = 'interrupted'
				AND attempts = max_attempts))});

violations(
	"'retry' outcomes only where the plan raised an RT error", q{
SELECT a.call_id || '/' || a.attempt || ' (' || p.kind || ')'
  FROM plan p JOIN retries.attempts a ON a.call_id = p.call_id
 WHERE a.outcome = 'retry' AND p.kind <> 'exhaust'
   AND a.attempt > p.fail_first});

violations(
	'a call that raised an RT error on its first attempts succeeded only after them',
	qq{
SELECT id || ': succeeded at ' || attempts || ', fail_first ' || fail_first
  FROM ($calls) c
 WHERE kind = 'retry' AND attempts <= fail_first});

# The function's LOG lines tell which process started which attempt and
# whether it got to the end.  Each interrupted attempt must have been
# started by a process that was then killed; and a killed process whose
# last line was the start of an attempt was killed in the middle of the
# function, so that attempt must be recorded as interrupted.
#
# A crash restart also kills the other workers, and one of them may be cut
# short after it noted its attempt in flight but before the function's first
# line: that attempt is charged, as "Crashes" says, though no process
# logged its start.  Such a charge is made by the first worker after the
# restart, before any call runs again, so it is accepted only for an attempt
# that nobody started and that was charged in that window.  Likewise a
# worker stopped by SIGTERM in that same gap notes its attempt in shared
# memory, and the worker that claims the call next charges it, whenever
# that is: an attempt that nobody started is accepted if a worker was
# stopped by SIGTERM and a worker logged the charge.
my %started_by;		# "call/attempt" => [pids]
my %last_line;		# pid => [start or end, "call/attempt"]
my %charged_at_restart;	# "call/attempt" => 1
my %charged;		# "call/attempt" => 1
my $after_restart = 0;
my $sigterms = grep { $_ eq 'TERM' } values %killed;
for my $line (split /\n/, slurp_file($node->logfile))
{
	if ($line =~ /all server processes terminated; reinitializing/)
	{
		$after_restart = 1;
		next;
	}
	if ($line =~ /LOG:  retries: attempt (\d+) of call (\d+) was interrupted/)
	{
		$charged_at_restart{"$2/$1"} = 1 if $after_restart;
		$charged{"$2/$1"} = 1;
		next;
	}
	next unless $line =~ /\[(\d+)\] .*LOG:  kill-loop: (start|end) (\d+\/\d+)/;
	$after_restart = 0;
	push @{ $started_by{$3} }, $1 if $2 eq 'start';
	$last_line{$1} = [ $2, $3 ];
}
my %interrupted = map { $_ => 1 } split /\n/,
  $node->safe_psql('postgres',
	"SELECT a.call_id || '/' || a.attempt FROM plan p"
	  . " JOIN retries.attempts a ON a.call_id = p.call_id"
	  . " WHERE a.outcome = 'interrupted'");
my @unexplained =
  grep {
	my $key = $_;
	my @starters = @{ $started_by{$key} // [] };
	@starters
	  ? !grep { $killed{$_} } @starters
	  : !($charged_at_restart{$key} || ($sigterms && $charged{$key}));
  } sort keys %interrupted;
is(join(', ', @unexplained), '',
	'each interrupted attempt was started by a worker that was then killed');
my @cut_short =
  map { "$last_line{$_}[1] (pid $_, SIG$killed{$_})" }
  grep { $last_line{$_}[0] eq 'start' } sort keys %killed;
my @uncharged = grep { !$interrupted{ (split / /)[0] } } @cut_short;
is(join(', ', @uncharged), '',
	'each attempt cut short by a kill is recorded as interrupted ('
	  . scalar(@cut_short) . ' were)');
cmp_ok(scalar(@cut_short), '>', 0,
	"some kills landed in the middle of a call (in "
	  . scalar(@cut_short) . " of $killed_procs killed processes; the others"
	  . " were between calls or idle)");
my @interrupted = keys %interrupted;
cmp_ok(scalar(@interrupted), '<=', $killed_procs,
	'no more interrupted attempts than worker processes killed ('
	  . scalar(@interrupted) . " <= $killed_procs)");
diag(scalar(@interrupted) . " interrupted attempts after $KILLS kills of "
	  . "$killed_procs worker processes");

# nothing is left running
is( $node->safe_psql(
		'postgres',
		"SELECT count(*) FROM retries.calls WHERE state IN ('running', 'scheduled')"),
	'0',
	'no call is left running or scheduled');
wait_until(
	$node, 'postgres',
	"SELECT count(*) FILTER (WHERE state = 'idle' AND current_call IS NULL)"
	  . " || '/' || count(*) FROM retries.workers WHERE database = 'postgres'",
	'2/2', 'both workers are idle, on no call');

$node->stop;
done_testing();
