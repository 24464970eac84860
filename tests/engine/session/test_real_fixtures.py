"""The six sessions written by real Pi 0.80.6 parse exactly as Pi reads them.

Expectations were derived by reading the files by hand (leaf = last entry line, walk
`parentId` to the root) and are written down here, not recomputed by the code under test.
Token figures are the `tokensBefore` real Pi stored in its own compaction entries.
"""

from __future__ import annotations

import pytest

from fabric_lsp.engine.session import (
    SessionTree,
    build_context_messages,
    context_entries,
    context_tokens,
    read_session,
)
from tests.conftest import REAL_SESSIONS

# file: (leaf id, number of entries, active path ids root→leaf)
EXPECTED = {
    "01-print-default-tools.jsonl": (
        "d3b9c871",
        15,
        [
            "7478edf2",
            "a85cc056",
            "d47ccd08",
            "4ca4d2fa",
            "e94757e7",
            "2a575791",
            "f9fb401e",
            "ba454c39",
            "eeec2646",
            "09a4d2ad",
            "9af38f99",
            "2a96a7ef",
            "12afb0db",
            "27f0fa43",
            "d3b9c871",
        ],
    ),
    "02-print-continue-errors-retries-truncation.jsonl": (
        "ac4ff210",
        35,
        [
            "dea30263",
            "e2ca581e",
            "6a50d7b6",
            "c59e26f4",
            "f90b1066",
            "b3d5aad9",
            "4b0484ad",
            "b5ed597f",
            "29244290",
            "a123bcb6",
            "904e9cdd",
            "f8739496",
            "f786d668",
            "92c1e750",
            "3c9bbc40",
            "662cb756",
            "de554051",
            "b208de07",
            "ade6031e",
            "e22cd5a3",
            "2d0c05eb",
            "ed5dad3a",
            "30df4e95",
            "296e5fd6",
            "6df15f44",
            "4ccd3ee4",
            "7c188d4b",
            "f9f3395a",
            "56c1eed1",
            "f033257d",
            "a7d932e0",
            "fd9ef127",
            "1b6f3980",
            "553252ba",
            "ac4ff210",
        ],
    ),
    "03-rpc-all-entry-types-branch-compaction.jsonl": (
        "c4cd8076",
        52,
        [
            "74ca2b3c",
            "75b39921",
            "f654d611",
            "a7269700",
            "1b6de33e",
            "49000261",
            "937a62df",
            "295222b9",
            "48d24654",
            "57c373eb",
            "322dd739",
            "16f7211f",
            "3938f099",
            "ee6be4a1",
            "83de2e43",
            "5a9b60e5",
            "cca8c341",
            "7f56d3c0",
            "eaa9886b",
            "09af21c0",
            "216b0fbc",
            "3c5df796",
            "045a6ee6",
            "8fde8625",
            "fdc685b6",
            "aa108776",
            "f576f0b8",
            "90b2ce36",
            "4723667b",
            "b8b9fefd",
            "74773bca",
            "1935ec27",
            "bf36a246",
            "10df8419",
            "b0d7ea80",
            "4ebc336b",
            "c4cd8076",
        ],
    ),
    "04-resumed-after-hand-appended-compaction.jsonl": (
        "cbac4bb1",
        57,
        [
            "74ca2b3c",
            "75b39921",
            "f654d611",
            "a7269700",
            "1b6de33e",
            "49000261",
            "937a62df",
            "295222b9",
            "48d24654",
            "57c373eb",
            "322dd739",
            "16f7211f",
            "3938f099",
            "ee6be4a1",
            "83de2e43",
            "5a9b60e5",
            "cca8c341",
            "7f56d3c0",
            "eaa9886b",
            "09af21c0",
            "216b0fbc",
            "3c5df796",
            "045a6ee6",
            "8fde8625",
            "fdc685b6",
            "aa108776",
            "f576f0b8",
            "90b2ce36",
            "4723667b",
            "b8b9fefd",
            "74773bca",
            "1935ec27",
            "bf36a246",
            "10df8419",
            "b0d7ea80",
            "4ebc336b",
            "c4cd8076",
            "40ac76eb",
            "096a7d02",
            "cfb19fdc",
            "e849e9b4",
            "cbac4bb1",
        ],
    ),
    "05-rpc-overflow-auto-compaction-split-turn.jsonl": (
        "4f630306",
        26,
        [
            "401db43a",
            "04712180",
            "3d705f2d",
            "fe957e5d",
            "e2a821fc",
            "84e1b514",
            "409c75e4",
            "a2230516",
            "4fe1d9f7",
            "b8b06d66",
            "e019bb8a",
            "5ac93636",
            "06fbce06",
            "b7a1cb8a",
            "31205be6",
            "77f30a47",
            "b7f46e37",
            "604badc6",
            "0d3cf722",
            "6fb60d78",
            "9067512f",
            "ab2e632b",
            "9be716a2",
            "23025388",
            "9fad52ee",
            "4f630306",
        ],
    ),
    "06-rpc-extension-hook-compaction-fromHook.jsonl": (
        "47960092",
        29,
        [
            "0b283987",
            "9503a620",
            "68190991",
            "68bf8e86",
            "fa9b8665",
            "a7d15182",
            "21258c9a",
            "56baed42",
            "128d9919",
            "17f56a8a",
            "60d5840f",
            "0c2b25df",
            "7cacd847",
            "8b0eeb0b",
            "4a3a835d",
            "376b0820",
            "82a889a9",
            "7061566d",
            "bd1fad5c",
            "12ecc9d6",
            "6276a642",
            "c6342661",
            "fd1b08a1",
            "3316d825",
            "1b09e171",
            "57bfe4a7",
            "86d6db15",
            "b78cd556",
            "47960092",
        ],
    ),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_leaf_and_active_path_match_pi(name: str) -> None:
    leaf, count, path = EXPECTED[name]
    log = read_session(REAL_SESSIONS / name)
    assert log.is_session
    assert log.stats.header == 1
    assert log.stats.malformed == log.stats.blank == log.stats.oversize == log.stats.no_id == 0
    assert len(log.records) == count
    assert log.size == (REAL_SESSIONS / name).stat().st_size
    tree = SessionTree.from_records(log.records)
    assert tree.leaf_id == leaf
    branch = tree.branch()
    assert branch.error is None
    assert [r.id for r in branch.entries] == path
    # every line number and byte offset points at the entry's own line
    data = (REAL_SESSIONS / name).read_bytes()
    lines = data.split(b"\n")
    for rec in log.records:
        assert data[rec.offset : rec.end] == lines[rec.line] + b"\n"


def test_branch_with_summary_has_two_leaves() -> None:
    tree = SessionTree.from_records(
        read_session(REAL_SESSIONS / "03-rpc-all-entry-types-branch-compaction.jsonl").records
    )
    assert tree.leaves() == ["274f87f6", "c4cd8076"]
    assert [b.leaf_id for b in tree.all_branches()] == ["274f87f6", "c4cd8076"]
    assert tree.error is None


# (file, compaction id, tokensBefore real Pi stored)
PI_TOKENS_BEFORE = [
    ("03-rpc-all-entry-types-branch-compaction.jsonl", "4723667b", 3533),
    ("05-rpc-overflow-auto-compaction-split-turn.jsonl", "ab2e632b", 19729),
    ("06-rpc-extension-hook-compaction-fromHook.jsonl", "1b09e171", 3472),
]


@pytest.mark.parametrize(("name", "comp_id", "tokens"), PI_TOKENS_BEFORE)
def test_tokens_before_matches_what_pi_stored(name: str, comp_id: str, tokens: int) -> None:
    log = read_session(REAL_SESSIONS / name)
    path = [r.raw for r in SessionTree.from_records(log.records).branch().entries]
    idx = next(i for i, e in enumerate(path) if e["id"] == comp_id)
    assert context_tokens(path[:idx]) == tokens


def test_context_after_hand_appended_compaction_starts_with_it() -> None:
    # 04: Pi resumed from a compaction appended by hand (firstKeptEntryId 10df8419).
    log = read_session(REAL_SESSIONS / "04-resumed-after-hand-appended-compaction.jsonl")
    path = [r.raw for r in SessionTree.from_records(log.records).branch().entries]
    entries = context_entries(path)
    assert [e["id"] for e in entries[:3]] == ["40ac76eb", "10df8419", "b0d7ea80"]
    messages = build_context_messages(path)
    assert messages[0]["role"] == "compactionSummary"
    assert messages[0]["summary"] == next(e for e in path if e["id"] == "40ac76eb")["summary"]


def test_retain_none_conventions_keep_nothing_before_the_compaction() -> None:
    log = read_session(REAL_SESSIONS / "01-print-default-tools.jsonl")
    path = [r.raw for r in SessionTree.from_records(log.records).branch().entries]
    for first_kept in ("", "c0ffee00"):
        comp = {
            "type": "compaction",
            "id": "c0ffee00",
            "parentId": path[-1]["id"],
            "summary": "S",
            "firstKeptEntryId": first_kept,
            "tokensBefore": 1,
        }
        assert context_entries(path + [comp]) == [comp]
