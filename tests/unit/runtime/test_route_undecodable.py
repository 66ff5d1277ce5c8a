"""A delivery its adapter could not decode (`Delivery.undecodable`) is dead-lettered as
`undecodable` with the adapter's explanation, never converted -- even when what the
adapter could salvage would match a definition -- and acked, so the source goes on."""

import asyncio
from collections.abc import Iterable
from pathlib import Path

from adapters.memory import MemoryConsumer, MemoryProducer
from gateway.convert import Converter
from gateway.deadletter.format import deadletter_metadata
from gateway.definitions import load_catalog
from gateway.observability.metrics import Metrics
from gateway.policies.retry import RetryPolicy
from gateway.ports import Delivery
from gateway.record import NativeMessage
from gateway.runtime.route import Output, Route

ROOT = Path(__file__).resolve().parents[3]
CATALOG = load_catalog([ROOT / "config/examples/store.xreg.json"])


def sale(desk: int) -> NativeMessage:
    return NativeMessage("MQTT/5.0", {
        "topic_name": f"/store/12/cashierdesk/{desk}", "qos": 1,
        "user_properties": [{"name": "eventType", "value": "com.example.sale"}]},
        data={"desk": desk})


class SalvagingConsumer(MemoryConsumer):
    """Marks the deliveries of `poison` undecodable, as the Kafka adapter marks a record
    batch it could not decode."""

    def __init__(self, messages: Iterable[NativeMessage], poison: NativeMessage) -> None:
        super().__init__(messages, close_when_empty=True, max_in_flight=8)
        self.poison = poison

    async def read_batch(self, limit: int) -> list[Delivery]:
        batch = await super().read_batch(limit)
        for delivery in batch:
            if delivery.message is self.poison:
                delivery.undecodable = "record batch at offsets 3-5 cannot be decoded: CRC"
        return batch


def test_an_undecodable_delivery_is_dead_lettered_with_its_reason_and_acked():
    poison = sale(2)  # what could be had would match: it must not be converted
    consumer = SalvagingConsumer([sale(1), poison, sale(3)], poison)
    out, dlq, metrics = MemoryProducer(), MemoryProducer(), Metrics()
    route = Route(
        "store", "store-mqtt", consumer, Converter(CATALOG.messages()),
        [Output("events-kafka", "KAFKA", out, defaults={"topic": "store-{storeid}"})],
        deadletter=Output("dlq", "KAFKA", dlq, defaults={"topic": "dead"}),
        metrics=metrics, inflight=8,
        retry=RetryPolicy(attempts=3, initial_backoff=0.001, max_backoff=0.002))

    async def run() -> None:
        await route.start()
        await asyncio.wait_for(route.wait_finished(), 5)
        await route.stop(grace=5)

    asyncio.run(run())
    assert len(consumer.acked) == 3 and not consumer.nacked
    assert [r.data for r in out.written] == [{"desk": 1}, {"desk": 3}]
    [dead] = dlq.written
    meta = deadletter_metadata(dead)
    assert meta["xrgw-reason"] == "undecodable"
    assert meta["xrgw-detail"] == "record batch at offsets 3-5 cannot be decoded: CRC"
    assert dead.data == {"desk": 2}  # what the adapter salvaged, as it came
    labels = {"reason": "undecodable"}
    assert metrics.registry.get_sample_value("xrgw_deadletter_total", labels) == 1
    assert not metrics.registry.get_sample_value("xrgw_messages_unmatched_total",
                                                 {"endpoint": "store-mqtt"})
