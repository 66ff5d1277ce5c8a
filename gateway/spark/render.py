"""The CloudEvent columns of a matched record, built from literals and captures.

`gateway.envelope.render` is the rulebook; this stage implements its happy path in SQL
and flags (`_render_py`) every record where a rule would fail or needs Python (a value
that cannot be coerced, a content type that is not a media type ...), so the Python
stage produces the exact dead letter.
"""

from __future__ import annotations

from collections.abc import Collection

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from gateway.protocols import FieldRef, Metadata, ProtocolProfile
from gateway.spark.compiler import CompiledCatalog
from gateway.spark.matching import TYPE_PATTERNS
from gateway.spark.records import col, profiles, read_ref
from gateway.spark.sqlfuncs import (
    all_of,
    any_of,
    case_when,
    random_id,
    uuid5_digest,
    uuid_text,
)

_CONTROL = "[\\x00-\\x1f\\x7f-\\x9f]"
_ABSOLUTE_URI = r"(?U)^[A-Za-z][A-Za-z0-9+.\-]*:[^\s]*\z"
_URI_REFERENCE = r"(?U)^[^\s\x00-\x1f\x7f]+\z"
_MEDIA_TYPE = r"(?U)^[\w.+\-!#$&^]+/[\w.+\-!#$&^]+\s*(;[^\n]*)?\z"
_TRACEPARENT = r"^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$"
_INT32 = (-(2**31), 2**31 - 1)


def native_identity(r: Column, protocols: Collection[str] | None = None) -> Column:
    """`gateway.envelope.ids.native_identity`, from each profile's `identity` (of
    `protocols` when given: the only ones a rendered record can have)."""
    protocol = col(r, "protocol")
    branches: list[tuple[Column, Column]] = []
    for prof in profiles(protocols):
        if prof.identity is None:
            continue
        conditions = [protocol == prof.name]
        pieces = [F.lit(prof.identity.prefix + ":")]
        for index, part in enumerate(prof.identity.parts):
            value = read_ref(r, part.ref, prof.metadata).cast("string")
            if part.need == "present":
                conditions.append(value.isNotNull())
            elif part.need == "non-empty":
                conditions.append(F.length(value) > 0)
            else:
                value = F.coalesce(value, F.lit(""))
            pieces += [F.lit("/"), value] if index else [value]
        branches.append((all_of(conditions), F.concat(*pieces)))
    return case_when(branches)


def native_content_type(r: Column, protocols: Collection[str] | None = None) -> Column:
    """`NativeMessage.content_type`."""
    return _by_place(r, [(prof, prof.content_type) for prof in profiles(protocols)])


def trace_header(r: Column, name: str, protocols: Collection[str] | None = None) -> Column:
    """`gateway.envelope.render.trace_header` (`NativeMessage.metadata`)."""
    return _by_place(r, [(prof, FieldRef(prof.metadata.field, name))
                         for prof in profiles(protocols) if prof.metadata is not None])


def _by_place(r: Column, places: list[tuple[ProtocolProfile, FieldRef | None]]) -> Column:
    """CASE over the protocol: the value at each protocol's place (null where it has
    none); protocols reading the same place share one branch."""
    groups: dict[tuple[FieldRef, Metadata | None], list[str]] = {}
    for prof, ref in places:
        if ref is not None:
            groups.setdefault((ref, prof.metadata), []).append(prof.name)
    protocol = col(r, "protocol")
    return case_when([(protocol.isin(*names), read_ref(r, ref, metadata))
                      for (ref, metadata), names in groups.items()])


def _coerce_fails(name: str, typ: str, value: Column) -> Column:
    """`render.coerce` + `_check_attribute` would reject this templated value."""
    if typ == "integer":
        bad = ~(value.rlike(r"^-?\d+$") & value.try_cast("long").between(*_INT32))
    elif typ == "boolean":
        bad = ~value.isin("true", "false")
    else:
        bad = value.rlike(_CONTROL)
        if typ in ("uri", "urireference", "symbol"):  # `render.coerce`'s text rules
            bad = bad | ~value.rlike(TYPE_PATTERNS[typ])
    if name == "source":
        bad = bad | ~value.rlike(_URI_REFERENCE)
    elif name == "dataschema":
        bad = bad | ~value.rlike(_ABSOLUTE_URI)
    elif name == "datacontenttype":
        bad = bad | ~value.rlike(_MEDIA_TYPE)
    elif name in ("id", "type", "subject"):
        bad = bad | (F.length(value) == 0)
    return F.coalesce(bad, F.lit(True))


def _attribute(catalog: CompiledCatalog, position: int, best: Column) -> tuple[Column, Column]:
    """One rendered attribute of the winner, from its shape id: (value, cannot render)."""
    shape_id = F.try_element_at(best["shapes"], F.lit(position + 1))
    offset = F.try_element_at(best["offsets"], F.lit(position + 1))
    rvals, caps = best["rvals"], F.col("_caps")
    branches: list[tuple[Column, Column]] = []
    failures: list[Column] = []
    for number, (kind, typ, parts) in enumerate(catalog.attribute_shapes[position]):
        if kind == "fixed":
            text = F.try_element_at(rvals, offset + 1)
        else:
            pieces, literal = [], 0
            for part in parts:
                if part < 0:
                    pieces.append(F.try_element_at(rvals, offset + (literal + 1)))
                    literal += 1
                else:
                    pieces.append(F.try_element_at(caps, F.lit(part + 1)))
            text = F.concat(*pieces) if len(pieces) > 1 else pieces[0]
        chosen = shape_id == number
        branches.append((chosen, text))
        if kind == "template":
            failures.append(chosen & _coerce_fails(catalog.attributes[position], typ, text))
    return case_when(branches).cast("string"), any_of(failures)


def _mentions(line: Column, name: str) -> Column:
    """Whether the line may have `name` (a trace header name): it has the name, its
    `trace` prefix searched first, or a JSON `\\u` escape, which can spell any of its
    letters (`"tr\\u0061ceparent"` is a header named traceparent)."""
    return (line.contains("trace") & line.contains(name)) | line.contains("\\u")


def _now_rfc3339() -> Column:
    text = F.date_format(F.current_timestamp(), "yyyy-MM-dd'T'HH:mm:ss.SSSSSSXXX")
    return F.regexp_replace(F.regexp_replace(text, r"0+(?=Z|[+-]\d\d:\d\d$)", ""),
                            r"\.(?=Z|[+-])", "")


def record_columns(r: Column, lowered: Column,
                   protocols: Collection[str] | None) -> dict[str, Column]:
    """What the render stage reads from the record, as plain columns: the body, the
    receive time, the native content type, identity and trace headers (`lowered`: the
    line to search for the trace headers' names first).

    Read in the projection that reads the record for the screen and the match, so that
    the parsed struct is dropped there and no later projection copies it."""
    return {
        "_data": col(r, "data"), "_data64": col(r, "data_base64"),
        "_recv": col(r, "received_at"),
        "_nct": native_content_type(r, protocols), "_ident": native_identity(r, protocols),
        # Looked up only when the line mentions them (a lambda over the headers each).
        # `trace` first: one search of the line settles both for almost every record
        # (Spark evaluates the shared condition once per row).
        "_tp": F.when(_mentions(lowered, "traceparent"),
                      trace_header(r, "traceparent", protocols)),
        "_ts": F.when(_mentions(lowered, "tracestate"),
                      trace_header(r, "tracestate", protocols)),
    }


RENDERED = ("_match", "_context", "_ce", "_event", "_render_py")


def render(df: DataFrame, catalog: CompiledCatalog, salt: str) -> DataFrame:
    """Adds `_ce` (struct, one field per attribute + data + data_base64), `_event` (its
    structured JSON text), `_context`, `_match` and `_render_py` to matched rows (`_cand`,
    `_caps` and the columns of `record_columns` expected; all but `record` and the
    columns of `keep` are dropped). `salt` keeps generated ids apart
    (`sqlfuncs.random_id`).

    Two projections and the outcome: the attributes' texts (read from the winning
    candidate, which is dropped there), then the id's hash and the render checks, then
    the outcome columns. Within a projection Spark evaluates a shared subexpression once,
    so the struct and the event text read the same attribute values."""
    best = F.col("_cand")
    texts: dict[str, Column] = {}
    failures: list[Column] = []
    for position in range(len(catalog.attributes)):
        value, failure = _attribute(catalog, position, best)
        texts[f"_a{position}"] = value
        failures.append(failure)
    values = {name: F.col(f"_a{position}") for position, name in enumerate(catalog.attributes)}
    carried = [c for c in df.columns if c not in ("_cand", "_caps")]
    out = df.select(*carried, *[c.alias(n) for n, c in texts.items()],
                    F.map_from_arrays(best["names"], F.col("_caps")).alias("_context"),
                    best["xid"].alias("_match"), best["tfr"].alias("_tfr"),
                    best["ctype"].alias("_ctype"), best["dschema"].alias("_dschema"),
                    F.coalesce(best["py"], F.lit(False)).alias("_cand_py"),
                    *[f.alias(f"_fail{i}") for i, f in enumerate(failures)])
    native_ct, data, data_b64 = F.col("_nct"), F.col("_data"), F.col("_data64")
    declared_ct = values["datacontenttype"]
    bad_native = (declared_ct.isNull() & native_ct.isNotNull()
                  & ~F.coalesce(native_ct.rlike(_MEDIA_TYPE), F.lit(False)))
    render_py = F.coalesce(any_of([*[F.col(f"_fail{i}") for i in range(len(failures))],
                                   bad_native, F.col("_cand_py")]), F.lit(True))
    # The name-based id's hash, projected once: `uuid_text` reads it six times. The random
    # id too, so that the struct and the event text read one value of a row counter.
    generated = values["id"].isNull()
    digest = F.when(generated & F.col("_ident").isNotNull(), uuid5_digest(F.col("_ident")))
    random = F.when(generated & F.col("_ident").isNull(), random_id(salt))
    out = out.select(*[c for c in out.columns if not c.startswith("_fail")
                       and c != "_cand_py"],
                     digest.alias("_digest"), random.alias("_random"),
                     render_py.alias("_render_py"))
    content_type = (
        F.when(declared_ct.isNotNull(), declared_ct)
        .when(native_ct.isNotNull(), native_ct)
        .when(F.col("_ctype").isNotNull(), F.col("_ctype"))
        .when(data.isNotNull(), F.lit("application/json"))
    )
    traceparent, tracestate = F.col("_tp"), F.col("_ts")
    carry = values["traceparent"].isNull() & F.coalesce(traceparent.rlike(_TRACEPARENT),
                                                        F.lit(False))
    columns: dict[str, Column] = {
        "specversion": F.lit("1.0"),
        "id": F.coalesce(values["id"], F.col("_random"),
                         uuid_text(F.col("_digest"), F.lit("5"))),
        "source": values["source"],
        "type": values["type"],
        "subject": values["subject"],
        "time": F.when(F.col("_tfr"), F.coalesce(F.col("_recv"), _now_rfc3339()))
        .otherwise(values["time"]),
        "datacontenttype": content_type,
        "dataschema": F.coalesce(values["dataschema"], F.col("_dschema")),
        "traceparent": F.when(carry, traceparent).otherwise(values["traceparent"]),
        "tracestate": F.when(carry & (F.length(tracestate) > 0), tracestate)
        .otherwise(values["tracestate"]),
    }
    for name, spark_type in sorted(catalog.extensions.items()):
        columns[name] = _typed(values[name], spark_type)
    # A typed extension in a string column (a CloudEvent could bring it as text) keeps its
    # type in the event text, as the core renders it.
    json_columns = {**columns, **{name: _typed(values[name], json_type)
                                  for name, json_type in catalog.extension_json.items()}}
    temporary = {*(f"_a{i}" for i in range(len(catalog.attributes))), "_digest", "_random",
                 "_tfr", "_ctype", "_dschema", "_nct", "_ident", "_tp", "_ts", "_data", "_data64",
                 "_recv"}
    return out.select(
        *[c for c in out.columns if c not in temporary],
        F.struct(*[c.alias(n) for n, c in columns.items()], data.alias("data"),
                 data_b64.alias("data_base64")).alias("_ce"),
        event_json(F.to_json(F.struct(*[c.alias(n) for n, c in json_columns.items()])),
                   data, data_b64).alias("_event"))


def _typed(text: Column, spark_type: str) -> Column:
    """A rendered attribute (text) as a value of its column type."""
    if spark_type == "boolean":
        return text == "true"
    return text.try_cast("int") if spark_type == "int" else text


def event_json(attributes: Column, data: Column, data_base64: Column) -> Column:
    """The structured-mode JSON text: `attributes` (the attributes' JSON object, nulls
    dropped) with the body spliced in as it arrived, never parsed and re-serialized.

    The splice works on bytes: `substring`, `length` and `rtrim` of a string walk the
    UTF-8 text character by character (a JFR profile of the 1,000-definition bench found
    6% of the compiled path's samples in the first two, 9% in `rtrim`, which also
    allocates two arrays as long as the text); on binary these are byte offsets.
    `attributes` is read twice, in one projection: Spark evaluates the shared
    expression once."""
    body = F.when(data.isNotNull(), F.concat(F.lit(',"data":'), data)).when(
        data_base64.isNotNull(), F.concat(F.lit(',"data_base64":"'), data_base64, F.lit('"'))
    ).otherwise(F.lit(""))
    raw = attributes.cast("binary")
    # `attributes` ends with its object's closing brace, one byte in UTF-8
    head = F.call_function("substr", raw, F.lit(1), F.octet_length(attributes) - 1)
    return F.concat(head, body.cast("binary"), F.lit("}").cast("binary")).cast("string")
