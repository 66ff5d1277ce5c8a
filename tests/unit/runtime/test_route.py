"""The route engine with in-memory adapters: at-least-once, dead letters, back-pressure,
ordering, metrics."""

import asyncio
import itertools
import time
from pathlib import Path

import pytest

from adapters.memory import MemoryConsumer, MemoryProducer
from gateway.convert import Converter
from gateway.deadletter.format import deadletter_metadata, original_record
from gateway.definitions import load_catalog
from gateway.observability.metrics import Metrics
from gateway.policies.retry import RetryPolicy
from gateway.ports import Outcome
from gateway.record import NativeMessage
from gateway.runtime.route import Output, Route

ROOT = Path(__file__).resolve().parents[3]
CATALOG = load_catalog([ROOT / "config/examples/store.xreg.json"])
FAST = RetryPolicy(attempts=3, initial_backoff=0.001, max_backoff=0.002)
PATIENT = RetryPolicy(attempts=3, initial_backoff=0.001, max_backoff=5.0)  # room for Retry-After
FAST_CAPPED = RetryPolicy(attempts=3, initial_backoff=0.001, max_backoff=0.05)


def sale(desk: int, store: int = 12) -> NativeMessage:
    return NativeMessage("MQTT/5.0", {
        "topic_name": f"/store/{store}/cashierdesk/{desk}", "qos": 1,
        "user_properties": [{"name": "eventType", "value": "com.example.sale"}]},
        data={"desk": desk})


def unmatched() -> NativeMessage:
    return NativeMessage("MQTT/5.0", {"topic_name": "/nowhere", "qos": 1}, payload=b"\x00raw")


def build(messages, *, out=None, dlq=None, inflight=8, mode="binary", retry=FAST):
    consumer = MemoryConsumer(messages, close_when_empty=True, max_in_flight=inflight)
    out = out or MemoryProducer()
    dlq = dlq or MemoryProducer()
    metrics = Metrics()
    route = Route(
        "store", "store-mqtt", consumer, Converter(CATALOG.messages()),
        [Output("events-kafka", "KAFKA", out, defaults={"topic": "store-{storeid}"})],
        deadletter=Output("dlq", "KAFKA", dlq, defaults={"topic": "dead"}),
        metrics=metrics, inflight=inflight, retry=retry, mode=mode)
    return route, consumer, out, dlq, metrics


async def run_to_end(route, consumer):
    await route.start()
    await asyncio.wait_for(route.wait_finished(), 5)  # EndOfInput once everything is settled
    await route.stop(grace=5)


def sample(metrics, name, **labels):
    value = metrics.registry.get_sample_value(name, labels)
    return 0 if value is None else value


def test_matched_messages_are_published_as_cloudevents_then_acked():
    route, consumer, out, dlq, metrics = build([sale(1), sale(2)])
    asyncio.run(run_to_end(route, consumer))
    assert len(consumer.acked) == 2 and not consumer.nacked
    assert [r.fields["topic"] for r in out.written] == ["store-12", "store-12"]
    headers = dict(out.written[0].pairs("headers"))
    assert headers["ce_type"] == "com.example.sale" and headers["ce_source"] == "12"
    assert headers["ce_subject"] == "1" and out.written[0].data == {"desk": 1}
    assert not dlq.written
    assert sample(metrics, "xrgw_messages_received_total", endpoint="store-mqtt",
                  protocol="MQTT/5.0") == 2
    assert sample(metrics, "xrgw_messages_published_total", endpoint="events-kafka") == 2
    assert sample(metrics, "xrgw_messages_matched_total", endpoint="store-mqtt",
                  message="/messagegroups/store/messages/cashierdesk") == 2


def test_structured_mode():
    route, consumer, out, *_ = build([sale(1)], mode="structured")
    asyncio.run(run_to_end(route, consumer))
    assert out.written[0].data["type"] == "com.example.sale"
    assert out.written[0].data["data"] == {"desk": 1}


def test_unmatched_goes_to_dead_letter_with_reason_and_original_intact():
    route, consumer, out, dlq, metrics = build([unmatched()])
    asyncio.run(run_to_end(route, consumer))
    assert len(consumer.acked) == 1 and not out.written
    [dead] = dlq.written
    meta = deadletter_metadata(dead)
    assert meta["xrgw-reason"] == "unmatched" and meta["xrgw-source-endpoint"] == "store-mqtt"
    assert "topic_name" in meta["xrgw-explain"]
    assert dead.payload == b"\x00raw" and dead.fields["topic"] == "dead"
    assert original_record(dead) == unmatched()
    assert sample(metrics, "xrgw_deadletter_total", reason="unmatched") == 1
    assert sample(metrics, "xrgw_messages_unmatched_total", endpoint="store-mqtt") == 1


def test_output_down_past_retry_budget_is_dead_lettered_as_undeliverable():
    out = MemoryProducer(rule=lambda m: Outcome.failed("broker down", retryable=True))
    route, consumer, _, dlq, metrics = build([sale(1)], out=out)
    asyncio.run(run_to_end(route, consumer))
    assert len(consumer.acked) == 1
    [dead] = dlq.written
    assert deadletter_metadata(dead)["xrgw-reason"] == "undeliverable"
    assert sample(metrics, "xrgw_publish_errors_total", endpoint="events-kafka",
                  reason="retryable") == FAST.attempts


def test_rejected_output_is_not_retried():
    out = MemoryProducer(rule=lambda m: Outcome.failed("malformed", retryable=False))
    route, consumer, _, dlq, metrics = build([sale(1)], out=out)
    asyncio.run(run_to_end(route, consumer))
    assert sample(metrics, "xrgw_publish_errors_total", endpoint="events-kafka",
                  reason="rejected") == 1
    assert len(dlq.written) == 1


def test_transient_failure_then_success_is_delivered_once():
    out = MemoryProducer()
    out.fail_next(Outcome.failed("timeout", retryable=True))
    route, consumer, _, dlq, _ = build([sale(1)], out=out)
    asyncio.run(run_to_end(route, consumer))
    assert len(out.written) == 1 and not dlq.written and len(consumer.acked) == 1


class TimedProducer(MemoryProducer):
    """Notes when each write started (time.monotonic())."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.writes: list[float] = []

    async def _write(self, messages):
        self.writes.append(time.monotonic())
        return await super()._write(messages)


def test_retry_waits_at_least_the_receivers_retry_after():
    out = TimedProducer()
    out.fail_next(Outcome.failed("busy", retryable=True, retry_after=0.3))
    route, consumer, _, dlq, _ = build([sale(1)], out=out, retry=PATIENT)
    asyncio.run(run_to_end(route, consumer))
    assert len(out.writes) == 2 and len(out.written) == 1 and not dlq.written
    assert out.writes[1] - out.writes[0] >= 0.3  # not the policy's 1 ms


def test_retry_after_is_capped_by_the_policys_longest_backoff():
    out = TimedProducer(rule=lambda m: Outcome.failed("busy", retryable=True, retry_after=60))
    route, consumer, _, dlq, metrics = build([sale(1)], out=out, retry=FAST_CAPPED)
    started = time.monotonic()
    asyncio.run(run_to_end(route, consumer))
    assert time.monotonic() - started < 2.0  # two waits of 50 ms, not two minutes
    gaps = [b - a for a, b in zip(out.writes, out.writes[1:], strict=False)]
    assert len(gaps) == 2 and all(gap >= 0.05 for gap in gaps)
    assert deadletter_metadata(dlq.written[0])["xrgw-reason"] == "undeliverable"
    assert sample(metrics, "xrgw_publish_errors_total", endpoint="events-kafka",
                  reason="retryable") == 3


def test_retry_after_of_one_failure_does_not_stretch_the_next_wait():
    out = TimedProducer()
    out.fail_next(Outcome.failed("busy", retryable=True, retry_after=0.3),
                  Outcome.failed("timeout", retryable=True))
    route, consumer, _, dlq, _ = build([sale(1)], out=out, retry=PATIENT)
    asyncio.run(run_to_end(route, consumer))
    first, second = (b - a for a, b in zip(out.writes, out.writes[1:], strict=False))
    assert first >= 0.3 and second < 0.2
    assert len(out.written) == 1 and not dlq.written


def test_dead_letter_down_holds_the_message_then_nacks_on_stop_never_drops():
    dlq = MemoryProducer(rule=lambda m: Outcome.failed("dlq down", retryable=True))

    async def scenario():
        route, consumer, _, _, _ = build([unmatched()], dlq=dlq)
        await route.start()
        await asyncio.sleep(0.2)
        held = (len(consumer.acked), len(consumer.nacked), route.inflight)
        await route.stop(grace=1)
        return consumer, held

    consumer, held = asyncio.run(scenario())
    assert held == (0, 0, 1)  # held in its window slot while the dead letter is down
    assert consumer.nacked and consumer.nacked[0].retry is True  # given back on stop
    assert unmatched() not in consumer.acked


def test_inflight_window_bounds_unsettled_messages_and_order_is_kept_per_topic():
    gate = asyncio.Event()
    peak = 0

    class SlowProducer(MemoryProducer):
        async def _write(self, messages):
            await gate.wait()
            return await super()._write(messages)

    async def scenario():
        nonlocal peak
        out = SlowProducer()
        msgs = []
        for n in range(30):
            m = sale(n % 3, store=1)
            msgs.append(NativeMessage(m.protocol, m.fields, data={"desk": n % 3, "n": n}))
        route, _consumer, _, _, _ = build(msgs, out=out, inflight=4)
        await route.start()
        for _ in range(20):
            await asyncio.sleep(0.005)
            peak = max(peak, route.inflight)
        assert route.inflight <= 4
        gate.set()
        await asyncio.wait_for(route.wait_finished(), 5)
        await route.stop(grace=5)
        return out

    out = asyncio.run(scenario())
    assert peak == 4
    assert len(out.written) == 30
    for desk in range(3):  # one source topic per desk: its order is kept
        seq = [m.data["n"] for m in out.written if m.data["desk"] == desk]
        assert seq == sorted(seq) and len(seq) == 10


def test_traceparent_flows_from_native_header_to_cloudevent_and_out_again():
    trace = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    m = sale(1)
    traced = NativeMessage(m.protocol, {**m.fields, "user_properties": [
        *m.fields["user_properties"], {"name": "traceparent", "value": trace},
        {"name": "tracestate", "value": "vendor=1"}]}, data={"desk": 1})
    broken = NativeMessage(m.protocol, {**m.fields, "user_properties": [
        *m.fields["user_properties"], {"name": "traceparent", "value": "nonsense"}]},
        data={"desk": 2})
    route, consumer, out, *_ = build([traced, broken])
    asyncio.run(run_to_end(route, consumer))
    first, second = sorted(out.written, key=lambda r: r.data["desk"])
    headers = dict(first.pairs("headers"))
    assert headers["ce_traceparent"] == trace and headers["ce_tracestate"] == "vendor=1"
    assert headers["traceparent"] == trace  # the protocol's own header too
    assert "ce_traceparent" not in dict(second.pairs("headers"))  # malformed: not forwarded


def test_http_batch_members_are_delivered_or_dead_lettered_one_by_one():
    from gateway.cloudevents import encode_batch
    from gateway.cloudevents.event import CloudEvent
    from gateway.definitions import read_document

    doc = {"messagegroups": {"g": {"messages": {"m": {
        "envelope": "CloudEvents/1.0",
        "envelopemetadata": {"type": {"value": "com.example.ok"},
                             "source": {"value": "/s/{n}", "type": "uritemplate"}}}}}}}
    catalog = read_document(doc, "batch.json")
    events = [
        CloudEvent.create({"specversion": "1.0", "id": "1", "type": "com.example.ok",
                           "source": "/s/1"}, {"n": 1}),
        CloudEvent.create({"specversion": "1.0", "id": "2", "type": "com.example.other",
                           "source": "/s/2"}, {"n": 2}),
        CloudEvent.create({"specversion": "1.0", "id": "3", "type": "com.example.ok",
                           "source": "/s/3"}, {"n": 3}),
    ]
    batch = encode_batch(events)
    consumer = MemoryConsumer([batch], close_when_empty=True)
    out, dlq, metrics = MemoryProducer(), MemoryProducer(), Metrics()
    route = Route("http", "ingress", consumer, Converter(catalog.messages()),
                  [Output("k", "KAFKA", out, defaults={"topic": "t"})],
                  deadletter=Output("dlq", "KAFKA", dlq, defaults={"topic": "d"}),
                  metrics=metrics, retry=FAST)
    asyncio.run(run_to_end(route, consumer))
    assert len(consumer.acked) == 1  # the request is settled once, after all members
    assert sorted(dict(r.pairs("headers"))["ce_id"] for r in out.written) == ["1", "3"]
    [dead] = dlq.written
    assert deadletter_metadata(dead)["xrgw-reason"] == "unmatched"
    assert dead.data["id"] == "2"  # only the member that failed, as a structured event


def test_a_large_batch_is_converted_in_slices_with_loop_turns_between():
    """A slow batch must not starve the clients' tasks on the loop (Kafka heartbeats):
    conversion gives the loop a turn every CONVERT_SLICE messages."""
    from gateway.runtime.route import CONVERT_SLICE

    ticks = 0
    seen: list[tuple[int, int]] = []  # (records in the call, ticks when called)

    async def ticker():
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0)

    async def scenario():
        route, consumer, out, _, _ = build([sale(n % 5) for n in range(1000)], inflight=4000)
        route.window.max_batch = 1000
        convert_batch = route.converter.convert_batch

        def observed(records, **kwargs):
            seen.append((len(records), ticks))
            return convert_batch(records, **kwargs)

        route.converter.convert_batch = observed
        consumer._max_in_flight = 4000
        task = asyncio.create_task(ticker())
        await run_to_end(route, consumer)
        task.cancel()
        return out

    out = asyncio.run(scenario())
    assert len(out.written) == 1000
    assert [n for n, _ in seen] == [CONVERT_SLICE] * (1000 // CONVERT_SLICE)
    assert all(b > a for (_, a), (_, b) in itertools.pairwise(seen))


def test_stop_gives_back_every_batch_still_waiting_for_its_sink():
    """Batches submitted but unconfirmed when the grace runs out are nacked for
    redelivery, not left unsettled: the one being confirmed and those queued behind."""
    gate = asyncio.Event()  # never set: the sink never confirms

    class StuckProducer(MemoryProducer):
        async def _write(self, messages):
            await gate.wait()
            return await super()._write(messages)

    async def scenario():
        route, consumer, _, _, _ = build([sale(n % 3) for n in range(30)],
                                         out=StuckProducer(), inflight=8)
        await route.start()
        for _ in range(100):
            if route.inflight == 8:
                break
            await asyncio.sleep(0.01)
        await route.stop(grace=0.1)
        return consumer, route

    consumer, route = asyncio.run(scenario())
    assert route.max_batch == 2  # so four batches were waiting
    assert not consumer.acked
    assert len(consumer.nacked) == 8 and all(n.retry for n in consumer.nacked)
    assert route.inflight == 0


class _Deferring(MemoryConsumer):
    deferred = False

    def defer_bodies(self):
        self.deferred = True


@pytest.mark.parametrize(("protocol", "mode", "defaults", "deferred"), [
    ("KAFKA", "binary", {"topic": "t"}, True),  # bodies go on as their bytes
    ("KAFKA", "binary", {"topic": "store-{storeid}"}, False),  # no fused path
    ("KAFKA", "structured", {"topic": "t"}, False),
    ("NATS", "binary", {"subject": "s"}, True),  # a declared JSON body: its declaration
    ("HTTP", "binary", {"path": "/p"}, False),  # plain records: their producer reads them
])
def test_a_route_defers_parsing_only_where_its_outputs_never_read_bodies(
        protocol, mode, defaults, deferred):
    consumer = _Deferring([], close_when_empty=True)
    Route("store", "store-mqtt", consumer, Converter(CATALOG.messages()),
          [Output("out", protocol, MemoryProducer(), defaults=defaults)],
          deadletter=Output("dlq", "KAFKA", MemoryProducer(), defaults={"topic": "dead"}),
          metrics=Metrics(), mode=mode)
    assert consumer.deferred is deferred


class _Answering(MemoryConsumer):
    answers = True

    def answer_nobody(self):
        self.answers = False


@pytest.mark.parametrize(("reply_timeout", "answers"), [
    (None, False),  # nobody is answered: no hooks to look for per message
    (1.0, True),  # request-reply: the senders' answer hooks are what it answers with
])
def test_a_route_that_answers_nobody_tells_its_consumer(reply_timeout, answers):
    consumer = _Answering([], close_when_empty=True)
    Route("store", "store-mqtt", consumer, Converter(CATALOG.messages()),
          [Output("out", "KAFKA", MemoryProducer(), defaults={"topic": "t"})],
          deadletter=Output("dlq", "KAFKA", MemoryProducer(), defaults={"topic": "dead"}),
          metrics=Metrics(), reply_timeout=reply_timeout)
    assert consumer.answers is answers


class _Lingering(MemoryProducer):
    told = False

    def for_waiting_senders(self):
        self.told = True


class _OnTheLine(MemoryConsumer):
    """A consumer whose senders wait on the line (`ports.Admission`)."""

    def hold(self, reason):
        pass


@pytest.mark.parametrize(("consumer_kind", "reply_timeout", "told"), [
    (MemoryConsumer, None, False),  # a broker source: records keep coming, lingering pays
    (_OnTheLine, None, True),  # an HTTP ingress: each sender waits for its message
    (MemoryConsumer, 1.0, True),  # request-reply: each sender waits for its reply
])
def test_a_route_tells_its_outputs_when_its_senders_wait(consumer_kind, reply_timeout, told):
    consumer = consumer_kind([], close_when_empty=True)
    outputs = [_Lingering(), _Lingering()]
    dlq = _Lingering()
    Route("store", "store-mqtt", consumer, Converter(CATALOG.messages()),
          [Output(f"out{i}", "KAFKA", p, defaults={"topic": "t"}) for i, p in enumerate(outputs)],
          deadletter=Output("dlq", "KAFKA", dlq, defaults={"topic": "dead"}),
          metrics=Metrics(), reply_timeout=reply_timeout)
    assert [p.told for p in outputs] == [told, told]
    assert not dlq.told  # nobody waits for a dead letter
