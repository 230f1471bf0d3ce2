# On Citus the coordinator speaks for the cluster: retries.annotate,
# unannotate, pause and resume made on the coordinator run on every other
# node too, in the caller's transaction (Citus's two-phase commit), as the
# caller; retries.citus_setup() brings a node added later in line.
#
#   1. annotate on the coordinator: every worker node has the same policy
#      (each column of retries.policies), hooks named by their signature;
#   2. pause and resume on the coordinator reach every node;
#   3. a ROLLBACK takes it back on every node;
#   4. a function the worker nodes lack: annotate fails (42883) and leaves
#      nothing anywhere; with citus.enable_ddl_propagation off it stays on
#      the coordinator, as DDL does;
#   5. unannotate on the coordinator: gone on every node, also where it
#      was not annotated;
#   6. as the caller: mallory cannot annotate alice's function through the
#      coordinator, and a name full of quotes reaches the nodes intact;
#   7. a node added later: retries.citus_setup() gives it the policies and
#      pauses of the coordinator, and its calls retry by them;
#   8. a worker node's own annotate stays there;
#   9. citus_setup() replays as a superuser, but never onto a function that
#      another role owns on a node: a function of alice's on the coordinator
#      whose signature is mallory's function on a worker node (made there)
#      gets no policy or pause there (42501).
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use lib "$FindBin::RealBin/..";
use CitusTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RetriesTest;
use Test::More;

citus_or_skip();
# worker2 is added in section 7
my @nodes = citus_cluster(WORKERS => 2, ADDED => 1);
my ($c, $w1, $w2) = @nodes;
my $DB = 'postgres';

# the policy of FN on a node, every column of retries.policies, as text
sub policy_of
{
	my ($node, $fn) = @_;
	return $node->safe_psql($DB,
		"SELECT to_jsonb(p) - 'fn' - 'owner' FROM retries.policies p WHERE fn = '$fn'::regprocedure");
}

# the same policy on the coordinator and the worker nodes given
sub same_policy
{
	my ($fn, $name, @workers) = @_;
	my $want = policy_of($c, $fn);
	my @got = map { policy_of($_, $fn) } @workers;
	ok($want ne '' && !grep({ $_ ne $want } @got), $name)
	  or diag("coordinator: $want\nworkers: " . join("\n", @got));
	return;
}

$c->safe_psql($DB, q{
CREATE ROLE alice LOGIN;
CREATE ROLE mallory LOGIN;
CREATE SCHEMA alice AUTHORIZATION alice;
CREATE SCHEMA mallory AUTHORIZATION mallory;
GRANT USAGE ON SCHEMA alice TO mallory;
SET ROLE alice;
CREATE FUNCTION alice.f(i int) RETURNS int LANGUAGE sql AS 'SELECT i';
CREATE FUNCTION alice.g(i int) RETURNS int LANGUAGE sql AS 'SELECT i';
CREATE FUNCTION alice."we'ird"")name"(i int) RETURNS int LANGUAGE sql AS 'SELECT i';
CREATE FUNCTION alice.wait(attempt int, sqlstate text, message text) RETURNS interval
	LANGUAGE sql AS $$ SELECT interval '10 ms' $$;
CREATE FUNCTION alice.gave_up(id bigint) RETURNS void LANGUAGE sql AS 'SELECT 1';
});

# ---------------------------------------------------------------------
# 1. annotate on the coordinator reaches every node
# ---------------------------------------------------------------------
as_role($c, $DB, 'alice', q{
SELECT retries.annotate('alice.f(int)', '7 2s 3m', multiplier => 3, jitter => 'equal',
	retry_on => '{RT,40001}', timeout => '9 s', on_exhausted => 'alice.gave_up(bigint)',
	delay_fn => 'alice.wait(int,text,text)', max_running => 4, max_running_per_key => 2,
	rate => '50/1s', notify => true, key_window => '5 s', debounce_max => '1 min')
});
same_policy('alice.f(int)', '1: annotate on the coordinator gives the worker node the same policy', $w1);
like(policy_of($w1, 'alice.f(int)'), qr/"delay_fn": "alice.wait\(integer,text,text\)"/,
	'1: the hook is named by its signature on the worker node');

# ---------------------------------------------------------------------
# 2. pause and resume
# ---------------------------------------------------------------------
is(as_role($c, $DB, 'alice', "SELECT retries.pause('alice.f(int)')"), 't',
	'2: pause on the coordinator');
is(on_all([ $c, $w1 ], "SELECT paused FROM retries.policies WHERE fn = 'alice.f(int)'::regprocedure"),
	't|t', '2: the function is paused on every node');
as_role($c, $DB, 'alice', "SELECT retries.resume('alice.f(int)')");
is(on_all([ $c, $w1 ], "SELECT paused FROM retries.policies WHERE fn = 'alice.f(int)'::regprocedure"),
	'f|f', '2: and resumed on every node');

# ---------------------------------------------------------------------
# 3. a ROLLBACK
# ---------------------------------------------------------------------
as_role($c, $DB, 'alice', q{
BEGIN;
SELECT retries.annotate('alice.f(int)', '1 1s');
SELECT retries.pause('alice.f(int)');
ROLLBACK;
});
like(on_all([ $c, $w1 ],
		"SELECT policy || '/' || paused FROM retries.policies WHERE fn = 'alice.f(int)'::regprocedure"),
	qr{^7 2s 3m/false\|7 2s 3m/false$}, '3: a rolled back annotate and pause change no node');

# ---------------------------------------------------------------------
# 4. a function only the coordinator has
# ---------------------------------------------------------------------
as_role($c, $DB, 'alice', q{
SET citus.enable_ddl_propagation = off;
CREATE FUNCTION alice.here(i int) RETURNS int LANGUAGE sql AS 'SELECT i';
});
my ($out, $err) = try_as($c, $DB, 'alice', "SELECT retries.annotate('alice.here(int)', '3 1s')");
ok(!defined $out && $err =~ /ERROR:  42883:.*alice\.here/, '4: annotate of a function a worker node lacks fails (42883)')
  or diag($err);
is(on_all([ $c, $w1 ], "SELECT count(*) FROM retries.policies WHERE fn::text LIKE '%here%'"),
	'0|0', '4: and leaves no policy on any node');
as_role($c, $DB, 'alice',
	"SET citus.enable_ddl_propagation = off; SELECT retries.annotate('alice.here(int)', '3 1s')");
is($c->safe_psql($DB, "SELECT policy FROM retries.policies WHERE fn = 'alice.here(int)'::regprocedure"),
	'3 1s', '4: with citus.enable_ddl_propagation off, annotate acts on the coordinator only');

# ---------------------------------------------------------------------
# 5. unannotate
# ---------------------------------------------------------------------
as_role($c, $DB, 'alice', "SELECT retries.annotate('alice.g(int)', '2 1s')");
$w1->safe_psql($DB, "SELECT retries.unannotate('alice.g(int)')");
as_role($c, $DB, 'alice', "SELECT retries.unannotate('alice.g(int)'); SELECT retries.unannotate('alice.f(int)')");
is(on_all([ $c, $w1 ],
		"SELECT count(*) FROM retries.policies WHERE fn IN ('alice.f(int)'::regprocedure, 'alice.g(int)'::regprocedure)"),
	'0|0', '5: unannotate on the coordinator reaches every node, also one where it was not annotated');
as_role($c, $DB, 'alice', "SET citus.enable_ddl_propagation = off; SELECT retries.unannotate('alice.here(int)')");

# ---------------------------------------------------------------------
# 6. as the caller
# ---------------------------------------------------------------------
as_role($c, $DB, 'alice', "SELECT retries.annotate('alice.f(int)', '7 2s 3m', max_running => 4)");
($out, $err) = try_as($c, $DB, 'mallory', "SELECT retries.annotate('alice.f(int)', '1 1s')");
ok(!defined $out && $err =~ /ERROR:  42501/, '6: mallory cannot annotate alice\'s function on the coordinator')
  or diag($err);
($out, $err) = try_as($c, $DB, 'mallory', "SELECT retries.pause('alice.f(int)')");
ok(!defined $out && $err =~ /ERROR:  42501/, '6: nor pause it') or diag($err);
is(on_all([ $c, $w1 ], "SELECT policy || '/' || paused FROM retries.policies WHERE fn = 'alice.f(int)'::regprocedure"),
	'7 2s 3m/false|7 2s 3m/false', '6: alice\'s policy holds on every node');
as_role($c, $DB, 'alice', q{SELECT retries.annotate('alice."we''ird"")name"(int)', '4 1s')});
same_policy(q{alice."we''ird"")name"(int)}, '6: a name full of quotes reaches the worker node intact', $w1);
is($w1->safe_psql($DB, "SELECT count(*) FROM pg_stat_activity WHERE state = 'idle in transaction'"),
	'0', '6: no transaction is left open on the worker node');

# ---------------------------------------------------------------------
# 7. a node added later
# ---------------------------------------------------------------------
as_role($c, $DB, 'alice', "SELECT retries.pause('alice.f(int)')");
$c->safe_psql($DB, "SELECT citus_add_node('" . $w2->host . "', " . $w2->port . ')');
is($w2->safe_psql($DB, "SELECT count(*) FROM retries.policies"), '0',
	'7: setup: the node added has the extension and no policy');
$c->safe_psql($DB, 'SELECT retries.citus_setup()');
same_policy('alice.f(int)', '7: citus_setup() gives the node added later the policy of the coordinator',
	$w1, $w2);
same_policy(q{alice."we''ird"")name"(int)}, '7: every policy', $w2);
is($w2->safe_psql($DB, "SELECT paused FROM retries.policies WHERE fn = 'alice.f(int)'::regprocedure"),
	't', '7: and its pause');
as_role($c, $DB, 'alice', "SELECT retries.resume('alice.f(int)')");
is(on_all([ $c, $w1, $w2 ], "SELECT paused FROM retries.policies WHERE fn = 'alice.f(int)'::regprocedure"),
	'f|f|f', '7: resume on the coordinator reaches the node added later');
$c->safe_psql($DB, 'SELECT retries.citus_setup()');    # again: the same
same_policy('alice.f(int)', '7: citus_setup() run again changes nothing', $w1, $w2);

# its calls retry by it: 3 retries (4 attempts), 10 ms apart (delay_fn, not
# the policy's hour), then fail
as_role($c, $DB, 'alice', q{
CREATE FUNCTION alice.flaky(i int) RETURNS int LANGUAGE plpgsql AS $$
BEGIN RAISE EXCEPTION 'not yet' USING ERRCODE = 'RT001'; END $$;
SELECT retries.annotate('alice.flaky(int)', '3 1h', delay_fn => 'alice.wait(int,text,text)');
});
my $id = as_role($w2, $DB, 'alice', "SELECT retries.call('alice.flaky(int)', '[1]')");
call_reaches($w2, $DB, $id, 'failed', '7: a call made on the node added later fails after its attempts');
is($w2->safe_psql($DB, "SELECT count(*) FROM retries.attempts WHERE call_id = $id"), '4',
	'7: after the 4 attempts of the coordinator\'s policy, 10 ms apart by its delay_fn');

# ---------------------------------------------------------------------
# 8. a worker node's own annotate
# ---------------------------------------------------------------------
as_role($w1, $DB, 'alice', "SELECT retries.annotate('alice.g(int)', '5 1s')");
is(on_all(\@nodes, "SELECT count(*) FROM retries.policies WHERE fn = 'alice.g(int)'::regprocedure"),
	'0|1|0', '8: annotate on a worker node stays on that node');

# ---------------------------------------------------------------------
# 9. the replay and owners
# ---------------------------------------------------------------------
as_role($c, $DB, 'alice', q{
SET citus.enable_ddl_propagation = off;
CREATE FUNCTION alice.dup(i int) RETURNS int LANGUAGE sql AS 'SELECT i';
SELECT retries.annotate('alice.dup(int)', '2 1s', max_running => 1);
SELECT retries.pause('alice.dup(int)');
});
$w1->safe_psql($DB, q{
SET citus.enable_ddl_propagation = off;
CREATE FUNCTION alice.dup(i int) RETURNS int LANGUAGE sql AS 'SELECT i';
ALTER FUNCTION alice.dup(int) OWNER TO mallory;
});
# worker2 has alice's, as the coordinator: only worker1 can refuse (the
# replay runs on both at once, and either one's error would end it)
$w2->safe_psql($DB, q{
SET citus.enable_ddl_propagation = off;
CREATE FUNCTION alice.dup(i int) RETURNS int LANGUAGE sql AS 'SELECT i';
ALTER FUNCTION alice.dup(int) OWNER TO alice;
});
(undef, $out, $err) = $c->psql($DB, "\\set VERBOSITY verbose\nSELECT retries.citus_setup()");
like($err, qr/ERROR:  55000:.*function alice\.dup\(integer\) is owned by role mallory on this node, not by role alice as on the coordinator/,
	'9: citus_setup() refuses to give a function of another owner on a node the coordinator\'s policy');
is($w1->safe_psql($DB, "SELECT count(*) FROM retries.policies WHERE fn = 'alice.dup(int)'::regprocedure")
	  . '/' . $w1->safe_psql($DB, "SELECT count(*) FROM retries.flow_data WHERE paused"),
	'0/0', '9: mallory\'s function on the worker node is neither annotated nor paused');

done_testing();
