"""The paths an HTTP ingress serves, looked up in time that does not grow with their
number.

An ingress serves the fixed part of every definition's path (or its `paths` option): a
templated path accepts any request path that starts with its literal head
(`/store/{storeid}` -> `/store/`), a literal one that path and the paths below it
(`/hooks` takes `/hooks/a`, not `/hooksx`). Comparing a request with each prefix in turn
cost 3.5 ms per request with 10,000 definitions -- for every request to a path near the
end of the list, and for every request to a path served by none, which anyone who can
reach the port can send. Here the prefixes are grouped by length: a request path is cut
at each length there is and looked up, a handful of set lookups whatever the count.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["PathPrefixes"]


class PathPrefixes:
    """(prefix, from a template) pairs, as `options._prefix` reads a path; none means
    every path is served."""

    __slots__ = ("_below", "_exact", "_heads")

    def __init__(self, prefixes: Iterable[tuple[str, bool]]) -> None:
        # length -> the templated heads of that length
        self._heads: dict[int, set[str]] = {}
        # every prefix, exact; and by length, what a path below one starts with
        self._exact: set[str] = set()
        self._below: dict[int, set[str]] = {}
        for prefix, templated in prefixes:
            if templated:
                self._heads.setdefault(len(prefix), set()).add(prefix)
            # Every prefix also takes itself and the paths below it (for a templated
            # one that adds something only where its head ends in several slashes).
            self._exact.add(prefix)
            parent = prefix.rstrip("/")  # `parent + "/"` starts the paths below it
            self._below.setdefault(len(parent), set()).add(parent)

    def accepts(self, path: str) -> bool:
        if not self._exact or path in self._exact:  # every prefix is in `_exact`
            return True
        size = len(path)
        for length, heads in self._heads.items():
            if length <= size and path[:length] in heads:
                return True
        for length, parents in self._below.items():
            if length < size and path[length] == "/" and path[:length] in parents:
                return True
        return False
