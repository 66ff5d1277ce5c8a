"""Answers no request of a reply route waits for (gateway/runtime/reply.py `Replies`,
gateway/runtime/deadletters.py `DeadLetters.stray`): an uncorrelated answer is dead-lettered as
`uncorrelated-reply` with the output as its source, or counted as dropped when it cannot
be; a late one is counted per output."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from adapters.memory import MemoryConsumer, MemoryProducer
from gateway.convert import Converter
from gateway.deadletter.format import deadletter_metadata, original_record
from gateway.definitions import read_document
from gateway.observability.metrics import Metrics
from gateway.ports import Outcome, Producer
from gateway.record import NativeMessage
from gateway.runtime.route import Output, Route
from tests.unit.runtime.test_reply import DOC, Service

DETAIL = ("an answer on {}'s reply address carries no correlation (correlation data, "
          "reply subject token or correlationid attribute)")
ANSWER = NativeMessage("NATS", {"subject": "_INBOX.gw.7", "headers": [
    {"name": "content-type", "value": "application/json"}]}, data={"price": 42})


def _sample(metrics: Metrics, name: str, **labels: str) -> float:
    value = metrics.registry.get_sample_value(name, labels)
    return 0 if value is None else value


def _strays(outputs: Sequence[tuple[str, Producer]], dlq: MemoryProducer | None,
            *, late: Sequence[str | None] = (), name: str = "svc"
            ) -> tuple[Route, Metrics]:
    """A reply route over `outputs`; once it runs, the output `name` gets ANSWER once per
    token in `late` (None: uncorrelated). Returns when the strays are handled."""
    metrics = Metrics()
    route = Route("r", "in", MemoryConsumer(close_when_empty=True),
                  Converter(read_document(DOC, "d.json").messages()),
                  [Output(endpoint, "NATS", producer, defaults={"subject": "svc"})
                   for endpoint, producer in outputs],
                  deadletter=None if dlq is None else Output(
                      "dlq", "KAFKA", dlq, defaults={"topic": "dead"}),
                  metrics=metrics, reply_timeout=1.0)
    target = dict(outputs)[name]
    assert isinstance(target, Service)

    replies = route.replies
    assert replies is not None

    async def scenario() -> None:
        await route.start()
        await route.wait_finished()
        for token in late:
            target.replies.resolve(token, ANSWER)
        for _ in range(100):
            if not replies.strays:
                break
            await asyncio.sleep(0.001)
        assert not replies.strays  # handled, and no task left behind
        await route.stop(grace=1.0)

    asyncio.run(scenario())
    return route, metrics


def test_an_uncorrelated_answer_is_dead_lettered_with_the_output_as_its_source() -> None:
    dlq = MemoryProducer()
    _, metrics = _strays([("svc", Service())], dlq, late=[None])
    [dead] = dlq.written
    meta = deadletter_metadata(dead)
    assert meta["xrgw-reason"] == "uncorrelated-reply"
    assert meta["xrgw-detail"] == DETAIL.format("svc")
    assert meta["xrgw-source-endpoint"] == "svc"
    assert "xrgw-explain" not in meta
    assert dead.protocol == "KAFKA" and dead.fields["topic"] == "dead"
    assert dead.data == {"price": 42}
    assert original_record(dead) == ANSWER
    assert _sample(metrics, "xrgw_messages_deadlettered_total",
                   reason="uncorrelated-reply") == 1
    # a dead letter, not a publish of the dead-letter endpoint
    assert _sample(metrics, "xrgw_messages_published_total", endpoint="dlq") in (None, 0)
    assert _sample(metrics, "xrgw_messages_dropped_total", reason="uncorrelated-reply") == 0
    assert _sample(metrics, "xrgw_replies_late_total", endpoint="svc") == 0


def test_late_and_unknown_answers_are_counted_per_output_not_dead_lettered() -> None:
    dlq = MemoryProducer()
    _, metrics = _strays([("svc", Service())], dlq, late=["someone-elses", "other"])
    assert not dlq.written
    assert _sample(metrics, "xrgw_replies_late_total", endpoint="svc") == 2
    assert _sample(metrics, "xrgw_messages_deadlettered_total",
                   reason="uncorrelated-reply") == 0


def test_without_a_dead_letter_an_uncorrelated_answer_is_counted_as_dropped() -> None:
    _, metrics = _strays([("svc", Service())], None, late=[None, None])
    assert _sample(metrics, "xrgw_messages_dropped_total", reason="uncorrelated-reply") == 2
    assert _sample(metrics, "xrgw_messages_deadlettered_total",
                   reason="uncorrelated-reply") == 0


def test_a_failing_dead_letter_drops_the_uncorrelated_answer_without_retrying() -> None:
    dlq = MemoryProducer(rule=lambda m: Outcome.failed("dlq down", retryable=True))
    _, metrics = _strays([("svc", Service())], dlq, late=[None])
    assert not dlq.written
    assert _sample(metrics, "xrgw_messages_dropped_total", reason="uncorrelated-reply") == 1
    assert _sample(metrics, "xrgw_messages_deadlettered_total",
                   reason="uncorrelated-reply") == 0
    assert _sample(metrics, "xrgw_publish_errors_total", endpoint="dlq",
                   reason="retryable") == 1


def test_only_outputs_that_take_requests_listen_each_under_its_own_name() -> None:
    plain, first, second = MemoryProducer(), Service(), Service()
    dlq = MemoryProducer()
    _, metrics = _strays([("plain", plain), ("svc-a", first), ("svc-b", second)], dlq,
                         late=[None, "late-token"], name="svc-b")
    assert first.replies.listener is not None and second.replies.listener is not None
    assert not hasattr(plain, "replies")
    [dead] = dlq.written
    assert deadletter_metadata(dead)["xrgw-source-endpoint"] == "svc-b"
    assert deadletter_metadata(dead)["xrgw-detail"] == DETAIL.format("svc-b")
    assert _sample(metrics, "xrgw_replies_late_total", endpoint="svc-b") == 1
    assert _sample(metrics, "xrgw_replies_late_total", endpoint="svc-a") == 0
