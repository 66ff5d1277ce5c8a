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


def call(name: str, *args: Column) -> Column:
    """A SQL function whose Python wrapper only takes literal patterns (regexp_extract)."""
    return F.call_function(name, *args)


def uuid5(name: Column) -> Column:
    """`uuid.uuid5(ID_NAMESPACE, name)` in SQL: SHA-1 of namespace + name, version 5,
    RFC 4122 variant (the high bits of the 17th hex digit become 10)."""
    digest = F.sha1(F.concat(F.unhex(F.lit(ID_NAMESPACE.hex)), F.encode(name, "UTF-8")))
    variant = F.translate(F.substring(digest, 17, 1), "0123456789abcdef", "89ab89ab89ab89ab")
    return F.concat(
        F.substring(digest, 1, 8), F.lit("-"), F.substring(digest, 9, 4), F.lit("-5"),
        F.substring(digest, 14, 3), F.lit("-"), variant, F.substring(digest, 18, 3),
        F.lit("-"), F.substring(digest, 21, 12),
    )


assert str(uuid.UUID(ID_NAMESPACE.hex)) == str(ID_NAMESPACE)
