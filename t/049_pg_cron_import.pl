# retries.import_pg_cron(): pg_cron's jobs moved into schedules in one call,
# on a server that preloads both (Debian's postgresql-15-cron, pg_cron
# 1.4; skipped where it is not installed).
#
#   a. alice, an ordinary role, imports her own jobs (pg_cron shows a role
#      its own only): a named one, an unnamed one ('pg_cron <jobid>'), an
#      inactive one (paused), one whose name she has a schedule of already
#      (not moved); each moved one is a command schedule of hers, in GMT
#      (pg_cron's zone), whose run waits for the one before (overlap
#      'queue', as pg_cron runs a job once at a time); pg_cron keeps none
#      of them active (cron.alter_job is a superuser's by default: they are
#      removed with cron.unschedule).
#   b. a text of several statements runs in one transaction, as pg_cron ran
#      it: a job that inserts, then fails, leaves no row.
#   c. the superuser imports the rest: its own job and bob's moved, each as
#      its role (turned off with cron.alter_job, kept in cron.job), and its
#      job in another database, as a schedule that runs its command there;
#      bob's job in another database (bob lacks EXECUTE on
#      retries.command_in), one on another server, and one whose expression
#      never fires (pg_cron accepts '0 0 31 2 *') are not moved, each with
#      why; nothing moved twice when run again.
#   d. a moved job runs: trigger() of alice's schedule runs its text as
#      alice; the job of another database runs there.
#   e. in a database without pg_cron: 55000, with a hint.

use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RetriesTest;
use Test::More;

my $node = pg_cron_node('pg_cron_import', 'postgres');

sub q_
{
	my ($sql, $db) = @_;
	return $node->safe_psql($db // 'postgres', $sql);
}

q_(q{
CREATE ROLE alice LOGIN;
CREATE ROLE bob LOGIN;
CREATE EXTENSION pg_cron;
CREATE EXTENSION retries;
GRANT USAGE ON SCHEMA cron TO alice, bob;
CREATE DATABASE other;
CREATE TABLE alice_t (n int);
ALTER TABLE alice_t OWNER TO alice;
});
my %job;
$job{vacuum} = q_("SELECT cron.schedule('nightly vacuum', '30 3 * * *', 'VACUUM')");
$job{never} = q_("SELECT cron.schedule('never', '0 0 31 2 *', 'SELECT 4')");
$job{elsewhere} = q_("SELECT cron.schedule('elsewhere', '0 * * * *', 'CREATE TABLE moved_here ()')");
q_("UPDATE cron.job SET database = 'other' WHERE jobid = $job{elsewhere}");
$job{remote} = q_("SELECT cron.schedule('remote', '0 * * * *', 'SELECT 5')");
q_("UPDATE cron.job SET nodename = 'db2.example' WHERE jobid = $job{remote}");
$job{bob} = as_role($node, 'postgres', 'bob', "SELECT cron.schedule('bob job', '\@hourly', 'SELECT 6')");
$job{bob_elsewhere} = as_role($node, 'postgres', 'bob', "SELECT cron.schedule('bob elsewhere', '\@hourly', 'SELECT 11')");
q_("UPDATE cron.job SET database = 'other' WHERE jobid = $job{bob_elsewhere}");
$job{purge} = as_role($node, 'postgres', 'alice',
	"SELECT cron.schedule('alice purge', '*/5 * * * *',"
	  . " 'DELETE FROM alice_t WHERE n < 0; INSERT INTO alice_t VALUES (1)')");
$job{unnamed} = as_role($node, 'postgres', 'alice', "SELECT cron.schedule('\@daily', 'SELECT 7')");
$job{off} = as_role($node, 'postgres', 'alice', "SELECT cron.schedule('alice off', '\@hourly', 'SELECT 8')");
q_("UPDATE cron.job SET active = false WHERE jobid = $job{off}");
$job{half} = as_role($node, 'postgres', 'alice',
	"SELECT cron.schedule('alice half', '0 1 * * *', 'INSERT INTO alice_t VALUES (10); SELECT 1/0')");
$job{dup} = as_role($node, 'postgres', 'alice', "SELECT cron.schedule('alice dup', '\@daily', 'SELECT 9')");
as_role($node, 'postgres', 'alice', "SELECT retries.schedule_command('alice dup', 'SELECT 10', '1 hour')");

# ---------------------------------------------------------------------
# a.  alice imports her own jobs
# ---------------------------------------------------------------------
my $out = as_role($node, 'postgres', 'alice',
	"SELECT jobid, coalesce(jobname, '-'), moved, coalesce(why, '-')"
	  . " FROM retries.import_pg_cron() ORDER BY jobid");
my %row = map { my @f = split /\|/; ($f[0] => [@f]) } split /\n/, $out;
is(scalar(keys %row), 5, 'a: alice\'s import reports her 5 jobs, and no other role\'s')
  or diag($out);
ok($row{$job{purge}}[2] eq 't', 'a: her named job is moved') or diag($out);
ok($row{$job{unnamed}}[2] eq 't', 'a: her unnamed job is moved') or diag($out);
ok($row{$job{off}}[2] eq 't', 'a: her inactive job is moved') or diag($out);
ok($row{$job{half}}[2] eq 't', 'a: her job of two statements is moved') or diag($out);
like($row{$job{dup}}[3], qr/has a schedule named 'alice dup' already/,
	'a: a job whose name she has a schedule of is not moved, and says why') or diag($out);
is( as_role($node, 'postgres', 'alice',
		"SELECT name || ' ' || owner || ' ' || every || ' ' || timezone || ' ' || overlap || ' ' || paused"
		  . " FROM retries.schedules WHERE name IN ('alice purge', 'pg_cron $job{unnamed}', 'alice off')"
		  . " ORDER BY name"),
	"alice off alice \@hourly GMT queue true\n"
	  . "alice purge alice */5 * * * * GMT queue false\n"
	  . "pg_cron $job{unnamed} alice \@daily GMT queue false",
	'a: each is a command schedule of hers, in GMT, queued behind its last run; the inactive one paused');
is( q_("SELECT count(*) FROM cron.job WHERE jobid IN ($job{purge}, $job{unnamed}, $job{half})"),
	'0', 'a: pg_cron keeps none of her moved jobs (cron.alter_job is not hers: unscheduled)');
is(q_("SELECT active FROM cron.job WHERE jobid = $job{off}"), 'f', 'a: her inactive job stays as it was');
is(q_("SELECT active FROM cron.job WHERE jobid = $job{dup}"), 't', 'a: the job not moved stays active');

# ---------------------------------------------------------------------
# b.  several statements, one transaction
# ---------------------------------------------------------------------
like(as_role($node, 'postgres', 'alice', "SELECT command FROM retries.schedules WHERE name = 'alice half'"),
	qr/^BEGIN;INSERT INTO alice_t VALUES \(10\); SELECT 1\/0\n;COMMIT$/,
	'b: a text of several statements is wrapped in one transaction');
my $half = as_role($node, 'postgres', 'alice', "SELECT retries.trigger('alice half')");
wait_until($node, 'postgres', "SELECT count(*) >= 1 FROM retries.attempts WHERE call_id = $half", 't',
	'b: the job of two statements runs (its first attempt fails)');
is(q_("SELECT count(*) FROM alice_t WHERE n = 10"), '0',
	'b: its insert is rolled back with its failing statement, as pg_cron ran it');

# ---------------------------------------------------------------------
# c.  the superuser imports the rest
# ---------------------------------------------------------------------
$out = q_("SELECT jobid, moved, coalesce(why, '-') FROM retries.import_pg_cron() ORDER BY jobid");
%row = map { my @f = split /\|/; ($f[0] => [@f]) } split /\n/, $out;
is($row{$job{vacuum}}[1], 't', 'c: the superuser\'s own job is moved') or diag($out);
is($row{$job{bob}}[1], 't', 'c: bob\'s job is moved') or diag($out);
is( q_("SELECT owner || ' ' || command FROM retries.schedules WHERE name IN ('bob job', 'nightly vacuum') ORDER BY name"),
	"bob SELECT 6\npostgres VACUUM", 'c: each as a schedule of its role');
is($row{$job{elsewhere}}[1], 't', 'c: its job of another database is moved') or diag($out);
is(q_("SELECT database FROM retries.schedules WHERE name = 'elsewhere'"), 'other',
	'c: ... as a schedule that runs its command there');
like($row{$job{bob_elsewhere}}[2], qr/^42501: database: role "bob" may not make commands that run in another database/,
	'c: bob\'s job of another database is not moved: bob may not make commands there') or diag($out);
like($row{$job{remote}}[2], qr/another server \(nodename db2\.example, nodeport \d+\)/,
	'c: a job of another server is not moved') or diag($out);
like($row{$job{never}}[2], qr/^22023: /, 'c: a job whose expression never fires is not moved, with its error')
  or diag($out);
is( q_("SELECT string_agg(jobid || ' ' || active::int, ',' ORDER BY jobid) FROM cron.job"
		  . " WHERE jobid IN ($job{vacuum}, $job{bob})"),
	"$job{vacuum} 0,$job{bob} 0", 'c: the superuser may turn them off in pg_cron: kept, inactive');
$out = q_("SELECT count(*) FILTER (WHERE moved) FROM retries.import_pg_cron()");
is($out, '0', 'c: run again, it moves nothing twice');

# ---------------------------------------------------------------------
# d.  a moved job runs as its role
# ---------------------------------------------------------------------
my $purge = as_role($node, 'postgres', 'alice', "SELECT retries.trigger('alice purge')");
call_reaches($node, 'postgres', $purge, 'succeeded', 'd: alice\'s moved job runs');
is(q_("SELECT count(*) FROM alice_t WHERE n = 1"), '1', 'd: its text ran');
is(q_("SELECT scheduled_by FROM retries.calls WHERE id = $purge"), 'alice', 'd: as alice');
my $elsewhere = q_("SELECT retries.trigger('elsewhere')");
call_reaches($node, 'postgres', $elsewhere, 'succeeded', 'd: the moved job of another database runs');
is(q_("SELECT count(*) FROM pg_class WHERE relname = 'moved_here'", 'other'), '1', 'd: there');

# ---------------------------------------------------------------------
# e.  no pg_cron here
# ---------------------------------------------------------------------
q_('CREATE EXTENSION retries', 'other');
my ($o, $e) = try_as($node, 'other', 'alice', 'SELECT * FROM retries.import_pg_cron()');
ok(!defined $o && $e =~ /55000/ && $e =~ /cron\.database_name/,
	'e: in a database without pg_cron: 55000, with a hint') or diag($o // $e);

$node->stop;
done_testing();
