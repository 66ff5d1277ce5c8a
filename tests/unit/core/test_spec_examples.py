"""Every example of the normative spec text (message-definitions-1.0-rc2), end to end:
load the definition as printed, feed a native message that conforms (and one that does
not), and check the match, the captured context and the CloudEvent or native output."""

from datetime import UTC, datetime

from gateway.convert import Converter
from gateway.definitions import read_document
from gateway.envelope.native import render_native
from gateway.envelope.render import RenderError
from gateway.record import NativeMessage

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)


def converter_for(message: dict, extra: dict | None = None) -> Converter:
    doc = {"messagegroups": {"g": {"messages": {"m": message, **(extra or {})}}}}
    catalog = read_document(doc, "spec-example.json")
    assert not catalog.errors, catalog.errors
    return Converter(catalog.messages())


def test_context_attributes_example_mqtt_to_cloudevent():
    # As printed (with the missing comma after topic_name restored): declarations under
    # envelopeoptions are read as envelopemetadata.
    conv = converter_for({
        "protocol": "MQTT/5.0",
        "protocoloptions": {
            "topic_name": "/store/{storeid}/cashierdesk/{cdid}",
            "user_properties": [{"name": "eventType", "type": "uritemplate",
                                 "value": "{eventType}"}],
        },
        "envelope": "CloudEvents/1.0",
        "envelopeoptions": {
            "type": {"type": "uritemplate", "value": "{eventType}"},
            "source": {"type": "uritemplate", "value": "{storeid}"},
            "subject": {"type": "uritemplate", "value": "{cdid}"},
        },
    })
    record = NativeMessage("MQTT/5.0", {
        "topic_name": "/store/42/cashierdesk/7",
        "user_properties": [{"name": "eventType", "value": "com.example.checkout"}]},
        data={"total": 9.99})
    out = conv.convert(record, now=NOW)
    assert out.ok and out.match.context == {"storeid": "42", "cdid": "7",
                                            "eventType": "com.example.checkout"}
    attrs = out.event.get_attributes()
    assert (attrs["type"], attrs["source"], attrs["subject"]) == (
        "com.example.checkout", "42", "7")
    assert attrs["time"] == NOW and attrs["specversion"] == "1.0"
    assert out.event.get_data() == {"total": 9.99}


def test_cloudevents_envelope_example_matches_cloudevents_over_any_protocol():
    conv = converter_for({
        "envelope": "CloudEvents/1.0",
        "envelopemetadata": {
            "type": {"value": "com.example.myevent"},
            "source": {"value": "https://{tenant}/{module}/myevent", "type": "uritemplate"},
            "subject": {"type": "uri"},
            "time": {"required": True},
        },
        "dataschemaformat": "JsonSchema/draft-07",
        "dataschemauri": "https://example.com/schemas/com.example.myevent.json",
    })
    headers = [{"name": "ce_specversion", "value": "1.0"}, {"name": "ce_id", "value": "1"},
               {"name": "ce_type", "value": "com.example.myevent"},
               {"name": "ce_source", "value": "https://acme/billing/myevent"},
               {"name": "ce_subject", "value": "urn:x:1"},
               {"name": "ce_time", "value": "2026-01-01T00:00:00Z"},
               {"name": "content-type", "value": "application/json"}]
    out = conv.convert(NativeMessage("KAFKA", {"topic": "t", "headers": headers}, data={}))
    assert out.ok and out.match.context == {"tenant": "acme", "module": "billing"}
    no_time = [h for h in headers if h["name"] != "ce_time"]
    missing = conv.convert(NativeMessage("KAFKA", {"topic": "t", "headers": no_time}, data={}))
    assert missing.reason == "unmatched"
    assert any("time" in e.failure for e in missing.explain)
    native = conv.convert(NativeMessage("KAFKA", {"topic": "t"}, data={}))
    assert native.reason == "unmatched"  # envelope-only definitions need a CloudEvent


def test_http_example():
    conv = converter_for({
        "protocol": "HTTP",
        "protocoloptions": {
            "headers": [{"name": "Content-Type", "value": "application/json"}],
            "query": [{"name": "foo", "value": "bar"}],
            "path": "/foo/{bar}",
            "method": "POST",
        },
        "dataschemaformat": "JsonSchema/draft-07",
        "dataschemauri": "https://example.com/schemas/com.example.myevent.json",
    })
    record = NativeMessage("HTTP", {"method": "POST", "path": "/foo/b%C3%A4r",
                                    "query": {"foo": "bar"},
                                    "headers": [{"name": "content-type",
                                                 "value": "application/json"}]}, data={})
    result = conv.matcher.match(record)
    assert result.matched and result.context == {"bar": "bär"}
    assert not conv.matcher.match(NativeMessage("HTTP", dict(record.fields, method="GET"))).matched
    out = conv.convert(record)
    assert out.reason == "no-envelope"  # native-only definition: nothing to render


def test_amqp_example():
    conv = converter_for({
        "protocol": "AMQP/1.0",
        "protocoloptions": {
            "properties": {
                "message-id": {"required": True},
                "to": {"value": "https://{host}/{queue}"},
                "subject": {"value": "MyMessageType", "required": True},
                "content-type": {"value": "application/json"},
                "content-encoding": {"value": "gzip"},
            },
            "application-properties": {
                "my-application-property": {"value": "my-application-property-value"},
            },
        },
    })
    props = {"message-id": "m-1", "to": "https://broker/orders", "subject": "MyMessageType",
             "content-type": "application/json", "content-encoding": "gzip"}
    app = {"my-application-property": "my-application-property-value"}
    ok = NativeMessage("AMQP/1.0", {"properties": props, "application-properties": app})
    result = conv.matcher.match(ok)
    assert result.matched and result.context == {"host": "broker", "queue": "orders"}
    no_id = dict(props)
    del no_id["message-id"]
    assert not conv.matcher.match(
        NativeMessage("AMQP/1.0", {"properties": no_id, "application-properties": app})).matched


def test_mqtt_example_and_kafka_example_and_nats_example():
    mqtt = converter_for({"protocol": "MQTT/5.0", "protocoloptions": {
        "qos": 1, "retain": False, "topic_name": "mytopic",
        "user_properties": [{"name": "My Application Property", "value": "Value 1"}]}})
    good = NativeMessage("MQTT/5.0", {"topic_name": "mytopic", "qos": 1, "retain": False,
                                      "user_properties": [{"name": "My Application Property",
                                                           "value": "Value 1"}]})
    assert mqtt.matcher.match(good).matched
    assert not mqtt.matcher.match(NativeMessage("MQTT/5.0", dict(good.fields, qos=0))).matched

    kafka = converter_for({"protocol": "Kafka", "protocoloptions": {"topic": "mytopic",
                                                                    "key": "thisdevice"}})
    assert kafka.matcher.match(NativeMessage("KAFKA", {"topic": "mytopic",
                                                        "key": "thisdevice"})).matched
    assert not kafka.matcher.match(NativeMessage("KAFKA", {"topic": "mytopic",
                                                            "key": "other"})).matched

    nats = converter_for({"protocol": "NATS", "protocoloptions": {"subject": "mytopic",
                                                                  "reply-to": "replytopic"}})
    assert nats.matcher.match(NativeMessage("NATS", {"subject": "mytopic",
                                                      "reply-to": "replytopic"})).matched
    assert not nats.matcher.match(NativeMessage("NATS", {"subject": "mytopic"})).matched


def test_basemessage_merging_overlay_adds_protocol_to_cloudevent_base():
    doc = {"messagegroups": {
        "myEvents": {"envelope": "CloudEvents/1.0", "messages": {"A": {
            "envelope": "CloudEvents/1.0",
            "envelopemetadata": {"type": {"value": "com.example.A"},
                                 "source": {"value": "/devices/{device}",
                                            "type": "uritemplate"}}}}},
        "myEventsMqtt": {"envelope": "CloudEvents/1.0", "protocol": "MQTT/5.0", "messages": {
            "A-mqtt": {"basemessage": "/messagegroups/myEvents/messages/A",
                       "protocol": "MQTT/5.0",
                       "protocoloptions": {"topic_name": "devices/{device}/a"}}}},
    }}
    catalog = read_document(doc, "base.json")
    assert not catalog.errors
    overlay = catalog.message("/messagegroups/myEventsMqtt/messages/A-mqtt")
    assert overlay is not None and overlay.protocol == "MQTT/5.0"
    out = Converter([overlay]).convert(
        NativeMessage("MQTT/5.0", {"topic_name": "devices/d7/a"}, data=1), now=NOW)
    assert out.ok
    attrs = out.event.get_attributes()
    assert attrs["type"] == "com.example.A" and attrs["source"] == "/devices/d7"
    # and the reverse: the CloudEvent renders back to the MQTT topic
    native = render_native(overlay, out.event)
    assert not isinstance(native, RenderError)
    assert native.fields["topic_name"] == "devices/d7/a"
