# Ninth hostile review, second pass (of bf6b298): the workflow primitives
# of issue 43, events, debounce, keys and key windows, attacked as a hostile
# ordinary role and as an ordinary application under real traffic, by a
# reviewer who did not write the code.  alice is the application (the
# victim where there is one), mallory the attacker, bob a bystander.  Each
# numbered check failed on the code reviewed; the lettered ones held.
# Fixed since, and plain checks now: 1 (a debounce takes the share lock of
# the event its call waits for), 2 (an attempt whose batch holds names of
# earlier calls waits for a name 1 ms at most, then is put back uncharged
# and the batch ends), 3 (a look at a key's running calls is a try of the
# key's lock, and puts the key's backlog off with it), 5 (the outcome is
# forgotten as each attempt starts).  Still TODO: 4, in a new form: the
# batch that started the key's call holds the key's lock until it ends.
#   1. (High) names that differ deadlock in clients: a transaction that
#      debounces two keys whose calls wait for one event, without naming
#      the event (a debounce keeps the call's on_event), and a transaction
#      that emits that event.  The emit takes only the event's name, then
#      updates the waiting calls' rows in its own order; the debounce takes
#      only the key's name, then updates the key's call's row.  Row locks,
#      not names, make the cycle: 40P01, in the order of the emit's scan.
#   2. (Medium) a worker's batch is one transaction: each call's emit or
#      debounce takes its name until the batch ends.  A batch of alice's
#      calls that emit A then B and another transaction (a client, or a
#      batch of the other worker) taking B then A deadlock, though each
#      call takes one name; with the default retry_on the call that gets
#      40P01 fails for good.  Here: a client holding B, and a batch that
#      ran h('A') and waits in h('B'): a client's emit of A waits for the
#      batch (on an unrelated call), and the client holding B, emitting A,
#      gets 40P01.  Under traffic: 1,500 calls of h2, each emitting A or B,
#      on two workers: some fail with 40P01, for good.
#   3. (Medium) the look at a key's running calls (others_running) locks
#      every other scheduled call of the key and compares each with all the
#      locked ones (o.id <> ALL (SELECT id FROM locked): quadratic), and a
#      call put off behind a running call is looked at again every 100 ms:
#      mallory's 100 calls of one key, behind her call that waits on her
#      lock, keep a worker busy (CPU of the database's workers over 3 s);
#      20 calls of a key with 8,000 others scheduled for next year take the
#      workers many seconds (interactively, with 50,000: 84 s a look, both
#      base workers in mallory's looks, no extra worker, alice's calls
#      waited 8-68 s); and an application alone: 3,000 calls of a key that
#      piled up during a pause drain a few a second after the resume (two
#      workers' slow looks find each other's claim; with 10,000, none ran
#      in 136 s).
#   4. (Low) a key_window check locks the key's other calls FOR KEY SHARE
#      until its batch ends, not until its call's attempt ends: while the
#      batch runs a later, slow call of alice's, her call of the key made
#      due (retry_now) is skipped by the idle worker, and her call of the
#      key that waits for an event is not released at its event_timeout
#      (FOR UPDATE SKIP LOCKED), though nothing of the key runs (rv8
#      finding 5, the part left).
#   5. (Low) retries.call_outcome() in a worker is the batch's: alice's
#      attempts that made no call read the outcome of her earlier attempt
#      of the same batch ('made'); run while there is one worker, so that
#      they share a batch.
#
# Held:
#   a. disjoint names from a pool: 16 pgbench clients, each with names of
#      its own, emit, wait on and debounce names in mixed orders in one
#      transaction each (emit, on_event call, debounce, emit, debounce with
#      on_event, clear_event): no error, no 40P01.
#   b. key_window from a pool: 16 clients ask for 10 keys (window 250 ms,
#      priorities 0-2) and retry_now the keys' scheduled calls: every call
#      runs, no two starts of a key's calls within 250 ms.
#   c. debounce_max from a pool: 16 clients debounce 3 keys (300 ms, max
#      1 s) for 3 s: each call starts within debounce_max (+ 1 s for the
#      workers) of its creation, and nothing is left scheduled.
#   d. events are per role: mallory sees none of alice's in retries.events,
#      her clear_event and emit of the same names touch nothing of alice's.
#   e. an emit rolled back (to a savepoint, or whole) releases nothing; an
#      emit in a savepoint that is kept does.
#   f. an emit in a prepared transaction releases alice's call at COMMIT
#      PREPARED, which wakes the workers (started within seconds).
#   g. event_timeout while mallory's calls hold both base workers: the
#      extra worker releases alice's call within seconds.
#   h. two REPEATABLE READ (or SERIALIZABLE) emits of one name, used
#      before or for the first time: the second waits and then succeeds
#      (no 40001).

use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use RetriesTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use POSIX ();
use Time::HiRes qw(time);

my $DB = 'postgres';
my $node = review_node('review_workflow', q{
max_connections = 60
deadlock_timeout = '200ms'
});
review_roles($node, $DB);

sub sql
{
	my ($role, $sql) = @_;
	return as_role($node, $DB, $role, $sql);
}

# the workers of the database: connected, as many as NAME says
sub workers_are
{
	my ($n, $name) = @_;
	return wait_until($node, $DB,
		"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'retries worker'"
		  . " AND datname = current_database()",
		$n, $name);
}

# pgbench(NAME, SECONDS, SCRIPT => WEIGHT, ...): 16 clients as alice; ok
# if no client failed; returns pgbench's stderr
sub pgbench
{
	my ($name, $seconds, @scripts) = @_;
	my @args;
	while (my ($text, $weight) = splice(@scripts, 0, 2))
	{
		my $file = $node->basedir . '/pgb_' . scalar(@args) . '.sql';
		open(my $fh, '>', $file) or die "$file: $!";
		print $fh $text;
		close $fh;
		push @args, '-f', "$file\@$weight";
	}
	my ($out, $err) = ('', '');
	my $ok = IPC::Run::run(
		[
			$node->installed_command('pgbench'), '-n', '-c', '16', '-j', '4',
			'-T', $seconds, '--max-tries=1', '-U', 'alice', @args, '-h', $node->host,
			'-p', $node->port, $DB
		],
		'>', \$out, '2>', \$err);
	ok($ok && $out =~ /number of failed transactions: 0 /, $name)
	  or diag("$err\n$out");
	return $err;
}

sql('alice', q{
CREATE TABLE alice.log (what text, n int, ev jsonb, at timestamptz DEFAULT clock_timestamp());
CREATE FUNCTION alice.ship(o int) RETURNS void LANGUAGE sql
  AS $$ INSERT INTO alice.log (what, n, ev) VALUES ('ship', o, retries.event()) $$;
SELECT retries.annotate('alice.ship(int)', '3 10ms');
CREATE FUNCTION alice.h(ev text) RETURNS void LANGUAGE plpgsql
  AS $$ BEGIN PERFORM retries.emit(ev); END $$;
SELECT retries.annotate('alice.h(text)', '3 10ms');
});

# ---------------------------------------------------------------------
# 1.  debounces of two keys and an emit of the event their calls wait for
# ---------------------------------------------------------------------
# the call of sh:2 is made first: the emit's scan meets it first
sql('alice', q{
SELECT retries.call('alice.ship(int)', '[2]', key => 'sh:2', debounce => '1 hour', on_event => 'kyc:1');
SELECT retries.call('alice.ship(int)', '[1]', key => 'sh:1', debounce => '1 hour', on_event => 'kyc:1');
});
my $t1 = $node->background_psql($DB, on_error_stop => 0);
my $t2 = $node->background_psql($DB, on_error_stop => 0);
$t1->query_safe("SET ROLE alice; BEGIN;"
	  . " SELECT retries.call('alice.ship(int)', '[11]', key => 'sh:1', debounce => '1 hour')");
my $t2_pid = $t2->query_safe("SET ROLE alice; BEGIN; SELECT pg_backend_pid()");
($t2_pid) = $t2_pid =~ /(\d+)\s*$/;
$t2->query_until(qr/sent/, "\\echo sent\nSELECT retries.emit('kyc:1');\n");
# (this code: it waits for the transaction that debounced sh:1)
wait_until($node, $DB,
	"SELECT wait_event_type = 'Lock' OR state = 'idle in transaction'"
	  . " FROM pg_stat_activity WHERE pid = $t2_pid",
	't', '1: the emit of kyc:1 waits, or is done');
$t1->query("SELECT retries.call('alice.ship(int)', '[12]', key => 'sh:2', debounce => '1 hour')");
my $err1 = $t1->{stderr};
$t1->query('COMMIT');
$t1->quit;
$t2->query('COMMIT');
my $err2 = $t2->{stderr};
$t2->quit;
{
	is($err1 . $err2, '',
		'1: debounces of sh:1 and sh:2 and an emit of kyc:1 (names that differ) both commit, no 40P01');
}
note("1: the debounce: $err1; the emit: $err2");

# ---------------------------------------------------------------------
# 2.  a worker's batch holds the names of the calls it ran
# ---------------------------------------------------------------------
$node->safe_psql($DB, q{
ALTER SYSTEM SET retries.max_workers = 1;
ALTER SYSTEM SET retries.max_extra_workers = 0;
SELECT pg_reload_conf();
});
workers_are('1', '2: one worker');
# the names' rows exist: no first use of a name below
sql('alice', "SELECT retries.emit('A'), retries.emit('B')");
my $hb = $node->background_psql($DB, on_error_stop => 0);
$hb->query_safe("SET ROLE alice; BEGIN; SELECT retries.emit('B')");
sql('alice', q{
BEGIN;
SELECT retries.call('alice.h(text)', '["A"]');
SELECT retries.call('alice.h(text)', '["B"]', run_at => now() + interval '1 millisecond');
COMMIT;
});
wait_until($node, $DB,
	"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'retries worker'"
	  . " AND datname = current_database() AND wait_event_type = 'Lock'",
	'1', '2: the worker\'s h(\'B\') waits for the client that emitted B');
my ($probe, $probe_err) = try_as($node, $DB, 'alice',
	"SET lock_timeout = '2s';\nSELECT retries.emit('A')");
$hb->query("SELECT retries.emit('A')");
my $errb = $hb->{stderr};
$hb->query('ROLLBACK');
$hb->quit;
{
	ok(defined $probe, '2: a client\'s emit of A does not wait for the batch\'s call h(\'B\')')
	  or diag($probe_err);
	is($errb, '', '2: the client that holds B emits A without 40P01');
}
note("2: the client holding B, emitting A: $errb");
wait_until($node, $DB,
	"SELECT count(*) FROM retries.calls WHERE fn = 'alice.h(text)'::regprocedure"
	  . " AND state = 'scheduled'",
	'0', '2: both calls end');

# ---------------------------------------------------------------------
# 5.  call_outcome() in a worker's batch (still one worker: one batch)
# ---------------------------------------------------------------------
sql('alice', q{
CREATE FUNCTION alice.enq(n int) RETURNS void LANGUAGE sql
  AS $$ SELECT retries.call('alice.pay(int)', '[9]', key => 'ord:' || n, run_at => now() + interval '1 day') $$;
CREATE FUNCTION alice.spy(n int) RETURNS void LANGUAGE sql
  AS $$ INSERT INTO alice.log (what, n, ev) VALUES ('spy', n, to_jsonb(coalesce(retries.call_outcome(), 'none'))) $$;
SELECT retries.annotate('alice.enq(int)', '3 10ms');
SELECT retries.annotate('alice.spy(int)', '3 10ms');
BEGIN;
SELECT retries.call('alice.enq(int)', '[42]');
SELECT retries.call('alice.spy(int)', jsonb_build_array(i), run_at => now() + interval '1 millisecond')
  FROM generate_series(1, 5) i;
COMMIT;
});
wait_until($node, $DB, "SELECT count(*) FROM alice.log WHERE what = 'spy'", '5',
	'5: the five calls of spy ran');
my $outcomes = $node->safe_psql($DB,
	"SELECT string_agg(ev #>> '{}', ',' ORDER BY n) FROM alice.log WHERE what = 'spy'");
note("5: what spy read: $outcomes");
{
	is($outcomes, 'none,none,none,none,none',
		'5: an attempt that made no call reads no outcome');
}

$node->safe_psql($DB, q{
ALTER SYSTEM RESET retries.max_workers;
ALTER SYSTEM RESET retries.max_extra_workers;
SELECT pg_reload_conf();
});
workers_are('2', '2: two workers again');
# under traffic: 1,500 calls, each emitting A or B and taking half a
# millisecond more, on two workers
sql('alice', q{
CREATE FUNCTION alice.h2(ev text) RETURNS void LANGUAGE plpgsql
  AS $$ BEGIN PERFORM retries.emit(ev); PERFORM pg_sleep(0.0005); END $$; -- not a wait: the length of a call
SELECT retries.annotate('alice.h2(text)', '3 10ms');
SELECT count(retries.call('alice.h2(text)', jsonb_build_array(CASE WHEN random() < 0.5 THEN 'A' ELSE 'B' END)))
  FROM generate_series(1, 1500);
});
wait_until($node, $DB,
	"SELECT count(*) FROM retries.calls WHERE fn = 'alice.h2(text)'::regprocedure"
	  . " AND state = 'scheduled'",
	'0', '2: the 1,500 calls end');
my $deadlocked = $node->safe_psql($DB,
	"SELECT count(*) || ' ' || count(*) FILTER (WHERE c.state = 'failed')"
	  . " FROM retries.attempts a JOIN retries.calls c ON c.id = a.call_id"
	  . " WHERE c.fn = 'alice.h2(text)'::regprocedure AND a.sqlstate = '40P01'");
note("2: attempts of h2 that failed with 40P01, and calls failed for good: $deadlocked");
{
	is($deadlocked, '0 0', '2: no call that emits one name fails with 40P01');
}

# ---------------------------------------------------------------------
# 3.  a hundred calls of a key behind a running call of the key
# ---------------------------------------------------------------------
my $G3 = 3939;
sql('mallory', "CREATE FUNCTION mallory.k(n int) RETURNS void LANGUAGE plpgsql AS \$\$"
	  . " BEGIN IF n = 0 THEN PERFORM " . gate_sql($G3) . "; END IF; END \$\$;"
	  . " SELECT retries.annotate('mallory.k(int)', '1 10ms', timeout => '10min');");
my $g3 = close_gate($node, $DB, $G3);
sql('mallory', "SELECT retries.call('mallory.k(int)', '[0]', key => 'spin', key_window => '1 millisecond')");
wait_at_gate($node, $DB, $G3, 1, '3: mallory\'s call of key spin runs (at the gate)');
# a new call each: each statement starts more than the window after the one before
sql('mallory', join("\n", map {
	"SELECT retries.call('mallory.k(int)', '[1]', key => 'spin', key_window => '1 millisecond')"
	  . " FROM pg_sleep(0.002);"    # not a wait: spaces the statements' starts past the window
} 1 .. 100));
wait_until($node, $DB,
	"SELECT count(*) FROM retries.call_data WHERE key = 'spin' AND state = 'scheduled'",
	'101', '3: 101 calls of the key are scheduled');

# CPU ticks of the database's workers
sub workers_cpu
{
	my $ticks = 0;
	for my $pid (split /,/, worker_pids($node, $DB))
	{
		open(my $fh, '<', "/proc/$pid/stat") or next;
		my @f = split / /, (split /\) /, <$fh>)[1];
		close $fh;
		$ticks += $f[11] + $f[12];
	}
	return $ticks;
}
my $hz = POSIX::sysconf(POSIX::_SC_CLK_TCK()) || 100;
my $c0 = workers_cpu();
my $w0 = time();
sleep(3);    # not a wait: wall-clock time that must pass, to measure the workers' CPU in it
my $cpu = (workers_cpu() - $c0) / $hz;
my $wall = time() - $w0;
note(sprintf("3: the workers used %.2f s of CPU in %.2f s", $cpu, $wall));
{
	cmp_ok($cpu, '<', 0.1 * $wall,
		'3: 100 calls waiting behind a running call of their key cost the workers under a tenth of a core');
}
open_gate($g3);
wait_until($node, $DB,
	"SELECT count(*) FROM retries.call_data WHERE key = 'spin' AND state = 'scheduled'",
	'0', '3: the calls of the key all run once the gate opens');

# the look is quadratic in the key's scheduled calls (o.id <> ALL (SELECT id
# FROM locked), a subplan per row): 8,000 calls of a key due next year,
# then 20 calls of it due now, each in a statement of its own
sql('mallory', join("\n", map {
	"SELECT retries.call('mallory.k(int)', '[2]', key => 'far', key_window => '1 microsecond',"
	  . " run_at => now() + interval '1 year');"
} 1 .. 8000));
my $t3 = time();
sql('mallory', join("\n", map {
	"SELECT retries.call('mallory.k(int)', '[3]', key => 'far', key_window => '1 microsecond');"
} 1 .. 20));
my $alice3 = sql('alice', "SELECT retries.call('alice.pay(int)', '[33]')");
call_reaches($node, $DB, $alice3, 'succeeded', '3: alice\'s call runs meanwhile');
note(sprintf("3: alice's call ran %.1f s after mallory's 20 calls were made", time() - $t3));
{
	wait_until($node, $DB,
		"SELECT count(*) FROM retries.call_data WHERE key = 'far' AND state = 'succeeded'",
		'20', '3: the 20 due calls of a key with 8,000 others scheduled run within 5 s', 5);
}
note(sprintf("3: %s of the 20 ran in %.1f s", $node->safe_psql($DB,
	"SELECT count(*) FROM retries.call_data WHERE key = 'far' AND state = 'succeeded'"), time() - $t3));
sql('mallory', "SELECT count(retries.cancel(id)) FROM retries.calls WHERE key = 'far' AND state = 'scheduled'");

# an application alone: 3,000 calls of one key piled up while alice's
# function was paused (a 1 microsecond window: each is a call of its own),
# then resumed
sql('alice', "CREATE FUNCTION alice.sync(n int) RETURNS void LANGUAGE sql AS 'SELECT';"
	  . " SELECT retries.annotate('alice.sync(int)', '3 10ms');"
	  . " SELECT retries.pause('alice.sync(int)');");
sql('alice', join("\n", map {
	"SELECT retries.call('alice.sync(int)', '[1]', key => 'sync', key_window => '1 microsecond');"
} 1 .. 3000));
sql('alice', "SELECT retries.resume('alice.sync(int)')");
# (the code reviewed drained "a few a second": 100 took more than 30 s;
# fixed, they take about 3 s on a quiet machine, and took 15 s on one
# that ran two other suites: the bound is 30 s, not 5)
{
	wait_until($node, $DB,
		"SELECT count(*) >= 100 FROM retries.call_data WHERE key = 'sync' AND state = 'succeeded'",
		't', '3: after the resume, 100 of the 3,000 calls of the key run within 30 s', 30);
}
note("3: calls of the key run after the resume: " . $node->safe_psql($DB,
	"SELECT count(*) FROM retries.call_data WHERE key = 'sync' AND state = 'succeeded'"));
# (paused first: its calls are held, no worker claims one, and the cancels
# wait for none)
sql('alice', "SELECT retries.pause('alice.sync(int)');"
	  . " SELECT count(retries.cancel(id)) FROM retries.calls WHERE key = 'sync' AND state = 'scheduled';");

# ---------------------------------------------------------------------
# 4.  a key_window check's locks outlast the key's call
# ---------------------------------------------------------------------
# bob's call holds one base worker (gate G4B), so that the other runs
# alice's two calls, of key ev:k and then a slow one (gate G4), in one
# batch; then bob's ends, and that worker is idle
my ($G4, $G4B) = (4040, 4041);
sql('alice', "CREATE FUNCTION alice.slowk(n int) RETURNS void LANGUAGE plpgsql AS \$\$"
	  . " BEGIN IF n = 0 THEN PERFORM " . gate_sql($G4) . "; END IF;"
	  . " INSERT INTO alice.log (what, n) VALUES ('slowk', n); END \$\$;"
	  . " SELECT retries.annotate('alice.slowk(int)', '3 10ms', timeout => '10min');");
sql('bob', "CREATE FUNCTION bob.gated() RETURNS void LANGUAGE sql AS \$\$"
	  . " SELECT " . gate_sql($G4B) . " \$\$;"
	  . " SELECT retries.annotate('bob.gated()', '1 10ms', timeout => '10min');");
my $g4 = close_gate($node, $DB, $G4);
my $g4b = close_gate($node, $DB, $G4B);
sql('bob', "SELECT retries.call('bob.gated()')");
wait_at_gate($node, $DB, $G4B, 1, '4: bob\'s call holds a base worker');
my $later4 = sql('alice', "SELECT retries.call('alice.slowk(int)', '[1]', key => 'ev:k',"
	  . " key_window => '1 millisecond', run_at => now() + interval '1 day')");
my $waiter = sql('alice', "SELECT retries.call('alice.slowk(int)', '[2]', key => 'ev:k',"
	  . " key_window => '1 millisecond', on_event => 'never', event_timeout => '2 s')");
sql('alice', "BEGIN;"
	  . " SELECT retries.call('alice.slowk(int)', '[3]', key => 'ev:k', key_window => '1 millisecond');"
	  . " SELECT retries.call('alice.slowk(int)', '[0]', run_at => now() + interval '1 millisecond');"
	  . " COMMIT;");
wait_at_gate($node, $DB, $G4, 1, '4: alice\'s slow call runs (at the gate), after her call of ev:k');
open_gate($g4b);
wait_until($node, $DB,
	"SELECT count(*) FROM retries.workers WHERE state = 'idle' AND database = current_database()",
	'1', '4: bob\'s call ends: a base worker is idle');
is(sql('alice', "SELECT retries.retry_now($later4)"), 't',
	'4: alice makes her call of ev:k due tomorrow due now');
TODO:
{
	local $TODO = 'finding 4 (Low: the batch that started a call of the key holds its lock until the batch ends: the attempt\'s outcome commits with the batch)';
	call_reaches($node, $DB, $later4, 'succeeded',
		'4: it runs on the idle worker while the batch that ran the key\'s call runs another', 8);
	wait_until($node, $DB,
		"SELECT event_wait IS NULL OR state <> 'scheduled' FROM retries.call_data WHERE id = $waiter",
		't', '4: the waiting call of the key is released at its 2 s event_timeout meanwhile', 8);
}
open_gate($g4);
call_reaches($node, $DB, $later4, 'succeeded', '4: the call runs once the gate opens');
call_reaches($node, $DB, $waiter, 'succeeded', '4: and so does the one that waited');

# ---------------------------------------------------------------------
# a.  disjoint names from a pool of clients
# ---------------------------------------------------------------------
my $perr = pgbench('a: 16 clients, names of their own in mixed orders: no failed transaction', 4, q{
\set a random(1, 20)
\set b random(1, 20)
\set c random(1, 20)
BEGIN;
SELECT retries.emit('c' || :client_id || ':' || :a);
SELECT retries.call('alice.pay(int)', '[1]', on_event => 'c' || :client_id || ':' || :b);
SELECT retries.call('alice.pay(int)', '[2]', key => 'c' || :client_id || ':' || :c, debounce => '20 ms');
SELECT retries.emit('c' || :client_id || ':' || :c);
SELECT retries.call('alice.pay(int)', '[3]', key => 'c' || :client_id || ':' || :a, debounce => '20 ms',
                    on_event => 'c' || :client_id || ':' || :b);
SELECT retries.clear_event('c' || :client_id || ':' || :b);
COMMIT;
}, 1);
unlike($perr, qr/40P01|deadlock/, 'a: no deadlock');

# ---------------------------------------------------------------------
# b.  key_window from a pool of clients, with priorities and retry_now
# ---------------------------------------------------------------------
sql('alice', q{
CREATE FUNCTION alice.kw(k int) RETURNS void LANGUAGE sql AS 'SELECT';
SELECT retries.annotate('alice.kw(int)', '3 10ms');
});
pgbench('b: 16 clients ask for 10 keys with a 250 ms window: no failed transaction', 4, q{
\set k random(1, 10)
\set p random(0, 2)
SELECT retries.call('alice.kw(int)', jsonb_build_array(:k), key => 'kw:' || :k,
                    key_window => '250 ms', priority => :p);
}, 10, q{
DO $$ DECLARE i bigint; BEGIN
  SELECT id INTO i FROM retries.calls WHERE key = 'kw:' || (1 + floor(random() * 10))::int
    AND state = 'scheduled' ORDER BY random() LIMIT 1;
  IF i IS NOT NULL THEN PERFORM retries.retry_now(i); END IF;
EXCEPTION WHEN object_not_in_prerequisite_state THEN NULL;
END $$;
}, 2);
wait_until($node, $DB,
	"SELECT count(*) FROM retries.calls WHERE key LIKE 'kw:%' AND state <> 'succeeded'",
	'0', 'b: every call of the keys runs');
my $gap = $node->safe_psql($DB, q{
SELECT count(*) > 20 AND coalesce(min(gap) >= interval '250 ms', true), count(*), min(gap)
  FROM (SELECT a.started_at - lag(a.started_at) OVER w AS gap, a.call_id <> lag(a.call_id) OVER w AS other
          FROM retries.attempts a JOIN retries.calls c ON c.id = a.call_id
         WHERE c.key LIKE 'kw:%'
        WINDOW w AS (PARTITION BY c.key ORDER BY a.started_at)) s
 WHERE other});
like($gap, qr/^t\|/, 'b: no two starts of a key\'s calls within 250 ms') or diag($gap);
note("b: (ok, starts after another call's, smallest gap) $gap");

# ---------------------------------------------------------------------
# c.  debounce_max from a pool of clients
# ---------------------------------------------------------------------
pgbench('c: 16 clients debounce 3 keys: no failed transaction', 3, q{
\set k random(1, 3)
SELECT retries.call('alice.kw(int)', jsonb_build_array(:k), key => 'dm:' || :k,
                    debounce => '300 ms', debounce_max => '1 s');
}, 1);
wait_until($node, $DB,
	"SELECT count(*) FROM retries.calls WHERE key LIKE 'dm:%' AND state <> 'succeeded'",
	'0', 'c: every burst runs');
my $late = $node->safe_psql($DB, q{
SELECT count(*) >= 6 AND max(a.started_at - c.created_at) < interval '2 s', count(*), max(a.started_at - c.created_at)
  FROM retries.calls c JOIN retries.attempts a ON a.call_id = c.id AND a.attempt = 1
 WHERE c.key LIKE 'dm:%'});
like($late, qr/^t\|/, 'c: each burst starts within its debounce_max (1 s, and 1 s for the workers)')
  or diag($late);
note("c: (ok, bursts, longest from first call to start) $late");

# ---------------------------------------------------------------------
# d. / e. / h.  events of other roles, rolled-back emits, repeatable read
# ---------------------------------------------------------------------
my $w_d = sql('alice', q{
SELECT retries.emit('secret:1', '{"card": "4111"}');
SELECT retries.call('alice.ship(int)', '[70]', on_event => 'order:70');
});
($w_d) = $w_d =~ /(\d+)$/;
is(sql('mallory', q{
SELECT count(*) FROM retries.events;
SELECT retries.clear_event('secret:1');
SELECT retries.emit('order:70');
}), "0\nf\n0", 'd: mallory sees none of alice\'s events, clears and releases nothing of hers');
is(sql('alice', "SELECT event || ' ' || (emitted_at IS NOT NULL) || ' ' || waiting FROM retries.events"
	  . " WHERE event IN ('secret:1', 'order:70') ORDER BY event"),
	"order:70 false 1\nsecret:1 true 0", 'd: alice\'s events are as she left them');
sql('alice', q{
BEGIN; SAVEPOINT s; SELECT retries.emit('order:70'); ROLLBACK TO s; COMMIT;
BEGIN; SELECT retries.emit('order:70'); ROLLBACK;
});
is($node->safe_psql($DB, "SELECT event_wait FROM retries.call_data WHERE id = $w_d"), 't',
	'e: emits rolled back (to a savepoint, and whole) release nothing');
is(sql('alice', "BEGIN; SAVEPOINT s; SELECT retries.emit('order:70'); RELEASE s; COMMIT;"),
	'1', 'e: an emit in a savepoint that is kept releases the call');
call_reaches($node, $DB, $w_d, 'succeeded', 'e: and it runs');

# a name used before, and one used for the first time (both emits then
# meet at the row's unique index), under REPEATABLE READ and SERIALIZABLE
sql('alice', "SELECT retries.emit('rr:1')");
for my $case (['rr:1', 'REPEATABLE READ'], ['rr:2', 'REPEATABLE READ'], ['rr:3', 'SERIALIZABLE'])
{
	my ($name, $level) = @$case;
	my $rr = $node->background_psql($DB, on_error_stop => 0);
	$rr->query_safe("SET ROLE alice; BEGIN ISOLATION LEVEL $level; SELECT 1;"
		  . " SELECT retries.emit('$name', '{\"t\": 1}')");
	my $rr2 = $node->background_psql($DB, on_error_stop => 0);
	$rr2->query_safe("SET ROLE alice; BEGIN ISOLATION LEVEL $level; SELECT 1");
	$rr2->query_until(qr/sent/, "\\echo sent\nSELECT retries.emit('$name', '{\"t\": 2}');\n");
	wait_until($node, $DB,
		"SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
		  . " AND query LIKE '%retries.emit(''$name''%'",
		'1', "h: the second $level emit of $name waits for the first");
	$rr->query_safe('COMMIT');
	$rr->quit;
	$rr2->query('COMMIT');
	is($rr2->{stderr}, '', "h: and then succeeds, no 40001 ($name, $level)");
	$rr2->quit;
	is($node->safe_psql($DB, "SELECT payload FROM retries.event_data WHERE event = '$name'"),
		'{"t": 2}', "h: its payload is the event's ($name)");
}

# ---------------------------------------------------------------------
# f.  an emit in a prepared transaction
# ---------------------------------------------------------------------
my $w_f = sql('alice', "SELECT retries.call('alice.ship(int)', '[71]', on_event => 'order:71')");
sql('alice', "BEGIN; SELECT retries.emit('order:71'); PREPARE TRANSACTION 'rv9b';");
is($node->safe_psql($DB, "SELECT event_wait FROM retries.call_data WHERE id = $w_f"), 't',
	'f: the prepared emit has released nothing yet');
my $t0 = time();
$node->safe_psql($DB, "COMMIT PREPARED 'rv9b'");
call_reaches($node, $DB, $w_f, 'succeeded', 'f: COMMIT PREPARED releases the call, and it runs');
cmp_ok(time() - $t0, '<', 8, 'f: within seconds (the commit woke the workers)');

# ---------------------------------------------------------------------
# g.  event_timeout while mallory's calls hold both base workers
# ---------------------------------------------------------------------
my $G7 = 4747;
sql('mallory', "CREATE FUNCTION mallory.g(n int) RETURNS void LANGUAGE plpgsql AS \$\$"
	  . " BEGIN PERFORM " . gate_sql($G7) . "; END \$\$;"
	  . " SELECT retries.annotate('mallory.g(int)', '1 10ms', timeout => '10min');");
my $g7 = close_gate($node, $DB, $G7);
sql('mallory', "SELECT retries.call('mallory.g(int)', '[1]'), retries.call('mallory.g(int)', '[2]')");
wait_at_gate($node, $DB, $G7, 2, 'g: mallory\'s calls hold both base workers');
my $w_g = sql('alice', "SELECT retries.call('alice.ship(int)', '[72]', on_event => 'never:72',"
	  . " event_timeout => '1 s')");
call_reaches($node, $DB, $w_g, 'succeeded',
	'g: alice\'s call runs at its event_timeout meanwhile', 20);
is(sql('alice', "SELECT ev IS NULL FROM alice.log WHERE what = 'ship' AND n = 72"), 't',
	'g: without a payload (it ran at its timeout)');
open_gate($g7);

$node->stop;
done_testing();
