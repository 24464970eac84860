"""The Fabric `session_before_compact` / `session_before_tree` hooks as pure functions
(digest §6, §11, §12): precedence, threshold deferral, budget inputs, compile."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeGuard, cast

from fabric_lsp.engine.session.projection import RULES_1X, resolve_rules

from ..jsstr import utf16_len
from .bounds import clip_utf8
from .cut import compute_cut
from .defaults import DEFAULT_PI_SETTINGS, DEFAULT_TARGET_RATIO
from .details import build_details
from .facts import facts
from .instructions import PI_VCC_SENTINEL, decode_instructions
from .normalize import normalize
from .projections import project_all
from .render import render_summary, section_headers

if TYPE_CHECKING:
    from ..json_types import JsonValue


# ----------------------------------------------------------------------- config


def _finite(v: Any) -> TypeGuard[float]:
    """A finite JSON number (never a bool)."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def normalize_config(raw: JsonValue) -> dict[str, Any]:
    """Fabric's compaction config normalization (digest §8)."""
    cfg: dict[str, Any] = raw if isinstance(raw, dict) else {}
    if isinstance(cfg.get("compaction"), dict):
        cfg = cfg["compaction"]
    engine = cfg.get("engine")
    ratio = cfg.get("targetContextRatio")
    out: dict[str, Any] = {
        "engine": engine if engine in ("pi", "fabric") else "fabric",
        "targetContextRatio": min(0.85, max(0.25, ratio)) if _finite(ratio) else DEFAULT_TARGET_RATIO,
        "thresholds": {},
        "tokenThresholds": {},
    }
    # (a config may come from Python as well as JSON: its keys are checked to be strings)
    th: JsonValue = cfg.get("thresholds")
    if isinstance(th, dict):
        for k, v in cast("dict[object, object]", th).items():
            if isinstance(k, str) and "/" in k and _finite(v):
                out["thresholds"][k] = min(0.95, max(0.25, v))
    tt: JsonValue = cfg.get("tokenThresholds")
    if isinstance(tt, dict):
        for k, v in cast("dict[object, object]", tt).items():
            if isinstance(k, str) and "/" in k and _finite(v):
                out["tokenThresholds"][k] = min(100000000, max(1000, math.floor(v + 0.5)))
    return out


def model_threshold(cfg: dict[str, Any], model_key: str) -> tuple[int | None, float | None]:
    """Seed 002's configured threshold of one `provider/model` in a normalized config:
    `(tokens, None)` when a token threshold is set (it wins over a ratio), `(None, ratio)`
    when only a ratio is, `(None, None)` otherwise."""
    tokens = cfg["tokenThresholds"].get(model_key)
    if tokens is not None:
        return tokens, None
    return None, cfg["thresholds"].get(model_key)


# ---------------------------------------------------------------------- compile


def _cancel(reason: str, instruction_error: dict[str, Any] | None = None) -> dict[str, Any]:
    r: dict[str, Any] = {"cancel": True, "reason": reason}
    if instruction_error is not None:
        r["instructionError"] = instruction_error
    return r


def compile_fabric_summary(
    branch: list[dict[str, Any]],
    tokens_before: float,
    custom_instructions: str | None = None,
    budget: dict[str, Any] | None = None,
    *,
    check: Callable[[], None] | None = None,
    keep_question: bool = False,
    rules: str | None = None,
) -> dict[str, Any]:
    """`{cancel, reason, instructionError?}` or
    `{summary, firstKeptEntryId, details, events, cut}` (digest §6 internals).

    `rules`: "0.80" or "1.x" (default: by the branch's content, `projection.session_rules`);
    under "1.x" the engine reads the branch as Pi 1.x projects it (`pi1x.FabricView`).
    `keep_question`: overflow recovery keeps the latest user message verbatim
    (`cut.keep_latest_question`)."""
    decoded = decode_instructions(custom_instructions)
    if not decoded["ok"]:
        err = decoded["error"]
        return _cancel(f"fabric: {err['code']}: {err['message']}", err)
    f = facts(branch)
    pi1x = resolve_rules(rules, f.pi1x) == RULES_1X
    if pi1x:
        from .pi1x import FabricView

        f = FabricView(f)
    cut = compute_cut(
        f,
        {"tokensBefore": tokens_before, "budget": budget} if budget is not None else None,
        keep_question=keep_question,
        question_in_kept_range=pi1x,
    )
    if check is not None:
        check()
    if not cut["ok"]:
        return _cancel("fabric: nothing to compact")
    first_kept = cut["firstKeptEntryId"]
    boundary = len(f)
    if first_kept:
        i = f.index(first_kept)
        if i >= 0:
            boundary = i
    nstats: dict[str, Any] = {}
    events = f.events(boundary, check, stats=nstats)
    if not events:
        return _cancel("fabric: no raw cumulative source")
    # the prefix entries that carried an event: each entry's events are contiguous and
    # ids are unique on a branch, so they are the runs of `sourceEntryId`
    source_count = 0
    prev_src: Any = object()
    for ev in events:
        sid = ev["sourceEntryId"]
        if sid != prev_src:
            source_count += 1
            prev_src = sid
    first_id = events[0]["sourceEntryId"]
    last_id = events[-1]["sourceEntryId"]
    j = f.rindex(last_id, boundary)
    last_entry = f.entry(j) if j >= 0 else None
    source_range = {
        "first": first_id if isinstance(first_id, str) else "",
        "last": last_id if isinstance(last_id, str) else "",
    }
    ts = last_entry.get("timestamp") if last_entry is not None else None
    sections = project_all(events)
    if check is not None:
        check()
    req_lines = decoded["requestLines"]
    summary = render_summary(
        sections,
        first_entry_id=source_range["first"],
        last_entry_id=source_range["last"],
        last_timestamp=ts if isinstance(ts, str) else None,
        request_lines=req_lines,
        summary_kind="compaction",
    )
    b = cut.get("budget")
    if b is not None:
        projected = math.ceil(
            b["fixedOverheadTokens"] + (cut["retainedRawTokens"] + math.ceil(utf16_len(summary) / 4)) * b["tokenScale"]
        )
        b["projectedTokensAfter"] = projected
        # (a kept question is kept whatever the budget says: without it the retry is pointless)
        if projected > b["targetContextTokens"] and not cut.get("questionKept"):
            return _cancel("fabric: no deterministic summary fits the continuity context target")
    summarized = cut["summarized"]
    v1 = v2 = 0
    for _, version in f.compactions.values():
        if version == 1:
            v1 += 1
        elif version == 2:
            v2 += 1
    omitted = dict(sections["omittedCounts"])
    omitted["preserve"] = decoded["policy"]["omittedPreserveCount"]
    omitted["thinking"] = nstats["thinking"]
    details = build_details(
        sections=section_headers(sections, bool(req_lines)),
        source_range=source_range,
        live_range={
            "first": summarized[0].id if summarized else None,
            "last": summarized[-1].id if summarized else None,
        },
        counts={
            "branchEntries": len(f),
            "cumulativeSourceEntries": source_count,
            "sourceEvents": len(events),
            "liveCutEntries": len(summarized),
            "priorFabricV1": v1,
            "priorFabricV2": v2,
        },
        omitted_counts=omitted,
        policy=decoded["policy"],
        first_kept=first_kept,
        budget=b,
        timestamp=ts,
    )
    return {"summary": summary, "firstKeptEntryId": first_kept, "details": details, "events": events, "cut": cut}


# ------------------------------------------------------------------------- hook


def compaction_hook(
    branch: list[dict[str, Any]],
    *,
    tokens_before: float,
    reason: str = "manual",
    custom_instructions: str | None = None,
    model_key: str | None = None,
    context_window: float | None = None,
    pi_settings: dict[str, Any] | None = None,
    config: dict[str, Any] | None = None,
    pi_vcc_overriding: bool = False,
    check: Callable[[], None] | None = None,
    rules: str | None = None,
) -> dict[str, Any]:
    """The pure `session_before_compact` handler. `rules`: "0.80" | "1.x" | None (by
    content); on overflow the latest user message stays in the kept range.

    Returns `{"result": "passthrough"}`, `{"result": "cancel", "reason", "notification"?}`
    or `{"result": "compaction", "compaction": {...}, "compile": ...}`.
    """
    cfg = normalize_config(config)
    if custom_instructions == PI_VCC_SENTINEL:
        return {"result": "passthrough", "reason": "pi-vcc sentinel: Fabric defers to pi-vcc"}
    if reason == "threshold" and model_key is not None:
        token_threshold, ratio = model_threshold(cfg, model_key)
        if token_threshold is not None:
            if tokens_before < token_threshold:
                return {
                    "result": "cancel",
                    "reason": f"fabric: threshold deferred ({tokens_before} < {token_threshold} tokens for {model_key})",
                }
        else:
            if ratio is not None and _finite(context_window) and tokens_before / context_window < ratio:
                return {
                    "result": "cancel",
                    "reason": f"fabric: threshold deferred (below {ratio} of the window for {model_key})",
                }
    if cfg["engine"] != "fabric":
        return {"result": "passthrough", "reason": 'compaction.engine is "pi": Pi\'s own compactor runs'}
    settings = pi_settings if pi_settings is not None else DEFAULT_PI_SETTINGS
    windows: list[float] = []
    if reason == "overflow" and _finite(tokens_before) and tokens_before > 0:
        windows.append(max(1, math.floor(tokens_before * 0.9)))
    if _finite(context_window) and context_window > 0:
        windows.append(context_window)
    budget: dict[str, Any] | None = None
    if windows:
        budget = {
            "contextWindow": min(windows),
            "targetContextRatio": cfg["targetContextRatio"],
            "reserveTokens": settings.get("reserveTokens", DEFAULT_PI_SETTINGS["reserveTokens"]),
            "keepRecentTokens": settings.get("keepRecentTokens", DEFAULT_PI_SETTINGS["keepRecentTokens"]),
        }
    if not _finite(tokens_before):
        # A session whose usage holds `1e400` (JSON.parse: Infinity). JavaScript would carry
        # Infinity through the budget arithmetic; we refuse rather than compute with it.
        return {"result": "cancel", "reason": "fabric: the session's token count is not a finite number"}
    res = compile_fabric_summary(
        branch, tokens_before, custom_instructions, budget, check=check, keep_question=reason == "overflow", rules=rules
    )
    if res.get("cancel"):
        err = res.get("instructionError")
        if err is not None:
            note = clip_utf8(f"Fabric compaction rejected: {err['code']}: {err['message']}", 512)
            return {"result": "cancel", "reason": res["reason"], "notification": note, "instructionError": err}
        if pi_vcc_overriding:
            return {"result": "passthrough", "reason": res["reason"]}
        return {"result": "cancel", "reason": res["reason"]}
    return {
        "result": "compaction",
        "compaction": {
            "summary": res["summary"],
            "firstKeptEntryId": res["firstKeptEntryId"],
            "tokensBefore": tokens_before,
            "details": res["details"],
        },
        "compile": res,
    }


def tree_hook(
    entries_to_summarize: list[dict[str, Any]],
    *,
    user_wants_summary: bool = True,
    custom_instructions: str | None = None,
    replace_instructions: bool = False,
    old_leaf_id: str | None = None,
    config: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The pure `session_before_tree` handler:
    `{"result": "passthrough"|"cancel"|"summary", ...}`."""
    from .branch import compile_branch_summary

    cfg = normalize_config(config)
    if cfg["engine"] != "fabric":
        return {"result": "passthrough", "reason": 'compaction.engine is "pi"'}
    if not user_wants_summary:
        return {"result": "passthrough", "reason": "no summary requested"}
    if replace_instructions is True:
        return {"result": "passthrough", "reason": "replaceInstructions: Fabric defers to Pi's summarizer"}
    decoded = decode_instructions(custom_instructions)
    if not decoded["ok"]:
        err = decoded["error"]
        return {
            "result": "cancel",
            "reason": f"fabric: {err['code']}: {err['message']}",
            "notification": clip_utf8(f"Fabric compaction rejected: {err['code']}: {err['message']}", 512),
            "instructionError": err,
        }
    res = compile_branch_summary(entries_to_summarize, decoded, old_leaf_id, normalize_fn=normalize)
    if res is None:
        return {"result": "passthrough", "reason": "nothing to summarize"}
    return {
        "result": "summary",
        "summary": {"summary": res["summary"], "details": res["details"]},
        "events": res["events"],
    }
