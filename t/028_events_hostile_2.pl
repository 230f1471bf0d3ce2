# Second hostile review of 1.6's events, windows and debounce (a helper's):
# attacks on the first review's fixes (t/027) and what it did not cover.
#
# mallory is the attacker, alice the victim; both ordinary LOGIN roles.
# Checks marked FINDING failed on the code reviewed and pass with the
# fixes; the rest are attacks that held, kept as regression guards.
#
#   a. has_privs_of_role games (held): alice is a member of mallory
#      (a superuser granted it; mallory cannot grant her own role herself
#      on this PostgreSQL: "must have admin option"); mallory's SECURITY
#      DEFINER trigger still reads no payload of alice's;
#   b. buckets (held): alice's open transaction holding every bucket of
#      her event and key locks makes no emit, on_event call or debounce of
#      mallory's wait (it stays open, at a gate, until hers are done);
#   c. emit from inside calls (held): alice's called function releases her
#      other calls; mallory's called function emitting alice's event name
#      releases nothing; a procedure's emit in its runner releases;
#   d. FINDING 1: emit in a prepared transaction: nothing is released
#      before COMMIT PREPARED (held), but the wake-up was dropped at
#      PREPARE, so the released call waited for a worker's idle timeout
#      (up to 10 s) instead of milliseconds (now COMMIT PREPARED wakes
#      them: checked with the workers just gone to sleep, so that a
#      missing wake-up costs most of the 10 s); ROLLBACK PREPARED releases
#      nothing (held); an emit rolled back to a savepoint releases and
#      records nothing (held);
#   e. scale (held): one emit releases 100,000 calls in one statement, in
#      less than twice the time making them took;
#      100,000 timeouts released with the workers terminated midway: each
#      released once, counters consistent; concurrent emits of one event
#      from three sessions while calls wait on it: none lost;
#   f. lifecycle (held): retries.enabled off with timeouts and emits, then
#      on; DROP EXTENSION CASCADE with waiting calls and CREATE EXTENSION
#      again, then events in the same sessions; debounce of a procedure's
#      call (its debounce passing on the extension's clock);
#   g. dump/restore: pg_dump -Fc / pg_restore keeps waiting calls,
#      timeouts, events and key_gen (held); FINDING 2: in a restore in
#      several runs (which t/009 f supports with roles acting in between),
#      one emit of mallory's own event, or one call with a key of hers
#      that the dump has, made the load of event_data (call_data) fail
#      whole: every role's events (calls) were lost (now a COPY into
#      event_data, which keeps one row per event from 1.7, sets the rows
#      there aside and merges them back after, each event's latest emit
#      winning; and a new key's call made between the runs is numbered
#      out of the dump's way);
#   h. no crash in the log.

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

my $DB = 'postgres';
my $node = retries_node('events_hostile_2');
$node->append_conf('postgresql.conf', q{
retries.max_attempt_time = '10s'
max_prepared_transactions = 5
});
$node->start;
my $log_offset = 0;

$node->safe_psql($DB, q{
CREATE EXTENSION retries;
CREATE ROLE alice LOGIN;
CREATE ROLE mallory LOGIN;
GRANT CREATE ON SCHEMA public TO alice, mallory;
CREATE TABLE log (cur text, call bigint, ev jsonb, note text,
				  at timestamptz DEFAULT clock_timestamp());
GRANT ALL ON log TO PUBLIC;
CREATE FUNCTION f(x text) RETURNS jsonb LANGUAGE sql AS $$
	INSERT INTO log (cur, call, ev, note)
	VALUES (current_user, retries.current_call(), retries.event(), x);
	SELECT retries.event();
$$;
CREATE FUNCTION g(x int) RETURNS int LANGUAGE sql AS $$ SELECT x $$;
CREATE FUNCTION em(e text) RETURNS bigint LANGUAGE sql AS $$
	SELECT retries.emit(e, '{"from": "em"}') $$;
CREATE PROCEDURE pr(x text) LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO log (cur, note) VALUES (current_user, 'pr:' || x);
	COMMIT;
	PERFORM retries.emit('from-proc:' || x, '{"p": 1}');
	COMMIT;
END $$;
SELECT retries.annotate('f(text)', '3 10ms');
SELECT retries.annotate('g(int)', '3 10ms');
SELECT retries.annotate('em(text)', '3 10ms');
SELECT retries.annotate('pr(text)', '2 10ms');
});

# sql, try, done: as_role, try_as and call_reaches (RetriesTest) on this
# node and database
sub sql { return as_role($node, $DB, @_); }
sub try { return try_as($node, $DB, @_); }
sub done { return call_reaches($node, $DB, @_); }

# bg(ROLE, SQL, [DB]): SQL run as ROLE in the background; the harness
sub bg
{
	my ($role, $sql, $db) = @_;
	my ($o, $e) = ('', '');
	my $in = "SET ROLE $role;\n$sql\n";
	return IPC::Run::start(
		[ 'psql', '-XAtq', '-v', 'ON_ERROR_STOP=1', '-d', $node->connstr($db // $DB) ],
		'<', \$in, '>', \$o, '2>', \$e);
}

###########################################################################
# a. has_privs_of_role and role membership games
###########################################################################

# mallory's own session (session_user = mallory) may not grant her role
# (must have admin option), so a superuser does: alice is a member of mallory
$node->safe_psql($DB, q{
CREATE TABLE mallory_inbox (x text);
ALTER TABLE mallory_inbox OWNER TO mallory;
GRANT INSERT ON mallory_inbox TO alice;
CREATE TABLE mallory_loot (cur text, ev jsonb);
ALTER TABLE mallory_loot OWNER TO mallory;
CREATE FUNCTION post(x text) RETURNS void LANGUAGE sql AS $$ INSERT INTO mallory_inbox VALUES (x) $$;
SELECT retries.annotate('post(text)', '1 10ms');
});
my ($ret, $out, $err) = $node->psql($DB, q{GRANT mallory TO alice},
	connstr => $node->connstr($DB) . ' user=mallory');
isnt($ret, 0, 'a: mallory cannot grant her own role to alice');
$node->safe_psql($DB, q{GRANT mallory TO alice});
($ret, $out, $err) = $node->psql($DB, q{
CREATE FUNCTION mallory_trg() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER
SET search_path = public, pg_catalog AS $$
BEGIN
	INSERT INTO mallory_loot VALUES (current_user, retries.event());
	RETURN NEW;
END $$;
CREATE TRIGGER t BEFORE INSERT ON mallory_inbox FOR EACH ROW EXECUTE FUNCTION mallory_trg();
}, connstr => $node->connstr($DB) . ' user=mallory');
is($ret, 0, 'a: mallory makes her SECURITY DEFINER trigger') or diag($err);
my $post = sql('alice', q{SELECT retries.call('post(text)', '["hi"]', on_event => 'card:a')});
sql('alice', q{SELECT retries.emit('card:a', '{"card": "4111"}')});
done($post, 'succeeded', 'a: alice\'s call writes to mallory\'s table');
is($node->safe_psql($DB, q{SELECT count(*) || ' ' || count(ev) FROM mallory_loot}),
	'1 0', 'a: mallory\'s SECURITY DEFINER trigger reads no payload though alice is a member of mallory');
$node->safe_psql($DB, 'REVOKE mallory FROM alice');

###########################################################################
# b. buckets: alice's locks never make mallory wait
###########################################################################

{
	# alice's transaction stays open, holding her locks, at gate 1 until
	# mallory is done
	my $gate = close_gate($node, $DB, 1);
	my ($in, $o, $e) = ('', '', '');
	my $h = IPC::Run::start(
		[ 'psql', '-XAtq', '-v', 'ON_ERROR_STOP=1', '-d', $node->connstr($DB) ],
		'<', \$in, '>', \$o, '2>', \$e);
	$in .= q{SET ROLE alice; BEGIN;
SELECT count(retries.emit('hold:' || i)) FROM generate_series(1, 200) i;
SELECT count(retries.call('g(int)', '[1]', key => 'hk:' || i, debounce => '1 day'))
  FROM generate_series(1, 200) i;
SELECT count(retries.call('g(int)', '[1]', on_event => 'hw:' || i)) FROM generate_series(1, 200) i;
SELECT } . gate_sql(1) . q{; ROLLBACK;
};
	# alice holds her locks once the three counts are out
	$h->pump while $o !~ /\n.*\n.*\n/s && $h->pumpable;
	is($o, "200\n200\n200\n", 'b: alice\'s open transaction holds her event and key locks') or diag($e);
	# a wait of mallory's on alice's locks, which stay held, would end in an
	# error at her lock_timeout
	($out, $err) = try('mallory', q{SET lock_timeout = '2s';
SELECT count(retries.emit('hold:' || i)) FROM generate_series(1, 200) i;
SELECT count(retries.call('g(int)', '[1]', key => 'hk:' || i, debounce => '1 day',
						  run_at => now() + interval '1 day')) FROM generate_series(1, 200) i;
SELECT count(retries.call('g(int)', '[1]', on_event => 'hw:' || i, run_at => now() + interval '1 day'))
  FROM generate_series(1, 200) i;});
	is($out, "200\n200\n200", 'b: mallory\'s emits, debounces and on_event calls of the same names never wait on alice\'s')
	  or diag($err);
	is($node->safe_psql($DB, gate_waiters(1)), '1',
		'b: ... and take no lock_timeout: alice\'s transaction was open all along');
	open_gate($gate);
	$h->finish;
}
$node->safe_psql($DB, q{DELETE FROM retries.call_data WHERE scheduled_by = 'mallory'::regrole});

###########################################################################
# c. emit from inside calls
###########################################################################

my $w1 = sql('alice', q{SELECT retries.call('f(text)', '["w1"]', on_event => 'inner')});
sql('alice', q{SELECT retries.call('em(text)', '["inner"]')});
done($w1, 'succeeded', 'c: a call of alice\'s that emits releases her waiting call');
is(sql('alice', "SELECT result FROM retries.calls WHERE id = $w1"), '{"from": "em"}',
	'c: ... which reads the payload');
my $w2 = sql('alice', q{SELECT retries.call('f(text)', '["w2"]', on_event => 'inner2')});
my $m = sql('mallory', q{SELECT retries.call('em(text)', '["inner2"]')});
done($m, 'succeeded', 'c: mallory\'s call that emits alice\'s event name runs');
is($node->safe_psql($DB, "SELECT state || ' ' || event_wait FROM retries.call_data WHERE id = $w2"),
	'scheduled true', 'c: ... and releases nothing of alice\'s');
my $wp = sql('alice', q{SELECT retries.call('f(text)', '["wp"]', on_event => 'from-proc:z')});
sql('alice', q{SELECT retries.call('pr(text)', '["z"]')});
done($wp, 'succeeded', 'c: a procedure\'s emit in its runner releases the role\'s call');
is(sql('alice', "SELECT result FROM retries.calls WHERE id = $wp"), '{"p": 1}',
	'c: ... with its payload');

###########################################################################
# d. prepared transactions and savepoints
###########################################################################

my $pw = sql('alice', q{SELECT retries.call('f(text)', '["prep"]', on_event => 'prep')});
sql('alice', q{BEGIN; SELECT retries.emit('prep', '{"v": 1}'); PREPARE TRANSACTION 'p1';});
stays_true($node, $DB, "SELECT event_wait FROM retries.call_data WHERE id = $pw", 1,
	'd: an emit prepared, not committed, releases nothing');
# the workers go to sleep afresh: the commit of a call wakes them all, one
# runs it, then all sleep their longest sleep (10 s), nothing else being
# due.  A COMMIT PREPARED that wakes them runs the released call within
# milliseconds (under a second on a machine ten times slower); without
# the wake-up it would wait for the end of that sleep, most of 10 s away
my $nudge = sql('alice', q{SELECT retries.call('g(int)', '[0]')});
done($nudge, 'succeeded', 'd: the workers run a call, then sleep');
$node->safe_psql($DB, q{COMMIT PREPARED 'p1'});
# FINDING 1: failed before its fix: XACT_EVENT_PREPARE dropped the wake-up; the call ran
# at the workers' next idle wake-up, up to 10 s later
done($pw, 'succeeded',
	'd: FINDING 1 the call released by COMMIT PREPARED runs within 5 s, not at the workers\' wake-up', 5);
done($pw, 'succeeded', 'd: ... (it does run, later)');
my $pr = sql('alice', q{SELECT retries.call('f(text)', '["prep-rb"]', on_event => 'prep-rb')});
sql('alice', q{BEGIN; SELECT retries.emit('prep-rb'); PREPARE TRANSACTION 'p2';});
$node->safe_psql($DB, q{ROLLBACK PREPARED 'p2'});
is($node->safe_psql($DB, "SELECT event_wait::text || (SELECT count(*) FROM retries.event_data WHERE event = 'prep-rb' AND emitted_at IS NOT NULL)"
		  . " FROM retries.call_data WHERE id = $pr"),
	'true0', 'd: ROLLBACK PREPARED releases and records nothing');
my $sp = sql('alice', q{SELECT retries.call('f(text)', '["sp"]', on_event => 'sp')});
sql('alice', q{BEGIN; SAVEPOINT a; SELECT retries.emit('sp'); ROLLBACK TO a; COMMIT;});
stays_true($node, $DB,
	"SELECT event_wait AND (SELECT count(*) = 0 FROM retries.event_data WHERE event = 'sp' AND emitted_at IS NOT NULL)"
	  . " FROM retries.call_data WHERE id = $sp", 1,
	'd: an emit rolled back to a savepoint releases and records nothing');

###########################################################################
# e. scale
###########################################################################

# the time of the emit is compared with the time of making the calls,
# measured in the same run, so that it holds whatever the machine's speed
# and load: making each call wrote its row, as the emit must, and did much
# more (the emit takes about half as long; twice as long leaves room for
# the load to change between the two, and still fails an emit that is
# several times slower than it should be)
my $t0 = time();
sql('alice', q{SELECT count(retries.call('g(int)', jsonb_build_array(i), on_event => 'big',
	run_at => now() + interval '1 day')) FROM generate_series(1, 100000) i});
my $making = time() - $t0;
$t0 = time();
is(sql('alice', q{SELECT retries.emit('big')}), '100000', 'e: one emit releases 100,000 calls');
my $emitting = time() - $t0;
note("emit: $emitting s, making the calls: $making s");
ok($emitting < 2 * $making, 'e: ... in less than twice the time making them took')
  or diag("emit: $emitting s, making the calls: $making s");
$node->safe_psql($DB, q{DELETE FROM retries.call_data WHERE on_event = 'big'});

sql('alice', q{SELECT count(retries.call('g(int)', jsonb_build_array(i), on_event => 'kill-to',
	event_timeout => '1 s', run_at => now() + interval '1 day')) FROM generate_series(1, 100000) i});
# the workers terminated three times once they have begun to release the
# timeouts (in transactions of 1,000)
wait_until($node, $DB,
	q{SELECT bool_or(event_wait IS NULL) FROM retries.call_data WHERE on_event = 'kill-to'},
	't', 'e: the workers release the timeouts');
for (1 .. 3)
{
	$node->safe_psql($DB, q{SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE backend_type = 'retries worker'});
	usleep(200_000);    # not a wait: a random moment for the next termination
}
wait_until($node, $DB,
	q{SELECT count(*) FILTER (WHERE event_wait IS NULL AND NOT held AND waiting_on = 0)
	  FROM retries.call_data WHERE on_event = 'kill-to'},
	'100000', 'e: 100,000 timeouts released with the workers terminated midway, each once');
$node->safe_psql($DB, q{DELETE FROM retries.call_data WHERE on_event = 'kill-to'});

{
	my $N = 300;
	my @h = (
		bg('alice', "SELECT format('SELECT retries.call(''g(int)'', ''[%s]'', on_event => ''same'')', i)"
			  . " FROM generate_series(1, $N) i \\gexec"),
		map { bg('alice', "SELECT format('SELECT retries.emit(''same'', ''[%s]'')', i)"
			  . " FROM generate_series(1, $N) i \\gexec") } 1 .. 3);
	$_->finish for @h;
	sql('alice', q{SELECT retries.emit('same')});
	wait_until($node, $DB,
		q{SELECT count(*) FILTER (WHERE state = 'succeeded') || ' ' || count(*) FILTER (WHERE event_wait)
		  FROM retries.call_data WHERE on_event = 'same'},
		"$N 0", 'e: concurrent emits of one event from three sessions: no call lost');
}

###########################################################################
# f. lifecycle
###########################################################################

$node->safe_psql($DB, q{ALTER SYSTEM SET retries.enabled = off; SELECT pg_reload_conf()});
wait_until($node, $DB,
	"SELECT count(*) FILTER (WHERE state = 'paused') FROM retries.workers WHERE database = '$DB'",
	'2', 'f: retries.enabled off: the workers pause');
my $o1 = sql('alice', q{SELECT retries.call('f(text)', '["off1"]', on_event => 'off1', event_timeout => '1 s')});
my $o2 = sql('alice', q{SELECT retries.call('f(text)', '["off2"]', on_event => 'off2')});
sql('alice', q{SELECT retries.emit('off2')});
stays_true($node, $DB,
	"SELECT bool_and(state = 'scheduled') FROM retries.call_data WHERE id IN ($o1, $o2)", 2,
	'f: retries.enabled off: nothing runs');
$node->safe_psql($DB, q{ALTER SYSTEM SET retries.enabled = on; SELECT pg_reload_conf()});
done($o1, 'succeeded', 'f: ... on again: the call past its timeout runs');
done($o2, 'succeeded', 'f: ... and the call released by its event');

sql('alice', q{SELECT retries.call('f(text)', '["d1"]', on_event => 'dr1', event_timeout => '2 s');
SELECT retries.emit('warm')});
$node->safe_psql($DB, q{DROP EXTENSION retries CASCADE});
wait_until($node, 'postgres', workers_query($DB), '0',
	'f: DROP EXTENSION CASCADE with a waiting call: the workers leave');
$node->safe_psql($DB, q{CREATE EXTENSION retries;
SELECT retries.annotate('f(text)', '3 10ms'); SELECT retries.annotate('pr(text)', '2 10ms');
SELECT retries.annotate('g(int)', '3 10ms');});
my $d2 = sql('alice', q{SELECT retries.call('f(text)', '["d2"]', on_event => 'dr2', event_timeout => '1 s')});
my $d3 = sql('alice', q{SELECT retries.call('f(text)', '["d3"]', on_event => 'dr3');
SELECT retries.emit('dr3', '{"x": 3}')});
$d3 =~ s/\n.*//s;
done($d2, 'succeeded', 'f: after DROP / CREATE EXTENSION a timeout is released');
done($d3, 'succeeded', 'f: ... and an emit releases');

my $pd = sql('alice', q{SELECT retries.call('pr(text)', '["v1"]', key => 'pd', debounce => '1 h')});
is(sql('alice', q{SELECT retries.call('pr(text)', '["v2"]', key => 'pd', debounce => '1 h')}),
	$pd, 'f: a procedure\'s call is debounced');
# the hour passes on the extension's clock
$node->safe_psql($DB,
	q{ALTER SYSTEM SET retries.debug_clock_offset = '2h'; SELECT pg_reload_conf()});
done($pd, 'succeeded', 'f: ... and runs');
$node->safe_psql($DB,
	q{ALTER SYSTEM RESET retries.debug_clock_offset; SELECT pg_reload_conf()});
is($node->safe_psql($DB, q{SELECT string_agg(note, ',') FROM log WHERE note LIKE 'pr:v%'}),
	'pr:v2', 'f: ... once, with the last arguments');

###########################################################################
# g. dump / restore
###########################################################################

$node->safe_psql($DB, q{CREATE DATABASE src});
$node->safe_psql('src', q{
CREATE EXTENSION retries;
GRANT CREATE ON SCHEMA public TO alice, mallory;
CREATE FUNCTION f(x text) RETURNS jsonb LANGUAGE sql AS $$ SELECT retries.event() $$;
SELECT retries.annotate('f(text)', '3 10ms');
SET ROLE alice;
SELECT retries.call('f(text)', '["w"]', on_event => 'dw', key => 'dk');
SELECT retries.call('f(text)', '["t"]', on_event => 'dt', event_timeout => '1 day');
SELECT retries.emit('alice-ev', '{"e": 1}');
RESET ROLE;
UPDATE retries.call_data SET created_at = created_at - interval '2 h' WHERE key = 'dk';
SET ROLE alice;
SELECT retries.call('f(text)', '["w2"]', on_event => 'dw', key => 'dk', key_window => '1 h');
SET ROLE mallory;
SELECT retries.emit('m-ev');
SELECT retries.call('f(text)', '["m"]', key => 'mk', run_at => now() + interval '1 day');
});
my $tmp = PostgreSQL::Test::Utils::tempdir;
command_ok([ 'pg_dump', '-Fc', '-f', "$tmp/src.dump", '-d', $node->connstr('src') ], 'g: pg_dump -Fc');
$node->safe_psql($DB, q{CREATE DATABASE dst TEMPLATE template0});
command_ok([ 'pg_restore', '--exit-on-error', '-d', $node->connstr('dst'), "$tmp/src.dump" ],
	'g: pg_restore');
is($node->safe_psql('dst', q{SELECT string_agg(coalesce(key, '-') || ':' || key_gen || ':' || on_event
	|| ':' || event_wait || ':' || (event_deadline IS NOT NULL), ',' ORDER BY id)
	FROM retries.call_data WHERE scheduled_by = 'alice'::regrole}),
	'dk:0:dw:true:false,-:0:dt:true:true,dk:1:dw:true:false',
	'g: waiting calls, timeouts and key_gen restored');
is($node->safe_psql('dst', q{SELECT string_agg(event, ',' ORDER BY event) FROM retries.event_data}),
	'alice-ev,m-ev', 'g: events restored');
is($node->safe_psql('dst', q{SET ROLE alice;
SELECT retries.call('f(text)', '["w3"]', on_event => 'dw', key => 'dk', key_window => '1 h')
  = (SELECT max(id) FROM retries.calls WHERE key = 'dk');
SELECT retries.emit('dw', '{"w": 1}');}), "t\n2", 'g: the key dedupes and an emit releases both waiting calls');
my $ae = $node->safe_psql('dst', q{SET ROLE alice;
SELECT retries.call('f(text)', '["ae"]', on_event => 'alice-ev')});
wait_until($node, 'dst', "SELECT state::text || result::text FROM retries.call_data WHERE id = $ae",
	'succeeded{"e": 1}', 'g: a call on an event emitted before the dump does not wait');

# a restore in several runs, mallory acting in between (t/009 f)
for my $case ([ 'ev', q{SELECT retries.emit('m-ev')}, 'event_data',
				q{SELECT count(*) FROM retries.event_data WHERE role = 'alice'::regrole}, '1' ],
			  [ 'calls', q{CREATE FUNCTION mg(int) RETURNS int LANGUAGE sql AS 'SELECT 1';
SELECT retries.annotate('mg(int)', '1 1s');
SELECT retries.call('mg(int)', '[1]', key => 'mk', run_at => now() + interval '1 day')},
				'call_data', q{SELECT count(*) FROM retries.call_data WHERE scheduled_by = 'alice'::regrole}, '3' ])
{
	my ($name, $attack, $table, $check, $want) = @$case;
	$node->safe_psql($DB, "CREATE DATABASE split_$name TEMPLATE template0");
	command_ok([ 'pg_restore', '--section=pre-data', '-d', $node->connstr("split_$name"), "$tmp/src.dump" ],
		"g: pg_restore --section=pre-data ($name)");
	$node->safe_psql("split_$name", qq{GRANT CREATE ON SCHEMA public TO mallory;
SET ROLE mallory; $attack});
	my ($stdout, $stderr) = ('', '');
	IPC::Run::run([ 'pg_restore', '--section=data', '--section=post-data', '-d',
			$node->connstr("split_$name"), "$tmp/src.dump" ],
		'>', \$stdout, '2>', \$stderr);
	# FINDING 2: failed before its fix: "duplicate key value violates unique constraint"
	unlike($stderr, qr/COPY failed for table "$table"/,
		"g: FINDING 2 mallory's own $name between the runs does not make $table fail to load")
	  or diag($stderr);
	is($node->safe_psql("split_$name", $check), $want,
		"g: FINDING 2 ... alice's rows of $table are restored");
}
my $dumped = $node->safe_psql('src',
	"SELECT emitted_at FROM retries.event_data WHERE role = 'mallory'::regrole AND event = 'm-ev'");
is($node->safe_psql('split_ev', qq{SELECT count(*) || ' ' || bool_and(emitted_at > '$dumped')
  FROM retries.event_data WHERE role = 'mallory'::regrole AND event = 'm-ev'}),
	'1 true', 'g: mallory\'s event emitted between the runs and in the dump is kept once, her latest emit');
is($node->safe_psql('split_ev', q{SELECT count(*) FROM retries.event_data_load}),
	'0', 'g: ... and no row is left set aside');

###########################################################################
# h. no crash
###########################################################################

no_crash($node, $log_offset, 'h: no crash');

$node->stop;
done_testing();
