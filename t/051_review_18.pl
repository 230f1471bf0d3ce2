# Twentieth hostile review (rv20, of ccd927d), by a reviewer who did not
# write the code, 20 minutes, on retries.import_pg_cron() only, after the
# fixes of t/050 (pg_cron's table and functions found as the pg_cron
# extension's own members).  alice is the victim, mallory the attacker
# (an ordinary role; the owner of cdb, the database that cron.database_name
# names, where pg_cron and the extension are); auditor is a BYPASSRLS role.
# Each numbered check fails on the code reviewed (inside a TODO block named
# "finding N"); the lettered ones held.  Skipped where pg_cron is not
# installed (as t/049).
#
# Sections, in order: a (mallory and pg_cron's schema), b (alice, a member
# of mallory), c (auditor), 1 and 2 (the superuser's import with
# cron.enable_superuser_jobs off, rolled back), d and e (the superuser's
# import with mallory's hostile jobs and objects in pg_temp).
#
# Findings:
#   1. (Low) where pg_cron runs no superuser job (cron.enable_superuser_jobs
#      = off, pg_cron's hardening switch), a superuser's import moves no job
#      at all: for every job (alice's, mallory's, ...) it turns the job off
#      with cron.alter_job as the caller, because has_function_privilege
#      says she may; pg_cron 1.4 refuses alter_job to a superuser then
#      ("42501: cannot schedule jobs as superuser"), inside the job's
#      block, so each job's schedule is rolled back and reported with that
#      why.  The fallback (cron.unschedule by the job's user) is taken only
#      when the caller lacks EXECUTE, never when alter_job fails.
#      (deactivate => false moves them, and leaves them active in pg_cron:
#      run twice.)
#
#   2. (Low) a job of a superuser that pg_cron skips ("skipping job %ld
#      since superuser jobs are currently disallowed") is moved by a
#      superuser's import into a schedule of that superuser, which the
#      runners run (moved = true, no why): with deactivate => false now, and
#      with the default once finding 1 is fixed by a fallback.  The
#      administrator's switch against superuser jobs is silently undone;
#      reference.md says the import keeps "what pg_cron did".  The import
#      never reads cron.enable_superuser_jobs (retries--1.6--1.7.sql, the
#      checks before SET LOCAL ROLE).
#
# Held (plain checks):
#   a. mallory, cdb's owner, can put nothing in or on pg_cron's schema and
#      table: no function cron.alter_job or cron.unschedule of hers (the
#      import calls them by their regproc name, "cron.alter_job(...)",
#      which would pick an overload of hers), no trigger and no policy on
#      cron.job, no view in schema cron, no turning off its row security
#      (all 42501).
#   b. alice, a member of mallory (this PostgreSQL 15 refuses mallory's own
#      GRANT mallory TO alice, 42501; an administrator grants it), running
#      the import logged in as alice,
#      sees and moves her own job only (pg_cron's policy on cron.job):
#      mallory's job stays active, and no schedule of mallory's is made.
#   c. auditor (BYPASSRLS, sees every job) moves her own job only; the
#      others are reported as another role's, and stay active in pg_cron.
#   d. the superuser's import, with mallory's hostile jobs (a name that is
#      SQL, a text that does not parse, a text of 2 MB, a schedule that
#      never fires, a text of several statements ending in a comment),
#      still moves alice's job, reports mallory's refused jobs with why,
#      names mallory's schedule exactly as her job, wraps her text so that
#      the comment does not eat the COMMIT, and mallory stays an ordinary
#      role.
#   e. in the superuser's own session, objects in pg_temp (a table
#      pg_temp.pg_settings, pg_temp.pg_depend, functions pg_temp.format(text, text),
#      pg_temp.pg_has_role) change nothing: the zone stays GMT, and the
#      import moves and refuses as before (the pinned search_path puts
#      pg_catalog first and never looks for functions in pg_temp).  Only the
#      caller's own session has a pg_temp, so no other role reaches it.
# Not found in the time: no way for another role to get code run as the
# caller (the unqualified functions and operators are pg_catalog's, casts
# are by type, the job's name and text are data, pg_cron's table and
# functions are a superuser's and mallory cannot add to them), to act on
# another role's job, or for a role to make the import fail for every
# role (finding 1 is a setting of the administrator's, not an attack).
# Both findings are fixed since (a refused cron.alter_job falls back to
# cron.unschedule by the job's role; a superuser's job is not moved while
# cron.enable_superuser_jobs is off), and their checks plain.
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
my $node = pg_cron_node('review_18', $CDB);

sub sql
{
	my ($role, $sql, $db) = @_;
	return as_role($node, $db // $CDB, $role, $sql);
}

# psql logged in as ROLE (its session_user is ROLE): (ret, out, err)
sub login
{
	my ($role, $sql) = @_;
	my ($ret, $o, $e) = $node->psql($CDB, "\\set VERBOSITY verbose\n$sql",
		extra_params => [ '-U', $role ]);
	return ($ret, $o, $e);
}

review_roles($node, $DB);
$node->safe_psql($DB, "CREATE DATABASE $CDB OWNER mallory");
$node->safe_psql($CDB, q{
CREATE EXTENSION pg_cron;
CREATE EXTENSION retries;
CREATE ROLE auditor LOGIN BYPASSRLS;
GRANT USAGE ON SCHEMA cron TO alice, mallory, bob, auditor;
CREATE SCHEMA alice AUTHORIZATION alice;
});
sql('alice', 'CREATE TABLE alice.t (n int)');

my %job;
$job{alice} = sql('alice', "SELECT cron.schedule('alice nightly', '30 3 * * *', 'INSERT INTO alice.t VALUES (1)')");
$job{m_own} = sql('mallory', "SELECT cron.schedule('m own', '\@hourly', 'SELECT 1')");
$job{aud} = sql('auditor', "SELECT cron.schedule('aud', '\@hourly', 'SELECT 5')");
# the superuser's job, made while pg_cron allows superuser jobs (finding 1)
$job{su} = $node->safe_psql($CDB, "SELECT cron.schedule('su job', '\@hourly', 'SELECT 6')");
$node->append_conf('postgresql.conf', "cron.enable_superuser_jobs = off\n");
$node->restart;
is($node->safe_psql($CDB, 'SHOW cron.enable_superuser_jobs'), 'off',
	'setup: pg_cron runs no superuser job now (cron.enable_superuser_jobs = off)');

# ---------------------------------------------------------------------
# a.  mallory, cdb's owner, cannot add to pg_cron's schema or table
# ---------------------------------------------------------------------
for my $t (
	[ q{CREATE FUNCTION cron.alter_job(job_id bigint, active boolean) RETURNS void LANGUAGE sql AS 'SELECT'},
		'a function cron.alter_job(job_id, active)' ],
	[ q{CREATE FUNCTION cron.unschedule(job_id int) RETURNS boolean LANGUAGE sql AS 'SELECT true'},
		'a function cron.unschedule(int)' ],
	[ q{CREATE VIEW cron.v AS SELECT 1}, 'a view in schema cron' ],
	[ q{CREATE FUNCTION public.trg() RETURNS trigger LANGUAGE plpgsql AS 'BEGIN RETURN NEW; END';
		CREATE TRIGGER t BEFORE UPDATE ON cron.job FOR EACH ROW EXECUTE FUNCTION public.trg()},
		'a trigger on cron.job' ],
	[ q{CREATE POLICY p ON cron.job USING (true)}, 'a policy on cron.job' ],
	[ q{ALTER TABLE cron.job DISABLE ROW LEVEL SECURITY}, 'turning off cron.job\'s row security' ])
{
	my ($o, $e) = try_as($node, $CDB, 'mallory', "BEGIN; $t->[0]; COMMIT;");
	ok(!defined $o && $e =~ /42501/, "a: mallory, cdb's owner, may not make $t->[1] (42501)")
	  or diag($o // $e);
}

# ---------------------------------------------------------------------
# b.  alice, a member of mallory, imports: her own job only
# ---------------------------------------------------------------------
my ($ret, $o, $e) = login('mallory', 'GRANT mallory TO alice');
note("b: mallory grants herself to alice: ret $ret $e");
# (if this PostgreSQL refuses that, an administrator grants it: alice is
# then a member of mallory all the same)
$node->safe_psql($CDB, 'GRANT mallory TO alice') if $ret != 0;
is($node->safe_psql($CDB, "SELECT pg_has_role('alice', 'mallory', 'MEMBER')"), 't',
	'b: alice is a member of mallory');
($ret, $o, $e) = login('alice', q{BEGIN;
SELECT 'row=' || jobid || '|' || moved::int FROM retries.import_pg_cron() ORDER BY jobid;
SELECT 'owners=' || string_agg(owner::text, ',') FROM retries.schedules;
ROLLBACK;});
note("b: alice's import: $o\n$e");
ok($ret == 0, 'b: alice\'s import succeeds') or diag($e);
is(join(',', $o =~ /row=(\S+)/g), "$job{alice}|1", 'b: it reports and moves alice\'s own job only');
is(($o =~ /owners=(\S*)/)[0], 'alice', 'b: the only schedule made (before the rollback) is alice\'s');
is($node->safe_psql($CDB, "SELECT active FROM cron.job WHERE jobid = $job{m_own}"), 't',
	'b: mallory\'s job stays active in pg_cron');
$node->safe_psql($CDB, 'REVOKE mallory FROM alice');

# ---------------------------------------------------------------------
# c.  auditor (BYPASSRLS) sees every job, moves her own only
# ---------------------------------------------------------------------
($ret, $o, $e) = login('auditor', q{BEGIN;
SELECT 'row=' || jobid || '|' || moved::int || '|' || coalesce(why, '-') FROM retries.import_pg_cron() ORDER BY jobid;
ROLLBACK;});
note("c: auditor's import: $o\n$e");
my %arow = map { my @f = split /\|/; ($f[0] => [@f]) } ($o =~ /row=(.*)/g);
ok(defined $arow{$job{aud}} && $arow{$job{aud}}[1] eq '1', 'c: auditor\'s import moves her own job');
ok(defined $arow{$job{m_own}} && $arow{$job{m_own}}[1] eq '0' && $arow{$job{m_own}}[2] =~ /role mallory's/
	  && defined $arow{$job{su}} && $arow{$job{su}}[1] eq '0',
	'c: mallory\'s and the superuser\'s jobs, which auditor sees, are reported as theirs, not moved')
  or diag($o);

# ---------------------------------------------------------------------
# 1, 2.  the superuser's import where pg_cron runs no superuser job
# ---------------------------------------------------------------------
sub su_import
{
	my ($args) = @_;
	my ($r, $out, $err) = $node->psql($CDB, "\\set VERBOSITY verbose\nBEGIN;\n"
		  . "SELECT jobid || '|' || moved::int || '|' || coalesce(why, '-') FROM retries.import_pg_cron($args) ORDER BY jobid;\n"
		  . "ROLLBACK;");
	return map { my @f = split /\|/, $_, 3; ($f[0] => [@f]) } split /\n/, $out;
}
my %off = su_import('');
note("1: the superuser's import, cron.enable_superuser_jobs off:\n"
	  . join("\n", map { join('|', @{ $off{$_} }) } sort { $a <=> $b } keys %off));
{
	# finding 1, fixed since
	ok(defined $off{$job{alice}} && $off{$job{alice}}[1] eq '1',
		'1: with cron.enable_superuser_jobs off, a superuser\'s import still moves alice\'s job (not 42501 from cron.alter_job)')
	  or diag(join('|', @{ $off{$job{alice}} // [] }));
}
%off = su_import('deactivate => false');
note("2: the superuser's import (deactivate => false), cron.enable_superuser_jobs off:\n"
	  . join("\n", map { join('|', @{ $off{$_} }) } sort { $a <=> $b } keys %off));
is($off{$job{alice}}[1], '1', '2: (with deactivate => false it moves alice\'s job)');
{
	# finding 2, fixed since
	ok(defined $off{$job{su}} && $off{$job{su}}[1] eq '0',
		'2: a superuser\'s job that pg_cron skips (cron.enable_superuser_jobs off) is not moved into a schedule that runs')
	  or diag(join('|', @{ $off{$job{su}} // [] }));
}
# superuser jobs allowed again in pg_cron, for the rest
$node->append_conf('postgresql.conf', "cron.enable_superuser_jobs = on\n");
$node->restart;

# ---------------------------------------------------------------------
# d, e.  the superuser's import with mallory's hostile jobs, and objects
# in the superuser's own pg_temp
# ---------------------------------------------------------------------
my $evil_name = q{x'); ALTER ROLE mallory SUPERUSER; --};
my $en = $evil_name =~ s/'/''/gr;
$job{m_name} = sql('mallory', "SELECT cron.schedule('$en', '\@daily', 'SELECT 7')");
$job{m_parse} = sql('mallory', "SELECT cron.schedule('m parse', '\@daily', 'SELEC 1')");
$job{m_big} = sql('mallory', "SELECT cron.schedule('m big', '\@daily', 'SELECT ''' || repeat('x', 2000000) || '''')");
$job{m_never} = sql('mallory', "SELECT cron.schedule('m never', '0 0 31 2 *', 'SELECT 8')");
$job{m_multi} = sql('mallory', "SELECT cron.schedule('m multi', '\@daily', 'SELECT 9; SELECT 10 -- end')");

$o = $node->safe_psql($CDB, q{
CREATE TEMP TABLE pg_settings (name text, setting text);
INSERT INTO pg_temp.pg_settings VALUES ('cron.timezone', 'UTC+12');
CREATE TEMP TABLE pg_depend (classid oid, objid oid, refclassid oid, refobjid oid, deptype "char");
CREATE FUNCTION pg_temp.format(text, text) RETURNS text LANGUAGE sql AS $$SELECT 'SELECT 1'$$;
CREATE FUNCTION pg_temp.pg_has_role(name, regrole, text) RETURNS boolean LANGUAGE sql AS 'SELECT true';
SELECT jobid || '|' || moved::int || '|' || coalesce(why, '-') FROM retries.import_pg_cron() ORDER BY jobid;
});
note("d: the superuser's import:\n" . substr($o, 0, 3000));
my %row = map { my @f = split /\|/, $_, 3; ($f[0] => [@f]) } split /\n/, $o;
is($row{$job{alice}}[1], '1', 'd: the superuser\'s import moves alice\'s job');
is($row{$job{m_name}}[1], '1', 'd: and mallory\'s job whose name is SQL');
is(sql('mallory', "SELECT count(*) FROM retries.schedules WHERE name = '$en'"), '1',
	'd: her schedule is named exactly as her job');
ok($row{$job{m_parse}}[1] eq '0' && $row{$job{m_parse}}[2] =~ /^42601/,
	'd: her text that does not parse is refused, with why (42601)') or diag($row{$job{m_parse}}[2]);
ok($row{$job{m_big}}[1] eq '0' && $row{$job{m_big}}[2] =~ /^54000/ && length($row{$job{m_big}}[2]) < 2000,
	'd: her text of 2 MB is refused, with a short why (54000, retries.max_args_size)') or diag(substr($row{$job{m_big}}[2] // '', 0, 300));
ok($row{$job{m_never}}[1] eq '0' && $row{$job{m_never}}[2] =~ /^22023/,
	'd: her schedule that never fires is refused, with why (22023)');
is(sql('mallory', "SELECT command FROM retries.schedules WHERE name = 'm multi'"),
	"BEGIN;SELECT 9; SELECT 10 -- end\n;COMMIT",
	'd: her text of two statements ending in a comment is wrapped, its COMMIT on a line of its own');
is($node->safe_psql($CDB, "SELECT rolsuper FROM pg_roles WHERE rolname = 'mallory'"), 'f',
	'd: mallory is not a superuser');
is(sql('alice', "SELECT timezone FROM retries.schedules WHERE name = 'alice nightly'"), 'GMT',
	'e: the superuser\'s pg_temp.pg_settings does not set the zone (GMT)');
ok(defined $row{$job{m_own}} && $row{$job{m_own}}[1] eq '1' && $row{$job{aud}}[1] eq '1',
	'e: the import in a session with pg_temp.format, pg_temp.pg_has_role, pg_temp.pg_depend works as before')
  or diag($o);
no_crash($node, 0, 'no crash');
$node->stop;
done_testing();
