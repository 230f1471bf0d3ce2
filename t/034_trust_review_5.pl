# Sixth hostile review (of 94ac2a2), by a reviewer who did not write the
# code: the calls, chains, schedules, events and views of one role as
# another role sees and touches them; code changed between scheduling and
# run; what a call leaves in its worker's session.  alice is the victim,
# mallory the attacker, and the bootstrap superuser a victim too.  No
# attack reached another role's rights or calls.  The numbered check
# failed on the code reviewed, and holds since every and timezone are at
# most 256 bytes:
#   1. (info) a refused `timezone` or `every` of a schedule was quoted
#      whole in the error, so a 20 MB input put 20 MB in the client's
#      error and in the server log per statement.
#
# Held:
#   a. mallory's result, wait, cancel, retry_now and reschedule of alice's
#      call, and her call with `after` naming it: "does not exist".
#   b. mallory's SECURITY DEFINER function that alice calls: what it
#      schedules (retries.call, run_command) is mallory's, and her command
#      cannot read alice's table; inside alice's attempt it cannot read,
#      reschedule, cancel or rerun retries.current_call(), and
#      retries.event() does not give it alice's event payload.
#   c. mallory makes her function's default call her code (CREATE OR
#      REPLACE) and adds a CHECK calling her code to her domain (ALTER
#      DOMAIN) after the superuser scheduled a call and a schedule of them:
#      each attempt and each firing fails with 42501, her code never runs.
#   d. what mallory's own call leaves in the worker's session (a temporary
#      table with her trigger, ahead of alice's table in pg_temp; a
#      session-level advisory lock) reaches none of alice's later calls.
#   e. the settings of mallory's on_exhausted hook (her ALTER ROLE ... SET,
#      and set_config(..., false) in the hook) do not reach alice's calls.
#   f. mallory cannot trigger, pause or unschedule alice's schedules by
#      name, nor pause alice's or a superuser's function; her schedule of
#      the same name is her own.
#   g. inputs: a 20 MB schedule name, command, event payload are refused.

use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use RetriesTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $DB = 'postgres';
my $node = retries_node('trust_review_5');
$node->append_conf('postgresql.conf', q{
retries.max_workers = 2
retries.max_extra_workers = 2
});
$node->start;

sub sql
{
	my ($role, $sql) = @_;
	return $node->safe_psql($DB, "SET ROLE $role;\n$sql");
}

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
CREATE ROLE mallory LOGIN;
CREATE SCHEMA alice AUTHORIZATION alice;
CREATE SCHEMA mallory AUTHORIZATION mallory;
GRANT USAGE ON SCHEMA alice, mallory TO PUBLIC;
CREATE FUNCTION public.su_fn(n int) RETURNS int LANGUAGE sql AS 'SELECT n';
SELECT retries.annotate('public.su_fn(int)', '1 10ms');
ALTER ROLE mallory SET search_path = 'mallory, public';
ALTER ROLE mallory SET statement_timeout = '777s';
});
sql('alice', q{
CREATE TABLE alice.secret (v text);
INSERT INTO alice.secret VALUES ('alice-secret');
CREATE TABLE alice.ledger (v text);
CREATE FUNCTION alice.f(n int) RETURNS text LANGUAGE sql AS $$ SELECT 'r' || n $$;
CREATE FUNCTION alice.book() RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO ledger VALUES ('x');
	RETURN current_setting('search_path') || '|' || current_setting('statement_timeout')
		|| '|' || current_setting('work_mem') || '|' || pg_try_advisory_xact_lock(777);
END $$;
SELECT retries.annotate('alice.f(int)', '1 10ms');
SELECT retries.annotate('alice.book()', '1 10ms');
SELECT retries.schedule('as1', 'alice.f(int)', '1h', '[5]');
});
sql('mallory', q{
CREATE TABLE mallory.loot (v text);
GRANT INSERT ON mallory.loot TO PUBLIC;
CREATE FUNCTION mallory.grab() RETURNS int LANGUAGE plpgsql AS $$
BEGIN INSERT INTO mallory.loot VALUES ('grab as ' || current_user); RETURN 1; END $$;
CREATE FUNCTION mallory.gcheck(x int) RETURNS bool LANGUAGE plpgsql AS $$
BEGIN INSERT INTO mallory.loot VALUES ('gcheck as ' || current_user); RETURN true; END $$;
CREATE DOMAIN mallory.d AS int;
CREATE FUNCTION mallory.api(n int, m int DEFAULT 1) RETURNS int
	LANGUAGE sql SECURITY DEFINER AS 'SELECT n + m';
CREATE FUNCTION mallory.apid(n int, m mallory.d) RETURNS int
	LANGUAGE sql SECURITY DEFINER AS 'SELECT n';
CREATE FUNCTION mallory.rec() RETURNS text LANGUAGE sql AS $$ SELECT current_user::text $$;
CREATE FUNCTION mallory.sd() RETURNS text LANGUAGE plpgsql SECURITY DEFINER AS $$
DECLARE a bigint; b bigint; c bigint := retries.current_call(); o text := '';
BEGIN
	a := retries.run_command('INSERT INTO mallory.loot SELECT ''cmd '' || v FROM alice.secret');
	b := retries.call('mallory.rec()', '[]');
	BEGIN o := o || retries.result(c)::text; EXCEPTION WHEN OTHERS THEN o := o || 'r-'; END;
	BEGIN o := o || retries.reschedule(c, now() + '1h'); EXCEPTION WHEN OTHERS THEN o := o || 's-'; END;
	BEGIN o := o || retries.cancel(c); EXCEPTION WHEN OTHERS THEN o := o || 'c-'; END;
	BEGIN o := o || retries.retry_now(c); EXCEPTION WHEN OTHERS THEN o := o || 'n-'; END;
	o := o || coalesce(retries.event()::text, 'e-');
	INSERT INTO mallory.loot VALUES ('sd ' || o);
	RETURN a || ' ' || b;
END $$;
CREATE FUNCTION mallory.trg() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN INSERT INTO mallory.loot VALUES ('trg as ' || current_user); RETURN NEW; END $$;
CREATE FUNCTION mallory.plant() RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	CREATE TEMP TABLE IF NOT EXISTS ledger (v text);
	GRANT ALL ON pg_temp.ledger TO PUBLIC;
	CREATE TRIGGER t BEFORE INSERT ON pg_temp.ledger FOR EACH ROW EXECUTE FUNCTION mallory.trg();
	PERFORM pg_advisory_lock(777);
	PERFORM set_config('work_mem', '7777kB', false);
	RETURN 'planted';
END $$;
CREATE FUNCTION mallory.hook(call_id bigint) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO mallory.loot VALUES ('hook ' || current_setting('statement_timeout'));
	PERFORM set_config('search_path', 'mallory, public', false);
	PERFORM set_config('work_mem', '7777kB', false);
END $$;
CREATE FUNCTION mallory.boom() RETURNS int LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'boom'; END $$;
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA mallory TO PUBLIC;
SELECT retries.annotate('mallory.api(int,int)', '1 10ms');
SELECT retries.annotate('mallory.apid(int,mallory.d)', '1 10ms');
SELECT retries.annotate('mallory.rec()', '1 10ms');
SELECT retries.annotate('mallory.sd()', '1 10ms');
SELECT retries.annotate('mallory.plant()', '1 10ms');
SELECT retries.annotate('mallory.boom()', '1 10ms', on_exhausted => 'mallory.hook(bigint)');
});

# a. another role's call
{
	my $a = sql('alice', "SELECT retries.call('alice.f(int)', '[1]', run_at => now() + '1h')");
	for my $op ("retries.result($a)", "retries.wait($a, '1s')", "retries.cancel($a)",
		"retries.retry_now($a)", "retries.reschedule($a, now())",
		"retries.call('mallory.rec()', '[]', after => ARRAY[$a]::bigint[])")
	{
		my ($out, $err) = try_as($node, $DB, 'mallory', "SELECT $op");
		like($err, qr/call $a does not exist/, "a: mallory's $op is refused");
	}
	is($node->safe_psql($DB, "SELECT state FROM retries.call_data WHERE id = $a"),
		'scheduled', 'a: alice\'s call is untouched');
}

# b. mallory's SECURITY DEFINER function in alice's attempt
{
	my $c = sql('alice', "SELECT retries.call('mallory.sd()', '[]', on_event => 'go', event_timeout => '1h')");
	sql('alice', q{SELECT retries.emit('go', '{"alice": "private"}')});
	is(final_state($c, 'b'), 'succeeded ', 'b: alice\'s call of mallory.sd() runs');
	my ($cmd, $rec) = split / /,
		$node->safe_psql($DB, "SELECT result #>> '{}' FROM retries.call_data WHERE id = $c");
	is($node->safe_psql($DB, "SELECT scheduled_by FROM retries.call_data WHERE id IN ($cmd, $rec) GROUP BY 1"),
		'mallory', 'b: what it scheduled is mallory\'s');
	is(final_state($cmd, 'b cmd'), 'failed 42501', 'b: her command cannot read alice.secret');
	is($node->safe_psql($DB, "SELECT v FROM mallory.loot WHERE v LIKE 'sd %'"),
		'sd r-s-c-n-e-', 'b: alice\'s call and event are not mallory\'s to read or change');
	is($node->safe_psql($DB, "SELECT count(*) FROM mallory.loot WHERE v LIKE 'cmd%'"),
		'0', 'b: no secret copied');
}

# c. code changed between scheduling and the attempts
{
	# (they wait for an event that comes once the code has changed: on a
	# loaded machine a call made to run two seconds later ran before it)
	my $c1 = $node->safe_psql($DB,
		"SELECT retries.call('mallory.api(int,int)', '[1]', on_event => 'c_changed', event_timeout => '1h')");
	my $c2 = $node->safe_psql($DB,
		"SELECT retries.call('mallory.apid(int,mallory.d)', '[1, 2]', on_event => 'c_changed', event_timeout => '1h')");
	$node->safe_psql($DB, q{
		SELECT retries.schedule('s1', 'mallory.api(int,int)', '1s', '[1]');
		SELECT retries.schedule('s2', 'mallory.apid(int,mallory.d)', '1s', '[1, 2]');
	});
	sql('mallory', q{
		CREATE OR REPLACE FUNCTION mallory.api(n int, m int DEFAULT mallory.grab()) RETURNS int
			LANGUAGE sql SECURITY DEFINER AS 'SELECT n + m';
		ALTER DOMAIN mallory.d ADD CONSTRAINT c CHECK (mallory.gcheck(VALUE));
	});
	$node->safe_psql($DB, "SELECT retries.emit('c_changed')");
	is(final_state($c1, 'c default'), 'failed 42501', 'c: the new default is refused');
	is(final_state($c2, 'c domain'), 'failed 42501', 'c: the new domain check is refused');
	wait_until($node, $DB,
		"SELECT count(DISTINCT schedule_id) FROM retries.call_data WHERE schedule_id IS NOT NULL"
		. " AND state = 'failed' AND last_sqlstate = '42501'",
		'2', 'c: both schedules\' firings fail with 42501');
	$node->safe_psql($DB, "SELECT retries.unschedule('s1'), retries.unschedule('s2')");
	is($node->safe_psql($DB, "SELECT count(*) FROM mallory.loot WHERE v ~ '^(grab|gcheck)'"),
		'0', 'c: mallory\'s code never ran');
}

# d, e. what mallory's call and hook leave in the worker
{
	my @m;
	push @m, sql('mallory', "SELECT retries.call('mallory.plant()')") for 1 .. 2;
	push @m, sql('mallory', "SELECT retries.call('mallory.boom()')") for 1 .. 2;
	is(final_state($_, "d $_"), ($_ == $m[0] || $_ == $m[1]) ? 'succeeded ' : 'failed P0001',
		"d: mallory's call $_ ends") for @m;
	my @a;
	push @a, sql('alice', "SELECT retries.call('alice.book()')") for 1 .. 6;
	for my $a (@a)
	{
		is(final_state($a, "d $a"), 'succeeded ', "d: alice's call $a runs");
		is(sql('alice', "SELECT result #>> '{}' FROM retries.calls WHERE id = $a"),
			'"$user", public|0|4MB|true', "e: alice's call $a sees none of mallory's settings or locks");
	}
	is(sql('alice', 'SELECT count(*) FROM alice.ledger'), '6', 'd: every row went to alice.ledger');
	is($node->safe_psql($DB, "SELECT count(*) FROM mallory.loot WHERE v LIKE 'trg%'"),
		'0', 'd: mallory\'s temporary trigger never fired');
	is($node->safe_psql($DB, "SELECT DISTINCT v FROM mallory.loot WHERE v LIKE 'hook%'"),
		'hook 777s', 'e: the hook ran with mallory\'s own settings');
}

# f. schedules and pauses by name
{
	for my $op ("retries.trigger('as1')", "retries.pause_schedule('as1')", "retries.unschedule('as1')")
	{
		my ($out, $err) = try_as($node, $DB, 'mallory', "SELECT $op");
		like($err, qr/schedule "as1" does not exist/, "f: mallory's $op is refused");
	}
	for my $fn ('alice.f(int)', 'public.su_fn(int)')
	{
		my ($out, $err) = try_as($node, $DB, 'mallory', "SELECT retries.pause('$fn')");
		like($err, qr/must be owner/, "f: mallory cannot pause $fn");
	}
	sql('mallory', "SELECT retries.schedule('as1', 'mallory.rec()', '1h')");
	is($node->safe_psql($DB, "SELECT string_agg(owner::text || ' ' || args::text, ',' ORDER BY owner::text)"
		. " FROM retries.schedule_data WHERE name = 'as1'"),
		'alice ["5"],mallory []', 'f: each role has its own schedule as1');
}

# g. inputs
{
	for my $op ("retries.schedule(repeat('n', 20000000), 'mallory.rec()', '1h')",
		"retries.run_command('SELECT 1 /*' || repeat('x', 20000000) || '*/')",
		"retries.emit('e', jsonb_build_object('p', repeat('x', 20000000)))")
	{
		my ($out, $err) = try_as($node, $DB, 'mallory', "SELECT $op");
		like($err, qr/22023|at most 200 bytes|max_args_size/, "g: a 20 MB input is refused: " . substr($op, 0, 30));
	}
}

# 1. a refused input is quoted whole in its error (and the server log)
{
	for my $op ("retries.schedule('tz', 'mallory.rec()', '1h', timezone => repeat('x', 2000000))",
		"retries.schedule('ev', 'mallory.rec()', repeat('1', 2000000))")
	{
		my ($out, $err) = try_as($node, $DB, 'mallory', "SELECT $op");
		like($err, qr/22023/, '1: refused: ' . substr($op, 0, 40));
		cmp_ok(length($err), '<', 10000, '1: the error does not quote the 2 MB input whole');
	}
}

$node->stop;
done_testing();
