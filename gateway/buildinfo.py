"""What this gateway is: its release and the source revision it was built from.

The release is the package version. The revision is given to the process by whoever built
it (the image sets `XRGW_REVISION` from its `REVISION` build argument); a gateway run from
a checkout says `unknown` rather than guessing.
"""

from __future__ import annotations

import os

from gateway import __version__

VERSION = __version__
UNKNOWN_REVISION = "unknown"


def revision() -> str:
    return os.environ.get("XRGW_REVISION", "").strip() or UNKNOWN_REVISION


def version_line() -> str:
    """What `xrgw --version` prints."""
    return f"xrgw {VERSION} (revision {revision()})"
