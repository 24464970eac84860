"""Engine API for previews: what the Fabric hook would persist for a session branch.

`preview_compaction` returns the `fabric/compactionPreview` result object and
`preview_branch_summary` the `fabric/branchSummaryPreview` result object (plain dicts,
camelCase keys, see design/protocol.md). Both are pure functions of the bytes they read
plus their arguments: same input, same bytes out.
"""

from __future__ import annotations

import hashlib
import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from fabric_lsp.engine.activity import ActivitySink, CancelToken, check, report
from fabric_lsp.engine.gcpause import cyclic_gc_paused
from fabric_lsp.engine.session.projection import RULES_1X, resolve_rules

from .defaults import DEFAULT_PI_SETTINGS
from .hook import compaction_hook, normalize_config, tree_hook
from .instructions import encode_request_unchecked
from .loader import Loaded, load_session_bytes, load_session_file
from .options import MODEL_OVERRIDES
from .pigate import model_key as branch_model_key
from .qa import generate_probes, qa_report
from .scan import SourceChanged, scan_session_bytes, scan_session_file

if TYPE_CHECKING:
    from typing import ParamSpec, TypeVar

    from ..json_types import JsonValue

    _P = ParamSpec("_P")
    _R = TypeVar("_R")

DEFAULT_CONTEXT_WINDOW = 200000
PROGRESS_MIN_BYTES = 1 << 20

Source = str | os.PathLike[str] | bytes | bytearray | memoryview


def result_json(result: Any) -> bytes:
    """UTF-8 JSON of a result exactly as JavaScript's JSON.stringify would write it (lone
    surrogates from the session escaped as \\udXXX, JS number format). Use this, not a
    plain UTF-8 encoder, when a summary or details may carry a lone surrogate that the
    session itself contained: msgspec/json refuse to encode those."""
    from ..jsstr import js_stringify

    return js_stringify(result).encode("utf-8")


def printable(text: str) -> bytes:
    """UTF-8 bytes of `text` for a terminal: a lone surrogate becomes U+FFFD, as Node
    writes it."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        import re

        return re.sub("[\ud800-\udfff]", "\ufffd", text).encode("utf-8")


class PreviewError(ValueError):
    """Bad preview input (unknown leaf or target, unreadable source); `code` names it."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    def __reduce__(self) -> Any:  # pickled whole: a preview worker process raises it too
        return (PreviewError, (self.code, self.message))


def _setting(settings: dict[str, Any], key: str) -> Any:
    if key in settings:
        return settings[key]
    comp: JsonValue = settings.get("compaction")
    if isinstance(comp, dict) and key in comp:
        return comp[key]
    return None


def _load(
    source: Source,
    session_path: str | os.PathLike[str] | None,
    cancel: CancelToken | None,
    sink: ActivitySink | None,
    *,
    from_bytes: Any = load_session_bytes,
    from_file: Any = load_session_file,
) -> tuple[Any, str, str | None, bool]:
    """Read `source` with `from_bytes` / `from_file` (the lean loader, or pass 1 of the
    preview scanner): (what they return, the sha256 of the bytes read, the path, whether
    it is big enough for progress reports). A scanned file stays open in `log.fp` until
    the caller closes it (`_close`)."""
    chk = (lambda: check(cancel)) if cancel is not None else None
    path: str | None
    if isinstance(source, (bytes, bytearray, memoryview)):
        data = bytes(source)
        path = os.fspath(session_path) if session_path is not None else None
        big = len(data) >= PROGRESS_MIN_BYTES
        if big:
            report(sink, f"Reading session ({len(data) // 1024} KiB)", 5)
        digest = hashlib.sha256(data).hexdigest()
        check(cancel)
        log = from_bytes(data, check=chk)
    else:
        path = os.fspath(source)
        try:
            size = os.path.getsize(path)
            big = size >= PROGRESS_MIN_BYTES
            if big:
                report(sink, f"Reading session ({size // 1024} KiB)", 5)
            log, digest = from_file(path, check=chk)
        except OSError as e:
            raise PreviewError("source_unavailable", f"cannot read session file {path}: {e.strerror or e}") from None
    try:
        check(cancel)
    except BaseException:
        _close(log)
        raise
    return log, digest, path, big


def _close(log: Any) -> None:
    fp = getattr(log, "fp", None)
    if fp is not None:
        fp.close()


def _session_id(log: Any, path: str | None) -> str | None:
    if log.header is not None:
        return str(log.header.get("id"))
    if path:
        return Path(path).stem
    return None


def _warnings(log: Any, error: str | None) -> list[str]:
    out: list[str] = []
    st = log
    if st.malformed:
        out.append(f"{st.malformed} malformed line(s) skipped")
    if st.oversize:
        out.append(f"{st.oversize} oversize line(s) skipped")
    if st.non_object:
        out.append(f"{st.non_object} non-object line(s) skipped")
    if st.no_id:
        out.append(f"{st.no_id} entr(y/ies) without a valid id/parentId skipped")
    if st.partial_tail_bytes:
        out.append(f"{st.partial_tail_bytes} byte(s) of a half-written last line ignored")
    if error:
        out.append(f"{error}: the parent walk met a cycle and stopped before repeating")
    return out


def _model_override(settings: dict[str, Any], key: str | None) -> dict[str, Any]:
    """Pi 1.x's `compaction.modelOverrides[provider/modelId]` for the session's model (the
    live model when the bridge names it): each of `keepRecentTokens` / `reserveTokens` it
    sets replaces the ordinary value (options.py already left out fields a request gave)."""
    table: Any = _setting(settings, MODEL_OVERRIDES)
    if key is None or not isinstance(table, dict):
        return {}
    entry: Any = cast("dict[str, Any]", table).get(key)
    if not isinstance(entry, dict):
        return {}
    fields = cast("dict[str, Any]", entry)
    return {
        k: v
        for k, v in fields.items()
        if k in ("keepRecentTokens", "reserveTokens") and isinstance(v, int) and not isinstance(v, bool) and v >= 0
    }


def _custom_instructions(instructions: str | None, preserve: list[Any] | None) -> str | None:
    if preserve is not None:
        return encode_request_unchecked(instructions if instructions else None, list(preserve))
    return instructions if instructions else None


def _without_gc(fn: Callable[_P, _R]) -> Callable[_P, _R]:
    """Run `fn` with the cyclic GC paused (see engine/gcpause.py): a preview allocates one
    dict per JSON object of the session and frees them all at the end."""
    import functools

    @functools.wraps(fn)
    def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        with cyclic_gc_paused():
            return fn(*args, **kwargs)

    return wrapper


def preview_compaction(source: Source, **options: Any) -> dict[str, Any]:
    """The `fabric/compactionPreview` result for one session branch (see
    `compaction_run` for the options)."""
    # (the pause ends once the hook's answer, which a preview drops, is gone: the collection
    # the allocator starts right after it then has none of its ~15,000 objects to traverse)
    with cyclic_gc_paused():
        result = compaction_run(source, **options)[0]
    return result


@_without_gc
def compaction_run(
    source: Source,
    *,
    session_path: Any = None,
    instructions: str | None = None,
    preserve: list[Any] | None = None,
    reason: str = "manual",
    context_window: float | None = None,
    reserve_tokens: float | None = None,
    keep_recent_tokens: float | None = None,
    target_context_ratio: float | None = None,
    tokens_before: float | None = None,
    leaf_id: str | None = None,
    include_qa: bool = False,
    settings: dict[str, Any] | None = None,
    model_key: str | None = None,
    pi_vcc_overriding: bool = False,
    cancel: CancelToken | None = None,
    activity: ActivitySink | None = None,
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """(the `fabric/compactionPreview` result, the hook's answer or None when Pi's own
    gate stopped first) for one session branch. The Pi bridge returns the hook's answer
    to Pi; every face shows the result: the same computation, the same bytes.

    `model_key` is the live model's `provider/id` (default: the branch's last model);
    `pi_vcc_overriding` is the event marker of an earlier pi-vcc handler.
    `settings` may carry Fabric's compaction config (`engine`, `targetContextRatio`,
    `thresholds`, `tokenThresholds`, `piRules`, optionally nested under `compaction`) and
    Pi's `reserveTokens` / `keepRecentTokens` / `contextWindow`; explicit arguments win.
    `piRules` ("auto", default, | "0.80" | "1.x") picks Pi's rules: by default Pi 1.x's
    when the session holds an entry only Pi 1.x writes (session/projection.py), and the
    result then says `piRules: "1.x"`.
    """
    if reason not in ("manual", "threshold", "overflow"):
        raise PreviewError("invalid_params", f"reason must be manual, threshold or overflow, not {reason!r}")
    settings = dict(settings or {})
    log, digest, path, big = _load(
        source, session_path, cancel, activity, from_bytes=scan_session_bytes, from_file=scan_session_file
    )
    try:
        return _compaction_run(
            log,
            digest,
            path,
            big,
            _RunOptions(
                settings=settings,
                instructions=instructions,
                preserve=preserve,
                reason=reason,
                context_window=context_window,
                reserve_tokens=reserve_tokens,
                keep_recent_tokens=keep_recent_tokens,
                target_context_ratio=target_context_ratio,
                tokens_before=tokens_before,
                leaf_id=leaf_id,
                include_qa=include_qa,
                model_key=model_key,
                pi_vcc_overriding=pi_vcc_overriding,
                cancel=cancel,
                activity=activity,
            ),
        )
    except SourceChanged as e:
        raise PreviewError("source_changed", f"session file {path} changed while it was read: {e}") from None
    finally:
        _close(log)


@dataclass(frozen=True)
class _RunOptions:
    """One compaction run's options (`compaction_run`'s keywords, minus the source)."""

    settings: dict[str, Any]
    instructions: str | None
    preserve: list[Any] | None
    reason: str
    context_window: float | None
    reserve_tokens: float | None
    keep_recent_tokens: float | None
    target_context_ratio: float | None
    tokens_before: float | None
    leaf_id: str | None
    include_qa: bool
    model_key: str | None
    pi_vcc_overriding: bool
    cancel: CancelToken | None
    activity: ActivitySink | None


def _budgets(o: _RunOptions) -> tuple[float | None, dict[str, Any], dict[str, Any]]:
    """(the model window for the details, Pi's two budgets, Fabric's config): explicit
    options first, then the settings, then the defaults."""
    settings = o.settings
    window = o.context_window if o.context_window is not None else _setting(settings, "contextWindow")
    if window is None:
        window = DEFAULT_CONTEXT_WINDOW
    window_meta = window if isinstance(window, (int, float)) and not isinstance(window, bool) and window > 0 else None
    reserve = o.reserve_tokens if o.reserve_tokens is not None else _setting(settings, "reserveTokens")
    keep = o.keep_recent_tokens if o.keep_recent_tokens is not None else _setting(settings, "keepRecentTokens")
    pi_settings = {
        "reserveTokens": reserve if reserve is not None else DEFAULT_PI_SETTINGS["reserveTokens"],
        "keepRecentTokens": keep if keep is not None else DEFAULT_PI_SETTINGS["keepRecentTokens"],
    }
    config = {k: _setting(settings, k) for k in ("engine", "targetContextRatio", "thresholds", "tokenThresholds")}
    config = {k: v for k, v in config.items() if v is not None}
    if o.target_context_ratio is not None:
        config["targetContextRatio"] = o.target_context_ratio
    return window_meta, pi_settings, config


def _gate_rules(o: _RunOptions, branch: Any, pi_settings: dict[str, Any], result: dict[str, Any]) -> tuple[str, Any]:
    """Which Pi's rules apply (`piRules`, else by content) and their gate module; under
    Pi 1.x's rules the session model's `modelOverrides` update `pi_settings`."""
    try:
        rules = resolve_rules(_setting(o.settings, "piRules"), bool(getattr(branch, "pi1x", False)))
    except ValueError as err:
        raise PreviewError("invalid_params", str(err)) from None
    if rules != RULES_1X:
        from . import pigate  # (Pi 0.80.6: unchanged)

        return rules, pigate
    from . import pi1x

    result["piRules"] = rules
    pi_settings.update(
        _model_override(o.settings, o.model_key if o.model_key is not None else branch_model_key(branch))
    )
    return rules, pi1x


def _tokens_before(o: _RunOptions, gate_rules: Any, branch: Any) -> Any:
    tb = o.tokens_before if o.tokens_before is not None else gate_rules.pi_tokens_before(branch)
    if isinstance(tb, float) and tb.is_integer():
        tb = int(tb)
    return tb


def _with_hook(result: dict[str, Any], hook: dict[str, Any], include_qa: bool) -> dict[str, Any]:
    """The preview result of the hook's answer (passthrough, cancel or compaction)."""
    if hook["result"] == "passthrough":
        result["reason"] = hook["reason"]
        return result
    if hook["result"] == "cancel":
        result["outcome"] = "cancelled"
        result["reason"] = hook["reason"]
        if "instructionError" in hook:
            err = hook["instructionError"]
            result["error"] = {"code": err["code"], "message": err["message"]}
        return result
    comp = hook["compaction"]
    result["outcome"] = "compacted"
    result["summary"] = comp["summary"]
    result["firstKeptEntryId"] = comp["firstKeptEntryId"]
    result["details"] = comp["details"]
    if include_qa:
        events = hook["compile"]["events"]
        result["qa"] = qa_report(comp["summary"], generate_probes(events, len(events)))
    return result


def _compaction_run(
    log: Any, digest: str, path: str | None, big: bool, o: _RunOptions
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    cancel, activity = o.cancel, o.activity
    if big:
        report(activity, "Building branch", 35)
    result: dict[str, Any] = {
        "sessionId": _session_id(log, path),
        "sessionFile": path,
        "sourceHash": digest,
        "leafId": None,
        "outcome": "skipped",
        "tokensBefore": 0,
    }
    if not log.is_session:
        result["reason"] = 'not a Pi session: the first parsed line is not a {type:"session", id} header'
        return result, None
    if o.leaf_id is not None and not log.has_id(o.leaf_id):
        raise PreviewError("entry_not_found", f"leafId {o.leaf_id!r} is not an entry of this session")
    used_leaf, branch, error = log.branch(o.leaf_id)
    log.nodes = None  # only the branch is needed from here on: let the rest go
    result["leafId"] = used_leaf
    warnings = _warnings(log, error)
    if warnings:
        result["warnings"] = warnings

    window_meta, pi_settings, config = _budgets(o)
    rules, gate_rules = _gate_rules(o, branch, pi_settings, result)
    tb = _tokens_before(o, gate_rules, branch)
    # A non-finite count (a usage of `1e400`) is what JSON.stringify writes for it: null.
    result["tokensBefore"] = tb if not isinstance(tb, float) or math.isfinite(tb) else None
    check(cancel)

    gate = gate_rules.prepare_compaction(branch, pi_settings["keepRecentTokens"])
    if not gate["ok"]:
        result["reason"] = f"Pi would keep everything: {gate['reason']}"
        return result, None
    if big:
        report(activity, "Compiling summary", 60)
    hook = compaction_hook(
        branch,
        tokens_before=tb,
        reason=o.reason,
        custom_instructions=_custom_instructions(o.instructions, o.preserve),
        model_key=o.model_key if o.model_key is not None else branch_model_key(branch),
        pi_vcc_overriding=o.pi_vcc_overriding,
        context_window=window_meta,
        pi_settings=pi_settings,
        config=config,
        check=(lambda: check(cancel)) if cancel is not None else None,
        rules=rules,
    )
    check(cancel)
    _with_hook(result, hook, o.include_qa)
    if big and result["outcome"] == "compacted":
        report(activity, "Preview ready", 100)
    return result, hook


def _tree_entries(log: Loaded, old_leaf: str, target: str) -> tuple[list[dict[str, Any]], str | None]:
    """Pi's collectEntriesForBranchSummary: the abandoned path from the old leaf up to
    (not including) the common ancestor with the target, root→leaf."""
    old_path = log.branch(old_leaf)[1]
    target_path = log.branch(target)[1]
    old_ids = {e.get("id") for e in old_path}
    ancestor = None
    for e in reversed(target_path):
        if e.get("id") in old_ids:
            ancestor = e.get("id")
            break
    out: list[dict[str, Any]] = []
    for e in reversed(old_path):
        if e.get("id") == ancestor:
            break
        out.append(e)
    out.reverse()
    return out, ancestor


@_without_gc
def preview_branch_summary(
    source: Source,
    *,
    session_path: Any = None,
    target_id: str,
    from_id: str | None = None,
    instructions: str | None = None,
    preserve: list[Any] | None = None,
    replace_instructions: bool = False,
    settings: dict[str, Any] | None = None,
    cancel: CancelToken | None = None,
    activity: ActivitySink | None = None,
) -> dict[str, Any]:
    """The `fabric/branchSummaryPreview` result: the summary Fabric's tree hook would
    attach when navigating from `from_id` (default: the leaf) to `target_id`."""
    log, _digest, _path, _big = _load(source, session_path, cancel, activity)
    if not log.is_session:
        return {"outcome": "none", "entriesSummarized": 0, "reason": "not a Pi session file"}
    if target_id not in log.by_id:
        raise PreviewError("entry_not_found", f"targetId {target_id!r} is not an entry of this session")
    old_leaf = from_id if from_id is not None else log.leaf_id
    if old_leaf is None or old_leaf not in log.by_id:
        raise PreviewError("entry_not_found", f"fromId {from_id!r} is not an entry of this session")
    entries, ancestor = _tree_entries(log, old_leaf, target_id)
    check(cancel)
    result: dict[str, Any] = {"outcome": "none", "entriesSummarized": len(entries)}
    if ancestor is not None:
        result["commonAncestorId"] = ancestor
    cfg = normalize_config(settings or {})
    hook = tree_hook(
        entries,
        user_wants_summary=True,
        custom_instructions=_custom_instructions(instructions, preserve),
        replace_instructions=replace_instructions,
        old_leaf_id=old_leaf,
        config=cfg,
    )
    if hook["result"] == "passthrough":
        result["outcome"] = "deferred" if (replace_instructions or cfg["engine"] != "fabric") else "none"
        result["reason"] = hook["reason"]
        return result
    if hook["result"] == "cancel":
        result["outcome"] = "none"
        result["reason"] = hook["reason"]
        err = hook["instructionError"]
        result["error"] = {"code": err["code"], "message": err["message"]}
        return result
    result["outcome"] = "summarized"
    result["summary"] = hook["summary"]["summary"]
    result["details"] = hook["summary"]["details"]
    return result
