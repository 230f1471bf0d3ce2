# JIT: the workers' own statements are never JIT-compiled; a call's are,
# as in a login session of its role.
#
# The server runs with jit_above_cost = 0, so that every plan with
# expressions would be compiled.  A worker keeps its plans for its life and
# runs each one thousands of times a second; compiled, each execution would
# cost milliseconds of LLVM.  pg_stat_statements counts the functions JIT
# made for each statement: none for the worker's own statements (the ones
# that name pg_catalog's operators, which the test's queries do not), some
# for the call's INSERT.  (The session that makes the calls sets jit off:
# retries.call()'s own statements are planned as that session says.)
# Skipped where PostgreSQL lacks pg_stat_statements or LLVM (the
# assert-enabled build of scripts/pg-cassert has neither).

use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RetriesTest;
use Test::More;

my $node = retries_node('main');
plan skip_all => 'this PostgreSQL has no pg_stat_statements or no JIT (llvmjit)'
  if !has_library($node, 'pg_stat_statements') || !has_library($node, 'llvmjit');
$node->append_conf(
	'postgresql.conf', q{
shared_preload_libraries = 'retries,pg_stat_statements'
pg_stat_statements.track = all
jit = on
jit_above_cost = 0
jit_inline_above_cost = -1
jit_optimize_above_cost = -1
});
$node->start;
is($node->safe_psql('postgres', 'SELECT pg_jit_available()'), 't', 'JIT is available');

$node->safe_psql(
	'postgres', q{
CREATE EXTENSION retries;
CREATE EXTENSION pg_stat_statements;
CREATE ROLE alice LOGIN;
CREATE SCHEMA alice AUTHORIZATION alice;
CREATE TABLE alice.t (i int);
ALTER TABLE alice.t OWNER TO alice;
CREATE FUNCTION alice.jitted(i int) RETURNS void LANGUAGE sql
	AS 'INSERT INTO alice.t SELECT i * 2 + 1';
ALTER FUNCTION alice.jitted(int) OWNER TO alice;
SET ROLE alice;
SELECT retries.annotate('alice.jitted(int)', '3 10ms');
RESET ROLE;
});
wait_until($node, 'postgres', workers_query('postgres'), '2',
	'the workers are up');
$node->safe_psql(
	'postgres', q{
SELECT pg_stat_statements_reset();
SET jit = off;
SET ROLE alice;
SELECT count(retries.call('alice.jitted(int)', jsonb_build_array(i)))
  FROM generate_series(1, 50) i;
});
wait_until($node, 'postgres', 'SELECT count(*) FROM alice.t', '50',
	'the calls ran');

my $stats = q{
SELECT count(*) > 5, coalesce(sum(jit_functions), 0)
  FROM pg_stat_statements
 WHERE userid = 10 AND query LIKE '%OPERATOR(pg_catalog.%'};
is($node->safe_psql('postgres', $stats), 't|0',
	'the workers ran their own statements, none JIT-compiled');
is( $node->safe_psql(
		'postgres', q{
SELECT sum(jit_functions) > 0 FROM pg_stat_statements
 WHERE userid = 'alice'::regrole AND query LIKE 'INSERT INTO alice.t%'}),
	't',
	'the call\'s own statement was JIT-compiled, as in a session of its role');

$node->stop;
done_testing();
