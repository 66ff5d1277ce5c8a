"""Memory stays bounded whatever the input: a million distinct topics, endless address
shapes, endless header names (see gateway/learn/tally.py for how)."""

from __future__ import annotations

from gateway.learn import LearnOptions, learn
from gateway.learn.slots import observe
from gateway.learn.summary import summary_text
from gateway.learn.tally import Tallies
from gateway.record import NativeMessage


def distinct_topics(count: int):
    for n in range(count):
        yield NativeMessage("MQTT/5.0", {"topic_name": f"plant/{n}/sensor/{n * 7}/temp"},
                            payload=b"21.5")


def test_a_million_distinct_topics_keep_the_tallies_bounded():
    options = LearnOptions()
    tallies = Tallies(options)
    for record in distinct_topics(1_000_000):
        tallies.add(observe(record))
    [shape] = tallies.shapes.values()
    assert shape.count == 1_000_000
    assert all(len(slot.values) <= options.value_cap for slot in shape.slots.values())
    assert len(shape.vectors) <= options.vector_cap
    assert shape.slots[next(s for s in shape.slots if s.segment == 1)].saturated


def test_many_distinct_topics_learn_one_definition_with_saturated_placeholders():
    result = learn(distinct_topics(50_000))
    [only] = result.proposals
    assert only.address == "plant/{segment1}/sensor/{segment3}/temp"
    assert only.count == 50_000
    assert [(p.cardinality, p.saturated) for p in only.placeholders.values()] == [
        (1000, True), (1000, True)]
    assert "{segment1} at topic_name[1]: >1000 value(s)" in summary_text(result, LearnOptions())


def test_combinations_are_folded_when_they_exceed_the_cap():
    # two places with 300 values each: 90,000 combinations, at most 1,000 kept
    options = LearnOptions(vector_cap=1000)
    records = (NativeMessage("MQTT/5.0", {"topic_name": f"a/{n % 300}/b/{n // 300}"},
                             payload=b"x") for n in range(90_000))
    result = learn(records, options)
    [only] = result.proposals
    assert only.address == "a/{segment1}/b/{segment3}" and only.count == 90_000
    assert result.compactions >= 1


def test_address_shapes_beyond_the_cap_are_counted_not_learned():
    options = LearnOptions(shape_cap=10)
    records = [NativeMessage("MQTT/5.0", {"topic_name": "/".join(["x"] * depth)}, data={})
               for depth in range(1, 31) for _ in range(2)]
    result = learn(records, options)
    assert len(result.proposals) == 10
    assert result.overflow_messages == 40
    assert "40 message(s) of further address shapes" in summary_text(result, options)


def test_header_names_beyond_the_cap_are_ignored():
    options = LearnOptions(slot_cap=8)
    records = [NativeMessage("KAFKA", {"topic": "t", "headers": [
        {"name": f"h{n}-{i}", "value": "v"} for i in range(5)]}, data={}) for n in range(50)]
    result = learn(records, options)
    assert result.overflow_slots > 0
    assert len(result.proposals) == 1
