# Eighteenth hostile review (rv18, of e616215: the fixes of the seventeenth
# review, t/047), by a reviewer who did not write the code, 25 minutes.
# alice is the victim, mallory the attacker (an ordinary role; the owner of
# database mdb).  Each numbered check fails on the code reviewed (inside a
# TODO block named "finding N"); the lettered ones held.
#
# Sections, in order:
#   1. (Medium) an '@reboot' schedule whose firing at the server's start
#      made no call (skipped: overlap 'skip' and its last call still
#      waiting for a retry; the same for a function not annotated or a
#      privilege lacking, fire()) keeps its last_run from before the start:
#      write_firings sets last_run only when a call was made.  Since the
#      shared list of armed databases is gone (e616215), every worker's
#      first serving runs schedule_arm_at_start again, whose test is
#      "coalesce(last_run, created_at) < server start": so any later start
#      of a worker of the database (here: mallory, mdb's owner, turns its
#      connections off and on) arms it again and, its previous call ended
#      meanwhile, it fires in the middle of the server's run, as often as
#      she likes while the call is busy (each time one more 'skipped').
#      reference.md: "A crash restart is not a start, nor is a worker's".
#
#   2. (Low, the attacker owns the database) REINDEX SYSTEM is not refused
#      to the database's owner (refuse_reindex_database refuses only
#      REINDEX_OBJECT_DATABASE): PostgreSQL 15 lets her reindex every
#      system catalog of her database but the shared ones.  Queued behind
#      her own open transaction that read pg_class through its index, it
#      holds SHARE on pg_class and waits for ACCESS EXCLUSIVE on
#      pg_class_oid_index: every new connection to the database (new
#      retries workers and runners too, and autovacuum) waits at startup
#      for as long as she keeps that transaction open (tried by hand; the
#      check below stops her REINDEX with a lock_timeout).  The catalogs
#      are guarded against VACUUM FULL "since the workers read them in
#      every transaction"; REINDEX SYSTEM reaches them the same way.
#
# Held (plain checks):
#   a. (control of 1) an '@reboot' schedule whose firing at the start made
#      its call fires once, and not again after mdb's connections go off
#      and on.
#   b. mallory, mdb's owner, cannot reach the extension's TOAST tables by
#      name (VACUUM FULL pg_toast.pg_toast_N: no USAGE on pg_toast), and
#      her VACUUM FULL of the whole database stays refused.
# Both findings are fixed since (arming an '@reboot' schedule moves its
# origin past the server's start, whatever its firing does; REINDEX SYSTEM
# is refused to the database's owner as REINDEX DATABASE is), and their
# checks plain.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use RetriesTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $DB = 'postgres';
my $node = review_node('review_16');

sub sql
{
	my ($role, $sql, $db) = @_;
	return as_role($node, $db // $DB, $role, $sql);
}

review_roles($node, $DB);

# ---------------------------------------------------------------------
# 1.  an '@reboot' firing skipped at the start fires at a worker's start
# ---------------------------------------------------------------------
$node->safe_psql($DB, 'CREATE DATABASE mdb OWNER mallory');
$node->safe_psql('mdb', 'CREATE EXTENSION retries; CREATE SCHEMA alice AUTHORIZATION alice;');
sql('alice', q{
CREATE TABLE alice.ticks (what text, at timestamptz DEFAULT clock_timestamp());
CREATE TABLE alice.flag (fail boolean);
INSERT INTO alice.flag VALUES (true);
CREATE FUNCTION alice.tick() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	IF (SELECT fail FROM alice.flag) THEN
		RAISE EXCEPTION USING ERRCODE = 'RT001', MESSAGE = 'not yet';
	END IF;
	INSERT INTO alice.ticks (what) VALUES ('tick');
END $$;
CREATE FUNCTION alice.tock() RETURNS void LANGUAGE sql AS $$ INSERT INTO alice.ticks (what) VALUES ('tock') $$;
CREATE FUNCTION alice.mark(n int) RETURNS void LANGUAGE sql AS $$ INSERT INTO alice.ticks (what) VALUES ('mark ' || n) $$;
SELECT retries.annotate('alice.tick()', '3 1h');
SELECT retries.annotate('alice.tock()', max_attempts => 1);
SELECT retries.annotate('alice.mark(int)', max_attempts => 1);
SELECT retries.schedule('boot', 'alice.tick()', '@reboot', overlap => 'skip');
SELECT retries.schedule('boot2', 'alice.tock()', '@reboot', overlap => 'skip');
}, 'mdb');
# the last call of 'boot' waits an hour for its second attempt
my $c0 = sql('alice', "SELECT retries.trigger('boot')", 'mdb');
wait_until($node, 'mdb', "SELECT state || ' ' || attempts FROM retries.call_data WHERE id = $c0",
	'scheduled 1', '1: the last call of alice\'s \'@reboot\' schedule failed once and waits an hour to retry');
$node->restart;
my $sched = sub {
	my ($name) = @_;
	return $node->safe_psql('mdb', "SELECT firings || ' ' || skipped FROM retries.schedule_data WHERE name = '$name'");
};
wait_until($node, 'mdb', "SELECT skipped FROM retries.schedule_data WHERE name = 'boot'", '1',
	'1: at the server\'s start, \'boot\' is armed and skipped (its last call is unfinished)');
wait_until($node, 'mdb', "SELECT count(*) FROM alice.ticks WHERE what = 'tock'", '1',
	'a: at the server\'s start, \'boot2\' fires once');
my $boot_before = $sched->('boot');
my $boot2_before = $sched->('boot2');
note("1: boot (firings skipped) after the start: $boot_before; boot2: $boot2_before");
# alice's old call ends (she cancels it; it could as well have succeeded)
sql('alice', "UPDATE alice.flag SET fail = false; SELECT retries.cancel($c0)", 'mdb');
call_reaches($node, 'mdb', $c0, 'cancelled', '1: alice\'s old call is cancelled');

# mallory, mdb's owner, turns its connections off and on: a new worker
my ($o, $e) = try_as($node, $DB, 'mallory', 'ALTER DATABASE mdb ALLOW_CONNECTIONS false');
ok(defined $o, '1: mallory, mdb\'s owner, turns its connections off') or diag($e);
wait_until($node, $DB, 'SELECT (' . workers_sql('mdb') . ') = 0', 't',
	'1: the launcher stops mdb\'s workers');
($o, $e) = try_as($node, $DB, 'mallory', 'ALTER DATABASE mdb ALLOW_CONNECTIONS true');
ok(defined $o, '1: and on again') or diag($e);
# a call of alice's runs: the new worker has served (and armed what it
# arms, in its first serving, before any call)
my $cm = sql('alice', "SELECT retries.call('alice.mark(int)', '[1]')", 'mdb');
call_reaches($node, 'mdb', $cm, 'succeeded', '1: a worker of mdb serves again', 60);
wait_until($node, 'mdb', "SELECT count(*) FROM retries.schedule_data WHERE next_run <> 'infinity'", '0',
	'1: no \'@reboot\' schedule is due');
my $boot_after = $sched->('boot');
note("1: boot (firings skipped) after the worker's start: $boot_after");
{
	# finding 1, fixed since
	is($boot_after, $boot_before,
		'1: alice\'s \'@reboot\' schedule, skipped at the server\'s start, does not fire (nor skip) at a worker\'s start');
	is($node->safe_psql('mdb', "SELECT count(*) FROM alice.ticks WHERE what = 'tick'"),
		'0', '1: so alice.tick() did not run in the middle of the server\'s run');
}
is($sched->('boot2'), $boot2_before, 'a: \'boot2\', which fired at the start, does not fire again at a worker\'s start');
is($node->safe_psql('mdb', "SELECT count(*) FROM alice.ticks WHERE what = 'tock'"),
	'1', 'a: alice.tock() ran once');

# ---------------------------------------------------------------------
# 2.  the database owner's REINDEX SYSTEM queued behind her own read
# ---------------------------------------------------------------------
my $reader = $node->background_psql('mdb');
$reader->query_safe('SET ROLE mallory');
$reader->query_safe('BEGIN');
$reader->query_safe('SET LOCAL enable_seqscan = off');
$reader->query_safe('SELECT relname FROM pg_class WHERE oid = 1259');
($o, $e) = try_as($node, 'mdb', 'mallory', "SET lock_timeout = '1s'; REINDEX SYSTEM mdb");
note('2: REINDEX SYSTEM: ' . ($o // $e));
{
	# finding 2, fixed since
	ok(!defined $o && $e =~ /42501/,
		'2: mdb\'s owner\'s REINDEX SYSTEM is refused (42501), not queued behind her read of pg_class');
}
$reader->query_safe('COMMIT');
$reader->quit;

# ---------------------------------------------------------------------
# b.  the database owner and the extension's TOAST tables
# ---------------------------------------------------------------------
my $toast = $node->safe_psql('mdb', "SELECT reltoastrelid::regclass FROM pg_class WHERE oid = 'retries.call_data'::regclass");
($o, $e) = try_as($node, 'mdb', 'mallory', "SET lock_timeout = '1s'; VACUUM FULL $toast");
ok(!defined $o && $e =~ /42501/, "b: mdb's owner's VACUUM FULL $toast is refused (42501)") or diag($o // $e);
($o, $e) = try_as($node, 'mdb', 'mallory', "SET lock_timeout = '1s'; VACUUM (FULL, ANALYZE)");
ok(!defined $o && $e =~ /42501/, 'b: mdb\'s owner\'s VACUUM (FULL, ANALYZE) of the whole database is refused (42501)')
  or diag($o // $e);

$node->safe_psql($DB, 'DROP DATABASE mdb WITH (FORCE)');
no_crash($node, 0, 'no crash');
$node->stop;
done_testing();
