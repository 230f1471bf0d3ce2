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
#      batch of a role's calls of another role's code counts in the
#      caller's account of calls of others' code, apart from its own
#      (shmem.c, "The pool's cap counts batches in accounts"), capped as a
#      role is; a call the cap holds back is passed over by the claims
#      while it does (turns.c, held_claim), so that the caller's later
#      calls are not held behind it.  Checks 1 (alice's own calls run), 2 (her calls of mallory's
#      code run apart from mallory's own), 3 (mallory's calls of alice's
#      code, held at mallory's lock, run in three places, a quarter of the
#      pool less one, and cost alice's own calls nothing) and 4 (what
#      waited runs).
#
# The forty-ninth review (rv50, of 82b5eb6, which counted such a batch in
# the owner's account of code called by others too):
#   5. (High) mallory's four calls of alice's function, waiting for her
#      lock, made that account big beside her eleven own long calls: no
#      other role's call of any of alice's functions began, in any
#      database, for as long as she held them (bob's 15 of 15, 114 s).
#      That account is gone.  Check 5.
#   6. (High) a database whose worker left a role's call of another
#      role's code held back was marked so, and the launcher kept the mark
#      across that role's commits, as for a role whose own calls the cap
#      holds back: bob's own calls there waited for as long as the cap
#      held (8 of 8, up to 11.8 s).  Now a commit there gets a worker
#      (launcher.c).  Check 6.
#   (High) an extra worker that left idle with nothing known due kept any
#      other from starting in its database for good: a commit while both
#      base workers were busy did not clear it, nor could a retry made by
#      another worker's batch; alice's calls waited 60-121 s.  Now commits
#      clear it, and it lasts 10 s at most (shmem.h,
#      RETRIES_EXTRA_IDLE_MS).
#   4. (Found writing the checks) alice's held call of mallory's
#      function in w4, its worker gone, did not run in 180 s after the cap
#      lifted, nothing else due there: a claim that skipped the calls held
#      back found nothing, and the worker left w4 as if nothing were due,
#      unmarked.  Now such a claim counts as one the cap refused (turns.c,
#      turns_claim_first).  Check 4 (w4).
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

# four databases of the superuser's where mallory has mal.util() (it
# waits at gate 78) and alice has alice.held() (at gate 79),
# alice.quick() and alice.hello(); each gate closed in w1..w3, where the
# calls below are made; w4 is left for checks 5 and 6
my @shared = map { "w$_" } 1 .. 3;
my @made = (@shared, 'w4');
$node->safe_psql('postgres', join('', map { "CREATE DATABASE $_ TEMPLATE tpl;\n" } @made));
in_each($node, undef, \@made, q{
CREATE SCHEMA mal AUTHORIZATION mallory;
CREATE SCHEMA alice AUTHORIZATION alice;
GRANT USAGE ON SCHEMA mal, alice TO PUBLIC});
in_each($node, 'mallory', \@made,
	'CREATE FUNCTION mal.util() RETURNS boolean LANGUAGE sql AS $$SELECT '
	  . gate_sql(78) . q{$$;
SELECT retries.annotate('mal.util()', '1 10ms')});
in_each($node, 'alice', \@made,
	'CREATE FUNCTION alice.held() RETURNS boolean LANGUAGE sql AS $$SELECT '
	  . gate_sql(79) . q{$$;
SELECT retries.annotate('alice.held()', '1 10ms');
CREATE TABLE alice.ran (at timestamptz DEFAULT clock_timestamp());
CREATE FUNCTION alice.quick() RETURNS void LANGUAGE sql AS 'INSERT INTO alice.ran DEFAULT VALUES';
SELECT retries.annotate('alice.quick()', '1 10ms');
CREATE FUNCTION alice.hello() RETURNS int LANGUAGE sql AS 'SELECT 1';
SELECT retries.annotate('alice.hello()', '1 10ms')});
for my $db (@shared)
{
	push @gates, close_gate($node, $db, 78);
	push @gates, close_gate($node, $db, 79);
}

# mallory's calls of alice's function, which waits for mallory's lock
# (gate 79): two in each database; they count among mallory's calls of
# others' code, not as alice's
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

# 2. her calls of mallory's function run too, in her account of calls of
# others' code, apart from mallory's own at the cap
wait_until($node, 'postgres', $waiters_sql->(78), '3',
	"2: alice's calls of mallory's function run apart from mallory's own calls");

# 3. mallory's calls of alice's code hold three places, and none more
# began: a fourth would make the account of mallory's calls of others'
# code big, and the big ones hold the cap already
is($node->safe_psql('postgres', $waiters_sql->(79)), '3',
	"3: mallory's calls of alice's function run in three places, a quarter of the pool less one");

# 5. (the forty-ninth review, F1) bob's call of alice's function runs, in
# w4, where no call runs: mallory's calls of alice's function, made slow
# by her lock, count as hers, not against alice's code (counted there,
# they held every other role's calls of alice's functions back while she
# held the cap)
my $hello = as_role($node, 'w4', 'bob', q{SELECT retries.call('alice.hello()')});
call_reaches($node, 'w4', $hello, 'succeeded',
	"5: bob's call of alice's function runs beside mallory's calls of alice's code");

# 6. (the forty-ninth review, F3) alice's fourth call of mallory's
# function, in w4, is held back (her account of calls of others' code
# would be big), and w4's worker leaves it so; then alice's commit of a
# call of her own there gets a worker: the cap holds back her calls of
# mallory's code, not her own (the launcher kept the database's mark
# across her commits, as for a role whose own calls the cap holds back)
my $held4 = as_role($node, 'w4', 'alice', q{SELECT retries.call('mal.util()')});
wait_until($node, 'postgres',
	"SELECT count(*) FROM pg_stat_activity WHERE backend_type ~ '^retries' AND datname = 'w4'",
	'0', "6: (setup) w4's worker leaves alice's call of mallory's function held back");
is($node->safe_psql('w4', "SELECT state FROM retries.call_data WHERE id = $held4"), 'scheduled',
	"6: (setup) alice's call of mallory's function waits in w4");
as_role($node, 'w4', 'alice', q{SELECT retries.call('alice.quick()')});
wait_until($node, 'w4', 'SELECT count(*) FROM alice.ran', '1',
	"6: alice's own call runs where her call of mallory's function is held back");

# 4. once the gates open, every call runs: what the cap held back waited
# only, alice's held call in w4 too, its worker gone
open_gate($_) for @gates;
for my $db (@shared, 'w4')
{
	wait_until($node, $db,
		q{SELECT count(*) FROM retries.call_data WHERE state <> 'succeeded'}, '0',
		"4: every call in $db ran");
}

no_crash($node, $log_offset, 'z: no backend or worker crashed');
$node->stop;

done_testing();
