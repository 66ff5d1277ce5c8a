"""`Stage.sql`'s code generation settings: small methods in every JVM."""

from __future__ import annotations

from typing import Any

from gateway.spark.pipeline import _tune_codegen
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


def test_stages_are_split_even_where_huge_methods_would_compile() -> None:
    # The JVM option no longer buys a fused stage: HotSpot compiles one so late that a
    # batch runs it interpreted (docs/spark.md, "Code generation settings").
    for master in ("local[2]", "spark://head:7077"):
        session = _Session({"spark.master": master,
                            "spark.driver.extraJavaOptions": f"-Xss4m {COMPILE_HUGE_METHODS}",
                            "spark.executor.extraJavaOptions": COMPILE_HUGE_METHODS})
        _tune_codegen(session)  # type: ignore[arg-type]
        assert session.conf.values == {"spark.sql.codegen.maxFields": "2000",
                                       "spark.sql.codegen.hugeMethodLimit": "8000",
                                       "spark.sql.icu.caseMappings.enabled": "false"}


def test_a_looser_user_setting_is_lowered() -> None:
    session = _Session({"spark.master": "local[*]"})
    session.conf.values["spark.sql.codegen.hugeMethodLimit"] = "65535"
    _tune_codegen(session)  # type: ignore[arg-type]
    assert session.conf.values["spark.sql.codegen.hugeMethodLimit"] == "8000"


def test_a_stricter_user_setting_is_kept() -> None:
    session = _Session({"spark.master": "local[*]"})
    session.conf.values.update({"spark.sql.codegen.maxFields": "5000",
                                "spark.sql.codegen.hugeMethodLimit": "4000"})
    _tune_codegen(session)  # type: ignore[arg-type]
    assert session.conf.values == {"spark.sql.codegen.maxFields": "5000",
                                   "spark.sql.codegen.hugeMethodLimit": "4000",
                                   "spark.sql.icu.caseMappings.enabled": "false"}


def test_lowercase_is_the_jvms_not_icus() -> None:
    # ICU's case-mapping tables cost seconds of CPU to initialise in every fresh JVM
    # (the first `lower` of a job); the JVM's mapping is Python's `str.lower`.
    session = _Session({"spark.master": "local[*]"})
    _tune_codegen(session)  # type: ignore[arg-type]
    assert session.conf.values["spark.sql.icu.caseMappings.enabled"] == "false"
