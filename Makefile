# Quick start: `make demo` (lint the bundled example suite) and `make test` (run the tests).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test install install-test lint clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

install: $(BIN)/python
	$(BIN)/python -m pip install -q -e .

install-test: $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[test]'

demo: install
	@echo "== gpu-test-lint check examples/ (every rule; exit status 1 means violations found)"
	@$(BIN)/gpu-test-lint check examples/ || test $$? -eq 1
	@echo "== gpu-test-lint check --diff examples/ (what --fix would change; nothing is written)"
	@$(BIN)/gpu-test-lint check --diff examples/ || test $$? -eq 1

test: install-test
	$(BIN)/python -m pytest -q

lint: install-test
	$(BIN)/ruff check .
	$(BIN)/gpu-test-lint check .

clean:
	rm -rf $(VENV) build *.egg-info .gpu-test-lint-cache
