"""The URI scheme check every adapter makes before it connects.

The schemes are the protocol profile's (`ProtocolProfile.endpoint.uris`): the config
check (`gateway/config/_addresses.py`) reads the same table, so the two cannot disagree
on what an address may look like.
"""

from __future__ import annotations

from gateway.protocols import UriSchemes


def check_scheme(scheme: str, uris: UriSchemes) -> None:
    """ValueError naming the accepted schemes unless `scheme` is one of them."""
    problem = uris.problem(scheme)
    if problem is not None:
        raise ValueError(f"uri: unsupported scheme {scheme!r}: {problem}")
