# Containment and authorization: what escapes an attempt costs only the
# role that caused it, and a call needs exactly what a direct call of its
# function would.  doc/operations.md, "Containment: what escapes an
# attempt", and doc/reference.md, "Security model".
#
# mallory is the attacker: an ordinary LOGIN role with the default grants
# and a schema of her own.  alice is the victim: her table alice.log, whose
# serial column counts every run of alice.work(n), committed or not, and
# her functions.  One worker (retries.max_workers = 1), so that the
# attacker's calls and the victim's run in the same process, one after the
# other.  Each section re-runs a finding of the hostile review as written:
#
#   a. a call that turns its errors into FATALs (set_config('exit_on_error',
#      ...), or ALTER ROLE ... SET exit_on_error) and retries every 10 ms:
#      alice's calls, scheduled beside it, still finish, each run exactly
#      once (her sequence advances once per call), and the worker never
#      exits;
#   b. a function given by OID skips no privilege: without USAGE on its
#      schema, retries.call() and retries.schedule() refuse it (42501), an
#      attempt made after USAGE was revoked fails with 42501, not retried,
#      and retries.policies does not list it;
#   c. the attempt cap holds against a function that traps its cancel: one
#      that traps it once and returns is recorded as a timeout (57014),
#      not a success; one that traps it forever is ended by the worker's
#      exit and charged as interrupted, at the cap (not after the hour the
#      function would take); its retry, an hour later, runs when the
#      extension's clock is moved on (retries.debug_clock_offset);
#   d. no lock that a role holds stalls the worker: a call it locked after
#      its attempt was interrupted does not keep the restarted worker from
#      other roles' calls, and retries.call(after => ...) returns while the
#      call it names runs (held at a gate the test holds);
#   e. a function's max_running and rate are shared fairly: 100 calls of
#      mallory's do not keep alice's call of the same function waiting
#      (counted in mallory's calls that start before it, not in seconds);
#   f. arguments are bounded: over retries.max_args_size they are refused
#      (54000); large ones already stored do not all sit in a worker's
#      memory at once;
#   g. the rest: the random seed a call sets does not reach the next
#      role's call; a role past VALID UNTIL, without CONNECT or without
#      LOGIN gets 42501; dropping a function names no other role's
#      schedule; retries.workers shows no other database's workers;
#   h. and i. (below);
#   j. calls made while other sessions' DDL sends invalidations crash
#      nothing (retries.call() keeps call_data's indexes open for the rest
#      of a transaction);
#   k. another role's code that the caller calls (mallory's SECURITY
#      DEFINER function, which traps its cancel and ends the worker) does
#      not have the caller's other calls run again;
#   l. a stream of another role's due calls does not hold back a call of
#      priority below 0: mallory's 5,000 calls, failing and due again 10 ms
#      later, for ever (more than the worker runs in 10 ms, so that some
#      are always due), and alice's call of priority -1 runs while they are
#      still due (1.7 before this: not until mallory's calls ended);
#   m. one role's long calls do not hold every worker: with two workers,
#      each held by a call of mallory's (at a gate), and no other role's
#      call due when they were claimed, alice's call runs in an extra
#      worker, which does not take mallory's next call; so do her command
#      while mallory's commands hold the one place for a runner (with
#      retries.max_runners 0: the database's own workers), and the
#      extra stops once the workers are free (1.7 before this: alice's call
#      waited for mallory's to end);
#   n. a parallel query does not keep a role's command from running:
#      mallory's parallel query takes every free background-worker slot
#      (max_parallel_workers is hers to raise), and alice's command runs
#      in a reserved worker (retries.reserved_workers), whose process then
#      starts again in its slot (1.7 before this: the command waited for
#      a slot until the query ended).
#
# No step assumes how fast the machine is: a call that must still run while
# the test does something waits at a gate the test holds (t/RetriesTest.pm),
# and what must happen "soon" is counted in other calls, not seconds.
#
# For development, RETRIES_CONTAINMENT_ONLY=REGEX runs only the sections
# whose letters match (the setup always runs).

use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RetriesTest;
use Test::More;
use Time::HiRes qw(time usleep);

my $DB = 'postgres';

my $node = retries_node('containment');
$node->append_conf(
	'postgresql.conf', q{
retries.max_workers = 1
retries.max_attempt_time = '3s'
retries.reserved_workers = 2
});
$node->start;

# section(LETTER): whether to run that section
sub section
{
	my ($letter) = @_;
	my $only = $ENV{RETRIES_CONTAINMENT_ONLY};
	return !defined $only || $letter =~ /$only/;
}

# sql(ROLE, SQL): run SQL as ROLE (SET ROLE), its output; dies on error
sub sql
{
	my ($role, $sql) = @_;
	return $node->safe_psql($DB, "SET ROLE $role;\n$sql");
}

# fails_with(ROLE, SQL, SQLSTATE, NAME): SQL as ROLE fails with SQLSTATE;
# returns its error message
sub fails_with
{
	my ($role, $sql, $sqlstate, $name) = @_;
	my ($ret, $out, $err) = $node->psql($DB,
		"\\set VERBOSITY verbose\nSET ROLE $role;\n$sql", on_error_stop => 1);
	isnt($ret, 0, "$name: refused");
	like($err, qr/ERROR:  $sqlstate:/, "$name: with $sqlstate") or diag($err);
	return $err;
}

# pause_execution(NAME): retries.enabled = off, and every worker of the
# database paused (a test named NAME): none left is in a batch or about to
# start one.  How many there are is not the test's: one that found nothing
# due for a while may have left the database, and a worker that exited in a
# call's cap may have been replaced, or not yet (a count of one paused
# worker failed CI once).  resume_execution(): on again
sub pause_execution
{
	my ($name) = @_;
	$node->safe_psql($DB, 'ALTER SYSTEM SET retries.enabled = off; SELECT pg_reload_conf()');
	wait_until($node, $DB,
		"SELECT count(*) FILTER (WHERE state <> 'paused') FROM retries.workers"
		  . " WHERE database = current_database()",
		'0', $name);
	return;
}

sub resume_execution
{
	$node->safe_psql($DB, 'ALTER SYSTEM SET retries.enabled = on; SELECT pg_reload_conf()');
	return;
}

# history(ID): the call's attempts, as "n:outcome sqlstate" joined by ','
sub history
{
	my ($id) = @_;
	return $node->safe_psql($DB,
		"SELECT string_agg(attempt || ':' || outcome || coalesce(' ' || sqlstate, ''), ','"
		  . " ORDER BY attempt) FROM retries.attempts WHERE call_id = $id");
}

# alice_runs_meanwhile(N, NAME): a call of alice.work(N) made now runs (a
# test named NAME); if not, what the workers wait for
sub alice_runs_meanwhile
{
	my ($n, $name) = @_;
	my $id = sql('alice', "SELECT retries.call('alice.work(int)', '[$n]')");
	wait_until($node, $DB, "SELECT state FROM retries.calls WHERE id = $id",
		'succeeded', $name)
	  or diag($node->safe_psql($DB,
		"SELECT pid, pg_blocking_pids(pid), state, current_call FROM retries.workers"));
	return;
}

# in_transaction(ROLE, SQL): a background session that runs SQL as ROLE
# (as the superuser if ROLE is undef) in a transaction it leaves open; the
# session, and SQL's output
sub in_transaction
{
	my ($role, $sql) = @_;
	my $session = $node->background_psql($DB);
	my $out = $session->query_safe((defined $role ? "SET ROLE $role; " : '') . "BEGIN; $sql");
	return ($session, $out);
}

# end_sessions(SESSION...): COMMIT the open transaction of each background
# session, then quit it
sub end_sessions
{
	$_->query_safe('COMMIT') for @_;
	$_->quit for @_;
	return;
}

# worker_exits(OFFSET): the lines of the log since OFFSET that say a retries
# worker exited or was terminated
sub worker_exits
{
	my ($offset) = @_;
	return grep { /retries worker.*(exited|terminat)/ || /FATAL/ }
	  split /\n/, slurp_file($node->logfile, $offset);
}

$node->safe_psql(
	$DB, q{
CREATE EXTENSION retries;
CREATE ROLE alice LOGIN;
CREATE ROLE mallory LOGIN;
CREATE SCHEMA alice AUTHORIZATION alice;
CREATE SCHEMA mallory AUTHORIZATION mallory;
SET ROLE alice;
CREATE TABLE alice.log (id serial PRIMARY KEY, n int NOT NULL);
CREATE FUNCTION alice.work(n int) RETURNS void LANGUAGE sql
	AS $$ INSERT INTO alice.log (n) VALUES (n) $$;
SELECT retries.annotate('alice.work(int)', '5 1s');
SET ROLE mallory;
-- traps every cancel for an hour: only the worker's exit ends it
CREATE FUNCTION mallory.trap_cancels() RETURNS int LANGUAGE plpgsql AS $$
DECLARE
	caught int := 0;
BEGIN
	FOR i IN 1 .. 3600 LOOP
		BEGIN
			PERFORM pg_sleep(1);  -- not a wait: the worker's exit ends it
		EXCEPTION WHEN query_canceled THEN
			caught := caught + 1;
		END;
	END LOOP;
	RETURN caught;
END $$;
RESET ROLE;
});
wait_until($node, 'postgres', workers_query($DB), '1', 'one worker');

# mallory_first(FN, ROLE, N): in one transaction, a call of mallory's FN
# due a second ago, then ROLE's call of alice.work(N); returns their ids
sub mallory_first
{
	my ($fn, $role, $n) = @_;
	my $out = $node->safe_psql($DB, qq{
BEGIN;
SET LOCAL ROLE mallory;
SELECT retries.call('$fn', run_at => now() - interval '1 second');
SET LOCAL ROLE $role;
SELECT retries.call('alice.work(int)', '[$n]');
COMMIT;
});
	return $out =~ /(\d+)\s+(\d+)/ ? ($1, $2) : (0, 0);
}

# alice_calls(FROM, TO): alice schedules work(FROM..TO); returns the ids
# as "first,last"
sub alice_calls
{
	my ($from, $to) = @_;
	return sql('alice',
		"SELECT min(id) || ',' || max(id) FROM (SELECT retries.call('alice.work(int)',"
		  . " jsonb_build_array(g)) AS id FROM generate_series($from, $to) g) s");
}

# started_between(FN, ROLE, ID): SQL giving how many attempts of FN's calls
# by ROLE started after call ID was made and before its first attempt
sub started_between
{
	my ($fn, $role, $id) = @_;
	return "SELECT count(*) FROM retries.attempts a JOIN retries.calls c ON c.id = a.call_id"
	  . " WHERE c.fn = '$fn'::regprocedure AND c.scheduled_by = '$role'::regrole"
	  . " AND a.started_at > (SELECT created_at FROM retries.calls WHERE id = $id)"
	  . " AND a.started_at < (SELECT min(started_at) FROM retries.attempts WHERE call_id = $id)";
}

###########################################################################
# a. a FATAL from one role's call
###########################################################################

if (section('a'))
{
	my $offset = -s $node->logfile;

	sql('mallory', q{
CREATE FUNCTION mallory.eoe() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	PERFORM set_config('exit_on_error', 'on', false);
	RAISE EXCEPTION 'boom' USING ERRCODE = 'RT001';
END $$;
SELECT retries.annotate('mallory.eoe()', '10ms');
SELECT count(retries.call('mallory.eoe()')) FROM generate_series(1, 20);
});
	my $seq_before = sql('alice',
		'SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM alice.log_id_seq');
	my ($first, $last) = split /,/, alice_calls(1, 10);
	wait_until($node, $DB,
		"SELECT count(*) FROM retries.calls WHERE id BETWEEN $first AND $last"
		  . " AND state = 'succeeded'",
		'10', 'a: alice\'s 10 calls all succeed beside the poison');
	is( $node->safe_psql($DB,
			"SELECT sum(attempts) FROM retries.calls WHERE id BETWEEN $first AND $last"),
		'10', 'a: each in one attempt');
	is(sql('alice', 'SELECT last_value FROM alice.log_id_seq'),
		$seq_before + 10, 'a: her function ran exactly once per call');
	is( $node->safe_psql($DB,
			"SELECT string_agg(DISTINCT a.outcome || ' ' || a.sqlstate || ' ' || a.message, '; ')"
			  . " FROM retries.attempts a JOIN retries.calls c ON c.id = a.call_id"
			  . " WHERE c.fn = 'mallory.eoe()'::regprocedure"),
		'failed 55P02 parameter "exit_on_error" cannot be turned on in a call',
		'a: the poison\'s set_config() fails, as a clear error of its own');
	my @exits = worker_exits($offset);
	ok(!@exits, 'a: the worker never exited') or diag(join("\n", @exits[0 .. 4]));
	sql('mallory',
		"SELECT count(retries.cancel(id)) FROM retries.calls WHERE fn = 'mallory.eoe()'::regprocedure");

	# the same through the role's settings, with a plain error
	$offset = -s $node->logfile;
	$node->safe_psql($DB, 'ALTER ROLE mallory SET exit_on_error = on');
	sql('mallory', q{
CREATE FUNCTION mallory.div(i int) RETURNS int LANGUAGE sql AS $$ SELECT 1 / i $$;
SELECT retries.annotate('mallory.div(int)', '10ms', retry_on => '{RT, 22012}');
SELECT count(retries.call('mallory.div(int)', '[0]')) FROM generate_series(1, 20);
});
	($first, $last) = split /,/, alice_calls(11, 20);
	wait_until($node, $DB,
		"SELECT count(*) FROM retries.calls WHERE id BETWEEN $first AND $last"
		  . " AND state = 'succeeded'",
		'10', 'a: with ALTER ROLE ... SET exit_on_error too');
	is( $node->safe_psql($DB,
			"SELECT sum(attempts) FROM retries.calls WHERE id BETWEEN $first AND $last"),
		'10', 'a: each in one attempt');
	is( $node->safe_psql($DB,
			"SELECT DISTINCT sqlstate FROM retries.attempts a JOIN retries.calls c ON c.id = a.call_id"
			  . " WHERE c.fn = 'mallory.div(int)'::regprocedure"),
		'22012', 'a: the role\'s own error is what its attempts record');
	@exits = worker_exits($offset);
	ok(!@exits, 'a: the worker never exited') or diag(join("\n", @exits[0 .. 4]));
	sql('mallory',
		"SELECT count(retries.cancel(id)) FROM retries.calls WHERE fn = 'mallory.div(int)'::regprocedure");
	$node->safe_psql($DB, 'ALTER ROLE mallory RESET exit_on_error');
}

###########################################################################
# b. a function given by OID
###########################################################################

if (section('b'))
{
	sql('alice', q{
CREATE FUNCTION alice.export_secret(dest text) RETURNS text
	LANGUAGE sql SECURITY DEFINER
	AS $$ SELECT 'alice-secret-42 as ' || current_user || ' for ' || dest $$;
SELECT retries.annotate('alice.export_secret(text)', '3 10ms');
});
	my $oid = $node->safe_psql($DB,
		"SELECT 'alice.export_secret(text)'::regprocedure::oid");
	fails_with('mallory', "SELECT retries.call($oid, '[\"mallory\"]')",
		'42501', 'b: retries.call() by OID without USAGE on the schema');
	fails_with('mallory', "SELECT retries.schedule('steal', $oid, '1s', '[\"mallory\"]')",
		'42501', 'b: retries.schedule() by OID without USAGE on the schema');
	is(sql('mallory', "SELECT count(*) FROM retries.policies WHERE fn::oid = $oid"),
		'0', 'b: retries.policies does not list it to her');
	is(sql('alice', "SELECT count(*) FROM retries.policies WHERE fn::oid = $oid"),
		'1', 'b: it lists it to its owner');

	# granted, scheduled, then revoked: the attempt is refused, not retried
	pause_execution('b: execution paused');
	sql('alice', 'GRANT USAGE ON SCHEMA alice TO mallory');
	my $id = sql('mallory', "SELECT retries.call($oid, '[\"mallory\"]')");
	sql('alice', 'REVOKE USAGE ON SCHEMA alice FROM mallory');
	resume_execution();
	wait_until($node, $DB, "SELECT state FROM retries.calls WHERE id = $id",
		'failed', 'b: a call made before USAGE was revoked fails');
	is(history($id), '1:failed 42501', 'b: with 42501, at its first attempt, not retried');
	is($node->safe_psql($DB, "SELECT result IS NULL FROM retries.calls WHERE id = $id"),
		't', 'b: and the secret never left');

	# a schedule made before USAGE was revoked: its firings make no call
	sql('alice', 'GRANT USAGE ON SCHEMA alice TO mallory');
	sql('mallory',
		"SELECT retries.schedule('steal', $oid, '1 second', '[\"mallory\"]')");
	sql('alice', 'REVOKE USAGE ON SCHEMA alice FROM mallory');
	my $made = sql('mallory', "SELECT count(*) FROM retries.calls WHERE fn::oid = $oid");
	wait_until($node, $DB,
		"SELECT skipped >= 2 FROM retries.schedules WHERE name = 'steal'",
		't', 'b: the schedule\'s firings are skipped');
	is(sql('mallory', "SELECT count(*) FROM retries.calls WHERE fn::oid = $oid"),
		$made, 'b: and make no call');
	fails_with('mallory', "SELECT retries.trigger('steal')",
		'42501', 'b: retries.trigger() of it');
	sql('mallory', "SELECT retries.unschedule('steal')");

	# a hook that the function's owner (mallory, here), as whom it runs,
	# may no longer call (USAGE revoked on its schema since the policy was
	# written) is not run: its error is recorded (found by the hostile
	# review of 1.3)
	$node->safe_psql($DB, q{
CREATE SCHEMA hooks;
GRANT USAGE ON SCHEMA hooks TO PUBLIC;
CREATE TABLE hooks.ran (n int);
GRANT INSERT ON hooks.ran TO PUBLIC;
CREATE FUNCTION hooks.after_failure(id bigint) RETURNS void LANGUAGE sql
	AS $$ INSERT INTO hooks.ran VALUES (1) $$;
CREATE FUNCTION public.always_fails() RETURNS void LANGUAGE sql AS $$ SELECT 1 / 0 $$;
SELECT retries.annotate('public.always_fails()', '1 10ms',
						on_exhausted => 'hooks.after_failure(bigint)');
ALTER FUNCTION public.always_fails() OWNER TO mallory;
REVOKE USAGE ON SCHEMA hooks FROM PUBLIC;
});
	# hook_refused(WHY, ERROR, NAME): mallory's call of always_fails()
	# fails (WHY: why its on_exhausted may not run), with ERROR recorded
	my $hook_refused = sub {
		my ($why, $error, $name) = @_;
		my $id = sql('mallory', "SELECT retries.call('public.always_fails()')");
		wait_until($node, $DB, "SELECT state FROM retries.calls WHERE id = $id",
			'failed', "b: a call whose on_exhausted $why fails");
		is( $node->safe_psql($DB,
				"SELECT on_exhausted_error FROM retries.attempts WHERE call_id = $id"),
			$error, $name);
	};
	$hook_refused->('is in a schema it may not use',
		'42501: role "mallory" has no USAGE privilege on schema hooks of function hooks.after_failure(bigint)',
		'b: its on_exhausted is not run, and the reason is recorded');
	is($node->safe_psql($DB, 'SELECT count(*) FROM hooks.ran'), '0', 'b: (it did not run)');

	# nor one that was dropped since: recorded as 42501 too
	my $hook = $node->safe_psql($DB,
		"SELECT 'hooks.after_failure(bigint)'::regprocedure::oid");
	$node->safe_psql($DB, 'DROP FUNCTION hooks.after_failure(bigint)');
	$hook_refused->('was dropped', "42501: function $hook no longer exists",
		'b: the dropped on_exhausted is not run, and the reason is recorded as 42501');
}

###########################################################################
# c. a function that traps its cancel
###########################################################################

if (section('c'))
{
	# Each function below would go on for an hour if the cap did not end
	# it; the test waits for the cap's outcome at most $RetriesTest::DEADLINE
	# (180 s): an outcome recorded at all is the cap at work, however
	# slowly the worker gets to it, and the time it took is only noted.
	my $offset = -s $node->logfile;
	sql('mallory', q{
CREATE FUNCTION mallory.trap_once() RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	BEGIN
		PERFORM pg_sleep(3600);  -- not a wait: the cap of 3 s cuts it short
	EXCEPTION WHEN query_canceled THEN
		RETURN 'caught it';
	END;
	RETURN 'slept';
END $$;
SELECT retries.annotate('mallory.trap_once()', '2 10ms');
CREATE FUNCTION mallory.trap_all() RETURNS text LANGUAGE sql
	AS $$ SELECT 'caught ' || mallory.trap_cancels() || ' cancels' $$;
SELECT retries.annotate('mallory.trap_all()', '1 1h');
});
	my $t0 = time();
	my $once = sql('mallory', "SELECT retries.call('mallory.trap_once()')");
	wait_until($node, $DB, "SELECT state FROM retries.calls WHERE id = $once",
		'failed', 'c: the call that traps its cancel once fails, at the cap, not after its hour');
	is(history($once), '1:timeout 57014',
		'c: its attempt is recorded as a timeout, not as a success');
	note(sprintf('c: it failed after %.1f s (the cap is 3 s)', time() - $t0));

	$t0 = time();
	my $all = sql('mallory', "SELECT retries.call('mallory.trap_all()')");
	wait_until($node, $DB,
		"SELECT count(*) FROM retries.attempts WHERE call_id = $all", '1',
		'c: the call that traps every cancel has its first attempt recorded,'
		  . ' at the cap, not after its hour');
	note(sprintf('c: after %.1f s (the cap is 3 s)', time() - $t0));
	like(history($all), qr/^1:(timeout 57014|interrupted 57P01)$/,
		'c: as a timeout or an interrupted attempt');
	# its second attempt runs alone: 20 calls of the same role due just
	# before it are not in its batch, and are not run again when it ends
	# the worker again (their sequence counts each run).  Its retry is an
	# hour away; the extension's clock moves an hour on to make it due.
	pause_execution('c: execution paused before its second attempt is due');
	is($node->safe_psql($DB, "SELECT next_attempt > now() FROM retries.calls WHERE id = $all"),
		't', 'c: (it is not due yet)');
	sql('mallory', qq{
CREATE SEQUENCE mallory.runs;
CREATE FUNCTION mallory.count() RETURNS void LANGUAGE sql AS \$\$ SELECT nextval('mallory.runs') \$\$;
SELECT retries.annotate('mallory.count()', '3 10ms');
SELECT count(retries.call('mallory.count()',
	run_at => (SELECT next_attempt - interval '100 ms' FROM retries.calls WHERE id = $all)))
  FROM generate_series(1, 20);
});
	$node->safe_psql($DB, "ALTER SYSTEM SET retries.debug_clock_offset = '1h'");
	resume_execution();
	wait_until($node, $DB, "SELECT state FROM retries.calls WHERE id = $all",
		'failed', 'c: and the call fails after its two attempts');
	unlike(history($all), qr/succeeded/, 'c: never recorded as a success');
	wait_until($node, $DB,
		"SELECT count(*) FROM retries.calls WHERE fn = 'mallory.count()'::regprocedure"
		  . " AND state = 'succeeded'",
		'20', 'c: the calls due beside it succeed');
	is(sql('mallory', 'SELECT last_value FROM mallory.runs'), '20',
		'c: each run once: none shared a batch with the attempt that ended the worker');
	# nothing is left planned by the clock ahead
	$node->safe_psql($DB,
		'ALTER SYSTEM RESET retries.debug_clock_offset; SELECT pg_reload_conf()');
	# an on_exhausted hook that traps its cancel: the worker's exit ends
	# it, and the call stays failed, its hook not run again
	sql('mallory', q{
CREATE SEQUENCE mallory.hook_runs;
CREATE FUNCTION mallory.stubborn_hook(id bigint) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	PERFORM nextval('mallory.hook_runs');
	FOR i IN 1 .. 3600 LOOP
		BEGIN
			PERFORM pg_sleep(1);  -- not a wait: the worker's exit ends it
		EXCEPTION WHEN query_canceled THEN
			NULL;
		END;
	END LOOP;
END $$;
CREATE FUNCTION mallory.fails() RETURNS void LANGUAGE sql AS $$ SELECT 1 / 0 $$;
SELECT retries.annotate('mallory.fails()', '3 10ms',
						on_exhausted => 'mallory.stubborn_hook(bigint)');
});
	$t0 = time();
	my $hooked = sql('mallory', "SELECT retries.call('mallory.fails()')");
	wait_until($node, $DB,
		"SELECT state || ' ' || (SELECT string_agg(outcome || ' ' || coalesce(on_exhausted_error, '-'), ',')"
		  . " FROM retries.attempts WHERE call_id = $hooked)"
		  . " FROM retries.calls WHERE id = $hooked",
		'failed interrupted 57P01: interrupted (the hook went on past its time limit, or the server crashed or the worker was killed); it is not run again',
		'c: a call whose on_exhausted traps its cancel ends failed, the hook ended at the cap');
	note(sprintf('c: after %.1f s (the cap is 3 s)', time() - $t0));
	# the worker has gone on to other calls since: a second run of the hook
	# would have come before them
	alice_runs_meanwhile(32, 'c: then the worker runs alice\'s call');
	is(sql('mallory', 'SELECT last_value FROM mallory.hook_runs'), '1',
		'c: its hook ran once, and is not run again');

	# a delay_fn that traps its cancel: the call fails, naming it, and its
	# delay_fn is not run again (found by the hostile review of 1.3: the
	# charge of the interrupted attempt ran it again, for ever)
	sql('mallory', q{
CREATE SEQUENCE mallory.delay_runs;
CREATE FUNCTION mallory.stubborn_delay(a int, s text, m text) RETURNS interval LANGUAGE plpgsql AS $$
BEGIN
	PERFORM nextval('mallory.delay_runs');
	LOOP
		BEGIN
			PERFORM pg_sleep(1);  -- not a wait: the worker's exit ends it
		EXCEPTION WHEN query_canceled THEN
			NULL;
		END;
	END LOOP;
END $$;
CREATE FUNCTION mallory.busy() RETURNS void LANGUAGE sql AS $$ SELECT retries.retry() $$;
SELECT retries.annotate('mallory.busy()', '5 10ms',
						delay_fn => 'mallory.stubborn_delay(int,text,text)');
});
	$t0 = time();
	my $delayed = sql('mallory', "SELECT retries.call('mallory.busy()')");
	wait_until($node, $DB,
		"SELECT state || ' ' || attempts || ' ' || last_sqlstate FROM retries.calls WHERE id = $delayed",
		'failed 1 57P01', 'c: a call whose delay_fn traps its cancel fails, at the cap');
	like($node->safe_psql($DB, "SELECT last_message FROM retries.calls WHERE id = $delayed"),
		qr/^delay_fn mallory\.stubborn_delay\(integer,text,text\) was interrupted/,
		'c: naming its delay_fn');
	note(sprintf('c: after %.1f s (the cap is 3 s)', time() - $t0));

	my ($a1, $a2) = split /,/, alice_calls(30, 31);
	wait_until($node, $DB,
		"SELECT count(*) FROM retries.calls WHERE id IN ($a1, $a2) AND state = 'succeeded'",
		'2', 'c: then the worker runs alice\'s calls');
	is(sql('mallory', 'SELECT last_value FROM mallory.delay_runs'), '1',
		'c: its delay_fn ran once, and is not run again');
	ok(slurp_file($node->logfile, $offset) =~
		  /the worker exits: attempt \d+ of call $all went on past its time limit/,
		'c: the log says why the worker exited');
}

###########################################################################
# d. locks that a role holds
###########################################################################

if (section('d'))
{
	# alice.slow() runs until the test opens gate 31
	sql('alice', q{
CREATE FUNCTION alice.slow() RETURNS void LANGUAGE sql AS $$ SELECT } . gate_sql(31) . q{ $$;
SELECT retries.annotate('alice.slow()', '3 100ms');
});

	# the calls of this section that wait at a gate or a lock while the
	# test looks are not under the node's 3 s cap, which a loaded machine
	# passed (a slow call was cut short and its follower cancelled; a gate
	# call of mallory's failed)
	reload_setting($node, $DB, 'retries.max_attempt_time', '1h', '1h',
		'd: (setup) no cap on the gated calls while the test looks');

	# after => returns while the call it names runs (it waits at the gate
	# until after the call returned: a wait for its row would never end)
	my $slow_gate = close_gate($node, $DB, 31);
	my $slow = sql('alice', "SELECT retries.call('alice.slow()')");
	wait_at_gate($node, $DB, 31, 1, 'd: the slow call runs');
	my ($ret, $next, $err) = $node->psql($DB,
		"SET ROLE alice; SELECT retries.call('alice.work(int)', '[40]',"
		  . " after => ARRAY[${slow}::bigint])",
		timeout => $RetriesTest::DEADLINE);
	is($ret, 0, 'd: retries.call(after => ...) returns while the call it names runs')
	  or diag($err);
	is($node->safe_psql($DB, gate_waiters(31)), '1', 'd: (it still runs)');
	open_gate($slow_gate);
	wait_until($node, $DB, "SELECT state FROM retries.calls WHERE id = $next",
		'succeeded', 'd: and the follower runs after it');
	is( $node->safe_psql($DB,
			"SELECT (SELECT min(started_at) FROM retries.attempts WHERE call_id = $next)"
			  . " >= (SELECT max(finished_at) FROM retries.attempts WHERE call_id = $slow)"),
		't', 'd: after it, not before');

	# a session that holds the row of a call interrupted mid-attempt, as
	# retries.call(after => ...) did before 1.3 (it skips a locked row
	# now): the session's share lock waits for the worker's batch, and
	# holds the row once the worker is gone
	$slow_gate = close_gate($node, $DB, 31);
	$slow = sql('alice', "SELECT retries.call('alice.slow()')");
	wait_at_gate($node, $DB, 31, 1, 'd: another slow call runs');
	my $locker = $node->background_psql($DB);
	my $locker_pid = $locker->query_safe('SELECT pg_backend_pid()');
	$locker->query_until(qr/locking/,
		"\\echo locking\nBEGIN;\n"
		  . "SELECT id FROM retries.call_data WHERE id = $slow FOR SHARE;\n");
	wait_until($node, $DB,
		"SELECT wait_event_type FROM pg_stat_activity WHERE pid = $locker_pid",
		'Lock', 'd: the session waits for the worker\'s batch');
	$node->safe_psql($DB,
		"SELECT pg_terminate_backend(pid) FROM retries.workers WHERE current_call = $slow");
	# the locker now holds the call's row; the next worker starts (and
	# will find the gate open when it runs the call again)
	wait_until($node, $DB,
		"SELECT state FROM pg_stat_activity WHERE pid = $locker_pid",
		'idle in transaction', 'd: the session holds the interrupted call locked');
	open_gate($slow_gate);
	my ($b1, $b2) = split /,/, alice_calls(41, 42);
	my $m = sql('mallory', q{
CREATE FUNCTION mallory.ok() RETURNS int LANGUAGE sql AS $$ SELECT 1 $$;
SELECT retries.annotate('mallory.ok()', '3 10ms');
SELECT retries.call('mallory.ok()');
});
	wait_until($node, $DB, "SELECT state FROM retries.calls WHERE id = $m",
		'succeeded', 'd: another role\'s call runs meanwhile');
	is($node->safe_psql($DB, "SELECT count(*) FROM retries.workers WHERE state = 'starting'"),
		'0', 'd: no worker waits in starting');
	is(history($slow), '', 'd: the locked call is neither run nor charged meanwhile');
	$locker->query_safe('COMMIT');
	$locker->quit;
	wait_until($node, $DB, "SELECT state FROM retries.calls WHERE id = $slow",
		'succeeded', 'd: once the lock is gone, the call runs again');
	is(history($slow), '1:interrupted 57P01,2:succeeded',
		'd: with its interrupted attempt charged, once');

	# (found by the hostile review of 1.3) commands that PostgreSQL lets
	# queue a strong lock on a table before it checks the role may run
	# them: queued behind mallory's own open transaction, they held every
	# worker, retries.call() and reader of the views; refused at once now
	my $reader = $node->background_psql($DB);
	$reader->query_safe("SET ROLE mallory; BEGIN; SELECT count(*) FROM retries.calls;"
		  . " SELECT count(*) FROM pg_extension");
	for my $cmd (
		'CREATE RULE r AS ON INSERT TO retries.call_data DO INSTEAD NOTHING',
		'CREATE TRIGGER t BEFORE INSERT ON retries.call_data'
		  . ' FOR EACH ROW EXECUTE FUNCTION suppress_redundant_updates_trigger()',
		'CREATE TABLE mallory.fk (c bigint REFERENCES retries.call_data (id))',
		'CREATE TABLE mallory.fk2 (c bigint); ALTER TABLE mallory.fk2'
		  . ' ADD FOREIGN KEY (c) REFERENCES retries.call_data (id)',
		# (found by the hostile review after 1.4)
		'ALTER INDEX retries.call_data DEPENDS ON EXTENSION plpgsql',
		'ALTER MATERIALIZED VIEW retries.call_data DEPENDS ON EXTENSION plpgsql',
		'ALTER INDEX retries.call_data DEPENDS ON EXTENSION retries',
		'CREATE TABLE mallory.part PARTITION OF retries.call_data FOR VALUES IN (1)',
		'CREATE TABLE mallory.parted (id bigint) PARTITION BY LIST (id);'
		  . ' ALTER TABLE mallory.parted ATTACH PARTITION retries.call_data FOR VALUES IN (1)',
		'CREATE TABLE mallory.child (id bigint); ALTER TABLE mallory.child INHERIT retries.call_data',
		'CREATE TEMP TABLE pt (id bigint) PARTITION BY LIST (id);'
		  . ' ALTER TABLE pt DETACH PARTITION retries.call_data',
		'CREATE TEMP TABLE pt (id bigint) PARTITION BY LIST (id);'
		  . ' ALTER TABLE pt DETACH PARTITION retries.call_data FINALIZE',
		# and on a system catalog, which the workers read in every transaction
		'CREATE TEMP TABLE pt (id bigint) PARTITION BY LIST (id);'
		  . ' ALTER TABLE pt DETACH PARTITION pg_catalog.pg_extension',
		'ALTER INDEX pg_catalog.pg_extension DEPENDS ON EXTENSION plpgsql')
	{
		# a wait for mallory's open transaction would last until the test
		# ends it, below: the deadline is only there to fail, not hang
		my $timed_out = 0;
		my ($ret, $out, $err) = $node->psql($DB, "SET ROLE mallory; $cmd",
			timeout => $RetriesTest::DEADLINE,
			timed_out => \$timed_out);
		isnt($ret, 0, "d: refused: $cmd");
		ok(!$timed_out, "d: at once, not after mallory's transaction");
		like($err,
			qr/must be owner of (table call_data|extension retries|table pg_extension)|permission denied for table call_data/,
			'd: with the error PostgreSQL would give');
	}
	# and one that does not wait but holds the extension locked until its
	# transaction ends: every worker waited meanwhile
	fails_with('mallory', 'ALTER FUNCTION mallory.ok() DEPENDS ON EXTENSION retries',
		'42501', 'd: DEPENDS ON EXTENSION retries by a role that does not own it');
	my $c = sql('alice', "SELECT retries.call('alice.work(int)', '[43]')");
	wait_until($node, $DB, "SELECT state FROM retries.calls WHERE id = $c",
		'succeeded', 'd: and alice\'s calls are scheduled and run meanwhile');
	$reader->query_safe('COMMIT');
	$reader->quit;

	# (found after 1.4) a follower that mallory keeps locked, and a call
	# after the same running call left uncommitted: the worker that
	# finishes it leaves the follower for later, and must not wait for
	# mallory's open transaction to note so (it did: the note and hers had
	# the same key)
	sql('mallory', q{
CREATE FUNCTION mallory.gate() RETURNS void LANGUAGE sql AS $$ SELECT pg_advisory_xact_lock(77) $$;
SELECT retries.annotate('mallory.gate()', '1 10ms');
});
	my ($holder) = in_transaction(undef, 'SELECT pg_advisory_xact_lock(77)');
	my ($gate, $follower) = split /,/, sql('mallory', q{
BEGIN;
SELECT retries.call('mallory.gate()') AS gate \gset
SELECT :gate || ',' || retries.call('mallory.ok()', after => ARRAY[:gate::bigint]);
COMMIT;
});
	wait_until($node, $DB, "SELECT state FROM retries.calls WHERE id = $gate",
		'running', 'd: mallory\'s gate call runs, waiting');
	my ($keeper) = in_transaction('mallory', "SELECT retries.reschedule($follower, now())");
	my ($opener, $late) = in_transaction('mallory',
		"SELECT retries.call('mallory.ok()', after => ARRAY[${gate}::bigint])");
	$holder->query_safe('COMMIT');
	wait_until($node, $DB, "SELECT state FROM retries.calls WHERE id = $gate",
		'succeeded', 'd: the gate call succeeds');
	alice_runs_meanwhile(44, 'd: the worker is not held by mallory\'s open transactions');
	end_sessions($keeper, $opener);
	$holder->quit;
	wait_until($node, $DB,
		"SELECT string_agg(state::text, ',' ORDER BY id) FROM retries.calls"
		  . " WHERE id IN ($follower, $late)",
		'succeeded,succeeded', 'd: and both of her followers run once she commits');

	# (found by the hostile review of the fix above) a call after a
	# cancelled call whose follower is locked: mallory's backend notes the
	# cancelled call for later, as the worker does when it looks again;
	# the two notes must not have one key
	($holder) = in_transaction(undef, 'SELECT pg_advisory_xact_lock(77)');
	$gate = sql('mallory', "SELECT retries.call('mallory.gate()')");
	wait_until($node, $DB, "SELECT state FROM retries.calls WHERE id = $gate",
		'running', 'd: the worker is busy with a call of mallory\'s');
	my $x = sql('mallory', "SELECT retries.call('mallory.ok()', run_at => now() + interval '1 day')");
	my ($canceller) = in_transaction('mallory', "SELECT retries.cancel($x)");
	my $f4 = sql('mallory', "SELECT retries.call('mallory.ok()', after => ARRAY[${x}::bigint])");
	($keeper) = in_transaction('mallory',
		"SELECT retries.call('mallory.ok()', after => ARRAY[${f4}::bigint])");
	$canceller->query_safe('COMMIT');
	($opener) = in_transaction('mallory',
		"SELECT retries.call('mallory.ok()', after => ARRAY[${x}::bigint])");
	$holder->query_safe('COMMIT');
	alice_runs_meanwhile(45, 'd: nor by her notes of a cancelled call');
	end_sessions($keeper, $opener);
	$_->quit for $canceller, $holder;
	wait_until($node, $DB, "SELECT state FROM retries.calls WHERE id = $f4",
		'cancelled', 'd: and the follower of the cancelled call is cancelled once she commits');

	# (found by the second hostile review) code of mallory's that a worker
	# runs notes a call for later as her session would, not as the worker:
	# a worker's note would be met by another worker's, which would wait
	# for the rest of the batch that ran her code (its calls and hooks)
	$x = sql('mallory', "SELECT retries.call('mallory.ok()', run_at => now() + interval '1 day')");
	($canceller) = in_transaction('mallory', "SELECT retries.cancel($x)");
	my $chainer = sql('mallory', qq{
CREATE FUNCTION mallory.chain_after(x bigint) RETURNS bigint LANGUAGE sql
	AS \$\$ SELECT retries.call('mallory.ok()', after => ARRAY[x]) \$\$;
SELECT retries.annotate('mallory.chain_after(bigint)', '1 10ms');
SELECT retries.call('mallory.chain_after(bigint)', '[$x]');
});
	wait_until($node, $DB, "SELECT state FROM retries.calls WHERE id = $chainer",
		'succeeded', 'd: a call of mallory\'s schedules after a call she holds');
	is( $node->safe_psql($DB,
			"SELECT string_agg(after_id::text, ',') FROM retries.call_after_pending"
			  . " WHERE abs(after_id) = $x"),
		$x, 'd: noted for later as her own session would (not negated)');
	end_sessions($canceller);
	wait_until($node, $DB,
		"SELECT count(*) FROM retries.call_after a JOIN retries.calls c ON c.id = a.call_id"
		  . " WHERE a.after_id = $x",
		'0', 'd: and its follower is cancelled once she commits');
	reload_setting($node, $DB, 'retries.max_attempt_time', undef, '3s',
		'd: (setup) the 3 s cap again');
}

###########################################################################
# e. limits shared fairly between roles
###########################################################################

if (section('e'))
{
	$node->safe_psql($DB, q{
CREATE SCHEMA shared;
GRANT USAGE ON SCHEMA shared TO PUBLIC;
ALTER SCHEMA shared OWNER TO alice;
});
	sql('alice', q{
CREATE FUNCTION shared.work(n int) RETURNS void LANGUAGE sql
	AS $$ INSERT INTO alice.log (n) VALUES (n) $$;
SELECT retries.annotate('shared.work(int)', '3 10ms', max_running => 1, rate => '2/1s');
});
	sql('mallory',
		"SELECT count(retries.call('shared.work(int)', jsonb_build_array(g)))"
		  . " FROM generate_series(1, 100) g");
	# the gate has held mallory's calls
	wait_until($node, $DB,
		"SELECT count(*) > 0 FROM retries.calls c JOIN retries.attempts a ON a.call_id = c.id"
		  . " WHERE c.fn = 'shared.work(int)'::regprocedure",
		't', 'e: mallory\'s calls have begun to run');
	my $id = sql('alice', "SELECT retries.call('shared.work(int)', '[500]')");
	wait_until($node, $DB, "SELECT state FROM retries.calls WHERE id = $id",
		'succeeded', 'e: alice\'s call runs');
	# counted in calls, not seconds: how many of mallory's started between
	# alice's call and its start (at 2 a second, the 6 s this once allowed
	# were 12)
	my $ahead = $node->safe_psql($DB, started_between('shared.work(int)', 'mallory', $id));
	cmp_ok($ahead, '<=', 10,
		"e: within a few of the rate's windows: $ahead of mallory's calls started"
		  . " before it, not her 100");
	sql('mallory',
		"SELECT count(retries.cancel(id)) FROM retries.calls"
		  . " WHERE fn = 'shared.work(int)'::regprocedure AND state = 'scheduled'");

}

###########################################################################
# f. arguments
###########################################################################

if (section('f'))
{
	my $err = fails_with('alice',
		"SELECT retries.call('alice.work(int)', jsonb_build_array(repeat('x', 2000000)))",
		'54000', 'f: arguments over retries.max_args_size');
	like($err, qr/retries\.max_args_size/, 'f: the error names the setting');

	# stored under a raised limit: the worker holds them one at a time
	sql('alice', q{
CREATE TABLE alice.sizes (n int);
CREATE FUNCTION alice.big(s text) RETURNS void LANGUAGE sql
	AS $$ INSERT INTO alice.sizes VALUES (length(s)) $$;
SELECT retries.annotate('alice.big(text)', '3 10ms');
});
	pause_execution('f: execution paused');
	# (of priority 1: the calls of a priority above 0 are claimed all at
	# once, and with them, before 1.3, their arguments)
	$node->safe_psql($DB,
		"SET retries.max_args_size = '64MB'; SET ROLE alice;"
		  . " SELECT count(retries.call('alice.big(text)', jsonb_build_array(repeat('y', 16000000)),"
		  . "  priority => 1))"
		  . " FROM generate_series(1, 12)");
	my $pid = $node->safe_psql($DB, 'SELECT pid FROM retries.workers');
	# AddressSanitizer keeps freed memory for a while (scripts/sanitize)
	my $sanitized = slurp_file("/proc/$pid/maps") =~ /libasan/;
	resume_execution();
	my $peak = 0;
	my $until = time() + $RetriesTest::DEADLINE;
	my $poll = poller($node, $DB);
	while (time() < $until)
	{
		for my $p (split /\n/, ($poll->('SELECT pid FROM retries.workers'))[0] // '')
		{
			open(my $fh, '<', "/proc/$p/status") or next;
			while (<$fh>)
			{
				$peak = $1 if /^RssAnon:\s+(\d+) kB/ && $1 > $peak;
			}
			close $fh;
		}
		last if (($poll->('SET ROLE alice; SELECT count(*) FROM alice.sizes; RESET ROLE'))[0] // '') eq '12';
		usleep(20_000);    # poll
	}
	$poll->();
	is(sql('alice', q{SELECT count(*) || ' ' || min(n) FROM alice.sizes}),
		'12 16000000', 'f: the 12 calls of 16 MB each ran');
	# a worker whose memory has grown past retries.max_worker_memory after
	# a batch is replaced by a fresh one, and the calls go on
	my $offset = -s $node->logfile;
	# (the worker, not an extra one that long batches may have started)
	my $base = "SELECT pid FROM pg_stat_activity"
	  . " WHERE backend_type = 'retries worker' AND datname = '$DB'";
	my $before = $node->safe_psql($DB, $base);
	$node->safe_psql($DB,
		"ALTER SYSTEM SET retries.max_worker_memory = '1kB'; SELECT pg_reload_conf()");
	my ($m1, $m2) = split /,/, alice_calls(60, 61);
	wait_until($node, $DB,
		"SELECT count(*) FROM retries.calls WHERE id IN ($m1, $m2) AND state = 'succeeded'",
		'2', 'f: calls run under a tiny retries.max_worker_memory');
	$node->safe_psql($DB,
		'ALTER SYSTEM RESET retries.max_worker_memory; SELECT pg_reload_conf()');
	ok(slurp_file($node->logfile, $offset) =~
		  /the worker exits to be replaced: its memory has grown to \d+ kB, past retries.max_worker_memory \(1 kB\)/,
		'f: the worker exits to be replaced, and says why');
	wait_until($node, $DB,
		"SELECT count(*) FROM ($base) w WHERE pid <> $before", '1',
		'f: and a fresh worker has taken its place');

	SKIP:
	{
		skip 'the server runs under AddressSanitizer', 1 if $sanitized;
		cmp_ok($peak, '<', 120 * 1024,
			"f: the worker's anonymous memory stayed under 120 MB,"
			  . " not 12 x 16 MB (peak $peak kB)");
	}
}

###########################################################################
# g. the rest
###########################################################################

if (section('g'))
{
	# the random seed
	$node->safe_psql($DB, 'CREATE TABLE public.draws (who text, r float8)');
	$node->safe_psql($DB, 'GRANT INSERT ON public.draws TO PUBLIC');
	my $m = sql('mallory', q{
CREATE FUNCTION mallory.seed() RETURNS void LANGUAGE sql AS $$ SELECT setseed(0.42) $$;
SELECT retries.annotate('mallory.seed()', '3 10ms');
SELECT retries.call('mallory.seed()');
});
	wait_until($node, $DB, "SELECT state FROM retries.calls WHERE id = $m",
		'succeeded', 'g: mallory sets the seed');
	my $a = sql('alice', q{
CREATE FUNCTION alice.draw() RETURNS void LANGUAGE sql
	AS $$ INSERT INTO public.draws VALUES ('alice', random()) $$;
SELECT retries.annotate('alice.draw()', '3 10ms');
SELECT retries.call('alice.draw()');
});
	wait_until($node, $DB, "SELECT state FROM retries.calls WHERE id = $a",
		'succeeded', 'g: alice draws');
	my $seeded = $node->safe_psql($DB, 'SELECT setseed(0.42); SELECT random()');
	isnt($node->safe_psql($DB, "SELECT r FROM public.draws WHERE who = 'alice'"),
		(split /\n/, $seeded)[-1], 'g: alice\'s draw is not the one the seed makes');

	# login rights at each attempt
	$node->safe_psql($DB, q{
CREATE ROLE carol LOGIN;
GRANT USAGE ON SCHEMA alice TO carol;
GRANT INSERT ON alice.log TO carol;
GRANT USAGE ON SEQUENCE alice.log_id_seq TO carol;
});
	my @cases = (
		[ 'VALID UNTIL in the past', "ALTER ROLE carol VALID UNTIL '2000-01-01'",
			"ALTER ROLE carol VALID UNTIL 'infinity'" ],
		[ 'no CONNECT on the database',
			"REVOKE CONNECT ON DATABASE $DB FROM PUBLIC",
			"GRANT CONNECT ON DATABASE $DB TO PUBLIC" ],
		[ 'NOLOGIN', 'ALTER ROLE carol NOLOGIN', 'ALTER ROLE carol LOGIN' ]);
	for my $case (@cases)
	{
		my ($what, $take, $give) = @$case;
		pause_execution("g: execution paused ($what)");
		my $id = sql('carol', "SELECT retries.call('alice.work(int)', '[77]')");
		$node->safe_psql($DB, $take);
		resume_execution();
		wait_until($node, $DB, "SELECT state FROM retries.calls WHERE id = $id",
			'failed', "g: $what: carol's call fails");
		is(history($id), '1:failed 42501', "g: $what: with 42501, not retried");
		$node->safe_psql($DB, $give);
	}

	# dropping a function names no other role's schedule
	sql('mallory', q{
GRANT USAGE ON SCHEMA mallory TO PUBLIC;
CREATE FUNCTION mallory.tick() RETURNS void LANGUAGE sql AS $$ SELECT $$;
SELECT retries.annotate('mallory.tick()', '3 10ms');
SELECT retries.schedule('mallory-own-schedule', 'mallory.tick()', '1h');
});
	sql('alice',
		"SELECT retries.schedule('alice-payroll-run-for-ACME', 'mallory.tick()', '1h')");
	my ($ret, $out, $err) = $node->psql($DB,
		'SET ROLE mallory; DROP FUNCTION mallory.tick()');
	is($ret, 0, 'g: mallory drops her function');
	unlike($err, qr/ACME/, 'g: no NOTICE names alice\'s schedule');
	like($err, qr/mallory-own-schedule/, 'g: her own schedule is named');

	# the workers of another database
	$node->safe_psql($DB, 'CREATE DATABASE other');
	$node->safe_psql('other', 'CREATE EXTENSION retries');
	wait_until($node, $DB, workers_query('other'), '1', 'g: a worker in another database');
	is(sql('mallory', "SELECT count(*) FROM retries.workers WHERE database <> '$DB'"),
		'0', 'g: mallory sees no worker of another database');
	$node->safe_psql($DB, 'CREATE ROLE watcher LOGIN IN ROLE pg_read_all_stats');
	is(sql('watcher', "SELECT count(*) FROM retries.workers WHERE database = 'other'"),
		'1', 'g: a member of pg_read_all_stats does');
}

###########################################################################
# h. one role's long calls do not take the last free worker
###########################################################################

if (section('h'))
{
	# (calls wait at gates while the test looks: not under the 3 s cap,
	# as in d)
	$node->safe_psql($DB, q{
ALTER SYSTEM SET retries.max_workers = 2;
SELECT pg_reload_conf();
CREATE ROLE zed LOGIN;
GRANT USAGE ON SCHEMA alice TO zed;
GRANT INSERT ON alice.log TO zed;
GRANT USAGE ON SEQUENCE alice.log_id_seq TO zed;
});
	wait_until($node, 'postgres', workers_query($DB), '2', 'h: two workers');
	reload_setting($node, $DB, 'retries.max_attempt_time', '1h', '1h',
		'h: (setup) no cap on the gated calls while the test looks');
	# mallory.hog() runs until the test opens gate 32
	sql('mallory', q{
CREATE FUNCTION mallory.hog() RETURNS void LANGUAGE sql AS $$ SELECT } . gate_sql(32) . q{ $$;
SELECT retries.annotate('mallory.hog()', '1 10ms');
});
	my $gate = close_gate($node, $DB, 32);
	my $l1 = sql('mallory', "SELECT retries.call('mallory.hog()')");
	wait_at_gate($node, $DB, 32, 1, 'h: a long call of mallory runs');
	# her second one is due before zed's, and she comes first in turn
	my ($l2, $q) = mallory_first('mallory.hog()', 'zed', 900);
	# (had the other worker taken her second one, it would wait at the gate
	# too, and zed's would not run)
	wait_until($node, $DB, "SELECT state FROM retries.calls WHERE id = $q",
		'succeeded', 'h: zed\'s call runs while her first one does');
	open_gate($gate);
	wait_until($node, $DB, "SELECT state FROM retries.calls WHERE id = $l2",
		'succeeded', 'h: and her second one runs');
	is( $node->safe_psql($DB,
			"SELECT (SELECT finished_at FROM retries.attempts WHERE call_id = $q)"
			  . " < (SELECT started_at FROM retries.attempts WHERE call_id = $l2)"),
		't', 'h: after zed\'s, although it was due first');

	# fair within a limit_key too (found by the hostile review of 1.3):
	# with two workers and one attempt of a key at a time, mallory queues
	# 30 calls under alice's key; alice's call of that key waits for a
	# turn, not for the 30
	$node->safe_psql($DB, q{
CREATE SCHEMA IF NOT EXISTS keyed;
GRANT USAGE ON SCHEMA keyed TO PUBLIC;
CREATE FUNCTION keyed.slow(n int) RETURNS void LANGUAGE sql AS $$ SELECT } . gate_sql(33) . q{ $$;
SELECT retries.annotate('keyed.slow(int)', '3 10ms', max_running_per_key => 1);
});
	# the first of mallory's waits at a gate until zed's call waits too
	$gate = close_gate($node, $DB, 33);
	sql('mallory',
		"SELECT count(retries.call('keyed.slow(int)', jsonb_build_array(g),"
		  . " limit_key => 'alice-customer-7')) FROM generate_series(1, 30) g");
	wait_at_gate($node, $DB, 33, 1, 'h: a call of mallory\'s of the key runs');
	wait_until($node, $DB,
		"SELECT count(*) FROM retries.calls WHERE fn = 'keyed.slow(int)'::regprocedure"
		  . " AND state = 'scheduled' AND id IN (SELECT id FROM retries.call_data WHERE held)",
		'29', 'h: the key\'s limit holds the rest of mallory\'s calls');
	my $k = sql('zed',
		"SELECT retries.call('keyed.slow(int)', '[700]', limit_key => 'alice-customer-7')");
	wait_until($node, $DB, "SELECT held FROM retries.call_data WHERE id = $k",
		't', 'h: and another role\'s call of the key');
	open_gate($gate);
	wait_until($node, $DB, "SELECT state FROM retries.calls WHERE id = $k",
		'succeeded', 'h: another role\'s call of the key runs');
	my $ahead = $node->safe_psql($DB, started_between('keyed.slow(int)', 'mallory', $k));
	cmp_ok($ahead, '<=', 3,
		"h: within a few of mallory's calls of the key ($ahead), not after her 30");
	sql('mallory',
		"SELECT count(retries.cancel(id)) FROM retries.calls"
		  . " WHERE fn = 'keyed.slow(int)'::regprocedure AND state = 'scheduled'");
	$node->safe_psql($DB,
		'ALTER SYSTEM RESET retries.max_workers; SELECT pg_reload_conf()');
	reload_setting($node, $DB, 'retries.max_attempt_time', undef, '3s',
		'h: (setup) the 3 s cap again');
}

###########################################################################
# i. objects left in the worker's temp schema, named by its own name
###########################################################################

if (section('i'))
{
	# (found by the hostile review of 1.3: PostgreSQL notes the use of the
	# temp schema only when it is called pg_temp; a domain named text left
	# in pg_temp_N was found first by every later call, of every role, and
	# its CHECK ran mallory's code as them, a superuser included)
	sql('alice', q{
CREATE TABLE alice.secret (s text);
INSERT INTO alice.secret VALUES ('alice-top-secret');
CREATE FUNCTION alice.typed(n int) RETURNS void LANGUAGE plpgsql AS $$
DECLARE msg text := 'n=' || n;
BEGIN INSERT INTO alice.log (n) VALUES (n); END $$;
SELECT retries.annotate('alice.typed(int)', '3 10ms');
});
	my $plant = sql('mallory', q{
CREATE TABLE mallory.loot (who text, what text);
GRANT INSERT ON mallory.loot TO PUBLIC;
GRANT USAGE ON SCHEMA mallory TO PUBLIC;
CREATE FUNCTION mallory.evil(v text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO mallory.loot VALUES (current_user, v);
	BEGIN
		INSERT INTO mallory.loot SELECT current_user, s FROM alice.secret;
	EXCEPTION WHEN others THEN NULL;
	END;
	RETURN true;
EXCEPTION WHEN others THEN RETURN true;
END $$;
CREATE FUNCTION mallory.plant() RETURNS text LANGUAGE plpgsql AS $$
DECLARE ns oid := pg_my_temp_schema();
BEGIN
	IF ns = 0 THEN
		CREATE TEMP TABLE t (x int);
		RETURN 'made';
	END IF;
	PERFORM set_config('search_path', ns::regnamespace::text, true);
	EXECUTE 'CREATE DOMAIN text AS pg_catalog.text CHECK (mallory.evil(VALUE))';
	RETURN 'planted';
END $$;
SELECT retries.annotate('mallory.plant()', '1 10ms');
SELECT retries.call('mallory.plant()');
});
	wait_until($node, $DB, "SELECT state FROM retries.calls WHERE id = $plant",
		'succeeded', 'i: mallory makes the worker\'s temp schema');
	$plant = sql('mallory', "SELECT retries.call('mallory.plant()')");
	wait_until($node, $DB, "SELECT state || ' ' || result FROM retries.calls WHERE id = $plant",
		'succeeded "planted"', 'i: and plants a domain named text in it, by its name');
	is( $node->safe_psql($DB,
			"SELECT count(*) FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace"
			  . " WHERE n.nspname LIKE 'pg_temp%'"),
		'0', 'i: which is dropped at the end of her attempt');
	my $a = sql('alice', "SELECT retries.call('alice.typed(int)', '[7]')");
	wait_until($node, $DB, "SELECT state FROM retries.calls WHERE id = $a",
		'succeeded', 'i: alice\'s call runs');
	is(sql('mallory', 'SELECT count(*) FROM mallory.loot'), '0',
		'i: and mallory\'s code never ran in it');
}

###########################################################################
# j. invalidations while retries.call() opens call_data's indexes
###########################################################################

if (section('j'))
{
	# (found by the hostile review of call_data kept open by retries.call():
	# a relcache invalidation that arrived while it opened the indexes, as
	# any session's DDL sends, ran its callback on half-open state, and
	# crashed the backend, and so the server, within a second)
	sql('mallory', q{
CREATE FUNCTION mallory.noop(n int) RETURNS void LANGUAGE sql AS 'SELECT 1';
SELECT retries.annotate('mallory.noop(int)');
});
	my $count = "SELECT count(*) FROM retries.call_data WHERE scheduled_by = 'mallory'::regrole";
	my $before = $node->safe_psql($DB, $count);
	$node->pgbench(
		"--no-vacuum --client=4 --time=3 --username=mallory $DB",
		0,
		[qr/number of failed transactions: 0|processed: [1-9]/],
		[qr/^$/],
		'j: calls made beside other sessions\' DDL, no error, no warning',
		{
			'020_j_call' =>
			  q{SELECT retries.call('mallory.noop(int)', '[1]', now() + interval '1 day');},
			'020_j_ddl' => qq{CREATE TEMP TABLE t (a int);\nDROP TABLE t;\n},
		});
	cmp_ok($node->safe_psql($DB, $count), '>', $before, 'j: and the calls were made');
}

###########################################################################
# k. another role's code does not rerun the caller's other calls
###########################################################################

if (section('k'))
{
	# mallory's SECURITY DEFINER api4(int), which alice may call, traps its
	# cancel past the 1 s that mallory chose as its timeout, and the worker
	# exits (found by the hostile review of 1.7: alice's calls that shared
	# its batch were rolled back and run again, 9 of 10 twice).  alice makes
	# 5 calls of her work(), one of api4(), then 5 more, all due at once;
	# api4() runs in a batch of its own, and each of hers exactly once.
	my $offset = -s $node->logfile;
	sql('mallory', q{
GRANT USAGE ON SCHEMA mallory TO alice;
CREATE FUNCTION mallory.api4(n int) RETURNS int LANGUAGE sql SECURITY DEFINER
	AS $$ SELECT mallory.trap_cancels() $$;
SELECT retries.annotate('mallory.api4(int)', '1 1h', timeout => '1 s');
});
	my $seq_before = sql('alice',
		'SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM alice.log_id_seq');
	my (undef, $api4) = split /\n/, sql('alice', q{
BEGIN;
SELECT count(retries.call('alice.work(int)', jsonb_build_array(g), now()))
  FROM generate_series(101, 105) g;
SELECT retries.call('mallory.api4(int)', '[4]', now());
SELECT count(retries.call('alice.work(int)', jsonb_build_array(g), now()))
  FROM generate_series(106, 110) g;
COMMIT;
});
	wait_until($node, $DB, "SELECT count(*) FROM retries.attempts WHERE call_id = $api4",
		'1', 'k: mallory\'s function, which alice called, has its attempt recorded');
	is(history($api4), '1:interrupted 57P01',
		'k: interrupted: it ended the worker');
	# it ran its 1 s and the 2 s of grace after its cancel: its attempt
	# keeps its real start, not the moment it was charged (1.7: 0 s)
	is( $node->safe_psql($DB,
			"SELECT finished_at - started_at >= interval '3 s' FROM retries.attempts"
			  . " WHERE call_id = $api4"),
		't', 'k: the interrupted attempt lasted from its real start');
	wait_until($node, $DB,
		"SELECT count(*) FILTER (WHERE state = 'succeeded') || ' ' || sum(attempts)"
		  . " FROM retries.calls WHERE fn = 'alice.work(int)'::regprocedure"
		  . " AND (args->>0)::int BETWEEN 101 AND 110",
		'10 10', 'k: alice\'s 10 calls beside it succeed, in one attempt each');
	is(sql('alice', 'SELECT last_value FROM alice.log_id_seq'),
		$seq_before + 10, 'k: and her function ran exactly once per call');
	ok(scalar(worker_exits($offset)) > 0, 'k: (the worker did exit)');
	sql('alice', "SELECT retries.cancel($api4)");
	sql('mallory', 'REVOKE USAGE ON SCHEMA mallory FROM alice');
}

###########################################################################
# l. a stream of another role's due calls and a priority below 0
###########################################################################

if (section('l'))
{
	sql('mallory', q{
CREATE FUNCTION mallory.again(n int) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	RAISE EXCEPTION 'again' USING ERRCODE = 'RT001';
END $$;
SELECT retries.annotate('mallory.again(int)', '10ms 10ms');
SELECT count(retries.call('mallory.again(int)', jsonb_build_array(g)))
  FROM generate_series(1, 5000) g;
});
	wait_until($node, $DB,
		"SELECT count(*) FROM retries.calls WHERE fn = 'mallory.again(int)'::regprocedure"
		  . " AND attempts >= 2",
		'5000', 'l: mallory\'s calls fail and are due again, on and on');
	my $low = sql('alice', "SELECT retries.call('alice.work(int)', '[301]', priority => -1)");
	wait_until($node, $DB, "SELECT state FROM retries.calls WHERE id = $low",
		'succeeded', 'l: alice\'s call of priority -1 runs beside them');
	is( $node->safe_psql($DB,
			"SELECT count(*) FROM retries.calls WHERE fn = 'mallory.again(int)'::regprocedure"
			  . " AND state IN ('succeeded', 'failed')"),
		'0', 'l: (while none of mallory\'s calls had ended: all were to run again)');
	sql('mallory', "SELECT count(retries.cancel(id)) FROM retries.calls"
		  . " WHERE fn = 'mallory.again(int)'::regprocedure AND state = 'scheduled'");
}

###########################################################################
# m. one role's long calls and extra workers
###########################################################################

if (section('m'))
{
	# one extra at most: were it to take mallory's call, alice's would
	# wait; and no cap on attempts that would end mallory's calls first
	$node->safe_psql($DB, q{
ALTER SYSTEM SET retries.max_workers = 2;
ALTER SYSTEM SET retries.max_extra_workers = 1;
ALTER SYSTEM SET retries.max_attempt_time = '1h';
ALTER SYSTEM SET retries.max_runners = 0;
SELECT pg_reload_conf();
});
	wait_until($node, 'postgres', workers_query($DB), '2', 'm: two workers');
	sql('mallory', q{
CREATE FUNCTION mallory.hold() RETURNS void LANGUAGE sql AS $$ SELECT } . gate_sql(34) . q{ $$;
SELECT retries.annotate('mallory.hold()', '1 10ms');
});
	my $gate = close_gate($node, $DB, 34);
	sql('mallory', "SELECT retries.call('mallory.hold()')");
	wait_at_gate($node, $DB, 34, 1, 'm: a long call of mallory runs');
	sql('mallory', "SELECT retries.call('mallory.hold()')");
	wait_at_gate($node, $DB, 34, 2, 'm: and another, in the other worker');
	my ($next, $a) = mallory_first('mallory.hold()', 'alice', 950);
	wait_until($node, $DB, "SELECT state FROM retries.calls WHERE id = $a",
		'succeeded', 'm: alice\'s call runs while mallory\'s hold both workers');
	is( $node->safe_psql($DB,
			"SELECT (SELECT attempts FROM retries.calls WHERE id = $next) || ' ' || ("
			  . gate_waiters(34) . ")"),
		'0 2', 'm: in an extra worker, which left mallory\'s next call alone');
	my $extras = "SELECT count(*) FROM pg_stat_activity"
	  . " WHERE backend_type = 'retries extra worker' AND datname = '$DB'";
	is($node->safe_psql($DB, $extras), '1', 'm: (one extra worker)');

	# commands, with no runner places (retries.max_runners 0: t/025_commands.pl
	# h tests those): mallory's hold the one place for a runner of the
	# database's own workers, at gate 35
	my $gate35 = close_gate($node, $DB, 35);
	my $hold35 = 'SELECT ' . gate_sql(35);
	$hold35 =~ s/'/''/g;
	sql('mallory', "SELECT retries.run_command('$hold35', '1 10ms')");
	open_gate($gate);
	wait_until($node, $DB, "SELECT state FROM retries.calls WHERE id = $next",
		'succeeded', 'm: mallory\'s calls run once the gate opens');
	wait_at_gate($node, $DB, 35, 1, 'm: a command of mallory runs');
	my $m2 = sql('mallory', "SELECT retries.run_command('$hold35', '1 10ms')");
	my $c = sql('alice', "SELECT retries.run_command('SELECT 1', '1 10ms')");
	wait_until($node, $DB, "SELECT state FROM retries.calls WHERE id = $c",
		'succeeded', 'm: alice\'s command runs while mallory\'s holds the place for a runner');
	is( $node->safe_psql($DB,
			"SELECT attempts || ' ' || (" . gate_waiters(35) . ") FROM retries.calls WHERE id = $m2"),
		'0 1', 'm: mallory\'s second command still waits');
	open_gate($gate35);
	wait_until($node, $DB, "SELECT state FROM retries.calls WHERE id = $m2",
		'succeeded', 'm: and runs once the first ends');
	wait_until($node, 'postgres', $extras, '0',
		'm: the extra worker stops once the workers are free');
	$node->safe_psql($DB, q{
ALTER SYSTEM RESET retries.max_workers;
ALTER SYSTEM RESET retries.max_extra_workers;
ALTER SYSTEM RESET retries.max_attempt_time;
ALTER SYSTEM RESET retries.max_runners;
SELECT pg_reload_conf();
});
}

###########################################################################
# n. a parallel query that takes every free slot
###########################################################################

if (section('n'))
{
	my $offset = -s $node->logfile;
	sql('mallory', q{
CREATE TABLE mallory.big AS SELECT g AS id FROM generate_series(1, 100000) g;
ALTER TABLE mallory.big SET (parallel_workers = 64);
CREATE FUNCTION mallory.slow(id int) RETURNS boolean LANGUAGE sql PARALLEL SAFE
	AS $$ SELECT pg_sleep(1) IS NULL $$;  -- not a wait: the test cancels it
});
	my ($query, $pid) = start_parallel_hog($node, $DB, 'mallory',
		'n: mallory\'s parallel query takes every free slot');
	my $c = sql('alice', "SELECT retries.run_command('SELECT 1', '1 10ms')");
	wait_until($node, $DB, "SELECT state FROM retries.calls WHERE id = $c",
		'succeeded', 'n: alice\'s command runs meanwhile');
	ok( $node->wait_for_log(
			qr/background worker "retries reserve(?: \d+)?" \(PID \d+\) exited with exit code 1/, $offset),
		'n: in a reserved worker, which then starts again in its slot');
	$node->safe_psql($DB, "SELECT pg_cancel_backend($pid)");
	$query->quit;
}

no_crash($node, 0, 'no crash in the server log');
$node->stop;
done_testing();
