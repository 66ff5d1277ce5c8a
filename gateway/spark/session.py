"""The embedded SparkSession (`local[*]` unless a master is given)."""

from __future__ import annotations

import os
import sys

from pyspark.sql import SparkSession

# HotSpot never JIT-compiles a method over 8,000 bytes of bytecode unless told to. The
# pipeline keeps its own methods smaller (`pipeline._METHOD_LIMIT`); Spark's other
# generated code (a wide `from_json` projection, say) still benefits.
COMPILE_HUGE_METHODS = "-XX:-DontCompileHugeMethods"
JVM_OPTION_KEYS = ("spark.driver.extraJavaOptions", "spark.executor.extraJavaOptions")


def get_session(master: str | None = None, app_name: str = "xrgw-spark") -> SparkSession:
    """The active session when there is one (spark-submit, notebooks), else a new one.

    Python workers run this interpreter, so they see the same packages (the core).
    """
    active = SparkSession.getActiveSession()
    if active is not None and master is None:
        return active
    # Local workers are forked by the driver and read the environment variable.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = (SparkSession.builder.appName(app_name)
               .config("spark.pyspark.python", sys.executable)
               .config("spark.sql.session.timeZone", "UTC"))
    for key in JVM_OPTION_KEYS:
        builder = builder.config(key, COMPILE_HUGE_METHODS)
    if master is not None or active is None:
        builder = builder.master(master or "local[*]")
    return builder.getOrCreate()
