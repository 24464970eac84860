"""The engines build the result Structs of the wire contract themselves (issue 33, "one
typed boundary"): the memory engine's four calls, a domain error of expand, and the
intents service's request/status/cancel answer with protocol.py's Structs, with no dict
in between, and `fabric/compact/request` keeps seed 001's bounds messages."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from fabric_lsp import protocol
from fabric_lsp.engine.intents.service import IntentsService
from fabric_lsp.engine.memory.api import MemoryConfig, MemoryEngine
from fabric_lsp.engine_owner import intent_request
from tests.support.agent import examples_agent


def _structs_only(value: object) -> None:
    """No dict anywhere in a result, except the values the contract leaves free."""
    if isinstance(value, msgspec.Struct):
        for field in value.__struct_fields__:
            if field in ("operation", "branch_fact", "details", "qa", "timestamp", "ref", "outcome"):
                continue
            _structs_only(getattr(value, field))
    elif isinstance(value, list):
        for item in value:
            _structs_only(item)
    else:
        assert not isinstance(value, dict), value


def test_the_memory_engine_answers_with_result_structs(tmp_path: Path) -> None:
    agent = examples_agent(tmp_path / "agent")
    files = sorted((agent / "sessions").glob("*/*.jsonl"))
    eng = MemoryEngine(MemoryConfig(), agent_dir=str(agent), index_dir=str(tmp_path / "index"))
    try:
        sessions = eng.sessions({"scope": "global", "pageSize": 3})
        assert isinstance(sessions, protocol.SessionsResult) and isinstance(sessions.coverage, protocol.Coverage)
        recall = eng.recall({"query": "test", "scope": "global"})
        assert isinstance(recall, protocol.RecallResult) and recall.items
        assert all(isinstance(it, (protocol.SegmentItem, protocol.PointerItem)) for it in recall.items)
        unresolved = eng.recall({"scope": "session:no-such-session"})
        assert isinstance(unresolved.coverage.error, protocol.CoverageError)
        expanded = eng.expand({"session": str(files[0]), "indices": [0, 1]})
        assert isinstance(expanded, protocol.ExpandResult)
        assert [type(e) for e in expanded.expanded] == [protocol.ExpandedEntry] * 2
        missing = eng.expand({"session": str(files[0]), "entryIds": ["nope"]})
        assert isinstance(missing, protocol.ExpandErrorResult) and missing.error.code == "address_not_found"
        history = eng.file_history({"path": "/home/user/projects/orbit/orbit/propagate.py"})
        assert isinstance(history, protocol.FileHistoryResult) and history.items and history.sessions
        assert all(isinstance(op, protocol.FileOperation) for op in history.items)
        assert all(isinstance(row, protocol.FileHistorySession) for row in history.sessions)
        for result in (sessions, recall, unresolved, expanded, missing, history):
            _structs_only(result)
    finally:
        eng.close()


def test_the_intents_service_takes_the_params_struct_and_answers_with_structs(tmp_path: Path) -> None:
    agent = examples_agent(tmp_path / "agent")
    session = str(sorted((agent / "sessions").glob("*orbit*/*.jsonl"))[-1])
    svc = IntentsService(state_dir=tmp_path / "state", quiet_interval_s=3600.0)
    p = protocol.decode_params(protocol.COMPACT_REQUEST, {"session": session, "instructions": "keep the TLE notes"})
    requested = svc.request(session, p)
    assert isinstance(requested, protocol.CompactRequestResult) and isinstance(requested.pending, protocol.Intent)
    assert requested.pending.instructions == "keep the TLE notes" and requested.pending.requested_by == "user"
    status = svc.status(session)
    assert isinstance(status, protocol.CompactStatusResult) and status.pending == requested.pending
    assert svc.cancel(session) == protocol.CompactCancelResult(cancelled=True)
    assert protocol.to_wire(svc.status(session)) == {"settled": protocol.to_wire(status)["settled"]}
    # within the Struct's code-point bound, over seed 001's UTF-8 bound: the seed's message
    wide = protocol.decode_params(protocol.COMPACT_REQUEST, {"session": session, "instructions": "界" * 3000})
    with pytest.raises(
        protocol.InvalidParams,
        match=r"^fabric/compact/request: Invalid compact\.request arguments: typed compaction instructions exceed "
        r"8192 characters or 8192 UTF-8 bytes$",
    ):
        intent_request(svc, session, wide)
    big = protocol.decode_params(protocol.COMPACT_REQUEST, {"session": session, "preserve": ["x" * 1100] * 16})
    with pytest.raises(
        protocol.InvalidParams,
        match=r"^fabric/compact/request: typed compaction request exceeds 16384 encoded UTF-8 bytes$",
    ):
        intent_request(svc, session, big)
    assert protocol.to_wire(svc.status(session)).get("pending") is None  # nothing was recorded


def test_params_json_is_what_decodes_back_to_the_same_params() -> None:
    assert not hasattr(protocol, "params_to_dict")
    p = protocol.decode_params(
        protocol.FILE_HISTORY, {"path": "/a/b.py", "scope": "global", "page": 2, "workDoneToken": 7}
    )
    sent = protocol.params_json(p)
    assert sent == {"path": "/a/b.py", "page": 2}
    assert protocol.decode_params(protocol.FILE_HISTORY, sent) == msgspec.structs.replace(p, work_done_token=None)
