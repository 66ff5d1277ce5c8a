"""The Sender's resend-first bookkeeping for producers whose confirmation is a future
(the batching producers: NATS, MQTT, AMQP): what failed retryably is owed as soon as the
future resolves, and nothing else is. Without a broker: the producer hands out futures
the test resolves."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any, cast

from gateway.observability.metrics import Metrics
from gateway.policies.retry import RetryPolicy
from gateway.ports import Outcome, Producer
from gateway.record import NativeMessage
from gateway.runtime.output import Output
from gateway.runtime.resend import HELD
from gateway.runtime.sender import Sender
from gateway.runtime.stalls import Stalls
from gateway.runtime.stats import RouteStats


class _FutureProducer:
    """submit() returns a future the test resolves (or cancels) itself."""

    def __init__(self) -> None:
        self.submitted: list[asyncio.Future[list[Outcome]]] = []

    async def submit(self, records: list[NativeMessage]) -> asyncio.Future[list[Outcome]]:
        future: asyncio.Future[list[Outcome]] = asyncio.get_running_loop().create_future()
        self.submitted.append(future)
        return future


def _sender() -> tuple[Sender, Output, _FutureProducer]:
    producer = _FutureProducer()
    output = Output("out", "NATS", cast(Producer, producer))
    metrics = Metrics()
    stats = RouteStats("r", "src", metrics, None, 8, [output])
    sender = Sender([output], None, RetryPolicy(), None, stats, Stalls("r", metrics, 60.0))
    return sender, output, producer


def _records(count: int, prefix: str = "s") -> list[NativeMessage]:
    return [NativeMessage("NATS", {"subject": f"{prefix}.{n}"}, payload=b"x")
            for n in range(count)]


async def _next_submit_held(sender: Sender, output: Output) -> bool:
    confirmation: Any = await sender.submit(output, _records(1, "new"))
    if isinstance(confirmation, asyncio.Future):
        return False  # it went to the producer
    return bool(await confirmation == [HELD])


def test_a_delivered_future_batch_owes_nothing() -> None:
    async def main() -> None:
        sender, output, producer = _sender()
        records = _records(2)
        confirmation: Any = await sender.submit(output, records)
        producer.submitted[0].set_result([Outcome.ok(), Outcome.ok()])
        assert await confirmation == [Outcome.ok(), Outcome.ok()]
        await asyncio.sleep(0)
        assert not await _next_submit_held(sender, output)  # new records go out
    asyncio.run(main())


def test_a_future_batch_that_failed_or_gave_no_outcomes_is_owed() -> None:
    for settle in ("failed", "short", "cancelled"):
        async def main(settle: str = settle) -> None:
            sender, output, producer = _sender()
            records = _records(2)
            confirmation: Any = await sender.submit(output, records)
            future = producer.submitted[0]
            if settle == "failed":
                future.set_result([Outcome.ok(), Outcome.failed("link lost")])
            elif settle == "short":
                future.set_result([Outcome.ok()])  # a producer that lost count
            else:
                future.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await confirmation
            await asyncio.sleep(0)
            assert await _next_submit_held(sender, output), settle  # resends go first
        asyncio.run(main())
