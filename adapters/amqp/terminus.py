"""The durability and expiry policy of a link's terminus (AMQP 1.0 3.5.3, 3.5.6), from the
endpoint's `terminus-durability` and `expiry-policy` options.

Why it matters: RabbitMQ 3.x declares the queue of a `/queue/<name>` address when a link
attaches to it, durable only when the terminus asks for configuration durability or more;
proton's default (none) made a transient queue that a broker restart erases with every
message in it. It also refuses an attach whose durability differs from the existing
queue's (`amqp:precondition-failed ... inequivalent arg 'durable'`), so a gateway with the
old default could not attach to the durable queues RabbitMQ users usually declare. `auto`
asks for a durable queue on `/queue/` addresses only: on `/exchange/...` and `/topic/...`
RabbitMQ declares a queue of its own per attach, which a durable terminus would leave
behind at every reconnect.

`auto` also attaches to a `/queue/` that exists already as it is: when RabbitMQ refuses the
durable attach because the queue is transient (made by another client, or by an older
gateway), the link is attached again with a transient terminus, once per address, with one
warning (`AutoDurability`). Refusing would protect nothing -- the queue is transient either
way -- and would stop the route. An explicit `configuration` keeps the refusal.
"""

from __future__ import annotations

import logging

from proton import Terminus

__all__ = ["AutoDurability", "apply_terminus", "durability_for", "transient_queue_warning"]

log = logging.getLogger("adapters.amqp")

_DURABILITY = {
    "none": Terminus.NONDURABLE,
    "configuration": Terminus.CONFIGURATION,
    "unsettled-state": Terminus.DELIVERIES,
}
_EXPIRY = {
    "link-detach": Terminus.EXPIRE_WITH_LINK,
    "session-end": Terminus.EXPIRE_WITH_SESSION,
    "connection-close": Terminus.EXPIRE_WITH_CONNECTION,
    "never": Terminus.EXPIRE_NEVER,
}
#: The address prefix of a queue RabbitMQ 3.x declares at attach (4.x: `/queues/<name>`
#: must exist, and the terminus durability does not declare anything).
_DECLARED_QUEUE = "/queue/"


def durability_for(setting: str, address: str) -> str:
    """The terminus durability a link to `address` asks for (`auto` resolved)."""
    if setting != "auto":
        return setting
    return "configuration" if address.startswith(_DECLARED_QUEUE) else "none"


def apply_terminus(terminus: Terminus, setting: str, expiry_policy: str, address: str) -> None:
    """Set durability and expiry policy on a terminus before its link is opened."""
    terminus.durability = _DURABILITY[durability_for(setting, address)]
    terminus.expiry_policy = _EXPIRY[expiry_policy]


def transient_queue_warning(setting: str, address: str | None) -> str | None:
    """What to tell the operator when the options ask RabbitMQ 3.x for a transient queue
    (`terminus-durability: none` on a `/queue/` address); None when they do not."""
    if address is None or not address.startswith(_DECLARED_QUEUE):
        return None
    if durability_for(setting, address) != "none":
        return None
    return (f"AMQP {address}: terminus-durability none makes RabbitMQ 3.x declare a "
            "transient queue; a broker restart erases it with every message in it "
            "(leave terminus-durability at auto for a durable queue)")


class AutoDurability:
    """The terminus durability per address, `auto` following a queue that exists already
    transient (see the module docstring). One per adapter instance, kept over reconnects;
    used from one thread at a time (the consumer's attach, the producer's proton thread)."""

    def __init__(self, setting: str) -> None:
        self.setting = setting
        self._transient: set[str] = set()

    def for_address(self, address: str) -> str:
        """The durability an attach to `address` asks for now."""
        if address in self._transient:
            return "none"
        return durability_for(self.setting, address)

    def refused(self, address: str, why: str) -> bool:
        """Whether an attach to `address` refused with `why` should be tried again with a
        transient terminus: `auto`, a durable attach to a `/queue/`, and RabbitMQ's
        `precondition-failed ... inequivalent arg 'durable'`. Remembered for the address."""
        if self.setting != "auto" or self.for_address(address) != "configuration":
            return False
        lowered = why.lower()
        if "precondition-failed" not in lowered or "durable" not in lowered:
            return False
        self._transient.add(address)
        log.warning("AMQP %s exists as a transient queue: attached to it as it is "
                    "(terminus-durability auto); a broker restart erases it with every "
                    "message in it. Declare it durable, or set terminus-durability "
                    "configuration to refuse a transient queue", address)
        return True
