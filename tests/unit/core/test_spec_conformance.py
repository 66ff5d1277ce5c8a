"""Normative rules of the message-definitions spec that the gateway once got wrong, one
test per rule, each through the whole conversion (`xrgw match`'s path): HTTP
percent-encoding, type-only envelope declarations, media-type comparison, typed core
attributes, NATS subject tokens."""

from __future__ import annotations

from typing import Any

from gateway.convert import Converter
from gateway.definitions import read_document
from gateway.envelope.native import render_native
from gateway.record import NativeMessage


def _converter(**messages: dict[str, Any]) -> Converter:
    catalog = read_document({"messagegroups": {"g": {"messages": messages}}}, "rules.json")
    assert not catalog.errors, catalog.errors
    return Converter(catalog.messages())


def _ce(type_: str, **metadata: Any) -> dict[str, Any]:
    return {"envelope": "CloudEvents/1.0",
            "envelopemetadata": {"type": {"value": type_}, "source": {"value": "/s"},
                                 **metadata}}


def _kafka_ce(topic: str, **attributes: str) -> NativeMessage:
    headers = [{"name": "ce_specversion", "value": "1.0"}, {"name": "ce_id", "value": "1"},
               {"name": "ce_source", "value": "/s"}]
    headers += [{"name": f"ce_{k}" if k != "content-type" else k, "value": v}
                for k, v in attributes.items()]
    return NativeMessage("KAFKA", {"topic": topic, "headers": headers}, payload=b"hi")


# -- 1. HTTP: split on `/` first, then percent-decode each captured value -------------------

FILES = {"protocol": "HTTP", "protocoloptions": {"method": {"value": "PUT"},
                                                 "path": {"value": "/files/{name}"}},
         **_ce("file", subject={"value": "{name}"})}


def test_http_path_capture_is_decoded_after_splitting():
    result = _converter(files=FILES).convert(
        NativeMessage("HTTP", {"method": "PUT", "path": "/files/a%2Fb"}))
    assert result.ok, result.detail
    assert result.match.context == {"name": "a/b"}
    assert result.event is not None and result.event.get_attributes()["subject"] == "a/b"


def test_http_encoded_slash_is_not_a_separator():
    result = _converter(files=FILES).convert(
        NativeMessage("HTTP", {"method": "PUT", "path": "/files/a/b"}))
    assert not result.ok and result.reason == "unmatched"


def test_http_percent_encoded_literal_in_the_template_matches_itself():
    converter = _converter(mine={
        "protocol": "HTTP",
        "protocoloptions": {"path": {"value": "/my%20files/{name}"}},
        **_ce("mine")})
    result = converter.convert(NativeMessage("HTTP", {"method": "GET",
                                                      "path": "/my%20files/x%20y"}))
    assert result.ok, result.detail
    assert result.match.context == {"name": "x y"}


def test_http_query_names_and_values_are_percent_decoded():
    converter = _converter(sorted={
        "protocol": "HTTP",
        "protocoloptions": {"path": {"value": "/list"},
                            "query": {"sort order": {"value": "{dir}"}}},
        **_ce("sorted")})
    result = converter.convert(NativeMessage("HTTP", {
        "method": "GET", "path": "/list", "query": {"sort%20order": "asc%2Fdesc"}}))
    assert result.ok, result.detail
    assert result.match.context == {"dir": "asc/desc"}


def test_http_native_rendering_percent_encodes_values_rfc6570():
    catalog = read_document({"messagegroups": {"g": {"messages": {"files": FILES}}}}, "r.json")
    [definition] = catalog.messages()
    rendered = render_native(definition, context={"name": "a/b c"})
    assert not hasattr(rendered, "reason"), rendered
    assert rendered.fields["path"] == "/files/a%2Fb%20c"
    # and the inverse: matching the rendered message gives the value back
    result = _converter(files=FILES).convert(rendered)
    assert result.match.context == {"name": "a/b c"}


# -- 2. a declared type constrains CloudEvents input too ------------------------------------

TYPED = {"protocol": "KAFKA", "protocoloptions": {"topic": {"value": "t"}},
         **_ce("x", subject={"type": "uri"}, count={"type": "integer"})}


def test_type_only_envelope_declarations_refuse_nonconforming_cloudevents():
    converter = _converter(typed=TYPED)
    bad = converter.convert(_kafka_ce("t", type="x", subject="not a uri", count="many"))
    assert not bad.ok and bad.reason == "unmatched"
    bad_count = converter.convert(_kafka_ce("t", type="x", subject="urn:a", count="many"))
    assert not bad_count.ok
    good = converter.convert(_kafka_ce("t", type="x", subject="urn:a", count="5"))
    assert good.ok, good.detail


# -- 3. media types compare case-insensitively (type, subtype, parameter names) -------------


def test_datacontenttype_compares_like_a_media_type():
    converter = _converter(text={
        "protocol": "KAFKA", "protocoloptions": {"topic": {"value": "u"}},
        **_ce("y", datacontenttype={"value": "text/plain; charset=utf-8"})})
    same = converter.convert(_kafka_ce("u", type="y", **{"content-type":
                                                         "TEXT/Plain; CharSet=utf-8"}))
    assert same.ok, same.detail
    other = converter.convert(_kafka_ce("u", type="y", **{"content-type":
                                                          "text/plain; charset=latin1"}))
    assert not other.ok


# -- 4. a constrained subject renders as its stringified value ------------------------------


def test_integer_subject_renders_as_text():
    converter = _converter(subj={"protocol": "KAFKA",
                                 "protocoloptions": {"topic": {"value": "v"}},
                                 **_ce("z", subject={"type": "integer", "value": 3})})
    result = converter.convert(NativeMessage("KAFKA", {"topic": "v"}, payload=b"hi"))
    assert result.ok, result.detail
    assert result.event is not None and result.event.get_attributes()["subject"] == "3"


# -- 11. a placeholder in a NATS subject is one token -----------------------------------------


def test_nats_subject_placeholder_is_one_token():
    converter = _converter(o={"protocol": "NATS",
                              "protocoloptions": {"subject": {"value": "orders.{region}.{id}"}},
                              **_ce("o")})
    deep = converter.convert(NativeMessage("NATS", {"subject": "orders.eu.west.42"}))
    assert not deep.ok and deep.reason == "unmatched"
    flat = converter.convert(NativeMessage("NATS", {"subject": "orders.eu.42"}))
    assert flat.ok and flat.match.context == {"region": "eu", "id": "42"}
