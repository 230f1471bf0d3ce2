# Eighth hostile review (of 9600a52, the code changed since e98aa90), by a
# reviewer who did not write the code: the capacity rule between a
# function's owner and its callers (other_holds, busy_roles, runners),
# key_window's check, retries.call_outcome(), copies of a database
# (retries.home), events and keys under prepared transactions, and the
# emit_log hook.  alice is the victim, mallory the attacker (in 3. the
# owner of a database, with CREATEDB), bob a bystander.  Each numbered
# check failed on the code reviewed; the lettered ones held.  Fixed since,
# and plain checks now: 1, 2, 4, 5, 6, 7 (7: a copy's first worker cancels
# the calls and pauses the schedules it brought, and the database runs its
# own), 3 (CREATE DATABASE leaves a note that the copy's workers read,
# whatever the version of its extension).
#   1. (Medium) while alice's call of mallory's function waits on
#      mallory's lock in one base worker, alice's head (her earliest due
#      call) is locked: the other base worker's claim_heads skips her (only
#      an extra worker looks past a locked head), busy_roles (from 684bc9d
#      by the batch's caller) lists her too, and no extra worker starts
#      while that worker runs mallory's short batches.  So alice's own call
#      waits for mallory's whole backlog, which mallory can renew at will
#      (so at e98aa90 too).  Extra workers are off in this section
#      (max_extra_workers = 0), to make the order certain; with them on,
#      none started in 10 s of the attack interactively.
#   2. (Medium) a procedure's attempt in a runner is charged to the caller
#      as her own code (run_in_runner: set_state(..., call->role,
#      call->role)): while alice's call of mallory's procedure waits on
#      mallory's lock and bob's long call holds the other base worker, the
#      extra worker runs mallory's call at once but passes over alice's
#      own calls (running_roles lists alice).
#   3. (High, until each database is updated to 1.7) a copy (CREATE
#      DATABASE ... TEMPLATE) of a database whose extension is still at
#      1.6, which the 1.7 library serves, runs every role's copied calls:
#      serving() treats a schema below 1.7 as adopted (no retries.home),
#      and an ALTER EXTENSION UPDATE in the copy later writes the copy's
#      own OID into retries.home (adopted for good).  rv7 finding 8 again,
#      for every database not yet updated.
#   4. (Low) retries.call_outcome() is the process's, not the role's or
#      the transaction's: in a worker, mallory's attempt reads the outcome
#      of alice's retries.call() made in an earlier batch ('deduplicated':
#      alice already had a call of that key).
#   5. (Low) key_window's check locks the key's other scheduled calls FOR
#      KEY SHARE until the batch ends; cancel(), retry_now() and
#      reschedule() take FOR UPDATE: alice's cancel() of a call of the key
#      that is not running waits for the attempt of the key's other call,
#      whose function is mallory's and waits on mallory's lock
#      (key_window.c says a role's own cancel() or reschedule() takes no
#      lock that conflicts).
#   6. (Low) a call of a key put off behind a running call of the key is
#      put off by min(key_window, 1 s): with a key_window of a microsecond
#      it is due again at once, and a worker spins on mallory's ten calls
#      (interactively 93 % of a core, about 1,000 updates a second).
#   7. (Medium) a database made from a template that has the extension
#      (a template kept for new databases, with no calls) is a "copy" too:
#      it is adopted at once only if its workers look before anyone makes
#      a call there.  mallory, with nothing but the default CONNECT, makes
#      a run_command('SELECT 1') in alice's new database before its workers
#      look: from then on none of alice's calls there run until a superuser
#      runs retries.adopt_copy() (alice's own pending calls keep it so).
#      Interactively mallory won that race with a psql loop, the workers
#      running; an ordinary provisioning script (CREATE DATABASE, \c, a
#      call) lost it once in five under load, and a database made while no
#      worker slot was free lost it too.  No race is needed: mallory
#      connects to the template (template1 too: CONNECT is PUBLIC's) and
#      leaves a command there due in a century; every database made from
#      it afterwards is taken for a copy.  The test does that.
#
# Held:
#   a. the extra worker runs mallory's call while alice's runner and bob's
#      long call hold both base workers (2.).
#   b. mallory's prepared transactions (PREPARE TRANSACTION) that emitted
#      the name of alice's event and debounced a key of the same text
#      make neither alice's emit nor her keyed call wait, and release
#      nothing of alice's.
#   c. the emit_log hook's hint: a statement naming retries gets it, one
#      that does not name retries does not; a caught error is untouched.
#   d. a copy of a 1.7 database holding alice's pending call runs nothing
#      of hers, also after mallory renames the copy and the template;
#      mallory cannot write retries.home.

use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use RetriesTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $DB = 'postgres';
my $node = review_node('review_7');

sub sql
{
	my ($role, $sql, $db) = @_;
	return as_role($node, $db // $DB, $role, $sql);
}

sub extras
{
	return "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'retries extra worker'";
}

my ($G1, $G2, $G3, $G4, $G5, $G6) = (7101, 7102, 7103, 7104, 7105, 7106);

review_roles($node, $DB);
sql('bob', "CREATE FUNCTION bob.slow(n int) RETURNS void LANGUAGE plpgsql AS \$\$"
	  . " BEGIN PERFORM " . gate_sql($G3) . "; END \$\$;"
	  . " SELECT retries.annotate('bob.slow(int)', '1 10ms', timeout => '10min');");
sql('mallory', "CREATE FUNCTION mallory.svc(n int) RETURNS void LANGUAGE plpgsql AS \$\$"
	  . " BEGIN PERFORM " . gate_sql($G1) . "; END \$\$;"
	  . " GRANT EXECUTE ON FUNCTION mallory.svc(int) TO PUBLIC;"
	  . " SELECT retries.annotate('mallory.svc(int)', '1 10ms', timeout => '10min');"
	  . " CREATE PROCEDURE mallory.proc(n int) LANGUAGE plpgsql AS \$\$"
	  . " BEGIN PERFORM " . gate_sql($G2) . "; END \$\$;"
	  . " GRANT EXECUTE ON PROCEDURE mallory.proc(int) TO PUBLIC;"
	  . " SELECT retries.annotate('mallory.proc(int)', '1 10ms', timeout => '10min');"
	  . " CREATE FUNCTION mallory.mail(n int) RETURNS void LANGUAGE plpgsql AS \$\$"
	  . " BEGIN PERFORM " . gate_sql($G5) . "; END \$\$;"
	  . " GRANT EXECUTE ON FUNCTION mallory.mail(int) TO PUBLIC;"
	  . " SELECT retries.annotate('mallory.mail(int)', '1 10ms', timeout => '10min');");
sql('mallory', q{
CREATE FUNCTION mallory.m(n int) RETURNS void LANGUAGE sql AS 'SELECT';
SELECT retries.annotate('mallory.m(int)', '1 10ms');
});

# ---------------------------------------------------------------------
# 2. / a.  alice's call of mallory's procedure, in a runner
# ---------------------------------------------------------------------
# with no runner places (retries.max_runners 0), where the worker waits for
# a runner in its own place: with them it leaves its place to a new worker
# after a second (t/025_commands.pl h)
$node->safe_psql($DB, 'ALTER SYSTEM SET retries.max_runners = 0; SELECT pg_reload_conf()');
wait_until($node, $DB, 'SHOW retries.max_runners', '0', '2: no runner places');
my $g2 = close_gate($node, $DB, $G2);
my $g3 = close_gate($node, $DB, $G3);
my $runner_call = sql('alice', "SELECT retries.call('mallory.proc(int)', '[2]')");
wait_at_gate($node, $DB, $G2, 1, '2: alice\'s call of mallory\'s procedure waits in its runner');
sql('bob', "SELECT retries.call('bob.slow(int)', '[3]')");
wait_at_gate($node, $DB, $G3, 1, '2: bob\'s long call holds the other base worker');
wait_until($node, $DB, "SELECT (" . extras() . ") >= 1", 't', '2: an extra worker starts');
# both calls committed at once: neither is due before the other
my ($m2, $a2) = split /\n/, $node->safe_psql($DB, q{
BEGIN;
SET LOCAL ROLE mallory;
SELECT retries.call('mallory.m(int)', '[2]');
SET LOCAL ROLE alice;
SELECT retries.call('alice.pay(int)', '[2]');
COMMIT;
});
call_reaches($node, $DB, $m2, 'succeeded', 'a: the extra worker runs mallory\'s call');
call_reaches($node, $DB, $a2, 'succeeded',
	'2: the extra worker runs alice\'s own call too, while her call of mallory\'s procedure waits', 15);
open_gate($g2);
open_gate($g3);
call_reaches($node, $DB, $_, 'succeeded', "2: call $_ ends once the gates open")
  for ($runner_call, $a2);

# ---------------------------------------------------------------------
# 1.  alice's call of mallory's function, and mallory's backlog
# ---------------------------------------------------------------------
$node->safe_psql($DB, 'ALTER SYSTEM SET retries.max_extra_workers = 0;'
	  . ' ALTER SYSTEM RESET retries.max_runners; SELECT pg_reload_conf()');
wait_until($node, $DB, extras(), '0', '1: no extra worker runs');
my $g1 = close_gate($node, $DB, $G1);
my $held = sql('alice', "SELECT retries.call('mallory.svc(int)', '[1]')");
wait_at_gate($node, $DB, $G1, 1, '1: alice\'s call of mallory\'s function waits on mallory\'s lock');
my $before = $node->safe_psql($DB, 'SELECT max(id) FROM retries.call_data');
# mallory's backlog and alice's call, committed at once
my $a1 = (split /\n/, $node->safe_psql($DB, q{
BEGIN;
SET LOCAL ROLE mallory;
SELECT count(retries.call('mallory.m(int)', '[1]')) FROM generate_series(1, 40000);
SET LOCAL ROLE alice;
SELECT retries.call('alice.pay(int)', '[1]');
COMMIT;
}))[1];
call_reaches($node, $DB, $a1, 'succeeded', '1: alice\'s call runs in the end');
wait_until($node, $DB,
	"SELECT count(*) FROM retries.call_data WHERE id > $before AND state = 'scheduled'",
	'0', '1: mallory\'s backlog drains');
is($node->safe_psql($DB,
		"SELECT (SELECT min(started_at) FROM retries.attempt_data WHERE call_id = $a1)"
		  . " < (SELECT max(a.started_at) FROM retries.attempt_data a"
		  . "    WHERE a.call_id > $before AND a.call_id < $a1)"),
	't', '1: alice\'s own call starts before mallory\'s backlog, made with it, has all run');
open_gate($g1);
call_reaches($node, $DB, $held, 'succeeded', '1: alice\'s call of mallory\'s function ends');
$node->safe_psql($DB, 'ALTER SYSTEM RESET retries.max_extra_workers; SELECT pg_reload_conf()');

# ---------------------------------------------------------------------
# 5.  alice's cancel and the key_window check's lock
# ---------------------------------------------------------------------
my $later = sql('alice', "SELECT retries.call('mallory.mail(int)', '[5]', key => 'mail:42',"
	  . " key_window => '1 millisecond', run_at => now() + interval '1 day')");
my $g5 = close_gate($node, $DB, $G5);
my $now5 = sql('alice', "SELECT retries.call('mallory.mail(int)', '[5]', key => 'mail:42',"
	  . " key_window => '1 millisecond')");
isnt($now5, $later, '5: a second call of the key, made after the window');
wait_at_gate($node, $DB, $G5, 1, '5: its attempt waits on mallory\'s lock');
my ($out, $err) = try_as($node, $DB, 'alice',
	"SET statement_timeout = '3s';\nSELECT retries.cancel($later)");
is($out, 't', '5: alice cancels her call due tomorrow without waiting for the running one');
open_gate($g5);
call_reaches($node, $DB, $now5, 'succeeded', '5: the running call ends once the gate opens');
is(sql('alice', "SELECT retries.cancel($later) OR state = 'cancelled' FROM retries.calls WHERE id = $later"),
	't', '5: then the cancel goes through');

# ---------------------------------------------------------------------
# 6.  a key_window of a microsecond behind a running call of the key
# ---------------------------------------------------------------------
sql('mallory', "CREATE FUNCTION mallory.k(n int) RETURNS void LANGUAGE plpgsql AS \$\$"
	  . " BEGIN IF n = 0 THEN PERFORM " . gate_sql($G6) . "; END IF; END \$\$;"
	  . " SELECT retries.annotate('mallory.k(int)', '1 10ms', timeout => '10min');");
my $g6 = close_gate($node, $DB, $G6);
my $spin_head = sql('mallory',
	"SELECT retries.call('mallory.k(int)', '[0]', key => 'spin', key_window => '1 microsecond')");
wait_at_gate($node, $DB, $G6, 1, '6: mallory\'s call of key spin runs (at the gate)');
# ten more calls of the key, each made in a statement of its own (a new
# call each: the window has passed since the one before was made)
sql('mallory', join("\n", map {
	"SELECT retries.call('mallory.k(int)', '[1]', key => 'spin', key_window => '1 microsecond');"
} 1 .. 10));
wait_until($node, $DB,
	"SELECT count(*) FROM retries.call_data WHERE key = 'spin' AND state = 'scheduled'",
	'11', '6: eleven calls of the key are scheduled');
my $updates = 'SELECT n_tup_upd FROM pg_stat_user_tables'
  . " WHERE relid = 'retries.call_data'::regclass";
my $u0 = $node->safe_psql($DB, $updates);
sleep(3);    # not a wait: wall-clock time that must pass, to count the put-offs in it
my $u1 = $node->safe_psql($DB, $updates);
note("6: call_data rows updated in 3 s: " . ($u1 - $u0));
# (each is put off by at least 100 ms: at most 300 in 3 s, and a worker's
# statistics lag up to a second behind; the spin of the reviewed code made
# 5,381)
cmp_ok($u1 - $u0, '<', 600,
	'6: ten calls put off behind a running call of their key are looked at no more than ten times a second each');
open_gate($g6);
wait_until($node, $DB,
	"SELECT count(*) FROM retries.call_data WHERE key = 'spin' AND state = 'succeeded'",
	'11', '6: the calls of the key run once the gate opens');

# ---------------------------------------------------------------------
# 4.  retries.call_outcome() in a worker
# ---------------------------------------------------------------------
sql('alice', "CREATE FUNCTION alice.enq(n int) RETURNS void LANGUAGE plpgsql AS \$\$"
	  . " BEGIN PERFORM retries.call('alice.pay(int)', '[9]', key => 'secret-order-' || n,"
	  . " run_at => now() + interval '1 day'); PERFORM " . gate_sql($G4) . "; END \$\$;"
	  . " SELECT retries.annotate('alice.enq(int)', '1 10ms');"
	  . " SELECT retries.call('alice.pay(int)', '[9]', key => 'secret-order-42',"
	  . " run_at => now() + interval '1 day');");
sql('mallory', q{
CREATE TABLE mallory.loot (outcome text);
CREATE FUNCTION mallory.spy() RETURNS void LANGUAGE sql
	AS $$ INSERT INTO mallory.loot VALUES (coalesce(retries.call_outcome(), 'none')) $$;
SELECT retries.annotate('mallory.spy()', '1 10ms');
});
wait_until($node, $DB, extras(), '0', '4: no extra worker runs yet');
my $g4 = close_gate($node, $DB, $G4);
my @enq = split /\n/,
  sql('alice', "SELECT retries.call('alice.enq(int)', '[42]') FROM generate_series(1, 2)");
# both base workers run one of alice's calls (each has made its retries.call)
wait_at_gate($node, $DB, $G4, 2, '4: both base workers run alice\'s enq');
open_gate($g4);
call_reaches($node, $DB, $_, 'succeeded', "4: alice's call $_ ends") for @enq;
wait_until($node, $DB, extras(), '0', '4: no extra worker runs');
my @spies = split /\n/,
  sql('mallory', "SELECT retries.call('mallory.spy()') FROM generate_series(1, 4)");
call_reaches($node, $DB, $_, 'succeeded', "4: mallory's call $_ ends") for @spies;
is(sql('mallory', "SELECT string_agg(DISTINCT outcome, ',') FROM mallory.loot"),
	'none', '4: mallory\'s attempts read no outcome of alice\'s calls');

# ---------------------------------------------------------------------
# b.  prepared transactions of mallory's and alice's names
# ---------------------------------------------------------------------
sql('mallory', q{
BEGIN;
SELECT retries.emit('order:7', '{"m": 1}');
SELECT retries.call('mallory.m(int)', '[1]', key => 'order:7', debounce => '1 hour');
PREPARE TRANSACTION 'mal_b';
});
my $w = sql('alice', "SELECT retries.call('alice.pay(int)', '[70]', on_event => 'order:7')");
($out, $err) = try_as($node, $DB, 'alice',
	"SET statement_timeout = '5s';\n"
	  . "SELECT id > 0, retries.call_outcome() FROM (SELECT retries.call('alice.pay(int)', '[71]',"
	  . " key => 'order:7', debounce => '1 hour') AS id OFFSET 0) c;");
is($out, "t|made", 'b: mallory\'s prepared debounce of the same key text holds no call of alice\'s')
  or diag($err);
is($node->safe_psql($DB, "SELECT held FROM retries.call_data WHERE id = $w"),
	't', 'b: mallory\'s prepared emit releases nothing of alice\'s');
($out, $err) = try_as($node, $DB, 'alice',
	"SET statement_timeout = '5s';\nSELECT retries.emit('order:7') > 0");
is($out, 't', 'b: alice\'s emit does not wait for mallory\'s prepared one') or diag($err);
call_reaches($node, $DB, $w, 'succeeded', 'b: alice\'s emit releases her call');
$node->safe_psql($DB, "ROLLBACK PREPARED 'mal_b'");

# ---------------------------------------------------------------------
# c.  the emit_log hook's hint
# ---------------------------------------------------------------------
($out, $err) = try_as($node, $DB, 'mallory', "SELECT retries.call('alice.pay', '[1]')");
like($err, qr/expected a left parenthesis.*HINT:\s+Name the function with its argument types/s,
	'c: a statement naming retries gets the hint');
($out, $err) = try_as($node, $DB, 'mallory', "SELECT 'alice.pay'::regprocedure");
ok($err =~ /expected a left parenthesis/ && $err !~ /HINT/,
	'c: one that does not name retries gets none') or diag($err);
($out, $err) = try_as($node, $DB, 'mallory',
	"DO \$\$ DECLARE h text; BEGIN PERFORM retries.call('alice.pay', '[1]');"
	  . " EXCEPTION WHEN OTHERS THEN GET STACKED DIAGNOSTICS h = PG_EXCEPTION_HINT;"
	  . " RAISE NOTICE 'caught: % [%]', SQLERRM, h; END \$\$");
ok(defined $out && $err =~ /caught: expected a left parenthesis \[\]/,
	'c: a caught error is left to its handler, as it was raised') or diag($err);

# ---------------------------------------------------------------------
# 7.  a new database from a template with the extension
# ---------------------------------------------------------------------
$node->safe_psql($DB, 'CREATE DATABASE tmpl');
$node->safe_psql('tmpl', 'CREATE EXTENSION retries;'
	  . ' CREATE SCHEMA alice AUTHORIZATION alice; GRANT USAGE ON SCHEMA alice TO PUBLIC;');
sql('alice', q{
CREATE FUNCTION alice.f(n int) RETURNS int LANGUAGE sql AS 'SELECT n';
SELECT retries.annotate('alice.f(int)', '1 10ms');
}, 'tmpl');
$node->safe_psql($DB, 'ALTER DATABASE tmpl IS_TEMPLATE true');
# mallory (CONNECT, as any role has by default, on template1 too) leaves a
# command in the template, due in a century: every database made from it
# after that holds a scheduled call, and is taken for a copy
sql('mallory', "SELECT retries.run_command('SELECT 1', run_at => now() + interval '100 years')", 'tmpl');
$node->safe_psql($DB, 'CREATE DATABASE tenant TEMPLATE tmpl OWNER alice');
wait_until($node, $DB,
	"SELECT count(*) >= 1 FROM retries.workers WHERE database = 'tenant'", 't',
	'7: the new database has workers');
my $tc = sql('alice', "SELECT retries.call('alice.f(int)', '[7]')", 'tenant');
call_reaches($node, 'tenant', $tc, 'succeeded',
	'7: alice\'s call in her new database runs, though mallory left a call in its template', 20);

# ---------------------------------------------------------------------
# 3. / d.  copies of a 1.6 and of a 1.7 database
# ---------------------------------------------------------------------
$node->safe_psql($DB, 'ALTER ROLE mallory CREATEDB');
for my $v ('1.6', '1.7')
{
	(my $db = "m$v") =~ s/\.//;
	$node->safe_psql($DB, "CREATE DATABASE $db OWNER mallory");
	$node->safe_psql($db, "CREATE EXTENSION retries VERSION '$v';"
		  . " CREATE SCHEMA alice AUTHORIZATION alice; GRANT USAGE ON SCHEMA alice TO PUBLIC;");
	sql('alice', q{
CREATE TABLE alice.t (db text, who text);
GRANT INSERT ON alice.t TO PUBLIC;
CREATE FUNCTION alice.stamp() RETURNS void LANGUAGE sql
	AS 'INSERT INTO alice.t VALUES (current_database(), current_user)';
SELECT retries.annotate('alice.stamp()', '1 10ms');
SELECT retries.call('alice.stamp()', run_at => now() + interval '1 hour');
}, $db);
	sql('mallory', "CREATE DATABASE ${db}_copy TEMPLATE $db");
}
is( $node->safe_psql(
		$DB,
		"SELECT count(*) FROM pg_ls_dir('pg_retries') f WHERE f IN"
		  . " (SELECT 'made.' || oid FROM pg_database WHERE datname IN ('m16', 'm17'))"),
	'0',
	'd: CREATE EXTENSION removes the note of a database made from a template without it');
($out, $err) = try_as($node, 'm17_copy', 'mallory',
	"UPDATE retries.home SET datid = (SELECT oid FROM pg_database WHERE datname = current_database())");
ok(!defined $out && $err =~ /42501/, 'd: mallory may not write retries.home in her copy') or diag($err);
sql('mallory', 'ALTER DATABASE m17 RENAME TO m17_old; ALTER DATABASE m17_copy RENAME TO m17');
for my $db ('m16_copy', 'm17')
{
	wait_until($node, $DB,
		"SELECT count(*) >= 1 FROM pg_stat_activity WHERE backend_type = 'retries worker'"
		  . " AND datname = '$db'", 't', "3: the copy $db has workers");
}
# alice's calls fall due (the workers decide as two hours later)
$node->safe_psql($DB,
	"ALTER SYSTEM SET retries.debug_clock_offset = '2h'; SELECT pg_reload_conf()");
for my $db ('m16', 'm17_old')
{
	wait_until($node, $db, "SELECT count(*) FROM alice.t", '1',
		"3: alice's call runs in $db, where she made it");
}
stays_true($node, 'm17', "SELECT count(*) = 0 FROM alice.t", 5,
	'd: the renamed copy of the 1.7 database runs nothing of alice\'s');
# CREATE DATABASE left a note of the 1.6 copy: its workers settle it as
# they settle a copy of a 1.7 database, and forget the note
wait_until($node, 'm16_copy',
	"SELECT string_agg(state || ': ' || last_message, ',') FROM retries.call_data",
	'cancelled: copied with database '
	  . $node->safe_psql($DB, "SELECT oid FROM pg_database WHERE datname = 'm16_copy'")
	  . ' ("m16_copy") from database '
	  . $node->safe_psql($DB, "SELECT oid FROM pg_database WHERE datname = 'm16'")
	  . ' (CREATE DATABASE ... TEMPLATE), and not run here: retries.retry_now() runs it',
	'3: the copy of the 1.6 database cancels the call it brought, saying why');
is($node->safe_psql('m16_copy', 'SELECT count(*) FROM alice.t'),
	'0', '3: ... and runs nothing of alice\'s');
wait_until($node, $DB,
	"SELECT count(*) FROM pg_ls_dir('pg_retries') f"
	  . " WHERE f = 'made.' || (SELECT oid FROM pg_database WHERE datname = 'm16_copy')",
	'0', '3: the note of the settled copy is gone');
# the update adopts the settled copy, which runs its own calls
$node->safe_psql('m16_copy', 'ALTER EXTENSION retries UPDATE');
$tc = sql('alice', "SELECT retries.call('alice.stamp()')", 'm16_copy');
call_reaches($node, 'm16_copy', $tc, 'succeeded',
	'3: a call made in the copy, updated to 1.7, runs there');
is($node->safe_psql('m16_copy', 'SELECT count(*) FROM retries.call_data WHERE state = \'cancelled\''),
	'1', '3: ... and the copied call stays cancelled');
$node->safe_psql($DB, 'ALTER SYSTEM RESET retries.debug_clock_offset; SELECT pg_reload_conf()');

$node->stop;
done_testing();
