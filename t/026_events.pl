# Keys with windows, debounce and events (1.6) across crashes and
# restarts, and at a scale the regression tests do not reach.
#
#   a. event timeouts survive a restart: a call whose timeout passes while
#      the server is down runs once it is back, retries.event() NULL; one
#      whose timeout is later waits for it, and runs soon after it: the
#      workers wake for it, not at the end of their longest sleep (10 s).
#      Time passes on the extension's clock (retries.debug_clock_offset),
#      not by sleeping;
#   b. an emit that committed just before an immediate shutdown has
#      released its calls: they run after the restart (the workers were
#      paused before it), each once; an emit whose transaction was in
#      flight releases nothing;
#   c. a worker SIGKILLed while it runs a released call: the call is charged
#      interrupted and runs again, its effect once;
#   d. 2,000 calls waiting on 200 events, emitted from 4 sessions at once
#      while new waiting calls are made: every call runs exactly once, with
#      its event's payload, and none is left waiting;
#   e. debounce under a drain: 20 sessions debounce 50 keys while the
#      workers run them: each key's calls ran with the key's last arguments
#      in the end, and no call ran twice.
#   f. the rows that lock names, which the workers prune: a debounced
#      key's row of name_lock an hour after it was made, an event's empty
#      row of event_data (made by a call that waits for it) when nobody
#      holds it; a call waiting for an event whose row was pruned, or is
#      missing (a call made before version 1.7, or restored), is released
#      by an emit, which makes the row again.

use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RetriesTest;
use Test::More;
use Time::HiRes qw(time usleep);
use IPC::Run;

my $node = retries_node('events');
$node->append_conf('postgresql.conf', "retries.max_workers = 4\n");
$node->start;

$node->safe_psql('postgres', q{
CREATE EXTENSION retries;
CREATE TABLE ran (call bigint, attempt int, arg text, event jsonb,
				  at timestamptz DEFAULT clock_timestamp());
CREATE FUNCTION note(arg text) RETURNS void LANGUAGE sql AS $$
	INSERT INTO ran (call, attempt, arg, event)
	VALUES (retries.current_call(), retries.current_attempt(), arg, retries.event())
$$;
SELECT retries.annotate('note(text)', '5 10ms');
-- sleeps while advisory lock 7 is held elsewhere, for the SIGKILL below
CREATE FUNCTION held(arg text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	IF retries.current_attempt() = 1 THEN
		PERFORM pg_advisory_xact_lock(7);
	END IF;
	INSERT INTO ran (call, attempt, arg, event)
	VALUES (retries.current_call(), retries.current_attempt(), arg, retries.event());
END $$;
SELECT retries.annotate('held(text)', '5 10ms');
});

# sessions(sqls...): run each SQL script in a psql session of its own, all
# at once, each statement in a transaction of its own; wait for all
sub sessions
{
	my @handles;
	for my $sql (@_)
	{
		my ($out, $err) = ('', '');
		push @handles,
		  IPC::Run::start(
			[ 'psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-d', $node->connstr('postgres'), '-f', '-' ],
			'<', \$sql, '>', \$out, '2>', \$err);
	}
	my $ok = 1;
	$ok &&= $_->finish for @handles;
	return $ok;
}

# state(id): a call's state and its waiting_for_event
sub state_of
{
	my ($id) = @_;
	return $node->safe_psql('postgres',
		"SELECT state || ' ' || coalesce(waiting_for_event, '-') FROM retries.calls WHERE id = $id");
}

###########################################################################
# a. timeouts across a restart
###########################################################################

my $soon = $node->safe_psql('postgres',
	"SELECT retries.call('note(text)', '[\"soon\"]', on_event => 'never', event_timeout => '1 h')");
my $later = $node->safe_psql('postgres',
	"SELECT retries.call('note(text)', '[\"later\"]', on_event => 'never', event_timeout => '3 h')");
# the server, stopped, starts with the extension's clock 2 h ahead (the
# setting is written now, and read at the start: nothing reloads it
# before): the first timeout passed while the server was down, the second
# has not
$node->safe_psql('postgres', "ALTER SYSTEM SET retries.debug_clock_offset = '2h'");
$node->stop('immediate');
$node->start;
wait_until($node, 'postgres', "SELECT count(*) FROM ran WHERE arg = 'soon' AND event IS NULL",
	'1', 'a: a timeout that passed while the server was down runs once it is back');
is(state_of($later), 'scheduled never', 'a: the later one still waits');
# now the clock is moved so that the later timeout comes 2 s from now.  The
# reload wakes the workers, which then sleep until that timeout; were it
# not a reason to wake, they would sleep their longest sleep, 10 s.  So the
# call must run less than 5 s after its timeout: on time it takes
# milliseconds (under a second on a machine ten times slower), late at
# least the 8 s that the sleep outlasts the timeout (the reload comes well
# before the timeout, even on a slow machine: one statement after the
# reading of the clock).
my $ahead_ms = $node->safe_psql('postgres',
	"SELECT round(extract(epoch FROM event_deadline - clock_timestamp()) * 1000) - 2000"
	  . " FROM retries.call_data WHERE id = $later");
$node->safe_psql('postgres',
	"ALTER SYSTEM SET retries.debug_clock_offset = $ahead_ms; SELECT pg_reload_conf()");
wait_until($node, 'postgres', "SELECT count(*) FROM ran WHERE arg = 'later'",
	'1', 'a: ... until its timeout');
# how long after its timeout it ran, on the extension's clock
my $late_by = $node->safe_psql('postgres',
	"SELECT extract(epoch FROM r.at - c.event_deadline) + $ahead_ms / 1000.0"
	  . " FROM ran r, retries.call_data c WHERE r.arg = 'later' AND c.id = $later");
cmp_ok($late_by, '>=', 0, "a: not before its timeout ($late_by s after)");
cmp_ok($late_by, '<', 5, 'a: and soon after it, not at the end of the workers\' 10 s sleep');
$node->safe_psql('postgres',
	'ALTER SYSTEM RESET retries.debug_clock_offset; SELECT pg_reload_conf()');

###########################################################################
# b. an emit committed before an immediate shutdown
###########################################################################

$node->safe_psql('postgres', q{
ALTER SYSTEM SET retries.enabled = off;
SELECT pg_reload_conf();
});
wait_until($node, 'postgres',
	"SELECT count(*) FILTER (WHERE state = 'paused') FROM retries.workers WHERE database = 'postgres'",
	'4', 'b: the workers pause');
$node->safe_psql('postgres', q{
SELECT retries.call('note(text)', jsonb_build_array('b' || i), on_event => 'b:go')
  FROM generate_series(1, 20) i;
SELECT retries.call('note(text)', jsonb_build_array('c' || i), on_event => 'b:never')
  FROM generate_series(1, 5) i;
});
is($node->safe_psql('postgres', "SELECT retries.emit('b:go', '{\"n\": 1}')"),
	'20', 'b: the emit released its 20 calls');
# an emit in flight when the server stops
my $open = $node->background_psql('postgres', on_error_stop => 0);
$open->query_safe("BEGIN; SELECT retries.emit('b:never');");
$node->stop('immediate');
eval { $open->quit };
$node->start;
$node->safe_psql('postgres', q{
ALTER SYSTEM RESET retries.enabled;
SELECT pg_reload_conf();
});
wait_until($node, 'postgres',
	"SELECT count(*) || ' ' || count(DISTINCT arg) FROM ran WHERE arg LIKE 'b%' AND event = '{\"n\": 1}'",
	'20 20', 'b: after the restart each released call ran once, with the payload');
is($node->safe_psql('postgres',
		"SELECT count(*) FROM retries.calls WHERE waiting_for_event = 'b:never'"),
	'5', 'b: the emit that did not commit released nothing');

###########################################################################
# c. a worker killed while it runs a released call
###########################################################################

my $locker = $node->background_psql('postgres');
$locker->query_safe('SELECT pg_advisory_lock(7)');
my $c = $node->safe_psql('postgres',
	"SELECT retries.call('held(text)', '[\"c\"]', on_event => 'c:go')");
$node->safe_psql('postgres', "SELECT retries.emit('c:go', '\"payload c\"')");
wait_until($node, 'postgres',
	"SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objid = 7 AND NOT granted",
	'1', 'c: the released call runs, and waits for the lock');
my $pid = $node->safe_psql('postgres',
	"SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND objid = 7 AND NOT granted");
kill 'KILL', $pid;    # a crash restart: the locker's session goes too
wait_until($node, 'postgres',
	"SELECT state || ' ' || attempts FROM retries.calls WHERE id = $c",
	'succeeded 2', 'c: after the SIGKILL it ran again (charged interrupted)');
is($node->safe_psql('postgres',
		"SELECT count(*) || ' ' || max(event #>> '{}') FROM ran WHERE call = $c"),
	'1 payload c', 'c: its effect once, with its payload');
eval { $locker->quit };
my $log_offset = -s $node->logfile;

###########################################################################
# d. many waiting calls, emits from several sessions, calls made meanwhile
###########################################################################

$node->safe_psql('postgres', q{
SELECT count(retries.call('note(text)', jsonb_build_array('d' || i),
						  on_event => 'd:' || (i % 200)))
  FROM generate_series(1, 2000) i;
});
my @emits = map {
	my $s = $_;
	join('', map { "SELECT retries.emit('d:$_', '{\"e\": $_}');\n" } grep { $_ % 4 == $s } 0 .. 199)
} 0 .. 3;
# and calls made while the emits run: the event is there already, or not yet
my $late = q{
SELECT count(retries.call('note(text)', jsonb_build_array('x' || i),
						  on_event => 'd:' || (i % 200)))
  FROM generate_series(1, 400) i;
};
ok(sessions(@emits, $late), 'd: four sessions emit while a fifth makes waiting calls');
wait_until($node, 'postgres',
	"SELECT count(*) FROM retries.calls WHERE fn = 'note(text)'::regprocedure"
	  . " AND (args->>0 LIKE 'd%' OR args->>0 LIKE 'x%') AND state = 'succeeded'",
	'2400', 'd: all 2,400 calls waiting on 200 events ran');
is( $node->safe_psql(
		'postgres', q{
SELECT count(*) || ' ' || count(DISTINCT arg) || ' '
	   || count(*) FILTER (WHERE (event->>'e')::int
							 = (regexp_replace(arg, '\D', '', 'g'))::int % 200)
  FROM ran WHERE arg LIKE 'd%' OR arg LIKE 'x%'}),
	'2400 2400 2400', 'd: each exactly once, each with its own event\'s payload');
is($node->safe_psql('postgres',
		"SELECT count(*) FROM retries.calls WHERE waiting_for_event LIKE 'd:%'"),
	'0', 'd: none left waiting');

###########################################################################
# e. debounce under a drain
###########################################################################

my @debounces = map {
	my $s = $_;
	join('', map {
		my $k = $_ % 50;
		"SELECT retries.call('note(text)', '[\"e$k:$s:$_\"]', key => 'e:$k', debounce => '0');\n"
	} 1 .. 25)
} 1 .. 20;
ok(sessions(@debounces), 'e: twenty sessions debounce fifty keys');
wait_until($node, 'postgres',
	"SELECT count(*) FROM retries.calls WHERE key LIKE 'e:%' AND state <> 'succeeded'",
	'0', 'e: every debounced call ran');
is( $node->safe_psql(
		'postgres', q{
SELECT count(*) FILTER (WHERE n > 1) FROM (
	SELECT call, count(*) AS n FROM ran WHERE arg LIKE 'e%' GROUP BY call) s}),
	'0', 'e: no call ran twice');
# the last arguments of each key ran: the holder of each key ran with the
# arguments it had when it ran, which are those of a call no later one moved
is( $node->safe_psql(
		'postgres', q{
SELECT count(*) FROM retries.calls c
 WHERE c.key LIKE 'e:%'
   AND NOT EXISTS (SELECT FROM ran r WHERE r.call = c.id AND r.arg = c.args->>0)}),
	'0', 'e: each call ran with the arguments it shows');

###########################################################################
# f. the rows of names, pruned, and an emit of a name's first use
###########################################################################
# (the check of its row in the transaction that makes it: the workers
# prune empty rows every 10 s, once between the call and a check after it)
my ($f1, $row1) = split /\n/, $node->safe_psql('postgres',
	"BEGIN; SELECT retries.call('note(text)', '[\"f1\"]', on_event => 'aged:1');"
	  . " SELECT string_agg(event || '=' || (emitted_at IS NOT NULL), ',')"
	  . " FROM retries.event_data WHERE event = 'aged:1'; COMMIT;");
is($row1, 'aged:1=false', 'f: a call waiting for an event not emitted made its row, empty');
my $f2 = $node->safe_psql('postgres',
	"SELECT retries.call('note(text)', '[\"f2\"]', on_event => 'aged:2')");
$node->safe_psql('postgres',
	"SELECT retries.call('note(text)', '[\"fk\"]', key => 'aged:key', debounce => '1 hour')");
$node->safe_psql('postgres', q{
SELECT retries.emit('aged:none');
UPDATE retries.name_lock SET made_at = now() - interval '2 hours';
DELETE FROM retries.event_data WHERE event = 'aged:2';
});
# the workers prune every 10 s
wait_until($node, 'postgres',
	"SELECT count(*) FROM retries.name_lock WHERE name_hash = md5('aged:key')::uuid", '0',
	'f: the workers prune the row of a debounced key made over an hour ago', 60);
wait_until($node, 'postgres',
	"SELECT count(*) FROM retries.event_data WHERE event = 'aged:1'", '0',
	'f: and the empty row of an event that a call waits for', 60);
is($node->safe_psql('postgres',
		"SELECT count(*) FROM retries.event_data WHERE event = 'aged:none'"),
	'1', 'f: not the row of an event emitted (kept for retries.retention)');
is($node->safe_psql('postgres', "SELECT retries.emit('aged:1', '1')"),
	'1', 'f: an emit of it releases the call');
is($node->safe_psql('postgres', "SELECT retries.emit('aged:2', '2')"),
	'1', 'f: an emit of an event whose row is missing makes it and releases the call');
call_reaches($node, 'postgres', $f1, 'succeeded', 'f: the first call runs');
call_reaches($node, 'postgres', $f2, 'succeeded', 'f: the second call runs');
is($node->safe_psql('postgres',
		"SELECT string_agg(arg || '=' || event::text, ',' ORDER BY arg) FROM ran"
		  . " WHERE call IN ($f1, $f2)"),
	'f1=1,f2=2', 'f: each with its payload');

no_crash($node, $log_offset, 'd, e, f: no crash');

$node->stop;
done_testing();
