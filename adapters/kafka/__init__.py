"""Kafka consumer (consumer group) and producer (aiokafka).

URI: `kafka://HOST:PORT[,HOST:PORT...]` (bootstrap servers; the one scheme of the KAFKA
profile, which the config check reads too: listener names such as `SSL://` are refused
saying so). Kafka has no TLS scheme: a `tls` block (`EndpointSettings.tls`) turns TLS on (see
`gateway/ports/tls.py`: the brokers are verified against `tls.ca_file`, default the system
CAs, and their host names; `tls.cert_file`/`key_file` add a client certificate), and a
`username` turns SASL on (`sasl_mechanism`, the password from `password`). So the
security protocol is SSL, SASL_SSL, SASL_PLAINTEXT or PLAINTEXT; `security_protocol`
may say so explicitly and must then agree. SASL PLAIN without TLS would send the
password in clear text and is refused; SCRAM never sends it. A refused login fails
`connect()` with `SASL authentication failed ...`, a failed handshake with `TLS: ...`.

Options: `adapters/kafka/options.py` (one spec: names, xRegistry spellings, types,
defaults; rendered in docs/configuration.md).

Settlement. Offsets are committed by the adapter (auto commit off), only for acked
deliveries and per partition in order: the committed offset is one past the highest
*contiguous* settled offset, so an ack of offset 7 commits nothing while offset 5 is
unsettled, and a restart redelivers everything from the first unsettled offset on.
Settling does no I/O: an ack marks its offset and moves the partition's commit point; a
background task then commits every partition that moved in one request, so a burst of
acks (the engine settles a batch at a time) costs one commit, not one per message.
`aclose()` and a partition revocation flush the commits first. The tracking and the
commits are `adapters/kafka/commits.py`.

`read_batch(limit)` hands over what aiokafka has prefetched (`getmany`), at most `limit`
and at most the free room below `max_in_flight`, partition by partition, each in offset
order.

`nack(retry=True)` of offset N seeks the partition back to N: N and every later
delivery of that partition still in flight become stale (settling them does nothing),
and the records from N on are fetched and delivered again. Acks of later offsets are
therefore redone, which is at-least-once. `nack(retry=False)` counts as an ack (the
caller dead-lettered or gave up on the record). Deliveries of a revoked partition or an
older connection are stale too: the new owner starts from the committed offset.

Back-pressure: at most `max_in_flight` deliveries are unsettled; `read_batch()` waits and no
record is taken from aiokafka meanwhile, and aiokafka does not refetch a partition whose
prefetched batch is not consumed, so nothing more is read from the broker. So that the
group does not evict a consumer that is merely waiting (aiokafka's max.poll.interval),
a long wait pauses the partitions and polls them empty once a minute.

Lag (`backlog()`, the `xrgw_consumer_lag` metric): per assigned partition, the end offset
minus the first offset this member has not settled (delivered and unsettled records
count: they are not done yet). The end is the higher of a ListOffsets answer (one
request for all partitions) and the high watermark of the last fetch: Tansu answers
ListOffsets with its last batch's base offset + 1. With nothing unsettled the first
unsettled offset is the one after the last record handed out; before the first one, the
group's committed offset (or where `autooffsetreset` starts). Not aiokafka's position:
that runs ahead with prefetched records.

Poison. Every codec Kafka defines is read (cramjam, with the aiokafka extras). What still
cannot be decoded -- a batch in an unknown codec, corrupt or failing its CRC, a record
with a header name that is not UTF-8 -- is handed over as a delivery marked `undecodable`
at its offsets (`adapters/kafka/fetch.py`): the route dead-letters it (reason
`undecodable`, the raw bytes, topic/partition/offset), its ack commits past it, and the
records around it flow as usual; each partition logs it at most once a minute.

The consumer reads `read_committed` unless `isolation_level` says otherwise: records of
aborted transactions never become events (on brokers that report aborts in their fetch
answers; Tansu does not), records of open transactions wait for the commit.

Liveness. A broker that stops answering (a link that holds every byte, a hung broker)
makes aiokafka neither fail nor reconnect for a long while, and receiving nothing looks
like an idle topic. So `connected` is false while a fetch has had no answer for the
session timeout (at least 10 of aiokafka's 0.5 s fetch long-polls, which a broker answers
even when there is nothing to read): `/readyz` and `xrgw_endpoint_connected` say so, one
warning names the broker and the last error, one info line says when fetches are
answered again (`adapters/kafka/liveness.py`). An idle topic, or a consumer holding
back (nothing is fetched then), stays connected.

The consumer leaves broker connectivity to aiokafka, which reconnects on its own;
errors aiokafka raises from a read (the broker refused the fetch, the connection broke:
no longer a record's fault) are logged with their cause, once a minute per kind, and
make `read_batch()` raise NotConnected.
"""

from __future__ import annotations

from adapters.descriptor import Adapter
from adapters.kafka import prepare
from adapters.kafka.consumer import KafkaConsumer
from adapters.kafka.options import OPTIONS, KafkaOptions
from adapters.kafka.preflight import kafka_topics
from adapters.kafka.producer import KafkaProducer
from gateway.protocols import KAFKA

__all__ = ["ADAPTER", "KafkaConsumer", "KafkaOptions", "KafkaProducer"]

#: This package's entry in the adapter factory (`adapters/registry.py`).
ADAPTER = Adapter(
    family=KAFKA,
    options=OPTIONS,
    consumer=KafkaConsumer,
    producer=KafkaProducer,
    prepare_consumer=prepare.subscription,
    prepare_observer=prepare.observer,
    destination=kafka_topics,
)
