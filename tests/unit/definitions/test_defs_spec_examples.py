"""The examples printed in message-definitions-1.0-rc2 (and the early endpoint draft) read
as the spec describes them. JSON syntax slips in the printed text (a missing comma, trailing
commas, `# comments`) are fixed; nothing else is changed."""

from __future__ import annotations

import json
from typing import Any

from gateway.definitions import read_document
from gateway.definitions.model import Catalog, MessageDefinition, Property
from gateway.protocols import AMQP, HTTP, KAFKA, MQTT5, NATS

# "Context Attributes" (the comma after the topic_name value is missing in the spec text).
CONTEXT_ATTRIBUTES = """
{
  "protocol": "MQTT/5.0",
  "protocoloptions": {
    "topic_name": "/store/{storeid}/cashierdesk/{cdid}",
    "user_properties" : [
      { "name": "eventType", "type": "uritemplate", "value": "{eventType}" }
    ]
  },
  "envelope": "CloudEvents/1.0",
  "envelopeoptions": {
    "type": { "type": "uritemplate", "value": "{eventType}" },
    "source": { "type": "uritemplate", "value": "{storeid}" },
    "subject": { "type": "uritemplate", "value": "{cdid}" }
  }
}
"""

# "CloudEvents/1.0" envelope example (trailing comma after "time" removed).
CLOUDEVENTS = """
{
  "envelope": "CloudEvents/1.0",
  "envelopemetadata": {
    "type": { "value": "com.example.myevent" },
    "source": { "value": "https://{tenant}/{module}/myevent", "type": "uritemplate" },
    "subject": { "type": "uri" },
    "time": { "required": true }
  },
  "dataschemaformat": "JsonSchema/draft-07",
  "dataschemauri": "https://example.com/schemas/com.example.myevent.json"
}
"""

# HTTP example (trailing comma after dataschemauri removed).
HTTP_EXAMPLE = """
{
  "protocol": "HTTP",
  "protocoloptions": {
    "headers": [ { "name": "Content-Type", "value": "application/json" } ],
    "query": [ { "name": "foo", "value": "bar" } ],
    "path": "/foo/{bar}",
    "method": "POST"
  },
  "dataschemaformat": "JsonSchema/draft-07",
  "dataschemauri": "https://example.com/schemas/com.example.myevent.json"
}
"""

AMQP_EXAMPLE = """
{
  "protocol": "AMQP/1.0",
  "protocoloptions": {
    "properties": {
      "message-id": { "required": true },
      "to": { "value": "https://{host}/{queue}" },
      "subject": { "value": "MyMessageType", "required": true },
      "content-type": { "value": "application/json" },
      "content-encoding": { "value": "gzip" }
    },
    "application-properties": {
      "my-application-property": { "value": "my-application-property-value" }
    }
  }
}
"""

MQTT_EXAMPLE = """
{
  "protocol": "MQTT/5.0",
  "protocoloptions": {
    "qos": 1,
    "retain":  false,
    "topic_name": "mytopic",
    "user_properties": [ { "name": "My Application Property", "value": "Value 1" } ]
  }
}
"""

KAFKA_EXAMPLE = """
{"protocol": "Kafka", "protocoloptions": {"topic": "mytopic", "key": "thisdevice"}}
"""
NATS_EXAMPLE = """
{"protocol": "NATS", "protocoloptions": {"subject": "mytopic", "reply-to": "replytopic"}}
"""

# "envelope" illustrating example: message groups borrowing a message with {"uri": ...}
# (`# details ...` comments removed; the second message's copy-pasted messageid kept).
BORROWING = """
{
  "messagegroups": {
    "com.example.abc": {
      "messagegroupid": "com.example.abc",
      "envelope": "CloudEvents/1.0",
      "messages": {
        "com.example.abc.event1": {
          "messageid": "com.example.abc.event1",
          "envelope": "CloudEvents/1.0"
        },
        "com.example.abc.event2": {
          "messageid": "com.example.abc.event1",
          "envelope": "CloudEvents/1.0"
        }
      }
    },
    "com.example.def": {
      "messagegroupid": "com.example.def",
      "envelope": "CloudEvents/1.0",
      "messages": {
        "com.example.abc.event1": {
          "uri": "#/messagegroups/com.example.abc/messages/com.example.abc.event1"
        }
      }
    }
  }
}
"""

# Early endpoint draft: compact MQTT consumer endpoint with an inline definition (0.5 shape).
EARLY_DRAFT: dict[str, Any] = {
    "$schema": "https://cloudevents.io/schemas/registry",
    "specversion": "0.5-wip",
    "id": "urn:uuid:3978344f-8596-4c3a-a978-8fc9a6a469f7",
    "endpoints": {
        "com.example.telemetry": {
            "id": "com.example.telemetry",
            "usage": "consumer",
            "config": {
                "protocol": "MQTT/5.0",
                "strict": False,
                "endpoints": ["mqtt://mqtt.example.com:1883"],
                "options": {"topic": "{deviceid}/telemetry"},
            },
            "format": "CloudEvents/1.0",
            "definitions": {
                "com.example.telemetry": {
                    "id": "com.example.telemetry",
                    "description": "device telemetry event",
                    "format": "CloudEvents/1.0",
                    "metadata": {"attributes": {
                        "id": {"type": "string", "required": True},
                        "type": {"type": "string", "value": "com.example.telemetry",
                                 "required": True},
                        "time": {"type": "datetime", "required": True},
                        "source": {"type": "uritemplate", "value": "{deploymentid}/{deviceid}",
                                   "required": True},
                    }},
                    "schemaformat": "Protobuf/3.0",
                    "schema": 'syntax = "proto3"; message Metrics { float metric = 1; } }',
                }
            },
        }
    },
}


def _message(text: str) -> tuple[Catalog, MessageDefinition]:
    catalog = read_document({"messagegroups": {"g": {"messages": {"m": json.loads(text)}}}},
                            file="spec.json")
    m = catalog.message("/messagegroups/g/messages/m")
    assert m is not None
    assert catalog.errors == [], [str(p) for p in catalog.errors]
    return catalog, m


def _options(m: MessageDefinition) -> dict[tuple[str, str | None], Property]:
    return {(c.field, c.name): c.prop for c in m.protocol_options}


def test_context_attributes_example() -> None:
    catalog, m = _message(CONTEXT_ATTRIBUTES)
    assert m.protocol == MQTT5 and m.is_cloudevent
    options = _options(m)
    assert options[("topic_name", None)].value == "/store/{storeid}/cashierdesk/{cdid}"
    assert options[("user_properties", "eventType")].type == "uritemplate"
    assert {k: (p.type, p.value) for k, p in m.envelope_metadata.items()} == {
        "type": ("uritemplate", "{eventType}"),
        "source": ("uritemplate", "{storeid}"),
        "subject": ("uritemplate", "{cdid}"),
    }
    assert m.envelope_metadata["type"].required and m.envelope_metadata["source"].required
    assert m.envelope_options == {}
    (warning,) = catalog.warnings
    assert warning.message == ("attribute declarations under envelopeoptions "
                               "(type, source, subject) read as envelopemetadata")


def test_cloudevents_example() -> None:
    _, m = _message(CLOUDEVENTS)
    meta = m.envelope_metadata
    assert (meta["type"].type, meta["type"].value, meta["type"].required) == (
        "string", "com.example.myevent", True)
    assert meta["source"].value == "https://{tenant}/{module}/myevent"
    assert (meta["subject"].type, meta["subject"].has_value) == ("uri", False)
    assert (meta["time"].type, meta["time"].required) == ("timestamp", True)
    assert m.dataschemauri == "https://example.com/schemas/com.example.myevent.json"


def test_http_example() -> None:
    _, m = _message(HTTP_EXAMPLE)
    assert m.protocol == HTTP
    options = _options(m)
    assert options[("headers", "Content-Type")].value == "application/json"
    assert options[("query", "foo")].value == "bar"
    assert (options[("path", None)].type, options[("path", None)].value) == (
        "uritemplate", "/foo/{bar}")
    assert options[("method", None)].value == "POST"


def test_amqp_example() -> None:
    _, m = _message(AMQP_EXAMPLE)
    assert m.protocol == AMQP
    options = _options(m)
    assert options[("properties", "message-id")].required is True
    assert options[("properties", "to")].type == "uritemplate"
    assert options[("properties", "subject")].value == "MyMessageType"
    assert options[("properties", "content-type")].type == "symbol"
    assert options[("application-properties", "my-application-property")].value == (
        "my-application-property-value")


def test_mqtt_example() -> None:
    catalog, m = _message(MQTT_EXAMPLE)
    assert catalog.warnings == []
    options = _options(m)
    assert options[("qos", None)].value == 1
    assert options[("retain", None)].value is False
    assert options[("topic_name", None)].value == "mytopic"
    assert options[("user_properties", "My Application Property")].value == "Value 1"


def test_kafka_example() -> None:
    _, m = _message(KAFKA_EXAMPLE)
    assert m.protocol == KAFKA
    assert {c.field: c.prop.value for c in m.protocol_options} == {"topic": "mytopic",
                                                                   "key": "thisdevice"}


def test_nats_example() -> None:
    _, m = _message(NATS_EXAMPLE)
    assert m.protocol == NATS
    assert {c.field: c.prop.value for c in m.protocol_options} == {"subject": "mytopic",
                                                                   "reply-to": "replytopic"}


def test_borrowing_example() -> None:
    catalog = read_document(json.loads(BORROWING), file="spec.json")
    # The example is abbreviated: its two messages declare an envelope without the
    # envelopemetadata rc2 requires with one. Those are the only errors.
    assert [(p.path.rsplit(".", 1)[-1], p.message) for p in catalog.errors] == [
        ("envelope", "a message with an envelope must declare envelopemetadata")] * 2
    borrowed = catalog.message("/messagegroups/com.example.def/messages/com.example.abc.event1")
    assert borrowed is not None
    assert borrowed.envelope == "CloudEvents/1.0"
    assert borrowed.base_chain == (
        "/messagegroups/com.example.abc/messages/com.example.abc.event1",)
    (mismatch,) = [p for p in catalog.warnings if "messageid" in p.message]
    assert mismatch.path == (
        '$.messagegroups["com.example.abc"].messages["com.example.abc.event2"].messageid')


def test_early_draft_compact_endpoint() -> None:
    catalog = read_document(EARLY_DRAFT, file="draft.cereg")
    assert catalog.errors == []
    endpoint = catalog.endpoints["com.example.telemetry"]
    assert endpoint.usage == ("consumer",)
    assert endpoint.protocol == MQTT5
    assert endpoint.envelope == "CloudEvents/1.0"
    assert endpoint.protocol_options == {
        "endpoints": [{"uri": "mqtt://mqtt.example.com:1883"}],
        "topic": "{deviceid}/telemetry",
    }
    (m,) = endpoint.messages
    assert m.xid == "/endpoints/com.example.telemetry/messages/com.example.telemetry"
    assert m.protocol == MQTT5  # the endpoint's protocol is the default of inline messages
    assert m.envelope_metadata["time"].type == "timestamp"
    assert m.dataschemaformat == "Protobuf/3.0"
    assert isinstance(m.dataschema, str)
