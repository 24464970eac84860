"""Engine API, CLI and Pi's gate on the real-Pi fixtures."""

from __future__ import annotations

import hashlib
import json
import subprocess

import msgspec
import pytest
from compaction_examples import example1, example2

from fabric_lsp.engine.activity import Cancelled, CancelToken
from fabric_lsp.engine.compaction.api import PreviewError, preview_branch_summary, preview_compaction
from fabric_lsp.engine.compaction.pigate import pi_tokens_before, prepare_compaction
from fabric_lsp.engine.session import SessionTree, read_session
from tests.engine.compaction.conftest import REAL_SESSIONS
from tests.support.cli import run_cli

REAL = sorted(REAL_SESSIONS.glob("*.jsonl"))
HEADER = {"type": "session", "version": 3, "id": "sess-1", "timestamp": "2025-03-01T10:00:00.000Z", "cwd": "/p"}


def session_bytes(entries: list[dict], header: dict = HEADER) -> bytes:
    return b"".join(msgspec.json.encode(e) + b"\n" for e in [header, *entries])


@pytest.mark.parametrize("path", REAL, ids=lambda p: p.name[:2])
@pytest.mark.parametrize("keep,window", [(20000, None), (300, None), (100, 0), (100, 200000), (1, 0)])
def test_real_sessions_preview_without_error(path, keep, window):
    res = preview_compaction(path, keep_recent_tokens=keep, context_window=window, include_qa=True)
    assert res["sourceHash"] == hashlib.sha256(path.read_bytes()).hexdigest()
    assert res["sessionFile"] == str(path)
    assert res["outcome"] in ("compacted", "cancelled", "skipped")
    if res["outcome"] == "compacted":
        assert len(res["summary"].encode()) <= 32768
        assert res["details"]["compactor"] == "fabric"
        assert res["qa"]["failures"] == []
    again = preview_compaction(
        path.read_bytes(), session_path=path, keep_recent_tokens=keep, context_window=window, include_qa=True
    )
    assert msgspec.json.encode(again) == msgspec.json.encode(res)


def _pi_compactions():
    for path in REAL:
        log = read_session(path)
        tree = SessionTree.from_records(log.records)
        for r in log.records:
            if (
                r.type == "compaction"
                and r.raw.get("fromHook") is False
                or (r.type == "compaction" and path.name.startswith("06"))
            ):
                yield path, tree, r


@pytest.mark.parametrize(
    "path,tree,rec", list(_pi_compactions()), ids=lambda x: getattr(x, "id", None) or getattr(x, "name", "t")[:2]
)
def test_gate_reproduces_pi_cut_and_tokens_before(path, tree, rec):
    """The fixtures were written by Pi with keepRecentTokens 300: our reconstruction of
    prepareCompaction picks Pi's own firstKeptEntryId and tokensBefore."""
    branch = [r.raw for r in tree.branch(rec.parent_id).entries]
    assert pi_tokens_before(branch) == rec.raw["tokensBefore"]
    gate = prepare_compaction(branch, 300)
    assert gate["ok"] and gate["firstKeptEntryId"] == rec.raw["firstKeptEntryId"]
    # with Pi's default 20000 these small sessions are too small: Pi would not compact
    assert prepare_compaction(branch, 20000) == {"ok": False, "reason": "Nothing to compact (session too small)"}


def test_gate_already_compacted_and_small_sessions_are_skipped():
    branch = example1()
    assert (
        prepare_compaction(
            branch
            + [
                {
                    "type": "compaction",
                    "id": "c",
                    "parentId": "e10",
                    "summary": "s",
                    "firstKeptEntryId": "",
                    "tokensBefore": 1,
                }
            ]
        )["reason"]
        == "Already compacted"
    )
    res = preview_compaction(session_bytes(branch), session_path="/x.jsonl")
    assert res["outcome"] == "skipped"
    assert res["reason"] == "Pi would keep everything: Nothing to compact (session too small)"
    res = preview_compaction(session_bytes(branch), session_path="/x.jsonl", keep_recent_tokens=5, context_window=0)
    assert res["outcome"] == "compacted"
    assert res["firstKeptEntryId"] == "e9"
    assert res["sessionId"] == "sess-1" and res["leafId"] == "e10"


def test_api_result_is_exactly_the_hook_compaction():
    from fabric_lsp.engine.compaction.hook import compaction_hook

    branch = example2()
    data = session_bytes(branch)
    res = preview_compaction(
        data,
        session_path="/s.jsonl",
        keep_recent_tokens=1,
        context_window=0,
        preserve=["tag v1.2.3", "  "],
        instructions="  Keep   the release\nchecklist ",
    )
    hook = compaction_hook(
        branch,
        tokens_before=res["tokensBefore"],
        custom_instructions=None and "",
        pi_settings={"reserveTokens": 16384, "keepRecentTokens": 1},
        context_window=None,
    )
    assert res["outcome"] == "compacted"
    assert res["sourceHash"] == hashlib.sha256(data).hexdigest()
    assert "- tag v1.2.3 [preserve:0]" in res["summary"]
    assert hook["compaction"]["firstKeptEntryId"] == res["firstKeptEntryId"] == "e5"
    assert set(res) >= {
        "sessionId",
        "sessionFile",
        "sourceHash",
        "leafId",
        "outcome",
        "summary",
        "firstKeptEntryId",
        "tokensBefore",
        "details",
    }


def test_api_cancels_with_decoder_error_code():
    data = session_bytes(example1())
    res = preview_compaction(
        data,
        session_path="/s.jsonl",
        keep_recent_tokens=1,
        context_window=0,
        instructions='__pi_fabric_compact_request_v1__:{"version":1,"x":1}',
    )
    assert res["outcome"] == "cancelled"
    assert res["error"]["code"] == "unknown-field"
    assert res["reason"].startswith("fabric: unknown-field: ")
    assert "summary" not in res
    res = preview_compaction(data, session_path="/s.jsonl", keep_recent_tokens=1, context_window=0, preserve=["a"] * 17)
    assert res["outcome"] == "cancelled" and res["error"]["code"] == "preserve-too-many"


def test_api_unknown_leaf_and_cancel_token_and_progress():
    data = session_bytes(example1())
    with pytest.raises(PreviewError) as ei:
        preview_compaction(data, session_path="/s.jsonl", leaf_id="nope")
    assert ei.value.code == "entry_not_found"
    tok = CancelToken()
    tok.cancel()
    with pytest.raises(Cancelled):
        preview_compaction(data, session_path="/s.jsonl", cancel=tok)
    res = preview_compaction(data, session_path="/s.jsonl", leaf_id="e8", keep_recent_tokens=1, context_window=0)
    assert res["leafId"] == "e8" and res["outcome"] == "compacted"
    with pytest.raises(PreviewError):
        preview_compaction("/definitely/not/here.jsonl")


def test_not_a_session_and_odd_lines_are_reported():
    data = b'{"type":"message","id":"a","parentId":null}\n'
    assert preview_compaction(data, session_path="/s.jsonl")["outcome"] == "skipped"
    odd = session_bytes(example1()) + b"not json\n\n[1,2]\n" + b'{"type":"message","id":5}\n' + b'{"type":"mess'
    res = preview_compaction(odd, session_path="/s.jsonl", keep_recent_tokens=1, context_window=0)
    assert res["outcome"] == "compacted"
    assert any("malformed" in w for w in res["warnings"])
    assert any("half-written" in w for w in res["warnings"])


def test_threshold_deferral_and_engine_pi():
    data = session_bytes(example1())
    kw = dict(session_path="/s.jsonl", keep_recent_tokens=1, context_window=0, reason="threshold")
    res = preview_compaction(data, settings={"compaction": {"tokenThresholds": {"test/test": 50000}}}, **kw)
    assert res["outcome"] == "cancelled" and "threshold" in res["reason"]
    res = preview_compaction(
        data, settings={"compaction": {"tokenThresholds": {"test/test": 50000}}}, **dict(kw, reason="manual")
    )
    assert res["outcome"] == "compacted"
    res = preview_compaction(data, settings={"engine": "pi"}, **kw)
    assert res["outcome"] == "skipped" and "engine" in res["reason"]


def test_branch_summary_preview():
    branch = example2()
    # fork: a sibling of e5 under e4
    side = {
        "type": "message",
        "id": "s1",
        "parentId": "e4",
        "timestamp": "2025-03-01T10:00:09.000Z",
        "message": {"role": "user", "content": "side", "timestamp": 0},
    }
    data = session_bytes(branch + [side])
    res = preview_branch_summary(data, session_path="/s.jsonl", target_id="e5", from_id="s1")
    assert res["outcome"] == "summarized" and res["entriesSummarized"] == 1 and res["commonAncestorId"] == "e4"
    assert res["details"]["source"]["oldLeafId"] == "s1"
    res = preview_branch_summary(data, session_path="/s.jsonl", target_id="e1", from_id="e5", instructions="keep it")
    assert res["outcome"] == "summarized" and res["entriesSummarized"] == 4
    assert "[Compaction Request]\nkeep it\n" in res["summary"]
    assert (
        preview_branch_summary(data, session_path="/s.jsonl", target_id="e1", from_id="e5", replace_instructions=True)[
            "outcome"
        ]
        == "deferred"
    )
    bad = preview_branch_summary(
        data, session_path="/s.jsonl", target_id="e1", instructions="__pi_fabric_compact_request_v1__:[]"
    )
    assert bad["outcome"] == "none" and bad["error"]["code"] == "invalid-object"
    with pytest.raises(PreviewError):
        preview_branch_summary(data, session_path="/s.jsonl", target_id="zz")


def _cli(*args: str) -> subprocess.CompletedProcess[bytes]:
    return run_cli(*args, text=False, timeout=60)


def test_cli_preview_and_tree(tmp_path):
    p = tmp_path / "s.jsonl"
    p.write_bytes(session_bytes(example1()))
    out = _cli("preview", str(p), "--keep-recent", "1", "--context-window", "0")
    assert out.returncode == 0, out.stderr
    api = preview_compaction(p, keep_recent_tokens=1, context_window=0)
    assert out.stdout.decode("utf-8") == api["summary"]
    js = _cli("preview", str(p), "--keep-recent", "1", "--context-window", "0", "--json", "--qa")
    assert js.returncode == 0
    obj = json.loads(js.stdout)
    assert obj["outcome"] == "compacted" and obj["qa"]["score"] == 1
    skipped = _cli("preview", str(p))
    assert skipped.returncode == 1 and b"Pi would keep everything" in skipped.stderr
    tree = _cli("tree", str(p), "--to", "e1")
    assert tree.returncode == 0 and tree.stdout.startswith(b"[Session Goal]")
    missing = _cli("preview", str(tmp_path / "nope.jsonl"))
    assert missing.returncode == 2


def test_lone_surrogates_survive_to_json_and_text(tmp_path):
    from fabric_lsp.engine.compaction.api import printable, result_json

    entries = example1()
    entries[0]["message"]["content"] = "Fix \ud800 the bug"
    p = tmp_path / "s.jsonl"
    lines = [json.dumps({"type": "session", "version": 3, "id": "s"})] + [json.dumps(e) for e in entries]
    p.write_text("\n".join(lines) + "\n", encoding="ascii")  # json.dumps escapes the surrogate as \ud800
    res = preview_compaction(p, keep_recent_tokens=1, context_window=0)
    assert "Fix \ud800 the bug" in res["summary"]
    assert b"Fix \\ud800 the bug" in result_json(res)
    assert json.loads(result_json(res))["summary"] == res["summary"]
    assert "Fix \ufffd the bug".encode() in printable(res["summary"])
    js = _cli("preview", str(p), "--keep-recent", "1", "--context-window", "0", "--json")
    assert js.returncode == 0 and b"\\ud800" in js.stdout
    txt = _cli("preview", str(p), "--keep-recent", "1", "--context-window", "0")
    assert txt.returncode == 0 and "Fix \ufffd the bug".encode() in txt.stdout
