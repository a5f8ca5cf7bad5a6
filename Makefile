# Entry points for people and CI. Every target can run on a fresh Debian machine as root.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
VENV := .venv
BIN := $(VENV)/bin
PY ?= python3

.PHONY: setup demo check test unit lint sanity docs molecule mock-up mock-down clean

$(BIN)/ansible-playbook: requirements-dev.txt
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q -r requirements-dev.txt
	touch $@

.cache/collections/ansible_collections/llmops/vllm:
	mkdir -p .cache/collections/ansible_collections/llmops
	ln -sfn ../../../.. $@

setup: $(BIN)/ansible-playbook .cache/collections/ansible_collections/llmops/vllm

## demo: boot the mock GPU host and run deploy-ngram end to end on it
demo: setup
	PATH=$(CURDIR)/$(BIN):$$PATH tests/demo.sh

## check: the inner loop, within minutes: lint, unit tests and one small switch on a fresh mock GPU node
check: setup
	PATH=$(CURDIR)/$(BIN):$$PATH tests/check.sh

## test: every gate (lint, sanity, docs, unit tests, molecule)
test: setup
	PATH=$(CURDIR)/$(BIN):$$PATH tests/run-all.sh

unit: setup
	$(BIN)/pytest -q tests/unit

mock-up: setup
	$(BIN)/python molecule/mock_host/mock_host.py up

mock-down: setup
	$(BIN)/python molecule/mock_host/mock_host.py down
