# CREATE EXTENSION with and without retries in shared_preload_libraries:
# without it the extension is still created, with a WARNING that names
# shared_preload_libraries; with it, without any warning.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my ($ret, $stdout, $stderr);

# Node A: the library is not preloaded.
my $node_a = PostgreSQL::Test::Cluster->new('no_preload');
$node_a->init;
$node_a->start;

is($node_a->safe_psql('postgres', 'SHOW shared_preload_libraries'),
	'', 'node A: shared_preload_libraries is empty');

$ret = $node_a->psql(
	'postgres', 'CREATE EXTENSION retries',
	stdout => \$stdout,
	stderr => \$stderr);
is($ret, 0, 'node A: CREATE EXTENSION retries succeeds without preloading');
like($stderr, qr/WARNING:.*shared_preload_libraries/,
	'node A: CREATE EXTENSION warns that retries is not preloaded');
is( $node_a->safe_psql(
		'postgres', "SELECT count(*) FROM pg_extension WHERE extname = 'retries'"),
	'1',
	'node A: the extension exists');

$node_a->stop;

# Node B: the library is preloaded.
my $node_b = PostgreSQL::Test::Cluster->new('preload');
$node_b->init;
$node_b->append_conf('postgresql.conf', "shared_preload_libraries = 'retries'\n");
$node_b->start;

is($node_b->safe_psql('postgres', 'SHOW shared_preload_libraries'),
	'retries', 'node B: retries is preloaded');

$ret = $node_b->psql(
	'postgres', 'CREATE EXTENSION retries',
	stdout => \$stdout,
	stderr => \$stderr);
is($ret, 0, 'node B: CREATE EXTENSION retries succeeds');
unlike($stderr, qr/WARNING/, 'node B: CREATE EXTENSION gives no warning');
is( $node_b->safe_psql(
		'postgres', "SELECT count(*) FROM pg_extension WHERE extname = 'retries'"),
	'1',
	'node B: the extension exists');

$node_b->stop;

done_testing();
