"""What the compaction gate and the cut read from each branch entry, computed once.

Pi's gate (`pigate`), the live window and the cuts (`cut`) and the compile step (`hook`)
only ever look at a few things per entry: its type, the role of the context message it
contributes (or that it contributes none), that message's token estimate, whether it is
skipped by the live window, and — for a few entries — usage numbers, tool-call ids and a
compaction's `firstKeptEntryId`. `facts_of` computes them from an entry dict; a
`Facts` holds them for a whole branch in flat arrays and small sparse maps, so a preview
of a session of half a million entries never holds half a million dicts (the streaming
scanner in `scan.py` builds one line at a time; `DictFacts` builds one from a list of
entry dicts, which is what the engine functions accept). Both run the same code.

Roles are kept as the message's own value (the usual ones as shared constants), so a
membership test on an odd role behaves exactly as it did on the dict.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from fabric_lsp.engine.native import NATIVE
from fabric_lsp.engine.session.context import entry_to_message
from fabric_lsp.engine.session.projection import edit_action, is_pi1x_marker
from fabric_lsp.engine.session.tokens import (
    arguments_chars,
    assistant_chars,
    calculate_context_tokens,
    js_truthy,
    system_chars,
)

from .details import is_fabric_v1, is_fabric_v2
from .estimate import estimate_tokens
from .loader import ToolOutput
from .normalize import typed_custom_message

if TYPE_CHECKING:
    from ..json_types import JsonValue

# entry types the engine distinguishes (any other type reads as OTHER)
MESSAGE = "message"
CUSTOM_MESSAGE = "custom_message"
BRANCH_SUMMARY = "branch_summary"
COMPACTION = "compaction"
MODEL_CHANGE = "model_change"
OTHER = "(other)"
_TYPES = {t: t for t in (MESSAGE, CUSTOM_MESSAGE, BRANCH_SUMMARY, COMPACTION, MODEL_CHANGE)}


# the entry contributes no context message (distinct from a message whose role is None)
def _nomsg_repr(self: object) -> str:
    return "NOMSG"


NOMSG = type("NoMessage", (), {"__repr__": _nomsg_repr, "__slots__": ()})()
_ROLES: dict[Any, Any] = {
    r: r
    for r in (
        "user",
        "assistant",
        "toolResult",
        "bashExecution",
        "custom",
        "branchSummary",
        "compactionSummary",
        "system",
    )
}

# entry types whose content becomes normalized events (normalize skips every other type)
EVENT_TYPES = frozenset((MESSAGE, CUSTOM_MESSAGE, BRANCH_SUMMARY))

_kind_cache: dict[tuple[Any, ...], tuple[Any, ...]] = {}


def make_kind(ttype: str, role: Any, live_skip: bool) -> tuple[Any, ...]:
    """The (shared) kind tuple (type, role, live_skip)."""
    return _kind(ttype, role, live_skip)


def _kind(ttype: str, role: Any, live_skip: bool) -> tuple[Any, ...]:
    key = (ttype, role, live_skip)
    try:
        return _kind_cache.setdefault(key, key) if len(_kind_cache) < 4096 else key
    except TypeError:
        return key


def calculate_context_tokens_js(usage: JsonValue) -> float:
    """JS `calculateContextTokens`: NaN when fields are missing (no checkpoint)."""
    if not isinstance(usage, dict):
        return math.nan
    total = usage.get("totalTokens")
    if total:  # truthy
        t = _num(total)
        return math.nan if t is None else t
    s = 0.0
    for k in ("input", "output", "cacheRead", "cacheWrite"):
        v = _num(usage.get(k))
        if v is None:
            return math.nan
        s += v
    return s


def _num(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return v


def _usage(msg: dict[str, Any]) -> tuple[Any, ...]:
    """(Pi's context tokens or None, JS calculateContextTokens) of an assistant message."""
    u: JsonValue = msg.get("usage")
    ok = msg.get("stopReason") not in ("error", "aborted") and isinstance(u, dict)
    if type(u) is dict:
        total = u.get("totalTokens")
        if total:  # both read a truthy totalTokens alone
            num = total.__class__ in (int, float)
            return (total if num else 0) if ok else None, total if num else math.nan
    return calculate_context_tokens(u) if ok else None, calculate_context_tokens_js(u)


_OTHER_FACTS = ((OTHER, NOMSG, False), 0, None, None, None, None)
_MODEL_CHANGE_FACTS = ((MODEL_CHANGE, NOMSG, False), 0, None, None, None, None)
_NO_MESSAGE_FACTS = ((MESSAGE, NOMSG, False), 0, None, None, None, None)
_MESSAGE_KINDS = {r: (MESSAGE, r, False) for r in _ROLES}
MESSAGE_KINDS = _MESSAGE_KINDS  # (role -> the shared kind of its messages)
# `message_facts` of the common roles in C (None: not built, or FABRIC_LSP_NATIVE=0)
_message_facts: Any = getattr(NATIVE, "message_facts", None)
SYSTEM_KIND = _MESSAGE_KINDS["system"]  # a persisted Pi 1.x system message
CONTEXT_EDIT = "context_edit"
EDIT_HIDE, EDIT_REPLACE, EDIT_INVALID = "hide", "replace", "invalid"


def pi1x_facts(entry: dict[str, Any], kind: tuple[Any, ...]) -> tuple[Any, ...]:
    """What the Pi 1.x rules read of an entry beyond `facts_of`, and whether only Pi 1.x
    writes such an entry (`projection.is_pi1x_marker`): (marker, system tokens or None,
    edit or None, checkpoint). `system tokens` is Pi 1.x's estimate of a system message
    (0.80.6 counts it 0: `kind` keeps that); `edit` = (targetId, EDIT_HIDE | EDIT_REPLACE
    | EDIT_INVALID) of a `context_edit`; `checkpoint` a compaction's `systemMessage`."""
    if kind is SYSTEM_KIND:
        m: Any = entry.get("message")
        return True, -(-system_chars(m) // 4), None, False
    t = kind[0]
    if t is COMPACTION:
        if not js_truthy(entry.get("systemMessage")):
            return False, None, None, False
        return is_pi1x_marker(entry), None, None, True
    if t is OTHER:
        et = entry.get("type")
        if et == CONTEXT_EDIT:
            action = edit_action(entry)
            edit = (entry.get("targetId"), action if action is not None else EDIT_INVALID)
            return is_pi1x_marker(entry), None, edit, False
        if et == "usage":
            return is_pi1x_marker(entry), None, None, False
    return False, None, None, False


def message_facts(entry: dict[str, Any], defer: bool) -> tuple[Any, ...]:
    """`facts_of` a `message` entry: its context message is `entry["message"]` (Pi's
    copy with `content: []` when it is null estimates the same)."""
    m: JsonValue = entry.get("message")
    if not isinstance(m, dict):
        return _NO_MESSAGE_FACTS
    if defer and _message_facts is not None:  # the common roles in C (test_native_feed.py)
        facts = _message_facts(m, _MESSAGE_KINDS, ToolOutput)
        if facts is not None:
            return facts
    r = m.get("role")
    try:
        role = _ROLES.get(r, r)
    except TypeError:  # an unhashable role stays itself: membership tests raise as before
        role = r
    usage = spans = deferred = None
    if role == "assistant":
        usage = _usage(m)
        if defer:
            args: list[Any] = []
            chars = assistant_chars(m, args)
            if args:
                deferred = (chars, tuple(args))
                tokens = -1
            else:
                tokens = -(-chars // 4)
        else:
            tokens = estimate_tokens(m)
    else:
        tokens = estimate_tokens(m)
    live_skip = False
    if role == "custom" and m.get("display") is False:
        c = m.get("content")
        live_skip = c == "" or c == []
    if type(m) is dict:  # the call/result spans read exact dicts only
        content: JsonValue = m.get("content")
        calls: Any = ()
        if type(content) is list:
            for p in content:
                if type(p) is dict and p.get("type") == "toolCall":
                    cid = p.get("id")
                    if type(cid) is str and cid:
                        calls += (cid,)
        result = None
        if role == "toolResult":
            cid = m.get("toolCallId")
            if type(cid) is str and cid:
                result = cid
        if calls or result is not None:
            spans = (calls, result)
    kind = _MESSAGE_KINDS.get(role) if not live_skip and type(role) is str else None
    if kind is None:
        kind = _kind(MESSAGE, role, live_skip)
    return kind, tokens, usage, spans, None, deferred


def facts_of(entry: dict[str, Any], defer: bool = False) -> tuple[Any, ...]:
    """(kind, tokens, usage, spans, compaction, deferred) of one entry dict:

    * kind = (type, role, live_skip): `type` one of the constants above, `role` the role
      of `entry_to_message(entry)` (NOMSG when there is none), `live_skip` when the live
      window skips the entry (an untyped custom_message, a hidden empty custom message);
    * tokens = Pi's estimate of that message (0 without one);
    * usage = (Pi's context tokens or None, JS calculateContextTokens) for assistant
      messages: Pi's only when the stop reason is not error/aborted and usage is an object;
    * spans = (tool-call part ids, toolResult call id or None) for message entries with any;
    * compaction = (firstKeptEntryId as stored, 1/2 for a Fabric v1/v2 details, else 0);
    * deferred = with `defer`, for an assistant message with tool calls: (its characters
      but the arguments', the argument values), and tokens is -1 until `Facts.ready`
      completes it (only entries the cut can read are ever completed).
    """
    t = entry.get("type")
    if t == MESSAGE:
        return message_facts(entry, defer)
    if t != CUSTOM_MESSAGE and t != BRANCH_SUMMARY and t != COMPACTION:
        # no context message and nothing else the engine reads
        return _MODEL_CHANGE_FACTS if t == MODEL_CHANGE else _OTHER_FACTS
    ttype = _TYPES[t]
    msg = entry_to_message(entry)  # custom, branchSummary (or none), compactionSummary
    if msg is None:
        role: Any = NOMSG
        tokens = 0
    else:
        role = msg["role"]
        tokens = estimate_tokens(msg)
    comp = None
    live_skip = False
    if ttype is CUSTOM_MESSAGE:
        live_skip = not typed_custom_message(entry)
    elif ttype is COMPACTION:
        d = entry.get("details")
        comp = (entry.get("firstKeptEntryId"), 1 if is_fabric_v1(d) else 2 if is_fabric_v2(d) else 0)
    return _kind(ttype, role, live_skip), tokens, None, None, comp, None


class Facts:
    """The facts of one branch, root→leaf (position i = the i-th branch entry).

    `kinds[i]` and `tokens[i]` are dense; `usage`, `spans` and `compactions` map the
    positions that have one. Subclasses give the ids and the entries themselves."""

    __slots__ = (
        "kinds",
        "tokens",
        "usage",
        "spans",
        "compactions",
        "deferred",
        "readied",
        "systems",
        "edits",
        "checkpoints",
        "pi1x",
    )

    def __init__(self) -> None:
        self.kinds: list[tuple[Any, ...]] = []
        self.tokens: Any = array("q")
        self.usage: dict[int, tuple[Any, ...]] = {}
        self.spans: dict[int, tuple[Any, ...]] = {}
        self.compactions: dict[int, tuple[Any, ...]] = {}
        self.deferred: dict[int, tuple[Any, ...]] = {}
        self.readied = False
        # Pi 1.x (`pi1x_facts`): system messages' 1.x estimates, context edits, compactions
        # with a checkpoint, and whether any entry read (the whole file, when scanned) is
        # one only Pi 1.x writes
        self.systems: dict[int, int] = {}
        self.edits: dict[int, tuple[Any, str]] = {}
        self.checkpoints: dict[int, bool] = {}
        self.pi1x = False

    def __len__(self) -> int:
        return len(self.kinds)

    def add(self, entry: dict[str, Any], defer: bool = False) -> None:
        kind, tokens, usage, spans, comp, deferred = facts_of(entry, defer)
        i = len(self.kinds)
        if deferred is not None:
            self.deferred[i] = deferred
        self.kinds.append(kind)
        self.tokens.append(tokens)
        if usage is not None:
            self.usage[i] = usage
        if spans is not None:
            self.spans[i] = spans
        if comp is not None:
            self.compactions[i] = comp
        self.add_pi1x(i, entry, kind)

    def add_pi1x(self, i: int, entry: dict[str, Any], kind: tuple[Any, ...]) -> None:
        """Record `pi1x_facts` of the entry at position i."""
        if kind is not SYSTEM_KIND and kind[0] is not OTHER and kind[0] is not COMPACTION:
            return
        marker, sys_tokens, edit, checkpoint = pi1x_facts(entry, kind)
        if marker:
            self.pi1x = True
        if sys_tokens is not None:
            self.systems[i] = sys_tokens
        if edit is not None:
            self.edits[i] = edit
        if checkpoint:
            self.checkpoints[i] = True

    # -- entries and ids (subclasses)
    def id(self, i: int) -> Any:
        raise NotImplementedError

    def index(self, entry_id: Any, stop: int | None = None) -> int:
        """JS `findIndex(e => e.id === entry_id)` over positions [0, stop) (-1 when absent)."""
        raise NotImplementedError

    def rindex(self, entry_id: Any, stop: int | None = None) -> int:
        """The last position in [0, stop) whose id equals `entry_id` (-1 when absent)."""
        raise NotImplementedError

    def entry(self, i: int) -> dict[str, Any]:
        """The entry dict at position i."""
        raise NotImplementedError

    def entries(self, stop: int) -> Iterator[dict[str, Any]]:
        """The entries at positions [0, stop) that can carry normalized events, in order
        (others may be left out: normalization skips them)."""
        raise NotImplementedError

    def events(
        self, stop: int, check: Callable[[], object] | None = None, stats: dict[str, Any] | None = None
    ) -> list[dict[str, Any]]:
        """`normalize` of the entries at positions [0, stop)."""
        from .normalize import normalize

        return normalize(self.entries(stop), check, stats=stats)

    def ready(self) -> None:
        """Complete the deferred token estimates the engine can read: every position from
        the first the cut, the gate or `tokensBefore` looks at (the last compaction's kept
        entry, else the compaction itself; 0 without one). Earlier ones stay deferred."""
        self.readied = True
        deferred = self.deferred
        if not deferred:
            return
        lc = self.last_compaction()
        if lc < 0:
            first = 0
        else:
            first = self.index(self.compactions[lc][0], lc)
            if first < 0:
                first = lc
        tokens = self.tokens
        for i in [i for i in deferred if i >= first]:
            chars, args = deferred.pop(i)
            tokens[i] = -(-(chars + arguments_chars(args)) // 4)

    # -- derived
    def last_compaction(self, end: int | None = None) -> int:
        """Position of the last compaction before `end` (default: the branch end), or -1."""
        comps = self.compactions
        if not comps:
            return -1
        if end is None:
            return max(comps)
        best = -1
        for i in comps:
            if i < end and i > best:
                best = i
        return best


class DictFacts(Facts):
    """Facts of a list of entry dicts (the engine functions' own input)."""

    __slots__ = ("branch", "_ids")

    def __init__(self, branch: list[dict[str, Any]]) -> None:
        super().__init__()
        self.branch = branch
        self._ids: list[Any] | None = None
        for e in branch:
            self.add(e)

    def id(self, i: int) -> Any:
        return self.branch[i].get("id")

    def index(self, entry_id: Any, stop: int | None = None) -> int:
        ids = self._ids
        if ids is None:
            ids = self._ids = [e.get("id") for e in self.branch]
        try:
            return ids.index(entry_id, 0, len(ids) if stop is None else stop)
        except ValueError:
            return -1

    def rindex(self, entry_id: Any, stop: int | None = None) -> int:
        branch = self.branch
        for i in range((len(branch) if stop is None else stop) - 1, -1, -1):
            if branch[i].get("id") == entry_id:
                return i
        return -1

    def entry(self, i: int) -> dict[str, Any]:
        return self.branch[i]

    def entries(self, stop: int) -> Iterator[dict[str, Any]]:
        return iter(self.branch[:stop])


def facts(branch: Any) -> Facts:
    """`branch` as Facts (a list of entry dicts is measured once), ready to read."""
    f = branch if isinstance(branch, Facts) else DictFacts(branch)
    if not f.readied:
        f.ready()
    return f
