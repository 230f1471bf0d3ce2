# Seventeenth hostile review (rv17, of 13bcdf9: issue 42, "whose code runs
# with whose rights"), by a reviewer who did not write the code.  alice is
# the victim, mallory the attacker (an ordinary role; the owner of database
# mdb in section 1), bob a bystander.  Each numbered check fails on the
# code reviewed (inside a TODO block named "finding N"); the lettered ones
# held.
#
# Sections, in order:
#   1. (Medium, the attacker owns the database) an attempt that the
#      extension's own stop of its worker cut short does not use up one of
#      the call's attempts (execute_interrupted, 'stopped': max_attempts
#      grows by one, "the attempt's effects were rolled back"), also when
#      the attempt ran in a runner: a procedure's or a command's, which
#      commits on its own.  alice's procedure of ONE attempt (at most once)
#      inserts a row, COMMITs, then goes on (here: waits at a gate);
#      mallory turns mdb's connections off and on; the worker and its
#      runner are stopped, the attempt is recorded 'interrupted' and NOT
#      charged, and the call runs again: the committed first step is done
#      twice.  A crash or a killed worker would have charged the attempt
#      (the call failed, its first step done once).  Each off/on repeats it.
#   2. (Low) errors still quote inputs whole: t/034's finding 1 bounded the
#      quoting of a schedule's `timezone` and `every`, not the others: a
#      1 MB `policy` (annotate, run_command, schedule_command), `jitter`,
#      `overlap`, schedule name given to pause_schedule/unschedule/trigger,
#      and the unknown parameter name of an `args` object each put the
#      whole input in the message (and the server log), per statement.
#   3. (Low) retries.next_runs() outside the years 1..9999 that core/cron.c
#      is written for: before year 1 its cron walk takes the wrong day of
#      the week ('0 0 * 2 1' after 1 BC gives Sundays) or finds no day at
#      all ('0 0 * * 1' after 100 BC: no row; cron_weekday() of a negative
#      year is negative, and 1u << it is undefined behaviour in C); after
#      9999 a cron expression never fires.  next_runs promises "exactly
#      what the workers will do" for any finite 'after'.
#   4. (Low, the attacker owns the database) the database owner may VACUUM
#      FULL the extension's tables (PostgreSQL lets a database's owner
#      vacuum every table in it but the shared catalogs): queued behind a
#      lock of her own open transaction (here a read of call_data), its
#      ACCESS EXCLUSIVE request makes every worker, every retries.call()
#      and every reader of the views in her database queue behind it for as
#      long as she keeps that transaction open.  refuse_lock_before_check
#      guards the commands that lock before their role is checked, not one
#      that her role may run (by the code, not tried: her REINDEX DATABASE,
#      a SHARE lock on each table, would be the same).
#
# Held (plain checks):
#   a. mallory's ALTER ROLE mallory SET role = postgres, SET
#      session_authorization = postgres do not reach her function's
#      attempt, her command, her procedure's runner nor her hooks
#      (on_exhausted, delay_fn): each ran as mallory, not a superuser.
#   b. inside an attempt of hers, RESET ROLE, SET SESSION AUTHORIZATION
#      DEFAULT, RESET SESSION AUTHORIZATION, set_config('session_authorization',
#      ..) and SET LOCAL ROLE are refused (42501), and RESET ALL does not
#      lift her call's time limit (timeout 1 s: the call fails, it does not
#      succeed after sleeping).
#   c. mallory's deferred constraint trigger, on her table that alice's
#      function writes, raising at the end of alice's attempt: that call
#      fails, alice's ten batch-mates of alice.pay run once each.
#   d. the bounded inputs: every, timezone, on_event, emit, key, limit_key,
#      retry_on, rate and a schedule's name refuse 1 MB with a short message.
#   e. (control of 1) the same procedure when its worker is killed instead
#      of stopped: the attempt is charged, the call of one attempt fails,
#      its first step is done once.
#   f. the database owner may still VACUUM the extension's tables (not
#      FULL), and VACUUM FULL tables of her own.
# Findings 1 to 4 are fixed since (a runner's attempt is charged; messages
# quote at most 200 bytes of an argument; next_runs refuses an 'after'
# outside the years 1 to 9999; VACUUM FULL of the extension's tables or of
# the whole database, and REINDEX DATABASE, are refused to the database's
# owner before they lock), and their checks plain.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use RetriesTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $DB = 'postgres';
my $node = review_node('review_15');

sub sql
{
	my ($role, $sql, $db) = @_;
	return as_role($node, $db // $DB, $role, $sql);
}

review_roles($node, $DB);

# ---------------------------------------------------------------------
# 1.  a stop of the worker of a runner's attempt: not charged, run again
# ---------------------------------------------------------------------
$node->safe_psql($DB, 'CREATE DATABASE mdb OWNER mallory');
$node->safe_psql('mdb', 'CREATE EXTENSION retries; CREATE SCHEMA alice AUTHORIZATION alice;');
my $G1 = 8711;
sql('alice', "CREATE TABLE alice.steps (n int);"
	  . " CREATE PROCEDURE alice.twostep(n int) LANGUAGE plpgsql AS \$\$"
	  . " BEGIN INSERT INTO alice.steps VALUES (n); COMMIT;"
	  . " PERFORM " . gate_sql($G1) . "; INSERT INTO alice.steps VALUES (n + 1); END \$\$;"
	  . " SELECT retries.annotate('alice.twostep(int)', max_attempts => 1, timeout => '10min');",
	'mdb');
my $gate1 = close_gate($node, 'mdb', $G1);
my $c1 = sql('alice', "SELECT retries.call('alice.twostep(int)', '[10]')", 'mdb');
wait_at_gate($node, 'mdb', $G1, 1,
	'1: alice\'s procedure (one attempt) committed its first step and waits (at a gate, in its runner)');
my ($o, $e) = try_as($node, $DB, 'mallory', 'ALTER DATABASE mdb ALLOW_CONNECTIONS false');
ok(defined $o, '1: mallory, mdb\'s owner, turns its connections off') or diag($e);
wait_until($node, $DB, 'SELECT (' . workers_sql('mdb') . ') = 0', 't',
	'1: the launcher stops mdb\'s worker, and its runner goes with it');
($o, $e) = try_as($node, $DB, 'mallory', 'ALTER DATABASE mdb ALLOW_CONNECTIONS true');
ok(defined $o, '1: and on again') or diag($e);
wait_until($node, 'mdb', "SELECT count(*) >= 1 FROM retries.attempt_data WHERE call_id = $c1", 't',
	'1: the cut attempt is recorded', 60);
open_gate($gate1);
wait_until($node, 'mdb', "SELECT state IN ('succeeded', 'failed') FROM retries.call_data WHERE id = $c1",
	't', '1: alice\'s call ends', 60);
my $st1 = $node->safe_psql('mdb',
	"SELECT (SELECT string_agg(n::text, ',' ORDER BY n) FROM alice.steps)"
	  . " || ' | ' || (SELECT state || ' ' || attempts || '/' || max_attempts FROM retries.call_data WHERE id = $c1)"
	  . " || ' | ' || (SELECT string_agg(outcome::text, ',' ORDER BY attempt) FROM retries.attempt_data WHERE call_id = $c1)");
note("1: alice.steps, call, outcomes after the stop: $st1");
{
	# finding 1, fixed since
	is( $node->safe_psql('mdb', 'SELECT count(*) FROM alice.steps WHERE n = 10'),
		'1',
		'1: the committed first step of alice\'s procedure of one attempt is not run twice because mdb\'s owner closed the database');
}

# e. (control) the same procedure when its worker is killed instead: the
# attempt is charged, the call of one attempt fails, its first step is
# done once (at most once, as the annotation asks)
$node->safe_psql('mdb', 'TRUNCATE alice.steps');
$gate1 = close_gate($node, 'mdb', $G1);
my $c1e = sql('alice', "SELECT retries.call('alice.twostep(int)', '[20]')", 'mdb');
wait_at_gate($node, 'mdb', $G1, 1, 'e: alice\'s procedure committed its first step and waits again');
$node->safe_psql($DB, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
	  . " WHERE datname = 'mdb' AND backend_type IN ('retries worker', 'retries extra worker')"
	  . " AND query LIKE 'retries: call $c1e %'");
wait_until($node, 'mdb', "SELECT count(*) >= 1 FROM retries.attempt_data WHERE call_id = $c1e", 't',
	'e: the killed attempt is recorded', 60);
open_gate($gate1);
call_reaches($node, 'mdb', $c1e, 'failed', 'e: the call of one attempt fails (its attempt was charged)', 60);
is($node->safe_psql('mdb', 'SELECT count(*) FROM alice.steps WHERE n = 20'),
	'1', 'e: its first step was done once');
$node->safe_psql($DB, 'DROP DATABASE mdb WITH (FORCE)');

# ---------------------------------------------------------------------
# 2.  errors that quote a 1 MB input whole
# ---------------------------------------------------------------------
sql('mallory', q{
CREATE FUNCTION mallory.errlen(q text) RETURNS int LANGUAGE plpgsql AS $$
DECLARE m text;
BEGIN
	EXECUTE q;
	RETURN -1;
EXCEPTION WHEN OTHERS THEN
	GET STACKED DIAGNOSTICS m = MESSAGE_TEXT;
	RETURN length(m);
END $$;
CREATE FUNCTION mallory.f1(n int) RETURNS int LANGUAGE sql AS 'SELECT n';
SELECT retries.annotate('mallory.f1(int)', max_attempts => 1);
SELECT retries.schedule('s1', 'mallory.f1(int)', '1 hour', '[1]');
});
my $big = "repeat('x', 1000000)";
my %quoting = (
	'annotate policy' => "SELECT retries.annotate('mallory.f1(int)', policy => $big)",
	'annotate jitter' => "SELECT retries.annotate('mallory.f1(int)', jitter => $big)",
	'run_command policy' => "SELECT retries.run_command('SELECT 1', policy => $big)",
	'schedule_command policy' => "SELECT retries.schedule_command('c2', 'SELECT 1', '1 hour', policy => $big)",
	'schedule overlap' => "SELECT retries.schedule('s2', 'mallory.f1(int)', '1 hour', '[1]', overlap => $big)",
	'pause_schedule name' => "SELECT retries.pause_schedule($big)",
	'unschedule name' => "SELECT retries.unschedule($big)",
	'trigger name' => "SELECT retries.trigger($big)",
	'call args parameter name' => "SELECT retries.call('mallory.f1(int)', jsonb_build_object(repeat('x', 500000), 1))",
);
{
	# finding 2, fixed since
	for my $what (sort keys %quoting)
	{
		(my $q = $quoting{$what}) =~ s/'/''/g;
		my $len = sql('mallory', "SELECT mallory.errlen('$q')");
		cmp_ok($len, '<', 10000, "2: the error for a 1 MB $what is short (message of $len bytes)");
	}
}
# d. the ones bounded since t/034 (and before)
my %bounded = (
	'every' => "SELECT retries.next_runs($big)",
	'timezone' => "SELECT retries.next_runs('* * * * *', $big)",
	'on_event' => "SELECT retries.call('mallory.f1(int)', '[1]', on_event => $big)",
	'emit' => "SELECT retries.emit($big)",
	'key' => "SELECT retries.call('mallory.f1(int)', '[1]', key => $big)",
	'limit_key' => "SELECT retries.call('mallory.f1(int)', '[1]', limit_key => $big)",
	'retry_on' => "SELECT retries.annotate('mallory.f1(int)', retry_on => ARRAY[$big])",
	'rate' => "SELECT retries.annotate('mallory.f1(int)', rate => $big)",
	'schedule name' => "SELECT retries.schedule($big, 'mallory.f1(int)', '1 hour', '[1]')",
);
for my $what (sort keys %bounded)
{
	(my $q = $bounded{$what}) =~ s/'/''/g;
	my $len = sql('mallory', "SELECT mallory.errlen('$q')");
	ok($len > 0 && $len < 10000, "d: a 1 MB $what is refused with a short message ($len bytes)");
}

# ---------------------------------------------------------------------
# 3.  next_runs() before year 1
# ---------------------------------------------------------------------
is( $node->safe_psql($DB, "SELECT count(*) FROM retries.next_runs('0 0 * * 1', 'UTC', '1900-01-01', 3) r"
		  . " WHERE extract(isodow FROM r AT TIME ZONE 'UTC') = 1"),
	'3', '3: (control) three Mondays after 1900-01-01');
{
	# finding 3, fixed since
	# the walk covers the years 1 to 9999: next_runs refuses an 'after'
	# outside them (22023) instead of a wrong answer
	for my $after ('0001-01-01 00:00+00 BC', '0100-03-01 00:00+00 BC', '10000-06-01 00:00+00')
	{
		my ($o3, $e3) = try_as($node, $DB, 'mallory',
			"SELECT count(*) FROM retries.next_runs('0 0 * 2 1', 'UTC', '$after', 3)");
		ok(!defined $o3 && $e3 =~ /22023/ && $e3 =~ /years 1 to 9999/,
			"3: next_runs after $after is refused (22023), not a wrong answer") or diag($o3 // $e3);
	}
	is( $node->safe_psql($DB,
			"SELECT count(*) FROM retries.next_runs('0 0 * 2 1', 'UTC', '0001-01-09 00:00+00', 3) r"
			  . " WHERE extract(isodow FROM r AT TIME ZONE 'UTC') = 1"),
		'3', '3: the Mondays of February of the year 1 are Mondays');
}

# ---------------------------------------------------------------------
# 4.  the database owner's VACUUM FULL queued behind her own read
# ---------------------------------------------------------------------
$node->safe_psql($DB, 'CREATE DATABASE mdb4 OWNER mallory');
$node->safe_psql('mdb4', 'CREATE EXTENSION retries; CREATE SCHEMA alice AUTHORIZATION alice;');
sql('alice', "CREATE FUNCTION alice.nop() RETURNS void LANGUAGE sql AS 'SELECT';"
	  . " SELECT retries.annotate('alice.nop()', max_attempts => 1);", 'mdb4');
my $reader = $node->background_psql('mdb4');
$reader->query_safe('SET ROLE mallory');
$reader->query_safe('BEGIN');
$reader->query_safe('SELECT count(*) FROM retries.call_data');
# each would queue an ACCESS EXCLUSIVE (or SHARE) lock behind her read:
# refused at once, before any lock, as the commands that lock before they
# check their role are (refuse_lock_before_check)
for my $cmd ('VACUUM FULL retries.call_data', 'VACUUM (FULL) retries.attempt_data', 'VACUUM FULL',
	'VACUUM FULL pg_class', 'REINDEX DATABASE mdb4',
	'REINDEX (CONCURRENTLY true, CONCURRENTLY false) DATABASE mdb4')
{
	my ($o, $e) = try_as($node, 'mdb4', 'mallory', "SET lock_timeout = '1s'; $cmd");
	ok(!defined $o && $e =~ /42501/, "4: the database owner's $cmd is refused (42501), not queued")
	  or diag($o // $e);
}
my ($o4, $e4) = try_as($node, 'mdb4', 'alice', "SET lock_timeout = '2s'; SELECT retries.call('alice.nop()')");
{
	# finding 4, fixed since
	ok(defined $o4, '4: alice\'s retries.call() in mdb4 does not queue behind the database owner\'s VACUUM FULL (lock_timeout 2 s)')
	  or diag($e4);
}
# what she may still do: a plain VACUUM (SHARE UPDATE EXCLUSIVE, which no
# worker's lock conflicts with), VACUUM FULL of a table of her own
my ($o4b, $e4b) = try_as($node, 'mdb4', 'mallory',
	"SET lock_timeout = '2s'; VACUUM retries.call_data; CREATE TABLE mine (n int); VACUUM FULL mine");
ok(defined $o4b, 'f: the database owner\'s plain VACUUM of call_data and VACUUM FULL of her own table run')
  or diag($e4b);
$reader->query_safe('COMMIT');
$reader->quit;
$node->safe_psql($DB, 'DROP DATABASE mdb4 WITH (FORCE)');

# ---------------------------------------------------------------------
# a, b.  mallory's role settings and role changes in her attempts
# ---------------------------------------------------------------------
$node->safe_psql($DB, q{
ALTER ROLE mallory SET role = 'postgres';
ALTER ROLE mallory SET session_authorization = 'postgres';
});
sql('mallory', q{
CREATE TABLE mallory.log (what text, cu text, su text, super boolean);
CREATE FUNCTION mallory.probe(what text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE r text;
BEGIN
	BEGIN
		EXECUTE what;
		r := 'ok';
	EXCEPTION WHEN OTHERS THEN
		r := sqlstate;
	END;
	INSERT INTO mallory.log SELECT what || ' => ' || r, current_user, session_user,
		(SELECT rolsuper FROM pg_roles WHERE rolname = current_user);
	RETURN r;
END $$;
SELECT retries.annotate('mallory.probe(text)', max_attempts => 1);
CREATE PROCEDURE mallory.pr() LANGUAGE sql AS
	$$ INSERT INTO mallory.log SELECT 'procedure', current_user, session_user,
	   (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) $$;
SELECT retries.annotate('mallory.pr()', max_attempts => 1);
CREATE FUNCTION mallory.hook(id bigint) RETURNS void LANGUAGE sql AS
	$$ INSERT INTO mallory.log SELECT 'on_exhausted', current_user, session_user,
	   (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) $$;
CREATE FUNCTION mallory.dfn(a int, s text, m text) RETURNS interval LANGUAGE sql AS
	$$ INSERT INTO mallory.log SELECT 'delay_fn', current_user, session_user,
	   (SELECT rolsuper FROM pg_roles WHERE rolname = current_user);
	   SELECT interval '10 ms' $$;
CREATE FUNCTION mallory.fails() RETURNS void LANGUAGE plpgsql AS
	$$ BEGIN RAISE EXCEPTION USING ERRCODE = 'RT001', MESSAGE = 'again'; END $$;
SELECT retries.annotate('mallory.fails()', max_attempts => 2,
	on_exhausted => 'mallory.hook(bigint)', delay_fn => 'mallory.dfn(int,text,text)');
CREATE FUNCTION mallory.resets() RETURNS text LANGUAGE plpgsql AS
	$$ BEGIN RESET ALL;
	-- not a wait: the length of a call that its 1 s timeout cuts short
	PERFORM pg_sleep(30); RETURN 'slept'; END $$;
SELECT retries.annotate('mallory.resets()', max_attempts => 1, timeout => '1s');
});
my @probes = ('SELECT 1', 'RESET ROLE', 'SET SESSION AUTHORIZATION DEFAULT',
	'RESET SESSION AUTHORIZATION', 'SET LOCAL ROLE postgres',
	"SELECT set_config('session_authorization', 'postgres', true)",
	"SELECT set_config('role', 'postgres', true)");
my @cp = map {
	(my $p = $_) =~ s/'/''/g;
	sql('mallory', "SELECT retries.call('mallory.probe(text)', jsonb_build_array('$p'::text))")
} @probes;
my $cc = sql('mallory', "SELECT retries.run_command(\$\$INSERT INTO mallory.log SELECT 'command',"
	  . " current_user, session_user, (SELECT rolsuper FROM pg_roles WHERE rolname = current_user)\$\$)");
my $cpr = sql('mallory', "SELECT retries.call('mallory.pr()')");
my $cf = sql('mallory', "SELECT retries.call('mallory.fails()')");
my $cr = sql('mallory', "SELECT retries.call('mallory.resets()')");
wait_until($node, $DB, "SELECT count(*) FROM retries.call_data WHERE id IN ("
	  . join(',', @cp, $cc, $cpr, $cf, $cr) . ") AND state IN ('succeeded', 'failed')",
	scalar(@cp) + 4, 'a, b: all of mallory\'s probes end', 60);
is( $node->safe_psql($DB, "SELECT count(*) FROM mallory.log WHERE cu <> 'mallory' OR su <> 'mallory' OR super"),
	'0', 'a: no attempt, command, procedure or hook of mallory\'s ran as another role (her ALTER ROLE SET role / session_authorization)');
is( $node->safe_psql($DB, "SELECT string_agg(what, '; ' ORDER BY what) FROM mallory.log"
		  . " WHERE what NOT LIKE 'SELECT 1%' AND what NOT IN ('command', 'procedure', 'on_exhausted', 'delay_fn')"
		  . " AND what NOT LIKE '%=> 42501'"),
	'', 'b: every role change inside her attempt is refused (42501)');
is( $node->safe_psql($DB, "SELECT count(*) FROM mallory.log WHERE what IN ('command', 'procedure', 'on_exhausted', 'delay_fn')"),
	'4', 'a: her command, procedure and hooks ran (as her)');
is( $node->safe_psql($DB, "SELECT state FROM retries.call_data WHERE id = $cr"),
	'failed', 'b: RESET ALL does not lift the time limit of her call');
$node->safe_psql($DB, 'ALTER ROLE mallory RESET ALL');

# ---------------------------------------------------------------------
# c.  mallory's deferred trigger failing at the end of alice's attempt
# ---------------------------------------------------------------------
sql('mallory', q{
CREATE TABLE mallory.box (n int);
GRANT INSERT ON mallory.box TO alice;
CREATE FUNCTION mallory.boom() RETURNS trigger LANGUAGE plpgsql AS
	$$ BEGIN RAISE EXCEPTION 'deferred boom %', NEW.n; END $$;
CREATE CONSTRAINT TRIGGER boom AFTER INSERT ON mallory.box
	DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION mallory.boom();
});
sql('alice', q{
CREATE FUNCTION alice.drop_in(n int) RETURNS void LANGUAGE sql AS 'INSERT INTO mallory.box VALUES (n)';
SELECT retries.annotate('alice.drop_in(int)', max_attempts => 1);
TRUNCATE alice.t;
});
my @cd = grep { /^\d+$/ } split /\n/, sql('alice', "BEGIN;"
	  . " SELECT retries.call('alice.pay(int)', jsonb_build_array(i), run_at => now() - interval '1 s') FROM generate_series(1, 5) i;"
	  . " SELECT retries.call('alice.drop_in(int)', '[99]', run_at => now() - interval '1 s');"
	  . " SELECT retries.call('alice.pay(int)', jsonb_build_array(i), run_at => now() - interval '1 s') FROM generate_series(6, 10) i;"
	  . " COMMIT;");
wait_until($node, $DB, "SELECT count(*) FROM retries.call_data WHERE id BETWEEN $cd[0] AND $cd[-1]"
	  . " AND state IN ('succeeded', 'failed')", scalar(@cd), 'c: alice\'s eleven calls end', 60);
is( $node->safe_psql($DB, "SELECT count(*) || ' ' || count(DISTINCT n) FROM alice.t"),
	'10 10', 'c: alice\'s ten payments each ran once beside the call that mallory\'s deferred trigger failed');
is( $node->safe_psql($DB, "SELECT state FROM retries.call_data WHERE id = $cd[5]"),
	'failed', 'c: the call whose attempt fired the trigger failed');

no_crash($node, 0, 'no crash');
$node->stop;
done_testing();
