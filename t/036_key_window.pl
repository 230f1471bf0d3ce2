# A key_window spaces the deliveries of a key's calls (version 1.7): no
# attempt of a call starts within the window of the start of an attempt of
# another call of its key, measured on the attempts the workers recorded.
#
#   a. a backlog under load: 6 calls of each of 8 keys (window 1 s), of
#      mixed priorities, made while the function is paused, with 4 workers
#      and 3,000 plain calls draining beside them; resumed, retry_now() on
#      the calls put off, one worker SIGKILLed at a random moment: every
#      keyed call runs, and the smallest gap between the starts of two
#      calls of a key is at least the window;
#   b. a crash in the middle of an attempt: the key's next call, due at
#      once, starts at least the window after the start of the attempt
#      that the crash cut short (the ledger charges it, with its start,
#      before any call is claimed), and the interrupted call runs again;
#   c. with a window of a millisecond, such a backlog is delivered closer
#      than a second apart: the measure of a. sees a gap below its window.
#   e. from a pool of clients: 16 pgbench clients ask for the emails of 10
#      customers (key per customer, window 250 ms, each ask in a transaction
#      that also emits an event and debounces a save of its own key) for 4
#      s: no error (no 40P01), and the deliveries of each customer's emails
#      are at least the window apart;
#   d. debounce_max under a stream of edits that never pauses: a session
#      debounces one key (2 s) again and again, and the call still runs,
#      while the edits go on, by its debounce_max (3 s): each edit after it
#      starts a new burst, and a new call.

use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RetriesTest;
use Test::More;
use Time::HiRes qw(usleep);
use IPC::Run;

my $node = retries_node('key_window');
$node->append_conf('postgresql.conf', "retries.max_workers = 4\n");
$node->start;

$node->safe_psql('postgres', q{
CREATE EXTENSION retries;
CREATE FUNCTION kw(n int) RETURNS void LANGUAGE sql AS 'SELECT';
SELECT retries.annotate('kw(int)', '5 10ms');
CREATE FUNCTION plain(n int) RETURNS void LANGUAGE sql AS 'SELECT';
SELECT retries.annotate('plain(int)', '3 10ms');
CREATE FUNCTION kg(n int) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	IF n = 0 AND retries.current_attempt() = 1 THEN
		PERFORM } . gate_sql(5) . q{;
	END IF;
END $$;
SELECT retries.annotate('kg(int)', '5 10ms');
-- NKEYS keys, NCALLS calls of each, all due now: each call's creation is
-- moved back before the next is made, so that none dedupes to the one
-- before it (the window dedupes the calls made within it)
CREATE PROCEDURE backlog(fn regprocedure, prefix text, nkeys int, ncalls int, win interval)
LANGUAGE plpgsql AS $$
BEGIN
	FOR c IN 1 .. ncalls LOOP
		FOR k IN 1 .. nkeys LOOP
			PERFORM retries.call(fn, jsonb_build_array(c), key => prefix || k,
								 key_window => win, priority => (c * 7 + k) % 3);
		END LOOP;
		UPDATE retries.call_data SET created_at = created_at - interval '1 day'
		 WHERE key LIKE prefix || '%';
	END LOOP;
END $$;
-- the smallest gap between the starts of attempts of two calls of a key
CREATE FUNCTION min_gap(prefix text) RETURNS interval LANGUAGE sql AS $$
	SELECT min(g) FROM (
		SELECT a.started_at - lag(a.started_at) OVER w AS g,
			   a.call_id <> lag(a.call_id) OVER w AS other
		  FROM retries.attempt_data a JOIN retries.call_data c ON c.id = a.call_id
		 WHERE c.key LIKE prefix || '%'
		WINDOW w AS (PARTITION BY c.key ORDER BY a.started_at)) s
	 WHERE other
$$;
});

###########################################################################
# a. a backlog under load
###########################################################################
$node->safe_psql('postgres', q{
SELECT retries.pause('kw(int)');
CALL backlog('kw(int)', 'a', 8, 6, '1 s');
SELECT count(retries.call('plain(int)', jsonb_build_array(i))) FROM generate_series(1, 3000) i;
SELECT retries.resume('kw(int)');
});
my $killed = 0;
my $until = time() + $RetriesTest::DEADLINE;
for (;;)
{
	my ($left) = query_value($node, 'postgres',
		"SELECT count(*) FROM retries.call_data WHERE key LIKE 'a%' AND state <> 'succeeded'");
	last if defined $left && $left eq '0';
	last if time() > $until;
	if (defined $left && !$killed)
	{
		usleep(int(rand(1_000_000)));    # not a wait: a random moment for the kill
		my ($pid) = query_value($node, 'postgres',
			"SELECT pid FROM retries.workers ORDER BY state = 'running' DESC LIMIT 1");
		if (defined $pid && $pid =~ /^\d+$/)
		{
			kill 'KILL', $pid;
			$killed = 1;
		}
	}
	elsif (defined $left)
	{
		# a retry_now() of the calls put off: they are put off again
		query_value($node, 'postgres',
			"SELECT count(retries.retry_now(id)) FROM retries.call_data"
			  . " WHERE key LIKE 'a%' AND state = 'scheduled' AND attempts = 0"
			  . " AND next_attempt > now()");
	}
	usleep(200_000);    # poll
}
wait_until($node, 'postgres',
	"SELECT count(*) FILTER (WHERE state = 'succeeded') FROM retries.call_data WHERE key LIKE 'a%'",
	'48', 'a: every call of the backlog ran');
ok($killed, 'a: a worker was SIGKILLed meanwhile');
is($node->safe_psql('postgres', "SELECT min_gap('a') >= interval '1 s'"),
	't', 'a: no two calls of a key started within the window')
  or diag($node->safe_psql('postgres', "SELECT min_gap('a')"));
is( $node->safe_psql(
		'postgres',
		"SELECT count(*) FROM retries.call_data WHERE key LIKE 'a%' AND attempts"
		  . " <> (SELECT count(*) FROM retries.attempt_data WHERE call_id = id)"),
	'0',
	'a: no call was charged for being put off');
wait_until($node, 'postgres',
	"SELECT count(*) FROM retries.calls WHERE fn = 'plain(int)'::regprocedure AND state = 'succeeded'",
	'3000', 'a: the plain calls beside them all ran');

###########################################################################
# b. a crash in the middle of an attempt
###########################################################################
my $gate = close_gate($node, 'postgres', 5);
# (made a day ago, as far as the window's dedupe is concerned, so that the
# second call is a call of its own: its row is locked once a worker runs it)
my $first = $node->safe_psql('postgres', q{
BEGIN;
SELECT retries.call('kg(int)', '[0]', key => 'b', key_window => '2 s');
UPDATE retries.call_data SET created_at = created_at - interval '1 day' WHERE key = 'b';
COMMIT;
});
wait_at_gate($node, 'postgres', 5, 1, 'b: the first call of b runs, held at the gate');
my $second = $node->safe_psql('postgres',
	"SELECT retries.call('kg(int)', '[1]', key => 'b', key_window => '2 s')");
isnt($second, $first, 'b: the second call is a call of its own');
my $pid = $node->safe_psql('postgres',
	"SELECT pid FROM retries.workers WHERE current_call = $first");
like($pid, qr/^\d+$/, 'b: the worker running the first call');
kill 'KILL', $pid;
# (the crash restart ends the gate's session too)
call_reaches($node, 'postgres', $first, 'succeeded',
	'b: the interrupted call runs again after the crash restart');
call_reaches($node, 'postgres', $second, 'succeeded', 'b: the second call runs');
$gate->quit;
is( $node->safe_psql(
		'postgres',
		"SELECT string_agg(outcome::text, ',' ORDER BY attempt) FROM retries.attempt_data"
		  . " WHERE call_id = $first"),
	'interrupted,succeeded',
	'b: the cut short attempt was charged, with its start');
is($node->safe_psql('postgres', "SELECT min_gap('b') >= interval '2 s'"),
	't', 'b: the second call started the window after the interrupted attempt, at least')
  or diag($node->safe_psql('postgres', "SELECT min_gap('b')"));

###########################################################################
# c. a window of a millisecond
###########################################################################
$node->safe_psql('postgres', q{
SELECT retries.pause('kw(int)');
CALL backlog('kw(int)', 'c', 2, 3, '1 ms');
SELECT retries.resume('kw(int)');
});
wait_until($node, 'postgres',
	"SELECT count(*) FILTER (WHERE state = 'succeeded') FROM retries.call_data WHERE key LIKE 'c%'",
	'6', 'c: the calls without a window ran');
is($node->safe_psql('postgres', "SELECT min_gap('c') < interval '1 s'"),
	't', 'c: with a window of 1 ms, a key\'s calls ran closer than a second apart');

###########################################################################
# e. from a pool of clients
###########################################################################
$node->safe_psql('postgres', q{
CREATE FUNCTION mail(customer int) RETURNS void LANGUAGE sql AS 'SELECT';
SELECT retries.annotate('mail(int)', '3 10ms', key_window => '250 ms');
});
my $script = $node->basedir . '/asks.sql';
PostgreSQL::Test::Utils::append_to_file(
	$script, q{\set c random(1, 10)
\set e random(1, 50)
BEGIN;
SELECT retries.call('mail(int)', jsonb_build_array(:c), key => 'e' || :c);
SELECT retries.emit('seen:' || :e);
SELECT retries.call('kw(int)', jsonb_build_array(:e), key => 'save:' || :e, debounce => '10 ms');
COMMIT;
});
my ($pgb_out, $pgb_err);
my $pgbench_ok = IPC::Run::run(
	[
		$node->installed_command('pgbench'), '-n', '-c', '16', '-j', '4', '-T',
		'4', '-f', $script, '-h', $node->host, '-p', $node->port, 'postgres'
	],
	'>', \$pgb_out, '2>', \$pgb_err);
ok($pgbench_ok, 'e: 16 clients asked for 4 s without an error')
  or diag($pgb_err);
wait_until($node, 'postgres',
	"SELECT count(*) FROM retries.calls WHERE key LIKE 'e%' AND state <> 'succeeded'",
	'0', 'e: every email asked for was delivered');
is( $node->safe_psql(
		'postgres',
		"SELECT (SELECT count(*) FROM retries.calls WHERE key LIKE 'e%') > 10"
		  . " AND min_gap('e') >= interval '250 ms'"),
	't', 'e: customers got several emails, none within 250 ms of another')
  or diag($node->safe_psql('postgres', "SELECT min_gap('e')"));

###########################################################################
# d. debounce_max under edits that never pause
###########################################################################
my ($burst, $edits, $ran) = (undef, 0, 0);
$until = time() + $RetriesTest::DEADLINE;
while (time() < $until)
{
	my ($id) = query_value($node, 'postgres',
		"SELECT retries.call('kw(int)', jsonb_build_array($edits), key => 'd',"
		  . " debounce => '2 s', debounce_max => '3 s')");
	next unless defined $id;
	$edits++;
	$burst //= $id;
	if ($id ne $burst)
	{
		$ran = 1;
		last;
	}
	usleep(100_000);    # poll: the next edit, and a look at the burst's call
}
ok($ran, "d: the burst's call started while the edits went on ($edits edits)");
call_reaches($node, 'postgres', $burst, 'succeeded', 'd: it ran, once');
is( $node->safe_psql(
		'postgres',
		"SELECT args->>0 <> '0' FROM retries.call_data WHERE id = $burst"),
	't', "d: with a later edit's arguments");

$node->stop;
done_testing();
