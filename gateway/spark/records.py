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

from collections.abc import Collection, Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

from gateway.protocols import (
    PROFILES,
    RECORD_FIELDS,
    FieldRef,
    Metadata,
    ProtocolProfile,
    address_fields,
)
from gateway.spark.sqlfuncs import all_of, any_of, case_when, sql_lambda, sql_string

RECORD = "r"  # the parsed record's column in every stage (the SQL lambdas name it)

_SPARK_TYPES = {
    "string": T.StringType(),
    "integer": T.LongType(),
    "boolean": T.BooleanType(),
    # Pair entries as maps (not structs) so an entry with extra or missing keys is visible.
    "pairs": T.ArrayType(T.MapType(T.StringType(), T.StringType())),
    "object": T.MapType(T.StringType(), T.StringType()),
    "strmap": T.MapType(T.StringType(), T.StringType()),
}


def _field_kinds() -> dict[str, str]:
    kinds: dict[str, str] = {}
    for fields in RECORD_FIELDS.values():
        for name, kind in fields.items():
            if kinds.setdefault(name, kind) != kind:  # pragma: no cover - table invariant
                raise AssertionError(f"record field {name} has two kinds")
    return kinds


FIELD_KINDS = _field_kinds()
# The parse schema as a type: `from_json` reads it as JSON in the JVM, where DDL text goes
# through Spark's SQL parser, cold in a fresh job's JVM (0.3-0.4 s against 0.1).
PARSE_TYPE = T.StructType(
    [T.StructField("protocol", T.StringType())]
    + [T.StructField(name, _SPARK_TYPES[kind]) for name, kind in FIELD_KINDS.items()]
    + [T.StructField(name, T.StringType()) for name in ("data", "data_base64", "received_at")]
)
# The same as DDL text, for plain PySpark (the benches' passthrough, tests).
PARSE_SCHEMA = ", ".join(f"`{f.name}` {f.dataType.simpleString()}" for f in PARSE_TYPE.fields)
_COMMON = ("protocol", "data", "data_base64", "received_at")
_PARSED = frozenset({*FIELD_KINDS, *_COMMON})
# The fields of the parse schema of the plan being built (`parsing`): `col` reads any
# other field as a null.
_READABLE: ContextVar[frozenset[str]] = ContextVar("xrgw_spark_readable", default=_PARSED)
_STRING_KEYS = sorted(
    {n for n, k in FIELD_KINDS.items() if k == "string"}
    | {"protocol", "received_at", "name", "data_base64"}
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


def parse_type(protocols: Collection[str] | None = None) -> T.StructType:
    """The parse schema restricted to the fields of `protocols` (all when None) and the
    fields every record has.

    A record of another protocol never takes the compiled path (`sql_ok`), and a record
    of one of these has every one of its protocol's fields parsed with its type, as
    with the whole schema (a field of another protocol is an unknown key to it either
    way, which the screen's key count rejects). So the screen and the match judge every
    record as before, and `from_json` builds a struct of a dozen fields instead of
    every protocol's (an all-MQTT catalog: 13 instead of 34)."""
    names = _readable(protocols)
    return T.StructType([f for f in PARSE_TYPE.fields if f.name in names])


def _readable(protocols: Collection[str] | None) -> frozenset[str]:
    if protocols is None:
        return _PARSED
    return frozenset({*_COMMON, *(name for protocol in protocols
                                  for name in RECORD_FIELDS.get(protocol, {}))})


@contextmanager
def parsing(protocols: Collection[str] | None) -> Iterator[T.StructType]:
    """Build expressions over a record parsed with `parse_type(protocols)` (the type
    yielded): inside, `col` reads every field outside it as a null."""
    token = _READABLE.set(_readable(protocols))
    try:
        yield parse_type(protocols)
    finally:
        _READABLE.reset(token)


def col(r: Column, name: str) -> Column:
    """A field of the parsed record. A name the parse schema does not have (a definition
    field no record carries, e.g. the HTTP response `status`: the gateway receives
    requests; a field of a protocol no compiled definition reads, see `parsing`) is
    absent from every record the compiled path settles, as the core reads it: a null,
    never an analysis error that would fail the whole job."""
    if name not in _READABLE.get():
        return F.lit(None).cast("string")
    return r.getField(name)


def family(protocol: Column) -> Column:
    """`gateway.protocols.family`: MQTT 3.1.1 and 5.0 records share definitions."""
    renamed = [(protocol.isin(*(p.name for p in PROFILES if p.family == name)), F.lit(name))
               for name in dict.fromkeys(p.family for p in PROFILES if p.family != p.name)]
    return case_when(renamed).otherwise(protocol) if renamed else protocol


def address(r: Column, fam: Column, families: Collection[str] | None = None) -> Column:
    """`values.address_of` (HTTP paths with `%` never reach SQL, so no decoding here);
    only for `families` when given (others: null)."""
    return case_when([(fam == name, read_ref(r, ref)) for name, ref in address_fields().items()
                      if families is None or name in families])


def profiles(protocols: Collection[str] | None) -> list[ProtocolProfile]:
    """The profiles of `protocols` (all when None)."""
    return [prof for prof in PROFILES if protocols is None or prof.name in protocols]


def _present_fields(r: Column, protocol: Column,
                    record_fields: Mapping[str, Mapping[str, str]]) -> Column:
    """How many of the protocol's fields the parse filled (typed and not null); null
    for a protocol not in `record_fields`.

    Fields are grouped by the protocols that have them, so the protocol is compared
    once per group (not once per field) and the expression stays small."""
    groups: dict[tuple[str, ...], list[str]] = {}
    owners: dict[str, list[str]] = {}
    for proto, fields in record_fields.items():
        for name in fields:
            owners.setdefault(name, []).append(proto)
    for name, protocols in owners.items():
        groups.setdefault(tuple(protocols), []).append(name)
    def filled(names: Iterable[str]) -> Column:
        return sum((F.when(col(r, name).isNotNull(), 1).otherwise(0) for name in names),
                   F.lit(0))

    total = filled(_COMMON)
    for owned_by, members in groups.items():
        total = total + F.when(protocol.isin(*owned_by), filled(members)).otherwise(0)
    return F.when(protocol.isin(*record_fields), total)


def _mentions_cloudevents(text: Column) -> Column:
    lowered = F.lower(text)
    return lowered.contains("specversion") | lowered.contains("cloudevents")


# How Spark's text for a JSON number, object or array starts.
_UNQUOTED_FIRST = "-0123456789{["


def _looks_unquoted(value: Column) -> Column:
    """Could this string be Spark's text for a JSON number, boolean, object or array?
    (Spark reads `5` into a string field as "5"; the core rejects it.)"""
    first = F.substring(value, 1, 1)
    return first.isin(*_UNQUOTED_FIRST) | value.isin("true", "false")


# One header / user property entry is fine for SQL: name + value, the value not null,
# the name not a non-string in disguise (see `_looks_unquoted`), and neither naming a
# CloudEvents attribute nor carrying a CloudEvents content type (any binding, any case:
# the core decodes those). SQL text for `sql_lambda`.
_ENTRY_OK = (
    "size(e) = 2 AND try_element_at(e, 'value') IS NOT NULL"
    " AND NOT coalesce(substring(try_element_at(e, 'name'), 1, 1)"
    f" IN ({', '.join(sql_string(c) for c in _UNQUOTED_FIRST)})"
    " OR try_element_at(e, 'name') IN ('true', 'false'), true)"
    " AND NOT coalesce(contains(lower(concat(try_element_at(e, 'name'), ' ',"
    " try_element_at(e, 'value'))), 'specversion') OR contains(lower(concat("
    "try_element_at(e, 'name'), ' ', try_element_at(e, 'value'))), 'cloudevents'), false)"
)


def sql_ok(line: Column, r: Column, keys: Column,
           protocols: Collection[str] | None = None) -> Column:
    """True when the compiled path can judge this record exactly (see module doc).

    `keys` is `json_object_keys(line)`, projected once by the caller. The conditions are
    cheap on purpose (this runs on every record): counts and prefixes of parsed values,
    one lambda over header/property entries, substring searches on the line; the one
    regex over the whole line runs only for the rare record a cheap test cannot clear.

    `protocols`: the protocols some compiled definition can match (None: all). A record
    of any other protocol cannot match in SQL, so it goes to the Python stage, and the
    conditions only read those protocols' fields: a field of another protocol is an
    unknown key for these, which the key count already rejects. Fewer fields, smaller
    generated code (`docs/spark.md`, "Code generation settings").
    """
    protocol = col(r, "protocol")
    record_fields = {name: dict(fields) for name, fields in RECORD_FIELDS.items()
                     if protocols is None or name in protocols}
    if not record_fields:
        return F.lit(False)
    kinds = {name: kind for fields in record_fields.values() for name, kind in fields.items()}
    pairs = [name for name, kind in kinds.items() if kind == "pairs"]
    entries = f"flatten(array({', '.join(_entries_sql(name) for name in pairs)}))"
    # String fields whose value is not checked exactly below (protocol is looked up,
    # received_at must be a canonical timestamp).
    plain = [name for name in _STRING_KEYS if name not in ("protocol", "received_at", "name")
             and (name in kinds or name in _COMMON)]
    suspicious = F.coalesce(any_of([_looks_unquoted(col(r, name)) for name in plain]),
                            F.lit(False))
    conditions = [
        r.isNotNull(),
        # Every key is one of the protocol's fields, read with its type, not null, once:
        # an unknown key, a wrongly typed value or JSON null leaves the counts apart.
        F.size(keys) == _present_fields(r, protocol, record_fields),
        # Entries are name + value, the name a string; none names a CloudEvents
        # attribute or carries a CloudEvents content type (any binding, any case: the
        # core decodes those).
        sql_lambda("forall", entries, _ENTRY_OK) if pairs else F.lit(True),
        # A string field that may hold a non-string: decide on the line itself (a `\u`
        # escape could hide the key from the regex, so that goes to the core too).
        ~(suspicious & (line.rlike(_NON_STRING) | line.contains("\\u"))),
        # The other places CloudEvents show: a content type, AMQP property maps, and a
        # body with a `specversion` member (parsed values: escapes are decoded).
        ~F.coalesce(_mentions_cloudevents(col(r, "content_type")), F.lit(False)),
        ~any_of([F.coalesce(_mentions_cloudevents(F.to_json(col(r, name))), F.lit(False))
                 for name, kind in kinds.items() if kind == "object"]),
        ~F.coalesce(col(r, "data").contains("specversion"), F.lit(False)),
        ~(col(r, "data").isNotNull() & col(r, "data_base64").isNotNull()),
        # The CloudEvent splices `data` in as Spark's JSON text: right for an object or
        # array, but a JSON string arrives unquoted. (The regex starts with a literal, so
        # Java searches it with Boyer-Moore.) The key must be spelled out for the regex
        # to see it: `"d\u0061ta"` is `data` too, so a line escaping one of its letters
        # goes to the core.
        F.when(col(r, "data").isNull(), F.lit(True)).otherwise(
            F.substring(col(r, "data"), 1, 1).isin("{", "[")
            & ~line.rlike(r'"data"\s*:\s*"') & ~_escapes_data_letter(line)),
        ~(col(r, "key").isNotNull() & col(r, "key_base64").isNotNull())
        if "key" in kinds else F.lit(True),
        F.when(col(r, "data_base64").isNull(), F.lit(True)).otherwise(
            col(r, "data_base64").rlike(_BASE64)
            & ~F.coalesce(F.unbase64(col(r, "data_base64")).cast("string")
                          .contains("specversion"), F.lit(False))),
        F.when(col(r, "received_at").isNull(), F.lit(True)).otherwise(
            col(r, "received_at").rlike(CANONICAL_TIME)
            & col(r, "received_at").try_cast("timestamp").isNotNull()),
        # Percent-decoding (Python `unquote`) and query maps stay with the core.
        ~_percent_encoded(r, protocol, profiles(protocols)),
    ]
    return F.coalesce(all_of(conditions), F.lit(False))


def _escapes_data_letter(line: Column) -> Column:
    """The line writes a letter of `data` as a JSON escape (`\\u0064` d, `\\u0061` a,
    `\\u0074` t; JSON writes `\\u` in lower case and these code points have no hex
    letters). One search for `\\u` settles almost every line."""
    return line.contains("\\u") & any_of([line.contains(f"\\u{code:04x}")
                                          for code in sorted({ord(c) for c in "data"})])


def _percent_encoded(r: Column, protocol: Column, among: list[ProtocolProfile]) -> Column:
    """A record with a field the core percent-decodes before matching (an HTTP path with
    a `%`, any HTTP query map)."""
    def needs_decoding(prof: ProtocolProfile, name: str) -> Column:
        if prof.record_fields[name] == "string":
            return F.coalesce(col(r, name).contains("%"), F.lit(False))
        return col(r, name).isNotNull()

    return any_of([(protocol == prof.name)
                   & any_of([needs_decoding(prof, name) for name in prof.percent_encoded])
                   for prof in among if prof.percent_encoded])


# -- field readers: the value the record carries for one constrained field, as text ----

def read_scalar(r: Column, field: str) -> Column:
    return col(r, field).cast("string")


def read_section(r: Column, field: str, name: str) -> Column:
    section = col(r, field)
    return F.when(F.coalesce(F.map_contains_key(section, F.lit(name)), F.lit(False)),
                  F.coalesce(F.try_element_at(section, F.lit(name)), F.lit("")))


def _entries_sql(field: str) -> str:
    """SQL for the entries of a repeatable field of the parsed record (never null; none
    for a field the parse schema does not have, see `col`)."""
    if FIELD_KINDS.get(field) != "pairs" or field not in _READABLE.get():
        return "cast(array() as array<map<string,string>>)"
    return f"coalesce({RECORD}.`{field}`, cast(array() as array<map<string,string>>))"


def pair_values(field: str, name: str, case_insensitive: bool) -> Column:
    """The entries of a repeatable field (headers, user properties) with this name."""
    key = "try_element_at(e, 'name')"
    if case_insensitive:
        return sql_lambda("filter", _entries_sql(field),
                          f"lower({key}) = {sql_string(name.lower())}")
    return sql_lambda("filter", _entries_sql(field), f"{key} = {sql_string(name)}")


def read_pairs(field: str, name: str, case_insensitive: bool) -> Column:
    """The first value of a repeatable field with this name (null: none)."""
    return first_value(pair_values(field, name, case_insensitive))


def first_value(entries: Column) -> Column:
    return F.try_element_at(F.try_element_at(entries, F.lit(1)), F.lit("value"))


def read_ref(r: Column, ref: FieldRef, metadata: Metadata | None = None) -> Column:
    """The value at `ref` (`NativeMessage.metadata` when `ref` is in the protocol's
    `metadata` place: the first entry with that name)."""
    if ref.name is None:
        return col(r, ref.field)
    if metadata is not None and ref.field == metadata.field and metadata.shape == "pairs":
        return read_pairs(ref.field, ref.name, metadata.ignore_case)
    return F.try_element_at(col(r, ref.field), F.lit(ref.name))
