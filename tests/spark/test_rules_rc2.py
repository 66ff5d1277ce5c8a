"""Issue 35 in the Spark job: a definition field no record carries never fails the job,
and the job agrees with the core (`xrgw match`) on the rc2 rules of the issue."""

from __future__ import annotations

import json
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from test_parity import _assert_same

from gateway.convert import Converter
from gateway.definitions import read_document
from gateway.definitions.model import MessageDefinition
from gateway.protocols import PROFILES, field_access
from gateway.spark import compile_catalog, compile_stage
from gateway.spark.compiler import reader_spec
from gateway.spark.matching import read_columns
from gateway.spark.records import PARSE_SCHEMA, RECORD


def test_every_definition_field_of_every_profile_is_known_to_the_parse_schema(
        spark: SparkSession) -> None:
    """Every field (and, for maps and sections, a member) a definition of any protocol
    may constrain is read from a parsed record without an analysis error: a field of
    the parse schema, or (HTTP `status`: no received record has one) a null."""
    readers = []
    for prof in PROFILES:
        for spec in prof.definitions.fields:
            name = None if spec.kind == "scalar" else (
                spec.members[0][0] if spec.members else "x")
            readers.append(reader_spec(prof.name, spec.name, name))
            assert field_access(prof.name, spec.name, name) is not None
    parsed = spark.createDataFrame([('{"protocol": "HTTP", "path": "/"}',)], "line string") \
        .select(F.from_json("line", PARSE_SCHEMA).alias(RECORD))
    columns = read_columns(F.col(RECORD), readers)
    (row,) = parsed.select(*[c.alias(n) for n, c in columns.items()]).collect()
    assert len(row) == len(readers)  # analysed and evaluated: no FIELD_NOT_FOUND
    status = [i for i, r in enumerate(readers) if r.field == "status"]
    assert status and all(row[f"_f{i}"] is None for i in status)


_CE = {"envelope": "CloudEvents/1.0"}


def _meta(type_: str) -> dict[str, Any]:
    return {**_CE, "envelopemetadata": {"type": {"value": type_}, "source": {"value": "/s"}}}


RULES: dict[str, dict[str, Any]] = {
    # the Spark job crashed on this one (FIELD_NOT_FOUND status)
    "response": {"protocol": "HTTP", "protocoloptions": {
        "path": "/orders", "status": "201"}, **_meta("resp")},
    "request": {"protocol": "HTTP", "protocoloptions": {
        "path": "/orders", "method": "POST"}, **_meta("req")},
    # item 1: repeated user properties and a placeholder
    "userprop": {"protocol": "MQTT/5.0", "protocoloptions": {
        "user_properties": [{"name": "k", "value": "{k}"}], "topic_name": "t/{k}"},
        **_meta("up")},
    "twoprops": {"protocol": "MQTT/5.0", "protocoloptions": {
        "topic_name": "two", "user_properties": [{"name": "x", "value": "{k}"},
                                                 {"name": "y", "value": "{k}"}]},
                 **_meta("two")},
    # items 4, 5, 6: typed headers, one per definition
    "uri": {"protocol": "KAFKA", "protocoloptions": {
        "topic": "uri", "headers": {"h": {"type": "uri", "required": True}}}, **_meta("uri")},
    "uriref": {"protocol": "KAFKA", "protocoloptions": {
        "topic": "uriref", "headers": {"h": {"type": "uri-reference", "required": True}}},
        **_meta("uriref")},
    "symbol": {"protocol": "KAFKA", "protocoloptions": {
        "topic": "symbol", "headers": {"h": {"type": "symbol", "required": True}}},
        **_meta("symbol")},
    "integer": {"protocol": "KAFKA", "protocoloptions": {
        "topic": "integer", "headers": {"h": {"type": "integer", "required": True}}},
        **_meta("integer")},
    "number": {"protocol": "KAFKA", "protocoloptions": {
        "topic": "number", "headers": {"h": {"type": "number", "required": True}}},
        **_meta("number")},
    "expiry": {"protocol": "MQTT/5.0", "protocoloptions": {
        "topic_name": "expiry", "message_expiry_interval": {"type": "integer",
                                                            "required": True}},
        **_meta("expiry")},
    # rendering a templated attribute of a declared type
    "render_uri": {"protocol": "KAFKA", "protocoloptions": {"topic": "ru/{x}"}, **_CE,
                   "envelopemetadata": {"type": {"value": "ru"}, "source": {"value": "/s"},
                                        "where": {"type": "uri", "value": "{x}"}}},
    "render_symbol": {"protocol": "KAFKA", "protocoloptions": {"topic": "rs/{x}"}, **_CE,
                      "envelopemetadata": {"type": {"value": "rs"}, "source": {"value": "/s"},
                                           "kind": {"type": "symbol", "value": "{x}"}}},
    "ctype": {"protocol": "MQTT/5.0", "protocoloptions": {
        "topic_name": "ctype", "content_type": {"type": "symbol",
                                                "value": "application/json"}},
        **_meta("ctype")},
}


def _kafka(topic: str, value: str) -> str:
    return json.dumps({"protocol": "KAFKA", "topic": topic,
                       "headers": [{"name": "h", "value": value}], "data": {"a": 1}})


RECORDS = [
    json.dumps({"protocol": "HTTP", "method": "POST", "path": "/orders", "data": {"a": 1}}),
    json.dumps({"protocol": "HTTP", "method": "GET", "path": "/orders", "data": {"a": 1}}),
    *(json.dumps({"protocol": "MQTT/5.0", "topic_name": "t/a", "data": {"a": 1},
                  "user_properties": [{"name": "k", "value": v} for v in values]})
      for values in (["a"], ["b", "a"], ["a", "b"], ["b"], ["b", "c"])),
    *(json.dumps({"protocol": "MQTT/5.0", "topic_name": "two", "data": {"a": 1},
                  "user_properties": [{"name": n, "value": v} for n, v in pairs]})
      for pairs in ([("x", "a"), ("x", "b"), ("y", "b")], [("x", "a"), ("y", "a")],
                    [("x", "a"), ("y", "b")])),
    *(_kafka("uri", v) for v in ("https://example.com/a", "urn:x", "/relative/path",
                                 "not a uri", "http:not a uri", "a:b^c")),
    *(_kafka("uriref", v) for v in ("/relative/path", "https://x/y", "not a uri ref", "#f")),
    *(_kafka("symbol", v) for v in ("a_B9", "a-b", "a b", "")),
    *(_kafka("integer", v) for v in ("5", "-2147483648", "2147483647", "2147483648",
                                     "-2147483649", "99999999999999999999", "x", "5\n",
                                     "\u0663")),
    *(_kafka("number", v) for v in ("1.5", "1.5\n", "\u0663", "-2e+7")),
    *(json.dumps({"protocol": "MQTT/5.0", "topic_name": "expiry", "data": {"a": 1},
                  "message_expiry_interval": v})
      for v in (60, 3_000_000_000, 4_294_967_295, 4_294_967_296)),
    json.dumps({"protocol": "MQTT/5.0", "topic_name": "ctype", "data": {"a": 1},
                "content_type": "application/json"}),
    *(json.dumps({"protocol": "KAFKA", "topic": topic, "data": {"a": 1}})
      for topic in ("ru/urn:x", "ru/a:b^c", "ru/https:%2F%2Fx", "rs/a_1", "rs/a-1")),
]


def _definitions() -> list[MessageDefinition]:
    catalog = read_document({"messagegroups": {"g": {"messages": RULES}}}, "rules.json")
    assert not catalog.errors, catalog.errors
    return list(catalog.messages())


def test_spark_matches_core_on_the_rc2_rules(spark: SparkSession) -> None:
    definitions = _definitions()
    stage = compile_stage(spark, compile_catalog(definitions))
    frame = spark.createDataFrame([(line,) for line in RECORDS], "record string")
    rows = stage.convert(frame).collect()
    assert len(rows) == len(RECORDS)
    converter = Converter(definitions)
    paths = _assert_same(converter, rows)
    # the compiled path judges the typed checks itself (dead letters are explained by the
    # Python stage, and so are records with repeated user properties)
    assert paths["sql"] >= 15, paths
    outcome = {row["record"]: (row["outcome"], row["match"]) for row in rows}
    # the request is the request definition's; no record is ever the response's
    assert outcome[RECORDS[0]] == ("event", "/messagegroups/g/messages/request")
    assert all(match != "/messagegroups/g/messages/response" for _, match in outcome.values())
    # item 1: any entry agreeing with the topic's capture
    matched = [outcome[line][0] for line in RECORDS[2:7]]
    assert matched == ["event", "event", "event", "unmatched", "unmatched"]
