"""The MQTT link's own codec paths agree with paho's: received PUBLISH and PUBACK, the
PUBLISH properties it encodes, and the buffered socket I/O (no broker needed)."""

from __future__ import annotations

import gc
import select
import socket
import struct
from typing import Any

import paho.mqtt.client as paho
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from paho.mqtt import _packet
from paho.mqtt.enums import CallbackAPIVersion, MQTTProtocolVersion
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties
from paho.mqtt.reasoncodes import ReasonCode

from adapters.mqtt import paho_loop as wire
from adapters.mqtt import record as codec

SETTINGS = settings(max_examples=300, deadline=None)
_TABLE_KEYS = {"packetType", "types", "names", "properties"}

TEXT = st.text(max_size=20)
PROPERTY_VALUES: dict[str, st.SearchStrategy[Any]] = {
    "PayloadFormatIndicator": st.integers(0, 1),
    "MessageExpiryInterval": st.integers(0, 2**32 - 1),
    "ContentType": TEXT,
    "ResponseTopic": TEXT,
    "CorrelationData": st.binary(max_size=20),
    "UserProperty": st.lists(st.tuples(TEXT, TEXT), min_size=1, max_size=4),
}
PROPERTIES = st.fixed_dictionaries({}, optional=PROPERTY_VALUES)


def _paho_properties(values: dict[str, Any]) -> Properties:
    props = Properties(PacketTypes.PUBLISH)  # type: ignore[no-untyped-call]
    for name, value in values.items():
        setattr(props, name, value)
    return props


def _publish_body(topic: bytes, mid: int, qos: int, packed_props: bytes | None,
                  payload: bytes) -> bytearray:
    body = struct.pack("!H", len(topic)) + topic
    if qos:
        body += struct.pack("!H", mid)
    if packed_props is not None:
        body += packed_props
    return bytearray(body + payload)


def _message_view(message: paho.MQTTMessage) -> tuple[Any, ...]:
    props = message.properties
    present = None if props is None else {
        k: v for k, v in vars(props).items() if k not in _TABLE_KEYS}
    return (message._topic, message.mid, message.qos, message.retain, message.dup,
            bytes(message.payload), present)


def _paho_decode(header: int, body: bytearray, v5: bool) -> paho.MQTTMessage:
    proto = MQTTProtocolVersion.MQTTv5 if v5 else MQTTProtocolVersion.MQTTv311
    result = _packet.decode_publish(header, body, proto)
    message = paho.MQTTMessage(result.mid, result.topic)
    message.dup, message.qos, message.retain = result.dup, result.qos, result.retain
    message.properties, message.payload = result.properties, result.payload
    return message


# ------------------------------------------------------------------ PUBLISH decode


@SETTINGS
@given(st.binary(min_size=1, max_size=30), st.integers(0, 1), st.booleans(), st.booleans(),
       st.integers(1, 65535), PROPERTIES, st.binary(max_size=50), st.booleans())
def test_publish_decode_matches_paho(topic: bytes, qos: int, retain: bool, dup: bool,
                                     mid: int, values: dict[str, Any], payload: bytes,
                                     v5: bool) -> None:
    packed = _paho_properties(values).pack() if v5 else None  # type: ignore[no-untyped-call]
    body = _publish_body(topic, mid, qos, packed, payload)
    header = 0x30 | (dup << 3) | (qos << 1) | retain
    try:
        expected = _message_view(_paho_decode(header, bytearray(body), v5))
    except Exception:  # whatever paho refuses, the fast path must not take
        with pytest.raises((codec.UnusualPacket, UnicodeDecodeError, IndexError)):
            codec.decode_publish(header, body, v5)
        return
    try:
        got = _message_view(codec.decode_publish(header, body, v5))
    except codec.UnusualPacket:
        # Left to paho: only for strings paho refuses to take apart... which it did not.
        raise AssertionError(f"fast path refused a packet paho decodes: {values}") from None
    assert got == expected


@SETTINGS
@given(st.integers(0, 255), st.binary(max_size=40))
def test_publish_decode_never_accepts_what_paho_refuses(header_bits: int, body: bytes) -> None:
    header = 0x30 | (header_bits & 0x0B)  # QoS 0/1 only: QoS 2 is always paho's
    for v5 in (True, False):
        try:
            expected = _message_view(_paho_decode(header, bytearray(body), v5))
        except Exception:
            expected = None
        try:
            got = _message_view(codec.decode_publish(header, bytearray(body), v5))
        except (codec.UnusualPacket, UnicodeDecodeError, IndexError):
            continue  # paho decides
        assert got == expected


@pytest.mark.parametrize("properties", [
    b"\x02\x11\x00",  # Session Expiry Interval: not a PUBLISH property
    b"\x06\x03\x00\x01a\x03\x00\x01b",  # Content Type twice
    b"\x02\x01\x02",  # Payload Format Indicator 2
    b"\x04\x03\x00\x01\x00",  # U+0000 in a string
    b"\x05\x03\x00\x05ab",  # string beyond the properties
])
def test_unusual_properties_are_left_to_paho(properties: bytes) -> None:
    body = _publish_body(b"t", 1, 1, properties, b"x")
    with pytest.raises(codec.UnusualPacket):
        codec.decode_publish(0x32, body, True)


# ------------------------------------------------------------------ PUBLISH properties


@SETTINGS
@given(PROPERTIES)
def test_publish_properties_pack_like_paho(values: dict[str, Any]) -> None:
    values = {k: v for k, v in values.items()
              if not any("\x00" in t for t in _texts(v))}  # refused by design, see below
    ours = codec.publish_properties(**values)
    assert ours.pack() == _paho_properties(values).pack()  # type: ignore[no-untyped-call]
    for name, value in values.items():
        assert getattr(ours, name) == (value if name != "UserProperty" else list(value))


def _texts(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [t for pair in value for t in pair]
    return []


@pytest.mark.parametrize("values", [
    {"PayloadFormatIndicator": 2},
    {"MessageExpiryInterval": -1},
    {"ContentType": "a\x00b"},
    {"ContentType": "x" * 70000},
    {"ResponseTopic": "\ud800"},
    {"UserProperty": [("a", "b", "c")]},
    {"UserProperty": ["ab"]},
    {"UserProperty": 3},
    {"SubscriptionIdentifier": 5},
    {"ServerKeepAlive": 3},
])
def test_publish_properties_refuse_what_mqtt_cannot_carry(values: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        codec.publish_properties(**values)


# ------------------------------------------------------------------ the client's socket I/O


class _Link:
    """A _BatchingClient (or plain paho) reading from / writing to one end of a socketpair,
    as if connected, recording the messages and publish confirmations it reports."""

    def __init__(self, client: paho.Client) -> None:
        self.client = client
        self.ours, self.peer = socket.socketpair()
        self.ours.setblocking(False)
        client.max_inflight_messages = 0  # as PahoLink does (it keeps its own window)
        # As PahoLink: paho queues writes for the loop instead of writing each at once.
        client.on_socket_register_write = lambda c, u, s: None
        client._sock = self.ours
        client._state = paho._ConnectionState.MQTT_CS_CONNECTED
        self.messages: list[paho.MQTTMessage] = []
        self.confirmed: list[tuple[int, bool]] = []
        client.on_message = lambda c, u, m: self.messages.append(m)
        client.on_publish = lambda c, u, mid, rc, p: self.confirmed.append((mid, rc.is_failure))

    def read_all(self) -> None:
        client = self.client
        for _ in range(10_000):
            if isinstance(client, wire._BatchingClient):
                client.fill()
                client.loop_read()
                while client.buffered:
                    client.loop_read()
                if not client.buffered:
                    return
            elif client.loop_read() == paho.MQTT_ERR_SUCCESS and not self._readable():
                return

    def _readable(self) -> bool:
        try:
            return bool(self.ours.recv(1, socket.MSG_PEEK))
        except BlockingIOError:
            return False


def _new_client(cls: type[paho.Client], v5: bool) -> paho.Client:
    proto = MQTTProtocolVersion.MQTTv5 if v5 else MQTTProtocolVersion.MQTTv311
    return cls(callback_api_version=CallbackAPIVersion.VERSION2, protocol=proto,
               manual_ack=True)


def _publish_packet(n: int, v5: bool) -> bytes:
    props = b"\x00"
    if n % 3 == 0:
        props = _paho_properties({"ContentType": "application/json", "UserProperty": [
            ("k", str(n))]}).pack()  # type: ignore[no-untyped-call]
    body = _publish_body(f"t/{n}".encode(), n + 1, n % 2, props if v5 else None,
                         b'{"n": %d}' % n)
    header = bytes((0x30 | ((n % 2) << 1),))
    length = len(body)
    varint = bytearray()
    while True:
        length, digit = divmod(length, 128)
        varint.append(digit | (0x80 if length else 0))
        if not length:
            break
    return header + bytes(varint) + bytes(body)


@pytest.mark.parametrize("v5", [True, False])
def test_a_burst_is_parsed_like_paho_from_far_fewer_reads(v5: bool) -> None:
    burst = b"".join(_publish_packet(n, v5) for n in range(300))
    views = []
    for cls in (wire._BatchingClient, paho.Client):
        link = _Link(_new_client(cls, v5))
        link.peer.sendall(burst)
        link.read_all()
        views.append([_message_view(m) for m in link.messages])
    ours, theirs = views
    assert len(ours) == 300 and ours == theirs


def test_pubacks_confirm_like_paho_and_failures_stay_failures() -> None:
    for cls in (wire._BatchingClient, paho.Client):
        link = _Link(_new_client(cls, True))
        client = link.client
        infos = [client.publish("t", b"x", qos=1) for _ in range(5)]
        client.loop_write()
        mids = [info.mid for info in infos]
        reasons: list[ReasonCode] = []
        client.on_publish = lambda c, u, mid, rc, p, into=reasons: into.append(rc)
        link.peer.sendall(
            b"\x40\x02" + struct.pack("!H", mids[0])  # plain success
            + b"\x40\x04" + struct.pack("!HBB", mids[1], 0, 0)  # success, spelled out
            + b"\x40\x03" + struct.pack("!HB", mids[2], 0x10)  # no matching subscribers
            + b"\x40\x03" + struct.pack("!HB", mids[3], 0x87)  # not authorized
            + b"\x40\x0a" + struct.pack("!HBB", mids[4], 0x87, 6)  # ... with a reason string
            + b"\x1f\x00\x03abc")
        link.read_all()
        assert [(r.value, r.is_failure) for r in reasons] == [
            (0, False), (0, False), (0x10, False), (0x87, True), (0x87, True)], cls


def test_writes_of_a_burst_leave_in_one_send() -> None:
    link = _Link(_new_client(wire._BatchingClient, False))
    sends: list[int] = []
    real = link.ours

    class Counting:
        def send(self, data: bytes) -> int:
            sends.append(len(data))
            return real.send(data)

        def __getattr__(self, name: str) -> Any:
            return getattr(real, name)

    link.client._sock = Counting()  # type: ignore[assignment]
    for mid in range(1, 101):
        link.client.ack(mid, 1)
    link.client.loop_write()
    assert sends == [400]  # 100 PUBACKs of 4 bytes
    assert link.peer.recv(1000) == b"".join(
        b"\x40\x02" + struct.pack("!H", mid) for mid in range(1, 101))


@pytest.mark.skipif(not hasattr(socket, "TCP_QUICKACK"), reason="Linux socket option")
def test_what_was_read_is_acknowledged_at_once_not_delayed() -> None:
    # A broker with Nagle's algorithm on holds its next PUBLISH until this one is ACKed;
    # a delayed ACK made every message wait for the previous one's sink round trip.
    server = socket.create_server(("127.0.0.1", 0))
    with server, socket.create_connection(server.getsockname()) as ours:
        peer, _ = server.accept()
        with peer:
            ours.setblocking(False)
            ours.setsockopt(socket.IPPROTO_TCP, socket.TCP_QUICKACK, 0)  # delayed-ACK mode
            client = _new_client(wire._BatchingClient, True)
            client._sock = ours
            peer.sendall(_publish_packet(1, True))
            select.select([ours], [], [], 5)
            client.fill()
            assert client.buffered > 0
            assert ours.getsockopt(socket.IPPROTO_TCP, socket.TCP_QUICKACK) == 1


def test_received_messages_leave_no_reference_cycles() -> None:
    # paho's own dispatch made a self-referencing closure per message (its topic matcher):
    # garbage only the cyclic collector frees. The link hands messages straight over.
    link = _Link(_new_client(wire._BatchingClient, False))
    link.peer.sendall(b"".join(_publish_packet(n, False) for n in range(200)))
    gc.collect()
    gc.disable()
    try:
        link.read_all()
        assert len(link.messages) == 200
        assert gc.collect() == 0
    finally:
        gc.enable()


@pytest.mark.parametrize("suppress", [False, True])
def test_an_error_in_on_message_is_raised_unless_suppressed_as_paho_does(
        suppress: bool) -> None:
    for cls in (wire._BatchingClient, paho.Client):
        link = _Link(_new_client(cls, False))
        link.client.suppress_exceptions = suppress

        def fail(c: Any, u: Any, m: Any) -> None:
            raise RuntimeError("callback failed")

        link.client.on_message = fail
        link.peer.sendall(_publish_packet(1, False))
        if suppress:
            link.read_all()
        else:
            with pytest.raises(RuntimeError, match="callback failed"):
                link.read_all()
