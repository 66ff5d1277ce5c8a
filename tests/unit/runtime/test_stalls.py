"""A route's stall bookkeeping (gateway/runtime/stalls.py) on a clock the test turns:
when a condition becomes a stall, how `/readyz` shows it, when a quiet one ends; and the
log line of an endpoint that connected after retries (gateway/runtime/stats.py)."""

from __future__ import annotations

import logging

import pytest

from gateway.observability.metrics import Metrics
from gateway.runtime.stalls import OUTPUT_UNAVAILABLE, SOURCE_FAILING, Stalls
from gateway.runtime.stats import RouteStats


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _stalls() -> tuple[Stalls, _Clock]:
    clock = _Clock()
    return Stalls("r", Metrics(), 10.0, clock), clock


def test_a_stall_shows_its_cause_endpoint_and_age_rounded() -> None:
    stalls, clock = _stalls()
    stalls.failing(OUTPUT_UNAVAILABLE, "out", "refused")
    clock.now = 12.345
    [stall] = stalls.check()
    assert stall.to_json() == {"cause": OUTPUT_UNAVAILABLE, "endpoint": "out",
                               "seconds": 12.3}


def test_a_young_condition_does_not_hide_a_stall_behind_it() -> None:
    stalls, clock = _stalls()
    stalls.failing(SOURCE_FAILING, "in", "refused")  # a condition, not a stall yet
    clock.now = 1.0
    stalls.failing(OUTPUT_UNAVAILABLE, "out", "too large", at_once=True)  # a stall at once
    clock.now = 2.0
    assert [s.cause for s in stalls.check()] == [OUTPUT_UNAVAILABLE]
    clock.now = 10.0
    assert [s.cause for s in stalls.check()] == [SOURCE_FAILING, OUTPUT_UNAVAILABLE]


def test_a_quiet_condition_ends_once_it_has_not_failed_for_the_stall_time() -> None:
    stalls, clock = _stalls()
    stalls.failing(SOURCE_FAILING, "in", "refused")
    clock.now = 9.9
    stalls.quiet(SOURCE_FAILING, "in")
    assert stalls.active(SOURCE_FAILING, "in")
    clock.now = 10.0  # exactly the stall time since its last failure
    stalls.quiet(SOURCE_FAILING, "in")
    assert not stalls.active(SOURCE_FAILING, "in")


def test_an_endpoint_that_needed_several_attempts_says_so_when_it_connects(
        caplog: pytest.LogCaptureFixture) -> None:
    stats = RouteStats("r", "in", Metrics(), None, 8, [])
    with caplog.at_level(logging.INFO, logger="xrgw.route"):
        stats.endpoint_connected("out", 1)  # at the first attempt: nothing to say
        stats.endpoint_connected("out", 3)
    [line] = [r for r in caplog.records if r.name == "xrgw.route"]
    assert line.getMessage() == "endpoint connected after 3 attempt(s)"
    assert (getattr(line, "route", None), getattr(line, "endpoint", None)) == ("r", "out")
