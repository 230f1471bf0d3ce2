# A shard moved under load: calls made on the worker node that holds their
# rows' shards (calls beside their data) while citus_move_shard_placement
# moves those shards to the other worker node.  A call stays on the node
# where it was made; after the move its function reaches the rows on their
# new node.  Every call runs exactly once: one row each, on the shard's
# node of the moment it ran.
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
my $N = 4000;

$c->safe_psql('postgres', q{
CREATE TABLE orders (id bigint, note text);
SELECT create_distributed_table('orders', 'id', shard_count := 4);
CREATE FUNCTION put(i bigint) RETURNS void LANGUAGE sql
	AS $$ INSERT INTO orders VALUES (i, 'put') $$;
});
$w1->safe_psql('postgres',
	q{SELECT retries.annotate('put(bigint)', '50 10ms 1s', retry_on => '{RT, 08, 57P01, 57P02, 57P03, 40001, 40P01}')});

# the ids whose rows' shards worker node 1 holds, and those shards
my $held = q{SELECT i FROM generate_series(1, 100000) i
	JOIN pg_dist_shard s ON s.logicalrelid = 'orders'::regclass
	 AND hashint8(i) BETWEEN s.shardminvalue::int AND s.shardmaxvalue::int
	JOIN pg_dist_placement p USING (shardid)
	WHERE p.groupid = (SELECT groupid FROM pg_dist_local_group)};
my $shards = $c->safe_psql('postgres',
	"SELECT string_agg(shardid::text, ',' ORDER BY shardid) FROM citus_shards"
	  . " WHERE table_name = 'orders'::regclass AND nodeport = " . $w1->port);
my @shards = split /,/, $shards;
ok(@shards >= 1, 'worker node 1 holds shards of orders (' . scalar(@shards) . ')');

$w1->safe_psql('postgres', 'ALTER SYSTEM SET retries.enabled = off');
$w1->reload;
$w1->safe_psql('postgres',
	"SELECT count(retries.call('put(bigint)', jsonb_build_array(i))) FROM ($held LIMIT $N) s(i)");
# slow the calls down a little, so that the moves happen during the drain
# (nothing depends on how much of it: the counts below hold either way, and
# the note says how many calls were left when the moves were over)
$w1->safe_psql('postgres', 'ALTER SYSTEM SET retries.batch_size = 10');
$w1->safe_psql('postgres', 'ALTER SYSTEM RESET retries.enabled');
$w1->reload;
wait_until($w1, 'postgres',
	"SELECT count(*) > 0 FROM retries.calls WHERE state = 'succeeded'", 't',
	'the drain is under way');

for my $shard (@shards)
{
	$c->safe_psql('postgres',
		"SELECT citus_move_shard_placement($shard, '" . $w1->host . "', " . $w1->port
		  . ", '" . $w2->host . "', " . $w2->port . ", shard_transfer_mode := 'block_writes')");
}
is($c->safe_psql('postgres',
		"SELECT count(*) FROM citus_shards WHERE table_name = 'orders'::regclass AND nodeport = "
		  . $w1->port),
	'0', 'every shard of orders moved off worker node 1');
my $during = $w1->safe_psql('postgres',
	"SELECT count(*) FROM retries.calls WHERE state IN ('scheduled', 'running')");
note("calls left to run when the moves were over: $during");

drains($w1, "SELECT count(*) FROM retries.calls WHERE state = 'succeeded'",
	$N, "all $N calls succeeded");
no_prepared_xacts([ $c, $w1, $w2 ], 'Citus recovered every prepared transaction');
is($c->safe_psql('postgres', "SELECT count(*) || ' ' || count(DISTINCT id) FROM orders"),
	"$N $N", 'one row per call, none twice');

$_->stop for ($c, $w1, $w2);
done_testing();
