# ALTER EXTENSION retries UPDATE from 1.0 to the current version (through
# 1.1 and 1.2) while calls are scheduled and running loses nothing:
#
#   a. CREATE EXTENSION retries VERSION '1.0': policies (one with a
#      delay_fn, one with an on_exhausted hook) and calls that run slowly,
#      calls due now, calls due in a few seconds and calls that retry;
#   b. ALTER EXTENSION retries UPDATE while workers are running calls, and
#      with more calls scheduled right after it: a slow call waits at a
#      gate the test holds (t/RetriesTest.pm) until the update, sent from
#      a session of its own, waits for it, so that the update comes in the
#      middle of that call whatever the speed of the machine;
#   c. every call finishes exactly once (effects counted per call), with the
#      attempts its policy gives, hooks included;
#   d. the 1.1 change is visible: the functions of policy_data are
#      regprocedure, attempt_data and the id sequences are dumped, and
#      retries.workers has busy_time, which counts the time the workers
#      spent on calls under 1.0 too (the library serves both versions);
#      and 1.2's: a schedule fires in the updated database, the new
#      retries.call (with priority and after) has the privileges of the old
#      one, keys shared by calls under 1.0 stay with one call each (the
#      unfinished one, or else the latest) and then name it for as long as
#      it is kept, and a call made after another keeps its result;
#   e. pg_dump of the upgraded database restores into a new database, whose
#      calls and policies read the same and whose new calls run.

use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RetriesTest;
use Test::More;

my $node = retries_node('upgrade');
# busy_time is a live worker's own: an extra worker, started while the two
# base workers are held (one at the gate, one in a slow call, for over a
# second on a slow machine), would take its slow calls' time away with it
# when it leaves, and check d would count less than the four seconds
$node->append_conf('postgresql.conf', 'retries.max_extra_workers = 0');
$node->start;

# states(DB): 'state:count,...' of the calls of DB
sub states
{
	return
	    "SELECT string_agg(s, ',' ORDER BY s) FROM (SELECT state || ':' || count(*) AS s"
	  . " FROM retries.calls GROUP BY state) x";
}

my $fn_types = q{
SELECT string_agg(attname || ':' || atttypid::regtype, ',' ORDER BY attnum)
  FROM pg_attribute
 WHERE attrelid = 'retries.policy_data'::regclass
   AND attname IN ('fn', 'on_exhausted', 'delay_fn')};

###########################################################################
# a. version 1.0 with work in progress
###########################################################################

$node->safe_psql(
	'postgres', q{
CREATE EXTENSION retries VERSION '1.0';

-- every run of a call leaves a row, or bumps n: n = 2 would be a double run
CREATE TABLE results (id bigint PRIMARY KEY, n int NOT NULL DEFAULT 1,
					  attempt int);
CREATE FUNCTION record(id bigint) RETURNS void LANGUAGE sql AS $$
	INSERT INTO results AS r (id, attempt)
	VALUES ($1, retries.current_attempt())
	ON CONFLICT (id) DO UPDATE SET n = r.n + 1;
$$;

CREATE FUNCTION work(id bigint) RETURNS void LANGUAGE sql AS $$
	SELECT record($1);
$$;
CREATE FUNCTION slow(id bigint) RETURNS void LANGUAGE sql AS $$
	SELECT } . gate_sql(1) . q{;
	-- not a wait: a length that busy_time must count, no step waits for it
	SELECT pg_sleep(1);
	SELECT record($1);
$$;
-- succeeds at its third attempt, after delays its delay_fn chooses
CREATE FUNCTION retrying(id bigint) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	IF retries.current_attempt() < 3 THEN
		PERFORM retries.retry('not yet');
	END IF;
	PERFORM record(id);
END $$;
CREATE FUNCTION pace(attempt int, sqlstate text, message text)
RETURNS interval LANGUAGE sql AS $$ SELECT interval '300 ms' $$;
-- never succeeds; its hook records that it gave up
CREATE FUNCTION doomed(id bigint) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	PERFORM retries.retry('never');
END $$;
CREATE TABLE hook_log (call_id bigint PRIMARY KEY);
CREATE FUNCTION exhausted(call_id bigint) RETURNS void LANGUAGE sql AS $$
	INSERT INTO hook_log VALUES (call_id);
$$;

CREATE FUNCTION keyed(id bigint) RETURNS void LANGUAGE sql AS '';

SELECT retries.annotate('work(bigint)', '3 10ms');
SELECT retries.annotate('keyed(bigint)', '3 10ms');
SELECT retries.annotate('slow(bigint)', '3 10ms');
SELECT retries.annotate('retrying(bigint)', '5 1h', delay_fn => 'pace(int,text,text)');
SELECT retries.annotate('doomed(bigint)', '1 100ms', on_exhausted => 'exhausted(bigint)');

-- who may schedule calls: app only (1.2 makes retries.call again)
CREATE ROLE app;
CREATE ROLE bystander;
REVOKE EXECUTE ON FUNCTION retries.call(regprocedure, jsonb, timestamptz, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION retries.call(regprocedure, jsonb, timestamptz, text) TO app;
});

is( $node->safe_psql(
		'postgres', "SELECT extversion FROM pg_extension WHERE extname = 'retries'"),
	'1.0',
	'installed at version 1.0');
is($node->safe_psql('postgres', $fn_types),
	'fn:oid,on_exhausted:oid,delay_fn:oid', '1.0 stores functions as oids');

# who of app and bystander may run the new retries.call
my $call_grants = q{
SELECT string_agg(r || ':' || has_function_privilege(r,
	'retries.call(regprocedure, jsonb, timestamptz, text, integer, text, bigint[], interval, interval, text, interval, regclass, text, interval)', 'EXECUTE'), ',' ORDER BY r)
  FROM unnest('{app,bystander}'::text[]) r};

my $workers_columns = q{
SELECT string_agg(column_name, ',' ORDER BY ordinal_position)
  FROM information_schema.columns
 WHERE table_schema = 'retries' AND table_name = 'workers'};
is( $node->safe_psql('postgres', $workers_columns),
	'pid,database,state,current_call,since,calls_run,errors',
	'1.0: retries.workers has no busy_time');

# keys that 1.0 let two calls share, each time once the first had
# finished: 'dup' by a finished call and an unfinished one, 'dup2' by two
# finished ones
my ($dup_done, $dup2_old) = split /\|/, $node->safe_psql('postgres',
	"SELECT retries.call('keyed(bigint)', '[1]', key => 'dup') || '|' ||"
	  . " retries.call('keyed(bigint)', '[3]', key => 'dup2')");
wait_until($node, 'postgres',
	"SELECT count(*) FROM retries.calls WHERE id IN ($dup_done, $dup2_old) AND state = 'succeeded'",
	'2', '1.0: the first calls of two keys finished');
my $dup2_new = $node->safe_psql('postgres',
	"SELECT retries.call('keyed(bigint)', '[4]', key => 'dup2')");
wait_until($node, 'postgres',
	"SELECT state FROM retries.calls WHERE id = $dup2_new",
	'succeeded', '1.0: a second call of key dup2 finished too');
my $dup_pending = $node->safe_psql('postgres',
	"SELECT retries.call('keyed(bigint)', '[2]', now() + interval '1 hour', 'dup')");
isnt($dup_pending, $dup_done, '1.0: a finished call\'s key named a new call');

my $gate = close_gate($node, 'postgres', 1);
$node->safe_psql(
	'postgres', q{
SELECT retries.call('slow(bigint)', jsonb_build_array(i)) FROM generate_series(1, 4) i;
SELECT retries.call('work(bigint)', jsonb_build_array(i)) FROM generate_series(100, 299) i;
SELECT retries.call('work(bigint)', jsonb_build_array(i), now() + interval '3 s')
  FROM generate_series(300, 349) i;
SELECT retries.call('retrying(bigint)', jsonb_build_array(i)) FROM generate_series(400, 409) i;
SELECT retries.call('doomed(bigint)', jsonb_build_array(i)) FROM generate_series(500, 502) i;
});

###########################################################################
# b. the update, while a slow call runs
###########################################################################

wait_at_gate($node, 'postgres', 1, 1, 'a worker is running a slow call (at the gate)');
my $updater = $node->background_psql('postgres', on_error_stop => 0);
$updater->query_until(qr/update sent/,
	"\\echo update sent\nALTER EXTENSION retries UPDATE;\n");
wait_until(
	$node, 'postgres',
	"SELECT count(*) FROM pg_stat_activity"
	  . " WHERE query LIKE 'ALTER EXTENSION retries UPDATE%' AND wait_event_type = 'Lock'",
	'1', 'the update waits for the slow call');
open_gate($gate);
my ($out, $failed) = $updater->query('SELECT 1');
ok(!$failed, 'ALTER EXTENSION retries UPDATE while calls run')
  or diag($updater->{stderr});
$updater->quit;
is( $node->safe_psql(
		'postgres', "SELECT extversion FROM pg_extension WHERE extname = 'retries'"),
	$node->safe_psql('postgres',
		"SELECT default_version FROM pg_available_extensions WHERE name = 'retries'"),
	'the extension is at the current version');
is( $node->safe_psql(
		'postgres', "SELECT to_regclass('retries.call_data_due_by_role') IS NOT NULL"),
	't', '1.2: the index of fair claiming is there');
isnt(
	$node->safe_psql('postgres',
		"SELECT count(*) FROM retries.calls WHERE state IN ('scheduled', 'running')"),
	'0',
	'calls were still pending when the update committed');

# the keys 1.0 let two calls share stay with one of them
is( $node->safe_psql(
		'postgres',
		"SELECT string_agg(id || ':' || coalesce(key, '-'), ',' ORDER BY id) FROM retries.calls"
		  . " WHERE id IN ($dup_done, $dup_pending, $dup2_old, $dup2_new)"),
	join(',',
		map { $_->[0] . ':' . $_->[1] } sort { $a->[0] <=> $b->[0] }
		  ([ $dup_done, '-' ], [ $dup_pending, 'dup' ], [ $dup2_old, '-' ], [ $dup2_new, 'dup2' ])),
	'1.2: a shared key stays with the unfinished call, or else the latest');
is( $node->safe_psql('postgres',
		"SELECT retries.call('keyed(bigint)', '[5]', key => 'dup') || ','"
		  . " || retries.call('keyed(bigint)', '[6]', key => 'dup2')"),
	"$dup_pending,$dup2_new",
	'1.2: the key names that call, finished or not');
$node->safe_psql('postgres', "SELECT retries.cancel($dup_pending)");

# calls scheduled and a function annotated under 1.1
$node->safe_psql(
	'postgres', q{
SELECT retries.call('work(bigint)', jsonb_build_array(i)) FROM generate_series(600, 699) i;
CREATE FUNCTION later(id bigint) RETURNS void LANGUAGE sql AS $$ SELECT record($1) $$;
SELECT retries.annotate('later(bigint)', '2 10ms', on_exhausted => 'exhausted(bigint)');
SELECT retries.call('later(bigint)', '[700]');
});

###########################################################################
# c. everything finishes, once
###########################################################################

# 4 slow + 200 + 50 later + 10 retrying + 100 + 1 succeed, and 3 keyed; 3
# doomed fail; 1 keyed cancelled
wait_until($node, 'postgres', states(), 'cancelled:1,failed:3,succeeded:368',
	'every call finished');
is( $node->safe_psql(
		'postgres', q{
SELECT count(*), max(n),
	   count(*) FILTER (WHERE id BETWEEN 400 AND 409 AND attempt = 3)
  FROM results}),
	'365|1|10',
	'each call had its effect exactly once; retrying calls at attempt 3');
is( $node->safe_psql(
		'postgres', q{
SELECT count(*) FROM retries.calls c
 WHERE c.attempts <> (SELECT count(*) FROM retries.attempts a WHERE a.call_id = c.id)}),
	'0',
	'every call has as many attempts as it counts');
is( $node->safe_psql(
		'postgres', q{
SELECT string_agg(DISTINCT c.attempts::text, ',')
  FROM retries.calls c WHERE c.fn = 'retrying(bigint)'::regprocedure}),
	'3', 'retrying calls took three attempts each');
is( $node->safe_psql(
		'postgres', q{
SELECT count(*) FROM hook_log h JOIN retries.calls c ON c.id = h.call_id
 WHERE c.fn = 'doomed(bigint)'::regprocedure AND c.attempts = 2}),
	'3', 'on_exhausted ran once for each doomed call, after two attempts');

###########################################################################
# d. what 1.1 changed
###########################################################################

is( $node->safe_psql('postgres', $fn_types),
	'fn:oid,on_exhausted:oid,delay_fn:oid',
	'1.4 stores functions by key, of type oid (1.1 to 1.3 as regprocedure, which pg_upgrade refuses)');
is( $node->safe_psql(
		'postgres', q{
SELECT count(*) FILTER (WHERE f.fn IS NULL) || ',' || (count(*) > 4)
  FROM (SELECT fn FROM retries.policy_data UNION SELECT on_exhausted FROM retries.policy_data
		UNION SELECT delay_fn FROM retries.policy_data) r
  LEFT JOIN retries.function_names f ON f.key = r.fn
   AND f.fn = to_regprocedure(f.signature)
   AND f.origin = retries.origin()
 WHERE r.fn IS NOT NULL}),
	'0,true',
	'1.4 names every function a policy refers to in function_names');
is( $node->safe_psql(
		'postgres', q{
SELECT array_agg(c::regclass::text ORDER BY c::regclass::text)
  FROM pg_extension, unnest(extconfig) c WHERE extname = 'retries'}),
	'{retries.attempt_data,retries.call_after,retries.call_after_pending,'
	  . 'retries.call_data,retries.call_data_id_seq,retries.event_data,'
	  . 'retries.flow_data,retries.function_names,'
	  . 'retries.policy_data,retries.policy_data_id_seq,'
	  . 'retries.schedule_data,retries.schedule_data_id_seq}',
	'1.1 dumps attempts and the id sequences too, 1.2 the schedules, the gates and the chains, 1.6 the events');
is( $node->safe_psql('postgres', $workers_columns),
	'pid,database,state,current_call,since,calls_run,errors,busy_time',
	'1.1: retries.workers has busy_time');
# the four slow calls slept 1 s each, most of them under 1.0, in workers
# that the update did not restart
is( $node->safe_psql(
		'postgres',
		"SELECT count(*) || ',' || (sum(busy_time) >= interval '4 s')::text"
		  . " FROM retries.workers WHERE database = 'postgres'"),
	'2,true',
	'1.1: busy_time counts the time the workers spent on calls, under 1.0 too');
is( $node->safe_psql(
		'postgres', 'SELECT string_agg(fn::text, \',\' ORDER BY fn::text) FROM retries.policies'),
	'doomed(bigint),keyed(bigint),later(bigint),retrying(bigint),slow(bigint),work(bigint)',
	'retries.policies lists the policies made under 1.0 and 1.1');
is( $node->safe_psql(
		'postgres', q{
SELECT has_table_privilege('public', c, 'SELECT')
  FROM unnest('{retries.calls,retries.policies,retries.stats,retries.workers}'::regclass[]) c
 GROUP BY 1}),
	't', 'the views made again are readable by everyone');
unlike(slurp_file($node->logfile), qr/deadlock detected/,
	'the update and the workers never deadlocked');

# 1.2: a schedule fires in the updated database, in workers that the
# update did not restart, and its calls name it in retries.calls
$node->safe_psql('postgres',
	"SELECT retries.schedule('after update', 'work(bigint)', '1s', '[900]')");
wait_until($node, 'postgres',
	"SELECT count(*) > 0 FROM retries.calls WHERE schedule = 'after update' AND state = 'succeeded'",
	't', '1.2: a schedule fires after the update');
$node->safe_psql('postgres', "SELECT retries.unschedule('after update')");

# 1.2: a call after another, and its result; a function of 1.0 notifies
# nothing unless annotated again with notify
$node->safe_psql(
	'postgres', q{
CREATE FUNCTION twice(i bigint) RETURNS bigint LANGUAGE sql AS 'SELECT 2 * i';
SELECT retries.annotate('twice(bigint)', '3 10ms');
});
my $after = $node->safe_psql('postgres',
	"SELECT retries.call('twice(bigint)', '[21]',"
	  . " after => ARRAY[retries.call('work(bigint)', '[901]')])");
wait_until($node, 'postgres',
	"SELECT state || ' ' || result FROM retries.calls WHERE id = $after",
	'succeeded 42', '1.2: a call made after another runs, and keeps its result');
is($node->safe_psql('postgres',
		"SELECT string_agg(DISTINCT notify::text, ',') FROM retries.policies"),
	'false', '1.2: the policies made before notify nothing');

# 1.2 gives retries.call a priority, and the privileges the old one had
is( $node->safe_psql('postgres', $call_grants),
	'app:true,bystander:false',
	'1.2: the new retries.call keeps the grants of the old one (REVOKE FROM PUBLIC too)');

# 1.5: a command, and a schedule of one with its own policy, made in the
# updated database (kept paused, for the dump below)
my $command = $node->safe_psql('postgres',
	"SELECT retries.run_command('INSERT INTO results VALUES (990001, 1)', '2 10ms')");
wait_until($node, 'postgres', "SELECT state FROM retries.calls WHERE id = $command",
	'succeeded', '1.5: a command runs after the update');
$node->safe_psql('postgres',
	"SELECT retries.schedule_command('vacuum results', 'VACUUM results', '0 3 * * *',"
	  . " policy => '4 1s 1m', retry_on => '{55P03}')");
is($node->safe_psql('postgres',
		"SELECT command || ' | ' || policy FROM retries.schedules WHERE name = 'vacuum results'"),
	'VACUUM results | 4 1s 1m', '1.5: a command schedule keeps its command and policy');

# 1.6: a call that waits for an event, made in the updated database, waits
# through the dump below; a key with a window
my $waiting = $node->safe_psql('postgres',
	"SELECT retries.call('work(bigint)', '[990002]', on_event => 'go:990002')");
is($node->safe_psql('postgres',
		"SELECT state || ' ' || waiting_for_event FROM retries.calls WHERE id = $waiting"),
	'scheduled go:990002', '1.6: a call waits for its event after the update');
my $windowed = $node->safe_psql('postgres',
	"SELECT retries.call('work(bigint)', '[990003]', key => 'w', key_window => '1 hour')");
is($node->safe_psql('postgres',
		"SELECT retries.call('work(bigint)', '[990004]', key => 'w', key_window => '1 hour')"),
	$windowed, '1.6: a key with a window dedupes within it');
wait_until($node, 'postgres', "SELECT state FROM retries.calls WHERE id = $windowed",
	'succeeded', '1.6: ... and its call runs');

###########################################################################
# e. a dump of the upgraded database restores
###########################################################################

my $snapshot = q{
SELECT * FROM retries.policies ORDER BY fn::text;
SELECT * FROM retries.calls ORDER BY id;
SELECT * FROM retries.attempts ORDER BY call_id, attempt;
SELECT * FROM results ORDER BY id;
SELECT name, fn, command, policy, every FROM retries.schedules ORDER BY name;
};
my $before = $node->safe_psql('postgres', $snapshot);
my $max_id = $node->safe_psql('postgres', 'SELECT max(id) FROM retries.calls');
my $tmp = PostgreSQL::Test::Utils::tempdir;

$node->command_ok(
	[ 'pg_dump', '-Fc', '-f', "$tmp/db.dump", '-d', $node->connstr('postgres') ],
	'pg_dump of the upgraded database');
$node->safe_psql('postgres', 'CREATE DATABASE copy');
$node->command_ok(
	[ 'pg_restore', '--exit-on-error', '-d', $node->connstr('copy'), "$tmp/db.dump" ],
	'pg_restore into a new database');
wait_until($node, 'copy',
	"SELECT count(*) FROM retries.function_names"
	  . " WHERE origin <> retries.origin()",
	'0', 'the workers of the copy write its function references anew');
is($node->safe_psql('copy', $snapshot),
	$before, 'the copy has the same policies, calls, attempts and effects');
my $new = $node->safe_psql('copy', q{SELECT retries.call('work(bigint)', '[800]')});
cmp_ok($new, '>', $max_id, 'a call in the copy gets a new id');
wait_until($node, 'copy',
	"SELECT c.state || ',' || r.n FROM retries.calls c, results r"
	  . " WHERE c.id = $new AND r.id = 800",
	'succeeded,1', 'the call runs in the copy');
my $fired = $node->safe_psql('copy', "SELECT retries.trigger('vacuum results')");
wait_until($node, 'copy', "SELECT state FROM retries.calls WHERE id = $fired",
	'succeeded', 'the copy\'s command schedule fires, its policy restored with it');
is($node->safe_psql('copy', "SELECT max_attempts FROM retries.calls WHERE id = $fired"),
	'5', '... and its calls take that policy');
is( $node->safe_psql('copy', $call_grants),
	'app:true,bystander:false',
	'the copy keeps who may call retries.call (the grants were the user\'s, not the extension\'s)');
is($node->safe_psql('copy', "SELECT retries.emit('go:990002')"),
	'1', 'the copy\'s waiting call is released by its event');
wait_until($node, 'copy',
	"SELECT c.state || ',' || r.n FROM retries.calls c, results r"
	  . " WHERE c.id = $waiting AND r.id = 990002",
	'succeeded,1', '... and runs in the copy');
is($node->safe_psql('postgres',
		"SELECT state || ' ' || waiting_for_event FROM retries.calls WHERE id = $waiting"),
	'scheduled go:990002', '... while the original still waits');

$node->stop;
done_testing();
