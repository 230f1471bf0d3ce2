# The sandbox: a hostile role against the other roles' calls and against the
# worker that runs them all.  doc/operations.md, "Isolation: every call in
# a session of its own".
#
# One worker (retries.max_workers = 1) and batches of up to 10 calls, so
# that an attacker's call and a victim's call run one after the other in
# the same worker process, in the same batch transaction.  run_calls()
# pauses execution, schedules the calls in order, each in a transaction of
# its own (so each is due after the one before), and lets the worker run
# them.  The attacker and the victim are ordinary LOGIN roles that own their
# schemas, tables and functions; the test's superuser sets up and inspects.
#
# What the attacker tries, and what must come of it:
#   - code that runs later, as the worker: deferred constraint triggers,
#     WITH HOLD cursors, also from on_exhausted and delay_fn: it runs as
#     the attacker, inside the attempt, or not at all; the attacker never
#     becomes a superuser;
#   - SET ROLE and co inside a call or a hook: refused, 42501;
#   - the worker's claim cursor: invisible in pg_cursors, cannot be read,
#     closed or replaced by forged rows (which, with a non-jsonb args
#     column, crashed the server: that test comes last);
#   - state left for the next call: search_path, settings, temp tables
#     (one that captures the README's charge()), prepared statements,
#     advisory locks, sequences' currval/lastval, cursors, large-object
#     descriptors, read-only transactions: gone at the end of each attempt
#     (LISTEN PostgreSQL itself refuses in a worker), and the worker's own
#     bookkeeping carries on;
#   - a deferred error: it fails that call's attempt only, never its
#     batch-mates;
#   - reg* arguments: stored schema-qualified, they name the same object
#     whatever search_path the worker has;
#   - a role without TEMP after one with it: no temp table;
# and each attempt starts with the settings a login session of its role
# would have (ALTER DATABASE / ROLE / ROLE IN DATABASE ... SET).
#
# public.probe(tag) records what a call sees of its session (public.seen);
# attacker.escalate(what) records who ran it, and tries to make the
# attacker a superuser (public.trail).  Last, the server log must show no
# crash.
#
# For development, RETRIES_SANDBOX_ONLY=REGEX runs only the sections whose
# names match (the setup always runs).

use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RetriesTest;
use Test::More;
use Time::HiRes qw(time usleep);

my $DB = 'postgres';
# how long the calls of one scenario may take to finish, and anything else
# the test waits for: only a failing test waits that long
my $CALLS_DEADLINE = $RetriesTest::DEADLINE;

my $node = retries_node('sandbox');
$node->append_conf(
	'postgresql.conf', q{
retries.max_workers = 1
retries.batch_size = 10
# a server setting every call must see
gin_fuzzy_search_limit = 123
});
$node->start;
my $t_start = time();

# the bootstrap superuser, which the worker is
my $su = $node->safe_psql($DB, 'SELECT rolname FROM pg_roles WHERE oid = 10');

###########################################################################
# helpers
###########################################################################

# lit(TEXT): TEXT as an SQL string literal
sub lit
{
	my ($text) = @_;
	$text =~ s/'/''/g;
	return "'$text'";
}

# sql(SQL, [ROLE]): run SQL (as ROLE if given), return its output.  While
# the server does not take connections (a crash restart, the attack of the
# last section on a server that has the bug), it tries again until the
# deadline.
sub sql
{
	my ($sql, $role) = @_;
	my $prefix = defined $role ? "SET ROLE $role;\n" : '';
	my $until = time() + $RetriesTest::DEADLINE;
	for (;;)
	{
		my ($out, $err) = query_value($node, $DB, $prefix . $sql);
		return $out if defined $out;
		die "query failed: $sql\n$err"
		  if time() > $until
		  || $err !~ /could not connect|connection to server|the database system is|
					  server closed the connection|terminating connection|
					  Broken\ pipe|no\ connection\ to\ the\ server/x;
		usleep(200_000);    # poll
	}
}

# poll(SQL, EXPECTED, SECONDS): run SQL every 50 ms until it gives
# EXPECTED; whether it did, and the last output (no test of its own)
sub poll
{
	my ($sql, $expected, $seconds) = @_;
	my $until = time() + $seconds;
	my $poll = poller($node, $DB);
	my ($out, $err);
	for (;;)
	{
		($out, $err) = $poll->($sql);
		last if defined $out && $out eq $expected;
		last if time() > $until;
		usleep(50_000);    # poll
	}
	$poll->();
	return (1, $out) if defined $out && $out eq $expected;
	return (0, $out // "(error: " . ($err // '') . ")");
}

sub set_enabled
{
	my ($on) = @_;
	sql("ALTER SYSTEM SET retries.enabled = $on;\nSELECT pg_reload_conf();");
	return;
}

# pause(): execution off, and the worker has seen it; whether it has
sub pause
{
	set_enabled('off');
	my ($ok, $out) = poll("SELECT string_agg(state, ',') FROM retries.workers",
		'paused', $RetriesTest::DEADLINE);
	note("the worker did not pause: $out") unless $ok;
	return $ok;
}

sub resume
{
	set_enabled('on');
	return;
}

# schedule(ROLE, FN, ARGS, [SETUP]): schedule FN with ARGS (JSON text) as
# ROLE (undef: the superuser), after SETUP (SQL) in the same session; the
# call id
sub schedule
{
	my ($role, $fn, $args, $setup) = @_;
	$setup = defined $setup ? "$setup;\n" : '';
	return sql("${setup}SELECT retries.call('$fn', " . lit($args) . ')', $role);
}

# wait_done(IDS...): whether the calls all finished (succeeded, failed or
# cancelled) within the deadline
sub wait_done
{
	my @ids = @_;
	my $list = join(',', @ids);
	my ($ok, $out) = poll(
		"SELECT count(*) FROM retries.calls WHERE id IN ($list)"
		  . " AND state IN ('succeeded', 'failed', 'cancelled')",
		scalar(@ids), $CALLS_DEADLINE);
	unless ($ok)
	{
		diag("calls $list: only $out finished within $CALLS_DEADLINE s:\n"
			  . sql("SELECT string_agg(id || ' ' || state || ' ' || attempts || ' '"
				  . " || coalesce(last_sqlstate, '-') || ' ' || coalesce(last_message, ''),"
				  . " E'\\n' ORDER BY id) FROM retries.calls WHERE id IN ($list)"));
	}
	return $ok;
}

# run_calls(CALLS...): with execution paused, schedule the calls (each an
# array [ROLE, FN, ARGS, SETUP] as schedule() takes) in order, then let the
# worker run them; a test that they all finish; their ids
sub run_calls
{
	my @calls = @_;
	# (a worker that still ran would take each call as it is made)
	pause() or die "the worker did not pause\n";
	my @ids = map { schedule(@$_) } @calls;
	resume();
	ok(wait_done(@ids), 'the calls finish (' . join(', ', map { $_->[1] } @calls) . ')');
	note('calls ' . join(', ', @ids) . '; probes ran in worker '
		  . sql("SELECT coalesce(string_agg(DISTINCT state->>'pid', ', '), '-') FROM public.seen"
			  . " WHERE call IN (" . join(',', @ids) . ")"));
	return @ids;
}

# run_later(CALLS...): schedule the calls now (execution on) and wait for
# them; their ids
sub run_later
{
	my @ids = map { schedule(@$_) } @_;
	ok(wait_done(@ids), 'the later calls finish');
	return @ids;
}

# status(ID): 'state attempts last_sqlstate'
sub status
{
	my ($id) = @_;
	return sql("SELECT state || ' ' || attempts || ' ' || coalesce(last_sqlstate, '-')"
		  . " FROM retries.calls WHERE id = $id");
}

# seen(TAG, FIELD): what the probe tagged TAG saw of FIELD ('(no probe)'
# if the probe recorded nothing, '(null)' for NULL)
sub seen
{
	my ($tag, $field) = @_;
	my $out = sql("SELECT '=' || coalesce(state->>'$field', '(null)') FROM public.seen"
		  . " WHERE tag = " . lit($tag));
	return $out eq '' ? '(no probe)' : substr($out, 1);
}

# seen_is(TAG, {FIELD => EXPECTED, ...}, NAME): one test per field
sub seen_is
{
	my ($tag, $expected, $name) = @_;
	for my $field (sort keys %$expected)
	{
		is(seen($tag, $field), $expected->{$field}, "$name: $field");
	}
	return;
}

# trail(PREFIX): what was recorded under PREFIX, in order: 'who: what; ...'
sub trail
{
	my ($prefix) = @_;
	return sql("SELECT coalesce(string_agg(who || ': ' || what, '; ' ORDER BY at), '')"
		  . " FROM public.trail WHERE what LIKE " . lit("$prefix%"));
}

sub not_superuser
{
	is(sql("SELECT rolsuper FROM pg_roles WHERE rolname = 'attacker'"),
		'f', 'the attacker is not a superuser');
	return;
}

# words(W): how many times victim.words holds W
sub words
{
	my ($w) = @_;
	return sql("SELECT count(*) FROM victim.words WHERE w = " . lit($w));
}

# fresh_worker(): stop the worker and wait for the launcher to start
# another (after a failed section, so that what the attack left in the
# worker does not make the next sections fail for the wrong reason)
sub fresh_worker
{
	my $old = worker_pids($node, $DB);
	sql("SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
		  . " WHERE backend_type = 'retries worker'");
	my ($ok, $out) = poll(
		"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'retries worker'"
		  . ($old ne '' ? " AND pid NOT IN ($old)" : ''),
		'1', $RetriesTest::DEADLINE);
	note($ok ? 'a fresh worker started' : "no fresh worker: $out");
	return;
}

my @timings;

# skipped(NAME): whether RETRIES_SANDBOX_ONLY (a regular expression, for
# development) leaves out the section named NAME
sub skipped
{
	my ($name) = @_;
	return $ENV{RETRIES_SANDBOX_ONLY} && $name !~ /$ENV{RETRIES_SANDBOX_ONLY}/;
}

# section(NAME, CODE): one subtest; if it fails, the worker is replaced and
# whatever it left scheduled is cancelled
sub section
{
	my ($name, $code) = @_;
	return 1 if skipped($name);
	my $t0 = time();
	my $ok = subtest(
		$name,
		sub {
			# a section that dies fails, and the next ones still run
			eval { $code->(); 1 } or fail("the section died: $@");
		});
	my $secs = time() - $t0;
	push @timings, sprintf('%-4s %5.1f s  %s', $ok ? 'ok' : 'FAIL', $secs, $name);
	if (!$ok)
	{
		pause();
		fresh_worker();
		sql("SELECT count(retries.cancel(id)) FROM retries.calls WHERE state = 'scheduled'");
		sql('ALTER ROLE attacker NOSUPERUSER');
		resume();
	}
	return $ok;
}

# until_probe(NAME, ROLE, FN, CHECK, EXPECTED): schedule FN(tag) as ROLE
# again and again, each once the one before finished, until CHECK(id, tag)
# gives EXPECTED (or the deadline passes); one test.  For settings that
# calls see from the batch that starts after the change, however long
# that takes.
sub until_probe
{
	my ($name, $role, $fn, $check, $expected) = @_;
	my $until = time() + $RetriesTest::DEADLINE;
	my ($n, $got) = (0, '');
	while (time() < $until)
	{
		my $tag = "$name #" . ++$n;
		my $id = schedule($role, $fn, qq{["$tag"]});
		last unless wait_done($id);
		$got = $check->($id, $tag);
		return pass("$name (after $n calls)") if $got eq $expected;
		usleep(100_000);    # poll
	}
	fail($name);
	diag("after $n calls: got $got, expected $expected");
	return 0;
}

###########################################################################
# setup
###########################################################################

sql(q{
CREATE EXTENSION retries;
CREATE ROLE attacker LOGIN;
CREATE ROLE victim LOGIN;
-- as in a database from before PostgreSQL 15: anyone may create in public
GRANT CREATE ON SCHEMA public TO PUBLIC;
CREATE SCHEMA attacker AUTHORIZATION attacker;
CREATE SCHEMA victim AUTHORIZATION victim;
CREATE SCHEMA vict AUTHORIZATION victim;

-- who ran what (everyone may write; only the test reads it)
CREATE TABLE public.trail (who name NOT NULL, call bigint, what text NOT NULL,
	at timestamptz NOT NULL DEFAULT clock_timestamp());
GRANT SELECT, INSERT ON public.trail TO PUBLIC;

-- what calls see of their session
CREATE TABLE public.seen (tag text PRIMARY KEY, call bigint, state jsonb NOT NULL);
GRANT SELECT, INSERT ON public.seen TO PUBLIC;
CREATE SEQUENCE public.counter;
GRANT USAGE ON SEQUENCE public.counter TO PUBLIC;

CREATE FUNCTION public.probe(tag text) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
	s jsonb;
	v text;
BEGIN
	s := jsonb_build_object(
		'user', current_user::text,
		'pid', pg_backend_pid(),
		'search_path', current_setting('search_path'),
		'work_mem', current_setting('work_mem'),
		'maintenance_work_mem', current_setting('maintenance_work_mem'),
		'lock_timeout', current_setting('lock_timeout'),
		'statement_timeout', current_setting('statement_timeout'),
		'gin_fuzzy_search_limit', current_setting('gin_fuzzy_search_limit'),
		'read_only', current_setting('transaction_read_only'),
		'default_read_only', current_setting('default_transaction_read_only'),
		'temp', (SELECT count(*) FROM pg_class
				  WHERE relnamespace = pg_my_temp_schema()),
		'cursors', coalesce((SELECT string_agg(name, ',' ORDER BY name)
							   FROM pg_cursors), ''),
		'prepared', coalesce((SELECT string_agg(name, ',' ORDER BY name)
								FROM pg_prepared_statements), ''),
		'listening', coalesce((SELECT string_agg(c, ',' ORDER BY c)
								 FROM pg_listening_channels() c), ''),
		'advisory', (SELECT count(*) FROM pg_locks
					  WHERE locktype = 'advisory' AND pid = pg_backend_pid()));
	BEGIN v := lastval()::text; EXCEPTION WHEN OTHERS THEN v := SQLSTATE; END;
	s := s || jsonb_build_object('lastval', v);
	BEGIN v := currval('public.counter')::text; EXCEPTION WHEN OTHERS THEN v := SQLSTATE; END;
	s := s || jsonb_build_object('currval', v);
	BEGIN v := convert_from(loread(0, 10), 'UTF8'); EXCEPTION WHEN OTHERS THEN v := SQLSTATE; END;
	s := s || jsonb_build_object('loread', v);
	BEGIN EXECUTE 'EXECUTE leak_stmt'; v := 'executed'; EXCEPTION WHEN OTHERS THEN v := SQLSTATE; END;
	s := s || jsonb_build_object('execute', v);
	BEGIN EXECUTE 'MOVE NEXT IN leak_cur'; v := 'moved'; EXCEPTION WHEN OTHERS THEN v := SQLSTATE; END;
	s := s || jsonb_build_object('move', v);
	INSERT INTO public.seen VALUES (tag, retries.current_call(), s);
END $$;
SELECT retries.annotate('public.probe(text)', '1 10ms');
-- the same, with a SET clause of its own
CREATE FUNCTION public.probe_set(tag text) RETURNS void LANGUAGE sql
SET work_mem = '8MB' AS $$ SELECT public.probe(tag) $$;
SELECT retries.annotate('public.probe_set(text)', '1 10ms');

-- the README's quick start, the superuser's
CREATE TABLE payments (order_id bigint PRIMARY KEY, amount numeric NOT NULL);
CREATE FUNCTION charge(order_id bigint, amount numeric) RETURNS void
LANGUAGE sql AS $$ INSERT INTO payments VALUES (order_id, amount) $$;
SELECT retries.annotate('charge(bigint,numeric)', '5 1s 1m',
						retry_on => '{40001, 40P01}');
});

# the victim: its own schemas, tables and functions
sql(q{
CREATE TABLE victim.words (w text NOT NULL);
-- upper() as its session finds it
CREATE FUNCTION victim.shout(t text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO victim.words VALUES (upper(t));
END $$;
-- words as its session finds it ("$user" first)
CREATE FUNCTION victim.note(w text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO words VALUES (w);
END $$;
CREATE FUNCTION victim.work(w text) RETURNS void LANGUAGE sql AS
	$$ INSERT INTO victim.words VALUES (w) $$;
CREATE FUNCTION victim.v_temp(name text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE format('CREATE TEMP TABLE %I (x int)', name);
END $$;
SELECT retries.annotate('victim.shout(text)', '1 10ms');
SELECT retries.annotate('victim.note(text)', '1 10ms');
SELECT retries.annotate('victim.work(text)', '1 10ms');
SELECT retries.annotate('victim.v_temp(text)', '1 10ms');

-- reg* arguments: objects of schema vict, which the victim's session has
-- on its search_path when it schedules, and the worker has not
CREATE TABLE vict.ledger (t oid, p oid, f oid, ty oid, amount int);
CREATE FUNCTION vict.fmt(n int) RETURNS text LANGUAGE sql AS $$ SELECT 'vict' $$;
CREATE TYPE vict.kind AS ENUM ('v');
CREATE FUNCTION vict.post(t regclass, p regproc, f regprocedure, ty regtype,
						  amount int) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE format('INSERT INTO %s VALUES ($1, $2, $3, $4, $5)', t)
		USING t::oid, p::oid, f::oid, ty::oid, amount;
END $$;
SELECT retries.annotate('vict.post(regclass,regproc,regprocedure,regtype,int)', '1 10ms');
}, 'victim');

# the attacker
my $attacker_sql = q{
GRANT USAGE ON SCHEMA attacker TO PUBLIC;

-- records who runs it, and tries to make the attacker a superuser
CREATE FUNCTION attacker.escalate(what text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO public.trail (who, call, what)
		VALUES (current_user, retries.current_call(), what);
	BEGIN
		ALTER ROLE attacker SUPERUSER;
		INSERT INTO public.trail (who, call, what)
			VALUES (current_user, retries.current_call(), what || ': became superuser');
	EXCEPTION WHEN insufficient_privilege THEN
		INSERT INTO public.trail (who, call, what)
			VALUES (current_user, retries.current_call(), what || ': refused');
	END;
END $$;
CREATE FUNCTION attacker.bait_trigger() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	PERFORM attacker.escalate(NEW.tag);
	RETURN NULL;
END $$;

-- a deferred constraint trigger, and a plain one
CREATE TABLE attacker.bait (tag text);
CREATE CONSTRAINT TRIGGER bait_deferred AFTER INSERT ON attacker.bait
	DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION attacker.bait_trigger();
CREATE TABLE attacker.bait_now (tag text);
CREATE TRIGGER bait_now AFTER INSERT ON attacker.bait_now
	FOR EACH ROW EXECUTE FUNCTION attacker.bait_trigger();
CREATE FUNCTION attacker.a_deferred(tag text) RETURNS void LANGUAGE sql AS
	$$ INSERT INTO attacker.bait VALUES (tag) $$;
SELECT retries.annotate('attacker.a_deferred(text)', '1 10ms');

-- a deferred trigger that does not catch the refusal
CREATE FUNCTION attacker.raw_trigger() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO public.trail (who, call, what)
		VALUES (current_user, retries.current_call(), NEW.tag);
	ALTER ROLE attacker SUPERUSER;
	RETURN NULL;
END $$;
CREATE TABLE attacker.bait_raw (tag text);
CREATE CONSTRAINT TRIGGER bait_raw AFTER INSERT ON attacker.bait_raw
	DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION attacker.raw_trigger();
CREATE FUNCTION attacker.a_deferred_raw(tag text) RETURNS void LANGUAGE sql AS
	$$ INSERT INTO attacker.bait_raw VALUES (tag) $$;
SELECT retries.annotate('attacker.a_deferred_raw(text)', '1 10ms');

-- a WITH HOLD cursor over escalate(), one row of it fetched
CREATE FUNCTION attacker.a_hold(tag text) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
	c refcursor := 'hold_cur';
	r record;
BEGIN
	EXECUTE format('DECLARE hold_cur CURSOR WITH HOLD FOR'
				   ' SELECT attacker.escalate(%L || g) FROM generate_series(1, 3) g',
				   tag || ' row ');
	FETCH c INTO r;
END $$;
SELECT retries.annotate('attacker.a_hold(text)', '1 10ms');

-- the attacker's code: its own table's trigger, a domain check, a default
CREATE FUNCTION attacker.chk(v int) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO public.trail (who, call, what)
		VALUES (current_user, retries.current_call(), 'F domain check');
	RETURN true;
END $$;
CREATE DOMAIN attacker.checked AS int CHECK (attacker.chk(VALUE));
CREATE FUNCTION attacker.dflt() RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO public.trail (who, call, what)
		VALUES (current_user, retries.current_call(), 'F default');
	RETURN 'F row trigger';
END $$;
CREATE FUNCTION attacker.a_code(v attacker.checked, tag text DEFAULT attacker.dflt())
RETURNS void LANGUAGE sql AS $$ INSERT INTO attacker.bait_now VALUES (tag) $$;
SELECT retries.annotate('attacker.a_code(attacker.checked,text)', '1 10ms');

-- SET ROLE and co, each followed by an escalation
CREATE FUNCTION attacker.r_set_role(tag text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	SET ROLE @SU@;
	PERFORM attacker.escalate(tag);
END $$;
CREATE FUNCTION attacker.r_set_local_role(tag text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	SET LOCAL ROLE @SU@;
	PERFORM attacker.escalate(tag);
END $$;
CREATE FUNCTION attacker.r_session_authorization(tag text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	SET SESSION AUTHORIZATION @SU@;
	PERFORM attacker.escalate(tag);
END $$;
CREATE FUNCTION attacker.r_set_config(tag text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	PERFORM set_config('role', '@SU@', false);
	PERFORM attacker.escalate(tag);
END $$;
CREATE FUNCTION attacker.r_set_config_auth(tag text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	PERFORM set_config('session_authorization', '@SU@', false);
	PERFORM attacker.escalate(tag);
END $$;
CREATE FUNCTION attacker.r_execute(tag text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE format('SET ROLE %I', (SELECT rolname FROM pg_roles WHERE oid = 10));
	PERFORM attacker.escalate(tag);
END $$;
SELECT retries.annotate('attacker.r_set_role(text)', '1 10ms');
SELECT retries.annotate('attacker.r_set_local_role(text)', '1 10ms');
SELECT retries.annotate('attacker.r_session_authorization(text)', '1 10ms');
SELECT retries.annotate('attacker.r_set_config(text)', '1 10ms');
SELECT retries.annotate('attacker.r_set_config_auth(text)', '1 10ms');
SELECT retries.annotate('attacker.r_execute(text)', '1 10ms');

-- hooks: on_exhausted (after a non-retryable error) and delay_fn (after a
-- retryable one; NULL stops the retries)
CREATE FUNCTION attacker.fails(tag text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	RAISE EXCEPTION 'fails on purpose';
END $$;
CREATE FUNCTION attacker.retries(tag text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	RAISE EXCEPTION 'retry on purpose' USING ERRCODE = 'RT001';
END $$;
CREATE FUNCTION attacker.x_oe_bait(tag text) RETURNS void LANGUAGE sql AS
	$$ SELECT attacker.fails(tag) $$;
CREATE FUNCTION attacker.h_oe_bait(call_id bigint) RETURNS void LANGUAGE sql AS
	$$ INSERT INTO attacker.bait VALUES ('I1 on_exhausted deferred') $$;
SELECT retries.annotate('attacker.x_oe_bait(text)', '1 10ms',
						on_exhausted => 'attacker.h_oe_bait(bigint)');
CREATE FUNCTION attacker.x_df_bait(tag text) RETURNS void LANGUAGE sql AS
	$$ SELECT attacker.retries(tag) $$;
CREATE FUNCTION attacker.h_df_bait(a int, s text, m text) RETURNS interval
LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO attacker.bait VALUES ('I3 delay_fn deferred');
	RETURN NULL;
END $$;
SELECT retries.annotate('attacker.x_df_bait(text)', '2 10ms',
						delay_fn => 'attacker.h_df_bait(int,text,text)');
CREATE FUNCTION attacker.x_oe_role(tag text) RETURNS void LANGUAGE sql AS
	$$ SELECT attacker.fails(tag) $$;
CREATE FUNCTION attacker.h_oe_role(call_id bigint) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	SET ROLE @SU@;
	PERFORM attacker.escalate('I5 on_exhausted after SET ROLE');
END $$;
SELECT retries.annotate('attacker.x_oe_role(text)', '1 10ms',
						on_exhausted => 'attacker.h_oe_role(bigint)');
CREATE FUNCTION attacker.x_df_role(tag text) RETURNS void LANGUAGE sql AS
	$$ SELECT attacker.retries(tag) $$;
CREATE FUNCTION attacker.h_df_role(a int, s text, m text) RETURNS interval
LANGUAGE plpgsql AS $$
BEGIN
	SET ROLE @SU@;
	PERFORM attacker.escalate('I5 delay_fn after SET ROLE');
	RETURN interval '10 ms';
END $$;
SELECT retries.annotate('attacker.x_df_role(text)', '2 10ms',
						delay_fn => 'attacker.h_df_role(int,text,text)');

-- search_path: a planted upper(), and three ways to put it first
CREATE FUNCTION attacker.upper(t text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	PERFORM attacker.escalate('upper hijacked');
	RETURN 'HIJACKED';
END $$;
CREATE FUNCTION attacker.a_path(tag text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	PERFORM set_config('search_path', 'attacker, pg_catalog, public', false);
END $$;
SELECT retries.annotate('attacker.a_path(text)', '1 10ms');
CREATE FUNCTION attacker.x_oe_path(tag text) RETURNS void LANGUAGE sql AS
	$$ SELECT attacker.fails(tag) $$;
CREATE FUNCTION attacker.h_oe_path(call_id bigint) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	PERFORM set_config('search_path', 'attacker, pg_catalog, public', false);
END $$;
SELECT retries.annotate('attacker.x_oe_path(text)', '1 10ms',
						on_exhausted => 'attacker.h_oe_path(bigint)');
CREATE FUNCTION attacker.x_df_path(tag text) RETURNS void LANGUAGE sql AS
	$$ SELECT attacker.retries(tag) $$;
CREATE FUNCTION attacker.h_df_path(a int, s text, m text) RETURNS interval
LANGUAGE plpgsql AS $$
BEGIN
	PERFORM set_config('search_path', 'attacker, pg_catalog, public', false);
	RETURN NULL;
END $$;
SELECT retries.annotate('attacker.x_df_path(text)', '2 10ms',
						delay_fn => 'attacker.h_df_path(int,text,text)');

-- settings, session and local
CREATE FUNCTION attacker.a_settings(tag text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	SET work_mem = '64MB';
	PERFORM set_config('lock_timeout', '3s', false);
	SET LOCAL maintenance_work_mem = '99MB';
	PERFORM set_config('statement_timeout', '5min', true);
END $$;
SELECT retries.annotate('attacker.a_settings(text)', '1 10ms');

-- temp tables: one plain, and two that capture what others insert
CREATE FUNCTION attacker.a_temp(name text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE format('CREATE TEMP TABLE %I (x int)', name);
END $$;
SELECT retries.annotate('attacker.a_temp(text)', '1 10ms');
CREATE TABLE attacker.loot (who name, tbl text, data text);
GRANT INSERT ON attacker.loot TO PUBLIC;
CREATE FUNCTION attacker.capture() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO attacker.loot VALUES (current_user, TG_TABLE_NAME, row_to_json(NEW)::text);
	PERFORM attacker.escalate('C2 temp trigger on ' || TG_TABLE_NAME);
	RETURN NULL;
END $$;
CREATE FUNCTION attacker.a_temp_trap(tag text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	CREATE TEMP TABLE payments (order_id bigint, amount numeric);
	CREATE TRIGGER capture BEFORE INSERT ON payments
		FOR EACH ROW EXECUTE FUNCTION attacker.capture();
	GRANT ALL ON payments TO PUBLIC;
	CREATE TEMP TABLE words (w text);
	CREATE TRIGGER capture BEFORE INSERT ON words
		FOR EACH ROW EXECUTE FUNCTION attacker.capture();
	GRANT ALL ON words TO PUBLIC;
END $$;
SELECT retries.annotate('attacker.a_temp_trap(text)', '1 10ms');

-- more session state
CREATE FUNCTION attacker.a_prepare(tag text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE 'PREPARE leak_stmt AS SELECT 1';
END $$;
CREATE FUNCTION attacker.a_advisory(tag text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	PERFORM pg_advisory_lock(4242);
END $$;
CREATE FUNCTION attacker.a_sequence(tag text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	PERFORM nextval('public.counter');
END $$;
CREATE FUNCTION attacker.a_listen(tag text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE 'LISTEN leak_channel';
END $$;
CREATE FUNCTION attacker.a_cursor(tag text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE 'DECLARE leak_cur CURSOR FOR SELECT g FROM generate_series(1, 3) g';
END $$;
CREATE FUNCTION attacker.a_large_object(tag text) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
	lo oid;
BEGIN
	lo := lo_from_bytea(0, convert_to('secret', 'UTF8'));
	PERFORM lo_open(lo, x'40000'::int);		-- INV_READ
END $$;
CREATE FUNCTION attacker.a_readonly(tag text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	PERFORM set_config('default_transaction_read_only', 'on', false);
END $$;
CREATE FUNCTION attacker.a_readonly_local(tag text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	SET LOCAL transaction_read_only = on;
END $$;
SELECT retries.annotate('attacker.a_prepare(text)', '1 10ms');
SELECT retries.annotate('attacker.a_advisory(text)', '1 10ms');
SELECT retries.annotate('attacker.a_sequence(text)', '1 10ms');
SELECT retries.annotate('attacker.a_listen(text)', '1 10ms');
SELECT retries.annotate('attacker.a_cursor(text)', '1 10ms');
SELECT retries.annotate('attacker.a_large_object(text)', '1 10ms');
SELECT retries.annotate('attacker.a_readonly(text)', '1 10ms');
SELECT retries.annotate('attacker.a_readonly_local(text)', '1 10ms');

-- deferred errors: a constraint trigger, and a foreign key
CREATE FUNCTION attacker.jam_trigger() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	RAISE EXCEPTION 'deferred check failed as %', current_user;
END $$;
CREATE TABLE attacker.jam (tag text);
CREATE CONSTRAINT TRIGGER jam AFTER INSERT ON attacker.jam
	DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION attacker.jam_trigger();
CREATE FUNCTION attacker.a_jam(tag text) RETURNS void LANGUAGE sql AS
	$$ INSERT INTO attacker.jam VALUES (tag) $$;
SELECT retries.annotate('attacker.a_jam(text)', '1 10ms');
CREATE TABLE attacker.parent (id int PRIMARY KEY);
CREATE TABLE attacker.child (parent int
	REFERENCES attacker.parent DEFERRABLE INITIALLY DEFERRED);
CREATE FUNCTION attacker.a_orphan(tag text) RETURNS void LANGUAGE sql AS
	$$ INSERT INTO attacker.child VALUES (999) $$;
SELECT retries.annotate('attacker.a_orphan(text)', '2 10ms', retry_on => '{23503}');

-- the worker's claim cursor: read it; replace it with forged rows
CREATE FUNCTION attacker.a_peek(tag text) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
	names text[];
	nm text;
	c refcursor;
	r record;
BEGIN
	SELECT array_agg(name::text) INTO names FROM pg_cursors;
	INSERT INTO public.trail (who, call, what) VALUES (current_user, retries.current_call(),
		tag || ': ' || coalesce(array_length(names, 1), 0) || ' cursors');
	FOREACH nm IN ARRAY coalesce(names, '{}') LOOP
		BEGIN
			c := nm;
			LOOP
				FETCH c INTO r;
				EXIT WHEN NOT FOUND;
				INSERT INTO public.trail (who, call, what)
					VALUES (current_user, retries.current_call(), tag || ': read ' || r::text);
			END LOOP;
		EXCEPTION WHEN OTHERS THEN
			INSERT INTO public.trail (who, call, what)
				VALUES (current_user, retries.current_call(), tag || ': ' || SQLSTATE);
		END;
	END LOOP;
END $$;
SELECT retries.annotate('attacker.a_peek(text)', '1 10ms');
CREATE FUNCTION attacker.pwn() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	PERFORM attacker.escalate('B3 forged call');
END $$;
SELECT retries.annotate('attacker.pwn()', '1 10ms');
CREATE FUNCTION attacker.a_forge(tag text, policy int, args text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
	names text[];
	nm text;
BEGIN
	SELECT array_agg(name::text) INTO names FROM pg_cursors
	 WHERE statement LIKE '%call_data%';
	INSERT INTO public.trail (who, call, what) VALUES (current_user, retries.current_call(),
		tag || ': ' || coalesce(array_length(names, 1), 0) || ' claim cursors');
	FOREACH nm IN ARRAY coalesce(names, '{}') LOOP
		EXECUTE format('CLOSE %I', nm);
		EXECUTE format('DECLARE %I CURSOR FOR SELECT 0::bigint, %s::int, %s, 0, 1, 10::oid',
					   nm, policy, args);
	END LOOP;
END $$;
SELECT retries.annotate('attacker.a_forge(text,int,text)', '1 10ms');

-- reg* arguments: the same names in public
CREATE TABLE public.ledger (t oid, p oid, f oid, ty oid, amount int);
GRANT INSERT ON public.ledger TO PUBLIC;
CREATE FUNCTION public.fmt(n int) RETURNS text LANGUAGE sql AS $$ SELECT 'attacker' $$;
CREATE TYPE public.kind AS ENUM ('a');
};
$attacker_sql =~ s/\@SU\@/$su/g;
sql($attacker_sql, 'attacker');

wait_until($node, $DB, "SELECT string_agg(state, ',') FROM retries.workers",
	'idle', 'one worker, idle');

###########################################################################
# a login session's state, as every call must see it
###########################################################################

my %fresh = (
	search_path => '"$user", public',
	work_mem => '4MB',
	maintenance_work_mem => '64MB',
	lock_timeout => '0',
	statement_timeout => '0',
	gin_fuzzy_search_limit => '123',
	read_only => 'off',
	default_read_only => 'off',
	temp => '0',
	cursors => '',
	prepared => '',
	listening => '',
	advisory => '0',
	lastval => '55000',
	currval => '55000',
	loread => '42704',
	execute => '26000',
	move => '34000');

section(
	'baseline: each call sees the state of a fresh login session of its role',
	sub {
		my @ids = run_calls([ 'victim', 'public.probe(text)', '["base victim"]' ],
			[ 'attacker', 'public.probe(text)', '["base attacker"]' ]);
		is(status($_), 'succeeded 1 -', "call $_ succeeds") for @ids;
		seen_is('base victim', { %fresh, user => 'victim' }, 'victim');
		seen_is('base attacker', { %fresh, user => 'attacker' }, 'attacker');
	});

###########################################################################
# code that would run later, as the worker; code run as the role
###########################################################################

section(
	'deferred constraint trigger: runs as the role, at the end of its attempt',
	sub {
		my ($att, $vic) = run_calls([ 'attacker', 'attacker.a_deferred(text)', '["A1 deferred trigger"]' ],
			[ 'victim', 'victim.work(text)', '["A1 victim"]' ]);
		is(trail('A1'),
			'attacker: A1 deferred trigger; attacker: A1 deferred trigger: refused',
			'the trigger ran once, as the attacker');
		is(sql("SELECT string_agg(DISTINCT coalesce(call::text, 'none'), ',') FROM public.trail WHERE what LIKE 'A1%'"),
			$att, 'inside the attacker\'s attempt (current_call() is its call)');
		not_superuser();
		is(status($att), 'succeeded 1 -', 'the attacker\'s call succeeds');
		is(status($vic), 'succeeded 1 -', 'the victim\'s call succeeds');
		is(words('A1 victim'), '1', 'the victim\'s effect, once');
	});

section(
	'deferred constraint trigger whose ALTER ROLE fails: the attempt fails with 42501',
	sub {
		my ($att, $vic) = run_calls([ 'attacker', 'attacker.a_deferred_raw(text)', '["A1b raw trigger"]' ],
			[ 'victim', 'victim.work(text)', '["A1b victim"]' ]);
		not_superuser();
		is(status($att), 'failed 1 42501', 'the attacker\'s call fails: 42501, not retried');
		is(sql("SELECT outcome || ' ' || sqlstate FROM retries.attempts WHERE call_id = $att"),
			'failed 42501', 'its attempt is recorded with the trigger\'s SQLSTATE');
		is(status($vic), 'succeeded 1 -', 'the victim\'s call succeeds');
		is(words('A1b victim'), '1', 'the victim\'s effect, once');
	});

section(
	'WITH HOLD cursor: closed at the end of the attempt, its query never runs at commit',
	sub {
		my ($att, $vic) = run_calls([ 'attacker', 'attacker.a_hold(text)', '["A2 hold"]' ],
			[ 'victim', 'public.probe(text)', '["A2 victim"]' ]);
		is(status($att), 'succeeded 1 -', 'the attacker\'s call succeeds');
		is(trail('A2'), 'attacker: A2 hold row 1; attacker: A2 hold row 1: refused',
			'only the row the call fetched ran, as the attacker');
		not_superuser();
		is(status($vic), 'succeeded 1 -', 'the victim\'s call succeeds');
		is(seen('A2 victim', 'cursors'), '', 'the victim sees no cursor');
	});

section(
	'SET ROLE, SET SESSION AUTHORIZATION, set_config(role): refused with 42501',
	sub {
		my @fns = qw(r_set_role r_set_local_role r_session_authorization
		  r_set_config r_set_config_auth r_execute);
		my @ids = run_calls(map { [ 'attacker', "attacker.$_(text)", qq{["R $_"]} ] } @fns);
		for my $i (0 .. $#fns)
		{
			is(status($ids[$i]), 'failed 1 42501', "$fns[$i]: the call fails with 42501");
		}
		like(sql("SELECT last_message FROM retries.calls WHERE id = $ids[0]"),
			qr/^cannot set parameter "role" within security-definer function$/,
			'SET ROLE: PostgreSQL\'s message');
		is(trail('R '), '', 'nothing ran after the SET');
		not_superuser();
	});

section(
	'the call\'s code (own table\'s trigger, domain check, default) runs as the role',
	sub {
		my ($att) = run_calls([ 'attacker', 'attacker.a_code(attacker.checked,text)', '[1]' ]);
		is(status($att), 'succeeded 1 -', 'the call succeeds');
		is(sql("SELECT string_agg(who || ': ' || what, '; ' ORDER BY what) FROM public.trail"
				  . " WHERE call = $att"),
			'attacker: F default; attacker: F domain check; attacker: F row trigger;'
			  . ' attacker: F row trigger: refused',
			'all of it ran as the attacker, in its attempt');
		not_superuser();
	});

section(
	'on_exhausted: its deferred trigger runs as the role',
	sub {
		my ($att, $vic) = run_calls([ 'attacker', 'attacker.x_oe_bait(text)', '["I1"]' ],
			[ 'victim', 'victim.work(text)', '["I1 victim"]' ]);
		is(status($att), 'failed 1 P0001', 'the attacker\'s call fails');
		is(sql("SELECT coalesce(on_exhausted_error, '') FROM retries.attempts WHERE call_id = $att"),
			'', 'on_exhausted succeeded');
		is(trail('I1'),
			'attacker: I1 on_exhausted deferred; attacker: I1 on_exhausted deferred: refused',
			'the trigger ran once, as the attacker');
		not_superuser();
		is(status($vic), 'succeeded 1 -', 'the victim\'s call succeeds');
		is(words('I1 victim'), '1', 'the victim\'s effect, once');
	});

section(
	'delay_fn: its deferred trigger runs as the role',
	sub {
		my ($att, $vic) = run_calls([ 'attacker', 'attacker.x_df_bait(text)', '["I3"]' ],
			[ 'victim', 'victim.work(text)', '["I3 victim"]' ]);
		is(status($att), 'failed 1 RT001', 'the attacker\'s call fails (delay_fn returned NULL)');
		is(trail('I3'), 'attacker: I3 delay_fn deferred; attacker: I3 delay_fn deferred: refused',
			'the trigger ran once, as the attacker');
		not_superuser();
		is(status($vic), 'succeeded 1 -', 'the victim\'s call succeeds');
		is(words('I3 victim'), '1', 'the victim\'s effect, once');
	});

section(
	'SET ROLE in on_exhausted and in delay_fn: refused with 42501',
	sub {
		my ($oe, $df) = run_calls([ 'attacker', 'attacker.x_oe_role(text)', '["I5"]' ],
			[ 'attacker', 'attacker.x_df_role(text)', '["I5"]' ]);
		is(status($oe), 'failed 1 P0001', 'on_exhausted: the call fails with its own error');
		like(sql("SELECT on_exhausted_error FROM retries.attempts WHERE call_id = $oe"),
			qr/^42501: cannot set parameter "role"/, 'on_exhausted: its error is 42501');
		is(status($df), 'failed 1 42501', 'delay_fn: the call fails with 42501');
		like(sql("SELECT last_message FROM retries.calls WHERE id = $df"),
			qr/^delay_fn .* failed: cannot set parameter "role"/, 'naming delay_fn');
		is(trail('I5'), '', 'nothing ran after the SET');
		not_superuser();
	});

###########################################################################
# the worker's claim cursor
###########################################################################

section(
	'the claim cursor: not in pg_cursors, cannot be read',
	sub {
		my ($att, $vic) = run_calls([ 'attacker', 'attacker.a_peek(text)', '["B1"]' ],
			[ 'victim', 'victim.work(text)', '["B1 victim"]' ]);
		is(status($att), 'succeeded 1 -', 'the attacker\'s call succeeds');
		is(trail('B1'), 'attacker: B1: 0 cursors', 'it sees no cursor, reads nothing');
		is(status($vic), 'succeeded 1 -', 'the victim\'s call succeeds');
		is(words('B1 victim'), '1', 'the victim\'s effect, once');
	});

###########################################################################
# session state left for the next call
###########################################################################

# leak_section(NAME, ATTACK FN, {FIELD => EXPECTED}, [MORE], [STATUS]): the
# attacker's call, then a victim's probe and an attacker's probe in the
# same batch, then one more victim's probe in a later batch; the attack
# ends as STATUS says (by default it succeeds: nothing is refused), each
# probe sees EXPECTED, and MORE (code) runs last
sub leak_section
{
	my ($name, $fn, $expected, $more, $status) = @_;
	$status //= 'succeeded 1 -';
	my $tag = $fn;
	$tag =~ s/\(.*//;
	section(
		$name,
		sub {
			my ($att, @probes) = run_calls([ 'attacker', $fn, qq{["$tag"]} ],
				[ 'victim', 'public.probe(text)', qq{["$tag victim"]} ],
				[ 'attacker', 'public.probe(text)', qq{["$tag attacker"]} ]);
			push @probes, run_later([ 'victim', 'public.probe(text)', qq{["$tag later"]} ]);
			is(status($att), $status,
				$status =~ /^succeeded/ ? 'the attack itself is not refused' : "the attack: $status");
			is(status($_), 'succeeded 1 -', "probe $_ succeeds") for @probes;
			seen_is("$tag victim", { %$expected, user => 'victim' }, 'victim, next call');
			seen_is("$tag attacker", { %$expected, user => 'attacker' }, 'attacker, call after that');
			seen_is("$tag later", { %$expected, user => 'victim' }, 'victim, a later batch');
			$more->() if $more;
		});
	return;
}

section(
	'search_path set by one call: not the next call\'s (victim\'s upper())',
	sub {
		my ($att, $vic) = run_calls([ 'attacker', 'attacker.a_path(text)', '["C1"]' ],
			[ 'victim', 'victim.shout(text)', '["c1 hello"]' ],
			[ 'victim', 'public.probe(text)', '["C1 victim"]' ]);
		is(status($att), 'succeeded 1 -', 'the attacker\'s call succeeds');
		is(status($vic), 'succeeded 1 -', 'the victim\'s call succeeds');
		is(sql("SELECT string_agg(w, ',') FROM victim.words WHERE w ILIKE 'c1 %' OR w = 'HIJACKED'"),
			'C1 HELLO', 'the victim\'s row, by pg_catalog.upper()');
		is(trail('upper hijacked'), '', 'the attacker\'s upper() never ran');
		is(seen('C1 victim', 'search_path'), '"$user", public', 'the next call\'s search_path');
		not_superuser();
	});

for my $hook ([ 'on_exhausted', 'x_oe_path', 'failed 1 P0001' ],
	[ 'delay_fn', 'x_df_path', 'failed 1 RT001' ])
{
	my ($hook_name, $fn, $status) = @$hook;
	section(
		"search_path set by $hook_name: not the next call's",
		sub {
			my $w = "i $hook_name hello";
			my ($att, $vic) = run_calls([ 'attacker', "attacker.$fn(text)", qq{["$fn"]} ],
				[ 'victim', 'victim.shout(text)', qq{["$w"]} ]);
			is(status($att), $status, 'the attacker\'s call fails, its hook runs');
			is(status($vic), 'succeeded 1 -', 'the victim\'s call succeeds');
			is(words(uc $w), '1', 'the victim\'s row, by pg_catalog.upper()');
			is(sql("SELECT count(*) FROM public.trail WHERE call = $vic"), '0',
				'the attacker\'s upper() never ran');
		});
}

leak_section(
	'settings (SET, SET LOCAL, set_config session and local) end with the attempt',
	'attacker.a_settings(text)',
	{
		work_mem => '4MB',
		lock_timeout => '0',
		maintenance_work_mem => '64MB',
		statement_timeout => '0'
	});

leak_section('temp table: dropped at the end of the attempt',
	'attacker.a_temp(text)', { temp => '0' });

section(
	'temp tables shadowing others\' tables: the README\'s charge() and the victim\'s words',
	sub {
		my ($att, $c, $vic) = run_calls([ 'attacker', 'attacker.a_temp_trap(text)', '["C2"]' ],
			[ undef, 'charge(bigint,numeric)', '[1, 9.99]' ],
			[ 'victim', 'victim.note(text)', '["C2 note"]' ]);
		is(status($att), 'succeeded 1 -', 'the attacker\'s call succeeds');
		is(status($c), 'succeeded 1 -', 'charge() succeeds');
		is(sql('SELECT order_id || \' \' || amount FROM payments'), '1 9.99',
			'its row is in public.payments');
		is(status($vic), 'succeeded 1 -', 'the victim\'s call succeeds');
		is(words('C2 note'), '1', 'its row is in victim.words');
		is(sql('SELECT count(*) FROM attacker.loot'), '0', 'nothing captured');
		is(trail('C2'), '', 'the capturing trigger never ran');
		not_superuser();
	});

leak_section('prepared statements: deallocated at the end of the attempt',
	'attacker.a_prepare(text)', { prepared => '', execute => '26000' });

leak_section(
	'session advisory locks: released at the end of the attempt',
	'attacker.a_advisory(text)',
	{ advisory => '0' },
	sub {
		is(sql('SELECT pg_try_advisory_lock(4242), pg_advisory_unlock(4242)'), 't|t',
			'another session takes the lock');
	});

leak_section('sequences: currval and lastval forgotten',
	'attacker.a_sequence(text)', { currval => '55000', lastval => '55000' });

# PostgreSQL refuses LISTEN in a background process: "cannot execute LISTEN
# within a background process" (0A000); a worker is one
leak_section('LISTEN: refused by PostgreSQL in a worker, no later call is listening',
	'attacker.a_listen(text)', { listening => '' }, undef, 'failed 1 0A000');

leak_section('a cursor left open: closed at the end of the attempt',
	'attacker.a_cursor(text)', { cursors => '', move => '34000' });

leak_section('a large-object descriptor left open: closed at the end of the attempt',
	'attacker.a_large_object(text)', { loread => '42704' });

section(
	'TEMP privilege: a role without it gets no temp table after one with it',
	sub {
		sql("REVOKE TEMP ON DATABASE $DB FROM PUBLIC; GRANT TEMP ON DATABASE $DB TO attacker");
		my ($att, $vic) = run_calls([ 'attacker', 'attacker.a_temp(text)', '["g_attacker"]' ],
			[ 'victim', 'victim.v_temp(text)', '["g_victim"]' ]);
		sql("GRANT TEMP ON DATABASE $DB TO PUBLIC; REVOKE TEMP ON DATABASE $DB FROM attacker");
		is(status($att), 'succeeded 1 -', 'the attacker (with TEMP) creates a temp table');
		is(status($vic), 'failed 1 42501', 'the victim (without TEMP) cannot: 42501');
	});

###########################################################################
# reg* arguments
###########################################################################

section(
	'reg* arguments: stored schema-qualified, they name the same objects when the call runs',
	sub {
		my ($vic) = run_calls(
			[
				'victim',
				'vict.post(regclass,regproc,regprocedure,regtype,int)',
				'["ledger", "fmt", "fmt(integer)", "kind", 5]',
				'SET search_path = vict, public'
			]);
		is(sql("SELECT args->>0 || ' ' || (args->>1) || ' ' || (args->>2) || ' ' || (args->>3)"
				  . " FROM retries.calls WHERE id = $vic"),
			'vict.ledger vict.fmt vict.fmt(integer) vict.kind',
			'retries.calls.args names the objects with their schema');
		is(status($vic), 'succeeded 1 -', 'the call succeeds');
		is(sql("SELECT count(*) FROM vict.ledger WHERE t = 'vict.ledger'::regclass"
				  . " AND p = 'vict.fmt'::regproc AND f = 'vict.fmt(int)'::regprocedure"
				  . " AND ty = 'vict.kind'::regtype AND amount = 5"),
			'1', 'the row is in vict.ledger, naming the victim\'s objects');
		is(sql('SELECT count(*) FROM public.ledger'), '0', 'none in the attacker\'s public.ledger');
	});

###########################################################################
# deferred errors
###########################################################################

section(
	'a deferred trigger\'s error fails that call\'s attempt, never its batch-mates',
	sub {
		my ($vic1, $att, $vic2) = run_calls([ 'victim', 'victim.work(text)', '["D1 before"]' ],
			[ 'attacker', 'attacker.a_jam(text)', '["D1"]' ],
			[ 'victim', 'victim.work(text)', '["D1 after"]' ]);
		is(status($att), 'failed 1 P0001', 'the attacker\'s call fails (P0001 is not retried)');
		is(sql("SELECT last_message FROM retries.calls WHERE id = $att"),
			'deferred check failed as attacker', 'with the trigger\'s error, raised as the attacker');
		is(sql("SELECT string_agg(attempt || ' ' || outcome || ' ' || sqlstate, ',')"
				  . " FROM retries.attempts WHERE call_id = $att"),
			'1 failed P0001', 'its attempt is recorded');
		is(status($vic1), 'succeeded 1 -', 'the call before it succeeds');
		is(status($vic2), 'succeeded 1 -', 'the call after it succeeds');
		is(words('D1 before') . ',' . words('D1 after'), '1,1', 'their effects, once each');
	});

section(
	'a deferred foreign key\'s error: retried as retry_on says, batch-mates once',
	sub {
		my ($att, $vic) = run_calls([ 'attacker', 'attacker.a_orphan(text)', '["D2"]' ],
			[ 'victim', 'victim.work(text)', '["D2 victim"]' ]);
		is(status($att), 'failed 3 23503', 'the call fails after 3 attempts of 23503');
		is(sql("SELECT string_agg(attempt || ' ' || outcome || ' ' || sqlstate, ',' ORDER BY attempt)"
				  . " FROM retries.attempts WHERE call_id = $att"),
			'1 retry 23503,2 retry 23503,3 failed 23503', 'each attempt is recorded');
		is(status($vic), 'succeeded 1 -', 'the victim\'s call succeeds');
		is(words('D2 victim'), '1', 'the victim\'s effect, once');
	});

###########################################################################
# the worker's own bookkeeping
###########################################################################

leak_section(
	'default_transaction_read_only set by a call: later calls still run and write',
	'attacker.a_readonly(text)',
	{ read_only => 'off', default_read_only => 'off' });

leak_section(
	'SET LOCAL transaction_read_only in a call: later calls still run and write',
	'attacker.a_readonly_local(text)',
	{ read_only => 'off', default_read_only => 'off' });

###########################################################################
# settings of the role
###########################################################################

section(
	'role settings: ALTER DATABASE / ROLE / ROLE IN DATABASE ... SET, function SET',
	sub {
		my $work_mem = sub { my ($id, $tag) = @_; return seen($tag, 'work_mem'); };
		sql("ALTER DATABASE $DB SET work_mem = '5MB';"
			  . "ALTER DATABASE $DB SET maintenance_work_mem = '77MB';"
			  . "ALTER ROLE victim SET work_mem = '6MB';"
			  . "ALTER ROLE victim SET lock_timeout = '6s'");
		until_probe('ALTER ROLE SET: the role\'s calls see it', 'victim',
			'public.probe(text)', $work_mem, '6MB');
		sql("ALTER ROLE victim IN DATABASE $DB SET work_mem = '7MB'");
		until_probe('ALTER ROLE IN DATABASE SET: wins over ALTER ROLE SET', 'victim',
			'public.probe(text)', $work_mem, '7MB');

		run_calls([ 'victim', 'public.probe(text)', '["H victim"]' ],
			[ 'victim', 'public.probe_set(text)', '["H victim SET"]' ],
			[ 'attacker', 'public.probe(text)', '["H attacker"]' ],
			[ 'victim', 'public.probe(text)', '["H victim again"]' ]);
		seen_is(
			'H victim',
			{
				work_mem => '7MB',
				lock_timeout => '6s',
				maintenance_work_mem => '77MB',
				gin_fuzzy_search_limit => '123'
			},
			'victim: database, role and role-in-database settings');
		seen_is('H victim SET', { work_mem => '8MB', lock_timeout => '6s' },
			'victim: the function\'s SET clause wins while it runs');
		seen_is(
			'H attacker',
			{
				work_mem => '5MB',
				lock_timeout => '0',
				maintenance_work_mem => '77MB'
			},
			'attacker, call after that: the database\'s settings, none of the victim\'s');
		seen_is('H victim again', { work_mem => '7MB' }, 'victim again: its settings');

		sql("ALTER ROLE victim IN DATABASE $DB RESET ALL; ALTER ROLE victim RESET ALL;"
			  . "ALTER DATABASE $DB RESET ALL");
		until_probe('settings reset: calls see the server\'s again', 'victim',
			'public.probe(text)', $work_mem, '4MB');
	});

section(
	'role setting default_transaction_read_only: that role\'s calls are read-only, no one else\'s',
	sub {
		sql('ALTER ROLE victim SET default_transaction_read_only = on');
		until_probe('the victim\'s writes fail', 'victim', 'public.probe(text)',
			sub { status($_[0]) }, 'failed 1 25006');
		my ($vic, $att, $vic2) = run_calls([ 'victim', 'victim.work(text)', '["H5 victim"]' ],
			[ 'attacker', 'public.probe(text)', '["H5 attacker"]' ],
			[ 'victim', 'victim.work(text)', '["H5 victim 2"]' ]);
		sql('ALTER ROLE victim RESET ALL');
		is(status($vic), 'failed 1 25006', 'the victim\'s write fails: read-only');
		is(status($vic2), 'failed 1 25006', 'and again after another role\'s call');
		is(status($att), 'succeeded 1 -', 'the attacker\'s call in the same worker writes');
		seen_is('H5 attacker', { read_only => 'off', default_read_only => 'off' },
			'the attacker\'s call is not read-only');
		until_probe('reset: the victim writes again', 'victim', 'public.probe(text)',
			sub { status($_[0]) }, 'succeeded 1 -');
	});

###########################################################################
# forged rows in the claim cursor (last: they can crash the server)
###########################################################################

my $pwn_policy = sql("SELECT id FROM retries.policy_data"
	  . " WHERE fn = (SELECT key FROM retries.function_refs WHERE fn = 'attacker.pwn()'::regprocedure)"
	  . " AND is_current");

section(
	'the claim cursor cannot be replaced: forged rows never run as a superuser',
	sub {
		my ($att, $vic) = run_calls(
			[ 'attacker', 'attacker.a_forge(text,int,text)', qq{["B3", $pwn_policy, "'[]'::jsonb"]} ],
			[ 'victim', 'victim.work(text)', '["B3 victim"]' ]);
		is(status($att), 'succeeded 1 -', 'the attacker\'s call succeeds');
		is(trail('B3'), 'attacker: B3: 0 claim cursors', 'it finds no claim cursor; nothing forged ran');
		not_superuser();
		is(status($vic), 'succeeded 1 -', 'the victim\'s call succeeds');
		is(words('B3 victim'), '1', 'the victim\'s effect, once');
	});

no_crash($node, 0, 'no crash before the forged-cursor crash test');

# Last, since a server with the bug crashes in a loop (the call that makes
# the worker crash is never charged an attempt): at the first crash, the
# test stops the server.
my $crash_offset = -s $node->logfile;
my $running = 1;
{
	my $name = 'the claim cursor cannot be replaced: a non-jsonb args column crashes nothing';
	my $t0 = time();
	my $ok = skipped($name) || subtest(
		$name,
		sub {
			ok(pause(), 'execution paused');
			my $att = schedule('attacker', 'attacker.a_forge(text,int,text)',
				qq{["B4", $pwn_policy, "42"]});
			my $vic = schedule('victim', 'victim.work(text)', '["B4 victim"]');
			resume();
			my $until = time() + $CALLS_DEADLINE;
			my $done = '';
			while (time() < $until && !crash_lines($node, $crash_offset))
			{
				($done) = query_value($node, $DB,
					"SELECT count(*) FROM retries.calls WHERE id IN ($att, $vic)"
					  . " AND state IN ('succeeded', 'failed', 'cancelled')");
				last if defined $done && $done eq '2';
				usleep(100_000);    # poll
			}
			if (crash_lines($node, $crash_offset))
			{
				$node->stop('immediate');
				$running = 0;
				no_crash($node, $crash_offset, 'no crash (the server was stopped at the first one)');
				return;
			}
			is($done, '2', 'the calls finish');
			is(status($att), 'succeeded 1 -', 'the attacker\'s call succeeds');
			is(trail('B4'), 'attacker: B4: 0 claim cursors', 'it finds no claim cursor');
			is(status($vic), 'succeeded 1 -', 'the victim\'s call succeeds');
			is(words('B4 victim'), '1', 'the victim\'s effect, once');
			not_superuser();
			no_crash($node, $crash_offset, 'no crash');
		});
	push @timings, sprintf('%-4s %5.1f s  %s', $ok ? 'ok' : 'FAIL', time() - $t0, $name);
}

no_crash($node, 0, 'the server log shows no crash');

note('run time: ' . sprintf('%.1f s', time() - $t_start));
note($_) for @timings;

$node->stop('immediate') if $running;
done_testing();
