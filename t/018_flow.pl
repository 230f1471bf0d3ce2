# Flow control holds across workers and crashes:
#
#   a. max_running 2 with 4 workers: each attempt samples, twice, how many
#      attempts of its function are running (from retries.workers); none
#      ever sees more than 2, while the same calls without the limit are
#      seen 3 or 4 at once (so the sampling would catch an excess);
#   b. a worker killed (SIGKILL) in the middle of a limited attempt: after
#      the crash restart, the bound still holds, every call finishes, the
#      killed attempt is charged as interrupted (and at most the other one
#      in flight with it), and each call is charged only the attempts it
#      ran;
#   c. 2,000 calls of a paused function: none is claimed or charged while
#      calls of another function run; resumed, each runs once;
#   d. max_running_per_key 1 with 4 workers: no two attempts of one
#      limit_key ever run at once, while attempts of different keys do; 200
#      held calls of one key do not hold back 5 calls of another key
#      scheduled after them, and no call is charged more than its attempt;
#   d2. rate '5/1s' with 4 workers: of 30 calls, no 0.9-second span holds
#      more than 5 starts (as the attempts recorded their start, right
#      after the worker admitted them), and the 30 take at least 5 s;
#   d3. with retries.max_rate_limits = 8, one owner may hold one rate slot:
#      role hog's three functions limited to 1/30s each run one call between
#      them, the others wait held, uncharged (for 30 s); another owner's
#      rate-limited function runs all the same;
#   e. priorities, with one worker (so that the order of runs is the order
#      of claims): a call of priority 7 scheduled after 10,000 of priority
#      0 runs in the first batch; 300 calls of priority -5, scheduled
#      before those 10,000, run after all of them; a call of priority 9
#      due in an hour is not run early.

use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RetriesTest;
use Test::More;
use Time::HiRes qw(time);

my $node = retries_node('main');
$node->append_conf('postgresql.conf',
	"retries.max_workers = 4\nretries.max_rate_limits = 8\n");
$node->start;
$node->safe_psql(
	'postgres', q{
CREATE EXTENSION retries;
CREATE TABLE seen (fn text, call bigint, running integer);
-- attempts of the functions called fname running now, this one included
CREATE FUNCTION running_now(fname text) RETURNS integer LANGUAGE sql AS $$
	SELECT count(*)::integer FROM retries.workers w
	  JOIN retries.call_data c ON c.id = w.current_call
	  JOIN retries.policy_data p ON p.id = c.policy_id
	  JOIN retries.function_refs r ON r.key = p.fn
	 WHERE w.state = 'running' AND r.fn::text LIKE fname || '(%'
$$;
CREATE FUNCTION limited(i integer, secs float8) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO seen VALUES ('limited', retries.current_call(), running_now('limited'));
	PERFORM pg_sleep(secs);
	INSERT INTO seen VALUES ('limited', retries.current_call(), running_now('limited'));
END $$;
CREATE FUNCTION free(i integer, secs float8) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO seen VALUES ('free', retries.current_call(), running_now('free'));
	PERFORM pg_sleep(secs);
	INSERT INTO seen VALUES ('free', retries.current_call(), running_now('free'));
END $$;
SELECT retries.annotate('limited(integer,float8)', '3 10ms', max_running => 2);
SELECT retries.annotate('free(integer,float8)', '3 10ms');
});
wait_until($node, 'postgres', workers_query('postgres'), '4', 'four workers');

sub all_done
{
	return "SELECT count(*) = 0 FROM retries.call_data WHERE state = 'scheduled'";
}

###########################################################################
# a. the bound, sampled by the attempts themselves
###########################################################################

$node->safe_psql('postgres',
	"SELECT count(retries.call('limited(integer,float8)', jsonb_build_array(i, 0.02)))"
	  . " FROM generate_series(1, 100) i;"
	  . " SELECT count(retries.call('free(integer,float8)', jsonb_build_array(i, 0.02)))"
	  . " FROM generate_series(1, 100) i");
wait_until($node, 'postgres', all_done(), 't', 'a: every call finishes',
	120);
my ($limited_max, $free_max) = split /\|/, $node->safe_psql('postgres',
	"SELECT max(running) FILTER (WHERE fn = 'limited'),"
	  . " max(running) FILTER (WHERE fn = 'free') FROM seen");
ok($limited_max <= 2,
	"a: no attempt of the limited function saw more than 2 running ($limited_max)");
is($limited_max, 2, 'a: the limit is reached: 2 ran at once');
ok($free_max >= 3,
	"a: without the limit, 3 or more ran at once ($free_max): the sampling sees excess");
is( $node->safe_psql(
		'postgres',
		"SELECT count(*) FROM retries.calls WHERE state <> 'succeeded' OR attempts <> 1"),
	'0',
	'a: each call succeeded with one attempt');

###########################################################################
# b. a worker killed mid-attempt
###########################################################################

$node->safe_psql('postgres', 'TRUNCATE seen');
$node->safe_psql('postgres',
	"SELECT count(retries.call('limited(integer,float8)', jsonb_build_array(i, 1.0)))"
	  . " FROM generate_series(1, 20) i");
# an attempt (of 1 s) that started less than 50 ms ago: it still runs when
# the kill comes, however slowly psql exits on a loaded machine
my $fresh_attempt =
	"FROM retries.workers w JOIN retries.call_data c ON c.id = w.current_call"
  . " WHERE w.state = 'running' AND w.since > clock_timestamp() - interval '50 ms'";
my $victim = '';
my $give_up = time() + $RetriesTest::DEADLINE;
while ($victim eq '' && time() < $give_up)
{
	$victim = $node->safe_psql('postgres',
		"SELECT w.pid || ',' || w.current_call $fresh_attempt LIMIT 1");
}
isnt($victim, '', 'b: a limited attempt is running');
my ($pid, $killed_call) = split /,/, $victim;
kill 'KILL', $pid;
wait_until($node, 'postgres', all_done(), 't',
	'b: every call finishes after the crash restart', 120);
is( $node->safe_psql('postgres',
		"SELECT coalesce(max(running), 0) <= 2 FROM seen WHERE fn = 'limited'"),
	't',
	'b: no attempt saw more than 2 running, across the crash');
is( $node->safe_psql(
		'postgres',
		"SELECT string_agg(a.outcome::text, ',' ORDER BY a.attempt)"
		  . " FROM retries.attempts a WHERE a.call_id = $killed_call"),
	'interrupted,succeeded',
	'b: the killed attempt is charged as interrupted, then the call succeeds');
is( $node->safe_psql(
		'postgres',
		"SELECT count(*) FILTER (WHERE a.outcome = 'interrupted') <= 2"
		  . " AND count(*) FILTER (WHERE a.outcome NOT IN ('interrupted', 'succeeded')) = 0"
		  . " FROM retries.attempts a JOIN retries.calls c ON c.id = a.call_id"
		  . " WHERE c.fn = 'limited(integer,float8)'::regprocedure"),
	't',
	'b: the crash restart interrupted at most the 2 attempts in flight, nothing else failed');
is( $node->safe_psql(
		'postgres',
		"SELECT count(*) FROM retries.calls c"
		  . " WHERE c.fn = 'limited(integer,float8)'::regprocedure"
		  . " AND (c.state <> 'succeeded' OR c.attempts <> (SELECT count(*)"
		  . "  FROM retries.attempts a WHERE a.call_id = c.id)"
		  . "  OR (SELECT count(*) FROM retries.attempts a WHERE a.call_id = c.id"
		  . "   AND a.outcome = 'succeeded') <> 1)"),
	'0',
	'b: every call succeeded once, charged only the attempts it ran');

###########################################################################
# c. a paused function's calls are neither claimed nor charged
###########################################################################

$node->safe_psql('postgres',
	"SELECT retries.pause('limited(integer,float8)');"
	  . " TRUNCATE seen;"
	  . " SELECT count(retries.call('limited(integer,float8)', jsonb_build_array(i, 0)))"
	  . " FROM generate_series(1, 2000) i;"
	  . " SELECT count(retries.call('free(integer,float8)', jsonb_build_array(i, 0)))"
	  . " FROM generate_series(1, 200) i");
wait_until($node, 'postgres',
	"SELECT count(*) = 0 FROM retries.calls WHERE state = 'scheduled'"
	  . " AND fn = 'free(integer,float8)'::regprocedure",
	't', 'c: the other function\'s calls run');
is( $node->safe_psql(
		'postgres',
		"SELECT count(*) || ',' || sum(attempts) || ',' || bool_and(held)"
		  . " FROM retries.call_data c JOIN retries.policy_data p ON p.id = c.policy_id"
		  . " WHERE p.fn = (SELECT key FROM retries.function_refs WHERE fn = 'limited(integer,float8)'::regprocedure) AND c.state = 'scheduled'"),
	'2000,0,true',
	'c: all 2,000 calls of the paused function wait, held, with no attempt');
is($node->safe_psql('postgres',
		"SELECT held || ',' || paused FROM retries.stats"
		  . " WHERE fn = 'limited(integer,float8)'::regprocedure"),
	'2000,true', 'c: retries.stats says held 2000, paused');
$node->safe_psql('postgres', "SELECT retries.resume('limited(integer,float8)')");
wait_until($node, 'postgres', all_done(), 't', 'c: resumed, they all run', 120);
is( $node->safe_psql(
		'postgres',
		"SELECT count(*) || ',' || count(DISTINCT call) FROM seen WHERE fn = 'limited'"),
	'4000,2000',
	'c: each ran once (two samples each)');
is($node->safe_psql('postgres',
		"SELECT coalesce(max(running), 0) <= 2 FROM seen WHERE fn = 'limited'"),
	't', 'c: under the limit of 2 again');

###########################################################################
# d. max_running_per_key
###########################################################################

$node->safe_psql(
	'postgres', q{
CREATE TABLE seen_keys (key text, call bigint, running_key integer, running integer,
						at timestamptz DEFAULT clock_timestamp());
-- attempts of keyed() running now with this limit_key, this one included
CREATE FUNCTION running_key(k text) RETURNS integer LANGUAGE sql AS $$
	SELECT count(*)::integer FROM retries.workers w
	  JOIN retries.call_data c ON c.id = w.current_call
	 WHERE w.state = 'running' AND c.limit_key = k
$$;
CREATE FUNCTION keyed(k text, secs float8) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO seen_keys VALUES (k, retries.current_call(), running_key(k), running_now('keyed'));
	PERFORM pg_sleep(secs);
	INSERT INTO seen_keys VALUES (k, retries.current_call(), running_key(k), running_now('keyed'));
END $$;
SELECT retries.annotate('keyed(text,float8)', '3 10ms', max_running_per_key => 1);
SELECT count(retries.call('keyed(text,float8)', jsonb_build_array('hot', 0.02),
						  limit_key => 'hot'))
  FROM generate_series(1, 200);
SELECT count(retries.call('keyed(text,float8)', jsonb_build_array(k, 0.1), limit_key => k))
  FROM generate_series(1, 5), unnest('{a,b,c}'::text[]) k;
});
wait_until($node, 'postgres', all_done(), 't', 'd: the keyed calls all run', 120);
is($node->safe_psql('postgres', "SELECT max(running_key) FROM seen_keys"),
	'1', 'd: never two attempts of one key at once')
  or diag($node->safe_psql(
	'postgres', q{
SELECT s.*, (SELECT string_agg(a.attempt || ':' || a.started_at || '..' || a.finished_at, ' ')
			   FROM retries.attempts a WHERE a.call_id = s.call) AS attempts
  FROM seen_keys s
 WHERE s.key IN (SELECT key FROM seen_keys WHERE running_key > 1)
 ORDER BY s.at}));

# The sampling would see two attempts at once: a call of key x waits (60 s
# at most) until another attempt of meet() runs; a call of key y, made once
# x runs (so that x's batch cannot have claimed it), is run by another
# worker meanwhile, unless the limit per key held it back as if x had its key.
$node->safe_psql(
	'postgres', q{
CREATE FUNCTION meet(k text) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
	deadline timestamptz := clock_timestamp() + interval '60 s';
BEGIN
	INSERT INTO seen_keys VALUES (k, retries.current_call(), running_key(k), running_now('meet'));
	WHILE running_now('meet') < 2 AND clock_timestamp() < deadline LOOP
		PERFORM pg_sleep(0.01);
	END LOOP;
	INSERT INTO seen_keys VALUES (k, retries.current_call(), running_key(k), running_now('meet'));
END $$;
SELECT retries.annotate('meet(text)', '1 10ms', max_running_per_key => 1);
SELECT retries.call('meet(text)', '["x"]', limit_key => 'x');
});
wait_until($node, 'postgres',
	"SELECT running_key('x')", '1', 'd: the call of key x runs');
$node->safe_psql('postgres',
	"SELECT retries.call('meet(text)', '[\"y\"]', limit_key => 'y')");
wait_until($node, 'postgres', all_done(), 't', 'd: the calls of keys x and y run', 120);
is( $node->safe_psql(
		'postgres',
		"SELECT max(running_key) || ',' || max(running) FROM seen_keys WHERE key IN ('x', 'y')"),
	'1,2',
	'd: attempts of two keys run together, one of each key');
is( $node->safe_psql(
		'postgres',
		"SELECT (SELECT max(at) FROM seen_keys WHERE key = 'a')"
		  . " < (SELECT max(at) FROM seen_keys WHERE key = 'hot')"),
	't', 'd: the calls of key a do not wait behind the 200 held calls of key hot');
is( $node->safe_psql(
		'postgres',
		"SELECT count(*) || ',' || sum(c.attempts) || ',' || count(DISTINCT s.call)"
		  . " FROM retries.calls c LEFT JOIN (SELECT DISTINCT call FROM seen_keys) s"
		  . " ON s.call = c.id WHERE c.fn = 'keyed(text,float8)'::regprocedure"
		  . " AND c.state = 'succeeded'"),
	'215,215,215', 'd: each of the 215 calls ran once and was charged one attempt');

###########################################################################
# d2. rate
###########################################################################

$node->safe_psql(
	'postgres', q{
CREATE TABLE rate_starts (call bigint, at timestamptz DEFAULT clock_timestamp());
CREATE FUNCTION paced(i integer) RETURNS void LANGUAGE sql AS $$
	INSERT INTO rate_starts (call) VALUES (retries.current_call())
$$;
SELECT retries.annotate('paced(integer)', '3 10ms', rate => '5/1s');
SELECT count(retries.call('paced(integer)', jsonb_build_array(i))) FROM generate_series(1, 30) i;
});
wait_until($node, 'postgres', all_done(), 't', 'd2: the rate-limited calls all run', 120);
# the starts as the attempts record them, a few microseconds after the
# rate admitted them (the function's own clock_timestamp() comes later by
# as much as a worker takes to reach its INSERT, which varies: a worker's
# first call loads the catalogs)
is( $node->safe_psql(
		'postgres', q{
SELECT (max(n) <= 5)::text || ',' || (max(at) - min(at) >= interval '4.9 s')::text
  FROM (SELECT at, count(*) OVER (ORDER BY at RANGE BETWEEN interval '0.9 s' PRECEDING
										 AND CURRENT ROW) AS n
		  FROM (SELECT a.started_at AS at FROM retries.attempts a
				  JOIN retries.calls c ON c.id = a.call_id
				 WHERE c.fn = 'paced(integer)'::regprocedure) s) w}),
	'true,true', 'd2: at most 5 starts in any 0.9 s, and the 30 calls took 5 s');
is( $node->safe_psql(
		'postgres',
		"SELECT count(DISTINCT r.call) || ',' || count(*) || ',' ||"
		  . " (SELECT sum(attempts) FROM retries.calls WHERE fn = 'paced(integer)'::regprocedure)"
		  . " FROM rate_starts r"),
	'30,30,30', 'd2: each call started once and was charged one attempt (holding charges none)');

###########################################################################
# d3. one owner's share of the rate slots
###########################################################################

$node->safe_psql(
	'postgres', q{
CREATE ROLE hog LOGIN;
CREATE ROLE bystander LOGIN;
GRANT CREATE ON SCHEMA public TO hog, bystander;
GRANT INSERT ON rate_starts TO hog, bystander;
SET ROLE hog;
CREATE FUNCTION hog1() RETURNS void LANGUAGE sql AS 'INSERT INTO rate_starts (call) VALUES (retries.current_call())';
CREATE FUNCTION hog2() RETURNS void LANGUAGE sql AS 'INSERT INTO rate_starts (call) VALUES (retries.current_call())';
CREATE FUNCTION hog3() RETURNS void LANGUAGE sql AS 'INSERT INTO rate_starts (call) VALUES (retries.current_call())';
SELECT retries.annotate(f, '3 10ms', rate => '1/30s')
  FROM unnest('{hog1(),hog2(),hog3()}'::regprocedure[]) f;
SELECT retries.call(f) FROM unnest('{hog1(),hog2(),hog3()}'::regprocedure[]) f;
RESET ROLE;
});
wait_until($node, 'postgres',
	"SELECT count(*) FILTER (WHERE state = 'succeeded') || ',' || count(*) FILTER (WHERE held)"
	  . " || ',' || sum(attempts) FROM retries.call_data c JOIN retries.policy_data p"
	  . " ON p.id = c.policy_id JOIN retries.function_refs r ON r.key = p.fn WHERE r.fn::text LIKE 'hog%'",
	'1,2,1', 'd3: one of hog\'s three rate-limited functions runs, the others wait held, uncharged');
$node->safe_psql(
	'postgres', q{
SET ROLE bystander;
CREATE FUNCTION polite() RETURNS void LANGUAGE sql AS 'INSERT INTO rate_starts (call) VALUES (retries.current_call())';
SELECT retries.annotate('polite()', '3 10ms', rate => '100/1s');
SELECT retries.call('polite()') FROM generate_series(1, 3);
RESET ROLE;
});
wait_until($node, 'postgres',
	"SELECT count(*) FROM retries.calls WHERE fn = 'polite()'::regprocedure AND state = 'succeeded'",
	'3', 'd3: another owner\'s rate-limited function runs all the same');
$node->safe_psql('postgres',
	"SELECT retries.cancel(id) FROM retries.calls WHERE fn::text LIKE 'hog%' AND state = 'scheduled'");

# a slot that its function's rate no longer holds anything back with is no
# way past the quota: hoarder's function a ran once (its slot idles after
# 2 s); then a call of b and one of a, both due: whichever a worker admits
# first takes the owner's one slot, and the other must wait until that slot
# idles, 2 s later (b is due first, but two workers may claim the two
# calls at once and admit them in either order)
$node->safe_psql(
	'postgres', q{
CREATE ROLE hoarder LOGIN;
GRANT CREATE ON SCHEMA public TO hoarder;
GRANT INSERT ON rate_starts TO hoarder;
SET ROLE hoarder;
CREATE TABLE hoarded (fn text, at timestamptz DEFAULT clock_timestamp());
CREATE FUNCTION hoard_a() RETURNS void LANGUAGE sql AS 'INSERT INTO hoarded (fn) VALUES (''a'')';
CREATE FUNCTION hoard_b() RETURNS void LANGUAGE sql AS 'INSERT INTO hoarded (fn) VALUES (''b'')';
SELECT retries.annotate(f, '3 10ms', rate => '1/2s')
  FROM unnest('{hoard_a(),hoard_b()}'::regprocedure[]) f;
SELECT retries.call('hoard_a()');
RESET ROLE;
});
wait_until($node, 'postgres', "SELECT count(*) FROM hoarded", '1',
	'd3: the first function of hoarder runs');
wait_until($node, 'postgres',
	"SELECT clock_timestamp() > max(at) + interval '2.2 s' FROM hoarded", 't',
	'd3: its slot idles');
my $pair = join ',', split /\n/, $node->safe_psql(
	'postgres', q{
SET ROLE hoarder;
SELECT retries.call('hoard_b()');
SELECT retries.call('hoard_a()', run_at => now() + interval '10 ms');
RESET ROLE;
});
wait_until($node, 'postgres', "SELECT count(*) FROM hoarded", '3',
	'd3: the other two calls run');
my ($order, $apart) = split /\|/,
  $node->safe_psql('postgres',
	"SELECT string_agg(c.fn::text, ',' ORDER BY a.started_at),"
	  . " max(a.started_at) - min(a.started_at) >= interval '1.8 s'"
	  . " FROM retries.attempts a JOIN retries.calls c ON c.id = a.call_id"
	  . " WHERE c.id IN ($pair)");
is($apart, 't',
	"d3: of b and a (whose slot idled), the second ($order) waits for the first's slot to idle:"
	  . ' the owner holds one slot at a time');

###########################################################################
# e. priorities
###########################################################################

$node->safe_psql(
	'postgres', q{
ALTER SYSTEM SET retries.max_workers = 1;
ALTER SYSTEM SET retries.enabled = off;
SELECT pg_reload_conf();
CREATE TABLE ran (tag text, call bigint, n serial);
CREATE FUNCTION logged(tag text) RETURNS void LANGUAGE sql AS $$
	INSERT INTO ran (tag, call) VALUES (tag, retries.current_call())
$$;
SELECT retries.annotate('logged(text)', '3 10ms');
});
wait_until($node, 'postgres',
	"SELECT count(*) || ',' || count(*) FILTER (WHERE state = 'paused')"
	  . " FROM retries.workers WHERE database = 'postgres'",
	'1,1', 'e: one worker, paused');
$node->safe_psql(
	'postgres', q{
SELECT retries.call('logged(text)', '["first"]');
SELECT count(retries.call('logged(text)', '["low"]', priority => -5))
  FROM generate_series(1, 300);
SELECT count(retries.call('logged(text)', '["zero"]')) FROM generate_series(1, 10000);
SELECT retries.call('logged(text)', '["high"]', priority => 7);
SELECT retries.call('logged(text)', '["future"]', now() + interval '1 hour', priority => 9);
ALTER SYSTEM RESET retries.enabled;
SELECT pg_reload_conf();
});
wait_until($node, 'postgres', "SELECT count(*) FROM ran", '10302', 'e: the due calls run', 120);
cmp_ok($node->safe_psql('postgres', "SELECT n FROM ran WHERE tag = 'high'"),
	'<=', 100, 'e: the call of priority 7 runs in the first batch (of 100)');
is( $node->safe_psql(
		'postgres',
		"SELECT min(n) FILTER (WHERE tag = 'low') > max(n) FILTER (WHERE tag = 'zero')"
		  . " FROM ran"),
	't', 'e: the calls of priority -5 run after all those of priority 0');
is( $node->safe_psql(
		'postgres',
		"SELECT state || ',' || attempts || ',' || priority FROM retries.calls"
		  . " WHERE args = '[\"future\"]'"),
	'scheduled,0,9', 'e: a call of priority 9 due later waits for its time');
is($node->safe_psql('postgres', "SELECT count(DISTINCT call) FROM ran"),
	'10302', 'e: each call ran once');

done_testing();
