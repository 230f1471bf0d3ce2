# Fifteenth hostile review (rv15, of 27fc43c: the fixes of the thirteenth
# and fourteenth reviews), by a reviewer who did not write the code.
# alice is the victim, mallory the attacker (an ordinary role; the owner of
# database mdb, with CREATEDB, in section 1), bob a bystander.  Each
# numbered check fails on the code reviewed (inside a TODO block named
# "finding N"); the lettered ones held.  Fixed since, and plain checks now:
# 1 (an attempt that the extension's own stop of its worker cut short does
# not use up one of the call's: three refused commands, and the call of 3
# attempts still runs), 2 (a batch whose first call runs another role's
# code claims nothing ahead of it, and then one call at a time), 3 (the
# '@reboot' flag is kept apart from the database's shared entry).
#
# Sections, in order:
#   1. (Medium, the attacker owns the database) command_would_run()
#      mirrors, for CREATE DATABASE ... TEMPLATE, only CREATEDB, the
#      template's ownership and a free name: mallory's CREATE DATABASE x
#      TEMPLATE mdb OWNER alice, refused with 42501 (she is not a member of
#      alice), stops mdb's workers all the same, and alice's running call
#      is charged an interrupted attempt.  (Interactively also TABLESPACE
#      nosuch, ENCODING 'nonsense', CONNECTION LIMIT -5, LOCALE 'xx_YY':
#      each refused, each charged; alice's call failed.)  The thirteenth
#      review's finding 6, for the checks the fix left out.
#      Held beside it: a. bob's CREATE DATABASE TEMPLATE mdb (no CREATEDB)
#      and b. mallory's ALTER DATABASE mdb RENAME TO a name in use stop no
#      worker.
#   2. (Medium) claim_batch() claims a role's due calls of a priority above
#      0 up front (claim_prioritized), beside its head; a batch of another
#      role's code (the head: alice's call of mallory's function) ends at
#      the first call of other code only after that code has run, and the
#      calls claimed up front stay locked meanwhile: alice's own call of
#      priority 5 waits for mallory's slow function (her gate, her
#      timeout).  Also priority 0: claim_again() claims as many calls as
#      the batch holds (1, 1, 2, 4, ...), so behind two quick calls of
#      mallory's function, the slow one and alice's own call of priority 0
#      are claimed together, and hers waits too.  The thirteenth review's
#      finding 5, for calls claimed before the foreign code runs.
#      Held beside it: c. alice's call of priority 0 right behind the slow
#      one (not yet claimed when it starts): it runs at once in the other
#      worker.
#   3. (Low, the attacker owns the database) the '@reboot' flag of the
#      thirteenth review's fix (armed_since_start) lives in the database's
#      shared entry, which the launcher frees when the database no longer
#      allows connections: mallory's ALTER DATABASE mdb3 ALLOW_CONNECTIONS
#      false, then true, makes a fresh entry, and the next worker arms the
#      schedules again: alice's '@reboot' schedule, paused across the
#      server's start and resumed after it, fires with no server start.
#      Held beside it: e. resumed, it does not fire by itself.
#   d. (held) per role: mallory's emit and clear_event of the name of
#      alice's event touch nothing of alice's: her call still waits, and
#      her own emit releases it.
#   f. (held) mallory cannot lock rows through the views (FOR KEY SHARE of
#      retries.events and retries.calls: 42501).

use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use RetriesTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $DB = 'postgres';
my $node = review_node('review_13');

sub sql
{
	my ($role, $sql, $db) = @_;
	return as_role($node, $db // $DB, $role, $sql);
}

# the pid of the process that waits at gate KEY in DB ('' if none)
sub gate_pid
{
	my ($db, $key) = @_;
	return $node->safe_psql($db, "SELECT coalesce(min(pid)::text, '') FROM pg_locks"
		  . " WHERE locktype = 'advisory' AND objid = $key AND objsubid = 1 AND NOT granted"
		  . " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())");
}

# SQL: process PID still waits at gate KEY
sub still_waits
{
	my ($pid, $key) = @_;
	return "SELECT EXISTS (SELECT FROM pg_locks WHERE pid = $pid AND locktype = 'advisory'"
	  . " AND objid = $key AND objsubid = 1 AND NOT granted)";
}

review_roles($node, $DB);

# ---------------------------------------------------------------------
# 1.  mallory owns mdb (and has CREATEDB): refused database commands
# ---------------------------------------------------------------------
$node->safe_psql($DB, 'ALTER ROLE mallory CREATEDB; CREATE DATABASE mdb OWNER mallory');
$node->safe_psql('mdb', 'CREATE EXTENSION retries; CREATE SCHEMA alice AUTHORIZATION alice;');
my $G1 = 8511;
sql('alice', "CREATE FUNCTION alice.hold(n int) RETURNS void LANGUAGE sql AS"
	  . " 'SELECT " . gate_sql($G1) . "';"
	  . " SELECT retries.annotate('alice.hold(int)', '3 10ms', timeout => '10min');", 'mdb');
my $gate1 = close_gate($node, 'mdb', $G1);
my $c1 = sql('alice', "SELECT retries.call('alice.hold(int)', '[1]')", 'mdb');
my $max1 = $node->safe_psql('mdb', "SELECT max_attempts FROM retries.call_data WHERE id = $c1");
wait_at_gate($node, 'mdb', $G1, 1, '1: alice\'s call runs in mdb (at a gate)');
my $pid1 = gate_pid('mdb', $G1);

my ($o, $e) = try_as($node, $DB, 'bob', 'CREATE DATABASE xb TEMPLATE mdb');
ok(!defined $o && $e =~ /42501/, 'a: bob\'s CREATE DATABASE TEMPLATE mdb is refused (no CREATEDB)')
  or diag($o // $e);
stays_true($node, 'mdb', still_waits($pid1, $G1), 2,
	'a: alice\'s call keeps its worker after bob\'s refused CREATE DATABASE');

($o, $e) = try_as($node, $DB, 'mallory', 'ALTER DATABASE mdb RENAME TO postgres');
ok(!defined $o && $e =~ /42P04/, 'b: mallory\'s RENAME of mdb to a name in use is refused')
  or diag($o // $e);
stays_true($node, 'mdb', still_waits($pid1, $G1), 2,
	'b: alice\'s call keeps its worker after mallory\'s refused RENAME');

($o, $e) = try_as($node, $DB, 'mallory', 'CREATE DATABASE x1 TEMPLATE mdb OWNER alice');
ok(!defined $o && $e =~ /42501/,
	'1: mallory\'s CREATE DATABASE x1 TEMPLATE mdb OWNER alice is refused (not a member of alice)')
  or diag($o // $e);
# finding 1, fixed since in what it cost alice: the stop is still made (as
# for her owner's commands that run), but an attempt that the extension's
# own stop cut short no longer uses up one of the call's; three times over
# (her policy's '3 10ms' would be used up by three), and the call still runs
for my $round (1 .. 3)
{
	if ($round > 1)
	{
		($o, $e) = try_as($node, $DB, 'mallory', 'CREATE DATABASE x1 TEMPLATE mdb OWNER alice');
		ok(!defined $o && $e =~ /42501/, "1: ... refused again ($round)") or diag($o // $e);
	}
	wait_until($node, 'mdb', "SELECT (" . gate_waiters($G1) . ") >= 1"
		  . " AND (SELECT attempts FROM retries.call_data WHERE id = $c1) >= $round", 't',
		"1: alice\'s call runs again after the stop ($round)");
}
is($node->safe_psql('mdb', "SELECT state || ' ' || attempts || ' ' || max_attempts"
		  . " FROM retries.call_data WHERE id = $c1"),
	'scheduled 3 ' . ($max1 + 3), '1: three attempts cut short by the stops, each given back');
# the same, while a session holds the call's row (the superuser, as a
# reschedule() left uncommitted would): the worker that comes next in the
# slot finds the call locked and notes the attempt for whoever claims the
# call; that note too says the stop cut it short (once, its 'stopped' was
# false, and won over the exiting worker's when a worker of the other slot
# claimed the call at that moment: a stop used up one of alice's attempts)
my $holder = $node->background_psql('mdb');
$holder->query_until(qr/locking/,
	"\\echo locking\nBEGIN; SELECT 1 FROM retries.call_data WHERE id = $c1 FOR UPDATE;\n");
wait_until($node, 'mdb', "SELECT count(*) = 1 FROM pg_stat_activity"
	  . " WHERE wait_event_type = 'Lock' AND query LIKE '%FOR UPDATE%' AND pid <> pg_backend_pid()",
	't', '1: setup: a session waits for the row of alice\'s running call');
my $log4 = -s $node->logfile;
($o, $e) = try_as($node, $DB, 'mallory', 'CREATE DATABASE x1 TEMPLATE mdb OWNER alice');
ok(!defined $o && $e =~ /42501/, '1: ... refused again (4)') or diag($o // $e);
$node->wait_for_log(qr/attempt 4 of call $c1 was interrupted; its call is locked by another transaction/,
	$log4);
$holder->query_safe('COMMIT');
$holder->quit;
wait_until($node, 'mdb', "SELECT (" . gate_waiters($G1) . ") >= 1"
	  . " AND (SELECT attempts FROM retries.call_data WHERE id = $c1) >= 4", 't',
	'1: alice\'s call runs again once the session lets its row go (4)');
is($node->safe_psql('mdb', "SELECT state || ' ' || attempts || ' ' || max_attempts"
		  . " FROM retries.call_data WHERE id = $c1"),
	'scheduled 4 ' . ($max1 + 4), '1: the attempt cut short while its row was held is given back too');
note('1: alice\'s call in mdb: ' . $node->safe_psql('mdb',
		"SELECT state || ' / ' || attempts || ' attempts / '"
		  . " || (SELECT count(*) FROM retries.attempt_data WHERE call_id = $c1"
		  . " AND outcome = 'interrupted') || ' interrupted'"
		  . " FROM retries.call_data WHERE id = $c1"));
open_gate($gate1);
call_reaches($node, 'mdb', $c1, 'succeeded', '1: alice\'s call ends once her gate opens', 60);
$node->safe_psql($DB, 'DROP DATABASE mdb WITH (FORCE); ALTER ROLE mallory NOCREATEDB');

# ---------------------------------------------------------------------
# 2.  alice's calls of priority above 0, claimed up front in a batch
#     whose head is her call of mallory's slow function
# ---------------------------------------------------------------------
my $GM = 8512;
sql('mallory', "CREATE FUNCTION mallory.slow() RETURNS void LANGUAGE sql AS 'SELECT " . gate_sql($GM) . "';"
	  . " SELECT retries.annotate('mallory.slow()', max_attempts => 1, timeout => '1h');");

# c. control: her own call of priority 0 is claimed one at a time
my $gm = close_gate($node, $DB, $GM);
my @cc = grep { /^\d+$/ } split /\n/, sql('alice', "BEGIN;"
	  . " SELECT retries.call('mallory.slow()', run_at => now() - interval '1 s');"
	  . " SELECT retries.call('alice.pay(int)', '[20]');"
	  . " COMMIT;");
wait_at_gate($node, $DB, $GM, 1, 'c: alice\'s call of mallory\'s slow function runs (at mallory\'s gate)');
call_reaches($node, $DB, $cc[1], 'succeeded',
	'c: alice\'s own call of priority 0 runs meanwhile', 30);
open_gate($gm);
call_reaches($node, $DB, $cc[0], 'succeeded', 'c: alice\'s call of mallory\'s function ends', 60);

# 2. the same with her own call of priority 5
$gm = close_gate($node, $DB, $GM);
my @c2 = grep { /^\d+$/ } split /\n/, sql('alice', "BEGIN;"
	  . " SELECT retries.call('mallory.slow()', run_at => now() - interval '1 s');"
	  . " SELECT retries.call('alice.pay(int)', '[25]', priority => 5);"
	  . " COMMIT;");
wait_at_gate($node, $DB, $GM, 1, '2: alice\'s call of mallory\'s slow function runs (at mallory\'s gate)');
{
	# finding 2, fixed since
	call_reaches($node, $DB, $c2[1], 'succeeded',
		'2: alice\'s own call of priority 5 does not wait for mallory\'s slow function', 10);
}
note('2: alice\'s call of priority 5, mallory\'s function still at its gate: '
	  . $node->safe_psql($DB, "SELECT state FROM retries.call_data WHERE id = $c2[1]"));
open_gate($gm);
call_reaches($node, $DB, $c2[1], 'succeeded', '2: it runs once mallory\'s function returns', 60);
call_reaches($node, $DB, $c2[0], 'succeeded', '2: alice\'s call of mallory\'s function ends', 60);

# 2, again: her own call of priority 0 behind two quick calls of
# mallory's function and the slow one: the batch claims one call, then one
# more, then two at once (claim_again doubles), the slow one and hers
sql('mallory', "CREATE FUNCTION mallory.quick() RETURNS void LANGUAGE sql AS 'SELECT';"
	  . " SELECT retries.annotate('mallory.quick()', max_attempts => 1);");
$gm = close_gate($node, $DB, $GM);
my @c2b = grep { /^\d+$/ } split /\n/, sql('alice', "BEGIN;"
	  . " SELECT retries.call('mallory.quick()', run_at => now() - interval '3 s');"
	  . " SELECT retries.call('mallory.quick()', run_at => now() - interval '2 s');"
	  . " SELECT retries.call('mallory.slow()', run_at => now() - interval '1 s');"
	  . " SELECT retries.call('alice.pay(int)', '[26]');"
	  . " COMMIT;");
wait_at_gate($node, $DB, $GM, 1, '2: alice\'s call of mallory\'s slow function runs again (at mallory\'s gate)');
{
	# finding 2, fixed since
	call_reaches($node, $DB, $c2b[3], 'succeeded',
		'2: alice\'s own call of priority 0, claimed with it, does not wait for mallory\'s slow function', 10);
}
open_gate($gm);
call_reaches($node, $DB, $c2b[3], 'succeeded', '2: it runs once mallory\'s function returns', 60);
call_reaches($node, $DB, $c2b[2], 'succeeded', '2: alice\'s call of mallory\'s function ends', 60);

# ---------------------------------------------------------------------
# 3.  '@reboot' armed again without a server start: the owner of the
#     database turns its connections off and on
# ---------------------------------------------------------------------
paused_reboot_schedule($node, 'mdb3', 'boot3', 3);
$node->restart;
my $workers3 = "SELECT count(*) FROM pg_stat_activity WHERE datname = 'mdb3'"
  . " AND backend_type IN ('retries worker', 'retries extra worker')";
wait_until($node, $DB, "SELECT ($workers3) > 0", 't', '3: mdb3 has workers after the server\'s start', 60);
sql('alice', "SELECT retries.resume_schedule('boot3')", 'mdb3');
stays_true($node, 'mdb3', "SELECT last_run IS NULL FROM retries.schedule_data WHERE name = 'boot3'", 3,
	'e: alice\'s @reboot schedule, resumed after the start, does not fire');
($o, $e) = try_as($node, $DB, 'mallory', 'ALTER DATABASE mdb3 ALLOW_CONNECTIONS false');
ok(defined $o, '3: mallory turns mdb3\'s connections off') or diag($e);
wait_until($node, $DB, "SELECT ($workers3) = 0", 't', '3: the launcher lets mdb3 go', 60);
($o, $e) = try_as($node, $DB, 'mallory', 'ALTER DATABASE mdb3 ALLOW_CONNECTIONS true');
ok(defined $o, '3: and on again') or diag($e);
wait_until($node, $DB, "SELECT ($workers3) > 0", 't', '3: mdb3 has workers again', 60);
{
	# finding 3, fixed since
	stays_true($node, 'mdb3', "SELECT last_run IS NULL FROM retries.schedule_data WHERE name = 'boot3'", 3,
		'3: alice\'s @reboot schedule does not fire without a server start');
}
note('3: boot3 last ran at ' . $node->safe_psql('mdb3',
		"SELECT coalesce(last_run::text, 'never') FROM retries.schedule_data WHERE name = 'boot3'")
	  . ', the server started at ' . $node->safe_psql($DB, 'SELECT pg_postmaster_start_time()'));
$node->safe_psql($DB, 'DROP DATABASE mdb3 WITH (FORCE)');

# ---------------------------------------------------------------------
# d.  mallory's emit and clear_event of alice's event's name
# ---------------------------------------------------------------------
my $cd = sql('alice', "SELECT retries.call('alice.pay(int)', '[40]', on_event => 'shipped')");
sql('mallory', "SELECT retries.emit('shipped', '{\"x\": 1}'); SELECT retries.clear_event('shipped');"
	  . " SELECT retries.emit('shipped')");
is($node->safe_psql($DB, "SELECT state || ' ' || event_wait FROM retries.call_data WHERE id = $cd"),
	'scheduled true', 'd: alice\'s call still waits after mallory\'s emits of the same name');
is($node->safe_psql($DB, "SELECT count(*) FROM retries.event_data WHERE role = 'alice'::regrole"
		  . " AND emitted_at IS NOT NULL"),
	'0', 'd: alice has no emitted event');
sql('alice', "SELECT retries.emit('shipped')");
call_reaches($node, $DB, $cd, 'succeeded', 'd: alice\'s own emit releases her call', 30);

# f.  mallory cannot lock rows through the views (the event's row is its
#     lock from 1.7): FOR KEY SHARE of retries.events and retries.calls
($o, $e) = try_as($node, $DB, 'mallory', 'SELECT * FROM retries.events FOR KEY SHARE');
ok(!defined $o && $e =~ /42501/, 'f: mallory\'s FOR KEY SHARE of retries.events is refused') or diag($o // $e);
($o, $e) = try_as($node, $DB, 'mallory', 'SELECT id FROM retries.calls FOR KEY SHARE');
ok(!defined $o && $e =~ /42501/, 'f: mallory\'s FOR KEY SHARE of retries.calls is refused') or diag($o // $e);

no_crash($node, 0, 'no crash in the server log');
done_testing();
