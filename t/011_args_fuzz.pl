# Hostile arguments for retries.call: a seeded random stream of argument
# documents against annotated functions of many parameter types.
#
# src/api/call_args.c converts jsonb arguments with PostgreSQL's own jsonb
# accessors and type input and output functions, so it cannot be linked
# into a libFuzzer target without a backend; this test fuzzes it through
# SQL instead.  Each document is random JSON (deep nesting, huge and tiny
# numbers, strings of odd characters, wrong types, ragged and too deep
# nested arrays, unknown, misspelt and duplicate keys, ~1 MB strings,
# 10,000-element arrays, invalid escapes) aimed at one of int, bigint,
# numeric, float8, text, date, timestamptz, interval, int[], text[][], jsonb,
# json, a domain with a CHECK, a composite type, an enum, bytea, a variadic
# int[] and a function with defaults.  It proves that:
#
#   a. every retries.call either returns an id or fails with a clean error:
#      a SQLSTATE outside class XX (internal errors) and a non-empty
#      message;
#   b. every call it accepted runs exactly once and succeeds (the function
#      only records its argument), with its attempt recorded: what was
#      stored at scheduling converts again in the worker;
#   c. the function received the value the type's input function makes of
#      the JSON scalar (or, for json and jsonb, the JSON value itself), for
#      single-parameter functions given a scalar;
#   d. the server never crashed: pg_postmaster_start_time is unchanged and
#      the log has no "terminated by signal" or PANIC.
#
# The seed is printed; RETRIES_FUZZ_SEED=N repeats a run and
# RETRIES_FUZZ_COUNT=N changes the number of documents (default 3000).

use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RetriesTest;
use Test::More;

my $seed = $ENV{RETRIES_FUZZ_SEED} // (time() ^ ($$ << 8)) % 1_000_000_007;
my $count = $ENV{RETRIES_FUZZ_COUNT} // 3000;
srand($seed);
diag("011_args_fuzz: seed $seed, $count documents"
	  . " (repeat with RETRIES_FUZZ_SEED=$seed)");

my $node = retries_node('args_fuzz');
# the ~1 MB strings are more than 1 MB as jsonb (retries.max_args_size)
$node->append_conf('postgresql.conf', "retries.max_args_size = '4MB'\n");
$node->start;

# The functions: name => [parameter type, signature].  Each records what it
# received, as text, in got.
my %functions = (
	f_int => 'int',
	f_bigint => 'bigint',
	f_numeric => 'numeric',
	f_float8 => 'float8',
	f_text => 'text',
	f_date => 'date',
	f_tstz => 'timestamptz',
	f_interval => 'interval',
	f_intarr => 'int[]',
	f_text2d => 'text[][]',
	f_jsonb => 'jsonb',
	f_json => 'json',
	f_posint => 'posint',
	f_pair => 'pair',
	f_mood => 'mood',
	f_bytea => 'bytea',);
my @names = sort keys %functions;

# an enum label with non-ASCII letters and a double quote
my $odd_label = "\x{fc}n\x{ef}c\x{f6}d\x{e9} \"q\"";

my $setup = qq{
CREATE EXTENSION retries;
CREATE DOMAIN posint AS int CHECK (VALUE > 0);
CREATE TYPE pair AS (a int, b text);
CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy', '$odd_label');
CREATE TABLE got (call_id bigint NOT NULL, val text);
CREATE FUNCTION f_variadic(VARIADIC p int[]) RETURNS void LANGUAGE sql
	AS \$\$ INSERT INTO got VALUES (retries.current_call(), p::text) \$\$;
SELECT retries.annotate('f_variadic(int[])', '1ms', max_attempts => 1);
CREATE FUNCTION f_multi(a int, b text DEFAULT 'dflt', c jsonb DEFAULT '{}')
	RETURNS void LANGUAGE sql
	AS \$\$ INSERT INTO got VALUES (retries.current_call(),
								  concat_ws('|', a, b, c)) \$\$;
SELECT retries.annotate('f_multi(int,text,jsonb)', '1ms', max_attempts => 1);
CREATE TABLE cases (id int PRIMARY KEY, fn text NOT NULL, typ text,
					args text, styles text, call_id bigint, parsed bool,
					sqlstate text, message text, expected text,
					checkable bool NOT NULL DEFAULT false);
};
for my $f (@names)
{
	my $t = $functions{$f};
	# json is compared as jsonb: the stored value is jsonb's canonical text
	my $val = $t eq 'json' ? 'p::jsonb::text' : 'p::text';
	$setup .= qq{
CREATE FUNCTION $f(p $t) RETURNS void LANGUAGE sql
	AS \$\$ INSERT INTO got VALUES (retries.current_call(), $val) \$\$;
SELECT retries.annotate('$f($t)', '1ms', max_attempts => 1);
};
}
utf8::encode($setup);
$node->safe_psql('postgres', $setup);

my $start_time =
  $node->safe_psql('postgres', 'SELECT pg_postmaster_start_time()');

# ---------------------------------------------------------------------------
# Random JSON text.  Built by hand rather than with a JSON module, so that
# documents can have duplicate keys, raw numbers of any size and invalid
# escapes.
# ---------------------------------------------------------------------------

sub pick { return $_[ int(rand(@_)) ]; }

# Characters that make trouble somewhere: array-literal and record syntax,
# quotes, backslashes, controls, white space of every kind, non-ASCII of 2,
# 3 and 4 bytes, combining marks, direction overrides, a BOM, noncharacters.
my @odd_chars = (
	'"', '\\', '{', '}', '(', ')', ',', "'", '$', '%', ' ', "\t", "\n",
	"\r", "\x01", "\x1f", "\x7f", 'NULL', 'null', 'e', '-', '.', ':', '+',
	'a', 'Z', '0', '9', "\x{e9}", "\x{4e2d}", "\x{1f600}", "\x{feff}",
	"\x{202e}", "\x{301}", "\x{ffff}", "\x{10ffff}", "\x{a0}", "\x{2028}",
	"\x{85}", '\\x', '[', ']', '\\N');

# A valid value of each type, as a JSON scalar or array, to reach success
my %plausible = (
	'int' => sub { pick(0, 1, -1, 2147483647, -2147483648, int(rand(1e6))) },
	'bigint' => sub { pick('9223372036854775807', '-9223372036854775808', 42) },
	'numeric' => sub {
		pick('1e100', '-0.000000000000000000001', '"NaN"', '3.14159', '0',
			'1' . ('0' x 1000));
	},
	'float8' => sub {
		pick('1e308', '-1e-307', '"Infinity"', '"-Infinity"', '"NaN"',
			'0.1', '4.9e-324', '2.2250738585072014e-308');
	},
	'text' => sub { json_string(random_string(int(rand(40)))) },
	'date' => sub {
		pick('"2024-02-29"', '"infinity"', '"-infinity"', '"epoch"',
			'"4713-01-01 BC"', '"5874897-12-31"', '"today"');
	},
	'timestamptz' => sub {
		pick('"2024-02-29 12:34:56.789012+05:30"', '"infinity"',
			'"epoch"', '"294276-12-31 23:59:59 UTC"', '"now"',
			'"4713-01-01 00:00:00 BC"');
	},
	'interval' => sub {
		pick('"1000000 years"', '"-178000000 years"', '"1 day -1 us"',
			'"P1Y2M3DT4H5M6S"', '"2147483647 days"', '"@ 1 minute ago"');
	},
	'int[]' => sub { '[' . join(',', map { int(rand(1000)) } 1 .. 5) . ']' },
	'text[][]' => sub {
		'[[' . json_string(random_string(5)) . ',' . json_string(random_string(3))
		  . '],[null,' . json_string(random_string(8)) . ']]';
	},
	'jsonb' => sub { random_json(3) },
	'json' => sub { random_json(3) },
	'posint' => sub { pick(1, 2147483647, '"7"') },
	'pair' => sub {
		pick('"(1,abc)"', '"(,)"', '"(2,\"a,b\")"', '"(3,\"\\\\\")"');
	},
	'mood' => sub { pick('"sad"', '"happy"', json_string($odd_label)) },
	'bytea' => sub { pick('"\\\\x00ff"', '"abc"', '"\\\\000"', '"\\\\x"') },);

sub random_string
{
	my ($len) = @_;
	return join('', map { pick(@odd_chars) } 1 .. $len);
}

# json_string(S): S as a JSON string literal; controls escaped, the rest raw
sub json_string
{
	my ($s) = @_;
	$s =~ s/(["\\])/\\$1/g;
	$s =~ s/([\x00-\x1f])/sprintf('\\u%04x', ord($1))/ge;
	return '"' . $s . '"';
}

# A JSON string whose escapes are odd or invalid
sub odd_escape_string
{
	return pick('"\\ud83d\\ude00"', '"\\ud800"', '"\\udc00x"', '"\\u0000"',
		'"a\\u0000b"', '"\\uZZZZ"', '"\\q"', '"\\u00e9\\u0301"', '"\\/"');
}

# A JSON number that is large, small, precise or odd
sub random_number
{
	return pick(
		0, -0, '-0.0', 1, -1, '2147483648', '-2147483649',
		'9223372036854775808', '-9223372036854775809', '1e308', '1e309',
		'-1e309', '1e-324', '1e-400', '1.7976931348623157e308',
		'123456789012345678901234567890.123456789', '1e100000',
		'1e-100000', '0.' . ('0' x 500) . '1', '9' x 2000,
		int(rand(2**31)) - 2**30, rand() * 10**int(rand(40)),
		'1E+2', '1.5', '-0.5', '1e-7');
}

# random_json(DEPTH): any JSON value, nested at most DEPTH deep
sub random_json
{
	my ($depth) = @_;
	my $r = rand();

	if ($depth > 0 && $r < 0.15)
	{
		my $n = int(rand(5));
		return '[' . join(',', map { random_json($depth - 1) } 1 .. $n) . ']';
	}
	if ($depth > 0 && $r < 0.25)
	{
		my $n = int(rand(4));
		return '{'
		  . join(',',
			map { json_string(pick('p', 'a', 'b', 'c', random_string(3))) . ':'
				  . random_json($depth - 1) } 1 .. $n) . '}';
	}
	return random_number() if $r < 0.45;
	return json_string(random_string(int(rand(30)))) if $r < 0.75;
	return odd_escape_string() if $r < 0.80;
	return pick('true', 'false', 'null');
}

# A value aimed at a parameter of type TYPE: plausible, or anything
sub value_for
{
	my ($type) = @_;
	my $r = rand();

	return $plausible{$type}->() if $r < 0.45;
	return random_json(3) if $r < 0.80;
	return random_number() if $r < 0.88;
	return odd_escape_string() if $r < 0.92;
	# arrays that are ragged, too deep, or the wrong way round
	return pick(
		'[[1,2],[3]]', '[[1],[2,3]]', '[1,[2]]', '[[[[[[[1]]]]]]]',
		'[[]]', '[]', '[[[]]]', '[{"a":1}]', '[[1,2],["x",null]]',
		'[' . ('[' x 100) . ('1' x 1) . (']' x 100) . ']',
		'{"p": [1, 2]}', '[null]', '[true, false]');
}

# args_for(FN, TYPE): the whole argument document for FN, and whether its
# single parameter's value is a JSON scalar reached at '{0}' or '{p}'
sub args_for
{
	my ($fn, $type) = @_;
	my $r = rand();
	my $v = value_for($type);
	my $scalar = $v !~ /^\s*[\[\{]/;

	return ("[$v]", $scalar) if $r < 0.45;
	return ("{\"p\": $v}", $scalar) if $r < 0.70;
	return ("{\"p\": " . value_for($type) . ", \"p\": $v}", $scalar)
	  if $r < 0.74;    # duplicate key: jsonb keeps the last
	return (pick("{\"P\": $v}", "{\"p \": $v}", "{\"\": $v}",
			"{\"p\": $v, \"q\": 1}", "{\"p\\u0000\": $v}"), 0)
	  if $r < 0.80;    # keys that name no parameter
	return (pick("[$v, $v]", '[]', "$v", 'null', '"[1]"', '{}', "[[$v]]"), 0)
	  if $r < 0.86;    # wrong count, wrong shape
	return (random_json(6), 0) if $r < 0.94;
	# deep nesting
	my $d = pick(10, 100, 1000, 5000);
	return (pick('[' x $d . ']' x $d, '[' . ('{"p":' x $d) . '1' . ('}' x $d) . ']',
			'[' . ('[' x $d) . '1' . (']' x $d) . ']'), 0);
}

# The documents: random ones, then the big ones every run has
my @cases;
for my $i (1 .. $count)
{
	my $r = rand();
	if ($r < 0.05)
	{
		push @cases, [ 'f_variadic(int[])', undef,
			'[' . join(',', map { value_for('int') } 1 .. int(rand(4))) . ']', 0 ];
		next;
	}
	if ($r < 0.12)
	{
		my @kv;
		push @kv, '"a": ' . value_for('int') if rand() < 0.9;
		push @kv, '"b": ' . value_for('text') if rand() < 0.5;
		push @kv, '"c": ' . value_for('jsonb') if rand() < 0.5;
		push @kv, '"d": 1' if rand() < 0.1;
		my $doc = rand() < 0.5 ? '{' . join(', ', @kv) . '}'
		  : '[' . join(', ', map { s/^"[a-d]": //r } @kv) . ']';
		push @cases, [ 'f_multi(int,text,jsonb)', undef, $doc, 0 ];
		next;
	}
	my $fn = pick(@names);
	my $type = $functions{$fn};
	my ($doc, $scalar) = args_for($fn, $type);
	push @cases, [ "$fn($type)", $type, $doc, $scalar ];
}
my $mb = join('', map { pick(@odd_chars) } 1 .. 800_000);
$mb = substr($mb, 0, 1_000_000);
push @cases,
  [ 'f_text(text)', 'text', '[' . json_string($mb) . ']', 1 ],
  [ 'f_jsonb(jsonb)', 'jsonb', '[' . json_string($mb) . ']', 1 ],
  [ 'f_bytea(bytea)', 'bytea', '["\\\\x' . ('ab' x 500_000) . '"]', 1 ],
  [ 'f_intarr(int[])', 'int[]', '[[' . join(',', 1 .. 10_000) . ']]', 0 ],
  [ 'f_variadic(int[])', undef, '[' . join(',', 1 .. 10_000) . ']', 0 ],
  [ 'f_text2d(text[][])', 'text[][]',
	'[[' . join(',', map { json_string(random_string(3)) } 1 .. 10_000) . ']]', 0 ],
  [ 'f_text2d(text[][])', 'text[][]',
	'[' . join(',', map { '[' . json_string(random_string(2)) . ',null]' } 1 .. 5_000) . ']', 0 ],
  [ 'f_json(json)', 'json', '[[' . join(',', map { random_json(2) } 1 .. 10_000) . ']]', 0 ],
  [ 'f_text(text)', 'text', '{"p": ' . json_string('k' x 10_000) . ', "' . ('k' x 10_000) . '": 1}', 0 ];

# Output settings of the scheduling session, for a third of the calls: the
# stored arguments must not depend on them (the worker has the defaults).
# Only settings that change output, not how input is read: month before
# day as in the default DateStyle, no sql_standard IntervalStyle.
sub random_styles
{
	return undef if rand() < 0.67;
	return join('|',
		pick('SQL, MDY', 'Postgres, MDY', 'ISO, MDY'),
		pick('postgres', 'postgres_verbose', 'iso_8601'),
		pick(-15, 0, 1, 3));
}

# Load them in one statement: COPY, so no quoting beyond COPY's own
my $copy = "COPY cases (id, fn, typ, args, styles, checkable) FROM stdin;\n";
for my $i (0 .. $#cases)
{
	my ($fn, $type, $doc, $scalar) = @{ $cases[$i] };
	my $esc = sub {
		my ($s) = @_;
		return '\\N' if !defined $s;
		$s =~ s/\\/\\\\/g;
		$s =~ s/\n/\\n/g;
		$s =~ s/\r/\\r/g;
		$s =~ s/\t/\\t/g;
		return $s;
	};
	my $check = ($scalar && defined $type) ? 't' : 'f';
	$copy .= join("\t",
		$i + 1, $esc->($fn), $esc->($type), $esc->($doc),
		$esc->(random_styles()), $check) . "\n";
}
$copy .= "\\.\n";
{
	my $bytes = $copy;
	utf8::encode($bytes);
	my ($ret, $out, $err) = (0, '', '');
	$ret = $node->psql('postgres', $bytes, stdout => \$out, stderr => \$err);
	is($ret, 0, 'the argument documents are loaded') or diag($err);
}
is($node->safe_psql('postgres', 'SELECT count(*) FROM cases'),
	scalar(@cases), 'every document is there');

# Schedule each in its own subtransaction, under its output settings: an
# id, or the error's SQLSTATE and message.  For single-parameter functions
# given a scalar, also what the parameter's type makes of it directly (with
# the default settings, as the worker has them), to compare with what the
# function receives.
my ($ret, $out, $err) = $node->psql(
	'postgres', q{
DO $$
DECLARE
	c		record;
	j		jsonb;
	call	bigint;
	st		text;
	msg		text;
	path	text[];
	exp		text;
	ds		text := current_setting('datestyle');
	ist		text := current_setting('intervalstyle');
	efd		text := current_setting('extra_float_digits');
BEGIN
	FOR c IN SELECT * FROM cases ORDER BY cases.id LOOP
		j := NULL;
		call := NULL;
		IF c.styles IS NOT NULL THEN
			PERFORM set_config('datestyle', split_part(c.styles, '|', 1), true),
					set_config('intervalstyle', split_part(c.styles, '|', 2), true),
					set_config('extra_float_digits', split_part(c.styles, '|', 3), true);
		END IF;
		BEGIN
			j := c.args::jsonb;
			call := retries.call(c.fn::regprocedure, j);
			UPDATE cases SET call_id = call, parsed = true WHERE cases.id = c.id;
		EXCEPTION WHEN others THEN
			GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT;
			UPDATE cases SET sqlstate = st, message = msg, parsed = j IS NOT NULL
				WHERE cases.id = c.id;
		END;
		PERFORM set_config('datestyle', ds, true),
				set_config('intervalstyle', ist, true),
				set_config('extra_float_digits', efd, true);
		CONTINUE WHEN call IS NULL;
		IF c.checkable THEN
			path := CASE WHEN jsonb_typeof(j) = 'array' THEN '{0}' ELSE '{p}' END;
			BEGIN
				IF c.typ IN ('json', 'jsonb') THEN
					-- JSON null is SQL NULL for these too
					exp := nullif((j #> path)::text, 'null');
				ELSE
					EXECUTE format('SELECT ($1 #>> $2)::%s::text', c.typ)
						INTO exp USING j, path;
				END IF;
			EXCEPTION WHEN others THEN
				exp := 'direct conversion failed: ' || SQLERRM;
			END;
			UPDATE cases SET expected = exp WHERE cases.id = c.id;
		END IF;
	END LOOP;
END $$;
});
is($ret, 0, 'every document was tried in one session that never lost its server')
  or diag("stdout: $out\nstderr: $err");

my $summary = $node->safe_psql('postgres', q{
SELECT count(*) FILTER (WHERE call_id IS NOT NULL) || ' accepted, '
	|| count(*) FILTER (WHERE call_id IS NULL AND parsed) || ' refused by retries.call, '
	|| count(*) FILTER (WHERE NOT parsed) || ' not valid jsonb'
FROM cases});
diag("011_args_fuzz: $summary");
diag('011_args_fuzz: SQLSTATEs of the refusals: '
	  . $node->safe_psql('postgres', q{
SELECT string_agg(sqlstate || ' x' || n, ', ' ORDER BY n DESC)
FROM (SELECT sqlstate, count(*) n FROM cases WHERE call_id IS NULL
	  GROUP BY sqlstate) s}));

# a. clean errors
is( $node->safe_psql(
		'postgres', q{
SELECT count(*) FROM cases
WHERE call_id IS NULL AND (sqlstate IS NULL OR sqlstate ~ '^XX'
						   OR coalesce(message, '') = '')}),
	'0',
	'every refusal has a SQLSTATE outside class XX and a message')
  or diag(
	$node->safe_psql(
		'postgres', q{
SELECT string_agg(id || ' ' || fn || ' ' || coalesce(sqlstate, '?') || ' '
		|| coalesce(message, '?') || ' ' || left(args, 200), E'\n')
FROM cases
WHERE call_id IS NULL AND (sqlstate IS NULL OR sqlstate ~ '^XX'
						   OR coalesce(message, '') = '')}));
isnt( $node->safe_psql('postgres',
		'SELECT count(*) FROM cases WHERE call_id IS NOT NULL AND checkable'),
	'0', 'some scalar arguments were accepted');
isnt($node->safe_psql('postgres',
		'SELECT count(*) FROM cases WHERE call_id IS NULL AND parsed'),
	'0', 'some documents were refused by retries.call');

# b. every accepted call ran once and succeeded
wait_until(
	$node, 'postgres', q{
SELECT count(*) FROM retries.calls WHERE state IN ('scheduled', 'running')},
	'0', 'every accepted call has finished', 180);
is( $node->safe_psql(
		'postgres', q{
SELECT count(*) FROM cases c JOIN retries.calls k ON k.id = c.call_id
WHERE k.state <> 'succeeded'}),
	'0',
	'every accepted call succeeded')
  or diag(
	$node->safe_psql(
		'postgres', q{
SELECT string_agg(c.id || ' ' || c.fn || ' ' || k.state || ': '
		|| coalesce(k.last_message, '') || ' <- ' || left(c.args, 200), E'\n')
FROM cases c JOIN retries.calls k ON k.id = c.call_id
WHERE k.state <> 'succeeded'}));
is( $node->safe_psql(
		'postgres', q{
SELECT count(*) FROM cases c
WHERE c.call_id IS NOT NULL
  AND ((SELECT count(*) FROM got g WHERE g.call_id = c.call_id) <> 1
	   OR NOT EXISTS (SELECT FROM retries.attempts a
					  WHERE a.call_id = c.call_id AND a.outcome = 'succeeded'))}),
	'0',
	'each ran exactly once, with its attempt recorded');
is($node->safe_psql('postgres', 'SELECT count(*) FROM got WHERE call_id IS NULL'),
	'0', 'every run knew its call');

# c. the function got what the type makes of the JSON value
is( $node->safe_psql(
		'postgres', q{
SELECT count(*) FROM cases c JOIN got g ON g.call_id = c.call_id
WHERE c.checkable AND g.val IS DISTINCT FROM c.expected}),
	'0',
	'each scalar argument arrived as its type reads it')
  or diag(
	$node->safe_psql(
		'postgres', q{
SELECT string_agg(c.id || ' ' || c.fn || ': got ' || coalesce(left(g.val, 100), 'NULL')
		|| ', expected ' || coalesce(left(c.expected, 100), 'NULL'), E'\n')
FROM cases c JOIN got g ON g.call_id = c.call_id
WHERE c.checkable AND g.val IS DISTINCT FROM c.expected}));
is( $node->safe_psql(
		'postgres', q{
SELECT length(g.val) FROM cases c JOIN got g ON g.call_id = c.call_id
WHERE c.fn = 'f_text(text)' AND length(c.args) > 900000}),
	length($mb), 'the 1 MB string arrived whole');

# d. no crash
is($node->safe_psql('postgres', 'SELECT pg_postmaster_start_time()'),
	$start_time, 'the server was never restarted');
my $log = slurp_file($node->logfile);
unlike($log, qr/terminated by signal|PANIC:|was terminated by exception/,
	'no backend or worker died');

$node->stop;
done_testing();
