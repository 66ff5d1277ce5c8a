"""Telling an adapter something through an optional part of the contract."""

from __future__ import annotations


def tell(adapter: object, method: str) -> bool:
    """Call `adapter`'s `method` (no arguments) if it has one; whether it had. Not
    `isinstance` with the capability's runtime-checkable Protocol: that walks the
    Protocol's members on every check (see `size_limit`)."""
    told = getattr(adapter, method, None)
    if told is None:
        return False
    told()
    return True
