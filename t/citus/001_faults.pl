# retries on a Citus cluster (a coordinator and two worker nodes): the
# extension reaches every node, every node runs its own workers, and calls
# whose function writes to a distributed and a reference table take effect
# exactly once across SIGKILLs of retries workers on every node (each a
# crash restart of that node), a worker node stopped under load (until the
# calls have failed on it), and a node lost between a call's write and its
# commit (the call held at a gate meanwhile).  Counted after Citus has
# recovered its prepared transactions.  No step depends on how fast the
# machine is: a drain is waited for as long as it makes progress.
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
my @nodes = citus_cluster();
my ($c, $w1, $w2) = @nodes;

# --- the extension on every node, with its own workers --------------------
is(on_all(\@nodes, "SELECT extversion FROM pg_extension WHERE extname = 'retries'"),
	join('|', ($c->safe_psql('postgres',
		"SELECT default_version FROM pg_available_extensions WHERE name = 'retries'")) x 3),
	'CREATE EXTENSION on the coordinator reached both worker nodes');
wait_until($_, 'postgres', workers_query('postgres'), '2',
	'the workers of ' . $_->name . ' started') for @nodes;

# --- a function writing to a distributed and a reference table -------------
# No unique constraints: a call that took effect twice shows as two rows.
# The retry_on that rides out a node restart (doc/operations.md, "Running
# on Citus").
$c->safe_psql('postgres', q{
CREATE TABLE orders (id bigint, note text);
SELECT create_distributed_table('orders', 'id');
CREATE TABLE audit (id bigint);
SELECT create_reference_table('audit');
CREATE FUNCTION put(i bigint) RETURNS void LANGUAGE sql AS $$
	INSERT INTO orders VALUES (i, 'put');
	INSERT INTO audit VALUES (i);
$$;
});
# writes its row, then waits at gate 1 (section 3)
$c->safe_psql('postgres', q{
CREATE FUNCTION gated_put(i bigint) RETURNS void LANGUAGE sql AS $$
	INSERT INTO orders VALUES (i, current_setting('port'));
	SELECT } . gate_sql(1) . q{;
$$;
});
# Attempts 1 s apart at most, and enough of them that no outage here,
# however slow the machine, uses them up (the retry_on is what the test
# is about)
my $policy = q{'1000 10ms 1s', retry_on => '{RT, 08, 57P01, 57P02, 57P03, 40001, 40P01}'};
for my $node ($c, $w1)
{
	$node->safe_psql('postgres', "SELECT retries.annotate('put(bigint)', $policy)");
	$node->safe_psql('postgres', "SELECT retries.annotate('gated_put(bigint)', $policy)");
}

my $unfinished = "SELECT count(*) FROM retries.calls WHERE state IN ('scheduled', 'running')";

# exactly_once(FROM, TO, NAME): calls put(FROM..TO) succeeded each once,
# with one row each in orders and audit, after every node has no call
# left unfinished and no transaction left prepared
sub exactly_once
{
	my ($from, $to, $name) = @_;
	my $n = $to - $from + 1;

	for my $node ($c, $w1)
	{
		next
		  if drains($node, $unfinished, '0',
			"$name: no call left unfinished on " . $node->name);
		# what every node's processes are doing, to tell where it hangs
		diag($_->name . ":\n"
			  . $_->safe_psql('postgres',
				"SELECT pid, backend_type, state, wait_event_type || ':' || wait_event,"
				  . " left(query, 120) FROM pg_stat_activity WHERE pid <> pg_backend_pid()"
				  . " AND backend_type IN ('client backend', 'retries worker')"))
		  for @nodes;
	}
	no_prepared_xacts(\@nodes, "$name: Citus recovered every prepared transaction");
	is( $c->safe_psql('postgres',
			"SELECT count(*) || ' rows, ' || count(DISTINCT id) || ' ids'"
			  . " FROM orders WHERE id BETWEEN $from AND $to"),
		"$n rows, $n ids", "$name: one row in the distributed table per call");
	is( $c->safe_psql('postgres',
			"SELECT count(*) || ' rows, ' || count(DISTINCT id) || ' ids'"
			  . " FROM audit WHERE id BETWEEN $from AND $to"),
		"$n rows, $n ids", "$name: one row in the reference table per call");
	my $states = join ',', map {
		$_->safe_psql('postgres',
			"SELECT coalesce(string_agg(state || ' ' || n, ',' ORDER BY state), '')"
			  . " FROM (SELECT state, count(*) n FROM retries.calls"
			  . " WHERE fn = 'put(bigint)'::regprocedure"
			  . " AND (args->>0)::bigint BETWEEN $from AND $to GROUP BY state) s")
	} ($c, $w1);
	my $ok = 0;
	$ok += $1 while $states =~ /succeeded (\d+)/g;
	is($ok, $n, "$name: every call succeeded ($states)");
	return;
}

# kill_worker(NODE): SIGKILL one of NODE's retries workers (a crash restart
# of NODE), then wait for its workers to be back
sub kill_worker
{
	my ($node) = @_;
	my @pids = split /,/, worker_pids($node, 'postgres');
	ok(@pids, 'a retries worker to kill on ' . $node->name) or return;
	kill 'KILL', $pids[0];
	# the postmaster restarts the node; its workers come back
	wait_until($node, 'postgres', workers_query('postgres'), '2',
		'the workers of ' . $node->name . ' back after a SIGKILL');
	return;
}

# --- 1. calls made on the coordinator and on a worker node, SIGKILLs -------
# of a retries worker on every node during the drain
$w1->safe_psql('postgres', 'ALTER SYSTEM SET retries.enabled = off');
$c->safe_psql('postgres', 'ALTER SYSTEM SET retries.enabled = off');
$_->reload for ($c, $w1);
schedule_range($c, 'postgres', 'put(bigint)', 1, 3000);
schedule_range($w1, 'postgres', 'put(bigint)', 3001, 4000);
$c->safe_psql('postgres', 'ALTER SYSTEM RESET retries.enabled');
$w1->safe_psql('postgres', 'ALTER SYSTEM RESET retries.enabled');
$_->reload for ($c, $w1);

for my $node ($w1, $c, $w2)
{
	wait_until($c, 'postgres',
		"SELECT count(*) > 0 FROM retries.calls WHERE state = 'running' OR attempts > 0",
		't', 'the drain is under way');
	kill_worker($node);
}
exactly_once(1, 4000, 'SIGKILLs on every node');

# --- 2. a worker node stopped under load ------------------------------------
# The node stays down until the drain has met the outage: attempts have
# failed on it (every put writes to the reference table, which has a
# placement on each node, so none succeeds meanwhile).  Calls are made
# after the stop too, so that some are left to fail however fast the drain
# before it went.
schedule_range($c, 'postgres', 'put(bigint)', 10001, 12000);
wait_until($c, 'postgres',
	"SELECT count(*) > 0 FROM orders WHERE id BETWEEN 10001 AND 12000", 't',
	'the second drain is under way');
$w2->stop('fast');
schedule_range($c, 'postgres', 'put(bigint)', 12001, 13000);
wait_until($c, 'postgres',
	"SELECT count(*) >= 20 FROM retries.attempts a JOIN retries.calls c ON c.id = a.call_id"
	  . " WHERE (c.args->>0)::bigint BETWEEN 10001 AND 13000 AND a.sqlstate IS NOT NULL",
	't', 'with a worker node stopped, attempts fail');
$w2->start;
exactly_once(10001, 13000, 'a worker node stopped under load');

# --- 3. the node lost between a call's write and its commit ----------------
# gated_put writes its row, then waits at a gate the test holds; the node
# holding the row's shard is stopped at once, then the gate opened.  The
# batch cannot commit (Citus fails it with "failure on connection marked as
# essential", XX000): the call must run again, not be failed for good.  The
# node is started again once an attempt of the call has failed (the batch
# rolled back uncharged, or its one call charged: either way the call met
# the lost node).
my $id = 20001;
my $port = $c->safe_psql('postgres',
	"SELECT nodeport FROM citus_shards"
	  . " WHERE shardid = get_shard_id_for_distribution_column('orders', $id)");
my ($holder) = grep { $_->port == $port } ($w1, $w2);
my $gate = close_gate($c, 'postgres', 1);
my $call = $c->safe_psql('postgres', "SELECT retries.call('gated_put(bigint)', '[$id]')");
wait_at_gate($c, 'postgres', 1, 1, 'gated_put has written its row and waits at the gate');
$holder->stop('immediate');
open_gate($gate);
wait_until($c, 'postgres',
	"SELECT count(*) > 0 FROM retries.attempts WHERE call_id = $call AND sqlstate IS NOT NULL",
	't', 'with the node lost before its commit, an attempt of the call failed');
$holder->start;
wait_until($c, 'postgres', "SELECT state FROM retries.calls WHERE id = $call", 'succeeded',
	'a call whose node was lost before its commit ran again and succeeded');
note($c->safe_psql('postgres',
	"SELECT string_agg(outcome || ' ' || coalesce(sqlstate, '') || ' ' || left(coalesce(message, ''), 80), E'\n' ORDER BY attempt)"
	  . " FROM retries.attempts WHERE call_id = $call"));
is($c->safe_psql('postgres', "SELECT count(*) FROM orders WHERE id = $id"), '1',
	'its row is there once');

# --- 4. a node lost while the workers keep connections to it -------------
# The workers keep connections to the nodes between their transactions.
# A drain, then the node is stopped at once and left down, then calls that
# write to it: a batch that finds its kept connection dead cannot commit
# (Citus fails it with "failure on connection marked as essential",
# XX000), which must not fail a call for good; each attempt fails with the
# connection's SQLSTATE and is retried as retry_on says; once the node is
# back, each call runs once.
schedule_range($c, 'postgres', 'put(bigint)', 30001, 31000);
drains($c, $unfinished, '0', 'the fourth drain is over');
$w2->stop('immediate');
schedule_range($c, 'postgres', 'put(bigint)', 31001, 32000);
wait_until($c, 'postgres',
	"SELECT count(*) >= 20 FROM retries.attempts a JOIN retries.calls c ON c.id = a.call_id"
	  . " WHERE c.args->>0 BETWEEN '31001' AND '32000' AND a.sqlstate = '08006'",
	't', 'with a node down, attempts fail with 08006');
is($c->safe_psql('postgres',
		"SELECT count(*) FROM retries.calls WHERE args->>0 BETWEEN '30001' AND '32000'"
		  . " AND state = 'failed'"),
	'0', 'no call failed for good while the node was down');
$w2->start;
exactly_once(30001, 32000, 'a node lost in a drain, then back');

$_->stop for @nodes;
done_testing();
