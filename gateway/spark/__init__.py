"""xrgw on Spark: the same definitions and semantics as the daemon, as a PySpark job.

    from gateway.spark import JobOptions, run_job, get_session
    spark = get_session()                       # or the active spark-submit session
    result = run_job(spark, catalog.messages(), JobOptions(source=..., sink=...))

See docs/spark.md for the compilation design and deployment. Names are imported lazily:
`xrgw` registers its `spark` subcommand without importing pyspark (an optional extra).
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_EXPORTS = {
    "CompileError": "gateway.spark.compiler",
    "CompiledCatalog": "gateway.spark.compiler",
    "compile_catalog": "gateway.spark.compiler",
    "JobOptions": "gateway.spark.job",
    "JobResult": "gateway.spark.job",
    "run_job": "gateway.spark.job",
    "Stage": "gateway.spark.pipeline",
    "compile_stage": "gateway.spark.pipeline",
    "get_session": "gateway.spark.session",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'gateway.spark' has no attribute {name!r}")
    return getattr(import_module(module), name)
