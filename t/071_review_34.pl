# Thirty-seventh hostile review (rv38, of 79fa633: the fixes of rv36,
# t/070; issues 42 and 44; by a reviewer who did not write the code).
# mallory is an ordinary role with CREATEDB (as pool_review_node gives
# her); the node runs the DEFAULTS of the pool, with retries.max_databases
# at its minimum, 16.
#
# Each numbered check failed on the code reviewed and holds since its fix;
# the lettered ones held.
#
# Findings:
#   1. (Medium: a role with CREATEDB makes every database created after
#      hers get no worker, with copies of a template that has the
#      extension: rv36's finding 2 gone around) read_databases
#      (launcher.c) let a database not looked at yet take only the entry
#      of one found without the extension (evictable_database, shmem.c).
#      A copy of a template with the extension has it: probed once, it was
#      "served" for good, with no call, no schedule and no worker.
#      mallory's 15 copies of tpl took every entry left, and a database
#      made later (here by the superuser) never got a worker.  Fixed: the
#      last worker to leave a database with nothing to do (no call due or
#      held for a runner, no firing, no event timeout, nothing to look
#      after) marks it idle (leave.c, nothing_to_do), and an idle
#      database's entry may go to another, as an empty one's; it gets one
#      again when a commit there wakes its workers (shmem_wake_workers, as
#      CREATE EXTENSION does), and if none can be had then, the launcher
#      counts it as new until it has one (shmem_take_unserved).  Check 1.
#
# Held (lettered checks):
#   c. (reported High, not reproduced) a database owner who sets
#      ALTER DATABASE mc SET search_path = m, pg_catalog, m holding copies
#      of pg_catalog's operators, functions and type names whose code makes
#      her a superuser when a superuser runs it (t/071_shadow.sql): none of
#      it runs as another role while the workers run her calls, schedules,
#      commands, events and hooks.  The reviewer's hits came from its own
#      test's queries, which ran as a superuser in mc under that path
#      (c.args = '[6]', count(*) >= 2, ||: PostgreSQL's own rule, a
#      superuser must not use a database whose owner chose its path).  The
#      workers' own statements name pg_catalog's operators everywhere.  The
#      test's own queries in mc name pg_catalog's operators.
#   b. a call's code sees its login search_path (the server's; the one the
#      database's owner set), not the worker's own.
#   a. calls made at once in every copy, more databases with work than
#      entries: each runs (the fix's own guard: a copy that gave its entry
#      up gets one back when a call is made there).
#   z. no backend or worker crashed.

use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RetriesTest;
use Test::More;

my $node = pool_review_node('review_34', 'retries.max_databases = 16');
my $log_offset = -s $node->logfile;

# the last line of psql's output: the id retries.call returned
sub call_in
{
	my ($db) = @_;
	my $out = $node->safe_psql($db, q{
SELECT retries.annotate('pg_catalog.now()');
SELECT retries.call('pg_catalog.now()');
});
	return (split /\n/, $out)[-1];
}

# ---------------------------------------------------------------------
# c. the worker's own SQL (a superuser's) in a database whose owner
#    (mallory, in her copy of tpl) set its search_path to a schema of hers
#    before pg_catalog, which shadows pg_catalog's operators, some
#    functions and type names with code that makes her a superuser
# ---------------------------------------------------------------------
{
	as_role($node, 'postgres', 'mallory', 'CREATE DATABASE mc TEMPLATE tpl');
	open(my $fh, '<', "$FindBin::RealBin/071_shadow.sql") or die;
	my $shadow = do { local $/; <$fh> };
	close $fh;
	as_role($node, 'mc', 'mallory', $shadow);
	as_role($node, 'mc', 'mallory', q{
ALTER DATABASE mc SET search_path = m, pg_catalog;
});
	as_role($node, 'mc', 'mallory', q{
CREATE FUNCTION m.job(n int) RETURNS int LANGUAGE plpgsql AS $$
BEGIN IF n < 0 THEN RAISE EXCEPTION 'negative' USING ERRCODE = 'RT001'; END IF; RETURN n; END $$;
CREATE FUNCTION m.backoff(attempt integer, sqlstate pg_catalog.text, message pg_catalog.text)
  RETURNS interval LANGUAGE sql AS $$SELECT attempt * interval '10 ms'$$;
CREATE FUNCTION m.done(id bigint) RETURNS void LANGUAGE sql AS $$SELECT$$;
SELECT retries.annotate('m.job(int)', max_attempts => 3,
	delay_fn => 'm.backoff(integer,pg_catalog.text,pg_catalog.text)', on_exhausted => 'm.done(bigint)');
SELECT retries.call('m.job(int)', '[1]');
SELECT retries.call('m.job(int)', '[-1]');
SELECT retries.call('m.job(int)', '[2]', key => 'k1');
SELECT retries.call('m.job(int)', '[3]', key => 'k1');
SELECT retries.call('m.job(int)', '[4]', run_at => now() + interval '1 hour');
SELECT retries.schedule('s1', 'm.job(int)', '* * * * *', '[5]');
SELECT retries.schedule('s2', 'm.job(int)', '1 second', '[6]');
});
	my ($out, $err) = try_as($node, 'mc', 'mallory', q{
SELECT retries.run_command('SELECT 1');
SELECT retries.call('m.job(int)', '[7]', on_event => 'ev');
SELECT retries.emit('ev');
SELECT retries.pause('m.job(int)'); SELECT retries.resume('m.job(int)');
});
	diag("rv38 c setup: " . ($err // ''));
	# the workers have run something there: an attempt, or mallory's code
	# as a superuser
	wait_until($node, 'mc',
		q{SELECT pg_catalog.count(*) OPERATOR(pg_catalog.>=) 2 FROM retries.call_data
		  WHERE schedule_id IS NOT NULL AND state OPERATOR(pg_catalog.=) 'succeeded'},
		't', 'c: (setup) the workers ran mallory\'s calls, and her schedule fired twice');
	# (the test's own queries in mc, a superuser's, name pg_catalog's
	# operators: the database's search_path would run mallory's)
	is($node->safe_psql('mc',
		q{SELECT pg_catalog.string_agg(DISTINCT pg_catalog.concat_ws(':', who, what), ' | ')
		  FROM m.hits WHERE who OPERATOR(pg_catalog.<>) 'mallory'}),
		'', 'c: none of mallory\'s shadowing operators or functions ran as another role');
	is($node->safe_psql('postgres', q{SELECT rolsuper FROM pg_roles WHERE rolname = 'mallory'}),
		'f', 'c: mallory is no superuser after the workers ran in her database with her search_path');
}


# ---------------------------------------------------------------------
# b. a call's code still starts with its role's login search_path: the
#    server's where nobody set one, the database's where its owner did
# ---------------------------------------------------------------------
{
	$node->safe_psql('postgres', q{
CREATE FUNCTION public.path_seen() RETURNS text LANGUAGE sql
	AS $$SELECT pg_catalog.current_setting('search_path')$$;
SELECT retries.annotate('public.path_seen()');
});
	my $id = $node->safe_psql('postgres', q{SELECT retries.call('public.path_seen()')});
	call_reaches($node, 'postgres', $id, 'succeeded', 'b: (setup) the call of path_seen ran');
	is($node->safe_psql('postgres', qq{SELECT retries.result($id) #>> '{}'}),
		'"$user", public', 'b: a call sees the login search_path, not the worker\'s');
	as_role($node, 'mc', 'mallory', q{
CREATE FUNCTION m.path_seen() RETURNS pg_catalog.text LANGUAGE sql
	AS $$SELECT pg_catalog.current_setting('search_path')$$;
SELECT retries.annotate('m.path_seen()');
SELECT retries.call('m.path_seen()', key => 'path');
});
	wait_until($node, 'mc',
		q{SELECT pg_catalog.count(*) FROM retries.call_data
		  WHERE key OPERATOR(pg_catalog.=) 'path' AND state OPERATOR(pg_catalog.=) 'succeeded'},
		'1', 'b: (setup) mallory\'s call of path_seen ran');
	is($node->safe_psql('mc', q{SELECT r.result OPERATOR(pg_catalog.#>>) '{}'::pg_catalog.text[]
		FROM retries.call_data c, LATERAL (SELECT retries.result(c.id) AS result) r
		WHERE c.key OPERATOR(pg_catalog.=) 'path'}),
		'm, pg_catalog', 'b: a call in mc sees the search_path mc\'s owner set');
}

# ---------------------------------------------------------------------
# 1. copies of the template WITH the extension (CREATEDB is enough) take
#    every place of retries.max_databases: a database made after them
#    gets no worker
# ---------------------------------------------------------------------
$node->safe_psql('postgres', 'CREATE DATABASE early TEMPLATE tpl');
call_reaches($node, 'early', call_in('early'), 'succeeded',
	'1: (control) a call in a database made before mallory\'s copies runs');
my $nall = $node->safe_psql('postgres',
	'SELECT count(*) FROM pg_database WHERE datallowconn AND NOT datistemplate');
my @copies = map { "c$_" } 1 .. (17 - $nall);
as_role($node, 'postgres', 'mallory', "CREATE DATABASE $_ TEMPLATE tpl") for @copies;
# each copy probed, and left idle by its worker
wait_until($node, 'postgres',
	q{SELECT count(*) = 0 FROM pg_stat_activity
	  WHERE backend_type = 'retries worker' AND datname ~ '^c[0-9]+$'},
	't', '1: (setup) the copies\' workers left them idle');
$node->safe_psql('postgres', 'CREATE DATABASE late TEMPLATE tpl');
call_reaches($node, 'late', call_in('late'), 'succeeded',
	'1: a call in a database made after mallory\'s copies of tpl runs');

# ---------------------------------------------------------------------
# a. a call made at once in every copy (more databases with work than
#    entries): each gets an entry back, or is looked at as new
# ---------------------------------------------------------------------
{
	my %ids = map { $_ => call_in($_) } @copies;
	for my $db (@copies)
	{
		call_reaches($node, $db, $ids{$db}, 'succeeded',
			"a: the call made in $db, which may have given its entry up, runs");
	}
}

no_crash($node, $log_offset, 'z: no backend or worker crashed');

done_testing();
