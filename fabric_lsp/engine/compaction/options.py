"""The one options resolver: effective compaction options for a preview or a commit.

Every face (the server's `fabric/compactionPreview`, the CLI's `preview` and `compact`,
the intents committer and the Pi bridge) turns its inputs into the keyword options of
`preview_compaction` here, so the same settings and request give the same bytes
everywhere. Precedence, later wins:

1. the engine defaults (Pi's `reserveTokens` 16384 / `keepRecentTokens` 20000, Fabric's
   `targetContextRatio` 0.65, a 200000-token window);
2. the settings layers, already merged and validated by the caller (fabric.json files,
   editor settings: `compaction.*`; Pi's `settings.json`: `keepRecentTokens`,
   `reserveTokens`);
3. the request (`contextWindow`, `reserveTokens`, `keepRecentTokens`,
   `targetContextRatio`): what the editor, a CLI flag or the live Pi supplies.

Pure: no file access, no clock.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeGuard

from .defaults import DEFAULT_PI_SETTINGS, DEFAULT_TARGET_RATIO

DEFAULT_CONTEXT_WINDOW = 200000

# the Fabric keys of the `compaction` settings the engine reads (digest §8)
FABRIC_SETTING_KEYS = ("engine", "targetContextRatio", "thresholds", "tokenThresholds", "piRules")
# Pi 1.x's per-model budgets, carried to the engine in the same settings object
MODEL_OVERRIDES = "modelOverrides"


@dataclass(frozen=True)
class CompactionSettings:
    """The settings layers, merged: Fabric's `compaction` object and Pi's two budgets."""

    compaction: Mapping[str, Any] = field(default_factory=dict[str, Any])
    keep_recent_tokens: int = DEFAULT_PI_SETTINGS["keepRecentTokens"]
    reserve_tokens: int = DEFAULT_PI_SETTINGS["reserveTokens"]
    # Pi 1.x `compaction.modelOverrides`: {"provider/modelId": {"keepRecentTokens"?: n, "reserveTokens"?: n}}
    model_overrides: Mapping[str, Mapping[str, int]] = field(default_factory=dict[str, Mapping[str, int]])


@dataclass(frozen=True)
class CompactionOverrides:
    """What one request says; None = not given (the settings decide)."""

    context_window: float | None = None
    reserve_tokens: float | None = None
    keep_recent_tokens: float | None = None
    target_context_ratio: float | None = None

    @classmethod
    def of(cls, params: Any) -> CompactionOverrides:
        """From any object with these attribute names (a protocol params Struct, an
        argparse namespace); missing attributes are not given."""
        return cls(
            context_window=getattr(params, "context_window", None),
            reserve_tokens=getattr(params, "reserve_tokens", None),
            keep_recent_tokens=getattr(params, "keep_recent_tokens", None),
            target_context_ratio=getattr(params, "target_context_ratio", None),
        )


@dataclass(frozen=True)
class CompactionOptions:
    """The effective options; `kwargs()` are `preview_compaction`'s keyword options."""

    context_window: float
    reserve_tokens: float
    keep_recent_tokens: float
    target_context_ratio: float
    fabric: Mapping[str, Any]

    def kwargs(self) -> dict[str, Any]:
        return {
            "context_window": self.context_window,
            "reserve_tokens": self.reserve_tokens,
            "keep_recent_tokens": self.keep_recent_tokens,
            "target_context_ratio": self.target_context_ratio,
            "settings": dict(self.fabric),
        }

    def describe(self) -> dict[str, Any]:
        """camelCase, for `-v` output and logs."""
        return {
            "contextWindow": self.context_window,
            "reserveTokens": self.reserve_tokens,
            "keepRecentTokens": self.keep_recent_tokens,
            "targetContextRatio": self.target_context_ratio,
            **{
                k: self.fabric[k]
                for k in (*FABRIC_SETTING_KEYS, MODEL_OVERRIDES)
                if k in self.fabric and k != "targetContextRatio"
            },
        }


def _given(value: float | None) -> TypeGuard[float]:
    return value is not None


def resolve_compaction_options(
    settings: CompactionSettings, overrides: CompactionOverrides | None = None
) -> CompactionOptions:
    """Settings, then the request: the options every face passes to the engine.

    Invariant: a request value, when given, always wins; otherwise the settings value;
    otherwise the engine default. Fabric's own keys (engine, thresholds) come from the
    settings only.
    """
    o = overrides or CompactionOverrides()
    comp = settings.compaction
    window = o.context_window if _given(o.context_window) else comp.get("contextWindow", DEFAULT_CONTEXT_WINDOW)
    ratio = (
        o.target_context_ratio
        if _given(o.target_context_ratio)
        else comp.get("targetContextRatio", DEFAULT_TARGET_RATIO)
    )
    reserve = o.reserve_tokens if _given(o.reserve_tokens) else settings.reserve_tokens
    keep = o.keep_recent_tokens if _given(o.keep_recent_tokens) else settings.keep_recent_tokens
    fabric = {k: comp[k] for k in FABRIC_SETTING_KEYS if k in comp}
    fabric["targetContextRatio"] = ratio
    # Pi 1.x's per-model budgets apply where the request gave none (the engine picks the
    # session's model, and only under Pi 1.x's rules: 0.80.6 has no such setting).
    given = {"keepRecentTokens": _given(o.keep_recent_tokens), "reserveTokens": _given(o.reserve_tokens)}
    per_model = {
        key: {name: value for name, value in sorted(fields.items()) if not given.get(name, True)}
        for key, fields in sorted(settings.model_overrides.items())
    }
    per_model = {key: fields for key, fields in per_model.items() if fields}
    if per_model:
        fabric[MODEL_OVERRIDES] = per_model
    return CompactionOptions(
        context_window=window,
        reserve_tokens=reserve,
        keep_recent_tokens=keep,
        target_context_ratio=ratio,
        fabric=fabric,
    )
