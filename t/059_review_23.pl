# Twenty-fifth hostile review (rv25, of 4bbd7e5: the fixes of rv24 in
# worker.c, launcher.c and annotate.c, and issue 42's older promises), by a
# reviewer who did not write the code, one hour.  alice is the victim;
# mallory is an ordinary role (CREATEDB for finding 3 only).  The node runs
# the DEFAULTS of the pool (worker_idle_timeout 10 s, max_cluster_workers
# 16, max_workers 2, max_extra_workers 2) with retries.reserved_workers 2
# (what an administrator who does not trust every role sets) and
# max_worker_processes 48.  A superuser made database tpl a template with
# the extension in it (IS_TEMPLATE), and database latin (LATIN1).  Each
# numbered check fails on the code reviewed (inside a TODO block named
# "finding N"); the lettered ones held.
#
# Findings:
#   1. (Medium) rv24's fix of its finding 2 (annotate refuses a function
#      whose name is not valid in the database's encoding, 22021) checks
#      the name only when annotate runs.  mallory annotates her
#      mallory.plain(), then renames it with EXECUTE to a name holding byte
#      0xE9 (read from pg_stat_activity: a session of hers in database
#      latin), which PostgreSQL does not check.  The workers' names_refresh
#      (tables/names.c, refresh_statements) writes the new signature into
#      retries.function_names.signature and policy_data.fn_signature as
#      it is: both tables hold the byte, and a pg_restore of the database's
#      dump fails the COPY of both whole, so alice's annotation and policy
#      are missing from the restored database.  ALTER SCHEMA ... RENAME and
#      ALTER TYPE ... RENAME (a type in the signature) go the same way.
#   2. (Medium) the same fix misses every other way a function gets a
#      row of function_names: the hooks (annotate's on_exhausted and
#      delay_fn: names_function_key(policy->on_exhausted / delay_fn, true)
#      in annotate.c) and retries.pause() of a function with no annotation
#      (flow.c flow_set_gate: names_function_key(fnoid, true)).  mallory
#      annotates her mallory.g() with on_exhausted => a function of hers
#      whose name holds 0xE9, and pauses another such function: both are
#      accepted, and function_names holds the byte (the restore failure of
#      1, for every role).  A check in names_function_key's INSERT and in
#      the refresh would cover 1 and 2.
#   3. (Medium; CREATEDB, or CONNECT to two databases with the extension
#      where she may make a function) rv24's fix of its finding 4 (a
#      database's only worker may run in a reserved worker) lets another
#      role's databases take every reserved worker.  While mallory's
#      parallel query holds every free background-worker slot, her calls
#      in her databases m1 and m2 (which have no worker, idle) start their
#      first workers in the two reserved workers, where her long calls
#      hold them.  alice's call in postgres, whose workers left idle, then
#      gets no worker for as long as the query runs.  Runners are bounded
#      to half of the reserved workers per role (shmem_reserve_give); a
#      database's first worker by nothing (launcher.c start_worker).
#      Check b: once the query ends, alice's call runs.
#   4. (Medium; CONNECT to max_cluster_workers / 2 databases, or CREATEDB)
#      rv24's fix of its finding 5 (the last free worker of a database
#      whose others are busy stays: worker.c leave_database, others_free)
#      holds while other databases wait for the pool too: one long call
#      per database keeps two workers, one idle for good.  With mallory's
#      held calls in m1 and m2 and max_cluster_workers 4 (by a reload),
#      alice's call in postgres gets no worker (reference.md: "while any
#      waits, a worker leaves its database as soon as it is idle").  With
#      the default pool, eight databases do it.  Check c: once mallory's
#      calls end, alice's call runs.
#   5. (Medium; two ordinary roles) one role holds at most all but a
#      quarter of the runner places (worker.c role_runner_share), but the
#      quarter is shared by every other role: with retries.max_runners 4
#      (by a reload), mallory's three held commands and bob's one hold
#      every place, and alice's command is held.  Check d: once theirs
#      end, alice's runs.
#   6. (Low, intermittent: about 2 runs in 5) a committed rename whose
#      signatures the workers do not rewrite: right after DROP DATABASE
#      restored WITH (FORCE), mallory renames her function and type back
#      to valid names; the idle workers of postgres are there, yet
#      function_names keeps the old (here: invalid) signatures past 20 s,
#      until RENAME_CHECK_MS or the next worker's start (up to 10 min on
#      demand).  Suspected cause: the commit wakes the workers at
#      XACT_EVENT_COMMIT (xact.c), before PostgreSQL sends the
#      transaction's invalidations (AtEOXact_Inval comes after the
#      callbacks): a worker awake at that moment refreshes with its stale
#      syscache (format_procedure_qualified gives the old name), then
#      counts the new names_generation as seen (names.c names_refresh).
#
# Held (lettered checks): a. annotate still refuses a function created
# with such a name (22021); b, c, d above; z. no crash in the server log.
#
# Fixed since, and plain checks now: 1 and 2 (every way into
# function_names checks the signature, names_signature(), 22021; a rename
# to such a name keeps the row's signature: retries.function_signature()
# gives NULL for it), 3 (a worker in a reserved worker takes no call of a
# role whose calls run in another reserved worker, and gives it back idle:
# reserve_roles, idle_in_reserve), 4 (the last free worker stays only
# while no database waits for the pool), 5 (the last quarter of the runner
# places goes only to roles that hold none, one each: runner_places_kept;
# checked with retries.max_runners 8, mallory holding her six and bob
# taking one: his second is held, alice's runs), 6 (after a rename the
# signatures are rewritten once more a second later: names.c recheck_at;
# the check renames to valid names, right after the DROP DATABASE).

use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RetriesTest;
use Test::More;

# the defaults of the pool; reserved workers; tpl, a template with the
# extension
my $node = pool_review_node('review_23');
my $log_offset = -s $node->logfile;
my $tmp = PostgreSQL::Test::Utils::tempdir;

# bytes not valid in UTF8, as mallory can read them: the text of a query of
# a session of hers in a LATIN1 database, in pg_stat_activity
my $latin_session = latin1_bad_name($node, 'mallory');
# a row whose text holds byte 0xE9 (not valid in UTF8)
my $bad_bytes = "position('\\xe9'::bytea in textsend(%s)) > 0";

# ---------------------------------------------------------------------
# a. annotate refuses a function made with such a name (rv24's fix)
# ---------------------------------------------------------------------
my ($outa, $erra) = try_as($node, 'postgres', 'mallory', q{
DO $$BEGIN
  EXECUTE format('CREATE FUNCTION mallory.%I() RETURNS void LANGUAGE sql AS ''SELECT 1''',
                 mallory.bad_name('a'));
  PERFORM retries.annotate((SELECT oid FROM pg_proc WHERE pronamespace = 'mallory'::regnamespace
                            AND proname LIKE 'acaf%')::regprocedure, '1 10ms');
END$$;
});
ok(!defined $outa && $erra =~ /ERROR:  22021/,
	'a: annotating a function whose name is not valid in the encoding is refused (22021)')
  or diag($erra);

# ---------------------------------------------------------------------
# 1. a rename after annotate writes the bad name into the shared tables
# ---------------------------------------------------------------------
as_role($node, 'postgres', 'mallory', q{
CREATE FUNCTION mallory.plain() RETURNS void LANGUAGE sql AS 'SELECT 1';
SELECT retries.annotate('mallory.plain()', '1 10ms');
CREATE TYPE mallory.t AS (a int);
});
# alice's function of mallory's type: its signature names the type
as_role($node, 'postgres', 'alice', q{
CREATE FUNCTION alice.uses(x mallory.t) RETURNS void LANGUAGE sql AS 'SELECT 1';
SELECT retries.annotate('alice.uses(mallory.t)', '1 10ms');
});
# beside them, in the same transaction, a rename to a valid name, whose
# refresh says the workers have looked
as_role($node, 'postgres', 'mallory', q{
CREATE FUNCTION mallory.beside() RETURNS void LANGUAGE sql AS 'SELECT 1';
SELECT retries.annotate('mallory.beside()', '1 10ms');
DO $$BEGIN
  EXECUTE format('ALTER FUNCTION mallory.plain() RENAME TO %I', mallory.bad_name('r'));
  EXECUTE format('ALTER TYPE mallory.t RENAME TO %I', mallory.bad_name('t'));
  ALTER FUNCTION mallory.beside() RENAME TO beside2;
END$$;
});
wait_until($node, 'postgres',
	"SELECT count(*) FROM retries.function_names WHERE signature = 'mallory.beside2()'",
	'1', '1: setup: the workers rewrote the signatures of the transaction\'s renames');
{
	is($node->safe_psql('postgres',
			"SELECT (SELECT count(*) FROM retries.function_names WHERE "
			  . sprintf($bad_bytes, 'signature') . ")"
			  . " + (SELECT count(*) FROM retries.policy_data WHERE "
			  . sprintf($bad_bytes, 'fn_signature') . ")"),
		'0', '1: no signature in function_names or policy_data holds bytes not valid in UTF8');
	is($node->safe_psql('postgres',
			"SELECT count(*) FROM retries.function_names WHERE owner = 'alice'::regrole AND "
			  . sprintf($bad_bytes, 'signature')),
		'0', '1: ... not even alice\'s own annotation, through mallory\'s type in its signature');
}
$node->command_ok([ 'pg_dump', '-Fc', '-f', "$tmp/postgres.dump", '-d', $node->connstr('postgres') ],
	'1: setup: pg_dump of postgres');
$node->safe_psql('postgres', 'CREATE DATABASE restored');
$node->run_log([ 'pg_restore', '-d', $node->connstr('restored'), "$tmp/postgres.dump" ]);
{
	is($node->safe_psql('restored',
			"SELECT count(*) FROM retries.function_names WHERE signature = 'alice.pay(integer)'"),
		'1', '1: the restore of postgres keeps alice\'s annotation (function_names)');
}
$node->safe_psql('postgres', 'DROP DATABASE restored WITH (FORCE)');

# ---------------------------------------------------------------------
# 6. (intermittent) a rename whose refresh a worker misses: the names
#    back to valid ones, right after the DROP DATABASE above
# ---------------------------------------------------------------------
as_role($node, 'postgres', 'mallory', q{
DO $$BEGIN
  EXECUTE format('ALTER FUNCTION mallory.%I() RENAME TO plain', mallory.bad_name('r'));
  EXECUTE format('ALTER TYPE mallory.%I RENAME TO t', mallory.bad_name('t'));
  ALTER FUNCTION mallory.beside2() RENAME TO beside3;
END$$;
});
wait_until($node, 'postgres',
	"SELECT count(*) FROM retries.function_names WHERE signature = 'mallory.beside3()'",
	'1', '6: the workers rewrite the signatures of a committed rename within 20 s', 20);

# ---------------------------------------------------------------------
# 2. a hook's name (on_exhausted, delay_fn) goes into the shared tables
#    unchecked
# ---------------------------------------------------------------------
my ($out2, $err2) = try_as($node, 'postgres', 'mallory', q{
DO $$BEGIN
  EXECUTE format('CREATE FUNCTION mallory.%I(bigint) RETURNS void LANGUAGE sql AS ''SELECT 1''',
                 mallory.bad_name('x'));
END$$;
CREATE FUNCTION mallory.g() RETURNS void LANGUAGE sql AS 'SELECT 1';
SELECT retries.annotate('mallory.g()', '1 10ms',
  on_exhausted => (SELECT oid FROM pg_proc WHERE pronamespace = 'mallory'::regnamespace
                   AND proname LIKE 'xcaf%')::regprocedure);
});
# retries.pause() of a function not annotated: the gate's key too
my ($out2p, $err2p) = try_as($node, 'postgres', 'mallory', q{
DO $$BEGIN
  EXECUTE format('CREATE FUNCTION mallory.%I() RETURNS void LANGUAGE sql AS ''SELECT 1''',
                 mallory.bad_name('p'));
END$$;
SELECT retries.pause((SELECT oid FROM pg_proc WHERE pronamespace = 'mallory'::regnamespace
                      AND proname LIKE 'pcaf%')::regprocedure);
});
{
	ok((!defined $out2 && $err2 =~ /ERROR:  22021/)
		  || $node->safe_psql('postgres',
			"SELECT count(*) FROM retries.function_names WHERE signature LIKE 'mallory.\"xcaf%'") eq '0',
		'2: an on_exhausted hook whose name is not valid in UTF8 is refused, or kept out of function_names');
	ok((!defined $out2p && $err2p =~ /ERROR:  22021/)
		  || $node->safe_psql('postgres',
			"SELECT count(*) FROM retries.function_names WHERE signature LIKE 'mallory.\"pcaf%'") eq '0',
		'2: retries.pause() of a function whose name is not valid in UTF8 is refused, or kept out of function_names');
}
$latin_session->quit;

# ---------------------------------------------------------------------
# 3. mallory's databases take every reserved worker while her parallel
#    query holds every other slot
# ---------------------------------------------------------------------
my @gates;
for my $db ('m1', 'm2')
{
	as_role($node, 'postgres', 'mallory', "CREATE DATABASE $db TEMPLATE tpl");
	as_role($node, $db, 'mallory', q{
CREATE SCHEMA mallory;
CREATE FUNCTION mallory.held() RETURNS boolean LANGUAGE sql AS $$ SELECT } . gate_sql(71) . q{ $$;
SELECT retries.annotate('mallory.held()', '1 10ms');
});
	push @gates, close_gate($node, $db, 71);
}
as_role($node, 'postgres', 'mallory', q{
CREATE TABLE mallory.big AS SELECT g AS id FROM generate_series(1, 100000) g;
ALTER TABLE mallory.big SET (parallel_workers = 64);
CREATE FUNCTION mallory.slow(id int) RETURNS boolean LANGUAGE sql PARALLEL SAFE
	AS $$ SELECT pg_sleep(1) IS NULL $$;  -- not a wait: the test cancels it
});
wait_until($node, 'postgres',
	"SELECT count(*) FROM pg_stat_activity WHERE datname IN ('postgres', 'm1', 'm2')"
	  . " AND backend_type LIKE 'retries%'",
	'0', '3: setup: the workers of postgres, m1 and m2 left, idle');
my ($hog, $hog_pid) = start_parallel_hog($node, 'postgres', 'mallory',
	'3: setup: mallory\'s parallel query takes every free slot');
as_role($node, 'm1', 'mallory', "SELECT retries.call('mallory.held()')");
wait_at_gate($node, 'm1', 71, 1,
	"3: setup: mallory's call in m1 runs, in a reserved worker, held at a gate");
# her call in m2 waits: her calls run in a reserved worker already
as_role($node, 'm2', 'mallory', "SELECT retries.call('mallory.held()')");
my $f3 = as_role($node, 'postgres', 'alice', "SELECT retries.call('alice.pay(int)', '[3]')");
{
	call_reaches($node, 'postgres', $f3, 'succeeded',
		'3: alice\'s call runs within 10 s while the query holds every free slot (reserved_workers 2)', 10);
}
$node->safe_psql('postgres', "SELECT pg_cancel_backend($hog_pid)");
$hog->quit;
# b. once the query ends, alice's database gets its worker
call_reaches($node, 'postgres', $f3, 'succeeded', 'b: alice\'s call runs once the query ends');

# ---------------------------------------------------------------------
# 4. the last free worker of a database stays while other databases wait
#    for the pool: one long call per database keeps two workers
# ---------------------------------------------------------------------
# mallory's calls in m1 and m2 still wait at their gates (each database's
# second worker, idle, may come and go: its wanted count follows the work
# that commits there since t/060)
wait_until($node, 'postgres',
	"SELECT count(*) FILTER (WHERE datname IN ('m1', 'm2')) >= 2"
	  . " AND count(*) FILTER (WHERE datname = 'postgres') = 0"
	  . " FROM pg_stat_activity WHERE backend_type LIKE 'retries%'",
	't', '4: setup: m1 and m2 have their workers (one held each); postgres\'s left');
$node->safe_psql('postgres',
	'ALTER SYSTEM SET retries.max_cluster_workers = 4; SELECT pg_reload_conf()');
wait_until($node, 'postgres', 'SHOW retries.max_cluster_workers', '4',
	'4: setup: the pool is four workers');
my $f4 = as_role($node, 'postgres', 'alice', "SELECT retries.call('alice.pay(int)', '[4]')");
{
	call_reaches($node, 'postgres', $f4, 'succeeded',
		'4: alice\'s call runs within 10 s: the idle workers of m1 and m2 leave for her database', 10);
}
# c. once mallory's calls end, alice's call runs
open_gate($_) for @gates;
call_reaches($node, 'postgres', $f4, 'succeeded', 'c: alice\'s call runs once mallory\'s calls end');
$node->safe_psql('postgres',
	'ALTER SYSTEM RESET retries.max_cluster_workers; SELECT pg_reload_conf()');

# ---------------------------------------------------------------------
# 5. two roles together hold every runner place: another role's command
#    is held
# ---------------------------------------------------------------------
$node->safe_psql('postgres',
	'ALTER SYSTEM SET retries.max_runners = 8; SELECT pg_reload_conf()');
wait_until($node, 'postgres', 'SHOW retries.max_runners', '8',
	'5: setup: eight runner places (one role holds at most six, two kept)');
my $gate5 = close_gate($node, 'postgres', 72);
my $held_command = "SELECT retries.run_command('SELECT " . gate_sql(72) =~ s/'/''/gr . "')";
as_role($node, 'postgres', 'mallory', "$held_command FROM generate_series(1, 6)");
wait_at_gate($node, 'postgres', 72, 6,
	'5: setup: mallory\'s six commands run, held at a gate');
as_role($node, 'postgres', 'bob', "$held_command FROM generate_series(1, 2)");
wait_at_gate($node, 'postgres', 72, 7,
	'5: setup: one of bob\'s two commands runs, held at a gate');
wait_until($node, 'postgres',
	"SELECT count(*) FROM retries.call_data WHERE scheduled_by = 'bob'::regrole AND held",
	'1', '5: bob\'s second command is held: he holds a place, and two are left');
my $f5 = as_role($node, 'postgres', 'alice',
	"SELECT retries.run_command('INSERT INTO alice.t VALUES (5)')");
call_reaches($node, 'postgres', $f5, 'succeeded',
	'5: alice\'s command runs within 10 s while mallory and bob hold the places', 10);
# d. once their commands end, alice's runs
open_gate($gate5);
call_reaches($node, 'postgres', $f5, 'succeeded', 'd: alice\'s command runs once theirs end');
$node->safe_psql('postgres',
	'ALTER SYSTEM RESET retries.max_runners; SELECT pg_reload_conf()');

no_crash($node, $log_offset, 'z: no crash');
done_testing();
