import uuid
from datetime import UTC, datetime

from gateway.envelope.ids import event_id
from gateway.envelope.native import render_native
from gateway.envelope.render import EnvelopeRenderer, EnvelopeTemplate, RenderError
from gateway.record import NativeMessage

from .defs import CASHIER, define, opt, prop

NOW = datetime(2026, 11, 21, 9, 0, tzinfo=UTC)
SALE = NativeMessage(
    "MQTT/5.0",
    {"topic_name": "/store/12/cashierdesk/3",
     "user_properties": [{"name": "eventType", "value": "com.example.sale"}]},
    data={"amount": 1},
)
CONTEXT = {"storeid": "12", "cdid": "3", "eventType": "com.example.sale"}


def test_spec_example_renders_the_cloudevent():
    event = EnvelopeRenderer().render(CASHIER, SALE, CONTEXT, NOW)
    assert not isinstance(event, RenderError)
    attrs = event.get_attributes()
    assert attrs["specversion"] == "1.0"
    assert (attrs["type"], attrs["source"], attrs["subject"]) == ("com.example.sale", "12", "3")
    assert attrs["time"] == NOW
    assert attrs["datacontenttype"] == "application/json"
    assert event.get_data() == {"amount": 1}
    assert attrs["id"]


def test_time_sentinel_and_received_at():
    d = define("t", "MQTT/5.0", [opt("topic_name", "x")],
               {"type": prop("t"), "source": prop("s"),
                "time": prop("0000-01-01T00:00:00Z", type="timestamp")})
    record = NativeMessage("MQTT/5.0", {"topic_name": "x"}, received_at="2026-01-02T03:04:05Z")
    event = EnvelopeTemplate(d).render(record, {}, NOW)
    assert not isinstance(event, RenderError)
    assert event.get_attributes()["time"] == datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def test_types_are_coerced_and_bad_values_are_errors():
    d = define("c", "KAFKA", [opt("topic", "t")],
               {"type": prop("t"), "source": prop("s"),
                "seq": prop("{n}", type="integer"), "flag": prop("{f}", type="boolean")})
    template = EnvelopeTemplate(d)
    ok = template.render(NativeMessage("KAFKA", {}), {"n": "42", "f": "true"}, NOW)
    assert not isinstance(ok, RenderError)
    assert ok.get_attributes()["seq"] == 42 and ok.get_attributes()["flag"] is True
    bad = template.render(NativeMessage("KAFKA", {}), {"n": "4.2", "f": "true"}, NOW)
    assert isinstance(bad, RenderError) and bad.reason == "invalid-envelope"
    assert "seq" in bad.message


def test_uri_reference_and_symbol_attributes_are_checked_when_rendered():
    d = define("u", "KAFKA", [opt("topic", "t")],
               {"type": prop("t"), "source": prop("s"),
                "link": prop("{l}", type="urireference"), "kind": prop("{k}", type="symbol")})
    template = EnvelopeTemplate(d)
    ok = template.render(NativeMessage("KAFKA", {}), {"l": "x/y?z=1", "k": "a_B9"}, NOW)
    assert not isinstance(ok, RenderError)
    assert (ok.get_attributes()["link"], ok.get_attributes()["kind"]) == ("x/y?z=1", "a_B9")
    for context, message in (
            ({"l": "a b", "k": "a_B9"}, "link: 'a b' is not a URI reference"),
            ({"l": "x/y?z=1", "k": "a-b"},
             "kind: 'a-b' is not a symbol (letters, digits, underscore)")):
        bad = template.render(NativeMessage("KAFKA", {}), context, NOW)
        assert isinstance(bad, RenderError) and bad.reason == "invalid-envelope"
        assert message in bad.message


def test_missing_placeholder_is_named():
    d = define("m", "KAFKA", [opt("topic", "t")],
               {"type": prop("t"), "source": prop("/x/{tenant}", type="uritemplate")})
    error = EnvelopeTemplate(d).render(NativeMessage("KAFKA", {}), {}, NOW)
    assert isinstance(error, RenderError) and error.reason == "missing-context"
    assert "{tenant}" in error.message and "source" in error.message


def test_invalid_definitions_fail_at_compile_time():
    no_type = define("nt", "KAFKA", [opt("topic", "t")], {"source": prop("s")})
    error = EnvelopeTemplate(no_type).render(NativeMessage("KAFKA", {}), {}, NOW)
    assert isinstance(error, RenderError) and "type" in error.message
    bad_name = define("bn", "KAFKA", [], {"type": prop("t"), "source": prop("s"),
                                          "Bad_Name": prop("x")})
    assert EnvelopeTemplate(bad_name).error is not None
    native_only = define("no", "KAFKA", [opt("topic", "t")])
    assert EnvelopeTemplate(native_only).error.reason == "no-envelope"


def test_ids_are_deterministic_from_native_identity():
    k1 = NativeMessage("KAFKA", {"topic": "t", "partition": 0, "offset": 5})
    k2 = NativeMessage("KAFKA", {"topic": "t", "partition": 0, "offset": 6})
    assert event_id(k1) == event_id(k1) != event_id(k2)
    amqp = NativeMessage("AMQP/1.0", {"properties": {"message-id": "m-1"}})
    assert event_id(amqp) == event_id(amqp)
    plain = NativeMessage("MQTT/3.1.1", {"topic_name": "x"})
    assert event_id(plain) != event_id(plain)  # random without identity


def test_event_id_of_an_identity_with_a_lone_surrogate_is_stable():
    # Text that UTF-8 cannot encode (a JSON "\ud800" escape) must not fail the message.
    k1 = NativeMessage("KAFKA", {"topic": "t\ud800", "partition": 0, "offset": 5})
    k2 = NativeMessage("KAFKA", {"topic": "t\udfff", "partition": 0, "offset": 5})
    assert event_id(k1) == event_id(k1) != event_id(k2)
    assert uuid.UUID(event_id(k1)).version == 5


def test_reverse_renders_native_message_from_cloudevent():
    event = EnvelopeRenderer().render(CASHIER, SALE, CONTEXT, NOW)
    assert not isinstance(event, RenderError)
    native = render_native(CASHIER, event)
    assert not isinstance(native, RenderError)
    assert native.protocol == "MQTT/5.0"
    assert native.fields["topic_name"] == "/store/12/cashierdesk/3"
    assert native.fields["user_properties"] == [
        {"name": "eventType", "value": "com.example.sale"}]
    assert native.fields["content_type"] == "application/json"
    assert native.data == {"amount": 1}


def test_reverse_names_the_missing_placeholder():
    target = define("k", "KAFKA", [opt("topic", "orders.{region}"), opt("key", "{orderid}")])
    error = render_native(target, None, {"region": "eu"})
    assert isinstance(error, RenderError) and "{orderid}" in error.message
    ok = render_native(target, None, {"region": "eu", "orderid": "7"})
    assert not isinstance(ok, RenderError)
    assert ok.fields == {"topic": "orders.eu", "key": "7"}
