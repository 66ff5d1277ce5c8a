"""The metrics exposition ops scrape: process and interpreter series, the build, no
`_created` series, the renamed metrics under both names, per-route latency and window,
byte counters, and the backlog gauges (set, and removed when a partition goes away)."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence

import pytest
from prometheus_client.parser import text_string_to_metric_families

from gateway.observability.metrics import ALIAS_REMOVED_IN, Metrics
from gateway.ports import Backlog, NotConnected, PartitionLag, StreamPending
from gateway.record import NativeMessage
from gateway.runtime import backlog as backlog_module
from tests.unit.runtime.test_route import build, run_to_end, sale, sample, unmatched


def _names(text: str) -> set[str]:
    return {s.name for f in text_string_to_metric_families(text) for s in f.samples}


def test_process_and_python_collectors_are_in_the_private_registry() -> None:
    names = _names(Metrics().render().decode())
    for name in ("process_resident_memory_bytes", "process_cpu_seconds_total",
                 "process_open_fds", "process_max_fds", "python_info",
                 "python_gc_collections_total"):
        assert name in names, name


def test_build_info_names_version_and_revision(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XRGW_REVISION", "4d75f14")
    text = Metrics().render().decode()
    assert 'xrgw_build_info{revision="4d75f14",version="0.1.0"} 1.0' in text
    monkeypatch.delenv("XRGW_REVISION")
    assert 'xrgw_build_info{revision="unknown",version="0.1.0"} 1.0' in (
        Metrics().render().decode())


def test_no_created_series() -> None:
    metrics = Metrics()
    metrics.received.labels("in", "MQTT/5.0").inc()
    metrics.processing.labels("r").observe(0.01)
    text = metrics.render().decode()
    assert "xrgw_messages_received_total" in text and "xrgw_processing_seconds_count" in text
    assert "_created" not in text


def test_renamed_metrics_keep_their_old_names_with_the_same_samples() -> None:
    metrics = Metrics()
    metrics.deadletter.labels("unmatched").inc(3)
    metrics.inflight.labels("a->b").set(7)
    text = metrics.render().decode()
    assert 'xrgw_messages_deadlettered_total{reason="unmatched"} 3.0' in text
    assert 'xrgw_deadletter_total{reason="unmatched"} 3.0' in text
    assert 'xrgw_messages_inflight{route="a->b"} 7.0' in text
    assert 'xrgw_inflight{route="a->b"} 7.0' in text
    helps = dict(re.findall(r"# HELP (\S+) (.*)", text))
    for old in ("xrgw_deadletter_total", "xrgw_inflight"):
        assert helps[old].startswith("Deprecated alias of xrgw_messages_")
        assert ALIAS_REMOVED_IN in helps[old]
    # the same family type, so rate() and friends work on the alias as before
    types = {f.name: f.type for f in text_string_to_metric_families(text)}
    assert types["xrgw_deadletter"] == types["xrgw_messages_deadlettered"] == "counter"
    assert types["xrgw_inflight"] == "gauge"


def test_route_exports_latency_window_and_bytes_per_route_and_endpoint() -> None:
    route, consumer, out, dlq, metrics = build([sale(1), unmatched()], inflight=8)
    asyncio.run(run_to_end(route, consumer))
    assert sample(metrics, "xrgw_processing_seconds_count", route="store") == 2
    assert sample(metrics, "xrgw_messages_inflight_limit", route="store") == 8
    received = sale(1).body_length() + len(b"\x00raw")
    assert sample(metrics, "xrgw_received_bytes_total", endpoint="store-mqtt",
                  protocol="MQTT/5.0") == received
    assert sample(metrics, "xrgw_published_bytes_total", endpoint="events-kafka") == sum(
        r.body_length() for r in out.written) > 0
    assert sample(metrics, "xrgw_deadletter_bytes_total") == sum(
        r.body_length() for r in dlq.written) == len(b"\x00raw")
    assert sample(metrics, "xrgw_published_bytes_total", endpoint="dlq") in (None, 0)


def test_body_length_counts_received_bytes_without_reserialising() -> None:
    raw = b'{ "a" : 1 }'
    assert NativeMessage("KAFKA", {}, data={"a": 1}, raw=raw).body_length() == len(raw)
    assert NativeMessage("KAFKA", {}, payload=b"abc").body_length() == 3
    assert NativeMessage("KAFKA", {}, data={"a": 1}).body_length() == len(b'{"a":1}')
    assert NativeMessage("KAFKA", {}).body_length() == 0
    # A body received declared JSON and not parsed yet: its bytes, still unparsed.
    unparsed = NativeMessage.from_wire("KAFKA", {}, raw, "application/json", parse=False)
    assert unparsed.unparsed_body() is raw
    assert unparsed.body_length() == len(raw)
    assert unparsed.unparsed_body() is raw  # not parsed for it
    assert unparsed.data == {"a": 1} and unparsed.body_length() == len(raw)


def test_backlog_series_are_set_and_removed_when_no_longer_reported() -> None:
    metrics = Metrics()
    shown = metrics.show_backlog("in", [PartitionLag("t", 0, 5), PartitionLag("t", 1, 0),
                                        StreamPending("S", "d", 9)], set())
    assert sample(metrics, "xrgw_consumer_lag", endpoint="in", topic="t", partition="0") == 5
    assert metrics.registry.get_sample_value(
        "xrgw_consumer_lag", {"endpoint": "in", "topic": "t", "partition": "1"}) == 0
    assert sample(metrics, "xrgw_consumer_pending", endpoint="in", stream="S",
                  consumer="d") == 9
    metrics.show_backlog("in", [PartitionLag("t", 1, 2)], shown)  # partition 0 revoked
    assert metrics.registry.get_sample_value(
        "xrgw_consumer_lag", {"endpoint": "in", "topic": "t", "partition": "0"}) is None
    assert metrics.registry.get_sample_value(
        "xrgw_consumer_pending", {"endpoint": "in", "stream": "S", "consumer": "d"}) is None
    assert sample(metrics, "xrgw_consumer_lag", endpoint="in", topic="t", partition="1") == 2


class _Reporting:
    """A consumer that reports a scripted backlog, or no connection."""

    def __init__(self, answers: list[Sequence[Backlog] | None]) -> None:
        self.answers = answers
        self.asked = asyncio.Event()

    @property
    def connected(self) -> bool:
        return True

    async def connect(self) -> None: ...

    async def read_batch(self, limit: int) -> object:
        raise AssertionError("not read")

    async def aclose(self) -> None: ...

    async def backlog(self) -> Sequence[Backlog]:
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        self.asked.set()
        if answer is None:
            raise NotConnected("down")
        return answer


def test_backlog_watch_polls_and_clears_when_disconnected_or_stopped(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(backlog_module, "POLL_SECONDS", 0.01)
    metrics = Metrics()
    consumer = _Reporting([[PartitionLag("t", 0, 4)], None, [PartitionLag("t", 0, 6)]])

    def lag() -> float | None:
        return metrics.registry.get_sample_value(
            "xrgw_consumer_lag", {"endpoint": "in", "topic": "t", "partition": "0"})

    async def scenario() -> list[float | None]:
        seen: list[float | None] = []
        task = asyncio.create_task(backlog_module.watch_backlog("in", consumer, metrics))  # type: ignore[arg-type]
        async with asyncio.timeout(5):
            while len(consumer.answers) > 1 or lag() != 6:
                if lag() not in seen[-1:]:
                    seen.append(lag())
                await asyncio.sleep(0.001)
        seen.append(lag())
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        seen.append(lag())
        return seen

    seen = asyncio.run(scenario())
    assert 4.0 in seen and seen[-2] == 6.0
    assert None in seen[seen.index(4.0):-2]  # disconnected: removed, not frozen at 4
    assert seen[-1] is None  # the route stopped: nothing left behind


def test_consumers_without_a_backlog_are_not_polled() -> None:
    from adapters.memory import MemoryConsumer

    metrics = Metrics()
    asyncio.run(asyncio.wait_for(
        backlog_module.watch_backlog("in", MemoryConsumer(), metrics), 1))
    assert "xrgw_consumer_lag{" not in metrics.render().decode()


def test_endpoint_series_carry_xrgw_endpoint_and_the_deprecated_endpoint_label() -> None:
    metrics = Metrics()
    metrics.connected.labels("orders-kafka").set(1)
    text = metrics.render().decode()
    assert 'xrgw_endpoint_connected{endpoint="orders-kafka",xrgw_endpoint="orders-kafka"} 1.0' \
        in text
    # series without an endpoint label are left as they are
    assert 'xrgw_messages_deadlettered_total{reason="unmatched"} 0.0' in text


def test_known_counters_start_at_zero_and_the_reload_gauge_is_one() -> None:
    metrics = Metrics()
    metrics.known_source("in", "MQTT/5.0")
    text = metrics.render().decode()
    for reason in ("unmatched", "undeliverable", "invalid-data"):
        assert f'xrgw_messages_deadlettered_total{{reason="{reason}"}} 0.0' in text
    assert 'xrgw_messages_received_total{endpoint="in",protocol="MQTT/5.0",' \
        'xrgw_endpoint="in"} 0.0' in text
    assert 'xrgw_messages_unmatched_total{endpoint="in",xrgw_endpoint="in"} 0.0' in text
    assert 'xrgw_config_reloads_total{result="rejected"} 0.0' in text
    assert "xrgw_config_last_reload_successful 1.0" in text
