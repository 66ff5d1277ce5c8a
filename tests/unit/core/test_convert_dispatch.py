"""`Converter`'s one dispatch per record: the binding's `detect` runs once per record and
sends it down one path (native, one CloudEvent, an HTTP batch); `convert` and
`convert_all` are `convert_batch` of one record."""

from __future__ import annotations

import pytest

from gateway.cloudevents.bindings import BINDINGS, Binding
from gateway.convert import Converter
from gateway.deadletter import reasons
from gateway.record import NativeMessage

from .defs import CASHIER
from .test_convert_batch import CE_DEF, KAFKA_DEF, NOW, binary_ce, http_batch, kafka, sale, shown

MEMBERS = [{"specversion": "1.0", "id": "1", "source": "/s", "type": "com.example.a"},
           {"specversion": "1.0", "id": "2", "source": "/s", "type": "nope"}]


def _count_detects(monkeypatch: pytest.MonkeyPatch, protocol: str) -> list[NativeMessage]:
    """Every record `protocol`'s binding is asked to detect from now on."""
    asked: list[NativeMessage] = []
    real = BINDINGS[protocol]

    def detect(record: NativeMessage):  # type: ignore[no-untyped-def]
        asked.append(record)
        return real.detect(record)

    monkeypatch.setitem(BINDINGS, protocol,
                        Binding(real.protocol, detect, real.decode, real.encode))
    return asked


def test_detect_runs_once_per_record_native_or_cloudevent(
        monkeypatch: pytest.MonkeyPatch) -> None:
    asked = _count_detects(monkeypatch, "KAFKA")
    converter = Converter([CASHIER, KAFKA_DEF, CE_DEF])
    records = [kafka("eu"), binary_ce("x"), kafka("us"), binary_ce("y")]
    converted = converter.convert_batch(records, now=NOW)
    assert [c.ok for [c] in converted] == [True, True, True, True]
    assert [id(r) for r in asked] == [id(r) for r in records]


@pytest.mark.parametrize("record", [
    sale("12"), kafka("eu"), binary_ce("x"), binary_ce(""), http_batch(MEMBERS),
    NativeMessage("MQTT/5.0", {"topic_name": "/elsewhere"}, payload=b"21.5"),
], ids=["native", "keyed", "cloudevent", "unmatched-event", "http-batch", "unmatched"])
def test_convert_and_convert_all_are_convert_batch_of_one_record(
        record: NativeMessage) -> None:
    converter = Converter([CASHIER, KAFKA_DEF, CE_DEF])
    one = converter.convert(record, now=NOW)
    assert shown(one) == shown(converter.convert_batch([record], now=NOW, split=False)[0][0])
    assert [shown(c) for c in converter.convert_all(record, now=NOW)] == [
        shown(c) for c in converter.convert_batch([record], now=NOW)[0]]


def test_convert_refuses_an_http_batch_that_convert_all_splits() -> None:
    converter = Converter([CASHIER, KAFKA_DEF, CE_DEF])
    record = http_batch(MEMBERS)
    assert converter.convert(record).reason == reasons.INVALID_CLOUDEVENT
    assert [c.ok for c in converter.convert_all(record)] == [True, False]
