"""Property tests: the matcher never raises on arbitrary records, and rendering a
definition's template then matching the rendered message recovers the context."""

from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.matching.matcher import Matcher
from gateway.record import NativeMessage, RecordError

from .defs import CASHIER, define, opt, prop

DEFS = [
    CASHIER,
    define("k", "KAFKA", [opt("topic", "orders.{region}", type="uritemplate"),
                          opt("partition", 1, type="integer"),
                          opt("headers", "{kind}", name="kind")]),
    define("h", "HTTP", [opt("path", "/a/{b}", type="uritemplate"), opt("method", "POST"),
                         opt("query", "{q}", name="q")]),
    define("a", "AMQP/1.0", [opt("properties", "{subject}", name="subject"),
                             opt("application-properties", 3, name="n", type="integer")]),
    define("ce", None, None, {"type": prop("t.{x}", type="uritemplate"),
                              "source": prop("{src}", type="uritemplate")}),
]
MATCHER = Matcher(DEFS)

scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(
    max_size=8)
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3)
                      | st.dictionaries(st.text(max_size=4), inner, max_size=3), max_leaves=6)
records = st.fixed_dictionaries(
    {"protocol": st.sampled_from(["MQTT/5.0", "MQTT/3.1.1", "KAFKA", "HTTP", "AMQP/1.0",
                                  "NATS"])},
    optional={
        "topic_name": values, "topic": values, "path": values, "subject": values,
        "headers": values, "user_properties": values, "properties": values,
        "application-properties": values, "query": values, "partition": values,
    },
)


@settings(max_examples=300)
@given(records, st.none() | st.dictionaries(st.sampled_from(["type", "source", "id"]), values))
def test_match_and_explain_never_raise(obj, event):
    try:
        record = NativeMessage.from_json(obj)
    except RecordError:
        return
    result = MATCHER.match(record, event)
    assert result.status in ("matched", "unmatched", "ambiguous")
    MATCHER.explain(record, event)


segment = st.text(alphabet=st.characters(blacklist_characters="/{}",
                                         blacklist_categories=("Cs", "Cc")),
                  min_size=1, max_size=10)


@given(segment, segment, segment)
def test_rendered_native_message_matches_back(storeid, cdid, event_type):
    from gateway.envelope.native import render_native

    context = {"storeid": storeid, "cdid": cdid, "eventType": event_type}
    record = render_native(CASHIER, None, context)
    assert isinstance(record, NativeMessage)
    result = Matcher([CASHIER]).match(record)
    assert result.matched and dict(result.context) == context
