# Twenty-sixth hostile review (rv26, of c496476: workers on demand that
# cost less per visit, the database's shared memo, and rv25's fixes in
# worker.c and shmem.c; and issue 42's older promises), by a reviewer who
# did not write the code, one hour.  alice is the victim; mallory is an
# ordinary role (CREATEDB, as pool_review_node gives her).  The node runs
# the DEFAULTS of the pool (worker_idle_timeout 10 s, max_cluster_workers
# 16, max_workers 2, max_extra_workers 2) with retries.reserved_workers 2
# (what an administrator who does not trust every role sets) and
# max_worker_processes 48.  Each numbered check fails on the code reviewed
# (inside a TODO block named "finding N"); the lettered ones held.
#
# Findings:
#   1. (Medium; a parallel query and one command; no CREATEDB needed)
#      rv25's fix of its finding 3 (a worker in a
#      reserved worker claims no call of a role whose calls run in
#      another reserved worker: reserve_roles, shmem_reserve_roles) and the
#      older bound on runners (a role's runners in at most half of the
#      reserved workers: shmem_reserve_give) each count only their own
#      kind of job: shmem_reserve_roles looks at RESERVE_WORKER jobs only,
#      shmem_reserve_give counts RESERVE_RUNNER jobs only.  So one role
#      takes both reserved workers with ONE command: while mallory's
#      parallel query holds every free background-worker slot, her
#      retries.run_command in her database m1 (which has no worker, idle)
#      starts m1's first worker in reserved worker 1, and that worker
#      starts the command's runner in reserved worker 2 (her first runner
#      there: allowed).  alice's call in postgres, whose workers left idle,
#      then gets no worker for as long as the query runs, against
#      reference.md (retries.reserved_workers: "the runners of one role's
#      calls in at most half of them ... a worker in one takes no call of a
#      role whose calls run in another already ... so that one role's calls
#      ... do not take them all") and architecture.md ("No role takes them
#      all").  A count of both kinds of job per role (a role's worker in
#      a reserved worker counts as one of hers for the runner's give, and a
#      role's runner for reserve_roles) would close it.
#      Check b: once mallory's command ends (the query still running),
#      a reserved worker is free again and alice's call runs in it.
#      (CREATEDB is not needed: by hand, mallory's run_command('SELECT
#      pg_sleep(60)') in postgres itself took both reserved workers, its
#      worker "in a runner" and the runner, and alice's call waited past
#      15 s; the test uses m1 so that check b can free them.)
#   2. (Medium) the time zone of a schedule is not checked for the
#      database's encoding (rv23-25 fixed args, keys, events, names and
#      signatures; reference.md's 22021 row lists no time zone).
#      recurring_time_zone (schedules/recurring.c) takes whatever
#      pg_tzset() accepts, and a POSIX zone's quoted abbreviation ('<...>')
#      may hold any bytes: mallory's retries.schedule(...,
#      timezone => '<caf\xE9...>-5') (bytes read from pg_stat_activity, a
#      session of hers in database latin), schedule_command and
#      alter_schedule are all accepted, retries.schedule_data.timezone holds
#      byte 0xE9, and a pg_restore of the database's dump fails the COPY of
#      schedule_data whole ("invalid byte sequence for encoding UTF8"):
#      alice's schedule is missing from the restored database.  An
#      args_check_encoding() of the time zone in recurring_time_zone (or
#      schedule.c's spec check, beside the name's) would close it.
#      Check c: the rest of the dump (alice's calls) loads.
#   3. (Low) a restored '@reboot' schedule that has not fired since the
#      server started never fires before the next start, once a worker of
#      the database served since that start: the database's shared memo
#      (RetriesDbMemo.armed, worker.c serving / memo_write_armed) says
#      "armed" for the database's OID, and nothing clears it when the
#      extension is dropped and made again (a pg_restore --clean, or DROP
#      EXTENSION and a restore).  Before the memo each new worker process
#      armed again, and schedule_arm_at_start's own conditions (last_run,
#      created_at, origin before pg_postmaster_start_time()) kept it to
#      once per start.  Here: alice's '@reboot' schedule, dumped before a
#      restart, fires once after it; the dump restored over the database
#      (--clean) brings it back with last_run NULL and created_at before
#      the start; a new worker of the database runs alice's call, and the
#      schedule does not fire.  The same in a new database when its first
#      worker serves during the restore's hold (serving() does not check
#      restore_holder(): it arms an empty schedule_data and writes the
#      memo; by hand, not here: a race).  Check d: the new worker runs
#      alice's call.
#   4. (Medium; CREATEDB, or CONNECT to other databases with the
#      extension) a database whose only worker is held by a long call and
#      that wants its second (note_all_busy raised db->wanted) never counts
#      as waiting for the pool when the pool is full: manage_database's
#      loop over the base workers calls pool_room(db, nbase > 0), which
#      with has_worker true returns false without setting waiting_since,
#      and returns before start_extra (whose pool_room(db, false) would
#      have: t/058's finding 6).  So pool_waiting stays 0, no worker of
#      another database leaves "after a second of work", and no extra
#      starts: with retries.max_cluster_workers 2 (by a reload; with the
#      default 16, by reading, eight databases of hers), mallory's gated call
#      holds postgres's worker and her stream of short calls in m2 keeps
#      the other place; alice's call in postgres waits for as long as the
#      stream lasts (reference.md, retries.max_cluster_workers: "while any
#      waits, a worker leaves its database ... after a second of work ...
#      so that no database keeps the pool from the others").  Check e: once
#      mallory pauses her stream, m2's worker leaves idle and alice's call
#      runs.
#   5. (Medium; a moment of contention, which another role can cause
#      with CREATEDB or by reload here) once a database's idle worker has
#      left for the pool (as documented: "even the last free worker of a
#      database whose other worker runs a long call"), the database gets
#      no worker for a new call after the contention is over, for as long
#      as the long call runs.  leave_database sets db->wanted to the
#      workers that stay (1); a new call's commit only raises wanted to
#      Max(wanted, 1) (launcher.c manage_database), note_all_busy runs
#      only when a batch begins, and shmem_extras_wanted asks for
#      base_held >= retries.max_workers, which one held worker of two
#      never is.  Here: with the pool at two, mallory's gated call holds
#      one worker of postgres and its second starts idle; her call in m3
#      makes m3 wait, the idle worker leaves, m3's call runs; the pool back
#      at sixteen (nothing waits), alice's call in postgres waits for
#      mallory's call (reference.md: "alice's due call starts within about
#      a second whatever mallory holds"; up to retries.max_attempt_time).
#      Check f: once mallory's call ends, alice's runs.
#   6. (Medium; an ordinary role with a parallel query and a long call in
#      alice's database) the reserved workers run a database's first
#      worker or an extra, not its second (launcher.c start_worker: first
#      || slot_no >= max_workers), and a database whose first worker is
#      held never gets to start_extra: manage_database's loop over the base
#      workers returns when slot 1 cannot start (the cause of 4), and
#      shmem_extras_wanted wants every base worker held (the cause of 5).
#      So, right after check b (the query still holding every other slot),
#      mallory's gated call takes postgres's only worker, in a reserved
#      worker; the other reserved worker is free (checked), and alice's
#      call in postgres waits for as long as the query runs (reference.md,
#      retries.reserved_workers: "when no other slot is free, it is given
#      the extra worker or the runner to run"; t/020 n covers a database
#      with no worker).  Check g: once the query ends, alice's call runs.
#   7. (Low) under the same query, a database's own worker that runs in a
#      reserved worker and is idle for a second gives it back
#      (idle_in_reserve, rv25's fix of its finding 3) and sets the
#      database's reserve_extra_after: no reserved worker goes to any
#      worker of that database for RESERVE_EXTRA_BACKOFF_MS (10 s).  The
#      back-off was made for an extra that cannot use its place; for a
#      database's first worker it holds the database's next call: right
#      after check b, postgres's worker (it ran alice's call) gives its
#      reserved worker back idle, and alice's next call, both reserved
#      workers free, waits about 10 s (undocumented; reference.md promises
#      the reserved workers to a database's first worker "when no other
#      slot is free").  The same with another role's call due there whose
#      role holds the other reserved worker, again and again.  Check h: it
#      runs after the back-off.
#   8. (Medium) retries.max_worker_memory does not bound a worker that
#      only fires schedules.  advance() (schedules/schedule.c) calls
#      pg_tzset(f->timezone) for every firing, and PostgreSQL caches each
#      distinct zone for the process's life (about 24 kB each, measured:
#      2,000 POSIX zones '<A1>-5', '<A2>-5', ... took 48 MB of the
#      "Timezones" context); grown_too_much() is asked only after a round
#      that ran calls (worker.c: n > 0).  mallory's 4,000 schedules of a
#      paused function of hers, '1 second' each, each with a zone of its
#      own, make held calls only; with retries.max_worker_memory 32MB (by a
#      reload) the worker of postgres that fires them holds about 100 MB of
#      private memory and never exits to be replaced (by hand: 6,000 gave
#      175 MB against 64MB; 12,000 cron ones 320 MB RSS against the default
#      256MB).  The growth is linear in the number of a role's schedules:
#      a few hundred thousand rows make gigabytes in each worker that
#      visits, an out-of-memory risk for the whole server.  Asking
#      grown_too_much() after fire_step too (and not caching a zone per
#      schedule: pg_tzset of names read from rows) would close it.
#
# Held (lettered checks): b, c, d, e, f, g, h above; z. no crash in the
# server log.
# Held by hand (see /work/rv26-report.md): an on_exhausted hook of
# mallory's, run for alice's call of mallory's function, runs as mallory
# and can neither see nor change alice's call (retry_now, result: 42704;
# attempts: none; current_call NULL); a command in another database whose
# name holds invalid bytes is refused (22021, args); next_runs over far
# POSIX zones and years 1 and 9999.
#
# Fixed since, and plain checks now (check 1's setup changed with its fix:
# mallory's command takes one reserved worker, not both): 1 (a role's
# calls in reserved workers, runners and workers' batches alike, hold at
# most half of them: shmem.c reserve_role), 2 (a time zone not valid in the
# database's encoding is refused, 22021: recurring_time_zone), 3 (a new
# extension clears the database's memo; no arming while a restore holds
# the database), 4 and 6 (a database whose every worker runs a batch waits
# for the pool as one with none, and may take a reserved worker:
# launcher.c manage_database 'needy'), 5 (a commit that finds every worker
# of its database busy, fewer than retries.max_workers, wants them all:
# shmem_wake_workers), 7 (a database's own worker gives a reserved worker
# back with no back-off, its database due again a second later), 8 (the
# memory bound is checked after each round of firings, and a round stops
# firing past it: fire_rows).

use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RetriesTest;
use Test::More;
use Time::HiRes qw(usleep);

# the defaults of the pool; reserved workers; tpl, a template with the
# extension; mallory with CREATEDB
my $node = pool_review_node('review_24');
my $log_offset = -s $node->logfile;

# ---------------------------------------------------------------------
# 1. one command of mallory's takes both reserved workers (its worker
#    and its runner) while her parallel query holds every other slot
# ---------------------------------------------------------------------
as_role($node, 'postgres', 'mallory', 'CREATE DATABASE m1 TEMPLATE tpl');
as_role($node, 'postgres', 'mallory', q{
CREATE TABLE mallory.big AS SELECT g AS id FROM generate_series(1, 100000) g;
ALTER TABLE mallory.big SET (parallel_workers = 64);
CREATE FUNCTION mallory.slow(id int) RETURNS boolean LANGUAGE sql PARALLEL SAFE
	AS $$ SELECT pg_sleep(1) IS NULL $$;  -- not a wait: the test cancels it
});
my $gate1 = close_gate($node, 'm1', 81);
wait_until($node, 'postgres',
	"SELECT count(*) FROM pg_stat_activity WHERE datname IN ('postgres', 'm1')"
	  . " AND backend_type LIKE 'retries%'",
	'0', '1: setup: the workers of postgres and m1 left, idle');
my ($hog, $hog_pid) = start_parallel_hog($node, 'postgres', 'mallory',
	'1: setup: mallory\'s parallel query takes every free slot');
my $cmd = 'SELECT ' . gate_sql(81);
$cmd =~ s/'/''/g;
as_role($node, 'm1', 'mallory',
	"SELECT retries.run_command('$cmd', policy => '1 10ms')");
# since the fix: m1's worker runs in one reserved worker, and the command's
# runner may not take the other (mallory's calls hold half of them)
wait_until($node, 'postgres',
	"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'retries reserve'"
	  . " AND datname = 'm1'",
	'1', '1: setup: m1\'s worker runs in a reserved worker');
my $f1 = as_role($node, 'postgres', 'alice', "SELECT retries.call('alice.pay(int)', '[1]')");
{
	call_reaches($node, 'postgres', $f1, 'succeeded',
		'1: alice\'s call runs within 10 s while the query holds every free slot (reserved_workers 2)', 10);
}
# (its runner would have taken the other one: the command has not
# started, it waits for a slot.  Counting m1's reserved workers instead
# once saw two: m1's worker gives its reserved worker back now and then,
# m1 due again a second later, and the one leaving was still there)
is($node->safe_psql('m1', gate_waiters(81)), '0',
	'1: mallory\'s command took one reserved worker, not both');
# b. once mallory's command ends, a reserved worker is free, and alice's
#    call runs in it (the query still runs)
open_gate($gate1);
call_reaches($node, 'postgres', $f1, 'succeeded',
	'b: alice\'s call runs once mallory\'s command ends (a reserved worker is free again)');

# ---------------------------------------------------------------------
# 7. the query still holding every other slot: postgres's worker, in a
#    reserved worker, idle for a second, gives it back, and keeps the
#    database from the reserved workers for 10 s
# ---------------------------------------------------------------------
wait_until($node, 'postgres',
	"SELECT count(*) FROM pg_stat_activity WHERE backend_type LIKE 'retries%' AND datname = 'postgres'",
	'0', '7: setup: postgres\'s worker gave its reserved worker back, idle');
my $f7 = as_role($node, 'postgres', 'alice', "SELECT retries.call('alice.pay(int)', '[7]')");
{
	call_reaches($node, 'postgres', $f7, 'succeeded',
		'7: alice\'s next call runs within 5 s, both reserved workers free', 5);
}
# h. it runs after the back-off
call_reaches($node, 'postgres', $f7, 'succeeded', 'h: alice\'s call runs after the back-off');

# ---------------------------------------------------------------------
# 6. the query still holding every other slot: postgres's only worker, in
#    a reserved worker, held by mallory's call; the other reserved worker
#    is free, yet alice's call gets no extra
# ---------------------------------------------------------------------
as_role($node, 'postgres', 'mallory', q{
CREATE FUNCTION mallory.held6() RETURNS boolean LANGUAGE sql AS $$ SELECT } . gate_sql(86) . q{ $$;
SELECT retries.annotate('mallory.held6()', '1 10ms');
});
my $gate6 = close_gate($node, 'postgres', 86);
as_role($node, 'postgres', 'mallory', "SELECT retries.call('mallory.held6()')");
wait_at_gate($node, 'postgres', 86, 1, '6: setup: mallory\'s call holds postgres\'s worker');
wait_until($node, 'postgres',
	"SELECT count(*) FILTER (WHERE backend_type = 'retries reserve') = 1"
	  . " AND count(*) FILTER (WHERE backend_type <> 'retries reserve') = 0"
	  . " FROM pg_stat_activity WHERE backend_type LIKE 'retries%' AND datname IS NOT NULL",
	't', '6: setup: one reserved worker runs postgres\'s worker, the other is free');
my $f6 = as_role($node, 'postgres', 'alice', "SELECT retries.call('alice.pay(int)', '[6]')");
{
	call_reaches($node, 'postgres', $f6, 'succeeded',
		'6: alice\'s call runs within 10 s in an extra worker, in the free reserved worker', 10);
}
$node->safe_psql('postgres', "SELECT pg_cancel_backend($hog_pid)");
$hog->quit;
# g. once the query ends, alice's call runs
call_reaches($node, 'postgres', $f6, 'succeeded', 'g: alice\'s call runs once the query ends');
open_gate($gate6);

# ---------------------------------------------------------------------
# 2. a schedule's time zone is not checked for the database's encoding:
#    a restore then loses every role's schedules
# ---------------------------------------------------------------------
# bytes not valid in UTF8, as mallory can read them: the text of a query of
# a session of hers in a LATIN1 database, in pg_stat_activity (t/059)
my $latin_session = latin1_bad_name($node, 'mallory');
as_role($node, 'postgres', 'mallory', q{
CREATE FUNCTION mallory.tick() RETURNS void LANGUAGE sql AS 'SELECT 1';
SELECT retries.annotate('mallory.tick()', '1 10ms');
});
as_role($node, 'postgres', 'alice',
	"SELECT retries.schedule('alice_daily', 'alice.pay(int)', '0 3 * * *', '[2]')");
# a POSIX zone whose quoted abbreviation holds byte 0xE9: PostgreSQL's
# pg_tzset() takes any bytes between < and >
my $bad_zone = q{'<' || substr(mallory.bad_name('x'), 2, 4) || '>-5'};
my ($out2, $err2) = try_as($node, 'postgres', 'mallory',
	"SELECT retries.schedule('tz', 'mallory.tick()', '0 0 1 1 *', timezone => $bad_zone)");
my ($out2c, $err2c) = try_as($node, 'postgres', 'mallory',
	"SELECT retries.schedule_command('tzc', 'SELECT 1', '0 0 1 1 *', timezone => $bad_zone)");
my ($out2a, $err2a) = try_as($node, 'postgres', 'mallory',
	"SELECT retries.schedule('tza', 'mallory.tick()', '0 0 1 1 *');"
	  . " SELECT retries.alter_schedule('tza', timezone => $bad_zone)");
my $bad_rows = "SELECT count(*) FROM retries.schedule_data"
  . " WHERE position('\\xe9'::bytea in textsend(timezone)) > 0";
{
	ok((!defined $out2 && $err2 =~ /ERROR:  22021/)
		  && (!defined $out2c && $err2c =~ /ERROR:  22021/)
		  && (!defined $out2a && $err2a =~ /ERROR:  22021/),
		'2: schedule, schedule_command and alter_schedule refuse a time zone not valid in UTF8 (22021)')
	  or diag("schedule: " . ($out2 // $err2) . "\nschedule_command: " . ($out2c // $err2c)
		  . "\nalter_schedule: " . ($out2a // $err2a));
	is($node->safe_psql('postgres', $bad_rows), '0',
		'2: no schedule_data row holds a time zone not valid in UTF8');
}
my $tmp = PostgreSQL::Test::Utils::tempdir;
$node->run_log([ 'pg_dump', '-Fc', '-f', "$tmp/postgres.dump", $node->connstr('postgres') ]);
$node->safe_psql('postgres', 'CREATE DATABASE restored');
$node->run_log([ 'pg_restore', '-d', $node->connstr('restored'), "$tmp/postgres.dump" ]);
{
	is($node->safe_psql('restored',
			"SELECT count(*) FROM retries.schedule_data WHERE name = 'alice_daily'"),
		'1', '2: the restore of postgres keeps alice\'s schedule');
}
# c. the rest of the dump loads: alice's calls are there
is($node->safe_psql('restored',
		"SELECT count(*) > 0 FROM retries.call_data WHERE scheduled_by = 'alice'::regrole"),
	't', 'c: the restore keeps alice\'s calls');
$node->safe_psql('postgres', 'DROP DATABASE restored WITH (FORCE)');
$latin_session->quit;

# ---------------------------------------------------------------------
# 3. a restored '@reboot' schedule that has not fired since the server
#    started never fires: the database's memo says armed
# ---------------------------------------------------------------------
$node->safe_psql('postgres', 'CREATE DATABASE rb');
$node->safe_psql('rb', 'CREATE EXTENSION retries; CREATE SCHEMA alice AUTHORIZATION alice;');
as_role($node, 'rb', 'alice', q{
CREATE TABLE alice.t (n int);
CREATE FUNCTION alice.pay(n int) RETURNS void LANGUAGE sql AS 'INSERT INTO alice.t VALUES (n)';
SELECT retries.annotate('alice.pay(int)', '3 10ms');
SELECT retries.schedule('boot', 'alice.pay(int)', '@reboot', '[9]');
});
$node->run_log([ 'pg_dump', '-Fc', '-f', "$tmp/rb.dump", $node->connstr('rb') ]);
# the dump's schedule was made before this start, and had not fired; at the
# start it fires in rb, whose memo then says armed
$node->restart;
wait_until($node, 'rb', 'SELECT count(*) FROM alice.t WHERE n = 9', '1',
	'3: setup: alice\'s @reboot schedule fires once after the start');
# the dump restored over rb (pg_restore --clean: DROP EXTENSION, then a
# new one, with the dump's rows)
$node->run_log([ 'pg_restore', '--clean', '--if-exists', '-d', $node->connstr('rb'), "$tmp/rb.dump" ]);
# (a worker of rb may already serve the new extension and fire it: the
# check below then holds at once; what must not happen is that it never
# fires, or fires twice)
is($node->safe_psql('rb',
		"SELECT count(*) FROM retries.schedule_data WHERE every = '\@reboot'"
		  . " AND created_at < pg_postmaster_start_time() AND NOT paused"),
	'1', '3: setup: the restored schedule was made before the start');
# a worker that starts after the restore, as the next visit of rb
wait_until($node, 'postgres',
	"SELECT count(*) FROM pg_stat_activity WHERE datname = 'rb' AND backend_type LIKE 'retries%'",
	'0', '3: setup: no worker of rb is left from before the restore');
my $f3 = as_role($node, 'rb', 'alice', "SELECT retries.call('alice.pay(int)', '[3]')");
call_reaches($node, 'rb', $f3, 'succeeded', 'd: a new worker of rb runs alice\'s call');
{
	wait_until($node, 'rb', 'SELECT count(*) FROM alice.t WHERE n = 9', '1',
		'3: the restored @reboot schedule fires once a new worker of rb serves (within 10 s)', 10);
}

# ---------------------------------------------------------------------
# 4. a database whose only worker is held, and which wants its second
#    while the pool is full, never counts as waiting: the pool's turns
#    never begin, and another database's stream of short calls keeps it
# ---------------------------------------------------------------------
# a pool of one first: mallory's long call in postgres takes it
$node->safe_psql('postgres',
	'ALTER SYSTEM SET retries.max_cluster_workers = 1; SELECT pg_reload_conf()');
wait_until($node, 'postgres', 'SHOW retries.max_cluster_workers', '1',
	'4: setup: a pool of one');
as_role($node, 'postgres', 'mallory', 'CREATE DATABASE m2 TEMPLATE tpl');
as_role($node, 'm2', 'mallory', q{
CREATE SCHEMA mallory;
-- not a wait: each call of her stream lasts 10 ms
CREATE FUNCTION mallory.quick(n int) RETURNS void LANGUAGE sql AS 'SELECT pg_sleep(0.01)';
SELECT retries.annotate('mallory.quick(int)', '1 10ms');
});
as_role($node, 'postgres', 'mallory', q{
CREATE FUNCTION mallory.held() RETURNS boolean LANGUAGE sql AS $$ SELECT } . gate_sql(91) . q{ $$;
SELECT retries.annotate('mallory.held()', '1 10ms');
});
wait_until($node, 'postgres',
	"SELECT count(*) FROM pg_stat_activity WHERE backend_type LIKE 'retries%worker'",
	'0', '4: setup: no worker is left in any database');
my $gate4 = close_gate($node, 'postgres', 91);
# mallory's long call holds the only worker of postgres (alice's database),
# which then wants its second (note_all_busy)
as_role($node, 'postgres', 'mallory', "SELECT retries.call('mallory.held()')");
wait_at_gate($node, 'postgres', 91, 1, '4: setup: mallory\'s call holds postgres\'s worker');
# her stream of short calls in m2, which waits for the pool, then takes
# its second place
$node->safe_psql('m2', q{SET ROLE mallory;
SELECT count(retries.call('mallory.quick(int)', jsonb_build_array(i))) FROM generate_series(1, 5000) i});
$node->safe_psql('postgres',
	'ALTER SYSTEM SET retries.max_cluster_workers = 2; SELECT pg_reload_conf()');
wait_until($node, 'postgres',
	"SELECT count(*) FROM pg_stat_activity WHERE backend_type LIKE 'retries%worker'"
	  . " AND datname IN ('postgres', 'm2') HAVING count(DISTINCT datname) = 2",
	'2', '4: setup: the pool of two holds a worker of postgres and one of m2');
my $f4 = as_role($node, 'postgres', 'alice', "SELECT retries.call('alice.pay(int)', '[4]')");
{
	call_reaches($node, 'postgres', $f4, 'succeeded',
		'4: alice\'s call runs within 10 s (m2\'s worker leaves after a second of work for a database that waits)', 10);
}
# e. once mallory's stream is paused, m2's worker leaves and alice's call runs
as_role($node, 'm2', 'mallory', "SELECT retries.pause('mallory.quick(int)')");
call_reaches($node, 'postgres', $f4, 'succeeded', 'e: alice\'s call runs once m2\'s stream ends');
open_gate($gate4);
$node->safe_psql('postgres',
	'ALTER SYSTEM RESET retries.max_cluster_workers; SELECT pg_reload_conf()');
as_role($node, 'postgres', 'mallory', 'DROP DATABASE m2 WITH (FORCE)');

# ---------------------------------------------------------------------
# 5. after a moment of contention, a database whose only worker is held
#    gets no worker for a new call, contended or not
# ---------------------------------------------------------------------
as_role($node, 'postgres', 'mallory', 'CREATE DATABASE m3 TEMPLATE tpl');
as_role($node, 'm3', 'mallory', q{
CREATE SCHEMA mallory;
CREATE FUNCTION mallory.once(n int) RETURNS void LANGUAGE sql AS 'SELECT 1';
SELECT retries.annotate('mallory.once(int)', '1 10ms');
});
as_role($node, 'postgres', 'mallory', q{
CREATE FUNCTION mallory.held5() RETURNS boolean LANGUAGE sql AS $$ SELECT } . gate_sql(95) . q{ $$;
SELECT retries.annotate('mallory.held5()', '1 10ms');
});
wait_until($node, 'postgres',
	"SELECT count(*) FROM pg_stat_activity WHERE backend_type LIKE 'retries%worker'",
	'0', '5: setup: no worker is left in any database');
$node->safe_psql('postgres',
	'ALTER SYSTEM SET retries.max_cluster_workers = 2; SELECT pg_reload_conf()');
wait_until($node, 'postgres', 'SHOW retries.max_cluster_workers', '2',
	'5: setup: a pool of two');
my $gate5 = close_gate($node, 'postgres', 95);
# mallory's long call holds a worker of postgres; its second starts, idle
as_role($node, 'postgres', 'mallory', "SELECT retries.call('mallory.held5()')");
wait_at_gate($node, 'postgres', 95, 1, '5: setup: mallory\'s call holds a worker of postgres');
wait_until($node, 'postgres', workers_query('postgres'), '2',
	'5: setup: postgres has its second worker, idle');
# a moment of contention: m3 waits for the pool, postgres's idle worker
# leaves for it (as documented), m3's call runs
my $m3 = as_role($node, 'm3', 'mallory', "SELECT retries.call('mallory.once(int)', '[1]')");
call_reaches($node, 'm3', $m3, 'succeeded', '5: setup: m3\'s call runs in the place postgres\'s idle worker left');
# the pool back to sixteen: nothing waits for it any more
$node->safe_psql('postgres',
	'ALTER SYSTEM RESET retries.max_cluster_workers; SELECT pg_reload_conf()');
wait_until($node, 'postgres', 'SHOW retries.max_cluster_workers', '16',
	'5: setup: the pool back to sixteen');
is($node->safe_psql('postgres', workers_query('postgres')), '1',
	'5: setup: postgres has one worker, held by mallory\'s call');
my $f5 = as_role($node, 'postgres', 'alice', "SELECT retries.call('alice.pay(int)', '[5]')");
{
	call_reaches($node, 'postgres', $f5, 'succeeded',
		'5: alice\'s call runs within 10 s, the pool not contended (a second worker or an extra)', 10);
}
# f. once mallory's call ends, alice's runs
open_gate($gate5);
call_reaches($node, 'postgres', $f5, 'succeeded', 'f: alice\'s call runs once mallory\'s call ends');

# ---------------------------------------------------------------------
# 8. a worker that only fires schedules grows past
#    retries.max_worker_memory: one time zone cached per schedule
# ---------------------------------------------------------------------
$node->safe_psql('postgres',
	"ALTER SYSTEM SET retries.max_worker_memory = '32MB'; SELECT pg_reload_conf()");
wait_until($node, 'postgres', 'SHOW retries.max_worker_memory', '32MB',
	'8: setup: retries.max_worker_memory 32MB');
# 4,000 schedules of a paused function of hers, every second, each in a
# time zone of its own (about 24 kB each in pg_tzset's cache): their
# firings make held calls, and no batch runs
as_role($node, 'postgres', 'mallory', q{
CREATE FUNCTION mallory.tz_t() RETURNS void LANGUAGE sql AS 'SELECT 1';
SELECT retries.annotate('mallory.tz_t()', '1 10ms');
SELECT retries.pause('mallory.tz_t()');
SELECT count(retries.schedule('iv' || i, 'mallory.tz_t()', '1 second',
                              timezone => '<B' || i || '>-5'))
  FROM generate_series(1, 4000) i;
});
# the most private memory of a worker of postgres (kB), sampled for up to
# 30 s, stopping at the first over twice the setting
my $most = 0;
my $until8 = time() + 30;
while (time() < $until8 && $most <= 65536)
{
	my $pids = $node->safe_psql('postgres',
		"SELECT string_agg(pid::text, ' ') FROM pg_stat_activity"
		  . " WHERE backend_type LIKE 'retries%worker' AND datname = 'postgres'");
	for my $pid (split / /, $pids)
	{
		open(my $fh, '<', "/proc/$pid/smaps_rollup") or next;
		while (<$fh>)
		{
			$most = $1 if /^Private_Dirty:\s+(\d+) kB/ && $1 > $most;
		}
		close $fh;
	}
	usleep(200_000);    # poll
}
wait_until($node, 'postgres',
	"SELECT count(*) >= 4000 FROM retries.call_data WHERE scheduled_by = 'mallory'::regrole"
	  . " AND held", 't', '8: setup: the schedules fired, their calls held');
{
	cmp_ok($most, '<=', 65536,
		'8: no worker of postgres grows past twice retries.max_worker_memory (kB of private memory)');
}
as_role($node, 'postgres', 'mallory',
	"SELECT count(retries.unschedule('iv' || i)) FROM generate_series(1, 4000) i");
$node->safe_psql('postgres',
	'ALTER SYSTEM RESET retries.max_worker_memory; SELECT pg_reload_conf()');

# ---------------------------------------------------------------------
# z. no crash
# ---------------------------------------------------------------------
no_crash($node, $log_offset, 'z: no crash in the server log');

$node->stop;
done_testing();
