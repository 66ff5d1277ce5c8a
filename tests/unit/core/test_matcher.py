from gateway.matching.matcher import Matcher
from gateway.record import NativeMessage

from .defs import CASHIER, define, opt, prop


def mqtt(topic, **fields):
    return NativeMessage("MQTT/5.0", {"topic_name": topic, **fields})


def test_spec_context_attributes_example_matches_and_captures():
    m = Matcher([CASHIER])
    r = mqtt("/store/12/cashierdesk/3",
             user_properties=[{"name": "other", "value": "x"},
                              {"name": "eventType", "value": "sale"}])
    result = m.match(r)
    assert result.matched and result.definition is CASHIER
    assert dict(result.context) == {"storeid": "12", "cdid": "3", "eventType": "sale"}


def test_missing_user_property_fails_and_explain_names_first_failure():
    m = Matcher([CASHIER])
    assert m.match(mqtt("/store/12/cashierdesk/3")).status == "unmatched"
    [hint] = m.explain(mqtt("/store/12/desk/3"))
    assert hint.definition == CASHIER.xid
    assert hint.failure == (
        "topic_name: expected /store/{storeid}/cashierdesk/{cdid}, got /store/12/desk/3"
    )


def test_constants_types_required_and_repeated_entries():
    d = define("d", "KAFKA", [
        opt("topic", "orders"),
        opt("partition", 2, type="integer"),
        opt("headers", "created", name="action"),
        opt("headers", name="trace", required=True),
    ])
    m = Matcher([d])
    base = {"topic": "orders", "partition": 2,
            "headers": [{"name": "action", "value": "x"}, {"name": "action", "value": "created"},
                        {"name": "trace", "value": "t"}]}
    assert m.match(NativeMessage("KAFKA", base)).matched
    no_trace = dict(base, headers=base["headers"][:2])
    assert not m.match(NativeMessage("KAFKA", no_trace)).matched
    assert not m.match(NativeMessage("KAFKA", dict(base, partition=3))).matched
    assert not m.match(NativeMessage("KAFKA", dict(base, topic="other"))).matched


def test_http_headers_case_insensitive_and_path_percent_decoded():
    d = define("h", "HTTP", [opt("path", "/items/{name}", type="uritemplate"),
                             opt("method", "POST"),
                             opt("headers", "application/json", name="Content-Type")])
    r = NativeMessage("HTTP", {"method": "POST", "path": "/items/a%20b",
                               "headers": [{"name": "content-type",
                                            "value": "application/json"}]})
    result = Matcher([d]).match(r)
    assert result.matched and result.context == {"name": "a b"}


def test_placeholder_consistency_across_fields():
    d = define("n", "NATS", [opt("subject", "orders.{region}", type="uritemplate"),
                             opt("headers", "{region}", name="region")])
    m = Matcher([d])
    ok = NativeMessage("NATS", {"subject": "orders.eu",
                                "headers": [{"name": "region", "value": "eu"}]})
    bad = NativeMessage("NATS", {"subject": "orders.eu",
                                 "headers": [{"name": "region", "value": "us"}]})
    assert m.match(ok).matched
    assert not m.match(bad).matched
    [hint] = m.explain(bad)
    assert "{region}" in hint.failure and "'us'" in hint.failure


def test_most_specific_wins_and_true_tie_follows_policy():
    general = define("general", "MQTT/5.0", [opt("topic_name", "/store/{a}/{b}",
                                                 type="uritemplate")])
    specific = define("specific", "MQTT/5.0", [opt("topic_name", "/store/{a}/desk",
                                                   type="uritemplate")])
    twin = define("twin", "MQTT/5.0", [opt("topic_name", "/store/{x}/desk",
                                           type="uritemplate")])
    r = mqtt("/store/1/desk")
    assert Matcher([general, specific]).match(r).definition is specific
    first = Matcher([general, specific, twin]).match(r)
    assert first.matched and first.definition is specific
    assert [d.message_id for d in first.tied] == ["specific", "twin"]
    dead = Matcher([specific, twin], ambiguity="deadletter").match(r)
    assert dead.status == "ambiguous" and len(dead.tied) == 2


def test_schema_breaks_ties_when_enabled():
    schema_a = {"type": "object", "required": ["a"]}
    schema_b = {"type": "object", "required": ["b"]}
    a = define("a", "NATS", [opt("subject", "s")], dataschemaformat="JsonSchema/draft-07",
               dataschema=schema_a)
    b = define("b", "NATS", [opt("subject", "s")], dataschemaformat="JsonSchema/draft-07",
               dataschema=schema_b)
    r = NativeMessage("NATS", {"subject": "s"}, data={"b": 1})
    assert Matcher([a, b], validate_schema=True).match(r).definition is b
    assert Matcher([a, b]).match(r).definition is a  # first declared without validation


def test_envelope_only_definitions_apply_to_cloudevents_over_any_protocol():
    ce = define("ce", None, None, {"type": prop("com.example.sale"),
                                   "source": prop("/stores/{storeid}", type="uritemplate")})
    m = Matcher([ce])
    event = {"specversion": "1.0", "id": "1", "type": "com.example.sale",
             "source": "/stores/12"}
    for protocol, fields in [("KAFKA", {"topic": "t"}), ("NATS", {"subject": "s"}),
                             ("HTTP", {"path": "/"}), ("MQTT/3.1.1", {"topic_name": "t"})]:
        result = m.match(NativeMessage(protocol, fields), event)
        assert result.matched and result.context == {"storeid": "12"}
    assert not m.match(NativeMessage("KAFKA", {"topic": "t"})).matched  # native: no
    assert not m.match(NativeMessage("KAFKA", {}), dict(event, type="other")).matched


def test_cloudevent_over_protocol_is_matched_on_both_parts():
    d = define("both", "KAFKA", [opt("topic", "orders")],
               {"type": prop("order.created"), "source": prop("{shop}", type="uritemplate")})
    m = Matcher([d])
    event = {"specversion": "1.0", "id": "1", "type": "order.created", "source": "s1"}
    assert m.match(NativeMessage("KAFKA", {"topic": "orders"}), event).context == {"shop": "s1"}
    assert not m.match(NativeMessage("KAFKA", {"topic": "orders"}),
                       dict(event, type="order.deleted")).matched


def test_mqtt_versions_share_definitions():
    d = define("v3", "MQTT/3.1.1", [opt("topic_name", "a/{b}", type="uritemplate"),
                                    opt("qos", 1, type="integer")])
    m = Matcher([d])
    assert m.match(NativeMessage("MQTT/5.0", {"topic_name": "a/1", "qos": 1})).matched
    assert m.match(NativeMessage("MQTT/3.1.1", {"topic_name": "a/1", "qos": 1})).matched
    assert not m.match(NativeMessage("MQTT/3.1.1", {"topic_name": "a/1", "qos": 0})).matched


def test_index_finds_every_kind_of_address():
    defs = [
        define("exact", "NATS", [opt("subject", "a.b")]),
        define("prefix", "NATS", [opt("subject", "a.{x}", type="uritemplate")]),
        define("lone", "NATS", [opt("subject", "{whole}", type="uritemplate")]),
        define("none", "NATS", [opt("headers", "1", name="v")]),
        define("seg", "NATS", [opt("subject", "p/{x}/q", type="uritemplate")]),
    ]
    m = Matcher(defs)
    names = lambda subject: {c.definition.message_id for c in m.candidates(  # noqa: E731
        NativeMessage("NATS", {"subject": subject}))}
    assert names("a.b") == {"exact", "prefix", "lone", "none"}
    assert names("p/1/q") == {"seg", "lone", "none"}
    assert names("zzz") == {"lone", "none"}


def test_many_definitions_only_few_candidates():
    defs = [define(f"d{i}", "MQTT/5.0",
                   [opt("topic_name", f"/site/{i}/{{dev}}/t{i % 7}", type="uritemplate")])
            for i in range(2000)]
    m = Matcher(defs)
    r = mqtt("/site/1234/dev9/t2")
    assert len(m.candidates(r)) == 1
    assert m.match(r).definition.message_id == "d1234"
