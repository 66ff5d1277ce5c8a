"""A route's fused path (`runtime/wirepath.py`) changes nothing but the cost: a batch
converted with it gives the outputs the same records, the members the same outcomes and
conversions, and the route the same counts as the same batch converted without it.

The batch mixes what a route meets: plain records of two definitions (one learned from
the batch before, so written by the fused path; one of a layout not seen yet), bodies
without a content type, records with a trace context, records that already carry a
CloudEvent, unmatched and undecodable ones, and one over an output's size limit; two
outputs, one keyed, both with defaults.
"""

from __future__ import annotations

from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from adapters.http.record import to_record as http_record
from gateway.cloudevents import encode
from gateway.cloudevents.event import CloudEvent
from gateway.convert import Converter
from gateway.definitions import read_document
from gateway.envelope.outgoing import OutputFormat
from gateway.observability.metrics import Metrics
from gateway.ports import Delivery
from gateway.record import NativeMessage
from gateway.runtime.batches import BatchMaker
from gateway.runtime.keys import PartitionKeys
from gateway.runtime.ledger import Batch, WrittenMember
from gateway.runtime.output import Output
from gateway.runtime.stats import RouteStats
from gateway.runtime.wirepath import WirePath


def document(protocol: str, messages: dict[str, tuple[dict[str, Any], dict[str, Any]]]
             ) -> dict[str, Any]:
    """A catalog of `protocol` definitions: per message id, its protocol options and
    envelope metadata."""
    return {"specversion": "1.0", "messagegroups": {"store": {
        "envelope": "CloudEvents/1.0", "messages": {
            mid: {"protocol": protocol, "envelope": "CloudEvents/1.0",
                  "protocoloptions": options, "envelopemetadata": metadata}
            for mid, (options, metadata) in messages.items()}}}}


STORE_SOURCE = {"type": "uritemplate", "value": "/stores/{storeid}"}
DOC = document("KAFKA", {
    "sale": ({"topic": "t", "key": "store/{storeid}/desk/{desk}"},
             {"type": {"value": "com.example.sale"}, "source": STORE_SOURCE,
              "subject": {"type": "uritemplate", "value": "{desk}"}}),
    "refund": ({"topic": "t", "key": "refund/{storeid}"},
               {"type": {"value": "com.example.refund"}, "source": STORE_SOURCE})})
TRACE = "00-" + "a" * 32 + "-" + "b" * 16 + "-01"
RECEIVED = "2026-11-21T09:00:00.25Z"


class Producer:
    connected = True

    def __init__(self, limit: int | None = None) -> None:
        self.max_message_bytes = limit


def kafka(offset: int, key: str, body: bytes | None = b'{"v": 1}',
          headers: list[dict[str, Any]] | None = None) -> NativeMessage:
    fields = {"topic": "t", "partition": 0, "offset": offset, "key": key,
              "headers": headers or []}
    if body is None:
        return NativeMessage("KAFKA", fields, received_at=RECEIVED)
    if body.startswith(b"{"):
        return NativeMessage("KAFKA", fields, data={"v": len(body), "pad": body.decode()},
                             raw=body, received_at=RECEIVED)
    return NativeMessage("KAFKA", fields, payload=body, received_at=RECEIVED)


def batch_of(offset: int) -> list[Delivery]:
    carried = encode(CloudEvent({"id": "x", "source": "/stores/1", "type": "com.example.sale",
                                 "specversion": "1.0"}, {"v": 1}), "KAFKA", "binary")
    records = [
        kafka(offset, "store/1/desk/01"),
        kafka(offset + 1, "store/2/desk/02", b'{"v": 22, "pad": "' + b"x" * 3000 + b'"}'),
        kafka(offset + 2, "refund/3"),
        kafka(offset + 3, "store/4/desk/04", b"\x00\x01"),
        kafka(offset + 4, "store/5/desk/05",
              headers=[{"name": "traceparent", "value": TRACE}]),
        NativeMessage("KAFKA", {**carried.fields, "topic": "t", "partition": 0,
                                "offset": offset + 5, "key": "store/6/desk/06"},
                      data=carried.data, payload=carried.payload, raw=carried.raw,
                      received_at=RECEIVED),
        kafka(offset + 6, "nobody/7"),
        kafka(offset + 7, "store/8/desk/08", None),
        kafka(offset + 8, "store/9/desk/09",
              headers=[{"name": "content-type", "value": "application/json"}]),
    ]
    # As the adapter makes them: the body parsed when first read. JSON declared (an
    # object, a scalar, not JSON at all, with a byte order mark, over the Kafka output's
    # limit), and an object without a content type.
    json_type = [{"name": "content-type", "value": "application/json"}]
    for n, (body, ctype) in enumerate([
            (b'{"v": 10}', "application/json"), (b"21.5", "application/json"),
            (b"{bad", "application/json"), (b'\xef\xbb\xbf{"v": 13}', "application/json"),
            (b'{"pad": "' + b"y" * 3000 + b'"}', "application/json"),
            (b'{"v": 15}', None)], start=10):
        fields = {"topic": "t", "partition": 0, "offset": offset + n,
                  "key": f"store/{n}/desk/{n}", "headers": json_type if ctype else []}
        records.append(NativeMessage.from_wire("KAFKA", fields, body, ctype, RECEIVED,
                                               parse=False))
    out = [Delivery(record, _settle) for record in records]
    out.append(Delivery(NativeMessage("KAFKA", {"topic": "t", "offset": offset + 9}),
                        _settle, undecodable="bad batch"))
    return out


async def _settle(ok: bool, reason: str, retry: bool) -> None:
    return None


def maker(fused: bool, nats: bool = True) -> tuple[BatchMaker, CollectorRegistry]:
    outputs = [Output("nats", "NATS", Producer(), {"subject": "ce"}),  # type: ignore[arg-type]
               Output("kafka", "KAFKA", Producer(2000),  # type: ignore[arg-type]
                      {"topic": "out", "x": 1})][0 if nats else 1:]
    registry = CollectorRegistry()
    stats = RouteStats("r", "src", Metrics(registry), None, 4096, outputs)
    made = BatchMaker(Converter(read_document(DOC).messages()), outputs, "binary",
                      PartitionKeys("source"), stats)
    if not fused:
        made._wire = None
    return made, registry


def state(record: NativeMessage) -> tuple[Any, ...]:
    encoded = record.current_encoded_headers()
    return (record.protocol, list(record.fields.items()), record.data, record.payload,
            record.raw, None if encoded is None else (encoded.text, encoded.utf8,
                                                      encoded.lines))


def outcome(batch: Batch) -> list[Any]:
    out: list[Any] = [[[state(r) for r in sent.records] for sent in batch.sent],
                      [[m.source.fields.get("offset") for m in sent.owners]
                       for sent in batch.sent]]
    for message in batch.messages:
        members = [message.whole] if message.whole is not None else message.members
        for member in members:
            assert member is not None
            conversion = member.conversion
            event = None if conversion.event is None else (
                dict(conversion.event.get_attributes()), conversion.event.get_data())
            out.append((member.definition, member.reason, list(member.failures),
                        conversion.reason, conversion.detail, event,
                        state(member.original())))
    return out


def samples(registry: CollectorRegistry) -> dict[tuple[str, tuple[Any, ...]], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for metric in registry.collect() for s in metric.samples
            if s.name.startswith("xrgw_") and not s.name.endswith("_created")}


@pytest.mark.parametrize("nats", [True, False])
def test_a_batch_converts_the_same_with_the_fused_path_and_without(nats: bool) -> None:
    fused, fused_metrics = maker(True, nats)
    general, general_metrics = maker(False, nats)
    for first in (0, 100):  # the first batch teaches the fused path the layouts
        with_it = fused.convert(batch_of(first), 0.0)
        without = general.convert(batch_of(first), 0.0)
        # Declared JSON bodies in plain UTF-8 went on unparsed, to Kafka and NATS alike
        # (read before `outcome` reads every record).
        unparsed = [m.delivery.message.fields["offset"] for m in with_it.messages
                    if m.delivery.message.unparsed_body() is not None]
        assert unparsed == [first + 10, first + 11, first + 12, first + 14]
        assert outcome(with_it) == outcome(without)
    assert samples(fused_metrics) == samples(general_metrics)
    # The fused path did write the second batch's plain records (and left the rest).
    written = [m.members[0].source.fields["offset"] for m in with_it.messages
               if m.members and isinstance(m.members[0], WrittenMember)]
    assert written == [100, 101, 102, 108, 110, 111, 112, 113, 114, 115]
    assert not any(isinstance(m.members[0], WrittenMember)
                   for m in without.messages if m.members)


def _consumed(offset: int, key: str, headers: list[tuple[str, bytes | None]],
              body: bytes = b'{"v": 1}') -> Delivery:
    """A record as the Kafka adapter makes it of aiokafka's own (body deferred)."""
    from aiokafka.structs import ConsumerRecord  # type: ignore[import-untyped]

    from adapters.kafka.record import to_record as kafka_record
    consumed = ConsumerRecord("t", 0, offset, 1_700_000_000_000, 0, key.encode(), body,
                              None, len(key), len(body), headers)
    return Delivery(kafka_record(consumed, RECEIVED, parse=False), _settle)


def _consumed_batch(offset: int) -> list[Delivery]:
    json_type = ("content-type", b"application/json")
    return [
        _consumed(offset, "store/1/desk/01", [json_type, ("x-message-id", b"m-1")]),
        _consumed(offset + 1, "store/2/desk/02", [("Content-Type", b"application/json"),
                                                  ("x-raw", b"\xff\xfe"), ("x-none", None)]),
        _consumed(offset + 2, "store/3/desk/03", [json_type, ("TraceParent", TRACE.encode())]),
        _consumed(offset + 3, "store/4/desk/04", [json_type, ("traceparent", b"not-one")]),
        _consumed(offset + 4, "store/5/desk/05", [("ce_specversion", b"1.0"), json_type]),
        _consumed(offset + 5, "store/6/desk/06", [json_type], b"plain"),
        _consumed(offset + 6, "store/7/desk/07", []),
    ]


@pytest.mark.parametrize("nats", [True, False])
def test_the_kafka_adapters_records_convert_the_same_and_keep_their_entries_unmade(
        nats: bool) -> None:
    """Records as the Kafka adapter makes them (`PairsRecord`: header entries made
    when `fields` is read): the fused path writes them without making the entries, and
    the batch converts as it does where the entries were read first."""
    fused, fused_metrics = maker(True, nats)
    general, general_metrics = maker(False, nats)
    for first in (0, 100):  # the first batch teaches the fused path the layouts
        deliveries = _consumed_batch(first)
        with_it = fused.convert(deliveries, 0.0)
        written = [m for m in with_it.messages
                   if m.members and isinstance(m.members[0], WrittenMember)]
        unmade = [m.delivery.message.head["offset"] for m in written
                  if vars(m.delivery.message).get("_made") is None]
        read_first = _consumed_batch(first)
        for delivery in read_first:
            assert isinstance(delivery.message.fields, dict)  # entries made up front
        without = general.convert(read_first, 0.0)
        assert outcome(with_it) == outcome(without)
    # Written (not those with a trace context or a CloudEvent marker), none of them with
    # their entries made.
    assert [m.delivery.message.head["offset"] for m in written] == unmade
    assert unmade == [100, 101, 103, 105, 106]
    assert samples(fused_metrics) == samples(general_metrics)


def test_a_route_takes_the_fused_path_only_where_every_output_can() -> None:
    """Binary CloudEvents through a wire form (Kafka, NATS, HTTP) with constant defaults
    on every output; anything else keeps the whole route on the general path."""
    converter = Converter(read_document(DOC).messages())
    keys = PartitionKeys("source")

    def path(*formats: OutputFormat) -> WirePath | None:
        return WirePath.for_route(converter, [(f, None) for f in formats], keys)

    assert path(OutputFormat("NATS", defaults={"subject": "ce"}),
                OutputFormat("KAFKA", defaults={"topic": "t"}),
                OutputFormat("HTTP", defaults={"path": "/p"})) is not None
    plain = OutputFormat("NATS", defaults={"subject": "ce"})
    for other in (OutputFormat("KAFKA", "structured", defaults={"topic": "t"}),
                  OutputFormat("KAFKA", deliver="native", defaults={"topic": "t"}),
                  OutputFormat("KAFKA", defaults={"topic": "t.{storeid}"}),
                  OutputFormat("HTTP", defaults={"headers": []}),
                  OutputFormat("AMQP/1.0", defaults={"to": "/q"}),
                  OutputFormat("MQTT/5.0", defaults={"topic_name": "t"})):
        assert path(plain, other) is None


HTTP_DOC = document("HTTP", {
    "sale": ({"method": "POST", "path": "/store/{storeid}"},
             {"type": {"value": "com.example.sale"}, "source": STORE_SOURCE})})


def _request(n: int, key: str | None = None) -> Delivery:
    headers = [(b"Content-Type", b"application/json"), (b"Host", b"gw")]
    if key is not None:
        headers.append((b"Idempotency-Key", key.encode()))
    return Delivery(http_record("POST", f"/store/{n}", headers, b'{"v": %d}' % n, RECEIVED),
                    _settle)


def _ids(record: NativeMessage) -> list[str]:
    return [value for name, value in record.header_pairs().text if name in ("ce-id", "ce_id")]


def test_records_without_an_identity_are_written_with_the_id_they_keep() -> None:
    """An HTTP request has no identity unless it brings an Idempotency-Key: its event's
    id is random. The fused path writes it all the same, with one id for every output,
    and the event rendered again later (a dead letter, the tap, a reply) has that id;
    a request with a key keeps its name-based id."""
    outputs = [Output("nats", "NATS", Producer(), {"subject": "ce"}),  # type: ignore[arg-type]
               Output("kafka", "KAFKA", Producer(), {"topic": "out"})]  # type: ignore[arg-type]
    stats = RouteStats("r", "src", Metrics(CollectorRegistry()), None, 4096, outputs)
    converter = Converter(read_document(HTTP_DOC).messages())
    made = BatchMaker(converter, outputs, "binary", PartitionKeys("source"), stats)
    made.convert([_request(0)], 0.0)  # learns the layout
    batch = made.convert([_request(1), _request(2), _request(3, key="k-3")], 0.0)
    members = [m.members[0] for m in batch.messages]
    assert all(isinstance(m, WrittenMember) for m in members)
    nats_records, kafka_records = (sent.records for sent in batch.sent)
    sent_ids = []
    for member, nats_record, kafka_record in zip(members, nats_records, kafka_records,
                                                 strict=True):
        [sent_id] = _ids(nats_record)
        assert _ids(kafka_record) == [sent_id]  # one id for every output
        event = member.conversion.event
        assert event is not None and event.get("id") == sent_id
        again = converter.convert(member.source, now=None).event
        assert again is not None
        assert event.with_id("x") == again.with_id("x")  # all else as rendered
        sent_ids.append(sent_id)
    assert len(set(sent_ids)) == 3
    keyed = converter.convert(members[2].source, now=None).event
    assert keyed is not None and keyed.get("id") == sent_ids[2]  # name-based, kept
