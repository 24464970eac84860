"""The memory engine's settings: the `memory` object of seed 000 "Configuration"."""

from __future__ import annotations

from typing import Any

import msgspec

from fabric_lsp.engine.settings_bounds import MEMORY_BOUNDS  # the one table


class MemoryConfig(msgspec.Struct, rename="camel", kw_only=True):
    """The `memory` settings object (seed 000 "Configuration"); out-of-range integers
    are clamped, as the reference's config normalization does."""

    enabled: bool = True
    index_dir: str | None = None
    max_sessions: int = 500
    max_entry_chars: int = 2000
    index_thinking: bool = False
    index_tool_output: bool = True
    hot_sessions: int = 50
    digest_terms: int = 200  # accepted, unused (as the reference)
    max_cold_vocabulary_bytes: int = 524_288
    max_cold_cache_bytes: int = 1_048_576
    max_sync_sessions: int = 10_000
    max_sync_source_bytes: int = 536_870_912
    max_cache_cleanup_files: int = 100_000
    regex_max_pattern_bytes: int = 1024
    regex_max_haystack_terms: int = 20_000
    regex_max_haystack_bytes: int = 2_097_152
    regex_timeout_ms: int = 250

    def __post_init__(self) -> None:
        for name, (_default, lo, hi) in MEMORY_BOUNDS.items():
            setattr(self, name, max(lo, min(hi, getattr(self, name))))
        if self.index_dir is not None and not self.index_dir.strip():
            self.index_dir = None

    @classmethod
    def from_settings(cls, settings: dict[str, Any] | None) -> MemoryConfig:
        """Lenient: a value of the wrong type gives the default (digest §11)."""
        values: dict[str, Any] = {}
        camel = {f: msgspec.structs.fields(cls)[i].encode_name for i, f in enumerate(cls.__struct_fields__)}
        for name, enc in camel.items():
            if not settings or enc not in settings:
                continue
            v = settings[enc]
            if name in MEMORY_BOUNDS:
                if (
                    isinstance(v, bool)
                    or not isinstance(v, (int, float))
                    or (isinstance(v, float) and not v.is_integer())
                ):
                    continue
                values[name] = int(v)
            elif name in ("enabled", "index_thinking", "index_tool_output"):
                if isinstance(v, bool):
                    values[name] = v
            elif name == "index_dir":
                if isinstance(v, str) and v.strip():
                    values[name] = v
        return cls(**values)
