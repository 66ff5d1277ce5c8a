"""The settler's rules (gateway/runtime/route.py), each on its own: a source message is
acked once every output confirmed it or the dead letter took it; a confirmation that
raises or miscounts fails its records retryably; `deadletter: log` drops and acks; acks
follow the source order even when a later batch is confirmed first."""

import asyncio

from adapters.memory import MemoryConsumer, MemoryProducer
from gateway.convert import Converter
from gateway.deadletter.format import deadletter_metadata
from gateway.observability.metrics import Metrics
from gateway.policies.retry import RetryPolicy
from gateway.ports import Outcome
from gateway.runtime.route import Output, Route
from tests.unit.runtime.test_route import CATALOG, FAST, run_to_end, sale, sample, unmatched


def _route(messages, outputs, *, dlq=True, inflight=8):
    consumer = MemoryConsumer(messages, close_when_empty=True, max_in_flight=inflight)
    dead = MemoryProducer() if dlq else None
    metrics = Metrics()
    route = Route(
        "store", "store-mqtt", consumer, Converter(CATALOG.messages()),
        [Output(name, "KAFKA", producer, defaults={"topic": "t"}) for name, producer in outputs],
        deadletter=Output("dlq", "KAFKA", dead, defaults={"topic": "dead"}) if dead else None,
        metrics=metrics, inflight=inflight, retry=FAST)
    return route, consumer, dead, metrics


def test_acked_once_when_one_output_delivers_and_the_other_rejects():
    good = MemoryProducer()
    bad = MemoryProducer(rule=lambda m: Outcome.failed("too large", retryable=False))
    route, consumer, dlq, metrics = _route([sale(1)], [("a", good), ("b", bad)])
    asyncio.run(run_to_end(route, consumer))
    assert len(consumer.acked) == 1 and not consumer.nacked
    assert len(good.written) == 1 and not bad.written
    [dead] = dlq.written
    meta = deadletter_metadata(dead)
    assert meta["xrgw-reason"] == "undeliverable"
    assert "b: too large" in meta["xrgw-detail"]
    assert sample(metrics, "xrgw_publish_errors_total", endpoint="b", reason="rejected") == 1


class _Raising(MemoryProducer):
    """The first confirmation raises (a producer bug), later ones work."""

    def __init__(self):
        super().__init__()
        self.raised = 0

    async def _write(self, messages):
        if not self.raised:
            self.raised += 1
            raise RuntimeError("confirmation blew up")
        return await super()._write(messages)


def test_a_confirmation_that_raises_fails_its_records_retryably():
    out = _Raising()
    route, consumer, dlq, _ = _route([sale(1), sale(2)], [("a", out)])
    asyncio.run(run_to_end(route, consumer))
    assert out.raised == 1
    assert [m.data for m in out.written] == [{"desk": 1}, {"desk": 2}]
    assert len(consumer.acked) == 2 and not dlq.written


class _Miscounting(MemoryProducer):
    async def _write(self, messages):
        await super()._write(messages)
        return []  # no outcome for any record


def test_a_miscounted_confirmation_is_a_failure_and_ends_undeliverable():
    route, consumer, dlq, _ = _route([sale(1)], [("a", _Miscounting())])
    asyncio.run(run_to_end(route, consumer))
    assert len(consumer.acked) == 1
    [dead] = dlq.written
    meta = deadletter_metadata(dead)
    assert meta["xrgw-reason"] == "undeliverable"
    assert "reported 0 outcomes for 1 messages" in meta["xrgw-detail"]


def test_without_a_dead_letter_a_failed_message_is_dropped_counted_and_refused():
    """Neither published nor dead-lettered: the source is told so, never again (an HTTP
    sender gets 400 with the reason instead of a 202 that claims it was taken)."""
    route, consumer, _, metrics = _route([unmatched(), sale(1)], [("a", MemoryProducer())],
                                         dlq=False)
    asyncio.run(run_to_end(route, consumer))
    assert len(consumer.acked) == 1
    [refused] = consumer.nacked
    assert not refused.retry and refused.reason == "unmatched"  # the code, nothing quoted
    assert sample(metrics, "xrgw_messages_dropped_total", reason="unmatched") == 1


class _FirstSlow(MemoryProducer):
    """The first batch's confirmation takes longer than the later ones'."""

    def __init__(self):
        super().__init__()
        self.calls = 0

    async def _write(self, messages):
        self.calls += 1
        if self.calls == 1:
            await asyncio.sleep(0.05)
        return await super()._write(messages)


class _OneAtATime(MemoryConsumer):
    async def read_batch(self, limit):
        return await super().read_batch(1)


def test_acks_follow_the_source_order_even_when_a_later_batch_confirms_first():
    messages = [sale(n) for n in range(1, 5)]
    consumer = _OneAtATime(messages, close_when_empty=True, max_in_flight=8)
    out = _FirstSlow()
    route = Route("store", "store-mqtt", consumer, Converter(CATALOG.messages()),
                  [Output("a", "KAFKA", out, defaults={"topic": "t"})],
                  deadletter=None, metrics=Metrics(), inflight=8, retry=FAST)
    asyncio.run(run_to_end(route, consumer))
    assert out.calls >= 2
    assert [m.data for m in consumer.acked] == [{"desk": n} for n in range(1, 5)]


class _LinkBrokeUnderFirst(MemoryProducer):
    """The first batch fails as a whole (its connection broke); later batches work."""

    def __init__(self):
        super().__init__()
        self.batches = 0

    async def _write(self, messages):
        self.batches += 1
        if self.batches == 1:
            return [Outcome.failed("the connection broke before the PONG")] * len(messages)
        return await super()._write(messages)


class _OneBatchAtATime(MemoryConsumer):
    """Hands out one message per read, a moment apart: the pump's next submit comes
    after the previous batch's confirmation is known."""

    async def read_batch(self, limit):
        await asyncio.sleep(0.01)
        return await super().read_batch(1)


def test_newer_batches_wait_for_the_resend_of_a_failed_one():
    """Order per key under sink failures: the pump may not send message 2 while message
    1, which failed retryably, waits for the settler's resend (before: 2, 1, 3, 4)."""
    out = _LinkBrokeUnderFirst()
    consumer = _OneBatchAtATime([sale(1), sale(2), sale(3), sale(4)],
                                close_when_empty=True, max_in_flight=8)
    slow_retry = RetryPolicy(attempts=5, initial_backoff=0.05, max_backoff=0.05)
    route = Route("store", "store-mqtt", consumer, Converter(CATALOG.messages()),
                  [Output("a", "KAFKA", out, defaults={"topic": "t"})],
                  deadletter=Output("dlq", "KAFKA", MemoryProducer(),
                                    defaults={"topic": "dead"}),
                  metrics=Metrics(), inflight=8, retry=slow_retry)
    asyncio.run(run_to_end(route, consumer))
    assert [m.data["desk"] for m in out.written] == [1, 2, 3, 4]
    assert len(consumer.acked) == 4
