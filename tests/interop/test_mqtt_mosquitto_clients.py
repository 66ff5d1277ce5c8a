"""MQTT with Debian's mosquitto clients: `mosquitto_pub` (MQTT 3.1.1 and 5.0, QoS 0/1/2,
retained, user properties, content type, payload format indicator, a 10,000-character
topic) into the gateway, and `mosquitto_sub` (3.1.1 and 5.0) reading the gateway's MQTT
output. Each message is converted (a CloudEvent on NATS and on the MQTT output) or
dead-lettered with a reason; nothing stalls the route."""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator

import pytest
from interop_gateway import RunningGateway, ce_data, interop_gateway, reason

from harness.brokers import Mosquitto, NatsServer

RUN = uuid.uuid4().hex[:8]
OUT_TOPIC = f"interop-out/{RUN}"
LONG_DEVICE = "d" * (10_000 - len(f"interop/{RUN}/"))  # the whole topic: 10,000 characters


def _client(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"{name} is not installed: run scripts/install-system-deps.sh "
                    "(Debian package mosquitto-clients)")
    return path


def mosquitto_pub(broker: Mosquitto, topic: str, payload: bytes, *args: str) -> None:
    """One message with mosquitto_pub; the payload from stdin (`-s`), byte for byte, or
    `-n` (a zero-length message) when it is empty."""
    done = subprocess.run(
        [_client("mosquitto_pub"), "-h", broker.host, "-p", str(broker.port), "-t", topic,
         "-s" if payload else "-n", "-i", f"interop-pub-{uuid.uuid4().hex[:8]}", *args],
        input=payload, capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr.decode(errors="replace")


class Subscriber:
    """mosquitto_sub on the gateway's output topic, one line per message:
    `qos<TAB>retain<TAB>content type<TAB>user properties<TAB>payload`."""

    def __init__(self, broker: Mosquitto, version: str) -> None:
        self.lines: list[str] = []
        self.proc = subprocess.Popen(
            [_client("mosquitto_sub"), "-h", broker.host, "-p", str(broker.port),
             "-V", version, "-q", "1", "-t", f"{OUT_TOPIC}/#",
             "-i", f"interop-sub-{version}-{RUN}", "-F", "%q\t%r\t%C\t%P\t%p"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:  # bytes: a binary payload is not text
            self.lines.append(line.rstrip(b"\n").decode("utf-8", "replace"))

    def has(self, payload: str) -> bool:
        return any(line.split("\t")[-1] == payload for line in list(self.lines))

    def line_with(self, payload: str, timeout: float = 60) -> list[str]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in list(self.lines):
                fields = line.split("\t")
                if fields[-1] == payload:
                    return fields
            time.sleep(0.02)
        raise AssertionError(f"mosquitto_sub got no message with payload {payload[:80]!r}: "
                             f"{len(self.lines)} lines")

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


RETAINED_DEVICE = "retained-before-start"


@pytest.fixture(scope="module")
def gateway(mosquitto: Mosquitto, nats_server: NatsServer,
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningGateway]:
    # Retained before the gateway subscribes: the broker hands it over at SUBSCRIBE.
    mosquitto_pub(mosquitto, f"interop/{RUN}/{RETAINED_DEVICE}",
                  json.dumps({"case": RETAINED_DEVICE}).encode(), "-r", "-q", "1")
    tmp = tmp_path_factory.mktemp("interop-mqtt")
    try:
        with interop_gateway(
                tmp, nats_server.url,
                routes=[{"from": "interop-mqtt-in",
                         "to": ["interop-nats-out", "interop-mqtt-out"]}],
                endpoints={
                    "interop-mqtt-in": {"uri": mosquitto.url,
                                        "client_id": f"xrgw-interop-{RUN}",
                                        "options": {"topicfilter": f"interop/{RUN}/#"}},
                    "interop-mqtt-out": {"uri": mosquitto.url,
                                         "options": {"topic": OUT_TOPIC}},
                }) as running:
            yield running
    finally:
        mosquitto_pub(mosquitto, f"interop/{RUN}/{RETAINED_DEVICE}", b"", "-r")  # clear it


@pytest.fixture(scope="module")
def subscribers(mosquitto: Mosquitto, gateway: RunningGateway) -> Iterator[dict[str, Subscriber]]:
    subs = {version: Subscriber(mosquitto, version) for version in ("5", "311")}
    try:
        yield subs
    finally:
        for sub in subs.values():
            sub.close()


# (case, mosquitto_pub arguments); the case is also the device (the topic's last level).
CASES = [
    ("v311-qos0", ["-V", "311", "-q", "0"]),
    ("v311-qos1", ["-V", "311", "-q", "1"]),
    ("v311-qos2", ["-V", "311", "-q", "2"]),
    ("v5-qos0", ["-V", "5", "-q", "0"]),
    ("v5-qos1", ["-V", "5", "-q", "1"]),
    ("v5-qos2", ["-V", "5", "-q", "2"]),
    ("v5-retained", ["-V", "5", "-q", "1", "-r"]),
    ("v311-retained", ["-V", "311", "-q", "1", "-r"]),
    ("v5-properties", ["-V", "5", "-q", "1",
                       "-D", "publish", "user-property", "plant", "north",
                       "-D", "publish", "user-property", "plant", "south",
                       "-D", "publish", "content-type", "application/json",
                       "-D", "publish", "payload-format-indicator", "1"]),
]


@pytest.fixture(scope="module")
def ready(mosquitto: Mosquitto, gateway: RunningGateway,
          subscribers: dict[str, Subscriber]) -> dict[str, Subscriber]:
    """Probe messages through the whole path until one reached both mosquitto_subs: the
    gateway and both subscribers are subscribed (a live subscription sees only later
    messages). Waits on the condition, however slow the machine is."""
    probes: list[str] = []
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        probe = json.dumps({"case": f"probe-{len(probes)}"})
        probes.append(probe)
        mosquitto_pub(mosquitto, f"interop/{RUN}/probe-{len(probes)}", probe.encode(),
                      "-q", "1")
        until = time.monotonic() + 1
        while time.monotonic() < until:
            if any(all(sub.has(p) for sub in subscribers.values()) for p in probes):
                return subscribers
            time.sleep(0.02)
    raise AssertionError("the output never reached both mosquitto_subs")


@pytest.mark.parametrize(("case", "args"), CASES, ids=[c for c, _ in CASES])
def test_mosquitto_pub_to_gateway_to_mosquitto_sub(mosquitto: Mosquitto,
                                                    gateway: RunningGateway,
                                                    ready: dict[str, Subscriber],
                                                    case: str, args: list[str]) -> None:
    body = json.dumps({"case": case})
    mosquitto_pub(mosquitto, f"interop/{RUN}/{case}", body.encode(), *args)
    kind, msg = gateway.outcome(case, lambda m: False)
    assert kind == "event"
    assert ce_data(msg) == {"case": case}
    headers = msg.headers or {}
    assert headers["ce-type"] == "com.example.interop.mqtt"
    assert headers["ce-source"] == f"/interop/{RUN}"
    v5 = ready["5"].line_with(body)
    v311 = ready["311"].line_with(body)
    assert v5[1] == v311[1] == "0"  # a live message: not retained on the output
    assert "type:com.example.interop.mqtt" in v5[3] and f"subject:{case}" in v5[3]
    assert v311[3] == ""  # MQTT 3.1.1 has no user properties: the data alone
    if case == "v5-properties":
        assert v5[2] == "application/json"


def test_a_retained_message_from_before_the_start_is_converted(gateway: RunningGateway) -> None:
    kind, msg = gateway.outcome(RETAINED_DEVICE, lambda m: False)
    assert kind == "event" and ce_data(msg) == {"case": RETAINED_DEVICE}


def test_a_10000_character_topic(mosquitto: Mosquitto, gateway: RunningGateway,
                                 ready: dict[str, Subscriber]) -> None:
    topic = f"interop/{RUN}/{LONG_DEVICE}"
    assert len(topic) == 10_000
    body = json.dumps({"case": "long-topic"})
    mosquitto_pub(mosquitto, topic, body.encode(), "-V", "5", "-q", "1")
    kind, msg = gateway.outcome(LONG_DEVICE, lambda m: False)
    assert kind == "event" and ce_data(msg) == {"case": "long-topic"}
    assert f"subject:{LONG_DEVICE}" in ready["5"].line_with(body)[3]


def test_an_unmatched_10000_character_topic_is_dead_lettered(mosquitto: Mosquitto,
                                                              gateway: RunningGateway) -> None:
    levels = "/".join(["x" * 99] * 99)  # 99 levels below the device: no definition
    topic = f"interop/{RUN}/{levels}"[:10_000]
    body = json.dumps({"case": "unmatched-long-topic"}).encode()
    mosquitto_pub(mosquitto, topic, body, "-V", "5", "-q", "1")
    kind, msg = gateway.outcome("never", lambda m: m.data == body)
    assert kind == "dead" and reason(msg) == "unmatched"


@pytest.mark.parametrize(("case", "payload", "args"), [
    ("text-body", b"21.5 degrees", ["-V", "5", "-q", "1",
                                    "-D", "publish", "content-type", "text/plain"]),
    ("binary-body", bytes(range(11, 256)), ["-V", "311", "-q", "1"]),
    ("empty-body", b"", ["-V", "5", "-q", "1"]),
], ids=["text-body", "binary-body", "empty-body"])
def test_bodies_that_are_not_json(mosquitto: Mosquitto, gateway: RunningGateway,
                                  case: str, payload: bytes, args: list[str]) -> None:
    mosquitto_pub(mosquitto, f"interop/{RUN}/{case}", payload, *args)
    kind, msg = gateway.outcome(case, lambda m: False)
    assert kind == "event"
    assert msg.data == payload


def test_a_payload_format_indicator_on_bytes_that_are_not_utf8(
        mosquitto: Mosquitto, gateway: RunningGateway) -> None:
    """A publisher that says "UTF-8" over bytes that are not: converted as the bytes
    they are, or dead-lettered with a reason; never a stall."""
    payload = b"\xff\xfe not utf-8"
    done = subprocess.run(
        [_client("mosquitto_pub"), "-h", mosquitto.host, "-p", str(mosquitto.port),
         "-t", f"interop/{RUN}/bad-utf8", "-s", "-V", "5", "-q", "1",
         "-D", "publish", "payload-format-indicator", "1"],
        input=payload, capture_output=True, timeout=60)
    if done.returncode != 0:  # the broker may refuse it (MQTT 5: 0x99 payload format invalid)
        return
    kind, msg = gateway.outcome("bad-utf8", lambda m: m.data == payload)
    assert (kind == "event" and msg.data == payload) or reason(msg)


def test_the_route_goes_on_after_every_case(mosquitto: Mosquitto, gateway: RunningGateway) -> None:
    body = json.dumps({"case": "after"}).encode()
    mosquitto_pub(mosquitto, f"interop/{RUN}/after", body, "-V", "5", "-q", "1")
    kind, _ = gateway.outcome("after", lambda m: False)
    assert kind == "event"




def test_a_topic_level_with_spaces_and_non_ascii_characters(mosquitto: Mosquitto,
                                                            gateway: RunningGateway,
                                                            ready: dict[str, Subscriber]
                                                            ) -> None:
    device = "Gerät 7 \u2013 Ofen"  # (an en dash)
    body = json.dumps({"case": "unicode"})
    mosquitto_pub(mosquitto, f"interop/{RUN}/{device}", body.encode(), "-V", "5", "-q", "1")
    kind, msg = gateway.outcome(device, lambda m: False)
    assert kind == "event" and ce_data(msg) == {"case": "unicode"}
    assert f"subject:{device}" in ready["5"].line_with(body)[3]


@pytest.mark.parametrize("qos", ["1", "2"])
def test_a_burst_from_one_mosquitto_pub(mosquitto: Mosquitto, gateway: RunningGateway,
                                        qos: str) -> None:
    """500 messages on one connection (`-l`: one per line), as a device that reconnects
    and flushes its backlog: every one becomes an event, none twice."""
    device = f"burst-qos{qos}"
    lines = "".join(json.dumps({"n": n}) + "\n" for n in range(500)).encode()
    done = subprocess.run(
        [_client("mosquitto_pub"), "-h", mosquitto.host, "-p", str(mosquitto.port),
         "-t", f"interop/{RUN}/{device}", "-l", "-V", "5", "-q", qos],
        input=lines, capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr

    def numbers() -> list[int]:
        return [ce_data(m)["n"] for m in list(gateway.seen.events)
                if (m.headers or {}).get("ce-subject") == device]

    gateway.wait_for(lambda: gateway.seen.events[-1] if len(set(numbers())) >= 500 else None,
                     f"500 events of {device}")
    assert sorted(numbers()) == list(range(500))
