"""Benchmarks, run from the repository root as modules (`python -m bench.bench_matcher`,
`python -m bench.bench_routes`, `python -m bench.bench_spark`), so that the root is on the
path and the broker harness (`harness/`, not installed) imports. A regular package, so that
no installed distribution's top-level `bench` can shadow it."""
