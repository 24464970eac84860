"""The bounds of the memory settings (digest §11), in one table: the memory engine clamps
to them, and the settings schema (fabric_lsp/config.py) rejects values outside them with a
warning, so what the settings report is what the engine uses. Kept free of heavy imports:
the server reads it at start-up.
"""

from __future__ import annotations

MEMORY_BOUNDS: dict[str, tuple[int, int, int]] = {
    # name: (default, min, max) — digest §11
    "max_sessions": (500, 1, 100_000),
    "max_entry_chars": (2000, 100, 1_000_000),
    "hot_sessions": (50, 0, 100_000),
    "digest_terms": (200, 1, 10_000),
    "max_cold_vocabulary_bytes": (524_288, 2, 64 * 1024 * 1024),
    "max_cold_cache_bytes": (1_048_576, 512, 128 * 1024 * 1024),
    "max_sync_sessions": (10_000, 1, 1_000_000),
    "max_sync_source_bytes": (536_870_912, 1024, 8 * 1024 * 1024 * 1024),
    "max_cache_cleanup_files": (100_000, 1, 1_000_000),
    "regex_max_pattern_bytes": (1024, 1, 65_536),
    "regex_max_haystack_terms": (20_000, 1, 1_000_000),
    "regex_max_haystack_bytes": (2_097_152, 1024, 128 * 1024 * 1024),
    "regex_timeout_ms": (250, 10, 10_000),
}
