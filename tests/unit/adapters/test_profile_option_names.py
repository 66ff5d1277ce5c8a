"""Option names a profile states facts with must be options of that protocol's adapter:
`Redelivery.needs` (consumer options without which the source keeps nothing) and
`RequestReply.not_with` (options that turn request-reply off). `validate` and the
adapter conformance suite (tests/integration/conformance) read them from the endpoint's
options; a renamed option would make them silently true or false."""

from __future__ import annotations

import pytest

from adapters.registry import REGISTRY
from gateway.protocols import PROFILES, ProtocolProfile


@pytest.mark.parametrize("prof", PROFILES, ids=lambda p: p.name)
def test_the_options_a_profile_names_are_its_adapters(prof: ProtocolProfile) -> None:
    spec = REGISTRY.option_spec(prof.name)
    assert spec is not None, prof.name
    needs = () if prof.redelivery is None else prof.redelivery.needs
    for name in needs:
        assert spec.option(name).side in ("consumer", "both"), (prof.name, name)
    for name in () if prof.request_reply is None else prof.request_reply.not_with:
        spec.option(name)  # KeyError: not an option of this adapter


def test_a_profile_says_what_a_nack_leads_to_where_a_broker_keeps_messages() -> None:
    # Only a source that keeps nothing has no redelivery: HTTP (the sender retries).
    keep_nothing = {p.name for p in PROFILES if p.redelivery is None}
    assert keep_nothing == {p.name for p in PROFILES if p.endpoint.uris.listens}
