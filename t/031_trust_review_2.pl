# Second hostile review of issue 42 (extra workers, reserved workers,
# containment), by a reviewer who did not write the code.  alice is the
# victim, mallory (and m2..m4, members of mallory) the attackers.  Each
# numbered check failed on the code reviewed (0a0c22d) and holds since:
#   1. alice calls mallory's SECURITY DEFINER function, which holds its
#      worker; mallory's own long call holds the other.  An extra worker
#      took only roles with no call running, and a role's head only, so
#      alice's next due call waited for mallory's code to end.  Now a
#      worker counts as held by the role whose code it runs (mallory's),
#      and an extra takes a role's first due call that no worker holds.
#   2. mallory's SECURITY INVOKER function (no hooks), which traps its
#      cancel past the 1 s timeout mallory chose, ended the worker, and
#      alice's calls that shared its batch ran twice.  Now a call of any
#      function of another role (not a superuser) shares a batch only with
#      calls of that role's functions (execute_foreign_owner).
#   3. the bound, documented: as many roles as there are workers and
#      extra workers (four, colluding), each with one long call, keep a
#      due call of alice's waiting until one ends.
#   4. mallory's long procedures in another database took every reserved
#      worker (a runner, and an extra worker that ran nothing); with her
#      parallel query holding every other slot, alice's command waited for
#      the query to end.  Now an extra in a reserved worker that runs
#      nothing for a second gives it back (and the database's extras get
#      none for 10 s).
#   5. a DEFAULT of mallory's function, which the caller never wrote, ran
#      as the caller: a superuser's call with '[]' ran mallory's code as
#      the superuser.  Now making the arguments refuses a function of
#      another role (42501).
#   6. under the same parallel query, a stream of mallory's short commands
#      kept both reserved workers in their one-second restart after each
#      job (alice's commands waited 63 s and 109 s on the reviewer's
#      server; a race this fresh cluster did not lose).  Now a reserved
#      worker starts again at once; the check is that alice's commands run
#      while mallory's stream is still due.
#
# Held:
#   a. the idempotency key is bounded (16 kB).
#   b. retries.workers shows mallory no call of alice's.
#   c. extra workers never exceed retries.max_extra_workers.
#   d. mallory's function that alice calls cannot terminate its worker
#      (pg_terminate_backend: 42501), and alice's calls beside it run once.
#   e. a domain CHECK of mallory's in an argument's conversion does not
#      run: a call of a function that takes mallory's domain is refused
#      when it is made (42501; at first, in the attempt, by routing).

use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use RetriesTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

my $DB = 'postgres';
my $node = retries_node('trust_review_2');
$node->append_conf('postgresql.conf', q{
retries.max_workers = 2
retries.max_extra_workers = 2
retries.reserved_workers = 2
retries.max_attempt_time = '1h'
});
$node->start;

sub sql
{
	my ($role, $sql, $db) = @_;
	return $node->safe_psql($db // $DB, "SET ROLE $role;\n$sql");
}

$node->safe_psql($DB, q{
CREATE EXTENSION retries;
CREATE ROLE alice LOGIN;
CREATE ROLE mallory LOGIN;
CREATE ROLE m2 LOGIN IN ROLE mallory;
CREATE ROLE m3 LOGIN IN ROLE mallory;
CREATE ROLE m4 LOGIN IN ROLE mallory;
CREATE SCHEMA alice AUTHORIZATION alice;
CREATE SCHEMA mallory AUTHORIZATION mallory;
GRANT USAGE ON SCHEMA mallory TO PUBLIC;
});
sql('alice', q{
CREATE TABLE alice.done (n int);
CREATE FUNCTION alice.work(n int) RETURNS int LANGUAGE sql
	AS 'INSERT INTO alice.done VALUES (n) RETURNING n';
SELECT retries.annotate('alice.work(int)', '3 10ms');
CREATE SEQUENCE alice.seq;
CREATE FUNCTION alice.pay(n int) RETURNS bigint LANGUAGE sql
	AS $$ SELECT nextval('alice.seq') $$;
SELECT retries.annotate('alice.pay(int)', '3 10ms');
});
sql('mallory', q{
CREATE FUNCTION mallory.hold() RETURNS int LANGUAGE sql
	AS $$ SELECT } . gate_sql(42) . q{; SELECT 1 $$;
SELECT retries.annotate('mallory.hold()', '1 10ms');
CREATE FUNCTION mallory.sdhold() RETURNS int LANGUAGE sql SECURITY DEFINER
	AS $$ SELECT } . gate_sql(41) . q{; SELECT 1 $$;
SELECT retries.annotate('mallory.sdhold()', '1 10ms');
CREATE FUNCTION mallory.collude() RETURNS int LANGUAGE sql
	AS $$ SELECT } . gate_sql(43) . q{; SELECT 1 $$;
SELECT retries.annotate('mallory.collude()', '1 10ms');
CREATE FUNCTION mallory.inv(n int) RETURNS int LANGUAGE plpgsql AS $$
BEGIN
	LOOP
		BEGIN
			PERFORM pg_sleep(30);  -- not a wait: the time limit cancels it, and it traps the cancel
		EXCEPTION WHEN query_canceled THEN NULL;
		END;
	END LOOP;
END $$;
SELECT retries.annotate('mallory.inv(int)', '1 10ms', timeout => '1 s');
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA mallory TO PUBLIC;
});
wait_until($node, $DB, workers_query($DB), '2', 'two workers');

my $extras = "SELECT count(*) FROM pg_stat_activity"
  . " WHERE backend_type = 'retries extra worker' AND datname = '$DB'";

# ---------------------------------------------------------------------------
# a. the key is bounded
my ($out, $err) = try_as($node, $DB, 'alice',
	"SELECT retries.call('alice.work(int)', '[1]', key => repeat('k', 3000000))");
like($err, qr/54000|more than 16 kB/, 'a: a 3 MB key is refused');

# ---------------------------------------------------------------------------
# 1. mallory's code holds alice's worker, her own call the other
{
	my $g41 = close_gate($node, $DB, 41);
	my $g42 = close_gate($node, $DB, 42);
	my $sd = sql('alice', "SELECT retries.call('mallory.sdhold()')");
	wait_at_gate($node, $DB, 41, 1, '1: alice\'s call of mallory\'s function runs, held by it');
	sql('mallory', "SELECT retries.call('mallory.hold()')");
	wait_at_gate($node, $DB, 42, 1, '1: mallory\'s long call holds the other worker');
	is(sql('mallory', 'SELECT count(*) FROM retries.workers WHERE current_call IS NOT NULL'),
		'1', 'b: retries.workers shows mallory her own call only, not alice\'s');
	my $w = sql('alice', "SELECT retries.call('alice.work(int)', '[1]')");
	# both gates closed: only an extra worker can run it
	wait_until($node, $DB, "SELECT state FROM retries.calls WHERE id = $w",
		'succeeded', '1: alice\'s next due call runs while mallory\'s code holds both workers');
	ok($node->safe_psql($DB, $extras) <= 2, 'c: (extra workers within the bound)');
	open_gate($g41);
	open_gate($g42);
	wait_until($node, $DB, "SELECT state FROM retries.calls WHERE id = $w",
		'succeeded', '1: (it runs once mallory\'s code ends)');
	wait_until($node, $DB, "SELECT state FROM retries.calls WHERE id = $sd",
		'succeeded', '1: (and so does the call of mallory\'s function)');
	wait_until($node, 'postgres', $extras, '0', '1: the extra workers stop');
}

# ---------------------------------------------------------------------------
# 2. mallory's SECURITY INVOKER function ends the worker: alice's batch
{
	my $before = sql('alice', 'SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM alice.seq');
	my @ids = split /\n/, sql('alice', q{
BEGIN;
SELECT retries.call('alice.pay(int)', jsonb_build_array(g), now()) FROM generate_series(1, 10) g;
SELECT retries.call('mallory.inv(int)', '[1]', now());
COMMIT;
});
	my $inv = $ids[-1];
	wait_until($node, $DB,
		"SELECT count(*) FILTER (WHERE state = 'succeeded') || ' ' || sum(attempts)"
		  . " FROM retries.calls WHERE fn = 'alice.pay(int)'::regprocedure",
		'10 10', '2: alice\'s 10 calls succeed, one attempt each');
	wait_until($node, $DB, "SELECT state FROM retries.calls WHERE id = $inv",
		'failed', '2: mallory\'s function, interrupted, fails');
	is(sql('alice', 'SELECT last_value FROM alice.seq'), $before + 10,
		'2: alice\'s function ran once per call, not again after mallory\'s ended the worker');
}

# ---------------------------------------------------------------------------
# 3. four roles, one long call each, take every worker and both extras
{
	my $g43 = close_gate($node, $DB, 43);
	my $n = 0;
	for my $role (qw(mallory m2 m3 m4))
	{
		# each runs a long function of its own: an extra worker passes over
		# code of a role that holds another worker (t/032 3)
		sql($role, "CREATE FUNCTION mallory.collude_$role() RETURNS int LANGUAGE sql"
			  . " AS \$\$ SELECT " . gate_sql(43) . "; SELECT 1 \$\$;"
			  . " SELECT retries.annotate('mallory.collude_$role()', '1 10ms')");
		sql($role, "SELECT retries.call('mallory.collude_$role()')");
		$n++;
		wait_at_gate($node, $DB, 43, $n, "3: $role\'s long call runs");
	}
	is($node->safe_psql($DB, $extras), '2', 'c: two extra workers, no more');
	my $w = sql('alice', "SELECT retries.call('alice.work(int)', '[3]')");
	is($node->safe_psql($DB, $extras), '2', 'c: (still two extra workers)');
	open_gate($g43);
	wait_until($node, $DB, "SELECT state FROM retries.calls WHERE id = $w",
		'succeeded', '3: (it runs once the gate opens)');
	wait_until($node, 'postgres', $extras, '0', '3: the extra workers stop');
}

# ---------------------------------------------------------------------------
# 4. mallory's procedures in db2 take both reserved workers; her parallel
#    query every other slot
{
	$node->safe_psql('postgres', 'CREATE DATABASE db2');
	$node->safe_psql('db2', q{
CREATE EXTENSION retries;
CREATE SCHEMA mallory AUTHORIZATION mallory;
});
	sql('mallory', q{
CREATE PROCEDURE mallory.lp() LANGUAGE sql AS $$ SELECT } . gate_sql(44) . q{ $$;
SELECT retries.annotate('mallory.lp()', '1 10ms');
}, 'db2');
	wait_until($node, 'postgres', workers_query('db2'), '2', '4: two workers in db2');
	sql('mallory', q{
CREATE TABLE mallory.big AS SELECT g AS id FROM generate_series(1, 100000) g;
ALTER TABLE mallory.big SET (parallel_workers = 64);
CREATE FUNCTION mallory.slow(id int) RETURNS boolean LANGUAGE sql PARALLEL SAFE
	AS $$ SELECT pg_sleep(1) IS NULL $$;  -- not a wait: the test cancels it
});
	my ($query, $pid) = start_parallel_hog($node, $DB, 'mallory',
		'4: mallory\'s parallel query takes every free slot');
	my $g44 = close_gate($node, 'db2', 44);
	sql('mallory', "SELECT retries.call('mallory.lp()') FROM generate_series(1, 3)", 'db2');
	wait_at_gate($node, 'db2', 44, 1, '4: a procedure of mallory\'s runs in db2, in a reserved worker');
	my $c = sql('alice', "SELECT retries.run_command('SELECT 1', '1 10ms')");
	# the query runs until the test cancels it
	wait_until($node, $DB, "SELECT state FROM retries.calls WHERE id = $c",
		'succeeded', '4: alice\'s command runs while the query holds every other slot');
	$node->safe_psql($DB, "SELECT pg_cancel_backend($pid)");
	$query->quit;
	wait_until($node, $DB, "SELECT state FROM retries.calls WHERE id = $c",
		'succeeded', '4: (it runs once the query ends)');
	open_gate($g44);
	wait_until($node, 'db2',
		"SELECT count(*) FROM retries.calls WHERE state = 'succeeded'",
		'3', '4: (mallory\'s procedures run once the gate opens)');
}

# ---------------------------------------------------------------------------
# d. pg_terminate_backend of the worker, from mallory's function
{
	sql('mallory', q{
CREATE FUNCTION mallory.die(n int) RETURNS int LANGUAGE plpgsql AS $$
BEGIN
	PERFORM pg_terminate_backend(pg_backend_pid());
	RETURN 1;
END $$;
GRANT EXECUTE ON FUNCTION mallory.die(int) TO PUBLIC;
SELECT retries.annotate('mallory.die(int)', '1 10ms');
});
	my $before = sql('alice', 'SELECT last_value FROM alice.seq');
	my @ids = split /\n/, sql('alice', q{
BEGIN;
SELECT retries.call('alice.pay(int)', jsonb_build_array(g), now()) FROM generate_series(1, 5) g;
SELECT retries.call('mallory.die(int)', '[1]', now());
COMMIT;
});
	my $die = $ids[-1];
	wait_until($node, $DB, "SELECT state || ' ' || last_sqlstate FROM retries.calls WHERE id = $die",
		'failed 42501', 'd: the worker may not be terminated by the code of a call');
	wait_until($node, $DB, "SELECT count(*) FROM retries.calls WHERE fn = 'alice.pay(int)'::regprocedure"
		  . " AND state = 'succeeded'", '15', 'd: alice\'s calls beside it succeed');
	is(sql('alice', 'SELECT last_value FROM alice.seq'), $before + 5, 'd: each once');
}

# ---------------------------------------------------------------------------
# e. a domain CHECK that sleeps, in the conversion of an argument
{
	sql('mallory', q{
CREATE TABLE mallory.flag (up boolean);
GRANT SELECT ON mallory.flag TO PUBLIC;
CREATE FUNCTION mallory.chk(v int) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
	-- once the flag is up: retries.call() checks the arguments too
	IF EXISTS (SELECT FROM mallory.flag) THEN
		PERFORM pg_sleep(600);  -- not a wait: the call's time limit cuts it short
	END IF;
	RETURN true;
END $$;
CREATE DOMAIN mallory.dom AS int CHECK (mallory.chk(VALUE));
CREATE FUNCTION mallory.sdf(d mallory.dom) RETURNS int LANGUAGE sql SECURITY DEFINER AS 'SELECT 1';
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA mallory TO PUBLIC;
SELECT retries.annotate('mallory.sdf(mallory.dom)', '1 10ms', timeout => '1 s');
});
	my ($out, $err) = try_as($node, $DB, 'alice',
		"SELECT retries.call('mallory.sdf(mallory.dom)', '[1]', now() + interval '1 day')");
	like($err, qr/42501/, 'e: alice\'s call of a function that takes mallory\'s domain is refused');
	like($err, qr/mallory\.dom/, 'e: (the error names the domain)');
	is($node->safe_psql($DB, 'SELECT count(*) FROM retries.calls WHERE fn::text LIKE \'mallory.sdf%\''),
		'0', 'e: (no call was made)');
	# a domain that gains a check after the call was made: refused in the attempt
	sql('mallory', q{
CREATE DOMAIN mallory.dom2 AS int;
CREATE FUNCTION mallory.sdf2(d mallory.dom2) RETURNS int LANGUAGE sql SECURITY DEFINER AS 'SELECT 1';
GRANT EXECUTE ON FUNCTION mallory.sdf2(mallory.dom2) TO PUBLIC;
SELECT retries.annotate('mallory.sdf2(mallory.dom2)', '1 10ms');
});
	my $c = sql('alice', "SELECT retries.call('mallory.sdf2(mallory.dom2)', '[1]', now() + interval '1 day')");
	sql('mallory', 'ALTER DOMAIN mallory.dom2 ADD CHECK (mallory.chk(VALUE))');
	sql('alice', "SELECT retries.retry_now($c)");
	wait_until($node, $DB, "SELECT state || ' ' || last_sqlstate FROM retries.calls WHERE id = $c",
		'failed 42501', 'e: a check added to the domain later is refused in the attempt');
}

# ---------------------------------------------------------------------------
# 5. mallory's DEFAULT runs as the superuser who calls her function
{
	sql('mallory', q{
CREATE TABLE mallory.seen (who name);
GRANT INSERT ON mallory.seen TO PUBLIC;
CREATE FUNCTION mallory.grab() RETURNS int LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO mallory.seen VALUES (current_user);
	RETURN 1;
END $$;
CREATE FUNCTION mallory.api5(n int DEFAULT mallory.grab()) RETURNS int
	LANGUAGE sql SECURITY DEFINER AS 'SELECT n';
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA mallory TO PUBLIC;
SELECT retries.annotate('mallory.api5(int)', '1 10ms');
});
	my ($ret, $out, $err) = $node->psql($DB,
		"\\set VERBOSITY verbose\nSELECT retries.call('mallory.api5(int)', '[]')");
	like($err, qr/42501/, '5: the superuser\'s call of mallory\'s function that leaves her DEFAULT is refused');
	is($node->safe_psql($DB, "SELECT count(*) FROM mallory.seen"),
		'0', '5: mallory\'s DEFAULT did not run');
	my $c = $node->safe_psql($DB, "SELECT retries.call('mallory.api5(int)', '[7]')");
	wait_until($node, $DB, "SELECT state || ' ' || result FROM retries.calls WHERE id = $c",
		'succeeded 7', '5: (the call that passes the argument runs)');
}

# ---------------------------------------------------------------------------
# 6. a stream of mallory's short commands keeps the reserved workers
#    restarting (a second after each job), under her parallel query
{
	my ($query, $pid) = start_parallel_hog($node, $DB, 'mallory',
		'6: mallory\'s parallel query takes every free slot');
	sql('mallory', "SELECT count(retries.run_command('SELECT 1', '1 10ms')) FROM generate_series(1, 3000)");
	wait_until($node, $DB,
		"SELECT count(*) >= 5 FROM retries.calls WHERE command = 'SELECT 1' AND state = 'succeeded'",
		't', '6: mallory\'s commands run, in the reserved workers');
	# five of alice's commands, one after another: each runs while
	# mallory's stream is still due (the race that a one-second restart
	# of the reserved workers made her lose)
	my @cmds;
	for my $k (1 .. 5)
	{
		my $c = sql('alice', "SELECT retries.run_command('SELECT $k + 1', '1 10ms')");
		push @cmds, $c;
		wait_until($node, $DB, "SELECT state FROM retries.calls WHERE id = $c",
			'succeeded', "6: alice's command $k runs");
	}
	ok($node->safe_psql($DB, "SELECT count(*) FROM retries.calls"
			. " WHERE command = 'SELECT 1' AND state = 'scheduled'") > 0,
		'6: ... all five while mallory\'s stream was still due');
	sql('mallory', "SELECT count(retries.cancel(id)) FROM retries.calls"
		  . " WHERE command = 'SELECT 1' AND state = 'scheduled'");
	wait_until($node, $DB,
		"SELECT count(*) FROM retries.calls WHERE state = 'succeeded' AND id IN (" . join(',', @cmds) . ")",
		'5', '6: (they run once mallory\'s stream is cancelled)');
	$node->safe_psql($DB, "SELECT pg_cancel_backend($pid)");
	$query->quit;
}

no_crash($node, 0, 'no crash in the server log');
$node->stop;
done_testing();
