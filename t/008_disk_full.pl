# The disk fills while calls run.  A tablespace on a small mount is filled
# up with a file until writes there fail with 53100 (disk_full), then the
# file is removed.  WAL stays on the main disk, so the server stays up.
#
#   a. the called function's table is on the full disk: ENOSPC inside the
#      function is an error like any other, so a call fails unless its
#      policy's retry_on lists 53100 or class 53; with '53' listed, the
#      calls retry, with their backoff, and succeed once space is back;
#   b. the extension's own tables are on the full disk: the workers cannot
#      record outcomes, so their batches roll back and they wait before
#      trying again, without filling the log or spinning the CPU; no call
#      fails or is charged an attempt for it, and once space is back every
#      call succeeds, its effects committed exactly once.
#
# The workers' CPU and log lines are counted over a few seconds while the
# disk is full, as rates.  No step depends on the machine's speed: in a,
# only ten calls retry (at most ten attempts a second once their backoff
# reaches 1 s), so their CPU stays a small part of a core even on a machine
# ten times slower, where a spinning worker takes all it can get; in b, the
# calls fall due only once the disk is full, when the test moves the
# extension's clock two hours ahead (retries.debug_clock_offset).
#
# The test cannot mount anything (it runs as the server's user): it uses
# the directory named by RETRIES_SMALL_DISK, on a small mount of its own
# (scripts/test mounts a 64 MB tmpfs there), and skips without it.

use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use File::Path qw(rmtree);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use POSIX ();
use RetriesTest;
use Test::More;
use Time::HiRes ();
use Time::HiRes qw(usleep time);

my $disk = $ENV{RETRIES_SMALL_DISK};
plan skip_all =>
  'RETRIES_SMALL_DISK is not set: it names a directory on a small mount'
  . ' (scripts/test mounts a tmpfs for it)'
  unless defined $disk && $disk ne '';
plan skip_all => "RETRIES_SMALL_DISK ($disk) is not a writable directory"
  unless -d $disk && -w $disk;

my $tablespace = "$disk/tablespace";
my $filler = "$disk/filler";
rmtree($tablespace);
unlink $filler;
mkdir $tablespace or die "could not create $tablespace: $!";

my $node = retries_node('disk');
# nothing but the workers writes to the full disk while the test watches
$node->append_conf('postgresql.conf', "autovacuum = off\n");
$node->start;

# fill_disk(): write to the filler file until the mount is full
sub fill_disk
{
	open(my $fh, '>', $filler) or die "could not create $filler: $!";
	binmode $fh;
	my $block = "\0" x 65536;
	my $size = 0;
	for (;;)
	{
		my $written = syswrite($fh, $block);
		last if !$written;
		$size += $written;
	}
	close $fh;
	note("the filler takes $size bytes");
	return;
}

# free_disk(): remove the filler file
sub free_disk
{
	unlink $filler or die "could not remove $filler: $!";
	return;
}

# worker_cpu(PIDS): CPU seconds the processes PIDS (comma-separated) used
sub worker_cpu
{
	my ($pids) = @_;
	my $ticks = 0;
	for my $pid (split /,/, $pids)
	{
		my $stat = slurp_file("/proc/$pid/stat");
		$stat =~ s/^.*\) //s;    # after "pid (comm) "
		my @f = split / /, $stat;
		$ticks += $f[11] + $f[12];    # utime, stime
	}
	return $ticks / POSIX::sysconf(POSIX::_SC_CLK_TCK);
}

# server_log_lines(OFFSET): lines the server logged since OFFSET, less
# those of this test's own sessions (log_statement = all); with autovacuum
# off, they are the workers'
sub server_log_lines
{
	my ($offset) = @_;
	my @lines = grep { !/ 008_disk_full\.pl / }
	  split /\n/, slurp_file($node->logfile, $offset);
	return @lines;
}

# watch_while_full(NAME, SECONDS): the workers of 'postgres', over SECONDS
# while the disk is full: not restarted, not spinning, not flooding the log
sub watch_while_full
{
	my ($name, $seconds) = @_;
	my $pids = worker_pids($node, 'postgres');
	# the window runs from before the log's offset is read to after its
	# lines are, on a clock finer than seconds (whole seconds read a window
	# of almost 9 s as 8, and made its ten errors of one worker too many)
	my $t0 = Time::HiRes::time();
	my $offset = -s $node->logfile;
	my $cpu = worker_cpu($pids);
	# not a wait: the window over which CPU and log lines are counted
	sleep($seconds);
	my $used = worker_cpu($pids) - $cpu;
	my @lines = server_log_lines($offset);
	my $elapsed = Time::HiRes::time() - $t0;

	is(worker_pids($node, 'postgres'),
		$pids, "$name: the workers carry on, none restarted");
	cmp_ok($used / $elapsed, '<', 0.2,
		"$name: the workers do not spin (CPU " . sprintf('%.2f', $used) . " s in "
		  . sprintf('%.1f', $elapsed) . " s)");
	# a worker waits at least 1 s (ERROR_DELAY_MS) after an error of its
	# own, longer after each in a row; a batch that succeeds meanwhile
	# (its rows fit in pages that still had room) starts the delays again
	# at 1 s (seen: 39 lines of two workers in 8 s under load, 18 on a
	# quiet machine).  So at most one error per worker and second of the
	# window, and one at its start; a flood, no wait at all, is thousands
	my %errors;
	$errors{$1}++ for map { / \[(\d+)\] ERROR: / ? ($1) : () } @lines;
	my ($most) = sort { $b <=> $a } (0, values %errors);
	cmp_ok($most, '<=', int($elapsed) + 1,
		"$name: the workers do not flood the log (" . scalar(@lines)
		  . " lines in " . sprintf('%.1f', $elapsed) . " s, at most $most errors of one worker)")
	  or diag(join("\n", @lines[ 0 .. 9 ]));
	return;
}

$node->safe_psql(
	'postgres', qq{
CREATE EXTENSION retries;
CREATE TABLESPACE small LOCATION '$tablespace';
});
wait_until($node, 'postgres', "SELECT count(*) FROM retries.workers",
	'2', 'two workers start');

###########################################################################
# a. the called function's table on the full disk
###########################################################################

$node->safe_psql(
	'postgres', q{
CREATE TABLE sink (id bigint PRIMARY KEY USING INDEX TABLESPACE small,
	n int NOT NULL DEFAULT 1, pad text) TABLESPACE small;
-- rows of 1.5 kB, uncompressed: every few of them need a new page
CREATE FUNCTION sink_write(id bigint) RETURNS void LANGUAGE sql AS $$
	INSERT INTO sink AS s (id, pad) VALUES ($1, repeat('x', 1500))
		ON CONFLICT (id) DO UPDATE SET n = s.n + 1;
$$;
CREATE FUNCTION sink_write_53(id bigint) RETURNS void LANGUAGE sql AS $$
	SELECT sink_write($1);
$$;
-- the default retry_on, {RT}: a full disk fails the call
SELECT retries.annotate('sink_write(bigint)', '5 100ms');
-- class 53 (insufficient resources) retried, backing off up to 1 s
SELECT retries.annotate('sink_write_53(bigint)', '1000 100ms 1s',
	retry_on => '{RT,53}');
-- what a session sees when it writes there
CREATE FUNCTION try_write() RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO sink (id, pad)
		SELECT -g, repeat('x', 1500) FROM generate_series(1, 1000) g;
	DELETE FROM sink WHERE id < 0;
	RETURN 'written';
EXCEPTION WHEN disk_full THEN
	RETURN 'disk_full';
END $$;
});
is($node->safe_psql('postgres', 'SELECT try_write()'),
	'written', 'a: the small disk takes writes');

fill_disk();
is($node->safe_psql('postgres', 'SELECT try_write()'),
	'disk_full', 'a: filled up, it gives 53100 disk_full');

schedule_range($node, 'postgres', 'sink_write(bigint)', 1, 20);
schedule_range($node, 'postgres', 'sink_write_53(bigint)', 101, 110);
wait_until(
	$node, 'postgres',
	"SELECT count(*) FROM retries.calls WHERE fn = 'sink_write(bigint)'::regprocedure"
	  . " AND state = 'failed' AND attempts = 1 AND last_sqlstate = '53100'",
	'20', 'a: without 53 in retry_on, a call fails at its first disk_full');
wait_until(
	$node, 'postgres',
	"SELECT count(*) FROM retries.calls WHERE fn = 'sink_write_53(bigint)'::regprocedure"
	  . " AND state = 'scheduled' AND attempts >= 2 AND last_sqlstate = '53100'",
	'10', 'a: with 53 in retry_on, the calls retry');
watch_while_full('a', 5);
# one statement: the workers go on retrying meanwhile
is( $node->safe_psql(
		'postgres',
		"SELECT count(*) FILTER (WHERE NOT (a.outcome = 'retry' AND a.sqlstate = '53100'"
		  . " AND a.message ~ '^could not extend file'))"
		  . " FROM retries.attempts a JOIN retries.calls c ON c.id = a.call_id"
		  . " WHERE c.fn = 'sink_write_53(bigint)'::regprocedure"),
	'0',
	'a: each of their attempts so far is a retry for the full disk');

free_disk();
wait_until(
	$node, 'postgres',
	"SELECT count(*) FROM retries.calls WHERE fn = 'sink_write_53(bigint)'::regprocedure"
	  . " AND state = 'succeeded'",
	'10', 'a: space back, they all succeed');
is( $node->safe_psql(
		'postgres',
		'SELECT count(*) || \',\' || sum(n) FROM sink WHERE id BETWEEN 101 AND 110'),
	'10,10',
	'a: each wrote its row once');
is($node->safe_psql('postgres', 'SELECT count(*) FROM sink WHERE id <= 20'),
	'0', 'a: the failed calls wrote nothing');
$node->safe_psql('postgres',
	"SELECT retries.retry_now(id) FROM retries.calls"
	  . " WHERE fn = 'sink_write(bigint)'::regprocedure AND state = 'failed'");
wait_until(
	$node, 'postgres',
	"SELECT count(*) FROM retries.calls WHERE fn = 'sink_write(bigint)'::regprocedure"
	  . " AND state = 'succeeded'",
	'20', 'a: the failed ones, retried by hand, succeed now');

###########################################################################
# b. the extension's own tables on the full disk
###########################################################################

$node->safe_psql(
	'postgres', q{
DO $$
DECLARE
	r record;
BEGIN
	FOR r IN SELECT c.oid::regclass AS rel, c.relkind
			   FROM pg_class c
			  WHERE c.oid IN ('retries.call_data'::regclass, 'retries.attempt_data'::regclass)
				 OR c.oid IN (SELECT indexrelid FROM pg_index
							   WHERE indrelid IN ('retries.call_data'::regclass,
												  'retries.attempt_data'::regclass))
	LOOP
		EXECUTE format('ALTER %s %s SET TABLESPACE small',
					   CASE r.relkind WHEN 'i' THEN 'INDEX' ELSE 'TABLE' END, r.rel);
	END LOOP;
END $$;
CREATE TABLE results (id bigint PRIMARY KEY, n int NOT NULL DEFAULT 1);
CREATE FUNCTION work(id bigint) RETURNS void LANGUAGE sql AS $$
	INSERT INTO results AS r (id) VALUES ($1)
		ON CONFLICT (id) DO UPDATE SET n = r.n + 1;
$$;
SELECT retries.annotate('work(bigint)', '3 100ms');
});
is( $node->safe_psql(
		'postgres',
		"SELECT count(*) FROM pg_class WHERE reltablespace ="
		  . " (SELECT oid FROM pg_tablespace WHERE spcname = 'small')"
		  . " AND relnamespace = 'retries'::regnamespace"),
	$node->safe_psql(
		'postgres',
		"SELECT count(*) FROM pg_class c LEFT JOIN pg_index i ON i.indexrelid = c.oid"
		  . " WHERE c.relnamespace = 'retries'::regnamespace"
		  . " AND (c.oid IN ('retries.call_data'::regclass, 'retries.attempt_data'::regclass)"
		  . " OR i.indrelid IN ('retries.call_data'::regclass, 'retries.attempt_data'::regclass))"),
	'b: the tables of the extension and their indexes are on the small disk');

# calls due in an hour; the disk is filled, then the extension's clock
# moved two hours ahead: they are due while the disk is full
my $offset = -s $node->logfile;
$node->safe_psql('postgres',
	"SELECT retries.call('work(bigint)', jsonb_build_array(i),"
	  . " run_at => now() + interval '1 hour') FROM generate_series(1, 2000) i");
fill_disk();
$node->safe_psql('postgres',
	"ALTER SYSTEM SET retries.debug_clock_offset = '2h'; SELECT pg_reload_conf()");
wait_until($node, 'postgres', 'SHOW retries.debug_clock_offset',
	'2h', 'b: the calls are due while the disk is full');
$node->wait_for_log(qr/ERROR:  could not extend file/,
	$offset);
pass('b: the workers cannot record outcomes');
watch_while_full('b', 8);
# (a batch whose rows fit in pages that still had room may succeed: the
# disk is full for new pages, not for those; what must not happen is a call
# failed, or charged an attempt that was not recorded, by the full disk)
is( $node->safe_psql(
		'postgres',
		"SELECT count(*) FROM retries.calls WHERE fn = 'work(bigint)'::regprocedure"
		  . " AND (state NOT IN ('scheduled', 'succeeded')"
		  . "  OR (state = 'scheduled' AND attempts > 0)"
		  . "  OR (state = 'succeeded' AND attempts <> 1))"),
	'0',
	'b: meanwhile no call is failed or charged by the full disk');

free_disk();
wait_until(
	$node, 'postgres',
	"SELECT count(*) FILTER (WHERE state = 'succeeded' AND attempts = 1)"
	  . " FROM retries.calls WHERE fn = 'work(bigint)'::regprocedure",
	'2000', 'b: space back, every call succeeds at its first attempt');
$node->safe_psql('postgres',
	'ALTER SYSTEM RESET retries.debug_clock_offset; SELECT pg_reload_conf()');
is( $node->safe_psql(
		'postgres', 'SELECT count(*) || \',\' || max(n) FROM results'),
	'2000,1',
	'b: each committed its effects exactly once');
is( $node->safe_psql(
		'postgres',
		"SELECT count(*) FROM retries.attempts a JOIN retries.calls c ON c.id = a.call_id"
		  . " WHERE c.fn = 'work(bigint)'::regprocedure"),
	'2000',
	'b: one attempt each, nothing else recorded');

my $log = slurp_file($node->logfile);
unlike($log, qr/terminated by signal|PANIC|server process .* was terminated/,
	'no crash in the server log');

$node->stop;
rmtree($tablespace);
done_testing();
