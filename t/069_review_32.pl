# Thirty-fifth hostile review (rv35, of 311eb60: the fixes of rv34, the
# owner's SQL with search_path pinned and dblink's connections closed at
# each change of context; issue 42, "whose code runs with whose rights";
# 45 minutes, by a reviewer who did not write the code).  alice is the
# victim, mallory an ordinary role (CREATEDB, as pool_review_node gives
# her).  The node runs the DEFAULTS of the pool (pool_review_node).
#
# Each numbered check failed on the code reviewed (inside a TODO block
# named "finding N"); fixed since, and plain checks now: 1 and 2 (a hook
# runs with its search_path kept to the schemas its owner may trust,
# pg_temp last: login_trust_search_path, from sandbox_enter), 3 (the
# role and session user that a database's settings name are set back to
# the worker's own as it connects: login_forget_own_settings).
#
# Findings:
#   1. (High: a role with CREATEDB becomes a superuser, given a template
#      with the extension in which a superuser annotated a function with a
#      hook, delay_fn or on_exhausted, that has no SET search_path; the
#      same makes her any role that annotated so there) a hook runs as the
#      owner of the annotated function "in a sandbox of its own as a login
#      session of that owner" (run_hook, verdict.c; sandbox_enter ->
#      login_apply_settings, login.c), and a login session takes the
#      DATABASE's settings.  mallory copies the template (CREATE DATABASE
#      mc TEMPLATE tpl: she owns the copy), sets ALTER DATABASE mc SET
#      search_path = mallory, pg_catalog, makes an operator mallory.*
#      (integer, interval) whose function runs ALTER ROLE mallory
#      SUPERUSER, and calls the superuser's app.job(int) (PUBLIC may
#      execute it) with an argument that fails it with RT001.  Its
#      delay_fn, the superuser's app.backoff(), is the ordinary
#      "SELECT attempt * interval '10 ms'": its operator * resolves to
#      hers, and runs as the superuser: mallory is a superuser.  No call,
#      schedule or setting of the superuser's ran in mc: the copy's first
#      worker cancels copied calls and pauses copied schedules (home.c),
#      but the copied annotations, whose hooks run as their owners, stay
#      armed, for mallory to fire under her settings at will (her restore
#      COPY of the same policy row is refused, operations.md: "a policy of
#      a superuser's function whose hook runs as its owner"; the copy
#      brings it unchecked).  The
#      documentation's line ("The database's settings are its owner's ...
#      give functions that run there SET search_path. She cannot bring
#      other roles' calls under her settings") asks the hook's author to
#      pin search_path; but the author wrote it in his own template, and
#      nothing of his ever chose to run in her database: she brings his
#      code, running with his rights, under her settings, and triggers it.
#      The second half of check 1 does the same with an annotation of
#      alice's in the template: mallory's operator runs as alice and
#      copies alice.secret's row (copied with the template) into
#      mallory.loot; the third, in a copy mc3, without ALTER DATABASE: as
#      the copy's owner mallory owns schema public (pg_database_owner's in
#      PostgreSQL 15), and under the default search_path her
#      public.*(integer, interval), an exact match, beats pg_catalog's
#      float8 * interval (the hook's integer needs a cast for it): the
#      documentation's own delay_fn example (reference.md, my_backoff:
#      attempt * interval '20 ms', no SET search_path) is that hook.
#      (By hand, on_exhausted the same: a plpgsql hook's "call_id > 0"
#      ran mallory.>(bigint, integer) as alice.)  A fix: run hooks (code
#      run as a role other than the caller, fired by the caller) with
#      search_path pinned (the hook's own SET, else pg_catalog, pg_temp),
#      which closes all three parts (leaving out the database's settings
#      alone would not close the third); or treat copied annotations with
#      hooks as copied calls are treated (not run in a copy until their
#      owner annotates again there); and document hooks as SECURITY
#      DEFINER-like, fixing the my_backoff example.  Check 1.
#   2. (Medium: PostgreSQL's own rule for a SECURITY DEFINER function,
#      but nowhere said of hooks, whose documented example breaks it;
#      High by its outcome: a superuser taken over) the same hooks, in the
#      database they were made in, under the DEFAULT search_path
#      ("$user", public): a role with CREATE on the database (no copy, no
#      ownership) makes a schema named after the hook's owner, here the
#      bootstrap superuser, and in it *(integer, interval), an exact match
#      that beats pg_catalog's float8 * interval.  Her call of the
#      superuser's app2.job(-1) runs its delay_fn app2.backoff
#      ("SELECT attempt * interval '10 ms'") as the superuser, and her
#      operator with it: ALTER ROLE mallory SUPERUSER.  A hook is run as
#      its owner whenever any role that may call the annotated function
#      makes it fail: it is a SECURITY DEFINER function in all but name,
#      and PostgreSQL's documentation asks those to SET search_path
#      ("$user" and public squatting: CVE-2018-1058); the extension's
#      reference says hooks run as the owner, and its delay_fn example
#      (my_backoff) has bare operators and no SET search_path.  The fix
#      of 1 (hooks run under a pinned search_path unless they SET their
#      own) closes it; or at least document hooks as SECURITY
#      DEFINER-like and warn at annotate.  Check 2.
#   3. (Medium: a promise of the documentation; the owner of the database
#      could also stop its workers more bluntly, ALLOW_CONNECTIONS false)
#      the database owner's ALTER DATABASE mdb SET role = 'mallory' and
#      SET session_authorization = 'mallory' (PostgreSQL accepts both
#      from her) reach every worker that connects to mdb after them: a
#      worker connects as the bootstrap superuser, for whom PostgreSQL
#      applies both at connection (it does so to a superuser's psql too),
#      so the worker's session user is mallory.  login_forget_own_settings
#      keeps the database's settings (apply_settings skips the two only
#      when the sandbox applies login settings, not at the worker's own
#      connection), and sandbox_leave goes back to that session user after
#      each attempt.  Every statement of the worker's own then fails
#      (permission denied for table function_names, home, call_data: the
#      server log), so no call of any role in mdb runs: alice's stays
#      scheduled, attempts 0, while the worker loops on its errors.
#      reference.md says two settings of hers "do not reach the workers'
#      own transactions ... otherwise her setting would stop or roll back
#      every role's batches"; these two do exactly that.  Check 3 (the
#      worker of mdb that connected before the settings is ended first;
#      the call waits up to 30 s).  By hand: in a database she owns she
#      may name any role for both (ALTER DATABASE mc SET
#      session_authorization = 'alice' is accepted: PostgreSQL checks
#      nothing then), and the next worker there shows usename alice.  A
#      fix: right after connecting, set the session authorization back to
#      the bootstrap superuser and role to none, and pin both (as
#      runner.c's pin_role does for runners); or leave the two out of
#      the database settings the worker keeps.
#
# Held (lettered checks):
#   b. bounded inputs, each refused before anything is stored, with a
#      precise SQLSTATE: a 3 MB key (54000), on_event and emit of 3 MB
#      (22023), a schedule's name, every and timezone of 3 MB (22023),
#      a retry_on of a million elements (22023).  (Overlaps t/061 f; kept
#      as a regression.)
#   c. next_runs in far POSIX zones with daylight-saving rules at the
#      limits PostgreSQL allows (offsets and rule times of +-167 hours,
#      Julian days), 10,000 instants of '* * * * *', each later than the one
#      before, and '59 23 31 12 *' near the end of year 9999 in
#      '<+167>-167': no hang, no crash, ascending instants.  (Overlaps
#      t/061 d.)
#   z. no backend or worker crashed.
# Order: 3, b, c, 1, 2, z (about 40 s, 30 of them check 3's wait for a
# call that does not run on this code; 1 and 2 make mallory a
# superuser and undo it at once).

use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RetriesTest;
use Test::More;

my $node = pool_review_node('review_32');
my $log_offset = -s $node->logfile;

# ---------------------------------------------------------------------
# 3. the database owner's role / session_authorization settings and the
#    workers that connect after them
# ---------------------------------------------------------------------
$node->safe_psql('postgres', 'CREATE DATABASE mdb TEMPLATE tpl OWNER mallory');
$node->safe_psql('mdb', q{
CREATE SCHEMA alice AUTHORIZATION alice;
SET ROLE alice;
CREATE FUNCTION alice.who() RETURNS text LANGUAGE sql
  AS $$SELECT current_user || '/' || session_user$$;
SELECT retries.annotate('alice.who()', max_attempts => 3);
});
as_role($node, 'mdb', 'mallory', q{
ALTER DATABASE mdb SET role = 'mallory';
ALTER DATABASE mdb SET session_authorization = 'mallory';
});
# the workers of mdb that connected before the settings go; the next one
# connects under them
my $stop_mdb_workers = sub {
	my ($name) = @_;
	$node->safe_psql('postgres', q{
SELECT pg_terminate_backend(pid) FROM pg_stat_activity
 WHERE datname = 'mdb' AND backend_type LIKE 'retries%'});
	wait_until($node, 'postgres', q{
SELECT count(*) FROM pg_stat_activity WHERE datname = 'mdb' AND backend_type LIKE 'retries%'},
		'0', $name);
};
$stop_mdb_workers->('3: (setup) no worker connected to mdb before the settings is left');
# alice's own login: PostgreSQL skips both for her (a WARNING each)
my $id = $node->safe_psql('mdb', q{SELECT retries.call('alice.who()')},
	extra_params => [ '-U', 'alice' ]);
ok($id =~ /^\d+$/, '3: alice made a call in mallory\'s database');
# read from another database's session: a superuser's new session in mdb is
# mallory's now (PostgreSQL's own rule)
{
	# "within 30 s" for "about a second" while the pool has room
	wait_until($node, 'mdb',
		"SELECT state FROM retries.call_data WHERE id = $id", 'succeeded',
		'3: alice\'s call succeeds under the owner\'s role and session_authorization settings',
		30);
	# (pg_stat_activity names the session user a backend had as it
	# connected, mallory's here: the worker is set back to its own after)
	is($node->safe_psql('mdb', "SELECT result #>> '{}' FROM retries.call_data WHERE id = $id"),
		'alice/alice', '3: alice\'s call ran as alice, its session user alice');
}
$node->safe_psql('postgres', 'ALTER DATABASE mdb RESET ALL');
$stop_mdb_workers->('3: (cleanup) the workers that took the settings are gone');
wait_until($node, 'mdb',
	"SELECT attempts || ' ' || (result #>> '{}') FROM retries.call_data WHERE id = $id",
	'1 alice/alice', '3: (control) once the settings are reset, alice\'s call runs once, as alice');

# ---------------------------------------------------------------------
# b. bounded inputs
# ---------------------------------------------------------------------
$node->safe_psql('postgres', q{
SET ROLE alice;
CREATE FUNCTION alice.g(i int) RETURNS int LANGUAGE sql AS 'SELECT i';
SELECT retries.annotate('alice.g(int)');
});
my @bounded = (
	[ q{SELECT retries.call('alice.g(int)', '[1]', key => repeat('k', 3000000))}, '54000', 'key' ],
	[ q{SELECT retries.call('alice.g(int)', '[1]', on_event => repeat('e', 3000000))}, '22023', 'on_event' ],
	[ q{SELECT retries.emit(repeat('e', 3000000))}, '22023', 'emit' ],
	[ q{SELECT retries.schedule(repeat('n', 3000000), 'alice.g(int)', '1h', '[1]')}, '22023', 'schedule name' ],
	[ q{SELECT retries.schedule('s1', 'alice.g(int)', repeat('1', 3000000), '[1]')}, '22023', 'every' ],
	[ q{SELECT retries.schedule('s2', 'alice.g(int)', '* * * * *', '[1]', timezone => repeat('A', 3000000))}, '22023', 'timezone' ],
	[ q{SELECT retries.annotate('alice.g(int)', retry_on => array_fill('RT001'::text, ARRAY[1000000]))}, '22023', 'retry_on' ],
);
for my $b (@bounded)
{
	my ($sql, $state, $what) = @$b;
	my ($out, $err) = try_as($node, 'postgres', 'alice', $sql);
	ok(!defined $out && $err =~ /ERROR:  $state:/, "b: a huge $what is refused with $state")
	  or diag($err);
}
is($node->safe_psql('postgres',
		q{SELECT (SELECT count(*) FROM retries.call_data) || ' ' || (SELECT count(*) FROM retries.schedule_data)}),
	'0 0', 'b: nothing was stored');

# ---------------------------------------------------------------------
# c. cron in far POSIX zones
# ---------------------------------------------------------------------
for my $zone ('<-167>+167<+167>,M3.2.0/-167,M11.1.0/167',
	'XXX-24YYY,M1.1.0/0,M12.5.6/24', 'A0B,M3.5.0/167,M3.5.1/-167')
{
	is($node->safe_psql('postgres', qq{
SELECT count(*) || ' ' || bool_and(r > p)::int
  FROM (SELECT r, lag(r, 1, '-infinity') OVER (ORDER BY o) AS p
          FROM retries.next_runs('* * * * *', '$zone', '2024-01-01', 10000)
               WITH ORDINALITY AS x(r, o)) s}),
		'10000 1', "c: 10,000 ascending instants in $zone");
}
is($node->safe_psql('postgres',
		q{SET TimeZone = 'UTC'; SELECT string_agg(r::text, ',') FROM retries.next_runs('59 23 31 12 *', '<+167>-167', '9999-12-20', 3) r}),
	'9999-12-25 00:59:00+00', 'c: the last instant of year 9999 in <+167>-167, and no more');

# ---------------------------------------------------------------------
# 1. a superuser's delay_fn in a copy of a template, under the copy
#    owner's search_path
# ---------------------------------------------------------------------
$node->safe_psql('tpl', hooked_job_sql('app'));
as_role($node, 'postgres', 'mallory', 'CREATE DATABASE mc TEMPLATE tpl');
as_role($node, 'mc', 'mallory', q{
CREATE SCHEMA mallory;
GRANT USAGE ON SCHEMA mallory TO PUBLIC;
} . superuser_operator_sql('mallory') . q{
ALTER DATABASE mc SET search_path = mallory, pg_catalog;
});
hook_leaves_mallory($node, 'mc', 'app', '1',
	'the superuser\'s delay_fn did not run mallory\'s operator as the superuser');
my $mid;

# ... and the same with alice's annotation in the template: mallory's
# operator runs as alice, and reads alice's table
$node->safe_psql('tpl', q{
CREATE SCHEMA alice AUTHORIZATION alice;
GRANT USAGE ON SCHEMA alice TO PUBLIC;
SET ROLE alice;
CREATE TABLE alice.secret (s text);
INSERT INTO alice.secret VALUES ('alice-secret-row');
CREATE FUNCTION alice.job(n int) RETURNS int LANGUAGE plpgsql AS $$
BEGIN
	IF n < 0 THEN RAISE EXCEPTION 'negative' USING ERRCODE = 'RT001'; END IF;
	RETURN n;
END $$;
CREATE FUNCTION alice.backoff(attempt integer, sqlstate text, message text)
  RETURNS interval LANGUAGE sql AS $$SELECT attempt * interval '10 ms'$$;
SELECT retries.annotate('alice.job(int)', max_attempts => 2,
						delay_fn => 'alice.backoff(integer,text,text)');
});
as_role($node, 'postgres', 'mallory', 'CREATE DATABASE mc2 TEMPLATE tpl');
as_role($node, 'mc2', 'mallory', q{
CREATE SCHEMA mallory;
GRANT USAGE ON SCHEMA mallory TO PUBLIC;
CREATE TABLE mallory.loot (who text, what text);
GRANT INSERT ON mallory.loot TO PUBLIC;
CREATE FUNCTION mallory.grab(integer, interval) RETURNS interval LANGUAGE plpgsql AS $$
BEGIN
	BEGIN
		INSERT INTO mallory.loot SELECT current_user, s FROM alice.secret;
	EXCEPTION WHEN insufficient_privilege THEN NULL;
	END;
	RETURN $2;
END $$;
CREATE OPERATOR mallory.* (LEFTARG = integer, RIGHTARG = interval, FUNCTION = mallory.grab);
ALTER DATABASE mc2 SET search_path = mallory, pg_catalog;
});
$mid = $node->safe_psql('mc2', q{SELECT retries.call('alice.job(int)', '[-1]')},
	extra_params => [ '-U', 'mallory' ]);
wait_until($node, 'mc2',
	"SELECT state IN ('succeeded', 'failed', 'cancelled') FROM retries.call_data WHERE id = $mid",
	't', '1: mallory\'s call of alice.job(-1) ended (its delay_fn ran once)');
{
	is($node->safe_psql('mc2', q{SELECT count(*) FROM mallory.loot}),
		'0', '1: alice\'s delay_fn did not run mallory\'s operator as alice (nothing of alice.secret in mallory.loot)');
}

# ... and without ALTER DATABASE: in her copy mallory owns schema public
# (pg_database_owner's), and under the default search_path ("$user",
# public) her public.*(integer, interval), an exact match, wins over
# pg_catalog's float8 * interval that the hook's integer would need a cast
# for
as_role($node, 'postgres', 'mallory', 'CREATE DATABASE mc3 TEMPLATE tpl');
as_role($node, 'mc3', 'mallory', q{
CREATE TABLE public.loot (who text, what text);
GRANT INSERT ON public.loot TO PUBLIC;
CREATE FUNCTION public.grab(integer, interval) RETURNS interval LANGUAGE plpgsql AS $$
BEGIN
	BEGIN
		INSERT INTO public.loot SELECT current_user, s FROM alice.secret;
	EXCEPTION WHEN insufficient_privilege THEN NULL;
	END;
	RETURN $2;
END $$;
CREATE OPERATOR public.* (LEFTARG = integer, RIGHTARG = interval, FUNCTION = public.grab);
});
$mid = $node->safe_psql('mc3', q{SELECT retries.call('alice.job(int)', '[-1]')},
	extra_params => [ '-U', 'mallory' ]);
wait_until($node, 'mc3',
	"SELECT state IN ('succeeded', 'failed', 'cancelled') FROM retries.call_data WHERE id = $mid",
	't', '1: in mc3, mallory\'s call of alice.job(-1) ended');
{
	is($node->safe_psql('mc3', q{SELECT count(*) FROM public.loot}),
		'0', '1: under the default search_path too, alice\'s delay_fn did not run mallory\'s public.* as alice');
}

# ---------------------------------------------------------------------
# 2. a superuser's delay_fn under the default search_path, whose "$user"
#    schema mallory made (CREATE on the database, no copy, no ownership)
# ---------------------------------------------------------------------
my $su = $node->safe_psql('postgres', 'SELECT current_user');
$node->safe_psql('postgres', hooked_job_sql('app2') . q{
GRANT CREATE ON DATABASE postgres TO mallory;
});
as_role($node, 'postgres', 'mallory', qq{
CREATE SCHEMA "$su";
GRANT USAGE ON SCHEMA "$su" TO PUBLIC;
} . superuser_operator_sql(qq{"$su"}));
hook_leaves_mallory($node, 'postgres', 'app2', '2',
	'the superuser\'s delay_fn did not run the operator of mallory\'s schema "$user" as the superuser');
$node->safe_psql('postgres', qq{DROP SCHEMA "$su" CASCADE; REVOKE CREATE ON DATABASE postgres FROM mallory});

no_crash($node, $log_offset, 'z: no backend or worker crashed');

done_testing();
