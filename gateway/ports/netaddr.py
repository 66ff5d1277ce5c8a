"""Facts about network addresses the gateway decides on (listeners, clear-text rules)."""

from __future__ import annotations

import ipaddress


def is_loopback(host: str) -> bool:
    """Whether `host` (an address, `[::1]`, or `localhost`) is on loopback only: traffic to
    it never leaves the machine (or the pod)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


__all__ = ["is_loopback"]
