# A hostile review of calls beside their data on Citus (1.7):
# retries.call(..., colocate_with, shard_key), the mailboxes that carry the
# calls to the worker nodes, wait/result/cancel forwarded to the node of a
# call, retries.cluster_calls, and the call ids of each node group.
#
# mallory is the attacker (an ordinary LOGIN role with a schema of her
# own), alice the victim.  Each test asserts the safe behaviour; a test
# that fails because of a weakness found by the review is marked TODO (the
# suite stays green) and the weakness is described below.  Sections run
# in the order listed.
#
#   1. citus_setup() and citus_id_range() are the superuser's;
#   2. rows written straight into the mailbox: another role's function, a
#      schema without USAGE (by name and by OID), SQL in fn, a preset id,
#      NULLs, huge args; every call is made as the inserting role;
#   3. multi-row VALUES, INSERT ... SELECT, COPY, ON CONFLICT, UPDATE,
#      DELETE, TRUNCATE, LOCK of the mailbox: the mailbox stays empty;
#   4. rows written straight into a mailbox shard on a worker node;
#   5. forged ids in wait/result/cancel (other roles' calls, other or
#      absent node groups, negative ids, 2^63-1), the timeout's text;
#   6. retries.cluster_calls shows each role its own calls only;
#   7. exactly once: ROLLBACK TO SAVEPOINT, a plpgsql exception block, a
#      deferred error at COMMIT, PREPARE TRANSACTION by the caller;
#   8. colocate calls made by a call's function (a retries worker), whose
#      first attempt fails after making it;
#   9. an open transaction of mallory's holding a mailbox insert does not
#      stall alice's calls to the same shard;
#  13. chains (after) and keys of other roles, DROP EXTENSION, the mailbox
#      used from a worker node;
#  14. wait, result, cancel of a call made in the caller's open transaction;
#  10. a forwarded wait that the caller cancels (a cancel, then
#      statement_timeout) ends at once, and leaves no backend waiting on
#      the call's node;
#  11. retries.mailbox_deliver() fired by a table of the attacker's own
#      whose columns are not the mailbox's types;
#  12. no crash on any node.
#
# Findings of the review, fixed (the tests were TODO until then):
#   11 (high): any role with TEMP (PUBLIC by default) crashed the server:
#      CREATE TEMP TABLE mb (..., id text); CREATE TRIGGER ... BEFORE INSERT
#      ... EXECUTE FUNCTION retries.mailbox_deliver(); INSERT INTO mb ...
#      The trigger wrote the call id, an int8 Datum, into the column named
#      id whatever its type: a text column took it for a pointer (SIGSEGV,
#      crash restart).  Now EXECUTE on it is revoked from PUBLIC (no role
#      but a superuser may make such a trigger), and it refuses any table
#      but a mailbox of retries or its shard, with an id of type bigint.
#   5c/5e (low): a forwarded retries.wait() that timed out on the call's
#      node came back as 08006 "could not reach the node"; retries.node_op()
#      now traps query_canceled too, and the caller gets 57014.
#   14 (low): wait/result/cancel of a call made in the caller's own open
#      transaction, kept on another node, said 42704 "does not exist" (a
#      cancel cancelled nothing); now 55000, saying why and to do it after
#      COMMIT.
#
# The checks that a step ends "at once" bound its time by that of a
# trivial psql on the coordinator, measured in the same run ($quick, at
# least 10 s): what they tell apart is a step that ends when it should
# from one that waits for a call due in an hour, or for a lock held until
# the test lets it go.
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
use Time::HiRes qw(time);

citus_or_skip();
my $t_start = time();
my @nodes = citus_cluster(CONF => "wal_level = logical\n");
my ($c, $w1, $w2) = @nodes;
my $DB = 'postgres';
my %log_start = map { $_->name => -s $_->logfile } @nodes;
my $quick = psql_seconds($c) * 10;
$quick = 10 if $quick < 10;
note(sprintf('a step that ends at once takes less than %.1f s here', $quick));

# fails_with(NODE, ROLE, SQL, SQLSTATE, NAME): SQL as ROLE fails with
# SQLSTATE (a regexp); returns the error text
sub fails_with
{
	my ($node, $role, $sql, $sqlstate, $name) = @_;
	my ($out, $err) = try_as($node, $DB, $role, $sql);
	ok(!defined $out && $err =~ /ERROR:  $sqlstate:/, $name)
	  or diag("output: " . ($out // '(failed)') . "\nerror: $err");
	return $err;
}

$c->safe_psql($DB, q{
CREATE TABLE orders (id bigint, note text);
SELECT create_distributed_table('orders', 'id', shard_count := 8);
CREATE FUNCTION put(i bigint) RETURNS bigint LANGUAGE sql AS $$ SELECT i * 10 $$;
CREATE ROLE alice LOGIN;
CREATE ROLE mallory LOGIN;
CREATE SCHEMA alice AUTHORIZATION alice;
CREATE SCHEMA alice_hidden AUTHORIZATION alice;
CREATE SCHEMA mallory AUTHORIZATION mallory;
GRANT USAGE ON SCHEMA alice TO mallory;
GRANT ALL ON orders TO alice, mallory;
SET ROLE alice;
CREATE FUNCTION alice.private(i bigint) RETURNS bigint LANGUAGE sql AS $$ SELECT i $$;
REVOKE EXECUTE ON FUNCTION alice.private(bigint) FROM PUBLIC;
CREATE FUNCTION alice_hidden.f(i bigint) RETURNS bigint LANGUAGE sql AS $$ SELECT i $$;
RESET ROLE;
CREATE SEQUENCE relay_runs;
GRANT USAGE ON SEQUENCE relay_runs TO mallory;
CREATE FUNCTION relay(i bigint) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
	id bigint;
BEGIN
	id := retries.call('put(bigint)', jsonb_build_array(i), colocate_with => 'orders',
					   shard_key => i::text);
	IF nextval('relay_runs') = 1 THEN
		RAISE EXCEPTION 'the first attempt fails after its colocate call' USING ERRCODE = 'RT001';
	END IF;
	RETURN id;
END
$$;
SELECT retries.citus_setup('orders');
});
on_all(\@nodes,
	"SELECT retries.annotate('put(bigint)', '5 10ms 1s', retry_on => '{RT}');"
	  . "SELECT retries.annotate('alice.private(bigint)', '5 10ms 1s');"
	  . "SELECT retries.annotate('alice_hidden.f(bigint)', '5 10ms 1s');");
$c->safe_psql($DB, "SELECT retries.annotate('relay(bigint)', '5 10ms 1s', retry_on => '{RT}')");

my $colo = $c->safe_psql($DB,
	"SELECT colocationid FROM pg_dist_partition WHERE logicalrelid = 'orders'::regclass");
my $mailbox = "retries.call_mailbox_$colo";

# keys(PORT, N): N values of orders' distribution column whose shard is on
# the node listening on PORT
sub keys_on
{
	my ($port, $n, $from) = @_;
	$from //= 1;
	return split /,/, $c->safe_psql($DB,
		"SELECT string_agg(i::text, ',') FROM (SELECT i FROM generate_series($from, $from + 10000) i"
		  . " WHERE (SELECT n.nodeport FROM pg_dist_placement p JOIN pg_dist_node n USING (groupid)"
		  . "  WHERE p.shardid = get_shard_id_for_distribution_column('orders', i)) = $port"
		  . " ORDER BY i LIMIT $n) s");
}
my @k1 = keys_on($w1->port, 40, 1000);
my @k2 = keys_on($w2->port, 5, 1000);

# calls(ROLE-or-all, WHERE): how many calls the cluster keeps, seen by the
# superuser on every node
sub cluster_count
{
	my ($where) = @_;
	my $n = 0;
	$n += $_->safe_psql($DB, "SELECT count(*) FROM retries.call_data WHERE $where") for @nodes;
	return $n;
}
sub mailbox_rows
{
	return $c->safe_psql($DB, "SELECT count(*) FROM $mailbox");
}

###########################################################################
# 1. citus_setup and citus_id_range are the superuser's
###########################################################################
fails_with($c, 'mallory', "SELECT retries.citus_setup('orders')", '42501',
	'1a: a role may not run retries.citus_setup()');
fails_with($c, 'mallory', "SELECT retries.citus_setup()", '42501',
	'1b: nor retries.citus_setup() without a table');
fails_with($w1, 'mallory', "SELECT retries.citus_id_range()", '42501',
	'1c: nor retries.citus_id_range() on a worker node');
my $seqmin = on_all(\@nodes,
	"SELECT seqmin FROM pg_sequence WHERE seqrelid = 'retries.call_data_id_seq'::regclass");

###########################################################################
# 2. rows written straight into the mailbox (on the coordinator)
###########################################################################
my $ins = "INSERT INTO $mailbox (shard_key, fn, args, run_at, priority) VALUES";
fails_with($c, 'mallory', "$ins ($k1[0], 'alice.private(bigint)', '[1]', now(), 0) RETURNING id",
	'42501', "2a: the mailbox refuses a call of another role's function the role may not execute");
fails_with($c, 'mallory', "$ins ($k1[0], 'alice_hidden.f(bigint)', '[1]', now(), 0) RETURNING id",
	'42501', '2b: nor one in a schema without USAGE, by name');
my $hidden_oid = $w1->safe_psql($DB, "SELECT 'alice_hidden.f(bigint)'::regprocedure::oid");
fails_with($c, 'mallory', "$ins ($k1[0], '$hidden_oid', '[1]', now(), 0) RETURNING id",
	'42501', '2c: nor by its OID (on the shard\'s node)');
fails_with($c, 'mallory',
	"$ins ($k1[0], 'put(bigint)); CREATE ROLE evil SUPERUSER; SELECT (''put(bigint)', '[1]', now(), 0) RETURNING id",
	'(42601|22P02|42883|42704)', '2d: SQL in fn is a name that does not parse');
is($c->safe_psql($DB, "SELECT count(*) FROM pg_roles WHERE rolname = 'evil'"), '0',
	'2d: and runs nothing');
fails_with($c, 'mallory', "$ins ($k1[0], NULL, '[1]', now(), 0)", '(23502|22004)', '2e: fn NULL is refused');
fails_with($c, 'mallory', "$ins (NULL, 'put(bigint)', '[1]', now(), 0)", '(23502|22004|XX000|0A000)',
	'2f: shard_key NULL is refused');
my $forged = as_role($c, $DB, 'mallory',
	"INSERT INTO $mailbox (shard_key, fn, args, run_at, priority, id)"
	  . " VALUES ($k1[1], 'put(bigint)', '[7001]', now(), 0, 42) RETURNING id");
isnt($forged, '42', '2g: a preset id is not the id returned');
is($w1->safe_psql($DB,
		"SELECT scheduled_by::regrole || ' ' || (args->>0) FROM retries.call_data WHERE id = $forged"),
	'mallory 7001', '2g: the call was made on the shard\'s node, as the inserting role');
is($w1->safe_psql($DB, "SELECT count(*) FROM retries.call_data WHERE id = 42"), '0',
	'2g: and no call of the preset id');
my $err2h = fails_with($c, 'mallory',
	"INSERT INTO $mailbox (shard_key, fn, args, run_at, priority)"
	  . " VALUES ($k1[2], 'put(bigint)', jsonb_build_array(7002, repeat('x', 2000000)), now(), 0) RETURNING id",
	'[0-9A-Z]{5}', '2h: huge args are refused on the node');
like($err2h, qr/retries\.max_args_size/, '2h: by retries.max_args_size');
is(mailbox_rows(), '0', '2: the mailbox is empty');

###########################################################################
# 3. many rows, COPY, ON CONFLICT, UPDATE, DELETE, TRUNCATE, LOCK
###########################################################################
my $before = cluster_count("scheduled_by = 'mallory'::regrole");
as_role($c, $DB, 'mallory',
	"$ins ($k1[3], 'put(bigint)', '[7101]', now(), 0), ($k2[0], 'put(bigint)', '[7102]', now(), 0),"
	  . " ($k1[4], 'put(bigint)', '[7103]', now(), 0)");
as_role($c, $DB, 'mallory',
	"INSERT INTO $mailbox (shard_key, fn, args, run_at, priority)"
	  . " SELECT i, 'put(bigint)', jsonb_build_array(i), now(), 0 FROM generate_series(7201, 7220) i");
as_role($c, $DB, 'mallory',
	"COPY $mailbox (shard_key, fn, args, run_at, priority) FROM STDIN;\n"
	  . "7301\tput(bigint)\t[7301]\t2000-01-01\t0\n7302\tput(bigint)\t[7302]\t2000-01-01\t0\n\\.\n");
as_role($c, $DB, 'mallory',
	"$ins ($k1[5], 'put(bigint)', '[7401]', now(), 0) ON CONFLICT DO NOTHING");
is(cluster_count("scheduled_by = 'mallory'::regrole") - $before, 26,
	'3a: many-row VALUES, INSERT ... SELECT, COPY, ON CONFLICT DO NOTHING: one call per row, as the role');
is(mailbox_rows(), '0', '3a: the mailbox is empty after them');
fails_with($c, 'mallory', "UPDATE $mailbox SET fn = 'x'", '42501', '3b: UPDATE of the mailbox refused');
fails_with($c, 'mallory', "DELETE FROM $mailbox", '42501', '3c: DELETE refused');
fails_with($c, 'mallory', "TRUNCATE $mailbox", '42501', '3d: TRUNCATE refused');
fails_with($c, 'mallory', "BEGIN; LOCK TABLE $mailbox IN ACCESS EXCLUSIVE MODE", '42501',
	'3e: LOCK ... ACCESS EXCLUSIVE refused');
fails_with($c, 'mallory', "SELECT * FROM $mailbox", '42501', '3f: reading its other columns refused');
fails_with($c, 'mallory', "ALTER TABLE $mailbox DISABLE TRIGGER delivered", '42501',
	'3g: disabling its triggers refused');
fails_with($c, 'mallory', "SET session_replication_role = replica", '42501',
	'3h: skipping its triggers (session_replication_role) refused');

###########################################################################
# 4. rows written straight into a mailbox shard on a worker node
###########################################################################
my $shard = $c->safe_psql($DB,
	"SELECT shard_name('$mailbox'::regclass, shardid) FROM citus_shards"
	  . " WHERE table_name = '$mailbox'::regclass AND nodeport = " . $w1->port
	  . " ORDER BY shardid LIMIT 1");
$before = $w1->safe_psql($DB, "SELECT count(*) FROM retries.call_data WHERE scheduled_by = 'mallory'::regrole");
my ($out4, $err4) = try_as($w1, $DB, 'mallory',
	"SET citus.enable_manual_changes_to_shards = on;\n"
	  . "INSERT INTO $shard (shard_key, fn, args, run_at, priority) VALUES (1, 'put(bigint)', '[7501]', now(), 0) RETURNING id");
diag("4: straight into shard $shard: " . ($out4 // $err4));
fails_with($w1, 'mallory',
	"SET citus.enable_manual_changes_to_shards = on;\n"
	  . "INSERT INTO $shard (shard_key, fn, args, run_at, priority) VALUES (1, 'alice.private(bigint)', '[1]', now(), 0)",
	'42501', '4a: a shard on a worker node refuses another role\'s function too');
is($w1->safe_psql($DB,
		"SELECT count(*) FROM retries.call_data WHERE scheduled_by <> 'mallory'::regrole AND args->>0 = '7501'"),
	'0', '4b: a call made through a shard is the inserting role\'s');
is($w1->safe_psql($DB, "SET citus.override_table_visibility = off; SELECT count(*) FROM $shard"),
	'0', '4c: the shard is empty after it');

###########################################################################
# 5. forged ids
###########################################################################
my $alice_far = as_role($c, $DB, 'alice',
	"SELECT retries.call('put(bigint)', '[8001]', run_at => now() + interval '1 hour',"
	  . " colocate_with => 'orders', shard_key => '$k1[6]')");
my $alice_done = as_role($c, $DB, 'alice',
	"SELECT retries.call('put(bigint)', '[8002]', colocate_with => 'orders', shard_key => '$k1[7]')");
ok($alice_far >> 48 > 0, "5: alice's call is on a worker node ($alice_far)");
call_reaches($w1, $DB, $alice_done, 'succeeded', "5: alice's call $alice_done ran");
for my $op ("retries.wait($alice_done, '1 s')", "retries.result($alice_done)",
	"retries.cancel($alice_far)", "retries.wait($alice_far, '100 ms')")
{
	fails_with($c, 'mallory', "SELECT $op", '42704', "5a: mallory's $op through the coordinator: no such call");
	fails_with($w2, 'mallory', "SELECT $op", '42704', "5a: and through the other worker node");
}
is($w1->safe_psql($DB, "SELECT state FROM retries.call_data WHERE id = $alice_far"), 'scheduled',
	"5a: alice's call is not cancelled");
for my $id ('-1', '0', '-9223372036854775808', '9223372036854775807', (5 << 48) + 1,
	(32766 << 48) + 1, ((1 << 48) - 1), ((3 << 48) - 1))
{
	fails_with($c, 'mallory', "SELECT retries.result($id)", '(42704|55000)',
		"5b: retries.result($id): no such call, no crash");
	fails_with($c, 'mallory', "SELECT retries.cancel($id)", '(42704|55000)',
		"5b: retries.cancel($id): no such call");
}
# the timeout's text, under every IntervalStyle, reaches the node as the
# interval it is
my $mal_far = as_role($c, $DB, 'mallory',
	"SELECT retries.call('put(bigint)', '[8101]', run_at => now() + interval '1 hour',"
	  . " colocate_with => 'orders', shard_key => '$k1[8]')");
for my $style ('postgres', 'postgres_verbose', 'sql_standard', 'iso_8601')
{
	my $t0 = time();
	my ($o, $e) = try_as($c, $DB, 'mallory',
		"SET IntervalStyle = $style; SELECT retries.wait($mal_far, interval '300 ms')");
	ok(!defined $o && $e =~ /call $mal_far did not finish within 300ms/ && time() - $t0 < $quick,
		"5c: a forwarded wait times out after the interval given, under IntervalStyle $style")
	  or diag($e);
	like($e, qr/ERROR:  57014:/, "5c: with SQLSTATE 57014, as a wait here ($style)");
}
# an error node_op's handler cannot trap (57014) is taken for an unreachable node
my ($o5e, $e5e) = try_as($c, $DB, 'mallory', "SELECT retries.wait($mal_far, interval '300 ms')");
{
	unlike($e5e, qr/could not reach the node|try again once it is up/,
		'5e: a node that answered is not reported unreachable');
}
fails_with($c, 'mallory',
	"SELECT retries.wait($mal_far, interval '-1 s')", '(22023|57014)',
	'5d: a negative timeout: refused or at once');
is($w1->safe_psql($DB, "SELECT state FROM retries.call_data WHERE id = $mal_far"), 'scheduled',
	'5: mallory\'s own far call is still scheduled');

###########################################################################
# 6. retries.cluster_calls
###########################################################################
is(as_role($c, $DB, 'mallory',
		"SELECT count(*) FROM retries.cluster_calls WHERE scheduled_by <> 'mallory'::regrole"),
	'0', '6a: mallory sees no other role\'s call in retries.cluster_calls');
is(as_role($c, $DB, 'alice',
		"SELECT count(*) FROM retries.cluster_calls WHERE id IN ($alice_far, $alice_done)"),
	'2', '6b: alice sees her calls on the worker nodes there');

###########################################################################
# 7. exactly once: the call goes with its caller's transaction
###########################################################################
my $m = 9000;
# marker_calls(FROM, TO): the calls on the worker nodes whose argument is
# in FROM..TO
sub marker_calls
{
	my ($from, $to) = @_;
	my $n = 0;
	$n += $_->safe_psql($DB,
		"SELECT count(*) FROM retries.call_data WHERE (args->>0)::bigint BETWEEN $from AND $to")
	  for ($w1, $w2);
	return $n;
}
my $cc = "retries.call('put(bigint)', jsonb_build_array(%d), colocate_with => 'orders', shard_key => '%d')";
as_role($c, $DB, 'mallory',
	"BEGIN; SAVEPOINT s; SELECT " . sprintf($cc, 9001, $k1[9]) . "; ROLLBACK TO SAVEPOINT s;"
	  . " SELECT " . sprintf($cc, 9002, $k1[10]) . "; COMMIT;");
is(marker_calls(9001, 9001), 0, '7a: a call rolled back to a savepoint is made nowhere');
is(marker_calls(9002, 9002), 1, '7a: the one after it, once');
as_role($c, $DB, 'mallory', "DO \$\$ BEGIN PERFORM " . sprintf($cc, 9003, $k1[11])
	  . "; RAISE EXCEPTION 'x'; EXCEPTION WHEN OTHERS THEN NULL; END \$\$");
is(marker_calls(9003, 9003), 0, '7b: a call in a plpgsql block that failed is made nowhere');
as_role($c, $DB, 'mallory', q{
CREATE TABLE mallory.d (i int);
CREATE FUNCTION mallory.boom() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'at commit'; END $$;
CREATE CONSTRAINT TRIGGER boom AFTER INSERT ON mallory.d DEFERRABLE INITIALLY DEFERRED
	FOR EACH ROW EXECUTE FUNCTION mallory.boom();
});
my ($o7, $e7) = try_as($c, $DB, 'mallory',
	"BEGIN; SELECT " . sprintf($cc, 9004, $k1[12]) . "; INSERT INTO mallory.d VALUES (1); COMMIT;");
like($e7, qr/at commit/, '7c: a transaction that fails at COMMIT');
is(marker_calls(9004, 9004), 0, '7c: makes its call nowhere');
my ($o7d, $e7d) = try_as($c, $DB, 'mallory',
	"BEGIN; SELECT " . sprintf($cc, 9005, $k1[13]) . "; PREPARE TRANSACTION 'mallory_p';");
my $prepared = $c->safe_psql($DB, "SELECT count(*) FROM pg_prepared_xacts WHERE gid = 'mallory_p'");
diag("7d: PREPARE TRANSACTION by the caller: " . ($e7d =~ /ERROR.*/ ? $& : 'prepared'));
$c->safe_psql($DB, "ROLLBACK PREPARED 'mallory_p'") if $prepared;
no_prepared_xacts(\@nodes, '7e: no prepared transaction left on any node');
is(marker_calls(9005, 9005), 0, '7d: a caller\'s PREPARE TRANSACTION then ROLLBACK PREPARED: no call');

###########################################################################
# 8. colocate calls made by a call's function, in a retries worker
###########################################################################
my $relay = as_role($c, $DB, 'mallory', "SELECT retries.call('relay(bigint)', '[9101]')");
call_reaches($c, $DB, $relay, 'succeeded', '8a: the relaying call succeeded on its second attempt');
no_prepared_xacts(\@nodes, '8b: no prepared transaction left on any node');
is(marker_calls(9101, 9101), 1, '8b: its colocate call was made once, not by the failed attempt');
my $nested = $c->safe_psql($DB, "SELECT retries.result($relay)");
is($c->safe_psql($DB, "SELECT (retries.wait($nested, '$RetriesTest::DEADLINE s')).state"),
	'succeeded',
	'8c: and ran on the worker node');

###########################################################################
# 9. mallory's open mailbox insert does not stall alice
###########################################################################
my $hold = $c->background_psql($DB, on_error_stop => 0);
$hold->query_safe("SET ROLE mallory; BEGIN; SELECT " . sprintf($cc, 9201, $k1[14])
	  . "; $ins ($k1[14], 'put(bigint)', '[9202]', now(), 0)");
# (held up, it would wait for mallory's transaction, which stays open until
# after it: statement_timeout ends that wait, short of query_value's 30 s)
my $t9 = time();
my ($o9, $e9) = query_value($c, $DB,
	"SET statement_timeout = '20s'; SET ROLE alice; SELECT " . sprintf($cc, 9203, $k1[14]));
my $took9 = time() - $t9;
ok(defined $o9 && $took9 < $quick,
	sprintf('9: alice\'s call to the same shard is not held up (%.1f s)', $took9))
  or diag($e9);
$hold->query_safe('ROLLBACK');
$hold->quit;

###########################################################################
# 13. chains, keys, DROP EXTENSION, and the mailbox from a worker node
###########################################################################
my ($o13, $e13) = try_as($c, $DB, 'mallory',
	"SELECT retries.call('put(bigint)', '[9401]', after => ARRAY[$alice_far]::bigint[],"
	  . " colocate_with => 'orders', shard_key => '$k1[6]')");
ok(!defined $o13 && marker_calls(9401, 9401) == 0,
	"13a: a colocate call may not wait on another role's call (after)") or diag($o13 // $e13);
my $ka = as_role($c, $DB, 'alice', "SELECT " . sprintf($cc, 9402, $k1[15]) =~ s/\)$/, key => 'k13')/r);
my $km = as_role($c, $DB, 'mallory', "SELECT " . sprintf($cc, 9403, $k1[15]) =~ s/\)$/, key => 'k13')/r);
isnt($km, $ka, "13b: mallory's call with alice's key on the same node is a call of her own");
is($w1->safe_psql($DB, "SELECT args->>0 FROM retries.call_data WHERE id = $ka"), '9402',
	"13b: alice's keyed call is untouched");
fails_with($c, 'mallory', 'DROP EXTENSION retries', '42501', '13c: a role may not drop the extension');
is($c->safe_psql($DB, "SELECT to_regclass('$mailbox') IS NOT NULL"), 't', '13c: the mailbox stays');
$before = marker_calls(9404, 9406);
as_role($w2, $DB, 'mallory', "$ins ($k2[1], 'put(bigint)', '[9404]', now(), 0), ($k1[16], 'put(bigint)', '[9405]', now(), 0)");
as_role($w2, $DB, 'mallory', "SELECT " . sprintf($cc, 9406, $k1[17]));
is($w1->safe_psql($DB, "SELECT string_agg(DISTINCT scheduled_by::regrole::text, ',') FROM retries.call_data"
		  . " WHERE args->>0 IN ('9405', '9406')")
	  . '|' . $w2->safe_psql($DB, "SELECT scheduled_by::regrole FROM retries.call_data WHERE args->>0 = '9404'"),
	'mallory|mallory', '13d: the mailbox used from a worker node makes the calls as the role, where their shards are');
is(mailbox_rows(), '0', '13d: and the mailbox stays empty');

###########################################################################
# 14. wait, result and cancel of a call made in the caller's own open
# transaction (kept on another node, not committed yet): no hang
###########################################################################
for my $op ('retries.wait(%s)', 'retries.wait(%s, \'1 s\')', 'retries.result(%s)', 'retries.cancel(%s)')
{
	my $t0 = time();
	my ($o, $e) = query_value($c, $DB,
		"\\set VERBOSITY verbose\nSET ROLE mallory; SET statement_timeout = '20s'; BEGIN;"
		  . " SELECT " . sprintf($cc, 9501, $k1[18]) . " AS id \\gset\n"
		  . "SELECT " . sprintf($op, ':id') . ";\nROLLBACK;");
	my $took = time() - $t0;
	ok($took < $quick && defined $e && $e !~ /statement timeout/,
		sprintf('14: %s of a call of the open transaction does not hang (%.1f s)',
			sprintf($op, 'id'), $took))
	  or diag($e);
	my $what = sprintf($op, 'id');
	diag("14: $what: " . (($e // '') =~ /ERROR:.*/ ? $& : ($o // '')));
	like($e // '', qr/ERROR:  55000: call \d+ was made on another node by this transaction, which has not committed/,
		"14: $what: the caller's own call is not said not to exist (55000)");
}
is(marker_calls(9501, 9501), 0, '14: those calls were rolled back with their transactions');

###########################################################################
# 10. a forwarded wait the caller cancels
###########################################################################
my $orphans = "SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%node_op%'"
  . " AND pid <> pg_backend_pid() AND usename = 'mallory'";
# the first waits until the test has seen its backend on the call's node,
# then is cancelled
my $waiter = $c->background_psql($DB, on_error_stop => 0);
my $waiter_pid = $waiter->query_safe('SELECT pg_backend_pid()');
$waiter->query_until(qr/started/,
	"SET ROLE mallory;\n\\echo started\nSELECT retries.wait($mal_far);\n");
wait_until($w1, $DB, "SELECT count(*) > 0 FROM ($orphans) s(n) WHERE n > 0", 't',
	'10: a forwarded wait has a backend waiting on the call\'s node');
is($c->safe_psql($DB, "SELECT pg_cancel_backend($waiter_pid)"), 't',
	'10: the caller of that wait is cancelled');
$waiter->quit;
for my $round (1 .. 3)
{
	my $t0 = time();
	my ($o, $e) = query_value($c, $DB,
		"SET ROLE mallory; SET statement_timeout = '300ms'; SELECT retries.wait($mal_far)");
	ok(!defined $o && $e =~ /statement timeout|canceling/ && time() - $t0 < $quick,
		"10a: a forwarded wait with no timeout ends at the caller's statement_timeout ($round)")
	  or diag($e // $o);
}
wait_until($w1, $DB, $orphans, '0',
	'10b: no backend is left waiting on the call\'s node once its callers gave up');

###########################################################################
# 11. the trigger fired by a table of the attacker's own
###########################################################################
my %log_11 = map { $_->name => -s $_->logfile } @nodes;
my ($o11, $e11) = query_value($c, $DB, q{SET ROLE mallory;
CREATE TEMP TABLE mb (fn text, args jsonb, run_at timestamptz, key text, priority int,
	limit_key text, after bigint[], key_window interval, debounce interval, on_event text,
	event_timeout interval, id text);
CREATE TRIGGER deliver BEFORE INSERT ON mb FOR EACH ROW EXECUTE FUNCTION retries.mailbox_deliver();
INSERT INTO mb (fn, args, run_at, priority) VALUES ('put(bigint)', '[9301]', now(), 0) RETURNING id;
});
diag("11: " . ($o11 // $e11));
{
	my @crash = crash_lines($c, $log_11{ $c->name });
	ok(!@crash, '11: a role\'s own table firing retries.mailbox_deliver() does not crash the server')
	  or diag(join "\n", @crash[0 .. ($#crash < 5 ? $#crash : 5)]);
}
wait_until($c, $DB, 'SELECT 1', '1', '11: the coordinator is up');

###########################################################################
# 12. no crash elsewhere
###########################################################################
for my $n ($w1, $w2)
{
	no_crash($n, $log_start{ $n->name }, '12: no crash on ' . $n->name);
}
my @before_11 = crash_lines($c, $log_start{ $c->name });
my @after_11 = crash_lines($c, $log_11{ $c->name });
is(scalar(@before_11) - scalar(@after_11), 0, '12: no crash on the coordinator before test 11');
is(on_all(\@nodes,
		"SELECT seqmin FROM pg_sequence WHERE seqrelid = 'retries.call_data_id_seq'::regclass"),
	$seqmin, '12: the id ranges are as citus_setup() left them');
diag(sprintf('run time: %.1f s', time() - $t_start));

$_->stop for @nodes;
done_testing();
