"""The one compiled part: an optional C accelerator of the tokenizer (fabric_lsp/engine/_native.c).

`optional=True`: where no C compiler or Python headers are at hand, the install goes on
without it and the tokenizer runs its pure-Python path, which gives the same tokens
(tests/engine/memory/test_native_tokens.py). Everything else is in pyproject.toml.
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("fabric_lsp.engine._native", ["fabric_lsp/engine/_native.c"], optional=True)])
