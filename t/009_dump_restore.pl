# A database's policies, calls and attempts survive pg_dump and a restore
# into a fresh cluster, and its pending calls run there:
#
#   a. in the source cluster: annotated functions (policies of several
#      shapes, hooks on_exhausted and delay_fn, a function in another schema
#      with a type of its own, a re-annotated and an unannotated function);
#      calls that succeeded, failed (with the hook run), a call retrying
#      with attempts > 0, and then, with execution paused, due calls, calls
#      in the future, a cancelled call and keyed calls, scheduled by two
#      roles; two recurring schedules, one paused and triggered once; a
#      call that kept its result (notify on), and one that waits for
#      another;
#   b. pg_dump -Fc restored with pg_restore, and pg_dump -Fp run with psql,
#      into a new cluster whose roles and functions have other OIDs than in
#      the source (checked), execution paused: retries.calls,
#      retries.attempts, the schedules and the tables under them read the
#      same, as text, ids included, functions by their keys and the
#      signatures that retries.function_names keeps; retries.policies
#      reads as in the source at once, and a session's call finds its
#      policy, before any worker has written the references anew;
#   c. execution on: a worker writes the references anew (under the new
#      extension, with the new OIDs); the identity sequences go on above the
#      restored ids (a new call, a new policy and a new schedule get larger
#      ids), and keys still deduplicate;
#   d. once execution is enabled, the due calls run to completion, each
#      exactly once, as the role that scheduled it, with its hooks (found by
#      their new OIDs); calls moved forward with retry_now run, and a call
#      due tomorrow stays scheduled; the call that waits runs after the
#      other, and keeps its result;
#   e. a restore that is not one transaction, held open between its
#      CREATE EXTENSION and its data (psql running the plain dump, its
#      schema fed, its COPYs not yet): another
#      role's annotate() and a call are refused with 55000, so that nothing
#      takes an id the dump's rows need (a policy made then would take id 1,
#      the COPY of policy_data would fail, and the restored calls of
#      policy 1 would run that role's function), in the restoring session
#      too (which runs other roles' CHECKs and triggers); once the
#      restoring session ends, the database reads as the source and the
#      role may annotate; a role that sets pg_dump's settings and runs
#      CREATE EXTENSION IF NOT EXISTS and the install script's function
#      holds nothing; the same restore into a database that has the
#      extension already (from template1) with row_security on is held too;
#      a superuser's CREATE EXTENSION IF NOT EXISTS rolled back (whole or
#      to a savepoint) in a database whose extension has no rows holds
#      nothing and leaves the sequences alone, and
#      one run by a SECURITY DEFINER function for another role holds
#      nothing;
#   f. a restore in several runs (pg_restore --section=pre-data, then the
#      rest), with a role annotating, scheduling and calling in between:
#      the data loads (the restored CREATE EXTENSION moved the id sequences
#      to a random point far above the dump's ids), the victim's rows name
#      its own functions, and new ids go on from the dump's;
#   g. a restore into a database whose extension has rows already (from
#      a template that has them: a policy, a call), by psql without
#      ON_ERROR_STOP, pg_restore, and pg_restore -j 2: its CREATE
#      EXTENSION fails with 55000 naming the reason, its COPYs fail (in
#      the other sessions of -j too), no row of the dump is in any of the
#      extension's tables and the rows there are unchanged; so with
#      pg_restore --data-only (no CREATE EXTENSION), from its first COPY,
#      into a table without rows; after DROP EXTENSION and CREATE
#      EXTENSION, a restore works;
#   h. the owner of a database, not a superuser, with calls of her own and
#      of a role she is a member of, a policy with a hook, keys and a
#      schedule: she runs pg_dump -Fc and -Fp; a superuser makes a new
#      database for her from template0 and the extension in it; she
#      restores (pg_restore, psql), the only errors those of the schema's
#      and the extension's statements, the superuser's, and of the dump's
#      setval(), which she may not run: her COPYs move the sequences past
#      the ids they load; the database reads as the source and the calls
#      run, each as its role.  Her restore of
#      a dump edited so that a call's role, or a function's owner, is
#      postgres fails with 42501 and leaves no row in that table; she may
#      not INSERT into the tables, nor COPY into them with a WHERE.
#
# With policies that stored functions as plain oids and no signatures
# (version 1.0), c fails: the restored policies name no function.

use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RetriesTest;
use Test::More;

# set_enabled(NODE, ON, [DB]): retries.enabled for the whole cluster; when
# turned off, wait until both workers of DB are paused
sub set_enabled
{
	my ($node, $on, $db) = @_;
	my $value = $on ? 'on' : 'off';

	$node->safe_psql('postgres',
		"ALTER SYSTEM SET retries.enabled = $value; SELECT pg_reload_conf();");
	wait_until(
		$node, $db,
		"SELECT count(*) FROM retries.workers"
		  . " WHERE database = current_database() AND state = 'paused'",
		'2', "$db: both workers paused")
	  if !$on;
	return;
}

# as_role(ROLE, SQL): SQL run as ROLE in a superuser's session
sub as_role
{
	my ($role, $sql) = @_;
	return "SET ROLE $role; $sql; RESET ROLE;";
}

# snapshot(NODE, DB): the extension's views and tables, as text, in a
# stable order; functions by the signature function_names keeps for their
# key, which reads the same in the source and in a restored database
sub snapshot
{
	my ($node, $db) = @_;
	return $node->safe_psql(
		$db, q{
CREATE FUNCTION pg_temp.sig(o oid) RETURNS text LANGUAGE sql AS
	'SELECT signature FROM retries.function_names WHERE key = o';
SELECT to_jsonb(p) || jsonb_build_object('fn', pg_temp.sig(fn),
		'on_exhausted', pg_temp.sig(on_exhausted), 'delay_fn', pg_temp.sig(delay_fn))
  FROM retries.policy_data p ORDER BY id;
SELECT to_jsonb(c) - 'fn' FROM retries.calls c ORDER BY id;
SELECT to_jsonb(c) || jsonb_build_object('gate', pg_temp.sig(gate))
  FROM retries.call_data c ORDER BY id;
SELECT * FROM retries.attempts ORDER BY call_id, attempt;
SELECT * FROM retries.attempt_data ORDER BY call_id, attempt;
SELECT * FROM retries.call_after ORDER BY after_id, call_id;
});
}

# ext_rows(NODE, DB): every row of the extension's tables, as text; but
# the origin of function_names, which the workers of a database made from
# a template write anew
sub ext_rows
{
	my ($node, $db) = @_;
	return $node->safe_psql($db,
		join(";\n",
			map { "SELECT '$_', string_agg((to_jsonb(x) - 'origin')::text, ',' ORDER BY (to_jsonb(x) - 'origin')::text) FROM retries.$_ x" }
			  qw(policy_data call_data attempt_data schedule_data call_after
			  call_after_pending flow_data function_names event_data)));
}

###########################################################################
# a. the source database
###########################################################################

my $src = retries_node('source');
$src->start;

$src->safe_psql(
	'postgres', q{
CREATE ROLE alice LOGIN;
CREATE ROLE bob LOGIN;
CREATE DATABASE app;
});

$src->safe_psql(
	'app', q{
CREATE EXTENSION retries;

-- every run of a call leaves one row here
CREATE TABLE effects (call_id bigint, fn text, who text, attempt int,
					  cluster text);
CREATE TABLE hook_log (call_id bigint, who text, cluster text);
CREATE TABLE pace_log (attempt int, cluster text);
GRANT SELECT, INSERT ON effects, hook_log, pace_log TO PUBLIC;

CREATE FUNCTION effect(fn text) RETURNS void LANGUAGE sql AS $$
	INSERT INTO effects VALUES (retries.current_call(), fn, current_user,
								retries.current_attempt(),
								current_setting('cluster_name'));
$$;

CREATE FUNCTION ok(i int) RETURNS void LANGUAGE sql AS $$
	SELECT effect('ok');
$$;

CREATE SCHEMA shop;
GRANT USAGE ON SCHEMA shop TO PUBLIC;
CREATE TYPE shop.mood AS ENUM ('calm', 'cross');
CREATE FUNCTION shop.typed(m shop.mood, note text) RETURNS void
LANGUAGE sql AS $$ SELECT effect('typed'); $$;

-- succeeds on its second attempt
CREATE FUNCTION flaky(i int) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	IF retries.current_attempt() < 2 THEN
		PERFORM retries.retry('not yet');
	END IF;
	PERFORM effect('flaky');
END $$;

-- never succeeds; its hook records that it gave up
CREATE FUNCTION doomed(i int) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	PERFORM retries.retry('never');
END $$;
CREATE FUNCTION exhausted(call_id bigint) RETURNS void LANGUAGE sql AS $$
	INSERT INTO hook_log VALUES (call_id, current_user,
								 current_setting('cluster_name'));
$$;
-- bob's: its hook runs as bob, whoever calls it
ALTER FUNCTION doomed(int) OWNER TO bob;

-- retried once, after a delay its delay_fn chooses
CREATE FUNCTION paced(i int) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	IF retries.current_attempt() < 2 THEN
		PERFORM retries.retry('again');
	END IF;
	PERFORM effect('paced');
END $$;
CREATE FUNCTION pace(attempt int, sqlstate text, message text)
RETURNS interval LANGUAGE sql AS $$
	INSERT INTO pace_log VALUES (attempt, current_setting('cluster_name'));
	SELECT interval '10 ms';
$$;

-- keeps a result
CREATE FUNCTION answer(i int) RETURNS jsonb LANGUAGE sql AS $$
	SELECT effect('answer');
	SELECT jsonb_build_object('double', 2 * i, 'at', clock_timestamp());
$$;

-- fails at once: P0001 is not retried
CREATE FUNCTION bad(i int) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	RAISE EXCEPTION 'bad input %', i;
END $$;

SELECT retries.annotate('ok(int)', '3 10ms');
SELECT retries.annotate('shop.typed(shop.mood, text)', '4 1s 1m',
						multiplier => 3, jitter => 'full',
						retry_on => '{RT,40001}', timeout => '5s');
SELECT retries.annotate('flaky(int)', '5 1h');
SELECT retries.annotate('doomed(int)', '2 10ms',
						on_exhausted => 'exhausted(bigint)');
SELECT retries.annotate('paced(int)', '3 1h', delay_fn => 'pace(int,text,text)');
SELECT retries.annotate('bad(int)', NULL, max_attempts => 3, min_delay => '1s');
SELECT retries.annotate('answer(int)', '3 10ms', notify => true);
});

# calls that run in the source cluster
my %id;
for my $c (
	[ 'ok1', 'alice', q{'ok(int)', '[1]'} ],
	[ 'ok2', 'bob', q{'ok(int)', '[2]'} ],
	[ 'typed1', 'bob', q{'shop.typed(shop.mood,text)', '["calm", "hi"]'} ],
	[ 'flaky1', 'alice', q{'flaky(int)', '[1]'} ],
	[ 'doomed1', 'bob', q{'doomed(int)', '[1]'} ],
	[ 'paced1', 'alice', q{'paced(int)', '[1]'} ],
	[ 'bad1', 'bob', q{'bad(int)', '[1]'} ],
	[ 'answer1', 'alice', q{'answer(int)', '[1]'} ])
{
	my ($name, $role, $args) = @$c;
	$id{$name} = $src->safe_psql('app',
		as_role($role, "SELECT retries.call($args)"));
}

wait_until(
	$src, 'app',
	"SELECT string_agg(s, ',' ORDER BY s) FROM (SELECT state || ':' || count(*) AS s"
	  . " FROM retries.calls GROUP BY state) x",
	'failed:2,scheduled:1,succeeded:5',
	'source: calls ran: 5 succeeded, 2 failed, 1 retrying');
is( $src->safe_psql('app', "SELECT result->'double' FROM retries.calls WHERE id = $id{answer1}"),
	'2', 'source: a call kept its result');
is( $src->safe_psql(
		'app', "SELECT attempts, next_attempt > now() + interval '50 min'"
		  . " FROM retries.calls WHERE id = $id{flaky1}"),
	'1|t',
	'source: flaky call retrying, one attempt made, next one in an hour');
is($src->safe_psql('app', 'SELECT call_id, who, cluster FROM hook_log'),
	"$id{doomed1}|bob|source", 'source: on_exhausted ran as bob, the owner of doomed()');

# policy history: ok re-annotated (its old calls keep the old policy), bad
# unannotated
$src->safe_psql(
	'app', q{
SELECT retries.annotate('ok(int)', '4 10ms');
SELECT retries.unannotate('bad(int)');
});

# execution paused: these calls stay pending
set_enabled($src, 0, 'app');
for my $c (
	[ 'ok3', 'alice', q{'ok(int)', '[3]'} ],
	[ 'ok4', 'bob', q{'ok(int)', '[4]'} ],
	[ 'typed2', 'alice', q{'shop.typed(shop.mood,text)', '{"m": "cross", "note": "x"}'} ],
	[ 'doomed2', 'alice', q{'doomed(int)', '[2]'} ],
	[ 'paced2', 'bob', q{'paced(int)', '[2]'} ],
	[ 'key_alice', 'alice', q{'ok(int)', '[100]', key => 'order-100'} ],
	[ 'key_bob', 'bob', q{'ok(int)', '[101]', key => 'order-100'} ],
	[ 'tomorrow', 'alice', q{'ok(int)', '[200]', now() + interval '1 day'} ],
	[ 'later', 'bob', q{'ok(int)', '[201]', now() + interval '1 day'} ],
	[ 'cancelled', 'alice', q{'ok(int)', '[300]', now() + interval '1 day'} ])
{
	my ($name, $role, $args) = @$c;
	$id{$name} = $src->safe_psql('app',
		as_role($role, "SELECT retries.call($args)"));
}
$src->safe_psql('app', "SELECT retries.cancel($id{cancelled})");
$id{chain_first} = $src->safe_psql('app',
	as_role('alice', q{SELECT retries.call('answer(int)', '[5]')}));
$id{chain_next} = $src->safe_psql('app',
	as_role('alice', "SELECT retries.call('answer(int)', '[6]', after => ARRAY[$id{chain_first}]::bigint[])"));
is( $src->safe_psql('app', "SELECT waiting_for FROM retries.calls WHERE id = $id{chain_next}"),
	"{$id{chain_first}}", 'source: a call waits for another');

# recurring schedules of both roles, one paused, one triggered once
$src->safe_psql('app',
	as_role('alice',
		q{SELECT retries.schedule('nightly', 'ok(int)', '30 2 * * *', '[7]', 'Europe/Paris', 'queue', '1 hour')}));
$src->safe_psql('app',
	as_role('bob',
		q{SELECT retries.schedule('often', 'ok(int)', '5 minutes', '{"i": 8}');
		  SELECT retries.pause_schedule('often');
		  SELECT retries.trigger('often');}));
my $schedules_query = q{
SELECT string_agg(concat_ws('|', name, owner,
							(SELECT f.signature FROM retries.function_names f WHERE f.key = s.fn), every, args, timezone, overlap, catch_up,
							paused, origin, next_run, firings, skipped, missed,
							(SELECT count(*) FROM retries.call_data c WHERE c.schedule_id = s.id)),
				  E'\n' ORDER BY name)
  FROM retries.schedule_data s};
my $schedules_before = $src->safe_psql('app', $schedules_query);
my $policies_before =
  $src->safe_psql('app', 'SELECT * FROM retries.policies ORDER BY fn::text');
like($schedules_before, qr/^nightly\|alice\|public\.ok\(integer\)\|30 2 \* \* \*.*\noften\|bob\|.*\|t\|.*\|1\|0\|0\|1$/s,
	'source: two schedules, one paused with one triggered call');
my $max_schedule =
  $src->safe_psql('app', 'SELECT max(id) FROM retries.schedule_data');

my $max_id = $src->safe_psql('app', 'SELECT max(id) FROM retries.call_data');
my $max_policy =
  $src->safe_psql('app', 'SELECT max(id) FROM retries.policy_data');
my $before = snapshot($src, 'app');
like($before, qr/shop\.typed\(shop\.mood,pg_catalog\.text\)/,
	'source: snapshot shows the qualified signature');

my $tmp = PostgreSQL::Test::Utils::tempdir;
$src->command_ok(
	[ 'pg_dump', '-Fc', '-f', "$tmp/app.dump", '-d', $src->connstr('app') ],
	'pg_dump -Fc');
$src->command_ok(
	[ 'pg_dump', '-Fp', '-f', "$tmp/app.sql", '-d', $src->connstr('app') ],
	'pg_dump -Fp');

###########################################################################
# b. a fresh cluster: other OIDs, restore, same contents
###########################################################################

my $dst = retries_node('restored');
$dst->append_conf('postgresql.conf', 'retries.enabled = off');
$dst->start;

# roles in another order, after another one, and 200 functions first, so
# that neither roles nor functions get the OIDs they had in the source
$dst->safe_psql(
	'postgres', q{
CREATE ROLE carol LOGIN;
CREATE ROLE bob LOGIN;
CREATE ROLE alice LOGIN;
DO $$
BEGIN
	FOR i IN 1..200 LOOP
		EXECUTE format('CREATE FUNCTION filler%s() RETURNS int LANGUAGE sql AS %L',
					   i, 'SELECT 1');
	END LOOP;
END $$;
CREATE DATABASE restored;
CREATE DATABASE plain;
});

$dst->command_ok(
	[
		'pg_restore', '--exit-on-error', '-d', $dst->connstr('restored'),
		"$tmp/app.dump"
	],
	'pg_restore of the custom-format dump');
$dst->command_ok(
	[
		'psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-d', $dst->connstr('plain'),
		'-f', "$tmp/app.sql"
	],
	'psql runs the plain-format dump');

my $oids = q{SELECT 'alice'::regrole::oid || ',' || 'ok(int)'::regprocedure::oid
			 || ',' || 'exhausted(bigint)'::regprocedure::oid};
my ($src_alice, $src_ok, $src_hook) = split /,/,
  $src->safe_psql('app', $oids);

for my $db ('restored', 'plain')
{
	my ($alice, $ok, $hook) = split /,/, $dst->safe_psql($db, $oids);
	ok( $alice != $src_alice && $ok != $src_ok && $hook != $src_hook,
		"$db: alice, ok(int) and the hook have other OIDs than in the source");

	is(snapshot($dst, $db), $before,
		"$db: policies, calls and attempts read the same as in the source");
	is($dst->safe_psql($db, $schedules_query), $schedules_before,
		"$db: schedules read the same as in the source, with their calls");
	is($dst->safe_psql($db, 'SELECT * FROM retries.policies ORDER BY fn::text'),
		$policies_before, "$db: retries.policies reads as in the source");
	is( $dst->safe_psql(
			$db,
			'BEGIN; '
			  . as_role('alice', q{SELECT retries.call('ok(int)', '[499]') IS NOT NULL})
			  . ' ROLLBACK;'),
		't', "$db: a call finds the policy of its function");
}

###########################################################################
# c. execution on: the references mapped, then sequences and keys
###########################################################################

set_enabled($dst, 1);
for my $db ('restored', 'plain')
{
	wait_until($dst, $db,
		"SELECT count(*) FROM retries.function_names"
		  . " WHERE origin <> retries.origin()",
		'0', "$db: a worker writes the function references anew");
	is($dst->safe_psql($db, 'SELECT * FROM retries.policies ORDER BY fn::text'),
		$policies_before, "$db: retries.policies reads as in the source still");
	cmp_ok(
		$dst->safe_psql($db,
			as_role('alice', q{SELECT retries.schedule('new', 'ok(int)', '1 hour', '[9]')})),
		'>', $max_schedule, "$db: a new schedule gets an id above the restored ones");
	is( $dst->safe_psql(
			$db, 'SELECT extversion FROM pg_extension WHERE extname = \'retries\''),
		$dst->safe_psql($db,
			"SELECT default_version FROM pg_available_extensions WHERE name = 'retries'"),
		"$db: extension at the current version");

	#######################################################################
	# sequences and keys
	#######################################################################

	my $new = $dst->safe_psql($db,
		as_role('alice', q{SELECT retries.call('ok(int)', '[500]')}));
	cmp_ok($new, '>', $max_id, "$db: a new call gets an id above the restored ones");
	$dst->safe_psql(
		$db, q{
CREATE FUNCTION fresh() RETURNS void LANGUAGE sql AS 'SELECT effect(''fresh'')';
SELECT retries.annotate('fresh()', '2 10ms');
});
	cmp_ok(
		$dst->safe_psql($db, q{SELECT max(id) FROM retries.policy_data}),
		'>', $max_policy, "$db: a new policy gets an id above the restored ones");
	is( $dst->safe_psql(
			$db,
			as_role('alice',
				q{SELECT retries.call('ok(int)', '[100]', key => 'order-100')})),
		$id{key_alice},
		"$db: alice's key still finds her restored call");
	is( $dst->safe_psql(
			$db,
			as_role('bob',
				q{SELECT retries.call('ok(int)', '[101]', key => 'order-100')})),
		$id{key_bob},
		"$db: bob's key still finds his restored call");
}

###########################################################################
# d. the pending calls run in the new cluster
###########################################################################

for my $db ('restored', 'plain')
{
	$dst->safe_psql($db,
		"SELECT retries.retry_now($id{flaky1}), retries.retry_now($id{later})");
}

for my $db ('restored', 'plain')
{
	# all but 'tomorrow' finish: 4 + 3 (ok3, ok4, typed2) + 2 keyed + later
	# + flaky1 + paced2 + ok(500) + the triggered firing of 'often' succeed;
	# doomed2 fails
	wait_until(
		$dst, $db,
		"SELECT string_agg(s, ',' ORDER BY s) FROM (SELECT state || ':' || count(*) AS s"
		  . " FROM retries.calls GROUP BY state) x",
		'cancelled:1,failed:3,scheduled:1,succeeded:17',
		"$db: every due call finished");
	is( $dst->safe_psql(
			$db, "SELECT string_agg(c.id::text, ',' ORDER BY e.ctid)"
			  . " FROM effects e JOIN retries.calls c ON c.id = e.call_id"
			  . " WHERE c.id IN ($id{chain_first}, $id{chain_next})"),
		"$id{chain_first},$id{chain_next}",
		"$db: the call that waited ran after the other");
	is( $dst->safe_psql(
			$db, "SELECT (result->>'double') || ',' || cardinality(waiting_for)"
			  . " FROM retries.calls WHERE id = $id{chain_next}"),
		'12,0', "$db: and kept its result");
	is( $dst->safe_psql(
			$db, "SELECT state, attempts FROM retries.calls WHERE id = $id{tomorrow}"),
		'scheduled|0',
		"$db: the call due tomorrow has not run");
	is( $dst->safe_psql(
			$db, q{
SELECT count(*) FROM retries.calls c
 WHERE (c.state = 'succeeded') <>
	   ((SELECT count(*) FROM effects e WHERE e.call_id = c.id) = 1)
	OR (SELECT count(*) FROM effects e WHERE e.call_id = c.id) > 1}),
		'0',
		"$db: each succeeded call had its effect exactly once, others none");
	is( $dst->safe_psql(
			$db, q{
SELECT count(*) FROM effects e JOIN retries.calls c ON c.id = e.call_id
 WHERE e.who <> c.scheduled_by::text}),
		'0',
		"$db: every call ran as the role that scheduled it");
	is( $dst->safe_psql(
			$db, q{
SELECT string_agg(c.id || ':' || e.attempt || ':' || e.cluster, ',' ORDER BY c.id)
  FROM effects e JOIN retries.calls c ON c.id = e.call_id
 WHERE e.fn IN ('flaky', 'paced')}),
		"$id{flaky1}:2:restored,$id{paced1}:2:source,$id{paced2}:2:restored",
		"$db: the retrying call went on with attempt 2 in the new cluster");
	is( $dst->safe_psql(
			$db, q{SELECT string_agg(call_id || ':' || who || ':' || cluster, ','
								 ORDER BY call_id) FROM hook_log}),
		"$id{doomed1}:bob:source,$id{doomed2}:bob:restored",
		"$db: on_exhausted, restored by name, ran as bob (the owner of doomed(), restored by name) for alice's call in the new cluster");
	is( $dst->safe_psql(
			$db, q{SELECT count(*) FROM pace_log WHERE cluster = 'restored'}),
		'1', "$db: delay_fn, restored by name, ran in the new cluster");
	is( $dst->safe_psql(
			$db, "SELECT string_agg(attempt::text, ',' ORDER BY attempt)"
			  . " FROM retries.attempts WHERE call_id = $id{flaky1}"),
		'1,2',
		"$db: the retrying call's attempts go on from the restored history");
}

###########################################################################
# e. a restore held open: other sessions wait for its end
###########################################################################

# paused, as a restore should be made, so that the restored calls stay as
# they are to be compared
set_enabled($dst, 0, 'plain');
open(my $fh, '<', "$tmp/app.sql") or die "cannot read $tmp/app.sql: $!";
my $dump = do { local $/; <$fh> };
close($fh);
# psql's restricted mode (\restrict, which pg_dump writes first since
# PostgreSQL 15.14) refuses the meta-commands that background_psql waits by
$dump =~ s/^\\(?:un)?restrict .*\n//mg;
# its first part: the schema, the extension's included, up to the first
# COPY (psql reading a script from a pipe does not run the statements
# after a COPY's data until it has more input or its end)
my $split = index($dump, "\nCOPY ");
ok($split > index($dump, 'CREATE EXTENSION IF NOT EXISTS retries'),
	'e: the plain dump makes the extension before it loads any table');
$dst->safe_psql('postgres', 'CREATE DATABASE held');
$dst->safe_psql('held', q{
CREATE SCHEMA carols AUTHORIZATION carol;
CREATE FUNCTION carols.mine() RETURNS void LANGUAGE sql AS 'SELECT 1';
ALTER FUNCTION carols.mine() OWNER TO carol;
});
my $restore = $dst->background_psql('held', on_error_stop => 0);
$restore->query_safe(substr($dump, 0, $split + 1));
is($dst->safe_psql('held', "SELECT count(*) FROM pg_extension WHERE extname = 'retries'"),
	'1', 'e: the restoring session has created the extension, and goes on');
my ($ret, $out, $err) = $dst->psql('held',
	as_role('carol', q{SELECT retries.annotate('carols.mine()', '3 1s')}));
like($err, qr/ERROR:  extension "retries" is being restored in this database/,
	'e: meanwhile another role\'s annotate() is refused (55000), taking no policy id');
($ret, $out, $err) = $dst->psql('held',
	as_role('alice', q{SELECT retries.call('ok(int)', '[500]')}));
like($err, qr/ERROR:  extension "retries" is being restored in this database/,
	'e: and so is a call');
# the restoring session runs other roles' code (a CHECK, a trigger, a
# SECURITY DEFINER function they made): refused there too
$restore->query(q{SELECT retries.annotate('carols.mine()', '3 1s')});
like($restore->{stderr}, qr/ERROR:  extension "retries" is being restored in this database/,
	'e: and so is the restoring session itself');
$restore->{stderr} = '';
# and an error in the restoring session (there, the one just raised; a
# restore goes on after errors) lets go of nothing
($ret, $out, $err) = $dst->psql('held',
	as_role('carol', q{SELECT retries.annotate('carols.mine()', '3 1s')}));
like($err, qr/ERROR:  extension "retries" is being restored in this database/,
	'e: after an error in the restoring session, another role is still refused');
# the rest, then the end of its input: it loads the tables and ends
$restore->{stdin} .= substr($dump, $split + 1);
ok($restore->quit, 'e: the restore goes on to its end');
is($restore->{stderr}, '', 'e: with no error');
is(snapshot($dst, 'held'), $before,
	'e: once restored, policies, calls and attempts read as in the source');
$dst->safe_psql('held',
	as_role('carol', q{SELECT retries.annotate('carols.mine()', '3 1s')}));
is( $dst->safe_psql('held',
		"SELECT count(*) FROM retries.policies WHERE fn = 'carols.mine()'::regprocedure"),
	'1', 'e: and the role may annotate');

# the same with the extension already in the database (as when it is in
# template1), which the restore's CREATE EXTENSION IF NOT EXISTS finds,
# and a dump made with --enable-row-security
(my $dump2 = $dump) =~ s/^SET row_security = off;$/SET row_security = on;/m;
my $split2 = index($dump2, "\nCOPY ");
$dst->safe_psql('postgres', 'CREATE DATABASE held2');
$dst->safe_psql('held2', q{
CREATE EXTENSION retries;
CREATE SCHEMA carols AUTHORIZATION carol;
CREATE FUNCTION carols.mine() RETURNS void LANGUAGE sql AS 'SELECT 1';
ALTER FUNCTION carols.mine() OWNER TO carol;
});
my $restore2 = $dst->background_psql('held2', on_error_stop => 0);
$restore2->query(substr($dump2, 0, $split2 + 1));
($ret, $out, $err) = $dst->psql('held2',
	as_role('carol', q{SELECT retries.annotate('carols.mine()', '3 1s')}));
like($err, qr/ERROR:  extension "retries" is being restored in this database/,
	'e: with the extension already there and row_security on, an annotate() is refused too');
$restore2->{stdin} .= substr($dump2, $split2 + 1);
$restore2->quit;
is(snapshot($dst, 'held2'), $before,
	'e: and that restore reads as the source');

# a role that plays restore (the settings of pg_dump's output, CREATE
# EXTENSION IF NOT EXISTS, then the install script's own function) takes
# no lock: only the install script run by CREATE EXTENSION may
my $player = $dst->background_psql('held', on_error_stop => 0);
$player->query(q{SET ROLE carol; SET check_function_bodies = off; SET row_security = off;
BEGIN; CREATE EXTENSION IF NOT EXISTS retries; SELECT retries.start_workers(); COMMIT;});
$player->{stderr} = '';
$player->query(q{SELECT retries.annotate('carols.mine()', '5 1s')});
is($player->{stderr}, '', 'e: a role playing restore holds nothing: it may use the extension');
is( $dst->safe_psql('held',
		as_role('alice', q{SELECT retries.call('ok(int)', '[501]') IS NOT NULL})),
	't', 'e: and the others\' calls go on');
$player->quit;

# a superuser's CREATE EXTENSION under pg_dump's settings whose transaction
# rolls back holds nothing after it (the session goes on, connected); in a
# database whose extension has no rows (with rows, it is refused: g), its
# sequences used
$dst->safe_psql('postgres', 'CREATE DATABASE undo');
$dst->safe_psql(
	'undo', q{
CREATE EXTENSION retries;
SELECT nextval('retries.policy_data_id_seq'), nextval('retries.call_data_id_seq'),
	nextval('retries.schedule_data_id_seq');
});
my $sequences = q{SELECT string_agg(last_value::text, ',' ORDER BY sequencename)
  FROM pg_sequences WHERE schemaname = 'retries'};
my $before_undone = $dst->safe_psql('undo', $sequences);
my $undone = $dst->background_psql('undo', on_error_stop => 0);
$undone->query(q{SET check_function_bodies = off;
BEGIN; CREATE EXTENSION IF NOT EXISTS retries; ROLLBACK;});
is($dst->safe_psql('undo', $sequences), $before_undone,
	'e: a CREATE EXTENSION rolled back leaves the id sequences where they were');
# cancel() of a call that is not there: refused while held
($ret, $out, $err) = $dst->psql('undo', q{SELECT retries.cancel(1)});
like($err, qr/call 1 does not exist/, 'e: and holds nothing');
# ... nor one rolled back to a savepoint
$undone->query(q{BEGIN; SAVEPOINT s; CREATE EXTENSION IF NOT EXISTS retries;
ROLLBACK TO s; COMMIT;});
($ret, $out, $err) = $dst->psql('undo', q{SELECT retries.cancel(1)});
like($err, qr/call 1 does not exist/,
	'e: a CREATE EXTENSION rolled back to a savepoint holds nothing');
$undone->quit;

# a superuser's SECURITY DEFINER function that makes the extension, called
# by a role under pg_dump's settings, holds nothing: only a superuser's
# own statement does
$dst->safe_psql(
	'held', q{
CREATE FUNCTION public.install_retries() RETURNS void LANGUAGE plpgsql
	SECURITY DEFINER SET search_path = pg_catalog
	AS 'BEGIN CREATE EXTENSION IF NOT EXISTS retries; END';
GRANT EXECUTE ON FUNCTION public.install_retries() TO carol;
});
my $definer = $dst->background_psql('held', on_error_stop => 0);
$definer->query(q{SET ROLE carol; SET check_function_bodies = off;
SELECT public.install_retries();});
($ret, $out, $err) = $dst->psql('held',
	as_role('alice', q{SELECT retries.call('ok(int)', '[504]') IS NOT NULL}));
is("$out$err", 't', 'e: a function that makes the extension holds nothing for its caller');
$definer->quit;

###########################################################################
# f. a restore in several runs (one pg_restore per section): the hold ends
#    with the first run's session, and a role at work before the next run
#    takes ids; none of them is one the dump's rows need
###########################################################################

$dst->safe_psql(
	'postgres', q{
CREATE ROLE victim LOGIN;
CREATE ROLE thief LOGIN;
CREATE DATABASE fsrc OWNER victim;
CREATE DATABASE fdst TEMPLATE template0;
GRANT CREATE ON DATABASE fdst TO thief;
});
$dst->safe_psql(
	'fsrc', q{
CREATE EXTENSION retries;
SET ROLE victim;
CREATE TABLE ran (fn text);
CREATE FUNCTION v1() RETURNS void LANGUAGE sql AS $$INSERT INTO ran VALUES ('v1')$$;
CREATE FUNCTION v2() RETURNS void LANGUAGE sql AS $$INSERT INTO ran VALUES ('v2')$$;
SELECT retries.annotate('v1()', '3 1s');
SELECT retries.annotate('v2()', '3 1s');
SELECT retries.schedule('v', 'v1()', '1 hour');
SELECT retries.call('v2()', run_at => now() + interval '1 hour');
});
my $fdump = PostgreSQL::Test::Utils::tempdir . '/f.dump';
$dst->command_ok([ 'pg_dump', '-Fc', '-f', $fdump, '-d', $dst->connstr('fsrc') ],
	'f: pg_dump');
$dst->command_ok(
	[ 'pg_restore', '--section=pre-data', '-d', $dst->connstr('fdst'), $fdump ],
	'f: pg_restore of the schema');
$dst->safe_psql(
	'fdst', q{
SET ROLE thief;
CREATE SCHEMA t;
GRANT USAGE ON SCHEMA t TO PUBLIC;
CREATE FUNCTION t.t1() RETURNS void LANGUAGE sql AS 'SELECT';
CREATE FUNCTION t.t2() RETURNS void LANGUAGE sql AS 'SELECT';
SELECT retries.annotate('t.t1()', '3 1s');
SELECT retries.annotate('t.t2()', '3 1s');
SELECT retries.schedule('t', 't.t1()', '1 hour');
SELECT retries.call('t.t2()', run_at => now() + interval '1 hour');
});
$dst->command_ok(
	[ 'pg_restore', '--section=data', '--section=post-data', '-d',
	  $dst->connstr('fdst'), $fdump ],
	'f: pg_restore of the data: no id taken in between is one of the dump\'s');
my $victims = q{
SELECT (SELECT string_agg(fn::text, ',' ORDER BY fn::text) FROM retries.policies
		 WHERE fn::text LIKE 'v%')
	|| ' ' || (SELECT string_agg(fn::text, ',') FROM retries.schedules WHERE name = 'v')
	|| ' ' || (SELECT string_agg(id || ':' || fn::text, ',') FROM retries.calls
			   WHERE scheduled_by = 'victim'::regrole)};
is($dst->safe_psql('fdst', $victims), $dst->safe_psql('fsrc', $victims),
	'f: the victim\'s policies, schedule and call name its own functions');
my $last_id = $dst->safe_psql('fsrc', 'SELECT max(id) FROM retries.call_data');
is( $dst->safe_psql(
		'fdst', q{
SET ROLE victim;
SELECT retries.call('v2()', run_at => now() + interval '1 hour')}),
	$last_id + 1, 'f: and new ids go on from the dump\'s');

###########################################################################
# g. a restore into a database whose extension has rows already (made
#    from a template that has the extension, a policy and a call): its
#    CREATE EXTENSION fails (55000) and no COPY loads a row, whether the
#    restore goes on after errors (psql without ON_ERROR_STOP, pg_restore
#    without --exit-on-error) or loads the data in other sessions
#    (pg_restore -j 2); once the extension is dropped and made again, the
#    restore works
###########################################################################

# their workers would take the slots that the next databases need
$dst->safe_psql('postgres', "DROP DATABASE $_") for qw(restored plain held held2 undo fsrc fdst);
$dst->safe_psql('postgres', 'CREATE DATABASE tpl_rows');
$dst->safe_psql(
	'tpl_rows', q{
CREATE EXTENSION retries;
CREATE FUNCTION mine(i int) RETURNS void LANGUAGE sql AS 'SELECT';
SELECT retries.annotate('mine(int)', '3 1s');
SELECT retries.call('mine(int)', '[1]', run_at => now() + interval '1 day');
});
$dst->safe_psql('postgres', 'ALTER DATABASE tpl_rows IS_TEMPLATE true');
my $tpl_rows = ext_rows($dst, 'tpl_rows');
my $n = 0;
for my $case (
	[ 'psql', [ 'psql', '-X', '-q', '-f', "$tmp/app.sql", '-d' ] ],
	[ 'pg_restore', [ 'pg_restore', "$tmp/app.dump", '-d' ] ],
	[ 'pg_restore -j 2', [ 'pg_restore', '-j', '2', "$tmp/app.dump", '-d' ] ])
{
	my ($name, $command) = @$case;
	my $db = 'rows_' . ++$n;
	$dst->safe_psql('postgres', "CREATE DATABASE $db TEMPLATE tpl_rows");
	my ($out, $err) = run_command([ @$command, $dst->connstr($db) ]);
	like(
		$err,
		qr/ERROR:  extension "retries" already has rows in this database\n.*DETAIL:  Table retries\.policy_data has rows made before this restore: the restored rows would take their ids, and a restored call could name another policy\./,
		"g: $name: the restore's CREATE EXTENSION fails, naming the rows there");
	like($err, qr/DETAIL:  A restore into this database was refused/,
		"g: $name: and so do its COPYs");
	is(ext_rows($dst, $db), $tpl_rows,
		"g: $name: no row of the dump is loaded, and the rows there are unchanged");
}
# pg_restore --data-only: no CREATE EXTENSION, so no note; the first
# COPY (attempt_data, which has no rows there) is refused all the same, the
# policy there being no COPY's, and so is every COPY after it
$dst->safe_psql('postgres', 'CREATE DATABASE rows_data TEMPLATE tpl_rows');
($out, $err) = run_command([ 'pg_restore', '--data-only', "$tmp/app.dump", '-d',
	$dst->connstr('rows_data') ]);
like(
	$err,
	qr/ERROR:  extension "retries" already has rows in this database\nDETAIL:  Table retries\.policy_data has rows made before this restore.*\nCommand was: COPY retries\.attempt_data/s,
	'g: pg_restore --data-only: its first COPY fails, naming the table that has rows made before');
is(ext_rows($dst, 'rows_data'), $tpl_rows,
	'g: pg_restore --data-only: no row of the dump is loaded');

$dst->safe_psql('rows_1', 'DROP EXTENSION retries CASCADE; CREATE EXTENSION retries;');
run_command([ 'pg_restore', "$tmp/app.dump", '-d', $dst->connstr('rows_1') ]);
is(snapshot($dst, 'rows_1'), $before,
	'g: once the extension is dropped and made again, a restore works');

###########################################################################
# h. the owner of a database, not a superuser, dumps it and restores it
#    into a database that a superuser made for her with the extension in
#    it; her restore loads only rows of roles she is a member of
###########################################################################

# their workers would take the slots that the next databases need
$dst->safe_psql('postgres', "DROP DATABASE $_") for qw(rows_1 rows_2 rows_3 rows_data);
$dst->safe_psql(
	'postgres', q{
CREATE ROLE dbo LOGIN;
CREATE ROLE dbo_app LOGIN;
GRANT dbo_app TO dbo;
CREATE DATABASE owned OWNER dbo;
});
$dst->safe_psql('owned', 'CREATE EXTENSION retries');
# due now: execution is paused, they run once it is on
$dst->safe_psql(
	'owned', q{
SET ROLE dbo;
CREATE TABLE ran (i int, who text DEFAULT current_user, db text DEFAULT current_database());
GRANT INSERT ON ran TO dbo_app;
CREATE FUNCTION work(i int) RETURNS void LANGUAGE sql AS 'INSERT INTO public.ran (i) VALUES (i)';
CREATE FUNCTION gave_up(call_id bigint) RETURNS void LANGUAGE sql AS 'SELECT';
GRANT EXECUTE ON FUNCTION work(int) TO dbo_app;
SELECT retries.annotate('work(int)', '3 10ms', on_exhausted => 'gave_up(bigint)');
SELECT retries.call('work(int)', '[1]');
SELECT retries.call('work(int)', '[2]', key => 'k');
SET ROLE dbo_app;
SELECT retries.call('work(int)', '[3]');
SELECT retries.call('work(int)', '[4]', key => 'k');
SELECT retries.schedule('app', 'work(int)', '1 hour', '[5]');
SELECT retries.pause_schedule('app');
});
my $owned = snapshot($dst, 'owned');
like($owned, qr/"scheduled_by": "dbo_app"/, 'h: the source has calls of dbo_app');

my $as_dbo = sub { $dst->connstr($_[0]) . ' user=dbo' };
$dst->command_ok([ 'pg_dump', '-Fc', '-f', "$tmp/owned.dump", '-d', $as_dbo->('owned') ],
	'h: the database owner runs pg_dump -Fc');
$dst->command_ok([ 'pg_dump', '-Fp', '-f', "$tmp/owned.sql", '-d', $as_dbo->('owned') ],
	'h: and pg_dump -Fp');

# owned_c: pg_restore of the custom dump; owned_p: psql of the plain one;
# owned_evil, owned_evil2: edited plain dumps.  A superuser makes each and
# the extension in it; their restores report the statements on the
# schema and the extension, which are the superuser's, and go on.
for my $db (qw(owned_c owned_p owned_evil owned_evil2))
{
	$dst->safe_psql('postgres', "CREATE DATABASE $db OWNER dbo TEMPLATE template0");
	$dst->safe_psql($db, 'CREATE EXTENSION retries');
}
my $superusers_only =
  qr/ERROR:  (?!schema "retries" already exists|must be owner of (?:schema|extension) retries|permission denied for sequence \w+_id_seq)/;
($out, $err) = run_command([ 'pg_restore', '-d', $as_dbo->('owned_c'), "$tmp/owned.dump" ]);
unlike($err, $superusers_only, 'h: the database owner runs pg_restore, with no other error')
  or diag($err);
($out, $err) = run_command(
	[ 'psql', '-X', '-q', '-d', $as_dbo->('owned_p'), '-f', "$tmp/owned.sql" ]);
unlike($err, $superusers_only, 'h: and psql of the plain dump') or diag($err);
for my $db (qw(owned_c owned_p))
{
	is(snapshot($dst, $db), $owned, "h: $db: policies, calls and attempts read as in the source");
	# her setval() is refused: her COPYs moved the sequences past their ids
	is( $dst->safe_psql($db,
			"SELECT (SELECT last_value FROM retries.call_data_id_seq) >= (SELECT max(id) FROM retries.call_data)"
			  . " AND (SELECT last_value FROM retries.policy_data_id_seq) >= (SELECT max(id) FROM retries.policy_data)"
			  . " AND (SELECT last_value FROM retries.schedule_data_id_seq) >= (SELECT max(id) FROM retries.schedule_data)"),
		't', "h: $db: the id sequences are past the restored ids");
}

# a dump edited so that a call of dbo_app's is the superuser's; and so that
# the function of the policy and of the calls (whose hook would run as its
# owner) is the superuser's
my $super = $dst->safe_psql('postgres', 'SELECT current_user');
open(my $ofh, '<', "$tmp/owned.sql") or die "cannot read $tmp/owned.sql: $!";
my $owned_sql = do { local $/; <$ofh> };
close($ofh);
for my $evil ([ 'owned_evil', 'call_data', qr/\tdbo_app\t/ ],
			  [ 'owned_evil2', 'function_names', qr/\tdbo\t/ ])
{
	my ($db, $table, $from) = @$evil;
	(my $edited = $owned_sql) =~ s{(\nCOPY retries\.$table .*?\n\\\.\n)}{
		(my $block = $1) =~ s/$from/\t$super\t/; $block}se;
	isnt($edited, $owned_sql, "h: $db: the dump's $table names $super");
	PostgreSQL::Test::Utils::append_to_file("$tmp/$db.sql", $edited);
	($out, $err) = run_command([ 'psql', '-X', '-q', '-v', 'VERBOSITY=verbose', '-d',
		$as_dbo->($db), '-f', "$tmp/$db.sql" ]);
	like($err, qr/ERROR:  42501: permission denied to load a row naming role $super into table retries\.$table/,
		"h: $db: the database owner's restore of it fails with 42501");
	is($dst->safe_psql($db, "SELECT count(*) FROM retries.$table"), '0',
		"h: $db: and no row of that table is there");
}
($ret, $out, $err) = $dst->psql('owned_evil',
	q{INSERT INTO retries.call_data (policy_id, args, scheduled_by) VALUES (1, '[9]', 'dbo')},
	extra_params => [ '-U', 'dbo' ]);
like($err, qr/permission denied for table call_data/,
	'h: the database owner cannot INSERT into the extension\'s tables');
($ret, $out, $err) = $dst->psql('owned_evil',
	"COPY retries.event_data FROM STDIN WHERE pg_catalog.pg_backend_pid() > 0;\n\\.\n",
	extra_params => [ '-U', 'dbo' ]);
like($err, qr/permission denied for table event_data/,
	'h: nor COPY with a WHERE, which would run her expressions');
$dst->safe_psql('postgres', "DROP DATABASE $_") for qw(owned_evil owned_evil2);

# the restored calls run, each as its role
set_enabled($dst, 1);
for my $db (qw(owned_c owned_p))
{
	wait_until($dst, $db,
		q{SELECT string_agg(i || ':' || who || ':' || db, ',' ORDER BY i) FROM ran},
		"1:dbo:$db,2:dbo:$db,3:dbo_app:$db,4:dbo_app:$db",
		"h: $db: the restored calls run, as their roles");
}

$src->stop;
$dst->stop;
done_testing();
