# Commands that run in another database of the cluster: run_command() and
# schedule_command() with database (pg_cron's schedule_in_database), made
# in a database with the extension, run by its workers in a runner that
# connects to the other database as the role.
#
#   a. a command runs there as the role (session_user and current_user),
#      VACUUM too; its attempt has the command tag and the runner's pid;
#      retries.calls shows the database;
#   b. a schedule of such a command fires there;
#   c. in a database that has the extension too, the command is no call of
#      that database's: retries.current_call() says NULL there;
#   d. the runner's lock, which cancel() waits for, is of the call's
#      database (a cancel made while it runs waits for it);
#   e. each attempt checks again what the command needs: EXECUTE on
#      retries.command_in (42501), CONNECT on the database (42501), the
#      database (3D000 once dropped), a database that takes connections
#      (the runner's connection fails: 55000); each fails the call, for
#      good.

use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RetriesTest;
use Test::More;

my $node = retries_node('elsewhere');
$node->start;

$node->safe_psql('postgres', q{
CREATE EXTENSION retries;
CREATE ROLE alice LOGIN;
GRANT EXECUTE ON PROCEDURE retries.command_in(text, name, name) TO alice;
CREATE DATABASE tenant;
CREATE DATABASE other;
CREATE DATABASE gone;
});
$node->safe_psql('tenant', q{
CREATE TABLE t (db text DEFAULT current_database(), who text DEFAULT session_user,
				cur text DEFAULT current_user, n int);
GRANT INSERT, SELECT ON t TO alice;
});
$node->safe_psql('other', q{
CREATE EXTENSION retries;
CREATE TABLE t2 (c bigint);
GRANT INSERT ON t2 TO alice;
});

# run(command, database, [run_at]): alice's command; its id
sub run
{
	my ($command, $database, $run_at) = @_;
	return command_elsewhere($node, 'alice', $command, $database,
		defined $run_at ? "run_at => $run_at" : undef);
}

# finished(id, state, name): wait until the call is in that state
sub finished
{
	my ($id, $state, $name) = @_;
	return wait_until($node, 'postgres',
		"SELECT state FROM retries.calls WHERE id = $id", $state, $name);
}

# fails(id, sqlstate, message regex, name): retry_now the call (made for an
# hour later) and see it fail so
sub fails
{
	my ($id, $sqlstate, $message, $name) = @_;
	$node->safe_psql('postgres', "SET ROLE alice; SELECT retries.retry_now($id)");
	finished($id, 'failed', "$name: the call fails");
	my $got = $node->safe_psql('postgres',
		"SELECT attempts || ' ' || last_sqlstate || ' ' || last_message"
		  . " FROM retries.calls WHERE id = $id");
	like($got, qr/^1 $sqlstate $message/, "$name: $sqlstate");
}

# a. the command runs there, as alice
my $ins = run('INSERT INTO t (n) VALUES (1)', 'tenant');
finished($ins, 'succeeded', 'a: a command runs in another database');
is($node->safe_psql('tenant', 'SELECT db, who, cur FROM t WHERE n = 1'),
	'tenant|alice|alice', 'a: ... there, as the role');
is( $node->safe_psql('postgres',
		"SELECT command_tag || ' ' || (pid IS NOT NULL) FROM retries.attempts WHERE call_id = $ins"),
	'INSERT 0 1 true', 'a: ... its attempt has its tag and pid');
is($node->safe_psql('postgres', "SELECT database FROM retries.calls WHERE id = $ins"),
	'tenant', 'a: ... and retries.calls its database');
my $vac = run('VACUUM t', 'tenant');
finished($vac, 'succeeded', 'a: VACUUM runs there');

# b. a schedule of it fires there
$node->safe_psql('postgres',
	"SET ROLE alice; SELECT retries.schedule_command('elsewhere', 'INSERT INTO t (n) VALUES (2)',"
	  . " '1 second', database => 'tenant')");
wait_until($node, 'tenant', 'SELECT count(*) >= 2 FROM t WHERE n = 2', 't',
	'b: a schedule of it fires there');
$node->safe_psql('postgres', "SET ROLE alice; SELECT retries.unschedule('elsewhere')");

# c. no call of that database's there
my $cur = run('INSERT INTO t2 VALUES (retries.current_call())', 'other');
finished($cur, 'succeeded', 'c: a command runs in a database with the extension');
is($node->safe_psql('other', "SELECT count(*) || ' ' || count(c) FROM t2"),
	'1 0', 'c: ... where retries.current_call() says NULL');

# d. the runner's lock is of the call's database
my $gate = close_gate($node, 'tenant', 53);
my $held = run('SELECT ' . gate_sql(53), 'tenant');
wait_at_gate($node, 'tenant', 53, 1, 'd: a command waits at a gate there');
is( $node->safe_psql('postgres',
		"SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a USING (pid)"
		  . " WHERE l.locktype = 'advisory' AND l.granted AND a.backend_type = 'retries runner'"
		  . " AND l.database = (SELECT oid FROM pg_database WHERE datname = 'postgres')"),
	'1', 'd: its runner holds its lock in the call\'s database');
open_gate($gate);
finished($held, 'succeeded', 'd: ... and ends');

# e. each attempt checks again
my $later = "now() + interval '1 hour'";
my $no_exec = run('INSERT INTO t (n) VALUES (3)', 'tenant', $later);
my $no_connect = run('INSERT INTO t (n) VALUES (4)', 'tenant', $later);
my $dropped = run('SELECT 1', 'gone', $later);
my $closed = run('INSERT INTO t (n) VALUES (5)', 'tenant', $later);

$node->safe_psql('postgres',
	'REVOKE EXECUTE ON PROCEDURE retries.command_in(text, name, name) FROM alice');
fails($no_exec, '42501', '.*retries\.command_in', 'e: EXECUTE revoked');
$node->safe_psql('postgres',
	'GRANT EXECUTE ON PROCEDURE retries.command_in(text, name, name) TO alice');

$node->safe_psql('postgres', 'REVOKE CONNECT ON DATABASE tenant FROM PUBLIC');
fails($no_connect, '42501', 'role "alice" may not connect to database "tenant"',
	'e: CONNECT revoked');
$node->safe_psql('postgres', 'GRANT CONNECT ON DATABASE tenant TO PUBLIC');

$node->safe_psql('postgres', 'DROP DATABASE gone');
fails($dropped, '3D000', 'database "gone" does not exist', 'e: database dropped');

$node->safe_psql('postgres', 'ALTER DATABASE tenant ALLOW_CONNECTIONS false');
fails($closed, '55000', 'database "tenant" is not currently accepting connections',
	'e: database closed');
$node->safe_psql('postgres', 'ALTER DATABASE tenant ALLOW_CONNECTIONS true');
is($node->safe_psql('tenant', 'SELECT count(*) FROM t WHERE n BETWEEN 3 AND 5'),
	'0', 'e: none of them ran');

$node->stop;
done_testing();
