"""Static names for decoded JSON in the engines (type checking only; nothing here runs).

`JsonValue` is a decoded JSON value as the engines see it: objects stay `dict[str, Any]`
(their fields are read with JavaScript semantics, key by key), while narrowing a value
with `isinstance` / `type(...) is` yields a typed dict or list instead of an unknown one
(a bare `Any` would narrow to `dict[Unknown, Unknown]`); the narrowing costs nothing at
run time, unlike a `cast` or a TypeGuard call per value. `JsonObject` is a decoded object.
"""

from __future__ import annotations

from typing import Any, TypeAlias

JsonObject: TypeAlias = dict[str, Any]
JsonValue: TypeAlias = "dict[str, Any] | list[JsonValue] | str | int | float | bool | None"
