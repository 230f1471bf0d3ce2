# Workers never run on a standby, and start on it once it is promoted:
#
#   a. a streaming standby of a primary whose workers run calls has no
#      retries launcher or worker, yet retries.workers can be read there,
#      and it replays what the primary's workers did;
#   b. once the primary is gone and the standby promoted, its launcher and
#      workers start, and calls scheduled on the old primary run there.
#
# That none starts on the standby is watched for as long as the primary
# took, in this run, from its start to its workers running calls (2 s at
# the least): a slower machine watches longer.

use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RetriesTest;
use Test::More;
use Time::HiRes qw(time);

my $no_retries_processes =
  "SELECT count(*) = 0 FROM pg_stat_activity"
  . " WHERE backend_type IN ('retries launcher', 'retries worker')";
my $retries_processes =
  "SELECT count(*) FILTER (WHERE backend_type = 'retries launcher') || ','"
  . " || count(*) FILTER (WHERE backend_type = 'retries worker')"
  . " FROM pg_stat_activity";

my $primary = retries_node('primary', allows_streaming => 1);
my $started = time();
$primary->start;

# work(id) notes which server ran it (the port tells them apart)
$primary->safe_psql(
	'postgres', q{
CREATE EXTENSION retries;
CREATE TABLE results (id bigint PRIMARY KEY, port int NOT NULL);
CREATE FUNCTION work(id bigint) RETURNS void LANGUAGE sql AS $$
	INSERT INTO results VALUES ($1, current_setting('port')::int);
$$;
SELECT retries.annotate('work(bigint)', '3 10ms');
});
my $primary_port = $primary->port;

# calls due now run on the primary
my ($now_first, $now_last) =
  schedule_range($primary, 'postgres', 'work(bigint)', 1, 3);
wait_until($primary, 'postgres',
	"SELECT count(*) FROM retries.calls WHERE state = 'succeeded'",
	'3', 'primary: its workers run the calls due now');
my $startup = time() - $started;
is($primary->safe_psql('postgres', $retries_processes),
	'1,2', 'primary: a launcher and two workers are running');

# calls due in an hour wait across the failover
my ($later_first, $later_last) = split /,/,
  $primary->safe_psql(
	'postgres', q{
SELECT min(id) || ',' || max(id) FROM (
	SELECT retries.call('work(bigint)', jsonb_build_array(i),
						run_at => now() + interval '1 hour') AS id
	  FROM generate_series(11, 15) i) s});

$primary->backup('backup');
my $standby = PostgreSQL::Test::Cluster->new('standby');
$standby->init_from_backup($primary, 'backup', has_streaming => 1);
$standby->start;
my $standby_port = $standby->port;

###########################################################################
# a. the standby runs nothing
###########################################################################

is($standby->safe_psql('postgres', 'SHOW shared_preload_libraries'),
	'retries', 'standby: retries is preloaded there too');
is($standby->safe_psql('postgres', 'SELECT pg_is_in_recovery()'),
	't', 'standby: is in recovery');

# a call that the primary's workers run after the backup: the standby
# sees its outcome through replay only
my $after_backup = $primary->safe_psql('postgres',
	"SELECT retries.call('work(bigint)', '[4]')");
wait_until($primary, 'postgres',
	"SELECT state FROM retries.calls WHERE id = $after_backup",
	'succeeded', 'primary: a call scheduled after the backup runs');
$primary->wait_for_catchup($standby);
is( $standby->safe_psql(
		'postgres',
		"SELECT c.state, r.port FROM retries.calls c, results r"
		  . " WHERE c.id = $after_backup AND r.id = 4"),
	"succeeded|$primary_port",
	'standby: replays the call the primary ran');

stays_true($standby, 'postgres', $no_retries_processes,
	($startup > 2 ? sprintf('%.1f', $startup) : 2),
	'standby: no retries launcher or worker in pg_stat_activity');
is($standby->safe_psql('postgres', 'SELECT count(*) FROM retries.workers'),
	'0', 'standby: retries.workers can be read, and is empty');
is( $standby->safe_psql(
		'postgres',
		"SELECT count(*) FROM retries.calls"
		  . " WHERE id BETWEEN $later_first AND $later_last AND state = 'scheduled'"
	),
	'5',
	'standby: the calls due later are there, scheduled');

###########################################################################
# b. failover: the promoted standby runs the calls
###########################################################################

$primary->stop;
$standby->promote;
wait_until($standby, 'postgres', 'SELECT pg_is_in_recovery()',
	'f', 'promoted: out of recovery');
wait_until($standby, 'postgres', $retries_processes, '1,2',
	'promoted: a launcher and two workers start');
is( $standby->safe_psql(
		'postgres',
		"SELECT count(*) FROM retries.workers WHERE database = 'postgres'"),
	'2',
	'promoted: retries.workers shows the two workers');

# the calls scheduled on the old primary, due in an hour: run them now
is( $standby->safe_psql(
		'postgres',
		"SELECT count(*) FILTER (WHERE retries.retry_now(id)) FROM retries.calls"
		  . " WHERE id BETWEEN $later_first AND $later_last"),
	'5',
	'promoted: retry_now accepts the calls scheduled on the old primary');
wait_until(
	$standby, 'postgres',
	"SELECT count(*) FROM retries.calls"
	  . " WHERE id BETWEEN $later_first AND $later_last AND state = 'succeeded'",
	'5',
	'promoted: they run');

# and a call scheduled on the promoted node
my $new_call = $standby->safe_psql('postgres',
	"SELECT retries.call('work(bigint)', '[21]')");
wait_until($standby, 'postgres',
	"SELECT state FROM retries.calls WHERE id = $new_call",
	'succeeded', 'promoted: a call scheduled there runs');

is( $standby->safe_psql(
		'postgres',
		"SELECT string_agg(id || ':' || (port = $standby_port), ',' ORDER BY id)"
		  . " FROM results WHERE id > 10"),
	'11:true,12:true,13:true,14:true,15:true,21:true',
	'promoted: the calls ran there, once each');
is( $standby->safe_psql(
		'postgres',
		"SELECT count(*) FROM retries.attempts a JOIN retries.calls c ON c.id = a.call_id"
		  . " WHERE c.state = 'succeeded' AND a.outcome <> 'succeeded'"),
	'0',
	'promoted: no attempt was lost or interrupted in the failover');

$standby->stop;
done_testing();
