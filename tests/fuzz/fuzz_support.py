"""Shared pieces of the fuzz suite: settings, the catalog, seed records and hostile
strategies.

`XRGW_FUZZ_EXAMPLES` scales every test (default 100 examples for the cheapest tests,
fewer for the expensive ones; `XRGW_FUZZ_EXAMPLES=5000 pytest tests/fuzz` is a long
run). Every test has `deadline=None`: some inputs (1 MiB bodies, 50,000-member batches)
are slow by design.
"""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from gateway.convert import Conversion
from gateway.definitions import load_catalog
from gateway.protocols import AMQP, HTTP, KAFKA, MQTT5, MQTT311, NATS
from gateway.record import NativeMessage
from harness.faults.route_config import FAULT_DEFINITIONS

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "config" / "examples"

#: Every example document (all five protocols, CloudEvents envelopes, extensions, typed
#: attributes) plus the fault-test definitions.
CATALOG = load_catalog([*sorted(EXAMPLES.glob("*.xreg.json")), FAULT_DEFINITIONS])
assert not CATALOG.errors, CATALOG.errors

BASE_EXAMPLES = int(os.environ.get("XRGW_FUZZ_EXAMPLES") or 100)


def fuzz(share: float = 1.0) -> settings:
    """Hypothesis settings: `share` of XRGW_FUZZ_EXAMPLES examples, no deadline."""
    return settings(max_examples=max(5, int(BASE_EXAMPLES * share)), deadline=None,
                    suppress_health_check=list(HealthCheck), derandomize=False)


def _seeds() -> list[NativeMessage]:
    """The `input` of every example test case: records that match (or nearly match)."""
    out: list[NativeMessage] = []
    for path in sorted(EXAMPLES.glob("*.tests.yaml")):
        doc = yaml.safe_load(path.read_text())
        for case in doc.get("cases", []):
            if isinstance(case.get("input"), dict):
                out.append(NativeMessage.from_json(case["input"]))
    out += [
        NativeMessage(MQTT5, {"topic_name": "/faults/r1/3", "qos": 1}, {"seq": 1}),
        NativeMessage(KAFKA, {"topic": "faults-in-r1", "partition": 0, "offset": 9,
                              "key": "3"}, {"seq": 1}),
        NativeMessage(NATS, {"subject": "faults.in.r1.3", "stream": "S", "sequence": 4},
                      {"seq": 1}),
        NativeMessage(AMQP, {"properties": {"subject": "/faults/r1/3"}}, {"seq": 1}),
        NativeMessage(HTTP, {"method": "POST", "path": "/faults/r1/3", "headers": []},
                      {"seq": 1}),
    ]
    return out


SEEDS = _seeds()
PROTOCOLS = [MQTT5, MQTT311, AMQP, KAFKA, NATS, HTTP]

# -------------------------------------------------------------------- hostile pieces

#: Text with what breaks naive code: CR/LF (header injection), NUL, lone surrogates
#: (invalid UTF-8 once encoded), RTL marks, template and path syntax, long runs.
NASTY = st.sampled_from([
    "", " ", "\r\n", "a\r\nX-Injected: 1", "\x00", "\ud800", "\udfff", "\u202e", "{x}",
    "{", "}", "/", "//", "..", "%", "%zz", "%2F", "%00", "+", "#", "*", ">", "$share/g/t",
    "é", "\U0001f600", "\ufeff", "1.0", "0.3", "application/cloudevents+json",
    "application/cloudevents-batch+json", "application/json", "x" * 10_000,
])
TEXT = st.one_of(st.text(max_size=40), NASTY,
                 st.lists(st.one_of(st.text(max_size=5), NASTY), max_size=4).map("".join))
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), TEXT)
JSONISH: st.SearchStrategy[Any] = st.recursive(
    SCALARS, lambda inner: st.lists(inner, max_size=4)
    | st.dictionaries(TEXT, inner, max_size=4), max_leaves=12)


def nested(depth: int, leaf: Any = 1) -> Any:
    value = leaf
    for i in range(depth):
        value = [value] if i % 2 else {"a": value}
    return value


def nested_text(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


#: Names of every protocol's metadata, CloudEvents binding names included.
CE_NAMES = ["ce_specversion", "ce_id", "ce_source", "ce_type", "ce_time", "ce_subject",
            "ce_dataschema", "ce-specversion", "ce-id", "ce-source", "ce-type", "ce-time",
            "ce-specversion", "cloudEvents:specversion", "cloudEvents:id",
            "cloudEvents:type", "cloudEvents:source", "cloudEvents_specversion",
            "ce_traceparent", "traceparent", "content-type", "Content-Type", "eventType",
            "kind", "region", "severity", "schema", "X-Event", "Idempotency-Key"]
NAMES = st.one_of(st.sampled_from(CE_NAMES), TEXT)
#: Header / user-property lists, well-formed or not (wrong types everywhere).
PAIRS = st.one_of(
    st.lists(st.fixed_dictionaries({"name": NAMES, "value": TEXT}), max_size=6),
    st.lists(st.dictionaries(st.sampled_from(["name", "value", "x"]), JSONISH, max_size=3),
             max_size=4),
    JSONISH,
)
#: Header names as raw bytes: binding names, token characters, and bytes a server must
#: refuse (separators, non-ASCII, control characters).
RAW_HEADER_NAMES = st.one_of(
    st.sampled_from([n.encode() for n in CE_NAMES if ":" not in n]),
    st.from_regex(rb"[A-Za-z0-9!#$%&'*+.^_`|~-]{1,20}", fullmatch=True),
    st.binary(min_size=1, max_size=10).filter(lambda b: b":" not in b and b"\n" not in b
                                              and b"\r" not in b))
#: A CloudEvent in structured mode, valid or with invalid attributes.
CE_ATTRS = st.fixed_dictionaries(
    {"specversion": st.one_of(st.just("1.0"), JSONISH),
     "id": st.one_of(st.just("1"), JSONISH),
     "source": st.one_of(st.just("/s"), JSONISH),
     "type": st.one_of(st.just("t"), JSONISH)},
    optional={"time": st.one_of(st.just("2024-01-01T00:00:00Z"), JSONISH),
              "datacontenttype": JSONISH, "dataschema": JSONISH, "subject": JSONISH,
              "data": JSONISH, "data_base64": JSONISH, "ext1": JSONISH, "BAD NAME": JSONISH})
BODIES = st.one_of(
    st.binary(max_size=64),
    st.just(b"\xff\xfe\xfd invalid utf-8 \xc3\x28"),
    st.integers(min_value=0, max_value=1200).map(nested_text),  # around the parser limit
    st.sampled_from([nested_text(50_000), b"x" * (1 << 20), b"{" * 10, b"\x00" * 100]),
    JSONISH.map(lambda v: json.dumps(v).encode()),
    CE_ATTRS.map(lambda v: json.dumps(v).encode()),
    st.lists(CE_ATTRS, max_size=5).map(lambda v: json.dumps(v).encode()),
    st.integers(min_value=1, max_value=50_000).map(
        lambda n: json.dumps([{"specversion": "1.0", "id": str(i), "source": "/s",
                               "type": "t"} for i in range(n)]).encode()),
)
CONTENT_TYPES = st.one_of(st.none(), st.sampled_from([
    "application/json", "application/cloudevents+json", "application/cloudevents+json; x",
    "application/cloudevents-batch+json", "text/plain", "application/octet-stream",
    "application/x+json", "\r\n", ";;;", "application/cloudevents+avro"]), TEXT)


@st.composite
def hostile_records(draw: st.DrawFn) -> NativeMessage:
    """A record as an adapter could hand it over -- or worse: a seed record mutated, or
    one made up from nothing, with wrong types, nasty text and hostile bodies."""
    if draw(st.booleans()):
        seed = draw(st.sampled_from(SEEDS))
        protocol, fields = seed.protocol, dict(seed.fields)
    else:
        protocol, fields = draw(st.sampled_from(PROTOCOLS)), {}
    for _ in range(draw(st.integers(0, 4))):
        name = draw(st.sampled_from([
            "topic_name", "qos", "user_properties", "content_type", "correlation_data",
            "topic", "partition", "offset", "key", "key_base64", "headers", "subject",
            "reply-to", "stream", "sequence", "method", "path", "query", "properties",
            "application-properties", "message-annotations", "header", "timestamp"]))
        value = draw(st.one_of(JSONISH, PAIRS, st.dictionaries(NAMES, JSONISH, max_size=4)))
        fields[name] = value
    if draw(st.booleans()):
        key = "user_properties" if protocol == MQTT5 else "headers"
        pairs = fields.get(key) if isinstance(fields.get(key), list) else []
        fields[key] = [*pairs, *draw(PAIRS.filter(lambda p: isinstance(p, list)))]
    if protocol == AMQP and draw(st.booleans()):
        fields["application-properties"] = draw(st.dictionaries(NAMES, JSONISH, max_size=5))
    kind = draw(st.sampled_from(["wire", "wire", "data", "payload", "none"]))
    if kind == "wire":
        return NativeMessage.from_wire(protocol, fields, draw(BODIES), draw(CONTENT_TYPES))
    if kind == "data":
        return NativeMessage(protocol, fields, draw(JSONISH))
    if kind == "payload":
        return NativeMessage(protocol, fields, payload=draw(BODIES))
    return NativeMessage(protocol, fields)


def check_conversion(conversion: Conversion) -> None:
    """A conversion is an event, or a reason with a detail -- never neither."""
    if conversion.event is None:
        assert conversion.reason, conversion
        assert isinstance(conversion.detail, str)
        json.dumps(conversion.to_json())  # the `xrgw match` output must render


def b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()
