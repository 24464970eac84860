"""The optional C accelerator (`engine/_native.c`), loaded once: the module, or None where
it is not built (no C compiler at install, the universal wheel the VS Code extension
carries) or turned off with `FABRIC_LSP_NATIVE=0`. Every caller has a pure-Python path
giving the same results (tests compare both)."""

from __future__ import annotations

import os
from typing import Any


def _load() -> Any:
    if os.environ.get("FABRIC_LSP_NATIVE", "1") == "0":
        return None
    try:
        from fabric_lsp.engine import _native
    except ImportError:  # not built: the pure-Python paths
        return None
    return _native


NATIVE: Any = _load()
