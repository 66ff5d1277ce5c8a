"""Reading protocol fields out of a native record, and type/value comparison rules.

Kept apart from the matcher so the Spark compiler and `explain` read fields the same way.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from urllib.parse import unquote

from gateway.cloudevents.typesystem import INT32_MAX, INT32_MIN
from gateway.cloudevents.uri import is_uri, is_uri_reference
from gateway.json.values import JSON, as_text
from gateway.protocols import address_fields, field_access
from gateway.protocols import family as family  # re-exported: the matcher reads it here
from gateway.protocols.accessors import ACCESSORS
from gateway.record import NativeMessage

# A reader returns every value the record carries for one constrained field: zero values
# when absent, several for repeated headers / user properties.
Reader = Callable[[NativeMessage], list[JSON]]

# ASCII digits only, as the Spark job's Java regexes read `\d` (`int("٣")` is 3 in Python).
_INT = re.compile(r"-?\d+\Z", re.ASCII)
_NUMBER = re.compile(r"-?\d+(\.\d+)?([eE][-+]?\d+)?\Z", re.ASCII)
_SYMBOL = re.compile(r"[A-Za-z0-9_]*\Z")
UINT32_MAX = 2**32 - 1
_RFC3339 = re.compile(
    r"\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})\Z", re.ASCII
)


def same_value(actual: JSON, expected: JSON) -> bool:
    """Constant comparison: equal values, or equal canonical text across types
    (a header carries "1" where the definition says 1)."""
    if actual == expected and type(actual) is type(expected):
        return True
    return as_text(actual) == as_text(expected)


def conforms(value: JSON, declared: str) -> bool:
    """Whether a present value conforms to a declared property type (lenient on strings,
    because string-only bindings carry every value as text).

    `integer` is the CloudEvents Integer (32-bit signed); `uint32` is the internal type
    of the protocol fields the spec types `integer` but defines as unsigned 32-bit (MQTT
    message expiry, AMQP ttl: `ProtocolProfile.definitions.ranges`). `symbol` is the
    Property Definitions' (alphanumerics and underscore), `uri` an absolute RFC 3986 URI,
    `urireference` a URI or relative reference."""
    if declared in ("string", "uritemplate", "any", "binary", ""):
        return True
    if declared in ("integer", "uint32"):
        number = _integer(value)
        if number is None:
            return False
        if declared == "integer":
            return INT32_MIN <= number <= INT32_MAX
        return 0 <= number <= UINT32_MAX
    if declared == "number":
        if isinstance(value, bool):
            return False
        return isinstance(value, (int, float)) or (
            isinstance(value, str) and bool(_NUMBER.match(value))
        )
    if declared == "boolean":
        return isinstance(value, bool) or value in ("true", "false")
    if declared == "uri":
        return isinstance(value, str) and is_uri(value)
    if declared == "urireference":
        return isinstance(value, str) and is_uri_reference(value)
    if declared == "symbol":
        return isinstance(value, str) and _SYMBOL.match(value) is not None
    if declared in ("timestamp", "datetime"):
        return isinstance(value, str) and bool(_RFC3339.match(value))
    if declared == "duration":
        return isinstance(value, str) and value.startswith(("P", "-P"))
    return True


def _integer(value: JSON) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and _INT.match(value):
        return int(value)
    return None


def _pairs_reader(field: str, name: str, case_insensitive: bool) -> Reader:
    wanted = name.lower() if case_insensitive else name

    def read(record: NativeMessage) -> list[JSON]:
        raw = record.fields.get(field)
        if not isinstance(raw, list):
            return []
        out: list[JSON] = []
        for entry in raw:
            if isinstance(entry, dict):
                key = entry.get("name")
                if isinstance(key, str) and (key.lower() if case_insensitive else key) == wanted:
                    out.append(entry.get("value"))
        return out

    return read


def _section_reader(field: str, name: str) -> Reader:
    def read(record: NativeMessage) -> list[JSON]:
        raw = record.fields.get(field)
        if isinstance(raw, dict) and name in raw:
            return [raw[name]]
        return []

    return read


def _scalar_reader(field: str) -> Reader:
    def read(record: NativeMessage) -> list[JSON]:
        fields = record.fields
        if field in fields:
            return [fields[field]]
        return []

    return read


def _query_reader(field: str, name: str) -> Reader:
    """An HTTP query parameter by its percent-decoded name; the value stays raw (the check
    decodes it: a template must see `%2F` inside a value, not a separator)."""

    def read(record: NativeMessage) -> list[JSON]:
        raw = record.fields.get(field)
        if not isinstance(raw, dict):
            return []
        if name in raw:
            return [raw[name]]
        return [value for key, value in raw.items() if unquote(key) == name][:1]

    return read


def reader_for(protocol: str, field: str, name: str | None) -> Reader:
    """The reader for one definition constraint on a record of `protocol`."""
    access = field_access(protocol, field, name)
    if access.kind == "pairs" and access.name is not None:
        return _pairs_reader(field, access.name, access.case_insensitive)
    if access.kind == "section" and access.name is not None:
        if access.percent_encoded:
            return _query_reader(field, access.name)  # HTTP query: names compared decoded
        return _section_reader(field, access.name)
    return _scalar_reader(field)


# The field whose value addresses a message (topic, subject, path ...), per protocol
# family (`ProtocolProfile.address`). The index keys on it.
ADDRESS_FIELD: dict[str, tuple[str, str | None]] = {
    fam: (ref.field, ref.name) for fam, ref in address_fields().items()}


def address_of(record: NativeMessage) -> str | None:
    """The value of the record's address field (`ProtocolProfile.address`), through the
    protocol's compiled accessors."""
    return ACCESSORS[record.protocol].address(record.fields)
