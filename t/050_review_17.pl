# Nineteenth hostile review (rv19, of b367bfc), by a reviewer who did not
# write the code, 55 minutes, mostly on retries.import_pg_cron() (new in
# a3d229d) and on what the database owner reaches.  alice is the victim,
# mallory the attacker (an ordinary role; the owner of cdb, the database
# that cron.database_name names, where pg_cron and the extension are, and
# in section 4 of mdb, where only the extension is).  Each numbered check fails on the code reviewed (inside a TODO
# block named "finding N"); the lettered ones held.  Skipped where pg_cron
# is not installed (as t/049).
#
# Sections, in order: a (mallory's import), 1 (role names), e, 2 and 3
# (one superuser's import), b (mallory's moved job runs), c (connection
# limit, CONNECT), d (bounds), 4 (a planted schema cron in mdb).
#
# Findings:
#   1. (Low) import_pg_cron() stops at the first job of a role whose name
#      is not a plain lower-case identifier ("Carol", "d.e"): its check of
#      the role's schedules casts the name as text to regrole
#      (j.username::regrole, retries--1.6--1.7.sql), which parses it as SQL
#      (down-cases "Carol" to carol: "role does not exist"; "d.e": "invalid
#      name syntax"), outside the block that reports a job's error, so the
#      whole import fails and no job of any role moves.  (to_regrole,
#      two lines above, quotes the name; the cast does not.)  Were a role
#      carol to exist too, "Carol"'s job would be checked against carol's
#      schedule names.
#
#   2. (Low) a job "on another server" is told by nodename only: a job of
#      nodename 'localhost' and another nodeport (another server on this
#      host, which pg_cron would connect to) is moved here, and turned off
#      in pg_cron: it now runs against the wrong server.  reference.md:
#      "A job is not moved ... if it runs ... on another server".
#
#   3. (Low) the imported zone is current_setting('cron.timezone'), but
#      pg_cron 1.4 (the one Debian ships, and that t/049 runs) defines no
#      such setting and runs every job in GMT: the name is a free
#      placeholder that any session may SET (and an administrator may
#      have in postgresql.conf, which pg_cron 1.4 ignores).  A superuser's
#      import in a session where it is 'UTC+12' makes every role's
#      schedules in that zone: alice's '30 3 * * *' job, run at 03:30 GMT
#      by pg_cron, now fires at 15:30 GMT.  reference.md: "the zone of
#      cron.timezone (GMT if unset)", "keeping pg_cron's zone".  (The
#      database owner cannot set it for other sessions, check e: PostgreSQL
#      15 keeps an unknown setting's ALTER DATABASE SET to superusers; on
#      pg_cron 1.5 and later, where cron.timezone is pg_cron's own, the
#      import is right.)
#
#   4. (High) import_pg_cron() trusts whatever the names cron.job and
#      cron.alter_job(...) find: it asks only to_regclass('cron.job'), not
#      whether pg_cron is installed here (nor that schema cron is pg_cron's).
#      pg_cron lives in one database (cron.database_name); in any other, a
#      role with CREATE on the database -- its owner, mallory, here mdb --
#      makes a schema cron, a table cron.job of rows naming any role
#      (postgres, alice) and any text, and a function cron.alter_job of the
#      same signature.  A superuser who runs the import in mdb (t/049 e and
#      reference.md promise a 55000 where pg_cron is not installed) runs
#      mallory's cron.alter_job as the superuser (has_function_privilege:
#      yes; then "SELECT cron.alter_job(...)") -- mallory makes herself a
#      superuser at once -- and makes a schedule of postgres whose command
#      is mallory's text.  alice, logged in as alice, running the import in
#      mdb, runs mallory's function as alice and gets a schedule of
#      mallory's text as hers.  (Had mallory revoked EXECUTE on her
#      alter_job, cron.unschedule would be hers too, run as the job's role.)
#      The Citus functions, by contrast, name pg_catalog's objects only.
#
# Held (plain checks):
#   a. mallory's import (an ordinary role) reports and moves her own jobs
#      only; alice's job stays active in pg_cron and alice gets no
#      schedule.
#   b. a job of mallory's whose text is 'SET ROLE postgres; ALTER ROLE
#      mallory SUPERUSER', moved by a superuser's import (the import
#      SET LOCAL ROLEs to her inside the superuser's session), runs as
#      mallory in a runner and fails with 42501 ("cannot change its
#      role"): mallory stays an ordinary role.
#   c. the database owner's CONNECTION LIMIT 0 on her database refuses
#      alice's command there as it refuses her login (53300; a runner is a
#      background worker, outside the limit: until the twenty-first
#      review, t/054, the command ran), and her REVOKE CONNECT is the
#      documented 42501.
#   d. oversized inputs (time zone, every, event name) are refused with
#      22023 and a bounded message.
#   e. mallory, the cron database's owner, cannot ALTER DATABASE SET
#      cron.timezone for the superuser's import (42501).
# All four are fixed since (the import finds pg_cron's table and functions
# as the pg_cron extension's own members, or fails with 55000; a job's role
# is looked up quoted; a job of another port is another server's; the zone
# is pg_cron's own cron.timezone, not a placeholder), and their checks plain.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use RetriesTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $DB = 'postgres';
my $CDB = 'cdb';
my $node = pg_cron_node('review_17', $CDB);

sub sql
{
	my ($role, $sql, $db) = @_;
	return as_role($node, $db // $CDB, $role, $sql);
}

review_roles($node, $DB);
$node->safe_psql($DB, "CREATE DATABASE $CDB OWNER mallory");
$node->safe_psql($CDB, q{
CREATE EXTENSION pg_cron;
CREATE EXTENSION retries;
CREATE ROLE "Carol" LOGIN;
CREATE ROLE "d.e" LOGIN;
GRANT USAGE ON SCHEMA cron TO alice, mallory, bob, "Carol", "d.e";
CREATE SCHEMA alice AUTHORIZATION alice;
});
sql('alice', 'CREATE TABLE alice.t (n int)');

my %job;
$job{alice} = sql('alice', "SELECT cron.schedule('alice nightly', '30 3 * * *', 'INSERT INTO alice.t VALUES (1)')");
$job{m_own} = sql('mallory', "SELECT cron.schedule('m own', '\@hourly', 'SELECT 1')");

# ---------------------------------------------------------------------
# a.  mallory's import: her own jobs only
# ---------------------------------------------------------------------
my $out = sql('mallory', "SELECT jobid || ' ' || moved::int FROM retries.import_pg_cron() ORDER BY jobid");
is($out, "$job{m_own} 1", 'a: mallory\'s import reports and moves her own job only');
is($node->safe_psql($CDB, "SELECT active FROM cron.job WHERE jobid = $job{alice}"), 't',
	'a: alice\'s job stays active in pg_cron');
is(sql('alice', 'SELECT count(*) FROM retries.schedules'), '0', 'a: alice has no schedule');

# ---------------------------------------------------------------------
# 1.  a role whose name is not a plain identifier stops the import
# ---------------------------------------------------------------------
$job{carol} = sql('"Carol"', "SELECT cron.schedule('carol job', '\@hourly', 'SELECT 2')");
$job{de} = sql('"d.e"', "SELECT cron.schedule('de job', '\@hourly', 'SELECT 3')");
my ($ret, $o, $e) = $node->psql($CDB,
	"BEGIN; SELECT count(*) FILTER (WHERE moved) FROM retries.import_pg_cron(); ROLLBACK;");
note("1: the superuser's import with jobs of \"Carol\" and \"d.e\": " . ($ret == 0 ? $o : $e));
{
	# finding 1, fixed since
	ok($ret == 0 && $o =~ /^\d+$/ && $o >= 3,
		'1: a superuser\'s import is not stopped by the jobs of roles "Carol" and "d.e" (their jobs and alice\'s move)')
	  or diag($e);
}
$node->safe_psql($CDB, "SELECT cron.unschedule($job{carol}); SELECT cron.unschedule($job{de})");

# ---------------------------------------------------------------------
# 2, 3, b.  the superuser's import, under the database owner's settings
# ---------------------------------------------------------------------
# a job of this host's other server (pg_cron's nodeport), the superuser's
$job{remote} = $node->safe_psql($CDB, "SELECT cron.schedule('other port', '\@hourly', 'SELECT 4')");
my $other_port = $node->port + 1;
$node->safe_psql($CDB, "UPDATE cron.job SET nodeport = $other_port WHERE jobid = $job{remote}");
# mallory's job that tries to become the superuser
$job{evil} = sql('mallory',
	"SELECT cron.schedule('m evil', '\@daily', 'SET ROLE postgres; ALTER ROLE mallory SUPERUSER')");
# e. mallory, cdb's owner, may not set the placeholder for every session
# of cdb (PostgreSQL 15 keeps an unknown setting's ALTER DATABASE SET to
# superusers); the superuser's session sets it (finding 3)
($o, $e) = try_as($node, $CDB, 'mallory', "ALTER DATABASE $CDB SET cron.timezone = 'UTC+12'");
ok(!defined $o && $e =~ /42501/,
	'e: mallory, cdb\'s owner, may not set cron.timezone for every session of cdb (42501)')
  or diag($o // $e);

$out = $node->safe_psql($CDB,
	"SET cron.timezone = 'UTC+12';"
	  . " SELECT jobid || '|' || moved::int || '|' || coalesce(why, '-') FROM retries.import_pg_cron() ORDER BY jobid");
note("the superuser's import:\n$out");
my %row = map { my @f = split /\|/; ($f[0] => [@f]) } split /\n/, $out;
is($row{$job{alice}}[1], '1', 'the superuser\'s import moves alice\'s job');
my $zone = sql('alice', "SELECT timezone || ' ' || to_char(next_run AT TIME ZONE 'GMT', 'HH24:MI')"
	  . " FROM retries.schedules WHERE name = 'alice nightly'");
note("3: alice's moved schedule: $zone");
{
	# finding 3, fixed since
	is($zone, 'GMT 03:30',
		'3: alice\'s moved job keeps pg_cron 1.4\'s zone, GMT (which ignores cron.timezone): it fires at 03:30 GMT');
}
{
	# finding 2, fixed since
	ok(defined $row{$job{remote}} && $row{$job{remote}}[1] eq '0' && $row{$job{remote}}[2] =~ /another server/,
		'2: a job of localhost on another port (another server) is not moved, and says why')
	  or diag($out);
	is($node->safe_psql($CDB, "SELECT active FROM cron.job WHERE jobid = $job{remote}"), 't',
		'2: it stays active in pg_cron');
}

# b. mallory's moved job runs as mallory, and cannot change its role
is($row{$job{evil}}[1], '1', 'b: mallory\'s job is moved by the superuser\'s import');
my $evil = sql('mallory', "SELECT retries.trigger('m evil')");
wait_until($node, $CDB, "SELECT state || ' ' || last_sqlstate FROM retries.call_data WHERE id = $evil",
	'failed 42501', 'b: her job\'s SET ROLE postgres fails with 42501 (not retried)');
is($node->safe_psql($CDB, "SELECT rolsuper FROM pg_roles WHERE rolname = 'mallory'"), 'f',
	'b: mallory is not a superuser');

# ---------------------------------------------------------------------
# c.  the database owner's connection limit and CONNECT
# ---------------------------------------------------------------------
($o, $e) = try_as($node, $CDB, 'mallory', "ALTER DATABASE $CDB CONNECTION LIMIT 0");
ok(defined $o, 'c: mallory sets cdb\'s connection limit to 0') or diag($e);
my $reader = $node->background_psql($CDB);    # one more session in cdb
$reader->query_safe('SELECT 1');
my $c1 = sql('alice', "SELECT retries.run_command('INSERT INTO alice.t VALUES (2)')");
wait_until($node, $CDB, "SELECT state || ' ' || last_sqlstate FROM retries.call_data WHERE id = $c1",
	'failed 53300', 'c: alice\'s command then fails with 53300, as a login would');
$reader->quit;
$node->safe_psql($CDB, "ALTER DATABASE $CDB CONNECTION LIMIT -1");
($o, $e) = try_as($node, $CDB, 'mallory', "REVOKE CONNECT ON DATABASE $CDB FROM PUBLIC");
ok(defined $o, 'c: mallory revokes CONNECT on cdb from PUBLIC') or diag($e);
my $c2 = sql('alice', "SELECT retries.run_command('INSERT INTO alice.t VALUES (3)')");
wait_until($node, $CDB, "SELECT state || ' ' || last_sqlstate FROM retries.call_data WHERE id = $c2",
	'failed 42501', 'c: alice\'s command then fails with the documented 42501');
$node->safe_psql($CDB, "GRANT CONNECT ON DATABASE $CDB TO PUBLIC");

# ---------------------------------------------------------------------
# d.  bounded inputs
# ---------------------------------------------------------------------
for my $t (
	[ "SELECT retries.next_runs('* * * * *', repeat('x', 100000))", 'time zone' ],
	[ "SELECT retries.next_runs(repeat('*/', 50000))", 'every' ],
	[ "SELECT retries.schedule_command('c', 'SELECT 1', repeat('\@', 100000))", 'every of a command' ],
	[ "SELECT retries.emit(repeat('e', 100000))", 'event name' ])
{
	($o, $e) = try_as($node, $CDB, 'mallory', $t->[0]);
	ok(!defined $o && $e =~ /22023/ && length($e) < 2000, "d: an oversized $t->[1] is refused with 22023, briefly")
	  or diag(substr($o // $e, 0, 500));
}

# ---------------------------------------------------------------------
# 4.  a schema "cron" of mallory's where pg_cron is not installed
# ---------------------------------------------------------------------
$node->safe_psql($DB, 'CREATE DATABASE mdb OWNER mallory');
$node->safe_psql('mdb', 'CREATE EXTENSION retries');
sql('mallory', q{
CREATE SCHEMA cron;
CREATE TABLE cron.job (jobid bigint, jobname text, schedule text, command text,
	database text, username text, active boolean, nodename text);
INSERT INTO cron.job VALUES
	(1, 'su job', '@daily', 'ALTER ROLE mallory SUPERUSER', 'mdb', 'postgres', true, NULL),
	(2, 'alice job', '@daily', 'SELECT 1', 'mdb', 'alice', true, NULL);
CREATE FUNCTION cron.alter_job(job_id bigint, schedule text DEFAULT NULL, command text DEFAULT NULL,
	database text DEFAULT NULL, username text DEFAULT NULL, active boolean DEFAULT NULL)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	RAISE WARNING 'mallory''s cron.alter_job runs as %', current_user;
	IF current_setting('is_superuser') = 'on' THEN
		EXECUTE 'ALTER ROLE mallory SUPERUSER';
	END IF;
END $$;
GRANT USAGE ON SCHEMA cron TO PUBLIC;
GRANT SELECT ON cron.job TO PUBLIC;
}, 'mdb');
# the superuser runs the import in mdb (where pg_cron is not: t/049 e says
# 55000), inside a transaction rolled back, and looks before the rollback
($ret, $o, $e) = $node->psql('mdb', q{BEGIN;
SELECT 'moved=' || count(*) FILTER (WHERE moved) FROM retries.import_pg_cron();
SELECT 'super=' || rolsuper FROM pg_roles WHERE rolname = 'mallory';
SELECT 'schedules=' || count(*) FROM retries.schedule_data;
ROLLBACK;});
note("4: the superuser's import in mdb: $o\n$e");
{
	# finding 4, fixed since
	ok($o !~ /super=true/ && $e !~ /runs as postgres/,
		'4: a superuser\'s import in mallory\'s database runs no function of hers (mallory does not become a superuser)');
	ok($o !~ /schedules=[1-9]/,
		'4: and makes no schedule (of the superuser, of alice) out of rows of her table cron.job');
}
is($node->safe_psql($DB, "SELECT rolsuper FROM pg_roles WHERE rolname = 'mallory'"), 'f',
	'4: (rolled back: mallory is not a superuser for the rest of this test)');
# alice's import in mdb: mallory's function as alice, her texts as alice's
# (logged in as alice: her session_user is hers)
($ret, $o, $e) = $node->psql('mdb', q{BEGIN;
SELECT 'moved=' || count(*) FILTER (WHERE moved) FROM retries.import_pg_cron();
SELECT 'schedules=' || count(*) FROM retries.schedules;
ROLLBACK;}, extra_params => [ '-U', 'alice' ]);
note("4: alice's import in mdb: $o\n$e");
{
	# finding 4, fixed since
	ok($e !~ /runs as alice/, '4: alice\'s import in mallory\'s database runs no function of mallory\'s as alice');
	ok($o !~ /schedules=[1-9]/, '4: and makes alice no schedule of a text mallory wrote');
}
$node->safe_psql($DB, 'DROP DATABASE mdb WITH (FORCE)');

no_crash($node, 0, 'no crash');
$node->stop;
done_testing();
