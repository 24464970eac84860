"""Recall and expand on sessions real Pi 1.6.0 wrote: the entries stay as written, and
an entry Pi hid (auto-retry, overflow recovery) or whose content an extension replaced
carries `contextEdit: {editId, state}` (docs/session-model.md)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import msgspec
import pytest
from memory_kit import REPO, engine

from fabric_lsp import protocol
from fabric_lsp.engine.session.discovery import encode_cwd

PI160 = REPO / "tests" / "fixtures" / "pi160"
# what Pi 1.6.0 wrote in the fixtures: target -> (its context edit, state)
MARKS = {
    "retries-and-overflow.jsonl": {"95a4ef17": ("7457331b", "hidden"), "69ada4ba": ("c1a31415", "hidden")},
    "replacement.jsonl": {"5f16e3af": ("8925f98c", "replaced")},
    "lab-retry503.jsonl": {"0d8c6d5d": ("6ed6b6ce", "hidden")},
}


@pytest.fixture
def agent(tmp_path: Path) -> tuple[Path, dict[str, Path]]:
    agent = tmp_path / "agent"
    files = {}
    for name in [*MARKS, "lab-one.jsonl"]:
        cwd = json.loads((PI160 / name).read_text().splitlines()[0])["cwd"]
        folder = agent / "sessions" / encode_cwd(cwd)
        folder.mkdir(parents=True, exist_ok=True)
        files[name] = folder / name
        shutil.copyfile(PI160 / name, files[name])
    return agent, files


def marks_of(entries: list[dict]) -> dict[str, tuple[str, str]]:
    return {
        e["entryId"]: (e["contextEdit"]["editId"], e["contextEdit"]["state"]) for e in entries if "contextEdit" in e
    }


@pytest.mark.parametrize("branches", ["active", "all"])
def test_expand_keeps_the_entries_and_marks_hidden_and_replaced_ones(agent, branches):
    agent_dir, files = agent
    eng = engine(agent_dir)
    try:
        for name, want in MARKS.items():
            path = files[name]
            rows = [json.loads(line) for line in path.read_text().splitlines()[1:]]
            ids = [r["id"] for r in rows if r["type"] in ("message", "custom_message", "compaction", "branch_summary")]
            res = eng.expand({"session": str(path), "entryIds": ids, "branches": branches})
            assert "error" not in res, res
            assert marks_of(res["expanded"]) == want, name
            msgspec.convert(res, protocol.ExpandResult)
            # the hidden/replaced entry is still the one written
            for item in res["expanded"]:
                if item["entryId"] in want and want[item["entryId"]][1] == "replaced":
                    assert "note line 1" in item["text"] and "trimmed" not in item["text"]
    finally:
        eng.close()


def test_recall_segments_mark_the_entries_pi_hid(agent):
    agent_dir, files = agent
    eng = engine(agent_dir)
    try:
        for name, want in MARKS.items():
            res = eng.recall({"scope": "session:" + str(files[name]), "pageSize": 100})
            entries = [e for it in res["items"] for e in it["segment"]["entries"]]
            assert entries
            assert marks_of(entries) == want, name
            msgspec.convert(res, protocol.RecallResult)
        # a session without edits: no mark anywhere
        res = eng.recall({"scope": "session:" + str(files["lab-one.jsonl"])})
        assert all("contextEdit" not in e for it in res["items"] for e in it["segment"]["entries"])
    finally:
        eng.close()


def test_marks_follow_the_file_the_index_read(agent):
    """A file rewritten after indexing: no marks rather than marks of other bytes."""
    from fabric_lsp.engine.session.projection import file_context_edit_marks

    _agent_dir, files = agent
    path = files["lab-retry503.jsonl"]
    good = file_context_edit_marks(str(path), source_hash=None)
    assert good == {"0d8c6d5d": {"editId": "6ed6b6ce", "state": "hidden"}}
    assert file_context_edit_marks(str(path), source_hash="0" * 64) is None
    # a file without edits has no marks whatever it hashes to (it is not hashed)
    plain = files["lab-one.jsonl"]
    assert b'"context_edit"' not in plain.read_bytes()
    assert file_context_edit_marks(str(plain), source_hash="0" * 64) == {}
    assert file_context_edit_marks(str(plain), source_hash=None) == {}
