# Every example in the docs runs, and the reference documents everything.
#
# 1. The examples.  The ```sql blocks of README.md and doc/*.md (except
#    doc/benchmarks.md, which bench/run writes) are run in document order,
#    README.md first, then doc/*.md by name.  Each markdown file gets a
#    fresh database of its own (doctest_<file name>) on one cluster that
#    preloads retries (dblink and postgres_fdw are there to be created),
#    and one psql session (psql -X -q, aligned output, default verbosity),
#    which runs its blocks one after the other as if they were typed into
#    it: SET, \set and open transactions carry over from block to block.
#    Connection strings that name only a database (dbname=warehouse) reach
#    the same cluster: the server has PGHOST and PGPORT in its environment.
#
#    - A ```text block right after a ```sql block (blank lines between are
#      fine) is the output that block must print: stdout and stderr as
#      psql writes them to a terminal, compared line by line with trailing
#      white space and leading and trailing blank lines ignored.  Errors
#      (ERROR:, with DETAIL:, HINT: ...) are part of the output; to show a
#      SQLSTATE, a block can \echo :LAST_ERROR_SQLSTATE.
#    - A block without such an output block must not print ERROR, FATAL or
#      PANIC: an error that an example means to show is shown.
#    - A block must end with a semicolon or a psql backslash command (\c,
#      \gset, ...), so that psql runs all of it before the test reads its
#      output.
#
#    Directives are HTML comments, invisible when the markdown is
#    rendered; they may span lines:
#
#      <!-- doctest: wait until SQL -->
#          Poll SQL (one boolean) in a connection of its own every 50 ms
#          until it is true, for at most $RetriesTest::DEADLINE seconds;
#          for examples that show what the workers did.
#      <!-- doctest: setup SQL -->
#          Run SQL in the session without showing it (a table or function
#          that a snippet assumes); it must not fail.
#      <!-- doctest: skip REASON -->
#          Do not run the next ```sql block; REASON (required) says why,
#          e.g. it is a postgresql.conf line or needs a second server.
#      <!-- doctest: needs EXTENSION ... -->
#          Run the next item (a ```sql block, a setup or a wait) only if
#          those extensions are installed on the server (their control
#          files): pg_cron (which the cluster then preloads, with
#          cron.database_name the cookbook's database) and pg_partman are
#          Debian's postgresql-NN-cron and postgresql-NN-partman, which
#          scripts/test installs; where they are missing (a PostgreSQL
#          built from source) the item is skipped, and the test says so.
#
#    Anything else after "doctest:" is an error, so a typo cannot turn a
#    check off.  After each file the test runs ALTER SYSTEM RESET ALL and
#    a reload, so a file that changes settings leaves none behind.
#
# 2. Completeness of doc/reference.md, from the catalogs of a database with
#    the extension and from the sources:
#    - every setting (pg_settings, retries.*) has a heading under
#      "## Settings" whose section gives its type, default, context and,
#      for numbers, its range, each in backquotes;
#    - every function of schema retries has a heading under "## Functions"
#      whose section names each input parameter in backquotes and its
#      RETURNS type, or is listed under "## Internal objects";
#    - every view has a heading under "## Views" with a table row
#      "| `column` | `type` | ..." for each column, with the right type;
#    - every value of the two enum types has a row under "### Call states"
#      or "### Attempt outcomes";
#    - every table, sequence, type and event trigger of the extension is
#      named somewhere;
#    - every SQLSTATE the sources raise or record (ERRCODE_* in src/**/*.c and
#      src/**/*.h, ERRCODE = '...' in the SQL scripts) has a row under
#      "## Errors".
#    Adding a setting, parameter, column or error code without documenting
#    it fails here.
#
# RETRIES_DOCTEST_WRITE=DIR writes a copy of each file whose shown output
# differs, with the output psql printed, into DIR, to review with diff.

use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use File::Basename;
use File::Path qw(make_path);
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RetriesTest;
use Test::More;
use Time::HiRes qw(time);

my $root = "$FindBin::RealBin/..";
my @files = ('README.md',
	map { "doc/" . basename($_) }
	  grep { basename($_) ne 'benchmarks.md' } sort glob("$root/doc/*.md"));

my $node = retries_node('docs');

# installed(EXTENSION): whether the server has EXTENSION's control file
sub installed
{
	my ($extension) = @_;
	return -e $node->config_data('--sharedir') . "/extension/$extension.control";
}

# pg_cron runs in the cookbook's database ("Moving from pg_cron"); until
# run_file makes it, pg_cron's launcher retries its connection every second
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'retries,pg_cron'
cron.database_name = 'doctest_cookbook'
}) if installed('pg_cron');
$node->start;

###########################################################################
# parsing
###########################################################################

# parse_markdown(FILE): the runnable items of FILE, in order: hashes with
# kind 'sql' (text, line, and output, output_line when it has one, or skip
# with a reason), 'wait' (sql, line) or 'setup' (sql, line).  Dies on a
# malformed directive or block.
sub parse_markdown
{
	my ($file) = @_;
	my @lines = split /\n/, slurp_file("$root/$file"), -1;
	my @items;
	my $pending_skip;
	my $pending_needs;	# extensions the next item needs
	my $last_sql;		# the sql item an output block may belong to
	my $i = 0;

	while ($i < @lines)
	{
		my $line = $lines[$i];
		my $lineno = $i + 1;

		if ($line =~ /^\s*<!--\s*doctest:(.*)$/)
		{
			my $text = $1;
			until ($text =~ s/-->\s*$//)
			{
				$i++;
				die "$file:$lineno: unterminated doctest directive\n"
				  if $i >= @lines;
				$text .= "\n" . $lines[$i];
			}
			$text =~ s/^\s+|\s+$//g;
			if ($text =~ /^wait until\s+(\S.*)$/s)
			{
				push @items,
				  { kind => 'wait', sql => $1, line => $lineno, needs => $pending_needs };
				$pending_needs = undef;
			}
			elsif ($text =~ /^setup\s+(\S.*)$/s)
			{
				push @items,
				  { kind => 'setup', sql => $1, line => $lineno, needs => $pending_needs };
				$pending_needs = undef;
			}
			elsif ($text =~ /^skip\s+(\S.*)$/s)
			{
				$pending_skip = { reason => $1, line => $lineno };
			}
			elsif ($text =~ /^needs\s+(\w+(?:\s+\w+)*)$/)
			{
				$pending_needs = [ split /\s+/, $1 ];
			}
			else
			{
				die "$file:$lineno: unknown doctest directive \"$text\""
				  . " (wait until SQL, setup SQL, skip REASON, needs EXTENSION ...)\n";
			}
			$last_sql = undef;
			$i++;
			next;
		}

		if ($line =~ /^(\s*)(`{3,}|~{3,})\s*([\w+-]*)/)
		{
			my ($indent, $fence, $info) = (length($1), $2, $3);
			my @body;

			$i++;
			while ($i < @lines
				&& $lines[$i] !~ /^\s*\Q$fence\E\s*$/)
			{
				my $l = $lines[$i];
				$l =~ s/^ {0,$indent}//;
				push @body, $l;
				$i++;
			}
			die "$file:$lineno: unterminated code block\n" if $i >= @lines;
			$i++;
			my $text = join("\n", @body) . "\n";

			if ($info eq 'sql')
			{
				my $item = {
					kind => 'sql',
					text => $text,
					line => $lineno,
					needs => $pending_needs
				};
				$pending_needs = undef;
				if ($pending_skip)
				{
					$item->{skip} = $pending_skip->{reason};
					$pending_skip = undef;
				}
				else
				{
					check_block_end($file, $lineno, $text);
				}
				push @items, $item;
				$last_sql = $item;
				next;
			}
			die "$file:$pending_skip->{line}: doctest: skip is not followed"
			  . " by a ```sql block\n"
			  if $pending_skip;
			if ($info eq 'text' && $last_sql)
			{
				$last_sql->{output} = $text;
				$last_sql->{output_line} = $lineno;
			}
			$last_sql = undef;
			next;
		}

		# blank lines keep an output block attached to its sql block
		$last_sql = undef if $line =~ /\S/;
		$i++;
	}
	die "$file:$pending_skip->{line}: doctest: skip at the end of the file\n"
	  if $pending_skip;
	die "$file: doctest: needs at the end of the file\n" if $pending_needs;
	return @items;
}

# check_block_end(FILE, LINE, TEXT): psql must have run all of a block
# when it reaches the line after it
sub check_block_end
{
	my ($file, $lineno, $text) = @_;
	my @l = grep { /\S/ && !/^\s*--/ } split /\n/, $text;

	die "$file:$lineno: empty ```sql block\n" unless @l;
	die "$file:$lineno: the ```sql block does not end with a semicolon"
	  . " or a backslash command\n"
	  unless $l[-1] =~ /;\s*(--.*)?$/ || $l[-1] =~ /(^|\s)\\[A-Za-z!]/;
	return;
}

# normalize(TEXT): lines without trailing white space, without leading and
# trailing blank lines
sub normalize
{
	my ($text) = @_;
	my @l = map { s/\s+$//r } split /\n/, $text;
	shift @l while @l && $l[0] eq '';
	pop @l while @l && $l[-1] eq '';
	return join("\n", @l) . "\n";
}

# show_difference(EXPECTED, ACTUAL): both, numbered, the first differing
# line marked
sub show_difference
{
	my ($expected, $actual) = @_;
	my @e = split /\n/, $expected;
	my @a = split /\n/, $actual;
	my $first = 0;
	$first++
	  while $first < @e && $first < @a && $e[$first] eq $a[$first];
	my $out = "first difference at output line " . ($first + 1) . "\n";
	for my $pair (['shown in the docs', \@e], ['printed by psql', \@a])
	{
		$out .= "--- $pair->[0]:\n";
		for my $n (0 .. $#{ $pair->[1] })
		{
			$out .= sprintf("%s%3d| %s\n",
				$n == $first ? '>' : ' ', $n + 1, $pair->[1][$n]);
		}
	}
	return $out;
}

###########################################################################
# running
###########################################################################

# A psql session fed block by block: each block is followed by an \echo of
# a marker, and its output is what psql printed before the marker.
package DocSession
{
	my $counter = 0;

	sub new
	{
		my ($class, $node, $db) = @_;
		my $self = bless { in => '', out => '' }, $class;
		$self->{timer} = IPC::Run::timeout(180);
		$self->{handle} = IPC::Run::start(
			[ 'psql', '-X', '-q', '-d', $node->connstr($db) ],
			'<', \$self->{in}, '>', \$self->{out}, '2>&1', $self->{timer});
		return $self;
	}

	# run(SQL): what psql printed for SQL (stdout and stderr, in order)
	sub run
	{
		my ($self, $sql) = @_;
		my $marker = "__doctest_marker_" . ++$counter . "__";

		$self->{out} = '';
		$self->{in} .= $sql;
		$self->{in} .= "\n" unless $sql =~ /\n$/;
		$self->{in} .= "\\echo $marker\n";
		$self->{timer}->start(180);
		IPC::Run::pump($self->{handle})
		  until $self->{out} =~ /^\Q$marker\E$/m;
		my $out = $self->{out};
		$out =~ s/^\Q$marker\E\n.*//ms;
		return $out;
	}

	sub finish
	{
		my ($self) = @_;
		$self->{in} .= "\\q\n";
		IPC::Run::finish($self->{handle});
		return;
	}
}

my %counts;
my %rewritten;

# run_file(FILE): run FILE's items in a fresh database
sub run_file
{
	my ($file) = @_;
	my @items = eval { parse_markdown($file) };
	if ($@)
	{
		fail("$file parses");
		diag($@);
		return;
	}

	(my $db = 'doctest_' . basename($file, '.md')) =~ s/\W/_/g;
	$db = lc $db;
	$node->safe_psql('postgres', "CREATE DATABASE $db");
	my $session = DocSession->new($node, $db);
	my $started = time();
	my %c = (run => 0, compared => 0, skipped => 0, waits => 0, setups => 0);

	for my $item (@items)
	{
		my $where = "$file:$item->{line}";
		my $out;
		my @missing = grep { !installed($_) } @{ $item->{needs} // [] };

		if (@missing)
		{
			$c{skipped}++;
			note("$where: skipped: @missing not installed");
			next;
		}

		if ($item->{kind} eq 'wait')
		{
			$c{waits}++;
			my $sql = $item->{sql} =~ s/;\s*$//r;
			next if wait_until($node, $db, $sql, 't', "$where: wait until $sql");
			diag("the calls and attempts of $db:\n"
				  . ($node->safe_psql($db,
					"SELECT id, fn, state, attempts FROM retries.calls ORDER BY id;"
					  . " SELECT call_id, attempt, outcome, sqlstate, message"
					  . " FROM retries.attempts ORDER BY call_id, attempt")));
			last;
		}
		if ($item->{kind} eq 'setup')
		{
			$c{setups}++;
			$out = eval { $session->run($item->{sql}) };
			if (!defined $out || $out =~ /^(ERROR|FATAL|PANIC):/m)
			{
				fail("$where: setup runs");
				diag($out // $@);
				last;
			}
			next;
		}
		if (defined $item->{skip})
		{
			$c{skipped}++;
			note("$where: skipped: $item->{skip}");
			next;
		}

		$c{run}++;
		$out = eval { $session->run($item->{text}) };
		if (!defined $out)
		{
			fail("$where: the block runs");
			diag("psql did not finish the block: $@");
			last;
		}
		if (defined $item->{output})
		{
			$c{compared}++;
			my ($expected, $actual) =
			  (normalize($item->{output}), normalize($out));
			if ($expected eq $actual)
			{
				pass("$where: output as shown (line $item->{output_line})");
			}
			else
			{
				fail("$where: output as shown (line $item->{output_line})");
				diag("the block:\n$item->{text}"
					  . show_difference($expected, $actual));
				$rewritten{$file}{ $item->{output_line} } = $actual;
			}
		}
		elsif ($out =~ /^(ERROR|FATAL|PANIC):/m)
		{
			fail("$where: the block runs without an error");
			diag("the block:\n$item->{text}psql printed:\n$out");
		}
		else
		{
			pass("$where: the block runs");
		}
	}
	eval { $session->finish };
	$node->safe_psql('postgres',
		'ALTER SYSTEM RESET ALL; SELECT pg_reload_conf();');

	$c{seconds} = sprintf('%.1f', time() - $started);
	$counts{$file} = \%c;
	return;
}

# write_actual(FILE, DIR): FILE with the outputs psql printed in place of
# the ones shown
sub write_actual
{
	my ($file, $dir) = @_;
	my @lines = split /\n/, slurp_file("$root/$file"), -1;
	my $replace = $rewritten{$file};

	for my $start (sort { $b <=> $a } keys %$replace)
	{
		my $open = $lines[ $start - 1 ];
		my ($indent, $fence) = $open =~ /^(\s*)(`{3,}|~{3,})/;
		my $end = $start;
		$end++ until $lines[$end] =~ /^\s*\Q$fence\E\s*$/;
		my @new = map { $_ eq '' ? '' : "$indent$_" }
		  split /\n/, $replace->{$start};
		splice @lines, $start, $end - $start, @new;
	}
	make_path(dirname("$dir/$file"));
	open my $fh, '>', "$dir/$file" or die "$dir/$file: $!";
	print $fh join("\n", @lines);
	close $fh;
	return;
}

###########################################################################
# completeness of doc/reference.md
###########################################################################

# sections(FILE): [level, heading, body] for each heading of FILE; body
# runs to the next heading of the same or a higher level
sub sections
{
	my ($file) = @_;
	my @lines = split /\n/, slurp_file("$root/$file");
	my @heads;
	my $fence;

	for my $n (0 .. $#lines)
	{
		if ($lines[$n] =~ /^\s*(`{3,}|~{3,})/)
		{
			my $f = $1;
			$fence = defined $fence ? ($lines[$n] =~ /^\s*\Q$fence\E\s*$/ ? undef : $fence) : $f;
			next;
		}
		next if defined $fence;
		push @heads, [ length($1), $2, $n ] if $lines[$n] =~ /^(#+)\s+(.*)$/;
	}
	my @sections;
	for my $h (0 .. $#heads)
	{
		my ($level, $title, $start) = @{ $heads[$h] };
		my $end = $#lines;
		for my $k ($h + 1 .. $#heads)
		{
			if ($heads[$k][0] <= $level)
			{
				$end = $heads[$k][2] - 1;
				last;
			}
		}
		push @sections,
		  [ $level, $title, join("\n", @lines[ $start + 1 .. $end ]) ];
	}
	return @sections;
}

# section(SECTIONS, LEVEL, PATTERN): body of the first section of LEVEL
# whose heading matches PATTERN, inside PARENT's body if given
sub find_section
{
	my ($sections, $level, $pattern, $within) = @_;
	for my $s (@$sections)
	{
		next unless $s->[0] == $level && $s->[1] =~ $pattern;
		next if defined $within && index($within, $s->[2]) < 0;
		return $s->[2];
	}
	return undef;
}

# the types in the tables of the reference may use these short names
my %type_alias = (
	'timestamptz' => 'timestamp with time zone',
	'int' => 'integer',
	'int4' => 'integer',
	'int8' => 'bigint',
	'float8' => 'double precision',
	'bool' => 'boolean');

sub check_reference
{
	my $ref = 'doc/reference.md';
	if (!-f "$root/$ref")
	{
		fail("$ref exists");
		return 0;
	}
	my @sections = sections($ref);
	my $all = slurp_file("$root/$ref");
	my $checked = 0;
	my $db = 'doctest_catalog';

	$node->safe_psql('postgres', "CREATE DATABASE $db");
	$node->safe_psql($db, 'CREATE EXTENSION retries');
	my $query = sub {
		my @rows = map { [ split /\|/, $_, -1 ] }
		  grep { $_ ne '' } split /\n/, $node->safe_psql($db, $_[0]);
		return @rows;
	};

	# settings
	my $settings = find_section(\@sections, 2, qr/^Settings$/) // '';
	for my $row ($query->(
			"SELECT name, vartype, boot_val, context, coalesce(min_val, ''),"
			  . " coalesce(max_val, '') FROM pg_settings"
			  . " WHERE name LIKE 'retries.%' ORDER BY name"))
	{
		my ($name, @facts) = @$row;
		$checked++;
		my $body =
		  find_section(\@sections, 3, qr/`\Q$name\E`/, $settings);
		if (!defined $body)
		{
			fail("reference: setting $name has a section under ## Settings");
			next;
		}
		my @missing = grep { $_ ne '' && index($body, "`$_`") < 0 } @facts;
		ok(!@missing, "reference: setting $name: type, default, context, range")
		  or diag("the section of $name in $ref does not give, in"
			  . " backquotes: @missing");
	}

	# functions
	my $functions = find_section(\@sections, 2, qr/^Functions$/) // '';
	my $internal = find_section(\@sections, 2, qr/^Internal objects$/) // '';
	for my $row ($query->(
			"SELECT p.proname, pg_get_function_result(p.oid),"
			  . " coalesce(array_to_string(ARRAY("
			  . "   SELECT n FROM unnest(p.proargnames, p.proargmodes) AS a(n, m)"
			  . "   WHERE coalesce(m, 'i') IN ('i', 'b', 'v')), ','), '')"
			  . " FROM pg_proc p WHERE p.pronamespace = 'retries'::regnamespace"
			  . " ORDER BY 1"))
	{
		my ($name, $result, $params) = @$row;
		$checked++;
		my $body =
		  find_section(\@sections, 3, qr/`retries\.\Q$name\E`/, $functions);
		if (defined $body)
		{
			my @missing =
			  grep { index($body, "`$_`") < 0 } split /,/, $params;
			push @missing, "RETURNS $result"
			  unless $body =~ /RETURNS\s+\Q$result\E(?!\w)/i;
			ok(!@missing, "reference: function retries.$name")
			  or diag("the section of retries.$name in $ref does not"
				  . " mention: @missing");
		}
		else
		{
			ok($internal =~ /`retries\.\Q$name\E[`(]/,
				"reference: function retries.$name")
			  or diag("retries.$name has no heading under ## Functions in $ref"
				  . " and is not listed under ## Internal objects");
		}
	}

	# views and their columns
	my $views = find_section(\@sections, 2, qr/^Views$/) // '';
	my %columns;
	for my $row ($query->(
			"SELECT c.relname, a.attname, format_type(a.atttypid, a.atttypmod)"
			  . " FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid"
			  . " WHERE c.relnamespace = 'retries'::regnamespace"
			  . " AND c.relkind = 'v' AND a.attnum > 0 AND NOT a.attisdropped"
			  . " ORDER BY c.relname, a.attnum"))
	{
		push @{ $columns{ $row->[0] } }, [ $row->[1], $row->[2] ];
	}
	# retries.recent_calls is retries.calls newest first: the same columns
	is_deeply($columns{recent_calls}, $columns{calls},
		'reference: retries.recent_calls has the columns of retries.calls');
	for my $view (sort keys %columns)
	{
		$checked++;
		my $body =
		  find_section(\@sections, 3, qr/`retries\.\Q$view\E`/, $views);
		if (!defined $body)
		{
			fail("reference: view retries.$view has a section under ## Views");
			next;
		}
		my %documented;
		while ($body =~ /^\|\s*`([^`]+)`\s*\|\s*`([^`]+)`\s*\|/mg)
		{
			$documented{$1} = $type_alias{$2} // $2;
		}
		for my $col (@{ $columns{$view} })
		{
			my ($name, $type) = @$col;
			$checked++;
			if (!exists $documented{$name})
			{
				fail("reference: column retries.$view.$name");
				diag("$ref: no row \"| `$name` | `$type` | ... |\" in the"
					  . " section of retries.$view");
			}
			else
			{
				is($documented{$name}, $type,
					"reference: column retries.$view.$name, its type")
				  or diag("$ref documents retries.$view.$name as"
					  . " $documented{$name}; the view has $type");
			}
		}
	}

	# states and outcomes
	for my $enum (['call_state', qr/^Call states$/],
		['attempt_outcome', qr/^Attempt outcomes$/])
	{
		my $body = find_section(\@sections, 3, $enum->[1]) // '';
		for my $row ($query->(
				"SELECT unnest(enum_range(NULL::retries.$enum->[0]))::text"))
		{
			$checked++;
			like($body, qr/^\|\s*`\Q$row->[0]\E`\s*\|/m,
				"reference: $enum->[0] value $row->[0] has a row");
		}
	}

	# other objects: named somewhere
	for my $row ($query->(
			"SELECT 'retries.' || relname FROM pg_class"
			  . " WHERE relnamespace = 'retries'::regnamespace"
			  . " AND relkind IN ('r', 'S')"
			  . " UNION ALL SELECT 'retries.' || typname FROM pg_type"
			  . " WHERE typnamespace = 'retries'::regnamespace AND typtype = 'e'"
			  . " UNION ALL SELECT evtname FROM pg_event_trigger"
			  . " WHERE evtfoid::regproc::text LIKE 'retries.%'"
			  . " ORDER BY 1"))
	{
		$checked++;
		ok(index($all, "`$row->[0]`") >= 0, "reference: $row->[0] is named")
		  or diag("$ref does not name `$row->[0]`");
	}

	# SQLSTATEs
	my %by_macro;
	my %by_condition;
	my $sharedir = $node->config_data('--sharedir');
	for my $l (split /\n/, slurp_file("$sharedir/errcodes.txt"))
	{
		next unless $l =~ /^([0-9A-Z]{5})\s+[EWS]\s+(ERRCODE_\w+)(?:\s+(\w+))?/;
		$by_macro{$2} = $1;
		$by_condition{$3} = $1 if defined $3;
	}
	for my $h (glob("$root/src/*.h $root/src/*/*.h"))
	{
		my $text = slurp_file($h);
		while ($text =~
			/#define\s+(ERRCODE_\w+)\s+MAKE_SQLSTATE\('(.)',\s*'(.)',\s*'(.)',\s*'(.)',\s*'(.)'\)/g)
		{
			$by_macro{$1} = "$2$3$4$5$6";
		}
	}
	my %codes;
	# A copy of the tests without the sources (scripts/package checks the
	# installed package that way) has nothing to compare.
	note("no src/*.c here: the SQLSTATEs of the sources are not checked")
	  unless glob("$root/src/*/*.c");
	for my $src (glob("$root/src/*.[ch] $root/src/*/*.[ch]"))
	{
		my $text = slurp_file($src);
		while ($text =~ /\b(ERRCODE_\w+)/g)
		{
			my $macro = $1;
			next if $macro =~ /^ERRCODE_(TO_CATEGORY|IS_CATEGORY)$/;
			next if $text =~ /#define\s+\Q$macro\E\b/;
			if (!exists $by_macro{$macro})
			{
				fail("SQLSTATE of $macro (" . basename($src) . ") is known");
				next;
			}
			$codes{ $by_macro{$macro} } //= basename($src);
		}
	}
	for my $sql (glob("$root/*.sql"))
	{
		my $text = slurp_file($sql);
		while ($text =~ /ERRCODE\s*=\s*'(\w+)'/g)
		{
			my $code = $by_condition{$1} // uc $1;
			$codes{$code} //= basename($sql);
		}
	}
	my $errors = find_section(\@sections, 2, qr/^Errors$/) // '';
	my %rows;
	while ($errors =~ /^\|([^|\n]*)\|/mg)
	{
		my $cell = $1;
		$rows{$1} = 1 while $cell =~ /`([0-9A-Z]{5})`/g;
	}
	for my $code (sort keys %codes)
	{
		$checked++;
		ok($rows{$code}, "reference: SQLSTATE $code has a row under ## Errors")
		  or diag("$code is used in $codes{$code} but has no row"
			  . " \"| `$code` | ...\" under ## Errors in $ref");
	}

	$node->safe_psql('postgres', "DROP DATABASE $db");
	return $checked;
}

###########################################################################
# main
###########################################################################

my $checked = check_reference();
note("reference: $checked objects checked");

run_file($_) for @files;

for my $file (@files)
{
	my $c = $counts{$file} or next;
	note(sprintf(
			"%-22s %3d blocks run, %3d outputs compared, %2d skipped,"
			  . " %2d waits, %2d setups, %5s s",
			$file, @$c{qw(run compared skipped waits setups seconds)}));
}

if (my $dir = $ENV{RETRIES_DOCTEST_WRITE})
{
	write_actual($_, $dir) for sort keys %rewritten;
	note("wrote what psql printed to $dir/$_") for sort keys %rewritten;
}

$node->stop;
done_testing();
