"""The compaction settings Pi uses when a session names none, and Fabric's default target
context ratio (digest §6, §11). Constants only: the options resolver (`options.py`, which
the server imports to resolve a request's settings) reads them without importing the
compaction engine itself, which runs in the preview workers."""

from __future__ import annotations

DEFAULT_PI_SETTINGS = {"reserveTokens": 16384, "keepRecentTokens": 20000}
DEFAULT_TARGET_RATIO = 0.65
