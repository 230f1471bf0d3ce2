# Twenty-seventh hostile review (rv27, of c0c4253: rv26's fixes -- the
# reserved workers counted per role for runners and batches alike, a
# database whose every worker runs a batch as needy as one with none, a
# database's own worker giving a reserved worker back with no back-off,
# '@reboot' arming kept out of a restore, the memory bound after fire
# rounds -- and issue 42's older promises), by a reviewer who did not write
# the code, one hour.  alice is the victim; mallory is an ordinary role
# (CREATEDB, as pool_review_node gives her).  The node runs the DEFAULTS
# of the pool (worker_idle_timeout 10 s, max_cluster_workers 16,
# max_workers 2, max_extra_workers 2) with retries.reserved_workers 2 and
# max_worker_processes 48.  Each numbered check failed on the code
# reviewed (inside a TODO block named "finding N" until fixed: all five
# are, see "Fixed" below); the lettered ones held.  The
# checks run in the order d, e, f, 1, b, 2, c, 3, g, 4, h, 5, i, z (about 2.5 min).
#
# Findings:
#   1. (Medium; a parallel query, and databases with the extension: any
#      cluster of several tenants, or CREATEDB) under a parallel query
#      that holds every free background-worker slot, a database with
#      NOTHING due cycles through the reserved workers for good: its worker
#      starts in a reserved worker, finds nothing, gives it back after a
#      second (idle_in_reserve), and leaves its database "due again a
#      second later" (worker.c main loop: leave_database(now +
#      RETRIES_HELD_AFTER_MS), whatever work_guarded() said was due, 0
#      here); the launcher starts it again a second later, in a reserved
#      worker again.  rv26's fix of its finding 7 (t/060 7: no back-off for
#      a database's own worker, idle_in_reserve returns true at once for
#      !is_extra()) turned the 10 s back-off into this loop.  Against
#      reference.md retries.worker_idle_timeout ("A database with nothing
#      due thus holds no worker, costing no process and no CPU").  With
#      many such databases the reserved workers go round them all: each
#      waits as for the pool (waiting_since), and alice's database, whose
#      call is due, waits its turn behind every one.  Here mallory's
#      parallel query, then 32 empty databases she makes from tpl (by
#      hand: 8 databases, alice's calls waited 2.7-4.9 s each, 24
#      databases 12.5-14.8 s); alice's call in postgres is not done within
#      10 s.  Each turn also logs 'background worker "retries reserve"
#      ... exited with exit code 1', every second, for as long as the query
#      runs.  Check b: it runs once the query ends.  A fix: leave with the
#      database's real next due time (work_guarded's 'due', 0 if none),
#      and keep the back-off for a database that had nothing due.
#   2. (Medium; CREATEDB, or CREATE in a schema of max_cluster_workers
#      databases with the extension) while the pool is contended, a worker
#      whose database has a firing due within a second never leaves:
#      leave_when_idle() takes due_at = Min(.., next_fire), and "work due
#      in a moment (a worker started ahead of its firing)" returns when
#      due_at < now + STAY_FOR_DUE_MS (398af7c).  A schedule every second
#      always has its next firing within the second; of a paused function
#      (retries.pause, her own) its firings run no call, so the worker is
#      never "after a second of work" either (leave_for_others needs a
#      round that ran calls).  So mallory's schedule '1 second' of a paused
#      function of hers in each of max_cluster_workers databases keeps the
#      whole pool for good, and alice's call in another database never
#      gets a worker.  reference.md documents the exception ("unless its
#      database has work due within a second"), not that it can last for
#      good: against reference.md retries.max_cluster_workers
#      ("so that no database keeps the pool from the others") and the
#      t/058 1 promise (a worker that looks after something still leaves,
#      its database due again within a second).  Here the pool is 2
#      (reload) and mallory has t1 and t2; by hand, with the default pool
#      of 16 and sixteen databases, alice's call waited past 30 s, and
#      until mallory unscheduled.  Check c: once mallory's schedule in t1
#      is gone, alice's call runs.  Also, while her databases wait
#      nothing, pool_waiting stays > 0 for good: every database's
#      housekeeping is deferred to every 10 minutes
#      (housekeeping_deferred).  A fix: stay for work due in a moment only
#      once, or only if the worker has not stayed for a second already
#      (the firing then takes its turn like a call).
#   3. (Medium; one long call, and a moment of pool contention: any busy
#      cluster has those, finding 2 makes them for good) rv26's fix of its
#      finding 5 (shmem_wake_workers: a commit that finds every worker of
#      its database busy wants them all) covers only work that a COMMIT
#      makes due.  Work that falls due by TIME does not commit anything:
#      a schedule's firing, a call's run_at, a retry's delay.  mallory's
#      gated call holds one worker of postgres; the other, idle, leaves
#      while the pool is contended (documented: "even the last free worker
#      of a database whose other worker runs a long call"), and
#      leave_database() sets db->wanted = others (1) and, others being 1,
#      no due_at.  Once nothing waits, the launcher's manage_database sees
#      nbase 1 == wanted 1 (the 'needy' loop needs nbase < wanted), and
#      shmem_extras_wanted wants every base worker held: no worker starts,
#      and nothing fires or runs what falls due until mallory's call ends
#      (up to retries.max_attempt_time, 1 h).  Here alice's schedule every
#      3 s, which fired in postgres's second worker, stops firing for good
#      (not within 15 s); by hand, alice's call made with run_at =>
#      now() + 12 s, due at 21:02:14, was still 'scheduled' at 21:02:48 and
#      ran the moment the gate opened; the same under a parallel query
#      with postgres's only worker, held, in a reserved worker (due
#      21:26:14, ran 21:26:42 as mallory's call ended).  Check g: her
#      schedule fires again
#      once mallory's call ends.  A fix: leave_database() of a worker whose
#      others are all busy should leave the database wanting it back
#      (wanted as before, or due_at = its next due time for the launcher),
#      or the launcher should count a held database's due_at.
#   4. (Medium; any role that owns a function alice calls, and a parallel
#      query, which any role may run) reserve_role (shmem.c), behind
#      reserve_roles and shmem_reserve_give, counts a reserved worker's
#      batch by w->batch_role, the role whose CALLS it runs, not by
#      w->holder_role, whose CODE it runs.  So alice's call of mallory's
#      slow function, running in one reserved worker, makes every other
#      reserved worker pass over alice's own calls ("a worker in one takes
#      no call of a role whose calls run in another already"): under a
#      parallel query alice's call of her own alice.pay waits for mallory's
#      function to end (up to retries.max_attempt_time).  Against
#      architecture.md "Capacity": "A worker that runs calls of another
#      role's functions is held by neither role for their own calls ...
#      alice's call of mallory's slow function does not hold alice's next
#      call back (t/031_trust_review_2.pl 1)", which the base and extra
#      workers keep (other_holds, batch_holder) and the reserved workers do
#      not.  Here alice's call of mallory.api(), held at a gate, runs in a
#      reserved worker, postgres's other worker sits idle in the other
#      one, and alice's own call is not done within 10 s (by hand with
#      pg_sleep(60): 30 s and more, until mallory's function ended).
#      Check h: it runs once the gate opens.  A fix: reserve_role should
#      give the batch's holder (holder_role), as other_holds does, so that
#      a batch of another role's code holds back only that role's code.
#   5. (Medium; a parallel query, which any role may run) rv26's fix of
#      its finding 1 counts, for the half of the reserved workers a role's
#      runners may have, the batches of workers in reserved workers too,
#      the asking worker's own included (shmem_reserve_give ->
#      reserve_role(r, self = true)).  A command (or a procedure) of a
#      database whose workers left idle -- the default, after 10 s --
#      needs two reserved workers under a parallel query: one for the
#      database's worker, which claims the command and so runs a batch of
#      alice's, and one for the runner, whose give then finds alice
#      already at her half ((2 + 1) / 2 = 1) and fails.  So no command of
#      any role starts while the query runs: against reference.md
#      retries.reserved_workers ("So a role's command starts while another
#      role's parallel query holds every other slot (t/020_containment.pl
#      n)"; t/020 n runs with workers that stay, worker_idle_timeout 0,
#      whose worker is in an ordinary slot).  Here alice's
#      run_command('INSERT ...') stays 'scheduled', 0 attempts, past 10 s
#      (by hand: past 30 s, both reserved workers cycling idle in
#      postgres; alice's call of her procedure alice.proc(int) the same,
#      15 s, 0 attempts), and check i: it runs the moment the query ends.  A fix:
#      do not count the asking worker's own batch (the runner takes the
#      batch's place: it is the same call), i.e. reserve_role(r, false) in
#      shmem_reserve_give for the caller's own reserve.
#
# Fixed (the checks are plain now):
#   1. leave_reserve (worker.c): a database's own worker in a reserved
#      worker leaves it with its database due when its work is
#      (next_visit), at once if nothing is due soon; "a second later" only
#      after a claim that passed over roles running in other reserved
#      workers.
#   2. leave_when_idle: a worker stays for work due within a second only
#      in its first second there (POOL_SLICE_MS).
#   3. leave_database: the last free worker of a database whose others are
#      held leaves its next due time (due_at), and the launcher starts one
#      more then if they still are (manage_database).
#   4. reserve_role (shmem.c) gives whose code a reserved worker's batch
#      runs (holder_role); a worker in a reserved worker passes over a
#      batch of another role's code that runs in another reserved worker
#      (reserve_passes_over), as an extra does.
#   5. by the setting: a command needs two reserved workers, and each role
#      may have half of them, so commands start under such a query with
#      retries.reserved_workers 4 (the reference says so); with 2, none
#      starts while it runs, the price of no role's one command taking
#      both (t/060 1).  The check runs with 4.
#
# Held (lettered checks, and by hand):
#   d. retries.next_runs in far POSIX zones (offsets and DST rules of
#      +-167 h, DST rules whose transitions fall in another year) with
#      seven cron and interval expressions: 200 times each, strictly
#      increasing, all after the start.  (By hand also 2,400 random cron
#      texts x zones x starts: every error 22023, no crash.)
#   e. mallory, while alice's call runs: retries.running_calls() {},
#      worker_status() no current_call, node_op('result'|'cancel'|'wait')
#      42704, cluster_call_rows() nothing of alice's; alice's call is not
#      cancelled.
#   f. bounded inputs: a schedule name of 1 MB (22023, 200 bytes), a
#      command of 20 MB (54000, max_args_size), an event name and on_event
#      of 1025 bytes (22023), a key of 16385 bytes (54000), an 'every' of
#      400 bytes (22023).
#   By hand (not in this file): the memory bound after fire rounds
#   (rv26's fix of its finding 8) under 6,000 schedules every second of
#   mallory's, each in its own POSIX zone, retries.max_worker_memory 32MB:
#   the workers of postgres exit and are replaced every second or so
#   ("exits to be replaced"), yet alice's calls ran within 0.05-1.2 s and
#   her schedule every 2 s fired on time; pseudo-type parameters
#   (cstring, internal, anyelement, anyarray, record) refused at call;
#   pg_catalog functions not annotated refused; '@reboot' (rv26's fix of
#   its finding 3): mallory's '@reboot' schedule in m2 fired once after a
#   restart, once more after a pg_restore --clean of a dump made before
#   the restart (its row says it has not fired since), not again after
#   that, and a copy of m2 (CREATE DATABASE ... TEMPLATE m2) got it paused;
#   alice's call of priority -2147483648 ran in 50-85 ms behind mallory's
#   3,000 due calls of priorities 100-149; retries.resolve_function() and
#   command_statements() with malformed signatures and SQL (100,000
#   nested parentheses: 42601 "memory exhausted") raise or return NULL,
#   no crash.

use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RetriesTest;
use Test::More;
use Time::HiRes qw(usleep time);

# the defaults of the pool; reserved workers; tpl, a template with the
# extension; mallory with CREATEDB
my $node = pool_review_node('review_25');
my $log_offset = -s $node->logfile;

as_role($node, 'postgres', 'mallory', q{
CREATE TABLE mallory.big AS SELECT g AS id FROM generate_series(1, 100000) g;
ALTER TABLE mallory.big SET (parallel_workers = 64);
CREATE FUNCTION mallory.slow(id int) RETURNS boolean LANGUAGE sql PARALLEL SAFE
	AS $$ SELECT pg_sleep(1) IS NULL $$;  -- not a wait: the test cancels it
});

# ---------------------------------------------------------------------
# d. next_runs in far POSIX zones (offsets and DST rules of +-167 h):
#    each walk gives 200 times, all after 'after', strictly increasing
# ---------------------------------------------------------------------
is(as_role($node, 'postgres', 'mallory', q{
SELECT count(*) FROM (
SELECT z, e FROM (VALUES ('XXX3YYY,M1.1.0/-167,M12.5.6/167'), ('<A>12<B>,0/0,365/24'),
    ('<A>-167<B>+167,M3.2.0,M11.1.0'), ('<A>+167<B>-167,J1/0,J365/24'),
    ('<A>-14<B>+14,M3.5.0/-100,M10.5.0/100'), ('<A>-23<B>+23,M3.5.0/3,M3.5.0/4'),
    ('<A>-167<B>,M1.1.0/-167,M1.1.1/-167')) zz(z),
  (VALUES ('0 0 * * *'), ('*/7 * * * *'), ('30 2 * * *'), ('0 0 L * *'), ('0 12 29 2 *'),
    ('1 hour'), ('59 23 31 12 *')) ee(e),
  LATERAL (SELECT t, lag(t) OVER (ORDER BY o) prev
             FROM retries.next_runs(e, z, '2026-06-01', 200) WITH ORDINALITY u(t, o)) x
 GROUP BY 1, 2
HAVING count(*) = 200 AND count(DISTINCT t) = 200
   AND bool_and(prev IS NULL OR prev < t) AND min(t) > '2026-06-01') ok
}), '49', 'd: next_runs in far POSIX zones: 200 increasing times after the start, each');

# ---------------------------------------------------------------------
# e. mallory learns nothing of alice's running call through the PUBLIC
#    functions behind the views (running_calls, worker_status, node_op,
#    cluster_call_rows)
# ---------------------------------------------------------------------
as_role($node, 'postgres', 'alice', q{
CREATE FUNCTION alice.held() RETURNS int LANGUAGE sql AS $$ SELECT 1 FROM } . gate_sql(61) . q{ AS g $$;
SELECT retries.annotate('alice.held()', '1 10ms');
});
my $gate_e = close_gate($node, 'postgres', 61);
my $fe = as_role($node, 'postgres', 'alice', "SELECT retries.call('alice.held()')");
wait_at_gate($node, 'postgres', 61, 1, 'e: setup: alice\'s call runs, at the gate');
is(as_role($node, 'postgres', 'mallory', qq{
SELECT (SELECT coalesce(array_length(retries.running_calls(), 1), 0))
    || '/' || (SELECT count(*) FROM retries.worker_status() WHERE current_call IS NOT NULL)
    || '/' || (SELECT retries.node_op('result', $fe, '0')->>'sqlstate')
    || '/' || (SELECT retries.node_op('cancel', $fe, '0')->>'sqlstate')
    || '/' || (SELECT position('alice' in retries.cluster_call_rows()::text))
}), '0/0/42704/42704/0',
	'e: running_calls, worker_status, node_op (result, cancel) and cluster_call_rows show mallory nothing of alice\'s call');
open_gate($gate_e);
call_reaches($node, 'postgres', $fe, 'succeeded', 'e: alice\'s call ran, not cancelled');

# ---------------------------------------------------------------------
# f. bounded and precise: over-long names, commands, events, keys and
#    cron texts are refused with their SQLSTATEs
# ---------------------------------------------------------------------
{
	my @cases = (
		[ "SELECT retries.schedule(repeat('n', 1000000), 'alice.pay(int)', '1 day', '[1]')", '22023' ],
		[ "SELECT retries.run_command('SELECT 1 ' || repeat('-- x', 5000000))", '54000' ],
		[ "SELECT retries.emit(repeat('e', 1025))", '22023' ],
		[ "SELECT retries.call('alice.pay(int)', '[1]', on_event => repeat('e', 1025))", '22023' ],
		[ "SELECT retries.call('alice.pay(int)', '[1]', key => repeat('k', 16385))", '54000' ],
		[ "SELECT retries.next_runs(repeat('* ', 200), 'UTC', now(), 1)", '22023' ],
	);
	for my $c (@cases)
	{
		my ($out, $err) = try_as($node, 'postgres', 'mallory', $c->[0]);
		ok(!defined $out && $err =~ /ERROR:  $c->[1]/, "f: $c->[1] for " . substr($c->[0], 7, 40))
		  or diag($err);
	}
}

# ---------------------------------------------------------------------
# 1. under a parallel query, a database with nothing due cycles through
#    the reserved workers for good (1 s in, 1 s out); with many of them
#    alice's call waits its turn behind them all
# ---------------------------------------------------------------------
wait_until($node, 'postgres',
	"SELECT count(*) FROM pg_stat_activity WHERE backend_type LIKE 'retries%'"
	  . " AND datname IS NOT NULL",
	'0', '1: setup: every worker left, idle');
my ($hog, $hog_pid) = start_parallel_hog($node, 'postgres', 'mallory',
	'1: setup: mallory\'s parallel query takes every free slot');
as_role($node, 'postgres', 'mallory', 'CREATE DATABASE i1 TEMPLATE tpl');
# (since the fix its worker may give the reserved worker back at once:
# what it leaves is the transactions it ran there)
wait_until($node, 'postgres',
	"SELECT xact_commit > 0 FROM pg_stat_database WHERE datname = 'i1'",
	't', '1: setup: i1 (nothing in it) got a worker, in a reserved worker');
wait_until($node, 'postgres',
	"SELECT count(*) FROM pg_stat_activity WHERE datname = 'i1'",
	'0', '1: setup: i1\'s worker gives the reserved worker back');
is($node->safe_psql('i1', 'SELECT count(*) FROM retries.call_data'), '0',
	'1: setup: nothing is due in i1, nor ever was');
{
	stays_true($node, 'postgres',
		"SELECT count(*) = 0 FROM pg_stat_activity WHERE datname = 'i1'", 5,
		'1: i1, with nothing due, gets no worker again');
}
for my $i (2 .. 32)
{
	as_role($node, 'postgres', 'mallory', "CREATE DATABASE i$i TEMPLATE tpl");
}
wait_until($node, 'postgres',
	"SELECT count(*) FROM pg_stat_activity WHERE datname = 'postgres'"
	  . " AND backend_type LIKE 'retries%'",
	'0', '1: setup: no worker in postgres');
my $f1 = as_role($node, 'postgres', 'alice', "SELECT retries.call('alice.pay(int)', '[1]')");
{
	call_reaches($node, 'postgres', $f1, 'succeeded',
		'1: alice\'s call runs within 10 s while mallory\'s query holds every free slot', 10);
}
$node->safe_psql('postgres', "SELECT pg_cancel_backend($hog_pid)");
$hog->quit;
call_reaches($node, 'postgres', $f1, 'succeeded', 'b: alice\'s call runs once the query ends');
for my $i (1 .. 32)
{
	$node->safe_psql('postgres', "DROP DATABASE i$i WITH (FORCE)");
}

# ---------------------------------------------------------------------
# 2. while the pool is contended, a worker whose database has a firing
#    due within a second stays: a schedule every second of a paused
#    function in each database of mallory's keeps the pool for good
# ---------------------------------------------------------------------
$node->safe_psql('postgres',
	'ALTER SYSTEM SET retries.max_cluster_workers = 2; SELECT pg_reload_conf()');
wait_until($node, 'postgres', 'SHOW retries.max_cluster_workers', '2',
	'2: setup: a pool of two');
for my $db ('t1', 't2')
{
	as_role($node, 'postgres', 'mallory', "CREATE DATABASE $db TEMPLATE tpl");
	as_role($node, $db, 'mallory', q{
CREATE SCHEMA mallory;
CREATE FUNCTION mallory.tick() RETURNS void LANGUAGE sql AS 'SELECT 1';
SELECT retries.annotate('mallory.tick()', '1 10ms');
SELECT retries.pause('mallory.tick()');
SELECT retries.schedule('tick', 'mallory.tick()', '1 second');
});
}
wait_until($node, 'postgres',
	"SELECT count(*) FROM pg_stat_activity WHERE backend_type LIKE 'retries%worker'"
	  . " AND datname IN ('t1', 't2')",
	'2', '2: setup: t1 and t2 each have a worker: the pool is full');
my $f2 = as_role($node, 'postgres', 'alice', "SELECT retries.call('alice.pay(int)', '[2]')");
{
	call_reaches($node, 'postgres', $f2, 'succeeded',
		'2: alice\'s call runs within 10 s (the pool is shared in turns)', 10);
}
as_role($node, 't1', 'mallory', "SELECT retries.unschedule('tick')");
call_reaches($node, 'postgres', $f2, 'succeeded',
	'c: alice\'s call runs once mallory\'s schedule in t1 is gone');
as_role($node, 't2', 'mallory', "SELECT retries.unschedule('tick')");
$node->safe_psql('postgres',
	'ALTER SYSTEM RESET retries.max_cluster_workers; SELECT pg_reload_conf()');
$node->safe_psql('postgres', "DROP DATABASE $_ WITH (FORCE)") for ('t1', 't2');

# ---------------------------------------------------------------------
# 3. after a moment of contention, a database whose only worker is held
#    starts no worker for work that falls due by time (a firing, a run_at,
#    a retry): only a commit wants more (rv26's fix of its finding 5)
# ---------------------------------------------------------------------
as_role($node, 'postgres', 'mallory', q{
CREATE FUNCTION mallory.held3() RETURNS boolean LANGUAGE sql AS $$ SELECT } . gate_sql(63) . q{ $$;
SELECT retries.annotate('mallory.held3()', '1 10ms');
});
as_role($node, 'postgres', 'mallory', 'CREATE DATABASE t3 TEMPLATE tpl');
as_role($node, 't3', 'mallory', q{
CREATE SCHEMA mallory;
CREATE FUNCTION mallory.t() RETURNS int LANGUAGE sql AS $$ SELECT 1 FROM } . gate_sql(65) . q{ AS g $$;
SELECT retries.annotate('mallory.t()', '1 10ms');
});
wait_until($node, 'postgres',
	"SELECT count(*) FROM pg_stat_activity WHERE backend_type LIKE 'retries%worker'"
	  . " AND datname <> 'postgres'",
	'0', '3: setup: no worker in another database (t3\'s left, idle)');
$node->safe_psql('postgres',
	'ALTER SYSTEM SET retries.max_cluster_workers = 2; SELECT pg_reload_conf()');
wait_until($node, 'postgres', 'SHOW retries.max_cluster_workers', '2',
	'3: setup: a pool of two');
my $gate3 = close_gate($node, 'postgres', 63);
as_role($node, 'postgres', 'alice',
	"SELECT retries.schedule('a3', 'alice.pay(int)', '3 seconds', '[3]')");
as_role($node, 'postgres', 'mallory', "SELECT retries.call('mallory.held3()')");
wait_at_gate($node, 'postgres', 63, 1, '3: setup: mallory\'s call holds a worker of postgres');
wait_until($node, 'postgres',
	"SELECT count(*) >= 2 FROM alice.t WHERE n = 3", 't',
	'3: setup: alice\'s schedule fires (in postgres\'s other worker)');
wait_until($node, 'postgres',
	"SELECT count(*) FROM pg_stat_activity WHERE backend_type LIKE 'retries%worker'"
	  . " AND datname = 'postgres'",
	'2', '3: setup: postgres\'s two workers fill the pool');
# t3's call holds its worker at a gate of its own, so that the pool stays
# full (mallory's held call in postgres, t3's) until it is made larger: once
# t3's worker were idle, it would leave for postgres's schedule at once, and
# postgres would have two workers again before the check below saw one
my $gate3t = close_gate($node, 't3', 65);
my $t3 = as_role($node, 't3', 'mallory', "SELECT retries.call('mallory.t()')");
wait_at_gate($node, 't3', 65, 1,
	'3: setup: t3 waited for the pool; postgres\'s free worker left for it');
wait_until($node, 'postgres',
	"SELECT count(*) FROM pg_stat_activity WHERE backend_type LIKE 'retries%worker'"
	  . " AND datname = 'postgres'",
	'1', '3: setup: postgres has its held worker only');
$node->safe_psql('postgres',
	'ALTER SYSTEM RESET retries.max_cluster_workers; SELECT pg_reload_conf()');
wait_until($node, 'postgres', 'SHOW retries.max_cluster_workers', '16',
	'3: setup: the pool has room again (16), nothing waits');
my $fired3 = $node->safe_psql('postgres', 'SELECT count(*) FROM alice.t WHERE n = 3');
{
	wait_until($node, 'postgres',
		"SELECT count(*) > $fired3 FROM alice.t WHERE n = 3", 't',
		'3: alice\'s schedule every 3 s fires again within 15 s', 15);
}
open_gate($gate3t);
call_reaches($node, 't3', $t3, 'succeeded', '3: t3\'s call ends once its gate opens');
open_gate($gate3);
wait_until($node, 'postgres',
	"SELECT count(*) > $fired3 FROM alice.t WHERE n = 3", 't',
	'g: alice\'s schedule fires again once mallory\'s call ends');
as_role($node, 'postgres', 'alice', "SELECT retries.unschedule('a3')");
$node->safe_psql('postgres', 'DROP DATABASE t3 WITH (FORCE)');

# ---------------------------------------------------------------------
# 4. under a parallel query, alice's call of mallory's slow function,
#    running in one reserved worker, keeps every other reserved worker
#    from alice's own calls: reserve_role counts a batch by its calls'
#    role, not by whose code it runs
# ---------------------------------------------------------------------
as_role($node, 'postgres', 'mallory', q{
CREATE FUNCTION mallory.api() RETURNS int LANGUAGE sql AS $$ SELECT 1 FROM } . gate_sql(64) . q{ AS g $$;
SELECT retries.annotate('mallory.api()', '1 10ms');
});
wait_until($node, 'postgres',
	"SELECT count(*) FROM pg_stat_activity WHERE backend_type LIKE 'retries%'"
	  . " AND datname IS NOT NULL",
	'0', '4: setup: every worker left, idle');
my ($hog4, $hog4_pid) = start_parallel_hog($node, 'postgres', 'mallory',
	'4: setup: mallory\'s parallel query takes every free slot');
my $gate4 = close_gate($node, 'postgres', 64);
my $api4 = as_role($node, 'postgres', 'alice', "SELECT retries.call('mallory.api()')");
wait_at_gate($node, 'postgres', 64, 1,
	'4: setup: alice\'s call of mallory\'s function runs (in a reserved worker), at the gate');
my $f4 = as_role($node, 'postgres', 'alice', "SELECT retries.call('alice.pay(int)', '[4]')");
{
	call_reaches($node, 'postgres', $f4, 'succeeded',
		'4: alice\'s own call runs within 10 s, the other reserved worker free', 10);
}
open_gate($gate4);
call_reaches($node, 'postgres', $f4, 'succeeded',
	'h: alice\'s call runs once her call of mallory\'s function ends');
call_reaches($node, 'postgres', $api4, 'succeeded', 'h: and that call succeeded');
$node->safe_psql('postgres', "SELECT pg_cancel_backend($hog4_pid)");
$hog4->quit;

# ---------------------------------------------------------------------
# 5. under a parallel query, a command of alice's in a database whose
#    workers left idle never starts: it needs two reserved workers (the
#    database's worker and the runner), and a role may hold only half
# ---------------------------------------------------------------------
# a command needs two reserved workers (its database's worker and its
# runner) and a role may have half of them: 4, as the reference says to set
# where commands are to start under such a query (with 2, no role's command
# starts while it runs: that is what half means)
$node->append_conf('postgresql.conf', "retries.reserved_workers = 4\n");
$node->restart;
wait_until($node, 'postgres',
	"SELECT count(*) FROM pg_stat_activity WHERE backend_type LIKE 'retries%'"
	  . " AND datname IS NOT NULL",
	'0', '5: setup: every worker left, idle');
my ($hog5, $hog5_pid) = start_parallel_hog($node, 'postgres', 'mallory',
	'5: setup: mallory\'s parallel query takes every free slot');
my $f5 = as_role($node, 'postgres', 'alice',
	"SELECT retries.run_command('INSERT INTO alice.t VALUES (5)', policy => '1 10ms')");
{
	call_reaches($node, 'postgres', $f5, 'succeeded',
		'5: alice\'s command runs within 10 s while mallory\'s query holds every free slot', 10);
}
$node->safe_psql('postgres', "SELECT pg_cancel_backend($hog5_pid)");
$hog5->quit;
call_reaches($node, 'postgres', $f5, 'succeeded', 'i: alice\'s command runs once the query ends');

no_crash($node, $log_offset, 'z: no crash in the server log');

$node->stop;
done_testing();
