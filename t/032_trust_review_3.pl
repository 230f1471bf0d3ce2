# Fourth hostile review (of 6d54be4: defaults and domain checks refused,
# containment by function owner, capacity by code holder, name locks), by
# a reviewer who did not write the code.  alice and bob are victims, and
# the bootstrap superuser; mallory the attacker.  Each numbered check
# failed on the code reviewed, and holds since: a function of another role
# (not a superuser) whose defaults are not constants, or any function one
# of whose parameters is of another role's domain with checks, is refused
# when the call is made (42501), and at each attempt; an extra worker
# passes over a call whose code is that of a role that holds another
# worker.  The findings:
#   1. a DEFAULT of mallory's that calls a superuser's function that runs
#      SQL text (retries.run_command) is "trusted": the superuser's call of
#      mallory's function schedules ALTER ROLE mallory SUPERUSER as the
#      superuser, and mallory becomes one.
#   2. a procedure's DEFAULT of mallory's domain: check_defaults' static
#      walk does not see the domain's CHECK (CoerceToDomain), which runs
#      mallory's function in the runner, as the superuser.
#   3. an extra worker takes alice's due calls of mallory's slow function
#      (alice holds no worker: they count as mallory's), so mallory's code
#      holds both workers and both extras, with one role; bob's due call
#      waits for it (the documented bound needs four roles).
#   4. retries.call() itself converts the arguments in the caller's
#      session at scheduling time: the CHECK of mallory's domain runs
#      mallory's function as the superuser who schedules the call.
#
# Held (plain checks):
#   a. a default that runs mallory's function through query_to_xml() (SQL
#      text of a built-in) is refused (42501, now when the call is made).
#   b. a default that uses mallory's operator is refused (42501).
#   c. an array of a domain over mallory's domain is refused (42501).
#   d. alice's own defaults (nextval of her sequence, now(), her function)
#      still work.
#   e. mallory holding her event's name lock in an open transaction does
#      not delay alice's emit or debounce of the same name.
#   f. under REPEATABLE READ, a call made on_event after the event was
#      emitted (after the transaction's snapshot) does not wait.
#   g. extra workers never exceed retries.max_extra_workers.

use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use RetriesTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

my $DB = 'postgres';
my $node = retries_node('trust_review_3');
$node->append_conf('postgresql.conf', q{
retries.max_workers = 2
retries.max_extra_workers = 2
retries.max_attempt_time = '1h'
});
$node->start;

sub sql
{
	my ($role, $sql, $db) = @_;
	return $node->safe_psql($db // $DB, "SET ROLE $role;\n$sql");
}

# the final state of call ID (succeeded or failed), and its SQLSTATE
sub final_state
{
	my ($id, $name) = @_;
	wait_until($node, $DB,
		"SELECT state IN ('succeeded', 'failed') FROM retries.calls WHERE id = $id",
		't', "$name (ends)");
	return $node->safe_psql($DB,
		"SELECT state || ' ' || coalesce(last_sqlstate, '') FROM retries.calls WHERE id = $id");
}

$node->safe_psql($DB, q{
CREATE EXTENSION retries;
CREATE ROLE alice LOGIN;
CREATE ROLE bob LOGIN;
CREATE ROLE mallory LOGIN;
CREATE SCHEMA alice AUTHORIZATION alice;
CREATE SCHEMA bob AUTHORIZATION bob;
CREATE SCHEMA mallory AUTHORIZATION mallory;
GRANT USAGE ON SCHEMA mallory TO PUBLIC;
});
sql('mallory', q{
CREATE TABLE mallory.loot (v text);
GRANT INSERT ON mallory.loot TO PUBLIC;
CREATE FUNCTION mallory.grab(x int) RETURNS bool LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO mallory.loot VALUES ('grab as ' || current_user);
	RETURN true;
END $$;
CREATE FUNCTION mallory.g0() RETURNS int LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO mallory.loot VALUES ('g0 as ' || current_user);
	RETURN 1;
END $$;
CREATE FUNCTION mallory.plus(int, int) RETURNS int LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO mallory.loot VALUES ('op as ' || current_user);
	RETURN $1 + $2;
END $$;
CREATE OPERATOR mallory.### (function = mallory.plus, leftarg = int, rightarg = int);
CREATE DOMAIN mallory.d AS int CHECK (mallory.grab(VALUE));
CREATE DOMAIN mallory.d2 AS mallory.d;
CREATE FUNCTION mallory.api(n int,
	id bigint DEFAULT retries.run_command('ALTER ROLE mallory SUPERUSER'))
	RETURNS int LANGUAGE sql SECURITY DEFINER AS 'SELECT n';
CREATE PROCEDURE mallory.p(n int, x mallory.d DEFAULT 5)
	LANGUAGE plpgsql SECURITY DEFINER AS $$ BEGIN NULL; END $$;
CREATE FUNCTION mallory.f(n int, x mallory.d) RETURNS int LANGUAGE sql
	SECURITY DEFINER AS 'SELECT n';
CREATE FUNCTION mallory.q(n int,
	x xml DEFAULT query_to_xml('select mallory.g0()', true, false, ''))
	RETURNS int LANGUAGE sql SECURITY DEFINER AS 'SELECT n';
CREATE FUNCTION mallory.o(n int, x int DEFAULT 1 OPERATOR(mallory.###) 2)
	RETURNS int LANGUAGE sql SECURITY DEFINER AS 'SELECT n';
CREATE FUNCTION mallory.a(x mallory.d2[]) RETURNS int LANGUAGE sql
	SECURITY DEFINER AS 'SELECT 1';
CREATE FUNCTION mallory.hold() RETURNS int LANGUAGE sql
	AS $$ SELECT } . gate_sql(51) . q{; SELECT 1 $$;
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA mallory TO PUBLIC;
GRANT EXECUTE ON ALL PROCEDURES IN SCHEMA mallory TO PUBLIC;
SELECT retries.annotate('mallory.api(int,bigint)', '1 10ms');
SELECT retries.annotate('mallory.p(int,mallory.d)', '1 10ms');
SELECT retries.annotate('mallory.f(int,mallory.d)', '1 10ms');
SELECT retries.annotate('mallory.q(int,xml)', '1 10ms');
SELECT retries.annotate('mallory.o(int,int)', '1 10ms');
SELECT retries.annotate('mallory.a(mallory.d2[])', '1 10ms');
SELECT retries.annotate('mallory.hold()', '1 10ms');
CREATE FUNCTION mallory.noop(n int) RETURNS int LANGUAGE sql AS 'SELECT n';
SELECT retries.annotate('mallory.noop(int)', '1 10ms');
});
sql('alice', q{
CREATE SEQUENCE alice.s;
CREATE FUNCTION alice.h() RETURNS int LANGUAGE plpgsql AS 'BEGIN RETURN 7; END';
CREATE FUNCTION alice.own(n int, a bigint DEFAULT nextval('alice.s'),
	b timestamptz DEFAULT now(), c int DEFAULT alice.h()) RETURNS text
	LANGUAGE sql AS $$ SELECT format('%s %s %s', a, b IS NOT NULL, c) $$;
SELECT retries.annotate('alice.own(int,bigint,timestamptz,int)', '1 10ms');
CREATE FUNCTION alice.work(n int) RETURNS int LANGUAGE sql AS 'SELECT n';
SELECT retries.annotate('alice.work(int)', '1 10ms');
});
sql('bob', q{
CREATE FUNCTION bob.work(n int) RETURNS int LANGUAGE sql AS 'SELECT n';
SELECT retries.annotate('bob.work(int)', '1 10ms');
});
wait_until($node, $DB, workers_query($DB), '2', 'two workers');

my $loot = "SELECT count(*) FROM mallory.loot WHERE v LIKE '%as "
  . $node->safe_psql($DB, 'SELECT current_user') . "'";

# ---------------------------------------------------------------------------
# 1, 2, 4, a, b, c: refused when the call is made, nothing of mallory's run
{
	$node->safe_psql($DB, 'TRUNCATE mallory.loot');
	for my $case (
		[ '1', 'mallory.api(int,bigint)', '[1]', 'a default that schedules SQL text' ],
		[ '2', 'mallory.p(int,mallory.d)', '[1]', 'a procedure whose default is of mallory\'s domain' ],
		[ '4', 'mallory.f(int,mallory.d)', '[1, 9]', 'an argument of mallory\'s domain' ],
		[ 'a', 'mallory.q(int,xml)', '[1]', 'a default that runs mallory\'s function through query_to_xml' ],
		[ 'b', 'mallory.o(int,int)', '[1]', 'a default that uses mallory\'s operator' ],
		[ 'c', 'mallory.a(mallory.d2[])', '[[3]]', 'an array of a domain over mallory\'s domain' ])
	{
		my ($n, $fn, $args, $what) = @$case;
		my ($ret, $out, $err) = $node->psql($DB,
			"\\set VERBOSITY verbose\nSELECT retries.call('$fn', '$args')");
		like($err, qr/42501/, "$n: the superuser's call with $what is refused");
	}
	is($node->safe_psql($DB, "SELECT rolsuper FROM pg_roles WHERE rolname = 'mallory'"),
		'f', '1: mallory did not make herself a superuser through her default');
	is($node->safe_psql($DB, "SELECT count(*) FROM retries.calls WHERE command IS NOT NULL"),
		'0', '1: (no command was scheduled)');
	is($node->safe_psql($DB, $loot), '0', '2, 4, a, b: nothing of mallory\'s ran as the superuser');
	# passing the argument whose default it was makes the call
	my $c = $node->safe_psql($DB, "SELECT retries.call('mallory.api(int,bigint)', '[1, 0]')");
	is(final_state($c, '1'), 'succeeded ', '1: (the call that passes the argument runs)');
}

# ---------------------------------------------------------------------------
# d. alice's own defaults still work
{
	my $c = sql('alice', "SELECT retries.call('alice.own(int,bigint,timestamptz,int)', '[1]')");
	is(final_state($c, 'd'), 'succeeded ', 'd: alice\'s own defaults run');
	is(sql('alice', "SELECT result #>> '{}' FROM retries.calls WHERE id = $c"),
		'1 t 7', 'd: nextval, now() and her function in her defaults');
}

# ---------------------------------------------------------------------------
# e. mallory's name locks do not touch alice's names
{
	my $m = $node->background_psql($DB);
	$m->query_safe('SET ROLE mallory');
	$m->query_safe('BEGIN');
	$m->query_safe("SELECT retries.emit('paid:1')");
	$m->query_safe("SELECT retries.call('mallory.noop(int)', '[1]', key => 'k1', debounce => '1 h')");
	my $t0 = time();
	my ($ret, $out, $err) = $node->psql($DB, q{
SET ROLE alice;
SET statement_timeout = '20s';
SELECT retries.emit('paid:1');
SELECT retries.call('alice.work(int)', '[1]', key => 'k1', debounce => '1 h') > 0;
});
	is($ret . ' ' . ($err // ''), '0 ', 'e: alice emits and debounces the names mallory holds, without error');
	ok(time() - $t0 < 20, 'e: (without waiting for mallory)');
	my ($o2, $e2) = try_as($node, $DB, 'alice', 'SELECT count(*) FROM retries.name_lock');
	like($e2, qr/permission denied/, 'e: alice cannot read name_lock');
	$m->query_safe('ROLLBACK');
	$m->quit;
}

# ---------------------------------------------------------------------------
# f. REPEATABLE READ: a waiter made after the event's emit does not wait
{
	my $rr = $node->background_psql($DB);
	$rr->query_safe('SET ROLE alice');
	$rr->query_safe('BEGIN ISOLATION LEVEL REPEATABLE READ');
	$rr->query_safe('SELECT count(*) FROM pg_class');
	sql('alice', "SELECT retries.emit('rr:1')");
	my $c = $rr->query_safe("SELECT retries.call('alice.work(int)', '[5]', on_event => 'rr:1')");
	$rr->query_safe('COMMIT');
	$rr->quit;
	$c =~ s/\s+//g;
	call_reaches($node, $DB, $c, 'succeeded',
		'f: a call made under REPEATABLE READ after its event was emitted runs');
}

# ---------------------------------------------------------------------------
# 3. alice's calls of mallory's slow function do not take the extras
{
	my $extras = "SELECT count(*) FROM pg_stat_activity"
	  . " WHERE backend_type = 'retries extra worker' AND datname = '$DB'";
	my $g = close_gate($node, $DB, 51);
	my @held;
	for my $n (1 .. 4)
	{
		push @held, sql('alice', "SELECT retries.call('mallory.hold()')");
		wait_at_gate($node, $DB, 51, $n, "3: alice's call $n of mallory's function runs") if $n <= 2;
	}
	my $w = sql('bob', "SELECT retries.call('bob.work(int)', '[1]')");
	# the gate stays closed: only an extra worker can run bob's call
	call_reaches($node, $DB, $w, 'succeeded',
		'3: bob\'s due call runs while mallory\'s code holds both workers');
	is($node->safe_psql($DB, gate_waiters(51)), '2',
		'3: the extra workers ran none of alice\'s other calls of mallory\'s function');
	ok($node->safe_psql($DB, $extras) <= 2, 'g: extra workers within the bound');
	open_gate($g);
	call_reaches($node, $DB, $_, 'succeeded', "3: (alice's call $_ runs once the gate opens)")
	  for @held;
	wait_until($node, $DB, $extras, '0', '3: the extra workers stop');
}

$node->stop;
done_testing();
