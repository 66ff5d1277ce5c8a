"""The compiled match stage: index join, check evaluation, most-specific selection.

1. Each record computes its index keys, exactly like `KeyIndex.lookup`: its address as an
   exact key; for every distinct *shape* (segment count + literal positions) of the
   family's segmented templates, the literal segments at those positions; for every
   literal-prefix length, its prefix; and the family's "rest" key.
2. One broadcast hash join per key slot fetches the candidate definitions (an array per
   key), so the cost per record is a few hash probes whatever the number of definitions.
3. Candidates are evaluated by one generic SQL expression (`aggregate` over the checks):
   checks are data (field reader, mode, type, constant, regex), so the generated code does
   not grow with the definitions. Captures of a
   segmented address are read by position; other templates run `regexp_extract`.
4. `array_max` over (literal chars, constrained fields, -order) picks the most specific;
   a tie the policy cannot settle in SQL goes to the Python stage.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from gateway.spark.compiler import SEP, CompiledCatalog, ReaderSpec, plan_rows
from gateway.spark.records import read_pairs, read_scalar, read_section
from gateway.spark.sqlfuncs import call

# `gateway.matching.values.conforms` for text values (every value reaches SQL as text;
# the screen guarantees text and JSON values agree, see records.py).
_TYPE_PATTERNS = {
    "integer": r"^-?\d+$",
    "number": r"^-?\d+(\.\d+)?([eE][-+]?\d+)?$",
    "uri": r"^[A-Za-z][A-Za-z0-9+.\-]*:",
    "timestamp": r"^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$",
    "datetime": r"^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$",
    "duration": r"^-?P",
}

CHECK_TYPE = T.StructType([
    T.StructField("fid", T.IntegerType()),  # index of the field reader (`_vals`)
    T.StructField("mode", T.IntegerType()),  # 0 presence, 1 const, 2 regex, 3 segments
    T.StructField("typ", T.StringType()),  # declared type when it can fail, else ""
    T.StructField("req", T.BooleanType()),
    T.StructField("const", T.StringType()),
    T.StructField("regex", T.StringType()),
    T.StructField("slots", T.ArrayType(T.IntegerType())),  # capture slot per group
    T.StructField("pos", T.ArrayType(T.IntegerType())),  # segment per capture (mode 3)
])
CANDIDATE_TYPE = T.StructType([
    T.StructField("idx", T.IntegerType()),
    T.StructField("lit", T.IntegerType()),
    T.StructField("cnt", T.IntegerType()),
    T.StructField("negorder", T.IntegerType()),
    T.StructField("py", T.BooleanType()),
    T.StructField("schema", T.BooleanType()),
    T.StructField("checks", T.ArrayType(CHECK_TYPE)),
    T.StructField("nslots", T.IntegerType()),
])


def conforms(value: Column, declared: Column) -> Column:
    """`conforms` with the declared type as data (one small expression for all checks)."""
    out = F.when(declared == "", F.lit(True)).when(
        declared == "boolean", value.isin("true", "false"))
    for name, pattern in _TYPE_PATTERNS.items():
        out = out.when(declared == name, value.rlike(pattern))
    return out.otherwise(F.lit(True))


def read(r: Column, spec: ReaderSpec) -> Column:
    if spec.kind == "pairs":
        return read_pairs(r, spec.field, spec.name or "", spec.case_insensitive)
    if spec.kind == "section":
        return read_section(r, spec.field, spec.name or "")
    return read_scalar(r, spec.field)


def _check(state: Column, k: Column, vals: Column, segments: Column) -> Column:
    """One step of `CompiledDefinition.evaluate`: `Check.apply` on the field's values,
    merging captures into `state.caps` with the placeholder-consistency rule."""
    values = F.try_element_at(vals, k["fid"] + 1)
    conforming = F.filter(values, lambda v: conforms(v, k["typ"]))
    hit = F.try_element_at(F.filter(conforming, lambda v: F.regexp_like(v, k["regex"])),
                           F.lit(1))
    captured = (
        F.when(k["mode"] == 2, F.transform(k["slots"], lambda _s, i: call(
            "regexp_extract", hit, k["regex"], i + 1)))
        .when(k["mode"] == 3, F.transform(k["pos"], lambda p: F.try_element_at(
            segments, p + 1)))
        .otherwise(F.array().cast("array<string>"))
    )
    passed = (
        F.when(k["mode"] == 0, F.when(F.size(values) > 0, F.size(conforming) > 0)
               .otherwise(~k["req"]))
        .when(k["mode"] == 1, F.exists(conforming, lambda v: v == k["const"]))
        .when(k["mode"] == 2, hit.isNotNull())
        .otherwise(F.forall(captured, lambda x: F.length(x) > 0))
    )
    caps = state["caps"]
    consistent = F.forall(F.arrays_zip(k["slots"].alias("s"), captured.alias("v")), lambda z: (
        F.try_element_at(caps, z["s"] + 1).isNull()
        | (F.try_element_at(caps, z["s"] + 1) == z["v"])))
    merged = F.transform(caps, lambda c, i: F.coalesce(c, F.when(
        F.array_position(k["slots"], i) > 0,
        F.try_element_at(captured, F.array_position(k["slots"], i).cast("int")))))
    ok = state["ok"] & F.coalesce(passed & consistent, F.lit(False))
    return F.struct(ok.alias("ok"), F.when(ok, merged).otherwise(caps).alias("caps"))


def record_keys(catalog: CompiledCatalog, fam: Column, addr: Column,
                segments: Column) -> list[Column]:
    """The record's index keys, one column per join slot (null: no key in that slot)."""
    keys = [F.concat(fam, F.lit(f"{SEP}x{SEP}"), addr)]
    nseg = F.size(segments)
    depth = max((len(s) for by_n in catalog.shapes.values() for s in by_n.values()), default=0)
    for slot in range(depth):
        expr: Any = None
        for family, by_count in catalog.shapes.items():
            for count, shapes in by_count.items():
                if slot >= len(shapes):
                    continue
                literal = shapes[slot]
                shape_id = f"{count}:{','.join(map(str, literal))}"
                parts = [F.lit(f"{family}{SEP}s{SEP}{shape_id}")] + [
                    F.try_element_at(segments, F.lit(i + 1)) for i in literal
                ]
                key = F.concat_ws(SEP, *parts)
                cond = (fam == family) & (nseg == count)
                expr = F.when(cond, key) if expr is None else expr.when(cond, key)
        keys.append(expr)
    depth = max((len(v) for v in catalog.prefixes.values()), default=0)
    for slot in range(depth):
        expr = None
        for family, lengths in catalog.prefixes.items():
            if slot < len(lengths):
                length = lengths[slot]
                key = F.concat(F.lit(f"{family}{SEP}p{length}{SEP}"),
                               F.substring(addr, 1, length))
                expr = F.when(fam == family, key) if expr is None else expr.when(
                    fam == family, key)
        keys.append(expr)
    if catalog.rest_families:
        keys.append(F.when(fam.isin(*sorted(catalog.rest_families)),
                           F.concat(fam, F.lit(f"{SEP}r"))))
    return keys


def candidate_table(spark: SparkSession, catalog: CompiledCatalog) -> DataFrame:
    grouped: dict[str, list[tuple[Any, ...]]] = {}
    for row in plan_rows(catalog):
        grouped.setdefault(row["k"], []).append(tuple(
            row[f.name] for f in CANDIDATE_TYPE.fields
        ))
    schema = T.StructType([T.StructField("k", T.StringType()),
                           T.StructField("cands", T.ArrayType(CANDIDATE_TYPE))])
    return spark.createDataFrame(list(grouped.items()), schema)


def match(df: DataFrame, catalog: CompiledCatalog, candidates: DataFrame) -> DataFrame:
    """Adds `_best` (struct lit, cnt, negorder, idx, caps) and `_route_py` to `df`
    (columns `r`, `_fam`, `_addr` expected)."""
    r, fam, addr = F.col("r"), F.col("_fam"), F.col("_addr")
    # Everything the candidate lambda reads is projected first as a plain column, so the
    # generated code of the lambda stays small and each value is computed once per row.
    out = df.withColumn("_segs", F.split(addr, "/", -1))
    segments = F.col("_segs")
    keys = record_keys(catalog, fam, addr, segments)
    cand_cols: list[Column] = []
    for slot, key in enumerate(keys):
        out = out.withColumn(f"_k{slot}", key)
        side = F.broadcast(candidates.select(F.col("k").alias(f"_j{slot}"),
                                             F.col("cands").alias(f"_c{slot}")))
        out = out.join(side, out[f"_k{slot}"] == side[f"_j{slot}"], "left")
        cand_cols.append(F.coalesce(F.col(f"_c{slot}"), F.array().cast(
            T.ArrayType(CANDIDATE_TYPE))))
    out = out.withColumn("_cands", F.concat(*cand_cols))
    # The values of every field reader, projected once per row; checks index into it.
    out = out.withColumn("_vals", F.array(*[read(r, spec) for spec in catalog.readers])
                         if catalog.readers else F.array().cast("array<array<string>>"))
    vals = F.col("_vals")

    def evaluate(c: Column) -> Column:
        start = F.struct(F.lit(True).alias("ok"), F.array_repeat(
            F.lit(None).cast("string"), c["nslots"]).alias("caps"))
        result = F.aggregate(c["checks"], start,
                             lambda state, k: _check(state, k, vals, segments))
        return F.struct(
            result["ok"].alias("ok"), c["lit"].alias("lit"), c["cnt"].alias("cnt"),
            c["negorder"].alias("negorder"), c["idx"].alias("idx"),
            result["caps"].alias("caps"), c["schema"].alias("schema"),
        )

    passing: Callable[[Column], Column] = lambda x: x["ok"]  # noqa: E731
    out = out.withColumn("_passing", F.filter(F.transform("_cands", evaluate), passing))
    best = F.array_max("_passing")
    out = out.withColumn("_best", best.dropFields("ok"))
    tied = F.filter("_passing", lambda x: (x["lit"] == F.col("_best.lit"))
                    & (x["cnt"] == F.col("_best.cnt")))
    settle_in_python = F.lit(catalog.ambiguity == "deadletter")
    if catalog.validate_schema:
        settle_in_python = settle_in_python | F.exists(tied, lambda x: x["schema"])
    route = (
        F.exists("_cands", lambda c: c["py"])
        | (F.size("_passing") == 0)
        | ((F.size(tied) > 1) & settle_in_python)
    )
    drop = [c for c in out.columns if c.startswith(("_k", "_j", "_c", "_v"))]
    drop += ["_passing", "_segs", "_vals"]
    return out.withColumn("_route_py", route).drop(*drop)
