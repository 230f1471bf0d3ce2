# A hostile review of the coordinator speaking for the cluster on Citus
# (1.7): retries.annotate, unannotate, pause and resume made on the
# coordinator forwarded to every other node (src/base/citus.c), and
# retries.citus_setup()'s replay of the coordinator's policies and pauses
# onto the worker nodes (retries--1.6--1.7.sql, with retries.citus_owned).
#
# mallory is the attacker (an ordinary LOGIN role), alice the victim; both
# may create functions in schema shared.  Each test asserts the safe
# behaviour; a test that fails because of a weakness found by the review
# was marked TODO "finding N" (the suite stayed green) and the weakness is
# described here.  worker2 is added to the cluster in section 6.
#
# Findings (numbered checks; each failed on the code reviewed, in a TODO
# block, and each is fixed: see "Fixed" after them):
#   8 (high): the unannotate forwarded to the nodes is
#      "SELECT retries.unannotate(...) FROM retries.policies p WHERE p.fn =
#      '...'::pg_catalog.regprocedure" (annotate.c retries_unannotate's
#      tail): an unqualified '=' resolved on each node by the caller's
#      search_path there.  pg_catalog has no = (regprocedure, regprocedure)
#      (it matches oid = oid by binary coercion), so an exact-type operator
#      in any schema of that path wins.  mallory, able to create in public
#      (as every role could before PostgreSQL 15, and still can in a
#      database made then), creates public.= (regprocedure, regprocedure);
#      alice's unannotate on the coordinator then runs mallory's function
#      as alice on every worker node: it copied alice.secret into mallory's
#      table (or could do anything alice may).  Each annotate/unannotate
#      pair is one more run.
#   1 (medium): the forwarded call spells a float8 argument with the
#      caller's extra_float_digits: SET extra_float_digits = -15; then
#      annotate(..., multiplier => 1.5) gives the coordinator 1.5 and every
#      worker node 2 ("2" is what float8out prints).  citus.c arg_literal()
#      uses the type's output function under the session's settings.
#   2 (medium): citus_setup()'s replay has the same flaw: format('%L') of
#      p.multiplier under the superuser's extra_float_digits; a node added
#      later gets multiplier 2 for the coordinator's 1.5.
#   3 (medium): citus_setup() is not atomic across the worker nodes:
#      run_command_on_workers() commits on each node by itself, so when one
#      node fails (here: it lacks a function annotated on the coordinator,
#      55000) the others keep the replayed policies and pauses, although
#      citus_setup() raised.
#   4 (medium): a forwarded call by a superuser (or a retries_admin, for
#      pause/resume) lands on whatever function of that signature each node
#      has: mallory's shared.s(int) on the coordinator, alice's shared.s(int)
#      made on worker1 (citus.enable_ddl_propagation off, which any role may
#      set).  The superuser's annotate and pause of mallory's function
#      replace the policy of alice's function on worker1 and pause it,
#      holding alice's calls there.  citus_setup() guards its replay with
#      retries.citus_owned(); citus_forward_call() has no such check.
#   5 (low): a role that may not log in (a group role that owns the
#      functions, used with SET ROLE) can no longer annotate or pause its
#      functions on the coordinator: Citus connects to each node as that
#      role and the call fails with 08006 "role ... is not permitted to log
#      in"; the docs do not say so (on a plain server it works).
#   6 (medium): one ordinary role breaks citus_setup()'s replay for every
#      role: mallory annotates her function with max_attempts => 1, which
#      retries.policies shows as the policy text '0 1s 1h'; the replay
#      passes that text as policy, and annotate refuses a count of 0
#      (22023), so every worker node fails the whole replay (55000, with a
#      hint about missing functions): alice's policies and pauses no
#      longer reach a node added later, or a node that missed a change.
#      Cause: the replay in citus_setup() uses p.policy (format_policy,
#      src/core/policy.c policy_format: "0 ..." for one attempt) instead
#      of max_attempts, min_delay and max_delay.
#   7 (medium): annotate without a policy takes retries.default_policy,
#      a setting any role may SET: the coordinator uses the caller's
#      ('9 2s 1m'), the forwarded call says policy => NULL and each node
#      uses its own default ('5 1s 1h').  citus.c citus_forward_text()
#      forwards the argument, not the policy it resolved to (annotate.c
#      build_policy).
#
# Fixed (src/base/citus.c, annotate.c, retries--1.6--1.7.sql):
#   8: the forwarded unannotate compares OIDs with OPERATOR(pg_catalog.=);
#   1, 2: the forwarded call is written, and citus_setup() runs, with
#      extra_float_digits 3, IntervalStyle postgres and DateStyle ISO set
#      for the purpose;
#   3: citus_setup() replays through retries.citus_forward(), in its
#      transaction on every node (Citus's two-phase commit);
#   4: the forwarded call names its function through retries.citus_owned()
#      with its owner on the coordinator, whoever calls;
#   5: a role that cannot log in forwards over the session user's
#      connections, SET LOCAL ROLE to it on each node;
#   6: the replay gives max_attempts, min_delay and max_delay, not the
#      policy text;
#   7: annotate forwards the policy it resolved, not its arguments.
#
# Attacks that held (lettered checks, plain tests):
#   a. IntervalStyle sql_standard / iso_8601 / postgres_verbose and
#      DateStyle 'SQL, DMY' while annotating with intervals: the same policy
#      on every node;
#   b. a function name with $$, $q$, quotes, a backslash, a newline and
#      non-ASCII letters: the same function annotated on every node;
#      retry_on with NULL or odd elements is refused before anything is sent;
#   c. mallory's annotate and pause of her shared.s(int), which is alice's
#      on worker1: refused by worker1 (42501), nothing changes anywhere;
#   d. ROLLBACK TO SAVEPOINT takes back an annotate and a pause on every
#      node; PREPARE TRANSACTION after one is refused (0A000, Citus) and
#      leaves nothing prepared or changed; an error deferred to COMMIT
#      leaves no node changed; annotate, pause and resume after a parallel
#      query and a multi-shard UPDATE of a distributed table in the same
#      transaction work;
#   k. a node's error (42883) caught by a plpgsql exception block: the
#      block is taken back on every node, what follows commits everywhere;
#   m. a forwarded pause that waits on worker1 for a running attempt (held
#      on an advisory lock) ends at the caller's statement_timeout (57014),
#      pauses no node, and the attempt then ends;
#   e. annotate and pause made by a called function in a retries worker's
#      batch reach the node; when the attempt then fails, no node keeps them;
#   f. citus_setup(): a hook that is another role's function on the node
#      (mallory's function on the coordinator, with her shared.h(bigint) as
#      on_exhausted; alice's shared.h(bigint) on worker2) is refused, and
#      worker2 gets no policy of mallory's function;
#   g. citus_setup() replays 200 policies of an owner whose name needs
#      quotes, and their pauses, onto the node added later;
#   h. a database without Citus (CREATE EXTENSION citus not run): annotate
#      and pause act there as before;
#   i. a worker node down: annotate on the coordinator fails with the
#      connection error and leaves the coordinator unchanged;
#   l. citus_setup()'s replay, as a superuser, on a node where mallory has
#      her public.= (finding 8): runs none of her functions;
#   j. alice's forwarded annotate whose on_exhausted signature is mallory's
#      function on worker1 (made there): refused there (42501), no node
#      changed.
#
# Sections run in this order: 1, 7, a, b, c and 4, j, 8, 5, d, k, e, m,
# then section 6 (worker2 added: 3, f, 2 with l and g, 6), h, i.  After
# section 8, mallory's public.= stays on worker1: this test's own queries
# of retries.policies there (WHERE fn = '...'::regprocedure, as the
# superuser) run it too, which is why check l counts only the rows that
# citus_setup() itself could have made.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use lib "$FindBin::RealBin/..";
use CitusTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RetriesTest;
use Test::More;

citus_or_skip();
my @nodes = citus_cluster(WORKERS => 2, ADDED => 1);
my ($c, $w1, $w2) = @nodes;
my $DB = 'postgres';
my ($out, $err);

# the policy of FN on a node, every column of retries.policies, as text
sub policy_of
{
	my ($node, $fn) = @_;
	return $node->safe_psql($DB,
		"SELECT to_jsonb(p) - 'fn' - 'owner' FROM retries.policies p WHERE fn = '$fn'::regprocedure");
}

# the same policy on the coordinator and worker1
sub same_policy
{
	my ($fn, $name) = @_;
	my ($want, $got) = (policy_of($c, $fn), policy_of($w1, $fn));
	ok($want ne '' && $want eq $got, $name) or diag("coordinator: $want\nworker1: $got");
	return;
}

sub col_on_all
{
	my ($nodes, $col, $fn) = @_;
	return on_all($nodes, "SELECT $col FROM retries.policies WHERE fn = '$fn'::regprocedure");
}

$c->safe_psql($DB, q{
CREATE ROLE alice LOGIN;
CREATE ROLE mallory LOGIN;
CREATE ROLE team NOLOGIN;
GRANT team TO alice;
CREATE SCHEMA alice AUTHORIZATION alice;
CREATE SCHEMA mallory AUTHORIZATION mallory;
CREATE SCHEMA shared;
GRANT USAGE, CREATE ON SCHEMA shared TO alice, mallory, team;
GRANT USAGE ON SCHEMA alice TO mallory;
SET ROLE alice;
CREATE FUNCTION alice.f(i int) RETURNS int LANGUAGE sql AS 'SELECT i';
CREATE FUNCTION alice.g(i int) RETURNS int LANGUAGE sql AS 'SELECT i';
CREATE FUNCTION alice.m(i int) RETURNS int LANGUAGE sql AS 'SELECT i';
CREATE FUNCTION alice."x$$'\\
 ünï""$q$"(i int) RETURNS int LANGUAGE sql AS 'SELECT i';
});

# ---------------------------------------------------------------------
# 1. extra_float_digits
# ---------------------------------------------------------------------
as_role($c, $DB, 'alice',
	"SET extra_float_digits = -15; SELECT retries.annotate('alice.f(int)', '3 1s', multiplier => 1.5)");
{
	is(col_on_all([ $c, $w1 ], 'multiplier', 'alice.f(int)'), '1.5|1.5',
		'1: a multiplier of 1.5 annotated under extra_float_digits = -15 is 1.5 on every node');
}

# 7. retries.default_policy, the caller's setting
as_role($c, $DB, 'alice',
	"SET retries.default_policy = '9 2s 1m'; SELECT retries.annotate('alice.g(int)', multiplier => 3)");
{
	is(col_on_all([ $c, $w1 ], 'policy', 'alice.g(int)'), '9 2s 1m|9 2s 1m',
		'7: annotate without a policy under SET retries.default_policy gives every node the caller\'s default');
}

# ---------------------------------------------------------------------
# a. interval and date styles
# ---------------------------------------------------------------------
for my $style ('sql_standard', 'iso_8601', 'postgres_verbose')
{
	as_role($c, $DB, 'alice', qq{SET IntervalStyle = $style; SET DateStyle = 'SQL, DMY';
SELECT retries.annotate('alice.g(int)', max_attempts => 3, min_delay => '1 day 2 hours 0.000001 s',
	max_delay => '2 years 1 mon', timeout => '2 days 04:05:06.789', key_window => '0.000001 s',
	debounce_max => '3000 days 23:59:59.999999')});
	same_policy('alice.g(int)', "a: intervals annotated under IntervalStyle $style are the same on every node");
}

# ---------------------------------------------------------------------
# b. odd names and arguments
# ---------------------------------------------------------------------
as_role($c, $DB, 'alice', q{SELECT retries.annotate('alice."x$$''\\
 ünï""$q$"(int)', '3 1s', retry_on => '{RT,40001,08}', rate => '5/1s')});
is(on_all([ $c, $w1 ], "SELECT count(*) FROM retries.policies WHERE fn::text LIKE '%ünï%' AND retry_on = '{RT,40001,08}'"),
	'1|1', 'b: a name with dollar quotes, quotes, a backslash, a newline and unicode reaches worker1 intact');
($out, $err) = try_as($c, $DB, 'alice',
	q~SELECT retries.annotate('alice.g(int)', '4 1s', retry_on => ARRAY['RT', E'a,b\\"}{', NULL])~);
ok(!defined $out && $err =~ /ERROR:  22023/ && $err !~ /remote/,
	'b: odd retry_on elements are refused on the coordinator (22023)') or diag($err);

# ---------------------------------------------------------------------
# 4, c. a function of the same signature, another owner on worker1
# ---------------------------------------------------------------------
as_role($c, $DB, 'mallory', q{SET citus.enable_ddl_propagation = off;
CREATE FUNCTION shared.s(i int) RETURNS int LANGUAGE sql AS 'SELECT i';});
as_role($w1, $DB, 'alice', q{SET citus.enable_ddl_propagation = off;
CREATE FUNCTION shared.s(i int) RETURNS int LANGUAGE sql AS 'SELECT i';
SELECT retries.annotate('shared.s(int)', '2 1s');});
($out, $err) = try_as($c, $DB, 'mallory', "SELECT retries.pause('shared.s(int)')");
ok(!defined $out && $err =~ /ERROR:  42501/, 'c: mallory\'s pause of her shared.s, alice\'s on worker1, is refused (42501)')
  or diag($err);
($out, $err) = try_as($c, $DB, 'mallory', "SELECT retries.annotate('shared.s(int)', '9 1s')");
ok(!defined $out && $err =~ /ERROR:  42501/, 'c: so is her annotate') or diag($err);
is(on_all([ $c, $w1 ], "SELECT coalesce(string_agg(policy || '/' || paused, ','), 'none') FROM retries.policies WHERE fn = 'shared.s(int)'::regprocedure"),
	'none|2 1s/false', 'c: nothing changed on any node');
(undef, $out, $err) = $c->psql($DB,
	"\\set VERBOSITY verbose\nSELECT retries.annotate('shared.s(int)', '9 1s')");
like($err, qr/ERROR:  42501:.*function shared\.s\(integer\) is owned by role alice on this node, not by role mallory as on the coordinator/,
	'4: the superuser\'s annotate of mallory\'s shared.s is refused by worker1, where it is alice\'s (42501)');
(undef, $out, $err) = $c->psql($DB, "\\set VERBOSITY verbose\nSELECT retries.pause('shared.s(int)')");
like($err, qr/ERROR:  42501:/, '4: so is the superuser\'s pause');
is($w1->safe_psql($DB, "SELECT owner || '/' || policy || '/' || paused FROM retries.policies WHERE fn = 'shared.s(int)'::regprocedure"),
	'alice/2 1s/false',
	'4: the superuser\'s annotate and pause of mallory\'s shared.s leave alice\'s shared.s on worker1 alone');

# j. a hook whose signature is mallory's function on worker1
as_role($w1, $DB, 'mallory', q{SET citus.enable_ddl_propagation = off;
CREATE FUNCTION shared.h2(id bigint) RETURNS void LANGUAGE sql AS 'SELECT';});
as_role($c, $DB, 'alice', q{SET citus.enable_ddl_propagation = off;
CREATE FUNCTION shared.h2(id bigint) RETURNS void LANGUAGE sql AS 'SELECT';});
($out, $err) = try_as($c, $DB, 'alice', "SELECT retries.annotate('alice.f(int)', '4 1s', on_exhausted => 'shared.h2(bigint)')");
ok(!defined $out && $err =~ /ERROR:  42501:.*on_exhausted/s,
	'j: a forwarded annotate whose hook is mallory\'s function on worker1 is refused there (42501)') or diag($err);
is(col_on_all([ $c, $w1 ], "policy || '/' || (on_exhausted IS NULL)", 'alice.f(int)'), '3 1s/true|3 1s/true',
	'j: and changes no node');

# 8. unannotate's forwarded WHERE p.fn = ... runs an operator '=' found
# by the caller's search_path on the node: mallory's public.= for
# (regprocedure, regprocedure) (public writable, as before PostgreSQL 15)
$w1->safe_psql($DB, q{SET citus.enable_ddl_propagation = off;
GRANT CREATE ON SCHEMA public TO PUBLIC;
SET ROLE alice;
CREATE TABLE alice.secret (s text);
INSERT INTO alice.secret VALUES ('alice''s secret');
SET ROLE mallory;
CREATE TABLE mallory.loot (who name, what text);
GRANT USAGE ON SCHEMA mallory TO PUBLIC;
GRANT INSERT ON mallory.loot TO PUBLIC;
CREATE FUNCTION public.eq(a regprocedure, b regprocedure) RETURNS bool LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO mallory.loot SELECT current_user, (SELECT string_agg(s, ',') FROM alice.secret);
	RETURN a::oid = b::oid;
EXCEPTION WHEN insufficient_privilege THEN
	INSERT INTO mallory.loot SELECT current_user, NULL;
	RETURN a::oid = b::oid;
END $$;
CREATE OPERATOR public.= (LEFTARG = regprocedure, RIGHTARG = regprocedure, FUNCTION = public.eq);
});
as_role($c, $DB, 'alice', "SELECT retries.annotate('alice.g(int)', '2 1s'); SELECT retries.unannotate('alice.g(int)')");
{
	is($w1->safe_psql($DB, "SELECT coalesce(string_agg(who || ':' || coalesce(what, '-'), ','), 'none') FROM mallory.loot"),
		'none', '8: alice\'s unannotate on the coordinator runs no function of mallory\'s on worker1');
}
as_role($c, $DB, 'alice', "SELECT retries.annotate('alice.g(int)', '6 1s')");

# ---------------------------------------------------------------------
# 5. a role that may not log in
# ---------------------------------------------------------------------
as_role($c, $DB, 'alice', q{CREATE FUNCTION shared.t(i int) RETURNS int LANGUAGE sql AS 'SELECT i';
ALTER FUNCTION shared.t(int) OWNER TO team;});
($out, $err) = try_as($c, $DB, 'alice', "SET ROLE team; SELECT retries.annotate('shared.t(int)', '3 1s')");
{
	ok(defined $out, '5: a group role (NOLOGIN) that owns a function annotates it on the coordinator, as without Citus')
	  or diag($err);
}

# ---------------------------------------------------------------------
# d. savepoints, PREPARE TRANSACTION
# ---------------------------------------------------------------------
as_role($c, $DB, 'alice', q{BEGIN; SAVEPOINT s;
SELECT retries.annotate('alice.f(int)', '5 1s'); SELECT retries.pause('alice.f(int)');
ROLLBACK TO SAVEPOINT s; COMMIT;});
is(col_on_all([ $c, $w1 ], "policy || '/' || paused", 'alice.f(int)'), '3 1s/false|3 1s/false',
	'd: ROLLBACK TO SAVEPOINT takes back annotate and pause on every node');
($out, $err) = try_as($c, $DB, 'alice',
	q{BEGIN; SELECT retries.annotate('alice.f(int)', '6 1s'); PREPARE TRANSACTION 'rv28c';});
ok(!defined $out && $err =~ /ERROR:  0A000/, 'd: PREPARE TRANSACTION after a forwarded annotate is refused (0A000)')
  or diag($err);
is(col_on_all([ $c, $w1 ], 'policy', 'alice.f(int)') . '/' . prepared_xacts($c, $w1), '3 1s|3 1s/0',
	'd: and leaves nothing changed or prepared');

# a deferred error at COMMIT; after a parallel query of a distributed table
as_role($c, $DB, 'alice', q{
CREATE TABLE alice.d (k int PRIMARY KEY, v int);
SELECT create_distributed_table('alice.d', 'k');
INSERT INTO alice.d SELECT i, i FROM generate_series(1, 100) i;
CREATE TABLE alice.defer (x int);
CREATE FUNCTION alice.no() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN RAISE EXCEPTION 'deferred' USING ERRCODE = 'XX124'; END $$;
CREATE CONSTRAINT TRIGGER no AFTER INSERT ON alice.defer DEFERRABLE INITIALLY DEFERRED
	FOR EACH ROW EXECUTE FUNCTION alice.no();
});
($out, $err) = try_as($c, $DB, 'alice',
	q{BEGIN; SELECT retries.annotate('alice.f(int)', '6 1s'); INSERT INTO alice.defer VALUES (1); COMMIT;});
ok(!defined $out && $err =~ /XX124/, 'd: setup: an error deferred to COMMIT after a forwarded annotate') or diag($err);
is(col_on_all([ $c, $w1 ], 'policy', 'alice.f(int)'), '3 1s|3 1s', 'd: leaves no node changed');
($out, $err) = try_as($c, $DB, 'alice',
	q{BEGIN; SELECT count(*) FROM alice.d; UPDATE alice.d SET v = v + 1; SELECT retries.annotate('alice.f(int)', '3 1s'); SELECT retries.pause('alice.f(int)'); SELECT retries.resume('alice.f(int)'); COMMIT;});
ok(defined $out, 'd: annotate and pause after a parallel query and update of a distributed table in the transaction')
  or diag($err);

# k. a plpgsql exception block that catches a node's error
as_role($c, $DB, 'alice', q{SET citus.enable_ddl_propagation = off;
CREATE FUNCTION alice.here(i int) RETURNS int LANGUAGE sql AS 'SELECT i';});
($out, $err) = try_as($c, $DB, 'alice', q{DO $$ BEGIN
	BEGIN
		PERFORM retries.annotate('alice.f(int)', '5 1s');
		PERFORM retries.annotate('alice.here(int)', '5 1s');
	EXCEPTION WHEN undefined_function THEN NULL;
	END;
	PERFORM retries.annotate('alice.g(int)', '6 1s');
END $$});
is((defined $out ? 'done' : $err) . '/' . col_on_all([ $c, $w1 ], 'policy', 'alice.f(int)') . '/'
	  . col_on_all([ $c, $w1 ], 'policy', 'alice.g(int)') . '/'
	  . on_all([ $c, $w1 ], "SELECT count(*) FROM retries.policies WHERE fn::text LIKE 'alice.here%'"),
	'done/3 1s|3 1s/6 1s|6 1s/0|0',
	'k: a node\'s error caught by an exception block takes back the block on every node, and what follows commits on every node');

# ---------------------------------------------------------------------
# e. from a retries worker's batch
# ---------------------------------------------------------------------
as_role($c, $DB, 'alice', q{
CREATE FUNCTION alice.ann(i int) RETURNS int LANGUAGE plpgsql AS $$
BEGIN
	PERFORM retries.annotate('alice.g(int)', i || ' 1s');
	PERFORM retries.pause('alice.g(int)');
	IF i = 7 THEN RAISE EXCEPTION 'after annotating' USING ERRCODE = 'XX123'; END IF;
	RETURN i;
END $$;
SELECT retries.annotate('alice.ann(int)', '1 1s');
});
my $id = as_role($c, $DB, 'alice', "SELECT retries.call('alice.ann(int)', '[4]')");
call_reaches($c, $DB, $id, 'succeeded', 'e: setup: a call that annotates and pauses succeeds');
is(col_on_all([ $c, $w1 ], "policy || '/' || paused", 'alice.g(int)'), '4 1s/true|4 1s/true',
	'e: its annotate and pause reached worker1');
$id = as_role($c, $DB, 'alice', "SELECT retries.call('alice.ann(int)', '[7]')");
call_reaches($c, $DB, $id, 'failed', 'e: setup: one that fails after annotating');
is(col_on_all([ $c, $w1 ], "policy || '/' || paused", 'alice.g(int)'), '4 1s/true|4 1s/true',
	'e: leaves no node changed');

# m. a forwarded pause that waits on worker1 for a running attempt
as_role($c, $DB, 'alice', q{
CREATE FUNCTION alice.slow(i int) RETURNS int LANGUAGE plpgsql AS $$
BEGIN PERFORM pg_advisory_xact_lock(4242); RETURN i; END $$;
SELECT retries.annotate('alice.slow(int)', '1 1s');});
my $hold = $w1->background_psql($DB, on_error_stop => 0);
$hold->query_safe('BEGIN; SELECT pg_advisory_xact_lock(4242)');
my $sid = as_role($w1, $DB, 'alice', "SELECT retries.call('alice.slow(int)', '[1]')");
wait_until($w1, $DB, "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted", '1',
	'm: setup: an attempt of alice.slow runs on worker1, held');
($out, $err) = try_as($c, $DB, 'alice', "SET statement_timeout = '2s'; SELECT retries.pause('alice.slow(int)')");
ok(!defined $out && $err =~ /ERROR:  57014/,
	'm: a forwarded pause that waits on worker1 for a running attempt ends at statement_timeout (57014)')
  or diag($err);
is(col_on_all([ $c, $w1 ], 'paused', 'alice.slow(int)'), 'f|f', 'm: and pauses no node');
$hold->query_safe('COMMIT');
$hold->quit;
call_reaches($w1, $DB, $sid, 'succeeded', 'm: the attempt then ends');

# ---------------------------------------------------------------------
# 6. citus_setup() onto worker2, added now
# ---------------------------------------------------------------------
$c->safe_psql($DB, q{CREATE ROLE "Odd ""Ro'le" LOGIN; GRANT USAGE, CREATE ON SCHEMA shared TO "Odd ""Ro'le"});
as_role($c, $DB, q{"Odd ""Ro'le"}, q{DO $$ BEGIN FOR i IN 1..200 LOOP
	EXECUTE format('CREATE FUNCTION shared.%I(i int) RETURNS int LANGUAGE sql AS ''SELECT i''', 'o' || i);
	PERFORM retries.annotate(format('shared.%I(int)', 'o' || i)::regprocedure, i || ' 1s', max_running => i);
	IF i % 2 = 0 THEN PERFORM retries.pause(format('shared.%I(int)', 'o' || i)::regprocedure); END IF;
END LOOP; END $$});
as_role($c, $DB, 'alice', "SELECT retries.annotate('alice.m(int)', '3 1s', multiplier => 1.5)");
# 3: alice.solo is the coordinator's and worker1's, not worker2's; its
# policy is the coordinator's only
as_role($c, $DB, 'alice', q{SET citus.enable_ddl_propagation = off;
CREATE FUNCTION alice.solo(i int) RETURNS int LANGUAGE sql AS 'SELECT i';
SELECT retries.annotate('alice.solo(int)', '2 1s'); SELECT retries.pause('alice.solo(int)');});
as_role($w1, $DB, 'alice', q{SET citus.enable_ddl_propagation = off;
CREATE FUNCTION alice.solo(i int) RETURNS int LANGUAGE sql AS 'SELECT i';});
$c->safe_psql($DB, "SELECT citus_add_node('" . $w2->host . "', " . $w2->port . ')');
(undef, $out, $err) = $c->psql($DB, "\\set VERBOSITY verbose\nSELECT retries.citus_setup()");
like($err, qr/ERROR:  55000:.*alice\.solo/, '3: setup: citus_setup() fails on worker2, which lacks alice.solo');
{
	is(on_all([ $w1, $w2 ], "SELECT count(*) FROM retries.policies WHERE fn::text LIKE 'alice.solo%'"),
		'0|0', '3: a citus_setup() that failed changed no worker node (worker1 keeps alice.solo\'s policy)');
}
as_role($c, $DB, 'alice', "SET citus.enable_ddl_propagation = off; SELECT retries.unannotate('alice.solo(int)')");

# f. a hook that is another role's function on the node
as_role($c, $DB, 'mallory', q{SET citus.enable_ddl_propagation = off;
CREATE FUNCTION shared.h(id bigint) RETURNS void LANGUAGE sql AS 'SELECT';
RESET citus.enable_ddl_propagation;
CREATE FUNCTION mallory.mm(i int) RETURNS int LANGUAGE sql AS 'SELECT i';
SET citus.enable_ddl_propagation = off;
SELECT retries.annotate('mallory.mm(int)', '2 1s', on_exhausted => 'shared.h(bigint)');});
as_role($w1, $DB, 'mallory', q{SET citus.enable_ddl_propagation = off;
CREATE FUNCTION shared.h(id bigint) RETURNS void LANGUAGE sql AS 'SELECT';});
as_role($w2, $DB, 'alice', q{SET citus.enable_ddl_propagation = off;
CREATE FUNCTION shared.h(id bigint) RETURNS void LANGUAGE sql AS 'SELECT';});
(undef, $out, $err) = $c->psql($DB, "\\set VERBOSITY verbose\nSELECT retries.citus_setup()");
like($err, qr/ERROR:  55000:.*on_exhausted/, 'f: citus_setup() refuses alice\'s shared.h on worker2 as the hook of mallory\'s function')
  or diag($err);
is($w2->safe_psql($DB, "SELECT count(*) FROM retries.policies WHERE fn = 'mallory.mm(int)'::regprocedure"),
	'0', 'f: and worker2 gives mallory\'s function no policy');
as_role($c, $DB, 'mallory', "SET citus.enable_ddl_propagation = off; SELECT retries.unannotate('mallory.mm(int)')");

# 2, g. the replay, under extra_float_digits = -15
# (the rows of mallory.loot made by the superuser: this test's own queries
# of retries.policies on worker1 use her '=' too, but none runs meanwhile)
my $loot = "SELECT count(*) FROM mallory.loot WHERE who NOT IN ('alice', 'mallory')";
my $before = $w1->safe_psql($DB, $loot);
$c->safe_psql($DB, 'SET extra_float_digits = -15; SELECT retries.citus_setup()');
is($w1->safe_psql($DB, $loot), $before,
	'l: citus_setup()\'s replay onto worker1, as a superuser, ran no function of mallory\'s');
{
	is(col_on_all([ $w2 ], 'multiplier', 'alice.m(int)'), '1.5',
		'2: citus_setup() under extra_float_digits = -15 gives worker2 the multiplier 1.5 of the coordinator');
}
is($w2->safe_psql($DB, q{SELECT count(*) || '/' || count(*) FILTER (WHERE paused) || '/' || sum(max_running)
	FROM retries.policies WHERE owner = '"Odd ""Ro''le"'::regrole}),
	'200/100/20100', 'g: worker2 gets the 200 policies and 100 pauses of a role whose name needs quotes');

# 6. a policy of one attempt (max_attempts => 1), which retries.policies
# shows as '0 1s', a policy text that annotate refuses
as_role($c, $DB, 'mallory', q{CREATE FUNCTION mallory.once(i int) RETURNS int LANGUAGE sql AS 'SELECT i';
SELECT retries.annotate('mallory.once(int)', max_attempts => 1, min_delay => '1 s');});
is(col_on_all([ $c, $w1, $w2 ], 'max_attempts', 'mallory.once(int)'), '1|1|1',
	'6: setup: mallory\'s policy of one attempt, forwarded, is on every node');
as_role($c, $DB, 'alice', q{SET citus.enable_ddl_propagation = off;
SELECT retries.annotate('alice.m(int)', '4 2s', multiplier => 3);});
(undef, $out, $err) = $c->psql($DB, "\\set VERBOSITY verbose\nSELECT retries.citus_setup()");
{
	is(col_on_all([ $c, $w1, $w2 ], "policy || '/' || multiplier", 'alice.m(int)'), '4 2s/3|4 2s/3|4 2s/3',
		'6: citus_setup() gives the worker nodes alice\'s policy, whatever mallory\'s policies are')
	  or diag($err);
}
as_role($c, $DB, 'mallory', "SELECT retries.unannotate('mallory.once(int)')");

# ---------------------------------------------------------------------
# h. a database without Citus
# ---------------------------------------------------------------------
$c->safe_psql($DB, 'SET citus.enable_create_database_propagation = off; CREATE DATABASE plain OWNER alice');
$c->safe_psql('plain', q{CREATE EXTENSION retries; SET ROLE alice;
CREATE FUNCTION p(i int) RETURNS int LANGUAGE sql AS 'SELECT i';
SELECT retries.annotate('p(int)', '3 1s', multiplier => 1.5); SELECT retries.pause('p(int)');});
is($c->safe_psql('plain', "SELECT policy || '/' || multiplier || '/' || paused FROM retries.policies"),
	'3 1s/1.5/true', 'h: in a database without Citus, annotate and pause act as before');

# ---------------------------------------------------------------------
# i. a worker node down
# ---------------------------------------------------------------------
$w2->stop('fast');
($out, $err) = try_as($c, $DB, 'alice', "SELECT retries.annotate('alice.f(int)', '8 1s')");
ok(!defined $out && $err =~ /ERROR:  08006/, 'i: annotate with worker2 down fails with the connection error (08006)')
  or diag($err);
is(col_on_all([ $c, $w1 ], 'policy', 'alice.f(int)'), '3 1s|3 1s', 'i: and changes no node');

done_testing();
