# Thirteenth hostile review (of 7c37b26, the final code of the trust
# issue), by a reviewer who did not write the code.  alice is the victim,
# mallory the attacker (an ordinary role with the default CONNECT and
# EXECUTE; the owner of databases mdb and rdb in sections 6 and 7), bob a
# bystander.  Each numbered check failed on the code reviewed (inside a
# TODO block named after its finding); the lettered ones held.  All seven
# findings are fixed since, and their checks plain: 1 (a role's claim walks
# its own priorities), 2 (a restore's COPY makes a copy of a 1.6 template
# its own), 3 (the walk skips calls another batch holds), 4 ('@reboot'
# armed once per server start), 5 (a batch of another role's code ends at
# a call of other code), 6 (refused database commands stop no worker), 7
# (a hook's signature is checked where it is called).
#
# Sections, in order: a (alice's call of priority 5 beside her own running
# call of priority 0, few priorities in use: it starts), 1 (the same beside
# mallory's 100 calls of priorities 1001..1100 due in 300 days: it waits;
# and her call of priority 7 runs after her 300 of priority 0), 3 (alice's
# running call of priority 5 of mallory's slow function: her own call of
# priority 5 waits for it), b (schedules by id and alter_schedule of
# alice's schedule by mallory), c (a command script cannot leave its role
# after a committed statement), 2 (a data-only restore into a database
# made from a template at 1.6: the restored call and schedule are settled
# as a copy's), 4 (a resumed '@reboot' schedule fires at a worker's new
# start), 5 (alice's own call, claimed and skipped in a batch of her calls
# of mallory's functions, waits for mallory's slow function), 6 (mallory's
# refused ALTER DATABASE mdb SET TABLESPACE stops mdb's workers and charges
# alice's running attempt; three times, and it has failed), 7 (mallory's
# restore COPY, in a fresh database she owns, of a policy whose delay_fn
# has the wrong signature: the worker calls it and dereferences what it
# returns).  Databases of finished sections are dropped.
#
#   1. (Medium) claim.c PRIORITIES_CTE visits the 100 highest distinct
#      priorities of every role's claimable calls (PRIORITIES_MAX), due or
#      not, and only then filters by role: mallory's 100 calls fill it, so
#      claim_prioritized() finds none of another role's calls of a priority
#      above 0; they are claimed only as their role's head (claim_heads:
#      its earliest due call of priority >= 0).  While alice's head is
#      locked (her running call), her due call of priority 5 waits for it;
#      and her batches lose their order of priority.  At 1.6,
#      claim_next_prioritized() walks the same 100 (a call due later starts
#      by the 10 s nap).
#   3. (Medium) claim_prioritized() picks ids without skipping locked rows
#      (LIMIT, then lock_claimed() SKIP LOCKED): with limit 1, for a role
#      whose head is locked (claim_of_role), it picks the role's running
#      call again and claims nothing, so the role's other due calls of that
#      priority or lower (above 0) wait for it -- here for mallory's
#      function, kept at her gate, with her timeout.  A call of priority 0
#      of alice's then takes them along in its batch.
#   2. (Medium, a template at 1.6) b956d01: restore_copy_done() calls
#      tables_restored_here() only if tables_not_a_copy(), false below 1.7,
#      so no COPY forgets CREATE DATABASE's note at 1.6 any more: after a
#      --data-only (or a non-superuser owner's) restore into a database
#      made from a template at 1.6, the first worker cancels alice's
#      restored call as copied and pauses her schedule.
#   4. (Low) schedule_arm_at_start() runs in each worker process's first
#      serving(): alice's '@reboot' schedule, paused across the server's
#      start and resumed after it, fires when any worker starts again --
#      which mallory causes with a call that traps its cancel.
#   5. (Medium) run_batch() claims the role's next calls whatever their
#      function's owner, and `continue`s past one of another owner than
#      the batch's first, which stays claimed (locked) until the batch
#      ends: after alice's call of mallory.quick(), her own call is
#      claimed and skipped, and mallory.slow() runs next in the batch;
#      alice's call waits for mallory's function (her timeout, up to
#      retries.max_attempt_time).
#   6. (Medium, the attacker owns the database) command_would_run() checks
#      only ownership for ALTER DATABASE ... SET TABLESPACE (not the
#      tablespace's privilege, nor anything else PostgreSQL checks before
#      it looks for sessions): mallory's refused command SIGTERMs mdb's
#      workers, and alice's running attempt is charged 'interrupted'; three
#      times and her call has failed.  (Also CREATE DATABASE ... TEMPLATE
#      mdb and RENAME to a name in use, and ALLOW_CONNECTIONS false through
#      the launcher, interactively.)
#   7. (High: memory safety) a restore writes policy_data directly, and the
#      owner's COPY is checked only for the roles its rows name; run_hook()
#      and evaluate_call() call a hook through a FuncExpr of the expected
#      argument Consts whatever the hook's signature, and choose_delay()
#      reads delay_fn's result with DatumGetIntervalP whatever it returns.
#      mallory's delay_fn m2.d(int, bigint, text) RETURNS bigint receives
#      the worker's text Datum as its address and returns it; the worker
#      reads 16 bytes there as an Interval.  Interactively an on_exhausted
#      m2.h(text), called with the call's id, crashed the server (signal
#      11, every backend restarted); any address the hook returns is read.
#
# Held:
#   a. the walk without mallory's priorities (control of 1).
#   b. mallory's pause_schedule/resume_schedule/trigger/unschedule by id
#      of alice's schedule: 42704; her alter_schedule() of its name (every
#      '@reboot', args, timezone) finds none of hers; alice's schedule is
#      unchanged.
#   c. a command's later statements run as its role: SET ROLE postgres,
#      and RESET ROLE with SET SESSION AUTHORIZATION postgres, after a
#      committed first statement, fail; current_user stays mallory.

use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use RetriesTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

my $DB = 'postgres';
my $node = review_node('review_12');

sub sql
{
	my ($role, $sql, $db) = @_;
	return as_role($node, $db // $DB, $role, $sql);
}

review_roles($node, $DB);
sql('mallory', "CREATE FUNCTION mallory.k(n int) RETURNS void LANGUAGE sql AS 'SELECT';"
	  . " SELECT retries.annotate('mallory.k(int)', '1 10ms');");

# ---------------------------------------------------------------------
# a.  alice's call of priority 5 beside her own running call of priority
#     0 (her head, locked), with few priorities in use: it starts
# ---------------------------------------------------------------------
my $G = 8501;
sql('alice', "CREATE FUNCTION alice.hold(n int) RETURNS void LANGUAGE sql AS"
	  . " 'SELECT " . gate_sql($G) . "';"
	  . " SELECT retries.annotate('alice.hold(int)', '1 10ms', timeout => '10min');");
my $gate = close_gate($node, $DB, $G);
my $holda = sql('alice', "SELECT retries.call('alice.hold(int)', '[1]')");
wait_at_gate($node, $DB, $G, 1, 'a: alice\'s call of priority 0 runs (at a gate)');
my $paya = sql('alice', "SELECT retries.call('alice.pay(int)', '[51]', priority => 5)");
call_reaches($node, $DB, $paya, 'succeeded',
	'a: beside it, her call of priority 5 starts (few priorities in use)', 30);

# ---------------------------------------------------------------------
# 1.  the same beside mallory's 100 calls of higher priorities, due in
#     300 days: alice's call of priority 5 waits for her running call
# ---------------------------------------------------------------------
sql('mallory', "SELECT count(retries.call('mallory.k(int)', '[1]',"
	  . " run_at => now() + interval '300 days', priority => 1000 + g))"
	  . " FROM generate_series(1, 100) g");
my $pay1 = sql('alice', "SELECT retries.call('alice.pay(int)', '[52]', priority => 5)");
{
	# finding 1, fixed since
	call_reaches($node, $DB, $pay1, 'succeeded',
		'1: alice\'s call of priority 5 starts beside her running call, whatever mallory\'s priorities', 10);
}
note('1: alice\'s call of priority 5: ' . $node->safe_psql($DB,
		"SELECT state FROM retries.call_data WHERE id = $pay1"));
open_gate($gate);
call_reaches($node, $DB, $pay1, 'succeeded', '1: it runs once her gated call ends', 60);
call_reaches($node, $DB, $holda, 'succeeded', '1: alice\'s gated call ends', 60);
# priorities within alice's batches: her call of priority 7 made after 300
# of priority 0 (the reference: it "runs in the next batch")
my $p7 = sql('alice', "BEGIN; SELECT count(retries.call('alice.pay(int)', '[60]'))"
	  . " FROM generate_series(1, 300); SELECT retries.call('alice.pay(int)', '[61]', priority => 7); COMMIT;");
($p7) = grep { /^\d+$/ && $_ ne '300' } split /\n/, $p7;
wait_until($node, $DB, "SELECT count(*) FROM retries.call_data WHERE scheduled_by = 'alice'::regrole"
	  . " AND state = 'scheduled'", '0', '1: alice\'s 301 calls run', 120);
# counted in the worker that ran it (attempt_data.pid): the other worker's
# batch of 100 may run whole before it on a loaded machine (it did once,
# beside four other suites), which says nothing of the order within batches
my $before7 = $node->safe_psql($DB, "SELECT count(*) FROM retries.attempt_data a"
	  . " JOIN retries.call_data c ON c.id = a.call_id WHERE c.scheduled_by = 'alice'::regrole"
	  . " AND c.args = '[\"60\"]' AND EXISTS (SELECT FROM retries.attempt_data s WHERE s.call_id = $p7"
	  . " AND s.pid = a.pid AND s.started_at > a.started_at)");
note("1: of alice's 300 calls of priority 0, $before7 started before her call of priority 7 in its worker");
{
	# finding 1, fixed since
	cmp_ok($before7, '<', 100, '1: alice\'s call of priority 7 runs before most of her backlog of priority 0');
}
$node->safe_psql($DB, "DELETE FROM retries.call_data WHERE scheduled_by = 'mallory'::regrole");

# ---------------------------------------------------------------------
# 3.  alice's call of priority 5 of mallory's function, which mallory
#     keeps running (her gate, her timeout): alice's other calls of
#     priority 5 wait for it; one of priority 0 runs
# ---------------------------------------------------------------------
my $G3 = 8503;
sql('mallory', "CREATE FUNCTION mallory.svc(n int) RETURNS void LANGUAGE sql AS"
	  . " 'SELECT " . gate_sql($G3) . "';"
	  . " GRANT EXECUTE ON FUNCTION mallory.svc(int) TO PUBLIC;"
	  . " SELECT retries.annotate('mallory.svc(int)', '1 10ms', timeout => '1h');");
my $gate3 = close_gate($node, $DB, $G3);
my $svc3 = sql('alice', "SELECT retries.call('mallory.svc(int)', '[1]', priority => 5)");
wait_at_gate($node, $DB, $G3, 1, '3: alice\'s call of mallory\'s function runs (at mallory\'s gate)');
my $pay3 = sql('alice', "SELECT retries.call('alice.pay(int)', '[53]', priority => 5)");
{
	# finding 3, fixed since
	call_reaches($node, $DB, $pay3, 'succeeded',
		'3: alice\'s call of priority 5 starts while her call of mallory\'s function runs', 10);
}
my $pay30 = sql('alice', "SELECT retries.call('alice.pay(int)', '[54]')");
call_reaches($node, $DB, $pay30, 'succeeded', '3: her call of priority 0 runs meanwhile', 30);
note('3: alice\'s call of priority 5 after her call of priority 0 ran: ' . $node->safe_psql($DB,
		"SELECT state FROM retries.call_data WHERE id = $pay3") . ' (taken along by its batch, interactively)');
open_gate($gate3);
call_reaches($node, $DB, $pay3, 'succeeded', '3: her call of priority 5 runs', 60);
call_reaches($node, $DB, $svc3, 'succeeded', '3: alice\'s call of mallory\'s function ends', 60);

# ---------------------------------------------------------------------
# b.  schedules by id, alter_schedule and '@reboot' across roles
# ---------------------------------------------------------------------
my $sch = sql('alice', "SELECT retries.schedule('nightly', 'alice.pay(int)', '1 day', '[8]')");
for my $f ('pause_schedule', 'resume_schedule', 'trigger', 'unschedule')
{
	my ($o, $e) = try_as($node, $DB, 'mallory', "SELECT retries.$f(${sch}::bigint)");
	ok(!defined $o && $e =~ /42704/, "b: mallory's retries.$f() of alice's schedule's id: no such schedule")
	  or diag($o // $e);
}
for my $args ("every => '\@reboot'", "args => '[666]'", "timezone => 'Pacific/Chatham'")
{
	my ($o, $e) = try_as($node, $DB, 'mallory', "SELECT retries.alter_schedule('nightly', $args)");
	ok(!defined $o && $e =~ /42704/, "b: mallory's alter_schedule('nightly', $args) finds none of hers")
	  or diag($o // $e);
}
is($node->safe_psql($DB, "SELECT every || ' ' || args::text || ' ' || paused"
		  . " FROM retries.schedule_data WHERE id = $sch"),
	'1 day ["8"] false', 'b: alice\'s schedule is as she made it');
sql('alice', "SELECT retries.unschedule(${sch}::bigint)");

# ---------------------------------------------------------------------
# c.  a command script of mallory's cannot leave her role in a later
#     statement, after its first committed
# ---------------------------------------------------------------------
sql('mallory', "CREATE TABLE mallory.who (step int, who text);");
my $cmd = sql('mallory', q{SELECT retries.run_command(
  $c$INSERT INTO mallory.who VALUES (1, current_user);
SET ROLE postgres;
INSERT INTO mallory.who VALUES (2, current_user)$c$, policy => '1 10ms')});
wait_until($node, $DB, "SELECT state IN ('failed', 'succeeded') FROM retries.call_data WHERE id = $cmd",
	't', 'c: mallory\'s command with SET ROLE postgres ends', 60);
my $cmd2 = sql('mallory', q{SELECT retries.run_command(
  $c$INSERT INTO mallory.who VALUES (3, current_user);
RESET ROLE; SET SESSION AUTHORIZATION postgres;
INSERT INTO mallory.who VALUES (4, current_user)$c$, policy => '1 10ms')});
wait_until($node, $DB, "SELECT state IN ('failed', 'succeeded') FROM retries.call_data WHERE id = $cmd2",
	't', 'c: mallory\'s command with SET SESSION AUTHORIZATION ends', 60);
is($node->safe_psql($DB, "SELECT string_agg(step || ':' || who, ',' ORDER BY step) FROM mallory.who"),
	'1:mallory,3:mallory',
	'c: only the first statements ran, as mallory; the role changes failed');

# ---------------------------------------------------------------------
# 2.  a data-only restore into a database made from a template at 1.6:
#     the restored call is settled as a copy's
# ---------------------------------------------------------------------
$node->safe_psql($DB, 'CREATE DATABASE tpl16 TEMPLATE template0');
$node->safe_psql('tpl16', "CREATE EXTENSION retries VERSION '1.6'");
$node->safe_psql($DB, 'CREATE DATABASE src16 TEMPLATE template0');
my $schema = "CREATE EXTENSION IF NOT EXISTS retries VERSION '1.6';"
  . " CREATE SCHEMA alice AUTHORIZATION alice; GRANT USAGE ON SCHEMA alice TO PUBLIC;"
  . " SET ROLE alice; CREATE TABLE alice.t (n int);"
  . " CREATE FUNCTION alice.pay(n int) RETURNS void LANGUAGE sql AS 'INSERT INTO alice.t VALUES (n)';";
$node->safe_psql('src16', $schema . " SELECT retries.annotate('alice.pay(int)', '1 10ms');");
serving_off($node, $DB);
my $rcall = sql('alice', "SELECT retries.call('alice.pay(int)', '[16]')", 'src16');
my $rsch = sql('alice', "SELECT retries.schedule('hourly16', 'alice.pay(int)', '1 hour', '[17]')", 'src16');
my $dump = $PostgreSQL::Test::Utils::tmp_check . '/rv13_src16.sql';
$node->command_ok([ 'pg_dump', '--data-only', '-d', $node->connstr('src16'), '-f', $dump ],
	'2: pg_dump --data-only of src16');
$node->safe_psql($DB, 'CREATE DATABASE dst16 TEMPLATE tpl16 OWNER bob');
# the schema as the owner's restore (or the superuser's) makes it, then the data
$node->safe_psql('dst16', $schema);
$node->safe_psql('dst16', slurp_file($dump));
is($node->safe_psql('dst16', "SELECT state FROM retries.call_data WHERE id = $rcall"),
	'scheduled', '2: alice\'s call is restored into dst16');
serving_on($node, $DB);
call_reaches($node, 'src16', $rcall, 'succeeded', '2: alice\'s call runs in src16', 60);
wait_until($node, 'dst16', "SELECT state <> 'scheduled' FROM retries.call_data WHERE id = $rcall",
	't', '2: the workers take alice\'s restored call in dst16', 60);
note('2: in dst16 alice\'s call is ' . $node->safe_psql('dst16',
		"SELECT state || ' / ' || coalesce(last_message, '') FROM retries.call_data WHERE id = $rcall"));
{
	# finding 2, fixed since
	is($node->safe_psql('dst16', "SELECT coalesce(last_message, '') LIKE 'copied with database%'"
			  . " FROM retries.call_data WHERE id = $rcall"),
		'f', '2: alice\'s restored call is not settled as a copy\'s in dst16');
	is($node->safe_psql('dst16', "SELECT paused FROM retries.schedule_data WHERE id = $rsch"),
		'f', '2: alice\'s restored schedule is not paused in dst16');
}
$node->safe_psql($DB, 'DROP DATABASE dst16 WITH (FORCE)');
$node->safe_psql($DB, 'DROP DATABASE src16 WITH (FORCE)');
$node->safe_psql($DB, 'DROP DATABASE tpl16 WITH (FORCE)');

# ---------------------------------------------------------------------
# 4.  alice's '@reboot' schedule, paused across the server's start and
#     resumed after it, fires when mallory has a worker start again
# ---------------------------------------------------------------------
my $boot = sql('alice', "SELECT retries.schedule('boot4', 'alice.pay(int)', '\@reboot', '[404]');"
	  . " SELECT retries.pause_schedule('boot4')");
$node->restart;
my $first = sql('alice', "SELECT retries.call('alice.pay(int)', '[405]')");
call_reaches($node, $DB, $first, 'succeeded', '4: the workers serve after the start', 60);
sql('alice', "SELECT retries.resume_schedule('boot4')");
stays_true($node, $DB, "SELECT last_run IS NULL FROM retries.schedule_data WHERE name = 'boot4'", 2,
	'4: alice\'s resumed @reboot schedule does not fire (the start is past)');
sql('mallory', q{CREATE FUNCTION mallory.trap() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  LOOP
    BEGIN
      PERFORM pg_sleep(10);  -- not a wait: the call that traps its cancel, cut at its timeout
    EXCEPTION WHEN query_canceled THEN NULL;
    END;
  END LOOP;
END $$;
SELECT retries.annotate('mallory.trap()', '1 10ms', timeout => '1 second');});
my $trap = sql('mallory', "SELECT retries.call('mallory.trap()')");
wait_until($node, $DB, "SELECT count(*) > 0 FROM retries.attempt_data WHERE call_id = $trap"
	  . " AND outcome = 'interrupted'", 't',
	'4: mallory\'s call that traps its cancel makes its worker exit', 60);
{
	# finding 4, fixed since
	stays_true($node, $DB, "SELECT last_run IS NULL FROM retries.schedule_data WHERE name = 'boot4'", 8,
		'4: alice\'s @reboot schedule does not fire at a worker\'s new start');
}
note('4: alice\'s @reboot schedule last ran at ' . $node->safe_psql($DB,
		"SELECT coalesce(last_run::text, 'never') FROM retries.schedule_data WHERE name = 'boot4'")
	  . ', the server started at ' . $node->safe_psql($DB, 'SELECT pg_postmaster_start_time()'));
sql('alice', "SELECT retries.unschedule('boot4')");

# ---------------------------------------------------------------------
# 5.  alice's own call, claimed in a batch of her calls of mallory's
#     functions and left there (another owner's code), waits for
#     mallory's slow function: its row stays locked by the batch
# ---------------------------------------------------------------------
$node->safe_psql($DB, 'ALTER SYSTEM SET retries.max_extra_workers = 0; SELECT pg_reload_conf()');
wait_until($node, $DB, 'SHOW retries.max_extra_workers', '0', '5: no extra workers');
my ($GB, $GM) = (8505, 8506);
sql('bob', "CREATE FUNCTION bob.hold() RETURNS void LANGUAGE sql AS 'SELECT " . gate_sql($GB) . "';"
	  . " SELECT retries.annotate('bob.hold()', '1 10ms', timeout => '10min');");
sql('mallory', "CREATE FUNCTION mallory.quick() RETURNS void LANGUAGE sql AS 'SELECT';"
	  . " CREATE FUNCTION mallory.slow() RETURNS void LANGUAGE sql AS 'SELECT " . gate_sql($GM) . "';"
	  . " GRANT EXECUTE ON FUNCTION mallory.quick(), mallory.slow() TO PUBLIC;"
	  . " SELECT retries.annotate('mallory.quick()', '1 10ms');"
	  . " SELECT retries.annotate('mallory.slow()', '1 10ms', timeout => '1h');");
my $gb = close_gate($node, $DB, $GB);
my $gm = close_gate($node, $DB, $GM);
# bob's call keeps one of the two workers, so that one batch claims alice's calls
my $bobc = sql('bob', "SELECT retries.call('bob.hold()')");
wait_at_gate($node, $DB, $GB, 1, '5: bob\'s call holds one worker (at a gate)');
my @c5 = split /\n/, sql('alice', "BEGIN;"
	  . " SELECT retries.call('mallory.quick()', run_at => now() + interval '2 s');"
	  . " SELECT retries.call('alice.pay(int)', '[55]', run_at => now() + interval '2.001 s');"
	  . " SELECT retries.call('mallory.slow()', run_at => now() + interval '2.002 s');"
	  . " COMMIT;");
my ($quick5, $own5, $slow5) = grep { /^\d+$/ } @c5;
wait_at_gate($node, $DB, $GM, 1, '5: alice\'s call of mallory\'s slow function runs (at mallory\'s gate)');
open_gate($gb);
call_reaches($node, $DB, $bobc, 'succeeded', '5: bob\'s call ends: a worker is free', 60);
my $wake5 = sql('alice', "SELECT retries.call('alice.pay(int)', '[56]')");
call_reaches($node, $DB, $wake5, 'succeeded', '5: the free worker runs alice\'s new call', 30);
{
	# finding 5, fixed since
	call_reaches($node, $DB, $own5, 'succeeded',
		'5: alice\'s own call does not wait for mallory\'s slow function', 10);
}
note('5: alice\'s own call: ' . $node->safe_psql($DB, "SELECT state FROM retries.call_data WHERE id = $own5"));
open_gate($gm);
call_reaches($node, $DB, $own5, 'succeeded', '5: it runs once mallory\'s function returns', 60);
call_reaches($node, $DB, $slow5, 'succeeded', '5: alice\'s call of mallory\'s slow function ends', 60);
$node->safe_psql($DB, 'ALTER SYSTEM RESET retries.max_extra_workers; SELECT pg_reload_conf()');

# ---------------------------------------------------------------------
# 6.  mallory owns database mdb: her ALTER DATABASE mdb SET TABLESPACE,
#     refused for want of the tablespace's privilege, stops mdb's workers
#     all the same, and alice's running call is charged an interrupted
#     attempt each time: three times, and it has failed
# ---------------------------------------------------------------------
$node->safe_psql($DB, 'CREATE DATABASE mdb OWNER mallory');
$node->safe_psql('mdb', 'CREATE EXTENSION retries; CREATE SCHEMA alice AUTHORIZATION alice;');
my $G6 = 8507;
sql('alice', "CREATE FUNCTION alice.hold(n int) RETURNS void LANGUAGE sql AS"
	  . " 'SELECT " . gate_sql($G6) . "';"
	  . " SELECT retries.annotate('alice.hold(int)', '2 10ms', timeout => '10min');", 'mdb');
my $gate6 = close_gate($node, 'mdb', $G6);
my $c6 = sql('alice', "SELECT retries.call('alice.hold(int)', '[6]')", 'mdb');
for my $round (1 .. 3)
{
	wait_until($node, 'mdb', "SELECT (" . gate_waiters($G6) . ") >= 1"
		  . " OR (SELECT state FROM retries.call_data WHERE id = $c6) = 'failed'", 't',
		"6: alice's call runs in mdb (at a gate), or has failed (round $round)");
	my ($o6, $e6) = try_as($node, $DB, 'mallory', 'ALTER DATABASE mdb SET TABLESPACE pg_default');
	ok(!defined $o6 && $e6 =~ /42501/, "6: mallory's ALTER DATABASE mdb SET TABLESPACE is refused (round $round)")
	  or diag($o6 // $e6);
}
wait_until($node, 'mdb', "SELECT (" . gate_waiters($G6) . ") >= 1"
	  . " OR (SELECT state FROM retries.call_data WHERE id = $c6) = 'failed'", 't',
	'6: alice\'s call runs again, or has failed');
note('6: alice\'s call in mdb: ' . $node->safe_psql('mdb',
		"SELECT state || ' / ' || attempts || ' attempts / ' || coalesce(last_message, '')"
		  . " FROM retries.call_data WHERE id = $c6"));
{
	# finding 6, fixed since
	is($node->safe_psql('mdb', "SELECT count(*) FROM retries.attempt_data WHERE call_id = $c6"
			  . " AND outcome = 'interrupted'"),
		'0', '6: mallory\'s refused commands charge alice\'s call no attempt');
}
open_gate($gate6);
$node->safe_psql($DB, 'DROP DATABASE mdb WITH (FORCE)');

# ---------------------------------------------------------------------
# 7.  mallory owns a fresh database rdb with the extension (the owner's
#     restore of operations.md): her restore's COPY loads a policy whose
#     delay_fn is a function of hers of the wrong signature (its second
#     parameter bigint, returning bigint); the worker calls it with a text
#     Datum, which it receives as the pointer's value, and reads the
#     bigint it returns as a pointer to an Interval.  (Interactively, an
#     on_exhausted hook of hers taking text, called with the call's id,
#     crashed the server: signal 11, every backend restarted.)
# ---------------------------------------------------------------------
$node->safe_psql($DB, 'CREATE DATABASE rdb OWNER mallory');
$node->safe_psql('rdb', 'CREATE EXTENSION retries; CREATE SCHEMA m2 AUTHORIZATION mallory;');
sql('mallory', q{
CREATE TABLE m2.leak (v text);
CREATE FUNCTION m2.f(n int) RETURNS void LANGUAGE plpgsql AS
  $$BEGIN RAISE EXCEPTION 'again' USING ERRCODE = 'RT000'; END$$;
CREATE FUNCTION m2.d(a int, s bigint, m text) RETURNS bigint LANGUAGE plpgsql AS
  $$BEGIN INSERT INTO m2.leak VALUES ('second argument as bigint: ' || s); RETURN s; END$$;
}, 'rdb');
my ($f7, $d7, $origin7) = split /\|/, sql('mallory',
	"SELECT 'm2.f(int)'::regprocedure::oid || '|' || 'm2.d(int,bigint,text)'::regprocedure::oid"
	  . " || '|' || retries.origin()", 'rdb');
my ($o7, $e7) = try_as($node, 'rdb', 'mallory', "BEGIN;\n"
	  . "COPY retries.function_names (key, fn, signature, owner, origin) FROM STDIN;\n"
	  . "900001\t$f7\tm2.f(integer)\tmallory\t$origin7\n"
	  . "900003\t$d7\tm2.d(integer,bigint,text)\tmallory\t$origin7\n\\.\n"
	  . "COPY retries.policy_data (id, fn, fn_signature, is_current, max_attempts, min_delay,"
	  . " max_delay, multiplier, jitter, retry_on, timeout, on_exhausted, delay_fn, annotated_by,"
	  . " annotated_at, notify, key_window, debounce_max) FROM STDIN;\n"
	  . "1\t900001\tm2.f(integer)\tt\t3\t00:00:00.01\t\\N\t2\tnone\t{RT}\t\\N\t\\N\t900003\tmallory"
	  . "\t2026-01-01 00:00:00+00\tf\t\\N\t\\N\n\\.\nCOMMIT;\n");
note('7: mallory\'s COPY of the forged policy: ' . (defined $o7 ? 'accepted' : "refused: $e7"));
my $leak7 = '';
if (defined $o7)
{
	my $c7 = sql('mallory', "SELECT retries.call('m2.f(int)', '[1]')", 'rdb');
	wait_until($node, 'rdb', "SELECT count(*) > 0 FROM retries.attempt_data WHERE call_id = $c7", 't',
		'7: mallory\'s call has had an attempt', 60);
	$leak7 = $node->safe_psql('rdb', "SELECT coalesce(string_agg(v, ', '), '') FROM m2.leak");
	note("7: m2.leak: '$leak7'; the call: " . $node->safe_psql('rdb',
			"SELECT state || ' / next attempt in ' || (next_attempt - now()) FROM retries.call_data WHERE id = $c7"));
}
{
	# finding 7, fixed since
	is($leak7, '', '7: a hook of the wrong signature that the owner\'s restore brought is refused, not called');
}
$node->safe_psql($DB, 'DROP DATABASE rdb WITH (FORCE)');

done_testing();
