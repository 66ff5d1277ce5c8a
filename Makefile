# Two commands a new user needs: `make demo` and `make test`.
# Scripts and benchmarks run as modules (`-m scripts.demo`) from this folder, so that they
# import the test harness (harness/), which is not installed; see harness/__init__.py.
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test lint typecheck unit bench clean fault generate mutate mutate-changed

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
	$(PY) -m scripts.demo

lint: $(STAMP)
	$(VENV)/bin/ruff check gateway adapters harness tests bench scripts
	$(VENV)/bin/mypy --strict gateway adapters harness

test: $(STAMP) lint
	$(VENV)/bin/pytest -q

# What is generated from the config spec: the configuration reference and the config part
# of the Helm chart's values schema (tests fail when either is out of date).
generate: $(STAMP)
	$(PY) -c 'from gateway.config import reference_markdown; print(reference_markdown(), end="")' > docs/configuration.md
	$(PY) -m scripts.chart_values_schema

# The fault scenarios against real brokers, 100,000 messages per SIGKILL stream
# (FAULT_N=10000 for a quicker run), then one table of sent/delivered/duplicates/
# dead-lettered/lost.
FAULT_N ?= 100000
fault: $(STAMP)
	$(PY) -m scripts.fault_report -n $(FAULT_N)

# Mutation testing (mutmut; config in pyproject.toml [tool.mutmut]) of gateway/matching,
# gateway/templates/template.py, gateway/envelope, gateway/runtime and the Kafka commit tracking
# (adapters/kafka/commits.py) against the fast suite (unit + fuzz, fixed seed). Slow: one
# child per core by default; MUTATE_JOBS=1 and MUTATE_ONLY='gateway.matching.*' run one
# package on a shared machine.
# Results: `mutmut results`, `mutmut show NAME`; docs/testing.md lists the equivalent ones.
MUTATE_JOBS ?= $(shell nproc)
MUTATE_ONLY ?=
mutate: $(STAMP)
	nice -n 10 $(VENV)/bin/mutmut run --max-children $(MUTATE_JOBS) $(MUTATE_ONLY)
	$(PY) -m scripts.mutation_summary

# Screen only the mutants of functions changed since BASE (default: the commit up to which
# docs/testing.md says the verdicts are complete) that have no verdict yet in mutants/:
# one pytest process per chunk, a forked child per mutant.
BASE ?= $(shell sed -n 's/^Mutation verdicts complete up to commit `\([0-9a-f]*\)`.*/\1/p' docs/testing.md)
mutate-changed: $(STAMP)
	nice -n 10 $(PY) -m scripts.mutation_sweep --changed-since $(BASE) --unchecked
	$(PY) -m scripts.mutation_summary

bench: $(STAMP)
	$(PY) -m bench.bench_matcher

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
