"""The HTTP ingress's served paths (`adapters/http/paths.py`) answer as the rule says.

The rule, written out as a scan of every prefix (what the ingress did before the index):
a templated prefix takes any path that starts with it; a literal one takes itself and the
paths below it (`/hooks` takes `/hooks/a`, not `/hooksx`); no prefixes take every path.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from adapters.http.options import _prefix
from adapters.http.paths import PathPrefixes


def _by_scan(prefixes: list[tuple[str, bool]], path: str) -> bool:
    if not prefixes:
        return True
    for prefix, templated in prefixes:
        if templated and path.startswith(prefix):
            return True
        if path == prefix or path.startswith(prefix.rstrip("/") + "/"):
            return True
    return False


SEGMENTS = st.sampled_from(["a", "b", "ab", "hooks", "store", "{id}", "x{id}", ""])
PATHS = st.lists(SEGMENTS, max_size=4).map(lambda parts: "/" + "/".join(parts))
REQUESTS = st.lists(st.sampled_from(["a", "b", "ab", "hooks", "hooksx", "store", "1", ""]),
                    max_size=5).map(lambda parts: "/" + "/".join(parts))


@settings(max_examples=500, deadline=None)
@given(st.lists(PATHS, max_size=6), st.lists(REQUESTS, min_size=1, max_size=6))
def test_the_index_answers_as_the_scan(paths: list[str], requests: list[str]) -> None:
    prefixes = [_prefix(p) for p in paths]
    served = PathPrefixes(prefixes)
    for path in requests + paths:
        assert served.accepts(path) == _by_scan(prefixes, path), (prefixes, path)


def test_the_usual_cases() -> None:
    served = PathPrefixes([_prefix("/store/{storeid}/desk/{cdid}"), _prefix("/hooks")])
    assert served.accepts("/store/1/desk/2")
    assert served.accepts("/store/")
    assert served.accepts("/hooks") and served.accepts("/hooks/a")
    assert not served.accepts("/hooksx") and not served.accepts("/stor")
    assert not served.accepts("/other/store/1")
    assert PathPrefixes([]).accepts("/anything")
    assert PathPrefixes([_prefix("/")]).accepts("/x")


def test_ten_thousand_definitions_are_each_found_and_nothing_else() -> None:
    paths = ["/store/{storeid}"] + [f"/other{n}/store/{{storeid}}" for n in range(1, 10_000)]
    served = PathPrefixes([_prefix(p) for p in paths])
    assert all(served.accepts(f"/other{n}/store/1") for n in range(1, 10_000, 97))
    assert not served.accepts("/other10000/store/1")
    assert not served.accepts("/nothing/here")
