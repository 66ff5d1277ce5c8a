"""The test harness: real brokers as child processes (`harness.brokers`), throw-away TLS
material (`harness.tls`) and the fault-scenario machinery (`harness.faults`). Used by the
tests, `scripts/` (`make demo`, `make fault`) and `bench/`.

Not part of the product: the wheel packages only `gateway*` and `adapters*`
(pyproject.toml) and the Docker build context holds neither this folder nor the tests
(.dockerignore).

How it is found, with no `sys.path` edits anywhere: pytest puts the repository root on
the path (`pythonpath = ["."]` in pyproject.toml); scripts and benchmarks are run from
the root as modules (`python -m scripts.demo`, `python -m bench.bench_routes`), which puts
the working directory on the path.
"""
