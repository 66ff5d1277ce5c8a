"""Partition keys of outputs that partition by key (Kafka), so that order survives to the
consumer of the output.

A route keeps the order of each source unit (MQTT topic, NATS subject, Kafka key, AMQP
group or subject) inside the gateway, but a keyless Kafka record lands on any partition:
the events of one MQTT topic would spread over partitions and a consumer would see them
out of order. So a record without a key (its event has no `partitionkey`, which the Kafka
binding maps to the key) gets one, chosen by `routes[].partitionkey`
(`gateway.envelope.partitioning.PartitionKeys`, shared with the Spark job's Kafka sink):

    source      the source's unit of order (`Ordering.source_key` of its profile); the
                default. A source without one (HTTP) leaves the record keyless.
    none        no key: records spread over partitions (the producer's choice).
    a template  e.g. `{storeid}`: filled from the match context; a placeholder without a
                value leaves the record keyless.
"""

from __future__ import annotations

from gateway.envelope.partitioning import NONE, SOURCE, PartitionKeys, check_policy

__all__ = ["NONE", "SOURCE", "PartitionKeys", "check_policy"]
