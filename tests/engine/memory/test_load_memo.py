"""index.load_index's memo: a call over the very same Refs, hot set and state table gets
the last answer that found every session fresh, without asking each session again; any
change to the state table, the listing or the live leaves asks them again. Real files and
engines; the spy only counts calls of the real loader."""

from __future__ import annotations

import json
from pathlib import Path

from memory_kit import assistant, engine, header, user, write_session

from fabric_lsp.engine.memory import index

CWD = "/home/user/memo"


def _agent(tmp_path: Path, n: int = 4) -> tuple[Path, list[Path]]:
    agent = tmp_path / "agent"
    files = []
    for i in range(n):
        rows = [
            header(f"m{i}", CWD),
            user(f"u{i}", None, f"memo words {i}", 1),
            assistant(f"a{i}", f"u{i}", [{"type": "text", "text": f"reply {i} words"}], 2),
        ]
        files.append(write_session(agent, CWD, f"m{i}.jsonl", rows, 1_700_000_000 + i))
    return agent, files


class _Loads:
    def __init__(self, monkeypatch) -> None:
        self.n = 0
        real = index._load_index_unpaused

        def counting(*a, **k):
            self.n += 1
            return real(*a, **k)

        monkeypatch.setattr(index, "_load_index_unpaused", counting)


def test_an_unchanged_index_answers_from_the_memo_and_the_same(tmp_path: Path, monkeypatch):
    agent, _ = _agent(tmp_path)
    eng = engine(agent)
    loads = _Loads(monkeypatch)
    q = {"query": "words", "scope": "global"}
    first = eng.recall(q)  # builds: nothing to keep (the table changed meanwhile)
    second = eng.recall(q)  # every session fresh: kept
    third = eng.recall(q)
    sessions = eng.sessions({"scope": "global"})
    assert first == second == third
    assert loads.n == 2  # the third recall and the sessions list: from the memo
    assert sessions["coverage"]["complete"] and len(sessions["sessions"]) == 4
    eng.close()


def test_a_change_to_the_state_table_asks_every_session_again(tmp_path: Path, monkeypatch):
    agent, files = _agent(tmp_path)
    eng = engine(agent)
    q = {"query": "words", "scope": "global"}
    before = eng.recall(q)
    loads = _Loads(monkeypatch)
    with eng.lock:
        eng.states.pop((str(files[0]), "active"))  # (what forgetting a session does)
    assert eng.recall(q) == before  # rebuilt: nothing kept
    assert eng.recall(q) == before  # fresh: kept
    assert eng.recall(q) == before
    assert loads.n == 2
    eng.close()


def test_an_appended_session_is_seen_at_once(tmp_path: Path):
    agent, files = _agent(tmp_path)
    eng = engine(agent)
    q = {"query": "appendedword", "scope": "global"}
    assert eng.recall(q)["totalItems"] == 0
    assert eng.recall(q)["totalItems"] == 0
    with open(files[2], "a") as fh:
        fh.write(json.dumps(user("late", "a2", "appendedword here", 3)) + "\n")
    assert eng.recall(q)["totalItems"] == 1
    eng.close()


def test_a_partial_answer_is_not_kept(tmp_path: Path, monkeypatch):
    """Over the per-call budget (one session a call): every call asks again and builds
    the next, until the answer is complete."""
    agent, _ = _agent(tmp_path)
    eng = engine(agent, max_sync_sessions=1)
    loads = _Loads(monkeypatch)
    q = {"query": "words", "scope": "global"}
    indexed = [eng.recall(q)["coverage"]["indexedSessions"] for _ in range(4)]
    assert indexed == [1, 2, 3, 4]
    eng.recall(q)  # complete, every session fresh: kept
    assert loads.n == 5
    eng.recall(q)
    assert loads.n == 5
    eng.close()


def test_a_live_leaf_turns_the_memo_off(tmp_path: Path, monkeypatch):
    agent, files = _agent(tmp_path)
    eng = engine(agent)
    q = {"query": "words", "scope": "global"}
    eng.recall(q)
    eng.live_leaves = lambda: {str(files[1]): "a1"}
    loads = _Loads(monkeypatch)
    eng.recall(q)
    eng.recall(q)
    assert loads.n == 2
    eng.close()
