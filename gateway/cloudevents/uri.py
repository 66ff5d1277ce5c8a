"""RFC 3986 syntax checks for the `URI` and `URI-reference` attribute types.

`urllib.parse` never rejects anything, so the grammar of RFC 3986 appendix A is spelled
out here as a regex. IP literals are checked only for their character set; the gateway
forwards the value and never connects to it.
"""

from __future__ import annotations

import re
from functools import lru_cache

_UNRESERVED = r"A-Za-z0-9\-._~"
_SUB_DELIMS = r"!$&'()*+,;="
_PCT = r"%[0-9A-Fa-f]{2}"
_PCHAR = rf"(?:[{_UNRESERVED}{_SUB_DELIMS}:@]|{_PCT})"
_PCHAR_NC = rf"(?:[{_UNRESERVED}{_SUB_DELIMS}@]|{_PCT})"  # segment-nz-nc: no colon
_SCHEME = r"[A-Za-z][A-Za-z0-9+\-.]*"
_USERINFO = rf"(?:[{_UNRESERVED}{_SUB_DELIMS}:]|{_PCT})*"
_IP_LITERAL = rf"\[(?:[0-9A-Fa-f:.]+|[vV][0-9A-Fa-f]+\.[{_UNRESERVED}{_SUB_DELIMS}:]+)\]"
_REG_NAME = rf"(?:[{_UNRESERVED}{_SUB_DELIMS}]|{_PCT})*"
_AUTHORITY = rf"(?:{_USERINFO}@)?(?:{_IP_LITERAL}|{_REG_NAME})(?::[0-9]*)?"
_QUERY_FRAGMENT = rf"(?:\?(?:{_PCHAR}|[/?])*)?(?:#(?:{_PCHAR}|[/?])*)?"

# hier-part: "//" authority path-abempty | path-absolute | path-rootless | path-empty
_HIER_PART = rf"(?://{_AUTHORITY}(?:/{_PCHAR}*)*|(?!//)(?:{_PCHAR}|/)*)"
# relative-part: as hier-part, but a rootless path's first segment has no colon
_RELATIVE_PART = (
    rf"(?://{_AUTHORITY}(?:/{_PCHAR}*)*|/(?!/)(?:{_PCHAR}|/)*|{_PCHAR_NC}+(?:/{_PCHAR}*)*|)"
)

# The pattern texts are plain regex syntax that Java reads the same way (the Spark job
# checks `uri` / `uri-reference` typed values with them, `gateway/spark/matching.py`).
URI_PATTERN = rf"{_SCHEME}:{_HIER_PART}{_QUERY_FRAGMENT}"
RELATIVE_REF_PATTERN = rf"{_RELATIVE_PART}{_QUERY_FRAGMENT}"
_URI = re.compile(URI_PATTERN)
_RELATIVE_REF = re.compile(RELATIVE_REF_PATTERN)


# Sources and schemas repeat from message to message; caching spares the regex.
@lru_cache(maxsize=1024)
def is_uri(text: str) -> bool:
    """An absolute URI (scheme required); a fragment is tolerated, as the JSON schema does."""
    return _URI.fullmatch(text) is not None


@lru_cache(maxsize=1024)
def is_uri_reference(text: str) -> bool:
    """A URI or a relative reference such as `/a/b`, `#fragment` or `1-555-123-4567`."""
    return _URI.fullmatch(text) is not None or _RELATIVE_REF.fullmatch(text) is not None
