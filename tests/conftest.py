"""Hypothesis profiles shared by the suites. `mutation` (`make mutate`, pyproject.toml
[tool.mutmut]): no per-example deadline and no too-slow health check, since mutmut's line
tracing slows every example several times over; with a deadline, the clean run that
mutmut starts with fails on timing alone. 25 examples instead of 100: each mutant runs every
test that reaches its function, and the property tests dominate that time; the fixed seed
keeps the examples the same from run to run."""

from hypothesis import HealthCheck, settings

settings.register_profile(
    "mutation", deadline=None, max_examples=25,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                           HealthCheck.filter_too_much])
