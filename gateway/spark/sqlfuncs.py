"""Small SQL building blocks shared by the match and render stages."""

from __future__ import annotations

import uuid
from functools import reduce

from pyspark.sql import Column
from pyspark.sql import functions as F

from gateway.envelope.ids import ID_NAMESPACE


def all_of(conditions: list[Column]) -> Column:
    return reduce(lambda a, b: a & b, conditions) if conditions else F.lit(True)


def any_of(conditions: list[Column]) -> Column:
    return reduce(lambda a, b: a | b, conditions) if conditions else F.lit(False)


def case_when(branches: list[tuple[Column, Column]]) -> Column:
    """`CASE WHEN c1 THEN v1 WHEN c2 THEN v2 ... END` (null when no branch applies or
    there are none)."""
    if not branches:
        return F.lit(None)
    (first_condition, first_value), *rest = branches
    out = F.when(first_condition, first_value)
    for condition, value in rest:
        out = out.when(condition, value)
    return out


def call(name: str, *args: Column) -> Column:
    """A SQL function whose Python wrapper only takes literal patterns (regexp_extract)."""
    return F.call_function(name, *args)


def sql_string(text: str) -> str:
    """`text` as a Spark SQL string literal."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def sql_lambda(function: str, array: str, body: str) -> Column:
    """`function(array, e -> body)` (`filter`, `forall` ...) written as SQL text.

    Why text: PySpark gives each Python lambda's variable a fresh name (x_1, x_2 ...),
    and that name is written into the generated Java. Every plan built in the process
    (each streaming micro-batch, each batch of a job) would then compile new classes
    that the JIT warms up from scratch; with the name fixed the code is the same and
    Spark's compiled-class cache serves it."""
    return F.expr(f"{function}({array}, e -> {body})")


def uuid_text(digest: Column, version: Column) -> Column:
    """The first 32 hex digits of a digest as RFC 4122 UUID text of `version` (a one-digit
    string; the high bits of the 17th hex digit become 10, the variant).

    `digest` is read six times: pass a projected column, not the hash expression, or
    Spark computes the hash six times per row."""
    variant = F.translate(F.substring(digest, 17, 1), "0123456789abcdef", "89ab89ab89ab89ab")
    return F.concat(
        F.substring(digest, 1, 8), F.lit("-"), F.substring(digest, 9, 4), F.lit("-"), version,
        F.substring(digest, 14, 3), F.lit("-"), variant, F.substring(digest, 18, 3),
        F.lit("-"), F.substring(digest, 21, 12),
    )


def uuid5_digest(name: Column) -> Column:
    """The hash behind `uuid.uuid5(ID_NAMESPACE, name)`: SHA-1 of namespace + name (hex);
    `uuid_text(digest, F.lit("5"))` makes the UUID."""
    return F.sha1(F.concat(F.unhex(F.lit(ID_NAMESPACE.hex)), F.encode(name, "UTF-8")))


def random_id(salt: str) -> Column:
    """A UUID text of version-4 form per row: 62 random bits per execution (MD5 of a
    random salt, per compiled stage, and the execution's start time in microseconds: a
    new one per streaming micro-batch or re-run) and the row's
    `monotonically_increasing_id` (unique within the execution; 60 bits, the last 15
    hex digits). Two rows of one execution differ in their number, two executions in
    their random part.

    Why not a hash per row (the MD5 of salt, time and row number this replaced): the
    prefix is a constant of the execution, which Spark folds once, so a row pays for
    one hex formatting of its number instead of a hash and the six cuts of its digest
    (1,000-definition bench, 300,000 records: the hashed id was 0.3 s of the least plan's
    1.2). Not `uuid()`: its seed is a numeric literal in the generated Java, so every
    execution compiles new classes that the JIT has to warm up again (1M records: 15-18 s
    instead of 9.5 s). The folded prefix is a string literal, which reaches generated
    code by reference, so the code and the compiled classes stay the same."""
    started = F.unix_micros(F.current_timestamp()).cast("string")
    digest = F.md5(F.concat_ws("/", F.lit(salt), started))
    variant = F.translate(F.substring(digest, 17, 1), "0123456789abcdef", "89ab89ab89ab89ab")
    # 8-4-4-4-12 hex digits: the execution's part, up to the variant digit, is one constant
    prefix = F.concat(F.substring(digest, 1, 8), F.lit("-"), F.substring(digest, 9, 4),
                      F.lit("-4"), F.substring(digest, 14, 3), F.lit("-"), variant)
    number = F.lpad(F.lower(F.hex(F.monotonically_increasing_id())), 15, "0")
    return F.concat(prefix, F.overlay(number, F.lit("-"), 4, 0))


assert str(uuid.UUID(ID_NAMESPACE.hex)) == str(ID_NAMESPACE)
