# A hostile review of retries on a Citus cluster (a coordinator and two
# worker nodes): what an ordinary LOGIN role can do to other roles through
# calls made on a worker node, through Citus's own functions, through the
# commit of its batch, and through locks on shard placements.  Each test
# asserts the safe behaviour; a test that fails because of a weakness found
# by the review is marked TODO (the suite stays green) and the weakness is
# described in the review's report.
#
# mallory is the attacker, alice the victim: her function alice.put(i)
# writes one row into a hash-distributed table and one into a reference
# table, and advances a sequence of the node it runs on (which counts its
# runs, committed or not: a call run twice shows there).  Calls are made on
# worker node 1 (w1) unless said otherwise.  retries.max_attempt_time is
# 3 s, and each node has two retries workers.
#
#   a. the sandbox on a worker node: privileges (42501 at the call and at
#      the attempt, after a REVOKE made on the coordinator), SET ROLE,
#      exit_on_error, a cancel trapped around run_command_on_workers();
#   b. Citus's functions in a call run as the role on every node
#      (run_command_on_all_nodes, master_run_on_worker, a function pushed
#      down to the shards) and see only its own calls; Citus DDL in a call
#      that fails leaves nothing behind;
#   c. what outlives an attempt: citus.* settings set in a call do not reach
#      the next role's calls; the worker's Citus identity (global pid) and
#      application_name; state left in Citus's cached remote sessions;
#      prepared transactions left on other nodes;
#   d. a batch whose commit fails: mallory's call whose remote placement
#      fails PREPARE TRANSACTION (a deferred trigger on her reference
#      table's shards) must cost only mallory; the XX000 case is charged
#      as interrupted and ends;
#   e. a distributed deadlock between two of mallory's calls on two nodes,
#      and a lock held on mallory's shards, while alice's calls run;
#   g. Citus's two-phase commit names, predicted and prepared first by
#      mallory on another node: alice's call must not fail for good;
#   f. alice's calls each took effect exactly once (counted after
#      pg_prepared_xacts is empty on every node), and no node crashed.
#
# No step depends on how fast the machine is: where one must happen while
# a call is in the middle of its work, the call waits at a gate the test
# holds (t/RetriesTest.pm); the checks that bound how long alice's calls
# take compare with the time her calls take alone, measured in the same
# run (d.).
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
use Time::HiRes qw(time usleep);

citus_or_skip();
my $t_start = time();
my @nodes = citus_cluster(CONF => qq{
retries.max_attempt_time = '3s'
log_min_messages = warning
});
my ($c, $w1, $w2) = @nodes;
my $DB = 'postgres';
my %log_start = map { $_->name => -s $_->logfile } @nodes;

# sql(NODE, ROLE, SQL): SQL run as ROLE on NODE; dies on error
sub sql
{
	my ($node, $role, $sql) = @_;
	return $node->safe_psql($DB, "SET ROLE $role;\n$sql");
}

# fails_with(NODE, ROLE, SQL, SQLSTATE, NAME): SQL as ROLE on NODE fails
# with SQLSTATE
sub fails_with
{
	my ($node, $role, $sql, $sqlstate, $name) = @_;
	my ($ret, $out, $err) = $node->psql($DB,
		"\\set VERBOSITY verbose\nSET ROLE $role;\n$sql", on_error_stop => 1);
	isnt($ret, 0, "$name: refused");
	like($err, qr/ERROR:  $sqlstate:/, "$name: with $sqlstate") or diag($err);
	return;
}

# history(NODE, ID): the call's attempts, "n:outcome sqlstate" joined by ','
sub history
{
	my ($node, $id) = @_;
	return $node->safe_psql($DB,
		"SELECT string_agg(attempt || ':' || outcome || coalesce(' ' || sqlstate, ''), ','"
		  . " ORDER BY attempt) FROM retries.attempts WHERE call_id = $id");
}

# finished(NODE, ID, NAME, [DEADLINE]): wait until the call has finished
sub finished
{
	my ($node, $id, $name, $deadline) = @_;
	return wait_until($node, $DB,
		"SELECT state IN ('succeeded', 'failed', 'cancelled') FROM retries.calls WHERE id = $id",
		't', $name, $deadline);
}

# state_of(NODE, ID)
sub state_of
{
	my ($node, $id) = @_;
	return $node->safe_psql($DB, "SELECT state FROM retries.calls WHERE id = $id");
}

# How many of alice's put() calls were made on each node (each must succeed
# once, and her sequence on that node advance once per call)
my %alice_calls = map { $_->name => 0 } @nodes;
my $next_put = 1;

# alice_puts(NODE, N): alice schedules N calls of alice.put on NODE; returns
# "first_id,last_id"
sub alice_puts
{
	my ($node, $n) = @_;
	my $from = $next_put;
	$next_put += $n;
	$alice_calls{ $node->name } += $n;
	return sql($node, 'alice',
		"SELECT min(id) || ',' || max(id) FROM (SELECT retries.call('alice.put(bigint)',"
		  . " jsonb_build_array(g)) AS id FROM generate_series($from, $from + $n - 1) g) s");
}

# alice_done(NODE, IDS, NAME, DEADLINE): all of alice's calls IDS
# ("first,last") succeeded within DEADLINE seconds; returns the seconds taken
sub alice_done
{
	my ($node, $ids, $name, $deadline) = @_;
	my ($first, $last) = split /,/, $ids;
	my $t0 = time();
	my $n = $last - $first + 1;
	wait_until($node, $DB,
		"SELECT count(*) FROM retries.calls WHERE id BETWEEN $first AND $last"
		  . " AND state = 'succeeded'",
		"$n", $name, $deadline);
	return time() - $t0;
}

# worker_exits(NODE, OFFSET): log lines since OFFSET saying a retries
# worker exited
sub worker_exits
{
	my ($node, $offset) = @_;
	return grep { /"retries worker" \(PID \d+\) exited/ }
	  split /\n/, slurp_file($node->logfile, $offset);
}

###########################################################################
# setup
###########################################################################

wait_until($_, $DB, workers_query($DB), '2', 'the workers of ' . $_->name . ' started')
  for @nodes;

# Roles, schemas, tables and functions made on the coordinator reach the
# worker nodes (Citus propagates them); annotations are per node.
$c->safe_psql($DB, q{
CREATE ROLE alice LOGIN;
CREATE ROLE mallory LOGIN;
CREATE SCHEMA alice AUTHORIZATION alice;
CREATE SCHEMA alice_hidden AUTHORIZATION alice;
CREATE SCHEMA mallory AUTHORIZATION mallory;
GRANT USAGE ON SCHEMA alice TO mallory;
SET ROLE alice;
CREATE TABLE alice.orders (id bigint, note text);
SELECT create_distributed_table('alice.orders', 'id');
CREATE TABLE alice.audit (id bigint);
SELECT create_reference_table('alice.audit');
CREATE SEQUENCE alice.runs;
CREATE FUNCTION alice.put(i bigint) RETURNS void LANGUAGE sql AS $$
	SELECT nextval('alice.runs');
	INSERT INTO alice.orders VALUES (i, 'put');
	INSERT INTO alice.audit VALUES (i);
$$;
-- another function of hers, writing to a reference table of its own
CREATE TABLE alice.marks (id bigint);
SELECT create_reference_table('alice.marks');
CREATE FUNCTION alice.mark(i bigint) RETURNS void LANGUAGE sql AS $$
	INSERT INTO alice.marks VALUES (i);
$$;
CREATE FUNCTION alice.private(i bigint) RETURNS bigint LANGUAGE sql AS $$ SELECT i $$;
REVOKE EXECUTE ON FUNCTION alice.private(bigint) FROM PUBLIC;
CREATE FUNCTION alice.shared(i bigint) RETURNS bigint LANGUAGE sql AS $$ SELECT i $$;
REVOKE EXECUTE ON FUNCTION alice.shared(bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION alice.shared(bigint) TO mallory;
CREATE FUNCTION alice_hidden.f(i bigint) RETURNS bigint LANGUAGE sql AS $$ SELECT i $$;
-- what a citus.* setting or the search path reads in one of her calls
CREATE FUNCTION alice.settings() RETURNS text LANGUAGE sql AS $$
	SELECT string_agg(s || '=' || coalesce(current_setting(s, true), '<null>'), ' ' ORDER BY s)
	  FROM unnest(ARRAY['citus.multi_shard_modify_mode', 'citus.enable_local_execution',
		'citus.propagate_set_commands', 'citus.max_adaptive_executor_pool_size',
		'citus.enable_ddl_propagation', 'citus.override_table_visibility',
		'citus.enable_manual_changes_to_shards', 'citus.select_opens_transaction_block',
		'citus.max_cached_conns_per_worker', 'citus.task_assignment_policy',
		'citus.enable_unsafe_triggers', 'citus.next_shard_id', 'citus.shard_count',
		'citus.force_max_query_parallelization', 'search_path', 'statement_timeout',
		'lock_timeout']) s
$$;
RESET ROLE;
});
# her sequence, on the nodes her calls run on (sequences are not propagated)
sql($w1, 'alice', 'CREATE SEQUENCE alice.runs');
for my $node ($c, $w1)
{
	sql($node, 'alice', q{
SELECT retries.annotate('alice.put(bigint)', '5 10ms');
SELECT retries.annotate('alice.mark(bigint)', '5 10ms');
SELECT retries.annotate('alice.private(bigint)', '1 10ms');
SELECT retries.annotate('alice.shared(bigint)', '1 10ms');
SELECT retries.annotate('alice_hidden.f(bigint)', '1 10ms');
SELECT retries.annotate('alice.settings()', '1 10ms');
});
}
is(sql($w1, 'mallory',
		"SELECT has_function_privilege('alice.private(bigint)', 'EXECUTE')"
		  . " || ',' || has_schema_privilege('alice_hidden', 'USAGE')"),
	'false,false', 'setup: the REVOKE made on the coordinator reached worker node 1');

# mallory's objects
$c->safe_psql($DB, q{
SET ROLE mallory;
CREATE TABLE mallory.d (id bigint, v int);
SELECT create_distributed_table('mallory.d', 'id');
INSERT INTO mallory.d SELECT g, 0 FROM generate_series(1, 200) g;
CREATE FUNCTION mallory.setrole() RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	SET ROLE alice;
	RETURN current_user;
END $$;
CREATE FUNCTION mallory.eoe() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	PERFORM set_config('exit_on_error', 'on', false);
	RAISE EXCEPTION 'boom' USING ERRCODE = 'RT001';
END $$;
-- traps every cancel around a statement run on the worker nodes, for
-- 20 min if nothing ends it
CREATE FUNCTION mallory.trap_remote() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	FOR i IN 1 .. 600 LOOP
		BEGIN
			-- not a wait: the cap (3 s) cuts the call short
			PERFORM count(*) FROM run_command_on_workers('SELECT pg_sleep(2)');
		EXCEPTION WHEN query_canceled THEN
			NULL;
		END;
	END LOOP;
END $$;
-- who a call is on every node, through Citus
CREATE FUNCTION mallory.who_everywhere() RETURNS text LANGUAGE sql AS $$
	SELECT string_agg(result, ',' ORDER BY nodeid) FROM run_command_on_all_nodes(
		$q$SELECT current_user || '/' || session_user || '/' || (SELECT rolsuper FROM pg_roles WHERE rolname = current_user)$q$)
$$;
CREATE FUNCTION mallory.who_on_workers() RETURNS text LANGUAGE sql AS $$
	SELECT string_agg(r.result, ',' ORDER BY r.node_port) FROM (
		SELECT array_agg(nodename) AS h, array_agg(nodeport) AS p,
		       array_agg('SELECT session_user || ''/'' || current_user'::text) AS q
		  FROM pg_dist_node WHERE noderole = 'primary') n,
		LATERAL master_run_on_worker(n.h, n.p, n.q, false) r
$$;
CREATE FUNCTION mallory.whoami_here() RETURNS text LANGUAGE sql AS $$
	SELECT session_user || '/' || current_user
$$;
CREATE FUNCTION mallory.who_on_shards() RETURNS text LANGUAGE sql AS $$
	SELECT string_agg(DISTINCT mallory.whoami_here(), ',') FROM mallory.d
$$;
CREATE FUNCTION mallory.calls_everywhere() RETURNS text LANGUAGE sql AS $$
	SELECT string_agg(result, ',' ORDER BY nodeid) FROM run_command_on_all_nodes(
		$q$SELECT count(*) FROM retries.calls WHERE scheduled_by::text <> 'mallory'$q$)
$$;
-- Citus DDL in a call that then fails
CREATE FUNCTION mallory.ddl(kind text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	IF kind = 'distributed' THEN
		CREATE TABLE mallory.new_dist (id bigint);
		PERFORM create_distributed_table('mallory.new_dist', 'id');
		INSERT INTO mallory.new_dist SELECT g FROM generate_series(1, 10) g;
	ELSE
		CREATE TABLE mallory.new_ref (id bigint);
		PERFORM create_reference_table('mallory.new_ref');
		INSERT INTO mallory.new_ref VALUES (1);
	END IF;
	RAISE EXCEPTION 'and now fail' USING ERRCODE = 'P0001';
END $$;
-- sets citus.* settings and more, for the session
CREATE FUNCTION mallory.set_settings() RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	PERFORM set_config('citus.multi_shard_modify_mode', 'sequential', false);
	PERFORM set_config('citus.enable_local_execution', 'off', false);
	PERFORM set_config('citus.propagate_set_commands', 'local', false);
	PERFORM set_config('citus.max_adaptive_executor_pool_size', '1', false);
	PERFORM set_config('citus.enable_ddl_propagation', 'off', false);
	PERFORM set_config('citus.override_table_visibility', 'off', false);
	PERFORM set_config('citus.enable_manual_changes_to_shards', 'on', false);
	PERFORM set_config('citus.select_opens_transaction_block', 'off', false);
	PERFORM set_config('citus.max_cached_conns_per_worker', '0', false);
	PERFORM set_config('citus.task_assignment_policy', 'round-robin', false);
	PERFORM set_config('citus.enable_unsafe_triggers', 'on', false);
	PERFORM set_config('citus.next_shard_id', '990000', false);
	PERFORM set_config('citus.shard_count', '3', false);
	PERFORM set_config('citus.force_max_query_parallelization', 'on', false);
	PERFORM set_config('search_path', 'mallory, public', false);
	PERFORM set_config('statement_timeout', '1', false);
	PERFORM set_config('lock_timeout', '1', false);
	SET LOCAL statement_timeout = 1;
	RETURN 'set';
END $$;
-- takes the worker's Citus identity: an application_name of Citus's own
-- connections, with a global pid of her choosing
CREATE FUNCTION mallory.forge_gpid(gpid bigint) RETURNS text LANGUAGE sql AS $$
	SELECT set_config('application_name', 'citus_internal gpid=' || gpid, false)
$$;
-- session state left in the remote sessions that Citus keeps open
CREATE FUNCTION mallory.remote_set() RETURNS text LANGUAGE sql AS $$
	SELECT set_config('mallory.left', 'behind', false)
$$;
CREATE FUNCTION mallory.remote_get() RETURNS text LANGUAGE sql AS $$
	SELECT coalesce(nullif(current_setting('mallory.left', true), ''), 'unset')
$$;
CREATE FUNCTION mallory.leave_state() RETURNS text LANGUAGE sql AS $$
	SELECT string_agg(DISTINCT mallory.remote_set(), ',') FROM mallory.d
$$;
CREATE FUNCTION mallory.find_state() RETURNS text LANGUAGE sql AS $$
	SELECT string_agg(DISTINCT mallory.remote_get(), ',') FROM mallory.d
$$;
-- prepared transactions left on the worker nodes
CREATE FUNCTION mallory.prepare_remote(n int) RETURNS text LANGUAGE sql AS $$
	SELECT string_agg(result, ',') FROM run_command_on_workers(
		(SELECT string_agg(format('BEGIN; SELECT 1; PREPARE TRANSACTION %L;',
			'mallory_' || g || '_' || md5(random()::text)), ' ')
		   FROM generate_series(1, n) g))
$$;
-- reference tables whose shards fail PREPARE TRANSACTION on the nodes that
-- the call reaches through Citus's connections (a deferred trigger, fired
-- there only at the commit; the placement of the node the call runs on is
-- written by Citus's local execution, and does not fail)
CREATE FUNCTION mallory.fail_at_prepare() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF current_setting('application_name') LIKE 'citus_internal%' THEN
		RAISE EXCEPTION 'mallory fails PREPARE TRANSACTION on port %', current_setting('port')
			USING ERRCODE = TG_ARGV[0];
	END IF;
	RETURN NULL;
END $$;
SET citus.enable_unsafe_triggers = on;
CREATE TABLE mallory.ref_40001 (id bigint);
SELECT create_reference_table('mallory.ref_40001');
CREATE CONSTRAINT TRIGGER fail_at_prepare AFTER INSERT ON mallory.ref_40001
	DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION mallory.fail_at_prepare('40001');
CREATE TABLE mallory.ref_xx000 (id bigint);
SELECT create_reference_table('mallory.ref_xx000');
CREATE CONSTRAINT TRIGGER fail_at_prepare AFTER INSERT ON mallory.ref_xx000
	DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION mallory.fail_at_prepare('XX000');
CREATE FUNCTION mallory.poison(i bigint) RETURNS void LANGUAGE sql AS $$
	INSERT INTO mallory.ref_40001 VALUES (i)
$$;
CREATE FUNCTION mallory.poison_xx(i bigint) RETURNS void LANGUAGE sql AS $$
	INSERT INTO mallory.ref_xx000 VALUES (i)
$$;
CREATE FUNCTION mallory.poison_xx_forever(i bigint) RETURNS void LANGUAGE sql AS $$
	INSERT INTO mallory.ref_xx000 VALUES (i)
$$;
-- two rows locked in opposite orders from two nodes: the first, then gate
-- 2 of the node the call runs on (e.), then the second
CREATE FUNCTION mallory.lock_two(first bigint, second bigint) RETURNS void LANGUAGE sql AS $$
	UPDATE mallory.d SET v = v + 1 WHERE id = first;
	SELECT GATE_2;
	UPDATE mallory.d SET v = v + 1 WHERE id = second;
$$;
-- Citus's shard locks, on another role's shards
CREATE FUNCTION mallory.lock_shards(mode int, shard bigint, metadata bool) RETURNS void
	LANGUAGE plpgsql AS $$
BEGIN
	IF metadata THEN
		PERFORM lock_shard_metadata(mode, ARRAY[shard]);
	ELSE
		PERFORM lock_shard_resources(mode, ARRAY[shard]);
	END IF;
END $$;
CREATE FUNCTION mallory.read_d() RETURNS bigint LANGUAGE sql AS $$
	SELECT count(*) FROM mallory.d
$$;
RESET ROLE;
} =~ s/GATE_2/gate_sql(2)/er);
for my $node ($c, $w1)
{
	sql($node, 'mallory', q{
SELECT retries.annotate(f::regprocedure, '1 10ms', max_attempts => 1)
  FROM unnest(ARRAY['mallory.setrole()', 'mallory.eoe()', 'mallory.trap_remote()',
	'mallory.who_everywhere()', 'mallory.who_on_workers()', 'mallory.who_on_shards()',
	'mallory.calls_everywhere()', 'mallory.ddl(text)', 'mallory.set_settings()',
	'mallory.forge_gpid(bigint)', 'mallory.leave_state()', 'mallory.find_state()',
	'mallory.prepare_remote(int)', 'mallory.read_d()',
	'mallory.lock_shards(int,bigint,bool)']) f;
-- retried without limit, as an attacker would
SELECT retries.annotate('mallory.poison(bigint)', '10ms');
SELECT retries.annotate('mallory.poison_xx(bigint)', '2 10ms');
SELECT retries.annotate('mallory.poison_xx_forever(bigint)', '10ms');
-- the classes doc/operations.md ("Running on Citus") has calls retry
SELECT retries.annotate('mallory.lock_two(bigint,bigint)', '5 10ms',
						retry_on => '{RT, 08, 57P01, 57P02, 57P03, 40001, 40P01}');
});
}
my $w1_nodeid = $c->safe_psql($DB,
	'SELECT nodeid FROM pg_dist_node WHERE nodeport = ' . $w1->port);
my $c_nodeid = $c->safe_psql($DB,
	'SELECT nodeid FROM pg_dist_node WHERE nodeport = ' . $c->port);

# alice has calls on every node, for mallory to look for
my %first_ids = map { $_->name => alice_puts($_, 5) } ($c, $w1);
alice_done($_, $first_ids{ $_->name }, 'setup: alice\'s first calls on ' . $_->name)
  for ($c, $w1);

###########################################################################
# a. the sandbox on a worker node
###########################################################################

fails_with($w1, 'mallory', "SELECT retries.call('alice.private(bigint)', '[1]')",
	'42501', 'a: a call on w1 of a function without EXECUTE');
my $hidden_oid = $w1->safe_psql($DB, "SELECT 'alice_hidden.f(bigint)'::regprocedure::oid");
fails_with($w1, 'mallory', "SELECT retries.call($hidden_oid, '[1]')",
	'42501', 'a: a call on w1, by OID, of a function in a schema without USAGE');

# granted, scheduled on w1 (due in an hour), then revoked on the
# coordinator, then made due: the attempt on w1 fails with 42501
{
	my $id = sql($w1, 'mallory',
		"SELECT retries.call('alice.shared(bigint)', '[7]', run_at => now() + interval '1 hour')");
	sql($c, 'alice', 'REVOKE EXECUTE ON FUNCTION alice.shared(bigint) FROM mallory');
	sql($w1, 'mallory', "SELECT retries.retry_now($id)");
	finished($w1, $id, 'a: the call made before the REVOKE ends');
	like(history($w1, $id), qr/^1:failed 42501$/,
		'a: with 42501 at its attempt, not retried: the REVOKE made on the coordinator holds on w1');
}

{
	my $offset = -s $w1->logfile;
	my $pids = worker_pids($w1, $DB);
	my $setrole = sql($w1, 'mallory', "SELECT retries.call('mallory.setrole()')");
	my @eoe = split /\n/, sql($w1, 'mallory',
		"SELECT retries.call('mallory.eoe()') FROM generate_series(1, 4)");
	finished($w1, $_, "a: mallory's call $_ on w1 ends") for ($setrole, @eoe);
	is(history($w1, $setrole), '1:failed 42501', 'a: SET ROLE in a call on w1: 42501');
	is(join(',', map { history($w1, $_) } @eoe), join(',', ('1:failed 55P02') x 4),
		'a: exit_on_error in a call on w1: 55P02');
	is(worker_pids($w1, $DB), $pids, 'a: the workers of w1 are the same processes');
	my @exits = worker_exits($w1, $offset);
	ok(!@exits, 'a: no worker of w1 exited') or diag(join("\n", @exits));
}

# a function that traps every cancel, around a statement that Citus runs on
# the worker nodes: ended at the cap all the same.  It would run for 20 min:
# any end within the test's deadline (and within 1 min: the cap, 3 s, and
# the 2 s after which the worker is ended, with room for a slow machine)
# is the cap's.
{
	my $t0 = time();
	my $id = sql($w1, 'mallory', "SELECT retries.call('mallory.trap_remote()')");
	finished($w1, $id, 'a: the call trapping its cancels around run_command_on_workers ends');
	my $took = time() - $t0;
	cmp_ok($took, '<', 60, sprintf('a: near the cap of 3 s, not after its 20 min (%.1f s)', $took));
	like(history($w1, $id), qr/^1:(timeout 57014|interrupted 57P01)$/,
		'a: as a timeout or an interrupted attempt');
	wait_until($w1, $DB, workers_query($DB), '2', 'a: w1 has its two workers again');
}

###########################################################################
# b. Citus's functions in a call
###########################################################################

{
	my %id;
	$id{$_} = sql($w1, 'mallory', "SELECT retries.call('mallory.$_()')")
	  for qw(who_everywhere who_on_workers who_on_shards calls_everywhere);
	finished($w1, $_, "b: mallory's call $_ ends") for values %id;
	my $result = sub {
		$w1->safe_psql($DB,
			"SELECT coalesce(result #>> '{}', state || ' ' || coalesce(last_message, ''))"
			  . " FROM retries.calls WHERE id = $_[0]");
	};
	is($result->($id{who_everywhere}), join(',', ('mallory/mallory/false') x 3),
		'b: run_command_on_all_nodes() in a call runs as its role on every node, not as a superuser');
	is($result->($id{who_on_workers}), join(',', ('mallory/mallory') x 3),
		'b: master_run_on_worker() too');
	is($result->($id{who_on_shards}), 'mallory/mallory',
		'b: a function that Citus pushes down to the shards runs as the role');
	is($result->($id{calls_everywhere}), '0,0,0',
		'b: through Citus, the role sees no other role\'s calls on any node');

	# Citus's shard locks on alice's shards: refused as in a session
	my @shards = map {
		$c->safe_psql($DB,
			"SELECT min(shardid) FROM pg_dist_shard WHERE logicalrelid = '$_'::regclass")
	} qw(alice.orders alice.audit);
	my @locks = map { sql($w1, 'mallory', "SELECT retries.call('mallory.lock_shards(int,bigint,bool)', '$_')") }
	  ("[7, $shards[0], false]", "[7, $shards[0], true]", "[3, $shards[1], false]");
	finished($w1, $_, "b: mallory's call locking alice's shards ends") for @locks;
	is(join(',', map { history($w1, $_) } @locks), join(',', ('1:failed 42501') x 3),
		'b: lock_shard_resources() / lock_shard_metadata() on alice\'s shards in a call: 42501');

	# Citus DDL in a call on the coordinator that then fails leaves nothing
	my @ddl = map { sql($c, 'mallory', "SELECT retries.call('mallory.ddl(text)', '[\"$_\"]')") }
	  qw(distributed reference);
	finished($c, $_, "b: mallory's DDL call $_ ends") for @ddl;
	is(join(',', map { history($c, $_) } @ddl), '1:failed P0001,1:failed P0001',
		'b: create_distributed_table() / create_reference_table() in failing calls');
	is( on_all(\@nodes,
			"SET citus.override_table_visibility = off;"
			  . " SELECT count(*) FROM pg_class WHERE relname LIKE 'new\\_%'"
			  . " AND relnamespace = 'mallory'::regnamespace"),
		'0|0|0', 'b: left no table or shard on any node');
	is( on_all(\@nodes,
			"SELECT count(*) FROM pg_dist_partition WHERE logicalrelid::text LIKE 'mallory.new%'"),
		'0|0|0', 'b: and no metadata on any node');
}

###########################################################################
# c. what outlives an attempt
###########################################################################

# citus.* settings, the search path and timeouts set in mallory's calls do
# not reach alice's calls that the same workers run after them
{
	my $baseline = sql($w1, 'alice', "SELECT retries.call('alice.settings()')");
	finished($w1, $baseline, 'c: alice\'s call reading her settings ends');
	my $before = $w1->safe_psql($DB,
		"SELECT result #>> '{}' FROM retries.calls WHERE id = $baseline");
	my @set = split /\n/, sql($w1, 'mallory',
		"SELECT retries.call('mallory.set_settings()') FROM generate_series(1, 6)");
	finished($w1, $_, 'c: mallory\'s call setting citus.* ends') for @set;
	is(join(',', map { state_of($w1, $_) } @set), join(',', ('succeeded') x 6),
		'c: (mallory\'s calls set them)');
	my @after = split /\n/, sql($w1, 'alice',
		"SELECT retries.call('alice.settings()') FROM generate_series(1, 6)");
	finished($w1, $_, 'c: alice\'s call reading her settings ends') for @after;
	is( $w1->safe_psql($DB,
			"SELECT string_agg(DISTINCT result #>> '{}', ' | ') FROM retries.calls"
			  . " WHERE id IN (" . join(',', @after) . ')'),
		$before, 'c: alice\'s calls see the settings they saw before mallory\'s calls');
}

# the worker's Citus identity: a call that sets application_name to that of
# Citus's own connections changes the global pid of the worker process for
# good, for every later call of every role
{
	my $gpids = "SELECT string_agg(CASE WHEN global_pid = ${w1_nodeid}::bigint * 10000000000 + pid"
	  . " THEN 'own' ELSE global_pid::text END || ' ' || coalesce(application_name, ''), ','"
	  . " ORDER BY pid) FROM citus_stat_activity"
	  . " WHERE backend_type = 'retries worker' AND nodeid = $w1_nodeid";
	my $before = $w1->safe_psql($DB, $gpids);
	is($before, 'own retries worker,own retries worker',
		'c: (the workers of w1 have their own global pids and application_name)');
	my $forged = $c_nodeid * 10_000_000_000 + 4242;
	my @forge = split /\n/, sql($w1, 'mallory',
		"SELECT retries.call('mallory.forge_gpid(bigint)', '[$forged]') FROM generate_series(1, 4)");
	finished($w1, $_, 'c: mallory\'s call forging a global pid ends') for @forge;
	# (fixed: a call may not take an application_name of Citus's own form)
	is(join(',', map { state_of($w1, $_) } @forge), join(',', ('failed') x 4),
		'c: mallory\'s calls forging a global pid fail');
	is($w1->safe_psql($DB,
			"SELECT string_agg(DISTINCT last_sqlstate, ',') FROM retries.calls WHERE id IN ("
			  . join(',', @forge) . ')'),
		'55P02', 'c: with 55P02');
	is($w1->safe_psql($DB, $gpids), $before,
		'c: after mallory\'s calls, the workers keep their global pids and application_name');
}

# session state that a call leaves in the remote sessions that Citus keeps
# open for the worker reaches the role's next calls, in the same process
{
	my @leave = split /\n/, sql($w1, 'mallory',
		"SELECT retries.call('mallory.leave_state()') FROM generate_series(1, 4)");
	finished($w1, $_, 'c: mallory\'s call setting a remote session setting ends') for @leave;
	my @find = split /\n/, sql($w1, 'mallory',
		"SELECT retries.call('mallory.find_state()') FROM generate_series(1, 4)");
	finished($w1, $_, 'c: mallory\'s call reading it back ends') for @find;
  TODO:
	{
		local $TODO = 'session state set in Citus\'s cached remote sessions outlives the attempt';
		is( $w1->safe_psql($DB,
				"SELECT string_agg(DISTINCT result #>> '{}', ' | ') FROM retries.calls"
				  . " WHERE id IN (" . join(',', @find) . ')'),
			'unset', 'c: a later call of the role does not find it on the shards\' nodes');
	}
}

# prepared transactions left on other nodes through run_command_on_workers
{
	my $id = sql($w1, 'mallory', "SELECT retries.call('mallory.prepare_remote(int)', '[2]')");
	finished($w1, $id, 'c: mallory\'s call preparing transactions on the workers ends');
  TODO:
	{
		local $TODO = 'a call prepares transactions on other nodes through Citus\'s run_command_on_* (they outlive it, and fill max_prepared_transactions)';
		is(prepared_xacts(@nodes), 0, 'c: it left no prepared transaction on any node');
	}
	# the superuser clears them
	for my $node (@nodes)
	{
		$node->safe_psql($DB, "ROLLBACK PREPARED '$_'")
		  for split /\n/, $node->safe_psql($DB,
			"SELECT gid FROM pg_prepared_xacts WHERE owner = 'mallory'");
	}
}

###########################################################################
# d. a batch whose commit fails
###########################################################################

# the reference: alice's 50 calls on w1, alone
my $alone = alice_done($w1, alice_puts($w1, 50), 'd: alice\'s 50 calls on w1, alone');
note(sprintf('alice\'s 50 calls alone: %.2f s', $alone));

# beside_poison(FN, N, TODO, ALONE, CHARGED): mallory makes N calls of FN on
# w1, whose remote placements fail PREPARE TRANSACTION: each batch of hers
# fails at its commit, again and again; alice's 50 calls made then must
# finish within 8 s and fifteen times the time they take alone (ALONE,
# measured above in this run: the bound grows with the machine's slowness),
# and mallory's calls be charged for their failed commits.  On the machine
# of the review, before the fix, 15-19 of alice's calls had succeeded after
# 8 s, and all 50 after 2.8-3.0 s with it, 50 calls alone taking 0.2 s (a
# bound of 11 s): the fix costs alice a batch of mallory's between two of
# hers, while before it each of mallory's failed commits paused a worker for
# 1 s or more and alice's calls ran one a batch (25 s or more, on any
# machine); and a worker slept (up to 10 s, as if no call were due) after a
# batch that failed at its commit, until something woke it (17 s under
# load, 0.24 s alone).  The poison calls are cancelled afterwards.
sub beside_poison
{
	my ($fn, $n, $todo, $alone, $charged) = @_;
	my $offset = -s $w1->logfile;
	my @poison = split /\n/, sql($w1, 'mallory',
		"SELECT retries.call('$fn', jsonb_build_array(g)) FROM generate_series(1, $n) g");
	my $failed = 0;
	my $until = time() + $RetriesTest::DEADLINE;
	until (($failed = slurp_file($w1->logfile, $offset) =~ /mallory fails PREPARE TRANSACTION/)
		|| time() > $until)
	{
		usleep(100_000);    # poll
	}
	ok($failed, "d: $fn x $n: mallory's batches fail at their commit");
	my $ids = alice_puts($w1, 50);
	my $poison_list = join(',', @poison);
	my $bound = 8 + 15 * $alone;
  TODO:
	{
		local $TODO = $todo;
		my $took = alice_done($w1, $ids, "d: $fn x $n: beside them, alice's 50 calls on w1 finish");
		cmp_ok($took, '<', $bound,
			sprintf("d: $fn x $n: within %.1f s (8 s and 15 times their time alone; took %.1f s)",
				$bound, $took));
		wait_until($w1, $DB,
			"SELECT bool_and(attempts > 0) FROM retries.calls WHERE id IN ($poison_list)", 't',
			"d: $fn x $n: mallory's calls are charged for their failed commits")
		  if $charged;
	}
	note("d: $fn x $n: mallory's calls: " . $w1->safe_psql($DB,
		"SELECT string_agg(state || ' ' || attempts, ', ') FROM retries.calls WHERE id IN ($poison_list)"));
	sql($w1, 'mallory', "SELECT count(retries.cancel(id)) FROM unnest('{$poison_list}'::bigint[]) id");
	alice_done($w1, $ids, "d: $fn x $n: once mallory's calls are cancelled, alice's calls all succeed");
	return;
}

# 40001 (a passing error): the batch is rolled back uncharged, and the
# worker waits (1 s, doubling) before its next batch
# (fixed: a batch's commit failure costs its role only, no pause, and a
# one-call batch's is charged)
beside_poison('mallory.poison(bigint)', 2, undef, $alone, 1);

# XX000 (charged as interrupted in a one-call batch), many calls retried
# without limit: their batches of several calls fail at commit uncharged
beside_poison('mallory.poison_xx_forever(bigint)', 10, undef, $alone, 0);

# XX000 at the commit of a one-call batch: charged as interrupted, and the
# call ends after its attempts
{
	my $id = sql($w1, 'mallory', "SELECT retries.call('mallory.poison_xx(bigint)', '[1]')");
	finished($w1, $id, 'd: mallory\'s call failing its commit with XX000 ends');
	is(history($w1, $id), '1:interrupted XX000,2:interrupted XX000,3:interrupted XX000',
		'd: each failed commit charged as interrupted, its 3 attempts used');
	is(state_of($w1, $id), 'failed', 'd: and it failed');
	alice_done($w1, alice_puts($w1, 20), 'd: alice\'s calls on w1 run after it');
}

###########################################################################
# e. a distributed deadlock and a held lock
###########################################################################

# two of mallory's calls, one made on w1 and one on the coordinator, lock
# two rows (one on each worker node) in opposite orders: each locks its
# first row, then waits at gate 2 of its node until both are there, then
# goes for its second row: a distributed deadlock, which Citus's detector
# (on the coordinator) breaks by cancelling one of the calls (the cap is
# 2 min here, so that the detector, after 2 s, comes first however slow the
# machine).  Their policy retries 40P01, as doc/operations.md advises on
# Citus: both must succeed in the end.  The cancelled attempt is recorded
# as a deadlock; or, where the cancel left Citus's remote transaction
# failed (seen once, on a loaded machine: both calls then show one
# attempt, succeeded), its batch could not commit and was rolled back
# whole, the attempt with it, and its calls ran again uncharged (worker.c,
# "A bad row"): then the worker's log has the error that rolled it back.
{
	my %e_log = map { $_->name => -s $_->logfile } ($c, $w1);
	for my $node ($c, $w1)
	{
		$node->safe_psql($DB, "ALTER SYSTEM SET retries.max_attempt_time = '2min'");
		$node->reload;
	}
	my $on = sub {
		my ($port) = @_;
		return $c->safe_psql($DB,
			"SELECT i FROM generate_series(1, 200) i WHERE (SELECT nodeport FROM citus_shards"
			  . " WHERE shardid = get_shard_id_for_distribution_column('mallory.d', i)) = $port"
			  . " ORDER BY i LIMIT 1");
	};
	my ($on_w2, $on_w1) = ($on->($w2->port), $on->($w1->port));
	my %gate = map { $_->name => close_gate($_, $DB, 2) } ($c, $w1);
	my $x = sql($w1, 'mallory',
		"SELECT retries.call('mallory.lock_two(bigint,bigint)', '[$on_w1, $on_w2]')");
	my $y = sql($c, 'mallory',
		"SELECT retries.call('mallory.lock_two(bigint,bigint)', '[$on_w2, $on_w1]')");
	my $ids = alice_puts($w1, 30);
	wait_at_gate($_, $DB, 2, 1, 'e: mallory\'s call on ' . $_->name . ' holds its first row')
	  for ($c, $w1);
	open_gate($gate{ $_->name }) for ($w1, $c);
	finished($w1, $x, 'e: mallory\'s deadlocking call on w1 ends');
	finished($c, $y, 'e: mallory\'s deadlocking call on the coordinator ends');
	my $attempts = sub {
		my ($node, $id) = @_;
		return $node->safe_psql($DB,
			"SELECT string_agg(attempt || ':' || outcome || coalesce(' ' || sqlstate || ' ' || message, ''),"
			  . " '; ' ORDER BY attempt) FROM retries.attempts WHERE call_id = $id");
	};
	note('e: deadlock: w1 ' . $attempts->($w1, $x) . ' | coordinator ' . $attempts->($c, $y));
	is(state_of($w1, $x) . ',' . state_of($c, $y), 'succeeded,succeeded',
		'e: both succeed in the end, the cancelled one retried as a deadlock');
	my $seen = $attempts->($w1, $x) . ' | ' . $attempts->($c, $y);
	if ($seen =~ /40P01 canceling the transaction since it was involved in a distributed deadlock/)
	{
		pass('e: the attempt Citus cancelled is recorded as a deadlock, 40P01');
	}
	else
	{
		# a background process's error: no application name after the pid
		# (log_line_prefix '%m [%p] %q%a '), unlike the remote statements
		# that the cancel ends ('citus_internal')
		my @errors = grep { /^\S+ \S+ \S+ \[\d+\] ERROR:/ }
		  map { split /\n/, slurp_file($_->logfile, $e_log{ $_->name }) } ($c, $w1);
		note("e: the workers' errors logged: @errors");
		ok($seen eq '1:succeeded | 1:succeeded' && @errors > 0,
			'e: the attempt Citus cancelled is recorded as a deadlock, 40P01, or rolled back'
			  . ' with its batch, whose error a worker logged, and run again uncharged');
	}
	alice_done($w1, $ids, 'e: alice\'s calls on w1 beside the deadlock succeed');
	for my $node ($c, $w1)
	{
		$node->safe_psql($DB, 'ALTER SYSTEM RESET retries.max_attempt_time');
		$node->reload;
	}
}

# mallory's session holds her table locked; her calls on w1 that read it
# wait until the cap; alice's calls on w1 run, at the latest once the cap
# has ended mallory's calls that took both workers before alice's were due
# (doc/operations.md, "Batches": bounded by retries.max_attempt_time):
# within two caps (8 s) and twice the time her calls take alone, measured
# in d.; held until mallory's session lets go, they would not end at all
{
	my $session = $c->background_psql($DB);
	$session->query_safe('SET ROLE mallory; BEGIN; LOCK TABLE mallory.d IN ACCESS EXCLUSIVE MODE');
	my @blocked = split /\n/, sql($w1, 'mallory',
		"SELECT retries.call('mallory.read_d()') FROM generate_series(1, 4)");
	wait_until($w1, $DB,
		"SELECT count(*) > 0 FROM retries.workers WHERE state = 'running'", 't',
		'e: mallory\'s call waits for her lock');
	my $ids = alice_puts($w1, 30);
	my $took = alice_done($w1, $ids, 'e: alice\'s calls on w1 run while mallory\'s wait');
	cmp_ok($took, '<', 8 + 2 * $alone,
		sprintf('e: within the cap and a little (%.1f s; %.1f s alone)', $took, $alone));
	finished($w1, $_, 'e: mallory\'s blocked call ends') for @blocked;
	like(join(',', map { history($w1, $_) } @blocked), qr/^(1:(failed|timeout) 57014,?)+$/,
		'e: mallory\'s blocked calls end at the cap');
	$session->query_safe('COMMIT');
	$session->quit;
}

###########################################################################
# g. Citus's two-phase commit names, taken first
###########################################################################

# Citus names the transactions it prepares on the other nodes
# citus_<group>_<pid>_<transaction number>_<connection number>: the pid of
# the retries worker (pg_stat_activity), a node-wide counter (any session
# reads its own) and a counter of the process, which pg_dist_transaction
# shows to every role until Citus's recovery clears it
# (citus.recover_2pc_interval, 1 min by default; 10 min here, for a
# deterministic test).  Any role may PREPARE TRANSACTION under any name.
# mallory, logged in to w1 and w2 herself, prepares transactions under the
# names that the next batches of w1's workers will use on w2: their
# PREPARE TRANSACTION fails (42710, not a passing error).  alice's call
# must still succeed (a failed commit costs her at most an attempt, retried
# as her policy says), not fail for good.
{
	for my $node (@nodes)
	{
		$node->safe_psql($DB, "ALTER SYSTEM SET citus.recover_2pc_interval = '10min'");
		$node->reload;
	}
	# alice's calls on w1 leave their 2PC records in pg_dist_transaction
	my $mark = 1;
	my $records = 0;
	for my $try (1 .. 10)
	{
		my @ids = split /\n/, sql($w1, 'alice',
			"SELECT retries.call('alice.mark(bigint)', jsonb_build_array(g))"
			  . " FROM generate_series($mark, $mark + 5) g");
		$mark += 6;
		finished($w1, $_, 'g: alice\'s mark call ends') for @ids;
		$records = sql($w1, 'mallory', 'SELECT count(*) FROM pg_dist_transaction');
		last if $records > 0;
	}
	cmp_ok($records, '>', 0, 'g: mallory reads the names of w1\'s prepared transactions');

	# mallory: the group, pid and last connection number of each worker
	# that prepared transactions lately, and the node's counter now
	my %last = map { split /\|/ } split /\n/, sql($w1, 'mallory',
		"SELECT w || '|' || max(c) FROM (SELECT split_part(gid, '_', 2) || '_'"
		  . " || split_part(gid, '_', 3) AS w, split_part(gid, '_', 5)::int AS c"
		  . " FROM pg_dist_transaction"
		  . " WHERE split_part(gid, '_', 3)::int IN (SELECT pid FROM pg_stat_activity)) g"
		  . " GROUP BY w");
	my $now = (split /\|/, sql($w1, 'mallory', q{
BEGIN;
SELECT count(*) FROM mallory.d;
SELECT '|' || transaction_number FROM get_current_transaction_id();
COMMIT;
}))[-1];
	$now =~ s/\s+//g;
	my @gids;
	for my $worker (sort keys %last)
	{
		for my $t ($now + 1 .. $now + 4)
		{
			push @gids, "citus_${worker}_${t}_$_" for ($last{$worker} + 1 .. $last{$worker} + 6);
		}
	}
	sql($w2, 'mallory',
		join("\n", map { "BEGIN; SELECT 1; PREPARE TRANSACTION '$_';" } @gids));
	note('g: mallory prepared ' . scalar(@gids) . ' transactions on w2, from ' . $gids[0]);

	my $id = sql($w1, 'alice', "SELECT retries.call('alice.mark(bigint)', '[1000000]')");
	finished($w1, $id, 'g: alice\'s call made then ends');
	note('g: alice\'s call: ' . $w1->safe_psql($DB,
		"SELECT state || ' ' || attempts || ' ' || coalesce(last_sqlstate, '') || ' '"
		  . " || coalesce(last_message, '') FROM retries.calls WHERE id = $id"));
	# (fixed: an error at a commit is charged as interrupted, and retried)
	is(state_of($w1, $id), 'succeeded', 'g: alice\'s call succeeds all the same');
	# the superuser clears mallory's transactions; Citus's recovery as before
	$w2->safe_psql($DB, "ROLLBACK PREPARED '$_'")
	  for split /\n/, $w2->safe_psql($DB,
		"SELECT gid FROM pg_prepared_xacts WHERE owner = 'mallory'");
	for my $node (@nodes)
	{
		$node->safe_psql($DB, 'ALTER SYSTEM RESET citus.recover_2pc_interval');
		$node->reload;
	}
}

###########################################################################
# f. exactly once, and no crash
###########################################################################

for my $node ($c, $w1)
{
	wait_until($node, $DB,
		"SELECT count(*) FROM retries.calls WHERE state IN ('scheduled', 'running')"
		  . " AND scheduled_by::text = 'alice'",
		'0', 'f: no call of alice\'s left unfinished on ' . $node->name);
}
no_prepared_xacts(\@nodes, 'f: no prepared transaction left on any node');
my $total = $alice_calls{ $c->name } + $alice_calls{ $w1->name };
is( $c->safe_psql($DB,
		"SELECT count(*) || ' rows, ' || count(DISTINCT id) || ' ids' FROM alice.orders"),
	"$total rows, $total ids", 'f: one row per call of alice\'s in the distributed table');
is( $c->safe_psql($DB,
		"SELECT count(*) || ' rows, ' || count(DISTINCT id) || ' ids' FROM alice.audit"),
	"$total rows, $total ids", 'f: one row per call of alice\'s in the reference table');
for my $node ($c, $w1)
{
	is( sql($node, 'alice', 'SELECT last_value FROM alice.runs'),
		$alice_calls{ $node->name },
		'f: her function ran once per call on ' . $node->name);
	is( $node->safe_psql($DB,
			"SELECT count(*) || ' ' || coalesce(sum(attempts), 0) FROM retries.calls"
			  . " WHERE fn = 'alice.put(bigint)'::regprocedure AND state = 'succeeded'"),
		$alice_calls{ $node->name } . ' ' . $alice_calls{ $node->name },
		'f: each of alice\'s calls on ' . $node->name . ' succeeded at its first attempt');
}
no_crash($_, $log_start{ $_->name }, 'f: no crash on ' . $_->name) for @nodes;

note(sprintf('runtime: %.0f s', time() - $t_start));
$_->stop for @nodes;
done_testing();
