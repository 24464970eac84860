"""Pi 1.x's projection in the session layer (session/projection.py) and in the compaction
engine's facts (compaction/pi1x.py) against a plain reference written from Pi 1.6.0's
documented rules: the latest `context_edit` of an entry on the branch wins; a null
replacement hides the entry, any other replaces its `content` only (for user, assistant,
toolResult and custom messages); system messages in the latest compaction's kept range
are dropped; an older compaction in that range says nothing."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from fabric_lsp.engine.compaction import pi1x
from fabric_lsp.engine.compaction.facts import NOMSG, DictFacts
from fabric_lsp.engine.session import (
    branch_summary_origin,
    build_projection,
    context_edit_marks,
    current_system_message,
    is_pi1x_marker,
    session_rules,
)
from fabric_lsp.engine.session.tokens import estimate_tokens_1x
from tests.support.examples import profile_examples

TEXT = st.sampled_from(["", "a", "hello world", "x" * 120, "日本語"])
EDITABLE = ("user", "assistant", "toolResult", "custom")


@st.composite
def branch(draw):
    out: list[dict] = []
    for i in range(draw(st.integers(0, 25))):
        ids = [e["id"] for e in out]
        kind = draw(
            st.sampled_from(
                [
                    "user",
                    "assistant",
                    "result",
                    "system",
                    "custom_message",
                    "branch_summary",
                    "compaction",
                    "edit",
                    "edit",
                    "edit",
                    "label",
                ]
            )
        )
        if kind == "user":
            e = {"type": "message", "message": {"role": "user", "content": draw(TEXT)}}
        elif kind == "assistant":
            e = {
                "type": "message",
                "message": {
                    "role": "assistant",
                    "content": [{"type": "text", "text": draw(TEXT)}],
                    "stopReason": "stop",
                },
            }
        elif kind == "result":
            e = {
                "type": "message",
                "message": {
                    "role": "toolResult",
                    "toolCallId": "c",
                    "toolName": "read",
                    "content": [{"type": "text", "text": draw(TEXT)}],
                    "isError": False,
                },
            }
        elif kind == "system":
            e = {"type": "message", "message": {"role": "system", "content": draw(TEXT), "sections": {"s": draw(TEXT)}}}
        elif kind == "custom_message":
            e = {"type": "custom_message", "customType": "t", "content": draw(TEXT), "display": True}
        elif kind == "branch_summary":
            e = {"type": "branch_summary", "fromId": "root", "summary": draw(TEXT)}
        elif kind == "compaction":
            e = {
                "type": "compaction",
                "summary": draw(TEXT),
                "tokensBefore": 1,
                "firstKeptEntryId": draw(st.sampled_from(["", f"e{i}", *ids])),
            }
        elif kind == "edit":
            e = {
                "type": "context_edit",
                "targetId": draw(st.sampled_from([*ids, "gone"])),
                "replacement": draw(
                    st.one_of(
                        st.none(),
                        st.fixed_dictionaries({"content": st.one_of(TEXT, st.just([{"type": "text", "text": "r"}]))}),
                    )
                ),
            }
        else:
            e = {"type": "label", "targetId": "e0", "label": "l"}
        out.append({"type": e.pop("type"), "id": f"e{i}", "parentId": f"e{i - 1}" if i else None, **e})
    return out


def reference_projection(path: list[dict]) -> list[tuple[str, list[dict]]]:
    """(entry id, model messages) per context entry, the slow and obvious way."""
    last = max((i for i, e in enumerate(path) if e["type"] == "compaction"), default=-1)
    if last < 0:
        context = list(path)
    else:
        comp = path[last]
        kept = [i for i in range(last) if path[i]["id"] == comp["firstKeptEntryId"]]
        before = path[kept[0] : last] if kept else []
        before = [e for e in before if not (e["type"] == "message" and e["message"]["role"] == "system")]
        context = [comp, *before, *path[last + 1 :]]
    out = []
    for k, e in enumerate(context):
        edits = [x for x in context if x["type"] == "context_edit" and x["targetId"] == e["id"]]
        edit = edits[-1] if edits else None
        if e["type"] == "message":
            msgs = [e["message"]]
        elif e["type"] == "custom_message":
            msgs = [
                {
                    "role": "custom",
                    "customType": e["customType"],
                    "content": e["content"],
                    "display": e["display"],
                    "details": None,
                    "timestamp": None,
                }
            ]
        elif e["type"] == "branch_summary":
            msgs = (
                [{"role": "branchSummary", "summary": e["summary"], "fromId": "root", "timestamp": None}]
                if e["summary"]
                else []
            )
        elif e["type"] == "compaction":
            msgs = (
                []
                if k > 0
                else [{"role": "compactionSummary", "summary": e["summary"], "tokensBefore": 1, "timestamp": None}]
            )
        else:
            msgs = []
        if edit is not None and msgs:
            if edit["replacement"] is None:
                msgs = []
            else:
                new = edit["replacement"]["content"]
                msgs = [
                    {
                        **m,
                        "content": (
                            [{"type": "text", "text": new}]
                            if isinstance(new, str) and m["role"] in ("assistant", "toolResult")
                            else new
                        ),
                    }
                    if m["role"] in EDITABLE
                    else m
                    for m in msgs
                ]
        out.append((e["id"], msgs))
    return out


@settings(max_examples=profile_examples(300), deadline=None)
@given(branch())
def test_projection_applies_the_latest_edit_of_each_entry(path):
    ours = [(pe.entry["id"], pe.messages) for pe in build_projection(path)]
    assert ours == reference_projection(path)


@settings(max_examples=profile_examples(300), deadline=None)
@given(branch())
def test_the_engines_projection_from_facts_agrees(path):
    """compaction/pi1x.py reads the same projection from per-entry facts (roles, estimates)."""
    ref = reference_projection(path)
    P, _ = pi1x.project(DictFacts(path))
    assert [path[p.pos]["id"] for p in P] == [eid for eid, _ in ref]
    for p, (_eid, msgs) in zip(P, ref):
        if path[p.pos]["type"] == "compaction":
            assert ("compactionSummary" in p.roles) == bool(msgs)
            continue
        assert p.roles == tuple(m["role"] for m in msgs)
        assert p.tokens == sum(estimate_tokens_1x(m) for m in msgs)


@settings(max_examples=profile_examples(300), deadline=None)
@given(branch())
def test_the_fabric_view_hides_and_replaces_what_the_latest_edit_says(path):
    f = pi1x.FabricView(DictFacts(path))
    latest: dict[str, dict] = {}
    for e in path:
        if e["type"] == "context_edit":
            latest[e["targetId"]] = e
    for i, e in enumerate(path):
        edit = latest.get(e["id"])
        if e["type"] == "message" and e["message"]["role"] == "system":
            assert f.kinds[i][1] is NOMSG  # prompt state: never summarized, never kept
        elif edit is not None and edit["replacement"] is None:
            assert f.kinds[i][1] is NOMSG and f.tokens[i] == 0 and e["id"] in f.hidden_ids
        elif edit is not None and e["type"] in ("message", "custom_message") and e["type"] != "compaction":
            assert e["id"] in f.replaced_entries
    # the events the summary is built from leave hidden entries out and read replacements
    events = f.events(len(path))
    sources = {ev["sourceEntryId"] for ev in events}
    assert not sources & f.hidden_ids
    for ev in events:
        if ev["type"] == "user" and ev["sourceEntryId"] in f.replaced_entries:
            new = latest[ev["sourceEntryId"]]["replacement"]["content"]
            assert ev["text"] == (new if isinstance(new, str) else "r")


@settings(max_examples=profile_examples(200), deadline=None)
@given(branch())
def test_marks_name_the_latest_edit_of_each_entry_on_the_branch(path):
    header = {"type": "session", "version": 3, "id": "s", "cwd": "/"}
    data = "".join(json.dumps(x) + "\n" for x in [header, *path]).encode()
    marks = context_edit_marks(data)
    want: dict[str, dict] = {}
    ids = {e["id"] for e in path}
    for e in path:
        if e["type"] == "context_edit" and e["targetId"] in ids:
            want[e["targetId"]] = {"editId": e["id"], "state": "hidden" if e["replacement"] is None else "replaced"}
    assert marks == want


def test_marks_off_the_active_branch_only_with_all_branches():
    rows = [
        {"type": "session", "version": 3, "id": "s", "cwd": "/"},
        {"type": "message", "id": "u1", "parentId": None, "message": {"role": "user", "content": "q"}},
        {
            "type": "message",
            "id": "a1",
            "parentId": "u1",
            "message": {"role": "assistant", "content": [], "stopReason": "error"},
        },
        {"type": "context_edit", "id": "x1", "parentId": "a1", "targetId": "a1", "replacement": None},
        # a second branch from u1 that replaces the question; the leaf is back on the first
        {"type": "context_edit", "id": "x2", "parentId": "u1", "targetId": "u1", "replacement": {"content": "Q!"}},
        {"type": "label", "id": "l1", "parentId": "x1", "targetId": "u1", "label": "here"},
    ]
    data = "".join(json.dumps(r) + "\n" for r in rows).encode()
    assert context_edit_marks(data) == {"a1": {"editId": "x1", "state": "hidden"}}
    assert context_edit_marks(data, branches="all") == {"a1": {"editId": "x1", "state": "hidden"}}
    assert context_edit_marks(data, leaf_id="x2") == {"u1": {"editId": "x2", "state": "replaced"}}
    assert context_edit_marks(data[: data.rindex(b'{"type": "label"')]) == {"u1": {"editId": "x2", "state": "replaced"}}


def test_replayed_system_message_patches_sections_and_tools_by_name():
    msgs = [
        {
            "role": "system",
            "content": "",
            "sections": {"a": "A", "b": "B"},
            "timestamp": 7,
            "toolsAdded": [{"name": "read"}, {"name": "bash"}],
        },
        {"role": "user", "content": "hi"},
        {
            "role": "system",
            "content": "more",
            "sections": {"a": None, "c": "C", "b": "B2"},
            "timestamp": 9,
            "toolsRemoved": [{"name": "bash"}],
            "toolsAdded": [{"name": "edit"}, {"name": "read", "v": 2}],
        },
    ]
    assert current_system_message(msgs) == {
        "role": "system",
        "content": "more",
        "sections": {"b": "B2", "c": "C"},
        "toolsAdded": [{"name": "read", "v": 2}, {"name": "edit"}],
        "timestamp": 7,
    }
    assert current_system_message([{"role": "user", "content": "x"}]) is None


def test_rules_are_chosen_by_content():
    old = [{"type": "message", "id": "u", "parentId": None, "message": {"role": "user", "content": "q"}}]
    assert session_rules(old) == "0.80"
    for marker in (
        {"type": "message", "message": {"role": "system", "content": ""}},
        {"type": "context_edit", "targetId": "u", "replacement": None},
        {"type": "usage", "kind": "cache_warm", "usage": {"input": 1}},
        {"type": "compaction", "summary": "s", "systemMessage": {"role": "system", "content": ""}},
    ):
        assert is_pi1x_marker(marker), marker
        assert session_rules(old + [marker]) == "1.x"
        assert session_rules(old + [marker], "0.80") == "0.80"
    # a misshapen entry of those types proves nothing
    for odd in (
        {"type": "context_edit", "payload": 1},
        {"type": "usage"},
        {"type": "compaction", "systemMessage": "x"},
    ):
        assert not is_pi1x_marker(odd)
    assert session_rules(old, "1.x") == "1.x"


def test_branch_summary_from_id_under_both_meanings():
    ids = {"t", "leaf"}
    # Pi 0.80.6: fromId = the navigation target = parentId ("root" at the root)
    assert branch_summary_origin({"parentId": "t", "fromId": "t"}, ids) == {"targetId": "t", "abandonedLeafId": None}
    assert branch_summary_origin({"parentId": None, "fromId": "root"}, ids) == {
        "targetId": None,
        "abandonedLeafId": None,
    }
    # Pi >= 0.84.3: fromId = the abandoned leaf
    assert branch_summary_origin({"parentId": "t", "fromId": "leaf"}, ids) == {
        "targetId": "t",
        "abandonedLeafId": "leaf",
    }
    assert branch_summary_origin({"parentId": None, "fromId": "leaf"}, ids) == {
        "targetId": None,
        "abandonedLeafId": "leaf",
    }
    assert branch_summary_origin({"parentId": "t", "fromId": "unknown"}, ids)["abandonedLeafId"] is None
