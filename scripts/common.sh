# shellcheck shell=bash
#
# Shared shell functions for scripts/test and scripts/demo.  Source it (it is
# not meant to be run), after `set -euo pipefail`.
#
# Server-side steps (initdb, pg_ctl, pg_regress temporary instances, TAP
# clusters) cannot run as root.  When the scripts run as root they run those
# steps as the unprivileged user `postgres` (created by the postgresql-15
# package); as a normal user they run them as that user and use sudo only for
# apt-get and `make install`.

REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)

PG_MAJOR=15
PG_BINDIR=/usr/lib/postgresql/$PG_MAJOR/bin
# Debian's /usr/bin/pg_config is a wrapper; name PostgreSQL 15's own.
PG_CONFIG=$PG_BINDIR/pg_config

APT_PACKAGES=(
	"postgresql-$PG_MAJOR"
	"postgresql-server-dev-$PG_MAJOR"
	libipc-run-perl
	make
	gcc
	# the libFuzzer target (make fuzz, fuzzcheck; scripts/fuzz)
	clang
	libclang-rt-14-dev
	# t/012_exporter.pl runs the exporter on a port of its own and scrapes
	# it with curl (the package's own daemon, on 9187, is not used)
	prometheus-postgres-exporter
	curl
	# t/024_partman.pl: pg_partman's run_maintenance_proc() run by retries
	"postgresql-$PG_MAJOR-partman"
	# t/049_pg_cron_import.pl: retries.import_pg_cron() on pg_cron's jobs
	"postgresql-$PG_MAJOR-cron"
)

# Same messages, sort order and encoding on every machine: the expected
# outputs of the tests must not depend on the caller's locale.
export LC_ALL=C.UTF-8 LANG=C.UTF-8
unset LANGUAGE
# Connection settings of the caller must not leak into the private clusters.
unset PGHOST PGHOSTADDR PGPORT PGUSER PGDATABASE PGSERVICE PGSERVICEFILE \
	PGOPTIONS PGPASSWORD PGPASSFILE PGDATA PGSSLMODE PGTARGETSESSIONATTRS

RUN_USER=		# who runs the server-side steps; set by choose_run_user
WORKDIR=		# private temporary directory; set by make_workdir

log() { printf '==> %s\n' "$*" >&2; }
warn() { printf 'warning: %s\n' "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

is_root() { [ "$(id -u)" -eq 0 ]; }

# poll_nap: the pause before a wait's next poll: 50 ms the first time, then
# a quarter longer each time, up to half a second.  A wait sets POLL_NAP_MS
# to 50 before its loop.  Each poll is a psql and a backend, some 15 ms of
# CPU: polled every 50 ms, a long wait took a third of a core from the
# work it waited for (and from what a benchmark measures).
POLL_NAP_MS=50
poll_nap() {
	sleep "$((POLL_NAP_MS / 1000)).$(printf '%03d' $((POLL_NAP_MS % 1000)))"
	POLL_NAP_MS=$((POLL_NAP_MS * 5 / 4 > 500 ? 500 : POLL_NAP_MS * 5 / 4))
}

# show_server_log FILE: the last 60 lines of a failed benchmark's server
# log, then those of its lines that tell of a process's end or of the
# workers, as "server log: ..." for the digest of scripts/test
show_server_log() {
	printf '\n======== server log (last 60 lines) ========\n' >&2
	tail -n 60 "$1" >&2
	grep -E 'FATAL|PANIC|terminated|exited|retries: ' "$1" |
		tail -n 20 | sed 's/^/server log: /' >&2
}

# name_failures: from here on, a command whose failure ends the script (set
# -e) first prints "error: SCRIPT, in FUNCTION, line N: exit status S:
# COMMAND" (once for each function it ends), so that the
# digest of a failed suite shows where a long script such as bench/run
# stopped even when the command itself printed nothing that names it.
name_failures() {
	set -o errtrace
	# only where the failure ends the script: not in on_exit (set +e) nor in
	# a command substitution (bash clears -e there)
	trap '[[ $- != *e* ]] || printf "error: %s, in %s, line %s: exit status %s: %s\n" \
		"${0##*/}" "${FUNCNAME[0]:-the script}" "$LINENO" "$?" "$BASH_COMMAND" >&2' ERR
}

# as_root CMD...: run CMD with root privileges (sudo unless already root).
as_root() {
	if is_root; then
		"$@"
	else
		command -v sudo >/dev/null 2>&1 ||
			die "sudo is not installed; run as root or install sudo to run: $*"
		sudo "$@"
	fi
}

# apt_get ARGS...: apt-get as root, noninteractive, one at a time among
# these scripts (scripts/test runs suites at once, and several install
# packages or update the lists): a lock file serializes them, and dpkg's
# own lock is waited for rather than failed on.
APT_LOCK=/var/lock/retries-apt.lock
apt_get() {
	as_root flock "$APT_LOCK" env DEBIAN_FRONTEND=noninteractive \
		apt-get -o DPkg::Lock::Timeout=600 "$@"
}

# install_packages: install whichever of APT_PACKAGES is missing.
install_packages() {
	local missing=() pkg status
	for pkg in "${APT_PACKAGES[@]}"; do
		status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
		[ "$status" = "install ok installed" ] || missing+=("$pkg")
	done
	if [ ${#missing[@]} -eq 0 ]; then
		log "packages: all installed (${APT_PACKAGES[*]})"
		return 0
	fi
	log "packages: installing ${missing[*]}"
	apt_get update
	apt_get install -y --no-install-recommends "${missing[@]}"
	[ -x "$PG_CONFIG" ] || die "$PG_CONFIG is missing after the install"
}

# node_ready: Node.js 18 or later and npm, from Debian if missing
node_ready() {
	local major=0
	if command -v node >/dev/null 2>&1; then
		major=$(node -p 'process.versions.node.split(".")[0]')
	fi
	if [ "$major" -lt 18 ] || ! command -v npm >/dev/null 2>&1; then
		log "Node.js: installing Debian's nodejs and npm"
		apt_get update
		apt_get install -y --no-install-recommends nodejs npm
	fi
}

# choose_run_user: who runs initdb, pg_ctl, pg_regress and TAP clusters.
choose_run_user() {
	if is_root; then
		RUN_USER=postgres
		id -u "$RUN_USER" >/dev/null 2>&1 ||
			die "user $RUN_USER does not exist (it comes with postgresql-$PG_MAJOR)"
	else
		RUN_USER=$(id -un)
	fi
	log "server-side steps run as: $RUN_USER"
}

# run_as CMD...: run CMD as RUN_USER, from WORKDIR (or /) so that the
# current directory is always one that user may enter.
run_as() {
	local dir=${WORKDIR:-/}
	if is_root; then
		(cd "$dir" && runuser -u "$RUN_USER" -- "$@")
	else
		(cd "$dir" && "$@")
	fi
}

# make_workdir PREFIX: create WORKDIR, an empty directory owned by RUN_USER
# whose parents RUN_USER can traverse.  The caller removes it (see
# remove_workdir) from its EXIT trap.
make_workdir() {
	local prefix=$1 base=${TMPDIR:-/tmp}
	# A TMPDIR that RUN_USER can't reach (say, under /root) won't do.
	if ! [ -d "$base" ] || ! run_as test -x "$base"; then
		base=/tmp
	fi
	WORKDIR=$(mktemp -d "$base/$prefix.XXXXXXXX")
	if is_root; then
		chown "$RUN_USER:" "$WORKDIR"
	fi
	run_as test -w "$WORKDIR" ||
		die "$RUN_USER cannot write to $WORKDIR (check the permissions of its parents)"
	log "temporary directory: $WORKDIR"
}

# copy_postgres DIR: a private copy of the PostgreSQL installation (server,
# share, headers) under DIR, without any retries files an earlier install
# left there, so that a build can be installed into it and tested without
# touching the system's.  Sets COPY_BINDIR and COPY_PG_CONFIG (the copy's
# pg_config, which finds its own directories by where it lies).
COPY_BINDIR=
COPY_PG_CONFIG=
copy_postgres() {
	local dir=$1
	mkdir -p "$dir/lib/postgresql" "$dir/share/postgresql" "$dir/include"
	cp -a "/usr/lib/postgresql/$PG_MAJOR" "$dir/lib/postgresql/"
	cp -a "/usr/share/postgresql/$PG_MAJOR" "$dir/share/postgresql/"
	cp -a /usr/include/postgresql "$dir/include/"
	rm -rf "$dir/lib/postgresql/$PG_MAJOR/lib/retries.so" \
		"$dir/lib/postgresql/$PG_MAJOR/lib/bitcode/retries"* \
		"$dir/share/postgresql/$PG_MAJOR/extension/retries"*
	COPY_BINDIR=$dir/lib/postgresql/$PG_MAJOR/bin
	COPY_PG_CONFIG=$COPY_BINDIR/pg_config
	[ "$("$COPY_PG_CONFIG" --bindir)" = "$COPY_BINDIR" ] &&
		[ "$("$COPY_PG_CONFIG" --pkglibdir)" = "$dir/lib/postgresql/$PG_MAJOR/lib" ] ||
		die "the pg_config of the copy in $dir does not point into the copy"
}

# give_workdir: hand everything under WORKDIR to RUN_USER (after copying
# files into it as root).
give_workdir() {
	if is_root; then
		chown -R "$RUN_USER:" "$WORKDIR"
	fi
}

# remove_workdir: remove WORKDIR unless KEEP_TMP=1.  For EXIT traps.
remove_workdir() {
	[ -n "$WORKDIR" ] && [ -d "$WORKDIR" ] || return 0
	if [ "${KEEP_TMP:-0}" = 1 ]; then
		log "KEEP_TMP=1: keeping $WORKDIR"
	else
		rm -rf -- "$WORKDIR"
	fi
}

# build_and_install LOGFILE: clean build of the extension in the repository
# (compiler warnings are errors), then `make install`.  The build is always
# from clean so that warnings of files built earlier are not missed.
build_and_install() {
	local buildlog=$1
	log "build: make clean && make (PG_CONFIG=$PG_CONFIG)"
	make -C "$REPO_ROOT" PG_CONFIG="$PG_CONFIG" clean >/dev/null
	if ! make -C "$REPO_ROOT" PG_CONFIG="$PG_CONFIG" 2>&1 | tee "$buildlog"; then
		die "build failed"
	fi
	if grep -q 'warning:' "$buildlog"; then
		printf '\n--- compiler warnings ---\n' >&2
		grep -B2 -A3 'warning:' "$buildlog" >&2 || true
		die "the build has compiler warnings; they count as failures"
	fi
	log "install: make install"
	as_root make -C "$REPO_ROOT" PG_CONFIG="$PG_CONFIG" install
}

# port_in_use PORT: is some server already answering on PORT (TCP on
# localhost, or a socket in one of the usual socket directories)?
port_in_use() {
	local port=$1 host rc
	for host in /var/run/postgresql /tmp localhost; do
		rc=0
		"$PG_BINDIR/pg_isready" -q -t 2 -h "$host" -p "$port" || rc=$?
		# 0: accepting, 1: rejecting (e.g. starting up); 2: no answer
		[ "$rc" -eq 0 ] || [ "$rc" -eq 1 ] && return 0
	done
	if command -v ss >/dev/null 2>&1 &&
		[ -n "$(ss -Hltn "sport = :$port" 2>/dev/null)" ]; then
		return 0
	fi
	return 1
}

# pick_port FIRST: the first free port of FIRST..FIRST+99.
pick_port() {
	local port first=$1
	for ((port = first; port < first + 100; port++)); do
		if ! port_in_use "$port"; then
			echo "$port"
			return 0
		fi
	done
	die "no free port in $first..$((first + 99))"
}

# start_cluster DATA PORT WHO: initdb a cluster in DATA (trust auth, no TCP,
# its socket in WORKDIR) that preloads retries, add the settings read from
# stdin to its postgresql.conf, and start it, logging to WORKDIR/server.log.
# Sets PORT.  The caller stops it (stop_cluster) from its EXIT trap.
start_cluster() {
	local data=$1 who=$3 extra
	PORT=$2
	extra=$(cat)
	log "initdb: $data (port $PORT, socket in $WORKDIR)"
	run_as "$PG_BINDIR/initdb" -D "$data" --auth=trust --encoding=UTF8 \
		--locale=C.UTF-8 --no-sync >"$WORKDIR/initdb.log" 2>&1 || {
		cat "$WORKDIR/initdb.log" >&2
		die "initdb failed"
	}
	run_as tee -a "$data/postgresql.conf" >/dev/null <<EOF

# $who
shared_preload_libraries = 'retries'
port = $PORT
listen_addresses = ''
unix_socket_directories = '$WORKDIR'
$extra
EOF
	log "starting the cluster"
	run_as "$PG_BINDIR/pg_ctl" -D "$data" -l "$WORKDIR/server.log" -w -t 60 start
}

# stop_cluster DATA: stop the cluster in DATA (fast, else immediate).
stop_cluster() {
	run_as "$PG_BINDIR/pg_ctl" -D "$1" -m fast -w stop >/dev/null ||
		run_as "$PG_BINDIR/pg_ctl" -D "$1" -m immediate -w stop >/dev/null 2>&1
}

# apt_mirror: the URI of the Debian mirror that the machine's apt sources
# name for its own release (one-line and deb822 files), e.g. for building
# roots of other Debian suites from the same mirror (scripts/pg-root).
apt_mirror() {
	local codename
	codename=$(. /etc/os-release && echo "$VERSION_CODENAME")
	python3 - "$codename" <<'PYEOF'
import glob, re, sys
codename = sys.argv[1]
found = []
for path in glob.glob('/etc/apt/sources.list') + glob.glob('/etc/apt/sources.list.d/*.list'):
    for line in open(path):
        line = line.split('#', 1)[0].strip()
        m = re.match(r'^deb\s+(\[[^]]*\]\s+)?(\S+)\s+(\S+)\s', line)
        if m and m.group(3) == codename:
            found.append(m.group(2))
for path in sorted(glob.glob('/etc/apt/sources.list.d/*.sources')):
    for stanza in re.split(r'\n\s*\n', open(path).read()):
        fields = {}
        for line in stanza.splitlines():
            if line.startswith('#') or ':' not in line:
                continue
            k, v = line.split(':', 1)
            fields[k.strip().lower()] = v.strip()
        if ('deb' in fields.get('types', '').split()
                and codename in fields.get('suites', '').split()):
            found.extend(fields.get('uris', '').split())
if found:
    print(found[0])
PYEOF
}

# chroot_mounts ROOT: mount what servers and tests need in a root built by
# scripts/pg-root (/proc, and a tmpfs on /dev/shm for dynamic shared
# memory) and make /run/postgresql; chroot_unmounts ROOT undoes the mounts
# (call it from an EXIT trap).
chroot_mounts() {
	local root=$1
	mountpoint -q "$root/proc" || mount -t proc proc "$root/proc"
	mountpoint -q "$root/dev/shm" ||
		mount -t tmpfs -o size=1g,mode=1777 retries-shm "$root/dev/shm"
	# the socket directory of Debian's clusters (no tmpfiles.d in a chroot)
	mkdir -p "$root/run/postgresql"
	chroot "$root" chown postgres:postgres /run/postgresql
	chmod 2775 "$root/run/postgresql"
}
chroot_unmounts() {
	local root=$1 m
	# innermost first; whatever is mounted below the root
	awk -v r="$root/" 'index($2, r) == 1 { print $2 }' /proc/mounts | sort -r |
		while read -r m; do
			umount "$m" 2>/dev/null || umount -l "$m" || warn "could not unmount $m"
		done
}

# in_root ROOT USER CMD...: run CMD in ROOT as USER (root or postgres),
# with the test environment's locale and no connection settings.
in_root() {
	local root=$1 user=$2
	shift 2
	chroot "$root" /usr/sbin/runuser -u "$user" -- \
		env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/tmp LC_ALL=C.UTF-8 \
		LANG=C.UTF-8 "$@"
}

# copy_tree DEST: the working tree of the repository, without .git and
# build or test products, into the existing directory DEST.  In a git
# checkout, the files git would list (tracked and untracked, less what
# .gitignore names): a build or a test writing into the repository at the
# same time (scripts/test runs suites at once) leaves only ignored files,
# which are not read.  Else (a release tarball) all but the usual products.
copy_tree() {
	if git -C "$REPO_ROOT" rev-parse --git-dir >/dev/null 2>&1; then
		# (a tracked file deleted in the working tree is left out)
		(cd "$REPO_ROOT" && git ls-files -z --cached --others --exclude-standard |
			perl -0 -ne 'chomp; print "$_\0" if -e $_' |
			tar --null -T - -cf -) | tar -C "$1" -xf -
		return
	fi
	tar -C "$REPO_ROOT" \
		--exclude=./.git --exclude='*.o' --exclude='*.so' --exclude='*.bc' \
		--exclude=./results --exclude=./output_iso --exclude='./tmp_check*' \
		--exclude=./log --exclude='./regression.*' --exclude=./test/policy_test \
		--exclude=./test/cron_test --exclude=./test/rate_test \
		--exclude=./fuzz/policy_fuzz --exclude=./fuzz/corpus-new \
		--exclude=./dist --exclude=./bench/node_modules \
		-cf - . | tar -C "$1" -xf -
}

# show_worker_errors FILE: the errors, warnings and retries' own messages
# of the workers and the launcher anywhere in server log FILE (at most 200
# lines), on stderr: a failure's cause is often older than a log's tail
show_worker_errors() {
	local hits
	hits=$(grep -E 'retries (worker|launcher)\[[0-9]+\] (ERROR|WARNING|FATAL|PANIC|LOG:  retries:)' \
		-- "$1" | head -n 200) || true
	[ -n "$hits" ] || return 0
	printf '\n======== %s: what the workers logged ========\n' "$1" >&2
	printf '%s\n' "$hits" >&2
}

# show_check_logs DIR: the diffs and server logs that the suites of `make
# installcheck` left in DIR (the last 200 lines of each), on stderr
show_check_logs() {
	local dir=$1 f
	for f in "$dir/regression.diffs" "$dir/output_iso/regression.diffs" \
		"$dir"/log/postmaster.log "$dir"/output_iso/log/postmaster.log \
		"$dir"/tmp_check/log/*; do
		[ -f "$f" ] || continue
		case $f in *postmaster.log) show_worker_errors "$f" ;; esac
		printf '\n======== %s (last 200 lines) ========\n' "${f#"$dir"/}" >&2
		tail -n 200 -- "$f" >&2
	done
}

# load_pg_cassert_functions: define the functions of scripts/pg-cassert that
# derive deb-src entries from the machine's apt sources (deb_src_sources,
# add_deb_src) and list the source versions apt knows (source_versions),
# for the scripts that fetch PostgreSQL's source (pg-suites, indent).  That
# script runs when sourced, so the definitions are taken out of it; they
# read PG_MAJOR.
load_pg_cassert_functions() {
	local defs f
	defs=$(sed -n -e '/^deb_src_sources() {$/,/^}$/p' -e '/^add_deb_src() {$/,/^}$/p' \
		-e '/^source_versions() {$/,/^}$/p' "$REPO_ROOT/scripts/pg-cassert")
	eval "$defs"
	for f in deb_src_sources add_deb_src source_versions; do
		declare -F "$f" >/dev/null ||
			die "scripts/pg-cassert no longer defines $f(), which this script uses"
	done
}
