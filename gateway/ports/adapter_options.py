"""The adapters' option specs, reached through the adapter factory's entry point.

The core never imports an adapter: the installed factory (`xrgw.adapters`) answers
`option_spec(protocol)`. Without an installed factory (a bare library install), endpoint
options are passed on unchecked and the loader says so once.
"""

from __future__ import annotations

from functools import cache
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    # For the annotations only: gateway.ports.options builds on the config parser, which
    # loads the definitions package, and the definitions' endpoint check reads this.
    from gateway.ports.options import OptionSpec


class _SpecSource(Protocol):
    def option_spec(self, protocol: str | None) -> OptionSpec | None: ...


@cache
def _factory() -> _SpecSource | None:
    for entry in entry_points(group="xrgw.adapters", name="default"):
        factory = entry.load()
        return factory if hasattr(factory, "option_spec") else None
    return None


def option_spec(protocol: str | None) -> OptionSpec | None:
    """The spec of the adapter that serves `protocol`, None when no adapter does."""
    factory = _factory()
    return None if factory is None else factory.option_spec(protocol)


def has_adapters() -> bool:
    return _factory() is not None
