# Twelfth hostile review (of 2896cd9, the day's changes since bc6e678), by
# a reviewer who did not write the code.  alice is the victim, mallory the
# attacker (an ordinary role with the default CONNECT and EXECUTE), bob a
# bystander.  Each numbered check failed on the code reviewed; the
# lettered ones held.  Fixed since, and plain checks now: 1 (the walk
# visits the 100 highest distinct priorities in use at most), 2 (a
# restore's COPY makes a database its own only if CREATE DATABASE left a
# note and no call or schedule was made before its moment).  3 stays a
# TODO, by design: code that runs as alice has her rights, whoever wrote
# it (documented in the reference's retries.retry).
#
# Sections, in order: a (a call made in a transaction that commits after
# the function's pause() returned does not run: no escape of a pause
# without retries.call()'s lock), c (schedules by id, alter_schedule), 3
# (mallory's invoker trigger asks for a retry of alice's call), 1 (the walk
# of distinct priorities, with one due call of a priority locked by a
# prepared transaction), b (a database owner's empty COPY in her copy of
# an ordinary database: refused), 2 (the same COPY in her copy of a
# database made by a superuser's schema-only restore: accepted, and the
# copy is never settled).  Databases of finished sections are dropped.
#
#   1. (Medium) claim.c any_prioritized() now asks only whether a claimable
#      call of a priority other than 0 is due; but a due call that no
#      worker can claim counts: mallory's call of priority 1, due now,
#      whose row her PREPAREd retries.cancel() keeps locked (the claims
#      skip locked rows; the probe does not lock).  Then PRIORITIES_CTE
#      walks every distinct priority of every claimable call (due or not)
#      at every claim of every role again: with mallory's 100,000 calls of
#      as many priorities due in a year, alice's calls of priority 0 start
#      3.4-9.2 s late instead of 0.003 s, for as long as the prepared
#      transaction lasts (the eleventh review's finding 4, back with one
#      locked row).  No transaction is needed either: while mallory's own
#      call of priority 1 runs (at a gate here), its row stays 'scheduled',
#      due and locked by the batch, and alice's calls start 2.8-3.5 s late.
#   2. (High; a superuser's schema-only restore first) a restore's CREATE
#      EXTENSION scatters the id sequences and only the dump's data puts
#      them back: after a schema-only restore into t2 (mallory's) they stay
#      scattered, restore_ids_scattered() stays true, and find_old_rows()
#      counts no row of t2, or of a copy of it, as made before a restore.
#      mallory copies t2 to c2 and at once runs, in c2, an empty COPY
#      retries.event_data FROM STDIN (as its owner): accepted, and
#      restore_copy_done() -> tables_restored_here() writes c2 into
#      retries.home, so c2's first worker takes the note for stale and
#      settles nothing: alice's copied call runs in c2 too, as alice, and
#      c2's search_path (mallory's) has it run mallory's md5() as alice.
#      (Here the workers are held off while mallory copies, for a
#      deterministic test; interactively, with them on, her COPY right
#      after CREATE DATABASE won 4 races of 5.)
#   3. (Low) retries.retry(after => ...) is honoured when GetUserId() has
#      the call's role's privileges: mallory's trigger function (SECURITY
#      INVOKER, the usual kind) on her table, which alice's function
#      inserts into, runs as alice, and puts alice's call off ten years
#      past her policy's max_delay (1 s).  The fix (1bfee7c) says triggers
#      are covered.
#
# Held:
#   a. mallory's call of alice's function, made in a transaction she
#      PREPAREs before alice's pause() and commits after it returned, is
#      held by the worker that claims it (the batch's gates are reloaded
#      when a pause committed since): it does not run until alice resumes.
#   c. mallory's pause_schedule/resume_schedule/trigger/unschedule of
#      alice's schedule's id are told no such schedule (42704), and her
#      alter_schedule() of its name finds none of hers; alice's schedule is
#      unchanged.
#   b. in mallory's copy of an ordinary database of hers (ids not
#      scattered), her empty COPY is refused (55000, rows made before), and
#      alice's copied call is settled (cancelled) there.

use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use RetriesTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

my $t0;
my $DB = 'postgres';
my $node = review_node('review_11');

sub sql
{
	my ($role, $sql, $db) = @_;
	return as_role($node, $db // $DB, $role, $sql);
}

review_roles($node, $DB);
sql('mallory', "CREATE TABLE mallory.t (n int); GRANT INSERT ON mallory.t TO PUBLIC;"
	  . " CREATE FUNCTION mallory.k(n int) RETURNS void LANGUAGE sql AS"
	  . " 'INSERT INTO mallory.t VALUES (n)';"
	  . " SELECT retries.annotate('mallory.k(int)', '1 10ms');");

# ---------------------------------------------------------------------
# a.  a call made before alice's pause() and committed after it
# ---------------------------------------------------------------------
sql('alice', "CREATE FUNCTION alice.svc(n int) RETURNS void LANGUAGE sql AS"
	  . " 'INSERT INTO alice.t VALUES (n)'; GRANT INSERT ON alice.t TO mallory;"
	  . " SELECT retries.annotate('alice.svc(int)', '1 10ms');");
my $ida = sql('mallory', "BEGIN; SELECT retries.call('alice.svc(int)', '[77]');"
	  . " PREPARE TRANSACTION 'mal_a';");
my ($out_a, $err_a) = try_as($node, $DB, 'alice',
	"SET lock_timeout = '5s'; SELECT retries.pause('alice.svc(int)');");
ok(defined $out_a, 'a: alice pauses her function beside mallory\'s prepared call of it')
  or diag($err_a);
$node->safe_psql($DB, "COMMIT PREPARED 'mal_a'");
note("a: mallory's prepared call $ida");
wait_until($node, $DB, "SELECT held FROM retries.call_data WHERE id = $ida", 't',
	'a: mallory\'s call committed after the pause is held by the worker', 60);
stays_true($node, $DB, "SELECT NOT EXISTS (SELECT FROM alice.t WHERE n = 77)"
	  . " AND (SELECT state = 'scheduled' FROM retries.call_data WHERE id = $ida)", 2,
	'a: it does not run while alice\'s function is paused');
sql('alice', "SELECT retries.resume('alice.svc(int)')");
call_reaches($node, $DB, $ida, 'succeeded', 'a: it runs once alice resumes', 60);

# ---------------------------------------------------------------------
# c.  schedules by id and alter_schedule: alice's schedule, mallory's
#     tries
# ---------------------------------------------------------------------
my $sch = sql('alice', "SELECT retries.schedule('nightly', 'alice.pay(int)', '1 day', '[8]')");
for my $f ('pause_schedule', 'resume_schedule', 'trigger', 'unschedule')
{
	my ($o, $e) = try_as($node, $DB, 'mallory', "SELECT retries.$f(${sch}::bigint)");
	ok(!defined $o && $e =~ /42704/, "c: mallory's retries.$f() of alice's schedule's id: no such schedule")
	  or diag($o // $e);
}
my ($out_c, $err_c) = try_as($node, $DB, 'mallory',
	"SELECT retries.alter_schedule('nightly', every => '1s')");
ok(!defined $out_c && $err_c =~ /42704/, 'c: mallory\'s alter_schedule() of alice\'s schedule\'s name: none of hers')
  or diag($out_c // $err_c);
is($node->safe_psql($DB, "SELECT every || ' ' || paused || ' ' || (last_run IS NULL)"
		  . " FROM retries.schedule_data WHERE id = $sch"),
	'1 day false true', 'c: alice\'s schedule is as she made it');
sql('alice', "SELECT retries.unschedule(${sch}::bigint)");

# ---------------------------------------------------------------------
# 3.  mallory's trigger (SECURITY INVOKER) on her table, which alice's
#     function writes to, asks for a retry of alice's call in ten years
# ---------------------------------------------------------------------
sql('mallory', "CREATE TABLE mallory.inbox (n int); GRANT INSERT ON mallory.inbox TO PUBLIC;"
	  . " CREATE FUNCTION mallory.park_trg() RETURNS trigger LANGUAGE plpgsql AS"
	  . " \$\$BEGIN PERFORM retries.retry('parked', after => interval '3650 days'); RETURN NEW; END\$\$;"
	  . " CREATE TRIGGER park BEFORE INSERT ON mallory.inbox FOR EACH ROW"
	  . " EXECUTE FUNCTION mallory.park_trg();");
sql('alice', "CREATE FUNCTION alice.post(n int) RETURNS void LANGUAGE sql AS"
	  . " 'INSERT INTO mallory.inbox VALUES (n)';"
	  . " SELECT retries.annotate('alice.post(int)', '3 10ms 1s');");
my $post = sql('alice', "SELECT retries.call('alice.post(int)', '[3]')");
wait_until($node, $DB, "SELECT count(*) > 0 FROM retries.attempt_data WHERE call_id = $post", 't',
	'3: alice\'s call has had an attempt', 60);
note('3: alice\'s call: ' . $node->safe_psql($DB,
		"SELECT state || ' / next ' || next_attempt || ' / ' || coalesce(last_message, '')"
		  . " FROM retries.call_data WHERE id = $post"));
TODO:
{
	local $TODO = 'finding 3 (Low, by design: code that runs as alice has her rights, whoever wrote it; documented in the reference)';
	is($node->safe_psql($DB, "SELECT bool_and(next_delay <= interval '1 second')"
			  . " FROM retries.attempt_data WHERE call_id = $post AND next_delay IS NOT NULL"),
		't', '3: mallory\'s trigger does not put alice\'s call off beyond her policy (1 s)');
}

# ---------------------------------------------------------------------
# 1.  one due call of a priority, locked, beside 100,000 distinct
#     priorities due in a year
# ---------------------------------------------------------------------
sub alice_lags
{
	my ($n) = @_;
	my @ids;
	push @ids, sql('alice', "SELECT retries.call('alice.pay(int)', '[40]')") for 1 .. $n;
	my $list = join(',', @ids);
	wait_until($node, $DB, "SELECT count(*) FROM retries.call_data WHERE id IN ($list)"
		  . " AND state = 'succeeded'", $n, "1: alice's $n calls run", 180);
	return $node->safe_psql($DB,
		"SELECT round(max(extract(epoch FROM a.started_at - c.created_at))::numeric, 3)"
		  . " FROM retries.call_data c JOIN retries.attempt_data a ON a.call_id = c.id"
		  . " WHERE c.id IN ($list)");
}
$t0 = time();
sql('mallory', "SELECT count(retries.call('mallory.k(int)', '[4]',"
	  . " run_at => now() + interval '1 year', priority => i)) FROM generate_series(2, 100001) i");
note(sprintf('1: mallory\'s 100,000 calls of priorities 2 to 100,001 made in %.1f s', time() - $t0));
my $ref1 = alice_lags(3);
note("1: alice's calls started at most $ref1 s after they were made, beside mallory's calls due in a year");
# mallory's call of priority 1, due in 3 s, whose row her prepared cancel() locks
my $due1 = sql('mallory', "SELECT retries.call('mallory.k(int)', '[5]',"
	  . " run_at => now() + interval '3 seconds', priority => 1)");
sql('mallory', "BEGIN; SELECT retries.cancel($due1); PREPARE TRANSACTION 'mal_1';");
wait_until($node, $DB, "SELECT next_attempt < now() AND state = 'scheduled'"
	  . " FROM retries.call_data WHERE id = $due1", 't',
	'1: mallory\'s locked call of priority 1 is due (and not claimed)', 30);
my $late1 = alice_lags(3);
note("1: alice's calls started at most $late1 s after they were made, beside mallory's locked due call");
TODO:
{
	cmp_ok($late1, '<', $ref1 + 1,
		'1: alice\'s calls start as soon beside mallory\'s locked due call of a priority as before it');
}
$node->safe_psql($DB, "ROLLBACK PREPARED 'mal_1'");
# the same with no transaction of hers: her own call of priority 1 that
# runs (its row stays 'scheduled', due, and locked by the batch)
my $G1 = 8401;
sql('mallory', "CREATE FUNCTION mallory.hold(n int) RETURNS void LANGUAGE sql AS"
	  . " 'SELECT " . gate_sql($G1) . "';"
	  . " SELECT retries.annotate('mallory.hold(int)', '1 10ms', timeout => '10min');");
my $g1 = close_gate($node, $DB, $G1);
my $run1 = sql('mallory', "SELECT retries.call('mallory.hold(int)', '[6]', priority => 1)");
wait_at_gate($node, $DB, $G1, 1, '1: mallory\'s call of priority 1 runs (at a gate)');
my $late1b = alice_lags(3);
note("1: alice's calls started at most $late1b s after they were made, beside mallory's running call of priority 1");
TODO:
{
	cmp_ok($late1b, '<', $ref1 + 1,
		'1: alice\'s calls start as soon beside mallory\'s running call of a priority as before it');
}
open_gate($g1);
call_reaches($node, $DB, $run1, 'succeeded', '1: mallory\'s call of priority 1 ends', 60);
$node->safe_psql($DB, "DELETE FROM retries.call_data WHERE scheduled_by = 'mallory'::regrole");

# ---------------------------------------------------------------------
# b.  mallory's "restore" COPY in her copy of a database of hers whose
#     rows have ids of their own (no restore): refused, the copy settled
# ---------------------------------------------------------------------
$node->safe_psql($DB, 'ALTER ROLE mallory CREATEDB');
$node->safe_psql($DB, 'CREATE DATABASE tb TEMPLATE template0 OWNER mallory');
$node->safe_psql('tb', 'CREATE EXTENSION retries; CREATE SCHEMA alice AUTHORIZATION alice;'
	  . ' GRANT USAGE ON SCHEMA alice TO PUBLIC;');
sql('alice', "CREATE TABLE alice.t (n int);"
	  . " CREATE FUNCTION alice.pay(n int) RETURNS void LANGUAGE sql AS 'INSERT INTO alice.t VALUES (n)';"
	  . " SELECT retries.annotate('alice.pay(int)', '1 10ms');", 'tb');
serving_off($node, $DB);
my $bcall = sql('alice', "SELECT retries.call('alice.pay(int)', '[9]')", 'tb');
sql('mallory', 'CREATE DATABASE cb TEMPLATE tb');
my ($out_b, $err_b) = try_as($node, 'cb', 'mallory', "COPY retries.event_data FROM STDIN;\n\\.\n");
ok(!defined $out_b && $err_b =~ /55000/,
	'b: mallory\'s empty COPY into the extension\'s tables of her copy cb is refused (rows made before)')
  or diag($out_b // $err_b);
serving_on($node, $DB);
call_reaches($node, 'cb', $bcall, 'cancelled', 'b: alice\'s copied call is settled in cb', 60);
call_reaches($node, 'tb', $bcall, 'succeeded', 'b: it runs in tb', 60);
$node->safe_psql($DB, 'DROP DATABASE cb WITH (FORCE)');
$node->safe_psql($DB, 'DROP DATABASE tb WITH (FORCE)');

# ---------------------------------------------------------------------
# 2.  a database made by a superuser's schema-only restore (its ids stay
#     scattered), owned by mallory: her empty COPY in her copy of it makes
#     the copy its own, and alice's copied call runs there, as alice,
#     with mallory's search_path
# ---------------------------------------------------------------------
$node->safe_psql($DB, 'CREATE DATABASE t2 TEMPLATE template0 OWNER mallory');
# as pg_dump --schema-only's output restores it (psql -f, a superuser)
$node->safe_psql('t2', "SET check_function_bodies = false;\nCREATE EXTENSION retries;\n"
	  . "CREATE SCHEMA alice AUTHORIZATION alice;\nCREATE SCHEMA mallory AUTHORIZATION mallory;\n"
	  . "GRANT USAGE ON SCHEMA alice, mallory TO PUBLIC;\n");
sql('alice', "CREATE TABLE alice.t (n int);"
	  . " CREATE FUNCTION alice.note(n int) RETURNS void LANGUAGE sql AS"
	  . " 'INSERT INTO alice.t VALUES (length(md5(n::text)))';"
	  . " SELECT retries.annotate('alice.note(int)', '1 10ms');", 't2');
serving_off($node, $DB);
my $c2call = sql('alice', "SELECT retries.call('alice.note(int)', '[20]')", 't2');
note("2: alice's call in t2: $c2call (ids scattered by the restore's CREATE EXTENSION)");
sql('mallory', 'CREATE DATABASE c2 TEMPLATE t2');
my ($out_2, $err_2) = try_as($node, 'c2', 'mallory', "COPY retries.event_data FROM STDIN;\n\\.\n");
ok(defined $out_2, '2: mallory\'s empty COPY into the extension\'s tables of her copy c2 is accepted')
  or diag($err_2);
note('2: retries.home of c2 names ' . $node->safe_psql('c2',
		"SELECT CASE WHEN datid = (SELECT oid FROM pg_database WHERE datname = 'c2')"
		  . " THEN 'c2' ELSE datid::text END FROM retries.home"));
sql('mallory', 'ALTER DATABASE c2 SET search_path = mallory, pg_catalog, public');
sql('mallory', q{
CREATE TABLE mallory.loot (who text);
GRANT INSERT, SELECT ON mallory.loot TO PUBLIC;
CREATE FUNCTION mallory.md5(t text) RETURNS text LANGUAGE sql AS
  'INSERT INTO mallory.loot SELECT current_user RETURNING who';
}, 'c2');
serving_on($node, $DB);
call_reaches($node, 't2', $c2call, 'succeeded', '2: alice\'s call runs in t2', 60);
wait_until($node, 'c2', "SELECT state IN ('cancelled', 'succeeded', 'failed')"
	  . " FROM retries.call_data WHERE id = $c2call", 't', '2: alice\'s copied call is settled or run in c2', 60);
my $loot2 = $node->safe_psql('c2', 'SELECT coalesce(string_agg(who, \',\'), \'\') FROM mallory.loot');
note("2: in c2 alice's call is " . $node->safe_psql('c2',
		"SELECT state || ' / ' || coalesce(last_message, '') FROM retries.call_data WHERE id = $c2call")
	  . "; mallory.loot: '$loot2'");
TODO:
{
	is($node->safe_psql('c2', "SELECT state FROM retries.call_data WHERE id = $c2call"),
		'cancelled', '2: alice\'s copied call is cancelled in mallory\'s copy c2');
	is($loot2, '', '2: mallory\'s md5() did not run as alice in c2');
}
$node->safe_psql($DB, 'DROP DATABASE c2 WITH (FORCE)');
$node->safe_psql($DB, 'DROP DATABASE t2 WITH (FORCE)');

done_testing();
