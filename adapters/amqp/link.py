"""What both AMQP links share: the proton handler base that reports link and connection
events to the event loop (`Note`), and how a refusal is described to an operator.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from proton import Condition, Connection, Event
from proton.handlers import EndpointStateHandler

from adapters.amqp.options import AmqpOptions
from adapters.amqp.proton_loop import LoopHandler
from gateway.ports import Outcome
from gateway.record import NativeMessage

log = logging.getLogger("adapters.amqp")  # the name it had before the package split


def hint(why: str) -> str:
    """An operator's next step for the usual refusals."""
    lowered = why.lower()
    if "unauthorized-access" in lowered or "authentication failed" in lowered:
        return f"{why} (check the endpoint's username/password)"
    if "precondition-failed" in lowered and "durable" in lowered:
        return (f"{why} (the queue exists with another durability: set the endpoint's "
                "terminus-durability to match it, configuration for a durable queue, none "
                "for a transient one; or address it as /amq/queue/<name>, which attaches "
                "to an existing queue without declaring it)")
    if "ssl" in lowered or "tls" in lowered or "certificate" in lowered:
        return (f"TLS: {why} (check tls.ca_file for the server certificate, "
                "tls.cert_file/key_file for a client certificate)")
    return why


def describe(condition: Condition | None, default: str) -> str:
    if condition is None:
        return default
    return (
        f"{condition.name}: {condition.description}"
        if condition.description
        else str(condition.name)
    )


@dataclass(frozen=True)
class Note:
    """What the proton thread tells the asyncio side: one note per burst, not per message."""

    # listening: the reply receiver attached (reason "") or is gone (reason: why);
    # answers: what came on it (request-reply, `producer.py`)
    kind: Literal["ready", "lost", "messages", "outcomes", "listening", "answers"]
    first: int = 0  # messages: the token of records[0]; the others follow, one apart
    records: Sequence[NativeMessage] = ()
    # messages: the received messages still encoded (decoded on the event loop, see
    # `consumer.py`), all received at `reason` (one receive time per burst)
    encoded: Sequence[bytes] = ()
    outcomes: Sequence[tuple[int, int, Outcome]] = ()  # (submit id, index, outcome)
    reason: str = ""


class LinkHandler(LoopHandler[Note]):
    """Connection-level behaviour shared by both directions (proton thread only)."""

    def __init__(self, opts: AmqpOptions) -> None:
        # prefetch=0: credit is ours to give (the back-pressure); settlement is ours too.
        super().__init__(prefetch=0, auto_accept=False, auto_settle=True)
        # Deliveries are read and settled by on_delivery() of the subclasses, not by
        # proton's message handlers: those look the link up several times per message (a
        # new wrapper object each time), and every event passed through two more
        # handlers. Only the endpoint-state handler (opened/closing/error) stays.
        handlers = self.handlers
        assert isinstance(handlers, list)  # (MessagingHandler builds a list)
        self.handlers = [h for h in handlers if isinstance(h, EndpointStateHandler)]
        self.opts = opts
        self.connection: Connection | None = None
        self.closing = False

    def on_start(self, event: Event) -> None:
        self.connection = event.container.connect(**self.opts.connect_kwargs())

    def close_endpoints(self) -> None:
        self.closing = True
        if self.connection is not None:
            self.connection.close()

    def on_connection_closed(self, event: Event) -> None:
        self.lost("connection closed")

    def on_transport_error(self, event: Event) -> None:
        transport = event.transport
        self.lost(describe(transport.condition if transport else None, "transport error"))

    def on_connection_error(self, event: Event) -> None:
        connection = event.connection
        self.lost(
            describe(connection.remote_condition if connection else None, "connection error")
        )

    def on_session_error(self, event: Event) -> None:
        session = event.session
        self.lost(describe(session.remote_condition if session else None, "session error"))

    def on_disconnected(self, event: Event) -> None:
        transport = event.transport
        self.lost(describe(transport.condition if transport else None, "disconnected"))

    def crashed(self, exc: BaseException) -> None:
        if not self.closing:
            self.closing = True
            self.post(Note("lost", reason=f"proton reactor failed: {exc!r}"))

    def lost(self, why: str) -> None:
        """The connection is over: tell asyncio once, then end the reactor."""
        if not self.closing:
            # What this burst learnt before the loss (dispositions) must not be reported
            # as lost: that would resend messages the broker has accepted.
            self.end_of_burst()
            self.closing = True
            self.post(Note("lost", reason=why))
        self.stop_container()
