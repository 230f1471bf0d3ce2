# Hostile review of 1.7's trust promises (issue 42), by a reviewer who did
# not write the code: a database owner's restore COPY, result conversion,
# hooks.  dbo owns the databases (not a superuser; a superuser made them
# and the extension), alice is the victim, mallory an ordinary role.
#
# Found by the review, and fixed:
#   a. dbo's COPY into retries.function_names named function OIDs that did
#      not exist yet (the check of the owner read pg_proc and found
#      nothing): with paused flow_data rows for those keys, the function
#      alice made next under such an OID was paused from birth, and her
#      call never ran.  Now such a row (of this database's origin) is
#      refused (42501), and alice's call runs.  a2: setval(), which made the
#      ids look scattered so that function_names loaded again beside
#      alice's rows, is refused to dbo (her COPYs move the sequences).
#   b. dbo's COPY into retries.attempt_data named calls not there yet:
#      alice's first call took id 1, found dbo's forged attempt, failed for
#      good without running (23505) and listed it as its own.  Now her COPY
#      moves the sequence of call ids past every id its rows refer to:
#      alice's call takes another id, runs, and lists no forged attempt.
#
# Held:
#   c. dbo's COPY naming alice (a call of hers; a local function_names row
#      of alice's existing function) fails with 42501 and leaves no row;
#      after setval() has made the ids look scattered, too.
#   d. mallory's cast to json of her enum type, reached through a
#      domain, an array and alice's own composite, does not run when alice
#      calls mallory's function (its text form stands for it); it does run
#      when mallory herself calls it, so the check would see the cast run.
#   e. mallory may not annotate her function with alice's hook (42501).

use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use RetriesTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = retries_node('trust_review');
$node->append_conf('postgresql.conf', qq{
retries.max_workers = 2
retries.min_delay = 0
});
$node->start;

$node->safe_psql('postgres', q{
CREATE ROLE dbo LOGIN;
CREATE ROLE alice LOGIN;
CREATE ROLE mallory LOGIN;
});

# a fresh database of dbo's with the extension, as for her restore
sub fresh_db
{
	my ($db) = @_;
	$node->safe_psql('postgres', "CREATE DATABASE $db OWNER dbo TEMPLATE template0");
	$node->safe_psql($db, q{
CREATE EXTENSION retries;
CREATE SCHEMA alice AUTHORIZATION alice;
CREATE SCHEMA mallory AUTHORIZATION mallory;
GRANT USAGE ON SCHEMA mallory TO PUBLIC;
});
}

# alice_work(DB): alice's function alice.work(int), annotated
sub alice_work
{
	my ($db) = @_;
	as_role($node, $db, 'alice', q{
CREATE TABLE alice.done (n int);
CREATE FUNCTION alice.work(n int) RETURNS int LANGUAGE sql
	AS 'INSERT INTO alice.done VALUES (n) RETURNING n';
SELECT retries.annotate('alice.work(int)', '3 10ms');
});
	return;
}

# dbo's COPY FROM STDIN of LINES into retries.TABLE, after SQL: (ret, stderr)
sub dbo_copy
{
	my ($db, $table, $lines, $sql) = @_;
	my ($ret, $out, $err) = $node->psql($db,
		"\\set VERBOSITY verbose\nSET ROLE dbo;\n" . ($sql // '')
		  . "\nCOPY retries.$table FROM STDIN;\n" . join('', map { "$_\n" } @$lines) . "\\.\n",
		on_error_stop => 1);
	return ($ret, $err);
}

my ($ret, $out, $err);

# ---------------------------------------------------------------------------
# a. a function_names row and a paused flow_data row for an OID to come
fresh_db('ta');
my $origin = $node->safe_psql('ta', 'SELECT retries.origin()');
my $base = $node->safe_psql('ta', q{
SET ROLE dbo;
CREATE TEMP TABLE probe (x int);
SELECT 'probe'::regclass::oid;
});
# her restore loads every table (here the empty ones of an empty dump)
for my $table (qw(policy_data call_data schedule_data attempt_data call_after
	call_after_pending event_data))
{
	($ret, $err) = dbo_copy('ta', $table, []);
	is($ret, 0, "a: dbo's restore loads retries.$table") or diag($err);
}
my @names = map { join("\t", 2000000000 + $_, $base + $_, 'x', 'dbo', $origin) } 1 .. 400;
my @flows = map { join("\t", 2000000000 + $_, 't', '\N', '\N', '\N') } 1 .. 400;
($ret, $err) = dbo_copy('ta', 'function_names', \@names);
like($err, qr/42501: permission denied to load a row naming a function that does not exist into table retries\.function_names/,
	'a: dbo may not load function_names rows for OIDs that no function has yet');
is($node->safe_psql('ta', 'SELECT count(*) FROM retries.function_names'), '0',
	'a: and none is there');
($ret, $err) = dbo_copy('ta', 'flow_data', \@flows);
is($ret, 0, 'a: paused flow_data rows for those keys load, naming nothing') or diag($err);

alice_work('ta');
my $hijacked = $node->safe_psql('ta', q{
SELECT count(*) FROM retries.flow_data f JOIN retries.function_names n ON n.key = f.fn
 WHERE n.fn = 'alice.work(int)'::regprocedure AND n.origin = retries.origin()});
my $cid = as_role($node, 'ta', 'alice', q{SELECT retries.call('alice.work(int)', '[1]')});
is($hijacked, '0', 'a: alice\'s new function has no flow settings of dbo\'s');
call_reaches($node, 'ta', $cid, 'succeeded', 'a: alice\'s call of it runs');

# a2. after the restore, with other roles' rows there: setval() makes the ids
# look scattered, and function_names and flow_data load again
$base = $node->safe_psql('ta', q{
SET ROLE dbo;
CREATE TEMP TABLE probe2 (x int);
SELECT 'probe2'::regclass::oid;
});
($ret, $err) = dbo_copy('ta', 'function_names',
	[ map { join("\t", 2100000000 + $_, $base + 1000 + $_, 'x', 'dbo', $origin) } 1 .. 50 ],
	q{SELECT setval('retries.call_data_id_seq', (1::bigint << 44) + 1);});
like($err, qr/permission denied for sequence call_data_id_seq/,
	'a2: dbo may not set the ids to look scattered');
isnt($ret, 0, 'a2: and her later COPY into function_names, beside alice\'s rows, does not load');
is($node->safe_psql('ta', q{SELECT count(*) FROM retries.function_names WHERE signature = 'x'}), '0',
	'a2: (none of its rows is there)');

# ---------------------------------------------------------------------------
# b. attempts of calls to come
fresh_db('tb');
my @attempts = map {
	join("\t", $_, 1, '2020-01-01 00:00:00+00', '2020-01-01 00:00:00+00',
		'succeeded', '\N', 'forged by dbo', ('\N') x 7)
} 1 .. 20;
($ret, $err) = dbo_copy('tb', 'attempt_data', \@attempts);
is($ret, 0, 'b: dbo loads attempt rows of calls that are not there') or diag($err);
alice_work('tb');
$cid = as_role($node, 'tb', 'alice', q{SELECT retries.call('alice.work(int)', '[1]')});
wait_until($node, 'tb',
	"SELECT state NOT IN ('scheduled', 'running') FROM retries.call_data WHERE id = $cid",
	't', 'b: alice\'s call ends');
cmp_ok($cid, '>', 20, 'b: alice\'s call takes an id none of dbo\'s rows refers to');
is($node->safe_psql('tb', "SELECT state FROM retries.call_data WHERE id = $cid"),
	'succeeded', 'b: alice\'s call succeeds');
is($node->safe_psql('tb',
	"SELECT count(*) FROM retries.attempt_data WHERE call_id = $cid AND message = 'forged by dbo'"),
	'0', 'b: and lists no attempt of dbo\'s making');

# ---------------------------------------------------------------------------
# c. rows naming alice are refused, scattered ids or not
fresh_db('tc');
as_role($node, 'tc', 'alice', q{
CREATE FUNCTION alice.work(n int) RETURNS int LANGUAGE sql AS 'SELECT n';
SELECT retries.annotate('alice.work(int)', '3 10ms');
});
my $alice_fn = $node->safe_psql('tc', q{SELECT 'alice.work(int)'::regprocedure::oid});
my $policy = $node->safe_psql('tc', 'SELECT max(id) FROM retries.policy_data');
($ret, $err) = dbo_copy('tc', 'call_data', [ join("\t",
	12345, $policy, '[1]', 'scheduled', 0, '\N', '2020-01-01 00:00:00+00',
	'2020-01-01 00:00:00+00', '2020-01-01 00:00:00+00', 'alice', ('\N') x 5,
	'f', 0, '\N', '\N', 0, 0, '\N', '\N', '\N') ]);
like($err, qr/(?:42501: permission denied to load a row naming role alice|55000)/,
	'c: dbo\'s COPY of a call of alice\'s is refused');
is($node->safe_psql('tc', "SELECT count(*) FROM retries.call_data WHERE id = 12345"), '0',
	'c: and leaves no row');
$node->safe_psql('postgres', 'DROP DATABASE tc');
fresh_db('tc');
as_role($node, 'tc', 'alice', q{
CREATE FUNCTION alice.work(n int) RETURNS int LANGUAGE sql AS 'SELECT n';
});
$alice_fn = $node->safe_psql('tc', q{SELECT 'alice.work(int)'::regprocedure::oid});
$origin = $node->safe_psql('tc', 'SELECT retries.origin()');
# (the ids made to look scattered, by a superuser: dbo may not)
$node->safe_psql('tc', q{SELECT setval('retries.call_data_id_seq', (1::bigint << 44) + 1)});
($ret, $err) = dbo_copy('tc', 'function_names',
	[ join("\t", 2000000001, $alice_fn, 'alice.work(integer)', 'dbo', $origin) ]);
like($err, qr/42501: permission denied to load a row naming role alice into table retries\.function_names/,
	'c: a function_names row of alice\'s function, owner given as dbo, is refused (ids scattered)');
is($node->safe_psql('tc', 'SELECT count(*) FROM retries.function_names'), '0',
	'c: and leaves no row');

# ---------------------------------------------------------------------------
# d. mallory's cast to json, deep inside alice's result
fresh_db('td');
$node->safe_psql('td', q{
SET ROLE mallory;
CREATE TABLE mallory.log (who text);
GRANT INSERT ON mallory.log TO PUBLIC;
CREATE TYPE mallory.mt AS ENUM ('seven');
CREATE DOMAIN mallory.md AS mallory.mt;
CREATE FUNCTION mallory.to_json(m mallory.mt) RETURNS json LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO mallory.log VALUES (current_user);
	RETURN '"cast ran"'::json;
END $$;
CREATE CAST (mallory.mt AS json) WITH FUNCTION mallory.to_json(mallory.mt);
CREATE FUNCTION mallory.mk() RETURNS mallory.md[] LANGUAGE sql
	AS 'SELECT ARRAY[''seven''::mallory.md]';
GRANT EXECUTE ON FUNCTION mallory.mk() TO PUBLIC;
SELECT retries.annotate('mallory.mk()', '1 10ms');
RESET ROLE;
SET ROLE alice;
CREATE TYPE alice.box AS (inner_ mallory.md[]);
CREATE FUNCTION alice.wrap() RETURNS alice.box LANGUAGE sql AS 'SELECT ROW(mallory.mk())::alice.box';
SELECT retries.annotate('alice.wrap()', '1 10ms');
});
my $a1 = as_role($node, 'td', 'alice', q{SELECT retries.call('alice.wrap()')});
my $a2 = as_role($node, 'td', 'alice', q{SELECT retries.call('mallory.mk()')});
my $m1 = as_role($node, 'td', 'mallory', q{SELECT retries.call('mallory.mk()')});
for my $id ($a1, $a2, $m1)
{
	call_reaches($node, 'td', $id, 'succeeded', "d: call $id succeeds");
}
unlike($node->safe_psql('td', "SELECT result::text FROM retries.call_data WHERE id IN ($a1, $a2)"),
	qr/cast ran/, 'd: alice\'s results show no output of mallory\'s cast');
like($node->safe_psql('td', "SELECT result::text FROM retries.call_data WHERE id = $m1"),
	qr/cast ran/, 'd: mallory\'s own call runs her cast (the check sees a cast that runs)');
is($node->safe_psql('td', "SELECT string_agg(DISTINCT who, ',') FROM mallory.log"), 'mallory',
	'd: the cast never ran as alice');

# ---------------------------------------------------------------------------
# e. mallory's function with alice's hook
$node->safe_psql('td', q{
SET ROLE alice;
CREATE FUNCTION alice.hook(call_id bigint) RETURNS void LANGUAGE sql AS 'SELECT';
GRANT EXECUTE ON FUNCTION alice.hook(bigint) TO mallory;
GRANT USAGE ON SCHEMA alice TO mallory;
RESET ROLE;
SET ROLE mallory;
CREATE FUNCTION mallory.f() RETURNS void LANGUAGE sql AS 'SELECT';
});
($out, $err) = try_as($node, 'td', 'mallory',
	q{SELECT retries.annotate('mallory.f()', '1 10ms', on_exhausted => 'alice.hook(bigint)')});
like($err, qr/42501: on_exhausted alice\.hook\(bigint\) is owned by role "alice", which is neither the owner/,
	'e: mallory may not set alice\'s function as her hook');

no_crash($node, 0, 'no backend or worker crashed');
$node->stop;
done_testing();
