"""Property tests: determinism, the 32 KiB bound and no crash on arbitrary or odd sessions;
the lean loader and the fast estimate agree with the session package."""

from __future__ import annotations

import msgspec
from compaction_builders import link
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fabric_lsp.engine.compaction.api import preview_compaction
from fabric_lsp.engine.compaction.bounds import utf8_bytes
from fabric_lsp.engine.compaction.cut import Projection, context_tokens_of
from fabric_lsp.engine.compaction.details import is_fabric_v2
from fabric_lsp.engine.compaction.estimate import estimate_tokens as fast_estimate
from fabric_lsp.engine.compaction.hook import compaction_hook, tree_hook
from fabric_lsp.engine.compaction.loader import load_session_bytes, load_session_file
from fabric_lsp.engine.jsstr import js_stringify
from fabric_lsp.engine.session import SessionTree, estimate_tokens, parse_session_bytes
from tests.support.examples import profile_examples

PROPS = settings(
    max_examples=profile_examples(60),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

texts = st.one_of(
    st.text(max_size=60),
    st.sampled_from(["", " ", "line1\nline2", "日本語 🚀", "a\u00a0b\u2028c", "x" * 300, "\t\n  spaced  \n", "é"]),
)
ids = st.sampled_from(["c1", "c2", "c3", "", "c4"])
tools = st.sampled_from(
    ["read", "edit", "write", "bash", "grep", "find", "ls", "fabric_exec", "mcp.tool", "agents.run"]
)
json_leaf = st.one_of(
    st.none(), st.booleans(), st.integers(-10, 10**6), st.floats(allow_nan=False, allow_infinity=False, width=32), texts
)
json_vals = st.recursive(
    json_leaf,
    lambda c: (
        st.lists(c, max_size=3)
        | st.dictionaries(st.sampled_from(["path", "file", "dir", "command", "id", "name", "x", "0"]), c, max_size=3)
    ),
    max_leaves=8,
)
args = st.one_of(
    st.fixed_dictionaries({"path": st.one_of(texts, st.integers(), st.none())}),
    st.fixed_dictionaries({"command": texts}),
    json_vals,
    st.fixed_dictionaries(
        {
            "code": texts,
            "display": st.one_of(
                texts, st.fixed_dictionaries({"name": texts}), st.fixed_dictionaries({"description": texts})
            ),
        }
    ),
)
usage = st.one_of(
    st.none(),
    st.fixed_dictionaries(
        {
            "input": st.integers(0, 10**6),
            "output": st.integers(0, 100),
            "cacheRead": st.integers(0, 10),
            "cacheWrite": st.just(0),
            "totalTokens": st.integers(0, 10**6),
        }
    ),
)
trace_op = st.fixed_dictionaries(
    {
        "type": st.just("call"),
        "sequence": st.integers(0, 3),
        "ref": st.sampled_from(["pi.read", "pi.write", "pi.bash", "agents.run", "x"]),
        "args": st.dictionaries(st.sampled_from(["path", "command", "name"]), texts, max_size=2),
        "outcome": st.sampled_from(["succeeded", "failed", "aborted", "timed_out"]),
    }
)
trace = st.fixed_dictionaries(
    {
        "kind": st.just("pi-fabric.execution"),
        "version": st.sampled_from([1, 2]),
        "outcome": st.sampled_from(["succeeded", "failed"]),
        "phases": st.lists(texts, max_size=2),
        "operations": st.lists(trace_op, max_size=3),
        "counts": st.just({"droppedValues": 0, "truncatedValues": 0, "redactedValues": 0, "droppedOperations": 0}),
    }
)


@st.composite
def entry(draw):
    kind = draw(
        st.sampled_from(
            [
                "user",
                "assistant",
                "result",
                "bash",
                "custom_message",
                "custom",
                "branch_summary",
                "compaction",
                "unknown",
                "model_change",
                "label",
            ]
        )
    )
    if kind == "user":
        content = draw(
            st.one_of(
                texts,
                st.lists(
                    st.one_of(
                        st.fixed_dictionaries({"type": st.just("text"), "text": texts}),
                        st.just({"type": "image", "data": "", "mimeType": "image/png"}),
                    ),
                    max_size=3,
                ),
                st.none(),
            )
        )
        return {"type": "message", "message": {"role": "user", "content": content}}
    if kind == "assistant":
        parts = draw(
            st.lists(
                st.one_of(
                    st.fixed_dictionaries({"type": st.just("text"), "text": texts}),
                    st.fixed_dictionaries({"type": st.just("thinking"), "thinking": texts}),
                    st.fixed_dictionaries({"type": st.just("toolCall"), "id": ids, "name": tools, "arguments": args}),
                ),
                max_size=3,
            )
        )
        msg = {"role": "assistant", "content": parts, "stopReason": draw(st.sampled_from(["stop", "toolUse", "error"]))}
        u = draw(usage)
        if u is not None:
            msg["usage"] = u
        return {"type": "message", "message": msg}
    if kind == "result":
        name = draw(tools)
        msg = {
            "role": "toolResult",
            "toolCallId": draw(ids),
            "toolName": name,
            "content": [{"type": "text", "text": draw(texts)}],
            "isError": draw(st.sampled_from([True, False, "yes", None])),
        }
        if name == "fabric_exec":
            msg["details"] = draw(
                st.one_of(
                    st.none(),
                    st.fixed_dictionaries({"trace": trace}),
                    st.just({"audits": [{"ref": "pi.read", "args": {"path": "a"}, "success": True}]}),
                )
            )
        return {"type": "message", "message": msg}
    if kind == "bash":
        return {
            "type": "message",
            "message": {
                "role": "bashExecution",
                "command": draw(texts),
                "output": draw(texts),
                "exitCode": draw(st.sampled_from([0, 1, None, 2.5])),
            },
        }
    if kind == "custom_message":
        e = {
            "type": "custom_message",
            "customType": draw(st.one_of(texts, st.integers())),
            "content": draw(
                st.one_of(
                    texts,
                    st.lists(st.fixed_dictionaries({"type": st.just("text"), "text": texts}), max_size=2),
                    st.integers(),
                )
            ),
            "display": draw(st.one_of(st.booleans(), texts)),
        }
        if draw(st.booleans()):
            e["details"] = draw(json_vals)
        return e
    if kind == "custom":
        return {"type": "custom", "customType": "state", "data": draw(json_vals)}
    if kind == "branch_summary":
        return {"type": "branch_summary", "fromId": "root", "summary": draw(texts), "details": draw(json_vals)}
    if kind == "compaction":
        return {
            "type": "compaction",
            "summary": draw(texts),
            "firstKeptEntryId": draw(st.sampled_from(["", "e1", "e3", "zzz"])),
            "tokensBefore": 10,
        }
    if kind == "model_change":
        return {"type": "model_change", "provider": "p", "modelId": "m"}
    if kind == "label":
        return {"type": "label", "targetId": "e1", "label": draw(texts)}
    return {"type": draw(st.sampled_from(["context_edit", "session_info", "mystery"])), "payload": draw(json_vals)}


sessions = st.lists(entry(), min_size=0, max_size=40).map(link)
budgets = st.one_of(
    st.none(),
    st.fixed_dictionaries(
        {
            "window": st.sampled_from([1000, 100000, 200000]),
            "keep": st.sampled_from([0, 50, 20000]),
            "reserve": st.sampled_from([0, 16384]),
        }
    ),
)
instructions = st.one_of(
    st.none(),
    texts,
    st.just("__pi_vcc__"),
    texts.map(lambda t: "__pi_fabric_compact_request_v1__:" + t),
    st.just('__pi_fabric_compact_request_v1__:{"version":1,"preserve":["keep"]}'),
)


@PROPS
@given(sessions, st.integers(0, 10**6), budgets, instructions, st.sampled_from(["manual", "threshold", "overflow"]))
def test_hook_is_deterministic_bounded_and_never_crashes(branch, tb, budget, instr, reason):
    kw = dict(tokens_before=tb, reason=reason, custom_instructions=instr)
    if budget:
        kw.update(
            context_window=budget["window"],
            pi_settings={"reserveTokens": budget["reserve"], "keepRecentTokens": budget["keep"]},
        )
    a = compaction_hook(branch, **kw)
    b = compaction_hook(branch, **kw)
    assert a["result"] in ("compaction", "cancel", "passthrough")
    if a["result"] == "compaction":
        s = a["compaction"]["summary"]
        assert s.encode("utf-8", "surrogatepass") == b["compaction"]["summary"].encode("utf-8", "surrogatepass")
        assert js_stringify(a["compaction"]["details"]) == js_stringify(b["compaction"]["details"])
        assert utf8_bytes(s) <= 32768 and s.endswith("\n")
        assert is_fabric_v2(a["compaction"]["details"])
        kept = a["compaction"]["firstKeptEntryId"]
        assert kept == "" or kept in {e["id"] for e in branch}
    else:
        assert a == b or a["result"] == b["result"]


@PROPS
@given(sessions, instructions)
def test_tree_hook_is_deterministic_and_bounded(branch, instr):
    a = tree_hook(branch, custom_instructions=instr, old_leaf_id=branch[-1]["id"] if branch else None)
    b = tree_hook(branch, custom_instructions=instr, old_leaf_id=branch[-1]["id"] if branch else None)
    assert a["result"] == b["result"]
    if a["result"] == "summary":
        assert a["summary"]["summary"] == b["summary"]["summary"]
        assert utf8_bytes(a["summary"]["summary"]) <= 32768
        assert utf8_bytes(js_stringify(a["summary"]["details"])) <= 131072


@PROPS
@given(st.lists(st.text(alphabet="abcdefghij \n\u00e9😀", max_size=4000), min_size=1, max_size=30))
def test_huge_text_sessions_stay_under_32k(bodies):
    es = []
    for i, body in enumerate(bodies):
        es.append({"type": "message", "message": {"role": "user", "content": body * 5}})
        es.append(
            {
                "type": "message",
                "message": {
                    "role": "assistant",
                    "content": [
                        {
                            "type": "toolCall",
                            "id": f"t{i}",
                            "name": "edit",
                            "arguments": {"path": body[:500] or f"p{i}"},
                        }
                    ],
                },
            }
        )
        es.append(
            {
                "type": "message",
                "message": {
                    "role": "toolResult",
                    "toolCallId": f"t{i}",
                    "toolName": "edit",
                    "content": [{"type": "text", "text": body}],
                    "isError": i % 2 == 0,
                },
            }
        )
    es.append({"type": "message", "message": {"role": "user", "content": "end"}})
    h = compaction_hook(link(es), tokens_before=10, custom_instructions="k " * 5000)
    assert h["result"] == "compaction"
    assert utf8_bytes(h["compaction"]["summary"]) <= 32768


# ------------------------------------------------------------- odd session files


@st.composite
def odd_file(draw):
    n = draw(st.integers(0, 25))
    ents = draw(st.lists(entry(), min_size=n, max_size=n))
    lines = [msgspec.json.encode({"type": "session", "version": 3, "id": "s", "timestamp": "t", "cwd": "/"})]
    idpool = [f"e{i}" for i in range(n)] + ["ghost", None]
    for i, e in enumerate(ents):
        e = dict(e)
        e["id"] = draw(st.sampled_from([f"e{i}", f"e{i}", f"e{max(0, i - 1)}", None, 5]))
        e["parentId"] = draw(st.sampled_from(idpool + [f"e{i + 1}"]))  # orphans, forward refs, cycles
        e["timestamp"] = f"2025-01-01T00:00:{i % 60:02d}Z"
        lines.append(msgspec.json.encode(e))
        if draw(st.integers(0, 9)) == 0:
            lines.append(
                draw(
                    st.sampled_from(
                        [b"", b"   ", b"{not json", b"[1,2]", b"\xff\xfe", b'{"type":"message","id":"x","parentId":7}']
                    )
                )
            )
    data = b"\n".join(lines) + b"\n"
    if draw(st.booleans()):
        data += b'{"type":"message","id":"half'
    return data


@PROPS
@given(odd_file(), st.sampled_from([0, 200000]), st.sampled_from([1, 20000]))
def test_preview_never_crashes_on_odd_files(data, window, keep):
    a = preview_compaction(
        data, session_path="/odd.jsonl", context_window=window, keep_recent_tokens=keep, include_qa=True
    )
    b = preview_compaction(
        data, session_path="/odd.jsonl", context_window=window, keep_recent_tokens=keep, include_qa=True
    )
    assert msgspec.json.encode(a) == msgspec.json.encode(b)
    assert a["outcome"] in ("compacted", "cancelled", "skipped")
    if a["outcome"] == "compacted":
        assert utf8_bytes(a["summary"]) <= 32768


@PROPS
@given(odd_file())
def test_lean_loader_matches_session_reader(data):
    ours = load_session_bytes(data, slim=False)
    log = parse_session_bytes(data)
    tree = SessionTree.from_records(log.records)
    assert ours.is_session == log.is_session
    assert ours.leaf_id == tree.leaf_id
    leaf, entries, err = ours.branch()
    br = tree.branch()
    assert [e.get("id") for e in entries] == [r.id for r in br.entries]
    assert err == br.error
    assert ours.malformed == log.stats.malformed and ours.partial_tail_bytes == log.stats.partial_tail_bytes
    assert ours.no_id == log.stats.no_id and ours.non_object == log.stats.non_object


@PROPS
@given(odd_file(), st.sampled_from([7, 64, 1 << 20]))
def test_streaming_loader_matches_bytes_loader(tmp_path_factory, data, chunk):
    p = tmp_path_factory.mktemp("s") / "s.jsonl"
    p.write_bytes(data)
    a = load_session_bytes(data)
    b, digest = load_session_file(str(p), chunk_size=chunk)
    import hashlib

    assert digest == hashlib.sha256(data).hexdigest()
    assert a.branch()[1] == b.branch()[1]
    assert (a.malformed, a.blank, a.partial_tail_bytes, a.no_id) == (
        b.malformed,
        b.blank,
        b.partial_tail_bytes,
        b.no_id,
    )


@PROPS
@given(sessions)
def test_fast_estimate_and_projection_match_session_package(branch):
    from fabric_lsp.engine.session.context import entry_to_message

    for e in branch:
        m = entry_to_message(e)
        if m is not None:
            assert fast_estimate(m) == estimate_tokens(m)
    proj = Projection(branch)
    for end in range(len(branch) + 1):
        assert proj.context_tokens(end) == context_tokens_of(branch[:end])


@PROPS
@given(odd_file(), st.sampled_from([0, 200000]), st.sampled_from([1, 20000]), st.sampled_from([None, "keep it"]))
def test_slimmed_preview_equals_hook_on_raw_entries(data, window, keep, instr):
    """The lean loader drops and stubs fields; the result must equal the hook run on the
    untouched raw dicts read by the session package."""
    from fabric_lsp.engine.compaction.pigate import model_key, prepare_compaction
    from fabric_lsp.engine.session.context import context_tokens

    res = preview_compaction(
        data, session_path="/odd.jsonl", context_window=window, keep_recent_tokens=keep, instructions=instr
    )
    log = parse_session_bytes(data)
    if not log.is_session:
        assert res["outcome"] == "skipped"
        return
    branch = [r.raw for r in SessionTree.from_records(log.records).branch().entries]
    tb = context_tokens(branch)
    assert res["tokensBefore"] == tb
    gate = prepare_compaction(branch, keep)
    if not gate["ok"]:
        assert res["outcome"] == "skipped"
        return
    h = compaction_hook(
        branch,
        tokens_before=tb,
        custom_instructions=instr,
        model_key=model_key(branch),
        context_window=window or None,
        pi_settings={"reserveTokens": 16384, "keepRecentTokens": keep},
    )
    if h["result"] == "compaction":
        assert res["outcome"] == "compacted"
        assert res["summary"] == h["compaction"]["summary"]
        assert res["firstKeptEntryId"] == h["compaction"]["firstKeptEntryId"]
        assert js_stringify(res["details"]) == js_stringify(h["compaction"]["details"])
    else:
        assert res["outcome"] != "compacted"


@PROPS
@given(st.text(alphabet=" \t\nab\u00a0😀é", max_size=3000), st.integers(2, 200), st.integers(3, 300))
def test_truncate_prefix_safe_equals_truncate(text, n, window):
    from fabric_lsp.engine.jsstr import truncate, truncate_prefix_safe

    assert truncate_prefix_safe(text, n, window) == truncate(text, n)


@PROPS
@given(
    st.text(max_size=120).filter(lambda t: not t.lstrip(" \t\r\n").startswith("{"))
    | st.sampled_from(
        [
            '{"version":1,"x":1}',
            '{"version":2}',
            '{"version":1,"preserve":"a"}',
            '{"version":1,"version":1}',
            '{"version":01}',
            '{"version":1,"instructions":"\\ud800"}',
            "[]",
            '{"version":1,"preserve":[' + ",".join(['"a"'] * 17) + "]}",
        ]
    )
)
def test_malformed_typed_payload_cancels_with_decoder_code(tail):
    from compaction_examples import example1

    from fabric_lsp.engine.compaction.instructions import TYPED_PREFIX, decode_instructions

    data = b"".join(msgspec.json.encode(e) + b"\n" for e in [{"type": "session", "version": 3, "id": "s"}, *example1()])
    src = TYPED_PREFIX + tail
    decoded = decode_instructions(src)
    res = preview_compaction(data, session_path="/s.jsonl", keep_recent_tokens=1, context_window=0, instructions=src)
    if decoded["ok"]:
        assert res["outcome"] == "compacted"
    else:
        assert res["outcome"] == "cancelled" and "summary" not in res
        assert res["error"]["code"] == decoded["error"]["code"]
        assert res["reason"] == f"fabric: {decoded['error']['code']}: {decoded['error']['message']}"


@PROPS
@given(sessions)
def test_spans_match_the_naive_crossing_definition(branch):
    from fabric_lsp.engine.compaction.cut import Spans

    occ: dict[str, list] = {}
    for i, e in enumerate(branch):
        if e.get("type") != "message":
            continue
        m = e["message"]
        for p in m.get("content") or [] if isinstance(m.get("content"), list) else []:
            if isinstance(p, dict) and p.get("type") == "toolCall" and isinstance(p.get("id"), str) and p["id"]:
                occ.setdefault(p["id"], []).append((i, "call"))
        if m.get("role") == "toolResult" and isinstance(m.get("toolCallId"), str) and m["toolCallId"]:
            occ.setdefault(m["toolCallId"], []).append((i, "result"))
    spans = Spans(branch)
    for b in range(len(branch) + 1):
        crossing = [
            min(i for i, _ in o)
            for o in occ.values()
            if {k for _, k in o} == {"call", "result"} and min(i for i, _ in o) < b <= max(i for i, _ in o)
        ]
        assert spans.safe(b) == (not crossing)
        assert spans.min_first_crossing(b) == (min(crossing) if crossing else None)


@PROPS
@given(sessions, st.integers(0, 3))
def test_linear_fast_path_matches_the_parent_walk(branch, fork_at):
    """Unbranched files take a no-walk fast path; forks, duplicates and dangling first
    parents fall back to the walk. Both must equal the session package's branch."""
    header = {"type": "session", "version": 3, "id": "s"}
    entries = [dict(e) for e in branch]
    if entries and fork_at and fork_at < len(entries):
        entries.append(dict(entries[-1], id="fork", parentId=entries[fork_at - 1]["id"]))
    data = b"".join(msgspec.json.encode(x) + b"\n" for x in [header, *entries])
    ours = load_session_bytes(data)
    tree = SessionTree.from_records(parse_session_bytes(data).records)
    for leaf in [None] + [e["id"] for e in entries[-3:]]:
        assert [e["id"] for e in ours.branch(leaf)[1]] == [r.id for r in tree.branch(leaf).entries]
