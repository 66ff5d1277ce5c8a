"""The compiled match stage: index join, check evaluation, most-specific selection.

1. Each record computes its index keys, exactly like `KeyIndex.lookup`: its address as an
   exact key; for every distinct *shape* (segment count + literal positions) of the
   family's segmented templates, the literal segments at those positions; for every
   literal-prefix length, its prefix; and the family's "rest" key. Only the slots some
   definition can be found in are computed.
2. One broadcast hash join per key slot fetches that key's candidate definitions (an array
   of small structs: constants, regexes, ranks, render literals), so the cost per record
   is a few hash probes whatever the number of definitions.
3. Candidates are read by *position* (the compiler knows the longest array per slot) and
   evaluated by plain SQL generated once per check *signature*: the fields, modes, types
   and capture layout are static, only constants and regexes come from the candidate row.
   No lambda runs per candidate or per check, so Spark generates tight code. Captures of
   a segmented address are read by position; other templates run `regexp_extract`.
4. `greatest` over (literal chars, constrained fields, -order, ...) picks the most
   specific; a tie the policy cannot settle in SQL goes to the Python stage.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from gateway.cloudevents.typesystem import INT32_MAX, INT32_MIN
from gateway.cloudevents.uri import RELATIVE_REF_PATTERN, URI_PATTERN
from gateway.matching.values import UINT32_MAX
from gateway.spark.compiler import SEP, CheckShape, CompiledCatalog, ReaderSpec, plan_rows
from gateway.spark.records import first_value, pair_values, read_scalar, read_section
from gateway.spark.sqlfuncs import all_of, any_of, case_when

# `gateway.matching.values.conforms` for text values (every value reaches SQL as text;
# the screen guarantees text and JSON values agree, see records.py).
TYPE_PATTERNS = {
    # `\z`, not `$`: Java's `$` also matches before a final line break, Python's `\Z` not
    "number": r"^-?\d+(\.\d+)?([eE][-+]?\d+)?\z",
    "uri": rf"^(?:{URI_PATTERN})\z",
    "urireference": rf"^(?:(?:{URI_PATTERN})|(?:{RELATIVE_REF_PATTERN}))\z",
    "symbol": r"^[A-Za-z0-9_]*\z",
    "timestamp": r"^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})\z",
    "datetime": r"^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})\z",
    "duration": r"^-?P",
}

CANDIDATE_TYPE = T.StructType([
    T.StructField("lit", T.IntegerType()),
    T.StructField("cnt", T.IntegerType()),
    T.StructField("negorder", T.IntegerType()),
    T.StructField("idx", T.IntegerType()),  # unique: ordering never looks further
    T.StructField("sig", T.IntegerType()),
    T.StructField("py", T.BooleanType()),  # rendered by the Python stage
    T.StructField("pym", T.BooleanType()),  # matched by the Python stage (see compiler)
    T.StructField("schema", T.BooleanType()),
    T.StructField("consts", T.ArrayType(T.StringType())),
    T.StructField("regexes", T.ArrayType(T.StringType())),
    T.StructField("xid", T.StringType()),
    T.StructField("names", T.ArrayType(T.StringType())),
    T.StructField("shapes", T.ArrayType(T.IntegerType())),
    T.StructField("offsets", T.ArrayType(T.IntegerType())),
    T.StructField("rvals", T.ArrayType(T.StringType())),
    T.StructField("tfr", T.BooleanType()),
    T.StructField("ctype", T.StringType()),
    T.StructField("dschema", T.StringType()),
])
_CANDIDATES = T.ArrayType(CANDIDATE_TYPE)


def conforms(value: Column, declared: str) -> Column:
    """`values.conforms` for one statically known declared type ("" accepts anything)."""
    if declared == "boolean":
        return value.isin("true", "false")
    if declared in ("integer", "uint32"):
        # CloudEvents Integer (32-bit signed), or the unsigned 32-bit protocol fields
        low, high = (INT32_MIN, INT32_MAX) if declared == "integer" else (0, UINT32_MAX)
        return F.coalesce(value.rlike(r"^-?\d+\z")
                          & value.try_cast("long").between(low, high), F.lit(False))
    if declared in TYPE_PATTERNS:
        return value.rlike(TYPE_PATTERNS[declared])
    return F.lit(True)


def _reader_column(readers: list[ReaderSpec], spec: ReaderSpec) -> Column:
    return F.col(f"_f{readers.index(spec)}")


def read_columns(r: Column, readers: list[ReaderSpec]) -> dict[str, Column]:
    """Per field reader: its single value (`_fN`, null when absent) or, for repeatable
    fields, the entries with the wanted name (`_pN`; `match` takes the first value, and
    more than one value goes to the Python stage)."""
    out: dict[str, Column] = {}
    for i, spec in enumerate(readers):
        if spec.kind == "pairs":
            out[f"_p{i}"] = pair_values(spec.field, spec.name or "", spec.case_insensitive)
        elif spec.kind == "section":
            out[f"_f{i}"] = read_section(r, spec.field, spec.name or "")
        else:
            out[f"_f{i}"] = read_scalar(r, spec.field)
    return out


def _evaluate(signature: tuple[CheckShape, ...], c: Column, readers: list[ReaderSpec],
              segments: Column) -> tuple[Column, Column]:
    """`CompiledDefinition.evaluate` for one check signature: (passed, captures)."""
    caps: dict[int, Column] = {}
    passed: list[Column] = []
    for i, shape in enumerate(signature):
        value = _reader_column(readers, shape.reader)
        conforming = value.isNotNull() & conforms(value, shape.type)
        captured: list[Column] = []
        if shape.mode == "presence":
            ok = F.when(value.isNull(), F.lit(not shape.required)).otherwise(conforming)
        elif shape.mode == "const":
            ok = conforming & (value == F.try_element_at(c["consts"], F.lit(i + 1)))
        elif shape.mode == "regex":
            regex = F.try_element_at(c["regexes"], F.lit(i + 1))
            ok = conforming & F.regexp_like(value, regex)
            captured = [F.call_function("regexp_extract", value, regex, F.lit(g + 1))
                        for g in range(len(shape.slots))]
        else:  # segments: the index join compared the literal segments already
            captured = [F.try_element_at(segments, F.lit(p + 1)) for p in shape.positions]
            ok = all_of([F.length(x) > 0 for x in captured])
        consistent: list[Column] = []
        for slot, value_of_slot in zip(shape.slots, captured, strict=True):
            if slot in caps:  # a placeholder used twice must carry the same value
                consistent.append(caps[slot].isNull() | (caps[slot] == value_of_slot))
                caps[slot] = F.coalesce(caps[slot], value_of_slot)
            else:
                caps[slot] = value_of_slot
        passed.append(F.coalesce(all_of([ok, *consistent]), F.lit(False)))
    captures = F.array(*[caps[s] for s in sorted(caps)]) if caps else F.array().cast(
        "array<string>")
    return all_of(passed), captures


def record_keys(catalog: CompiledCatalog, fam: Column, addr: Column,
                segments: Column) -> dict[tuple[Any, ...], Column]:
    """The record's index key per slot (null: no key in that slot)."""
    keys: dict[tuple[Any, ...], Column] = {}
    nseg = F.size(segments)
    for slot in catalog.slots():
        kind = slot[0]
        if kind == "x":
            keys[slot] = F.concat(fam, F.lit(f"{SEP}x{SEP}"), addr)
        elif kind == "s":
            branches = []
            for family, by_count in catalog.shapes.items():
                for count, shapes in by_count.items():
                    if slot[1] >= len(shapes):
                        continue
                    literal = shapes[slot[1]]
                    shape_id = f"{count}:{','.join(map(str, literal))}"
                    key = F.concat_ws(SEP, F.lit(f"{family}{SEP}s{SEP}{shape_id}"), *[
                        F.try_element_at(segments, F.lit(i + 1)) for i in literal])
                    branches.append(((fam == family) & (nseg == count), key))
            keys[slot] = case_when(branches)
        elif kind == "p":
            keys[slot] = case_when([
                (fam == family, F.concat(F.lit(f"{family}{SEP}p{lengths[slot[1]]}{SEP}"),
                                         F.substring(addr, 1, lengths[slot[1]])))
                for family, lengths in catalog.prefixes.items() if slot[1] < len(lengths)])
        else:
            keys[slot] = F.when(fam.isin(*sorted(catalog.rest_families)),
                                F.concat(fam, F.lit(f"{SEP}r")))
    return keys


def candidate_tables(spark: SparkSession,
                     catalog: CompiledCatalog) -> dict[tuple[Any, ...], DataFrame]:
    """Per key slot, the broadcast side of its join: key -> candidates in catalog order.

    Each table is one JSON text literal that `from_json` reads in the JVM, not a
    DataFrame made from Python rows: `createDataFrame` of a list runs a Python-worker job
    to re-serialize the rows when the broadcast is built (2 to 3 s of worker start-up
    in every fresh job, `bench.bench_spark_job`), and the literal folds into a local
    relation that Spark broadcasts without any task."""
    grouped: dict[tuple[Any, ...], dict[str, list[dict[str, Any]]]] = {}
    for row in plan_rows(catalog):
        grouped.setdefault(row["slot"], {}).setdefault(row["k"], []).append(
            {f.name: row[f.name] for f in CANDIDATE_TYPE.fields})
    schema = T.ArrayType(T.StructType([T.StructField("k", T.StringType()),
                                       T.StructField("cands", _CANDIDATES)]))
    one = spark.range(1, numPartitions=1)  # one task builds each broadcast table
    return {slot: one.select(F.inline(F.from_json(
        F.lit(json.dumps([{"k": k, "cands": c} for k, c in rows.items()])), schema)))
        for slot, rows in grouped.items()}


def match(df: DataFrame, catalog: CompiledCatalog,
          tables: dict[tuple[Any, ...], DataFrame]) -> DataFrame:
    """Adds `_cand` (the winning candidate), `_caps` (its captures, by slot) and
    `_route_py` to `df` (columns `_fam`, `_addr`, `_segs` and the field readers of
    `read_columns` expected; the match's own columns are dropped on the way).

    One projection per phase: the index keys (and each repeatable field's first value),
    the joins, whether each candidate passed, the winner's ranks, the winner. Every
    projection copies the row, so each one carries only what a later phase reads."""
    fam, addr, segments = F.col("_fam"), F.col("_addr"), F.col("_segs")
    readers = catalog.readers
    multi: list[Column] = []
    firsts: dict[str, Column] = {}
    for i, spec in enumerate(readers):
        if spec.kind == "pairs":
            multi.append(F.size(f"_p{i}") > 1)
            firsts[f"_f{i}"] = first_value(F.col(f"_p{i}"))
    slots = catalog.slots()
    keys = record_keys(catalog, fam, addr, segments)
    entries = {f"_p{i}" for i in range(len(readers))}
    out = df.select(*[c for c in df.columns if c not in entries and c not in ("_fam", "_addr")],
                    *[v.alias(n) for n, v in firsts.items()],
                    any_of(multi).alias("_multi"),
                    *[keys[slot].alias(f"_k{n}") for n, slot in enumerate(slots)])
    for n, slot in enumerate(slots):
        side = F.broadcast(tables[slot].select(F.col("k").alias(f"_j{n}"),
                                               F.col("cands").alias(f"_c{n}")))
        out = out.join(side, out[f"_k{n}"] == side[f"_j{n}"], "left")

    # Per candidate position: did it pass (`_okN`, projected once) and its captures.
    # The winner is picked on a small struct of ranks; its position then selects the
    # candidate row and captures, so nothing wide is rebuilt per record.
    candidates: list[Column] = []
    captured: list[Column] = []
    python_candidate: list[Column] = []
    passes: dict[str, Column] = {}
    for n, slot in enumerate(slots):
        for position, signatures in enumerate(catalog.positions(slot)):
            c = F.try_element_at(F.col(f"_c{n}"), F.lit(position + 1))
            results = {sig: _evaluate(catalog.signatures[sig], c, readers, segments)
                       for sig in signatures}
            candidates.append(c)
            captured.append(case_when([(c["sig"] == sig, caps)
                                       for sig, (_, caps) in results.items()]))
            python_candidate.append(F.coalesce(c["pym"], F.lit(False)))
            ok = case_when([(c["sig"] == sig, passed) for sig, (passed, _) in results.items()])
            passes[f"_ok{len(candidates) - 1}"] = F.coalesce(ok, F.lit(False))
    joined = [f"_k{n}" for n in range(len(slots))] + [f"_j{n}" for n in range(len(slots))]
    out = out.select(*[c for c in out.columns if c not in joined],
                     *[v.alias(n) for n, v in passes.items()])
    working = re.compile(r"_(c|ok|f)\d+|_segs|_multi|_best")
    if not candidates:
        return out.select(*[c for c in out.columns if not working.fullmatch(c)],
                          F.lit(None).cast(CANDIDATE_TYPE).alias("_cand"),
                          F.lit(None).cast("array<string>").alias("_caps"),
                          F.lit(True).alias("_route_py"))
    passing = [F.col(f"_ok{i}") for i in range(len(candidates))]
    ranks = [F.when(ok, F.struct(c["lit"].alias("lit"), c["cnt"].alias("cnt"),
                                 c["negorder"].alias("negorder"), F.lit(i).alias("pos")))
             for i, (ok, c) in enumerate(zip(passing, candidates, strict=True))]
    out = out.withColumn("_best", F.greatest(*ranks) if len(ranks) > 1 else ranks[0])
    best = F.col("_best")
    if len(candidates) == 1:
        chosen, chosen_caps = candidates[0], captured[0]
    else:
        chosen = case_when([(best["pos"] == i, c) for i, c in enumerate(candidates)])
        chosen_caps = case_when([(best["pos"] == i, c) for i, c in enumerate(captured)])
    tied = [ok & F.coalesce((x["lit"] == best["lit"]) & (x["cnt"] == best["cnt"]),
                            F.lit(False)) for ok, x in zip(passing, candidates, strict=True)]
    settle_in_python = F.lit(catalog.ambiguity == "deadletter")
    if catalog.validate_schema:
        settle_in_python = settle_in_python | any_of(
            [t & F.coalesce(x["schema"], F.lit(False)) for t, x in zip(tied, candidates,
                                                                        strict=True)])
    tie_count = sum((F.when(t, 1).otherwise(0) for t in tied), F.lit(0))
    route = any_of([*python_candidate, F.col("_multi"), best.isNull(),
                    (tie_count > 1) & settle_in_python])
    return out.select(*[c for c in out.columns if not working.fullmatch(c)],
                      F.when(best.isNotNull(), chosen).alias("_cand"),
                      F.when(best.isNotNull(), chosen_caps).alias("_caps"),
                      route.alias("_route_py"))
