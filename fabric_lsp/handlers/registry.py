"""The one way an LSP method gets a handler: `@feature(method)` on the handler function.

Handler modules register themselves when imported; the composition root
(`fabric_lsp/app.py`) imports every module of this package, hands each registered
feature to the server, and adds the `workspace/executeCommand` mirror of every request
that `protocol.COMMANDS` names. Adding a method therefore touches `protocol.py` (its
name, params, result and command mirror) and one handler module.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class Feature:
    method: str
    handler: Callable[..., Any]
    options: Any = None


_FEATURES: list[Feature] = []


def feature(method: str, options: Any = None) -> Callable[[F], F]:
    """Register the decorated function as the handler of `method` (with pygls `options`)."""

    def register(fn: F) -> F:
        if any(f.method == method for f in _FEATURES):
            raise RuntimeError(f"two handlers for {method}: {fn.__module__}.{fn.__name__} and an earlier one")
        _FEATURES.append(Feature(method, fn, options))
        return fn

    return register


def features() -> list[Feature]:
    """Every registered feature, in registration order."""
    return list(_FEATURES)


def request_handler(method: str) -> Callable[[Any, Any], Awaitable[Any]]:
    """The handler registered for `method` (KeyError when there is none)."""
    for f in _FEATURES:
        if f.method == method:
            return f.handler
    raise KeyError(method)
