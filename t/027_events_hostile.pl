# Hostile review of 1.6: keys with windows, debounce and events
# (retries.call's key_window, debounce, on_event, event_timeout;
# retries.emit, retries.event), by a reviewer who did not write the code.
#
# mallory is the attacker, alice the victim; both ordinary LOGIN roles.
# Sections marked FINDING failed on the code reviewed (1.6 as first
# written) and pass with the fixes; the rest are attacks that held, kept
# as regression guards.
#
#   a. FINDING 1: retries.event() gives the payload of the call's role to
#      code of another role that runs inside the attempt (a SECURITY
#      DEFINER trigger of mallory's on a table alice's call writes to; an
#      annotated SECURITY DEFINER function of mallory's); alice's own code,
#      SECURITY DEFINER or not, still reads it;
#   b. per role (held): mallory's emit of alice's event name releases
#      nothing, her call with that name does not see alice's emit, she
#      reads no event_data, sees none of alice's waiting calls, cannot
#      cancel, retry_now or reschedule them, and her key / debounce of the
#      same key name makes and moves her own calls only; pg_locks shows
#      nothing of the names' locks (row locks of name_lock and event_data,
#      which she cannot read);
#   c. odd input (held): event_timeout 0, '-1 mon 31 days', over 3650 days,
#      negative; empty and NULL names; run_at infinity; event names over
#      1 kB refused, a 3 MB key accepted;
#   d. races (held): emits and calls of the same events from two sessions
#      at once lose no call; debounces while the workers claim lose no
#      last edit and run nothing twice;
#   e. FINDING 2: one lock per event name / debounced key per transaction:
#      20,000 calls with distinct on_event (or debounced keys) in one
#      transaction fail with "out of shared memory" (and while such a
#      transaction is open, other roles' sessions fail too);
#   f. FINDING 3: debounce rewrites the arguments of the key's call of
#      another function (keys span a role's functions), including a
#      command's text (which skips run_command's syntax check);
#   g. FINDING 4: emit's payload is not bounded by retries.max_args_size;
#   h. lifecycle (held): cancel of a waiting call, pause + event, a
#      procedure (runner) with on_event, a chain + event, timeout;
#   i. no crash in the log.

use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RetriesTest;
use Test::More;

my $DB = 'postgres';
my $node = retries_node('events_hostile');
$node->append_conf('postgresql.conf', q{
retries.max_attempt_time = '10s'
});
$node->start;
my $log_offset = 0;

$node->safe_psql($DB, q{
CREATE EXTENSION retries;
CREATE ROLE alice LOGIN;
CREATE ROLE mallory LOGIN;
GRANT CREATE ON SCHEMA public TO alice, mallory;
CREATE TABLE log (who text, cur text, call bigint, ev jsonb, note text);
GRANT ALL ON log TO PUBLIC;
-- what the call sees of its event, as whom
CREATE FUNCTION f(x text) RETURNS jsonb LANGUAGE sql AS $$
	INSERT INTO log (who, cur, call, ev, note)
	VALUES (session_user, current_user, retries.current_call(), retries.event(), x);
	SELECT retries.event();
$$;
CREATE FUNCTION g(x int) RETURNS int LANGUAGE sql AS $$
	INSERT INTO log (cur, note) VALUES (current_user, 'g:' || x); SELECT x $$;
CREATE PROCEDURE pr(x text) LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO log (cur, ev, note) VALUES (current_user, retries.event(), 'pr:' || x);
	COMMIT;
	INSERT INTO log (cur, ev, note) VALUES (current_user, retries.event(), 'pr2:' || x);
END $$;
SELECT retries.annotate('f(text)', '3 10ms');
SELECT retries.annotate('g(int)', '3 10ms');
SELECT retries.annotate('pr(text)', '2 10ms');
GRANT EXECUTE ON PROCEDURE retries.command(text) TO alice;
});

# sql, try, done: as_role, try_as and call_reaches (RetriesTest) on this
# node and database
sub sql { return as_role($node, $DB, @_); }
sub try { return try_as($node, $DB, @_); }
sub done { return call_reaches($node, $DB, @_); }

###########################################################################
# a. FINDING 1: retries.event() and code of another role inside the attempt
###########################################################################

sql('mallory', q{
CREATE TABLE mallory_loot (cur text, call bigint, ev jsonb);
CREATE TABLE mallory_inbox (x text);
GRANT INSERT ON mallory_inbox TO alice;
CREATE FUNCTION mallory_trg() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER
SET search_path = public, pg_catalog AS $$
BEGIN
	INSERT INTO mallory_loot VALUES (current_user, retries.current_call(), retries.event());
	RETURN NEW;
END $$;
CREATE TRIGGER t BEFORE INSERT ON mallory_inbox FOR EACH ROW EXECUTE FUNCTION mallory_trg();
-- an annotated function of hers, SECURITY DEFINER, that alice may call
CREATE FUNCTION mallory_service(x text) RETURNS void LANGUAGE plpgsql SECURITY DEFINER
SET search_path = public, pg_catalog AS $$
BEGIN
	INSERT INTO mallory_loot VALUES (current_user, retries.current_call(), retries.event());
END $$;
SELECT retries.annotate('mallory_service(text)', '1 10ms');
});
$node->safe_psql($DB, q{
CREATE FUNCTION post(x text) RETURNS void LANGUAGE sql AS $$ INSERT INTO mallory_inbox VALUES (x) $$;
SELECT retries.annotate('post(text)', '1 10ms');
});
sql('alice', q{
CREATE FUNCTION alice_definer() RETURNS jsonb LANGUAGE sql SECURITY DEFINER
SET search_path = pg_catalog AS $$ SELECT retries.event() $$;
CREATE FUNCTION alice_fn(x text) RETURNS jsonb LANGUAGE sql AS $$ SELECT public.alice_definer() $$;
SELECT 1;
});
$node->safe_psql($DB, "SELECT retries.annotate('alice_fn(text)', '1 10ms')");

my $post = sql('alice', q{
SELECT retries.call('post(text)', '["hi"]', on_event => 'card:1')});
my $svc = sql('alice', q{
SELECT retries.call('mallory_service(text)', '["hi"]', on_event => 'card:1')});
my $own = sql('alice', q{
SELECT retries.call('alice_fn(text)', '["x"]', on_event => 'card:1')});
is(sql('alice', q{SELECT retries.emit('card:1', '{"card": "4111-1111-1111-1111"}')}),
	'3', 'a: alice\'s emit releases her three calls');
done($post, 'succeeded', 'a: the call that writes to mallory\'s table runs');
done($svc, 'succeeded', 'a: the call of mallory\'s SECURITY DEFINER function runs');
done($own, 'succeeded', 'a: the call of alice\'s own function runs');
is(sql('alice', "SELECT result FROM retries.calls WHERE id = $own"),
	'{"card": "4111-1111-1111-1111"}',
	'a: alice\'s own SECURITY DEFINER code reads her payload');
# finding 1: failed before its fix: mallory's trigger reads alice's payload
is(sql('mallory', "SELECT count(*) FROM mallory_loot WHERE call = $post AND ev IS NOT NULL"),
	'0', 'a: FINDING 1 a SECURITY DEFINER trigger of mallory\'s reads no payload of alice\'s');
# finding 1: failed before its fix: so does mallory's annotated SECURITY DEFINER function
is(sql('mallory', "SELECT count(*) FROM mallory_loot WHERE call = $svc AND ev IS NOT NULL"),
	'0', 'a: FINDING 1 an annotated SECURITY DEFINER function of mallory\'s reads no payload of alice\'s');

###########################################################################
# b. per role
###########################################################################

my $wait = sql('alice', q{
SELECT retries.call('f(text)', '["wait"]', on_event => 'paid:7', key => 'order:7')});
is(sql('mallory', q{SELECT retries.emit('paid:7', '{"from": "mallory"}')}),
	'0', 'b: mallory\'s emit of alice\'s event name releases nothing');
is($node->safe_psql($DB, "SELECT event_wait AND held FROM retries.call_data WHERE id = $wait"),
	't', 'b: ... alice\'s call still waits');
my $mwait = sql('mallory', q{
SELECT retries.call('f(text)', '["m"]', on_event => 'card:1', run_at => now() + interval '1 day')});
is($node->safe_psql($DB, "SELECT event_wait FROM retries.call_data WHERE id = $mwait"),
	't', 'b: mallory\'s call on alice\'s emitted event name waits (alice\'s event is not hers)');
my ($out, $err) = try('mallory', 'SELECT count(*) FROM retries.event_data');
like($err, qr/42501/, 'b: mallory cannot read event_data');
is(sql('mallory', "SELECT count(*) FROM retries.calls WHERE id = $wait OR waiting_for_event = 'paid:7'"),
	'0', 'b: mallory sees none of alice\'s waiting calls');
for my $fn ('cancel', 'retry_now')
{
	($out, $err) = try('mallory', "SELECT retries.$fn($wait)");
	like($err, qr/42704/, "b: mallory's $fn of alice's waiting call is 42704");
}
($out, $err) = try('mallory', "SELECT retries.reschedule($wait, now())");
like($err, qr/42704/, 'b: mallory\'s reschedule of alice\'s waiting call is 42704');
my $mkey = sql('mallory', q{
SELECT retries.call('f(text)', '["m2"]', key => 'order:7', debounce => '1 hour',
					key_window => '1 hour')});
isnt($mkey, $wait, 'b: mallory\'s debounce of alice\'s key name makes her own call');
is($node->safe_psql($DB, "SELECT args::text || ' ' || key_gen FROM retries.call_data WHERE id = $wait"),
	'["wait"] 0', 'b: ... alice\'s call keeps its arguments and key_gen');
# the private locks: a transaction of alice's that emits, left open: it
# waits at gate 1 until the test has looked
{
	# the names used once before, so that their rows are there to see
	sql('alice', q{SELECT retries.emit('secret-event-name');
SELECT retries.call('f(text)', '["k"]', key => 'secret-key', debounce => '1 hour')});
	my $gate = close_gate($node, $DB, 1);
	my ($in, $o, $e) = ('', '', '');
	my $h = IPC::Run::start(
		[ 'psql', '-XAtq', '-v', 'ON_ERROR_STOP=1', '-d', $node->connstr($DB) ],
		'<', \$in, '>', \$o, '2>', \$e);
	$in .= "SET ROLE alice; BEGIN; SELECT retries.emit('secret-event-name');\n"
	  . "SELECT retries.call('f(text)', '[\"k\"]', key => 'secret-key', debounce => '1 hour');\n"
	  . "SELECT " . gate_sql(1) . "; COMMIT;\n";
	$h->pump while $o !~ /\n.*\n/s && $h->pumpable;
	# the names' locks are row locks (1.7): no advisory lock (1.6's
	# classes, RETRIES_RUNNER_LOCK_CLASS + 2 and + 3), and their rows are
	# for the extension's owner alone
	is(sql('mallory', q{
SELECT count(*) FROM pg_locks
 WHERE locktype = 'advisory' AND objsubid IN (21078, 21079)}),
		'0', 'b: pg_locks shows no lock of alice\'s names');
	($out, $err) = try('mallory', 'SELECT count(*) FROM retries.name_lock');
	like($err, qr/42501/, 'b: mallory cannot read name_lock');
	($out, $err) = try('mallory', 'SELECT count(*) FROM retries.event_data');
	like($err, qr/42501/, 'b: nor event_data');
	# ... and yet alice holds both: her key's row of name_lock and her
	# event's own row of event_data are locked
	my %rows = (
		key => "SELECT FROM retries.name_lock WHERE role = 'alice'::regrole"
		  . " AND class = 'k' AND name_hash = md5('secret-key')::uuid",
		event => "SELECT FROM retries.event_data WHERE role = 'alice'::regrole"
		  . " AND event = 'secret-event-name'");
	for my $name (sort keys %rows)
	{
		is($node->safe_psql($DB, "SELECT count(*) FROM ($rows{$name}) r"),
			'1', "b: ... one row for her $name");
		(undef, $out, $err) = $node->psql($DB, "\\set VERBOSITY verbose\n"
			  . "$rows{$name} FOR UPDATE NOWAIT");
		like($err, qr/55P03/, "b: ... alice's open transaction holds the row of her $name locked");
	}
	open_gate($gate);
	$h->finish;
}

###########################################################################
# c. odd input
###########################################################################

# an event_timeout is as long as the check counts it, a month 30 days:
# these are zero whatever the date ('-1 mon 31 days' was a day long on the
# first of December, and zero on the last of November, before)
my %to;
for my $t ('0', '-1 mon 30 days', '1 mon -30 days')
{
	$to{$t} = sql('mallory', "SELECT retries.call('f(text)', '[\"to\"]', on_event => 'to:$t',"
		  . " event_timeout => '$t')");
}
for my $t (sort keys %to)
{
	done($to{$t}, 'succeeded', "c: event_timeout '$t' runs the call at once");
	is(sql('mallory', "SELECT result IS NULL FROM retries.calls WHERE id = $to{$t}"),
		't', "c: ... with retries.event() NULL");
}
for my $bad (
	[ q{on_event => 'x', event_timeout => '3651 days'}, '22023' ],
	[ q{on_event => 'x', event_timeout => '-1 s'}, '22023' ],
	[ q{on_event => 'x', event_timeout => '-1 mon 29 days'}, '22023' ],
	[ q{event_timeout => '1 s'}, '22023' ],
	[ q{on_event => ''}, '22023' ],
	[ q{on_event => 'x', run_at => 'infinity'}, '22' ],
	[ q{key => 'k', key_window => '0'}, '22023' ],
	[ q{debounce => '1 s'}, '22023' ])
{
	($out, $err) = try('mallory', "SELECT retries.call('f(text)', '[\"x\"]', $bad->[0])");
	like($err, qr/ERROR:  $bad->[1]/, "c: refused: $bad->[0]");
}
for my $bad ([ q{''}, '22023' ], [ 'NULL', '22004' ])
{
	($out, $err) = try('mallory', "SELECT retries.emit($bad->[0])");
	like($err, qr/ERROR:  $bad->[1]/, "c: emit($bad->[0]) refused");
}
{
	my $day = sql('mallory', "SELECT retries.call('f(text)', '[\"to\"]', on_event => 'to:day',"
		  . " event_timeout => '-1 mon 31 days')");
	is($node->safe_psql($DB, "SELECT event_deadline - now() BETWEEN '23 hours' AND '1 day'"
		  . " FROM retries.call_data WHERE id = $day"),
		't', "c: event_timeout '-1 mon 31 days' is a day, whatever the date");
	sql('mallory', "SELECT retries.cancel($day)");
}
is(sql('mallory', q{SELECT retries.event() IS NULL}), 't', 'c: retries.event() outside a call is NULL');
($out, $err) = try('mallory', q{
SELECT retries.call('f(text)', '["huge"]', on_event => repeat('e', 3000000),
					key => repeat('k', 3000000), event_timeout => '0')});
like($err, qr/ERROR:  22023: on_event is longer than 1024 bytes/,
	'c: a 3 MB event name is refused');
($out, $err) = try('mallory', q{
SELECT retries.call('f(text)', '["huge"]', on_event => repeat('e', 1024),
					key => repeat('k', 3000000), event_timeout => '0')});
like($err, qr/ERROR:  54000: key is 3000000 bytes, more than 16 kB/,
	'c: a 3 MB key is refused');
my $huge = sql('mallory', q{
SELECT retries.call('f(text)', '["huge"]', on_event => repeat('e', 1024),
					key => repeat('k', 16 * 1024), event_timeout => '0')});
done($huge, 'succeeded', 'c: a call with a 1 kB event name and a 16 kB key runs after its timeout');

###########################################################################
# d. races
###########################################################################

# bg(ROLE, SQL): SQL (psql's, \\gexec allowed) run as ROLE in the
# background; the harness
sub bg
{
	my ($role, $sql) = @_;
	my ($o, $e) = ('', '');
	my $in = "SET ROLE $role;\n$sql\n";
	return IPC::Run::start(
		[ 'psql', '-XAtq', '-v', 'ON_ERROR_STOP=1', '-d', $node->connstr($DB) ],
		'<', \$in, '>', \$o, '2>', \$e);
}
my $N = 400;
my @h = (
	bg('alice', "SELECT format('SELECT retries.call(''g(int)'', ''[%s]'', on_event => ''race:%s'')', i, i)"
		  . " FROM generate_series(1, $N) i \\gexec"),
	bg('alice', "SELECT format('SELECT retries.emit(''race:%s'')', i)"
		  . " FROM generate_series(1, $N) i \\gexec"));
$_->finish for @h;
wait_until($node, $DB,
	"SELECT count(*) FILTER (WHERE state = 'succeeded') || ' ' || count(*) FILTER (WHERE event_wait)"
	  . " FROM retries.call_data WHERE on_event LIKE 'race:%'",
	"$N 0", 'd: emits and calls of the same events at once: every call released and run');

@h = (bg('alice', "SELECT format('SELECT retries.call(''g(int)'', ''[%s]'', key => ''deb'', debounce => ''0'')', i)"
		  . " FROM generate_series(100001, 100300) i \\gexec"));
$_->finish for @h;
wait_until($node, $DB,
	"SELECT count(*) FILTER (WHERE state <> 'succeeded') FROM retries.call_data WHERE key = 'deb'",
	'0', 'd: debounces while the workers claim: every call of the key ends');
is($node->safe_psql($DB,
		"SELECT bool_or(note = 'g:100300') AND count(*) = count(DISTINCT note)"
		  . " AND count(*) = (SELECT count(*) FROM retries.call_data WHERE key = 'deb')"
		  . " FROM log WHERE note LIKE 'g:100___'"),
	't', 'd: ... the last edit ran, and each call of the key ran once');

###########################################################################
# e. FINDING 2: one lock per name per transaction
###########################################################################

# finding 2: failed before its fix
($out, $err) = try('mallory', q{BEGIN;
SELECT count(retries.call('f(text)', '["bulk"]', on_event => 'bulk:' || i,
						  run_at => now() + interval '1 day'))
  FROM generate_series(1, 20000) i;
ROLLBACK;});
is($out, '20000', 'e: FINDING 2 20,000 calls with distinct on_event in one transaction')
  or diag($err);
# finding 2: failed before its fix
($out, $err) = try('mallory', q{BEGIN;
SELECT count(retries.call('f(text)', '["bulk"]', key => 'bulk:' || i, debounce => '1 day'))
  FROM generate_series(1, 20000) i;
ROLLBACK;});
is($out, '20000', 'e: FINDING 2 20,000 debounced calls of distinct keys in one transaction')
  or diag($err);

###########################################################################
# f. FINDING 3: debounce and the key's call of another function
###########################################################################

# (from 1.7 a key held by another function's call is refused, 23505,
# debounce or not)
my $gcall = sql('alice', q{
SELECT retries.call('g(int)', '[5]', key => 'mixed', run_at => now() + interval '1 day')});
($out, $err) = try('alice',
	q{SELECT retries.call('f(text)', '["not an int"]', key => 'mixed', debounce => '1 day')});
like($err // '', qr/key "mixed" is held by call $gcall of another function/,
	'f: a debounce through f(text) of the key of a call of g(int) is refused');
# finding 3: failed before its fix
is(sql('alice', "SELECT args FROM retries.calls WHERE id = $gcall"),
	'["5"]', 'f: FINDING 3 a debounce through f(text) leaves the key\'s call of g(int) its arguments');
my $cmd = sql('alice', q{
SELECT retries.run_command('SELECT 1', key => 'cmd', run_at => now() + interval '1 day')});
($out, $err) = try('alice', q{SELECT retries.call('g(int)', '[7]', key => 'cmd', debounce => '1 day')});
like($err // '', qr/key "cmd" is held by call $cmd of another function/,
	'f: a debounce through g(int) of a command\'s key is refused');
# finding 3: failed before its fix
is(sql('alice', "SELECT command FROM retries.calls WHERE id = $cmd"),
	'SELECT 1', 'f: FINDING 3 a debounce through g(int) leaves a command\'s text');

###########################################################################
# g. FINDING 4: emit's payload and retries.max_args_size
###########################################################################

# finding 4: failed before its fix
($out, $err) = try('mallory', q{
SELECT retries.emit('big', (SELECT jsonb_agg(md5(i::text)) FROM generate_series(1, 60000) i))});
like($err, qr/ERROR:  54000/, 'g: FINDING 4 a payload over retries.max_args_size is refused (54000)');

###########################################################################
# h. lifecycle
###########################################################################

my $c = sql('alice', q{SELECT retries.call('g(int)', '[1]', on_event => 'cx')});
sql('alice', "SELECT retries.cancel($c)");
is(sql('alice', q{SELECT retries.emit('cx')}), '0', 'h: an emit releases no cancelled call');
is(sql('alice', "SELECT state FROM retries.calls WHERE id = $c"), 'cancelled',
	'h: ... which stays cancelled');

$node->safe_psql($DB, q{SELECT retries.pause('g(int)')});
my $p = sql('alice', q{SELECT retries.call('g(int)', '[2]', on_event => 'pz')});
sql('alice', q{SELECT retries.emit('pz')});
stays_true($node, $DB,
	"SELECT attempts = 0 FROM retries.call_data WHERE id = $p", 2,
	'h: a call of a paused function released by its event waits for resume');
$node->safe_psql($DB, q{SELECT retries.resume('g(int)')});
done($p, 'succeeded', 'h: ... and runs after it');

my $proc = sql('alice', q{SELECT retries.call('pr(text)', '["p"]', on_event => 'pe')});
sql('alice', q{SELECT retries.emit('pe', '{"p": 1}')});
done($proc, 'succeeded', 'h: a procedure (runner) released by its event runs');
is(sql('alice', q{SELECT string_agg(ev::text, ',' ORDER BY note) FROM log WHERE note LIKE 'pr%:p'}),
	'{"p": 1},{"p": 1}', 'h: ... and reads its payload before and after its COMMIT');

my $before = sql('alice', q{SELECT retries.call('g(int)', '[3]', run_at => now() + interval '1 day')});
my $after = sql('alice', qq{SELECT retries.call('g(int)', '[4]', after => ARRAY[$before]::bigint[],
							on_event => 'ch', event_timeout => '0')});
wait_until($node, $DB,
	"SELECT held AND waiting_on = 1 AND event_wait IS NULL FROM retries.call_data WHERE id = $after",
	't', 'h: a chained call past its event_timeout is released from its event');
stays_true($node, $DB,
	"SELECT held AND waiting_on = 1 FROM retries.call_data WHERE id = $after", 2,
	'h: ... and still waits for its chain');
sql('alice', "SELECT retries.retry_now($before)");
done($after, 'succeeded', 'h: ... and runs after it');

###########################################################################
# i. no crash
###########################################################################

no_crash($node, $log_offset, 'i: no crash');

$node->stop;
done_testing();
