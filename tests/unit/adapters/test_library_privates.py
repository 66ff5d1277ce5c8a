"""Every private member of a client library that the adapters touch, checked against the
installed version: a library upgrade that renames, removes or reshapes one fails here,
not in production (where an override that nothing calls any more is silently bypassed,
and a renamed attribute is an AttributeError on the data path).

The adapters override or read these (`where` says which part); nats-py, paho-mqtt,
aiokafka, aiohttp and python-qpid-proton promise nothing about them. For each:

- it exists, with the expected kind: a coroutine method, a plain method, a static
  method, an instance attribute (of the expected type where an instance is cheap to
  make), or a module attribute;
- a method keeps the parameters the adapter's override or call relies on;
- an override is still *called* by the library (`.<name>(` appears in the library
  package's source, e.g. nats-py's parser calls `nc._process_pong()`): otherwise the
  override is dead and the behaviour it adds is gone without an error;
- a private method an adapter's subclass defines for itself does not exist in the
  library base (it would override the library's by accident).

An upper bound on these libraries in pyproject.toml may be raised for a release that
passes this test (and the adapters' integration tests, the conformance suite first).
"""

from __future__ import annotations

import asyncio
import enum
import importlib
import inspect
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import paho.mqtt.client as paho
import pytest
from aiohttp import web
from aiohttp.web_protocol import RequestHandler
from aiokafka import AIOKafkaProducer  # type: ignore[import-untyped]
from aiokafka.consumer import fetcher  # type: ignore[import-untyped]
from aiokafka.producer.message_accumulator import BatchBuilder  # type: ignore[import-untyped]
from nats.aio.client import Client as NatsClient
from nats.js.client import JetStreamContext
from paho.mqtt.enums import CallbackAPIVersion

import adapters.registry  # noqa: F401  (loads every adapter, so their subclasses exist)

Kind = Literal["coroutine", "method", "staticmethod", "attribute", "module"]


@dataclass(frozen=True)
class Private:
    """One private member an adapter relies on."""

    owner: Any  # the library class (or module) that has it
    name: str
    kind: Kind
    where: str  # the part of the adapters that touches it
    params: tuple[str, ...] = ()  # method: parameters (after self) the adapter relies on
    overridden: bool = False  # the adapter overrides it: the library must still call it
    type: type | None = None  # attribute: its type on a fresh instance

    def __str__(self) -> str:
        owner = getattr(self.owner, "__qualname__", getattr(self.owner, "__name__", "?"))
        return f"{owner}.{self.name}"


#: aiokafka's own PartitionRecords: `fetcher.PartitionRecords` is the adapter's subclass
#: once the Kafka adapter installed it (another test may have done so first).
PARTITION_RECORDS: type = next(c for c in fetcher.PartitionRecords.__mro__
                               if c.__module__ == fetcher.__name__)

NATS = "the NATS adapter's client (_Client)"
PAHO = "the MQTT adapter's paho client (_BatchingClient)"
KAFKA_FETCH = "the Kafka adapter's fetcher (TolerantPartitionRecords)"
HTTP = "the HTTP ingress's server (GuardedServer, GuardedHandler)"

PRIVATES: tuple[Private, ...] = (
    # nats-py: the core producer's confirmation (PING behind the pending publishes), the
    # TLS refusal, repeated header names, PONG matching, dropping stale publishes.
    Private(NatsClient, "_send_ping", "coroutine", NATS, ("future",), overridden=True),
    Private(NatsClient, "_process_info", "coroutine", NATS,
            ("info", "initial_connection"), overridden=True),
    Private(NatsClient, "_process_pong", "coroutine", NATS, overridden=True),
    Private(NatsClient, "_attempt_reconnect", "coroutine", NATS, overridden=True),
    Private(NatsClient, "_close", "coroutine", NATS, ("status", "do_cbs"), overridden=True),
    Private(NatsClient, "_parse_header_lines", "staticmethod", NATS, ("raw",),
            overridden=True),
    Private(NatsClient, "_flush_pending", "coroutine", NATS, ("force_flush",)),
    Private(NatsClient, "_pending", "attribute", NATS, type=list),
    Private(NatsClient, "_pending_data_size", "attribute", NATS, type=int),
    Private(NatsClient, "_max_pending_size", "attribute", NATS, type=int),
    Private(NatsClient, "_pongs", "attribute", NATS, type=list),
    Private(NatsClient, "_pongs_received", "attribute", NATS, type=int),
    Private(NatsClient, "_pings_outstanding", "attribute", NATS, type=int),
    Private(NatsClient, "_transport", "attribute", NATS),
    Private(NatsClient, "_flush_queue", "attribute", NATS),
    Private(JetStreamContext.PushSubscription, "_sub", "attribute",
            "the NATS adapter (JetStream subscriptions)"),
    # paho-mqtt: the batching link (one recv per readable event, one send per burst)
    # and the hand-decoded common packets.
    Private(paho.Client, "_sock_recv", "method", PAHO, ("bufsize",), overridden=True),
    Private(paho.Client, "_sock_send", "method", PAHO, ("buf",), overridden=True),
    Private(paho.Client, "_packet_write", "method", PAHO, overridden=True),
    Private(paho.Client, "_sock_close", "method", PAHO, overridden=True),
    Private(paho.Client, "_easy_log", "method", PAHO, ("level", "fmt"), overridden=True),
    Private(paho.Client, "_handle_publish", "method", PAHO, overridden=True),
    Private(paho.Client, "_handle_pubackcomp", "method", PAHO, ("cmd",), overridden=True),
    Private(paho.Client, "_handle_on_message", "method", PAHO, ("message",),
            overridden=True),
    Private(paho.Client, "_do_on_publish", "method", PAHO, ("mid", "reason_code",
                                                            "properties")),
    Private(paho.Client, "_call_socket_register_write", "method", PAHO),
    Private(paho.Client, "_send_puback", "method", PAHO, ("mid",)),
    Private(paho.Client, "_in_packet", "attribute", PAHO, type=dict),
    Private(paho.Client, "_out_messages", "attribute", PAHO, type=dict),
    Private(paho.Client, "_out_message_mutex", "attribute", PAHO),
    Private(paho.Client, "_in_callback_mutex", "attribute", PAHO),
    Private(paho.Client, "_manual_ack", "attribute", PAHO, type=bool),
    Private(paho.Client, "_protocol", "attribute", PAHO, type=int),
    Private(paho.Client, "_userdata", "attribute", PAHO),
    Private(paho.Client, "_sock", "attribute", PAHO),
    # aiokafka: the fetcher that hands undecodable batches over instead of stopping the
    # partition, and the producer's size limit and metadata.
    Private(PARTITION_RECORDS, "_unpack_records", "method", KAFKA_FETCH,
            overridden=True),
    Private(PARTITION_RECORDS, "_consume_aborted_up_to", "method", KAFKA_FETCH,
            ("batch_offset",)),
    Private(PARTITION_RECORDS, "_contains_abort_marker", "method", KAFKA_FETCH,
            ("next_batch",)),
    Private(PARTITION_RECORDS, "_consumer_record", "method", KAFKA_FETCH,
            ("tp", "record")),
    Private(PARTITION_RECORDS, "_tp", "attribute", KAFKA_FETCH),
    Private(PARTITION_RECORDS, "_records", "attribute", KAFKA_FETCH),
    Private(PARTITION_RECORDS, "_check_crcs", "attribute", KAFKA_FETCH),
    Private(PARTITION_RECORDS, "_isolation_level", "attribute", KAFKA_FETCH),
    Private(PARTITION_RECORDS, "_aborted_producers", "attribute", KAFKA_FETCH),
    Private(fetcher, "PartitionRecords", "module", KAFKA_FETCH),
    Private(fetcher, "MemoryRecords", "module", KAFKA_FETCH),
    Private(fetcher, "READ_COMMITTED", "module", KAFKA_FETCH),
    # (a test's, not an adapter's: the conformance suite's undecodable Kafka batch)
    Private(BatchBuilder, "_build", "method", "tests/integration/conformance/subjects.py"),
    Private(AIOKafkaProducer, "_max_request_size", "attribute", "the Kafka producer",
            type=int),
    Private(AIOKafkaProducer, "_metadata", "attribute", "the Kafka producer"),
    # aiohttp: the ingress's connection guard (head timeout, connection cap).
    Private(web.Server, "_loop", "attribute", HTTP),
    Private(web.Server, "_kwargs", "attribute", HTTP),
    Private(RequestHandler, "_request_count", "attribute", HTTP),
    Private(RequestHandler, "_request_in_progress", "attribute", HTTP),
    Private(RequestHandler, "_loop", "attribute", HTTP),
    Private(enum.EnumMeta, "_value2member_map_", "attribute", HTTP),
)

#: The library classes the adapters subclass. The adapters' own private names must not be
#: the library's (an accidental override). The subclasses are found, not named: the
#: adapters' modules may move.
BASES: tuple[type, ...] = (NatsClient, paho.Client, PARTITION_RECORDS, web.Server,
                           RequestHandler)


def _adapter_subclasses(base: type) -> list[type]:
    found: list[type] = []
    todo: list[type] = list(base.__subclasses__())
    while todo:
        cls = todo.pop()
        todo += cls.__subclasses__()
        if cls.__module__.split(".")[0] == "adapters":
            found.append(cls)
    return found


def _source(cls: type) -> str:
    """The source of `cls` and of its library bases."""
    parts = []
    for klass in cls.__mro__:
        if klass is object or klass.__module__ == "builtins":
            continue
        try:
            parts.append(inspect.getsource(klass))
        except (OSError, TypeError):
            continue
    return "\n".join(parts)


def _instance(owner: type) -> Any | None:
    """A fresh instance where one is cheap (no connection), for attribute types."""
    if owner is NatsClient:
        return NatsClient()
    if owner is paho.Client:
        return paho.Client(CallbackAPIVersion.VERSION2)
    if owner is AIOKafkaProducer:
        async def make() -> Any:
            return AIOKafkaProducer(bootstrap_servers="127.0.0.1:1")
        return asyncio.run(make())
    return None


def _assigned(owner: type, name: str) -> bool:
    """The class (or a base) sets `self.<name>` or declares it in `__slots__`."""
    slots = {s for klass in owner.__mro__ for s in getattr(klass, "__slots__", ())}
    return name in slots or re.search(
        rf"self\.{re.escape(name)}\s*(:[^=\n]*)?=", _source(owner)) is not None


def test_the_partition_records_checked_are_aiokafkas() -> None:
    assert PARTITION_RECORDS.__module__ == "aiokafka.consumer.fetcher"


@pytest.mark.parametrize("private", PRIVATES, ids=str)
def test_the_private_member_is_still_there_in_the_same_shape(private: Private) -> None:
    owner, name = private.owner, private.name
    if private.kind == "module":
        assert hasattr(owner, name), f"{private} is gone ({private.where})"
        return
    if private.kind == "attribute":
        if owner is enum.EnumMeta:
            assert isinstance(getattr(enum.Enum("E", "A"), name), dict)
            return
        instance = _instance(owner)
        if instance is not None:
            assert hasattr(instance, name), f"{private} is gone ({private.where})"
            if private.type is not None:
                assert isinstance(getattr(instance, name), private.type), private
        else:
            assert _assigned(owner, name), f"{private} is no longer set ({private.where})"
        return
    raw = inspect.getattr_static(owner, name, None)
    assert raw is not None, f"{private} is gone ({private.where})"
    function = getattr(owner, name)
    if private.kind == "staticmethod":
        assert isinstance(raw, staticmethod), f"{private} is no longer a static method"
    else:
        assert inspect.isfunction(raw), f"{private} is no longer a method"
        assert inspect.iscoroutinefunction(function) == (private.kind == "coroutine"), (
            f"{private}: coroutine or not changed ({private.where})")
    params = list(inspect.signature(function).parameters)
    if private.kind != "staticmethod":
        params = params[1:]
    assert params[:len(private.params)] == list(private.params), (
        f"{private} now takes {params} ({private.where})")


def _package_source(owner: type) -> str:
    """The source of every module of the library package that defines `owner`."""
    package = importlib.import_module(owner.__module__.split(".")[0])
    root = Path(inspect.getfile(package)).parent
    return "\n".join(path.read_text(encoding="utf-8") for path in sorted(root.rglob("*.py")))


@pytest.mark.parametrize("private", [p for p in PRIVATES if p.overridden], ids=str)
def test_the_library_still_calls_what_an_adapter_overrides(private: Private) -> None:
    source = _package_source(private.owner)
    assert re.search(rf"\w\.{re.escape(private.name)}\(", source), (
        f"{private} is no longer called by the library: the override in {private.where} "
        "would be dead")


@pytest.mark.parametrize("base", BASES, ids=lambda c: c.__qualname__)
def test_an_adapter_subclass_overrides_only_the_listed_privates(base: type) -> None:
    ours = _adapter_subclasses(base)
    assert ours, f"no adapter subclasses {base.__qualname__} any more: update PRIVATES"
    listed = {p.name for p in PRIVATES if p.overridden and p.owner is base}
    defined: set[str] = set()
    for cls in ours:
        own = {name for name in vars(cls) if name.startswith("_") and not name.startswith("__")}
        accidental = {name for name in own - listed if hasattr(base, name)}
        assert not accidental, f"{cls.__qualname__} overrides {base.__qualname__}'s {accidental}"
        defined |= own
    missing = listed - defined
    assert not missing, f"listed as overridden, defined by no adapter: {missing}"


def test_proton_still_has_the_type_the_amqp_record_names() -> None:
    data = importlib.import_module("proton._data")  # the AMQP record (typing)
    assert hasattr(data, "PythonAMQPData")
