"""Hypothesis profiles shared by the suites. `mutation` (`make mutate`, pyproject.toml
[tool.mutmut]): no per-example deadline and no too-slow health check, since mutmut's line
tracing slows every example several times over; with a deadline, the clean run that
mutmut starts with fails on timing alone."""

from hypothesis import HealthCheck, settings

settings.register_profile(
    "mutation", deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                           HealthCheck.filter_too_much])
