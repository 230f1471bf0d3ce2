# Thirty-third hostile review (rv33, of 5cbeff1: the fixes of rv32,
# t/066_review_29.pl; issue 42, "whose code runs with whose rights"; 40
# minutes, by a reviewer who did not write the code).  alice is the victim,
# mallory an ordinary role (CREATEDB, as pool_review_node gives her).  The
# node runs the DEFAULTS of the pool (pool_review_node).  Each numbered
# check failed on the code reviewed, inside a TODO block named "finding N";
# the lettered ones held.
# Both findings fixed since (their TODO blocks gone): proctext.c
# check_param_domains runs before the arguments are converted, and it and
# check_defaults walk arrays, composites, ranges and multiranges
# (type_checks_foreign).
#
# Findings:
#   1. (Low; alice's own procedure whose parameter's type REACHES alice's
#      own domain whose CHECK calls mallory's function, which alice may
#      call) rv32's finding 3 was fixed by check_param_domains
#      (proctext.c), which looks at the parameter's type and, for an
#      array, its element: domain_checks_foreign() follows a domain's chain
#      of domains only.  A composite whose field is of that domain
#      (alice.pc(alice.comp), comp AS (a alice.d3)) and a domain over an
#      array of it (alice.pa(alice.d4), d4 AS alice.d3[]) pass; so does a
#      default that is a literal of such a composite
#      (alice.pdef(s text DEFAULT ('(x)'::alice.comp)::text)):
#      check_defaults' Const walk (call_args_foreign_domain) asks only
#      whether the type reaches a domain OWNED by another role, and
#      alice.d3 is hers.  The runner then converts the arguments
#      (call_args_build) and reads the CALL's text again (record_in,
#      array_in, range_in -> domain_in): mallory.grab() runs as alice in
#      the runner, and the four calls succeed, where the worker's attempt of the
#      function of the same shape, alice.fc(alice.comp), fails with 42501
#      ("arguments can no longer be converted: making the call's arguments
#      would run function mallory.grab()", check a), as alice.p3(alice.d3)
#      does in the runner since rv32 (check b).  Same class and severity as
#      rv32's 2 and 3 (alice's session runs the check when she makes the
#      call of a parameter, not for a default): the runner runs a function
#      of another role while it makes the arguments, against
#      architecture.md's table.  A range over the domain, CREATE TYPE
#      alice.rng AS RANGE (subtype = alice.d3), passes the same way
#      (alice.pr(alice.rng) here; by hand, the function alice.fr(alice.rng)
#      failed with 42501 in the worker), and so does a multirange of such
#      a range, by hand (alice.pmr(alice.mrng2) succeeded, mallory's
#      function having run four times in the runner).
#      A fix: walk the parameter's type as foreign_domain (call_args.c)
#      does, arrays, composites, ranges, multiranges and domains over any
#      of them, and ask domain_checks_foreign() of every domain reached;
#      in check_defaults, ask the same of a Const's type.
#   2. (Low; the same shape as rv32's 3: alice's procedure whose parameter
#      is of her own domain whose CHECK calls mallory's function) the
#      runner's refusal of rv32's 3 comes after the fact: proctext_build
#      calls call_args_build (which converts the arguments, domain_in
#      running the domain's checks, so mallory's function runs as alice in
#      the runner) before check_param_domains refuses (42501).  The
#      refusal rolls back what mallory's function wrote (so t/066 3,
#      which counts rows of mallory.seen, passes), but not what is not
#      transactional: here nextval() of a sequence of mallory's, which
#      advances once more in the runner of alice.p8(alice.d8), whose call
#      fails with 42501 all the same.  By hand, the same function also
#      ends alice's login sessions (pg_terminate_backend of her own
#      backends, which anything run as alice, the runner connected as her
#      too, may do).  The worker refuses before the function runs: by
#      hand, alice.f8(alice.d8) failed with 42501 and the sequence did not
#      move (the fmgr routing of sandbox_make_args).  A VARIADIC
#      parameter of the domain's array does the same, by hand.  A fix: run
#      check_param_domains before call_args_build (it needs only the
#      function; call_args_build evaluates no default, so check_defaults
#      may stay after it).
#
# Held (lettered checks, and by hand):
#   a. the worker's attempt of alice.fc(alice.comp) refuses mallory.grab()
#      reached by the composite's field's domain check (42501): the
#      control of 1.
#   b. the runner refuses alice.p3(alice.d3), the parameter of the domain
#      itself, with 42501 (rv32's 3; but see 2: only after the check ran).
#   c. an inlinable SQL function of mallory's (a body of built-ins only:
#      lo_from_bytea, which leaves a large object owned by whoever runs
#      it) named in a default of alice's own function is refused by the
#      worker's attempt (42501) before anything runs, as the PL/pgSQL one
#      is: inlining does not hide it (the defaults are walked, not only
#      routed through fmgr).
#   d. the same inlinable function in the CHECK of alice's own domain, her
#      function's parameter: the worker's attempt refuses it (42501), and
#      no large object of alice's is made by a worker.
#   e. the runner refuses alice.p8(alice.d8) with 42501 (the control of 2).
#   z. no backend or worker crashed.
#   By hand (not in this file): see /work/rv33-report.md.

use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RetriesTest;
use Test::More;

my $node = pool_review_node('review_30');
my $log_offset = -s $node->logfile;

# mallory's function that tells whose rights it runs with, and where
as_role($node, 'postgres', 'mallory', q{
CREATE TABLE mallory.seen (who text, kind text);
GRANT INSERT ON mallory.seen TO PUBLIC;
CREATE FUNCTION mallory.grab() RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO mallory.seen VALUES (current_user,
		(SELECT backend_type FROM pg_catalog.pg_stat_activity WHERE pid = pg_catalog.pg_backend_pid()));
	RETURN true;
END $$;
});

# ---------------------------------------------------------------------
# 1. a parameter whose type reaches alice's domain (whose check calls
#    mallory.grab()) through a composite, or a domain over an array, and
#    a literal default of such a composite: the runner runs mallory's
#    function as alice, where the worker's attempt refuses it
# ---------------------------------------------------------------------
as_role($node, 'postgres', 'alice', q{
CREATE TABLE alice.plog (s text);
CREATE DOMAIN alice.d3 AS text CHECK (mallory.grab());
CREATE TYPE alice.comp AS (a alice.d3);
CREATE DOMAIN alice.d4 AS alice.d3[];
CREATE FUNCTION alice.fc(s alice.comp) RETURNS int LANGUAGE sql
	AS $$ INSERT INTO alice.plog VALUES (s::text); SELECT 1 $$;
SELECT retries.annotate('alice.fc(alice.comp)', '1 10ms');
CREATE PROCEDURE alice.p3(s alice.d3) LANGUAGE sql AS $$ INSERT INTO alice.plog VALUES (s) $$;
SELECT retries.annotate('alice.p3(alice.d3)', '1 10ms');
CREATE PROCEDURE alice.pc(s alice.comp) LANGUAGE sql AS $$ INSERT INTO alice.plog VALUES (s::text) $$;
SELECT retries.annotate('alice.pc(alice.comp)', '1 10ms');
CREATE PROCEDURE alice.pa(s alice.d4) LANGUAGE sql AS $$ INSERT INTO alice.plog VALUES (s::text) $$;
SELECT retries.annotate('alice.pa(alice.d4)', '1 10ms');
CREATE PROCEDURE alice.pdef(s text DEFAULT ('(x)'::alice.comp)::text) LANGUAGE sql
	AS $$ INSERT INTO alice.plog VALUES (s) $$;
SELECT retries.annotate('alice.pdef(text)', '1 10ms');
CREATE TYPE alice.rng AS RANGE (subtype = alice.d3);
CREATE PROCEDURE alice.pr(s alice.rng) LANGUAGE sql AS $$ INSERT INTO alice.plog VALUES (s::text) $$;
SELECT retries.annotate('alice.pr(alice.rng)', '1 10ms');
});
{
	# (alice's own session runs the checks of the arguments she passes
	# when she makes the call; as_role's SET ROLE session, the
	# superuser's process, reads its backend_type as NULL: only the rows
	# written in a runner, connected as alice, count)
	my $runs = "SELECT count(*) FROM mallory.seen WHERE kind = 'retries runner'";
	my $ends = sub {
		my ($id, $name) = @_;
		wait_until($node, 'postgres',
			"SELECT state IN ('succeeded', 'failed') FROM retries.call_data WHERE id = $id", 't', $name);
	};
	my $outcome = sub {
		my ($id) = @_;
		return $node->safe_psql('postgres',
			"SELECT state || ' ' || coalesce(last_sqlstate, '') FROM retries.call_data WHERE id = $id");
	};

	my $fc = as_role($node, 'postgres', 'alice', q{SELECT retries.call('alice.fc(alice.comp)', '["(x)"]')});
	$ends->($fc, 'a: setup: alice\'s call of her function of her composite ends');
	is($outcome->($fc), 'failed 42501',
		'a: the worker\'s attempt refuses mallory\'s function reached by the composite\'s domain check (42501)');
	my $p3 = as_role($node, 'postgres', 'alice', q{SELECT retries.call('alice.p3(alice.d3)', '["x"]')});
	$ends->($p3, 'b: setup: alice\'s call of her procedure of her domain ends');
	is($outcome->($p3), 'failed 42501',
		'b: the runner refuses mallory\'s function reached by the parameter\'s domain check (42501)');
	my $before = $node->safe_psql('postgres', $runs);

	my $pc = as_role($node, 'postgres', 'alice', q{SELECT retries.call('alice.pc(alice.comp)', '["(x)"]')});
	my $pa = as_role($node, 'postgres', 'alice', q{SELECT retries.call('alice.pa(alice.d4)', '["{x}"]')});
	my $pd = as_role($node, 'postgres', 'alice', q{SELECT retries.call('alice.pdef(text)', '[]')});
	my $pr = as_role($node, 'postgres', 'alice', q{SELECT retries.call('alice.pr(alice.rng)', '["[a,b)"]')});
	$ends->($pc, '1: setup: alice\'s call of her procedure of the composite ends');
	$ends->($pa, '1: setup: alice\'s call of her procedure of the domain over an array ends');
	$ends->($pd, '1: setup: alice\'s call of her procedure with the composite literal default ends');
	$ends->($pr, '1: setup: alice\'s call of her procedure of a range over the domain ends');
	is($outcome->($pc), 'failed 42501',
		'1: the runner refuses mallory\'s function reached through a composite\'s field (as the worker does)');
	is($outcome->($pa), 'failed 42501',
		'1: the runner refuses mallory\'s function reached through a domain over an array');
	is($outcome->($pd), 'failed 42501',
		'1: the runner refuses mallory\'s function reached by reading a default\'s composite literal');
	is($outcome->($pr), 'failed 42501',
		'1: the runner refuses mallory\'s function reached through a range\'s bounds');
	is($node->safe_psql('postgres', $runs), $before,
		'1: mallory\'s function does not run as alice in the runner');
}

# ---------------------------------------------------------------------
# 2. the runner refuses alice.p8(alice.d8) only after call_args_build ran
#    the domain's check: mallory's function ran as alice, and what it did
#    that is not transactional (nextval) stays
# ---------------------------------------------------------------------
as_role($node, 'postgres', 'mallory', q{
CREATE SEQUENCE mallory.ran;
GRANT USAGE, UPDATE ON SEQUENCE mallory.ran TO PUBLIC;
CREATE FUNCTION mallory.grab3() RETURNS boolean LANGUAGE plpgsql
	AS $$ BEGIN PERFORM pg_catalog.nextval('mallory.ran'); RETURN true; END $$;
});
as_role($node, 'postgres', 'alice', q{
CREATE DOMAIN alice.d8 AS text CHECK (mallory.grab3());
CREATE PROCEDURE alice.p8(s alice.d8) LANGUAGE sql AS $$ SELECT 1 $$;
SELECT retries.annotate('alice.p8(alice.d8)', '1 10ms');
});
{
	# alice's session runs the check once when she makes the call (her
	# choice): the new sequence's last value is 1 then, and stays 1 unless
	# the runner runs the check again (a fixed mark: the runner may run
	# before the test could read one)
	my $p8 = as_role($node, 'postgres', 'alice', q{SELECT retries.call('alice.p8(alice.d8)', '["x"]')});
	my $mark = '1';
	wait_until($node, 'postgres',
		"SELECT state IN ('succeeded', 'failed') FROM retries.call_data WHERE id = $p8", 't',
		'2: setup: alice\'s call of her procedure of her domain (mallory\'s nextval in its check) ends');
	is($node->safe_psql('postgres',
			"SELECT state || ' ' || coalesce(last_sqlstate, '') FROM retries.call_data WHERE id = $p8"),
		'failed 42501', 'e: the runner refuses the parameter of the domain whose check calls mallory\'s function (42501)');
	is($node->safe_psql('postgres', 'SELECT last_value FROM mallory.ran'), $mark,
		'2: mallory\'s function does not run as alice in the runner before the refusal (her sequence stays)');
}

# ---------------------------------------------------------------------
# c, d. an inlinable SQL function of mallory's, in alice's own default and
#    in her own domain's check: the worker's attempt refuses it before it
#    runs (inlining would hide it from the fmgr routing)
# ---------------------------------------------------------------------
as_role($node, 'postgres', 'mallory', q{
CREATE FUNCTION mallory.inl() RETURNS text LANGUAGE sql
	AS $$ SELECT pg_catalog.lo_from_bytea(0, pg_catalog.convert_to(CURRENT_USER::text, 'UTF8'))::text $$;
CREATE FUNCTION mallory.inl2(t text) RETURNS boolean LANGUAGE sql
	AS $$ SELECT pg_catalog.lo_from_bytea(0, pg_catalog.convert_to(CURRENT_USER::text, 'UTF8')) > 0 $$;
});
as_role($node, 'postgres', 'alice', q{
CREATE FUNCTION alice.fi(s text DEFAULT mallory.inl()) RETURNS text LANGUAGE sql AS $$ SELECT s $$;
SELECT retries.annotate('alice.fi(text)', '1 10ms');
CREATE DOMAIN alice.d6 AS text CHECK (mallory.inl2(VALUE));
CREATE FUNCTION alice.f6(s alice.d6) RETURNS text LANGUAGE sql AS $$ SELECT s $$;
SELECT retries.annotate('alice.f6(alice.d6)', '1 10ms');
});
{
	# alice's own session runs her domain's check when she makes the call
	# (one large object of hers, her choice): the worker adds none
	my $los = $node->safe_psql('postgres', 'SELECT count(*) FROM pg_largeobject_metadata');
	my $fi = as_role($node, 'postgres', 'alice', q{SELECT retries.call('alice.fi(text)', '[]')});
	my $f6 = as_role($node, 'postgres', 'alice', q{SELECT retries.call('alice.f6(alice.d6)', '["x"]')});
	for my $c ([ $fi, 'c', 'a default' ], [ $f6, 'd', 'a domain check' ])
	{
		my ($id, $l, $what) = @$c;
		wait_until($node, 'postgres',
			"SELECT state IN ('succeeded', 'failed') FROM retries.call_data WHERE id = $id", 't',
			"$l: setup: alice's call with mallory's inlinable function in $what ends");
		is($node->safe_psql('postgres',
				"SELECT state || ' ' || coalesce(last_sqlstate, '') FROM retries.call_data WHERE id = $id"),
			'failed 42501', "$l: the worker refuses mallory's inlinable function in $what of alice's (42501)");
	}
	is($node->safe_psql('postgres', 'SELECT count(*) FROM pg_largeobject_metadata'), $los + 1,
		'c, d: no built-in of mallory\'s inlined body ran in the worker');
}

no_crash($node, $log_offset, 'z: no backend or worker crashed');
$node->stop;
done_testing();
