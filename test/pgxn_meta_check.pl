#!/usr/bin/perl
#
# test/pgxn_meta_check.pl: validate a META.json against the PGXN Meta Spec
# 1.0.0 (https://pgxn.org/spec/).  PGXN's own validator (PGXN::Meta::Validator)
# is on CPAN only, so this is ours, with core Perl (JSON::PP).
#
#   perl test/pgxn_meta_check.pl [--version V] [--root DIR] [--self-test] META.json
#
# It checks what the spec requires: the required keys (name, version,
# abstract, maintainer, license, provides, meta-spec), that no other keys
# appear than the spec's and custom x_ ones, the type of every value, the
# semantic-versioning 2.0.0 form of every version, the version ranges of
# prereqs, license identifiers from the spec's list, terms and tags, the
# meta-spec version (1.0.x), URIs and addresses in resources.  With
# --version V the distribution and every extension in provides must have
# version V (make metacheck passes the release version derived from
# retries.control); with --root DIR every file and docfile in provides must
# exist under DIR.  --self-test also feeds broken copies of the document
# (a required key missing, a version that is not semver, an unknown license,
# ...) to the same checks and fails unless each is rejected, so that a check
# that accepts everything cannot pass unnoticed.
#
# Exit status 0 when valid; otherwise 1 and one line per problem, each
# naming the key by its JSON pointer.

use strict;
use warnings;

use B ();
use Getopt::Long qw(GetOptions);
use JSON::PP ();

my ($want_version, $root, $self_test);
GetOptions(
	'version=s' => \$want_version,
	'root=s' => \$root,
	'self-test' => \$self_test)
  or die "usage: $0 [--version V] [--root DIR] [--self-test] META.json\n";
@ARGV == 1
  or die "usage: $0 [--version V] [--root DIR] [--self-test] META.json\n";
my $file = $ARGV[0];

# Semantic Versioning 2.0.0, as the spec's version schema writes it
my $SEMVER = qr/(?:0|[1-9]\d*)\.(?:0|[1-9]\d*)\.(?:0|[1-9]\d*)
	(?:-(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*)?
	(?:\+[0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*)?/x;
# a version range: comma-separated versions, each with an optional operator
my $RANGE_ITEM = qr/(?:(?:[=!]=|[<>]=?)\s*)?(?:$SEMVER)/;
my $RANGE = qr/^(?:$RANGE_ITEM|(?:(?:[=!]=|[<>]=?)\s*)?0)(?:,\s*$RANGE_ITEM)*$/;

my %LICENSES = map { $_ => 1 } qw(
  agpl_3 apache_1_1 apache_2_0 artistic_1 artistic_2 bsd freebsd gfdl_1_2
  gfdl_1_3 gpl_1 gpl_2 gpl_3 lgpl_2_1 lgpl_3_0 mit mozilla_1_0 mozilla_1_1
  openssl perl_5 postgresql qpl_1_0 ssleay sun zlib open_source restricted
  unrestricted unknown);
my @REQUIRED = qw(name version abstract maintainer license provides meta-spec);
my %TOP_KEYS = map { $_ => 1 } @REQUIRED, qw(description generated_by tags
  no_index prereqs release_status resources);
my %PHASES = map { $_ => 1 } qw(configure build test runtime develop);
my %RELATIONSHIPS = map { $_ => 1 } qw(requires recommends suggests conflicts);
my %RELEASE_STATUS = map { $_ => 1 } qw(stable testing unstable);
my %META_SPEC_URLS =
  map { $_ => 1 } qw(https://pgxn.org/meta/spec.txt http://pgxn.org/meta/spec.txt);

my @errors;

sub problem { push @errors, "$_[0]: $_[1]" }

# json_type(VALUE): object, array, string, number, boolean or null.  A
# number decoded by JSON::PP has no string flag until it is used as one,
# so this must run before the value is.
sub json_type
{
	my ($v) = @_;
	return 'null' unless defined $v;
	my $r = ref $v;
	return 'object' if $r eq 'HASH';
	return 'array' if $r eq 'ARRAY';
	return 'boolean' if $r eq 'JSON::PP::Boolean';
	return "a Perl $r" if $r;
	my $flags = B::svref_2object(\$v)->FLAGS;
	return 'number'
	  if ($flags & (B::SVp_IOK | B::SVp_NOK)) && !($flags & B::SVp_POK);
	return 'string';
}

sub is_type
{
	my ($path, $v, $type) = @_;
	my $got = json_type($v);
	return 1 if $got eq $type;
	problem($path, "must be a JSON $type, not $got");
	return 0;
}

sub check_string
{
	my ($path, $v) = @_;
	return 0 unless is_type($path, $v, 'string');
	return 1 if length $v;
	problem($path, 'must not be empty');
	return 0;
}

# a term: at least two characters, no slash, backslash, space or control
sub check_term
{
	my ($path, $v) = @_;
	return unless is_type($path, $v, 'string');
	problem($path,
		"\"$v\" is not a term (two or more characters, no slash, backslash, space or control character)"
	) unless $v =~ m{^[^/\\\p{Space}\p{Cntrl}]{2,}$};
}

sub check_semver
{
	my ($path, $v) = @_;
	return unless is_type($path, $v, 'string');
	problem($path,
		"\"$v\" is not a semantic version (MAJOR.MINOR.PATCH, semver 2.0.0)")
	  unless $v =~ /^$SEMVER$/;
}

sub check_uri
{
	my ($path, $v) = @_;
	return unless check_string($path, $v);
	problem($path, "\"$v\" is not a URI")
	  unless $v =~ m{^[A-Za-z][A-Za-z0-9+.-]*:[^\s]+$};
}

# a path: relative, Unix separators, inside the distribution; with MUST_EXIST
# (and --root) it must name a file there
sub check_path
{
	my ($path, $v, $must_exist) = @_;
	return unless is_type($path, $v, 'string');
	if (length $v < 2 || $v =~ m{^/} || $v =~ m{\\} || $v =~ m{(?:^|/)\.\.(?:/|$)})
	{
		problem($path,
			"\"$v\" is not a relative path inside the distribution (Unix separators)");
		return;
	}
	problem($path, "\"$v\" does not exist under $root")
	  if $must_exist && defined $root && !-e "$root/$v";
}

# the keys of an object: each either allowed or a custom x_ key
sub check_keys
{
	my ($path, $obj, %allowed) = @_;
	for my $k (sort keys %$obj)
	{
		next if $allowed{$k} || $k =~ /^[xX]_./;
		problem("$path/$k", 'is not a key the spec defines here (custom keys start with x_)');
	}
}

sub check_maintainer
{
	my ($path, $v) = @_;
	my $type = json_type($v);
	if ($type eq 'string') { check_string($path, $v); return; }
	if ($type eq 'array')
	{
		problem($path, 'must list at least one maintainer') unless @$v;
		check_string("$path/$_", $v->[$_]) for 0 .. $#$v;
		return;
	}
	problem($path, "must be a string or an array of strings, not $type");
}

sub check_license
{
	my ($path, $v) = @_;
	my $type = json_type($v);
	if ($type eq 'string')
	{
		problem($path, "\"$v\" is not one of the spec's license identifiers")
		  unless $LICENSES{$v};
	}
	elsif ($type eq 'array')
	{
		problem($path, 'must list at least one license') unless @$v;
		for my $i (0 .. $#$v)
		{
			next unless is_type("$path/$i", $v->[$i], 'string');
			problem("$path/$i", "\"$v->[$i]\" is not one of the spec's license identifiers")
			  unless $LICENSES{ $v->[$i] };
		}
	}
	elsif ($type eq 'object')
	{
		problem($path, 'must name at least one license') unless %$v;
		check_uri("$path/$_", $v->{$_}) for sort keys %$v;
	}
	else
	{
		problem($path, "must be a license identifier, an array of them or an object of URIs, not $type");
	}
}

sub check_provides
{
	my ($path, $v) = @_;
	return unless is_type($path, $v, 'object');
	problem($path, 'must name at least one extension') unless %$v;
	for my $ext (sort keys %$v)
	{
		my $p = "$path/$ext";
		check_term("$p (name)", $ext);
		my $e = $v->{$ext};
		next unless is_type($p, $e, 'object');
		for my $k (qw(file version))
		{
			problem($p, "has no \"$k\" (required)") unless exists $e->{$k};
		}
		check_keys($p, $e, map { $_ => 1 } qw(file version abstract docfile));
		check_path("$p/file", $e->{file}, 1) if exists $e->{file};
		check_path("$p/docfile", $e->{docfile}, 1) if exists $e->{docfile};
		check_string("$p/abstract", $e->{abstract}) if exists $e->{abstract};
		if (exists $e->{version})
		{
			check_semver("$p/version", $e->{version});
			problem("$p/version",
				"is \"$e->{version}\"; the release version is \"$want_version\" (from retries.control)"
			  )
			  if defined $want_version
			  && json_type($e->{version}) eq 'string'
			  && $e->{version} ne $want_version;
		}
	}
}

sub check_meta_spec
{
	my ($path, $v) = @_;
	return unless is_type($path, $v, 'object');
	check_keys($path, $v, version => 1, url => 1);
	if (!exists $v->{version})
	{
		problem($path, 'has no "version" (required)');
	}
	elsif (is_type("$path/version", $v->{version}, 'string'))
	{
		problem("$path/version", "\"$v->{version}\" is not 1.0.x, the spec checked here")
		  unless $v->{version} =~ /^1\.0\.\d+$/;
	}
	if (exists $v->{url} && is_type("$path/url", $v->{url}, 'string'))
	{
		problem("$path/url", "\"$v->{url}\" is not https://pgxn.org/meta/spec.txt")
		  unless $META_SPEC_URLS{ $v->{url} };
	}
}

sub check_tags
{
	my ($path, $v) = @_;
	return unless is_type($path, $v, 'array');
	problem($path, 'must list at least one tag') unless @$v;
	for my $i (0 .. $#$v)
	{
		next unless is_type("$path/$i", $v->[$i], 'string');
		problem("$path/$i",
			"\"$v->[$i]\" is not a tag (2 to 255 characters, no slash, backslash or control character)"
		) unless $v->[$i] =~ m{^[^/\\\p{Cntrl}]{2,255}$};
	}
}

sub check_no_index
{
	my ($path, $v) = @_;
	return unless is_type($path, $v, 'object');
	check_keys($path, $v, file => 1, directory => 1);
	problem($path, 'needs "file" or "directory"')
	  unless exists $v->{file} || exists $v->{directory};
	for my $k (grep { exists $v->{$_} } qw(file directory))
	{
		my $list = $v->{$k};
		my @items = json_type($list) eq 'array' ? @$list : ($list);
		problem("$path/$k", 'must list at least one path') unless @items;
		check_path("$path/$k", $_, 0) for @items;
	}
}

sub check_prereqs
{
	my ($path, $v) = @_;
	return unless is_type($path, $v, 'object');
	problem($path, 'must have at least one phase') unless %$v;
	check_keys($path, $v, %PHASES);
	for my $phase (grep { $PHASES{$_} } sort keys %$v)
	{
		my $pp = "$path/$phase";
		next unless is_type($pp, $v->{$phase}, 'object');
		problem($pp, 'must have at least one relationship') unless %{ $v->{$phase} };
		check_keys($pp, $v->{$phase}, %RELATIONSHIPS);
		for my $rel (grep { $RELATIONSHIPS{$_} } sort keys %{ $v->{$phase} })
		{
			my $rp = "$pp/$rel";
			my $deps = $v->{$phase}{$rel};
			next unless is_type($rp, $deps, 'object');
			problem($rp, 'must name at least one prerequisite') unless %$deps;
			for my $dep (sort keys %$deps)
			{
				check_term("$rp/$dep (name)", $dep);
				my $range = $deps->{$dep};
				my $type = json_type($range);
				if ($type eq 'number')
				{
					problem("$rp/$dep", "the only number allowed is 0, not $range")
					  unless $range == 0;
				}
				elsif ($type eq 'string')
				{
					problem("$rp/$dep", "\"$range\" is not a version range (e.g. \"1.2.0\", \">= 1.2.0, < 2.0.0\", 0)")
					  unless $range =~ $RANGE;
				}
				else
				{
					problem("$rp/$dep", "must be a version range string or 0, not $type");
				}
			}
		}
	}
}

sub check_resources
{
	my ($path, $v) = @_;
	return unless is_type($path, $v, 'object');
	problem($path, 'must have at least one resource') unless %$v;
	check_keys($path, $v, homepage => 1, bugtracker => 1, repository => 1);
	check_uri("$path/homepage", $v->{homepage}) if exists $v->{homepage};
	if (exists $v->{bugtracker} && is_type("$path/bugtracker", $v->{bugtracker}, 'object'))
	{
		my $b = $v->{bugtracker};
		check_keys("$path/bugtracker", $b, web => 1, mailto => 1);
		problem("$path/bugtracker", 'needs "web" or "mailto"')
		  unless exists $b->{web} || exists $b->{mailto};
		check_uri("$path/bugtracker/web", $b->{web}) if exists $b->{web};
		if (exists $b->{mailto} && check_string("$path/bugtracker/mailto", $b->{mailto}))
		{
			problem("$path/bugtracker/mailto", "\"$b->{mailto}\" is not an e-mail address")
			  unless $b->{mailto} =~ /^[^@\s]+@[^@\s]+$/;
		}
	}
	if (exists $v->{repository} && is_type("$path/repository", $v->{repository}, 'object'))
	{
		my $r = $v->{repository};
		check_keys("$path/repository", $r, url => 1, web => 1, type => 1);
		problem("$path/repository", 'needs "web", or "url" with "type"')
		  unless exists $r->{web} || (exists $r->{url} && exists $r->{type});
		check_uri("$path/repository/url", $r->{url}) if exists $r->{url};
		check_uri("$path/repository/web", $r->{web}) if exists $r->{web};
		if (exists $r->{type} && is_type("$path/repository/type", $r->{type}, 'string'))
		{
			problem("$path/repository/type", "\"$r->{type}\" is not a lower-case VCS name such as git")
			  unless $r->{type} =~ /^[a-z]+$/;
		}
	}
}

# validate(DOC): the problems of one decoded document
sub validate
{
	my ($doc) = @_;
	@errors = ();
	return ('/: the document must be a JSON object')
	  unless json_type($doc) eq 'object';
	for my $k (@REQUIRED)
	{
		problem("/$k", 'is missing (required)') unless exists $doc->{$k};
	}
	check_keys('', $doc, %TOP_KEYS);

	check_term('/name', $doc->{name}) if exists $doc->{name};
	if (exists $doc->{version})
	{
		check_semver('/version', $doc->{version});
		problem('/version',
			"is \"$doc->{version}\"; the release version is \"$want_version\" (from retries.control)")
		  if defined $want_version
		  && json_type($doc->{version}) eq 'string'
		  && $doc->{version} ne $want_version;
	}
	for my $k (qw(abstract description generated_by))
	{
		check_string("/$k", $doc->{$k}) if exists $doc->{$k};
	}
	check_maintainer('/maintainer', $doc->{maintainer}) if exists $doc->{maintainer};
	check_license('/license', $doc->{license}) if exists $doc->{license};
	check_provides('/provides', $doc->{provides}) if exists $doc->{provides};
	check_meta_spec('/meta-spec', $doc->{'meta-spec'}) if exists $doc->{'meta-spec'};
	check_tags('/tags', $doc->{tags}) if exists $doc->{tags};
	check_no_index('/no_index', $doc->{no_index}) if exists $doc->{no_index};
	check_prereqs('/prereqs', $doc->{prereqs}) if exists $doc->{prereqs};
	check_resources('/resources', $doc->{resources}) if exists $doc->{resources};
	if (exists $doc->{release_status})
	{
		my $s = $doc->{release_status};
		problem('/release_status', 'must be stable, testing or unstable')
		  unless json_type($s) eq 'string' && $RELEASE_STATUS{$s};
	}
	return @errors;
}

open my $fh, '<:raw', $file or die "$0: cannot open $file: $!\n";
my $text = do { local $/; <$fh> };
close $fh;
my $json = JSON::PP->new->utf8;
my $doc = eval { $json->decode($text) };
if (!defined $doc)
{
	print "$file: not valid JSON: $@";
	exit 1;
}

my @problems = validate($doc);
if (@problems)
{
	print "$file: $_\n" for @problems;
	print "$file: not valid against the PGXN Meta Spec 1.0.0 (" . scalar(@problems) . " problems)\n";
	exit 1;
}

if ($self_test)
{
	# Each entry: what is broken, how, and a word the rejection must contain.
	my @mutations = (
		[ 'no name', sub { delete $_[0]{name} }, '/name' ],
		[ 'no provides', sub { delete $_[0]{provides} }, '/provides' ],
		[ 'no meta-spec', sub { delete $_[0]{'meta-spec'} }, '/meta-spec' ],
		[ 'two-part version', sub { $_[0]{version} = '1.1' }, 'semantic version' ],
		[ 'numeric version', sub { $_[0]{version} = 1.1 }, 'JSON string' ],
		[ 'unknown license', sub { $_[0]{license} = 'GPL' }, 'license identifiers' ],
		[ 'empty abstract', sub { $_[0]{abstract} = '' }, 'empty' ],
		[ 'unknown key', sub { $_[0]{homepage} = 'https://example.org/' }, 'custom keys' ],
		[ 'meta-spec 2', sub { $_[0]{'meta-spec'}{version} = '2.0.0' }, '1.0.x' ],
		[ 'empty tags', sub { $_[0]{tags} = [] }, 'at least one tag' ],
		[ 'bad release_status', sub { $_[0]{release_status} = 'final' }, 'stable' ],
		[ 'bad prereq range', sub { $_[0]{prereqs} = { runtime => { requires => { PostgreSQL => '15' } } } }, 'version range' ],
		[ 'unknown phase', sub { $_[0]{prereqs} = { install => { requires => { PostgreSQL => 0 } } } }, 'not a key' ],
		[ 'extension without file',
			sub { delete $_[0]{provides}{$_}{file} for keys %{ $_[0]{provides} } }, '"file"' ],
		[ 'absolute path',
			sub { $_[0]{provides}{$_}{file} = '/etc/passwd' for keys %{ $_[0]{provides} } }, 'relative path' ],
		[ 'maintainer list empty', sub { $_[0]{maintainer} = [] }, 'at least one maintainer' ],
		[ 'repository without type',
			sub { $_[0]{resources} = { repository => { url => 'https://example.org/r.git' } } }, '"type"' ],
	);
	push @mutations,
	  [ 'extension version differs',
		sub { $_[0]{provides}{$_}{version} = '0.0.1' for keys %{ $_[0]{provides} } },
		'release version' ]
	  if defined $want_version;
	push @mutations,
	  [ 'missing docfile',
		sub { $_[0]{provides}{$_}{docfile} = 'doc/no-such-file.md' for keys %{ $_[0]{provides} } },
		'does not exist' ]
	  if defined $root;

	my $failed = 0;
	for my $m (@mutations)
	{
		my ($what, $break, $expect) = @$m;
		my $copy = $json->decode($text);
		$break->($copy);
		my @got = validate($copy);
		if (!grep { index($_, $expect) >= 0 } @got)
		{
			$failed++;
			print "$file: self-test: a document with $what was not rejected as expected (\"$expect\"); got: "
			  . (@got ? join('; ', @got) : 'no problem at all') . "\n";
		}
	}
	if ($failed)
	{
		print "$file: self-test: $failed of " . scalar(@mutations) . " broken documents not rejected\n";
		exit 1;
	}
	print "$file: self-test: all " . scalar(@mutations) . " broken documents rejected\n";
}

print "$file: valid against the PGXN Meta Spec 1.0.0"
  . (defined $want_version ? ", version $want_version" : '') . "\n";
exit 0;
