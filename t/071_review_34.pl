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
	q{SELECT count(*) = 0 FROM pg_stat_activity WHERE backend_type = 'retries worker'},
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
