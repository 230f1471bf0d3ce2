# pg_partman's real maintenance (Debian's postgresql-15-partman, 4.7.2),
# run by retries: the partitions it makes appear, and a failure in the
# middle of a run is retried.
#
#   a. pg_partman in schema partman; two tables partitioned by day
#      (app.events, app.metrics), owned by a role that is not a superuser
#      (maint, with the grants of pg_partman's README) and registered with
#      create_parent() with a premake of 1, then a larger premake: the
#      command schedule 'CALL partman.run_maintenance_proc()' of maint,
#      every second, makes the missing partitions of both, as maint; its
#      calls succeed in one attempt each, recorded in retries.attempts;
#   b. run_maintenance_proc() commits after each table.  The second table's
#      transaction fails at that COMMIT (a deferred constraint trigger
#      raises RT001): the attempt is retried, 'retry RT001' then
#      'succeeded'; the first table's partitions, committed by the first
#      attempt, stay (at least once), and the second attempt makes the
#      second table's.  The retry also shows that the first attempt's
#      session advisory lock (pg_try_advisory_lock in run_maintenance_proc,
#      never released on error) went with its process: held, the retry
#      would have returned at once, "succeeded" having made nothing;
#   c. the same failure raised inside run_maintenance() (an event trigger
#      on the CREATE TABLE of a partition of the second table, 55P03):
#      pg_partman 4.7.2's run_maintenance() catches every error and raises
#      it again with RAISE EXCEPTION, which makes its SQLSTATE P0001 (the
#      message keeps the original text).  A lock timeout or deadlock in
#      pg_partman's maintenance therefore reaches retries as P0001, not
#      55P03 or 40P01: the schedule lists P0001 in retry_on (maintenance
#      is harmless to run again: it makes only the partitions missing);
#   d. the annotated-procedure route: run_maintenance_proc(integer,
#      boolean, boolean) annotated by its owner (the superuser that made
#      the extension), called by maint with retries.call(), named
#      arguments given (args keeps them in canonical form, as text): it
#      runs as a top-level CALL in a process of its own, the same mid-run
#      failure is retried under the procedure's policy, and the partitions
#      are made.
#
# Which of the two tables pg_partman maintains first is its business (its
# loop over part_config has no ORDER BY): the faults strike the second
# table that the attempt reaches, whichever it is, and an event trigger
# records each partition made with the call and attempt that made it.
# Skipped when pg_partman is not installed (Debian's postgresql-15-partman
# provides it), or is not 4.x (5.x changed create_parent()'s arguments).

use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RetriesTest;
use Test::More;

my $node = retries_node('partman');
my $control = $node->config_data('--sharedir') . '/extension/pg_partman.control';
plan skip_all =>
  "pg_partman is not installed ($control is missing; Debian's postgresql-15-partman provides it)"
  unless -e $control;
my ($partman_version) = slurp_file($control) =~ /^\s*default_version\s*=\s*'([^']*)'/m;
plan skip_all => "this test drives pg_partman 4.x (create_parent() of type 'native', "
  . "run_maintenance_proc()); $control is version " . ($partman_version // '(none)')
  unless ($partman_version // '') =~ /^4\./;
$node->start;
my $log_at = -s $node->logfile;

# the superuser: the extensions, the role and its grants (those of
# pg_partman's README; TEMPORARY on the database is PUBLIC's already)
$node->safe_psql('postgres', q{
CREATE ROLE maint LOGIN;
CREATE SCHEMA partman;
CREATE EXTENSION pg_partman SCHEMA partman;
CREATE EXTENSION retries;
GRANT ALL ON SCHEMA partman TO maint;
GRANT ALL ON ALL TABLES IN SCHEMA partman TO maint;
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA partman TO maint;
GRANT EXECUTE ON ALL PROCEDURES IN SCHEMA partman TO maint;
CREATE SCHEMA app AUTHORIZATION maint;
});

# maint: the partitioned tables, registered with a premake of 1, a row of
# data in each (pg_partman makes nothing for a set without data unless
# infinite_time_partitions), in one transaction, so that create_parent()'s
# CURRENT_TIMESTAMP and the data's now() are one instant, even at midnight
# (maintenance counts premake from the data, whatever the day is when it
# runs); the record of partitions made, and the faults
$node->safe_psql('postgres', q{
SET ROLE maint;
BEGIN;
CREATE TABLE app.events (at timestamptz NOT NULL, what text) PARTITION BY RANGE (at);
CREATE TABLE app.metrics (at timestamptz NOT NULL, value float8) PARTITION BY RANGE (at);
SELECT partman.create_parent('app.events', 'at', 'native', 'daily', p_premake := 1);
SELECT partman.create_parent('app.metrics', 'at', 'native', 'daily', p_premake := 1);
INSERT INTO app.events VALUES (now(), 'first');
INSERT INTO app.metrics VALUES (now(), 1.0);
COMMIT;

-- each partition made by a call: its parent, the call and the attempt
CREATE TABLE app.made (parent text, child text, call bigint, attempt int,
					   xid xid8 DEFAULT pg_current_xact_id());
-- an armed fault strikes in attempt 1, at the second table it reaches:
-- 'commit' at the COMMIT after that table, 'inside' in its CREATE TABLE
CREATE TABLE app.armed (mode text PRIMARY KEY CHECK (mode IN ('commit', 'inside')));

-- whether this attempt already committed partitions of another table
CREATE FUNCTION app.second_table(p text) RETURNS boolean LANGUAGE sql STABLE AS $$
	SELECT retries.current_attempt() = 1
	   AND EXISTS (SELECT FROM app.made m
				   WHERE m.call = retries.current_call()
					 AND m.attempt = 1
					 AND m.parent <> p
					 AND m.xid <> pg_current_xact_id())
$$;

CREATE FUNCTION app.fail_at_commit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF EXISTS (SELECT FROM app.armed WHERE mode = 'commit') AND app.second_table(NEW.parent) THEN
		RAISE EXCEPTION 'fault at the commit of %', NEW.parent USING ERRCODE = 'RT001';
	END IF;
	RETURN NULL;
END $$;
CREATE CONSTRAINT TRIGGER fail_at_commit AFTER INSERT ON app.made
	DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION app.fail_at_commit();
});

# the superuser (only one may make an event trigger): the record of each
# partition made by a call, run as the role whose CREATE TABLE fires it
$node->safe_psql('postgres', q{
CREATE FUNCTION app.record_partition() RETURNS event_trigger LANGUAGE plpgsql AS $$
DECLARE
	r record;
BEGIN
	FOR r IN
		SELECT p.parent_table, c.object_identity
		  FROM pg_event_trigger_ddl_commands() c
		  JOIN partman.part_config p ON c.object_identity LIKE p.parent_table || '\_p%'
		 WHERE c.object_type = 'table' AND retries.current_call() IS NOT NULL
	LOOP
		IF EXISTS (SELECT FROM app.armed WHERE mode = 'inside')
		   AND app.second_table(r.parent_table) THEN
			RAISE EXCEPTION 'fault inside the maintenance of %', r.parent_table
				USING ERRCODE = '55P03';
		END IF;
		INSERT INTO app.made (parent, child, call, attempt)
		VALUES (r.parent_table, r.object_identity,
				retries.current_call(), retries.current_attempt());
	END LOOP;
END $$;
CREATE EVENT TRIGGER record_partition ON ddl_command_end WHEN TAG IN ('CREATE TABLE')
	EXECUTE FUNCTION app.record_partition();
});

# the number of partitions of each table (the default one left out), as
# 'events|metrics'
my $partitions = q{SELECT (SELECT count(*) FROM partman.show_partitions('app.events')) || '|'
	|| (SELECT count(*) FROM partman.show_partitions('app.metrics'))};

# the partitions premake asks for exist: through the day of the data plus
# premake, for both tables
sub premade
{
	my ($premake) = @_;
	return qq{SELECT bool_and(table_exists) FROM (
		SELECT (partman.show_partition_name('app.' || t,
				((SELECT max(at) FROM app.events) + interval '$premake days')::text)).table_exists
		  FROM unnest(ARRAY['events', 'metrics']) t) s};
}

is($node->safe_psql('postgres', $partitions), '3|3',
	'create_parent() with a premake of 1: yesterday, today and tomorrow');

###########################################################################
# a. the scheduled maintenance makes the partitions
###########################################################################

$node->safe_psql('postgres', q{
UPDATE partman.part_config SET premake = 3;
SET ROLE maint;
SELECT retries.schedule_command('partman', 'CALL partman.run_maintenance_proc()', '1s',
								policy => '3 100ms', retry_on => '{P0001}');
});
wait_until($node, 'postgres', $partitions, '5|5',
	'a. the maintenance scheduled as a command makes the partitions of premake 3');
is($node->safe_psql('postgres', premade(3)), 't', '... through the day of the data + 3');
is($node->safe_psql('postgres', q{
	SELECT count(*) FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
	 WHERE i.inhparent IN ('app.events'::regclass, 'app.metrics'::regclass)
	   AND c.relowner <> 'maint'::regrole}),
	'0', '... owned by maint, as whom the command ran');
is($node->safe_psql('postgres', q{
	SELECT (SELECT string_agg(parent || ':' || n, ',' ORDER BY parent)
			  FROM (SELECT parent, count(*) AS n FROM app.made GROUP BY 1) s)
		   || ', ' || (SELECT count(DISTINCT call) FROM app.made) || ' call'}),
	'app.events:2,app.metrics:2, 1 call', '... two for each table, by one call');

# the first maintenance call, and the later ones (nothing to do), succeed
wait_until($node, 'postgres',
	q{SELECT firings >= 2 AND last_state = 'succeeded' FROM retries.schedules WHERE name = 'partman'},
	't', '... and the schedule fires again');
is($node->safe_psql('postgres', q{
	SELECT name, owner, command, policy, every FROM retries.schedules}),
	'partman|maint|CALL partman.run_maintenance_proc()|3 100ms|1s',
	'retries.schedules shows the command and its policy');
is($node->safe_psql('postgres', q{
	SELECT count(*) > 0, bool_and(c.state = 'succeeded'), bool_and(c.attempts = 1),
		   bool_and(c.command = 'CALL partman.run_maintenance_proc()'),
		   bool_and(c.scheduled_by = 'maint'::regrole),
		   bool_and((SELECT string_agg(a.outcome::text, ',') FROM retries.attempts a
					 WHERE a.call_id = c.id) = 'succeeded')
	  FROM retries.calls c WHERE c.schedule = 'partman' AND c.state NOT IN ('scheduled', 'running')}),
	't|t|t|t|t|t', 'its finished calls succeeded, one attempt each, recorded in retries.attempts');

# arm(MODE, PREMAKE): with the schedule paused and idle (a call already
# under way would see the new premake only for the table it reaches after
# it), arm the fault MODE and raise premake, then resume the schedule
sub arm
{
	my ($mode, $premake) = @_;

	$node->safe_psql('postgres', "SET ROLE maint; SELECT retries.pause_schedule('partman')");
	wait_until($node, 'postgres', q{
		SELECT count(*) FROM retries.calls
		 WHERE schedule = 'partman' AND state IN ('scheduled', 'running')},
		'0', "the schedule paused, its last call done (before premake $premake)");
	$node->safe_psql('postgres', qq{
BEGIN;
DELETE FROM app.armed;
INSERT INTO app.armed VALUES ('$mode');
UPDATE partman.part_config SET premake = $premake;
COMMIT;
SET ROLE maint;
SELECT retries.resume_schedule('partman');
});
	return;
}

# the call of the schedule whose attempt 1 had SQLSTATE CODE
sub faulted_call
{
	my ($code) = @_;
	return qq{SELECT c.id FROM retries.calls c JOIN retries.attempts a ON a.call_id = c.id
		WHERE c.schedule = 'partman' AND a.attempt = 1 AND a.sqlstate = '$code'};
}

# the partitions that attempt 1 of CALL made still exist
sub first_attempt_kept
{
	my ($call) = @_;
	return $node->safe_psql('postgres', qq{
		SELECT count(*), bool_and(to_regclass(child) IS NOT NULL)
		  FROM app.made WHERE call = $call AND attempt = 1});
}

# what each attempt of CALL made: 'attempt:table:partitions' in order
sub made_by
{
	my ($call) = @_;
	return $node->safe_psql('postgres', qq{
		SELECT string_agg(attempt || ':' || parent || ':' || n, ',' ORDER BY attempt, parent)
		  FROM (SELECT attempt, parent, count(*) AS n FROM app.made WHERE call = $call GROUP BY 1, 2) s});
}

###########################################################################
# b. a failure at the COMMIT after the second table is retried
###########################################################################

arm('commit', 5);
wait_until($node, 'postgres',
	'SELECT c.state FROM retries.calls c WHERE c.id = (' . faulted_call('RT001') . ')',
	'succeeded', 'b. a maintenance run that fails at the COMMIT after its second table succeeds');
my $call = $node->safe_psql('postgres', faulted_call('RT001'));
like(made_by($call), qr/^1:app\.(events|metrics):2,2:app\.(?!\1)(events|metrics):2$/,
	'... the first table\'s partitions, committed by attempt 1, stayed; attempt 2 made the second\'s')
  or diag(made_by($call));
is(first_attempt_kept($call), '2|t', '... those two partitions exist');
my $second = (made_by($call) =~ /^1:app\.\w+:2,2:(app\.\w+):2$/) ? $1 : '(none)';
is($node->safe_psql('postgres', qq{
	SELECT string_agg(outcome || coalesce(' ' || sqlstate, '') || coalesce(': ' || message, ''), ', '
					  ORDER BY attempt)
	  FROM retries.attempts WHERE call_id = $call}),
	"retry RT001: fault at the commit of $second, succeeded",
	'... after a retry, both attempts recorded, the first with the error at the COMMIT');
is($node->safe_psql('postgres', $partitions), '7|7', '... both tables have the partitions of premake 5');
is($node->safe_psql('postgres', premade(5)), 't', '... through the day of the data + 5');

###########################################################################
# c. a failure inside run_maintenance() arrives as P0001, and is retried
###########################################################################

arm('inside', 7);
wait_until($node, 'postgres',
	'SELECT c.state FROM retries.calls c WHERE c.id = (' . faulted_call('P0001') . ')',
	'succeeded', 'c. a maintenance run that fails inside run_maintenance() succeeds');
$call = $node->safe_psql('postgres', faulted_call('P0001'));
$second = (made_by($call) =~ /^1:app\.\w+:2,2:(app\.\w+):2$/) ? $1 : '(none)';
is($node->safe_psql('postgres', qq{
	SELECT string_agg(outcome || coalesce(' ' || sqlstate, '') || coalesce(': ' || split_part(message, E'\\n', 1), ''),
					  ', ' ORDER BY attempt)
	  FROM retries.attempts WHERE call_id = $call}),
	"retry P0001: fault inside the maintenance of $second, succeeded",
	'... its 55P03 recorded as P0001, pg_partman\'s RAISE of it, then retried (retry_on P0001)');
like(made_by($call), qr/^1:app\.(events|metrics):2,2:app\.(?!\1)(events|metrics):2$/,
	'... what attempt 1 committed stayed, attempt 2 made the rest')
  or diag(made_by($call));
is(first_attempt_kept($call), '2|t', '... those two partitions exist');
is($node->safe_psql('postgres', $partitions), '9|9', '... both tables have the partitions of premake 7');

###########################################################################
# d. the procedure annotated, and called
###########################################################################

$node->safe_psql('postgres', "SET ROLE maint; SELECT retries.unschedule('partman')");
wait_until($node, 'postgres',
	q{SELECT count(*) FROM retries.calls WHERE state IN ('scheduled', 'running')},
	'0', 'd. the schedule dropped, its last call done');
$node->safe_psql('postgres', q{
SELECT retries.annotate('partman.run_maintenance_proc(integer,boolean,boolean)', '3 100ms');
DELETE FROM app.armed;
INSERT INTO app.armed VALUES ('commit');
UPDATE partman.part_config SET premake = 9;
});
$call = $node->safe_psql('postgres', q{
SET ROLE maint;
SELECT retries.call('partman.run_maintenance_proc(integer,boolean,boolean)',
					'{"p_analyze": false, "p_jobmon": false}')});
wait_until($node, 'postgres', "SELECT state FROM retries.calls WHERE id = $call",
	'succeeded', 'the annotated run_maintenance_proc(), called by maint, succeeds');
is($node->safe_psql('postgres', qq{
	SELECT c.fn, c.args, c.scheduled_by, c.command IS NULL,
		   (SELECT string_agg(outcome || coalesce(' ' || sqlstate, ''), ', ' ORDER BY attempt)
			  FROM retries.attempts WHERE call_id = c.id)
	  FROM retries.calls c WHERE id = $call}),
	'partman.run_maintenance_proc(integer,boolean,boolean)|{"p_jobmon": "f", "p_analyze": "f"}'
	  . '|maint|t|retry RT001, succeeded',
	'... after a retry under its annotated policy');
like(made_by($call), qr/^1:app\.(events|metrics):2,2:app\.(?!\1)(events|metrics):2$/,
	'... what attempt 1 committed stayed, attempt 2 made the rest')
  or diag(made_by($call));
is(first_attempt_kept($call), '2|t', '... those two partitions exist');
is($node->safe_psql('postgres', $partitions), '11|11', '... both tables have the partitions of premake 9');
is($node->safe_psql('postgres', premade(9)), 't', '... through the day of the data + 9');

no_crash($node, $log_at, 'no process crashed');
$node->stop;
done_testing();
