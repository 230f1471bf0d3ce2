# The forty-sixth hostile review (of 58e174f, by a reviewer who did not
# write the code), its Medium: the other roles' half of the pool
# (pool_extra) was open to a second attacking role.
#
#   1. (Medium) mallory (CREATEDB) holds 15 of the pool's 16 places with
#      long calls; the pool grows to 23 for the other roles.  eve, a second
#      ordinary role working with her, took the 7 places added and the 16th
#      with 8 long calls of her own (below her own cap, 15, and below the
#      half, so pool_extra did not count her).  No other role of the
#      cluster then had a place: alice's and bob's calls in six databases
#      ran 0 times in 40 s, then up to 46 s late, and bob's schedule every
#      second missed 58 firings, for as long as the two held their calls.
#      Now the big roles, each with a quarter of the pool or more (4 of
#      16), hold all places but one together, and a role that would become
#      big beyond that begins no batch (shmem.c, pool_refuses): eve runs
#      three, and the pool grows for the smaller roles by what the big ones
#      hold beyond half.  It takes four roles working together (one big and
#      three below a quarter, 15 + 3 + 3 + 2) to fill it.  Checks 1 and 2.
#      With REVIEW40_CONTROL=1 eve makes no calls.
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

my $control = $ENV{REVIEW40_CONTROL} // 0;
my $node = pool_review_node('review_40');
my $log_offset = -s $node->logfile;

$node->safe_psql('postgres', 'CREATE ROLE eve LOGIN');
# mallory: 15 long calls, two in each of hog1..hog7, one in hog8
my ($gates, $held_sql) = cap_hogs($node, 12);
my @gates = @$gates;

# eve: 8 calls, two in each of hog9..hog12 (mallory's databases; eve may
# connect and call the superuser's public.gated() there)
unless ($control)
{
	for my $i (9 .. 12)
	{
		as_role($node, "hog$i", 'eve',
			"SELECT count(retries.call('public.gated()')) FROM generate_series(1, 2)");
	}
	wait_until($node, 'postgres', $held_sql, '18',
		"0: (setup) eve's long calls run, three of them");
}

# the other roles: alice in postgres, bob in two databases of his
my @victims = ('postgres', 'bob1', 'bob2');
for my $db (@victims)
{
	my $role = $db eq 'postgres' ? 'alice' : 'bob';

	if ($db ne 'postgres')
	{
		$node->safe_psql('postgres', "CREATE DATABASE $db TEMPLATE tpl OWNER bob");
		$node->safe_psql($db, 'CREATE SCHEMA bob AUTHORIZATION bob');
	}
	as_role($node, $db, $role, qq{
CREATE TABLE $role.ran (at timestamptz DEFAULT clock_timestamp());
CREATE FUNCTION $role.quick() RETURNS void LANGUAGE sql AS 'INSERT INTO $role.ran DEFAULT VALUES';
SELECT retries.annotate('$role.quick()', '1 10ms');
SELECT retries.call('$role.quick()');
});
}

# 1. the other roles' calls run (the reference: "the other roles keep half
# the pool"; each started within about a second).  On 58e174f they wait for
# as long as mallory's and eve's calls run.
for my $db (@victims)
{
	my $role = $db eq 'postgres' ? 'alice' : 'bob';
	wait_until($node, $db, "SELECT count(*) FROM $role.ran", '1',
		"1: $role\'s call in $db runs beside two roles' long calls");
}

# 2. eve holds three places, no more: a fourth would make her one of the
# big roles, which hold all places but one already (mallory's fifteen)
is($node->safe_psql('postgres', $held_sql), $control ? '15' : '18',
	"2: eve holds three places beside mallory's fifteen (a quarter of the pool less one)");

open_gate($_) for @gates;
no_crash($node, $log_offset, 'z: no backend or worker crashed');
$node->stop;

done_testing();
