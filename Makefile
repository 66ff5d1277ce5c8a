# Two commands a new user needs: `make demo` and `make test`.
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test lint typecheck unit bench clean fault

$(STAMP): pyproject.toml
	scripts/install-system-deps.sh || echo "WARNING: broker packages missing; integration tests will fail until scripts/install-system-deps.sh succeeds" >&2
	python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/xrgw validate config/examples/store.xreg.json
	$(VENV)/bin/xrgw match -d config/examples/store.xreg.json config/examples/store-messages.jsonl
	$(VENV)/bin/xrgw test config/examples/store.tests.yaml
	$(PY) scripts/demo.py

lint: $(STAMP)
	$(VENV)/bin/ruff check gateway adapters tests bench scripts
	$(VENV)/bin/mypy --strict gateway adapters

test: $(STAMP) lint
	$(VENV)/bin/pytest -q

# The fault scenarios against real brokers, 100,000 messages per SIGKILL stream
# (FAULT_N=10000 for a quicker run), then one table of sent/delivered/duplicates/
# dead-lettered/lost.
FAULT_N ?= 100000
fault: $(STAMP)
	$(PY) scripts/fault_report.py -n $(FAULT_N)

bench: $(STAMP)
	$(PY) bench/bench_matcher.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
