# Twenty-first hostile review (rv21, of a9ae574), by a reviewer who did not
# write the code, 40 minutes, on commands that run in another database
# (run_command / schedule_command with database, retries.command_in) and
# on the time limit of engine/time_cap.c.  alice has EXECUTE on
# retries.command_in (a superuser granted it); mallory (CREATEDB) has not.
# Databases: postgres (the extension), tenant (no extension), other (the
# extension too).  Each numbered check fails on the code reviewed (inside a
# TODO block named "finding N"); the lettered ones held.
#
# Findings:
#   1. (Low) a command in another database ignores the connection limits
#      that a login of its role there obeys: with ALTER DATABASE tenant
#      CONNECTION LIMIT 0 (or ALTER ROLE alice CONNECTION LIMIT 0) alice
#      cannot log in to tenant ("too many connections"), yet her command
#      runs there.  The runner is a background worker, which PostgreSQL 15
#      never counts against datconnlimit / rolconnlimit
#      (AmRegularBackendProcess in CheckMyDatabase and
#      InitializeSessionUserId); elsewhere() and elsewhere_check() check
#      only CONNECT, and access_login_privilege() only LOGIN, VALID UNTIL
#      and CONNECT.  doc/operations.md names pg_hba.conf as not consulted,
#      not the limits.
#
#   2. (Low) in another database that has the extension too, code of
#      another role there decides when alice's call runs again: mallory's
#      SECURITY DEFINER function in database other, which alice's command
#      calls, raises retries.retry(after => '10 years') and alice's call
#      (in postgres) is put off ten years, past its policy's delays.  The
#      same function in the call's own database is held to the policy (the
#      eleventh review's fix: only code running as the call's role may
#      choose the delay).  retries_runner_main sets
#      retries_current_call_role only when the runner's database is the
#      call's, so retries_retry's has_privs_of_role check is skipped in
#      other, and note_outcome hands retries_retry_after_usecs back to the
#      parent whatever database set it.
#
#   3. (Low) retries.pause('retries.command(text)'), which
#      doc/operations.md says "holds every command", no longer holds the
#      commands that run in another database: they are calls of another
#      procedure, retries.command_in(text, name, name), which must be paused on
#      its own (flow control is per function; neither pause nor the doc
#      was taught the second procedure).  Likewise REVOKE EXECUTE ON
#      retries.command(text) FROM PUBLIC, which reference.md says "keeps
#      commands to the roles granted it", leaves alice making commands in
#      other databases: command_args() checks EXECUTE on the one procedure
#      that stands for the command, retries.command_in, never on
#      retries.command.
#
#   4. (Low) a command is kept by the database's name only: once that
#      database is dropped (or renamed), a role with CREATEDB (mallory)
#      who makes a database of that name gets alice's command run there,
#      as alice, where her own code (a trigger on the table the command
#      writes) runs as alice: it could change alice's password.  The
#      name is resolved afresh at each attempt (elsewhere_check:
#      get_database_oid(name)); nothing ties the command to the database
#      it was made for (no OID kept), and CONNECT is PUBLIC's on a new
#      database.  reference.md says a rename does not follow the command,
#      not that another database may take its place.
#
# Held (plain checks):
#   a. mallory, without EXECUTE on retries.command_in, gets no command into
#      another database: run_command / schedule_command with database (even
#      a database of her own), retries.call / schedule / annotate of
#      retries.command_in, CALL retries.command_in, alter_schedule of her
#      command schedule's args (a second element naming a database) are
#      refused; naming her own database makes a plain command.
#   b. alice: a database without CONNECT is refused when made (42501);
#      template0 fails at the attempt with the connection's 55000.
#   c. alice's command there runs as alice, not a superuser, and cannot
#      SET ROLE or SET SESSION AUTHORIZATION to the bootstrap superuser;
#      ALTER ROLE alice IN DATABASE tenant SET role = 'mallory' (alice a
#      member) is undone before her text runs.
#   d. a command there that traps the cap's cancel forever ends (the
#      child's kill after the grace), failed, and its runner is gone.
#   e. no crash (checked last).
#   f. pausing retries.command_in(text, name, name) holds them (after 3).
#
# All four are fixed since, and their checks plain: a limit of 0 of the
# database or the role refuses the runner, a session of the role, as a
# login would be refused (53300; access_connection_shut); the runner
# knows the call's role in any database, for retries.retry(); pausing
# retries.command(text) pauses retries.command_in too, and a command
# elsewhere needs EXECUTE on both; the command names the database's owner
# when it was made, and another owner's database of that name is not its
# (3D000).
#
# Sections, in order: a, b, c, d, 1, 2, 3, f, 3 (cont.), 4, e.

use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RetriesTest;
use Test::More;

my $node = review_node('review_19', q{
retries.max_attempt_time = 1
});
my $log_offset = -s $node->logfile;

$node->safe_psql('postgres', q{
CREATE EXTENSION retries;
CREATE ROLE alice LOGIN;
CREATE ROLE mallory LOGIN CREATEDB;
GRANT EXECUTE ON PROCEDURE retries.command_in(text, name, name) TO alice;
CREATE DATABASE tenant;
CREATE DATABASE other;
CREATE DATABASE closed;
CREATE DATABASE gone;
REVOKE CONNECT ON DATABASE closed FROM PUBLIC;
CREATE SCHEMA mallory AUTHORIZATION mallory;
GRANT USAGE ON SCHEMA mallory TO PUBLIC;
CREATE TABLE t (n int, who text DEFAULT session_user, su text DEFAULT current_setting('is_superuser'));
GRANT INSERT, SELECT ON t TO alice;
});
$node->safe_psql('tenant', q{
CREATE TABLE t (n int, who text DEFAULT session_user, su text DEFAULT current_setting('is_superuser'));
GRANT INSERT, SELECT ON t TO alice;
});
$node->safe_psql('other', q{
CREATE EXTENSION retries;
CREATE SCHEMA mallory AUTHORIZATION mallory;
GRANT USAGE ON SCHEMA mallory TO PUBLIC;
});

# mallory.later(): mallory's SECURITY DEFINER function asking for a retry
# ten years on, in postgres and in other
for my $db ('postgres', 'other')
{
	as_role($node, $db, 'mallory', q{
CREATE FUNCTION mallory.later() RETURNS void SECURITY DEFINER LANGUAGE plpgsql
AS $$BEGIN PERFORM retries.retry('later', interval '10 years'); END$$;
});
}

# run(role, command, database, [more]): the role's command; its id
sub run
{
	my ($role, $command, $database, $more) = @_;
	return command_elsewhere($node, $role, $command, $database, $more);
}

# state(id, state, name): wait until the call is in that state
sub state
{
	my ($id, $state, $name) = @_;
	return wait_until($node, 'postgres',
		"SELECT state FROM retries.call_data WHERE id = $id", $state, $name);
}

# refused(role, sql, sqlstate, name): SQL fails with that SQLSTATE
sub refused
{
	my ($role, $sql, $sqlstate, $name) = @_;
	my ($out, $err) = try_as($node, 'postgres', $role, $sql);
	ok(!defined $out && $err =~ /ERROR:  $sqlstate/, $name) or diag($err);
	return;
}

# a. mallory without EXECUTE on retries.command_in
$node->safe_psql('postgres', 'CREATE DATABASE mine OWNER mallory');
refused('mallory', "SELECT retries.run_command('SELECT 1', database => 'tenant')", '42501',
	'a: run_command with database, without EXECUTE');
refused('mallory', "SELECT retries.run_command('SELECT 1', database => 'mine')", '42501',
	'a: ... even into a database of her own');
refused('mallory',
	"SELECT retries.schedule_command('s', 'SELECT 1', '1 second', database => 'tenant')",
	'42501', 'a: schedule_command with database');
refused('mallory',
	"SELECT retries.call('retries.command_in(text,name,name)'::regprocedure, '[\"SELECT 1\", \"tenant\"]')",
	'42809', 'a: retries.call of retries.command_in');
refused('mallory',
	"SELECT retries.schedule('s2', 'retries.command_in(text,name,name)', '1 second', '[\"SELECT 1\", \"tenant\"]')",
	'42809', 'a: retries.schedule of retries.command_in');
refused('mallory', "SELECT retries.annotate('retries.command_in(text,name,name)', '3 10ms')",
	'42809', 'a: annotate of retries.command_in');
refused('mallory', "CALL retries.command_in('SELECT 1', 'tenant', 'postgres')", '42501',
	'a: CALL retries.command_in');
as_role($node, 'postgres', 'mallory',
	"SELECT retries.schedule_command('plain', 'SELECT 1', '1 hour')");
refused('mallory',
	"SELECT retries.alter_schedule('plain', args => '[\"SELECT 1\", \"tenant\"]')",
	'22023', 'a: alter_schedule of her command\'s args');
is( as_role($node, 'postgres', 'mallory',
		"SELECT retries.run_command('SELECT 1', database => 'postgres') IS NOT NULL"),
	't', 'a: her own database by name is a plain command');

# b. alice: CONNECT when made, template0 at the attempt
refused('alice', "SELECT retries.run_command('SELECT 1', database => 'closed')", '42501',
	'b: a database without CONNECT is refused when made');
my $t0 = run('alice', 'SELECT 1', 'template0', "policy => '1 10ms'");
state($t0, 'failed', 'b: template0 fails');
like($node->safe_psql('postgres', "SELECT last_sqlstate || ' ' || last_message FROM retries.calls WHERE id = $t0"),
	qr/^55000 .*not currently accepting connections/, 'b: ... with 55000');

# c. the runner there is alice's, and stays hers
my $who = run('alice', 'INSERT INTO t (n) VALUES (1)', 'tenant');
state($who, 'succeeded', 'c: alice\'s command runs in tenant');
is($node->safe_psql('tenant', 'SELECT who || \' \' || su FROM t WHERE n = 1'),
	'alice off', 'c: ... as alice, not a superuser');
my $setrole = run('alice', 'SET ROLE postgres; INSERT INTO t (n) VALUES (2)', 'tenant',
	"policy => '1 10ms'");
my $setsess = run('alice', 'SET SESSION AUTHORIZATION postgres; INSERT INTO t (n) VALUES (3)',
	'tenant', "policy => '1 10ms'");
state($setrole, 'failed', 'c: SET ROLE to the superuser fails');
state($setsess, 'failed', 'c: SET SESSION AUTHORIZATION to the superuser fails');
is($node->safe_psql('tenant', 'SELECT count(*) FROM t WHERE n IN (2, 3)'), '0',
	'c: ... and nothing after them ran');

# c. a role setting there that would change her role is undone
$node->safe_psql('postgres', q{
GRANT mallory TO alice;
ALTER ROLE alice IN DATABASE tenant SET role = 'mallory';
});
my $setting = run('alice', 'INSERT INTO t (n, who) VALUES (4, current_user)', 'tenant');
state($setting, 'succeeded', 'c: a command runs where her role setting says role mallory');
is($node->safe_psql('tenant', 'SELECT who FROM t WHERE n = 4'), 'alice',
	'c: ... as alice all the same');
$node->safe_psql('postgres', q{
ALTER ROLE alice IN DATABASE tenant RESET role;
REVOKE mallory FROM alice;
});

# d. a command that traps the cap's cancel forever (retries.max_attempt_time 1 s)
my $trap = run('alice',
	"DO \$\$BEGIN LOOP BEGIN PERFORM pg_sleep(0.1); EXCEPTION WHEN query_canceled THEN NULL; END; END LOOP; END\$\$ -- not a wait: the length of a command the cap cuts short",
	'tenant', "policy => '1 10ms'");
state($trap, 'failed', 'd: a command that traps its cancel forever ends');
like($node->safe_psql('postgres', "SELECT last_message FROM retries.calls WHERE id = $trap"),
	qr/max_attempt_time/, 'd: ... charged to its time limit');
wait_until($node, 'postgres', workers_sql('tenant'), '0', 'd: ... and its runner is gone');

# 1. connection limits (finding 1, fixed since: a limit of 0, which shuts
# a database or a role to logins, refuses the runner, a session of the
# role, as PostgreSQL refuses a login: 53300, retried if retry_on names it)
$node->safe_psql('postgres', 'ALTER DATABASE tenant CONNECTION LIMIT 0');
# (a login only, no SQL: a psql refused may exit before IPC::Run has
# written SQL to it, and IPC::Run dies of the broken pipe)
my ($ret, $out, $err) = $node->psql('tenant', undef, extra_params => [ '-U', 'alice' ]);
like($err, qr/too many connections for database "tenant"/,
	'1: alice cannot log in to tenant under CONNECTION LIMIT 0');
my $limited = run('alice', 'INSERT INTO t (n) VALUES (10)', 'tenant', "policy => '1 10ms'");
wait_until($node, 'postgres', "SELECT state || ' ' || last_sqlstate FROM retries.calls WHERE id = $limited",
	'failed 53300', '1: her command there is refused as her login is (53300)');
$node->safe_psql('postgres', 'ALTER DATABASE tenant CONNECTION LIMIT -1');
$node->safe_psql('postgres', 'ALTER ROLE alice CONNECTION LIMIT 0');
($ret, $out, $err) = $node->psql('tenant', undef, extra_params => [ '-U', 'alice' ]);
like($err, qr/too many connections for role "alice"/,
	'1: alice cannot log in under her CONNECTION LIMIT 0');
my $rlimited = run('alice', 'INSERT INTO t (n) VALUES (11)', 'tenant', "policy => '1 10ms'");
wait_until($node, 'postgres', "SELECT state || ' ' || last_sqlstate FROM retries.calls WHERE id = $rlimited",
	'failed 53300', '1: ... and so is one under her own CONNECTION LIMIT 0');
$node->safe_psql('postgres', 'ALTER ROLE alice CONNECTION LIMIT -1');
is($node->safe_psql('tenant', 'SELECT count(*) FROM t WHERE n IN (10, 11)'), '0',
	'1: neither ran');

# 2. another role's code in other chooses when alice's call runs again
$node->safe_psql('postgres', 'GRANT EXECUTE ON PROCEDURE retries.command_in(text, name, name) TO alice');
my $here = as_role($node, 'postgres', 'alice',
	"SELECT retries.run_command('SELECT mallory.later()', policy => '3 10ms')");
my $there = run('alice', 'SELECT mallory.later()', 'other', "policy => '3 10ms'");
# (a call whose runner runs is 'scheduled', due at 'infinity', in call_data:
# the view's 'running' and 'failed' tell)
wait_until($node, 'postgres', "SELECT state FROM retries.calls WHERE id = $here", 'failed',
	'2: in the call\'s database, mallory\'s retry() does not put alice\'s call off: its 3 attempts run');
{
	# finding 2, fixed since (the runner knows the call's role there too)
	wait_until($node, 'postgres', "SELECT state FROM retries.calls WHERE id = $there", 'failed',
		'2: in another database, mallory\'s retry() does not put alice\'s call off ten years: its 3 attempts run');
}
# 3. pausing retries.command(text) holds "every command"
$node->safe_psql('postgres', "SELECT retries.pause('retries.command(text)')");
my $plain = as_role($node, 'postgres', 'alice',
	"SELECT retries.run_command('INSERT INTO t (n) VALUES (21)')");
my $paused = run('alice', 'INSERT INTO t (n) VALUES (20)', 'tenant');
is($node->safe_psql('postgres', "SELECT held FROM retries.call_data WHERE id = $plain"), 't',
	'3: a plain command made while retries.command(text) is paused is held');
wait_until($node, 'postgres',
	"SELECT state = 'succeeded' OR held FROM retries.call_data WHERE id = $paused", 't',
	'3: a command in another database made then is held or runs');
{
	# finding 3, fixed since (pausing retries.command pauses retries.command_in)
	is($node->safe_psql('postgres', "SELECT held FROM retries.call_data WHERE id = $paused"), 't',
		'3: ... held, as operations.md says pause(\'retries.command(text)\') holds every command');
}
$node->safe_psql('postgres', "SELECT retries.pause('retries.command_in(text,name,name)')");
my $paused_in = run('alice', 'INSERT INTO t (n) VALUES (22)', 'tenant');
is($node->safe_psql('postgres', "SELECT held FROM retries.call_data WHERE id = $paused_in"), 't',
	'f: pausing retries.command_in(text, name, name) holds them');
$node->safe_psql('postgres',
	"SELECT retries.resume('retries.command(text)'), retries.resume('retries.command_in(text,name,name)')");
state($plain, 'succeeded', 'f: ... and they run once resumed');
state($paused_in, 'succeeded', 'f: ... both');

# 3 (cont.). REVOKE EXECUTE on retries.command(text) "keeps commands to the
# roles granted it" (reference.md, run_command's "Who")
$node->safe_psql('postgres', 'REVOKE EXECUTE ON PROCEDURE retries.command(text) FROM PUBLIC');
refused('alice', "SELECT retries.run_command('SELECT 1')", '42501',
	'3: without EXECUTE on retries.command(text), alice makes no command here');
{
	# finding 3, fixed since (EXECUTE on both procedures)
	refused('alice', "SELECT retries.run_command('SELECT 1', database => 'tenant', run_at => now() + interval '1 hour')",
		'42501', '3: ... nor one that runs in another database');
}
$node->safe_psql('postgres', 'GRANT EXECUTE ON PROCEDURE retries.command(text) TO PUBLIC');

# 4. a database dropped, and made again by another role under its name
my $captured = run('alice', 'INSERT INTO t (n) VALUES (40)', 'gone',
	"policy => '1 10ms', run_at => now() + interval '1 hour'");
$node->safe_psql('postgres', 'DROP DATABASE gone');
$node->safe_psql('postgres', 'SET ROLE mallory; CREATE DATABASE gone');
as_role($node, 'gone', 'mallory', q{
CREATE TABLE public.t (n int, who text);
GRANT INSERT ON public.t TO PUBLIC;
CREATE TABLE public.seen (who text);
GRANT INSERT ON public.seen TO PUBLIC;
CREATE FUNCTION public.spy() RETURNS trigger LANGUAGE plpgsql
AS $$BEGIN INSERT INTO public.seen VALUES (current_user); RETURN NEW; END$$;
CREATE TRIGGER spy BEFORE INSERT ON public.t FOR EACH ROW EXECUTE FUNCTION public.spy();
});
as_role($node, 'postgres', 'alice', "SELECT retries.retry_now($captured)");
wait_until($node, 'postgres',
	"SELECT state <> 'scheduled' FROM retries.call_data WHERE id = $captured", 't',
	'4: alice\'s command made for the dropped database ends');
{
	# finding 4, fixed since (the command names the database's owner too)
	is($node->safe_psql('postgres', "SELECT last_sqlstate FROM retries.calls WHERE id = $captured"),
		'3D000', '4: ... failed: the database it was made for is gone');
	is($node->safe_psql('gone', 'SELECT count(*) FROM public.seen'), '0',
		'4: ... and mallory\'s code in her new database of that name did not run as alice');
}

# e. no crash
no_crash($node, $log_offset, 'e: no crash');

$node->stop;
done_testing();
