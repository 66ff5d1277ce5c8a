"""The core NATS producer through the harness's fault proxy: a batch reported delivered
reached the server, whatever the link did (blackhole, heal, reset); a link that stops
answering makes the producer not ready until it answers again.

The server keeps what reached it in a stream over the test's subject (core publishes
are stored like any other), so "reached the server" is counted by the server itself.
"""

from __future__ import annotations

import asyncio
import uuid

import nats
from nats.js.api import StreamConfig
from support import asyncio_test

from adapters.nats import NatsProducer
from gateway.ports import EndpointSettings, write
from gateway.protocols import NATS
from gateway.record import NativeMessage
from harness.brokers import NatsServer
from harness.faults.proxy import FaultProxy

#: Seconds the producer waits for a PONG (the test waits on conditions, not on this).
CONFIRM = 1
PATIENCE = 30.0


def _records(subject: str, first: int, count: int) -> list[NativeMessage]:
    return [NativeMessage(NATS, {"subject": subject}, {"seq": n})
            for n in range(first, first + count)]


async def _stored(url: str, stream: str, subject: str) -> set[int]:
    """The sequence numbers the server stored on `subject`."""
    nc = await nats.connect(url)
    try:
        js = nc.jetstream()
        total = (await js.stream_info(stream)).state.messages
        seen: set[int] = set()
        if not total:
            return seen
        done = asyncio.Event()

        async def collect(msg: nats.aio.msg.Msg) -> None:
            seen.add(int(msg.data.decode().split(":")[1].strip(" }")))
            if msg.metadata.sequence.stream >= total:
                done.set()

        sub = await js.subscribe(subject, stream=stream, ordered_consumer=True, cb=collect)
        async with asyncio.timeout(PATIENCE):
            await done.wait()
        await sub.unsubscribe()
        return seen
    finally:
        await nc.close()


async def _until(check: object, what: str) -> None:
    async with asyncio.timeout(PATIENCE):
        while not check():  # type: ignore[operator]
            await asyncio.sleep(0.02)


@asyncio_test
async def test_delivered_means_stored_across_blackhole_heal_and_reset(
        nats_server: NatsServer) -> None:
    """The sequence that lost messages before: a blackhole makes a flush time out
    (nats-py cancelled its future but left it queued), the heal's first PONG hit that
    cancelled future and ended nats-py's read loop, after which `flush()` returned at
    once without a round trip -- so a batch written into a link that was then reset
    counted as delivered. Now each batch needs its own PONG on its own connection."""
    run = uuid.uuid4().hex[:8]
    subject, stream = f"px.{run}", f"PX_{run}"
    nc = await nats.connect(nats_server.url)
    await nc.jetstream().add_stream(StreamConfig(name=stream, subjects=[subject]))
    await nc.close()
    delivered: set[int] = set()
    with FaultProxy(nats_server.port) as proxy:
        producer = NatsProducer(EndpointSettings(
            f"nats://{proxy.address}", options={
                "subject": subject, "publish_timeout": CONFIRM, "connect_timeout": 2,
                "reconnect_wait": 0.2}))
        await producer.connect()

        async def send(first: int, count: int) -> list[bool]:
            outcomes = await write(producer, _records(subject, first, count))
            delivered.update(first + i for i, o in enumerate(outcomes) if o.delivered)
            return [o.delivered for o in outcomes]

        # What the producer said along the way; checked after the loss check, which
        # is the one that matters most (and the one the old code failed first).
        said: dict[str, object] = {}
        try:
            said["before"] = all(await send(0, 10))
            proxy.blackhole()
            said["blackholed batch"] = any(await send(10, 10))  # no PONG: not delivered
            said["ready while blackholed"] = producer.connected
            proxy.heal()
            await _until(lambda: producer.connected, "reconnected after the heal")
            said["after heal"] = all(await send(20, 10))
            proxy.blackhole()
            batch = asyncio.ensure_future(send(30, 10))
            await _until(lambda: proxy.blackholed and proxy.connections, "connection")
            await asyncio.sleep(0.1)  # let the batch reach the held connection
            proxy.reset()  # what the proxy held is gone
            proxy.heal()
            await batch
            await _until(lambda: producer.connected, "reconnected after the reset")
            said["after reset"] = all(await send(40, 10))
        finally:
            await producer.aclose()
    stored = await _stored(nats_server.url, stream, subject)
    lost = sorted(delivered - stored)
    assert not lost, f"reported delivered, never stored: {lost}"
    assert said == {"before": True, "blackholed batch": False,
                    "ready while blackholed": False, "after heal": True,
                    "after reset": True}, said
