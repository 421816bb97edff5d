# Two commands for a new user: `make demo` and `make test`. Both set up first if needed.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
JARS := .jars
SAMPLE := build/sample
export PAGILA_DIR ?= $(abspath ../shared/datasets/pagila)

export DBT_PROFILES_DIR := $(CURDIR)/profiles
export CDC_LAKEHOUSE_DIR ?= $(CURDIR)/lakehouse
export CDC_SPARK_JARS ?= $(CURDIR)/$(JARS)/hudi-spark3.5-bundle_2.12.jar
export PYSPARK_PYTHON := $(CURDIR)/$(BIN)/python

.PHONY: help setup demo test test-unit test-integration lint clean sample

help:
	@echo "make demo   set up if needed, build the sample lakehouse, print its tables"
	@echo "make test   set up if needed, run every test and the SQL lint"

# --- setup (idempotent: stamps record what is done) --------------------------
setup: $(VENV)/.installed $(JARS)/.fetched

$(VENV)/.installed: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade "pip==25.0.1"
	$(BIN)/pip install --quiet -e ".[dev]"
	touch $@

$(JARS)/.fetched: jvm/pom.xml
	mkdir -p $(JARS)
	mvn --quiet --batch-mode -f jvm/pom.xml dependency:copy-dependencies \
	  -DoutputDirectory=../$(JARS) -DexcludeTransitive=true -Dmdep.stripVersion=true
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
test: setup lint
	$(BIN)/python -m pytest -q

lint: setup
	$(BIN)/sqlfluff lint models

clean:
	rm -rf lakehouse build target logs
