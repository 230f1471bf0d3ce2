# The forty-eighth hostile review (rv49, of f3c08b3, by a reviewer who did
# not write the code), its Medium F2: the pool's cap counted a batch
# against the role whose calls it ran, not the role whose code it ran.
#
#   1. (Medium) mallory (CREATEDB) holds 15 of the pool's 16 places with
#      long calls of her own; alice calls mallory's function mal.util()
#      (USAGE and EXECUTE are PUBLIC's, as the defaults have them), which
#      mallory made slow, once in each of three databases.  Those three
#      batches counted as alice's, a fourth would have made her one of the
#      big roles, and the big ones held the cap already: none of alice's
#      own calls ran, in any database, for as long as mallory's code held
#      them (90 of 90 more than 2 s late, up to 36.8 s, in the reviewer's
#      runs).  Counting the batch against mallory alone would not do: her
#      calls of alice's function, which she can make slow (here it waits
#      for a lock of hers), would then count against alice's own.  Now a
#      batch of a role's calls of another role's code counts in two
#      accounts apart from both roles' own (shmem.c, "The pool's cap counts
#      batches in accounts"): the caller's calls of others' code and the
#      owner's code called by others, each capped as a role is; a call the
#      cap holds back is passed over by the claims while it does (turns.c,
#      held_claim), so that the caller's later calls are not held behind
#      it.  Checks 1 (alice's own calls run), 2 (her calls of mallory's
#      code run apart from mallory's own), 3 (mallory's calls of alice's
#      code, held at mallory's lock, run in three places, a quarter of the
#      pool less one, and cost alice's own calls nothing) and 4 (what
#      waited runs).
#   (Found while writing check 1) the databases where mallory's long
#      calls held both workers started an extra worker after extra, four
#      a second in all, each finding nothing, leaving and taking a place of
#      the pool a moment; alice's call due in a database whose two workers
#      held other calls waited for one 4-180 s (check 1, 1 in 3 runs).  Now
#      an extra that left with nothing to run is not replaced until a
#      commit or its database's next call or firing is due (launcher.c,
#      start_extra): 1.3-1.8 s in 6 of 6 runs, 8 extras started in the
#      whole test.
#
# Each check waits for a condition, with a deadline far above the "about a
# second" the reference promises; none assumes how fast the machine is.

use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Utils;
use Test::More;
use RetriesTest;

my $node = pool_review_node('review_41');
my $log_offset = -s $node->logfile;

# mallory: 15 long calls of her own, two in each of hog1..hog7, one in hog8
my ($gates, $held_sql) = cap_hogs($node, 8);
my @gates = @$gates;

# three databases of the superuser's where mallory has mal.util() (it
# waits at gate 78) and alice has alice.held() (at gate 79) and
# alice.quick(); each gate closed
my @shared = map { "w$_" } 1 .. 3;
$node->safe_psql('postgres', join('', map { "CREATE DATABASE $_ TEMPLATE tpl;\n" } @shared));
in_each($node, undef, \@shared, q{
CREATE SCHEMA mal AUTHORIZATION mallory;
CREATE SCHEMA alice AUTHORIZATION alice;
GRANT USAGE ON SCHEMA mal, alice TO PUBLIC});
in_each($node, 'mallory', \@shared,
	'CREATE FUNCTION mal.util() RETURNS boolean LANGUAGE sql AS $$SELECT '
	  . gate_sql(78) . q{$$;
SELECT retries.annotate('mal.util()', '1 10ms')});
in_each($node, 'alice', \@shared,
	'CREATE FUNCTION alice.held() RETURNS boolean LANGUAGE sql AS $$SELECT '
	  . gate_sql(79) . q{$$;
SELECT retries.annotate('alice.held()', '1 10ms');
CREATE TABLE alice.ran (at timestamptz DEFAULT clock_timestamp());
CREATE FUNCTION alice.quick() RETURNS void LANGUAGE sql AS 'INSERT INTO alice.ran DEFAULT VALUES';
SELECT retries.annotate('alice.quick()', '1 10ms')});
for my $db (@shared)
{
	push @gates, close_gate($node, $db, 78);
	push @gates, close_gate($node, $db, 79);
}

# mallory's calls of alice's function, which waits for mallory's lock
# (gate 79): two in each database; they count among mallory's calls of
# others' code, and alice's code called by others, neither alice's own
my $waiters_sql = sub {
	my ($key) = @_;
	return q{SELECT count(*) FROM pg_locks l JOIN pg_database d ON d.oid = l.database
  WHERE l.locktype = 'advisory' AND l.classid = 0 AND l.objsubid = 1 AND NOT l.granted}
	  . " AND d.datname ~ '^w[0-9]\$' AND l.objid = $key";
};
in_each($node, 'mallory', \@shared,
	q{SELECT count(retries.call('alice.held()')) FROM generate_series(1, 2)});
wait_until($node, 'postgres', $waiters_sql->(79), '3',
	"0: (setup) three of mallory's calls of alice's function run, waiting for mallory's lock");

# alice: a call of mallory's mal.util() in each database, then one of her
# own in each
in_each($node, 'alice', \@shared, q{SELECT retries.call('mal.util()')});
in_each($node, 'alice', \@shared, q{SELECT retries.call('alice.quick()')});

# 1. alice's own calls run, behind mallory's calls of alice's function
# that the cap holds back and her calls of mallory's function.
# Before the fix they waited for as long as mallory's code held the pool
# (alice's call of mallory's function counted as hers; counted against
# mallory instead, mallory's calls of alice's function would have counted
# against alice).
wait_each($node, \@shared, 'SELECT count(*) FROM alice.ran', '1',
	"1: alice's own calls run while mallory's code holds the pool's cap");

# 2. her calls of mallory's function run too, in the accounts of alice's
# calls of others' code and of mallory's code called by others, apart
# from mallory's own at the cap
wait_until($node, 'postgres', $waiters_sql->(78), '3',
	"2: alice's calls of mallory's function run apart from mallory's own calls");

# 3. mallory's calls of alice's code hold three places, and none more
# began: a fourth would make the account of mallory's calls of others'
# code big, and the big ones hold the cap already
is($node->safe_psql('postgres', $waiters_sql->(79)), '3',
	"3: mallory's calls of alice's function run in three places, a quarter of the pool less one");

# 4. once the gates open, every call runs: what the cap held back waited
# only
open_gate($_) for @gates;
for my $db (@shared)
{
	wait_until($node, $db,
		q{SELECT count(*) FROM retries.call_data WHERE state <> 'succeeded'}, '0',
		"4: every call in $db ran");
}

no_crash($node, $log_offset, 'z: no backend or worker crashed');
$node->stop;

done_testing();
