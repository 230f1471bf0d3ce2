# Thirty-first hostile review (rv31, of 45643ae: issue 42's "whose code
# runs with whose rights", one hour, by a reviewer who did not write the
# code).  alice is the victim, mallory an ordinary role (CREATEDB, as
# pool_review_node gives her), the bootstrap superuser a victim too.  The
# node runs the DEFAULTS of the pool (pool_review_node); from check 2 on,
# one worker in postgres that stays (a reload: max_workers 1, no extra,
# worker_idle_timeout 0), so that the calls meet in one process.  Each
# numbered check failed on the code reviewed (in a TODO block named
# "finding N" then; each is fixed, the block gone); the lettered ones held.  Order: a, 1, 2 (domain), 2 (index),
# b, c, 3, z (a few seconds).
#
# Findings:
#   1. (Medium; no attacker: an administrator's ALTER ROLE of the bootstrap
#      superuser, which the workers connect as) the settings a worker's
#      connection took from pg_db_role_setting for ITS role (ALTER ROLE
#      postgres SET ...; ALTER ROLE postgres IN DATABASE postgres SET
#      session_replication_role = replica did the same, by hand) stay
#      under every
#      attempt of every role: login_apply_settings (login.c) applies the
#      database's, the role's and the role-in-database settings over them,
#      so whatever those do not set keeps the worker's value.  With ALTER
#      ROLE postgres SET session_replication_role = replica, alice's
#      attempts run with replica (her own AFTER trigger on alice.t does not
#      fire: her audit row is missing; FKs are not checked either), and
#      with statement_timeout = '42s' her attempts are bounded by 42 s;
#      a login session of hers has origin and 0 (check a).  By hand, the
#      common safety setting ALTER ROLE postgres SET
#      default_transaction_read_only = on makes every call of every role
#      fail with 25006 (sandbox_enter turns transaction_read_only on when
#      DefaultXactReadOnly, the worker's own, is on), where alice's login
#      is read-write; hooks get the same (mallory's on_exhausted read
#      replica).  Against
#      sandbox.c ("the settings are those of a fresh login session of the
#      role") and architecture.md's table (the function runs "as the
#      caller, in a login session of hers").  Runners (procedures,
#      commands) connect as the role and are not affected.  A fix: at
#      worker start, reset every setting whose source is the worker's own
#      role (PGC_S_USER, PGC_S_DATABASE_USER) to what a session gets
#      before its role's settings (or in sandbox_enter, before the role's
#      are applied).
#   2. (HIGH; any role with a function of its own, no privilege on the
#      victim's objects) PostgreSQL keeps, per process, planned
#      expressions in which the SQL functions they call are INLINED, their
#      bodies parsed under the search_path of whichever code first loaded
#      them; in a worker that is any role's call.  plcache.c handles
#      PL/pgSQL's cache only.  Shown several ways (the first two here):
#        - a domain's CHECK (typcache.c, load_domaintype_info: "caching
#          the result of expression_planner() is not very good
#          practice"): the superuser's public.email CHECKs
#          public.is_email(VALUE), SQL "SELECT $1 ~ '@'" (the usual
#          shape).  mallory's call, SET search_path = mallory, pg_catalog,
#          casts 'a@b' to public.email: the worker keeps the check with
#          mallory's operator mallory.~ (text, text), IMMUTABLE, inlined.
#          The superuser's next call in that worker inserts an email:
#          mallory's operator runs as the superuser, and mallory becomes
#          one (ALTER ROLE mallory SUPERUSER);
#        - an index's expressions (relcache.c,
#          RelationGetIndexExpressions, eval_const_expressions then kept in
#          the relation cache): alice.users has an index on
#          alice.norm(e), SQL "SELECT lower($1)".  mallory's call plans a
#          query of alice.users, which she may not read (the permission is
#          checked after planning, and she catches 42501): the worker keeps
#          the index expression with mallory.lower() inlined.  alice's next
#          call inserts into her own table: mallory.lower() runs as alice;
#        - (by hand) a partition key (RelationBuildPartitionKey, kept the
#          same way): alice.parts PARTITION BY LIST (alice.norm(e));
#          mallory's call plans a query of it; alice's insert runs
#          mallory.lower() as alice, three times; and a partial index's
#          predicate (RelationGetIndexPredicate), WHERE alice.norm(e) <> '':
#          the same, once; and the index variant on the
#          superuser's own public.audit_log (index on public.normx(e),
#          SELECT lower($1)), which mallory may not read: the superuser's
#          call that inserts into it made mallory a superuser.
#      A SQL function with a SET clause is never inlined, and one written
#      with BEGIN ATOMIC is parsed once, so those are safe (by hand: the
#      index attack against either ran nothing of mallory's); the usual
#      "qualify names" advice (architecture.md, for the database owner's
#      search_path) is what the victims here did not follow, as most
#      schemas do not, and nothing in the docs says that it protects one
#      role's domain or index from another role's calls.  The same caches
#      in a login session serve one role; architecture.md "What a process
#      keeps" promises that one role's choices are not carried into
#      another's attempts and names two things only.  A fix: at a change
#      of context (sandbox_enter, where plcache_new_context runs), throw
#      away the relation and type caches' planned expressions
#      (InvalidateSystemCaches(), or the narrower resets of the domain
#      constraint cache and of rd_indexprs/rd_indpred/rd_partkey), or plan
#      the worker's attempts with inlining off for functions of another
#      owner (needs_fmgr_hook true for every non-built-in function while a
#      call runs stops inline_function: FmgrHookIsNeeded).  The same
#      breaks containment (by hand): mallory's inlined function that traps
#      its cancel ended the worker in the middle of alice's batch of her
#      own calls (alice.add_user4, timeout 1 s: "the worker exits: attempt
#      1 of call 52 went on past its time limit"), and alice's call was
#      charged an interrupted attempt.
#   3. (Low; alice's own procedure whose default casts to a domain of
#      mallory's with a check) the worker refuses, the runner runs:
#      check_defaults (proctext.c) refuses a default that NAMES a function
#      of another role; a cast to another role's domain (CoerceToDomain)
#      names none, and its check, mallory.grab(), runs as alice in the
#      runner's CALL.  The same default of alice's function fails its
#      attempt with 42501 (sandbox_make_args routes the check's call,
#      check c).  architecture.md's table: "a function of another role
#      that they reach while the arguments are made fails the attempt"
#      (a parenthesis says the runner checks the functions the defaults
#      name).  Alice wrote the default, so a direct CALL would run it as
#      her too: Low.  A fix: walk CoerceToDomain nodes in foreign_walker
#      (the domain's owner and its constraints' functions), or build the
#      CALL's arguments as Consts under the same routing as a worker.
#      (Reaching another role's function through a superuser's or the
#      caller's own function, in either path, is not caught either: a
#      trusted function runs with routing off, sandbox_fmgr.  By hand:
#      alice's function with DEFAULT alice.wrap(), PL/pgSQL that calls
#      mallory.grab(), succeeded in a worker and ran grab() as alice.)
#
# Held (lettered checks, and by hand):
#   a. a login session of alice has session_replication_role origin and
#      no statement_timeout (the control of 1).
#   b. mallory may not read alice.users (her query is planned, then
#      refused: 42501), in check 2.
#   c. alice's function whose default casts to mallory's domain fails its
#      attempt with 42501 (the control of 3).
#   By hand (not in this file): the views and functions show mallory
#   nothing of alice's calls, schedules (by id and by name: trigger,
#   pause_schedule, resume_schedule, unschedule, alter_schedule answer
#   "does not exist"), node_op answers 42704 as jsonb; the bounded inputs
#   (key 16 kB, limit_key 256 B, on_event and event 1 kB, retry_on 1,000
#   elements, schedule name 200 B, args and payload 1 MB, policy counts,
#   cron fields and steps, zones 256 B, after of one dimension without
#   NULL, next_runs' after in the years 1 to 9999) refuse with 22023,
#   22004, 22003, 22P02, 23505 or 42601, and messages quote at most 200
#   bytes; aggregates are refused (42809), unannotated builtins (55000);
#   next_runs in far POSIX zones, 10,000 runs in under 100 ms; keys are
#   per role (mallory's call with alice's key 'secret-k' made a call of
#   her own: made, deduplicated, debounced on hers only); mallory's
#   on_exhausted hook, after alice's call of her function failed, gets
#   42704 from result() and retry_now() of the call id, no row of
#   retries.calls, and NULL from event() and current_call(); every SQL
#   text of the worker's own (a scan of src/) names functions and
#   operators with their schema (the db owner's search_path cannot
#   redirect them); plcache: mallory's plpgsql_validator() of alice's
#   function is marked at once, and PL/pgSQL's assignment and RETURN
#   casts through an inlinable SQL cast function of alice's (mallory's
#   call first, under her path) did not carry into alice's call; a check
#   that mallory adds to her domain after alice scheduled a call of
#   mallory's function with a parameter of it fails the attempt (42501,
#   "arguments can no longer be converted"), it does not run; ALTER
#   DATABASE ...
#   ALLOW_CONNECTIONS false by mallory, the owner, during alice's
#   procedure's attempt in a runner there: the runner is stopped, the
#   attempt recorded interrupted (57P01) and not charged (max_attempts 1
#   -> 2), the call succeeds at its second attempt; alice's '@reboot'
#   schedule in mallory's database fired once after a restart, and not
#   again when mallory closed the database to connections and opened it
#   (which forgets its memo, as retries.start_workers(), which PUBLIC may
#   run, also does: the schedules' own columns, last_run and origin
#   against pg_postmaster_start_time(), decide).  Read, not run: the
#   pool's still_capped mark (launcher.c) is cleared by any commit that
#   wakes the database (a call, an emit, a resume, a runner's end) and
#   bounded by the next call, firing, held call's release or
#   event_timeout (next_due, next_fire); with the crossed rule withdrawn,
#   running_roles lists only batches of a role's own code (role ==
#   holder), so mallory's calls of alice's function keep no call of
#   alice's out of the extras (but see 2, where mallory's code runs in
#   alice's own batches); args_portable_literals writes
#   values the runner reads back alike in any DateStyle/IntervalStyle.

use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RetriesTest;
use Test::More;
use Time::HiRes qw(usleep time);

my $node = pool_review_node('review_28');
my $log_offset = -s $node->logfile;
# the role the workers connect as (the bootstrap superuser)
my $boot = $node->safe_psql('postgres', 'SELECT rolname FROM pg_roles WHERE oid = 10');

# ---------------------------------------------------------------------
# 1. the worker's own login settings (ALTER ROLE <bootstrap superuser>
#    SET ..., which the worker's connection applies) stay under every
#    attempt: alice's attempts run with session_replication_role =
#    replica, so her own trigger does not fire, where a login session of
#    hers (and a direct call) has origin and fires it
# ---------------------------------------------------------------------
#    (since: also a setting both the database and the bootstrap role set,
#    which takes the database's; a placeholder of the role's, which is
#    empty; default_transaction_read_only, which made every call fail)
$node->safe_psql('postgres', qq{
ALTER ROLE "$boot" SET session_replication_role = replica;
ALTER ROLE "$boot" SET statement_timeout = '42s';
ALTER ROLE "$boot" SET work_mem = '77MB';
ALTER ROLE "$boot" SET myapp.tenant = 'boot';
CREATE DATABASE srr;
ALTER DATABASE srr SET work_mem = '5MB';
ALTER ROLE "$boot" IN DATABASE srr SET default_transaction_read_only = on;
});
# the tests' own sessions in srr are the bootstrap superuser's: read-write again
my $rw = 'SET default_transaction_read_only = off;';
$node->safe_psql('srr', qq{$rw
CREATE EXTENSION retries;
CREATE SCHEMA alice AUTHORIZATION alice;
});
as_role($node, 'srr', 'alice', $rw . q{
CREATE TABLE alice.t (n int);
CREATE TABLE alice.audit (n int);
CREATE FUNCTION alice.audit() RETURNS trigger LANGUAGE plpgsql
	AS $$ BEGIN INSERT INTO alice.audit VALUES (NEW.n); RETURN NEW; END $$;
CREATE TRIGGER audit AFTER INSERT ON alice.t FOR EACH ROW EXECUTE FUNCTION alice.audit();
CREATE FUNCTION alice.pay(n int) RETURNS void LANGUAGE sql AS 'INSERT INTO alice.t VALUES (n)';
SELECT retries.annotate('alice.pay(int)', '3 10ms');
CREATE FUNCTION alice.settings() RETURNS text LANGUAGE sql
	AS $$ SELECT concat_ws(' ', current_setting('session_replication_role'), current_setting('statement_timeout'),
		current_setting('work_mem'), coalesce(current_setting('myapp.tenant', true), ''),
		current_setting('transaction_read_only')) $$;
SELECT retries.annotate('alice.settings()', '1 10ms');
});
{
	my $login = $node->safe_psql('srr', q{SELECT alice.settings()},
		extra_params => [ '-U', 'alice' ]);
	is($login, 'origin 0 5MB  off',
		'a: a login session of alice: session_replication_role origin, no statement_timeout, the database\'s work_mem, no tenant, read-write');
	my $s = as_role($node, 'srr', 'alice', "$rw SELECT retries.call('alice.settings()')");
	my $p = as_role($node, 'srr', 'alice', "$rw SELECT retries.call('alice.pay(int)', '[11]')");
	call_reaches($node, 'srr', $_, 'succeeded', "1: setup: alice's call $_ runs") for ($s, $p);
	is($node->safe_psql('srr', "SELECT result #>> '{}' FROM retries.call_data WHERE id = $s"),
		$login, '1: alice\'s attempt starts with the settings of a login session of hers');
	is($node->safe_psql('srr', 'SELECT count(*) FROM alice.audit'), '1',
		'1: alice\'s own trigger fires in her attempt, as in her session');
	$node->safe_psql('postgres', qq{ALTER ROLE "$boot" RESET ALL});
	$node->safe_psql('postgres', 'DROP DATABASE srr WITH (FORCE)');
}

# one worker in postgres, which stays (a reload), so that every call meets in one process
$node->safe_psql('postgres', q{
ALTER SYSTEM SET retries.max_workers = 1;
ALTER SYSTEM SET retries.max_extra_workers = 0;
ALTER SYSTEM SET retries.worker_idle_timeout = 0;
SELECT pg_reload_conf();
});
wait_until($node, 'postgres',
	"SELECT current_setting('retries.max_workers') || current_setting('retries.max_extra_workers') || current_setting('retries.worker_idle_timeout') = '100' AND ("
	  . workers_query('postgres') . ') <= 1',
	't', 'setup: one worker in postgres, no extra, workers stay');

# mallory's operator and function that tell (and, as a superuser, take) whose rights they run with
as_role($node, 'postgres', 'mallory', q{
CREATE TABLE mallory.seen (who text);
GRANT INSERT ON mallory.seen TO PUBLIC;
CREATE FUNCTION mallory.grab() RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO mallory.seen VALUES (current_user);
	IF (SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = current_user) THEN
		BEGIN
			EXECUTE 'ALTER ROLE mallory SUPERUSER';
		EXCEPTION WHEN OTHERS THEN NULL;
		END;
	END IF;
	RETURN true;
END $$;
CREATE FUNCTION mallory.match(a text, b text) RETURNS boolean LANGUAGE plpgsql IMMUTABLE
	AS $$ BEGIN PERFORM mallory.grab(); RETURN pg_catalog.textregexeq(a, b); END $$;
CREATE OPERATOR mallory.~ (LEFTARG = text, RIGHTARG = text, FUNCTION = mallory.match);
CREATE FUNCTION mallory.lower(a text) RETURNS text LANGUAGE plpgsql IMMUTABLE
	AS $$ BEGIN PERFORM mallory.grab(); RETURN pg_catalog.lower(a); END $$;
});

# ---------------------------------------------------------------------
# 2. (HIGH) PostgreSQL plans a domain's CHECK once per process and keeps
#    it in the type cache, with the SQL functions it calls inlined: their
#    bodies parsed under the search_path of whichever code loaded it
#    first.  mallory's call (SET search_path = mallory, pg_catalog) casts
#    to the superuser's public.email, whose check calls public.is_email(),
#    SQL: SELECT $1 ~ '@'; the worker keeps it with mallory's operator ~.
#    The superuser's next call, which inserts an email, runs mallory's
#    operator as the superuser: mallory becomes one
# ---------------------------------------------------------------------
$node->safe_psql('postgres', q{
CREATE FUNCTION public.is_email(e text) RETURNS boolean LANGUAGE sql IMMUTABLE AS $$ SELECT $1 ~ '@' $$;
CREATE DOMAIN public.email AS text CHECK (public.is_email(VALUE));
CREATE TABLE public.registry (e public.email);
CREATE FUNCTION public.reg(e text) RETURNS int LANGUAGE sql
	AS $$ INSERT INTO public.registry VALUES (e::public.email); SELECT 1 $$;
SELECT retries.annotate('public.reg(text)', '1 10ms');
});
as_role($node, 'postgres', 'mallory', q{
CREATE FUNCTION mallory.load() RETURNS text LANGUAGE sql SET search_path = mallory, pg_catalog
	AS $$ SELECT 'a@b'::public.email::text $$;
SELECT retries.annotate('mallory.load()', '1 10ms');
});
{
	my $m = as_role($node, 'postgres', 'mallory', "SELECT retries.call('mallory.load()')");
	call_reaches($node, 'postgres', $m, 'succeeded', '2: setup: mallory\'s call casts to public.email');
	my $r = $node->safe_psql('postgres', q{SELECT retries.call('public.reg(text)', '["x@y"]')});
	call_reaches($node, 'postgres', $r, 'succeeded', '2: setup: the superuser\'s call inserts an email');
	is($node->safe_psql('postgres', "SELECT rolsuper FROM pg_roles WHERE rolname = 'mallory'"), 'f',
		'2: mallory does not become a superuser through the domain check the worker keeps');
	is($node->safe_psql('postgres', "SELECT string_agg(who, ',' ORDER BY who) FROM mallory.seen"), 'mallory',
		'2: mallory\'s operator runs only in her own call');
	$node->safe_psql('postgres', 'ALTER ROLE mallory NOSUPERUSER; TRUNCATE mallory.seen');
}

# ---------------------------------------------------------------------
# 2 (the relation cache): an index's expressions are kept the same way
#    (RelationGetIndexExpressions), inlined under the search_path of the
#    code that planned a query of the table first.  mallory's call plans
#    a query of alice's table alice.users (she may not read it: the
#    permission is checked after planning), whose index is on
#    alice.norm(e), SQL: SELECT lower($1); alice's next call, which
#    inserts into her own table, runs mallory.lower() as alice
# ---------------------------------------------------------------------
as_role($node, 'postgres', 'alice', q{
CREATE FUNCTION alice.norm(e text) RETURNS text LANGUAGE sql IMMUTABLE AS $$ SELECT lower($1) $$;
CREATE TABLE alice.users (e text);
CREATE INDEX ON alice.users (alice.norm(e));
CREATE FUNCTION alice.add_user(e text) RETURNS int LANGUAGE sql
	AS $$ INSERT INTO alice.users VALUES (e); SELECT 1 $$;
SELECT retries.annotate('alice.add_user(text)', '1 10ms');
});
as_role($node, 'postgres', 'mallory', q{
CREATE FUNCTION mallory.peek() RETURNS text LANGUAGE plpgsql SET search_path = mallory, pg_catalog AS $$
BEGIN
	BEGIN
		PERFORM count(*) FROM alice.users;
	EXCEPTION WHEN insufficient_privilege THEN
		RETURN 'planned, not read';
	END;
	RETURN 'read';
END $$;
SELECT retries.annotate('mallory.peek()', '1 10ms');
});
{
	my $m = as_role($node, 'postgres', 'mallory', "SELECT retries.call('mallory.peek()')");
	call_reaches($node, 'postgres', $m, 'succeeded', '2: setup: mallory\'s call plans a query of alice.users');
	is($node->safe_psql('postgres', "SELECT result #>> '{}' FROM retries.call_data WHERE id = $m"),
		'planned, not read', 'b: mallory may not read alice.users');
	my $a = as_role($node, 'postgres', 'alice', q{SELECT retries.call('alice.add_user(text)', '["A@B"]')});
	call_reaches($node, 'postgres', $a, 'succeeded', '2: setup: alice\'s call inserts into her own table');
	is($node->safe_psql('postgres', "SELECT count(*) FROM mallory.seen WHERE who = 'alice'"), '0',
		'2: mallory\'s function does not run as alice through the index expression the worker keeps');
	$node->safe_psql('postgres', 'TRUNCATE mallory.seen');
}

# ---------------------------------------------------------------------
# 2 (the relation cache, since): a partition key with an expression, the
#    partition constraint made from it, and a partial index's predicate
#    are kept so too.  mallory's call plans queries of alice.parts (LIST
#    (alice.norm(e))), its partition and alice.flags (an index WHERE
#    alice.norm(e) = 'x'); alice's next call inserts into each: the
#    worker invalidates those entries too (exprcache_new_context)
# ---------------------------------------------------------------------
as_role($node, 'postgres', 'alice', q{
CREATE TABLE alice.parts (e text) PARTITION BY LIST (alice.norm(e));
CREATE TABLE alice.parts_a PARTITION OF alice.parts FOR VALUES IN ('a@b');
CREATE TABLE alice.flags (e text);
CREATE INDEX ON alice.flags (e) WHERE alice.norm(e) = 'x';
CREATE FUNCTION alice.add_part(e text) RETURNS int LANGUAGE sql
	AS $$ INSERT INTO alice.parts VALUES (e); INSERT INTO alice.parts_a VALUES (e);
		INSERT INTO alice.flags VALUES (e); SELECT 1 $$;
SELECT retries.annotate('alice.add_part(text)', '1 10ms');
});
as_role($node, 'postgres', 'mallory', q{
CREATE FUNCTION mallory.peek_more() RETURNS text LANGUAGE plpgsql SET search_path = mallory, pg_catalog AS $$
DECLARE
	planned int := 0;
BEGIN
	BEGIN
		PERFORM count(*) FROM alice.parts WHERE e = 'a@b';
	EXCEPTION WHEN insufficient_privilege THEN
		planned := planned + 1;
	END;
	BEGIN
		PERFORM count(*) FROM alice.parts_a;
	EXCEPTION WHEN insufficient_privilege THEN
		planned := planned + 1;
	END;
	BEGIN
		PERFORM count(*) FROM alice.flags WHERE alice.norm(e) = 'x';
	EXCEPTION WHEN insufficient_privilege THEN
		planned := planned + 1;
	END;
	RETURN planned || ' planned, not read';
END $$;
SELECT retries.annotate('mallory.peek_more()', '1 10ms');
});
{
	my $m = as_role($node, 'postgres', 'mallory', "SELECT retries.call('mallory.peek_more()')");
	call_reaches($node, 'postgres', $m, 'succeeded', '2: setup: mallory\'s call plans queries of alice.parts, its partition and alice.flags');
	is($node->safe_psql('postgres', "SELECT result #>> '{}' FROM retries.call_data WHERE id = $m"),
		'3 planned, not read', 'b: mallory may read none of them');
	my $a = as_role($node, 'postgres', 'alice', q{SELECT retries.call('alice.add_part(text)', '["A@B"]')});
	call_reaches($node, 'postgres', $a, 'succeeded', '2: setup: alice\'s call inserts into each');
	is($node->safe_psql('postgres', "SELECT count(*) FROM mallory.seen WHERE who = 'alice'"), '0',
		'2: mallory\'s function does not run as alice through a partition key, a partition constraint or an index predicate the worker keeps');
	$node->safe_psql('postgres', 'TRUNCATE mallory.seen');
}

# ---------------------------------------------------------------------
# 3. (Low) a procedure's defaults reach another role's code that a
#    function's would not: check_defaults (proctext.c) looks for the
#    functions a default NAMES, and a cast to mallory's domain names
#    none (CoerceToDomain), so alice's procedure whose default is
#    ('x'::mallory.d2)::text runs mallory's domain check, mallory.grab(),
#    as alice in the runner; the same default of alice's function fails
#    the attempt with 42501 (sandbox_make_args routes the check's call:
#    check c)
# ---------------------------------------------------------------------
as_role($node, 'postgres', 'mallory', q{
CREATE DOMAIN mallory.d2 AS pg_catalog.text CHECK (mallory.grab());
});
as_role($node, 'postgres', 'alice', q{
CREATE TABLE alice.def_log (s text);
CREATE PROCEDURE alice.p_def(s text DEFAULT ('x'::mallory.d2)::text) LANGUAGE sql
	AS $$ INSERT INTO alice.def_log VALUES (s) $$;
SELECT retries.annotate('alice.p_def(text)', '1 10ms');
CREATE FUNCTION alice.f_def(s text DEFAULT ('x'::mallory.d2)::text) RETURNS int LANGUAGE sql
	AS $$ INSERT INTO alice.def_log VALUES (s); SELECT 1 $$;
SELECT retries.annotate('alice.f_def(text)', '1 10ms');
});
{
	my $f = as_role($node, 'postgres', 'alice', "SELECT retries.call('alice.f_def(text)', '[]')");
	call_reaches($node, 'postgres', $f, 'failed', 'c: setup: alice\'s call of her function with that default ends');
	is($node->safe_psql('postgres', "SELECT last_sqlstate FROM retries.call_data WHERE id = $f"), '42501',
		'c: the function\'s default reaching mallory\'s domain check fails the attempt with 42501');
	my $p = as_role($node, 'postgres', 'alice', "SELECT retries.call('alice.p_def(text)', '[]')");
	wait_until($node, 'postgres',
		"SELECT state IN ('succeeded', 'failed') FROM retries.call_data WHERE id = $p", 't',
		'3: setup: alice\'s call of her procedure with that default ends');
	is($node->safe_psql('postgres', "SELECT state || ' ' || coalesce(last_sqlstate, '') FROM retries.call_data WHERE id = $p"),
		'failed 42501', '3: the procedure\'s default reaching mallory\'s domain check fails the attempt too');
	is($node->safe_psql('postgres', "SELECT count(*) FROM mallory.seen WHERE who = 'alice'"), '0',
		'3: mallory\'s domain check does not run as alice in the runner');
	$node->safe_psql('postgres', 'TRUNCATE mallory.seen');
}

no_crash($node, $log_offset, 'z: no backend or worker crashed');
$node->stop;
done_testing();
