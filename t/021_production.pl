# Living in a production cluster: what the rest of the database pays, and
# functions that change under the extension.
#
#   a. DDL that drops no function runs no statement on the extension's
#      tables, counted by pg_stat_statements (track = all, which counts the
#      statements of event triggers): CREATE and DROP of tables, indexes,
#      views, types and schemas; a DROP FUNCTION of a function the
#      extension does not know runs one statement, a lookup in
#      retries.function_names;
#      a database still at 1.3 (whose drop trigger ran four statements for
#      every DROP) shows what is counted;
#   b. ALTER FUNCTION ... RENAME, ... SET SCHEMA and ALTER SCHEMA ... RENAME
#      keep the policy, the calls, the schedule and the limits of an
#      annotated function; the views show the new name, the workers
#      rewrite its signature, and its calls run; CREATE OR REPLACE keeps
#      them too;
#   c. a function dropped and created again under the same signature is
#      another function: its calls (one made, the workers paused, before
#      the drop) fail, the annotation is gone;
#   d. rows of function_names that came from elsewhere (written under an
#      extension of another OID, as after pg_upgrade or a restore, with
#      OIDs that name other functions here) are read by signature and
#      owner at once, by sessions and views, in the transaction that made
#      them: a call finds the policy its signature names, never the one
#      of the OID; a signature that names a function of another owner
#      names nothing; a worker writes the rows anew, and the calls run;
#   f. a restore that is not one transaction, during which another role
#      annotates functions of its own between CREATE EXTENSION and the
#      data (pg_restore --section=pre-data, then the rest): the keys that
#      role's functions took are not the restored ones, so no restored
#      policy, schedule or call of the victim names the other role's
#      functions, and the data loads (the ids taken meanwhile are none of
#      the dump's either);
#   g. a stale row whose signature cannot be read (3F000: the schema of
#      an argument's type is gone) names nothing and makes no reader fail;
#   h. a dump of one of two databases made from one template (the same
#      extension OID) restored into the other: read by signature;
#   e. ALTER EXTENSION retries UPDATE from 1.1 to 1.6 to the latest while
#      calls run (issued while an attempt waits at a gate the test holds;
#      t/010 does it from 1.0): every call runs once, and the updated
#      database names its functions in function_names; from 1.6, an event
#      kept twice is kept once, its latest emit.

use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RetriesTest;
use Test::More;

my $node = retries_node('production');
# a. counts statements with pg_stat_statements, which a PostgreSQL built
# from source may lack (the assert-enabled build of scripts/pg-cassert)
my $pgss = has_library($node, 'pg_stat_statements');
$node->append_conf(
	'postgresql.conf', q{
shared_preload_libraries = 'retries, pg_stat_statements'
pg_stat_statements.track = all
}) if $pgss;
# ten databases with two workers each, and the runners of commands (e.)
$node->append_conf('postgresql.conf', 'max_worker_processes = 40');
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION retries');
$node->safe_psql('postgres', 'CREATE EXTENSION pg_stat_statements') if $pgss;

###########################################################################
# a. what DDL costs
###########################################################################

# current_setting_workers(): retries.max_workers, as text
sub current_setting_workers
{
	return $node->safe_psql('postgres', "SELECT current_setting('retries.max_workers')");
}

# set_enabled(on|off): retries.enabled; off, a test that the workers of
# 'postgres' are paused (none runs a call any more)
sub set_enabled
{
	my ($on) = @_;
	$node->safe_psql('postgres',
		($on eq 'on'
			? 'ALTER SYSTEM RESET retries.enabled'
			: 'ALTER SYSTEM SET retries.enabled = off')
		  . '; SELECT pg_reload_conf()');
	return if $on eq 'on';
	wait_until($node, 'postgres',
		"SELECT count(*) FILTER (WHERE state = 'paused') FROM retries.workers"
		  . " WHERE database = current_database()",
		current_setting_workers(), 'the workers are paused');
	return;
}

my $tables =
  'retries\.(policy_data|call_data|flow_data|schedule_data|function_names|attempt_data|call_after)';

# extension_statements(DB): the statements on the extension's tables that
# pg_stat_statements counted in DB since the last reset, one per line
sub extension_statements
{
	my ($db) = @_;
	return $node->safe_psql(
		$db, q{
SELECT string_agg(calls || ' ' || regexp_replace(query, '\s+', ' ', 'g'), E'\n' ORDER BY query)
  FROM pg_stat_statements
 WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
   AND query ~ '} . $tables . q{'});
}

my $ddl = q{
CREATE SCHEMA scratch;
CREATE TABLE scratch.t (a int PRIMARY KEY, b text);
CREATE INDEX ON scratch.t (b);
CREATE VIEW scratch.v AS SELECT * FROM scratch.t;
CREATE TYPE scratch.mood AS ENUM ('ok');
DROP VIEW scratch.v;
DROP INDEX scratch.t_b_idx;
DROP TABLE scratch.t;
DROP TYPE scratch.mood;
DROP SCHEMA scratch;
};

SKIP:
{
	skip 'no pg_stat_statements in this PostgreSQL', 4 if !$pgss;

	# the workers paused, so that their own work (firing schedules, batches)
	# does not count: what is left is what the DDL made anyone run
	$node->safe_psql('postgres', 'ALTER SYSTEM SET retries.enabled = off; SELECT pg_reload_conf()');
	wait_until($node, 'postgres',
		"SELECT count(*) FILTER (WHERE state = 'paused') FROM retries.workers WHERE database = current_database()",
		current_setting_workers(), 'a: the workers have started, and are paused');
	$node->safe_psql('postgres', 'SELECT pg_stat_statements_reset()');
	$node->safe_psql('postgres', $ddl);
	stays_true($node, 'postgres',
		"SELECT count(*) = 0 FROM pg_stat_statements WHERE query ~ '$tables'", 2,
		'a: DDL that drops no function runs no statement on the extension\'s tables, in the session or in a worker')
	  or diag(extension_statements('postgres'));

	$node->safe_psql('postgres',
		"CREATE FUNCTION unknown() RETURNS void LANGUAGE sql AS ''");
	$node->safe_psql('postgres', 'SELECT pg_stat_statements_reset()');
	$node->safe_psql('postgres', 'DROP FUNCTION unknown()');
	like(extension_statements('postgres'),
		qr/\A1 WITH hit AS \( SELECT k\.key, [^\n]* FROM retries\.function_names k JOIN [^\n]*\z/,
		'a: dropping a function the extension does not know: one statement, a lookup in function_names');

	# the same in a database whose extension is still at 1.3
	$node->safe_psql('postgres', 'CREATE DATABASE old');
	$node->safe_psql('old',
		"CREATE EXTENSION retries VERSION '1.3'; CREATE EXTENSION pg_stat_statements");
	$node->safe_psql('old', 'SELECT pg_stat_statements_reset()');
	$node->safe_psql('old', $ddl);
	my $old = extension_statements('old');
	my $n = () = $old =~ /^\d+ /mg;
	cmp_ok($n, '>=', 4,
		"a: at 1.3 the same DDL ran statements on them ($n: the drop trigger's)");
}
$node->safe_psql('postgres', 'ALTER SYSTEM RESET retries.enabled; SELECT pg_reload_conf()');

###########################################################################
# b. renames follow
###########################################################################

$node->safe_psql(
	'postgres', q{
CREATE TABLE effects (tag text);
CREATE SCHEMA before;
CREATE FUNCTION before.note(tag text) RETURNS void LANGUAGE sql AS
	'INSERT INTO effects VALUES (tag)';
SELECT retries.annotate('before.note(text)', '3 10ms', max_running => 2);
SELECT retries.schedule('nightly', 'before.note(text)', '0 3 * * *', '["night"]');
SELECT retries.call('before.note(text)', '["later"]', run_at => now() + interval '1 hour');
});
$node->safe_psql(
	'postgres', q{
ALTER FUNCTION before.note(text) RENAME TO noted;
CREATE SCHEMA middle;
ALTER FUNCTION before.noted(text) SET SCHEMA middle;
ALTER SCHEMA middle RENAME TO after;
CREATE OR REPLACE FUNCTION after.noted(tag text) RETURNS void LANGUAGE sql AS
	'INSERT INTO effects VALUES (upper(tag))';
});
is( $node->safe_psql(
		'postgres', q{
SELECT (SELECT fn || ' ' || max_running FROM retries.policies)
	|| ' | ' || (SELECT fn FROM retries.schedules)
	|| ' | ' || (SELECT string_agg(fn::text, ',') FROM retries.calls)}),
	'after.noted(text) 2 | after.noted(text) | after.noted(text)',
	'b: the policy, its limit, the schedule and the call follow the renames');
wait_until($node, 'postgres',
	"SELECT signature FROM retries.function_names WHERE fn = 'after.noted(text)'::regprocedure",
	'after.noted(pg_catalog.text)', 'b: the workers rewrite the stored signature');
wait_until($node, 'postgres',
	"SELECT fn_signature FROM retries.policy_data WHERE is_current",
	'after.noted(pg_catalog.text)', 'b: and the policy\'s, which messages show');
my $id = $node->safe_psql('postgres',
	"SELECT retries.call('after.noted(text)', '[\"now\"]')");
wait_until($node, 'postgres',
	"SELECT state FROM retries.calls WHERE id = $id",
	'succeeded', 'b: a call of the renamed function runs');
is($node->safe_psql('postgres', 'SELECT string_agg(tag, \',\') FROM effects'),
	'NOW', 'b: with the body CREATE OR REPLACE gave it');

###########################################################################
# c. dropped and created again: another function
###########################################################################

# the call is made while the workers are paused, so that none runs it
# before the function is dropped
set_enabled('off');
my $pending = $node->safe_psql('postgres',
	"SELECT retries.call('after.noted(text)', '[\"gone\"]')");
$node->safe_psql(
	'postgres', q{
DROP FUNCTION after.noted(text);
CREATE FUNCTION after.noted(tag text) RETURNS void LANGUAGE sql AS
	'INSERT INTO effects VALUES (tag)';
});
set_enabled('on');
is( $node->safe_psql(
		'postgres',
		"SELECT (SELECT count(*) FROM retries.policies) || ',' || (SELECT count(*) FROM retries.schedules)"
		  . " || ',' || (SELECT count(*) FROM retries.function_names WHERE fn <> 0)"),
	'0,0,0',
	'c: the dropped function took its annotation, schedule and name with it');
wait_until($node, 'postgres',
	"SELECT state || ' ' || last_sqlstate FROM retries.calls WHERE id = $pending",
	'failed 42883', 'c: its pending call fails: the new function is another one');

###########################################################################
# d. references from elsewhere are mapped before use
###########################################################################

$node->safe_psql(
	'postgres', q{
CREATE FUNCTION kept(tag text) RETURNS void LANGUAGE sql AS
	$$INSERT INTO effects VALUES ('kept ' || tag)$$;
CREATE FUNCTION lost(tag text) RETURNS void LANGUAGE sql AS
	$$INSERT INTO effects VALUES ('lost ' || tag)$$;
CREATE ROLE mallory;
CREATE FUNCTION stolen(tag text) RETURNS void LANGUAGE sql AS
	$$INSERT INTO effects VALUES ('stolen ' || tag)$$;
ALTER FUNCTION stolen(text) OWNER TO mallory;
SELECT retries.annotate('kept(text)', '3 10ms');
SELECT retries.annotate('lost(text)', '3 10ms');
});
# as pg_upgrade or a restore leaves them: under an extension of another
# OID, with OIDs of another cluster, here each naming the other function;
# and lost's signature naming a function of another owner, which is not
# it.  All in one transaction, which no worker can have seen.
my $stale = $node->safe_psql(
	'postgres', q{
BEGIN;
UPDATE retries.function_names SET origin = 1,
	signature = CASE fn WHEN 'lost(text)'::regprocedure
				THEN 'public.stolen(pg_catalog.text)' ELSE signature END;
UPDATE retries.function_names SET fn = 4294967295 WHERE fn = 'kept(text)'::regprocedure;
UPDATE retries.function_names SET fn = 'kept(text)'::regprocedure WHERE fn = 'lost(text)'::regprocedure;
UPDATE retries.function_names SET fn = 'lost(text)'::regprocedure WHERE fn = 4294967295;
SELECT string_agg(fn::text, ',' ORDER BY fn::text) FROM retries.policies;
SELECT retries.call('kept(text)', '["read"]') IS NOT NULL;
COMMIT;
});
is($stale, "kept(text)\nt", 'd: in that transaction, the views and a call read kept by its signature');
my ($ret, $stdout, $stderr) = $node->psql('postgres',
	"SELECT retries.call('lost(text)', '[\"never\"]')");
like($stderr, qr/ERROR:  function lost\(text\) is not annotated/,
	'd: lost\'s OID does not give it kept\'s policy, nor does the signature of another owner\'s function');
wait_until($node, 'postgres',
	"SELECT count(*) FROM retries.function_names WHERE origin = 1", '0',
	'd: a worker writes the rows anew');
is( $node->safe_psql(
		'postgres', q{
SELECT string_agg(CASE WHEN fn = 0 THEN 'gone' ELSE fn::regprocedure::text END
				  || ':' || signature, ',' ORDER BY signature)
  FROM retries.function_names}),
	'gone:after.noted(pg_catalog.text),kept(text):public.kept(pg_catalog.text),gone:public.stolen(pg_catalog.text)',
	'd: kept\'s under this extension, the other gone, and the one dropped in c not brought back by its namesake');
wait_until($node, 'postgres',
	"SELECT string_agg(tag, ',' ORDER BY tag) FROM effects WHERE tag ~ '^(kept|lost|stolen)'",
	'kept read', 'd: the call runs kept, and nothing else ran');
ok($node->log_contains(
		qr/\d function references? of database "postgres" written anew after an upgrade or a restore/),
	'd: the rewrite is logged');

###########################################################################
# f. a role at work during a restore takes no restored key
###########################################################################

$node->safe_psql(
	'postgres', q{
CREATE ROLE victim LOGIN;
CREATE ROLE thief LOGIN;
CREATE DATABASE source OWNER victim;
CREATE DATABASE target;
GRANT CREATE ON DATABASE target TO thief;
});
$node->safe_psql(
	'source', q{
CREATE EXTENSION retries;
SET ROLE victim;
CREATE TABLE ran (fn text, who text DEFAULT current_user);
CREATE FUNCTION v1() RETURNS void LANGUAGE sql AS $$INSERT INTO ran (fn) VALUES ('v1')$$;
CREATE FUNCTION v2() RETURNS void LANGUAGE sql AS $$INSERT INTO ran (fn) VALUES ('v2')$$;
CREATE FUNCTION v3() RETURNS void LANGUAGE sql AS $$INSERT INTO ran (fn) VALUES ('v3')$$;
SELECT retries.annotate('v1()', '3 1s');
SELECT retries.annotate('v2()', '3 1s');
SELECT retries.annotate('v3()', '3 1s');
SELECT retries.schedule('v', 'v1()', '1 hour');
SELECT retries.call('v2()', run_at => now() + interval '1 hour');
});
my $dumpdir = PostgreSQL::Test::Utils::tempdir;
$node->command_ok([ 'pg_dump', '-Fc', '-f', "$dumpdir/s.dump", '-d', $node->connstr('source') ],
	'f: pg_dump');
$node->command_ok(
	[ 'pg_restore', '--section=pre-data', '-d', $node->connstr('target'), "$dumpdir/s.dump" ],
	'f: pg_restore, pre-data');
$node->safe_psql(
	'target', q{
SET ROLE thief;
CREATE SCHEMA t;
CREATE FUNCTION t.t1() RETURNS void LANGUAGE sql AS $$INSERT INTO public.ran (fn) VALUES ('thief')$$;
CREATE FUNCTION t.t2() RETURNS void LANGUAGE sql AS $$INSERT INTO public.ran (fn) VALUES ('thief')$$;
CREATE FUNCTION t.t3() RETURNS void LANGUAGE sql AS $$INSERT INTO public.ran (fn) VALUES ('thief')$$;
GRANT USAGE ON SCHEMA t TO PUBLIC;
SELECT retries.annotate('t.t1()', '3 1s');
SELECT retries.annotate('t.t2()', '3 1s');
SELECT retries.annotate('t.t3()', '3 1s');
});
# the ids and keys it took are none of the dump's (t/009 f tests the ids)
$node->command_ok(
	[ 'pg_restore', '--section=data', '--section=post-data', '-d', $node->connstr('target'),
	  "$dumpdir/s.dump" ],
	'f: pg_restore of the data');
is( $node->safe_psql(
		'target', q{
SELECT (SELECT count(*) FROM retries.function_names WHERE owner = 'victim'::regrole)
	|| ',' || (SELECT count(*) FROM retries.schedules s WHERE s.fn::text LIKE 't.%')
	|| ',' || (SELECT count(*) FROM retries.calls c WHERE c.scheduled_by = 'victim'::regrole
			   AND c.fn::text LIKE 't.%')
	|| ',' || (SELECT count(*) FROM retries.policies p WHERE p.owner = 'thief'::regrole
			   AND p.fn::text NOT LIKE 't.%')}),
	'3,0,0,0',
	'f: the victim\'s keys were restored, and none of its schedules, calls or policies names the thief\'s functions');

###########################################################################
# g. a stale row whose signature cannot be read (the schema of its
#    argument's type is gone: 3F000 from to_regprocedure) names nothing,
#    and makes no reader fail: views, annotate, DROP FUNCTION, the workers
###########################################################################

$node->safe_psql(
	'postgres', q{
CREATE SCHEMA unread;
CREATE TYPE unread.t AS (a int);
CREATE FUNCTION unread_f(x unread.t) RETURNS void LANGUAGE sql AS 'SELECT';
SELECT retries.annotate('unread_f(unread.t)', '3 1s');
BEGIN;
UPDATE retries.function_names SET origin = 1, fn = 4294967295,
	signature = 'public.unread_f(gone_schema.t)'
 WHERE fn = 'unread_f(unread.t)'::regprocedure;
COMMIT;
CREATE FUNCTION after_unread() RETURNS void LANGUAGE sql AS 'SELECT';
});
($ret, $stdout, $stderr) = $node->psql('postgres', q{
SELECT count(*) >= 0 FROM retries.policies;
SELECT retries.annotate('after_unread()', '3 1s');
DROP FUNCTION after_unread();
});
is($stderr, '', 'g: the views, annotate and the drop trigger read past it');
wait_until($node, 'postgres',
	"SELECT fn FROM retries.function_names WHERE signature = 'public.unread_f(gone_schema.t)'",
	'0', 'g: a worker writes it anew as naming nothing');

###########################################################################
# h. two databases made from one template share the extension's OID; a
#    dump of one restored into the other names its functions by signature
#    (the database's OID is part of the origin), not by the OIDs of the
#    first
###########################################################################

$node->safe_psql(
	'postgres', q{
CREATE DATABASE tpl;
});
$node->safe_psql('tpl', 'CREATE EXTENSION retries');
$node->safe_psql('postgres', q{
ALTER DATABASE tpl IS_TEMPLATE true;
CREATE DATABASE sib_x TEMPLATE tpl;
CREATE DATABASE sib_y TEMPLATE tpl;
});
$node->safe_psql(
	'sib_x', q{
CREATE TABLE done (tag text);
CREATE FUNCTION pad() RETURNS void LANGUAGE sql AS 'SELECT';
CREATE FUNCTION sib(tag text) RETURNS void LANGUAGE sql AS $$INSERT INTO done VALUES (tag)$$;
SELECT retries.annotate('sib(text)', '3 10ms');
SELECT retries.call('sib(text)', '["restored"]', run_at => now() + interval '1 hour');
});
$node->command_ok([ 'pg_dump', '-Fc', '-f', "$dumpdir/sib.dump", '-d', $node->connstr('sib_x') ],
	'h: pg_dump of one sibling');
# the other sibling has the extension already (from the template): the
# restore says so and goes on; its function gets another OID there
$node->safe_psql('sib_y', 'CREATE FUNCTION other() RETURNS void LANGUAGE sql AS \'SELECT\'');
system_log('pg_restore', '-d', $node->connstr('sib_y'), "$dumpdir/sib.dump");
is($node->safe_psql('sib_y', 'SELECT string_agg(fn::text, \',\') FROM retries.policies'),
	'sib(text)', 'h: the restored policy names its function by signature');
# the call, due in an hour (so that it ran in neither database before), due
# now
$node->safe_psql('sib_y', 'SELECT retries.reschedule(id, now()) FROM retries.calls');
wait_until($node, 'sib_y', "SELECT string_agg(tag, ',') FROM done", 'restored',
	'h: the restored call runs its function');
# their workers would take the slots that e's databases need
$node->safe_psql(
	'postgres', q{
DROP DATABASE sib_x;
DROP DATABASE sib_y;
ALTER DATABASE tpl IS_TEMPLATE false;
DROP DATABASE tpl;
});

###########################################################################
# e. updates from each version under running calls
###########################################################################

my $latest = $node->safe_psql('postgres',
	"SELECT default_version FROM pg_available_extensions WHERE name = 'retries'");
for my $version ('1.1', '1.2', '1.3', '1.4', '1.5', '1.6')
{
	(my $db = "from_$version") =~ s/\./_/;
	$node->safe_psql('postgres', "CREATE DATABASE $db");
	$node->safe_psql(
		$db, qq{
CREATE EXTENSION retries VERSION '$version';
CREATE TABLE done (id int PRIMARY KEY);
CREATE FUNCTION quick(id int) RETURNS void LANGUAGE sql AS 'INSERT INTO done VALUES (id)';
CREATE FUNCTION slow(id int) RETURNS void LANGUAGE sql AS
	'SELECT } . gate_sql(1) . qq{; INSERT INTO done VALUES (id)';
SELECT retries.annotate('quick(int)', '3 10ms');
SELECT retries.annotate('slow(int)', '3 10ms');
});
	# the update is made while an attempt of slow() waits at a gate, and
	# goes on (it may wait for that attempt's batch) once the gate opens
	my $gate = close_gate($node, $db, 1);
	$node->safe_psql(
		$db, q{
SELECT count(retries.call('slow(int)', jsonb_build_array(i))) FROM generate_series(1, 10) i;
SELECT count(retries.call('quick(int)', jsonb_build_array(i))) FROM generate_series(11, 300) i;
});
	wait_at_gate($node, $db, 1, 1, "e: $version: calls are running");
	# 1.6 may keep an event twice (emitted between two runs of a restore,
	# beside the dump's row of it): the update keeps its latest emit
	$node->safe_psql($db, q{
INSERT INTO retries.event_data VALUES
	(current_user::text::regrole, 'twice', '"older"', now() - interval '1 minute'),
	(current_user::text::regrole, 'twice', '"latest"', now()),
	(current_user::text::regrole, 'once', '"only"', now());
}) if $version eq '1.6';
	my $updater = $node->background_psql($db, on_error_stop => 0);
	# (the update may not wait for the attempt: then both lines may come at
	# once)
	my $said = $updater->query_until(qr/updating\n/,
		"\\echo updating\nALTER EXTENSION retries UPDATE;\n\\echo updated\n");
	open_gate($gate);
	$updater->query_until(qr/updated\n/, '') if $said !~ /updated\n/;
	is($updater->{stderr}, '', "e: $version: the update succeeds");
	$updater->quit;
	$node->safe_psql($db,
		"SELECT count(retries.call('quick(int)', jsonb_build_array(i))) FROM generate_series(301, 400) i"
	);
	is($node->safe_psql($db, "SELECT extversion FROM pg_extension WHERE extname = 'retries'"),
		$latest, "e: $version: updated to $latest while calls ran");
	wait_until($node, $db,
		"SELECT count(*) FILTER (WHERE state = 'succeeded') || ' of ' || count(*)"
		  . " FROM retries.calls",
		'400 of 400', "e: $version: every call succeeded");
	is( $node->safe_psql(
			$db,
			"SELECT count(*) || ' ' || count(DISTINCT id) || ' '"
			  . " || (SELECT count(*) FROM retries.function_names)"
			  . " FROM done"),
		'400 400 2', "e: $version: each call's effect once; both functions named");

	# what the update adds works at once: a command
	my $command = $node->safe_psql($db,
		"SELECT retries.run_command('INSERT INTO done VALUES (1000); VACUUM done')");
	wait_until($node, $db, "SELECT state FROM retries.calls WHERE id = $command",
		'succeeded', "e: $version: a command runs after the update");
	$command = $node->safe_psql($db,
		"SELECT retries.run_command('INSERT INTO done VALUES (1001)')");
	wait_until($node, $db, "SELECT state FROM retries.calls WHERE id = $command",
		'succeeded', "e: $version: ... as psql runs a script (VACUUM beside an INSERT), and alone");

	# and events: a call that waits for one, released by its emit
	my $waiting = $node->safe_psql($db,
		"SELECT retries.call('quick(int)', '[1002]', on_event => 'go')");
	is($node->safe_psql($db, "SELECT retries.emit('go')"),
		'1', "e: $version: an emit releases a waiting call after the update");
	wait_until($node, $db, "SELECT state FROM retries.calls WHERE id = $waiting",
		'succeeded', "e: $version: ... which runs");
	next if $version ne '1.6';
	is($node->safe_psql($db,
			"SELECT string_agg(event || '=' || payload, ',' ORDER BY event)"
			  . " FROM retries.event_data WHERE event IN ('once', 'twice')"),
		'once="only",twice="latest"',
		"e: $version: an event kept twice is kept once, its latest emit");
	is($node->safe_psql($db, q{
SELECT retries.emit('twice', '"after"');
SELECT count(*) || ' ' || min(payload::text) FROM retries.event_data WHERE event = 'twice'}),
		"0\n1 \"after\"", "e: $version: ... and emitted again");
}

$node->stop;
done_testing();
