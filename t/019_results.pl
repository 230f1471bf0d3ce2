# Results, waiting, chains and lasting keys, as sessions and crashes see
# them:
#
#   a. retries.wait() sleeps without polling (its backend uses no CPU to
#      speak of while it waits) and returns at the commit that finishes the
#      call: a cancel() in another session, a worker's success with its
#      result (of a call made due once the wait has begun);
#   b. pg_cancel_backend() ends a wait, and the backend can wait again;
#   c. notify: each finished call of a function annotated with notify =>
#      true sends NOTIFY retries_finished with its id (succeeded, failed,
#      cancelled), at commit only; calls of other functions send nothing;
#   d. a call that runs after another, locked by an uncommitted transaction
#      (a reschedule() left open) when the other succeeds, does not stall
#      the worker (one worker only: the calls behind keep running), and
#      runs once the lock is gone;
#   e. keys that last: 40 pgbench clients send 4,000 "ship order" requests
#      over 200 keys, each in a transaction with the order, while the
#      workers ship them: each order ships exactly once, and each key names
#      one call;
#   f. a chain of 30 calls, each after the one before, with a worker killed
#      (SIGKILL, a crash restart) in the middle, while link 15 waits at a
#      gate: every link runs once, in order; and fan-out (one call, 500
#      after it) and fan-in (500 calls, one after them all), made in one
#      transaction, both finish, each call once.
#
# No step assumes how fast the machine is: a waiter is woken by a call made
# due once it waits, the last notification is one the test sends after the
# others, and the kill comes while a link waits at a gate the test holds.

use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RetriesTest;
use Test::More;
use Time::HiRes qw(usleep time);

my $node = retries_node('main');
$node->append_conf('postgresql.conf', "max_connections = 60\n");
$node->start;
$node->safe_psql(
	'postgres', q{
CREATE EXTENSION retries;
CREATE FUNCTION answer(i integer) RETURNS jsonb LANGUAGE sql AS $$
	SELECT jsonb_build_object('answer', i * 2)
$$;
CREATE FUNCTION told(i integer) RETURNS integer LANGUAGE plpgsql AS $$
BEGIN
	IF i < 0 THEN
		RAISE EXCEPTION 'negative' USING ERRCODE = '22003';
	END IF;
	RETURN i;
END $$;
CREATE FUNCTION untold(i integer) RETURNS integer LANGUAGE sql AS 'SELECT i';
SELECT retries.annotate('answer(integer)', '3 10ms');
SELECT retries.annotate('told(integer)', '3 10ms', notify => true);
SELECT retries.annotate('untold(integer)', '3 10ms');
});
wait_until($node, 'postgres', workers_query('postgres'), '2', 'two workers');

# cpu_ticks(PID): user and system CPU time of a process, in clock ticks
sub cpu_ticks
{
	my ($pid) = @_;
	my @f = split / /, slurp_file("/proc/$pid/stat") =~ s/^.*\) //r;
	return $f[11] + $f[12];
}

###########################################################################
# a. wait() sleeps until the finishing commit
###########################################################################

my $later = $node->safe_psql('postgres',
	"SELECT retries.call('answer(integer)', '[1]', run_at => now() + interval '1 hour')");
my $waiter = $node->background_psql('postgres', on_error_stop => 0);
my $waiter_pid = $waiter->query_safe('SELECT pg_backend_pid()');
$waiter->query_until(qr/waiting\n/,
	"\\echo waiting\nSELECT w.state || '|' FROM retries.wait($later, '1h') w;\n");
wait_until($node, 'postgres',
	"SELECT wait_event_type || ':' || wait_event FROM pg_stat_activity WHERE pid = $waiter_pid",
	'Extension:Extension', 'a: the waiter sleeps on its latch');
my $ticks = cpu_ticks($waiter_pid);
my $slept = time();
# the span over which the waiter's CPU time is counted (a waiter asleep on
# its latch uses none, however slow the machine)
usleep(1_000_000);    # not a wait: the span the CPU time is counted over
$ticks = cpu_ticks($waiter_pid) - $ticks;
$slept = time() - $slept;
ok($ticks <= 3,
	sprintf('a: the waiter used %d CPU ticks in %.1f s of waiting (no polling)', $ticks, $slept));
$node->safe_psql('postgres', "SELECT retries.cancel($later)");
my $out = $waiter->query_until(qr/\|.*\n/, '');
is((split /\|/, $out)[0], 'cancelled',
	'a: the wait returns the call, cancelled by another session');

# a worker's success, with its result: the call is made due only once the
# waiter waits for it
my $soon = $node->safe_psql('postgres',
	"SELECT retries.call('answer(integer)', '[21]', run_at => now() + interval '1 hour')");
$waiter->query_until(qr/waiting\n/,
	"\\echo waiting\nSELECT state || ' ' || result || '|' FROM retries.wait($soon, '1h');\n");
wait_until($node, 'postgres',
	"SELECT wait_event_type || ':' || wait_event FROM pg_stat_activity WHERE pid = $waiter_pid",
	'Extension:Extension', 'a: the waiter waits for a call due in an hour');
$node->safe_psql('postgres', "SELECT retries.reschedule($soon, now())");
$out = $waiter->query_until(qr/\|.*\n/, '');
is((split /\|/, $out)[0], 'succeeded {"answer": 42}',
	'a: a worker\'s success wakes the waiter, with the result');

###########################################################################
# b. a wait can be cancelled, and the backend waits again afterwards
###########################################################################

$later = $node->safe_psql('postgres',
	"SELECT retries.call('answer(integer)', '[2]', run_at => now() + interval '1 hour')");
$waiter->query_until(qr/waiting\n/,
	"\\echo waiting\nSELECT retries.wait($later);\n\\echo done\n");
wait_until($node, 'postgres',
	"SELECT wait_event FROM pg_stat_activity WHERE pid = $waiter_pid",
	'Extension', 'b: waiting');
$node->safe_psql('postgres', "SELECT pg_cancel_backend($waiter_pid)");
$waiter->query_until(qr/done\n/, '');
like($waiter->{stderr}, qr/canceling statement due to user request/,
	'b: pg_cancel_backend() ends the wait');
$waiter->{stderr} = '';
$soon = $node->safe_psql('postgres', "SELECT retries.call('answer(integer)', '[5]')");
is($waiter->query_safe("SELECT (retries.wait($soon, '1h')).state"),
	'succeeded', 'b: the same backend waits again');
$node->safe_psql('postgres', "SELECT retries.cancel($later)");
$waiter->quit;

###########################################################################
# c. notify
###########################################################################

my $listener = $node->background_psql('postgres', on_error_stop => 0);
$listener->query_safe('LISTEN retries_finished');
my ($ok_id, $bad_id, $hand_id, $quiet1, $quiet2, $undone) = split /\|/,
  $node->safe_psql(
	'postgres', q{
SELECT retries.call('told(integer)', '[1]') || '|' ||
	   retries.call('told(integer)', '[-1]') || '|' ||
	   retries.call('told(integer)', '[2]', run_at => now() + interval '1 hour') || '|' ||
	   retries.call('untold(integer)', '[1]') || '|' ||
	   retries.call('untold(integer)', '[2]', run_at => now() + interval '1 hour') || '|' ||
	   retries.call('told(integer)', '[3]', run_at => now() + interval '1 hour')
});
$node->safe_psql('postgres',
	"SELECT retries.cancel($hand_id); SELECT retries.cancel($quiet2);"
	  . " BEGIN; SELECT retries.cancel($undone); ROLLBACK;");
wait_until($node, 'postgres',
	"SELECT count(*) FROM retries.calls WHERE id IN ($ok_id, $bad_id, $quiet1)"
	  . " AND state IN ('succeeded', 'failed')",
	'3', 'c: the calls ran');
# and nothing more comes: a notification sent after the calls finished
# (and so queued after any that their commits sent) is heard last
$node->safe_psql('postgres', "NOTIFY retries_finished, 'end'");
my %heard;
my $end = 0;
my $until = time() + $RetriesTest::DEADLINE;
while (!$end && time() < $until)
{
	my $heard = $listener->query('SELECT 1');
	$heard{$1}++
	  while $heard =~ s/notification "retries_finished" with payload "(\d+)"//;
	$end = 1 if $heard =~ /notification "retries_finished" with payload "end"/;
	usleep(50_000) if !$end;    # poll
}
ok($end, 'c: the listener hears the notifications up to the last one sent');
is( join(',', map { "$_:$heard{$_}" } sort { $a <=> $b } keys %heard),
	join(',', map { "$_:1" } sort { $a <=> $b } $ok_id, $bad_id, $hand_id),
	'c: the notify function\'s succeeded, failed and cancelled calls were announced, once, and nothing else'
);
$listener->quit;

###########################################################################
# d. a locked follower does not stall the worker
###########################################################################

$node->safe_psql('postgres',
	"ALTER SYSTEM SET retries.max_workers = 1; SELECT pg_reload_conf()");
wait_until($node, 'postgres', workers_query('postgres'), '1', 'd: one worker');
my ($first, $follower) = split /\|/, $node->safe_psql(
	'postgres', q{
SELECT id || '|' || retries.call('answer(integer)', '[8]', after => ARRAY[id])
  FROM (SELECT retries.call('answer(integer)', '[7]', run_at => now() + interval '1 hour') AS id) s
});
my $locker = $node->background_psql('postgres');
$locker->query_safe("BEGIN; SELECT retries.reschedule($follower, now())");
# the first call is made due only once its follower is locked
$node->safe_psql('postgres', "SELECT retries.reschedule($first, now())");
wait_until($node, 'postgres',
	"SELECT state FROM retries.calls WHERE id = $first",
	'succeeded', 'd: the first call succeeds while its follower is locked');
my ($from, $to) = schedule_range($node, 'postgres', 'answer(integer)', 1, 20);
wait_until($node, 'postgres',
	"SELECT count(*) FROM retries.calls WHERE id BETWEEN $from AND $to AND state = 'succeeded'",
	'20', 'd: the worker goes on running other calls meanwhile');
is($node->safe_psql('postgres', "SELECT state FROM retries.calls WHERE id = $follower"),
	'scheduled', 'd: the locked follower still waits');
$locker->query_safe('COMMIT');
wait_until($node, 'postgres',
	"SELECT state || ' ' || result FROM retries.calls WHERE id = $follower",
	'succeeded {"answer": 16}', 'd: once the lock is gone, the follower runs');
$locker->quit;
$node->safe_psql('postgres',
	"ALTER SYSTEM RESET retries.max_workers; SELECT pg_reload_conf()");
wait_until($node, 'postgres', workers_query('postgres'), '2', 'd: two workers again');

###########################################################################
# e. keys that last, under concurrent requests
###########################################################################

$node->safe_psql(
	'postgres', q{
CREATE TABLE orders (id integer PRIMARY KEY);
CREATE TABLE shipments (order_id integer, at timestamptz DEFAULT clock_timestamp());
CREATE FUNCTION ship(order_id integer) RETURNS void LANGUAGE sql AS $$
	INSERT INTO shipments (order_id) VALUES (order_id)
$$;
SELECT retries.annotate('ship(integer)', '3 10ms');
});
my $script = $node->basedir . '/ship.sql';
PostgreSQL::Test::Utils::append_to_file(
	$script, q{\set k random(1, 200)
BEGIN;
INSERT INTO orders VALUES (:k) ON CONFLICT DO NOTHING;
SELECT retries.call('ship(integer)', jsonb_build_array(:k), key => 'ship-' || :k);
COMMIT;
});
my ($pgb_out, $pgb_err);
my $pgbench_ok = IPC::Run::run(
	[
		$node->installed_command('pgbench'), '-n', '-c', '40', '-j', '4', '-t',
		'100', '-f', $script, '-h', $node->host, '-p', $node->port, 'postgres'
	],
	'>', \$pgb_out, '2>', \$pgb_err);
ok($pgbench_ok, 'e: 40 clients sent 4,000 requests without an error')
  or diag($pgb_err);
wait_until($node, 'postgres',
	"SELECT count(*) FROM retries.calls WHERE fn = 'ship(integer)'::regprocedure AND state = 'succeeded'",
	'200', 'e: 200 calls, all shipped');
is( $node->safe_psql('postgres',
		"SELECT count(*) || ' ' || count(DISTINCT order_id) FROM shipments"),
	'200 200', 'e: each order shipped exactly once');
is( $node->safe_psql(
		'postgres',
		"SELECT count(*) FROM (SELECT key FROM retries.calls WHERE key LIKE 'ship-%'"
		  . " GROUP BY key HAVING count(*) > 1) s"),
	'0', 'e: each key names one call');

###########################################################################
# f. chains across a crash; fan-out and fan-in
###########################################################################

$node->safe_psql(
	'postgres', q{
CREATE TABLE links (i integer, at timestamptz DEFAULT clock_timestamp());
-- link 15 passes gate 1 (before its effect)
CREATE FUNCTION link(i integer) RETURNS integer LANGUAGE sql AS $$
	SELECT CASE WHEN i = 15 THEN } . gate_sql(1) . q{ END;
	INSERT INTO links (i) VALUES (i) RETURNING i
$$;
SELECT retries.annotate('link(integer)', '5 10ms');
CREATE FUNCTION chain(n integer) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
	prev bigint := retries.call('link(integer)', '[1]', run_at => now() + interval '200 ms');
BEGIN
	FOR i IN 2 .. n LOOP
		prev := retries.call('link(integer)', jsonb_build_array(i), after => ARRAY[prev]);
	END LOOP;
	RETURN prev;
END $$;
});
# the worker is killed while it runs link 15, held at the gate
my $gate = close_gate($node, 'postgres', 1);
my $last = $node->safe_psql('postgres', 'SELECT chain(30)');
wait_at_gate($node, 'postgres', 1, 1, 'f: the chain is under way, at link 15');
is($node->safe_psql('postgres', 'SELECT count(*) FROM links'), '14',
	'f: (14 links ran before it)');
my $log_offset = -s $node->logfile;
my $victim = $node->safe_psql('postgres',
	"SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND objid = 1 AND NOT granted");
kill 'KILL', $victim;
# the crash restart ends the gate's session too, and so opens the gate
wait_until($node, 'postgres',
	"SELECT state FROM retries.calls WHERE id = $last",
	'succeeded', 'f: after the crash restart the chain runs to its end');
$gate->quit;
ok(scalar(crash_lines($node, $log_offset)) > 0, 'f: the kill made a crash restart');
is( $node->safe_psql('postgres',
		"SELECT string_agg(i::text, ',' ORDER BY at) = string_agg(i::text, ',' ORDER BY i)"
		  . " AND count(*) = 30 AND count(DISTINCT i) = 30 FROM links"),
	't', 'f: every link ran once, each after the one before');
is( $node->safe_psql(
		'postgres',
		"SELECT count(*) FROM retries.calls WHERE fn = 'link(integer)'::regprocedure"
		  . " AND (state <> 'succeeded' OR waiting_for <> '{}')"),
	'0', 'f: every link succeeded and waits for nothing');
is($node->safe_psql('postgres', 'SELECT count(*) FROM retries.call_after'),
	'0', 'f: nothing is left in call_after');

# made in one transaction: none of the calls runs before all are made
$node->safe_psql(
	'postgres', q{
TRUNCATE links;
CREATE OR REPLACE FUNCTION link(i integer) RETURNS integer LANGUAGE sql AS $$
	INSERT INTO links (i) VALUES (i) RETURNING i
$$;
CREATE TABLE fan (what text, id bigint);
BEGIN;
INSERT INTO fan SELECT 'root', retries.call('link(integer)', '[0]');
INSERT INTO fan SELECT 'out', retries.call('link(integer)', jsonb_build_array(i),
										   after => ARRAY[(SELECT id FROM fan WHERE what = 'root')])
  FROM generate_series(1, 500) i;
INSERT INTO fan SELECT 'in', retries.call('link(integer)', jsonb_build_array(1000 + i))
  FROM generate_series(1, 500) i;
INSERT INTO fan SELECT 'joined', retries.call('link(integer)', '[2000]',
											  after => (SELECT array_agg(id) FROM fan WHERE what = 'in'));
COMMIT;
});
wait_until($node, 'postgres',
	"SELECT count(*) FROM retries.calls c JOIN fan f ON f.id = c.id WHERE c.state = 'succeeded'",
	'1002', 'f: fan-out of 500 and fan-in of 500 finish');
is( $node->safe_psql(
		'postgres',
		"SELECT count(*) = count(DISTINCT i)"
		  . " AND bool_and(at > (SELECT at FROM links WHERE i = 0)) FILTER (WHERE i BETWEEN 1 AND 500)"
		  . " AND bool_and(at < (SELECT at FROM links WHERE i = 2000)) FILTER (WHERE i > 1000 AND i < 2000)"
		  . " FROM links"),
	't', 'f: each call ran once; the 500 after the root, the joined one after the 500');

done_testing();
