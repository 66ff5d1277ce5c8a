"""AMQP 1.0 consumer and producer (python-qpid-proton on its own thread, bridged to asyncio).

Options: `adapters/amqp/options.py` (one spec: names, xRegistry spellings, types,
defaults; rendered in docs/configuration.md).

The URI is `amqp://[user:password@]host[:port]` or, with TLS, `amqps://...[:5671]` (a
`tls` block also means TLS);
`EndpointSettings.username/password` win over the URI's. With credentials SASL PLAIN is
used, otherwise ANONYMOUS. TLS (see `gateway/ports/tls.py`): the server is verified against
`tls.ca_file` (default: the system CAs) and its host name; `tls.cert_file`/`key_file`
add a client certificate. A refused login fails `connect()` with
`amqp:unauthorized-access: ... (check the endpoint's username/password)`, a failed
handshake with `TLS: ...`. The password is never logged nor part of a repr.

Batches. Everything crosses between proton's thread and asyncio in bursts, never one
message at a time (see `adapters/amqp/proton_loop.py` for why): the messages of one socket
read reach `read_batch()` as one hand-over with one receive time, still encoded (the event
loop decodes them: on proton's thread every attribute read gave the GIL up and waited for
the busy loop to give it back); the settlements the
engine makes in one go travel back as one hand-over; a `submit()` is one hand-over, and
the dispositions of one socket read come back as one.

Settlement (consumer). The receiver link is at-least-once (sender unsettled, receiver
settles first). `ack()` -> accepted; `nack(retry=True)` -> released (or
modified(delivery-failed), see `nack_outcome`), so the broker delivers it again;
`nack(retry=False)` -> rejected (the broker drops or dead-letters it). RabbitMQ 3.x
closes the session on a modified disposition ("Unrecognised state"), hence the default.
`ack()`/`nack()` return at once: the dispositions gathered until the event loop's next
turn go to the proton thread together. Deliveries not settled when the link goes (crash,
close, connection loss) are requeued by the broker. Deliveries of an older connection
are stale: settling them sends nothing, and they come again on the new one.

Back-pressure: the link is opened with `max_in_flight` credit and the credit of settled
deliveries is returned (one flow per burst of settlements), so the broker never sends
more than `max_in_flight` messages the gateway has not settled; `read_batch()` hands out
at most that many unsettled deliveries and waits while they are all out.

Producer: one sender link per target address (`properties.to` of the record, else
`node`), opened on first use and kept. `submit()` sends pipelined and confirms later
(see `AmqpProducer`). A message is delivered when the broker accepts it; rejected ->
failed, not retryable; released/modified -> failed, retryable; a refused link (e.g.
`amqp:not-found`) fails its messages, not retryable; no disposition within
`publish_timeout` -> failed, retryable. Broker down: `submit()` fails fast with retryable
Outcomes and reconnects at most once per backoff interval.
"""

from __future__ import annotations

from adapters.amqp import prepare
from adapters.amqp.consumer import AmqpConsumer
from adapters.amqp.options import OPTIONS, AmqpOptions
from adapters.amqp.producer import AmqpProducer
from adapters.descriptor import Adapter
from gateway.protocols import AMQP

__all__ = ["ADAPTER", "AmqpConsumer", "AmqpOptions", "AmqpProducer"]

#: This package's entry in the adapter factory (`adapters/registry.py`).
ADAPTER = Adapter(
    family=AMQP,
    options=OPTIONS,
    consumer=AmqpConsumer,
    producer=AmqpProducer,
    prepare_consumer=prepare.node,
    prepare_producer=prepare.node,
)
