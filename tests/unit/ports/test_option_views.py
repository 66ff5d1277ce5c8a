"""Typed option views (`OptionSpec.typed`, `read_into`): a view that does not match its
spec is refused when its module is imported, and reading gives typed values."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from gateway.ports.options import Option, OptionSpec, count, extend, one_or_many, seconds
from gateway.spec.fields import Field

SPEC = OptionSpec(protocol="TEST", options=(
    count("max_in_flight", 8, "window"),
    seconds("connect_timeout", 10, "seconds"),
    Option(one_or_many("topics", "topics", "topic")),
    Option(Field("terminus-durability", "enum", "durability", default="none",
                 choices=("none", "configuration"))),
))


@dataclass(frozen=True)
class Good:
    max_in_flight: int
    connect_timeout: float
    topics: str | list[str] | None
    terminus_durability: str


def test_a_matching_view_reads_typed_values_with_defaults() -> None:
    view = SPEC.typed(Good)
    values = SPEC.read_into(view, {"maxInFlight": 3, "topics": ["a", "b"]})
    assert values == Good(3, 10.0, ["a", "b"], "none")


def test_bad_values_are_refused_by_name() -> None:
    with pytest.raises(ValueError, match="max_in_flight"):
        SPEC.read_into(Good, {"max_in_flight": 0})


@dataclass(frozen=True)
class Missing:
    max_in_flight: int
    connect_timeout: float
    topics: str | list[str] | None


@dataclass(frozen=True)
class Extra(Good):
    colour: str = "red"


@dataclass(frozen=True)
class Mistyped:
    max_in_flight: float
    connect_timeout: int
    topics: list[str]
    terminus_durability: str


@pytest.mark.parametrize(("view", "problem"), [
    (Missing, "no field for option 'terminus-durability'"),
    (Extra, "field 'colour' is no option"),
    (Mistyped, "max_in_flight: typed <class 'float'>, the option parses to int"),
    (Mistyped, "connect_timeout: typed <class 'int'>, the option parses to float"),
    (Mistyped, "topics: typed list[str], the option parses to NoneType | list | str"),
])
def test_a_view_that_drifted_from_its_spec_is_refused(view: type, problem: str) -> None:
    with pytest.raises(TypeError) as refused:
        SPEC.typed(view)
    assert problem in str(refused.value)


@dataclass(frozen=True)
class Settings(Good):
    """An adapter's settings: the options as read plus what it derives."""

    address: str


def test_settings_extend_the_view_with_derived_fields_that_may_replace_a_value() -> None:
    values = SPEC.read_into(SPEC.typed(Good), {"topics": "a"})
    settings = extend(Settings, values, address="h:1", topics=["a"])
    assert settings == Settings(8, 10.0, ["a"], "none", "h:1")
