# Thirty-sixth hostile review (rv36, of 44efbf3: the fixes of rv35, a
# hook's search_path kept to the schemas its owner may trust,
# login_trust_search_path; issue 42, "whose code runs with whose rights";
# 60 minutes, by a reviewer who did not write the code).  alice is the
# victim, mallory an ordinary role (CREATEDB, as pool_review_node gives
# her).  The node runs the DEFAULTS of the pool (pool_review_node).
#
# Each numbered check failed on the code reviewed and holds since its fix;
# the lettered ones held.
#
# Findings:
#   1. (High: a role with CREATEDB becomes a superuser, given a template
#      with the extension in which a superuser annotated a function with a
#      hook, delay_fn or on_exhausted, that has no SET search_path: the
#      setup of t/069 1, whose fix this goes around)
#      login_trust_search_path (login.c) keeps of the hook owner's login
#      search_path the schemas that schema_trusted_by finds owned by the
#      owner or a superuser, and treats only the entry "pg_temp" as the
#      temp schema (moved last).  A temp schema named by its own name
#      (pg_temp_6) is an ordinary schema to PostgreSQL's search path: it
#      stays where it is written, and its functions and operators are
#      searched (pg_temp's never are).  Every temp schema is owned by the
#      bootstrap superuser, so it is "trusted", yet any role with TEMP on
#      the database fills her own session's with what she likes.  mallory
#      copies tpl (where the superuser's app.job(int) has delay_fn
#      app.backoff, "SELECT attempt * interval '10 ms'"), makes in a
#      session of hers there pg_temp.*(integer, interval), whose function
#      runs ALTER ROLE mallory SUPERUSER, keeps that session open, and sets
#      ALTER DATABASE mc SET search_path = pg_temp_N (her session's temp
#      schema).  Her call app.job(-1) fails with RT001; the delay_fn runs
#      as the superuser under search_path "pg_temp_N, pg_temp"; her
#      operator, an exact match, beats pg_catalog's float8 * interval:
#      mallory is a superuser.  (A hook owned by a non-superuser is not
#      reached so: PostgreSQL leaves out of the path a schema the role has
#      no USAGE on, and a temp schema grants it to its owner only.)  A
#      fix: schema_trusted_by refuses every temp (and temp toast) schema
#      (isAnyTempNamespace).  Check 1.  (pg_catalog named first would not
#      do: it is searched first already, and an exact match elsewhere still
#      wins over its operator that needs a cast.)  With it, a schema in
#      which PUBLIC may create (public as before PostgreSQL 15, kept by
#      pg_upgrade) is no longer trusted either, whoever owns it: check 1b.
#   2. (Medium: a role with CREATEDB makes every database created after
#      hers get no worker, using empty databases that never had the
#      extension) read_databases (launcher.c) tracked at most
#      retries.max_databases databases: those served now, then the others
#      in pg_database's order.  Empty databases mallory made earlier
#      filled every place; a database made later (a tenant's, one restored
#      by pg_restore, a copy of a template with the extension), whoever
#      made it, never got a worker, its calls scheduled for good.  Fixed:
#      databases not looked at yet come before those found without the
#      extension, and take their entries (shmem_find_database), as CREATE
#      EXTENSION does; an empty database that gave its entry up is not
#      looked at again until CREATE EXTENSION.  Checks 2 and 2b.
#
# Held (lettered checks):
#   z. no backend or worker crashed.

use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RetriesTest;
use Test::More;

# pool_review_node's settings (the DEFAULTS of the pool), and
# retries.max_databases at its minimum, 16, for check 2
my $node = pool_review_node('review_33', 'retries.max_databases = 16');
my $log_offset = -s $node->logfile;

# ---------------------------------------------------------------------
# 1. a superuser's delay_fn in a copy of a template, under a search_path
#    that names mallory's session's temp schema by its own name
# ---------------------------------------------------------------------
$node->safe_psql('tpl', hooked_job_sql('app'));
as_role($node, 'postgres', 'mallory', 'CREATE DATABASE mc TEMPLATE tpl');
{
	my $held = $node->background_psql('mc', extra_params => [ '-U', 'mallory' ]);
	$held->query_safe(superuser_operator_sql('pg_temp'));
	my $tempns = $held->query_safe('SELECT pg_my_temp_schema()::regnamespace');
	$tempns =~ s/\s+//g;
	like($tempns, qr/^pg_temp_\d+$/, '1: (setup) mallory\'s session has its temp schema');
	as_role($node, 'mc', 'mallory', qq{ALTER DATABASE mc SET search_path = $tempns});
	hook_leaves_mallory($node, 'mc', 'app', '1',
		'the superuser\'s delay_fn did not run the operator of mallory\'s temp schema, named in the path, as the superuser');
	$held->quit;
}

# ---------------------------------------------------------------------
# 1b. a superuser's delay_fn under the login search_path ("$user",
#     public), where PUBLIC may create in public (as before PostgreSQL 15)
# ---------------------------------------------------------------------
$node->safe_psql('postgres', hooked_job_sql('app') . q{
GRANT CREATE ON SCHEMA public TO PUBLIC;
});
as_role($node, 'postgres', 'mallory', superuser_operator_sql('public'));
{
	hook_leaves_mallory($node, 'postgres', 'app', '1b',
		'the superuser\'s delay_fn did not run mallory\'s operator in public, where PUBLIC may create, as the superuser');
	$node->safe_psql('postgres', q{
DROP OPERATOR public.* (integer, interval);
DROP FUNCTION public.pwn(integer, interval);
REVOKE CREATE ON SCHEMA public FROM PUBLIC;
});
}

# ---------------------------------------------------------------------
# 2. empty databases of mallory's take every place of
#    retries.max_databases: a database made after them gets no worker
# ---------------------------------------------------------------------
my $db_call = sub {
	my ($db) = @_;
	$node->safe_psql('postgres', "CREATE DATABASE $db");
	$node->safe_psql($db, q{
CREATE EXTENSION retries;
SELECT retries.annotate('pg_catalog.now()');
});
	return $node->safe_psql($db, q{SELECT retries.call('pg_catalog.now()')});
};
my $early = $db_call->('early');
call_reaches($node, 'early', $early, 'succeeded',
	'2: (control) a call in a database made before mallory\'s databases runs');
my $nall = $node->safe_psql('postgres',
	'SELECT count(*) FROM pg_database WHERE datallowconn AND NOT datistemplate');
as_role($node, 'postgres', 'mallory',
	join("\n", map { "CREATE DATABASE m$_;" } 1 .. (17 - $nall)));
my $late = $db_call->('late');
call_reaches($node, 'late', $late, 'succeeded',
	'2: a call in a database made after mallory\'s empty databases runs');

# 2b. a copy of the template with the extension, made after them: no
#     CREATE EXTENSION wakes the launcher there, it is found as new
$node->safe_psql('postgres', 'CREATE DATABASE late2 TEMPLATE tpl');
{
	my $id = $node->safe_psql('late2', q{SELECT retries.call('app.job(int)', '[7]')});
	call_reaches($node, 'late2', $id, 'succeeded',
		'2b: a call in a copy of the template made after mallory\'s empty databases runs');
}

no_crash($node, $log_offset, 'z: no backend or worker crashed');

done_testing();
