"""`Stage.sql`'s code generation settings follow how the executors' JVMs were started."""

from __future__ import annotations

from typing import Any

from gateway.spark.pipeline import _tune_codegen, compiles_huge_methods
from gateway.spark.session import COMPILE_HUGE_METHODS


class _Conf:
    def __init__(self, values: dict[str, str]) -> None:
        self.values = values

    def get(self, key: str, default: Any = None) -> Any:
        return self.values.get(key, default)

    def set(self, key: str, value: str) -> None:
        self.values[key] = value


class _Session:
    """The two parts of a SparkSession the settings read: static and runtime conf."""

    def __init__(self, static: dict[str, str]) -> None:
        self.static = _Conf(static)
        self.conf = _Conf({})
        self.sparkContext = self

    def getConf(self) -> _Conf:  # SparkContext's name
        return self.static


def test_local_reads_the_driver_options_and_keeps_the_fused_stage() -> None:
    session = _Session({"spark.master": "local[2]",
                        "spark.driver.extraJavaOptions": f"-Xss4m {COMPILE_HUGE_METHODS}"})
    assert compiles_huge_methods(session)  # type: ignore[arg-type]
    _tune_codegen(session)  # type: ignore[arg-type]
    # Fused up to the size C2 still compiles, split beyond it.
    assert session.conf.values == {"spark.sql.codegen.maxFields": "2000",
                                   "spark.sql.codegen.hugeMethodLimit": "34000"}


def test_cluster_reads_the_executor_options() -> None:
    session = _Session({"spark.master": "spark://head:7077",
                        "spark.driver.extraJavaOptions": COMPILE_HUGE_METHODS})
    assert not compiles_huge_methods(session)  # type: ignore[arg-type]
    _tune_codegen(session)  # type: ignore[arg-type]
    assert session.conf.values["spark.sql.codegen.hugeMethodLimit"] == "8000"
    session.static.values["spark.executor.extraJavaOptions"] = COMPILE_HUGE_METHODS
    assert compiles_huge_methods(session)  # type: ignore[arg-type]


def test_a_stricter_user_setting_is_kept() -> None:
    session = _Session({"spark.master": "local[*]"})
    session.conf.values.update({"spark.sql.codegen.maxFields": "5000",
                                "spark.sql.codegen.hugeMethodLimit": "4000"})
    _tune_codegen(session)  # type: ignore[arg-type]
    assert session.conf.values == {"spark.sql.codegen.maxFields": "5000",
                                   "spark.sql.codegen.hugeMethodLimit": "4000"}
