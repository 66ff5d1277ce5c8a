"""The Spark compiler's template regexes, run by Spark's (Java's) regex engine, capture
what `Template.match` captures, and stay linear on 65,535-character adversarial values.

Java backtracks like Python: the lazy `[^/]+?` groups the compiler used to emit cost
seconds per record on a long topic (issue 28). The regexes are now
`gateway.templates.match.linear_regex` in Java's dialect (possessive loops, atomic
groups); a template no regex can match in linear time goes to the Python stage.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from gateway.convert import Converter
from gateway.definitions import load_catalog
from gateway.record import NativeMessage
from gateway.spark import compile_catalog, compile_stage
from gateway.spark.compiler import java_regex
from gateway.templates.template import Template

TEMPLATES = [
    ("/plant/{site}-{line}-{machine}/temp", "/"),
    ("{a}-{b}", "/"),
    ("{a}{b}x", "/"),
    ("x{a}ab{b}ab{c}abz", "/"),
    ("{a}.{b}", "/"),
    ("dev.{a}-{b}.t", "."),
    ("/{y}/{x}-{z}.z/{y}", "/"),
    ("/s/{a}{b}/{c}", "/"),
    ("{a}0123456789ab{b}", "/"),
    ("{a}\\{b}(c)", "/"),
    ("{a}é{b}", "/"),
    ("{a}", "/"),
]
ALPHABET = ["a", "b", "-", ".", "/", "x", "z", "ab", "\n", "é", "\\", "(c)", "0123456789ab"]


def _values(template: Template, rng: random.Random) -> list[str]:
    out = []
    for _ in range(40):
        captures = {n: "".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 3)))
                    for n in template.names}
        text = "".join(p.literal if p.literal is not None else captures[str(p.name)]
                       for p in template.parts)
        if rng.random() < 0.3:
            text += rng.choice(ALPHABET)
        out.append(text)
    return out


def _java_answers(spark: SparkSession, rows: list[tuple[str, str, int]]
                  ) -> list[tuple[bool, list[str]]]:
    """`regexp_like` and every group's `regexp_extract`, as the compiled SQL runs them."""
    df = spark.createDataFrame(rows, "value string, regex string, groups int")
    most = max(groups for _, _, groups in rows)
    extracted = [F.when(F.col("groups") > g, F.call_function(
        "regexp_extract", F.col("value"), F.col("regex"), F.lit(g + 1))) for g in range(most)]
    out = df.select(F.regexp_like(F.col("value"), F.col("regex")).alias("ok"),
                    F.array(*extracted).alias("caps")).collect()
    return [(row["ok"], [c for c in row["caps"] if c is not None]) for row in out]


def test_java_regexes_capture_what_the_template_does(spark: SparkSession) -> None:
    rng = random.Random(28)
    rows, expected = [], []
    for text, separator in TEMPLATES:
        template = Template.parse(text, separator)
        written = java_regex(template)
        assert written is not None, text
        regex, groups = written
        for value in _values(template, rng):
            rows.append((value, regex, len(groups)))
            expected.append((template.match(value), groups))
    for (ok, caps), (want, groups), row in zip(_java_answers(spark, rows), expected, rows,
                                               strict=True):
        assert ok == (want is not None), row
        if want is not None:
            assert dict(zip(groups, caps, strict=True)) == want, row


def test_java_regexes_are_linear_on_adversarial_values(spark: SparkSession) -> None:
    """65,535-character values that made the lazy regexes try every split; the query
    finishing at all (in the test's lifetime, not hours) is the check."""
    rows, expected = [], []
    for text, unit in [("/plant/{site}-{line}-{machine}/temp", "-"),
                       ("/plant/{a}_{b}_{c}_{d}/temp", "_"),
                       ("x{a}ab{b}ab{c}abz", "ab"), ("/s/{a}{b}/{c}", "a")]:
        template = Template.parse(text)
        written = java_regex(template)
        assert written is not None
        head = text[:text.index("{")]
        for tail in ("/tempx", "/temp"):
            value = head + (unit * 65_535)[:65_535 - len(head) - len(tail)] + tail
            rows.append((value, written[0], len(written[1])))
            expected.append(template.match(value) is not None)
    assert [ok for ok, _ in _java_answers(spark, rows)] == expected
    assert expected.count(True) >= 2  # not only failures


def test_templates_without_a_linear_regex_go_to_the_python_stage() -> None:
    assert java_regex(Template.parse("{a}-{b}-{a}")) is None


def test_a_template_that_needs_a_search_is_matched_in_python(spark: SparkSession,
                                                             tmp_path: Path) -> None:
    doc = tmp_path / "repeat.xreg.json"
    doc.write_text(json.dumps({"messagegroups": {"g": {
        "envelope": "CloudEvents/1.0", "messages": {"m": {
            "protocol": "MQTT/5.0",
            "protocoloptions": {"topic_name": "/s/{a}-{b}-{a}"},
            "envelopemetadata": {"type": {"value": "t"}, "source": {"value": "/s/{a}"},
                                 "subject": {"value": "{b}"}}}}}}}))
    catalog = load_catalog([doc])
    assert not catalog.errors, catalog.errors
    definitions = list(catalog.messages())
    compiled = compile_catalog(definitions)
    [plan] = compiled.plans
    assert plan.python_match and plan.python == "template /s/{a}-{b}-{a} needs a search"
    records = [{"protocol": "MQTT/5.0", "topic_name": t, "data": {"n": 1}}
               for t in ("/s/x-y-z-x-y", "/s/x-y-x-z", "/s/" + "-" * 5_000 + "x")]
    frame = spark.createDataFrame([(json.dumps(r),) for r in records], "record string")
    rows = {row["record"]: row for row in compile_stage(spark, compiled).convert(frame).collect()}
    converter = Converter(definitions)
    for record in records:
        row = rows[json.dumps(record)]
        [conversion] = converter.convert_all(NativeMessage.from_json(record))
        assert row["path"] == "python"
        assert row["outcome"] == ("event" if conversion.event is not None
                                  else conversion.reason), record
        if conversion.event is not None:
            assert json.loads(row["event"])["subject"] == conversion.event.attributes["subject"]
    assert json.loads(rows[json.dumps(records[0])]["event"])["subject"] == "z"
