"""Every real catalog in tests/data (copied third-party files) loads without errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.definitions import load_catalog
from gateway.definitions.model import Catalog, MessageDefinition
from gateway.protocols import AMQP, HTTP, KAFKA, MQTT5, MQTT311, NATS

PROJECT = Path(__file__).resolve().parents[3]
CATALOGS = PROJECT / "tests" / "data" / "xregistry-catalogs"
FILES = sorted(
    p for p in CATALOGS.rglob("*") if p.is_file() and p.suffix in (".json", ".cereg")
)

# Per file: (messages, endpoints, protocols used by messages or endpoints).
EXPECTED: dict[str, tuple[int, int, set[str]]] = {
    "aisstream.xreg.json": (69, 3, {KAFKA, MQTT5, AMQP}),
    "bluesky.xreg.json": (18, 3, {KAFKA, MQTT5, AMQP}),
    "jma_japan.xreg.json": (3, 3, {KAFKA, MQTT5, AMQP}),
    "nws-alerts.xreg.json": (6, 3, {KAFKA, MQTT5, AMQP}),
    "seattle-911.xreg.json": (3, 3, {KAFKA, MQTT5, AMQP}),
    "usgs_nwis_wq.xreg.json": (6, 4, {KAFKA, MQTT5, AMQP}),
    "eurowater.xreg.json": (2, 1, {KAFKA}),
    "inkjet-protocol-variants.xreg.json": (15, 0, {KAFKA, MQTT5}),
    "minimal-amqp-external-xsd.xreg.json": (1, 0, {AMQP}),
    "amqp-consumer-endpoint-2grp-ce.xreg.json": (2, 1, {AMQP}),
    "http-producer-endpoint.xreg.json": (1, 1, {HTTP}),
    "http-subscriber-endpoint.xreg.json": (1, 1, {HTTP}),
    "kafka-consumer-endpoint.xreg.json": (1, 1, {KAFKA}),
    "kafka-producer-endpoint.xreg.json": (1, 1, {KAFKA}),
    "mqtt-consumer-endpoint.xreg.json": (1, 1, {MQTT5}),
    "mqtt-producer-endpoint.xreg.json": (1, 1, {MQTT5}),
    "nats-consumer-endpoint.xreg.json": (1, 1, {NATS}),
    "nats-producer-endpoint.xreg.json": (1, 1, {NATS}),
    "mqtt_end_to_end.cereg": (17, 2, {MQTT5}),
    "dwd.xreg.json": (4, 2, {KAFKA}),
    "inkjet-kafka-basemessageuri.xreg.json": (4, 0, {KAFKA}),
    "lightbulb-amqp.xreg.json": (4, 0, {AMQP}),
    "mqtt-protocoloptions.xreg.json": (2, 0, {MQTT5}),
    "test-filters.xreg.json": (5, 3, {AMQP}),
    "contoso-erp-jsons07.xreg.json": (17, 6, {HTTP, AMQP, KAFKA}),
    "lightbulb-avro.xreg.json": (4, 0, set()),
    "mqtt-sparkplugB.xreg.json": (10, 8, {MQTT311}),
    "watchkam-jsons07.xreg.json": (2, 0, {KAFKA}),
    "waterboiler-mqtt5-jsons07.xreg.json": (2, 2, {MQTT5}),
    "windgenerator-kafka-avro.xreg.json": (2, 0, {KAFKA}),
    "contoso-crm.cereg": (10, 1, {HTTP}),
}


def _load(name: str) -> Catalog:
    matches = [p for p in FILES if p.name == name]
    assert len(matches) == 1, name
    return load_catalog([matches[0]])


def _message(catalog: Catalog, xid: str) -> MessageDefinition:
    found = catalog.message(xid)
    assert found is not None, xid
    return found


def test_every_catalog_is_covered() -> None:
    assert len(FILES) == len(EXPECTED) == 31
    assert {p.name for p in FILES} == set(EXPECTED)


# Errors a catalog really has. nats-consumer-endpoint spells dataschemaformat
# `schemaformatr` (a typo upstream), so its schema reference has no format: rc2 says
# "If present, dataschemaformat MUST be present".
KNOWN_ERRORS = {"nats-consumer-endpoint.xreg.json": ["needs 'dataschemaformat'"]}


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_real_catalog_loads_without_errors(path: Path) -> None:
    catalog = load_catalog([path])
    expected = KNOWN_ERRORS.get(path.name, [])
    assert len(catalog.errors) == len(expected), "\n".join(str(p) for p in catalog.errors)
    for problem, text in zip(catalog.errors, expected, strict=True):
        assert text in problem.message
    messages = list(catalog.messages())
    count, endpoints, protocols = EXPECTED[path.name]
    assert len(messages) == count
    assert len(catalog.endpoints) == endpoints
    used = {m.protocol for m in messages} | {e.protocol for e in catalog.endpoints.values()}
    assert protocols <= used
    assert used - {None} <= {MQTT5, MQTT311, AMQP, KAFKA, NATS, HTTP}  # all recognized
    for m in messages:
        assert m.provenance.file == str(path)
        assert m.provenance.path.startswith("$.")
        assert m.envelope is not None or m.protocol is not None, m.xid
    orders = [m.order for m in messages]
    assert len(set(orders)) == len(orders)


def test_jma_mqtt_overlay_merges_base_envelope_and_adds_topic() -> None:
    catalog = _load("jma_japan.xreg.json")
    base_xid = "/messagegroups/jp.go.jma.WeatherBulletins/messages/jp.go.jma.WeatherBulletin"
    mqtt = _message(catalog, "/messagegroups/jp.go.jma.WeatherBulletins.mqtt/messages/"
                             "jp.go.jma.WeatherBulletins.mqtt.WeatherBulletin")
    assert mqtt.base_chain == (base_xid,)
    assert not mqtt.incomplete
    assert mqtt.protocol == MQTT5 and mqtt.is_cloudevent
    assert mqtt.envelope_metadata["type"].value == "jp.go.jma.WeatherBulletin"
    assert mqtt.envelope_metadata["subject"].value == "{office}/{bulletin_id}"  # overlay wins
    assert mqtt.dataschemaformat == "JsonStructure/draft-02"  # inherited from the base
    assert mqtt.field_provenance["$.dataschemauri"].path.endswith(
        '["jp.go.jma.WeatherBulletin"].dataschemauri')
    topic = [c for c in mqtt.protocol_options if c.field == "topic_name"]
    assert topic[0].prop.value == "weather/jp/jma/jma-japan/{office}/{bulletin_id}/bulletin"
    amqp = _message(catalog, "/messagegroups/jp.go.jma.WeatherBulletins.amqp/messages/"
                             "jp.go.jma.WeatherBulletins.amqp.WeatherBulletin")
    subject = [c for c in amqp.protocol_options if (c.field, c.name) == ("properties", "subject")]
    assert subject[0].prop.value == "{office}/{bulletin_id}"


def test_aisstream_amqp_overlay_inherits_everything_through_basemessage() -> None:
    catalog = _load("aisstream.xreg.json")
    amqp = _message(catalog, "/messagegroups/IO.AISstream.amqp/messages/"
                             "IO.AISstream.amqp.PositionReport")
    assert amqp.envelope == "CloudEvents/1.0"  # only the base states it
    assert amqp.envelope_metadata["subject"].value == "{UserID}"
    assert amqp.protocol == AMQP


def test_bluesky_protocol_none_is_absent() -> None:
    catalog = _load("bluesky.xreg.json")
    base = _message(catalog, "/messagegroups/BlueskyFirehose/messages/Bluesky.Feed.Post")
    assert base.protocol is None
    overlay = _message(catalog, "/messagegroups/BlueskyFirehose.mqtt/messages/"
                                "Bluesky.Feed.Post.mqtt")
    assert overlay.protocol == MQTT5
    assert overlay.envelope_metadata["specversion"].value == "1.0"


def test_inkjet_protocolmetadata_overlays_are_read() -> None:
    catalog = _load("inkjet-protocol-variants.xreg.json")
    kafka = _message(catalog, "/messagegroups/Fabrikam.InkJetPrinter.Kafka/messages/"
                              "Fabrikam.InkJetPrinter.Kafka.PrintJobStarted")
    assert kafka.protocol == KAFKA
    by_field = {(c.field, c.name): c.prop for c in kafka.protocol_options}
    assert by_field[("key", None)].value == "{tenantid}-{deviceid}"
    assert ("headers", "correlationId") in by_field  # JSON-Schema-like wrapper unwrapped
    assert kafka.envelope_metadata["source"].value == "{tenantid}/{deviceid}"  # from the base
    assert kafka.dataschemauri is not None and kafka.dataschemauri.startswith("#/schemagroups")
    mqtt = _message(catalog, "/messagegroups/Fabrikam.InkJetPrinter.MQTT/messages/"
                             "Fabrikam.InkJetPrinter.MQTT.PrintJobStarted")
    by_field = {(c.field, c.name): c.prop for c in mqtt.protocol_options}
    assert by_field[("topic_name", None)].value == (
        "fabrikam/inkjet/{tenantid}/{deviceid}/printjob/started")
    assert by_field[("qos", None)].value == 1
    assert by_field[("retain", None)].value is False
    assert mqtt.raw_protocol_options["topic_name"] == {
        "value": "fabrikam/inkjet/{tenantid}/{deviceid}/printjob/started",
        "description": "MQTT topic for print job started events",
    }


def test_contoso_crm_legacy_shape_gives_http_endpoint_and_cloudevents() -> None:
    catalog = _load("contoso-crm.cereg")
    endpoint = catalog.endpoints["Contoso.CRM.Eventing.Http"]
    assert endpoint.protocol == HTTP
    assert endpoint.usage == ("producer",)
    assert endpoint.envelope == "CloudEvents/1.0"
    assert endpoint.protocol_options["endpoints"] == [{"uri": "https://erpsystem.com/events"}]
    assert endpoint.messagegroups == ("/messagegroups/Contoso.CRM.Events",)
    messages = catalog.messages_for_endpoint("Contoso.CRM.Eventing.Http")
    assert len(messages) == 10
    created = _message(catalog, "/messagegroups/Contoso.CRM.Events/messages/"
                                "Contoso.CRM.Events.CustomerCreated")
    assert created.is_cloudevent
    assert created.envelope_metadata["type"].value == "Contoso.CRM.Events.CustomerCreated"
    assert created.envelope_metadata["time"].type == "timestamp"  # 2023 "datetime"
    assert created.dataschemauri == (
        "#/schemaGroups/Contoso.CRM.Events/schemas/customerCreatedEventData")


def test_mqtt_consumer_nested_properties_and_user_properties() -> None:
    catalog = _load("mqtt-consumer-endpoint.xreg.json")
    m = _message(catalog, "/messagegroups/Contoso.MyGroup/messages/Contoso.MyGroup.MyEvent")
    by_field = {(c.field, c.name): c.prop for c in m.protocol_options}
    assert by_field[("topic_name", None)].value == "clients/{clientid}/events/{eventid}"
    assert by_field[("qos", None)].value == 1
    assert by_field[("user_properties", "property1")].type == "string"
    assert by_field[("user_properties", "property2")].type == "integer"
    assert set(m.raw_protocol_options) == {"topic_name", "qos", "retain", "user_properties"}
    endpoint = catalog.endpoints["MyMqttConsumer"]
    assert endpoint.deployed is False
    assert endpoint.protocol_options["topic"] == "events"


def test_mqtt_end_to_end_legacy_config_endpoint() -> None:
    catalog = _load("mqtt_end_to_end.cereg")
    endpoint = catalog.endpoints["Contoso.ERP.Eventing.MqttConsumer"]
    assert endpoint.protocol == MQTT5
    assert endpoint.usage == ("consumer",)
    assert endpoint.protocol_options["topic"] == "events"
    assert endpoint.protocol_options["endpoints"] == [{"uri": "mqtt://127.11.0.1:1883"}]
    m = next(iter(catalog.messages()))
    assert m.is_cloudevent and m.dataschemaformat == "JSONSchema/draft-07"


def test_contoso_erp_top_level_deployed_and_amqp_spellings() -> None:
    catalog = _load("contoso-erp-jsons07.xreg.json")
    queue = catalog.endpoints["Contoso.ERP.QueueConsumer"]
    assert queue.deployed is False
    assert queue.channel == "myqueue"
    assert queue.protocol_options["link-properties"] == {"myprop": "prop"}
    assert queue.protocol_options["distribution-mode"] == "copy"
    assert queue.protocol_options["endpoints"] == [
        {"uri": "amqps://cediscoveryinterop.example.com/queue"}]
    assert len(catalog.messages_for_endpoint("Contoso.ERP.KafkaConsumer")) == 17


def test_amqp_underscore_sections_become_hyphenated() -> None:
    catalog = _load("lightbulb-amqp.xreg.json")
    fields = {c.field for m in catalog.messages() for c in m.protocol_options}
    assert {"application-properties", "message-annotations", "properties"} <= fields


def test_kafka_headers_map_and_watchkam_templates() -> None:
    catalog = _load("watchkam-jsons07.xreg.json")
    for m in catalog.messages():
        headers = {c.name: c.prop.value for c in m.protocol_options if c.field == "headers"}
        assert headers["deviceid"] == "{deviceid}"


def test_real_time_sources_endpoint_options_are_flattened() -> None:
    catalog = _load("dwd.xreg.json")
    for endpoint in catalog.endpoints.values():
        assert "options" not in endpoint.protocol_options
        assert "topic" in endpoint.protocol_options
        assert endpoint.envelope_options["mode"] == "structured"


def test_sparkplug_subscriber_consumer_usage_and_will_message() -> None:
    catalog = _load("mqtt-sparkplugB.xreg.json")
    endpoint = catalog.endpoints["Eclipse.SparkplugBv10EdgeNodeCommandConsumer"]
    assert endpoint.usage == ("subscriber", "consumer")
    producer = catalog.endpoints["Eclipse.SparkplugBv10EdgeNodeProducer"]
    assert producer.protocol_options["willmessage"] == (
        "/messagegroups/Eclipse.SparkplugB.EdgeNode/messages/NDEATH")


def test_all_catalogs_load_together_with_duplicate_warnings_only() -> None:
    catalog = load_catalog(FILES)
    assert catalog.errors == []
    duplicated = [p for p in catalog.warnings if "also defined in" in p.message]
    assert duplicated  # the codegen samples share group ids (Contoso.MyGroup ...)
    assert len(catalog.sources) == len(FILES)
