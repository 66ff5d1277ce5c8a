"""The native message record as Spark columns: parse schema, screen, field readers.

The record's JSON form (`gateway.record`) is parsed once with `from_json` against the
union of every protocol's fields. `data` is declared a string so Spark keeps the body as
JSON text (never parsed into a struct): the CloudEvent carries it unchanged.

The *screen* decides which records the compiled SQL path may handle. It only has to be
a superset test: a record it routes away goes to the exact core path (`fallback`), so a
false alarm costs speed, never correctness. Anything the SQL parse cannot judge exactly
(a string field holding a number, a CloudEvent, a non-canonical `received_at` ...) is
routed away.
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

from gateway.protocols import AMQP, HTTP, KAFKA, MQTT5, MQTT311, NATS, RECORD_FIELDS

_SPARK_TYPES = {
    "string": "string",
    "integer": "long",
    "boolean": "boolean",
    # Pair entries as maps (not structs) so an entry with extra or missing keys is visible.
    "pairs": "array<map<string,string>>",
    "object": "map<string,string>",
    "strmap": "map<string,string>",
}


def _field_kinds() -> dict[str, str]:
    kinds: dict[str, str] = {}
    for fields in RECORD_FIELDS.values():
        for name, kind in fields.items():
            if kinds.setdefault(name, kind) != kind:  # pragma: no cover - table invariant
                raise AssertionError(f"record field {name} has two kinds")
    return kinds


FIELD_KINDS = _field_kinds()
PARSE_SCHEMA = ", ".join(
    ["`protocol` string"]
    + [f"`{name}` {_SPARK_TYPES[kind]}" for name, kind in FIELD_KINDS.items()]
    + ["`data` string", "`data_base64` string", "`received_at` string"]
)
_COMMON = ("protocol", "data", "data_base64", "received_at")
_STRING_KEYS = sorted(
    {n for n, k in FIELD_KINDS.items() if k == "string"} | {"protocol", "received_at", "name"}
)
# A string-typed key followed by anything but a string: Spark would read `5` as "5".
# `name` covers header / user-property entry names. Matches inside `data` are harmless.
_NON_STRING = '"(?:' + "|".join(_STRING_KEYS) + r')"\s*:\s*[^"\s]'
_BASE64 = r"^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$"
# received_at already in the form `format_rfc3339` writes (UTC `Z` or a non-zero offset,
# fraction without trailing zeros): the CloudEvent `time` is then the same text.
CANONICAL_TIME = (
    r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{0,5}[1-9])?(Z|[+-](?!00:00)\d{2}:\d{2})$"
)


def col(r: Column, name: str) -> Column:
    return r.getField(name)


def family(protocol: Column) -> Column:
    """`gateway.matching.values.family`: MQTT 3.1.1 and 5.0 records share definitions."""
    return F.when(protocol.isin(MQTT5, MQTT311), F.lit("MQTT")).otherwise(protocol)


def address(r: Column, fam: Column) -> Column:
    """`values.address_of` (HTTP paths with `%` never reach SQL, so no decoding here)."""
    return (
        F.when(fam == "MQTT", col(r, "topic_name"))
        .when(fam == KAFKA, col(r, "topic"))
        .when(fam == NATS, col(r, "subject"))
        .when(fam == HTTP, col(r, "path"))
        .when(fam == AMQP, F.try_element_at(col(r, "properties"), F.lit("subject")))
    )


def _allowed_keys(protocol: Column) -> Column:
    branches = None
    for proto, fields in RECORD_FIELDS.items():
        keys = F.array(*[F.lit(k) for k in (*_COMMON, *fields)])
        branches = (F.when(protocol == proto, keys) if branches is None
                    else branches.when(protocol == proto, keys))
    assert branches is not None
    return branches


def sql_ok(line: Column, r: Column, keys: Column) -> Column:
    """True when the compiled path can judge this record exactly (see module doc).

    `keys` is `json_object_keys(line)`, projected once by the caller.
    """
    protocol = col(r, "protocol")
    # Fields present in the line whose typed value is null: the wrong type, or JSON null.
    unreadable = F.array_compact(F.array(*[
        F.when(col(r, name).isNull(), F.lit(name))
        for name, kind in FIELD_KINDS.items() if kind != "string"
    ]))
    pairs = [name for name, kind in FIELD_KINDS.items() if kind == "pairs"]
    entries = F.flatten(F.array(*[
        F.coalesce(col(r, name), F.array().cast("array<map<string,string>>")) for name in pairs
    ]))
    conditions = [
        r.isNotNull(),
        protocol.isin(*RECORD_FIELDS),
        F.forall(keys, lambda k: F.array_contains(_allowed_keys(protocol), k)),
        ~F.arrays_overlap(keys, unreadable),
        F.forall(entries, lambda e: (F.size(e) == 2)
                 & F.try_element_at(e, F.lit("name")).isNotNull()
                 & F.try_element_at(e, F.lit("value")).isNotNull()),
        ~line.rlike(_NON_STRING),
        # CloudEvents (any binding, any mode) are decoded by the core.
        ~line.rlike("(?i)specversion|cloudevents"),
        ~(F.array_contains(keys, "data") & F.array_contains(keys, "data_base64")),
        ~(F.array_contains(keys, "key") & F.array_contains(keys, "key_base64")),
        F.coalesce(col(r, "data_base64").rlike(_BASE64), F.lit(True)),
        F.when(col(r, "received_at").isNull(), F.lit(True)).otherwise(
            col(r, "received_at").rlike(CANONICAL_TIME)
            & F.try_to_timestamp(col(r, "received_at")).isNotNull()),
        # Percent-decoding (Python `unquote`) and query maps stay with the core.
        ~((protocol == HTTP) & (F.coalesce(col(r, "path").contains("%"), F.lit(False))
                                | F.array_contains(keys, "query"))),
    ]
    out = conditions[0]
    for condition in conditions[1:]:
        out = out & condition
    return F.coalesce(out, F.lit(False))


# -- field readers: every value the record carries for one constrained field, as text ----

def read_scalar(r: Column, field: str) -> Column:
    value = col(r, field)
    return F.when(value.isNotNull(), F.array(value.cast("string"))).otherwise(
        F.array().cast("array<string>")
    )


def read_section(r: Column, field: str, name: str) -> Column:
    section = col(r, field)
    return F.when(
        F.coalesce(F.map_contains_key(section, F.lit(name)), F.lit(False)),
        F.array(F.coalesce(F.try_element_at(section, F.lit(name)), F.lit(""))),
    ).otherwise(F.array().cast("array<string>"))


def read_pairs(r: Column, field: str, name: str, case_insensitive: bool) -> Column:
    wanted = name.lower() if case_insensitive else name

    def hit(e: Column) -> Column:
        key = F.try_element_at(e, F.lit("name"))
        return (F.lower(key) if case_insensitive else key) == F.lit(wanted)

    entries = F.coalesce(col(r, field), F.array().cast("array<map<string,string>>"))
    return F.transform(F.filter(entries, hit),
                       lambda e: F.coalesce(F.try_element_at(e, F.lit("value")), F.lit("")))


def first_header(r: Column, name: str) -> Column:
    """`NativeMessage.header(name, case_insensitive=True)`: the first entry's value."""
    return F.try_element_at(read_pairs(r, "headers", name, True), F.lit(1))
