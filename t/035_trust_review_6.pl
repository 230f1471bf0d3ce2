# Seventh hostile review (of e98aa90), by a reviewer who did not write the
# code: capacity and flow control between a function's owner and its
# callers, retries_admin's commands by schedule name, a database owner's
# ALTER DATABASE ... SET and copies, many databases, and events.  alice
# is the victim, mallory the attacker (from c. on the owner of a database,
# from 8. with CREATEDB), bob a bystander, adm a member of retries_admin.
# Each numbered check failed on the code reviewed.  Fixed since, and plain
# checks now: 1, 2 (the admin's command is refused as ambiguous at once),
# 3 (the admin names the schedule by its id), 4, 5 (the debounce waits
# for the open pause, and moves the call), 8 (a copy's first worker
# cancels the calls and pauses the schedules it brought; what is made in
# the copy runs).  Still TODO, each saying why: 6, 7, 9, 10, 11.  The
# findings:
#   1. (Medium) mallory's calls of alice's function, which alice grants to
#      PUBLIC, count as alice's hold of a worker: while they wait (on an
#      advisory lock mallory holds, which alice's function takes), the
#      extra worker runs bob's call but passes over alice's own calls,
#      which wait for mallory's calls to end.
#   2. (Medium) a retries_admin member's command by name (trigger) waits
#      for mallory's open transaction that locked her own schedule of the
#      same name, holding alice's schedule locked meanwhile: alice's
#      schedule stops firing for as long as mallory likes.
#   3. (Low) once mallory has a schedule named as alice's, a retries_admin
#      member who is no superuser cannot manage alice's schedule at all:
#      the name is ambiguous, and the hint's SET ROLE is not open to her.
#      (Fixed by pause_schedule(id) and its kin, version 1.7: mallory's
#      of alice's id finds none, told as for an id no schedule has.)
#   4. (Low) a database owner's ALTER DATABASE ... SET
#      default_transaction_isolation = serializable makes the workers' own
#      transactions serializable: their statements fail with 40001 and
#      roll back batches, whose calls run again.  (Checked as the isolation
#      a call sees: the worker's transaction is read committed after a fix.)
#   5. (Medium) mallory's retries.pause() of her function, left open in a
#      transaction, row-locks alice's pending calls of it: alice's next
#      debounce of a key takes the locked call for a started one and makes
#      a second call (the burst runs twice).
#   6. (Low) the same open pause makes alice's cancel() of her call of
#      mallory's function wait until mallory's transaction ends.
#   7. (info) max_running_per_key counts a limit_key across roles (its hash
#      alone): mallory's call of alice's function with alice's limit_key is
#      held while alice's attempt of that key runs, so mallory learns which
#      keys alice has in flight (and takes their room).
#   8. (High) mallory, owner of a database (not a superuser) with
#      CREATEDB, copies it (CREATE DATABASE ... TEMPLATE): alice's pending
#      calls, commands and schedules are copied with it and run again in
#      the copy, as alice, under the copy's settings, which mallory
#      chooses: her planted public.now() ran as alice from alice's
#      scheduled function (interactively, from alice's scheduled command it
#      set alice's password, and from a superuser's it made mallory a
#      superuser).  A restore by the same owner refuses such rows
#      (check_loaded_rows).
#   9. (High impact, PostgreSQL parity) in her own database too, mallory's
#      ALTER DATABASE ... SET search_path reaches every role's attempts and
#      commands: her planted public.now() runs as alice in alice's
#      scheduled call (interactively, from a superuser's scheduled command,
#      it made mallory a superuser).  PostgreSQL documents a session in a
#      database of an untrusted owner as insecure unless it resets
#      search_path; alice never opened one.
#  10. (Medium) mallory with CREATEDB (no superuser) makes 128 empty
#      databases: the launcher serves the first 128 connectable databases
#      in pg_database's physical order, so a database made after them gets
#      no worker and its calls wait for good (interactively: an existing
#      database whose row lay behind the free space lost its workers, and
#      its running attempt was charged as interrupted).
#  11. (info) EXPLAIN ANALYZE of retries.calls WHERE id = N shows "Rows
#      Removed by Filter: 1" for another role's call and nothing for an id
#      that does not exist (and counts every role's calls), where the
#      functions answer both alike.
#
# Held:
#   a. bob's call runs on the extra worker at once while mallory's calls of
#      alice's function hold both base workers.
#   b. adm pauses and resumes alice's schedule by name while it is the only
#      one of that name; with mallory's of the same name, adm's pause is
#      refused (ambiguous) and alice's schedule is left as it was.
#   c. calls in mallory's database run, and still run once the database's
#      default_transaction_read_only is on; mallory may not setval the id
#      sequences (doc/architecture.md says she may: doc only).
#   d. events: mallory's emit of alice's event name does not release alice's
#      waiting call; mallory's open emit of that name does not make alice's
#      emit wait; retries.events shows mallory none of alice's events;
#      mallory cannot read retries.name_lock.
#   e. while mallory's pause is open, alice's calls of her own function run.
#   f. mallory's call of alice's per-key-limited function with another key
#      is not held while alice's attempt of her key runs.
#   g. a database made before mallory's 128 keeps its workers.

use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use RetriesTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $DB = 'postgres';
my $node = retries_node('trust_review_6');
$node->append_conf('postgresql.conf', q{
retries.max_workers = 2
retries.max_extra_workers = 2
});
$node->start;

sub sql
{
	my ($role, $sql, $db) = @_;
	return $node->safe_psql($db // $DB, "SET ROLE $role;\n$sql");
}

# alice is made before mallory: her OID is the lower (2. relies on it)
review_roles($node, $DB);
$node->safe_psql($DB, 'CREATE ROLE adm LOGIN; GRANT retries_admin TO adm;');
sql('alice', q{
-- an ordinary function of alice's for everyone: it serialises its work
-- on an advisory lock of the number it is given
CREATE FUNCTION alice.process(n int) RETURNS void LANGUAGE plpgsql AS $$
BEGIN PERFORM pg_advisory_xact_lock(n); INSERT INTO alice.t VALUES (-n); END $$;
GRANT EXECUTE ON FUNCTION alice.process(int) TO PUBLIC;
SELECT retries.annotate('alice.process(int)', '1 10ms', timeout => '10min');
CREATE FUNCTION alice.tick(n int) RETURNS void LANGUAGE sql AS 'SELECT';
SELECT retries.annotate('alice.tick(int)', '1 10ms');
CREATE FUNCTION alice.kf(n int) RETURNS void LANGUAGE sql AS $$ SELECT $$;
GRANT EXECUTE ON FUNCTION alice.kf(int) TO PUBLIC;
SELECT retries.annotate('alice.kf(int)', '1 10ms', max_running_per_key => 1);
});
sql('bob', q{
CREATE FUNCTION bob.pay(n int) RETURNS void LANGUAGE sql AS 'SELECT';
SELECT retries.annotate('bob.pay(int)', '3 10ms');
});
sql('mallory', q{
CREATE FUNCTION mallory.svc(n int) RETURNS void LANGUAGE sql AS 'SELECT';
GRANT EXECUTE ON FUNCTION mallory.svc(int) TO PUBLIC;
SELECT retries.annotate('mallory.svc(int)', '3 10ms');
CREATE FUNCTION mallory.m(n int) RETURNS void LANGUAGE sql AS 'SELECT';
SELECT retries.annotate('mallory.m(int)', '1 10ms');
});

# ---------------------------------------------------------------------
# 1. / a.  mallory's calls of alice's function hold the base workers
# ---------------------------------------------------------------------
my $lock = 4711;
my $hold = $node->background_psql($DB);
$hold->query_safe("SET ROLE mallory; SELECT pg_advisory_lock($lock)");
sql('mallory', "SELECT retries.call('alice.process(int)', '[$lock]'),"
	  . " retries.call('alice.process(int)', '[$lock]')");
wait_at_gate($node, $DB, $lock, 2,
	'1: both base workers run mallory\'s calls of alice.process, waiting on her lock');
wait_until($node, $DB,
	"SELECT count(*) >= 1 FROM pg_stat_activity WHERE backend_type = 'retries extra worker'",
	't', '1: an extra worker starts');
my $bob_call = sql('bob', "SELECT retries.call('bob.pay(int)', '[1]')");
call_reaches($node, $DB, $bob_call, 'succeeded',
	'a: bob\'s call runs on the extra worker meanwhile');
my $alice_call = sql('alice', "SELECT retries.call('alice.pay(int)', '[1]')");
call_reaches($node, $DB, $alice_call, 'succeeded',
	'1: alice\'s own call runs while mallory\'s calls of her function hold the base workers');
$hold->query_safe("SELECT pg_advisory_unlock($lock)");
$hold->quit;
call_reaches($node, $DB, $alice_call, 'succeeded',
	'1: alice\'s call runs once mallory lets her lock go');

# ---------------------------------------------------------------------
# 2. / 3. / b.  retries_admin and two schedules of one name
# ---------------------------------------------------------------------
sql('alice', "SELECT retries.schedule('nightly', 'alice.tick(int)', '1s', '[1]')");
is(sql('adm', "SELECT retries.pause_schedule('nightly'), retries.resume_schedule('nightly')"),
	't|t', 'b: adm pauses and resumes alice\'s schedule by its name');
sql('mallory', "SELECT retries.schedule('nightly', 'mallory.m(int)', '1 day', '[1]')");
my ($out, $err) = try_as($node, $DB, 'adm', "SELECT retries.pause_schedule('nightly')");
ok(!defined $out && $err =~ /42P08/,
	'b: with mallory\'s schedule of the same name, adm\'s pause is refused as ambiguous')
  or diag($err);
is($node->safe_psql($DB,
		"SELECT paused FROM retries.schedule_data WHERE name = 'nightly' AND owner = 'alice'::regrole"),
	'f', 'b: alice\'s schedule is left as it was');
# (fixed: the management functions of a schedule's id, version 1.7)
my $alice_nightly = $node->safe_psql($DB,
	"SELECT id FROM retries.schedule_data WHERE name = 'nightly' AND owner = 'alice'::regrole");
($out, $err) = try_as($node, $DB, 'adm', "SELECT retries.pause_schedule($alice_nightly)");
is($out, 't', '3: adm can still pause alice\'s schedule, by its id');
is($node->safe_psql($DB, "SELECT paused FROM retries.schedule_data WHERE id = $alice_nightly"),
	't', '3: ... alice\'s, and only hers');
for my $f ('pause_schedule', 'resume_schedule', 'trigger', 'unschedule')
{
	my ($o, $e) = try_as($node, $DB, 'mallory', "SELECT retries.$f($alice_nightly)");
	ok(!defined $o && $e =~ /42704.*schedule $alice_nightly does not exist/,
		"3: mallory's $f of alice's schedule by its id finds none")
	  or diag($e);
}
my ($none_out, $none_err) = try_as($node, $DB, 'mallory', 'SELECT retries.pause_schedule(987654321)');
(my $none_msg = $none_err // '') =~ s/987654321/N/;
(my $alice_msg = (try_as($node, $DB, 'mallory', "SELECT retries.pause_schedule($alice_nightly)"))[1] // '')
  =~ s/\b$alice_nightly\b/N/;
is($alice_msg, $none_msg, '3: ... as for an id that no schedule has (its existence not told)');
# alter_schedule (1.7) changes the caller's own schedule of the name only
sql('mallory', "SELECT retries.alter_schedule('nightly', every => '2 days')");
is($node->safe_psql($DB,
		"SELECT string_agg(owner || '=' || every, ',' ORDER BY owner::text)"
		  . " FROM retries.schedule_data WHERE name = 'nightly'"),
	'alice=1s,mallory=2 days', 'b: mallory\'s alter_schedule of the name changes her own only');
sql('alice', "SELECT retries.resume_schedule('nightly')");

my $mal = $node->background_psql($DB);
$mal->query_safe("SET ROLE mallory; BEGIN; SELECT retries.pause_schedule('nightly')");
# (reviewed code: adm's trigger locked alice's row, then waited for
# mallory's; it now looks the name up without locking, and is refused)
($out, $err) = try_as($node, $DB, 'adm',
	"SET statement_timeout = '60s'; SELECT retries.trigger('nightly')");
like($err // '', qr/schedule name "nightly" is ambiguous/,
	'2: adm\'s trigger is refused as ambiguous at once, waiting for no transaction of mallory\'s');
my $firings = $node->safe_psql($DB,
	"SELECT firings FROM retries.schedule_data WHERE name = 'nightly' AND owner = 'alice'::regrole");
wait_until($node, $DB,
	"SELECT firings >= $firings + 2 FROM retries.schedule_data"
	  . " WHERE name = 'nightly' AND owner = 'alice'::regrole",
	't', '2: alice\'s 1 s schedule goes on firing while mallory\'s transaction is open');
$mal->query_safe('ROLLBACK');
$mal->quit;
wait_until($node, $DB,
	"SELECT firings >= $firings + 2 FROM retries.schedule_data"
	  . " WHERE name = 'nightly' AND owner = 'alice'::regrole",
	't', '2: alice\'s schedule fires again once mallory\'s transaction ends');
sql('alice', "SELECT retries.unschedule('nightly')");

# ---------------------------------------------------------------------
# 5. / 6. / e.  mallory's pause left open in a transaction
# ---------------------------------------------------------------------
my $first = sql('alice',
	"SELECT retries.call('mallory.svc(int)', '[1]', key => 'k1', debounce => '1 hour')");
$mal = $node->background_psql($DB);
$mal->query_safe("SET ROLE mallory; BEGIN; SELECT retries.pause('mallory.svc(int)')");
my $own = sql('alice', "SELECT retries.call('alice.pay(int)', '[2]')");
call_reaches($node, $DB, $own, 'succeeded',
	'e: alice\'s calls of her own function run while mallory\'s pause is open');
# (reviewed code: the debounce took the call that mallory's pause had
# locked for a started one, and made a second call of the burst; it now
# waits for her transaction, as a cancel does, and moves the call)
my $deb = $node->background_psql($DB);
$deb->query_until(qr/sent/,
	"SET ROLE alice;\n\\echo sent\n"
	  . "SELECT retries.call('mallory.svc(int)', '[2]', key => 'k1', debounce => '1 hour');\n");
wait_until($node, $DB,
	"SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
	  . " AND query LIKE '%key => ''k1''%' AND pid <> pg_backend_pid()",
	'1', '5: alice\'s second debounce of k1 waits for mallory\'s open pause');
($out, $err) = try_as($node, $DB, 'alice',
	"SET statement_timeout = '3s';\nSELECT retries.cancel($first)");
TODO:
{
	local $TODO = 'finding 6 (Low, not fixed: a pause of the function, the owner\'s to make, holds its calls; documented)';
	is($out, 't', '6: alice cancels her call of mallory\'s function without waiting for mallory');
}
$mal->query_safe('ROLLBACK');
$mal->quit;
wait_until(
	$node, $DB,
	"SELECT count(*) || ' ' || max(args::text) FROM retries.call_data"
	  . " WHERE key = 'k1' AND scheduled_by = 'alice'::regrole",
	'1 ["2"]',
	'5: once mallory\'s transaction ends, the debounce moves alice\'s call: one call of the burst');
$deb->quit;

# ---------------------------------------------------------------------
# 7. / f.  limit_key across roles
# ---------------------------------------------------------------------
my $kgate = 4712;
sql('alice', "CREATE OR REPLACE FUNCTION alice.kf(n int) RETURNS void"
	  . " LANGUAGE sql AS \$\$ SELECT " . gate_sql($kgate) . " \$\$");
my $gate = close_gate($node, $DB, $kgate);
my $akey = sql('alice', "SELECT retries.call('alice.kf(int)', '[1]', limit_key => 'acct-7')");
wait_at_gate($node, $DB, $kgate, 1, '7: alice\'s attempt of key acct-7 runs (at the gate)');
my $m7 = sql('mallory', "SELECT retries.call('alice.kf(int)', '[0]', limit_key => 'acct-7')");
wait_until($node, $DB,
	"SELECT held OR (" . gate_waiters($kgate) . ") >= 2 FROM retries.call_data WHERE id = $m7",
	't', '7: a worker takes mallory\'s call of key acct-7');
TODO:
{
	local $TODO = 'finding 7 (info, by design: a limit_key counts the calls of every role that calls the function; documented)';
	is($node->safe_psql($DB, "SELECT held FROM retries.call_data WHERE id = $m7"),
		'f', '7: mallory\'s call of key acct-7 is not held for alice\'s key');
}
my $m8 = sql('mallory', "SELECT retries.call('alice.kf(int)', '[0]', limit_key => 'acct-8')");
stays_true($node, $DB, "SELECT NOT held FROM retries.call_data WHERE id = $m8", 1,
	'f: mallory\'s call of key acct-8 is not held');
open_gate($gate);
call_reaches($node, $DB, $_, 'succeeded', "f: call $_ runs once the gate opens")
  for ($akey, $m7, $m8);

# ---------------------------------------------------------------------
# d.  events of one name, two roles
# ---------------------------------------------------------------------
my $waiting = sql('alice',
	"SELECT retries.call('alice.pay(int)', '[3]', on_event => 'order:1')");
sql('mallory', "SELECT retries.emit('order:1', '{\"x\": 1}')");
is($node->safe_psql($DB, "SELECT state || ' ' || held FROM retries.call_data WHERE id = $waiting"),
	'scheduled true', 'd: mallory\'s emit of the name does not release alice\'s call');
$mal = $node->background_psql($DB);
$mal->query_safe("SET ROLE mallory; BEGIN; SELECT retries.emit('order:1')");
($out, $err) = try_as($node, $DB, 'alice',
	"SET statement_timeout = '5s';\nSELECT retries.emit('order:1', '{\"y\": 2}') > 0");
is($out, 't', 'd: mallory\'s open emit of the name does not hold alice\'s emit')
  or diag($err);
$mal->query_safe('ROLLBACK');
$mal->quit;
call_reaches($node, $DB, $waiting, 'succeeded', 'd: alice\'s emit releases her call');
is(sql('mallory', "SELECT count(*) FROM retries.events WHERE role = 'alice'::regrole"),
	'0', 'd: retries.events shows mallory none of alice\'s events');
($out, $err) = try_as($node, $DB, 'mallory', 'SELECT count(*) FROM retries.name_lock');
ok(!defined $out && $err =~ /42501/, 'd: mallory cannot read retries.name_lock');

# 11.  EXPLAIN ANALYZE of a view as an oracle of other roles' call ids
my @plans = map {
	my $plan = sql('mallory', "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF)"
		  . " SELECT * FROM retries.calls WHERE id = $_");
	$plan =~ s/\b$_\b/ID/g;
	$plan;
} ($alice_call, 999999999);
TODO:
{
	local $TODO = 'finding 11 (info: EXPLAIN ANALYZE counts the rows a security_barrier view filters out, as for any view or row security in PostgreSQL; documented)';
	is($plans[0], $plans[1],
		'11: EXPLAIN ANALYZE of retries.calls does not tell alice\'s call id from one that does not exist');
}

# ---------------------------------------------------------------------
# 4. / c.  mallory owns a database and sets its defaults
# ---------------------------------------------------------------------
$node->safe_psql($DB, 'CREATE DATABASE iso OWNER mallory');
$node->safe_psql('iso', q{
CREATE EXTENSION retries;
CREATE SCHEMA alice AUTHORIZATION alice;
});
sql('alice', q{
CREATE FUNCTION alice.iso() RETURNS text LANGUAGE sql
	AS $$ SELECT current_setting('transaction_isolation') $$;
SELECT retries.annotate('alice.iso()', '1 10ms');
}, 'iso');
($out, $err) = try_as($node, 'iso', 'mallory',
	"SELECT pg_catalog.setval('retries.call_data_id_seq', 1)");
ok(!defined $out && $err =~ /42501/,
	'c: the database owner may not set the id sequences (reference.md; architecture.md says she may)');
my $c1 = sql('alice', "SELECT retries.call('alice.iso()')", 'iso');
call_reaches($node, 'iso', $c1, 'succeeded', 'c: alice\'s call runs in mallory\'s database');

sub restart_workers
{
	my ($name) = @_;
	my $old = worker_pids($node, 'iso');
	$node->safe_psql($DB,
		"SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
		  . " WHERE backend_type = 'retries worker' AND datname = 'iso'");
	wait_until($node, $DB,
		"SELECT count(*) = 2 AND bool_and(pid NOT IN ("
		  . ($old eq '' ? '0' : $old) . ")) FROM pg_stat_activity"
		  . " WHERE backend_type = 'retries worker' AND datname = 'iso'",
		't', $name);
	return;
}

sql('mallory', "ALTER DATABASE iso SET default_transaction_isolation = 'serializable'", 'iso');
restart_workers('4: the workers of iso connect again, with its defaults');
my $c2 = sql('alice', "SELECT retries.call('alice.iso()')", 'iso');
call_reaches($node, 'iso', $c2, 'succeeded', '4: alice\'s call runs');
is($node->safe_psql('iso', "SELECT result #>> '{}' FROM retries.calls WHERE id = $c2"),
	'read committed',
	'4: the worker\'s transaction is read committed whatever the database owner set');
sql('mallory', "ALTER DATABASE iso RESET default_transaction_isolation;"
	  . " ALTER DATABASE iso SET default_transaction_read_only = on", 'iso');
restart_workers('c: the workers of iso connect again');
my $c3 = sql('alice', "SET default_transaction_read_only = off; SELECT retries.call('alice.iso()')", 'iso');
call_reaches($node, 'iso', $c3, 'succeeded',
	'c: with default_transaction_read_only on, calls still run');

# ---------------------------------------------------------------------
# 8.  mallory copies her database
# ---------------------------------------------------------------------
sql('mallory', "SET default_transaction_read_only = off; ALTER DATABASE iso RESET default_transaction_read_only", 'iso');
restart_workers('8: the workers of iso connect again, with no default of mallory\'s');
$node->safe_psql($DB, 'ALTER ROLE mallory CREATEDB');
sql('alice', q{
CREATE TABLE alice.t (at timestamptz);
CREATE FUNCTION alice.stamp() RETURNS void LANGUAGE sql AS 'INSERT INTO alice.t VALUES (now())';
SELECT retries.annotate('alice.stamp()', '1 10ms');
SELECT retries.schedule('stamp', 'alice.stamp()', '1s', overlap => 'allow');
}, 'iso');
wait_until($node, 'iso', "SELECT count(*) > 0 FROM alice.t", 't',
	'8: alice\'s schedule runs in iso');

# 9.  mallory's database search_path, in iso itself
sql('mallory', q{
CREATE TABLE public.loot (who text);
GRANT INSERT ON public.loot TO PUBLIC;
CREATE FUNCTION public.now() RETURNS timestamptz LANGUAGE plpgsql AS $$
BEGIN INSERT INTO public.loot VALUES (current_user); RETURN pg_catalog.now(); END $$;
ALTER DATABASE iso SET search_path = public, pg_catalog;
}, 'iso');
TODO:
{
	local $TODO = 'finding 9 (accepted: PostgreSQL parity, documented in doc/architecture.md, the database owner)';
	stays_true($node, 'iso', "SELECT count(*) = 0 FROM public.loot WHERE who = 'alice'", 4,
		'9: mallory\'s database search_path does not run her now() as alice in alice\'s scheduled call');
}
sql('mallory', 'ALTER DATABASE iso RESET search_path', 'iso');

sql('mallory', 'CREATE DATABASE iso_copy TEMPLATE iso');
my $copied = $node->safe_psql('iso_copy', 'SELECT pg_catalog.now()');
sql('mallory', q{
TRUNCATE public.loot;
ALTER DATABASE iso_copy SET search_path = public, pg_catalog;
}, 'iso_copy');
wait_until($node, $DB,
	"SELECT count(*) >= 1 FROM pg_stat_activity WHERE backend_type = 'retries worker'"
	  . " AND datname = 'iso_copy'",
	't', '8: the copy gets workers');
stays_true($node, 'iso_copy',
	"SELECT count(*) = 0 FROM public.loot WHERE who = 'alice'", 5,
	'8: no code of mallory\'s runs as alice in the copy (through alice\'s copied schedule)');
stays_true($node, 'iso_copy',
	"SELECT count(*) = (SELECT count(*) FROM alice.t WHERE at < '$copied') FROM alice.t", 2,
	'8: alice\'s schedule does not fire in mallory\'s copy');
wait_until($node, 'iso_copy',
	"SELECT paused FROM retries.schedule_data WHERE name = 'stamp' AND owner = 'alice'::regrole",
	't', '8: the schedule the copy brought is paused in it');
# what is made in the copy runs there (alice chose to, under its settings)
my $own_copy = sql('alice', "SELECT retries.call('alice.stamp()')", 'iso_copy');
call_reaches($node, 'iso_copy', $own_copy, 'succeeded', '8: a call made in the copy runs there');

# ---------------------------------------------------------------------
# 10.  mallory's many databases
# ---------------------------------------------------------------------
$node->safe_psql($DB, "SET ROLE mallory;\n"
	  . join("\n", map { "CREATE DATABASE m_$_ TEMPLATE template0;" } 1 .. 128));
$node->safe_psql($DB, 'CREATE DATABASE tenant');
$node->safe_psql('tenant', 'CREATE EXTENSION retries; CREATE SCHEMA alice AUTHORIZATION alice');
sql('alice', q{
CREATE FUNCTION alice.f(n int) RETURNS int LANGUAGE sql AS 'SELECT n';
SELECT retries.annotate('alice.f(int)', '1 10ms');
}, 'tenant');
my $tc = sql('alice', "SELECT retries.call('alice.f(int)', '[1]')", 'tenant');
TODO:
{
	local $TODO = 'finding 10 (the launcher serves at most 128 databases: the databases it serves keep their workers, a new one beyond them waits; a bounded pool of workers for every database is later work)';
	call_reaches($node, 'tenant', $tc, 'succeeded',
		'10: a database made after mallory\'s 128 empty ones gets workers', 8);
}
is($node->safe_psql($DB,
		"SELECT count(*) > 0 FROM pg_stat_activity WHERE backend_type = 'retries worker'"
		  . " AND datname = 'iso'"),
	't', 'g: a database made before them keeps its workers');

$node->stop;
done_testing();
