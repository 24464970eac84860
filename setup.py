"""The one compiled part: an optional C accelerator of the tokenizer and of the hot records'
columns (fabric_lsp/engine/_native.c).

`optional=True`: where no C compiler or Python headers are at hand, the install goes on
without it and the pure-Python paths run, which give the same tokens and columns
(tests/engine/memory/test_native_tokens.py, test_hot_records.py). Everything else is in pyproject.toml.

`FABRIC_LSP_PURE=1` leaves the accelerator out, so that the wheel is the universal
`fabric_lsp-<version>-py3-none-any.whl` (what the VS Code extension carries and installs on
every platform and Python; `pip wheel` / `python -m build` with that variable set):

    FABRIC_LSP_PURE=1 pip wheel --no-deps -w dist .

Without it (`pip install .`, `pipx install .`, `uv tool install .` from a checkout or an
sdist) the accelerator is compiled where a compiler exists.
"""

import os

from setuptools import Extension, setup

PURE = os.environ.get("FABRIC_LSP_PURE", "").strip() not in ("", "0")

setup(
    ext_modules=[]
    if PURE
    else [
        Extension("fabric_lsp.engine._native", ["fabric_lsp/engine/_native.c"], optional=True),
    ]
)
