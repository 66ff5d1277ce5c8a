"""Developer scripts, run from the repository root as modules (`python -m scripts.demo`,
`python -m scripts.fault_report`; the Makefile does), so that the root is on the path and
the test harness (`harness/`, not installed) imports. A regular package, not a namespace
one, so that no installed distribution's top-level `scripts` can shadow it."""
