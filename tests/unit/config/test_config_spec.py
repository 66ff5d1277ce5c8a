"""The spec itself (documented, rendered), durations, and load_config never raising."""

from __future__ import annotations

import string
import tempfile
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.config import CONFIG_SPEC, load_config_text, reference_markdown
from gateway.config._docs import iter_fields
from gateway.spec.durations import format_duration, parse_duration

ROOT = Path(__file__).resolve().parents[3]


def test_every_field_has_a_description() -> None:
    missing = [name for name, field in iter_fields(CONFIG_SPEC) if not field.description]
    assert missing == []


def test_reference_lists_every_key() -> None:
    page = reference_markdown()
    for name, _ in iter_fields(CONFIG_SPEC):
        assert f"| `{name}` |" in page
    assert "| `routes[].retry.initial_backoff` | duration | `200ms` |" in page


def test_issue_keys_are_all_in_the_spec() -> None:
    names = {name for name, _ in iter_fields(CONFIG_SPEC)}
    assert {"definitions", "definitions[].url", "definitions[].poll", "routes[].from",
            "routes[].to", "routes[].mode", "routes[].messagegroups", "routes[].deliver",
            "routes[].ambiguity", "routes[].inflight", "routes[].retry.attempts",
            "deadletter", "admin.listen", "log.level", "log.format", "shutdown.grace",
            "endpoints.<id>.uri", "endpoints.<id>.password_file",
            "endpoints.<id>.tls.insecure", "endpoints.<id>.options"} <= names


@pytest.mark.parametrize(("text", "seconds"), [
    ("30s", 30.0), ("500ms", 0.5), ("2m", 120.0), ("1h", 3600.0), ("1m30s", 90.0),
    ("0.5s", 0.5), ("30", None), ("", None), ("s", None), ("30 s", None), ("-1s", None),
    ("1d", None),
])
def test_parse_duration(text: str, seconds: float | None) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize(("seconds", "text"), [(30.0, "30s"), (0.2, "200ms"), (120.0, "2m"),
                                               (7200.0, "2h"), (90.0, "90s")])
def test_format_duration(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text
    assert parse_duration(text) == seconds


_KEYS = st.sampled_from(["definitions", "routes", "deadletter", "admin", "log", "shutdown",
                         "endpoints", "from", "to", "mode", "retry", "uri", "password_file",
                         "poll", "url", "inflight", "options", "tls", "listen", "grace"])
_SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-5, 70000), st.floats(allow_nan=True),
    st.text(string.printable, max_size=12),
    st.sampled_from(["store-mqtt", "events-kafka", "log", "30s", "binary", "${X}", "${",
                     "kafka://h:1,x", "mqtt://u:p@h:1", "[::1]:1", "store.xreg.json"]),
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=4),
                            st.dictionaries(st.one_of(_KEYS, st.text(max_size=6)), inner,
                                            max_size=5)),
    max_leaves=25,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(_KEYS, _VALUES, max_size=8))
def test_load_config_never_raises_on_structured_input(data: dict[str, object]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "store.xreg.json").write_text(
            (ROOT / "config/examples/store.xreg.json").read_text())
        text = yaml.safe_dump(data)
        config, problems = load_config_text(text, "gw.yaml", Path(tmp), environ={"X": "1"})
    assert config is None or not any(p.is_error for p in problems)
    assert config is not None or any(p.is_error for p in problems)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=string.printable + "\x00\x85\u2028é", max_size=80))
def test_load_config_never_raises_on_arbitrary_text(text: str) -> None:
    config, problems = load_config_text(text, "gw.yaml", Path("/nonexistent"), environ={})
    assert config is None
    assert problems and all(p.file == "gw.yaml" or p.file.startswith("/") for p in problems)
