# The demo (demo/demo.sql, what scripts/demo runs) runs clean on a server
# with the defaults: every step, each of its checks true.  The demo stops
# at its first error (ON_ERROR_STOP) but for the errors it shows on
# purpose; each step that checks something prints a boolean, which must
# be true.  Its time is reported, not asserted (it waits on conditions
# only: no step assumes the machine's speed).
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

my $node = PostgreSQL::Test::Cluster->new('demo');
$node->init;
# what scripts/demo sets (scripts/common.sh, start_cluster): the library
# preloaded, the rest the defaults
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'retries'\n");
$node->start;
$node->safe_psql('postgres', 'CREATE DATABASE demo');

my $t0 = time();
my ($out, $err) = ('', '');
my $ret = $node->psql(
	'demo', undef,
	extra_params => [ '-f', "$FindBin::RealBin/../demo/demo.sql", '-P', 'format=aligned',
		'-P', 'tuples_only=off' ],
	stdout => \$out,
	stderr => \$err);
my $took = time() - $t0;
is($ret, 0, 'the demo runs to its end') or diag("stderr:\n$err\nstdout (end):\n" . substr($out, -3000));
note(sprintf('the demo took %.1f s', $took));

# the errors it shows on purpose, and no other
my @errors = $err =~ /ERROR:  ([^\n]*)/g;
my @unexpected = grep {
	!/cannot be converted to type numeric|unique_violation|duplicate key|canceling statement due to|has not succeeded|not retried|timed out|did not finish/
} @errors;
is(scalar(@unexpected), 0, 'no error but those it shows on purpose')
  or diag(join("\n", @unexpected));

# the columns of the tables the demo prints: name => the values under it
my %column;
my @lines = split /\n/, $out;
for my $i (1 .. $#lines)
{
	next unless $lines[$i] =~ /^-+(\+-+)*$/;
	my @names = map { s/^\s+|\s+$//gr } split /\|/, $lines[ $i - 1 ];
	for (my $j = $i + 1; $j <= $#lines && $lines[$j] =~ /\S/; $j++)
	{
		my @values = map { s/^\s+|\s+$//gr } split /\|/, $lines[$j];
		push @{ $column{ $names[$_] } }, $values[$_] // '' for 0 .. $#names;
	}
}
# each check the demo prints (a boolean column) is true
for my $check (qw(same_call took_over_a_second urgent_started_first started_500_ms_apart
	in_the_future nightly_scheduled))
{
	my @v = @{ $column{$check} // [] };
	ok(@v && !grep({ $_ ne 't' } @v), "the demo's check $check is true")
	  or diag("$check: " . join(', ', @v));
}
is(join(',', @{ $column{batches_committed} // [] }), '3', 'the procedure committed its three batches');
like($out, qr/\bVACUUM\b|\bANALYZE\b/, 'the command\'s attempt shows its tag');
like($out, qr/order 7 paid by card/, 'the event released the shipment with its payload');
like($out, qr/\n\s+5 \|\s+3\s*\n/, 'the debounced reindex ran once, with the last version');

$node->stop;
done_testing();
