"""Partition keys of keyed outputs (Kafka): the source's unit of order by default, so the
events of one MQTT topic stay in one partition; the event's partitionkey wins; `none` and
templates as configured."""

import asyncio

import pytest

from adapters.memory import MemoryConsumer, MemoryProducer
from gateway.config import load_config_text
from gateway.convert import Converter
from gateway.definitions import read_document
from gateway.envelope.partitioning import check_policy
from gateway.observability.metrics import Metrics
from gateway.record import NativeMessage
from gateway.runtime.keys import PartitionKeys
from gateway.runtime.route import Output, Route


def test_source_keys_name_the_unit_of_order_of_each_protocol():
    keys = PartitionKeys()
    assert keys.key(NativeMessage("MQTT/5.0", {"topic_name": "a/b"}), {}) == "a/b"
    assert keys.key(NativeMessage("MQTT/3.1.1", {"topic_name": "a/c"}), {}) == "a/c"
    assert keys.key(NativeMessage("NATS", {"subject": "a.b"}), {}) == "a.b"
    assert keys.key(NativeMessage("KAFKA", {"topic": "t", "key": "k1"}), {}) == "k1"
    amqp = NativeMessage("AMQP/1.0", {"properties": {"subject": "s", "group-id": "g"}})
    assert keys.key(amqp, {}) == "g"  # the group first
    assert keys.key(NativeMessage("AMQP/1.0", {"properties": {"subject": "s"}}), {}) == "s"
    # No unit of order: HTTP requests, a keyless Kafka record.
    assert keys.key(NativeMessage("HTTP", {"method": "POST", "path": "/x"}), {}) is None
    assert keys.key(NativeMessage("KAFKA", {"topic": "t"}), {}) is None


def test_template_and_none_policies():
    record = NativeMessage("MQTT/5.0", {"topic_name": "a/b"})
    assert PartitionKeys("{storeid}-{cdid}").key(record, {"storeid": "12", "cdid": "3"}) \
        == "12-3"
    assert PartitionKeys("{storeid}").key(record, {}) is None  # unbound: keyless
    assert PartitionKeys("none").key(record, {}) is None
    assert not PartitionKeys("none").enabled


@pytest.mark.parametrize(("policy", "why"), [
    ("fixed", "a constant key sends every record to one partition"),
    ("{unclosed", "not a template"),
])
def test_a_route_refuses_a_key_policy_it_cannot_use(policy: str, why: str) -> None:
    with pytest.raises(ValueError, match=f"^partitionkey: {why}"):
        PartitionKeys(policy)


@pytest.mark.parametrize(("policy", "problem"), [
    ("source", None), ("none", None), ("{storeid}", None),
    ("fixed", "constant key"), ("{unclosed", "not a template"),
])
def test_policy_check(policy, problem):
    found = check_policy(policy)
    assert (found is None) if problem is None else (problem in found)


DOC = {"messagegroups": {"g": {"envelope": "CloudEvents/1.0", "messages": {
    "plain": {"protocol": "MQTT/5.0", "protocoloptions": {"topic_name": "s/{storeid}/d/{cdid}"},
              "envelope": "CloudEvents/1.0",
              "envelopemetadata": {"type": {"value": "t.plain"},
                                   "source": {"value": "/s/{storeid}", "type": "uritemplate"}}},
    "keyed": {"protocol": "MQTT/5.0", "protocoloptions": {"topic_name": "k/{storeid}"},
              "envelope": "CloudEvents/1.0",
              "envelopemetadata": {"type": {"value": "t.keyed"},
                                   "source": {"value": "/k", "type": "uritemplate"},
                                   "partitionkey": {"value": "pk-{storeid}",
                                                    "type": "uritemplate"}}},
}}}}


def _route(policy: str, messages: list[NativeMessage], *, nats_too: bool = True):
    catalog = read_document(DOC, "keys.json")
    consumer = MemoryConsumer(messages, close_when_empty=True)
    kafka, nats = MemoryProducer(), MemoryProducer()
    outputs = [Output("k", "KAFKA", kafka, defaults={"topic": "out"})]
    if nats_too:
        outputs.append(Output("n", "NATS", nats, defaults={"subject": "out"}))
    route = Route("r", "in", consumer, Converter(catalog.messages()), outputs,
                  deadletter=None, metrics=Metrics(), partition_key=policy)

    async def run():
        await route.start()
        await asyncio.wait_for(route.wait_finished(), 5)
        await route.stop(grace=5)

    asyncio.run(run())
    return kafka, nats


def _mqtt(topic: str, n: int) -> NativeMessage:
    return NativeMessage("MQTT/5.0", {"topic_name": topic, "qos": 1}, data={"n": n})


def test_kafka_output_keyed_by_mqtt_topic_by_default_others_untouched():
    kafka, nats = _route("source", [_mqtt("s/1/d/2", 0), _mqtt("s/1/d/3", 1)])
    assert [r.fields.get("key") for r in kafka.written] == ["s/1/d/2", "s/1/d/3"]
    assert all("key" not in r.fields for r in nats.written)


def test_a_route_with_only_kafka_outputs_keys_them_too():
    kafka, _ = _route("source", [_mqtt("s/1/d/2", 0)], nats_too=False)
    assert [r.fields.get("key") for r in kafka.written] == ["s/1/d/2"]


def test_partitionkey_of_the_event_wins_over_the_source_key():
    kafka, _ = _route("source", [_mqtt("k/7", 0)])
    assert [r.fields.get("key") for r in kafka.written] == ["pk-7"]


def test_none_leaves_records_keyless_and_templates_fill_from_the_context():
    kafka, _ = _route("none", [_mqtt("s/1/d/2", 0)])
    assert kafka.written[0].fields.get("key") is None
    kafka, _ = _route("{storeid}", [_mqtt("s/1/d/2", 0)])
    assert kafka.written[0].fields.get("key") == "1"


def test_config_refuses_a_constant_partitionkey(tmp_path):
    (tmp_path / "d.json").write_text('{"endpoints": {}}')
    _, problems = load_config_text("definitions: [d.json]\nroutes:\n  - from: a\n"
                                   "    to: [b]\n    partitionkey: fixed\n", "gw.yaml", tmp_path)
    [found] = [p for p in problems if p.path == "$.routes[0].partitionkey"]
    assert found.severity == "error" and "constant key" in found.message
    assert (found.line, found.column) == (5, 5)
