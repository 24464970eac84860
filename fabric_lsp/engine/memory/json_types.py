"""Static names for decoded JSON in the memory engine (type checking only).

`JsonValue` is one level of a decoded JSON value. A local or parameter declared with it
narrows by `isinstance` to `dict[str, Any]` / `list[Any]` (what a decoder gives), where
a bare `Any` would narrow to `dict[Unknown, Unknown]`: the narrowing costs nothing at
run time, unlike a `cast` or a TypeGuard call per value.
"""

from __future__ import annotations

from typing import Any, TypeAlias, Union

JsonObject: TypeAlias = dict[str, Any]
JsonValue: TypeAlias = Union[dict[str, Any], list[Any], str, int, float, bool, None]
