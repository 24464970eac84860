"""`fabric-lsp pi …`: what our Pi extension (editors/pi) asks of fabric-lsp.

Each action reads one JSON object on stdin and writes one JSON object on stdout (UTF-8,
JSON.stringify's format; lone surrogates from a session are escaped, never lost). No
pygls import, and nothing here appends to a session: the live Pi commits its own
compactions, with the summary computed here.

  hold / release   the live lease (engine/session/lease.py); `hold` also names the other
                   live Pis holding the same session (two Pis fork one file)
  settled          at a settled boundary: refresh the lease's leaf, claim a pending intent,
                   say whether a configured threshold below Pi's asks for a compaction
  claim / finish   take a pending intent; record its outcome (engine/intents/bridge.py)
  unclaim          give a claim back (Pi backed off: a prompt came in); the intent stays
                   pending
  compute          the Fabric answer to Pi's session_before_compact, or the compaction
                   draft the extension hands Pi at a boundary (Pi 1.x)
  tree             the Fabric answer to Pi's session_before_tree
  install          copy the extension into <agentDir>/extensions/fabric-lsp/
  uninstall        remove that copy, its config, and every pending intent
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fabric_lsp.config import ServerConfig, load_config


class BridgeInputError(ValueError):
    pass


# -- I/O ------------------------------------------------------------------------------


def _read_payload() -> dict[str, Any]:
    raw = sys.stdin.buffer.read()
    if not raw.strip():
        return {}
    try:
        value = json.loads(raw.decode("utf-8", "surrogatepass"))
    except (UnicodeDecodeError, ValueError) as err:
        raise BridgeInputError(f"stdin is not a JSON object: {err}") from None
    if not isinstance(value, dict):
        raise BridgeInputError("stdin must hold one JSON object")
    return value


def _write(obj: Any) -> None:
    from fabric_lsp.engine.jsstr import js_stringify

    sys.stdout.buffer.write(js_stringify(obj).encode("utf-8") + b"\n")
    sys.stdout.buffer.flush()


def _str(payload: dict[str, Any], key: str, *, required: bool = False) -> str | None:
    value = payload.get(key)
    if value is None:
        if required:
            raise BridgeInputError(f"`{key}` is required")
        return None
    if not isinstance(value, str) or (required and not value):
        raise BridgeInputError(f"`{key}` must be a non-empty string")
    return value


def _int(payload: dict[str, Any], key: str, *, required: bool = False) -> int | None:
    value = payload.get(key)
    if value is None:
        if required:
            raise BridgeInputError(f"`{key}` is required")
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise BridgeInputError(f"`{key}` must be a number")
    return int(value)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return int(value) if float(value).is_integer() else float(value)


def _config(payload: dict[str, Any]) -> ServerConfig:
    """The server's settings layers as the live Pi sees them: its cwd is the project,
    and project files apply when Pi trusts the project."""
    cwd = _str(payload, "cwd")
    init = {"trusted": True} if payload.get("trusted") is True else None
    return load_config(workspace_root=Path(cwd) if cwd else None, init_options=init)


def _session(payload: dict[str, Any]) -> str:
    path = _str(payload, "session", required=True)
    assert path is not None
    if not os.path.isabs(path):
        raise BridgeInputError("`session` must be an absolute path")
    return os.path.realpath(path)


def _store(cfg: ServerConfig) -> Any:
    from fabric_lsp.engine.intents.service import default_state_dir
    from fabric_lsp.engine.intents.store import IntentStore

    return IntentStore(default_state_dir(str(cfg.agent_dir)))


# -- actions --------------------------------------------------------------------------


def _lease_json(lease: Any) -> dict[str, Any]:
    import msgspec

    return msgspec.to_builtins(lease)


def _holder_pid(payload: dict[str, Any]) -> int:
    """`pid`: the running Pi process that holds the session (the extension sends Pi's
    process.pid). pid 1, a pid that is not running and another user's process are
    refused: their lease could only be stale (engine/session/lease.py)."""
    from fabric_lsp.engine.session.lease import LeaseError, holder_identity

    pid = _int(payload, "pid", required=True)
    assert pid is not None
    try:
        holder_identity(pid)
    except LeaseError as err:
        raise BridgeInputError(str(err)) from None
    return pid


def _other_holders(book: Any, path: str, pid: int) -> list[dict[str, Any]]:
    """The other live Pis holding `path`: `{pid, since, piVersion?, leafId?}`, oldest first."""
    others = [lease for lease in book.all_live() if lease.session == path and lease.pid != pid]
    others.sort(key=lambda lease: (lease.since, lease.pid))
    out: list[dict[str, Any]] = []
    for lease in others:
        item: dict[str, Any] = {"pid": lease.pid, "since": lease.since}
        if lease.pi_version:
            item["piVersion"] = lease.pi_version
        if lease.leaf_id:
            item["leafId"] = lease.leaf_id
        out.append(item)
    return out


def act_hold(payload: dict[str, Any], cfg: ServerConfig | None = None) -> dict[str, Any]:
    from fabric_lsp import __version__
    from fabric_lsp.engine.session.lease import LeaseBook

    cfg = cfg or _config(payload)
    path = _session(payload)
    pid = _holder_pid(payload)
    book = LeaseBook(cfg.agent_dir)
    lease = book.hold(
        path,
        pid=pid,
        pi_version=_str(payload, "piVersion"),
        session_id=_str(payload, "sessionId"),
        leaf_id=_str(payload, "leafId"),
    )
    store = _store(cfg)
    store.ensure_dir()  # the extension watches this directory for intents
    return {
        "lease": _lease_json(lease),
        "stateFile": str(store.state_path(path)),
        "leaseDir": str(book.dir),
        "holders": _other_holders(book, path, pid),
        "version": __version__,
        **_thresholds(cfg, payload),
    }


def act_release(payload: dict[str, Any]) -> dict[str, Any]:
    from fabric_lsp.engine.session.lease import LeaseBook

    cfg = _config(payload)
    released = LeaseBook(cfg.agent_dir).release(_session(payload), pid=_int(payload, "pid", required=True) or 0)
    return {"released": released}


def act_claim(payload: dict[str, Any], cfg: ServerConfig | None = None) -> dict[str, Any]:
    from fabric_lsp.engine.intents.bridge import claim_intent

    cfg = cfg or _config(payload)
    claim = claim_intent(_store(cfg), _session(payload), pid=_holder_pid(payload))
    return {"claim": claim}


def act_unclaim(payload: dict[str, Any]) -> dict[str, Any]:
    """Give back this Pi's claim on `intentId`: the intent stays pending (Pi backed off
    because a prompt came in; it tries again at the next settled boundary)."""
    from fabric_lsp.engine.intents.bridge import release_claim

    cfg = _config(payload)
    released = release_claim(
        _store(cfg),
        _session(payload),
        intent_id=_str(payload, "intentId", required=True) or "",
        pid=_int(payload, "pid", required=True) or 0,
    )
    return {"released": released}


def _threshold_tokens(cfg: ServerConfig, model_key: str | None, window: float | None) -> float | None:
    """Seed 002's configured threshold for the live model, in tokens; None when none is
    configured (the rule itself: compaction/hook.py `model_threshold`)."""
    from fabric_lsp.engine.compaction.hook import model_threshold, normalize_config

    if model_key is None:
        return None
    tokens, ratio = model_threshold(normalize_config(dict(cfg.compaction)), model_key)
    if tokens is not None:
        return float(tokens)
    if ratio is not None and window:
        return ratio * window
    return None


def _model(payload: dict[str, Any]) -> tuple[str | None, float | None]:
    model = payload.get("model")
    if not isinstance(model, dict):
        return None, None
    provider, ident = model.get("provider"), model.get("id")
    key = f"{provider}/{ident}" if isinstance(provider, str) and isinstance(ident, str) else None
    window = _number(model.get("contextWindow"))
    return key, (window if window is not None and window > 0 else None)


def _thresholds(cfg: ServerConfig, payload: dict[str, Any]) -> dict[str, Any]:
    """Seed 002's configured threshold for the live model (`payload.model`), in tokens, and
    whether it defers Pi's own threshold (at or above `contextWindow - reserveTokens`)."""
    key, window = _model(payload)
    threshold = _threshold_tokens(cfg, key, window)
    if threshold is None:
        return {}
    pi_threshold = (window - cfg.reserve_tokens) if window is not None else None
    # seed 002: a configured threshold at or above Pi's own defers Pi's automatic threshold
    # compaction until it is reached (the extension shows it in its status line); one below
    # makes the extension compact at the next settled boundary
    return {"thresholdTokens": threshold, "defersPiThreshold": pi_threshold is not None and threshold >= pi_threshold}


def act_settled(payload: dict[str, Any]) -> dict[str, Any]:
    """A settled boundary: refresh the lease (the live leaf), claim a pending intent, and say
    whether seed 002's configured threshold (when below Pi's own) asks for a compaction."""
    cfg = _config(payload)  # once: hold, claim and the threshold read the same settings
    out = act_hold(payload, cfg)
    out.update(act_claim(payload, cfg))
    usage = payload.get("usage") if isinstance(payload.get("usage"), dict) else {}
    tokens = _number(usage.get("tokens")) if usage else None
    compact = (
        out["claim"] is None
        and "thresholdTokens" in out
        and not out["defersPiThreshold"]
        and tokens is not None
        and tokens >= out["thresholdTokens"]
    )
    out["thresholdCompact"] = bool(compact)
    return out


def act_finish(payload: dict[str, Any]) -> dict[str, Any]:
    from fabric_lsp.engine.intents.bridge import finish_claim

    cfg = _config(payload)
    committed = payload.get("committed")
    if committed is not None:
        if not isinstance(committed, dict):
            raise BridgeInputError("`committed` must be an object")
        for key in ("entryId", "summary"):
            if not isinstance(committed.get(key), str):
                raise BridgeInputError(f"`committed.{key}` must be a string")
        if _number(committed.get("tokensBefore")) is None:
            raise BridgeInputError("`committed.tokensBefore` must be a number")
    record = finish_claim(
        _store(cfg),
        _session(payload),
        intent_id=_str(payload, "intentId", required=True) or "",
        committed=committed,
        error=_str(payload, "error"),
    )
    return {"record": record}


def act_compute(payload: dict[str, Any]) -> dict[str, Any]:
    """session_before_compact → `{action: "compaction", compaction}` | `{action: "cancel",
    reason, notification?}` | `{action: "passthrough", reason}`: the same computation and
    bytes as `fabric/compactionPreview` with these inputs (the options resolver)."""
    from fabric_lsp.engine.compaction.api import PreviewError, compaction_run
    from fabric_lsp.engine.compaction.options import CompactionOverrides, resolve_compaction_options

    cfg = _config(payload)
    path = _session(payload)
    key, window = _model(payload)
    raw_settings = payload.get("settings")
    settings = raw_settings if isinstance(raw_settings, dict) else {}
    reason = payload.get("reason", "manual")
    if reason not in ("manual", "threshold", "overflow"):
        raise BridgeInputError("`reason` must be manual, threshold or overflow")
    overrides = CompactionOverrides(
        context_window=window if window is not None else 0,
        reserve_tokens=_number(settings.get("reserveTokens")),
        keep_recent_tokens=_number(settings.get("keepRecentTokens")),
    )
    options = resolve_compaction_options(cfg.compaction_settings(), overrides)
    try:
        result, hook = compaction_run(
            path,
            session_path=path,
            instructions=_str(payload, "customInstructions"),
            reason=reason,
            tokens_before=_number(payload.get("tokensBefore")),
            leaf_id=_str(payload, "leafId"),
            model_key=key,
            pi_vcc_overriding=payload.get("piVccOverriding") is True,
            **options.kwargs(),
        )
    except PreviewError as err:
        return {
            "action": "cancel",
            "kind": "error",
            "reason": f"{err.code}: {err.message}",
            "notification": f"Fabric compaction failed: {err.code}: {err.message}"[:512],
        }
    if hook is None:
        reason = str(result.get("reason") or "not compactable")
        return {"action": "cancel", "kind": _cancel_kind(reason), "reason": reason}
    if hook["result"] == "passthrough":
        return {"action": "passthrough", "reason": hook.get("reason", "")}
    if hook["result"] == "cancel":
        reason = str(hook.get("reason", ""))
        out: dict[str, Any] = {
            "action": "cancel",
            "kind": "rejected" if "instructionError" in hook else _cancel_kind(reason),
            "reason": reason,
        }
        if "notification" in hook:
            out["notification"] = hook["notification"]
        return out
    return {"action": "compaction", "compaction": hook["compaction"], "leafId": result.get("leafId")}


def _cancel_kind(reason: str) -> str:
    """What a Fabric cancel means to the extension: `deferred` (seed 002's threshold),
    `nothing` (nothing to compact: Pi's gate or the engine's), `compacted` (the branch
    ends with a compaction), or `error` (the engine could not produce the compaction:
    for an automatic compaction the extension lets Pi's own compactor run)."""
    low = reason.lower()
    if "threshold deferred" in low:
        return "deferred"
    if "nothing to compact" in low:
        return "nothing"
    if "already compacted" in low:
        return "compacted"
    return "error"


def act_tree(payload: dict[str, Any]) -> dict[str, Any]:
    """session_before_tree → `{action: "summary", summary: {summary, details}}` |
    `{action: "cancel", notification}` | `{action: "passthrough", reason}`."""
    from fabric_lsp.engine.compaction.api import PreviewError, preview_branch_summary
    from fabric_lsp.engine.compaction.bounds import clip_utf8
    from fabric_lsp.engine.compaction.options import resolve_compaction_options

    if payload.get("userWantsSummary") is False:
        return {"action": "passthrough", "reason": "no summary requested"}
    cfg = _config(payload)
    path = _session(payload)
    try:
        result = preview_branch_summary(
            path,
            session_path=path,
            target_id=_str(payload, "targetId", required=True) or "",
            from_id=_str(payload, "oldLeafId"),
            instructions=_str(payload, "customInstructions"),
            replace_instructions=payload.get("replaceInstructions") is True,
            settings=dict(resolve_compaction_options(cfg.compaction_settings()).fabric),
        )
    except PreviewError as err:
        return {"action": "passthrough", "reason": f"{err.code}: {err.message}"}
    if result["outcome"] == "summarized":
        return {"action": "summary", "summary": {"summary": result["summary"], "details": result["details"]}}
    if "error" in result:
        err = result["error"]
        return {
            "action": "cancel",
            "reason": result.get("reason", ""),
            "notification": clip_utf8(f"Fabric compaction rejected: {err['code']}: {err['message']}", 512),
        }
    return {"action": "passthrough", "reason": str(result.get("reason") or "nothing to summarize")}


ACTIONS: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "hold": act_hold,
    "release": act_release,
    "settled": act_settled,
    "claim": act_claim,
    "unclaim": act_unclaim,
    "finish": act_finish,
    "compute": act_compute,
    "tree": act_tree,
}


def _pi_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("action", choices=sorted([*ACTIONS, "install", "uninstall"]), help="what the Pi extension asks")
    p.add_argument(
        "--agent-dir",
        metavar="DIR",
        help="with install/uninstall: Pi's agent dir (default: $PI_CODING_AGENT_DIR or ~/.pi/agent)",
    )


def _run_pi(args: argparse.Namespace) -> int:
    if args.action in ("install", "uninstall"):
        from fabric_lsp.config import default_agent_dir

        agent_dir = Path(os.path.abspath(os.path.expanduser(args.agent_dir))) if args.agent_dir else default_agent_dir()
        from fabric_lsp.commands.pi_install import extension_command, install, run_uninstall

        if args.action == "uninstall":
            return run_uninstall(agent_dir)
        try:
            command = extension_command()
            target = install(agent_dir, command)
        except (OSError, RuntimeError) as err:
            print(f"fabric-lsp pi install: {err}", file=sys.stderr)
            return 1
        print(
            f"installed the Pi extension in {target}\n"
            f"it runs: {' '.join(command)} pi …\n"
            "Pi loads it at its next start (or /reload)."
        )
        return 0
    try:
        payload = _read_payload()
        out = ACTIONS[args.action](payload)
    except BridgeInputError as err:
        _write({"error": {"code": "invalid_input", "message": f"fabric-lsp pi {args.action}: {err}"}})
        return 2
    _write(out)
    return 0


SUBCOMMANDS = {
    "pi": (
        "what the Pi extension (editors/pi) asks: hold, settled, claim, unclaim, finish, compute, tree; "
        "install, uninstall",
        _pi_arguments,
        _run_pi,
    ),
}
