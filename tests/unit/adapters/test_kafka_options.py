"""The Kafka producer's batching options: defaults, overrides, refusals."""

from __future__ import annotations

from typing import Any

import pytest

from adapters.kafka import KafkaOptions
from adapters.kafka.producer import WAITING_SENDERS_LINGER_MS, KafkaProducer
from gateway.ports import EndpointSettings


def _parse(**options: Any) -> KafkaOptions:
    return KafkaOptions.parse(EndpointSettings("kafka://127.0.0.1:9092", options=options))


def test_batching_defaults() -> None:
    opts = _parse()
    # A single partition's throughput is one batch per round trip: aiokafka's 16 KiB
    # default would cap it at about 80 records of 200 bytes.
    assert (opts.linger_ms, opts.max_batch_size) == (5, 1 << 20)


def test_batching_overrides() -> None:
    opts = _parse(linger_ms=0, max_batch_size=65536)
    assert (opts.linger_ms, opts.max_batch_size) == (0, 65536)


@pytest.mark.parametrize(("name", "value"), [("linger_ms", -1), ("max_batch_size", 0),
                                              ("linger_ms", "soon")])
def test_batching_refusals_name_the_option(name: str, value: object) -> None:
    with pytest.raises(ValueError, match=name):
        _parse(**{name: value})


def test_compression_is_off_by_default_and_every_kafka_codec_can_be_chosen() -> None:
    assert _parse().codec is None
    assert _parse(compression_type="none").codec is None
    for codec in ("gzip", "snappy", "lz4", "zstd"):
        assert _parse(compression_type=codec).codec == codec


@pytest.mark.parametrize("value", ["brotli", "LZ4x", 3])
def test_a_compression_kafka_does_not_define_is_refused_by_name(value: object) -> None:
    with pytest.raises(ValueError, match="compression_type"):
        _parse(compression_type=value)


def test_the_consumer_reads_committed_records_unless_told_otherwise() -> None:
    assert _parse().isolation_level == "read_committed"
    assert _parse(isolation_level="read_uncommitted").isolation_level == "read_uncommitted"
    with pytest.raises(ValueError, match="isolation_level"):
        _parse(isolation_level="dirty")


def _producer(**options: Any) -> KafkaProducer:
    return KafkaProducer(EndpointSettings("kafka://127.0.0.1:9092", options=options))


def test_a_producer_whose_senders_wait_lingers_less_unless_the_endpoint_says() -> None:
    producer = _producer()
    assert producer.linger_ms == 5
    producer.for_waiting_senders()
    assert producer.linger_ms == WAITING_SENDERS_LINGER_MS < 5
    # The operator's word wins, the default's value included.
    for given in (0, 5, 7):
        producer = _producer(linger_ms=given)
        producer.for_waiting_senders()
        assert producer.linger_ms == given
