"""Each schema format's validator: what passes, what fails and the error it names."""

from __future__ import annotations

import io

import fastavro
import pytest
from google.protobuf import descriptor_pb2

from gateway.definitions.schema_model import SchemaDocument
from gateway.record import NativeMessage
from gateway.schemas.compile import (
    SchemaCompileError,
    Unsupported,
    compile_document,
    compiled,
)

ORDER = {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
         "required": ["amount"], "properties": {"amount": {"type": "number", "minimum": 0}}}


def _json(data: object) -> NativeMessage:
    return NativeMessage("NATS", {"subject": "x"}, data=data)  # type: ignore[arg-type]


def _bytes(body: bytes) -> NativeMessage:
    return NativeMessage("NATS", {"subject": "x"}, payload=body)


@pytest.mark.parametrize("declared", [
    "http://json-schema.org/draft-04/schema#", "http://json-schema.org/draft-06/schema#",
    "http://json-schema.org/draft-07/schema#", "https://json-schema.org/draft/2019-09/schema",
    "https://json-schema.org/draft/2020-12/schema"])
def test_json_schema_every_draft_names_the_failing_path(declared: str) -> None:
    validator = compile_document(SchemaDocument("JsonSchema/draft-07",
                                                {**ORDER, "$schema": declared}, f"t:{declared}"))
    assert not isinstance(validator, Unsupported)
    assert validator.check(_json({"amount": 3})) is None
    assert validator.check(_json({"amount": -3})) == "$.amount: -3 is less than the minimum of 0"
    assert validator.check(_json({})) == "$: 'amount' is a required property"


def test_json_schema_reads_a_text_body_and_refuses_non_json() -> None:
    validator = compile_document(SchemaDocument("JSONSchema/Draft-07", ORDER, "t:text"))
    assert not isinstance(validator, Unsupported)
    assert validator.check(_bytes(b'{"amount": 1}')) is None
    assert validator.check(_bytes(b"\xff not json")) == "$: the body is not JSON"


def test_a_broken_json_schema_does_not_compile() -> None:
    with pytest.raises(SchemaCompileError, match="invalid JSON Schema"):
        compile_document(SchemaDocument("JsonSchema/draft-07", {"type": 12}, "t:broken"))


def test_validators_are_compiled_once_per_version() -> None:
    doc = SchemaDocument("JsonSchema/draft-07", ORDER, "/schemagroups/g/schemas/once")
    same = SchemaDocument("JsonSchema/draft-07", dict(ORDER), "/schemagroups/g/schemas/once")
    assert compiled(doc) is compiled(same)


AVRO = {"type": "record", "name": "Refund", "namespace": "com.example",
        "fields": [{"name": "order", "type": "string"}, {"name": "cents", "type": "long"}]}


def test_avro_json_datum_and_binary_body() -> None:
    validator = compile_document(SchemaDocument("Avro/1.11", AVRO, "t:avro",
                                                "com.example.Refund"))
    assert not isinstance(validator, Unsupported)
    assert validator.check(_json({"order": "o-1", "cents": 250})) is None
    assert validator.check(_json({"order": "o-1", "cents": "lots"})) == \
        "$.cents: 'lots' is not a valid long"
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(AVRO), {"order": "o-1", "cents": 9})
    assert validator.check(_bytes(out.getvalue())) is None
    assert validator.check(_bytes(out.getvalue() + b"\x00")) == "$: 1 bytes after the Avro datum"
    assert (validator.check(_bytes(b"\x08ab")) or "").startswith("$: not Avro binary")


def test_avro_unknown_type_selector() -> None:
    with pytest.raises(SchemaCompileError, match="no Avro type 'Nope'"):
        compile_document(SchemaDocument("Avro", AVRO, "t:avro2", "Nope"))


def _descriptor_set() -> bytes:
    file = descriptor_pb2.FileDescriptorProto(name="order.proto", package="shop",
                                              syntax="proto2")
    msg = file.message_type.add(name="Order")
    msg.field.add(name="id", number=1, type=descriptor_pb2.FieldDescriptorProto.TYPE_STRING,
                  label=descriptor_pb2.FieldDescriptorProto.LABEL_REQUIRED)
    msg.field.add(name="cents", number=2, type=descriptor_pb2.FieldDescriptorProto.TYPE_INT64,
                  label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL)
    return descriptor_pb2.FileDescriptorSet(file=[file]).SerializeToString()


def test_protobuf_descriptor_set() -> None:
    validator = compile_document(SchemaDocument("Protobuf/2", _descriptor_set(), "t:pb",
                                                "shop.Order"))
    assert not isinstance(validator, Unsupported)
    # field 1 (id) = "a", field 2 (cents) = 5
    good = b"\x0a\x01a\x10\x05"
    assert validator.check(_bytes(good)) is None
    assert validator.check(_bytes(b"\x10\x05")) == "$.id: required field missing"
    assert (validator.check(_bytes(b"\x0a\x05a")) or "").startswith("$: ")  # truncated
    assert validator.check(_json({"id": "a", "cents": "5"})) is None
    assert (validator.check(_json({"id": "a", "price": 1})) or "").startswith("$: ")


def test_protobuf_source_text_is_refused_with_the_fix() -> None:
    with pytest.raises(SchemaCompileError, match="descriptor_set_out"):
        compile_document(SchemaDocument("Protobuf/3", "syntax = 'proto3';", "t:proto"))


def test_unknown_formats_are_not_enforced() -> None:
    found = compile_document(SchemaDocument("JsonStructure/draft-02", {}, "t:js"))
    assert isinstance(found, Unsupported)
    assert "JsonStructure/draft-02 cannot be enforced" in found.reason


def test_another_document_at_the_same_place_compiles_anew() -> None:
    before = compiled(SchemaDocument("JsonSchema/draft-07", ORDER, "/schemagroups/g/schemas/re"))
    edited = {**ORDER, "properties": {"amount": {"type": "number", "minimum": -10}}}
    after = compiled(SchemaDocument("JsonSchema/draft-07", edited, "/schemagroups/g/schemas/re"))
    assert before is not after
    assert not isinstance(after, Unsupported)
    assert after.check(_json({"amount": -3})) is None
