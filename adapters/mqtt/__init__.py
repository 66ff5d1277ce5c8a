"""MQTT 3.1.1 / 5.0 consumer and producer (paho-mqtt 2 driven by asyncio).

Options: `adapters/mqtt/options.py` (one spec: names, xRegistry spellings, types,
defaults; rendered in docs/configuration.md).

Security. `mqtts://host[:8883]` or `ssl://` (or a `tls` block) connects with TLS (see
`gateway/ports/tls.py`): the server is verified against `tls.ca_file` (default: the system
CAs) including its host name, and `tls.cert_file`/`tls.key_file` add a client
certificate (mutual TLS). `username` and `password` (or the URI's `user:password@`) go
into CONNECT. A refused login fails `connect()` with `CONNACK refused: Not authorized` /
`Bad user name or password`; a rejected certificate with `TLS: server certificate
rejected: ...` or `TLS: the server refused the client certificate ...`. The password is
never logged.

Settlement. The consumer connects with manual acks, clean start off (unless
`cleanstart`) and a stable client id (default derived from URI and filters), so the
broker keeps unacknowledged QoS>=1 messages across restarts. `ack()` sends PUBACK (QoS
1) / PUBCOMP (QoS 2). MQTT has no negative ack, and a broker resends unacked messages
only on reconnect, so `nack(retry=True)` closes the connection: `read_batch()` raises
NotConnected, the engine calls `connect()` again, and the broker redelivers every
unacked message (DUP set). Deliveries of an older connection are stale: settling them
sends nothing (their packet ids belong to the old connection) and they are redelivered,
which keeps at-least-once. `nack(retry=False)` acks: the caller has given up on the
message (dead-lettered it). QoS 0 has nothing to settle. Settling does not wait for
the network: the PUBACKs of a burst of settlements go out together in the link's next
socket write (MQTT 3.1.1 wants them in receive order; the engine settles in order).

QoS 2 caveat: paho answers PUBREC on receipt, which hands the message over for good; an
unacked QoS 2 message is not redelivered after a reconnect. Use QoS 1 when the gateway
must see a message again after a failure.

Batches. `read_batch(limit)` waits for the first message, then returns every message
the link has parsed so far (at most `limit`, and at most as many as the unsettled limit
leaves room for), with one receive timestamp for the batch. The link parses everything
one socket read brought in before the loop resumes the reader, so the messages of a
burst reach the buffer together and wake the reader once.

Back-pressure: at most `max_in_flight` deliveries are unsettled (`read_batch()` waits),
and at most `max_in_flight` received ones are buffered; when the buffer is full the
socket is no longer read, so TCP pushes back on the broker. With MQTT 5 the broker's
Receive Maximum enforces the same bound for QoS>=1 before anything is sent. A buffer
held full for longer than the keepalive makes paho drop the connection (redelivery
follows).

Publishing. `submit()` converts the batch and hands it to the link in one call, which
sends as many QoS>=1 PUBLISHes as the broker's Receive Maximum allows (MQTT 5; 100 on
3.1.1) in one socket write and keeps the rest in order in a backlog, sent as PUBACKs
free the window; `submit()` itself waits only when that backlog is long
(`_MAX_BACKLOG`). The Confirmation resolves when every message of the batch is
confirmed (PUBACK/PUBCOMP; QoS 0: once written) or `publish_timeout` after submit.
"""

from __future__ import annotations

from adapters.descriptor import Adapter
from adapters.mqtt import prepare
from adapters.mqtt.consumer import MqttConsumer
from adapters.mqtt.options import OPTIONS, MqttOptions
from adapters.mqtt.producer import MqttProducer
from gateway.protocols import MQTT_FAMILY

__all__ = ["ADAPTER", "MqttConsumer", "MqttOptions", "MqttProducer"]

#: This package's entry in the adapter factory (`adapters/registry.py`).
ADAPTER = Adapter(
    family=MQTT_FAMILY,
    options=OPTIONS,
    consumer=MqttConsumer,
    producer=MqttProducer,
    prepare_consumer=prepare.subscription,
    prepare_producer=prepare.version,
    prepare_observer=prepare.observer,
)
