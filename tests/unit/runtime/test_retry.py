"""The route's retry policy: jittered exponential backoff, raised to a receiver's
Retry-After but never past the policy's longest backoff."""

from __future__ import annotations

import pytest

from gateway.policies.retry import RetryPolicy

POLICY = RetryPolicy(attempts=5, initial_backoff=0.2, max_backoff=1.0)


@pytest.mark.parametrize(("attempt", "base"), [(0, 0.2), (1, 0.4), (2, 0.8), (3, 1.0), (9, 1.0)])
def test_delay_doubles_up_to_the_longest_backoff_with_jitter(attempt: int, base: float) -> None:
    delays = [POLICY.delay(attempt) for _ in range(200)]
    assert all(base / 2 <= d <= base for d in delays)
    assert len(set(delays)) > 1  # jittered: senders that failed together spread out


def test_retry_after_raises_the_delay() -> None:
    assert all(POLICY.delay(0, at_least=0.7) == 0.7 for _ in range(50))


def test_retry_after_is_capped_at_the_longest_backoff() -> None:
    assert all(POLICY.delay(0, at_least=120.0) == 1.0 for _ in range(50))


def test_a_shorter_retry_after_does_not_shorten_the_backoff() -> None:
    assert all(0.4 <= POLICY.delay(2, at_least=0.01) <= 0.8 for _ in range(50))


def test_no_retry_after_is_the_plain_backoff() -> None:
    assert all(0.1 <= POLICY.delay(0, at_least=None) <= 0.2 for _ in range(50))


def test_the_default_budget_has_no_limit_while_a_failure_is_transient() -> None:
    policy = RetryPolicy()
    assert policy.unlimited and policy.attempts == 0
    assert all(policy.allows(attempt) for attempt in (1, 5, 10_000))
    assert not RetryPolicy(attempts=3).allows(3) and RetryPolicy(attempts=3).allows(2)


def test_the_backoff_of_a_long_retry_stays_at_the_cap_and_never_overflows() -> None:
    policy = RetryPolicy(initial_backoff=0.2, max_backoff=10.0)
    for attempt in (20, 1_100, 100_000):  # 2**1100 * 0.2 would overflow a float
        assert 5.0 <= policy.delay(attempt) <= 10.0
