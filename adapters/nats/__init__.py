"""NATS core and JetStream consumer and producer (nats-py).

Options: `adapters/nats/options.py` (one spec: names, xRegistry spellings, types,
defaults; rendered in docs/configuration.md).

Security. `tls://host:4222` (or a `tls` block) connects with TLS, and only with TLS: a
server whose INFO does not require TLS is refused before any credential is sent (see
`gateway/ports/tls.py`). The server is verified against `tls.ca_file` (default: the system
CAs) and its host name, and `tls.cert_file`/`tls.key_file` add a client certificate
(servers with `verify: true`). Authentication: `username` + `password` -> user/password;
a `password` without a `username` -> the server's authorization token; or `creds_file` /
`nkey_seed_file`. A refused login fails `connect()` with `authorization violation (check
the endpoint's credentials)`, a rejected certificate with `TLS: ...`. Nothing secret is
logged.

Connections. nats-py reconnects on its own (forever, every `reconnect_wait` seconds)
and restores the subscriptions, so a lost connection is not an error for the engine:
`connected` is false meanwhile, `read_batch()` waits, and `connect()` waits up to
`connect_timeout` for nats-py. Only a client that never connected, or that nats-py gave
up on, is built anew.

Batches. nats-py hands each received message to a callback that appends it to a deque;
`read_batch(limit)` waits for the first and then takes everything buffered (at most
`limit`, and no more than `max_in_flight` unsettled), with one receive timestamp per
batch. Settlements are publishes into nats-py's pending buffer, which its flusher task
writes in one go: a burst of acks is one socket write and no round trip.

Core mode is at-most-once by nature: the server keeps nothing, so `ack()` and `nack()`
do nothing (a nacked message is gone). Back-pressure: at most `max_in_flight` deliveries
are unsettled and at most `max_in_flight` more are buffered; beyond that nats-py keeps up
to `pending_*_limit` per subscription and then drops (a "slow consumer": nothing pushes
back on a core publisher). Drops are counted in `dropped` and logged once per episode.

JetStream mode uses a durable *push* consumer (measured here: push ran 2x faster than
pull fetch). `max_ack_pending = max_in_flight` makes the server stop sending while the
gateway holds that many unacked messages, so nothing is dropped. Its default, 8192, is
twice a route's default window: the server sends the next window into the buffer while
the route waits on its oldest batch (as large as the window, the server stopped at
every full window and resumed in small steps per ack, and spent twice a plain bridge's
CPU per message). The durable acknowledges
with AckPolicy.ALL: one `+ACK` for the contiguous settled prefix per settling burst
(`adapters/nats/acks.py`), where one per message loaded the server about twice as much
per message as the plain bridge. `nack(retry=True)` -> `-NAK` of that message (after
`nak_delay`); `nack(retry=False)` settles like an ack (never redelivered). With a queue
group the durable is shared, and keeps explicit acks: `ack()` -> `+ACK`,
`nack(retry=False)` -> `+TERM`, one per message. Unsettled deliveries come again after
`ack_wait`, also after a gateway restart. An existing durable keeps its own settings,
its ack policy included (a warning names differences in `max_ack_pending`). `backlog()`
(the `xrgw_consumer_pending` metric) asks the server for the durable's `num_pending +
num_ack_pending`; core mode has no backlog.

Producer. `submit()` publishes the whole batch into nats-py's buffer and returns; the
confirmation follows. Core: one PING/PONG round trip per batch, the PING written behind
the batch's publishes (the server has read everything before it): that is all core NATS
confirms. It counts only on the connection the batch was queued on (`Client.confirm`,
not nats-py's `flush()`, which returns without a round trip while nats-py reconnects or
after its read loop died); if that connection breaks first, or no PONG comes within
`publish_timeout`, the whole batch is reported retryable and sent again by the route
(at-least-once: a batch the server read before the break comes twice). A missing PONG
also forces a reconnect and makes the producer not ready (`connected` false, one log
line) until the server confirms again: a partitioned link still takes writes for a
while, and nats-py alone would notice only after two idle PINGs two minutes apart. On a
reconnect the publishes still queued for the old connection are dropped: the route sends
them again, before anything new (`gateway/runtime/resend.py`), so the order per subject
survives a broken link. With
`jetstream: true` each record carries its own reply subject on one inbox subscription
and is delivered once its PubAck arrives; the batch waits for all of them together,
until `publish_timeout`. While disconnected, `submit()` fails fast with retryable
outcomes instead of letting nats-py buffer the messages. JetStream stores no reply
subject: a record's `reply-to` is not sent with `jetstream: true`.
"""

from __future__ import annotations

from adapters.descriptor import Adapter
from adapters.nats import prepare
from adapters.nats.consumer import NatsConsumer
from adapters.nats.options import OPTIONS, NatsOptions
from adapters.nats.preflight import jetstream_streams
from adapters.nats.producer import NatsProducer
from gateway.protocols import NATS

__all__ = ["ADAPTER", "NatsConsumer", "NatsOptions", "NatsProducer"]

#: This package's entry in the adapter factory (`adapters/registry.py`).
ADAPTER = Adapter(
    family=NATS,
    options=OPTIONS,
    consumer=NatsConsumer,
    producer=NatsProducer,
    prepare_consumer=prepare.subscription,
    prepare_observer=prepare.observer,
    destination=jetstream_streams,
)
