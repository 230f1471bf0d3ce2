# The launcher and the workers survive whatever happens to their processes,
# and no worker slot is ever lost:
#
#   a. the launcher terminated (pg_terminate_backend, SIGTERM): the
#      postmaster starts it again; cancelled (pg_cancel_backend): the same;
#   b. after a launcher restart, workers that the earlier launcher started
#      and that exit are replaced, and their slots come back: 64 workers of
#      a database killed five times over (320 exits, more than the 256
#      slots there are) still leave 64 workers running;
#   c. calls keep running through all of it, each exactly once;
#   d. commands that stop a database's workers (DROP DATABASE, ALTER
#      DATABASE RENAME and SET TABLESPACE, CREATE DATABASE ... TEMPLATE,
#      DROP EXTENSION) leave them, and the call they run, alone when the
#      command is refused to its role, or cannot run in a transaction
#      block; a DROP EXTENSION rolled back to a savepoint has them back at
#      once, while its transaction is still open;
#   e. a bad row cannot stall a database: a call whose outcome cannot be
#      recorded (its attempt row is already there) and a call whose policy
#      row was deleted by hand fail, saying why, and the 100 calls around
#      them run once each;
#   f. a worker's memory does not grow with invalidations of the policy
#      cache: 400 policies loaded, each dropped by the next invalidation,
#      leave TopMemoryContext's use as it was.
#
# The server log must show no crash.

use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RetriesTest;
use Test::More;
use Time::HiRes qw(time);

my $node = retries_node('lifecycle');
$node->append_conf(
	'postgresql.conf', q{
max_worker_processes = 80
max_connections = 120
retries.max_workers = 2
});
$node->start;
my $offset = 0;

$node->safe_psql(
	'postgres', q{
CREATE EXTENSION retries;
CREATE TABLE results (id bigint PRIMARY KEY, n int NOT NULL DEFAULT 1);
CREATE FUNCTION work(id bigint) RETURNS void LANGUAGE sql AS $$
	INSERT INTO results AS r (id) VALUES ($1)
		ON CONFLICT (id) DO UPDATE SET n = r.n + 1;
$$;
SELECT retries.annotate('work(bigint)', '5 10ms');
});

my $launcher_query =
  "SELECT coalesce(max(pid), 0) FROM pg_stat_activity WHERE backend_type = 'retries launcher'";

# launcher_pid(): the launcher's pid, once there is one
sub launcher_pid
{
	wait_until($node, 'postgres', "SELECT ($launcher_query) > 0", 't',
		'a launcher is running');
	return $node->safe_psql('postgres', $launcher_query);
}

# new_launcher(OLD, NAME): a launcher other than OLD comes up
sub new_launcher
{
	my ($old, $name) = @_;
	wait_until($node, 'postgres',
		"SELECT ($launcher_query) NOT IN (0, $old)", 't', $name);
	return $node->safe_psql('postgres', $launcher_query);
}

# all_ran_once(FROM, TO, NAME): calls work(FROM..TO) all succeeded, each
# with its effects once
sub all_ran_once
{
	my ($from, $to, $name) = @_;
	my $n = $to - $from + 1;
	wait_until($node, 'postgres',
		"SELECT count(*) FILTER (WHERE n = 1) || ',' || count(*) FILTER (WHERE n > 1)"
		  . " FROM results WHERE id BETWEEN $from AND $to",
		"$n,0", $name);
	return;
}

wait_until($node, 'postgres', workers_query('postgres'), '2', 'two workers');

###########################################################################
# a. the launcher comes back
###########################################################################

my $launcher = launcher_pid();
$node->safe_psql('postgres', "SELECT pg_terminate_backend($launcher)");
$launcher = new_launcher($launcher, 'a: after pg_terminate_backend, a new launcher');

$launcher = launcher_pid();
$node->safe_psql('postgres', "SELECT pg_cancel_backend($launcher)");
$launcher = new_launcher($launcher, 'a: after pg_cancel_backend, a new launcher');

kill 'TERM', $launcher;
$launcher = new_launcher($launcher, 'a: after SIGTERM, a new launcher');

schedule_range($node, 'postgres', 'work(bigint)', 1, 100);
all_ran_once(1, 100, 'a: calls run under the new launcher');

###########################################################################
# b. the new launcher replaces exited workers and loses no slot
###########################################################################

$node->safe_psql('postgres',
	'ALTER SYSTEM SET retries.max_workers = 64; SELECT pg_reload_conf()');
wait_until($node, 'postgres', workers_query('postgres'), '64', 'b: 64 workers');
# the workers were started by this launcher; the next one adopts them
$node->safe_psql('postgres', "SELECT pg_terminate_backend($launcher)");
$launcher = new_launcher($launcher, 'b: a new launcher, with 64 workers it did not start');

for my $round (1 .. 5)
{
	my $old = worker_pids($node, 'postgres');
	$node->safe_psql('postgres',
		"SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
		  . " WHERE backend_type = 'retries worker'");
	wait_until(
		$node, 'postgres',
		"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'retries worker'"
		  . " AND pid <> ALL ('{$old}'::int[])",
		'64', "b: round $round: 64 new workers");
}
is($node->safe_psql('postgres', $launcher_query),
	$launcher, 'b: the same launcher throughout');

schedule_range($node, 'postgres', 'work(bigint)', 101, 600);
all_ran_once(101, 600, 'b: calls run on the new workers');

$node->safe_psql('postgres',
	'ALTER SYSTEM SET retries.max_workers = 2; SELECT pg_reload_conf()');
wait_until($node, 'postgres', workers_query('postgres'), '2',
	'b: back to two workers');

###########################################################################
# d. refused commands leave the workers alone
###########################################################################

$node->safe_psql(
	'postgres', q{
CREATE ROLE intruder LOGIN;
CREATE DATABASE other;
});
# the first attempt of nap() waits at a gate, holding its batch's locks,
# until the test opens it (at the end of d.) or its worker is stopped
my $nap_gate = close_gate($node, 'other', 15);
$node->safe_psql(
	'other', q{
CREATE EXTENSION retries;
CREATE TABLE naps (id bigint PRIMARY KEY);
CREATE FUNCTION nap(id bigint) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO naps VALUES (id);
	IF retries.current_attempt() = 1 THEN
		PERFORM } . gate_sql(15) . q{;
	END IF;
END $$;
SELECT retries.annotate('nap(bigint)', '3 10ms');
});
wait_until($node, 'postgres', workers_query('other'), '2', 'd: two workers in other');
my $nap = $node->safe_psql('other', "SELECT retries.call('nap(bigint)', '[1]')");
wait_until($node, 'other', "SELECT state FROM retries.calls WHERE id = $nap",
	'running', 'd: a call runs in other');
wait_at_gate($node, 'other', 15, 1, 'd: it waits at the gate');
my $pids = worker_pids($node, 'other');

# refused(DB, SQL, SQLSTATE, NAME): SQL, as intruder, fails with SQLSTATE,
# at once (not after waiting for a lock that the workers hold).  The call
# holds its batch's locks until the test opens its gate, after these: a
# command that waited for them would still wait at the timeout (180 s),
# however slow the machine, and one that did not ends long before it.
sub refused
{
	my ($db, $sql, $sqlstate, $name) = @_;
	my $t0 = time();
	my $timed_out;
	my ($ret, $stdout, $stderr) = $node->psql($db,
		"SET ROLE intruder; $sql",
		extra_params => [ '-v', 'VERBOSITY=verbose' ],
		timeout => $RetriesTest::DEADLINE,
		timed_out => \$timed_out);
	like($stderr, qr/ERROR:  $sqlstate/, "d: $name: refused with $sqlstate");
	ok(!$timed_out,
		sprintf("d: %s: at once, waiting for no lock of the call (%.1f s)",
			$name, time() - $t0));
	return;
}

refused('postgres', 'DROP DATABASE other', '42501', 'DROP DATABASE');
refused('postgres', 'ALTER DATABASE other RENAME TO elsewhere', '42501',
	'ALTER DATABASE RENAME');
refused('postgres', 'ALTER DATABASE other SET TABLESPACE pg_default', '42501',
	'ALTER DATABASE SET TABLESPACE');
refused('postgres', 'CREATE DATABASE copy TEMPLATE other', '42501',
	'CREATE DATABASE TEMPLATE');
refused('other', 'DROP EXTENSION retries', '42501', 'DROP EXTENSION');
refused('other', 'ALTER EXTENSION retries SET SCHEMA public', '42501',
	'ALTER EXTENSION SET SCHEMA');
refused('other', 'ALTER EXTENSION retries UPDATE', '42501', 'ALTER EXTENSION UPDATE');
my ($ret, $stdout, $stderr) = $node->psql('postgres',
	'BEGIN; DROP DATABASE other; COMMIT',
	extra_params => [ '-v', 'VERBOSITY=verbose' ]);
like($stderr, qr/ERROR:  25001/,
	'd: DROP DATABASE in a transaction block: refused with 25001');

is(worker_pids($node, 'other'), $pids, 'd: the same workers throughout');
is($node->safe_psql('other', "SELECT state FROM retries.calls WHERE id = $nap"),
	'running', 'd: the call still runs');
is($node->safe_psql('other', 'SELECT count(*) FROM retries.attempts'),
	'0', 'd: no attempt was cut short');

# a DROP EXTENSION rolled back to a savepoint: the workers come back while
# the transaction is still open (they were stopped: the command would run).
# Were the savepoint's end not to let them back, the launcher would start
# them when the stop's pause ends, 30 s after the drop (STOP_PAUSE_SECS in
# xact.c), still inside the transaction: the new workers must have started
# before that.  (That the drop, the stop and the rollback fit in those
# 30 s is the extension's own limit, not the test's: a few seconds even on
# a machine ten times slower.)
my $session = $node->background_psql('other');
$session->query_safe('BEGIN');
$session->query_safe('SAVEPOINT s');
my $dropped = $session->query_safe('SELECT clock_timestamp()');
$session->query_safe('DROP EXTENSION retries');
wait_until($node, 'postgres', workers_query('other'), '0',
	'd: DROP EXTENSION stopped the workers');
$session->query_safe('ROLLBACK TO s');
wait_until($node, 'postgres', workers_query('other'), '2',
	'd: ROLLBACK TO the savepoint brings them back, the transaction still open');
is( $node->safe_psql(
		'postgres',
		workers_query('other')
		  . " AND backend_start < '$dropped'::timestamptz + interval '30 s'"),
	'2',
	'd: at once, not when the pause of the stop ends');
$session->query_safe('COMMIT');
$session->quit;
wait_until($node, 'other',
	"SELECT string_agg(outcome::text, ',' ORDER BY attempt) FROM retries.attempts WHERE call_id = $nap",
	'interrupted,succeeded', 'd: the call that the drop cut short is charged, as any other, and run again');
open_gate($nap_gate);

###########################################################################
# e. bad rows
###########################################################################

$node->safe_psql('postgres',
	'ALTER SYSTEM SET retries.enabled = off; SELECT pg_reload_conf()');
wait_until($node, 'postgres',
	"SELECT count(*) FROM retries.workers WHERE database = 'postgres' AND state = 'paused'",
	'2', 'e: execution paused');
my ($first) = schedule_range($node, 'postgres', 'work(bigint)', 1001, 1100);
my $conflict = $first + 10;
my $orphan = $first + 20;
$node->safe_psql(
	'postgres', qq{
INSERT INTO retries.attempt_data (call_id, attempt, started_at) VALUES ($conflict, 1, now());
WITH p AS (
	INSERT INTO retries.policy_data (fn, fn_signature, is_current, min_delay,
		multiplier, jitter, retry_on, annotated_by)
	VALUES ('work(bigint)'::regprocedure, 'work(bigint)', false, '1s', 2,
		'none', '{RT}', 'postgres')
	RETURNING id)
UPDATE retries.call_data SET policy_id = (SELECT id FROM p) WHERE id = $orphan;
DELETE FROM retries.policy_data WHERE id = (SELECT policy_id FROM retries.call_data WHERE id = $orphan);
ALTER SYSTEM SET retries.enabled = on;
SELECT pg_reload_conf();
});
wait_until(
	$node, 'postgres',
	"SELECT count(*) FILTER (WHERE n = 1) || ',' || count(*) FILTER (WHERE n > 1)"
	  . " FROM results WHERE id BETWEEN 1001 AND 1100",
	"98,0", 'e: the other calls run, once each');
is( $node->safe_psql(
		'postgres',
		"SELECT state || ' ' || last_sqlstate || ' ' || last_message FROM retries.calls WHERE id = $conflict"
	),
	'failed 23505 the worker could not run or record this attempt: duplicate key value violates unique constraint "attempt_data_pkey"',
	'e: the call whose outcome cannot be recorded fails, saying why');
is( $node->safe_psql(
		'postgres',
		# the views show no call without its policy
		"SELECT state || ' ' || last_sqlstate || ' ' || last_message FROM retries.call_data WHERE id = $orphan"
	),
	"failed 42704 policy "
	  . $node->safe_psql('postgres', "SELECT policy_id FROM retries.call_data WHERE id = $orphan")
	  . " of the call no longer exists",
	'e: the call whose policy is gone fails, saying why');

###########################################################################
# f. memory
###########################################################################

# top_memory_used(PID): bytes in use in the process's TopMemoryContext
# itself (not its children), from pg_log_backend_memory_contexts() (its
# level is 0 up to PostgreSQL 17, 1 from 18 on)
sub top_memory_used
{
	my ($pid) = @_;
	my $from = -s $node->logfile;
	$node->safe_psql('postgres', "SELECT pg_log_backend_memory_contexts($pid)");
	my $used;
	my $until = time() + $RetriesTest::DEADLINE;
	while (time() < $until)
	{
		my $log = slurp_file($node->logfile, $from);
		if ($log =~ /\[$pid\] LOG:  level: \d+; TopMemoryContext: \d+ total in \d+ blocks; \d+ free \(\d+ chunks\); (\d+) used/)
		{
			$used = $1;
			last;
		}
		Time::HiRes::usleep(50_000);    # poll
	}
	return $used;
}

$node->safe_psql('postgres',
	'ALTER SYSTEM SET retries.max_workers = 1; SELECT pg_reload_conf()');
wait_until($node, 'postgres', workers_query('postgres'), '1', 'f: one worker');
my $worker = worker_pids($node, 'postgres');
# policy_rounds(FROM, TO): for each I, the policy is annotated anew (I
# attempts) and a call of it made, which the worker runs with that policy
# before the next round; every other round ANALYZE policy_data (a new plan
# for the worker's statements).  One session for all of them, which waits
# for each call in turn (at most $DEADLINE seconds): a psql or two per
# round took several minutes of a loaded machine.
sub policy_rounds
{
	my ($from, $to) = @_;
	my $deadline = $RetriesTest::DEADLINE;
	my ($ret, $out, $err) = $node->psql('postgres', qq{
DO \$\$
DECLARE
	give_up timestamptz;
BEGIN
	FOR i IN $from .. $to LOOP
		PERFORM retries.annotate('work(bigint)', i || ' 10ms');
		PERFORM retries.call('work(bigint)', jsonb_build_array(10000 + i));
		IF i % 2 = 0 THEN
			ANALYZE retries.policy_data;
		END IF;
		COMMIT;
		give_up := clock_timestamp() + interval '$deadline s';
		while clock_timestamp() < give_up AND NOT EXISTS (SELECT FROM results WHERE id = 10000 + i) loop PERFORM pg_sleep(0.01); end loop;  -- poll
		IF NOT EXISTS (SELECT FROM results WHERE id = 10000 + i) THEN
			RAISE EXCEPTION 'call % did not run in $deadline s', i;
		END IF;
	END LOOP;
END \$\$});
	is($ret, 0, "f: policies $from to $to: each call ran with its policy")
	  or diag($err);
	wait_until($node, 'postgres',
		"SELECT count(*) FROM retries.calls WHERE state = 'scheduled'", '0',
		"f: policies $from to $to loaded and dropped");
	return;
}
# a first round, so that whatever is allocated once is allocated
policy_rounds(1, 50);
my $before = top_memory_used($worker);
policy_rounds(51, 450);
my $after = top_memory_used($worker);
ok(defined $before && defined $after, 'f: the worker logged its memory twice');
cmp_ok($after - $before, '<', 4096,
	"f: TopMemoryContext in use: $before bytes before, $after after 400 policies");
is(worker_pids($node, 'postgres'), $worker, 'f: the same worker throughout');

###########################################################################
# the log
###########################################################################

no_crash($node, $offset, 'no crash in the server log');

$node->stop;
done_testing();
