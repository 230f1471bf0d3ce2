# Twenty-ninth hostile review (rv29, of eed85bf: rv27's and rv28c's fixes
# -- leave_reserve and next_visit, the first-slice rule of leave_when_idle,
# the due_at of a database whose every worker is held, reserve_role by
# holder_role, head_after_priorities, the cached version probe -- and
# issue 42's older promises), by a reviewer who did not write the code,
# one hour.  alice is the victim; mallory an ordinary role (CREATEDB, as
# pool_review_node gives her); bob, in check 2 only, a second ordinary
# role that works with her.  The node runs the DEFAULTS of the pool
# (worker_idle_timeout 10 s, max_cluster_workers 16, max_workers 2,
# max_extra_workers 2) with retries.reserved_workers 2 and
# max_worker_processes 48.  Each numbered check fails on the code reviewed
# (inside a TODO block named "finding N" while it is open; every finding
# but 2 is fixed since, and its checks plain; 2 is a limit kept); the lettered ones held.  The
# checks run in the order e, f, g, h, i, 4, 5, 6, 7, j, 1, b, 2, c, 3, d,
# 8, k, z (about a minute and a half; 99 s on the loaded machine).
#
# Findings:
#   5. (HIGH; any role, no privilege: a PL/pgSQL function of the victim's
#      that names a type unqualified, as `DECLARE v text` does) the
#      workers' PL/pgSQL cache outlives the sandbox.  PL/pgSQL compiles a
#      function once per process and keeps it, with the types of its
#      variables resolved by the search_path in force at that first
#      compilation; a worker runs the calls of every role in one process.
#      mallory sets her search_path to 'mallory, pg_catalog' (ALTER ROLE
#      mallory SET, which the sandbox applies to her attempts; or
#      set_config() in her own function: the compilation happens before the
#      sandbox rolls it back), makes mallory.text, a domain over
#      pg_catalog.text whose CHECK is her function, and has alice's PL/pgSQL
#      function alice.pt(int) (`DECLARE v text`) compiled in the workers:
#      by calls of it (they fail, she may not write alice.t), or by any
#      call of her own function that calls it.  alice's own later calls of
#      her own function in those workers reuse the compiled function: v is
#      mallory.text (the result pg_typeof(v) says "mallory.text"), and
#      every assignment runs mallory's check AS ALICE (current_user
#      alice; here it writes mallory.log).  The same with a superuser's
#      calls of a superuser's PL/pgSQL function that PUBLIC may execute:
#      mallory's check runs ALTER ROLE mallory SUPERUSER, and she is one.
#      No batch or containment rule helps: mallory's calls and alice's
#      never share a batch, only the process.  Against architecture.md
#      "Trust" (what another role chose never runs with the caller's
#      rights) and sandbox.c ("nothing it does outlives its attempt or
#      runs later as the worker or as another call"); DISCARD ALL does not
#      reset it either, and the docs name only C extensions' memory as not
#      covered.  By hand also with a domain alice.acct / mallory.acct
#      under the default search_path ("$user" is mallory in her calls),
#      no ALTER ROLE needed; with set_config() in mallory's own function
#      that then calls alice's; and through alice's PL/pgSQL TRIGGER
#      function on a table mallory may insert into (her inserts compile
#      it; alice's calls that insert there then run mallory's check).
#      Check 5 (postgres at one worker, by a reload, so that mallory's
#      calls and alice's meet in one process every time; with two they
#      do most of the time): alice's calls never run mallory's
#      check, their variable is never mallory.text, and mallory does not
#      become a superuser.  A fix must make a role's compiled PL/pgSQL
#      functions (and triggers) invisible to another role's attempts: a
#      worker process per role (exit when the next batch's role differs,
#      or a runner per role), or compile under a search_path that does not
#      depend on the role (not possible for the function's own SET-less
#      body); a function with `SET search_path` is immune.
#   1. (Medium; a parallel query, CREATEDB or CONNECT to two databases with
#      the extension) rv25's fix of t/059 3 (a worker in a reserved worker
#      claims no call of a role whose calls run in another) counts only
#      batches RUNNING at that instant (reserve_role: w->state ==
#      WORKER_RUNNING), and a database's own worker gives its reserved
#      worker back only after a second with nothing run (leave_reserve:
#      idle is "ran nothing for RETRIES_HELD_AFTER_MS").  mallory's stream
#      of short calls in m1 and in m2 (a function that calls itself again
#      200 ms on) keeps each worker busy a few ms at a time: both reserved
#      workers are hers for as long as her parallel query runs, and
#      alice's call in postgres (whose workers left idle) gets no worker:
#      not done within 10 s (by hand: past 20 s, until mallory's stream
#      stopped).  By hand the two reserved workers kept their PIDs for
#      good: they never leave.  leave_reserve, after a round with nothing
#      to run, stays while work is due within a second (`!idle && due_at
#      <= now + STAY_FOR_DUE_MS`) whatever waits and however long it has
#      served: rv27's fix of t/061 2 (stay for work due in a moment only in
#      the first POOL_SLICE_MS) is in leave_when_idle only.  And
#      leave_for_others, after a round that ran calls, does not free them
#      either, although postgres, which found no slot, waits "as for the
#      pool" (manage_database sets waiting_since): likely leave_database's
#      refusal while my_slot->woken, which each batch of the stream sets
#      by committing its next call (not verified).  By hand the same
#      streams under a full pool, in ordinary slots, let alice's call run
#      within 2 s (leave_when_idle leaves at once while contended).  Against reference.md retries.max_cluster_workers ("A
#      database whose work finds the pool full, or no background-worker
#      slot free, waits for a worker ... while any waits, a worker leaves
#      its database as soon as it is idle, or after a second of work") and
#      retries.reserved_workers ("so that one role's calls in many
#      databases do not take them all").  Check b: alice's call runs once
#      mallory's streams end.
#   2. (Medium; two ordinary roles) the bound of the extras is two roles,
#      not four.  A batch of another role's code holds neither role
#      (other_holds): busy_roles (base workers) and running_roles (extras)
#      count only batches of a role's own code, and extra_passes_over
#      passes over a batch of foreign code only for the same caller or the
#      same owner.  So mallory's call of bob.held() and bob's call of
#      mallory.held() take the two base workers, and then mallory's call
#      of mallory.held() and bob's of bob.held() the two extras: alice's
#      call is not done within 10 s.  Against reference.md
#      retries.max_extra_workers ("As many roles as there are workers and
#      extra workers, each with a long call, hold them all") and
#      architecture.md "Capacity" ("Roles that together hold every worker
#      and every extra (retries.max_workers + retries.max_extra_workers of
#      them, each with a long call)").  Check c: it runs once theirs end.
#   3. (Medium; CREATEDB, or CONNECT and a function in max_cluster_workers
#      / max_workers databases) the pool holds long calls for as long as
#      they run: a worker in a long call never "leaves after a second of
#      work".  With a pool of four (a reload; with the default 16, eight
#      databases), mallory's two long calls in each of p1 and p2 take the
#      whole pool; postgres's workers leave idle for them, and alice's call
#      in postgres waits for one of mallory's calls to end (up to
#      retries.max_attempt_time, an hour): not done within 10 s.  No extra
#      helps (extras are in the pool; the check turns them off, by a
#      reload, so that p1's idle extra, finding 8, does not take p2's
#      place).  Against reference.md
#      retries.max_cluster_workers ("so that no database keeps the pool
#      from the others"); the bound is not documented.  Check d: it runs
#      once mallory's calls end.
#   7. (Medium; FIXED since: head_after_priorities moves only calls of
#      the role's own code, none whose last attempt was interrupted, before
#      the batch's first call; the check is plain)
#      (any role whose function another role calls; code new
#      since t/061) head_after_priorities undoes the thirteenth
#      review's rule that a call of another role's code never holds the
#      caller's own calls claimed.  claim_batch claims the head (alice's
#      earliest due call, of her own function, so foreign_owner is
#      invalid), then claim_prioritized claims her calls of a higher
#      priority WITHOUT looking at whose code they run, then the reorder
#      puts her call of mallory's function (priority 5) first and makes
#      the batch foreign.  run_batch runs mallory's function first and
#      breaks at alice's own calls, but they were claimed (locked) in
#      this transaction all along: the other worker skips them.  So
#      alice's own calls of priorities 0 and 3, made with it, wait for the
#      whole of mallory's function (by hand: pg_sleep(8) held them 8 s;
#      a function that traps its cancel held them through two worker
#      exits, 6.5 s, the second because the retried lone call is
#      reordered first again; up to retries.max_attempt_time otherwise).
#      Against architecture.md "Capacity" ("alice's call of mallory's slow
#      function does not hold alice's next call back", t/031 1) and
#      run_batch's own comment.  Here alice's own calls are not done within
#      10 s while mallory's function waits at a gate (postgres has one
#      worker, by a reload: with two, a second worker sometimes claims
#      mallory's call first as a batch of its own, and the race hides it).  Check j: they run,
#      once each, when it returns.  A fix: claim_prioritized for an own
#      head should leave out calls of another role's code (claim them in a
#      batch of their own), or reorder before claiming the rest.
#   8. (Medium; CREATEDB, or CONNECT and a function in a database with
#      the extension) an IDLE extra worker keeps its place in the pool
#      while other databases wait for one.  An extra leaves only when its
#      database no longer wants extras or, in a reserved worker, after a
#      second idle (worker.c main loop: extra_wanted, idle_in_reserve);
#      may_leave() and leave_when_idle() leave extras out, so "while any
#      waits, a worker leaves its database as soon as it is idle" does not
#      hold for them.  mallory's two long calls in p1 hold its workers; p1
#      starts an extra, which finds nothing it may run (mallory's calls
#      are all there is) and stays idle for as long as they run.  With a
#      pool of three (a reload), alice's call in postgres is not done
#      within 10 s.  It also lowers what finding 3 costs: two long calls
#      and an idle extra (the next extra starts only once every extra is
#      held) take three places per database, so six databases fill the
#      default pool of 16, not eight.  Found when check 3 raced with p1's extra (p2 got
#      one worker, not two: the extra had the fourth place, idle, for
#      minutes).  Check k: alice's call runs once mallory's calls end.
#   4. (Low) unschedule, pause_schedule, resume_schedule and trigger, in
#      both forms (name and id), are STRICT: a NULL name or id does
#      nothing and returns NULL, where reference.md says "Every function
#      refuses NULL for a required argument with 22004" (as cancel, pause,
#      result and call do).  A script that unschedules by a name it looked
#      up and got NULL is told nothing.
#   6. (Low; any role whose function another role calls) the seed of
#      random() that another role's code sets outlives its attempt.  The
#      sandbox reseeds only when the CALLS' role changes (sandbox_enter:
#      role != last_role), not when whose code ran does: alice's call of
#      mallory.seeder() (SECURITY INVOKER, so running as alice) does
#      setseed(0.5), and alice's next call of her own alice.rnd() in that
#      worker returns the first random() after setseed(0.5) (by hand: 3 of
#      4 times, the fourth went to the other worker).  An earlier fix
#      for a cast of mallory's with SET seed (sandbox.c: "a cast of
#      mallory's with SET seed fixed the caller's random()") is the same
#      hole through a function; each attempt is to be "a fresh login
#      session", and a fresh session's seed is no one's choice.  Check 6.
#      A fix: reseed when the holder (whose code ran) was not the role, or
#      simply before every attempt.
#
# Held (lettered checks, and by hand):
#   e. bounded and precise inputs: a policy of 2 MB, a retry_on of a
#      million elements, a rate of a million digits, a zone of 1 MB and a
#      POSIX zone of 100 kB, an 'every' of 100 kB, a catch_up of a million
#      years, a limit_key of 1 MB, negative event_timeout and key_window,
#      run_at 'infinity' in call and reschedule: each 22023.
#   f. a domain of alice's over mallory's domain with a check: the call is
#      refused (42501); a domain of mallory's (in an array domain, in a
#      composite of alice's) that gets its check after alice scheduled the
#      call: the attempt fails 42501; mallory's check never ran.
#   g. mallory's on_exhausted hook, run for alice's call of mallory's
#      function, runs as mallory (session_user too); retries.result of the
#      call, cancel and retry_now of another call of alice's, a call made
#      after it: 42704 each; retries.calls shows it nothing of alice's.
#   h. mallory's cast to json of her enum, met in alice's results (the
#      value, an array, a field of alice's composite): never run, the text
#      form stands for it.  (Composites never consult a cast, as in
#      to_jsonb.)
#   i. mallory cannot trigger, pause, unschedule or alter alice's schedule
#      by id or by name (42704).
#   By hand (not in this file): retries.policies hides a function of
#   alice's whose EXECUTE she revoked from PUBLIC; retries.stats shows
#   mallory only her own calls' counts; head_after_priorities: no call of
#   alice's own ran twice when mallory's function at the head trapped its
#   cancel (the batch breaks before them; but see 7); the cached version probe:
#   invalidated by any relcache, namespace or function change, also at an
#   abort (no ordinary role can change schema retries); run_at
#   '-infinity' is clamped to now; node_op, resolve_function,
#   function_signature, format_policy, next_runs (infinite and year-294276
#   starts, n = 2^31-1) with NULLs and extremes: errors or NULL, no crash;
#   CALL retries.command() directly: "runs nothing itself"; in a database
#   at 1.4, ALTER EXTENSION UPDATE and DROP/CREATE EXTENSION at 1.5 inside
#   transactions, rolled back or committed, with calls and run_command
#   between: the cached version follows every step; the database owner's
#   COPY into call_data where rows exist is refused (55000) and her INSERT
#   (42501); JSON arguments nested 3000 deep for int[], text[] and jsonb[]:
#   a clean 22023 (over 6 dimensions) or success, no crash.

use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RetriesTest;
use Test::More;
use Time::HiRes qw(usleep time);

# the defaults of the pool; two reserved workers; tpl, a template with the
# extension; mallory with CREATEDB
my $node = pool_review_node('review_26');
my $log_offset = -s $node->logfile;

as_role($node, 'postgres', 'mallory', q{
CREATE TABLE mallory.big AS SELECT g AS id FROM generate_series(1, 100000) g;
ALTER TABLE mallory.big SET (parallel_workers = 64);
CREATE FUNCTION mallory.slow(id int) RETURNS boolean LANGUAGE sql PARALLEL SAFE
	AS $$ SELECT pg_sleep(1) IS NULL $$;  -- not a wait: the test cancels it
CREATE TABLE mallory.log (who text, what text);
GRANT INSERT ON mallory.log TO PUBLIC;
CREATE FUNCTION mallory.spy(x int) RETURNS boolean LANGUAGE sql
	AS $$ INSERT INTO mallory.log VALUES (current_user, 'domain check'); SELECT true $$;
});

# ---------------------------------------------------------------------
# e. bounded and precise: over-long and out-of-range inputs are refused
#    with 22023 (policies, rates, retry_on, zones, cron texts, limit keys,
#    intervals, infinite times)
# ---------------------------------------------------------------------
as_role($node, 'postgres', 'mallory', q{
CREATE FUNCTION mallory.f(x int) RETURNS int LANGUAGE sql AS 'SELECT x';
SELECT retries.annotate('mallory.f(int)', '1 10ms');
});
{
	my $later = as_role($node, 'postgres', 'mallory',
		"SELECT retries.call('mallory.f(int)', '[1]', run_at => now() + interval '1 hour')");
	my @cases = (
		"SELECT retries.annotate('mallory.f(int)', repeat('1 ', 1000000) || '10ms')",
		"SELECT retries.annotate('mallory.f(int)', '1 10ms', retry_on => array_fill('RT'::text, ARRAY[1000000]))",
		"SELECT retries.annotate('mallory.f(int)', '1 10ms', rate => repeat('1', 1000000) || '/1s')",
		"SELECT retries.schedule('s', 'mallory.f(int)', '1 hour', '[1]', timezone => repeat('A', 1000000))",
		"SELECT retries.schedule('s', 'mallory.f(int)', '1 hour', '[1]', timezone => '<' || repeat('A', 100000) || '>5')",
		"SELECT retries.schedule('s', 'mallory.f(int)', repeat('1', 100000) || ' hour', '[1]')",
		"SELECT retries.schedule('s', 'mallory.f(int)', '1 hour', '[1]', catch_up => interval '1000000 years')",
		"SELECT retries.call('mallory.f(int)', '[1]', limit_key => repeat('k', 1000000))",
		"SELECT retries.call('mallory.f(int)', '[1]', on_event => 'e', event_timeout => interval '-1 day')",
		"SELECT retries.call('mallory.f(int)', '[1]', key => 'k', key_window => interval '-1 day')",
		"SELECT retries.call('mallory.f(int)', '[1]', run_at => 'infinity')",
		"SELECT retries.reschedule($later, 'infinity')",
	);
	for my $c (@cases)
	{
		my ($out, $err) = try_as($node, 'postgres', 'mallory', $c);
		ok(!defined $out && $err =~ /ERROR:  22023/, 'e: 22023 for ' . substr($c, 7, 60))
		  or diag($err);
	}
	as_role($node, 'postgres', 'mallory', "SELECT retries.cancel($later)");
}

# ---------------------------------------------------------------------
# f. a domain of alice's over mallory's domain with checks, and a domain
#    of mallory's that gets its check after alice scheduled the call (in
#    an array, in a composite): mallory's check never runs as alice
# ---------------------------------------------------------------------
as_role($node, 'postgres', 'mallory', q{
CREATE DOMAIN mallory.d AS int CHECK (mallory.spy(VALUE));
CREATE DOMAIN mallory.d0 AS int;
});
as_role($node, 'postgres', 'alice', q{
CREATE DOMAIN alice.d2 AS mallory.d CHECK (VALUE > 0);
CREATE FUNCTION alice.f2(x alice.d2) RETURNS int LANGUAGE sql AS 'SELECT 1';
SELECT retries.annotate('alice.f2(alice.d2)', '1 10ms');
CREATE DOMAIN alice.d4 AS mallory.d0[];
CREATE TYPE alice.c AS (a alice.d4, b int);
CREATE FUNCTION alice.f4(x alice.c) RETURNS int LANGUAGE sql AS 'SELECT 1';
SELECT retries.annotate('alice.f4(alice.c)', '1 10ms');
});
{
	my ($out, $err) = try_as($node, 'postgres', 'alice',
		"SELECT retries.call('alice.f2(alice.d2)', '[5]')");
	ok(!defined $out && $err =~ /ERROR:  42501/,
		'f: a call whose argument is of a domain over mallory\'s checked domain is refused (42501)')
	  or diag($err);
	my $ff = as_role($node, 'postgres', 'alice',
		"SELECT retries.call('alice.f4(alice.c)', '[\"(\\\"{1,2}\\\",3)\"]', run_at => now() + interval '2 s')");
	as_role($node, 'postgres', 'mallory',
		'ALTER DOMAIN mallory.d0 ADD CONSTRAINT c CHECK (mallory.spy(VALUE))');
	call_reaches($node, 'postgres', $ff, 'failed',
		'f: the call fails at its attempt once mallory\'s domain has a check');
	is($node->safe_psql('postgres', "SELECT last_sqlstate FROM retries.call_data WHERE id = $ff"),
		'42501', 'f: with 42501');
	is($node->safe_psql('postgres', 'SELECT count(*) FROM mallory.log'), '0',
		'f: mallory\'s check never ran');
}

# ---------------------------------------------------------------------
# g. mallory's on_exhausted hook, run for alice's call of mallory's
#    function, runs as mallory and reaches nothing of alice's: the call's
#    result, another call of alice's (cancel, retry_now), the views, a
#    call made after it
# ---------------------------------------------------------------------
{
	my $victim = as_role($node, 'postgres', 'alice',
		"SELECT retries.call('alice.pay(int)', '[77]', run_at => now() + interval '1 hour')");
	as_role($node, 'postgres', 'mallory', qq{
CREATE FUNCTION mallory.fail() RETURNS int LANGUAGE plpgsql AS \$\$ BEGIN RAISE EXCEPTION 'boom'; END \$\$;
CREATE FUNCTION mallory.hook(cid bigint) RETURNS void LANGUAGE plpgsql AS \$f\$
DECLARE r text;
BEGIN
  INSERT INTO mallory.log VALUES (current_user || '/' || session_user, 'hook');
  BEGIN r := retries.result(cid)::text; INSERT INTO mallory.log VALUES ('leak', 'result'); EXCEPTION WHEN others THEN INSERT INTO mallory.log VALUES ('held', SQLSTATE); END;
  BEGIN PERFORM retries.cancel($victim); INSERT INTO mallory.log VALUES ('leak', 'cancel'); EXCEPTION WHEN others THEN INSERT INTO mallory.log VALUES ('held', SQLSTATE); END;
  BEGIN PERFORM retries.retry_now($victim); INSERT INTO mallory.log VALUES ('leak', 'retry_now'); EXCEPTION WHEN others THEN INSERT INTO mallory.log VALUES ('held', SQLSTATE); END;
  BEGIN PERFORM retries.call('mallory.f(int)', '[1]', after => ARRAY[cid]); INSERT INTO mallory.log VALUES ('leak', 'after'); EXCEPTION WHEN others THEN INSERT INTO mallory.log VALUES ('held', SQLSTATE); END;
  INSERT INTO mallory.log SELECT 'leak', 'calls' FROM retries.calls WHERE scheduled_by <> 'mallory'::regrole LIMIT 1;
END \$f\$;
SELECT retries.annotate('mallory.fail()', '1 10ms', on_exhausted => 'mallory.hook(bigint)');
});
	my $fg = as_role($node, 'postgres', 'alice', "SELECT retries.call('mallory.fail()')");
	call_reaches($node, 'postgres', $fg, 'failed', 'g: setup: alice\'s call of mallory.fail() fails');
	wait_until($node, 'postgres', "SELECT count(*) FROM mallory.log WHERE what = 'hook'", '1',
		'g: setup: the hook ran');
	is($node->safe_psql('postgres',
		"SELECT string_agg(who || ':' || what, ',' ORDER BY who, what) FROM mallory.log WHERE what <> 'domain check'"),
		'held:42704,held:42704,held:42704,held:42704,mallory/mallory:hook',
		'g: the hook ran as mallory (session_user too) and reached none of alice\'s calls');
	is($node->safe_psql('postgres', "SELECT state FROM retries.call_data WHERE id = $victim"),
		'scheduled', 'g: alice\'s other call is untouched');
	as_role($node, 'postgres', 'alice', "SELECT retries.cancel($victim)");
}

# ---------------------------------------------------------------------
# h. mallory's cast to json of her enum type, met in alice's results (the
#    value, an array of it, a field of alice's composite), never runs
# ---------------------------------------------------------------------
as_role($node, 'postgres', 'mallory', q{
CREATE TYPE mallory.e AS ENUM ('x', 'y');
CREATE FUNCTION mallory.ejson(mallory.e) RETURNS json LANGUAGE plpgsql
	AS $$ BEGIN INSERT INTO mallory.log VALUES (current_user, 'cast'); RETURN '"pwned"'::json; END $$;
CREATE CAST (mallory.e AS json) WITH FUNCTION mallory.ejson(mallory.e);
});
as_role($node, 'postgres', 'alice', q{
CREATE TYPE alice.w2 AS (x mallory.e, y int);
CREATE FUNCTION alice.e1() RETURNS mallory.e LANGUAGE sql AS $$ SELECT 'x'::mallory.e $$;
CREATE FUNCTION alice.e2() RETURNS mallory.e[] LANGUAGE sql AS $$ SELECT ARRAY['x'::mallory.e] $$;
CREATE FUNCTION alice.e3() RETURNS alice.w2 LANGUAGE sql AS $$ SELECT ROW('y'::mallory.e, 2)::alice.w2 $$;
SELECT retries.annotate('alice.e1()', '1 10ms');
SELECT retries.annotate('alice.e2()', '1 10ms');
SELECT retries.annotate('alice.e3()', '1 10ms');
});
{
	my @ids = split /\|/, as_role($node, 'postgres', 'alice',
		"SELECT retries.call('alice.e1()'), retries.call('alice.e2()'), retries.call('alice.e3()')");
	call_reaches($node, 'postgres', $_, 'succeeded', "h: setup: alice's call $_ succeeds") for @ids;
	is($node->safe_psql('postgres',
		"SELECT string_agg(result::text, ' ' ORDER BY id) FROM retries.call_data WHERE id IN ("
		  . join(',', @ids) . ')'),
		'"x" ["x"] {"x": "y", "y": 2}', 'h: the results hold the text forms');
	is($node->safe_psql('postgres', "SELECT count(*) FROM mallory.log WHERE what = 'cast'"), '0',
		'h: mallory\'s cast never ran');
}

# ---------------------------------------------------------------------
# i. mallory manages none of alice's schedules, by id or by name
# ---------------------------------------------------------------------
{
	my $sid = as_role($node, 'postgres', 'alice',
		"SELECT retries.schedule('as1', 'alice.pay(int)', '1 day', '[5]')");
	for my $c ("retries.trigger($sid)", "retries.pause_schedule($sid)",
		"retries.unschedule($sid)", "retries.trigger('as1')",
		"retries.alter_schedule('as1', '1 second')")
	{
		my ($out, $err) = try_as($node, 'postgres', 'mallory', "SELECT $c");
		ok(!defined $out && $err =~ /ERROR:  42704/, "i: 42704 for mallory's $c") or diag($err);
	}
	is($node->safe_psql('postgres', "SELECT paused::text || firings FROM retries.schedules WHERE id = $sid"),
		'false0', 'i: alice\'s schedule is untouched');
	as_role($node, 'postgres', 'alice', "SELECT retries.unschedule('as1')");
}

# ---------------------------------------------------------------------
# 4. a NULL name or id given to unschedule, pause_schedule,
#    resume_schedule or trigger does nothing and says nothing (NULL):
#    reference.md, "Every function refuses NULL for a required argument
#    with 22004"
# ---------------------------------------------------------------------
for my $c ('unschedule(NULL::text)', 'unschedule(NULL::bigint)', 'pause_schedule(NULL::text)',
	'resume_schedule(NULL::bigint)', 'trigger(NULL::text)', 'trigger(NULL::bigint)')
{
	my ($out, $err) = try_as($node, 'postgres', 'mallory', "SELECT retries.$c");
	ok(!defined $out && $err =~ /ERROR:  22004/, "4: 22004 for retries.$c") or diag($err);
}

# ---------------------------------------------------------------------
# 5. the worker's PL/pgSQL cache: mallory's calls of alice's PL/pgSQL
#    function compile it in the worker under mallory's settings (her
#    ALTER ROLE ... SET search_path = mallory, pg_catalog), where its
#    variable's type name text is mallory.text, a domain whose check is
#    mallory's code; alice's own later calls of her own function in that
#    worker reuse the compiled function, and mallory's check runs as alice
# ---------------------------------------------------------------------
$node->safe_psql('postgres', 'TRUNCATE mallory.log');
# one worker of postgres (a reload): every call runs in the same process,
# as it does whenever one worker serves a role's calls
$node->safe_psql('postgres', 'ALTER SYSTEM SET retries.max_workers = 1; SELECT pg_reload_conf()');
wait_until($node, 'postgres',
	"SELECT current_setting('retries.max_workers') = '1' AND (" . workers_query('postgres') . ') <= 1',
	't', '5: setup: one worker in postgres');
as_role($node, 'postgres', 'alice', q{
CREATE FUNCTION alice.pt(n int) RETURNS text LANGUAGE plpgsql
	AS $$ DECLARE v text; BEGIN v := n::pg_catalog.text; INSERT INTO alice.t VALUES (n); RETURN pg_typeof(v)::text; END $$;
SELECT retries.annotate('alice.pt(int)', '1 10ms');
});
as_role($node, 'postgres', 'mallory', q{
CREATE FUNCTION mallory.spyt(x pg_catalog.text) RETURNS boolean LANGUAGE sql
	AS $$ INSERT INTO mallory.log VALUES (current_user, 'domain check'); SELECT true $$;
CREATE DOMAIN mallory.text AS pg_catalog.text CHECK (mallory.spyt(VALUE));
ALTER ROLE mallory SET search_path = mallory, pg_catalog;
});
{
	for my $round (1 .. 3)
	{
		# mallory's calls fail (no INSERT on alice.t): what they leave is
		# the compiled function, in whichever workers ran them
		my @m = split /\n/, as_role($node, 'postgres', 'mallory',
			"SELECT retries.call('alice.pt(int)', jsonb_build_array(g)) FROM generate_series(1, 4) g");
		call_reaches($node, 'postgres', $_, 'failed', "5: setup: mallory's call $_ ran") for @m;
		my @a = split /\n/, as_role($node, 'postgres', 'alice',
			"SELECT retries.call('alice.pt(int)', jsonb_build_array(100 + g)) FROM generate_series(1, 4) g");
		call_reaches($node, 'postgres', $_, 'succeeded', "5: setup: alice's call $_ succeeds") for @a;
		last if $node->safe_psql('postgres', "SELECT count(*) FROM mallory.log WHERE who = 'alice'") ne '0';
	}
	is($node->safe_psql('postgres',
		"SELECT count(*) FROM mallory.log WHERE who = 'alice'"), '0',
		'5: mallory\'s domain check never runs as alice in alice\'s calls of her own function');
	is($node->safe_psql('postgres',
		"SELECT count(*) FROM retries.call_data WHERE scheduled_by = 'alice'::regrole"
		  . " AND result = '\"mallory.text\"'"),
		'0', '5: alice\'s variable is never of mallory\'s type in her calls');
}
# the same through PL/pgSQL's validator, which compiles a function without
# running it and keeps what it compiled: mallory's call has it compile
# alice's function (she may: EXECUTE is PUBLIC's), then alice calls it
as_role($node, 'postgres', 'alice', q{
CREATE FUNCTION alice.pv(n int) RETURNS text LANGUAGE plpgsql
	AS $$ DECLARE v text; BEGIN v := n::pg_catalog.text; RETURN pg_typeof(v)::text; END $$;
SELECT retries.annotate('alice.pv(int)', '1 10ms');
});
as_role($node, 'postgres', 'mallory', q{
CREATE FUNCTION mallory.validate() RETURNS int LANGUAGE sql
	AS $$ SELECT pg_catalog.plpgsql_validator('alice.pv(int)'::pg_catalog.regprocedure); SELECT 1 $$;
SELECT retries.annotate('mallory.validate()', '1 10ms');
});
for my $round (1 .. 3)
{
	my $m = as_role($node, 'postgres', 'mallory', "SELECT retries.call('mallory.validate()')");
	call_reaches($node, 'postgres', $m, 'succeeded', "5: setup: mallory's call $m validated alice.pv");
	my $a = as_role($node, 'postgres', 'alice', "SELECT retries.call('alice.pv(int)', '[1]')");
	call_reaches($node, 'postgres', $a, 'succeeded', "5: setup: alice's call $a of alice.pv succeeds");
	is($node->safe_psql('postgres', "SELECT result FROM retries.call_data WHERE id = $a"), '"text"',
		"5: what the validator compiled in mallory's call is not what alice's call $a runs");
}
# ... and through alice's PL/pgSQL trigger function, which mallory's
# inserts compile in her call
as_role($node, 'postgres', 'alice', q{
CREATE TABLE alice.tt (n int, note pg_catalog.text);
GRANT INSERT ON alice.tt TO mallory;
CREATE FUNCTION alice.trg() RETURNS trigger LANGUAGE plpgsql
	AS $$ DECLARE v text; BEGIN v := NEW.n::pg_catalog.text; NEW.note := pg_typeof(v)::pg_catalog.text; RETURN NEW; END $$;
CREATE TRIGGER trg BEFORE INSERT ON alice.tt FOR EACH ROW EXECUTE FUNCTION alice.trg();
CREATE FUNCTION alice.ins(n int) RETURNS int LANGUAGE sql AS 'INSERT INTO alice.tt (n) VALUES (n); SELECT n';
SELECT retries.annotate('alice.ins(int)', '1 10ms');
});
as_role($node, 'postgres', 'mallory', q{
CREATE FUNCTION mallory.ins(n int) RETURNS int LANGUAGE sql AS 'INSERT INTO alice.tt (n) VALUES (n); SELECT n';
SELECT retries.annotate('mallory.ins(int)', '1 10ms');
});
for my $round (1 .. 3)
{
	my $m = as_role($node, 'postgres', 'mallory', "SELECT retries.call('mallory.ins(int)', '[$round]')");
	call_reaches($node, 'postgres', $m, 'succeeded', "5: setup: mallory's call $m fired alice's trigger");
	my $a = as_role($node, 'postgres', 'alice', "SELECT retries.call('alice.ins(int)', '[10$round]')");
	call_reaches($node, 'postgres', $a, 'succeeded', "5: setup: alice's call $a fired her trigger");
}
is($node->safe_psql('postgres', "SELECT string_agg(DISTINCT note, ',') FROM alice.tt WHERE n > 100"),
	'text', "5: alice's trigger, compiled in mallory's calls, runs in alice's as alice's session would");
is($node->safe_psql('postgres', "SELECT count(*) FROM mallory.log WHERE who = 'alice'"), '0',
	'5: nor does mallory\'s domain check run as alice through the trigger');
# the same with a superuser's calls of a superuser's PL/pgSQL function
# (EXECUTE to PUBLIC, as by default): mallory's check makes her a superuser
as_role($node, 'postgres', 'mallory', q{
CREATE FUNCTION mallory.grab(x pg_catalog.text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
	IF (SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = current_user) THEN
		BEGIN
			EXECUTE 'ALTER ROLE mallory SUPERUSER';
		EXCEPTION WHEN OTHERS THEN NULL;	-- two workers at once: "tuple concurrently updated"
		END;
	END IF;
	RETURN true;
END $$;
ALTER DOMAIN mallory.text ADD CONSTRAINT grab CHECK (mallory.grab(VALUE));
});
$node->safe_psql('postgres', q{
CREATE TABLE public.st (n int);
CREATE FUNCTION public.sp(n int) RETURNS text LANGUAGE plpgsql
	AS $$ DECLARE v text; BEGIN v := n::pg_catalog.text; INSERT INTO public.st VALUES (n); RETURN pg_typeof(v)::text; END $$;
SELECT retries.annotate('public.sp(int)', '1 10ms');
});
{
	for my $round (1 .. 3)
	{
		my @m = split /\n/, as_role($node, 'postgres', 'mallory',
			"SELECT retries.call('public.sp(int)', jsonb_build_array(g)) FROM generate_series(1, 4) g");
		call_reaches($node, 'postgres', $_, 'failed', "5: setup: mallory's call $_ ran") for @m;
		my @p = split /\n/, $node->safe_psql('postgres',
			"SELECT retries.call('public.sp(int)', jsonb_build_array(100 + g)) FROM generate_series(1, 4) g");
		wait_until($node, 'postgres',
			"SELECT state IN ('succeeded', 'failed') FROM retries.call_data WHERE id = $_", 't',
			"5: setup: the superuser's call $_ ran") for @p;
		last if $node->safe_psql('postgres', "SELECT rolsuper FROM pg_roles WHERE rolname = 'mallory'") eq 't';
	}
	is($node->safe_psql('postgres', "SELECT rolsuper FROM pg_roles WHERE rolname = 'mallory'"), 'f',
		'5: mallory does not become a superuser through the superuser\'s calls of its own function');
}
$node->safe_psql('postgres', 'ALTER ROLE mallory NOSUPERUSER');
$node->safe_psql('postgres', 'ALTER ROLE mallory RESET search_path');
$node->safe_psql('postgres', 'ALTER SYSTEM RESET retries.max_workers; SELECT pg_reload_conf()');
wait_until($node, 'postgres', 'SHOW retries.max_workers', '2', '5: setup: two workers again');

# ---------------------------------------------------------------------
# 6. the seed of random() that mallory's function (called by alice, so
#    running as alice) sets outlives its attempt: alice's own later call
#    in that worker draws the numbers mallory chose (the sandbox reseeds
#    only when the calls' role changes, not when whose code ran does)
# ---------------------------------------------------------------------
as_role($node, 'postgres', 'mallory', q{
CREATE FUNCTION mallory.seeder() RETURNS int LANGUAGE sql AS 'SELECT setseed(0.5); SELECT 1';
SELECT retries.annotate('mallory.seeder()', '1 10ms');
});
as_role($node, 'postgres', 'alice', q{
CREATE FUNCTION alice.rnd() RETURNS float8 LANGUAGE sql AS 'SELECT random()';
SELECT retries.annotate('alice.rnd()', '1 10ms');
});
{
	my $expected = (split /\n/, $node->safe_psql('postgres', 'SELECT setseed(0.5); SELECT random()'))[-1];
	my $chosen = 0;
	for my $round (1 .. 6)
	{
		my $s = as_role($node, 'postgres', 'alice', "SELECT retries.call('mallory.seeder()')");
		call_reaches($node, 'postgres', $s, 'succeeded', "6: setup: alice's call $s of mallory.seeder() ran");
		my $r = as_role($node, 'postgres', 'alice', "SELECT retries.call('alice.rnd()')");
		call_reaches($node, 'postgres', $r, 'succeeded', "6: setup: alice's call $r of alice.rnd() ran");
		$chosen += $node->safe_psql('postgres',
			"SELECT (result::text::float8 = $expected)::int FROM retries.call_data WHERE id = $r");
		last if $chosen > 0;
	}
	is($chosen, 0, '6: alice\'s random() never draws what mallory\'s code seeded');
}

# ---------------------------------------------------------------------
# 7. head_after_priorities: alice's own due call heads her batch, her
#    call of mallory's slow function (a higher priority) is claimed with
#    it and then run first; her own calls stay claimed, held for as long
#    as mallory's function runs
# ---------------------------------------------------------------------
as_role($node, 'postgres', 'mallory', q{
CREATE FUNCTION mallory.g7() RETURNS int LANGUAGE sql AS $$ SELECT 1 FROM } . gate_sql(75) . q{ AS g $$;
SELECT retries.annotate('mallory.g7()', '1 10ms');
});
# one worker of postgres (a reload), so that no second worker claims
# mallory's call as the head of a batch of its own first (a race)
$node->safe_psql('postgres', 'ALTER SYSTEM SET retries.max_workers = 1; SELECT pg_reload_conf()');
wait_until($node, 'postgres',
	"SELECT current_setting('retries.max_workers') = '1' AND (" . workers_query('postgres') . ') <= 1',
	't', '7: setup: one worker in postgres');
{
	my $gate7 = close_gate($node, 'postgres', 75);
	my ($own0, $own3, $foreign) = split /\n/, as_role($node, 'postgres', 'alice', q{
BEGIN;
SELECT retries.call('alice.pay(int)', '[700]', priority => 0);
SELECT retries.call('alice.pay(int)', '[703]', priority => 3);
SELECT retries.call('mallory.g7()', priority => 5);
COMMIT;
});
	wait_at_gate($node, 'postgres', 75, 1, '7: setup: alice\'s call of mallory.g7() runs, at the gate');
	{
		# fixed: only calls of the role's own code go before the batch's
		# first call (head_after_priorities); the two commit together
		call_reaches($node, 'postgres', $own0, 'succeeded',
			'7: alice\'s own call (priority 0) runs within 10 s beside her call of mallory\'s slow function', 10);
		call_reaches($node, 'postgres', $own3, 'succeeded',
			'7: and her own call of priority 3');
	}
	open_gate($gate7);
	call_reaches($node, 'postgres', $_, 'succeeded', "j: call $_ runs once mallory's function returns")
	  for ($own0, $own3, $foreign);
	is($node->safe_psql('postgres',
		q{SELECT string_agg(n || ':' || c, ',' ORDER BY n) FROM (SELECT n, count(*) c FROM alice.t WHERE n IN (700, 703) GROUP BY n) x}),
		'700:1,703:1', 'j: each of alice\'s own calls ran once');
}
$node->safe_psql('postgres', 'ALTER SYSTEM RESET retries.max_workers; SELECT pg_reload_conf()');
wait_until($node, 'postgres', 'SHOW retries.max_workers', '2', '7: setup: two workers again');

# ---------------------------------------------------------------------
# 1. under a parallel query, mallory's streams of short calls in two
#    databases of hers keep both reserved workers for good: a database's
#    own worker in a reserved worker gives it back only after a second
#    with nothing run, and alice's database, with no worker, waits
# ---------------------------------------------------------------------
wait_until($node, 'postgres',
	"SELECT count(*) FROM pg_stat_activity WHERE backend_type LIKE 'retries%'"
	  . " AND datname IS NOT NULL",
	'0', '1: setup: every worker left, idle');
my ($hog, $hog_pid) = start_parallel_hog($node, 'postgres', 'mallory',
	'1: setup: mallory\'s parallel query takes every free slot');
for my $db ('m1', 'm2')
{
	as_role($node, 'postgres', 'mallory', "CREATE DATABASE $db TEMPLATE tpl");
	as_role($node, $db, 'mallory', q{
CREATE SCHEMA mallory;
CREATE TABLE mallory.n (t timestamptz DEFAULT clock_timestamp());
CREATE FUNCTION mallory.loop() RETURNS void LANGUAGE sql AS $$
INSERT INTO mallory.n DEFAULT VALUES;
SELECT retries.call('mallory.loop()', run_at => clock_timestamp() + interval '200 ms') $$;
SELECT retries.annotate('mallory.loop()', '1 10ms');
SELECT retries.call('mallory.loop()');
});
}
wait_until($node, 'postgres',
	"SELECT count(DISTINCT datname) FROM pg_stat_activity WHERE backend_type = 'retries reserve'"
	  . " AND datname IN ('m1', 'm2')",
	'2', '1: setup: m1 and m2 each run their stream in a reserved worker');
wait_until($node, 'm2', 'SELECT count(*) >= 5 FROM mallory.n', 't',
	'1: setup: the stream runs');
my $f1 = as_role($node, 'postgres', 'alice', "SELECT retries.call('alice.pay(int)', '[1]')");
call_reaches($node, 'postgres', $f1, 'succeeded',
	'1: alice\'s call runs within 10 s while mallory\'s streams in two databases run', 10);for my $db ('m1', 'm2')
{
	as_role($node, $db, 'mallory',
		q{CREATE OR REPLACE FUNCTION mallory.loop() RETURNS void LANGUAGE sql AS 'SELECT'});
}
call_reaches($node, 'postgres', $f1, 'succeeded',
	'b: alice\'s call runs once mallory\'s streams end');
$node->safe_psql('postgres', "SELECT pg_cancel_backend($hog_pid)");
$hog->quit;
$node->safe_psql('postgres', "DROP DATABASE $_ WITH (FORCE)") for ('m1', 'm2');

# ---------------------------------------------------------------------
# 2. two roles that call each other's slow functions besides their own
#    hold both workers and both extras: the bound of the extras is
#    max_workers + max_extra_workers ROLES (architecture.md, "Capacity"),
#    and two are enough
# ---------------------------------------------------------------------
as_role($node, 'postgres', 'mallory', q{
CREATE FUNCTION mallory.held() RETURNS int LANGUAGE sql AS $$ SELECT 1 FROM } . gate_sql(72) . q{ AS g $$;
SELECT retries.annotate('mallory.held()', '1 10ms');
});
as_role($node, 'postgres', 'bob', q{
CREATE FUNCTION bob.held() RETURNS int LANGUAGE sql AS $$ SELECT 1 FROM } . gate_sql(72) . q{ AS g $$;
SELECT retries.annotate('bob.held()', '1 10ms');
});
my $gate2 = close_gate($node, 'postgres', 72);
# each calls the other's function first (a batch of another role's code
# holds neither role: the base workers take them) ...
my @held2 = (as_role($node, 'postgres', 'mallory', "SELECT retries.call('bob.held()')"),
	as_role($node, 'postgres', 'bob', "SELECT retries.call('mallory.held()')"));
wait_at_gate($node, 'postgres', 72, 2, '2: setup: the two crossed calls hold both workers');
# ... then her own: the extras take them (neither holds one of her own
# code).  A limit kept, and documented: holding a role for both kinds of
# batch at once let another role hold a victim's calls back (t/064 1)
push @held2, as_role($node, 'postgres', 'mallory', "SELECT retries.call('mallory.held()')"),
  as_role($node, 'postgres', 'bob', "SELECT retries.call('bob.held()')");
wait_at_gate($node, 'postgres', 72, 4, '2: setup: and their own calls both extras');
my $f2 = as_role($node, 'postgres', 'alice', "SELECT retries.call('alice.pay(int)', '[2]')");
TODO:
{
	local $TODO = 'finding 2 (a limit kept, documented: reference.md, retries.max_extra_workers)';
	call_reaches($node, 'postgres', $f2, 'succeeded',
		'2: alice\'s call runs within 10 s while two roles hold four long calls', 10);
}
open_gate($gate2);
call_reaches($node, 'postgres', $f2, 'succeeded', 'c: alice\'s call runs once their calls end');
call_reaches($node, 'postgres', $_, 'succeeded', "c: their call $_ runs once the crossed ones end")
  for @held2;

# ---------------------------------------------------------------------
# 3. the pool: long calls of one role's, one a worker, fill it (here a
#    pool of four, by a reload: mallory's two long calls in each of two
#    databases of hers; with the default pool of 16, eight databases), and
#    alice's call in another database waits for one of them to end: a
#    worker in a long call never "leaves after a second of work"
# ---------------------------------------------------------------------
# (no extras here: finding 8 is theirs)
$node->safe_psql('postgres',
	'ALTER SYSTEM SET retries.max_cluster_workers = 4; ALTER SYSTEM SET retries.max_extra_workers = 0; SELECT pg_reload_conf()');
wait_until($node, 'postgres', q{SELECT current_setting('retries.max_cluster_workers') || current_setting('retries.max_extra_workers')}, '40',
	'3: setup: a pool of four, no extra workers');
my %gate3;
for my $db ('p1', 'p2')
{
	as_role($node, 'postgres', 'mallory', "CREATE DATABASE $db TEMPLATE tpl");
	as_role($node, $db, 'mallory', q{
CREATE SCHEMA mallory;
CREATE FUNCTION mallory.held() RETURNS int LANGUAGE sql AS $$ SELECT 1 FROM } . gate_sql(73) . q{ AS g $$;
SELECT retries.annotate('mallory.held()', '1 10ms');
});
	$gate3{$db} = close_gate($node, $db, 73);
	as_role($node, $db, 'mallory',
		"SELECT retries.call('mallory.held()'), retries.call('mallory.held()')");
}
# fixed: one role's batches hold at most all but one place of the pool
# (three of four here): mallory's fourth call waits, the fourth place is
# for the others
wait_at_gate($node, 'p1', 73, 2, "3: setup: mallory's two long calls run in p1");
wait_at_gate($node, 'p2', 73, 1, "3: setup: one of mallory's long calls runs in p2");
my $f3 = as_role($node, 'postgres', 'alice', "SELECT retries.call('alice.pay(int)', '[3]')");
call_reaches($node, 'postgres', $f3, 'succeeded',
	'3: alice\'s call runs within 10 s while mallory\'s long calls hold all they may of the pool', 10);
is($node->safe_psql('p2', gate_waiters(73)), '1',
	'3: mallory\'s fourth long call waits for a place she may take');
open_gate($gate3{$_}) for ('p1', 'p2');
wait_until($node, 'p2', "SELECT count(*) FROM retries.call_data WHERE state = 'succeeded'", '2',
	'd: mallory\'s calls all run once hers end');

# ---------------------------------------------------------------------
# 8. an idle extra worker keeps its place in the pool while another
#    database waits for one: p1's two long calls (its own workers held)
#    start an extra, which runs nothing (mallory's calls are all it has)
#    and stays for as long as they run; with a pool of three, alice's
#    call in postgres waits for mallory's calls to end
# ---------------------------------------------------------------------
$node->safe_psql('postgres',
	'ALTER SYSTEM SET retries.max_cluster_workers = 3; ALTER SYSTEM RESET retries.max_extra_workers; SELECT pg_reload_conf()');
wait_until($node, 'postgres', q{SELECT current_setting('retries.max_cluster_workers') || current_setting('retries.max_extra_workers')}, '32',
	'8: setup: a pool of three, two extra workers a database');
wait_until($node, 'postgres',
	"SELECT count(*) FROM pg_stat_activity WHERE backend_type LIKE 'retries%worker' AND datname IS NOT NULL",
	'0', '8: setup: every worker left');
my $gate8 = close_gate($node, 'p1', 73);
as_role($node, 'p1', 'mallory', "SELECT retries.call('mallory.held()'), retries.call('mallory.held()')");
wait_at_gate($node, 'p1', 73, 2, '8: setup: mallory\'s two long calls hold p1\'s workers');
wait_until($node, 'postgres',
	"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'retries extra worker' AND datname = 'p1'",
	'1', '8: setup: p1 starts an extra worker: the pool of three is full');
my $f8 = as_role($node, 'postgres', 'alice', "SELECT retries.call('alice.pay(int)', '[8]')");
call_reaches($node, 'postgres', $f8, 'succeeded',
	'8: alice\'s call runs within 10 s (p1\'s extra worker runs nothing)', 10);
open_gate($gate8);
call_reaches($node, 'postgres', $f8, 'succeeded', 'k: alice\'s call runs once mallory\'s calls end');
$node->safe_psql('postgres',
	'ALTER SYSTEM RESET retries.max_cluster_workers; SELECT pg_reload_conf()');
$node->safe_psql('postgres', "DROP DATABASE $_ WITH (FORCE)") for ('p1', 'p2');

no_crash($node, $log_offset, 'z: no crash in the server log');

$node->stop;
done_testing();
