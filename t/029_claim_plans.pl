# The workers' claims use their indexes however call_data looked when
# their plans were made.
#
# A claim's plan is kept for as long as the worker lives (until call_data
# changes shape).  One made while call_data was empty, its statistics
# saying so, walked every due call through call_data_due and sorted them,
# at each claim of a batch: a drain of N calls read N^2 / batch_size index
# entries, and ran at a third of its speed (62 % of the workers' time in a
# sort), until autovacuum's ANALYZE happened to replan it.  The plans are
# now made as if a sort or a scan of the whole table cost more than any
# index scan.  This counts the index entries the drain read.

use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RetriesTest;
use Test::More;
use Time::HiRes qw(time usleep);

my $N = 20000;

my $node = retries_node('claim_plans');
$node->append_conf('postgresql.conf', "retries.max_workers = 2\nautovacuum = off\n");
$node->start;
$node->safe_psql('postgres', q{
CREATE EXTENSION retries;
CREATE TABLE done (i bigint);
CREATE FUNCTION work(i bigint) RETURNS void LANGUAGE sql AS $$ INSERT INTO done VALUES (i) $$;
SELECT retries.annotate('work(bigint)', '3 10ms');
});

# drained(COUNT, NAME): a test that the calls succeeded reach COUNT; it
# fails only if their number stops growing for the deadline
sub drained
{
	my ($count, $name) = @_;
	my ($done, $last, $until) = (0, -1, time() + $RetriesTest::DEADLINE);
	while ($done != $count && time() < $until)
	{
		$done = $node->safe_psql('postgres',
			"SELECT count(*) FROM retries.calls WHERE state = 'succeeded'");
		($last, $until) = ($done, time() + $RetriesTest::DEADLINE) if $done > $last;
		usleep(100_000) if $done != $count;    # poll
	}
	return is($done, $count, $name);
}

# A first drain, then an ANALYZE (autovacuum's, in a real database):
# call_data's statistics now say that no call is scheduled, and the
# workers plan their claims again with them.  Then N calls are made while
# execution is off (the workers said they paused), and drained.  The waits
# for a drain give up only when it stalls, not after a set time: 20,000
# calls take what they take on the machine.
schedule_range($node, 'postgres', 'work(bigint)', -$N, -1);
drained($N, 'the first drain ran');
wait_until($node, 'postgres',
	"SELECT n_tup_ins FROM pg_stat_user_tables WHERE relid = 'done'::regclass", $N,
	"the worker's statistics of the first drain are flushed");
$node->safe_psql('postgres', 'ANALYZE retries.call_data');
$node->safe_psql('postgres', 'ALTER SYSTEM SET retries.enabled = off');
$node->reload;
wait_until($node, 'postgres',
	"SELECT count(*) FROM retries.workers WHERE state = 'paused'", '2',
	'the workers paused');
my $reads = q{SELECT coalesce(sum(idx_tup_read), 0) FROM pg_stat_all_indexes
	WHERE indexrelid = 'retries.call_data_due'::regclass};
my $before = $node->safe_psql('postgres', $reads);
schedule_range($node, 'postgres', 'work(bigint)', 1, $N);
$node->safe_psql('postgres', 'ALTER SYSTEM RESET retries.enabled');
$node->reload;
drained(2 * $N, "the $N calls ran");
# the worker's statistics reach the shared ones (all of them at once)
# within a second or so of its commits: its inserts into done count too
wait_until($node, 'postgres',
	"SELECT n_tup_ins FROM pg_stat_user_tables WHERE relid = 'done'::regclass", 2 * $N,
	"the worker's statistics are flushed");
my $read = $node->safe_psql('postgres', $reads) - $before;
cmp_ok($read, '<', 10 * $N,
	"the drain of $N calls read fewer than 10N entries of call_data_due ($read)");

# The statement that records a batch's outcomes joins call_data by key
# however the table looked when its plan was made.  Its plan, made once
# (generic), was made while call_data held a few calls: a hash join that
# read every row of call_data at each batch, kept when the table grew (23
# ms a batch beside 150,000 calls, until an ANALYZE: every role's calls
# started late, the tenth hostile review).  In a new database, whose
# workers plan anew: a few calls run (the plans are made), then 50,000
# calls due in a year, then 200 calls due now; counted through done and
# an index, so that the test's own queries scan no call_data.
my $M = 50000;
$node->safe_psql('postgres', 'CREATE DATABASE grown');
$node->safe_psql('grown', q{
CREATE EXTENSION retries;
CREATE TABLE done (i bigint);
CREATE FUNCTION work(i bigint) RETURNS void LANGUAGE sql AS $$ INSERT INTO done VALUES (i) $$;
SELECT retries.annotate('work(bigint)', '3 10ms');
SELECT retries.call('work(bigint)', pg_catalog.jsonb_build_array(i)) FROM generate_series(1, 10) i;
});
wait_until($node, 'grown', 'SELECT count(*) FROM done', '10',
	'the first calls of a new database ran');
$node->safe_psql('grown',
	"SELECT count(retries.call('work(bigint)', '[0]', run_at => now() + interval '1 year'))"
	  . " FROM generate_series(1, $M)");
my $scanned = q{SELECT seq_tup_read FROM pg_stat_user_tables
	WHERE relid = 'retries.call_data'::regclass};
my $scanned_before = $node->safe_psql('grown', $scanned);
$node->safe_psql('grown',
	"SELECT retries.call('work(bigint)', pg_catalog.jsonb_build_array(i))"
	  . " FROM generate_series(11, 210) i");
wait_until($node, 'grown', 'SELECT count(*) FROM done', '210',
	'200 calls ran beside the calls due in a year');
wait_until($node, 'grown',
	"SELECT n_tup_ins FROM pg_stat_user_tables WHERE relid = 'done'::regclass", 210,
	"the worker's statistics are flushed");
my $scanned_rows = $node->safe_psql('grown', $scanned) - $scanned_before;
cmp_ok($scanned_rows, '<', $M,
	"recording 200 calls' outcomes beside $M others read no whole call_data ($scanned_rows rows by sequential scans)");

$node->stop;
done_testing();
