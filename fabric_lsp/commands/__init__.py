"""CLI subcommands. Each module here exposes `SUBCOMMANDS: dict[name, (help, add_arguments, run)]`.

Modules are discovered by name so that each area (compaction, memory, intents, demo) owns
its own file. No module here may import pygls or lsprotocol.
"""

from __future__ import annotations

from typing import Any


def registry() -> dict[str, Any]:
    import importlib
    import pkgutil  # (here: a memory read imports this package, never the registry)

    found: dict[str, Any] = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{__name__}.{info.name}")
        found.update(getattr(module, "SUBCOMMANDS", {}))
    return found
