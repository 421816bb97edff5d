# Two commands for a new user: `make demo` and `make test`. Both set up first if needed.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
JARS := .jars
SAMPLE := build/sample
# pytest-xdist workers `make test` runs the suite in (tests/conftest.py says how it splits)
TEST_WORKERS ?= 2
export PAGILA_DIR ?= $(abspath ../shared/datasets/pagila)

export DBT_PROFILES_DIR := $(CURDIR)/profiles
export CDC_LAKEHOUSE_DIR ?= $(CURDIR)/lakehouse
# Jars the Spark driver loads (jvm/pom.xml fetches them; names without versions).
SPARK_JARS := hudi-spark3.5-bundle_2.12 spark-sql-kafka-0-10_2.12 spark-token-provider-kafka-0-10_2.12 \
  spark-avro_2.12 kafka-clients commons-pool2 hadoop-aws aws-java-sdk-bundle
comma := ,
export CDC_SPARK_JARS ?= $(subst $() ,$(comma),$(foreach j,$(SPARK_JARS),$(CURDIR)/$(JARS)/$(j).jar))
# The shared metastore's JDBC driver, which must be on the driver's own class path.
export CDC_DRIVER_CLASSPATH ?= $(CURDIR)/$(JARS)/postgresql.jar
export PYSPARK_PYTHON := $(CURDIR)/$(BIN)/python
# The Spark driver's class data sharing archive (tools/jvm_archive; profiles/profiles.yml).
export CDC_JVM_ARCHIVE ?= $(CURDIR)/$(JARS)/spark-driver.jsa

.PHONY: help setup demo test test-long test-unit test-integration test-cluster lint clean sample bench

help:
	@echo "make demo              set up if needed, build the sample lakehouse, print its tables"
	@echo "make test              set up if needed, run every test and the SQL lint"
	@echo "make test-unit         the tests under tests/unit only"
	@echo "make test-integration  every test but tests/unit and the CDC stack's tests/e2e"
	@echo "make test-long         the property, crash and gold tests with a large budget"
	@echo "make test-cluster      the project on a Spark standalone cluster + Thrift Server (its own stack)"
	@echo "make lint              sqlfluff on the dbt models"
	@echo "make bench             the benchmark at full scale (BENCH_SCALE=small: shorter)"
	@echo "make cdc-up / cdc-down the local CDC stack (PostgreSQL, MariaDB, Kafka, Debezium, ...)"
	@echo "make run               one scheduled pass against the local stack"
	@echo "make fixtures          record real Debezium output into tests/fixtures"
	@echo "make setup / clean     fetch what the project needs / remove what runs wrote"

# --- setup (idempotent: stamps record what is done) --------------------------
setup: $(VENV)/.installed $(JARS)/.fetched $(JARS)/.stack-fetched build/.stack-apt build/.chromium-apt $(CDC_JVM_ARCHIVE)

$(VENV)/.installed: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade "pip==25.0.1"
	$(BIN)/pip install --quiet -e ".[dev,orchestration]"
	touch $@

$(JARS)/.fetched: jvm/pom.xml
	mkdir -p $(JARS)
	mvn --quiet --batch-mode -f jvm/pom.xml dependency:copy-dependencies \
	  -DoutputDirectory=../$(JARS) -DexcludeTransitive=true -Dmdep.stripVersion=true
	touch $@

# A training run of the project's own work on a tiny stream (about a minute); its JVM
# writes the classes it loaded to the archive every later driver maps at start.
$(CDC_JVM_ARCHIVE): $(VENV)/.installed $(JARS)/.fetched profiles/profiles.yml tools/jvm_archive/__main__.py
	mkdir -p build
	$(BIN)/python -m tools.jvm_archive --out $@ > build/jvm-archive.log 2>&1 \
		|| { tail -n 40 build/jvm-archive.log; echo "building $@ failed: see build/jvm-archive.log"; exit 1; }

# Debian's chromium, the headless browser tests/integration/test_dbt_docs.py reads the
# dbt docs site in; installed only when missing (it has no system service to keep stopped).
build/.chromium-apt:
	@set -e; \
	if [ ! -x /usr/bin/chromium ]; then \
	  if [ "$$(id -u)" != 0 ]; then echo "please install (as root): apt-get install -y chromium" >&2; exit 1; fi; \
	  echo "apt-get install chromium"; \
	  apt-get update -q >/dev/null; \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium >/dev/null; \
	fi
	mkdir -p $(@D)
	touch $@

# --- the sample change streams (generated from Pagila, never committed) ------
$(SAMPLE)/.generated: setup tools/sample_data/*.py
	$(BIN)/python -m tools.sample_data --pagila-dir $(PAGILA_DIR) --out $(SAMPLE)
	touch $@

sample: $(SAMPLE)/.generated

# --- the main job on the embedded default ------------------------------------
demo: setup sample
	$(BIN)/python -m tools.demo

# --- tests ---------------------------------------------------------------------
# The SQL lint runs beside the tests, in one process: its CPU fits in the time the test
# workers wait on services and JVMs. Its report follows the tests'; either failing fails.
test: setup
	@mkdir -p build; $(BIN)/sqlfluff lint models --processes 1 > build/lint.log 2>&1 & lint=$$!; \
	$(BIN)/python -m pytest -q --durations=15 -n $(TEST_WORKERS); tests=$$?; \
	wait $$lint; linted=$$?; echo "--- make lint (sqlfluff lint models): exit $$linted"; cat build/lint.log; \
	[ $$tests -eq 0 ] && [ $$linted -eq 0 ]

test-unit: setup
	$(BIN)/python -m pytest -q tests/unit

test-integration: setup
	$(BIN)/python -m pytest -q tests --ignore=tests/unit --ignore=tests/e2e

# The project on a Spark standalone cluster with a Thrift Server: the test starts and stops
# its own stack (docs/how-to/run-on-a-cluster.md); make test leaves it out.
test-cluster: setup
	CDC_CLUSTER_TESTS=1 $(BIN)/python -m pytest -q --durations=5 tests/cluster

# The property, crash and gold tests with a large budget (more random change streams, more
# kills, gold as both table types; how long it takes: docs/operations/tests.md; raise
# CDC_PROPERTY_EXAMPLES / CDC_CRASH_KILLS for more).
test-long: setup
	CDC_PROPERTY_EXAMPLES=$${CDC_PROPERTY_EXAMPLES:-16} CDC_CRASH_KILLS=$${CDC_CRASH_KILLS:-3} \
		CDC_ATOMIC_READS=$${CDC_ATOMIC_READS:-1000} \
		CDC_ATOMIC_KILL_STEPS="$${CDC_ATOMIC_KILL_STEPS:-batch recent upsert publish watermark}" \
		CDC_GOLD_TABLE_TYPES="$${CDC_GOLD_TABLE_TYPES:-cow mor}" \
		$(BIN)/python -m pytest -q tests/property tests/crash tests/integration/test_gold_incremental.py

# The benchmark (not a test): every case at full scale, results and plots into
# benchmarks/results/ (see benchmarks/README.md). BENCH_SCALE=small for a shorter run.
bench: setup sample
	$(BIN)/python -m benchmarks --scale $${BENCH_SCALE:-full}

# One linting process per CPU (--processes 0): faster than one process on a multi-core
# machine (docs/operations/tests.md); a violation still fails it.
lint: setup
	$(BIN)/sqlfluff lint models --processes 0

clean:
	rm -rf lakehouse build target logs

# --- the local CDC stack: PostgreSQL + MariaDB + Kafka + Connect/Debezium ------
# `python -m stack` (stdlib only) runs everything on 127.0.0.1 under build/stack; see
# stack/README.md. Setup fetches the pinned Kafka/Debezium jars (jvm/stack/pom.xml) and
# installs Debian's mariadb-server / postgresql only when missing, never starting their
# system services (policy-rc.d says no while apt runs).
.PHONY: cdc-up cdc-down

$(JARS)/.stack-fetched: jvm/stack/pom.xml jvm/stack/apicurio-converter-services/META-INF/services/*
	rm -rf $(JARS)/kafka $(JARS)/connect-plugins $(JARS)/s3proxy $(JARS)/apicurio-registry $(JARS)/.stack-build
	mvn --quiet --batch-mode -f jvm/stack/pom.xml package -Dstack.jars=$(CURDIR)/$(JARS)
	# Apicurio's converter ships no ServiceLoader manifest, which Connect's
	# plugin.discovery=service_load needs to see it: one small jar adds it.
	jar cf $(JARS)/connect-plugins/apicurio-registry-converter/cdc-converter-services.jar \
	  -C jvm/stack/apicurio-converter-services META-INF
	touch $@

build/.stack-apt:
	@set -e; need=""; \
	{ command -v mariadbd >/dev/null 2>&1 || [ -x /usr/sbin/mariadbd ]; } || need="$$need mariadb-server mariadb-client"; \
	ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || need="$$need postgresql"; \
	if [ -n "$$need" ]; then \
	  if [ "$$(id -u)" != 0 ]; then echo "please install (as root): apt-get install -y$$need" >&2; exit 1; fi; \
	  echo "apt-get install$$need (system services stay stopped)"; \
	  if [ -e /usr/sbin/policy-rc.d ]; then cp -p /usr/sbin/policy-rc.d /usr/sbin/policy-rc.d.cdc-stack; fi; \
	  trap 'if [ -e /usr/sbin/policy-rc.d.cdc-stack ]; then mv /usr/sbin/policy-rc.d.cdc-stack /usr/sbin/policy-rc.d; else rm -f /usr/sbin/policy-rc.d; fi' EXIT; \
	  printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d; chmod 755 /usr/sbin/policy-rc.d; \
	  apt-get update -q >/dev/null; \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $$need >/dev/null; \
	fi
	mkdir -p $(@D)
	touch $@

cdc-up: setup
	$(BIN)/python -m stack up

cdc-down:
	$(PYTHON) -m stack down

# --- fixtures from reality: real Debezium output of the four connectors --------
# Starts its own stack in /tmp/fixture-stack (own ports), records the scripted workload
# (tools/record_fixtures/workload.py) into tests/fixtures/debezium, stops and deletes it.
.PHONY: fixtures
fixtures: setup
	$(BIN)/python -m tools.record_fixtures --out tests/fixtures/debezium

# --- one scheduled pass against the local stack: ingestion from Kafka + dbt build ---
# (cron / orchestrators call `python -m runner --once ...` the same way; see README)
CDC_TOPIC_PATTERN ?= (pagila\.public|mariadb\.movies_db)\..*
.PHONY: run
run: setup
	$(BIN)/python -m runner --once --kafka-bootstrap-servers 127.0.0.1:$${CDC_KAFKA_PORT:-29092} \
	  --topic-pattern '$(CDC_TOPIC_PATTERN)'
