# Twenty-second hostile review (rv22, of c89440b), by a reviewer who did not
# write the code, 25 minutes, on the fixes of t/054_review_19.pl: the owner
# bound to a command in another database, pause('retries.command(text)')
# pausing retries.command_in, a CONNECTION LIMIT of 0 failing calls, and
# retries.retry() in another database.  alice has EXECUTE on
# retries.command_in; mallory (CREATEDB) has not.  Each numbered check
# fails on the code reviewed (inside a TODO block named "finding N"); the
# lettered ones held.
#
# Findings:
#   1. (Low) a CONNECTION LIMIT 0 that is lifted again leaves the calls due
#      meanwhile failed for good: a login refused by a limit is PostgreSQL's
#      53300 (too_many_connections, class 53, a transient condition a
#      client retries), but access_login_privilege() and
#      command_elsewhere_lacks() report it as 42501, a privilege, which
#      precheck()/elsewhere_check() fail for good whatever retry_on says.
#      Their own hint ("ALTER DATABASE ... CONNECTION LIMIT -1 lets its
#      calls run again") is untrue of those calls: a database owner's
#      short maintenance window (LIMIT 0, then -1) loses every
#      non-superuser's due call and schedule firing there.
#
#   2. (Low) a pause of retries.command(text) made before ALTER EXTENSION
#      retries UPDATE to 1.7 does not hold the commands in another database
#      made after it: pause_or_resume() pauses retries.command_in only when
#      pause() or resume() is called, and retries--1.6--1.7.sql, which
#      makes retries.command_in, gives it no flow_data row copied from
#      retries.command's.  While the pause documented to "hold every
#      command" stands (a plain command is held), alice's command in
#      tenant runs.
#
# Held (plain checks):
#   a. the owner binding: ALTER DATABASE tenant OWNER TO mallory (by a
#      superuser) fails alice's command made before (3D000, naming both
#      owners); mallory, CREATEDB, may not make a database owned by the
#      old owner (not a member); a plain command's schedule refuses args.
#   b. pause: alice, who manages neither procedure, may not pause or resume
#      retries.command(text) (42501); resume('retries.command(text)')
#      after pause('retries.command_in(text,name,name)') alone releases the
#      held command elsewhere, and says it resumed something.
#   c. a superuser's command in a database of CONNECTION LIMIT 0 runs
#      (PostgreSQL exempts superusers too).
#   d. in another database current_call() and current_attempt() are NULL
#      (no id of the call's database leaks there as one of that database).
#   e. no crash (checked last).
#
# Both are fixed since: a CONNECTION LIMIT of 0 is the runner's own
# refusal, 53300 as PostgreSQL's for a login, an ordinary error retried if
# retry_on names it (a function's attempt, no session of the role, does
# not check it); the update to 1.7 pauses retries.command_in if
# retries.command(text) is paused.
#   f. a database's owner (not a superuser) may not write retries.call_data
#      there, so cannot forge a command's owner argument (a restore of the
#      extension's tables is a superuser's).

use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RetriesTest;
use Test::More;

my $node = review_node('review_20', q{
retries.max_attempt_time = 5
});
my $log_offset = -s $node->logfile;

$node->safe_psql('postgres', q{
CREATE EXTENSION retries;
CREATE ROLE alice LOGIN;
CREATE ROLE mallory LOGIN CREATEDB;
GRANT EXECUTE ON PROCEDURE retries.command_in(text, name, name) TO alice;
CREATE DATABASE tenant;
CREATE DATABASE other;
CREATE DATABASE owned;
});
for my $db ('tenant', 'owned')
{
	$node->safe_psql($db, q{
CREATE TABLE t (n int, who text DEFAULT session_user);
GRANT INSERT, SELECT ON t TO alice;
});
}
$node->safe_psql('other', q{
CREATE EXTENSION retries;
CREATE TABLE t (n int, c bigint, a int);
GRANT INSERT, SELECT ON t TO alice;
});

# run(role, command, database, [more]): the role's command; its id
sub run
{
	my ($role, $command, $database, $more) = @_;
	return command_elsewhere($node, $role, $command, $database, $more);
}

# refused(role, sql, sqlstate, name): SQL fails with that SQLSTATE
sub refused
{
	my ($role, $sql, $sqlstate, $name) = @_;
	my ($out, $err) = try_as($node, 'postgres', $role, $sql);
	ok(!defined $out && $err =~ /ERROR:  $sqlstate/, $name) or diag($err);
	return;
}

sub outcome
{
	my ($id) = @_;
	return "SELECT state || ' ' || coalesce(last_sqlstate, '') FROM retries.calls WHERE id = $id";
}

# a. owner binding
my $bound = run('alice', 'INSERT INTO t (n) VALUES (1)', 'owned',
	"policy => '1 10ms', run_at => now() + interval '1 hour'");
$node->safe_psql('postgres', 'ALTER DATABASE owned OWNER TO mallory');
as_role($node, 'postgres', 'alice', "SELECT retries.retry_now($bound)");
wait_until($node, 'postgres', outcome($bound), 'failed 3D000',
	'a: ALTER DATABASE OWNER fails a command made before (3D000)');
like($node->safe_psql('postgres', "SELECT last_message FROM retries.calls WHERE id = $bound"),
	qr/owned by role "mallory", not by "postgres"/, 'a: ... naming both owners');
is($node->safe_psql('owned', 'SELECT count(*) FROM t'), '0', 'a: ... and it did not run');
refused('mallory', 'CREATE DATABASE other2 OWNER postgres', '42501',
	'a: mallory may not make a database owned by the old owner');
as_role($node, 'postgres', 'alice',
	"SELECT retries.schedule_command('ps', 'SELECT 1', '1 hour')");
refused('alice',
	"SELECT retries.alter_schedule('ps', args => '[\"SELECT 1\", \"tenant\", \"postgres\"]')",
	'22023', 'a: a plain command\'s schedule takes no args (three elements)');

# b. pause
refused('alice', "SELECT retries.pause('retries.command(text)')", '42501',
	'b: alice may not pause retries.command(text)');
refused('alice', "SELECT retries.resume('retries.command(text)')", '42501',
	'b: ... nor resume it');
$node->safe_psql('postgres', "SELECT retries.pause('retries.command_in(text,name,name)')");
my $held = run('alice', 'INSERT INTO t (n) VALUES (2)', 'tenant');
is($node->safe_psql('postgres', "SELECT held FROM retries.call_data WHERE id = $held"), 't',
	'b: paused command_in alone holds a command elsewhere');
is($node->safe_psql('postgres', "SELECT retries.resume('retries.command(text)')"), 't',
	'b: resume(retries.command(text)) says it resumed');
wait_until($node, 'postgres', outcome($held), 'succeeded ',
	'b: ... and the held command elsewhere runs');

# 1. a CONNECTION LIMIT 0 for a while
my $window = run('alice', 'INSERT INTO t (n) VALUES (3)', 'tenant',
	"policy => '10 1s', retry_on => '{53300}', run_at => now() + interval '1 hour'");
$node->safe_psql('postgres', 'ALTER DATABASE tenant CONNECTION LIMIT 0');
as_role($node, 'postgres', 'alice', "SELECT retries.retry_now($window)");
wait_until($node, 'postgres',
	"SELECT attempts > 0 OR state <> 'scheduled' FROM retries.call_data WHERE id = $window",
	't', '1: the call due under CONNECTION LIMIT 0 is tried');

# c. a superuser's command there still runs
my $su = run('postgres', 'INSERT INTO t (n) VALUES (4)', 'tenant');
wait_until($node, 'postgres', outcome($su), 'succeeded ',
	'c: a superuser\'s command runs under CONNECTION LIMIT 0');
$node->safe_psql('postgres', 'ALTER DATABASE tenant CONNECTION LIMIT -1');
{
	# finding 1, fixed since: the runner refuses itself with 53300, an
	# ordinary error that retry_on decides on
	is($node->safe_psql('postgres',
			"SELECT outcome || ' ' || sqlstate FROM retries.attempts WHERE call_id = $window AND attempt = 1"),
		'retry 53300', '1: a refused connection is 53300 as PostgreSQL reports it, not 42501');
	wait_until($node, 'postgres', "SELECT state = 'succeeded' FROM retries.calls WHERE id = $window", 't',
		'1: once the limit is lifted, the call due meanwhile runs (retry_on names 53300)');
}

# d. retries.current_call() / current_attempt() in another database
my $ctx = run('alice',
	'INSERT INTO t VALUES (5, retries.current_call(), retries.current_attempt())', 'other');
wait_until($node, 'postgres', outcome($ctx), 'succeeded ', 'd: a command in other runs');
is($node->safe_psql('other', "SELECT coalesce(c::text, 'null') || ' ' || coalesce(a::text, 'null') FROM t WHERE n = 5"),
	'null null', 'd: current_call() and current_attempt() are NULL there');

# 2. a pause of retries.command(text) made before the update to 1.7
$node->safe_psql('postgres', 'CREATE DATABASE upg');
$node->safe_psql('upg', q{
CREATE EXTENSION retries VERSION '1.6';
SELECT retries.pause('retries.command(text)');
ALTER EXTENSION retries UPDATE;
GRANT EXECUTE ON PROCEDURE retries.command_in(text, name, name) TO alice;
});
is($node->safe_psql('upg', 'SELECT extversion FROM pg_extension WHERE extname = \'retries\''),
	'1.7', '2: upg is at 1.7, retries.command(text) paused since 1.6');
my $upg = $node->safe_psql('upg',
	"SET ROLE alice; SELECT retries.run_command('INSERT INTO t (n) VALUES (6)', database => 'tenant')");
my $upg_plain = $node->safe_psql('upg',
	"SET ROLE alice; SELECT retries.run_command('SELECT 1')");
is($node->safe_psql('upg', "SELECT held FROM retries.call_data WHERE id = $upg_plain"), 't',
	'2: a plain command made there is held (the pause stands)');
wait_until($node, 'upg',
	"SELECT state = 'succeeded' OR held FROM retries.call_data WHERE id = $upg", 't',
	'2: a command in another database made there is held or runs');
{
	# finding 2, fixed since: the update pauses retries.command_in with it
	is($node->safe_psql('upg', "SELECT held FROM retries.call_data WHERE id = $upg"), 't',
		'2: ... held, as pause(\'retries.command(text)\') holds every command');
	is($node->safe_psql('tenant', 'SELECT count(*) FROM t WHERE n = 6'), '0',
		'2: ... and it did not run');
}

# f. a database owner may not write call_data (no forged owner in the args)
$node->safe_psql('postgres', 'CREATE DATABASE mdb OWNER mallory');
$node->safe_psql('mdb', 'CREATE EXTENSION retries');
my ($fout, $ferr) = try_as($node, 'mdb', 'mallory',
	"UPDATE retries.call_data SET args = '[\"SELECT 1\", \"tenant\", \"postgres\"]'");
ok(!defined $fout && $ferr =~ /ERROR:  42501/, 'f: the database\'s owner may not write call_data')
  or diag($ferr);

# e. no crash
no_crash($node, $log_offset, 'e: no crash');

$node->stop;
done_testing();
