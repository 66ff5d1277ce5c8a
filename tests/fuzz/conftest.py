"""The fuzz suite (hypothesis). `XRGW_FUZZ_EXAMPLES=N` scales the number of examples
(default 100 for the cheapest tests); see fuzz_support.py."""

from __future__ import annotations

import sys
from pathlib import Path

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:
    sys.path.insert(0, str(_HERE))
