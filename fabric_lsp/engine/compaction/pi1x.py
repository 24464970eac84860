"""Pi 1.x's rules over a branch's facts: the projected context Pi 1.x compacts, its gate
("Nothing to compact"), its `tokensBefore`, and the view the Fabric engine reads.

Pi 1.x (`prepareCompaction` in 1.6.0's compaction.js) works on the *projected* context
(session/projection.py): the latest compaction first, its kept entries without their
system messages, everything after it; the latest `context_edit` of each entry applied
(null hides it, otherwise its content is replaced); an older compaction inside the kept
range contributes nothing. System messages are counted in every estimate but never
summarized and are no cut point. `tokensBefore` distrusts an assistant usage captured
before a later `context_edit` or compaction. The cut falls back to the last cut point
(0.80.6: the first), and a cut followed only by an omitted recovery attempt moves past
it (the recovery-omission-suffix rule).

Everything reads the per-entry facts (`facts.py`, with their Pi 1.x parts:
`Facts.systems`, `Facts.edits`, `Facts.checkpoints`); only the few entries whose content
matters (replaced targets, system messages for the replayed estimate) are decoded again.
`FabricView` is the branch as the Fabric engine sees it under these rules: hidden
entries and system messages contribute no context message, replaced entries their new
content, an older compaction inside the kept range nothing.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from fabric_lsp.engine.session.projection import current_system_message, entry_messages_1x, project_messages
from fabric_lsp.engine.session.tokens import estimate_tokens_1x

from .facts import COMPACTION, EDIT_HIDE, EDIT_REPLACE, MESSAGE, NOMSG, Facts, facts, facts_of, make_kind

if TYPE_CHECKING:
    from ..json_types import JsonValue

ALREADY_COMPACTED = "Already compacted"
NOTHING_TO_COMPACT = "Nothing to compact (session too small)"
_CUT_ROLES = frozenset(("user", "assistant", "bashExecution", "custom", "branchSummary", "compactionSummary"))
_TURN_ROLES = frozenset(("user", "bashExecution", "custom", "branchSummary", "compactionSummary"))


# ------------------------------------------------------------------------ edits


def resolve_edits(f: Facts, among: set[int] | None = None) -> dict[int, tuple[int, str]]:
    """target position → (position of its latest applicable edit, EDIT_HIDE |
    EDIT_REPLACE), over the edits at the positions `among` (default: the whole branch),
    in branch order: Pi's latest-wins `Map` of context edits. An edit whose target is no
    entry of the branch applies to nothing; a malformed one (EDIT_INVALID) is ignored."""
    latest: dict[Any, tuple[int, str]] = {}
    for pos in sorted(f.edits):
        if among is not None and pos not in among:
            continue
        target, action = f.edits[pos]
        if action != EDIT_HIDE and action != EDIT_REPLACE:
            continue
        try:
            latest[target] = (pos, action)
        except TypeError:  # an array/object targetId names no entry
            continue
    out: dict[int, tuple[int, str]] = {}
    for target, edit in latest.items():
        t = f.index(target)
        if t >= 0:
            out[t] = edit
    return out


def replaced_entry(f: Facts, target: int, edit: int) -> dict[str, Any]:
    """The entry at `target` as Pi 1.x shows it after the replacement edit at `edit`
    (a new dict; the branch's own is never changed)."""
    entry = f.entry(target)
    msgs = project_messages(entry_messages_1x(entry), f.entry(edit))
    if not msgs:
        return entry
    msg = msgs[0]
    if entry.get("type") == "message":
        return {**entry, "message": msg}
    if entry.get("type") == "custom_message":
        return {**entry, "content": msg.get("content")}
    return entry


# ------------------------------------------------------------------ projected context


class _P:
    """One projected entry: its branch position, the roles of the messages it
    contributes (in order) and their estimate (Pi 1.x's; a compaction's own checkpoint
    is not counted here — only the replayed estimate reads it)."""

    __slots__ = ("pos", "roles", "tokens", "hidden")

    def __init__(self, pos: int, roles: tuple[Any, ...], tokens: int, hidden: bool = False) -> None:
        self.pos = pos
        self.roles = roles
        self.tokens = tokens
        self.hidden = hidden


def context_positions(f: Facts) -> tuple[list[int], int]:
    """(Pi 1.x's context entries as branch positions, the latest compaction's position or
    -1): `buildContextEntries`."""
    n = len(f)
    lc = f.last_compaction()
    if lc < 0:
        return list(range(n)), -1
    kept_from = f.index(f.compactions[lc][0], lc)
    systems = f.systems
    pre = [i for i in range(kept_from, lc) if i not in systems] if kept_from >= 0 else []
    return [lc, *pre, *range(lc + 1, n)], lc


def project(f: Facts) -> tuple[list[_P], dict[int, tuple[int, str]]]:
    """(the projected entries, the edits applied: target position → (edit position,
    action)) of the branch `f`."""
    positions, _lc = context_positions(f)
    edits = resolve_edits(f, set(positions))
    kinds, tokens, systems = f.kinds, f.tokens, f.systems
    out: list[_P] = []
    for k, pos in enumerate(positions):
        edit = edits.get(pos)
        if pos in f.compactions:
            if k > 0 or (edit is not None and edit[1] == EDIT_HIDE):
                out.append(_P(pos, (), 0, hidden=k == 0))
            elif pos in f.checkpoints:
                out.append(_P(pos, ("system", "compactionSummary"), tokens[pos]))
            else:
                out.append(_P(pos, ("compactionSummary",), tokens[pos]))
            continue
        if edit is not None and edit[1] == EDIT_HIDE:
            out.append(_P(pos, (), 0, hidden=True))
            continue
        if pos in systems:
            out.append(_P(pos, ("system",), systems[pos]))
            continue
        if edit is not None:
            kind, tok, *_ = facts_of(replaced_entry(f, pos, edit[0]))
            role = kind[1]
            out.append(_P(pos, (role,) if role is not NOMSG else (), tok if role is not NOMSG else 0))
            continue
        role = kinds[pos][1]
        if role is NOMSG:
            out.append(_P(pos, (), 0))
        else:
            out.append(_P(pos, (role,), tokens[pos]))
    return out, edits


def _cut_point(p: _P, f: Facts) -> bool:
    return p.pos not in f.compactions and any(r in _CUT_ROLES for r in p.roles)


def _turn_start(p: _P, f: Facts) -> bool:
    return p.pos not in f.compactions and any(r in _TURN_ROLES for r in p.roles)


def find_projected_cut_point(f: Facts, P: list[_P], start: int, end: int, keep_recent_tokens: float) -> dict[str, Any]:
    """Pi 1.x's `findProjectedCutPoint` over the projected entries `P`."""
    cut_points = [k for k in range(start, end) if _cut_point(P[k], f)]
    if not cut_points:
        return {"firstKeptEntryIndex": start, "turnStartIndex": -1, "isSplitTurn": False}
    accumulated = 0
    exceeded = False
    cut = cut_points[0]
    for k in range(end - 1, start - 1, -1):
        t = P[k].tokens
        if t == 0:
            continue
        accumulated += t
        if accumulated >= keep_recent_tokens:
            exceeded = True
            cut = next((c for c in cut_points if c >= k), cut_points[-1])
            break
    if exceeded and _recovery_omission_suffix(f, P[cut + 1 : end]):
        cut += 1
    while cut > start:
        prev = P[cut - 1]
        if prev.pos in f.compactions or prev.roles:
            break
        cut -= 1
    if cut < len(P) and _turn_start(P[cut], f):
        return {"firstKeptEntryIndex": cut, "turnStartIndex": -1, "isSplitTurn": False}
    turn_start = -1
    for k in range(min(cut, len(P) - 1), start - 1, -1):
        if _turn_start(P[k], f):
            turn_start = k
            break
    return {"firstKeptEntryIndex": cut, "turnStartIndex": turn_start, "isSplitTurn": turn_start != -1}


def _recovery_omission_suffix(f: Facts, suffix: list[_P]) -> bool:
    """The suffix after the cut holds only an omitted recovery attempt: an omitted
    assistant reply, no visible entry, no compaction, and no replacement edit of an
    entry that is not itself omitted."""
    kinds, edits = f.kinds, f.edits

    def intrinsic(p: _P) -> bool:
        return p.pos not in edits and (kinds[p.pos][1] is not NOMSG or p.pos in f.compactions)

    def omitted(p: _P) -> bool:
        return intrinsic(p) and not p.roles

    omitted_ids = {f.id(p.pos) for p in suffix if omitted(p)}
    for p in suffix:
        if p.pos in edits:
            target, action = edits[p.pos]
            if action != EDIT_HIDE:
                try:
                    outside = target not in omitted_ids
                except TypeError:
                    outside = True
                if outside:
                    return False
    if not any(kinds[p.pos][0] is MESSAGE and kinds[p.pos][1] == "assistant" and omitted(p) for p in suffix):
        return False
    return all(p.pos not in f.compactions and (not intrinsic(p) or omitted(p)) for p in suffix)


def prepare_compaction(branch: Any, keep_recent_tokens: float = 20000) -> dict[str, Any]:
    """Pi 1.x's `prepareCompaction`: `{ok: False, reason}` when Pi would not compact, else
    `{ok: True, firstKeptEntryId, isSplitTurn, messagesToSummarize, turnPrefixMessages}`."""
    f = facts(branch)
    n = len(f)
    if n and f.kinds[-1][0] is COMPACTION:
        return {"ok": False, "reason": ALREADY_COMPACTED}
    P, _ = project(f)
    pc = next((k for k, p in enumerate(P) if p.pos in f.compactions and p.roles), -1)
    start = pc + 1 if pc >= 0 else 0
    cut = find_projected_cut_point(f, P, start, len(P), keep_recent_tokens)
    idx: int = cut["firstKeptEntryIndex"]
    if idx >= len(P) or not f.id(P[idx].pos):
        return {"ok": False, "reason": NOTHING_TO_COMPACT}
    history_end = cut["turnStartIndex"] if cut["isSplitTurn"] else idx

    def summarizable(ks: range) -> int:
        return sum(0 if P[k].pos in f.compactions else sum(1 for r in P[k].roles if r != "system") for k in ks)

    to_summarize = summarizable(range(start, history_end))
    prefix = summarizable(range(cut["turnStartIndex"], idx)) if cut["isSplitTurn"] else 0
    if to_summarize == 0 and prefix == 0:
        return {"ok": False, "reason": NOTHING_TO_COMPACT}
    return {
        "ok": True,
        "firstKeptEntryId": f.id(P[idx].pos),
        "isSplitTurn": cut["isSplitTurn"],
        "messagesToSummarize": to_summarize,
        "turnPrefixMessages": prefix,
    }


def pi_tokens_before(branch: Any) -> Any:
    """Pi 1.x's `tokensBefore` (`estimateProjectedContextTokens`) from the facts."""
    f = facts(branch)
    P, _ = project(f)
    usage = f.usage
    last = -1
    base: Any = None
    for k in range(len(P) - 1, -1, -1):
        p = P[k]
        if p.roles == ("assistant",) and p.pos in usage:
            u = usage[p.pos][0]
            if u is not None and u > 0:
                last, base = k, u
                break
    if last >= 0:
        invalid = max((*f.edits, *f.compactions), default=-1)
        if P[last].pos > invalid:
            total = base + sum(P[k].tokens for k in range(last + 1, len(P)))
            return int(total) if float(total).is_integer() else total
    systems: list[dict[str, Any]] = []
    tokens = 0
    for p in P:
        if "system" in p.roles:
            if p.pos in f.compactions:
                checkpoint: JsonValue = f.entry(p.pos).get("systemMessage")
                if isinstance(checkpoint, dict):
                    systems.append(checkpoint)
            else:
                msg = entry_messages_1x(f.entry(p.pos))
                systems.extend(msg)
        tokens += 0 if p.roles == ("system",) else p.tokens
    current = current_system_message(systems)
    if current is not None:
        tokens += estimate_tokens_1x(current)
    return tokens


# ------------------------------------------------------------- the Fabric engine's view


class FabricView(Facts):
    """A branch's facts as the Fabric engine reads them under Pi 1.x's rules: an entry
    Pi hides (latest edit null) and every system message add no context message (system
    messages are prompt state Pi replays, never summarized or kept: fixed overhead, as
    the system prompt is for Pi 0.80.6); a replaced entry has its replacement's estimate
    and tool calls; a compaction inside the latest one's kept range counts nothing. Its
    events (`events`) skip hidden entries and read replaced ones with their new content.
    Ids and entries are the branch's own."""

    __slots__ = ("base", "hidden_ids", "replaced_entries")

    def __init__(self, base: Facts) -> None:
        super().__init__()
        base = facts(base)
        self.base = base
        self.readied = True
        self.kinds = list(base.kinds)
        self.tokens = array("q", base.tokens)
        self.usage = dict(base.usage)
        self.spans = dict(base.spans)
        self.compactions = base.compactions
        self.deferred = base.deferred
        self.systems, self.edits, self.checkpoints, self.pi1x = base.systems, base.edits, base.checkpoints, base.pi1x
        self.hidden_ids: set[Any] = set()
        self.replaced_entries: dict[Any, dict[str, Any]] = {}
        kinds, tokens = self.kinds, self.tokens
        for pos in base.systems:
            kinds[pos] = make_kind(kinds[pos][0], NOMSG, False)
            tokens[pos] = 0
        for pos, (edit, action) in resolve_edits(base).items():
            if action == EDIT_HIDE:
                kinds[pos] = make_kind(kinds[pos][0], NOMSG, False)
                tokens[pos] = 0
                self.usage.pop(pos, None)
                self.spans.pop(pos, None)
                self.hidden_ids.add(base.id(pos))
            elif pos not in base.systems and pos not in base.compactions:
                entry = replaced_entry(base, pos, edit)
                kind, tok, usage, spans, _comp, _deferred = facts_of(entry)
                kinds[pos] = kind
                tokens[pos] = tok
                for sparse, value in ((self.usage, usage), (self.spans, spans)):
                    if value is None:
                        sparse.pop(pos, None)
                    else:
                        sparse[pos] = value
                self.replaced_entries[base.id(pos)] = entry
        lc = base.last_compaction()
        if lc >= 0:
            kept_from = base.index(base.compactions[lc][0], lc)
            for c in base.compactions:
                if kept_from >= 0 and kept_from <= c < lc:
                    tokens[c] = 0

    def id(self, i: int) -> Any:
        return self.base.id(i)

    def index(self, entry_id: Any, stop: int | None = None) -> int:
        return self.base.index(entry_id, stop)

    def rindex(self, entry_id: Any, stop: int | None = None) -> int:
        return self.base.rindex(entry_id, stop)

    def entry(self, i: int) -> dict[str, Any]:
        return self.base.entry(i)

    def entries(self, stop: int) -> Iterator[dict[str, Any]]:
        hidden, replaced = self.hidden_ids, self.replaced_entries
        for e in self.base.entries(stop):
            eid = e.get("id")
            try:
                if eid in hidden:
                    continue
                e = replaced.get(eid, e)
            except TypeError:
                pass
            yield e

    def events(
        self, stop: int, check: Callable[[], object] | None = None, stats: dict[str, Any] | None = None
    ) -> list[dict[str, Any]]:
        if not self.hidden_ids and not self.replaced_entries:
            return self.base.events(stop, check, stats)  # (normalization skips system messages)
        from .normalize import normalize

        return normalize(self.entries(stop), check, stats=stats)
