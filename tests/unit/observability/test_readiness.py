"""`/readyz`'s verdict: endpoint states + route states + `admin.readiness`."""

from __future__ import annotations

from gateway.observability.readiness import EndpointState, RouteState, judge

ENDPOINTS = [
    EndpointState("hooks", "hooks->kafka", "source", True),
    EndpointState("kafka", "hooks->kafka", "output", False),
    EndpointState("dead", "hooks->kafka", "deadletter", False),
]


def test_all_requires_every_endpoint_and_says_which_is_down() -> None:
    verdict = judge("all", ENDPOINTS, [RouteState("hooks->kafka")])
    assert verdict.ready is False
    assert [(e["endpoint"], e["role"], e["why"]) for e in verdict.not_ready] == [
        ("kafka", "output", "not connected"), ("dead", "deadletter", "not connected")]
    assert verdict.routes == {"hooks->kafka": False}
    body = verdict.to_json()
    assert body["policy"] == "all" and body["ready"] is False


def test_sources_ignores_outputs_but_not_a_source() -> None:
    verdict = judge("sources", ENDPOINTS, [RouteState("hooks->kafka")])
    assert verdict.ready is True
    assert {e["endpoint"] for e in verdict.ignored} == {"kafka", "dead"}
    down = [EndpointState("hooks", "hooks->kafka", "source", False)]
    assert judge("sources", down, []).ready is False


def test_none_is_ready_once_started_whatever_is_down() -> None:
    stuck = [RouteState("hooks->kafka", "stalled", "output refuses every message")]
    assert judge("none", ENDPOINTS, stuck).ready is True
    assert judge("none", ENDPOINTS, stuck, started=False).ready is False


def test_a_stuck_route_counts_under_all_and_sources() -> None:
    up = [EndpointState("hooks", "r", "source", True)]
    held = [RouteState("r", "held", "dead letter failing")]
    for policy in ("all", "sources"):
        verdict = judge(policy, up, held)
        assert verdict.ready is False
        assert verdict.not_ready == [{"route": "r", "state": "held",
                                      "why": "dead letter failing"}]


def test_an_endpoint_shared_by_routes_is_listed_once() -> None:
    shared = [EndpointState("dead", "a", "deadletter", False),
              EndpointState("dead", "b", "deadletter", False)]
    verdict = judge("all", shared, [])
    assert len(verdict.not_ready) == 1
    assert verdict.routes == {"a": False, "b": False}


def test_a_stalled_route_lists_its_stalls_in_the_body() -> None:
    from dataclasses import dataclass

    from gateway.daemon import _route_states

    @dataclass
    class Stall:
        cause: str
        endpoint: str
        seconds: float

        def to_json(self) -> dict[str, object]:
            return {"cause": self.cause, "endpoint": self.endpoint, "seconds": self.seconds}

    class Route:
        def __init__(self, name: str, stalled: list[Stall]) -> None:
            self.name, self.stalled = name, stalled

    states = _route_states([Route("a", [Stall("output", "kafka", 31.0)]),  # type: ignore[list-item]
                            Route("b", [])])
    verdict = judge("sources", [], states)
    assert verdict.ready is False and verdict.routes == {"a": False, "b": True}
    assert verdict.to_json()["stalled"] == {
        "a": [{"cause": "output", "endpoint": "kafka", "seconds": 31.0}]}
    assert verdict.not_ready == [{"route": "a", "state": "stalled",
                                  "why": "output at kafka for 31.0s"}]
