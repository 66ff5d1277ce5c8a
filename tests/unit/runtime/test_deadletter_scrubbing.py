"""A dead letter's explanations are scrubbed of every value the route hides, also where
the value turns up in another field's failure text (issue 29's rule, for the parts the
route writes: `gateway/runtime/deadletters.py`)."""

from __future__ import annotations

import pytest

from gateway.deadletter.format import deadletter_metadata
from gateway.record import NativeMessage
from tests.unit.observability.test_sender_secrets import _run

SECRET = "s3cr3t-in-a-property-77"


def test_a_hidden_value_is_scrubbed_from_other_fields_explanations(
        caplog: pytest.LogCaptureFixture) -> None:
    # The topic fails the "user" definition's template; the property that carries the
    # same value is hidden by the route's `redact:`.
    record = NativeMessage("MQTT/5.0", {
        "topic_name": f"/users/{SECRET}", "qos": 1,
        "user_properties": [{"name": "x-key", "value": SECRET}]}, data={})
    _, [dead], _ = _run([record], ["user_properties.x-key"], caplog)
    explain = deadletter_metadata(dead)["xrgw-explain"]
    assert "topic_name" in explain  # the explanation is there ...
    assert SECRET not in explain  # ... without the hidden value
