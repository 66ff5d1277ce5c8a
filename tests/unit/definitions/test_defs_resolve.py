"""basemessage chains, deep merge, cycles, dangling references and borrowed messages."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gateway.definitions import load_catalog, read_document
from gateway.definitions.model import Catalog, MessageDefinition
from gateway.protocols import AMQP, MQTT5

BASE: dict[str, Any] = {
    "description": "base description",
    "envelope": "CloudEvents/1.0",
    "envelopemetadata": {
        "type": {"value": "com.example.event"},
        "source": {"type": "uritemplate", "value": "/{tenant}/devices"},
        "subject": {"value": "{device}"},
    },
    "dataschemaformat": "JsonSchema/draft-07",
    "dataschemauri": "#/schemagroups/s/schemas/event",
}


def _catalog(messages: dict[str, Any], **groups: dict[str, Any]) -> Catalog:
    doc = {"messagegroups": {"g": {"messages": messages},
                             **{k: {"messages": v} for k, v in groups.items()}}}
    return read_document(doc, file="doc.json")


def _get(catalog: Catalog, mid: str, group: str = "g") -> MessageDefinition:
    found = catalog.message(f"/messagegroups/{group}/messages/{mid}")
    assert found is not None
    return found


def test_deep_merge_objects_merge_scalars_and_arrays_replace() -> None:
    catalog = _catalog({
        "base": {**BASE, "protocol": "MQTT/5.0", "protocoloptions": {
            "qos": 1, "user_properties": [{"name": "a", "value": "1"},
                                          {"name": "b", "value": "2"}]}},
        "derived": {
            "basemessage": "/messagegroups/g/messages/base",
            "envelopemetadata": {"subject": {"value": "{other}"}, "time": {"required": True}},
            "protocoloptions": {"topic_name": "t/{device}",
                                "user_properties": [{"name": "c", "value": "3"}]},
        },
    })
    assert catalog.errors == []
    m = _get(catalog, "derived")
    assert m.base_chain == ("/messagegroups/g/messages/base",)
    assert m.description == "base description"  # inherited
    assert set(m.envelope_metadata) == {"type", "source", "subject", "time"}  # objects merge
    assert m.envelope_metadata["subject"].value == "{other}"  # derived wins
    assert m.envelope_metadata["subject"].type == "uritemplate"
    assert m.envelope_metadata["source"].value == "/{tenant}/devices"
    props = [(c.field, c.name, c.prop.value) for c in m.protocol_options]
    assert props == [("qos", None, 1), ("user_properties", "c", "3"), ("topic_name", None,
                                                                        "t/{device}")]
    # the inherited value keeps pointing at the base, the overlay's at the overlay
    assert m.field_provenance["$.protocoloptions.qos"].path.endswith("messages.base."
                                                                      "protocoloptions.qos")
    assert m.field_provenance["$.envelopemetadata.subject"].path.endswith(
        "messages.derived.envelopemetadata.subject")


def test_scalar_constraint_and_declaration_merge_into_one_declaration() -> None:
    catalog = _catalog({
        "base": {"protocol": "MQTT/5.0", "protocoloptions": {"qos": 1}},
        "derived": {"basemessage": "/messagegroups/g/messages/base",
                    "protocoloptions": {"qos": {"required": True}}},
    })
    qos = _get(catalog, "derived").protocol_options[0].prop
    assert (qos.value, qos.required) == (1, True)


def test_bases_and_overlays_in_different_spellings_merge_attribute_by_attribute() -> None:
    catalog = _catalog({
        "base": {"format": "CloudEvents/1.0",
                 "metadata": {"attributes": {"type": {"value": "t"}, "source": "/s"}}},
        "derived": {"basemessageurl": "#/definitionGroups/g/definitions/base",
                    "envelopemetadata": {"source": {"value": "/other"}}},
    })
    m = _get(catalog, "derived")
    assert m.envelope == "CloudEvents/1.0"
    assert {k: p.value for k, p in m.envelope_metadata.items()} == {"type": "t",
                                                                    "source": "/other"}


def test_protocol_is_inherited_before_options_are_normalized() -> None:
    catalog = _catalog({
        "base": {"protocol": "MQTT/5.0", "protocoloptions": {"qos": 1}},
        "derived": {"basemessage": "/messagegroups/g/messages/base",
                    "protocoloptions": {"topic": "a/{b}"}},  # MQTT spelling, protocol inherited
    })
    m = _get(catalog, "derived")
    assert m.protocol == MQTT5
    assert set(m.raw_protocol_options) == {"qos", "topic_name"}


def test_switching_protocol_drops_inherited_protocoloptions() -> None:
    catalog = _catalog({
        "base": {**BASE, "protocol": "MQTT/5.0", "protocoloptions": {"topic_name": "a"}},
        "derived": {"basemessage": "/messagegroups/g/messages/base", "protocol": "AMQP/1.0",
                    "protocoloptions": {"properties": {"subject": "s"}}},
    })
    m = _get(catalog, "derived")
    assert m.protocol == AMQP
    assert set(m.raw_protocol_options) == {"properties"}
    assert m.envelope_metadata["type"].value == "com.example.event"
    assert catalog.warnings == []


def test_transitive_chain_merges_root_first() -> None:
    catalog = _catalog({
        "a": {**BASE},
        "b": {"basemessageuri": "/messagegroups/g/messages/a", "protocol": "KAFKA",
              "protocoloptions": {"topic": "t", "key": "{device}"}},
        "c": {"basemessage": "#/messagegroups/g/messages/b",
              "protocoloptions": {"key": "{tenant}"}},
    })
    c = _get(catalog, "c")
    assert c.base_chain == ("/messagegroups/g/messages/b", "/messagegroups/g/messages/a")
    assert {x.field: x.prop.value for x in c.protocol_options} == {"topic": "t", "key": "{tenant}"}
    assert c.envelope_metadata["source"].value == "/{tenant}/devices"


def test_version_xid_and_pointer_forms_resolve() -> None:
    catalog = _catalog({
        "base": {**BASE},
        "v": {"basemessage": "/messagegroups/g/messages/base/versions/1"},
        "p": {"basemessage": "#/messagegroups/g/messages/base"},
    })
    assert catalog.errors == [] and catalog.warnings == []
    for mid in ("v", "p"):
        assert _get(catalog, mid).envelope_metadata["type"].value == "com.example.event"


def test_spelling_priority_basemessage_wins_with_warning() -> None:
    catalog = _catalog({
        "a": {**BASE},
        "b": {**BASE, "envelopemetadata": {"type": {"value": "from-b"}}},
        "c": {"basemessage": "/messagegroups/g/messages/b",
              "basemessageuri": "/messagegroups/g/messages/a"},
    })
    assert _get(catalog, "c").envelope_metadata["type"].value == "from-b"
    both = [p for p in catalog.warnings if "both 'basemessage' and 'basemessageuri'" in p.message]
    assert both[0].path == "$.messagegroups.g.messages.c.basemessageuri"


def test_cycle_is_an_error_naming_the_chain() -> None:
    catalog = _catalog({
        "a": {**BASE, "basemessage": "/messagegroups/g/messages/b"},
        "b": {"basemessage": "/messagegroups/g/messages/a", "protocol": "MQTT/5.0"},
    })
    assert len(catalog.errors) == 1
    error = catalog.errors[0]
    assert error.message == ("basemessage cycle: /messagegroups/g/messages/a -> "
                             "/messagegroups/g/messages/b -> /messagegroups/g/messages/a")
    assert error.file == "doc.json"
    assert error.path == "$.messagegroups.g.messages.b.basemessage"
    assert "break the cycle" in error.fix
    assert _get(catalog, "a").incomplete and _get(catalog, "b").incomplete


def test_self_reference_is_a_cycle() -> None:
    catalog = _catalog({"a": {**BASE, "basemessage": "/messagegroups/g/messages/a"}})
    assert [p.message for p in catalog.errors] == [
        "basemessage cycle: /messagegroups/g/messages/a -> /messagegroups/g/messages/a"]


def test_dangling_reference_is_a_warning_and_flags_incomplete() -> None:
    catalog = _catalog({
        "d": {"basemessage": "/messagegroups/g/messages/missing", "protocol": "MQTT/5.0",
              "protocoloptions": {"topic_name": "t"}},
        "e": {"basemessage": "/messagegroups/g/messages/d"},
    })
    assert catalog.errors == []
    dangling = [p for p in catalog.warnings if "does not name a loaded message" in p.message]
    assert len(dangling) == 1
    assert dangling[0].path == "$.messagegroups.g.messages.d.basemessage"
    assert "/messagegroups/g/messages/missing" in dangling[0].message
    d, e = _get(catalog, "d"), _get(catalog, "e")
    assert d.incomplete and e.incomplete  # incompleteness is inherited
    assert d.protocol == MQTT5 and d.protocol_options[0].prop.value == "t"  # kept as written


def test_reference_into_another_registry_is_dangling_unless_loaded() -> None:
    catalog = _catalog({"x": {"basemessage": "https://other.example/messagegroups/s/messages/b",
                              "envelope": "CloudEvents/1.0"}})
    assert catalog.errors == []
    assert any("registry that was not loaded" in p.message for p in catalog.warnings)
    assert _get(catalog, "x").incomplete


def test_non_string_reference_is_an_error() -> None:
    catalog = _catalog({"x": {"basemessage": 42, "envelope": "CloudEvents/1.0"}})
    assert [p.path for p in catalog.errors] == ["$.messagegroups.g.messages.x.basemessage"]


def test_resolution_across_documents_and_absolute_file_references(tmp_path: Path) -> None:
    base_file = tmp_path / "base.xreg.json"
    base_file.write_text(json.dumps({"messagegroups": {"ce": {"messages": {"e": BASE}}}}))
    overlay = {"messagegroups": {"mqtt": {"messages": {
        "by_xid": {"basemessage": "/messagegroups/ce/messages/e", "protocol": "MQTT/5.0",
                   "protocoloptions": {"topic_name": "x"}},
        "by_uri": {"basemessage": base_file.resolve().as_uri() + "#/messagegroups/ce/messages/e",
                   "protocol": "MQTT/5.0", "protocoloptions": {"topic_name": "y"}},
    }}}}
    overlay_file = tmp_path / "overlay.xreg.json"
    overlay_file.write_text(json.dumps(overlay))
    catalog = load_catalog([overlay_file, base_file])
    assert catalog.errors == [] and catalog.warnings == []
    for mid in ("by_xid", "by_uri"):
        m = _get(catalog, mid, "mqtt")
        assert m.envelope_metadata["type"].value == "com.example.event"
        assert m.field_provenance["$.dataschemauri"].file == str(base_file)
        assert m.field_provenance["$.protocol"].file == str(overlay_file)


def test_endpoint_inline_messages_resolve_against_groups() -> None:
    doc = {
        "endpoints": {"e": {"protocol": "MQTT/5.0", "messages": {
            "m": {"basemessage": "/messagegroups/g/messages/base",
                  "protocoloptions": {"topic": "t"}}}}},
        "messagegroups": {"g": {"messages": {"base": BASE}}},
    }
    catalog = read_document(doc)
    m = catalog.message("/endpoints/e/messages/m")
    assert m is not None
    assert m.protocol == MQTT5  # endpoint protocol is the default of its inline messages
    assert m.envelope == "CloudEvents/1.0"
    assert m.raw_protocol_options == {"topic_name": {"value": "t"}}


# -- cross-references ("borrowed" messages) -------------------------------------------------------


@pytest.mark.parametrize("form", [
    {"meta": {"xref": "/messagegroups/g/messages/base"}},
    {"xref": "/messagegroups/g/messages/base"},
    {"uri": "#/messagegroups/g/messages/base"},
])
def test_borrowed_message_copies_the_target(form: dict[str, Any]) -> None:
    catalog = _catalog({"base": BASE}, other={"borrowed": form})
    assert catalog.errors == [] and catalog.warnings == []
    m = _get(catalog, "borrowed", "other")
    assert m.xid == "/messagegroups/other/messages/borrowed"
    assert m.message_id == "borrowed" and m.group_id == "other"
    assert m.envelope_metadata["type"].value == "com.example.event"
    assert m.dataschemauri == BASE["dataschemauri"]
    assert m.base_chain == ("/messagegroups/g/messages/base",)


def test_borrowed_message_takes_the_resolved_target_and_local_details_win() -> None:
    catalog = _catalog({
        "base": BASE,
        "mqtt": {"basemessage": "/messagegroups/g/messages/base", "protocol": "MQTT/5.0",
                 "protocoloptions": {"topic_name": "a/{device}"}},
    }, other={"borrowed": {"uri": "#/messagegroups/g/messages/mqtt",
                           "description": "borrowed for a filtered subscription"}})
    m = _get(catalog, "borrowed", "other")
    assert m.protocol == MQTT5
    assert m.description == "borrowed for a filtered subscription"
    assert m.envelope_metadata["source"].value == "/{tenant}/devices"
    assert m.base_chain == ("/messagegroups/g/messages/mqtt", "/messagegroups/g/messages/base")


def test_dangling_cross_reference_is_a_warning() -> None:
    catalog = _catalog({"x": {"meta": {"xref": "/messagegroups/g/messages/nope"}}})
    assert catalog.errors == []
    warning = [p for p in catalog.warnings if "xref" in p.message]
    assert warning[0].path == "$.messagegroups.g.messages.x.meta.xref"
    assert _get(catalog, "x").incomplete
