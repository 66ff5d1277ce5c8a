"""The conformance table: matched / unmatched / invalid counts per definition and window.

- matched: a CloudEvent was produced;
- invalid: the definition matched but no valid CloudEvent could be rendered
  (`missing-context`, `invalid-envelope`, `no-envelope`);
- unmatched: everything else dead-lettered, counted against the nearest definition of
  the explanation (or the first tied one; null when nothing was near).

Windows are tumbling windows over the record's `received_at` (processing time when it has
none). In streaming mode each micro-batch appends its own partial counts: sum them.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from gateway.deadletter import reasons

_INVALID = (reasons.MISSING_CONTEXT, reasons.INVALID_ENVELOPE, reasons.NO_ENVELOPE)


def conformance(outcomes: DataFrame, window: str = "1 minute") -> DataFrame:
    received = F.try_to_timestamp(F.get_json_object("record", "$.received_at"))
    at = F.coalesce(received, F.current_timestamp())
    kind = (F.when(F.col("outcome") == "event", F.lit("matched"))
            .when(F.col("outcome").isin(*_INVALID), F.lit("invalid"))
            .otherwise(F.lit("unmatched")))
    counted = outcomes.select(F.window(at, window).alias("window"),
                              F.col("nearest").alias("definition"), kind.alias("kind"))
    return counted.groupBy("window", "definition").agg(
        *[F.sum(F.when(F.col("kind") == k, 1).otherwise(0)).cast("long").alias(k)
          for k in ("matched", "unmatched", "invalid")]
    ).select(F.col("window.start").alias("window_start"),
             F.col("window.end").alias("window_end"), "definition",
             "matched", "unmatched", "invalid")
