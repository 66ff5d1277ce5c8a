"""Benchmark: the gateway's per-message stages in process, against a hand-fused floor.

Not a test: run by hand (from the repository root), e.g.

    python -m bench.bench_stages                       # kafka-nats, nats-kafka, kafka-kafka
    python -m bench.bench_stages --routes http-kafka   # an HTTP request as the ingress reads it
    python -m bench.bench_stages --routes kafka-nats --batch 250 --rounds 40

For one route of the passthrough harness's store example (one definition: context `storeid` and
`cdid` from the source address, binary CloudEvents out), a batch of records as the
source adapter makes them goes through the stages the route runs between the client
library and the socket, each timed on its own (least of `--rounds`, µs per message):

* `to_record`: the client's records (aiokafka's / nats-py's shape) -> native records;
* `convert_batch`: match and render an event (`Converter.convert_batch`, the general
  path);
* `BatchMaker.convert`: match and write the output's records (binding, defaults,
  partition key) and the batch's bookkeeping; the route's fused path writes them with no
  event made (`runtime/wirepath.py`), so it does not run `convert_batch`;
* `write`: what the producer turns each output record into (Kafka `to_send`; NATS
  `written_frame`, or `to_publish` + `publish_frame` for a record it leaves to them).

`--floor` (kafka-nats) also times one hand-written loop doing the same work for this one
definition -- record fields, the JSON body rule, the key match, id, time, source and
subject, the HPUB frame -- with nothing generic in it: what CPython needs at least for
the work itself, so that `total - floor` is what the gateway's structure costs (dispatch,
intermediate records and events, per-message objects).

Time stamps advance every 20 records (as at ~20,000 msg/s), so the per-millisecond caches
hit as they do on a live route. Figures move with the host's load: compare runs made
back to back.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import re
import time
from collections.abc import Callable
from typing import Any

import orjson
from aiokafka.structs import ConsumerRecord
from prometheus_client import CollectorRegistry

from gateway.cloudevents.timestamps import format_rfc3339
from gateway.convert import Converter
from gateway.definitions import read_document
from gateway.envelope.ids import name_uuid
from gateway.heap import settle_heap
from gateway.observability.metrics import Metrics
from gateway.ports import Delivery
from gateway.record import NativeMessage
from gateway.runtime.batches import BatchMaker
from gateway.runtime.keys import PartitionKeys
from gateway.runtime.output import Output
from gateway.runtime.stats import RouteStats

PROTOCOL = {"kafka": "KAFKA", "nats": "NATS", "http": "HTTP"}
MATCH = {"kafka": {"topic": "t", "key": "store/{storeid}/cashierdesk/{cdid}"},
         "nats": {"subject": "store.{storeid}.cashierdesk.{cdid}"},
         "http": {"method": "POST", "path": "/store/{storeid}/cashierdesk/{cdid}"}}
DEFAULTS = {"kafka": {"topic": "out"}, "nats": {"subject": "ce"}}
BODY = json.dumps({"storeid": "1000", "cdid": "01", "total": 12.5, "currency": "EUR",
                   "items": 3, "pad": "x" * 100}).encode()


# The passthrough harness's records carry these two headers (its `common.headers_for`);
# `--bare` drops them (no content type: the body's JSON-ness decides, so it is parsed).
HEADERS = {"bare": False}


def _headers(n: int) -> list[tuple[str, bytes]]:
    if HEADERS["bare"]:
        return []
    return [("content-type", b"application/json"), ("x-message-id", f"run-{n}".encode())]


class NatsMsg:
    """The attributes of nats-py's Msg the adapter reads (a JetStream delivery)."""

    def __init__(self, n: int) -> None:
        self.subject = f"store.{1000 + n % 97}.cashierdesk.{n % 12:02d}"
        self.data = BODY
        self.headers: dict[str, str] | None = {
            name: value.decode() for name, value in _headers(n)} or None
        self.reply = f"$JS.ACK.s.d.1.{n}.{n}.1700000000000000000.0"


def _definition(source: str) -> Converter:
    doc = {"specversion": "1.0", "messagegroups": {"store": {
        "envelope": "CloudEvents/1.0", "messages": {"sale": {
            "protocol": PROTOCOL[source], "protocoloptions": MATCH[source],
            "envelope": "CloudEvents/1.0",
            "envelopemetadata": {
                "type": {"value": "com.example.store.sale"},
                "source": {"type": "uritemplate", "value": "/stores/{storeid}"},
                "subject": {"type": "uritemplate", "value": "{cdid}"}}}}}}}
    return Converter(read_document(doc).messages())


def _kafka_records(size: int) -> list[ConsumerRecord[bytes, bytes]]:
    """aiokafka's own records, as its fetcher hands them over."""
    out = []
    for n in range(size):
        key = f"store/{1000 + n % 97}/cashierdesk/{n % 12:02d}".encode()
        out.append(ConsumerRecord("t", 0, n, 1_700_000_000_000 + n // 20, 0, key, BODY, None,
                                  len(key), len(BODY), _headers(n)))
    return out


def _http_requests(size: int) -> list[tuple[str, list[tuple[bytes, bytes]]]]:
    """(path, raw headers) of the harness's load generator's requests, as aiohttp hands
    them to the ingress."""
    out = []
    for n in range(size):
        headers = [(b"Host", b"127.0.0.1:18080"), *((name.title().encode(), value)
                                                   for name, value in _headers(n)),
                   (b"Content-Length", str(len(BODY)).encode())]
        out.append((f"/store/{1000 + n % 97}/cashierdesk/{n % 12:02d}", headers))
    return out


def _reader(source: str, size: int, parse: bool = True) -> Callable[[], list[NativeMessage]]:
    """`parse=False`: bodies parsed when first read (`ports.defer_bodies`)."""
    if source == "http":
        from adapters.http.record import request_record

        requests = _http_requests(size)
        return lambda: [request_record("POST", path, "", headers, BODY, None, parse=parse)
                        for path, headers in requests]
    if source == "kafka":
        from adapters.kafka.record import to_record as kafka_record

        raw = _kafka_records(size)
        return lambda: [kafka_record(r, None, parse) for r in raw]
    from adapters.nats.record import to_record as nats_record

    msgs = [NatsMsg(n) for n in range(size)]
    return lambda: [nats_record(m, True, None, None, parse)  # type: ignore[arg-type]
                    for m in msgs]


def _writer(sink: str) -> Callable[[list[NativeMessage]], None]:
    if sink == "kafka":
        from adapters.kafka.record import to_send

        def write_kafka(records: list[NativeMessage]) -> None:
            for record in records:
                to_send(record)
        return write_kafka
    from adapters.nats.record import publish_frame, to_publish, written_frame

    def write_nats(records: list[NativeMessage]) -> None:
        for record in records:  # as `publish_all` frames each record
            if written_frame(record, "") is None:
                publish_frame(to_publish(record), "")
    return write_nats


class _Producer:
    max_message_bytes = None
    connected = True


def route_maker(converter: Converter, sink: str) -> BatchMaker:
    """The route's batch maker: binary CloudEvents to one `sink` output."""
    output = Output("dst", PROTOCOL[sink], _Producer(), DEFAULTS[sink])  # type: ignore[arg-type]
    stats = RouteStats("bench", "src", Metrics(CollectorRegistry()), None, 4096, [output])
    return BatchMaker(converter, [output], "binary", PartitionKeys("source"), stats)


def _least(fn: Callable[[], object], rounds: int, size: int) -> float:
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best / size * 1e6


def stages(route: str, size: int, rounds: int) -> dict[str, float]:
    source, sink = route.split("-")
    converter = _definition(source)
    maker = route_maker(converter, sink)
    read, write = _reader(source, size), _writer(sink)
    records = read()
    deliveries = [Delivery(r, _settle) for r in records]
    made = maker.convert(deliveries, 0.0).sent[0].records
    if len(made) != size:
        raise SystemExit(f"{route}: {len(made)} of {size} records rendered")
    out = {"to_record": _least(read, rounds, size),
           "convert_batch": _least(lambda: converter.convert_batch(records), rounds, size),
           "BatchMaker.convert": _least(lambda: maker.convert(deliveries, 0.0), rounds, size),
           "write": _least(lambda: write(made), rounds, size)}
    out["total"] = out["to_record"] + out["BatchMaker.convert"] + out["write"]
    return out


def fresh(route: str, size: int, rounds: int) -> dict[str, float]:
    """`to_record` and `BatchMaker.convert` of records never converted before, in
    batches of `size` as a route reads them (the client's records made first, untimed),
    with the last 8 batches kept alive as a route's window keeps them: what the daemon
    pays, where the records are no longer in the processor's caches when they are
    converted (the timings above reuse one hot batch). Least of `rounds`."""
    source, sink = route.split("-")
    converter = _definition(source)
    maker = route_maker(converter, sink)
    kept: list[object] = []
    best = {"to_record (fresh)": float("inf"), "BatchMaker.convert (fresh)": float("inf")}
    for _ in range(rounds):
        read = _reader(source, size)  # new client records
        start = time.perf_counter()
        records = read()
        made = time.perf_counter()
        batch = maker.convert([Delivery(r, _settle) for r in records], 0.0)
        done = time.perf_counter()
        kept.append(batch)
        del kept[:-8]
        best["to_record (fresh)"] = min(best["to_record (fresh)"], made - start)
        best["BatchMaker.convert (fresh)"] = min(best["BatchMaker.convert (fresh)"],
                                                 done - made)
    return {name: value / size * 1e6 for name, value in best.items()}


async def _settle(ok: bool, reason: str, retry: bool) -> None:
    return None


_KEY = re.compile(r"store/([^/]+)/cashierdesk/([^/]+)")
_CONSTANT = b"NATS/1.0\r\nce-specversion: 1.0\r\nce-type: com.example.store.sale\r\n"


class _Slot:
    __slots__ = ("done", "offset")

    def __init__(self, offset: int) -> None:
        self.offset = offset
        self.done = False


def floor(size: int, rounds: int) -> float:
    """The hand-fused kafka -> nats loop (see the module docstring), µs per message."""
    raw = _kafka_records(size)
    last: list[Any] = [None, ""]

    def fused() -> list[bytes]:
        frames = []
        slots = []
        for m in raw:
            assert m.key is not None and m.value is not None
            key = m.key.decode()
            orjson.loads(m.value)  # the body rule: is it JSON?
            fields = {"topic": m.topic, "partition": m.partition, "offset": m.offset,
                      "timestamp": m.timestamp, "key": key}
            found = _KEY.fullmatch(key)
            if found is None or not fields:
                continue
            store, desk = found.groups()
            ident = name_uuid(f"{m.topic}/{m.partition}/{m.offset}")
            if last[0] != m.timestamp:
                last[0] = m.timestamp
                last[1] = format_rfc3339(dt.datetime.fromtimestamp(m.timestamp / 1000, dt.UTC))
            block = _CONSTANT + (
                f"ce-source: /stores/{store}\r\nce-subject: {desk}\r\nce-id: {ident}\r\n"
                f"ce-time: {last[1]}\r\nce-datacontenttype: application/json\r\n\r\n").encode()
            frames.append(b"HPUB ce  %d %d\r\n%s%s\r\n" % (
                len(block), len(block) + len(m.value), block, m.value))
            slots.append(_Slot(m.offset))
        return frames

    return _least(fused, rounds, size)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--routes", default="kafka-nats,nats-kafka,kafka-kafka")
    p.add_argument("--batch", type=int, default=250, help="records per batch")
    p.add_argument("--rounds", type=int, default=40, help="timings per stage; least kept")
    p.add_argument("--floor", action="store_true", help="also the hand-fused kafka-nats loop")
    p.add_argument("--fresh", action="store_true",
                   help="also to_record and convert of new records each round, batches of 1000")
    p.add_argument("--bare", action="store_true",
                   help="records without headers (no content type: bodies are parsed)")
    args = p.parse_args()
    HEADERS["bare"] = args.bare
    settle_heap()  # as the daemon does (gateway/heap.py)
    for route in args.routes.split(","):
        if args.fresh:
            got = fresh(route, 1000, args.rounds)
            print(f"{route:12s} " + "  ".join(f"{k} {v:.2f}" for k, v in got.items())
                  + " µs/msg")
        got = stages(route, args.batch, args.rounds)
        print(f"{route:12s} " + "  ".join(f"{k} {v:.2f}" for k, v in got.items()) + " µs/msg")
        if args.floor and route == "kafka-nats":
            print(f"{'':12s} floor (hand-fused kafka-nats) {floor(args.batch, args.rounds):.2f}"
                  " µs/msg")


if __name__ == "__main__":
    main()
