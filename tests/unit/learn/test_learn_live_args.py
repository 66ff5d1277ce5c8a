"""`xrgw learn --endpoint`: argument errors are exit 2 with a message naming the fix
(no --count/--for, unknown, producer-only or unobservable endpoint), and the reading loop
(`gateway.commands.learn_live`) on a fake consumer: it stops at --count or --for, acks
every delivery and learns from exactly what it read. The brokers are in
tests/integration/test_learn_live.py."""

from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path

import pytest

from gateway.cli import main
from gateway.commands.learn_live import Limits, learn_live
from gateway.learn import LearnOptions
from gateway.ports import Delivery
from gateway.record import NativeMessage

from .records import store_traffic


@pytest.fixture
def config(tmp_path: Path) -> str:
    doc = {
        "$schema": "https://cloudevents.io/schemas/registry", "specversion": "1.0-rc4",
        "endpoints": {
            "plant": {"usage": ["consumer"], "protocol": "MQTT/5.0", "protocoloptions": {},
                      "messagegroups": ["#/messagegroups/g"]},
            "queue": {"usage": ["consumer"], "protocol": "AMQP/1.0",
                      "protocoloptions": {"node": "q"}, "messagegroups": ["#/messagegroups/a"]},
            "out": {"usage": ["producer"], "protocol": "NATS",
                    "protocoloptions": {"subject": "out"}},
        },
        "messagegroups": {
            "g": {"envelope": "CloudEvents/1.0", "messages": {"m": {
                "protocol": "MQTT/5.0", "protocoloptions": {"topic_name": "p/{x}"},
                "envelope": "CloudEvents/1.0",
                "envelopemetadata": {"type": {"value": "t"}}}}},
            "a": {"envelope": "CloudEvents/1.0", "messages": {"m": {
                "protocol": "AMQP/1.0", "envelope": "CloudEvents/1.0",
                "protocoloptions": {"properties": {"subject": "s"}},
                "envelopemetadata": {"type": {"value": "t"}}}}}},
    }
    (tmp_path / "d.xreg.json").write_text(json.dumps(doc))
    cfg = {"definitions": ["d.xreg.json"], "deadletter": "log",
           "routes": [{"from": "plant", "to": ["out"]}, {"from": "queue", "to": ["out"]}],
           "endpoints": {"plant": {"uri": "mqtt://127.0.0.1:1"},
                         "queue": {"uri": "amqp://127.0.0.1:1"},
                         "out": {"uri": "nats://127.0.0.1:1"}}}
    path = tmp_path / "gateway.yaml"
    path.write_text(json.dumps(cfg))
    return str(path)


def _refused(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    assert main(["learn", *argv]) == 2
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    return captured.err


def test_endpoint_needs_count_or_for(config: str, capsys: pytest.CaptureFixture[str]) -> None:
    err = _refused(capsys, "-c", config, "--endpoint", "plant")
    assert "--endpoint needs --count N or --for DURATION" in err


def test_endpoint_needs_a_config(capsys: pytest.CaptureFixture[str]) -> None:
    assert "--endpoint needs -c CONFIG" in _refused(capsys, "--endpoint", "plant",
                                                     "--count", "5")


def test_live_options_without_endpoint(config: str, capsys: pytest.CaptureFixture[str]) -> None:
    err = _refused(capsys, "records.jsonl", "-c", config, "--for", "5s")
    assert "-c, --for read a live endpoint: give --endpoint ID too" in err


def test_file_and_endpoint_together(config: str, capsys: pytest.CaptureFixture[str]) -> None:
    err = _refused(capsys, "r.jsonl", "-c", config, "--endpoint", "plant", "--count", "1")
    assert "either an input file (r.jsonl) or --endpoint, not both" in err


def test_for_takes_a_duration_with_a_unit(config: str,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["learn", "-c", config, "--endpoint", "plant", "--for", "30"])
    assert exited.value.code == 2
    assert "'30' is not a duration: write a number with a unit" in capsys.readouterr().err


def test_unknown_endpoint_lists_the_consumer_endpoints(
        config: str, capsys: pytest.CaptureFixture[str]) -> None:
    err = _refused(capsys, "-c", config, "--endpoint", "nope", "--count", "5")
    assert "no endpoint 'nope' in" in err
    assert "consumer endpoints there: plant, queue" in err


def test_producer_only_endpoint(config: str, capsys: pytest.CaptureFixture[str]) -> None:
    err = _refused(capsys, "-c", config, "--endpoint", "out", "--count", "5")
    assert "endpoint 'out' has usage producer: nothing to read from it" in err


def test_amqp_endpoint_is_refused_with_the_observe_reason(
        config: str, capsys: pytest.CaptureFixture[str]) -> None:
    err = _refused(capsys, "-c", config, "--endpoint", "queue", "--for", "1s")
    assert "endpoint 'queue' cannot be observed: an AMQP 1.0 receiver takes (moves)" in err


def test_invalid_config_is_exit_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("routes: 3\n")
    assert main(["learn", "-c", str(bad), "--endpoint", "x", "--count", "1"]) == 1
    assert "invalid configuration" in capsys.readouterr().err


# -- the reading loop on a fake consumer ----------------------------------------------------


class FakeConsumer:
    """Hands out `messages` in batches of at most 7, then waits forever (a live
    endpoint); records what was acked and whether it was closed."""

    def __init__(self, messages: list[NativeMessage]) -> None:
        self.pending = list(messages)
        self.acked = 0
        self.closed = False

    @property
    def connected(self) -> bool:
        return True

    async def connect(self) -> None:
        return None

    async def read_batch(self, limit: int) -> list[Delivery]:
        if not self.pending:
            await asyncio.Event().wait()
        batch, self.pending = self.pending[:min(limit, 7)], self.pending[min(limit, 7):]
        return [Delivery(m, self._settle) for m in batch]

    async def _settle(self, ok: bool, reason: str, retry: bool) -> None:
        assert ok, "an observer only acks"
        self.acked += 1

    async def aclose(self) -> None:
        self.closed = True


def test_reading_stops_at_count_and_learns_exactly_that() -> None:
    traffic = store_traffic(stores=5, desks=2)  # 30 messages
    consumer = FakeConsumer(traffic)
    live = learn_live(consumer, "plant", Limits(count=20, seconds=None), LearnOptions(),
                      io.StringIO())
    assert (live.read, live.stopped, live.result.messages) == (20, "count reached", 20)
    assert consumer.acked == 20 and consumer.closed


def test_reading_stops_when_the_time_is_up() -> None:
    traffic = store_traffic(stores=5, desks=2)
    consumer = FakeConsumer(traffic)
    err = io.StringIO()
    live = learn_live(consumer, "plant", Limits(count=None, seconds=0.3), LearnOptions(), err)
    assert (live.read, live.stopped, live.result.messages) == (30, "time up", 30)
    assert 0.3 <= live.seconds < 3
    assert consumer.acked == 30 and consumer.closed
    assert "observing endpoint 'plant' for 0.3s" in err.getvalue()
    assert len(live.result.proposals) == 3


def test_unreachable_broker_is_exit_3(config: str, capsys: pytest.CaptureFixture[str]) -> None:
    # The real adapter factory (as `xrgw run` finds it); nothing listens on port 1.
    assert main(["learn", "-c", config, "--endpoint", "plant", "--count", "1"]) == 3
    err = capsys.readouterr().err
    assert "endpoint 'plant': cannot connect" in err and "Traceback" not in err
