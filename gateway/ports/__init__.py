"""The adapter contract: what every protocol adapter offers the core, and nothing else.

    Consumer  connect() -> read_batch(limit) -> [Delivery, ...] ... -> aclose()
    Producer  connect() -> submit([NativeMessage, ...]) -> Confirmation ... -> aclose()
                           await Confirmation -> [Outcome, ...]

Batches are the unit: a consumer hands over what it has received, a producer queues a
batch in order and confirms it later (pipelined), and every message keeps its own
settlement and outcome. `read_one` and `write` are the one-at-a-time forms for tests.

Exceptions (the vocabulary the engine acts on)::

    AdapterError
    ├── NotConnected     connect() failed or the connection dropped: reconnect with backoff
    ├── EndOfInput       the consumer has nothing more to give (closed): stop cleanly
    └── AlreadySettled   a Delivery was acked/nacked a second time: a bug in the caller

Per-message failures of a producer are values (`Outcome`), never exceptions, so one bad
message in a batch does not hide the result of the others. A producer makes one attempt
per message and write; retrying is the route's job (`gateway.policies.retry`).

Request-reply (`routes[].reply: true`): a Delivery whose sender waits for an answer
carries an `answer` hook, and a producer that can wait for one implements `Requester`
(`request(messages, timeout)`, the answer in `Outcome.reply`). A route that answers
nobody tells a consumer that makes such hooks (`AnswersSenders`) to stop
(`answer_nobody`): finding out whether a sender waits costs per message.

A consumer whose senders wait on the line (the HTTP ingress) implements `Admission`: it
listens from the start and refuses messages (503 + Retry-After) while the route holds it.

A producer whose sink has a size limit implements `SizeLimited` (`max_message_bytes`):
the route dead-letters a larger message as `too-large` before sending it, and the
producer refuses one that its exact wire size puts over with `Outcome.oversize`.

A producer that waits for more records before it sends a batch (Kafka's `linger_ms`)
implements `Lingers`: a route whose senders each wait for their message (an HTTP ingress,
a request-reply route) tells it so (`for_waiting_senders`), and it waits only as long as
such a burst takes to arrive.

A message the consumer cannot decode (a Kafka record batch in a codec nobody knows, a
failed CRC, a header name that is not UTF-8) is handed over anyway, with what could be
salvaged (raw bytes, where it was) and `Delivery.undecodable` saying why: the route
dead-letters it as `undecodable` and acks it, so the source moves past it. Only transient
trouble (the broker unreachable) is `NotConnected`.

A consumer whose acks do no I/O of their own (Kafka's commit point, JetStream's ack
frontier) may ack a settled batch in one call: its settle hooks name a `BulkAcker`, and
the route acks through `ack_all`.

A consumer that knows how far it is behind its source (Kafka partition lag, JetStream
pending messages) also implements `BacklogReporter`; the route exports it as metrics.

The core hands the adapter factory an `AdapterEndpoint` per endpoint (the endpoint as the
config resolved it, with the `AddressTemplate`s of its messages; built by
`gateway.config.for_adapter`), so an adapter never reads the config or the definitions.
Adapters are built from `EndpointSettings` (address, credentials, `TlsSettings`,
protocol options), which the adapter factory fills from it.

The core owns this contract and the adapters import it; the core still never imports an
adapter (it finds them through the `xrgw.adapters` entry point). The contract's modules
are private (`_name.py`); this door is its public surface. Next to it, the adapter kit:
protocol-neutral helpers an adapter may use, each a public module of its own — `inbox` (a
push-based consumer's buffer, window and `read_batch` wait), `pending` (a producer's
submitted batch: outcomes by index, countdown, deadline), `reconnect` (a producer's
reconnect backoff gate), `schemes` (the URI scheme check), `tls` (client and server SSL
contexts, handshake errors in words).
"""

from __future__ import annotations

from gateway.ports._adapter import (
    Confirmation,
    Consumer,
    Producer,
    confirmed,
    read_one,
    write,
)
from gateway.ports._admission import Admission
from gateway.ports._answers import AnswersSenders, answer_nobody
from gateway.ports._backlog import Backlog, BacklogReporter, PartitionLag, StreamPending
from gateway.ports._bodies import DefersBodies, defer_bodies
from gateway.ports._bulk import BulkAcker, ack_all
from gateway.ports._delivery import Answer, Delivery, Settle
from gateway.ports._endpoint import AdapterEndpoint, AddressTemplate, connection_repr
from gateway.ports._errors import AdapterError, AlreadySettled, EndOfInput, NotConnected
from gateway.ports._lingering import Lingers, for_waiting_senders
from gateway.ports._outcome import Outcome, all_delivered
from gateway.ports._reply import (
    CORRELATION_ATTRIBUTE,
    NO_REPLY_PREFIX,
    Opened,
    ReplyTable,
    Requester,
    Stray,
    StrayListener,
    correlation_of,
    no_reply,
)
from gateway.ports._settings import EndpointSettings, TlsSettings
from gateway.ports._size import SizeLimited, size_limit

__all__ = [
    "CORRELATION_ATTRIBUTE",
    "NO_REPLY_PREFIX",
    "AdapterEndpoint",
    "AdapterError",
    "AddressTemplate",
    "Admission",
    "AlreadySettled",
    "Answer",
    "AnswersSenders",
    "Backlog",
    "BacklogReporter",
    "BulkAcker",
    "Confirmation",
    "Consumer",
    "DefersBodies",
    "Delivery",
    "EndOfInput",
    "EndpointSettings",
    "Lingers",
    "NotConnected",
    "Opened",
    "Outcome",
    "PartitionLag",
    "Producer",
    "ReplyTable",
    "Requester",
    "Settle",
    "SizeLimited",
    "Stray",
    "StrayListener",
    "StreamPending",
    "TlsSettings",
    "ack_all",
    "all_delivered",
    "answer_nobody",
    "confirmed",
    "connection_repr",
    "correlation_of",
    "defer_bodies",
    "for_waiting_senders",
    "no_reply",
    "read_one",
    "size_limit",
    "write",
]
