"""The jitter of RetryPolicy.delay at its ends: uniform in [base/2, base]."""

from __future__ import annotations

import pytest

from gateway.policies import retry
from gateway.policies.retry import RetryPolicy

POLICY = RetryPolicy(attempts=5, initial_backoff=0.2, max_backoff=1.0)


@pytest.mark.parametrize(("draw", "attempt", "wait"), [
    (0.0, 0, 0.1), (0.5, 0, 0.15), (0.999, 0, 0.1999), (0.999, 1, 0.3998),
    (0.0, 3, 0.5), (0.999, 3, 0.9995),
])
def test_the_wait_spans_half_the_base_to_the_whole_base(
        monkeypatch: pytest.MonkeyPatch, draw: float, attempt: int, wait: float) -> None:
    monkeypatch.setattr(retry.random, "random", lambda: draw)
    assert POLICY.delay(attempt) == pytest.approx(wait)
