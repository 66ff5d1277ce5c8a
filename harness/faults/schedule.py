"""A network fault played through a `FaultProxy` while the gateway works: the link is
blackholed until the gateway says it is not ready (and a while longer), then every
connection is reset at a fixed period, then the link heals and the gateway must say it is
ready again. What happened (how long each step took, what /readyz said, how many
connections were reset) comes back as a `FaultLog` for the scenario's row."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from harness.faults.gateway_process import GatewayProcess
from harness.faults.proxy import FaultProxy


@dataclass(frozen=True)
class FaultPlan:
    """`blackhole` seconds at least (and until /readyz is not 200, when `not_ready`
    asks for it), then `resets` resets `every` seconds apart, then heal."""

    blackhole: float = 6.0
    resets: int = 4
    every: float = 1.5
    #: The gateway must report not ready during the blackhole (within `patience` s).
    not_ready: bool = True
    #: Seconds /readyz may take to turn (not ready in the blackhole, ready after heal).
    patience: float = 60.0
    #: Seconds of latency each way from the first reset on (slows the link so that the
    #: resets hit a stream still in progress).
    latency: float = 0.0


@dataclass
class FaultLog:
    """What the fault did and what the gateway said meanwhile."""

    #: Seconds from the blackhole's start to the first /readyz not 200 (None: never).
    not_ready_after: float | None = None
    #: Seconds the blackhole lasted.
    blackhole_seconds: float = 0.0
    #: /readyz statuses seen during the blackhole and the resets (each distinct one).
    statuses: set[int] = field(default_factory=set)
    #: Connections reset, over all resets.
    connections_reset: int = 0
    resets: int = 0
    #: Seconds from the heal to /readyz 200.
    ready_after_heal: float | None = None

    def readyz(self) -> str:
        """The row's `readyz` column."""
        if self.not_ready_after is None:
            return "200 throughout"
        return f"not ready after {self.not_ready_after:.1f}s; 200 after heal"

    def describe(self) -> str:
        not_ready = ("never" if self.not_ready_after is None
                     else f"after {self.not_ready_after:.1f}s")
        ready = "-" if self.ready_after_heal is None else f"{self.ready_after_heal:.1f}s"
        return (f"blackhole {self.blackhole_seconds:.1f}s, readyz first not 200 "
                f"{not_ready}; {self.resets} resets "
                f"({self.connections_reset} connections); readyz 200 {ready} after heal; "
                f"statuses seen {sorted(self.statuses)}")


async def play(plan: FaultPlan, proxy: FaultProxy, gateway: GatewayProcess,
               while_down: Callable[[], Awaitable[None]] | None = None) -> FaultLog:
    """Blackhole, resets, heal (see `FaultPlan`), sampling /readyz throughout.
    `while_down` runs once /readyz said not ready, while the blackhole still holds: what
    must follow that state (a gauge) is checked there, by a condition, rather than by a
    sampler in the background, which can miss a short not-ready window on a loaded
    machine (the blackhole may end soon after /readyz turned)."""
    log = FaultLog()
    began = time.monotonic()

    async def sample() -> None:
        status = await gateway.readyz()
        log.statuses.add(status)
        if status != 200 and log.not_ready_after is None:
            log.not_ready_after = time.monotonic() - began
    await asyncio.to_thread(proxy.blackhole)
    try:
        if plan.not_ready:
            while log.not_ready_after is None:
                await sample()
                if time.monotonic() - began > plan.patience:
                    _, metrics = await gateway.get("/metrics")
                    raise AssertionError(
                        f"/readyz still 200 after {plan.patience}s of blackhole\n"
                        + "\n".join(m for m in metrics.splitlines()
                                    if m.startswith("xrgw_") and not m.endswith(" 0.0")))
                await asyncio.sleep(0.1)
        if while_down is not None:
            await while_down()
        while time.monotonic() - began < plan.blackhole:
            await sample()
            await asyncio.sleep(0.1)
        log.blackhole_seconds = time.monotonic() - began
        for _ in range(plan.resets):
            log.connections_reset += await asyncio.to_thread(proxy.reset)
            log.resets += 1
            if proxy.blackholed:
                await asyncio.to_thread(proxy.heal)  # reset connections, new ones flow
                proxy.delay(plan.latency)
            step = time.monotonic()
            while time.monotonic() - step < plan.every:
                await sample()
                await asyncio.sleep(0.1)
    finally:
        await asyncio.to_thread(proxy.heal)
    log.ready_after_heal = await gateway.wait_status(200, plan.patience)
    return log


class ReadyzWatch:
    """/readyz sampled in the background while a fault lasts (a broker restart):

        async with ReadyzWatch(gateway) as watch:
            await asyncio.to_thread(broker.restart)
        watch.column()
    """

    def __init__(self, gateway: GatewayProcess) -> None:
        self._gateway = gateway
        self.statuses: set[int] = set()
        self.not_ready_after: float | None = None
        self._task: asyncio.Task[None] | None = None

    async def _watch(self) -> None:
        began = time.monotonic()
        while True:
            status = await self._gateway.readyz()
            self.statuses.add(status)
            if status != 200 and self.not_ready_after is None:
                self.not_ready_after = time.monotonic() - began
            await asyncio.sleep(0.1)

    async def __aenter__(self) -> ReadyzWatch:
        self._task = asyncio.create_task(self._watch())
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)

    def column(self) -> str:
        if self.not_ready_after is None:
            return "200 throughout"
        return f"not ready after {self.not_ready_after:.1f}s"
