# Calls beside their data (1.7): retries.call(..., colocate_with,
# shard_key) made on the coordinator is stored on, and run by, the worker
# node holding that value's shard; ids are unique across the cluster;
# wait, result, cancel and retries.cluster_calls on the coordinator reach
# the calls where they are; the call and the caller's transaction commit
# together (two-phase commit) or not at all; exactly once across SIGKILLs
# of the workers' retries workers and a shard move under load.
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
my ($c, $w1, $w2) = citus_cluster(CONF => "wal_level = logical\n");
my @nodes = ($c, $w1, $w2);
my $N = 3000;
my $retry_on = '{RT, 08, 57P01, 57P02, 57P03, 40001, 40P01}';

$c->safe_psql('postgres', q{
CREATE TABLE orders (id bigint, note text);
SELECT create_distributed_table('orders', 'id', shard_count := 8);
CREATE TABLE other (k text, v text);
SELECT create_distributed_table('other', 'k', colocate_with := 'none');
CREATE FUNCTION put(i bigint) RETURNS bigint LANGUAGE sql
	AS $$ INSERT INTO orders VALUES (i, current_setting('port')) RETURNING i * 10 $$;
CREATE ROLE alice LOGIN;
CREATE ROLE bob LOGIN;
GRANT ALL ON orders TO alice, bob;
});
on_all(\@nodes,
	"SELECT retries.annotate('put(bigint)', '50 10ms 1s', retry_on => '$retry_on')");

# 1. Without retries.citus_setup(), no mailbox: a clear error
my ($ret, $out, $err) = $c->psql('postgres',
	"SELECT retries.call('put(bigint)', '[1]', colocate_with => 'orders', shard_key => '1')");
like($err, qr/no mailbox for the colocation group of table orders.*\n.*HINT:.*retries\.citus_setup\('orders'\)/s,
	'a call with colocate_with before retries.citus_setup() names the fix');

# 2. retries.citus_setup(): each node's ids in a range of its own
$c->safe_psql('postgres', "SELECT retries.citus_setup('orders')");
$c->safe_psql('postgres', "SELECT retries.citus_setup('orders')");    # again: nothing more
is( on_all(\@nodes,
		"SELECT (SELECT seqmin FROM pg_sequence WHERE seqrelid = 'retries.call_data_id_seq'::regclass)"
		  . " = (SELECT groupid::bigint << 48) + 1 FROM pg_dist_local_group"),
	't|t|t', 'each node group has its range of call ids');

# the node that holds a value's shard, by port
my $holder = q{(SELECT n.nodeport FROM pg_dist_placement p JOIN pg_dist_node n USING (groupid)
	WHERE p.shardid = get_shard_id_for_distribution_column('orders', %s))};

# colocated(FROM, TO): SQL that makes the calls put(i), i from FROM to TO,
# each beside its row (colocate_with orders, shard_key i); their count
sub colocated
{
	my ($from, $to) = @_;
	return "SELECT count(retries.call('put(bigint)', jsonb_build_array(i),"
	  . " colocate_with => 'orders', shard_key => i::text)) FROM generate_series($from, $to) i";
}

# 3. N calls made on the coordinator, in one transaction
$c->safe_psql('postgres', colocated(1, $N));
is($c->safe_psql('postgres', "SELECT count(*) FROM retries.calls"),
	'0', 'the coordinator keeps none of the calls');
my $per_node = join '|', map {
	$c->safe_psql('postgres',
		"SELECT count(*) FROM generate_series(1, $N) i WHERE "
		  . sprintf($holder, 'i') . " = " . $_->port)
} ($w1, $w2);
drains($c, "SELECT count(*) FROM retries.cluster_calls WHERE state = 'succeeded'",
	$N, "all $N calls succeeded, seen from the coordinator");
is(join('|', map { $_->safe_psql('postgres', 'SELECT count(*) FROM retries.calls') } ($w1, $w2)),
	$per_node, "each worker node kept the calls of its shards ($per_node)");
is($c->safe_psql('postgres',
		"WITH o AS MATERIALIZED (SELECT id, note FROM orders)"
		  . " SELECT count(*) FROM o WHERE note::int <> " . sprintf($holder, 'id')),
	'0', "every call ran on the node holding its row's shard");
is($c->safe_psql('postgres',
		"SELECT count(*) || ' ' || count(DISTINCT id) || ' ' || count(DISTINCT node_group)"
		  . " || ' ' || bool_and(id >> 48 = node_group) FROM retries.cluster_calls"),
	"$N $N 2 true", 'the ids are unique across the cluster and name their node group');
no_prepared_xacts(\@nodes, 'Citus recovered every prepared transaction');
is($c->safe_psql('postgres', "SELECT count(*) || ' ' || count(DISTINCT id) FROM orders"),
	"$N $N", 'one row per call, none twice');

# 4. wait, result and cancel from the coordinator
my $id = $c->safe_psql('postgres',
	"SELECT retries.call('put(bigint)', '[100001]', colocate_with => 'orders', shard_key => '100001')");
ok($id >= (1 << 48), 'a call kept on a worker node has that node\'s id');
is($c->safe_psql('postgres', "SELECT (retries.wait($id, '$RetriesTest::DEADLINE s')).state"),
	'succeeded', 'retries.wait() on the coordinator waits for a call on a worker node');
is($c->safe_psql('postgres', "SELECT retries.result($id)"),
	'1000010', 'retries.result() reads its value there');
my $later = $c->safe_psql('postgres',
	"SELECT retries.call('put(bigint)', '[100002]', run_at => now() + interval '1 hour',"
	  . " colocate_with => 'orders', shard_key => '100002')");
($ret, $out, $err) = $c->psql('postgres', "SELECT retries.wait($later, '100 ms')");
like($err, qr/call $later did not finish within/, 'a wait there times out as one here does');
($ret, $out, $err) = $c->psql('postgres',
	"\\set VERBOSITY verbose\nSELECT retries.result($later)");
like($err, qr/ERROR:  55000: call $later has not succeeded/,
	'an error there comes back with its SQLSTATE');
is($c->safe_psql('postgres', "SELECT retries.cancel($later)"), 't',
	'retries.cancel() on the coordinator cancels a call on a worker node');
is($c->safe_psql('postgres', "SELECT retries.cancel($later)"), 'f', 'and only once');
is($c->safe_psql('postgres',
		"SELECT state FROM retries.cluster_calls WHERE id = $later"),
	'cancelled', 'retries.cluster_calls shows it cancelled');
($ret, $out, $err) = $c->psql('postgres',
	"SET ROLE bob; \\set VERBOSITY verbose\nSELECT retries.result($id)");
like($err, qr/ERROR:  42704: call $id does not exist/,
	'another role does not see the call through the coordinator either');
is($c->safe_psql('postgres', "SET ROLE bob; SELECT count(*) FROM retries.cluster_calls"),
	'0', 'nor in retries.cluster_calls');

# 5. The call and the caller's transaction: both or neither
my $before = $c->safe_psql('postgres', 'SELECT count(*) FROM retries.cluster_calls');
$c->psql('postgres', q{BEGIN;
SELECT retries.call('put(bigint)', '[200001]', colocate_with => 'orders', shard_key => '200001');
SELECT retries.call('put(bigint)', '[200002]', colocate_with => 'orders', shard_key => '200002');
ROLLBACK;});
$c->psql('postgres', q{BEGIN;
SELECT retries.call('put(bigint)', '[200003]', colocate_with => 'orders', shard_key => '200003');
SELECT 1 / 0;
COMMIT;});
is($c->safe_psql('postgres', 'SELECT count(*) FROM retries.cluster_calls'),
	$before, 'calls of a transaction rolled back, or failed, are made nowhere');
($ret, $out, $err) = $c->psql('postgres', q{SET citus.log_remote_commands = on;
SELECT retries.call('put(bigint)', '[200004]', colocate_with => 'orders', shard_key => '200004');});
like($err, qr/PREPARE TRANSACTION.*COMMIT PREPARED/s,
	'a call made on another node commits in two phases with its caller');

# 6. The role's rights hold on the node that makes the call
$c->safe_psql('postgres', 'REVOKE EXECUTE ON FUNCTION put(bigint) FROM PUBLIC');
($ret, $out, $err) = $c->psql('postgres',
	"SET ROLE alice; \\set VERBOSITY verbose\nSELECT retries.call('put(bigint)', '[300001]',"
	  . " colocate_with => 'orders', shard_key => '300001')");
like($err, qr/ERROR:  42501/, 'a role may not call there what it may not call here');
($ret, $out, $err) = $c->psql('postgres',
	"SET ROLE alice; \\set VERBOSITY verbose\nINSERT INTO retries.call_mailbox_"
	  . $c->safe_psql('postgres', "SELECT colocationid FROM pg_dist_partition WHERE logicalrelid = 'orders'::regclass")
	  . " (shard_key, fn, args, run_at, priority) VALUES (300002, 'put(bigint)', '[300002]', now(), 0)");
like($err, qr/ERROR:  42501/, 'nor by writing into the mailbox itself');
$c->safe_psql('postgres', 'GRANT EXECUTE ON FUNCTION put(bigint) TO PUBLIC');
is($c->safe_psql('postgres', 'SET ROLE alice; ' . colocated(300003, 300012)),
	'10', 'alice makes calls on the worker nodes');
wait_until($c, 'postgres',
	"SELECT count(*) FROM retries.cluster_calls WHERE scheduled_by = 'alice'::regrole AND state = 'succeeded'",
	'10', "alice's calls ran, as alice");

# 7. Errors that name the argument
($ret, $out, $err) = $c->psql('postgres',
	"SELECT retries.call('put(bigint)', '[1]', colocate_with => 'orders')");
like($err, qr/colocate_with needs shard_key/, 'colocate_with without shard_key');
($ret, $out, $err) = $c->psql('postgres',
	"SELECT retries.call('put(bigint)', '[1]', colocate_with => 'other', shard_key => 'x')");
like($err, qr/no mailbox for the colocation group of table other/, 'a table of another colocation group');
($ret, $out, $err) = $c->psql('postgres',
	"SELECT retries.call('put(bigint)', '[1]', colocate_with => 'pg_class', shard_key => '1')");
like($err, qr/colocate_with: table pg_class is not a hash-distributed table/, 'a table not distributed');
($ret, $out, $err) = $c->psql('postgres',
	"SELECT retries.call('put(bigint)', '[1]', colocate_with => 'orders', shard_key => 'abc')");
like($err, qr/invalid input syntax for type bigint.*shard_key/s, 'a shard_key not of the column\'s type');

# 8. Exactly once across SIGKILLs of the retries workers of both worker nodes
$c->safe_psql('postgres', 'TRUNCATE orders');
$_->safe_psql('postgres', 'ALTER SYSTEM SET retries.batch_size = 10'), $_->reload for ($w1, $w2);
$c->safe_psql('postgres', colocated(1000001, 1000000 + $N));
for my $w ($w1, $w2)
{
	wait_until($w, 'postgres',
		"SELECT count(*) > 0 FROM retries.calls WHERE state = 'succeeded' AND args->>0 > '1000000'",
		't', 'the drain is under way on ' . $w->name);
	my @pids = split /,/, worker_pids($w, 'postgres');
	ok(@pids > 0, 'a retries worker to kill on ' . $w->name);
	kill 'KILL', $pids[0] if @pids;
}
drains($c,
	"SELECT count(*) FROM retries.cluster_calls WHERE state = 'succeeded' AND (args->>0)::bigint > 1000000",
	$N, "all $N calls succeeded after the SIGKILLs");
no_prepared_xacts(\@nodes, 'Citus recovered every prepared transaction');
is($c->safe_psql('postgres', "SELECT count(*) || ' ' || count(DISTINCT id) FROM orders"),
	"$N $N", 'one row per call, none twice, after the SIGKILLs');

# 9. A shard move while calls are made on the coordinator: the mailbox's
# shards move with orders' (one colocation group); each call is made on
# the node of its shard at that moment, and runs once
$c->safe_psql('postgres', 'TRUNCATE orders');
my $maker = $c->background_psql('postgres');
my $made = 0;
my @shards = split /,/, $c->safe_psql('postgres',
	"SELECT string_agg(shardid::text, ',' ORDER BY shardid) FROM citus_shards"
	  . " WHERE table_name = 'orders'::regclass AND nodeport = " . $w1->port);
ok(@shards >= 1, 'worker node 1 holds shards of orders (' . scalar(@shards) . ')');
my $batch = 100;
# make_batches(K): K batches of calls more, made by the background session
my $make_batches = sub {
	for (1 .. $_[0])
	{
		$maker->query_safe(colocated(2000000 + $made + 1, 2000000 + $made + $batch));
		$made += $batch;
	}
};
for my $shard (@shards)
{
	# batches of calls, then the move, blocking writes meanwhile, then more
	$make_batches->(2);
	$c->safe_psql('postgres',
		"SELECT citus_move_shard_placement($shard, '" . $w1->host . "', " . $w1->port
		  . ", '" . $w2->host . "', " . $w2->port . ", shard_transfer_mode := 'block_writes')");
}
$make_batches->(4);
$maker->quit;
is($c->safe_psql('postgres',
		"SELECT count(*) FROM citus_shards WHERE nodeport = " . $w1->port
		  . " AND colocation_id = (SELECT colocationid FROM pg_dist_partition WHERE logicalrelid = 'orders'::regclass)"),
	'0', "orders' shards and its mailbox's moved off worker node 1");
drains($c,
	"SELECT count(*) FROM retries.cluster_calls WHERE state = 'succeeded' AND (args->>0)::bigint > 2000000",
	$made, "all $made calls made around the moves succeeded");
is($w2->safe_psql('postgres',
		"SELECT count(*) FROM retries.calls WHERE (args->>0)::bigint > 2000000 + $made - 4 * $batch"),
	4 * $batch, 'the calls made after the moves were made on the node the shards moved to');
no_prepared_xacts(\@nodes, 'Citus recovered every prepared transaction, across the moves');
is($c->safe_psql('postgres', "SELECT count(*) || ' ' || count(DISTINCT id) FROM orders"),
	"$made $made", 'one row per call, none twice, across the moves');

# 10. A schedule on the coordinator whose function makes calls beside
# their data: each firing's calls are made on the shards' nodes, in the
# firing's attempt, and run there
$c->safe_psql('postgres', q{
CREATE FUNCTION fan_out(n int) RETURNS bigint LANGUAGE sql AS $$
	SELECT count(retries.call('put(bigint)', jsonb_build_array(i),
							  colocate_with => 'orders', shard_key => i::text))
	  FROM generate_series(3000001, 3000000 + n) i $$;
SELECT retries.annotate('fan_out(int)', '3 10ms');
SELECT retries.schedule('nightly', 'fan_out(int)', '1 day', '[20]');
SELECT retries.trigger('nightly');
});
wait_until($c, 'postgres',
	"SELECT count(*) FROM retries.cluster_calls WHERE state = 'succeeded' AND (args->>0)::bigint > 3000000",
	'20', 'a schedule\'s firing made 20 calls beside their data, and they ran');
is($c->safe_psql('postgres',
		"SELECT count(*) FROM retries.calls WHERE fn = 'put(bigint)'::regprocedure"),
	'0', 'none of them on the coordinator');
is($c->safe_psql('postgres', "SELECT result FROM retries.calls WHERE schedule = 'nightly'"),
	'20', 'the firing\'s call returned how many it made');

# 11. DROP EXTENSION drops the mailboxes, on every node
$c->safe_psql('postgres', 'DROP EXTENSION retries');
is(on_all(\@nodes, "SELECT count(*) FROM pg_class WHERE relname LIKE 'call_mailbox%'"),
	'0|0|0', 'DROP EXTENSION retries leaves no mailbox or shard of one');

$_->stop for @nodes;
done_testing();
