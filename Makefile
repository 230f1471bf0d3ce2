# Makefile for the retries extension (PGXS)
#
#   make                  build
#   make install          install into the PostgreSQL that pg_config names
#   make installcheck     regression, isolation and TAP tests, each on a
#                         private temporary cluster (run as a non-root user;
#                         scripts/test does all of it from a fresh machine)
#   make unittest         unit tests of the pure policy code (no server)

EXTENSION = retries
MODULE_big = retries
OBJS = \
	src/retries.o \
	src/policy.o \
	src/catalog.o \
	src/call_args.o \
	src/annotate.o \
	src/schedule.o \
	src/manage.o \
	src/call_context.o \
	src/shmem.o \
	src/hooks.o \
	src/launcher.o \
	src/worker.o \
	src/execute.o

DATA = retries--1.0.sql retries--1.0--1.1.sql

REGRESS = \
	setup \
	policy_grammar \
	annotate \
	call_args \
	call_keys \
	manage \
	roles \
	views \
	engine

REGRESS_OPTS = \
	--temp-instance=$(CURDIR)/tmp_check_regress \
	--temp-config=$(srcdir)/test/retries.conf \
	--load-extension=retries

ISOLATION = call_keys_race cancel_running workers_exactly_once
ISOLATION_OPTS = \
	--temp-instance=$(CURDIR)/tmp_check_iso \
	--temp-config=$(srcdir)/test/retries.conf

TAP_TESTS = 1

EXTRA_CLEAN = tmp_check_regress tmp_check_iso test/policy_test

# -Wextra's unused-parameter warnings fire inside PostgreSQL's own headers
# and on every fmgr and GUC-hook signature, so that one is turned off.
PG_CFLAGS = -Wall -Wextra -Wno-unused-parameter

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

# The policy code is plain C: its unit tests build without the server.
test/policy_test: test/policy_test.c src/policy.c src/policy.h
	$(CC) -std=c99 -Wall -Wextra -Werror -O1 -g -Isrc -o $@ test/policy_test.c src/policy.c -lm

.PHONY: unittest
unittest: test/policy_test
	./test/policy_test
