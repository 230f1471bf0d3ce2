# Twenty-fourth hostile review (rv24, of 69a8164: workers on demand and one
# pool for the cluster), by a reviewer who did not write the code, 55
# minutes, on issue 42 ("whose code runs with whose rights") and what is
# new: retries.worker_idle_timeout, retries.max_cluster_workers,
# retries.max_databases, and the encoding checks of the twenty-third
# review.  alice is the victim; mallory is an ordinary role (CREATEDB for
# finding 1 only); bob, an ordinary role, joins mallory in finding 6.
# The node runs the DEFAULTS of the pool (worker_idle_timeout 10 s,
# max_cluster_workers 16, max_workers 2, max_extra_workers 2; finding 6
# lowers max_cluster_workers to 4 by a reload) with
# retries.reserved_workers 2 (what an administrator who does not trust
# every role sets).  A superuser made
# database tpl a template with the extension in it (IS_TEMPLATE, so that
# tenants' new databases have it).  Each numbered check failed on the code
# reviewed; the lettered ones held.  Fixed since, and plain checks now:
# 1 (while the pool is contended, a worker that looks after a gate or a
# queued firing leaves all the same, its database due again within a
# second: look_after_soon), 2 (annotate refuses a function whose name is
# not valid in the database's encoding, 22021), 3 (a worker that leaves a
# runner place wakes its database), 4 (a database's only worker may run
# in a reserved worker), 5 (the last free worker of a database whose
# others are busy stays), 6 (a database whose held workers want an extra
# waits for the pool as one with no worker does).
#
# Findings (the last check of 1, a command schedule queued behind its held
# command with the pool not contended, is still a TODO):
#   1. (Medium, CREATEDB) idle workers that "look after something" keep
#      the pool for good.  mallory makes sixteen databases from tpl and in
#      each calls twice a function of hers annotated rate '1/1d': the
#      second call is held by the rate gate, and a worker with a full gate
#      never leaves (worker.c may_leave: gated), idle or not, contended or
#      not.  The sixteen workers fill retries.max_cluster_workers; alice's
#      database, whose worker left, waits for room that never comes: her
#      call does not run (for as long as the gates are full: a day here,
#      for ever if mallory calls again).  The same with no gate: mallory's
#      long calls in eight to sixteen databases hold the pool for
#      retries.max_attempt_time (1 h).  Nothing bounds one role's (or one
#      owner's) share of the pool; may_leave's other reasons
#      (fire_waiting, chains_recheck, lone_next, ...) hold workers alike.
#      The last TODO check of finding 1 needs neither CREATEDB nor a
#      function: in database tenant (a superuser's, CONNECT is PUBLIC's)
#      mallory's retries.schedule_command('hold', <a long command>,
#      '1 second', overlap => 'queue') keeps both of tenant's workers, idle,
#      for good (fire_waiting), its command in a runner place: with
#      CONNECT to eight such databases she fills the pool of sixteen.
#      Check a: once mallory's databases are dropped, alice's call runs.
#   2. (Medium) the fix of rv23's finding 4 does not hold for names: text
#      not valid in the database's encoding still reaches the shared
#      tables through a function's name.  mallory reads LATIN1 bytes from
#      pg_stat_activity (a session of hers in database latin), makes
#      with EXECUTE a function whose name holds byte 0xE9 (PostgreSQL
#      does not check identifiers built in dynamic SQL), and annotates it:
#      retries.function_names.signature and policy_data.fn_signature hold
#      the byte.  pg_restore of the database's dump then fails the COPY of
#      both tables whole: alice's annotation and policy (every role's) are
#      missing from the restored database.  Cause: the signature text
#      (names.c, annotate.c) is stored with no args_check_encoding(); a
#      rename (names_step rewriting signatures) is a second way in.
#   3. (Medium) what a procedure's (or command's) outcome makes due waits
#      when the worker ran it from a runner place and the database's own
#      workers left idle meanwhile (they do after 10 s: the run is in a
#      runner place, not theirs).  The worker in the place records the
#      outcome and exits (worker.c work_guarded: runner_place_freed, then
#      proc_exit) and wakes only databases that hold calls for a runner
#      place, not its own: a call made with after => [the procedure's
#      call], and the procedure's own retry (RT001, 10 ms), stay
#      scheduled with no worker in the database until its due_at, up to
#      IDLE_RECHECK_MS (10 min), or until some other commit wakes it.  By
#      hand: 2 min 35 s, until an unrelated call woke the database.
#   4. (Medium, any role) with workers on demand a parallel query keeps a
#      database whose workers left from getting any: mallory's query
#      takes every free background-worker slot (start_parallel_hog), and
#      alice's call waits as long as the query runs, with
#      retries.reserved_workers 2.  The reserved workers run only extra
#      workers and runners (launcher.c start_worker: slot_no >=
#      retries.max_workers), so the defence that reference.md documents
#      against this query no longer covers the first worker of a database,
#      which 1.7 starts on demand.  Check b: alice's call runs once the
#      query ends.
#   5. (Medium, any role, one database) one long call of mallory's, and
#      the database's other worker gone idle: alice's call waits for
#      mallory's call to end (up to retries.max_attempt_time, 1 h; by
#      hand 27 s of a 40 s call).  leave_database lowered db->wanted to 1;
#      alice's commit finds a worker that "stays" (mallory's, busy), so
#      shmem_wake_workers does not wake the launcher; and no extra worker
#      starts, since shmem_extras_wanted asks that all retries.max_workers
#      (2) base workers be held and only one exists.  Before 1.7 the
#      second worker stayed, and an extra came.  Check c: alice's call runs
#      once mallory's ends.
#   6. (Medium, two roles, one database, under a full pool) a database
#      whose base workers are held wants an extra worker, finds the pool
#      full, and does not wait for it: start_extra calls pool_room(db,
#      true, ...), which marks no waiting_since for a database that has a
#      worker, so pool_contended() stays false and no worker of another
#      database leaves for it (leave_for_others), nor is it served in the
#      longest-waiting order.  Here the pool is 4; database busy (another
#      tenant's stream of 40000 short calls) has two workers, mallory's
#      and bob's long calls hold postgres's two; alice's call waits for
#      them (the bound documented for extras is max_workers +
#      max_extra_workers = 4 roles, not 2).  By hand (pool 4): 25.8 s,
#      for two 30 s calls.  Check d: alice's call runs once they end.
#
# Held (lettered checks a-d above, and z): no crash in the server log.
#
# Also tried by hand, and held (not repeated here): an ordinary role's
# calls of alice's slow function do not hold alice's own calls back (an
# extra worker ran hers); an attempt of a procedure that had moved to a
# runner place, cut short by the database owner's ALTER DATABASE ...
# RENAME, is recorded "interrupted" (57P01) and not charged (policy of one
# attempt; the next succeeded); a call made by a command that runs in
# another database, whose workers had left, wakes that database; encoding
# checks of on_event, limit_key, key, schedule args, command text (22021),
# timezone and every (parse errors); a command with a character that has no
# equivalent in the target database's encoding fails cleanly (22P05); cron
# in far POSIX zones (UTC-167, UTC+167, a 20-hour DST shift both ways)
# against a hand oracle: skipped minutes fire at the shift, repeated ones
# once; a call made in a prepared transaction, with no worker in the
# database, runs at COMMIT PREPARED; an "@reboot" schedule fires once after
# a restart with workers on demand.

use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RetriesTest;
use Test::More;
# the defaults of the pool; reserved workers; tpl, a template with the
# extension
my $node = pool_review_node('review_22');
my $log_offset = -s $node->logfile;
my $tmp = PostgreSQL::Test::Utils::tempdir;

# pool_sql: the workers of the pool (all databases)
my $pool_sql = "SELECT count(*) FROM pg_stat_activity"
  . " WHERE backend_type IN ('retries worker', 'retries extra worker')";

# ---------------------------------------------------------------------
# 1. idle workers held by a rate gate keep the pool from alice's database
# ---------------------------------------------------------------------
# (the workers stay while the sixteen databases are made, one at a time:
# under the default idle timeout of 10 s, the first ones' workers left
# before the last were made on a loaded machine, and the pool was never
# full; the timeout is the default again for the check itself)
$node->safe_psql('postgres',
	'ALTER SYSTEM SET retries.worker_idle_timeout = 3600; SELECT pg_reload_conf()');
for my $i (1 .. 16)
{
	as_role($node, 'postgres', 'mallory', "CREATE DATABASE m$i TEMPLATE tpl");
	as_role($node, "m$i", 'mallory', q{
CREATE SCHEMA mallory;
CREATE FUNCTION mallory.f() RETURNS void LANGUAGE sql AS 'SELECT 1';
SELECT retries.annotate('mallory.f()', '1 10ms', rate => '1/1d');
SELECT retries.call('mallory.f()'), retries.call('mallory.f()');
});
}
wait_until($node, 'postgres',
	"SELECT ($pool_sql AND datname LIKE 'm%') || ' ' || (" . workers_query('postgres') . ")",
	'16 0', '1: setup: mallory\'s sixteen databases hold the pool; postgres has no worker')
  or diag('the retries processes: ' . $node->safe_psql('postgres',
	"SELECT string_agg(backend_type || ' of ' || coalesce(datname, '-') || ' ' || coalesce(state, '-'), ', '"
	  . " ORDER BY datname, backend_type) FROM pg_stat_activity WHERE backend_type LIKE 'retries%'"));
$node->safe_psql('postgres',
	'ALTER SYSTEM RESET retries.worker_idle_timeout; SELECT pg_reload_conf()');
my $f1 = as_role($node, 'postgres', 'alice', "SELECT retries.call('alice.pay(int)', '[1]')");
{
	call_reaches($node, 'postgres', $f1, 'succeeded',
		'1: alice\'s call runs although idle workers of mallory\'s rate-gated databases filled the pool');
}

# a. once mallory's databases are gone, alice's waiting call runs: the
#    database that waited for the pool is not forgotten
for my $i (1 .. 16)
{
	$node->safe_psql('postgres', "DROP DATABASE m$i WITH (FORCE)");
}
call_reaches($node, 'postgres', $f1, 'succeeded',
	'a: alice\'s call runs once the pool is free again');

# ---------------------------------------------------------------------
# 2. a function's name not valid in the database's encoding, in the
#    shared tables of names and policies
# ---------------------------------------------------------------------
$node->safe_psql('postgres',
	"CREATE DATABASE latin ENCODING 'LATIN1' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0");
my $latin_session = $node->background_psql('latin', extra_params => [ '-U', 'mallory' ]);
$latin_session->query_safe("SET client_encoding = 'LATIN1'");
$latin_session->query_safe("SELECT 'caf\xe9' AS rv24_marker");
as_role($node, 'postgres', 'mallory', q{
CREATE FUNCTION mallory.foreign_text() RETURNS text LANGUAGE sql AS $$
SELECT query FROM pg_stat_activity WHERE datname = 'latin' AND query LIKE '%rv24_marker%' LIMIT 1 $$;
});
my ($out2, $err2) = try_as($node, 'postgres', 'mallory', q{
DO $$BEGIN
  EXECUTE format('CREATE FUNCTION mallory.%I() RETURNS void LANGUAGE sql AS ''SELECT 1''',
                 'h' || substr(mallory.foreign_text(), 9, 4));
  PERFORM retries.annotate((SELECT oid FROM pg_proc WHERE pronamespace = 'mallory'::regnamespace
                            AND proname LIKE 'h%')::regprocedure, '1 10ms');
END$$;
});
ok(!defined $out2 && $err2 =~ /ERROR:  22021/,
	'2: annotating a function whose name is not valid in the database\'s encoding is refused (22021)')
  or diag($err2);
$latin_session->quit;
my $names = $node->safe_psql('postgres', 'SELECT count(*) FROM retries.function_names');
cmp_ok($names, '>=', 1, '2: setup: alice\'s annotation is in function_names');
$node->command_ok([ 'pg_dump', '-Fc', '-f', "$tmp/postgres.dump", '-d', $node->connstr('postgres') ],
	'2: setup: pg_dump of postgres');
$node->safe_psql('postgres', 'CREATE DATABASE restored');
$node->run_log([ 'pg_restore', '-d', $node->connstr('restored'), "$tmp/postgres.dump" ]);
{
	is($node->safe_psql('restored',
			"SELECT count(*) FROM retries.function_names WHERE signature = 'alice.pay(integer)'"),
		'1', '2: the restore of postgres keeps alice\'s annotation (function_names)');
	is($node->safe_psql('restored',
			"SELECT count(*) FROM retries.policy_data WHERE fn_signature = 'alice.pay(integer)'"),
		'1', '2: ... and her policy (policy_data)');
}


# ---------------------------------------------------------------------
# 3. what a procedure's outcome makes due, once its worker moved to a
#    runner place and the database's workers left idle, waits
# ---------------------------------------------------------------------
as_role($node, 'postgres', 'alice', q{
CREATE PROCEDURE alice.p(n int) LANGUAGE plpgsql AS $$
BEGIN
  PERFORM } . gate_sql(58) . q{;
  INSERT INTO alice.t VALUES (n);
END $$;
SELECT retries.annotate('alice.p(int)', '3 10ms');
CREATE TABLE alice.tries (n int);
CREATE PROCEDURE alice.q() LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO alice.tries VALUES (1);
  COMMIT;
  PERFORM } . gate_sql(58) . q{;
  IF (SELECT count(*) FROM alice.tries) = 1 THEN
    RAISE EXCEPTION 'not yet' USING ERRCODE = 'RT001';
  END IF;
END $$;
SELECT retries.annotate('alice.q()', '3 10ms');
});
my $gate = close_gate($node, 'postgres', 58);
my $proc = as_role($node, 'postgres', 'alice', "SELECT retries.call('alice.p(int)', '[30]')");
my $after = as_role($node, 'postgres', 'alice',
	"SELECT retries.call('alice.pay(int)', '[31]', after => ARRAY[$proc]::bigint[])");
my $retried = as_role($node, 'postgres', 'alice', "SELECT retries.call('alice.q()')");
wait_at_gate($node, 'postgres', 58, 2, '3: setup: both procedures wait at the gate, in their runners');
# the two workers move to runner places after a second, other workers
# start in the places they left, and those leave once idle
# (retries.worker_idle_timeout, 10 s)
wait_until($node, 'postgres',
	"SELECT count(*) >= 3 FROM retries.workers WHERE database = 'postgres'",
	't', '3: setup: the waiting workers moved to runner places and others started');
wait_until($node, 'postgres',
	"SELECT count(*) = 2 AND bool_and(current_call IN ($proc, $retried))"
	  . " FROM retries.workers WHERE database = 'postgres'",
	't', '3: setup: only the two workers in runner places are left in postgres');
open_gate($gate);
call_reaches($node, 'postgres', $proc, 'succeeded', '3: setup: the procedure succeeds');
{
	call_reaches($node, 'postgres', $after, 'succeeded',
		'3: the call after the procedure runs, its database woken (not 10 min later)');
	wait_until($node, 'postgres',
		"SELECT count(*) FROM retries.attempt_data WHERE call_id = $retried", '2',
		'3: the procedure that asked for a retry in 10 ms is tried again, its database woken');
}


# ---------------------------------------------------------------------
# 4. a parallel query of any role keeps a database whose workers left
#    from getting one, reserved workers or not
# ---------------------------------------------------------------------
as_role($node, 'postgres', 'mallory', q{
CREATE TABLE mallory.big AS SELECT g AS id FROM generate_series(1, 100000) g;
ALTER TABLE mallory.big SET (parallel_workers = 64);
CREATE FUNCTION mallory.slow(id int) RETURNS boolean LANGUAGE sql PARALLEL SAFE
	AS $$ SELECT pg_sleep(1) IS NULL $$;  -- not a wait: the test cancels it
});
wait_until($node, 'postgres', workers_query('postgres'), '0',
	'4: setup: postgres\'s workers left, idle');
my ($hog, $hog_pid) = start_parallel_hog($node, 'postgres', 'mallory',
	'4: setup: mallory\'s parallel query takes every free slot');
my $f4 = as_role($node, 'postgres', 'alice', "SELECT retries.call('alice.pay(int)', '[40]')");
{
	call_reaches($node, 'postgres', $f4, 'succeeded',
		'4: alice\'s call runs while the query holds every free slot (retries.reserved_workers 2)');
}
$node->safe_psql('postgres', "SELECT pg_cancel_backend($hog_pid)");
$hog->quit;
# b. once the query ends, the waiting database gets its worker
call_reaches($node, 'postgres', $f4, 'succeeded', 'b: alice\'s call runs once the query ends');


# ---------------------------------------------------------------------
# 5. one long call of mallory's, and the database's other worker left
#    idle: no extra worker, and alice's call waits for mallory's
# ---------------------------------------------------------------------
as_role($node, 'postgres', 'mallory', q{
CREATE FUNCTION mallory.held() RETURNS void LANGUAGE sql AS $$ SELECT } . gate_sql(59) . q{ $$;
SELECT retries.annotate('mallory.held()', '1 10ms');
});
wait_until($node, 'postgres', workers_query('postgres'), '0',
	'5: setup: postgres\'s workers left, idle');
my $gate5 = close_gate($node, 'postgres', 59);
as_role($node, 'postgres', 'mallory', "SELECT retries.call('mallory.held()')");
wait_at_gate($node, 'postgres', 59, 1, '5: setup: mallory\'s call runs, held at a gate');
# (whether the database's other worker left before mallory's call began
# is a race; since the fix, the free one stays once the other is busy)
my $f5 = as_role($node, 'postgres', 'alice', "SELECT retries.call('alice.pay(int)', '[50]')");
{
	call_reaches($node, 'postgres', $f5, 'succeeded',
		'5: alice\'s call runs while mallory\'s one long call holds a worker');
}
open_gate($gate5);
# c. once mallory's call ends, alice's runs
call_reaches($node, 'postgres', $f5, 'succeeded', 'c: alice\'s call runs once mallory\'s ends');


# ---------------------------------------------------------------------
# 6. a database that wants an extra worker, with the pool full, does not
#    wait for the pool: no worker of another database leaves for it
# ---------------------------------------------------------------------
$node->safe_psql('postgres',
	'ALTER SYSTEM SET retries.max_cluster_workers = 4; SELECT pg_reload_conf()');
wait_until($node, 'postgres', 'SHOW retries.max_cluster_workers', '4',
	'6: setup: a pool of four');
$node->safe_psql('postgres', 'CREATE DATABASE busy');
$node->safe_psql('busy', q{
CREATE EXTENSION retries;
CREATE FUNCTION quick(n int) RETURNS void LANGUAGE sql AS $$ SELECT pg_sleep(0.002) $$;  -- not a wait: the length of a call
SELECT retries.annotate('quick(int)', '1 10ms');
SELECT count(retries.call('quick(int)', jsonb_build_array(i))) FROM generate_series(1, 40000) i;
});
wait_until($node, 'postgres', workers_query('busy'), '2',
	'6: setup: database busy, a stream of short calls, has its two workers');
as_role($node, 'postgres', 'bob', q{
CREATE FUNCTION bob.held() RETURNS void LANGUAGE sql AS $$ SELECT } . gate_sql(60) . q{ $$;
SELECT retries.annotate('bob.held()', '1 10ms');
});
as_role($node, 'postgres', 'mallory', q{
CREATE FUNCTION mallory.held2() RETURNS void LANGUAGE sql AS $$ SELECT } . gate_sql(60) . q{ $$;
SELECT retries.annotate('mallory.held2()', '1 10ms');
});
my $gate6 = close_gate($node, 'postgres', 60);
as_role($node, 'postgres', 'mallory', "SELECT retries.call('mallory.held2()')");
as_role($node, 'postgres', 'bob', "SELECT retries.call('bob.held()')");
wait_at_gate($node, 'postgres', 60, 2,
	'6: setup: mallory\'s and bob\'s long calls hold postgres\'s two workers');
my $f6 = as_role($node, 'postgres', 'alice', "SELECT retries.call('alice.pay(int)', '[60]')");
{
	call_reaches($node, 'postgres', $f6, 'succeeded',
		'6: alice\'s call runs while the long calls hold the workers (an extra worker, busy\'s workers leaving after a second)');
}
open_gate($gate6);
# d. once the long calls end, alice's runs
call_reaches($node, 'postgres', $f6, 'succeeded', 'd: alice\'s call runs once the long calls end');
$node->safe_psql('postgres', 'DROP DATABASE busy WITH (FORCE)');


# ---------------------------------------------------------------------
# 1 (again), with no CREATEDB and no function of mallory's: a command
#    schedule with overlap 'queue' keeps a database's idle workers
# ---------------------------------------------------------------------
$node->safe_psql('postgres',
	'ALTER SYSTEM RESET retries.max_cluster_workers; SELECT pg_reload_conf()');
wait_until($node, 'postgres', 'SHOW retries.max_cluster_workers', '16',
	'1: setup: the pool is back to its default, 16');
$node->safe_psql('postgres', 'CREATE DATABASE tenant');
$node->safe_psql('tenant', 'CREATE EXTENSION retries');
my $gate1 = close_gate($node, 'tenant', 61);
as_role($node, 'tenant', 'mallory',
	"SELECT retries.schedule_command('hold', 'SELECT " . gate_sql(61)
	  . "', '1 second', overlap => 'queue')");
wait_at_gate($node, 'tenant', 61, 1, '1: setup: mallory\'s command runs in tenant, held at a gate');
TODO:
{
	# not fixed yet: with the pool not contended, a worker that looks after
	# a queued firing stays (with it contended, it leaves: check 1 above)
	local $TODO = 'finding 1, uncontended';
	wait_until($node, 'postgres',
		"SELECT count(*) FROM pg_stat_activity WHERE datname = 'tenant'"
		  . " AND backend_type = 'retries worker' AND state = 'idle'",
		'0', '1: tenant\'s idle workers leave within 20 s (worker_idle_timeout 10 s)', 20);
}
as_role($node, 'tenant', 'mallory', "SELECT retries.unschedule('hold')");
open_gate($gate1);

no_crash($node, $log_offset, 'z: no crash');
done_testing();
