"""xrgw: a definition-driven protocol gateway.

The core (definitions, matching, envelope, cloudevents) is pure: no network I/O except
loading definitions from a registry URL, and no asyncio.
"""

__version__ = "0.1.0"
