"""`SchemaDocument` -> a validator of message bodies, compiled once per schema version.

    JSON Schema   drafts 4, 6, 7 through `fastjsonschema` (generated Python code: about
                  a microsecond a message); 2019-09 and 2020-12 through `jsonschema`. The
                  error text always comes from `jsonschema` (`$.amount: -3 is less than
                  the minimum of 0`): it only runs for a body that already failed.
    Avro          `fastavro`: a JSON body is checked as the datum, any other body is read
                  as Avro binary (schemaless, the whole body must be consumed).
    Protobuf      a `FileDescriptorSet` (schemabase64, a .desc/.pb file or URL) through
                  `protobuf`; the message type is the `:Type` of the reference (or the
                  only message of the set). A `.proto` source is not compiled here.
Any other format (JsonStructure, XSD, ...) gives `Unsupported`: no enforcement.
"""

from __future__ import annotations

import hashlib
import io
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, cast

from gateway.definitions.schema_model import SchemaDocument
from gateway.json.values import JSON
from gateway.record import NativeMessage


class PayloadValidator(Protocol):
    def check(self, record: NativeMessage) -> str | None:
        """None when the body conforms, else what is wrong and where."""


@dataclass(frozen=True)
class Unsupported:
    """Why a schema cannot be enforced (reported as a warning, never enforced)."""

    reason: str


class SchemaCompileError(ValueError):
    """The schema document is broken: it can never validate anything."""


Compiled = PayloadValidator | Unsupported

_CACHE: dict[tuple[str, str, str, str], Compiled] = {}
_LOCK = threading.Lock()


def compiled(document: SchemaDocument) -> Compiled:
    """The validator of `document`, compiled on first use and shared by every definition
    (and every reload) naming the same version with the same format."""
    # The content is part of the key: a reload may bring another document at the same
    # place (a file edited, a registry's default version moved on).
    key = (document.location, document.format, document.type_name or "",
           _digest(document.content))
    with _LOCK:
        found = _CACHE.get(key)
    if found is None:
        found = compile_document(document)
        with _LOCK:
            found = _CACHE.setdefault(key, found)
    return found


def _digest(content: JSON | bytes) -> str:
    raw = content if isinstance(content, bytes) else json.dumps(
        content, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(raw).hexdigest()


def compile_document(document: SchemaDocument) -> Compiled:
    """Raises SchemaCompileError for a broken document of a supported format."""
    family = document.family
    builder = _BUILDERS.get(family)
    if builder is None:
        shown = document.format or "(no dataschemaformat)"
        return Unsupported(f"schema format {shown} cannot be enforced; supported: "
                           "JsonSchema, Avro, Protobuf")
    return builder(document)


# -- bodies ----------------------------------------------------------------------------------

_NOT_JSON = object()


def json_body(record: NativeMessage) -> Any:
    if record.has_json_data:
        return record.data
    try:
        return json.loads(record.body_bytes())
    except (ValueError, UnicodeDecodeError):
        return _NOT_JSON


# -- JSON Schema -----------------------------------------------------------------------------

class JsonSchemaValidator:
    def __init__(self, schema: JSON) -> None:
        import jsonschema

        if not isinstance(schema, (dict, bool)):
            raise SchemaCompileError("a JSON Schema must be an object")
        as_schema = cast(dict[str, Any] | bool, schema)
        cls = jsonschema.validators.validator_for(as_schema)
        try:
            cls.check_schema(as_schema)  # type: ignore[arg-type]
        except jsonschema.SchemaError as exc:
            raise SchemaCompileError(f"invalid JSON Schema: {exc.message}") from exc
        self._full = cls(as_schema)
        self._fast = _fast_jsonschema(as_schema, self._full.is_valid)

    def check(self, record: NativeMessage) -> str | None:
        body = json_body(record)
        if body is _NOT_JSON:
            return "$: the body is not JSON"
        if self._fast(body):
            return None
        import jsonschema

        error = jsonschema.exceptions.best_match(self._full.iter_errors(body))
        if error is None:  # the two validators disagree: trust the reference one
            return None
        return f"{error.json_path}: {error.message}"


def _fast_jsonschema(schema: dict[str, Any] | bool,
                     fallback: Callable[[Any], bool]) -> Callable[[Any], bool]:
    """`fastjsonschema` for the drafts it implements, the reference validator otherwise."""
    declared = schema.get("$schema", "") if isinstance(schema, dict) else ""
    if isinstance(declared, str) and ("2019-09" in declared or "2020-12" in declared):
        return fallback
    import fastjsonschema

    try:
        validate = fastjsonschema.compile(schema)
    except Exception:
        return fallback

    def fast(body: Any) -> bool:
        try:
            validate(body)
        except fastjsonschema.JsonSchemaException:
            return False
        return True

    return fast


# -- Avro ------------------------------------------------------------------------------------

class AvroValidator:
    def __init__(self, document: SchemaDocument) -> None:
        import fastavro

        named: dict[str, Any] = {}
        try:
            parsed = fastavro.parse_schema(cast(Any, document.content), named_schemas=named)
        except Exception as exc:
            raise SchemaCompileError(f"invalid Avro schema: {exc}") from exc
        if document.type_name:
            chosen = named.get(document.type_name) or next(
                (s for n, s in named.items() if n.rsplit(".", 1)[-1] == document.type_name),
                None)
            if chosen is None:
                raise SchemaCompileError(f"no Avro type '{document.type_name}'; the schema "
                                         f"names {', '.join(sorted(named)) or 'none'}")
            parsed = fastavro.parse_schema(chosen, named_schemas=dict(named))
        self._schema = parsed
        # fastavro names a failing field `<record full name>.<field>`; the record is the body.
        top = parsed.get("name") if isinstance(parsed, dict) else None
        self._prefix = f"{top}." if isinstance(top, str) else ""

    def check(self, record: NativeMessage) -> str | None:
        import fastavro
        from fastavro.validation import ValidationError

        if record.has_json_data:
            try:
                fastavro.validation.validate(record.data, self._schema, raise_errors=True)
            except ValidationError as exc:
                return "; ".join(_avro_error(e, self._prefix) for e in exc.errors) or str(exc)
            return None
        body = io.BytesIO(record.body_bytes())
        try:
            fastavro.schemaless_reader(body, self._schema, None)
        except Exception as exc:
            return f"$: not Avro binary of the schema ({type(exc).__name__}: {exc})"
        left = len(body.getbuffer()) - body.tell()
        return None if left == 0 else f"$: {left} bytes after the Avro datum"


def _avro_error(error: object, prefix: str) -> str:
    """fastavro's `ValidationErrorData(datum, schema, field)` as `$.field: ...`."""
    field = getattr(error, "field", None)
    inner = field[len(prefix):] if isinstance(field, str) and prefix and \
        field.startswith(prefix) else field
    where = "$" + (f".{inner}" if inner else "")
    return f"{where}: {getattr(error, 'datum', None)!r} is not a valid " \
        f"{_avro_type(getattr(error, 'schema', None))}"


def _avro_type(schema: object) -> str:
    if isinstance(schema, dict):
        return str(schema.get("name") or schema.get("type"))
    return str(schema)


# -- Protobuf --------------------------------------------------------------------------------

class ProtobufValidator:
    def __init__(self, document: SchemaDocument) -> None:
        from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
        from google.protobuf.message import DecodeError

        if not isinstance(document.content, bytes):
            raise SchemaCompileError(
                "a Protobuf schema must be a compiled descriptor set (schemabase64 or a "
                ".desc file); compile the .proto with protoc --include_imports "
                "--descriptor_set_out")
        files = descriptor_pb2.FileDescriptorSet()
        try:
            files.ParseFromString(document.content)
            pool = descriptor_pool.DescriptorPool()
            for file in files.file:
                pool.Add(file)
        except (DecodeError, TypeError, KeyError) as exc:
            raise SchemaCompileError(f"not a FileDescriptorSet: {exc}") from exc
        names = [f"{f.package}.{m.name}" if f.package else m.name
                 for f in files.file for m in f.message_type]
        name = document.type_name or (names[0] if len(names) == 1 else None)
        if name is None:
            raise SchemaCompileError("the descriptor set has several messages: select one "
                                     f"with ':Type' ({', '.join(names)})")
        try:
            descriptor = pool.FindMessageTypeByName(name.lstrip("."))
        except KeyError as exc:
            raise SchemaCompileError(f"no message type '{name}' in the descriptor set "
                                     f"({', '.join(names)})") from exc
        self._cls = message_factory.GetMessageClass(descriptor)

    def check(self, record: NativeMessage) -> str | None:
        from google.protobuf import json_format
        from google.protobuf.message import DecodeError

        message = self._cls()
        try:
            if record.has_json_data:
                json_format.ParseDict(cast(Any, record.data), message)
            else:
                message.ParseFromString(record.body_bytes())
        except (DecodeError, json_format.ParseError) as exc:
            return f"$: {exc}"
        missing: list[str] = message.FindInitializationErrors()  # type: ignore[attr-defined]
        return f"$.{missing[0]}: required field missing" if missing else None


def _json_schema(document: SchemaDocument) -> Compiled:
    return JsonSchemaValidator(document.content if not isinstance(document.content, bytes)
                               else None)


_BUILDERS: dict[str, Callable[[SchemaDocument], Compiled]] = {
    "jsonschema": _json_schema,
    "avro": AvroValidator,
    "protobuf": ProtobufValidator,
}
