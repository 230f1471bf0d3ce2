# Makefile for the retries extension (PGXS)
#
#   make                  build
#   make install          install into the PostgreSQL that pg_config names
#   make installcheck     regression, isolation and TAP tests, each on a
#                         private temporary cluster (run as a non-root user;
#                         scripts/test does all of it from a fresh machine)
#   make unittest         unit tests of the pure policy code (no server)
#   make layercheck       the source keeps the order of layers of
#                         src/layers.txt: no include or call upward, no cycle
#   make indent           format the C sources with pgindent (scripts/indent)
#   make indentcheck      fail if a C source is not formatted so
#   make waitcheck        fail if a test sleeps without saying why no
#                         outcome depends on the time it sleeps
#   make fuzz             build the libFuzzer target fuzz/policy_fuzz (clang)
#   make fuzzcheck        run it briefly over fuzz/corpus/policy; any finding
#                         fails (scripts/fuzz runs it for longer)
#   make dist             the release tarball retries-VERSION.tar.gz (git
#                         archive of HEAD, with META.json) after versioncheck
#                         and metacheck
#   make versioncheck     the places that repeat the version agree with
#                         retries.control
#   make metacheck        generate META.json and validate it against the
#                         PGXN Meta Spec 1.0.0

EXTENSION = retries

# The version is written in one place: default_version in retries.control.
# A release (make dist, META.json, the Debian package) carries its semantic
# version, '1.1' -> 1.1.0; `make versioncheck` fails when debian/changelog,
# which must repeat it, disagrees.
EXTVERSION := $(shell sed -n "s/^default_version[[:space:]]*=[[:space:]]*'\\([^']*\\)'.*/\\1/p" \
	$(dir $(lastword $(MAKEFILE_LIST)))retries.control)
ifeq ($(EXTVERSION),)
$(error retries.control has no line default_version = '...')
endif
RELEASE_VERSION := $(if $(word 3,$(subst ., ,$(EXTVERSION))),$(EXTVERSION),$(EXTVERSION).0)
DIST_NAME = $(EXTENSION)-$(RELEASE_VERSION)

MODULE_big = retries
OBJS = \
	src/core/policy.o \
	src/core/cron.o \
	src/core/rate.o \
	src/base/settings.o \
	src/base/schema.o \
	src/base/args.o \
	src/base/plans.o \
	src/base/state.o \
	src/base/clock.o \
	src/base/citus.o \
	src/shmem/shmem.o \
	src/shmem/gates.o \
	src/shmem/waits.o \
	src/shmem/places.o \
	src/shmem/interrupted.o \
	src/shmem/slots.o \
	src/tables/access.o \
	src/tables/calls.o \
	src/tables/insert.o \
	src/tables/names.o \
	src/tables/name_locks.o \
	src/tables/home.o \
	src/tables/restore.o \
	src/xact/xact.o \
	src/flow/flow.o \
	src/flow/key_window.o \
	src/api/annotate.o \
	src/api/call.o \
	src/api/call_args.o \
	src/api/call_context.o \
	src/api/colocate.o \
	src/api/chains.o \
	src/api/command.o \
	src/api/events.o \
	src/api/manage.o \
	src/api/status.o \
	src/api/wait.o \
	src/schedules/recurring.o \
	src/schedules/schedule.o \
	src/engine/login.o \
	src/engine/plcache.o \
	src/engine/exprcache.o \
	src/engine/conns.o \
	src/engine/sandbox.o \
	src/engine/claim.o \
	src/engine/policies.o \
	src/engine/outcome.o \
	src/engine/evaluate.o \
	src/engine/verdict.o \
	src/engine/execute.o \
	src/engine/handoff.o \
	src/engine/ledger.o \
	src/engine/time_cap.o \
	src/engine/proctext.o \
	src/engine/runner.o \
	src/engine/retention.o \
	src/engine/wslot.o \
	src/engine/recovery.o \
	src/engine/lone.o \
	src/engine/steps.o \
	src/engine/turns.o \
	src/engine/batch.o \
	src/engine/worker.o \
	src/engine/leave.o \
	src/engine/revisits.o \
	src/engine/launcher.o \
	src/engine/reserve.o \
	src/hooks.o \
	src/retries.o

DATA = retries--1.0.sql retries--1.0--1.1.sql retries--1.1--1.2.sql retries--1.2--1.3.sql \
	retries--1.3--1.4.sql retries--1.4--1.5.sql retries--1.5--1.6.sql retries--1.6--1.7.sql

REGRESS = \
	setup \
	policy_grammar \
	annotate \
	call_args \
	call_keys \
	manage \
	roles \
	views \
	engine \
	recurring \
	schedules \
	commands \
	flow \
	results \
	events \
	hostile

REGRESS_OPTS = \
	--temp-instance=$(CURDIR)/tmp_check_regress \
	--temp-config=$(srcdir)/test/retries.conf \
	--load-extension=retries

ISOLATION = call_keys_race cancel_running workers_exactly_once chain_race kept_indexes \
	key_window_race debounce_claim emit_race names_disjoint key_window_deliveries
ISOLATION_OPTS = \
	--temp-instance=$(CURDIR)/tmp_check_iso \
	--temp-config=$(srcdir)/test/retries.conf

TAP_TESTS = 1

# The TAP tests that run under ASan on the PostgreSQL built with
# assertions (scripts/test; --full runs them all there), chosen with
# scripts/coverage (2026-12-02): the regression and isolation suites run
# 8,187 of the 11,326 lines of src/ that have code; of the 13 tests that
# ran here before (1,495 lines that they run and those suites do not, in
# 827 s), the greedy choice keeps these six, which run 1,366 of those
# lines (91 %) in 451 s: what is left out is the TAP suite's own on
# Debian's server, and --full's.  When a TAP test is added, run
# scripts/coverage and look at the last lines of its report.
TAP_SHORT = t/020_containment.pl t/021_production.pl t/015_lifecycle.pl \
	t/018_flow.pl t/023_runner.pl t/010_upgrade.pl

# The TAP tests that run on PostgreSQL 17 and 18 (scripts/versions, in the
# packages' autopkgtest; --full runs them all there): every line of src/
# that differs between versions (src/base/compat.h) and that the
# regression and isolation suites, which run there in full, do not run is
# run by t/020 or t/007 (scripts/coverage, 2026-12-02: 7 lines); with the
# update scripts (t/010), preloading (t/001) and JIT (t/022), whose
# behaviour the server's version decides.  The upgrade suites run
# pg_upgrade of busy clusters to 17 and 18 besides.
TAP_VERSIONS = t/020_containment.pl t/007_environment.pl t/010_upgrade.pl \
	t/022_jit.pl t/001_preload.pl

# The TAP suite's order: prove -j starts the tests in the order given, so
# the longest go first (TAP_SLOW, the longest of a run on a loaded 2-core
# machine, slowest first; TAP_SHORT likewise): started last, one of them
# kept the suite going alone for minutes after the others had ended.  A
# PROVE_TESTS given to make replaces the list.
TAP_SLOW = t/074_review_37.pl t/057_worker_pool.pl t/064_review_27.pl t/014_sandbox.pl \
	t/063_review_26.pl t/061_review_25.pl t/020_containment.pl \
	t/056_review_21.pl t/060_review_24.pl t/039_review_workflow.pl \
	t/041_review_10.pl t/040_review_9.pl t/058_review_22.pl
PROVE_TESTS ?= $(TAP_SLOW) $(filter-out $(TAP_SLOW),$(sort $(wildcard t/*.pl)))

# Every suite makes its own clusters.  pg_buildext installcheck runs them
# under pg_virtualenv, which points libpq at a throw-away cluster of its
# own through PG* variables; pg_regress and the TAP modules drop those,
# all but PGSYSCONFDIR, which some clients refuse outright (the Go driver of
# postgres_exporter panics on it).
unexport PGSYSCONFDIR

EXTRA_CLEAN = tmp_check_regress tmp_check_iso test/policy_test test/cron_test test/rate_test \
	fuzz/policy_fuzz fuzz/corpus-new fuzz/fuzzcheck.log

# -Wextra's unused-parameter warnings fire inside PostgreSQL's own headers
# and on every fmgr and GUC-hook signature, so that one is turned off.
PG_CFLAGS = -Wall -Wextra -Wno-unused-parameter
# Our headers are named by folder, from src/: #include "core/policy.h"
PG_CPPFLAGS = -I$(srcdir)/src

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

# The TAP tests spend most of their time waiting (for workers, restarts,
# deadlines), each on clusters of its own: five at a time, on two cores,
# take 0.8 of the time three did (151 s against 190 s).  Added to a
# PROVE_FLAGS given to make, too: pg_buildext (trixie on) runs `make
# installcheck PROVE_FLAGS=--verbose`, which would otherwise run them one by
# one.  (So a -j given that way comes before this one, and prove keeps the
# last: -j$(TAP_JOBS) holds.)  Under a sanitizer, where the tests are busy
# rather than waiting, scripts/sanitize sets TAP_JOBS=3.
# --timer: each test's time beside its result, the measure of what the
# suite costs (scripts/test's per-suite times are the sums).
TAP_JOBS ?= 5
override PROVE_FLAGS += -j$(TAP_JOBS) --timer

# PGXS tracks no header dependencies: rebuild every object when a header
# of ours changes (a stale object with an old shared-memory layout is a
# crash waiting to happen).
$(OBJS): $(wildcard $(srcdir)/src/*/*.h)

# The policy code is plain C: its unit tests build without the server.
test/policy_test: test/policy_test.c src/core/policy.c src/core/policy.h
	$(CC) -std=c99 -Wall -Wextra -Werror -O1 -g -Isrc -o $@ test/policy_test.c src/core/policy.c -lm

# So is the cron code (recurring schedules), which reports its errors the
# policy code's way.
test/cron_test: test/cron_test.c test/unit.h src/core/cron.c src/core/cron.h src/core/policy.c src/core/policy.h
	$(CC) -std=c99 -Wall -Wextra -Werror -O1 -g -Isrc -o $@ test/cron_test.c src/core/cron.c src/core/policy.c -lm

# And the rate limits' code (flow control).
test/rate_test: test/rate_test.c test/unit.h src/core/rate.c src/core/rate.h src/core/policy.c src/core/policy.h
	$(CC) -std=c99 -Wall -Wextra -Werror -O1 -g -Isrc -o $@ test/rate_test.c src/core/rate.c src/core/policy.c -lm

# The order of layers (src/layers.txt), checked on the built objects
.PHONY: layercheck
layercheck: $(OBJS)
	perl $(srcdir)/scripts/layers $(srcdir)/src

# The docs about the code name what exists, and all of it (scripts/docscheck)
.PHONY: docscheck
docscheck:
	perl $(srcdir)/scripts/docscheck $(srcdir) $(shell $(PG_CONFIG) --includedir-server)

# No test waits on a fixed sleep instead of a condition (scripts/waitcheck)
.PHONY: waitcheck
waitcheck:
	perl $(srcdir)/scripts/waitcheck --self-test

# PostgreSQL's formatting, by pgindent (scripts/indent fetches it)
.PHONY: indent indentcheck
indent:
	$(srcdir)/scripts/indent
indentcheck:
	$(srcdir)/scripts/indent --check

.PHONY: unittest
unittest: test/policy_test test/cron_test test/rate_test
	./test/policy_test
	./test/cron_test
	./test/rate_test

# The policy code under libFuzzer, with AddressSanitizer and
# UndefinedBehaviorSanitizer; any report aborts the run.  Needs clang and
# its compiler-rt (Debian: clang, libclang-rt-14-dev).
CLANG ?= clang
FUZZ_CFLAGS = -std=c99 -g -O1 -Wall -Wextra -Werror \
	-fsanitize=fuzzer,address,undefined,float-divide-by-zero \
	-fno-sanitize-recover=all -fno-omit-frame-pointer
# CI's short run is deterministic: a fixed seed and a fixed number of runs
# (the time limit only guards against a slow machine)
FUZZ_SEED ?= 1
FUZZ_RUNS ?= 250000
FUZZ_SECONDS ?= 120
FUZZ_OPTIONS = -max_len=4096 -dict=fuzz/policy.dict -timeout=10 \
	-artifact_prefix=fuzz/ -print_final_stats=1

fuzz/policy_fuzz: fuzz/policy_fuzz.c $(wildcard src/core/*.c src/core/*.h)
	$(CLANG) $(FUZZ_CFLAGS) -Isrc -o $@ fuzz/policy_fuzz.c src/core/policy.c src/core/cron.c src/core/rate.c -lm

.PHONY: fuzz fuzzcheck
fuzz: fuzz/policy_fuzz

# New inputs go to fuzz/corpus-new, so the committed corpus is only read;
# every corpus file is run first, then FUZZ_RUNS inputs from FUZZ_SEED.  The full
# output goes to fuzz/fuzzcheck.log: its summary is shown on success, its
# end (the report and the input that caused it) on a finding.
FUZZCHECK_RUN = ./fuzz/policy_fuzz $(FUZZ_OPTIONS) \
	-seed=$(FUZZ_SEED) -runs=$(FUZZ_RUNS) -max_total_time=$(FUZZ_SECONDS) \
	fuzz/corpus-new fuzz/corpus/policy

fuzzcheck: fuzz/policy_fuzz
	rm -rf fuzz/corpus-new && mkdir fuzz/corpus-new
	@echo "$(FUZZCHECK_RUN) >fuzz/fuzzcheck.log 2>&1"
	@if $(FUZZCHECK_RUN) >fuzz/fuzzcheck.log 2>&1; then \
		grep -E '^(INFO: +[0-9]+ files found|#[0-9]+[[:space:]]+(INITED|DONE)|Done |stat::)' fuzz/fuzzcheck.log; \
	else \
		tail -n 60 fuzz/fuzzcheck.log; \
		echo "fuzzcheck: a finding; the input is fuzz/crash-* (or leak-, timeout-, oom-), the output fuzz/fuzzcheck.log"; \
		exit 1; \
	fi

# Releases.  META.json (PGXN) is made from META.json.in with the release
# version filled in, so that a new version is written only in
# retries.control (and debian/changelog, which Debian requires and
# versioncheck compares).
META.json: META.json.in retries.control
	sed -e 's/@RELEASE_VERSION@/$(RELEASE_VERSION)/g' $< >$@.tmp
	mv $@.tmp $@

.PHONY: versioncheck metacheck dist

# The version of retries.control must be reachable by an install or update
# script in DATA, and debian/changelog's top entry must be that release.
versioncheck:
	@case ' $(DATA) ' in *'--$(EXTVERSION).sql '*) ;; \
	*) echo "versioncheck: no script in DATA installs or updates to version $(EXTVERSION) (retries.control's default_version)" >&2; \
	   exit 1 ;; \
	esac
	@if [ -f '$(srcdir)/debian/changelog' ]; then \
		deb=$$(sed -n '1s/^[^ ]* (\([^)]*\)).*/\1/p' '$(srcdir)/debian/changelog'); \
		up=$${deb#*:}; up=$${up%-*}; \
		if [ "$$up" != '$(RELEASE_VERSION)' ]; then \
			echo "versioncheck: debian/changelog's top entry is version $$deb, retries.control's default_version '$(EXTVERSION)' is release $(RELEASE_VERSION): add an entry for $(RELEASE_VERSION)-1 (dch -v $(RELEASE_VERSION)-1)" >&2; \
			exit 1; \
		fi; \
	fi
	@echo "versioncheck: version $(EXTVERSION) (release $(RELEASE_VERSION)) in retries.control, DATA and debian/changelog"

metacheck: META.json
	perl '$(srcdir)/test/pgxn_meta_check.pl' --self-test --version '$(RELEASE_VERSION)' \
		--root '$(srcdir)' META.json

# The tarball is HEAD as committed (git archive; .gitattributes names what
# a release leaves out) plus the generated META.json, under retries-VERSION/.
dist: versioncheck metacheck
	@git -C '$(srcdir)' diff --quiet HEAD -- || \
		echo "dist: warning: the working tree has uncommitted changes; $(DIST_NAME).tar.gz is made of HEAD" >&2
	git -C '$(srcdir)' archive --format=tar.gz --prefix='$(DIST_NAME)/' \
		--add-file='$(CURDIR)/META.json' -o '$(CURDIR)/$(DIST_NAME).tar.gz' HEAD
	@echo "dist: $(CURDIR)/$(DIST_NAME).tar.gz"
