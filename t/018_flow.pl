# Flow control holds across workers and crashes:
#
#   a. max_running 2 with 4 workers: each attempt samples, twice, how many
#      attempts of its function are running (from retries.workers); none
#      ever sees more than 2, while the same calls without the limit are
#      seen 4 at once (so the sampling would catch an excess).  The first
#      attempts wait at a gate the test holds: 4 of the unlimited function
#      there; 2 of the limited one, while the workers hold every other call
#      of it (so the bound is reached, and no third attempt started);
#   b. a worker killed (SIGKILL) in the middle of a limited attempt (the 2
#      attempts in flight wait at a gate): after the crash restart, the
#      bound still holds, every call finishes, the killed attempt is
#      charged as interrupted (and at most the other one in flight with
#      it), and each call is charged only the attempts it ran;
#   c. 2,000 calls of a paused function: none is claimed or charged while
#      calls of another function run; resumed, each runs once;
#   d. max_running_per_key 1 with 4 workers: while an attempt of key hot
#      waits at a gate, the other 199 calls of that key are held, and 15
#      calls of keys a, b and c scheduled after them run meanwhile, beside
#      it; no two attempts of one limit_key ever run at once, and no call is
#      charged more than its attempt; a call of key y runs while one of key
#      x waits at a gate;
#   d2. rate '5/1h' with 4 workers, the extension's clock moved an hour at
#      a time (retries.debug_clock_offset): of 30 calls, none starts in the
#      hour from the server's start, then 5 in each hour, and the rest wait
#      held, uncharged, until the next;
#   d3. with retries.max_rate_limits = 8, one owner may hold one rate slot:
#      role hog's three functions limited to 1/1h each run one call between
#      them, the others wait held, uncharged; another owner's rate-limited
#      function runs all the same; and of two functions of one owner, the
#      second waits held until the first's slot idles (the clock moved on);
#   e. priorities, with one worker (so that the order of runs is the order
#      of claims): a call of priority 7 scheduled after 10,000 of priority
#      0 runs first, before the earliest of them (the head of the batch);
#      300 calls of priority -5, scheduled before those 10,000, run after
#      all of them; a call of priority 9 due in an hour is not run early.
#
# No step assumes how fast the machine is: where attempts must overlap,
# they wait at a gate (t/RetriesTest.pm) until the test has seen them
# together, and rates are tested on the extension's clock.

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
-- each passes a gate (1 for limited, 2 for free) between its samples
CREATE FUNCTION limited(i integer) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO seen VALUES ('limited', retries.current_call(), running_now('limited'));
	PERFORM } . gate_sql(1) . q{;
	INSERT INTO seen VALUES ('limited', retries.current_call(), running_now('limited'));
END $$;
CREATE FUNCTION free(i integer) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO seen VALUES ('free', retries.current_call(), running_now('free'));
	PERFORM } . gate_sql(2) . q{;
	INSERT INTO seen VALUES ('free', retries.current_call(), running_now('free'));
END $$;
SELECT retries.annotate('limited(integer)', '3 10ms', max_running => 2);
SELECT retries.annotate('free(integer)', '3 10ms');
});
wait_until($node, 'postgres', workers_query('postgres'), '4', 'four workers');

sub all_done
{
	return "SELECT count(*) = 0 FROM retries.call_data WHERE state = 'scheduled'";
}

###########################################################################
# a. the bound, sampled by the attempts themselves
###########################################################################

# held(FN): SQL giving how many scheduled calls of function FN are held
sub held
{
	my ($fn) = @_;
	return "SELECT count(*) FROM retries.calls WHERE fn = '$fn'::regprocedure"
	  . " AND state = 'scheduled' AND id IN (SELECT id FROM retries.call_data WHERE held)";
}

# without the limit: four attempts at once, each sampled while the others
# wait at the gate (the last to take its first sample sees all four)
my $gate = close_gate($node, 'postgres', 2);
$node->safe_psql('postgres',
	"SELECT count(retries.call('free(integer)', jsonb_build_array(i)))"
	  . " FROM generate_series(1, 100) i");
wait_at_gate($node, 'postgres', 2, 4, 'a: four attempts of the unlimited function at once');
open_gate($gate);
wait_until($node, 'postgres', all_done(), 't', 'a: every call of it finishes');

# with the limit of 2: two attempts wait at the gate, and the workers hold
# every other call of the function instead of starting a third
$gate = close_gate($node, 'postgres', 1);
$node->safe_psql('postgres',
	"SELECT count(retries.call('limited(integer)', jsonb_build_array(i)))"
	  . " FROM generate_series(1, 100) i");
wait_at_gate($node, 'postgres', 1, 2, 'a: two attempts of the limited function at once');
wait_until($node, 'postgres', held('limited(integer)'), '98',
	'a: the workers hold its 98 other calls');
is($node->safe_psql('postgres', gate_waiters(1)), '2', 'a: and start no third attempt');
open_gate($gate);
wait_until($node, 'postgres', all_done(), 't', 'a: every call finishes');
my ($limited_max, $free_max) = split /\|/, $node->safe_psql('postgres',
	"SELECT max(running) FILTER (WHERE fn = 'limited'),"
	  . " max(running) FILTER (WHERE fn = 'free') FROM seen");
ok($limited_max <= 2,
	"a: no attempt of the limited function saw more than 2 running ($limited_max)");
is($limited_max, 2, 'a: the limit is reached: 2 ran at once');
is($free_max, 4, 'a: without the limit, 4 ran at once: the sampling sees excess');
is( $node->safe_psql(
		'postgres',
		"SELECT count(*) FROM retries.calls WHERE state <> 'succeeded' OR attempts <> 1"),
	'0',
	'a: each call succeeded with one attempt');

###########################################################################
# b. a worker killed mid-attempt
###########################################################################

# the 2 attempts in flight wait at the gate: the kill comes in the middle
# of one, however slowly the test goes
$node->safe_psql('postgres', 'TRUNCATE seen');
$gate = close_gate($node, 'postgres', 1);
$node->safe_psql('postgres',
	"SELECT count(retries.call('limited(integer)', jsonb_build_array(i)))"
	  . " FROM generate_series(1, 20) i");
wait_at_gate($node, 'postgres', 1, 2, 'b: two limited attempts are in flight');
my $victim = $node->safe_psql('postgres',
	"SELECT pid || ',' || current_call FROM retries.workers"
	  . " WHERE state = 'running' AND current_call IS NOT NULL LIMIT 1");
isnt($victim, '', 'b: a limited attempt is running');
my ($pid, $killed_call) = split /,/, $victim;
kill 'KILL', $pid;
# the crash restart ends every backend, the gate's session too, and so
# opens the gate
wait_until($node, 'postgres', all_done(), 't',
	'b: every call finishes after the crash restart');
$gate->quit;
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
		  . " WHERE c.fn = 'limited(integer)'::regprocedure"),
	't',
	'b: the crash restart interrupted at most the 2 attempts in flight, nothing else failed');
is( $node->safe_psql(
		'postgres',
		"SELECT count(*) FROM retries.calls c"
		  . " WHERE c.fn = 'limited(integer)'::regprocedure"
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
	"SELECT retries.pause('limited(integer)');"
	  . " TRUNCATE seen;"
	  . " SELECT count(retries.call('limited(integer)', jsonb_build_array(i)))"
	  . " FROM generate_series(1, 2000) i;"
	  . " SELECT count(retries.call('free(integer)', jsonb_build_array(i)))"
	  . " FROM generate_series(1, 200) i");
wait_until($node, 'postgres',
	"SELECT count(*) = 0 FROM retries.calls WHERE state = 'scheduled'"
	  . " AND fn = 'free(integer)'::regprocedure",
	't', 'c: the other function\'s calls run');
is( $node->safe_psql(
		'postgres',
		"SELECT count(*) || ',' || sum(attempts) || ',' || bool_and(held)"
		  . " FROM retries.call_data c JOIN retries.policy_data p ON p.id = c.policy_id"
		  . " WHERE p.fn = (SELECT key FROM retries.function_refs WHERE fn = 'limited(integer)'::regprocedure) AND c.state = 'scheduled'"),
	'2000,0,true',
	'c: all 2,000 calls of the paused function wait, held, with no attempt');
is($node->safe_psql('postgres',
		"SELECT held || ',' || paused FROM retries.stats"
		  . " WHERE fn = 'limited(integer)'::regprocedure"),
	'2000,true', 'c: retries.stats says held 2000, paused');
$node->safe_psql('postgres', "SELECT retries.resume('limited(integer)')");
# 2,000 gated calls two at a time take minutes under AddressSanitizer on a
# loaded machine: the test waits while they progress
wait_progressing($node, 'postgres',
	"SELECT count(*) FROM retries.call_data c JOIN retries.policy_data p ON p.id = c.policy_id"
	  . " WHERE p.fn = (SELECT key FROM retries.function_refs WHERE fn = 'limited(integer)'::regprocedure)"
	  . " AND c.state = 'scheduled'",
	'0', 'c: resumed, they all run');
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
-- an attempt of key hot passes gate 3 between its samples
CREATE FUNCTION keyed(k text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO seen_keys VALUES (k, retries.current_call(), running_key(k), running_now('keyed'));
	IF k = 'hot' THEN
		PERFORM } . gate_sql(3) . q{;
	END IF;
	INSERT INTO seen_keys VALUES (k, retries.current_call(), running_key(k), running_now('keyed'));
END $$;
SELECT retries.annotate('keyed(text)', '3 10ms', max_running_per_key => 1);
});
$gate = close_gate($node, 'postgres', 3);
$node->safe_psql('postgres',
	"SELECT count(retries.call('keyed(text)', '[\"hot\"]', limit_key => 'hot'))"
	  . " FROM generate_series(1, 200)");
wait_at_gate($node, 'postgres', 3, 1, 'd: an attempt of key hot runs');
wait_until($node, 'postgres', held('keyed(text)'), '199',
	'd: the workers hold the 199 other calls of key hot');
is($node->safe_psql('postgres', gate_waiters(3)), '1', 'd: and start no second one');
# calls of other keys, scheduled after them, run meanwhile, beside it
$node->safe_psql('postgres',
	"SELECT count(retries.call('keyed(text)', jsonb_build_array(k), limit_key => k))"
	  . " FROM generate_series(1, 5), unnest('{a,b,c}'::text[]) k");
wait_until($node, 'postgres',
	"SELECT count(*) FROM retries.calls WHERE fn = 'keyed(text)'::regprocedure"
	  . " AND args ->> 0 <> 'hot' AND state = 'succeeded'",
	'15', 'd: the 15 calls of keys a, b and c run while the 199 of key hot are held');
open_gate($gate);
wait_until($node, 'postgres', all_done(), 't', 'd: the keyed calls all run');
is($node->safe_psql('postgres', "SELECT max(running_key) FROM seen_keys"),
	'1', 'd: never two attempts of one key at once')
  or diag($node->safe_psql(
	'postgres', q{
SELECT s.*, (SELECT string_agg(a.attempt || ':' || a.started_at || '..' || a.finished_at, ' ')
			   FROM retries.attempts a WHERE a.call_id = s.call) AS attempts
  FROM seen_keys s
 WHERE s.key IN (SELECT key FROM seen_keys WHERE running_key > 1)
 ORDER BY s.at}));
is($node->safe_psql('postgres',
		"SELECT min(running) >= 2 FROM seen_keys WHERE key IN ('a', 'b', 'c')"),
	't', 'd: each attempt of keys a, b and c ran beside the one of key hot');

# The sampling would see two attempts at once: a call of key x waits at a
# gate; a call of key y, made once x runs (so that x's batch cannot have
# claimed it), is run by another worker meanwhile, unless the limit per key
# held it back as if x had its key.
$node->safe_psql(
	'postgres', q{
CREATE FUNCTION meet(k text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO seen_keys VALUES (k, retries.current_call(), running_key(k), running_now('meet'));
	IF k = 'x' THEN
		PERFORM } . gate_sql(4) . q{;
	END IF;
	INSERT INTO seen_keys VALUES (k, retries.current_call(), running_key(k), running_now('meet'));
END $$;
SELECT retries.annotate('meet(text)', '1 10ms', max_running_per_key => 1);
});
$gate = close_gate($node, 'postgres', 4);
my $x = $node->safe_psql('postgres',
	"SELECT retries.call('meet(text)', '[\"x\"]', limit_key => 'x')");
wait_at_gate($node, 'postgres', 4, 1, 'd: the call of key x runs');
my $y = $node->safe_psql('postgres',
	"SELECT retries.call('meet(text)', '[\"y\"]', limit_key => 'y')");
call_reaches($node, 'postgres', $y, 'succeeded', 'd: the call of key y runs meanwhile');
open_gate($gate);
call_reaches($node, 'postgres', $x, 'succeeded', 'd: then the call of key x finishes');
is( $node->safe_psql(
		'postgres',
		"SELECT max(running_key) || ',' || max(running) FROM seen_keys WHERE key IN ('x', 'y')"),
	'1,2',
	'd: attempts of two keys run together, one of each key');
is( $node->safe_psql(
		'postgres',
		"SELECT count(*) || ',' || sum(c.attempts) || ',' || count(DISTINCT s.call)"
		  . " FROM retries.calls c LEFT JOIN (SELECT DISTINCT call FROM seen_keys) s"
		  . " ON s.call = c.id WHERE c.fn = 'keyed(text)'::regprocedure"
		  . " AND c.state = 'succeeded'"),
	'215,215,215', 'd: each of the 215 calls ran once and was charged one attempt');

###########################################################################
# d2. rate
###########################################################################

# The rate's windows pass on the extension's clock, which the test moves
# an hour at a time (retries.debug_clock_offset), so that what each window
# admits does not depend on how fast the workers get to the calls.
my $clock_hours = 0;

# advance_clock(): the extension's clock an hour further on
sub advance_clock
{
	$clock_hours++;
	$node->safe_psql('postgres',
		"ALTER SYSTEM SET retries.debug_clock_offset = '${clock_hours}h';"
		  . " SELECT pg_reload_conf()");
	return;
}

$node->safe_psql(
	'postgres', q{
CREATE TABLE rate_starts (call bigint, at timestamptz DEFAULT clock_timestamp());
CREATE FUNCTION paced(i integer) RETURNS void LANGUAGE sql AS $$
	INSERT INTO rate_starts (call) VALUES (retries.current_call())
$$;
SELECT retries.annotate('paced(integer)', '3 10ms', rate => '5/1h');
SELECT count(retries.call('paced(integer)', jsonb_build_array(i))) FROM generate_series(1, 30) i;
});
# in the first hour from the server's start none starts (the starts
# before a restart are not known: doc/operations.md); in each hour after it
# 5 start, and the workers hold the others (none running): a sixth start in
# an hour would show as 6 started, or fewer held
wait_until($node, 'postgres',
	"SELECT (SELECT count(*) FROM rate_starts) || ' started, '"
	  . " || (" . held('paced(integer)') . ") || ' held'",
	'0 started, 30 held', 'd2: in its window from the server\'s start none starts');
for my $hour (1 .. 6)
{
	advance_clock();
	wait_until($node, 'postgres',
		"SELECT (SELECT count(*) FROM rate_starts) || ' started, '"
		  . " || (" . held('paced(integer)') . ") || ' held'",
		(5 * $hour) . ' started, ' . (30 - 5 * $hour) . ' held',
		"d2: hour $hour: 5 more start, the others wait held");
}
wait_until($node, 'postgres', all_done(), 't', 'd2: the rate-limited calls all run');
is( $node->safe_psql(
		'postgres',
		"SELECT count(DISTINCT r.call) || ',' || count(*) || ',' ||"
		  . " (SELECT sum(attempts) FROM retries.calls WHERE fn = 'paced(integer)'::regprocedure)"
		  . " FROM rate_starts r"),
	'30,30,30', 'd2: each call started once and was charged one attempt (holding charges none)');

###########################################################################
# d3. one owner's share of the rate slots
###########################################################################

# (the rates are of an hour: no slot idles unless the test moves the clock)
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
SELECT retries.annotate(f, '3 10ms', rate => '1/1h')
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
# way past the quota: hoarder's function a ran once (its slot idles when
# the clock has moved an hour on); then a call of b and one of a, both due:
# whichever a worker admits first takes the owner's one slot, and the other
# waits held until that slot idles, an hour later (b is due first, but two
# workers may claim the two calls at once and admit them in either order)
$node->safe_psql(
	'postgres', q{
CREATE ROLE hoarder LOGIN;
GRANT CREATE ON SCHEMA public TO hoarder;
GRANT INSERT ON rate_starts TO hoarder;
SET ROLE hoarder;
CREATE TABLE hoarded (fn text, at timestamptz DEFAULT clock_timestamp());
CREATE FUNCTION hoard_a() RETURNS void LANGUAGE sql AS 'INSERT INTO hoarded (fn) VALUES (''a'')';
CREATE FUNCTION hoard_b() RETURNS void LANGUAGE sql AS 'INSERT INTO hoarded (fn) VALUES (''b'')';
SELECT retries.annotate(f, '3 10ms', rate => '1/1h')
  FROM unnest('{hoard_a(),hoard_b()}'::regprocedure[]) f;
SELECT retries.call('hoard_a()');
RESET ROLE;
});
wait_until($node, 'postgres', "SELECT count(*) FROM hoarded", '1',
	'd3: the first function of hoarder runs');
advance_clock();
my $pair = join ',', split /\n/, $node->safe_psql(
	'postgres', q{
SET ROLE hoarder;
SELECT retries.call('hoard_b()');
SELECT retries.call('hoard_a()', run_at => now() + interval '10 ms');
RESET ROLE;
});
wait_until($node, 'postgres',
	"SELECT string_agg(state || CASE WHEN held THEN ' held' ELSE '' END, ','"
	  . " ORDER BY state::text) FROM retries.call_data WHERE id IN ($pair)",
	'scheduled held,succeeded',
	'd3: of b and a (whose slot idled), one runs, and the other waits held:'
	  . ' the owner holds one slot at a time');
advance_clock();
wait_until($node, 'postgres', "SELECT count(*) FROM hoarded", '3',
	'd3: the other runs once the first one\'s slot idles');

###########################################################################
# e. priorities
###########################################################################

$node->safe_psql(
	'postgres', q{
ALTER SYSTEM RESET retries.debug_clock_offset;
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
wait_until($node, 'postgres', "SELECT count(*) FROM ran", '10302', 'e: the due calls run');
is($node->safe_psql('postgres', "SELECT n FROM ran WHERE tag = 'high'"),
	'1', 'e: the call of priority 7 runs first, before the earliest due call of priority 0');
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
