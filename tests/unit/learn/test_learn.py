"""The learner's judgement: placeholders named after payload fields, one definition per
kind of message (never per device), constants and left-out places, the knobs."""

from __future__ import annotations

import json

from gateway.convert import Converter
from gateway.definitions import load_catalog
from gateway.learn import LearnOptions, Proposal, draft_document, learn
from gateway.learn.generalise import is_id_like
from gateway.learn.slots import composition
from gateway.record import NativeMessage

from .records import kafka, mqtt, store_traffic


def by_address(proposals: list[Proposal]) -> dict[str | None, Proposal]:
    return {p.address: p for p in proposals}


def test_a_placeholder_is_named_after_the_payload_field_with_its_value():
    result = learn(store_traffic())
    addresses = sorted(p.address or "" for p in result.proposals)
    assert addresses == [f"/store/{{storeid}}/cashierdesk/{{segment4}}/{kind}"
                         for kind in ("open", "refund", "sale")]
    sale = by_address(result.proposals)["/store/{storeid}/cashierdesk/{segment4}/sale"]
    [store, desk] = sale.placeholders.values()
    assert (store.name, store.named_after, store.cardinality) == ("storeid", "storeid", 30)
    assert (desk.name, desk.named_after, desk.cardinality) == ("segment4", None, 6)
    assert sale.count == 180 and sale.subject == "{segment4}"


def test_one_definition_per_kind_not_per_device():
    # 500 devices with word-free serials: the device segment is a placeholder.
    records = [mqtt(f"plant/dev{n}/{kind}", {"t": n}) for n in range(500)
               for kind in ("temperature", "humidity")]
    result = learn(records)
    assert sorted(p.address or "" for p in result.proposals) == [
        "plant/{segment1}/humidity", "plant/{segment1}/temperature"]


def test_a_few_word_values_split_many_become_a_placeholder():
    few = [mqtt(f"site/{kind}/x", {}) for kind in ("alpha", "beta", "gamma") for _ in range(3)]
    assert len(learn(few).proposals) == 3
    many = [mqtt(f"site/{chr(97 + a)}{chr(97 + b)}/x", {}) for a in range(10)
            for b in range(10) for _ in range(2)]
    [only] = learn(many).proposals
    assert only.address == "site/{segment1}/x"
    # the knob: with room for 100 word values each becomes its own definition
    assert len(learn(many, LearnOptions(max_constant_values=100)).proposals) == 100


def test_split_on_and_merge_override_the_counts():
    records = store_traffic(stores=3, desks=2)
    split = learn(records, LearnOptions(split_on=frozenset({"topic_name[4]"})))
    assert len(split.proposals) == 6  # 3 kinds x 2 desks
    merged = learn(records, LearnOptions(merge=frozenset({"topic_name[5]"})))
    [only] = merged.proposals
    assert only.address == "/store/{storeid}/cashierdesk/{segment4}/{segment5}"


def test_constant_headers_are_constants_varying_ones_left_out_or_templated():
    records = [kafka("telemetry", f"dev-{n}",
                     {"action": action, "deviceid": f"dev-{n}", "traceparent": f"00-{n}x"},
                     {"deviceid": f"dev-{n}", "v": 1})
               for n in range(20) for action in ("motiondetected", "motionended")]
    result = learn(records)
    assert len(result.proposals) == 2
    detected = next(p for p in result.proposals if "motiondetected" in p.message_id)
    assert detected.options["headers"] == {"action": {"value": "motiondetected"},
                                           "deviceid": {"value": "{deviceid}"}}
    assert detected.options["key"] == "{deviceid_2}"
    assert {s.path for s in detected.left_out} == {"headers.traceparent"}


def test_type_prefix_and_the_draft_is_a_valid_catalog_that_matches(tmp_path):
    records = store_traffic(stores=4, desks=2)
    options = LearnOptions(type_prefix="com.example.", group="stores")
    result = learn(records, options)
    path = tmp_path / "draft.xreg.json"
    path.write_text(json.dumps(draft_document(result.proposals, options)))
    catalog = load_catalog([path])
    assert catalog.errors == [] and catalog.warnings == []
    converter = Converter(list(catalog.messages()))
    outcome = converter.convert(mqtt("/store/9/cashierdesk/1/sale", {"storeid": "9"}, qos=1))
    assert outcome.ok
    event = outcome.to_json()["cloudevent"]
    assert event["type"] == "com.example.store.cashierdesk.sale"
    assert event["source"] == "/store/9/cashierdesk/1/sale" and event["subject"] == "1"
    definition = next(iter(catalog.messages()))
    assert definition.dataschemaformat == "JsonSchema/draft-07"
    assert "review" in (definition.description or "")


def test_payload_schema_is_inferred_and_non_json_bodies_get_their_content_type():
    records = [mqtt(f"a/{n}/json", {"n": n, "name": "x"}) for n in range(5)]
    records += [mqtt(f"a/{n}/raw", None, content_type="text/csv") for n in range(5)]
    options = LearnOptions()
    result = learn(records, options)
    document = draft_document(result.proposals, options)
    messages = document["messagegroups"]["learned"]["messages"]  # type: ignore[index]
    raw = next(m for k, m in messages.items() if k.endswith("raw"))
    assert raw["envelopemetadata"]["datacontenttype"] == {"value": "text/csv"}
    assert "dataschemauri" not in raw
    schema = document["schemagroups"]["learned"]["schemas"]  # type: ignore[index]
    [json_schema] = [s["versions"]["1"]["schema"] for s in schema.values()]
    assert json_schema["properties"]["n"] == {"type": "integer"}
    assert set(json_schema["required"]) == {"n", "name"}


def test_one_off_messages_are_left_out_and_reported():
    records = [*store_traffic(stores=2, desks=1), mqtt("odd/one", {})]
    result = learn(records)
    assert [p.address for p in result.dropped] == ["odd/one"]
    assert all(p.address != "odd/one" for p in result.proposals)
    assert [p.address for p in learn(records, LearnOptions(min_group_size=1)).dropped] == []


def test_id_like_values():
    assert all(map(is_id_like, ["12", "dev-4821", "3f9a0c12", "2026-11-24", "a1"]))
    assert not any(map(is_id_like, ["sale", "turned-on", "NBIRTH", "position-report"]))


def test_every_protocol_learns_its_own_address():
    records = [
        NativeMessage("AMQP/1.0", {"properties": {"subject": f"orders/{n}"},
                                   "application-properties": {"kind": "created"}}, data={})
        for n in range(5)]
    records += [NativeMessage("NATS", {"subject": f"metrics.host{n}.cpu"}, data={})
                for n in range(5)]
    records += [NativeMessage("HTTP", {"method": "POST", "path": f"/hooks/{n}",
                                       "query": {"src": "gh"}}, data={}) for n in range(5)]
    found = {p.protocol: p for p in learn(records).proposals}
    assert found["AMQP/1.0"].address == "orders/{segment1}"
    assert found["AMQP/1.0"].options["application-properties"] == {"kind": {"value": "created"}}
    assert found["NATS"].address == "metrics.{segment1}.cpu"
    assert found["HTTP"].address == "/hooks/{segment2}"
    assert found["HTTP"].options["query"] == {"src": {"value": "gh"}}


def test_messages_with_nothing_to_constrain_are_written_without_a_protocol(tmp_path):
    records = [NativeMessage("AMQP/1.0", {}, data={"n": n}) for n in range(4)]
    options = LearnOptions()
    result = learn(records, options)
    assert len(result.proposals) == 1
    document = draft_document(result.proposals, options)
    [definition] = document["messagegroups"]["learned"]["messages"].values()  # type: ignore[index]
    assert "protocol" not in definition and "add protocol and protocoloptions by hand" in \
        definition["description"]
    path = tmp_path / "draft.xreg.json"
    path.write_text(json.dumps(document))
    assert load_catalog([path]).errors == []


def test_a_kafka_key_alone_is_kept_as_a_template():
    records = [NativeMessage("KAFKA", {"key": f"{n}-{n * 3}"}, data={}) for n in range(5)]
    [only] = learn(records).proposals
    assert only.options == {"key": "{key}"}


def test_a_value_made_of_payload_fields_becomes_a_template_of_them():
    # word values (not id-like): without the composition they would split per value
    records = [NativeMessage("KAFKA", {"topic": "printers", "key": f"{site}-{unit}"},
                             data={"site": site, "unit": unit, "ink": 3})
               for site in ("north", "south", "east") for unit in ("alpha", "beta-2", "gamma")]
    [only] = learn(records).proposals
    assert only.options == {"topic": "printers", "key": "{site}-{unit}"}
    [info] = only.placeholders.values()
    assert (info.template, info.cardinality) == ("{site}-{unit}", 9)


def test_composition_tries_field_values_that_contain_separators():
    carried = {"dev-0012": ["device"], "eu": ["region"], "x": ["other"]}
    assert composition("eu/dev-0012", carried) == "Fregion\x1fL/\x1fFdevice"
    assert composition("eu", carried) is None  # one field: a plain name, not a composition
    assert composition("eu-unknown", carried) is None
