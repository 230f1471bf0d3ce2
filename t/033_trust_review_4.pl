# Fifth hostile review (of c798e1f: foreign_domain, check_trusted_params,
# trusted_default, check_omitted_defaults; the sandbox's routing while the
# arguments are made), by a reviewer who did not write the code.  alice is
# a victim, and the bootstrap superuser; mallory the attacker.  The
# numbered check failed on the code reviewed, and holds since
# foreign_domain() looks however deep, each type once:
#   1. foreign_domain() stopped looking at TYPE_DEPTH_MAX (16) levels: a
#      parameter of mallory's composite type nested 18 deep whose innermost
#      field is of mallory's domain passed check_trusted_params, and
#      retries.call() converted the argument in the caller's own session:
#      the domain's CHECK ran mallory's function as the superuser who
#      scheduled the call (and, for a procedure, in the runner as alice).
#
# Held (plain checks):
#   a. the same composite nested 16 deep (the domain at depth 16 of the
#      parameter's type, within the limit) is refused (42501).
#   b. a range and a multirange over mallory's domain, a VARIADIC array of
#      it, and alice's domain over mallory's domain are refused (42501).
#   c. alice's own domain whose CHECK calls mallory's SQL function (one the
#      planner inlines, its body calling retries.run_command) fails the
#      attempt in the worker (42501), and schedules no command there.
#   d. a superuser's function with non-constant defaults, called by alice
#      leaving them out, runs.

use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use RetriesTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $DB = 'postgres';
my $node = retries_node('trust_review_4');
$node->append_conf('postgresql.conf', q{
retries.max_workers = 2
retries.max_extra_workers = 2
retries.max_attempt_time = '1h'
});
$node->start;

sub sql
{
	my ($role, $sql, $db) = @_;
	return $node->safe_psql($db // $DB, "SET ROLE $role;\n$sql");
}

# the final state of call ID (succeeded or failed), and its SQLSTATE
sub final_state
{
	my ($id, $name) = @_;
	wait_until($node, $DB,
		"SELECT state IN ('succeeded', 'failed') FROM retries.calls WHERE id = $id",
		't', "$name (ends)");
	return $node->safe_psql($DB,
		"SELECT state || ' ' || coalesce(last_sqlstate, '') FROM retries.calls WHERE id = $id");
}

$node->safe_psql($DB, q{
CREATE EXTENSION retries;
CREATE ROLE alice LOGIN;
CREATE ROLE mallory LOGIN;
CREATE SCHEMA alice AUTHORIZATION alice;
CREATE SCHEMA mallory AUTHORIZATION mallory;
GRANT USAGE ON SCHEMA mallory TO PUBLIC;
CREATE FUNCTION public.su_fn(n int, a timestamptz DEFAULT now(),
	b text DEFAULT current_user::text) RETURNS text
	LANGUAGE sql AS $$ SELECT n || ' ' || (a IS NOT NULL) || ' ' || b $$;
SELECT retries.annotate('public.su_fn(int,timestamptz,text)', '1 10ms');
});
sql('mallory', q{
CREATE TABLE mallory.loot (v text);
GRANT INSERT ON mallory.loot TO PUBLIC;
CREATE FUNCTION mallory.grab(x int) RETURNS bool LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO mallory.loot VALUES ('grab as ' || current_user);
	RETURN true;
END $$;
CREATE DOMAIN mallory.d AS int CHECK (mallory.grab(VALUE));
CREATE TYPE mallory.dr AS RANGE (subtype = mallory.d);
DO $$
BEGIN
	EXECUTE 'CREATE TYPE mallory.c17 AS (x mallory.d)';
	FOR k IN REVERSE 16..0 LOOP
		EXECUTE format('CREATE TYPE mallory.c%s AS (x mallory.c%s)', k, k + 1);
	END LOOP;
END $$;
-- the text of a value of mallory.c<from>, nested down to mallory.d's 5
CREATE FUNCTION mallory.val(from_level int) RETURNS text LANGUAGE plpgsql AS $$
DECLARE v text := '(5)';
BEGIN
	FOR k IN from_level..16 LOOP
		v := '("' || replace(replace(v, '\', '\\'), '"', '""') || '")';
	END LOOP;
	RETURN v;
END $$;
CREATE FUNCTION mallory.api(n int, p mallory.c0) RETURNS int
	LANGUAGE sql SECURITY DEFINER AS 'SELECT n';
CREATE FUNCTION mallory.api2(n int, p mallory.c2) RETURNS int
	LANGUAGE sql SECURITY DEFINER AS 'SELECT n';
CREATE PROCEDURE mallory.proc(n int, p mallory.c0)
	LANGUAGE sql SECURITY DEFINER AS 'SELECT 1';
CREATE FUNCTION mallory.r(x mallory.dr) RETURNS int LANGUAGE sql AS 'SELECT 1';
CREATE FUNCTION mallory.mr(x mallory.dr_multirange) RETURNS int LANGUAGE sql AS 'SELECT 1';
CREATE FUNCTION mallory.v(VARIADIC x mallory.d[]) RETURNS int LANGUAGE sql AS 'SELECT 1';
CREATE FUNCTION mallory.inl(v int) RETURNS bool LANGUAGE sql VOLATILE AS $$
	SELECT v > 0 AND retries.run_command('INSERT INTO mallory.loot VALUES (''inl as '' || current_user)') > 0
$$;
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA mallory TO PUBLIC;
GRANT EXECUTE ON ALL PROCEDURES IN SCHEMA mallory TO PUBLIC;
SELECT retries.annotate('mallory.api(int,mallory.c0)', '1 10ms');
SELECT retries.annotate('mallory.api2(int,mallory.c2)', '1 10ms');
SELECT retries.annotate('mallory.proc(int,mallory.c0)', '1 10ms');
SELECT retries.annotate('mallory.r(mallory.dr)', '1 10ms');
SELECT retries.annotate('mallory.mr(mallory.dr_multirange)', '1 10ms');
SELECT retries.annotate('mallory.v(mallory.d[])', '1 10ms');
});
sql('alice', q{
CREATE DOMAIN alice.over AS mallory.d;
CREATE FUNCTION alice.o(x alice.over) RETURNS int LANGUAGE sql AS 'SELECT 1';
SELECT retries.annotate('alice.o(alice.over)', '1 10ms');
CREATE DOMAIN alice.ad AS int CHECK (mallory.inl(VALUE));
CREATE FUNCTION alice.fn(x alice.ad) RETURNS int LANGUAGE sql AS 'SELECT 1';
SELECT retries.annotate('alice.fn(alice.ad)', '1 10ms');
});
wait_until($node, $DB, workers_query($DB), '2', 'two workers');

my $su = $node->safe_psql($DB, 'SELECT current_user');

# ---------------------------------------------------------------------------
# 1. mallory's domain 18 levels down a composite: not seen
{
	$node->safe_psql($DB, 'TRUNCATE mallory.loot');
	my ($ret, $out, $err) = $node->psql($DB,
		"\\set VERBOSITY verbose\nSELECT retries.call('mallory.api(int,mallory.c0)', jsonb_build_array(1, mallory.val(0)))");
	like($err, qr/42501/,
		'1: the superuser\'s call with mallory\'s domain 18 levels down is refused');
	is($node->safe_psql($DB, "SELECT count(*) FROM mallory.loot WHERE v = 'grab as $su'"),
		'0', '1: mallory\'s CHECK did not run as the superuser at scheduling');
	$node->safe_psql($DB, 'TRUNCATE mallory.loot');
	($ret, $out, $err) = $node->psql($DB,
		"SET ROLE alice;\n\\set VERBOSITY verbose\nSELECT retries.call('mallory.proc(int,mallory.c0)', jsonb_build_array(1, mallory.val(0)))");
	like($err, qr/42501/, '1: alice\'s call of mallory\'s procedure is refused');
	if ($out =~ /^(\d+)$/)
	{
		final_state($1, '1 (procedure)');
		is($node->safe_psql($DB, "SELECT count(*) FROM mallory.loot WHERE v = 'grab as alice'"),
			'0', '1: mallory\'s CHECK did not run as alice (scheduling, runner)');
	}
}

# ---------------------------------------------------------------------------
# a, b: within the depth, ranges, multiranges, VARIADIC, nested domains
{
	$node->safe_psql($DB, 'TRUNCATE mallory.loot');
	for my $case (
		[ 'a', 'mallory.api2(int,mallory.c2)', 'jsonb_build_array(1, mallory.val(2))', 'mallory\'s domain 16 levels down' ],
		[ 'b', 'mallory.r(mallory.dr)', $node->safe_psql($DB, q{SELECT quote_literal('["[1,3)"]')}), 'a range over mallory\'s domain' ],
		[ 'b', 'mallory.mr(mallory.dr_multirange)', $node->safe_psql($DB, q{SELECT quote_literal('["{[1,3)}"]')}), 'a multirange over mallory\'s domain' ],
		[ 'b', 'mallory.v(mallory.d[])', q{'[[1, 2]]'}, 'a VARIADIC array of mallory\'s domain' ],
		[ 'b', 'alice.o(alice.over)', q{'[1]'}, 'alice\'s domain over mallory\'s' ])
	{
		my ($n, $fn, $args, $what) = @$case;
		my ($ret, $out, $err) = $node->psql($DB,
			"SET ROLE alice;\n\\set VERBOSITY verbose\nSELECT retries.call('$fn', $args)");
		like($err, qr/42501/, "$n: alice's call with $what is refused");
	}
	is($node->safe_psql($DB, 'SELECT count(*) FROM mallory.loot'), '0',
		'a, b: nothing of mallory\'s ran');
}

# ---------------------------------------------------------------------------
# c. alice's own domain whose CHECK calls mallory's inlinable SQL function
{
	$node->safe_psql($DB, 'TRUNCATE mallory.loot');
	my $c = sql('alice', "SELECT retries.call('alice.fn(alice.ad)', '[5]')");
	is(final_state($c, 'c'), 'failed 42501',
		'c: the attempt fails: mallory\'s inlined function is seen');
	# scheduling (alice's own session, her own domain) scheduled one command
	is($node->safe_psql($DB,
		"SELECT count(*) FROM retries.calls WHERE command IS NOT NULL AND scheduled_by = 'alice'::regrole"),
		'1', 'c: the worker scheduled no command as alice');
}

# ---------------------------------------------------------------------------
# d. a superuser's function with non-constant defaults, called by alice
{
	my $c = sql('alice', "SELECT retries.call('public.su_fn(int,timestamptz,text)', '[3]')");
	is(final_state($c, 'd'), 'succeeded ', 'd: the superuser\'s defaults run');
	is(sql('alice', "SELECT result #>> '{}' FROM retries.calls WHERE id = $c"),
		'3 true alice', 'd: as alice');
}

$node->stop;
done_testing();
