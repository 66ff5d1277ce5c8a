"""Outgoing records (gateway.envelope.outgoing): an event rendered for one output, without
a route or an event loop: binding modes, native delivery, defaults, trace propagation and
the dead-letter record of a batch member."""

from __future__ import annotations

import pytest

from gateway.cloudevents.event import CloudEvent
from gateway.envelope.outgoing import (
    OutputFormat,
    RenderFailed,
    member_record,
    with_defaults,
    with_trace,
)
from gateway.record import NativeMessage

from .defs import define, opt, prop

TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def _event(**extra: str) -> CloudEvent:
    attrs = {"specversion": "1.0", "id": "e-1", "type": "com.example.sale",
             "source": "/stores/12", "subject": "desk-3", **extra}
    return CloudEvent.create(attrs, {"amount": 1})


def _traced() -> CloudEvent:
    return _event(traceparent=TRACEPARENT, tracestate="vendor=1")


# -- binding modes ------------------------------------------------------------------------


def test_binary_output_carries_the_attributes_as_headers_and_the_data_as_body() -> None:
    record = OutputFormat("KAFKA").render(_event(), {})
    headers = dict(record.pairs("headers"))
    assert record.protocol == "KAFKA"
    assert headers["ce_type"] == "com.example.sale" and headers["ce_id"] == "e-1"
    assert record.data == {"amount": 1}


def test_structured_output_carries_the_whole_event_as_body() -> None:
    record = OutputFormat("NATS", mode="structured").render(_event(), {})
    assert record.data["type"] == "com.example.sale"
    assert record.data["data"] == {"amount": 1}
    assert "ce-type" not in dict(record.pairs("headers"))


def test_a_binding_that_cannot_carry_the_event_fails_to_render() -> None:
    with pytest.raises(RenderFailed, match="binary mode is impossible"):
        OutputFormat("MQTT/3.1.1", mode="binary").render(_event(), {})
    assert OutputFormat("MQTT/3.1.1", mode="structured").render(_event(), {}).data["id"] == "e-1"


# -- native delivery ----------------------------------------------------------------------

SALE_TARGET = define("sale", "KAFKA", [opt("topic", "sales.{storeid}"), opt("key", "{subject}")],
                     {"type": prop("com.example.sale"), "source": prop("/stores/{storeid}")})
OTHER_TARGET = define("other", "KAFKA", [opt("topic", "other")],
                      {"type": prop("com.example.other")})


def test_native_output_renders_the_definition_declaring_the_event_type() -> None:
    native = OutputFormat("KAFKA", deliver="native", definitions=(OTHER_TARGET, SALE_TARGET))
    record = native.render(_event(), {})
    assert record.fields["topic"] == "sales.12"  # storeid captured from the source
    assert record.fields["key"] == "desk-3"
    assert record.data == {"amount": 1}


def test_native_output_finds_the_target_of_a_type_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The scan of the producer's definitions runs once per event type, not per event."""
    from gateway.envelope import outgoing

    scans: list[str] = []
    scan = outgoing._target_definition

    def counted(definitions: object, event: CloudEvent) -> object:
        scans.append(event.get_type())
        return scan(definitions, event)  # type: ignore[arg-type]

    monkeypatch.setattr(outgoing, "_target_definition", counted)
    native = OutputFormat("KAFKA", deliver="native", definitions=(OTHER_TARGET, SALE_TARGET))
    assert [native.render(_event(), {}).fields["topic"] for _ in range(3)] == ["sales.12"] * 3
    assert scans == ["com.example.sale"]


def test_native_output_takes_the_only_native_definition_when_none_declares_the_type() -> None:
    plain = define("plain", "KAFKA", [opt("topic", "all")])
    record = OutputFormat("KAFKA", deliver="native", definitions=(plain,)).render(_event(), {})
    assert record.fields["topic"] == "all"


def test_native_output_without_a_fitting_definition_fails_to_render() -> None:
    # Two candidates, neither for this type: no guess.
    untyped = define("untyped", "KAFKA", [opt("topic", "x")])
    native = OutputFormat("KAFKA", deliver="native", definitions=(OTHER_TARGET, untyped))
    with pytest.raises(RenderFailed, match=r"no message definition .* 'com\.example\.sale'"):
        native.render(_event(), {})


def test_native_output_names_a_placeholder_without_a_value() -> None:
    target = define("keyed", "KAFKA", [opt("topic", "t"), opt("key", "{orderid}")],
                    {"type": prop("com.example.sale")})
    native = OutputFormat("KAFKA", deliver="native", definitions=(target,))
    with pytest.raises(RenderFailed, match="orderid"):
        native.render(_event(), {})
    assert native.render(_event(), {"orderid": "7"}).fields["key"] == "7"


# -- partitioning key ---------------------------------------------------------------------


def test_a_key_goes_where_the_record_has_none() -> None:
    record = OutputFormat("KAFKA", defaults={"topic": "t"}).render(_event(), {}, ("key", "k1"))
    assert record.fields["key"] == "k1" and record.fields["topic"] == "t"
    assert record.data == {"amount": 1}


def test_the_events_partitionkey_wins_over_a_key() -> None:
    record = OutputFormat("KAFKA").render(_event(partitionkey="pk"), {}, ("key", "k1"))
    assert record.fields["key"] == "pk"


def test_a_native_record_keeps_its_own_key_and_gets_one_when_it_has_none() -> None:
    native = OutputFormat("KAFKA", deliver="native", definitions=(SALE_TARGET,))
    assert native.render(_event(), {}, ("key", "k1")).fields["key"] == "desk-3"
    plain = define("plain", "KAFKA", [opt("topic", "all")])
    unkeyed = OutputFormat("KAFKA", deliver="native", definitions=(plain,))
    record = unkeyed.render(_event(), {}, ("key", "k1"))
    assert record.fields["topic"] == "all" and record.fields["key"] == "k1"
    assert record.data == {"amount": 1}
    assert "key" not in unkeyed.render(_event(), {}).fields


def test_a_traced_record_keeps_its_key() -> None:
    record = OutputFormat("KAFKA").render(_traced(), {}, ("key", "k1"))
    assert record.fields["key"] == "k1"
    assert dict(record.pairs("headers"))["traceparent"] == TRACEPARENT


# -- defaults -----------------------------------------------------------------------------


def test_defaults_fill_missing_fields_only() -> None:
    output = OutputFormat("KAFKA", defaults={"topic": "events", "headers": [], "partition": 2})
    record = output.render(_event(), {})
    assert record.fields["topic"] == "events" and record.fields["partition"] == 2
    assert dict(record.pairs("headers"))["ce_type"] == "com.example.sale"  # kept


def test_default_templates_use_event_attributes_and_the_match_context_which_wins() -> None:
    output = OutputFormat("KAFKA", defaults={"topic": "{subject}.{storeid}", "key": "{type}"})
    record = output.render(_event(), {"storeid": "12", "subject": "from-match"})
    assert record.fields["topic"] == "from-match.12"
    assert record.fields["key"] == "com.example.sale"


def test_a_native_record_gets_the_defaults_it_lacks_filled_as_a_binding_record_does() -> None:
    # The native path applies the endpoint's defaults too, templated from the event's
    # attributes and the match context (which wins); a field the definition gives stays.
    native = OutputFormat("KAFKA", deliver="native", definitions=(SALE_TARGET,),
                          defaults={"topic": "ignored", "partition": "{region}",
                                    "timestamp": "{subject}"})
    record = native.render(_event(), {"region": "7", "subject": "from-match"})
    assert record.fields["topic"] == "sales.12"
    assert (record.fields["partition"], record.fields["timestamp"]) == ("7", "from-match")
    # Without the context, only the event's attributes fill a placeholder.
    only_event = OutputFormat("KAFKA", deliver="native", definitions=(SALE_TARGET,),
                              defaults={"timestamp": "{subject}"})
    assert only_event.render(_event(), {}).fields["timestamp"] == "desk-3"


def test_a_default_template_without_a_value_fails_to_render_naming_it() -> None:
    missing = r"topic template '\{region\}\.x': no value for .*region"
    with pytest.raises(RenderFailed, match=missing):
        OutputFormat("KAFKA", defaults={"topic": "{region}.x"}).render(_event(), {})


def test_with_defaults_without_an_event_fills_constants() -> None:
    record = NativeMessage("KAFKA", {"headers": []}, payload=b"x")
    assert with_defaults(record, {}) is record
    assert with_defaults(record, {"headers": [{"name": "a", "value": "b"}]}) is record
    dead = with_defaults(record, {"topic": "dead"})
    assert dead.fields == {"headers": [], "topic": "dead"} and dead.payload == b"x"
    with pytest.raises(RenderFailed):
        with_defaults(record, {"topic": "dead.{type}"})


# -- trace propagation --------------------------------------------------------------------


@pytest.mark.parametrize(("protocol", "key"), [
    ("KAFKA", "headers"), ("NATS", "headers"), ("HTTP", "headers"),
])
def test_trace_context_becomes_the_protocols_own_header(protocol: str, key: str) -> None:
    record = OutputFormat(protocol).render(_traced(), {})
    pairs = [(p["name"], p["value"]) for p in record.fields[key]]
    assert ("traceparent", TRACEPARENT) in pairs and ("tracestate", "vendor=1") in pairs


def test_trace_context_on_amqp_is_an_application_property() -> None:
    record = OutputFormat("AMQP/1.0").render(_traced(), {})
    section = record.fields["application-properties"]
    assert section["traceparent"] == TRACEPARENT and section["tracestate"] == "vendor=1"
    assert section["cloudEvents_traceparent"] == TRACEPARENT  # the binding's own, kept


def test_trace_context_on_mqtt5_is_not_written_twice() -> None:
    # The MQTT binding names the attribute `traceparent` already: nothing is added.
    record = OutputFormat("MQTT/5.0").render(_traced(), {})
    names = [p["name"] for p in record.fields["user_properties"]]
    assert names.count("traceparent") == 1 and names.count("tracestate") == 1


def test_an_existing_trace_header_is_kept() -> None:
    record = NativeMessage("KAFKA", {"headers": [{"name": "traceparent", "value": "mine"}]})
    traced = with_trace(record, _traced())
    assert traced.pairs("headers") == [("traceparent", "mine"), ("tracestate", "vendor=1")]


def test_without_trace_context_or_headers_the_record_is_unchanged() -> None:
    record = NativeMessage("KAFKA", {"headers": []}, data={"n": 1})
    assert with_trace(record, _event()) is record
    mqtt311 = NativeMessage("MQTT/3.1.1", {"topic_name": "t"}, data={"n": 1})
    assert with_trace(mqtt311, _traced()) is mqtt311


# -- batch members ------------------------------------------------------------------------


def test_a_member_of_an_http_request_is_dead_lettered_alone_as_a_structured_event() -> None:
    request = NativeMessage(
        "HTTP", {"method": "POST", "path": "/hooks",
                 "headers": [{"name": "content-type",
                              "value": "application/cloudevents-batch+json"}]},
        data=[{"id": "1"}, {"id": "2"}], received_at="2026-11-21T09:00:00Z")
    member = member_record(request, _event())
    assert member.fields["path"] == "/hooks" and member.fields["method"] == "POST"
    assert dict(member.pairs("headers"))["content-type"].startswith(
        "application/cloudevents+json")
    assert member.data["id"] == "e-1" and member.data["data"] == {"amount": 1}
    assert member.received_at == request.received_at


def test_other_sources_are_dead_lettered_as_they_came() -> None:
    source = NativeMessage("KAFKA", {"topic": "in"}, payload=b"\x00raw")
    assert member_record(source, _event()) is source
    request = NativeMessage("HTTP", {"method": "POST"}, payload=b"junk")
    assert member_record(request, None) is request
