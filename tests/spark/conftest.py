"""One SparkSession for every Spark test (start-up costs seconds; keep it shared).

local[2], two shuffle partitions, no UI. Kafka tests start Tansu through the broker
harness (`harness/brokers/`).
"""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Iterator

import pytest

pytest.importorskip("pyspark")

from pyspark.sql import SparkSession

# Python workers must run this interpreter (the venv with the core and pyarrow).
os.environ["PYSPARK_PYTHON"] = sys.executable
# pyspark warns about pandas >= 3; the job does not use pandas.
warnings.filterwarnings("ignore", message=".*pandas.*", category=FutureWarning)


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    session = (
        SparkSession.builder.master("local[2]")
        .appName("xrgw-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.pyspark.python", sys.executable)
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "1g")
        # The compiled plan is wide; stage-level codegen of it compiles slowly (seconds per
        # query on tiny inputs), per-expression codegen is enough for test-sized data.
        .config("spark.sql.codegen.wholeStage", "false")
        .config("spark.sql.codegen.factoryMode", "NO_CODEGEN")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
