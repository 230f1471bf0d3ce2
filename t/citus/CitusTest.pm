# Helpers of the Citus suite (t/citus/): a cluster of a coordinator and
# two worker nodes on this machine, each with its own port and socket
# directory, each preloading citus and retries.
#
# The tests skip (plan skip_all) when the server has no citus.so: Debian
# does not package Citus, and scripts/citus builds it from its source and
# installs it (see scripts/citus for how to get the source).

package CitusTest;

use strict;
use warnings;

use Exporter 'import';
use FindBin;
use lib "$FindBin::RealBin/..";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RetriesTest;
use Test::More;
use Time::HiRes qw(usleep time);

our @EXPORT =
  qw(citus_cluster citus_or_skip prepared_xacts no_prepared_xacts on_all drains psql_seconds);

# citus_or_skip(): skip the whole test file unless citus.so is installed
sub citus_or_skip
{
	my $probe = PostgreSQL::Test::Cluster->new('probe');
	plan skip_all => 'Citus is not installed (scripts/citus builds it)'
	  unless -e $probe->config_data('--pkglibdir') . '/citus.so';
	return;
}

# citus_cluster(WORKERS => 2, CONF => '...', ADDED => WORKERS): start a
# coordinator and the worker nodes, with citus and retries preloaded, CREATE
# EXTENSION citus on each, the first ADDED worker nodes added to the
# coordinator's metadata, then CREATE EXTENSION retries on the coordinator
# (Citus propagates it).  Returns the nodes, the coordinator first.
sub citus_cluster
{
	my (%o) = @_;
	my $workers = $o{WORKERS} // 2;
	my @nodes;

	for my $i (0 .. $workers)
	{
		my $node = retries_node($i == 0 ? 'coordinator' : "worker$i");

		# citus must come first; Citus commits a transaction that wrote
		# to several nodes in two phases, and recovers the prepared ones
		# every citus.recover_2pc_interval; the nodes listen on a socket
		# directory, which is how a node names itself to connect to itself
		# (citus.local_hostname, localhost by default)
		$node->append_conf(
			'postgresql.conf', qq{
shared_preload_libraries = 'citus,retries'
max_prepared_transactions = 100
max_worker_processes = 32
citus.recover_2pc_interval = '1s'
retries.max_workers = 2
} . "citus.local_hostname = '" . $node->host . "'\n" . ($o{CONF} // ''));
		$node->start;
		$node->safe_psql('postgres', 'CREATE EXTENSION citus');
		push @nodes, $node;
	}
	my $c = $nodes[0];
	$c->safe_psql('postgres',
		"SELECT citus_set_coordinator_host('" . $c->host . "', " . $c->port . ')');
	my $added = $o{ADDED} // $workers;
	for my $w (@nodes[1 .. $added])
	{
		$c->safe_psql('postgres',
			"SELECT citus_add_node('" . $w->host . "', " . $w->port . ')');
	}
	$c->safe_psql('postgres', 'CREATE EXTENSION retries');
	return @nodes;
}

# prepared_xacts(NODES): how many transactions are left prepared on the
# nodes (Citus's recovery commits or aborts them)
sub prepared_xacts
{
	my $n = 0;
	$n += $_->safe_psql('postgres', 'SELECT count(*) FROM pg_prepared_xacts')
	  for @_;
	return $n;
}

# no_prepared_xacts(NODES, NAME): a test that Citus's recovery leaves no
# transaction prepared on the nodes (polled, until the deadline)
sub no_prepared_xacts
{
	my ($nodes, $name) = @_;
	my $until = time() + $RetriesTest::DEADLINE;
	my $n;

	while (($n = prepared_xacts(@$nodes)) > 0 && time() < $until)
	{
		usleep(100_000);    # poll
	}
	return is($n, 0, $name);
}

# drains(NODE, SQL, EXPECTED, NAME): a test that SQL (a count of calls left,
# or done) comes to give EXPECTED.  How long a drain of thousands of calls
# takes depends on the machine, so there is no deadline for the whole of
# it: the test fails only when the output has not changed for
# $RetriesTest::DEADLINE seconds (the drain is stuck).
sub drains
{
	my ($node, $sql, $expected, $name) = @_;
	my $t0 = time();
	my $until = $t0 + $RetriesTest::DEADLINE;
	my $poll = poller($node, 'postgres');
	my ($out, $err, $last);

	for (;;)
	{
		($out, $err) = $poll->($sql);
		if (defined $out && $out eq $expected)
		{
			$poll->();
			return pass(sprintf('%s (%.0f s)', $name, time() - $t0));
		}
		if (defined $out && (!defined $last || $out ne $last))
		{
			$last = $out;
			$until = time() + $RetriesTest::DEADLINE;
		}
		last if time() > $until;
		usleep(100_000);    # poll
	}
	$poll->();
	fail($name);
	diag("no progress for $RetriesTest::DEADLINE s: $sql\n"
		  . "expected: $expected\n"
		  . "last output: " . ($last // '(none)') . "\n"
		  . "last error: " . ($err // '') . "\n");
	return 0;
}

# psql_seconds(NODE): how long a psql that runs a trivial query on NODE
# takes now (the slowest of three): a reference measured in the same run,
# for the few checks that bound how long a step takes
sub psql_seconds
{
	my ($node) = @_;
	my $slowest = 0;

	for (1 .. 3)
	{
		my $t0 = time();
		query_value($node, 'postgres', 'SELECT 1');
		my $took = time() - $t0;
		$slowest = $took if $took > $slowest;
	}
	return $slowest;
}

# on_all(NODES, SQL): SQL run on each node, outputs joined with '|'
sub on_all
{
	my ($nodes, $sql) = @_;
	return join '|', map { $_->safe_psql('postgres', $sql) } @$nodes;
}

1;
