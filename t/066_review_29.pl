# Thirty-second hostile review (rv32, of cf3419a: issue 42's "whose code
# runs with whose rights", one hour, by a reviewer who did not write the
# code).  alice is the victim, mallory an ordinary role (CREATEDB, as
# pool_review_node gives her), the bootstrap superuser a victim too.  The
# node runs the DEFAULTS of the pool (pool_review_node), with one change
# to the server's configuration written out at the start (check 1:
# default_text_search_config = 'english', unqualified, as ALTER SYSTEM
# writes what it is given); then one worker in postgres that stays (a
# reload: max_workers 1, no extra, worker_idle_timeout 0), so that the
# calls meet in one process.  Each numbered check failed on the code
# reviewed, inside a TODO block named "finding N"; the lettered ones held.
# Fixed since (their TODO blocks gone): 5 (exprcache.c: a change of
# context inside one transaction resets the plan cache, so that PL/pgSQL
# compiles its casts anew), 1 (the text search configuration's cache is
# reset with it), 4 (login.c reads ALTER ROLE ALL SET too), 2 and 3
# (proctext.c: check_defaults refuses a literal reaching another role's
# domain, check_param_domains a parameter's domain whose checks call
# another role's function), 8 (a hook's error shows its SQLSTATE only to
# a caller who does not own the function), 7 (node_op quotes 200
# characters of op).  6 stays a documented limit (operations.md,
# "Settings": a placeholder reads '' once any call made it).
# Order: a, 4, b, 1, c, 6, d, 2, 3, e, 5, 8, 7, f, z (about half a minute).
#
# Findings:
#   1. (Low; any role with a text search configuration of her own, when
#      the server's default_text_search_config names its configuration
#      without a schema: 'english', as ALTER SYSTEM SET
#      default_text_search_config = 'english' writes it) PostgreSQL keeps
#      the OID of the current text search configuration per process
#      (ts_cache.c, TSCurrentConfigCache), looked up by name under the
#      search_path of whichever code first needs it, until the setting is
#      assigned again or pg_ts_config changes.  A value set in a
#      transaction is qualified by its check hook; one read from the
#      configuration file is not.  mallory's call (SET search_path =
#      mallory, pg_catalog) runs to_tsvector(text): the worker keeps
#      mallory.english (COPY = simple), and alice's later call's
#      to_tsvector('The cats running') gives 'cats':2 'running':3 'the':1
#      where a login session of hers gives 'cat':2 'run':3 (check b).  No
#      code of mallory's runs (parsers and templates are C), but every
#      role's tsvectors, search results and indexes built in that worker
#      follow mallory's configuration, a choice of hers carried into
#      other roles' attempts, against architecture.md "What a process
#      keeps".  forget_planned_expressions (sandbox.c) does not reset it.
#      A fix: at a change of context, reset the cache (assign the setting
#      again: set_config_option of its own value at PGC_S_SESSION in the
#      nest level, or qualify the worker's value once at start, in a
#      transaction, as the check hook does).
#   2. (Low; alice's own procedure whose default is a literal of an ARRAY
#      of mallory's domain) check_defaults (proctext.c) looks for
#      functions a default names and CoerceToDomain nodes; a literal of
#      mallory.d2[] is a Const (array_in ran the check when alice created
#      the procedure), so ('{x}'::mallory.d2[])::text[] passes.  The runner
#      then deparses the default into the CALL's text and parses it again:
#      array_in -> domain_in runs mallory's check, mallory.grab(), as
#      alice.  Neither a direct CALL of the procedure nor the worker's
#      attempt of the same default in a function (alice.f4) runs the check
#      at all (the Const is a value): only the runner does.  (By hand, a
#      composite's literal does the same: alice.p5(s text DEFAULT
#      ('(x)'::alice.comp5)::text), alice.comp5 AS (a mallory.d2), ran
#      mallory.grab() as alice in the runner; a range's would, by
#      reasoning.)  A fix: refuse in check_defaults a Const
#      whose type reaches a domain with checks of another role
#      (foreign_domain in call_args.c), or pass the arguments to the CALL
#      as parameters, not text.
#   3. (Low; alice's own domain whose check calls mallory's function,
#      which alice may call) a procedure's arguments are converted in the
#      runner (proctext_build -> call_args_build, and again when the
#      CALL's text is parsed) without the routing that the worker's
#      attempt converts them under (sandbox_make_args): alice's call of
#      her function alice.f3(alice.d3) fails with 42501 ("making the call's
#      arguments would run function mallory.grab()"), her call of her
#      procedure alice.p3(alice.d3) with the same argument runs
#      mallory.grab() as alice and succeeds.  architecture.md's table: "a
#      function of another role that they reach while the arguments are
#      made fails the attempt"; only the defaults are said to be checked
#      by a runner.  Alice's session ran the check when she made the call,
#      so this is consistency, Low.  A fix: the runner converts the
#      arguments with the same fmgr routing (install sandbox_fmgr's
#      needs_fmgr/fmgr hooks in runners for call_args_build), and the CALL
#      takes them as parameters.
#   4. (Low; an administrator's ALTER ROLE ALL SET, no attacker) the
#      settings of pg_db_role_setting for all roles in all databases
#      (ALTER ROLE ALL SET, stored as database 0, role 0) are not read by
#      login_apply_settings (login.c reads the database's, the role's, the
#      role's in the database): an attempt has the value the worker's own
#      connection took when it started.  So ALTER ROLE ALL SET work_mem =
#      '33MB' (or statement_timeout, a common safety net) made after a
#      worker started does not reach the attempts it runs (alice's attempt
#      reports 4MB; a login session of hers gets 33MB, check a), and ALTER
#      ROLE ALL RESET leaves the old value in them (by hand: a worker
#      started under ALTER ROLE ALL SET work_mem = '33MB', then RESET:
#      alice's login 4MB, her attempt 33MB), until the worker exits
#      (never, with worker_idle_timeout 0; in a busy database, rarely).
#      sandbox.c promises "the settings are those of a fresh login session
#      of the role".  A fix: read (0, 0) too, once per batch, and apply it
#      first (or set back what the worker's connection took at
#      PGC_S_GLOBAL, as login_forget_own_settings does for its own role's).
#   5. (HIGH; any role that may call a superuser's function annotated with
#      an on_exhausted or delay_fn hook in PL/pgSQL which converts text to
#      a domain whose CHECK calls an inlinable SQL function with an
#      unqualified operator or function: the shape of rv31's finding 2)
#      PL/pgSQL keeps, per process, a cast cache (pl_exec.c,
#      get_cast_hashentry): the expression of each cast it makes when a
#      value's type is not the target's (SELECT ... INTO, FETCH INTO,
#      RETURN, a FOR loop's variable), and its compiled ExprState, which
#      every PL/pgSQL function of the same TRANSACTION shares
#      (cast_lxid).  A cast to a domain compiles the domain's checks into
#      that ExprState (ExecInitCoerceToDomain) from the type cache as it
#      is then: forget_planned_expressions invalidates the type cache at a
#      change of context, not ExprStates already compiled.  A hook runs in
#      the transaction of the batch of the call that failed, as the owner
#      of the annotated function.  So: mallory's batch, two calls made in
#      one transaction: mallory.build() (SET search_path = mallory,
#      pg_catalog) does SELECT 'a@b' INTO v, v public.email, whose CHECK
#      calls public.is_email(), SQL "SELECT $1 ~ '@'": the cast's
#      ExprState has mallory's operator ~ in it; then her call of the
#      superuser's public.job(-1) fails for good (P0001), and its
#      on_exhausted hook, public.on_job_failed(bigint), runs as the
#      superuser in the same transaction and does SELECT
#      'ops@example.com' INTO v (v public.email): the cached ExprState is
#      reused, mallory's operator runs as the superuser, and mallory
#      becomes one (ALTER ROLE mallory SUPERUSER).  The same, by hand,
#      for alice's hook of alice's function that mallory calls: the
#      function itself, run as mallory under her search_path (ALTER ROLE
#      mallory SET search_path = mallory, pg_catalog), compiles the cast
#      and fails, and alice's hook ran mallory's operator as alice; for a
#      delay_fn of the superuser's (after an RT error); and through a
#      PL/pgSQL function that RETURNs the domain from text, the common
#      shape public.norm_email(t text) RETURNS public.email AS 'BEGIN
#      RETURN lower(t); END': mallory's call of it first, then the
#      superuser's hook that only calls it, made mallory a superuser too
#      (plcache compiles the function anew for the hook's context; the
#      cast cache is not the function's).  Across transactions the cast
#      is compiled anew (check e).  A fix: never
#      run code of another role in the transaction of a batch after
#      another role's code ran in it (a hook of another owner than the
#      batch's role in a transaction of its own, or end the batch before
#      it), or at a change of context within a transaction make PL/pgSQL
#      drop its compiled casts (no API: a subtransaction does not; the
#      transaction's end does).
#   6. (Low; any role, against code that reads a custom setting it does
#      not set) a custom setting (placeholder) that a call defines
#      (set_config('app.tenant', 'evil', false), SET app.tenant) stays
#      defined in the worker for good: the nest level's rollback restores
#      its value, the empty string, not its absence (PostgreSQL cannot
#      remove a placeholder; login.c says so for the worker's own).
#      alice's later attempt reads current_setting('app.tenant', true) as
#      '' where a login session of hers reads NULL (check c).  Code of the
#      common multi-tenant form current_setting('app.tenant', true)::int
#      (an RLS policy, say, that matches nothing when the setting is
#      unset) then fails with 22P02 in every attempt of every role in that
#      worker, and coalesce(current_setting(..., true), default) takes ''
#      for the default: a choice of mallory's carried into other roles'
#      attempts (architecture.md "What a process keeps" names the seed,
#      PL/pgSQL's compilations and planned expressions only).  A fix: a
#      worker whose attempt made a placeholder (the count of GUC variables
#      grew) exits after its batch, to be replaced; or document it.
#   7. (Low, cosmetic) retries.node_op (retries--1.6--1.7.sql) quotes
#      its whole op in its error message, format('op: %s is not wait,
#      result or cancel', op): a 100 kB op comes back as a 100 kB
#      message, where reference.md promises that "a message quotes at
#      most 200 bytes of an argument".  Its caller is the only reader.
#   8. (Low; any role that may call a function of alice's that has an
#      on_exhausted hook, or a delay_fn) a hook runs as the owner of the
#      annotated function, with her rights, when the CALLER's call fails;
#      its error (on_exhausted: attempts.on_exhausted_error, "SQLSTATE:
#      message"; delay_fn: the call's last_message, "delay_fn ... failed:
#      <message>", with its hint and context) is written on the caller's
#      call, which the caller reads.  mallory calls alice.f9(-1), which
#      fails; alice's hook alice.h9 reads alice.secret and raises 'alert
#      failed for alice-secret-42'; mallory reads 'P0001: alert failed for
#      alice-secret-42' in retries.attempts (and, by hand, a delay_fn of
#      alice's that raises shows 'delay_fn alice.d10(integer,text,text)
#      failed: no delay for alice-secret-42' in mallory's retries.calls).
#      What a hook puts in its errors is its owner's code, but the owner
#      chose it for her own view: architecture.md's row for hooks says what the hook sees of
#      the caller ("the call's id and error text, no more"), not that the
#      caller sees what the hook raises; a direct call of alice's
#      function runs no hook at all.  A fix: keep a hook's error where its
#      owner sees it (a column the views show to the function's owner),
#      and give the caller only its SQLSTATE.
#
# Held (lettered checks, and by hand):
#   a. a login session of alice has the ALTER ROLE ALL setting (the control
#      of 4).
#   b. a login session of alice's to_tsvector uses the english
#      configuration (the control of 1).
#   c. a login session of alice has no app.tenant (the control of 6).
#   d. the worker's attempt of alice's FUNCTION with the array-of-domain
#      default runs no check of mallory's, and that of her function whose
#      argument is of her domain calling mallory.grab() fails with 42501
#      (the controls of 2 and 3).
#   e. PL/pgSQL's session-wide cast cache (pl_exec.c, cast_expr_hash, kept
#      for the life of the process, not reset by the change of context): a
#      superuser's SQL cast function (public.tag -> text, "SELECT
#      lower($1.v)") reached by a PL/pgSQL assignment and RETURN under
#      mallory's search_path, then by the superuser's own call: mallory's
#      lower() did not run as the superuser.  The cast is planned with a
#      CaseTestExpr argument, which PostgreSQL does not inline, and the SQL
#      function's own cache lives one subtransaction (each attempt has
#      its own); in a plain session the carry-over is seen only inside one
#      transaction (which is finding 5, for a cast to a domain).  Same for
#      an enum's cast and an array's (ArrayCoerceExpr), by hand.
#   f. node_op('cancel') of a call that is not mallory's answers 42704, as
#      jsonb, and cancels nothing.
#   By hand (not in this file): the views of the extension show mallory
#   nothing of alice's (calls, attempts, schedules, events, workers, stats
#   her own; policies lists every annotated function, as pg_proc does);
#   retries.start_workers() and the other internal functions are not
#   executable by PUBLIC; the other per-process caches that keep
#   expressions were read in PostgreSQL 15's source (expression_planner
#   and eval_const_expressions callers): only the type cache's domain
#   checks, the relation cache's index expressions and predicates and
#   partition keys keep planned expressions (forget_planned_expressions
#   covers them); a partition's constraint, column defaults, generated
#   columns, CHECK constraints, RLS policies, rules and extended
#   statistics are planned per query; the plan cache and the operator
#   lookup cache key on the search_path; RI plans are plan-cache entries;
#   a relation open across the change of context (RelationClearRelation
#   keeps an open index's expressions and an open table's partition key)
#   was looked for and not found: every attempt's relations are closed by
#   the end of its subtransaction, cursors by sandbox_leave; LISTEN is
#   refused to background workers; deferred trigger events queued by any
#   statement reach ExecutorEnd or the utility hook (COPY FROM, SET
#   CONSTRAINTS), as read; mallory's CREATE DATABASE cp TEMPLATE mdb (her
#   database) during alice's function attempt there: interrupted (57P01),
#   not charged (max_attempts 2 -> 3), succeeded at attempt 2, and the
#   copy's call cancelled; 3,000 partitions of mallory's keyed by lower(e)
#   and a relation cache invalidation of hers per batch cost about 18 ms
#   a round of two roles' calls (forget_planned_expressions rebuilding its
#   list), far from a second; pg_terminate_backend(pg_backend_pid()) in a
#   call fails with 42501 (the worker is the superuser's process).
#   Not tried, for want of time: PostgreSQL 18's SQL-function cache
#   (functions.c keeps a function's parsed body across calls there; its
#   plans are plan-cache entries with the search_path, but an inlined
#   body planned into a CachedExpression would not be).

use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RetriesTest;
use Test::More;
use Time::HiRes qw(usleep time);

my $node = pool_review_node('review_29');

# the server's text search configuration named without a schema (check 1)
$node->append_conf('postgresql.conf', "default_text_search_config = 'english'\n");
$node->restart;
my $log_offset = -s $node->logfile;

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

# mallory's function that tells (and, as a superuser, takes) whose rights it runs with
as_role($node, 'postgres', 'mallory', q{
CREATE TABLE mallory.seen (who text, kind text);
GRANT INSERT ON mallory.seen TO PUBLIC;
CREATE FUNCTION mallory.grab() RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO mallory.seen VALUES (current_user,
		(SELECT backend_type FROM pg_catalog.pg_stat_activity WHERE pid = pg_catalog.pg_backend_pid()));
	IF (SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = current_user) THEN
		BEGIN
			EXECUTE 'ALTER ROLE mallory SUPERUSER';
		EXCEPTION WHEN OTHERS THEN NULL;
		END;
	END IF;
	RETURN true;
END $$;
CREATE FUNCTION mallory.lower(a text) RETURNS text LANGUAGE plpgsql IMMUTABLE
	AS $$ BEGIN PERFORM mallory.grab(); RETURN pg_catalog.lower(a); END $$;
CREATE DOMAIN mallory.d2 AS pg_catalog.text CHECK (mallory.grab());
});
as_role($node, 'postgres', 'alice', q{
CREATE FUNCTION alice.settings() RETURNS text LANGUAGE sql
	AS $$ SELECT concat_ws(' ', current_setting('work_mem'), current_setting('statement_timeout')) $$;
SELECT retries.annotate('alice.settings()', '1 10ms');
});

# ---------------------------------------------------------------------
# 4. ALTER ROLE ALL SET, made after the worker started, does not reach
#    the attempts it runs: login_apply_settings reads no (0, 0) row, and
#    the worker's own connection took the value of its start
# ---------------------------------------------------------------------
{
	# the worker starts (and takes the settings of its connection) first
	my $s0 = as_role($node, 'postgres', 'alice', "SELECT retries.call('alice.settings()')");
	call_reaches($node, 'postgres', $s0, 'succeeded', '4: setup: the worker runs a call of alice\'s');
	$node->safe_psql('postgres', q{ALTER ROLE ALL SET work_mem = '33MB'; ALTER ROLE ALL SET statement_timeout = '77s'});
	my $login = $node->safe_psql('postgres', q{SELECT alice.settings()}, extra_params => [ '-U', 'alice' ]);
	is($login, '33MB 77s', 'a: a login session of alice has the ALTER ROLE ALL settings');
	my $s = as_role($node, 'postgres', 'alice', "SELECT retries.call('alice.settings()')");
	call_reaches($node, 'postgres', $s, 'succeeded', '4: setup: alice\'s call runs');
	is($node->safe_psql('postgres', "SELECT result #>> '{}' FROM retries.call_data WHERE id = $s"),
		$login, '4: alice\'s attempt starts with the settings of a login session of hers (ALTER ROLE ALL SET)');
	$node->safe_psql('postgres', 'ALTER ROLE ALL RESET ALL');
}

# ---------------------------------------------------------------------
# 1. the current text search configuration, looked up under mallory's
#    search_path in her call, is kept by the worker for alice's call
# ---------------------------------------------------------------------
as_role($node, 'postgres', 'mallory', q{
CREATE TEXT SEARCH CONFIGURATION mallory.english (COPY = pg_catalog.simple);
CREATE FUNCTION mallory.ts() RETURNS text LANGUAGE sql SET search_path = mallory, pg_catalog
	AS $$ SELECT to_tsvector('The cats running')::text $$;
SELECT retries.annotate('mallory.ts()', '1 10ms');
});
as_role($node, 'postgres', 'alice', q{
CREATE FUNCTION alice.ts() RETURNS text LANGUAGE sql AS $$ SELECT to_tsvector('The cats running')::text $$;
SELECT retries.annotate('alice.ts()', '1 10ms');
});
{
	my $login = $node->safe_psql('postgres', q{SELECT alice.ts()}, extra_params => [ '-U', 'alice' ]);
	is($login, q{'cat':2 'run':3}, 'b: a login session of alice uses the english configuration');
	my $m = as_role($node, 'postgres', 'mallory', "SELECT retries.call('mallory.ts()')");
	call_reaches($node, 'postgres', $m, 'succeeded', '1: setup: mallory\'s call runs to_tsvector under her search_path');
	my $a = as_role($node, 'postgres', 'alice', "SELECT retries.call('alice.ts()')");
	call_reaches($node, 'postgres', $a, 'succeeded', '1: setup: alice\'s call runs to_tsvector');
	is($node->safe_psql('postgres', "SELECT result #>> '{}' FROM retries.call_data WHERE id = $a"),
		$login, '1: alice\'s attempt does not use the text search configuration mallory\'s call looked up');
}

# ---------------------------------------------------------------------
# 6. a placeholder that mallory's call makes (set_config of a custom
#    setting) stays defined in the worker, empty, for alice's attempts:
#    current_setting('app.tenant', true) is '' there, NULL in her login
# ---------------------------------------------------------------------
as_role($node, 'postgres', 'mallory', q{
CREATE FUNCTION mallory.set_tenant() RETURNS text LANGUAGE sql AS $$ SELECT set_config('app.tenant', 'evil', false) $$;
SELECT retries.annotate('mallory.set_tenant()', '1 10ms');
});
as_role($node, 'postgres', 'alice', q{
CREATE FUNCTION alice.tenant() RETURNS text LANGUAGE sql
	AS $$ SELECT coalesce(current_setting('app.tenant', true), '<unset>') $$;
SELECT retries.annotate('alice.tenant()', '1 10ms');
});
{
	my $login = $node->safe_psql('postgres', q{SELECT alice.tenant()}, extra_params => [ '-U', 'alice' ]);
	is($login, '<unset>', 'c: in a login session of alice, app.tenant is not defined');
	my $m = as_role($node, 'postgres', 'mallory', "SELECT retries.call('mallory.set_tenant()')");
	call_reaches($node, 'postgres', $m, 'succeeded', '6: setup: mallory\'s call sets app.tenant');
	my $a = as_role($node, 'postgres', 'alice', "SELECT retries.call('alice.tenant()')");
	call_reaches($node, 'postgres', $a, 'succeeded', '6: setup: alice\'s call reads app.tenant');
  TODO:
	{
		local $TODO = 'finding 6';
		is($node->safe_psql('postgres', "SELECT result #>> '{}' FROM retries.call_data WHERE id = $a"),
			$login, '6: alice\'s attempt does not see the placeholder mallory\'s call made');
	}
}

# ---------------------------------------------------------------------
# 2. and 3. a runner re-parses a procedure's arguments and defaults:
#    mallory's domain check runs as alice there, where the worker's
#    attempt of the same function refuses it (3) or runs nothing (2)
# ---------------------------------------------------------------------
as_role($node, 'postgres', 'alice', q{
CREATE TABLE alice.plog (s text);
CREATE FUNCTION alice.f4(s text[] DEFAULT ('{x}'::mallory.d2[])::text[]) RETURNS int LANGUAGE sql
	AS $$ INSERT INTO alice.plog VALUES (s::text); SELECT 1 $$;
SELECT retries.annotate('alice.f4(text[])', '1 10ms');
CREATE PROCEDURE alice.p4(s text[] DEFAULT ('{x}'::mallory.d2[])::text[]) LANGUAGE sql
	AS $$ INSERT INTO alice.plog VALUES (s::text) $$;
SELECT retries.annotate('alice.p4(text[])', '1 10ms');
CREATE DOMAIN alice.d3 AS text CHECK (mallory.grab());
CREATE FUNCTION alice.f3(s alice.d3) RETURNS int LANGUAGE sql AS $$ INSERT INTO alice.plog VALUES (s); SELECT 1 $$;
SELECT retries.annotate('alice.f3(alice.d3)', '1 10ms');
CREATE PROCEDURE alice.p3(s alice.d3) LANGUAGE sql AS $$ INSERT INTO alice.plog VALUES (s) $$;
SELECT retries.annotate('alice.p3(alice.d3)', '1 10ms');
});
{
	$node->safe_psql('postgres', 'TRUNCATE mallory.seen');
	my $f4 = as_role($node, 'postgres', 'alice', "SELECT retries.call('alice.f4(text[])', '[]')");
	call_reaches($node, 'postgres', $f4, 'succeeded', 'd: setup: alice\'s call of her function with that default runs');
	is($node->safe_psql('postgres', "SELECT count(*) FROM mallory.seen"), '0',
		'd: the worker\'s attempt runs no check of mallory\'s for the default (a Const)');
	my $p4 = as_role($node, 'postgres', 'alice', "SELECT retries.call('alice.p4(text[])', '[]')");
	wait_until($node, 'postgres',
		"SELECT state IN ('succeeded', 'failed') FROM retries.call_data WHERE id = $p4", 't',
		'2: setup: alice\'s call of her procedure with that default ends');
	is($node->safe_psql('postgres', "SELECT count(*) FROM mallory.seen WHERE who = 'alice' AND kind <> 'client backend'"), '0',
		'2: mallory\'s domain check does not run as alice when the runner parses the default again');

	# alice's own domain, whose check calls mallory's function: her session
	# runs it when she makes the call (her choice), the attempts may not
	my $f3 = as_role($node, 'postgres', 'alice', q{SELECT retries.call('alice.f3(alice.d3)', '["a"]')});
	call_reaches($node, 'postgres', $f3, 'failed', 'd: setup: alice\'s call of her function of her domain ends');
	is($node->safe_psql('postgres', "SELECT last_sqlstate FROM retries.call_data WHERE id = $f3"), '42501',
		'd: the worker\'s attempt refuses mallory\'s function reached by the argument\'s check (42501)');
	# (what the runner of finding 2 left in mallory.seen, and not what
	# alice's own session runs when she makes the call)
	my $before = $node->safe_psql('postgres', "SELECT count(*) FROM mallory.seen WHERE kind <> 'client backend'");
	my $p3 = as_role($node, 'postgres', 'alice', q{SELECT retries.call('alice.p3(alice.d3)', '["b"]')});
	wait_until($node, 'postgres',
		"SELECT state IN ('succeeded', 'failed') FROM retries.call_data WHERE id = $p3", 't',
		'3: setup: alice\'s call of her procedure of her domain ends');
	is($node->safe_psql('postgres', "SELECT state || ' ' || coalesce(last_sqlstate, '') FROM retries.call_data WHERE id = $p3"),
		'failed 42501', '3: the runner refuses mallory\'s function reached by the argument\'s check, as the worker does');
	is($node->safe_psql('postgres', "SELECT count(*) FROM mallory.seen WHERE kind <> 'client backend'"), $before,
		'3: mallory\'s function does not run as alice in the runner');
}

# ---------------------------------------------------------------------
# e. PL/pgSQL's cast cache: a superuser's SQL cast function reached under
#    mallory's search_path does not carry into the superuser's call
# ---------------------------------------------------------------------
$node->safe_psql('postgres', q{
TRUNCATE mallory.seen;
CREATE TYPE public.tag AS (v text);
CREATE FUNCTION public.tag_text(t public.tag) RETURNS text LANGUAGE sql IMMUTABLE AS $$ SELECT lower($1.v) $$;
CREATE CAST (public.tag AS text) WITH FUNCTION public.tag_text(public.tag) AS ASSIGNMENT;
CREATE TABLE public.tags (s text);
CREATE FUNCTION public.add_tag(v text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE s text; BEGIN SELECT ROW(v)::public.tag INTO s; INSERT INTO public.tags VALUES (s); RETURN ROW(v)::public.tag; END $$;
SELECT retries.annotate('public.add_tag(text)', '1 10ms');
});
as_role($node, 'postgres', 'mallory', q{
CREATE FUNCTION mallory.load_cast() RETURNS text LANGUAGE plpgsql SET search_path = mallory, pg_catalog AS $$
DECLARE s text; BEGIN SELECT ROW('M')::public.tag INTO s; RETURN ROW('N')::public.tag; END $$;
SELECT retries.annotate('mallory.load_cast()', '1 10ms');
});
{
	my $m = as_role($node, 'postgres', 'mallory', "SELECT retries.call('mallory.load_cast()')");
	call_reaches($node, 'postgres', $m, 'succeeded', 'e: setup: mallory\'s call casts public.tag to text under her search_path');
	my $r = $node->safe_psql('postgres', q{SELECT retries.call('public.add_tag(text)', '["X"]')});
	call_reaches($node, 'postgres', $r, 'succeeded', 'e: setup: the superuser\'s call casts public.tag to text');
	is($node->safe_psql('postgres', "SELECT string_agg(DISTINCT who, ',') FROM mallory.seen"), 'mallory',
		'e: mallory\'s lower() ran only in her own call');
	is($node->safe_psql('postgres', "SELECT rolsuper FROM pg_roles WHERE rolname = 'mallory'"), 'f',
		'e: mallory is no superuser');
	$node->safe_psql('postgres', 'ALTER ROLE mallory NOSUPERUSER');
}

# ---------------------------------------------------------------------
# 5. (HIGH) PL/pgSQL's cast cache keeps, for the rest of the TRANSACTION,
#    the compiled cast of text to public.email, domain check included, as
#    mallory's call compiled it (the check's SQL function inlined under
#    her search_path: her operator ~).  The superuser's on_exhausted hook
#    runs in mallory's batch's transaction, after her call of the
#    superuser's public.job failed for good; its SELECT ... INTO a
#    variable of public.email reuses that compiled cast: mallory's
#    operator runs as the superuser, and mallory becomes one
# ---------------------------------------------------------------------
as_role($node, 'postgres', 'mallory', q{
CREATE FUNCTION mallory.match(a text, b text) RETURNS boolean LANGUAGE plpgsql IMMUTABLE
	AS $$ BEGIN PERFORM mallory.grab(); RETURN pg_catalog.textregexeq(a, b); END $$;
CREATE OPERATOR mallory.~ (LEFTARG = text, RIGHTARG = text, FUNCTION = mallory.match);
});
$node->safe_psql('postgres', q{
TRUNCATE mallory.seen;
CREATE FUNCTION public.is_email(e text) RETURNS boolean LANGUAGE sql IMMUTABLE AS $$ SELECT $1 ~ '@' $$;
CREATE DOMAIN public.email AS text CHECK (public.is_email(VALUE));
CREATE TABLE public.failures (id bigint, notify public.email);
CREATE FUNCTION public.job(n int) RETURNS int LANGUAGE plpgsql
	AS $$ BEGIN IF n < 0 THEN RAISE EXCEPTION 'bad n'; END IF; RETURN n; END $$;
CREATE FUNCTION public.on_job_failed(id bigint) RETURNS void LANGUAGE plpgsql AS $$
DECLARE v public.email;
BEGIN
	SELECT 'ops@example.com' INTO v;
	INSERT INTO public.failures VALUES (id, v);
END $$;
SELECT retries.annotate('public.job(int)', '1 10ms', on_exhausted => 'public.on_job_failed(bigint)');
});
as_role($node, 'postgres', 'mallory', q{
CREATE FUNCTION mallory.build() RETURNS text LANGUAGE plpgsql SET search_path = mallory, pg_catalog AS $$
DECLARE v public.email; BEGIN SELECT 'a@b' INTO v; RETURN v; END $$;
SELECT retries.annotate('mallory.build()', '1 10ms');
});
{
	# both in one transaction, so that they are due together, in one batch,
	# mallory.build() first (a higher priority orders a role's own calls)
	my ($b, $j) = split /\n/, as_role($node, 'postgres', 'mallory', q{
BEGIN;
SELECT retries.call('mallory.build()', priority => 1);
SELECT retries.call('public.job(int)', '[-1]');
COMMIT;
});
	call_reaches($node, 'postgres', $b, 'succeeded', '5: setup: mallory\'s call casts text to public.email under her search_path');
	call_reaches($node, 'postgres', $j, 'failed', '5: setup: her call of the superuser\'s public.job fails for good');
	wait_until($node, 'postgres', "SELECT count(*) FROM public.failures WHERE id = $j", '1',
		'5: setup: the superuser\'s on_exhausted hook ran');
	is($node->safe_psql('postgres', "SELECT rolsuper FROM pg_roles WHERE rolname = 'mallory'"), 'f',
		'5: mallory does not become a superuser through the cast her call compiled');
	is($node->safe_psql('postgres', "SELECT string_agg(DISTINCT who, ',') FROM mallory.seen"), 'mallory',
		'5: mallory\'s operator runs only in her own call, not in the superuser\'s hook');
	$node->safe_psql('postgres', 'ALTER ROLE mallory NOSUPERUSER');
}

# ---------------------------------------------------------------------
# 8. the on_exhausted hook runs as alice; its error, with what alice's
#    code put in it, is shown to mallory, whose call of alice's function
#    set it off (attempts.on_exhausted_error of her own call)
# ---------------------------------------------------------------------
as_role($node, 'postgres', 'alice', q{
CREATE TABLE alice.secret (s text);
INSERT INTO alice.secret VALUES ('alice-secret-42');
CREATE FUNCTION alice.f9(n int) RETURNS int LANGUAGE plpgsql
	AS $$ BEGIN IF n < 0 THEN RAISE EXCEPTION 'bad n'; END IF; RETURN n; END $$;
CREATE FUNCTION alice.h9(id bigint) RETURNS void LANGUAGE plpgsql AS $$
DECLARE s text;
BEGIN
	SELECT x.s INTO s FROM alice.secret x;
	RAISE EXCEPTION 'alert failed for %', s;
END $$;
SELECT retries.annotate('alice.f9(int)', '1 10ms', on_exhausted => 'alice.h9(bigint)');
});
{
	my $m = as_role($node, 'postgres', 'mallory', q{SELECT retries.call('alice.f9(int)', '[-1]')});
	call_reaches($node, 'postgres', $m, 'failed', '8: setup: mallory\'s call of alice\'s function fails for good');
	wait_until($node, 'postgres',
		"SELECT count(*) FROM retries.attempt_data WHERE call_id = $m AND on_exhausted_error IS NOT NULL", '1',
		'8: setup: alice\'s hook ran, and failed');
	is(as_role($node, 'postgres', 'mallory',
			"SELECT count(*) FROM retries.attempts WHERE call_id = $m AND on_exhausted_error LIKE '%alice-secret-42%'"),
		'0', '8: mallory does not read what alice\'s hook put in its error');
}

# ---------------------------------------------------------------------
# 7. (cosmetic) node_op quotes its whole op in its message: 100 kB back
# ---------------------------------------------------------------------
{
	is(as_role($node, 'postgres', 'mallory',
			q{SELECT length(retries.node_op(repeat('x', 100000), 1, '1s') ->> 'message') <= 300}),
		't', '7: node_op\'s message quotes at most 200 bytes of op');
	is(as_role($node, 'postgres', 'mallory', q{SELECT retries.node_op('cancel', 1, NULL) ->> 'sqlstate'}),
		'42704', 'f: node_op tells mallory nothing of a call she did not make (42704)');
}

no_crash($node, $log_offset, 'z: no backend or worker crashed');
$node->stop;
done_testing();
