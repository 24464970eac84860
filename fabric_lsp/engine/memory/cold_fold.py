"""A cold build's loop over its entries (state_build.py): each entry folded into the
session's digest (`Normalizer.fold` into a `DigestFolder`), the common ones in one call of
the C accelerator (`_native.fold_plain`) with the same effects as the Python steps
(tests/engine/memory/test_normalize_fast_path.py)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from ..native import NATIVE
from . import file_history
from .digest_fold import FILES_TOUCHED_CAP, DigestFolder
from .entry_text import Normalizer

if TYPE_CHECKING:
    from ..json_types import JsonValue

# `fold_entries`' C path (None: not built, or FABRIC_LSP_NATIVE=0)
_fold_plain: Any = getattr(NATIVE, "fold_plain", None)


def fold_spec(norm: Normalizer, folder: DigestFolder) -> tuple[Any, ...] | None:
    """What `_native.fold_plain` needs to fold entries the way `norm.fold` folds them into
    `folder` (None without the accelerator, or for a folder that folds text by text)."""
    if _fold_plain is None or not folder.batch_chars:
        return None
    return (norm, folder, *file_history.c_observer(norm.file_ops), *norm.plain_options(), FILES_TOUCHED_CAP)


def fold_entries(norm: Normalizer, folder: DigestFolder, entries: Iterable[tuple[JsonValue, int]]) -> None:
    """`norm.fold` of each (entry, line) into `folder`: an entry of a user, assistant or
    plain tool-result message in one C call (`_native.fold_plain`, the same effects:
    tests/engine/memory/test_normalize_fast_path.py), any other in Python."""
    fold = norm.fold
    spec = fold_spec(norm, folder)
    if spec is None:
        for raw, line in entries:
            fold(raw, line, folder)
        return
    fold_plain = _fold_plain
    assert fold_plain is not None
    for raw, line in entries:
        if not fold_plain(raw, line, spec):
            fold(raw, line, folder)
