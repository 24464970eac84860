"""Engine results fit the wire contract exactly: converting a real result into its
protocol.py Struct and back loses no key and changes no value."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest

from fabric_lsp import protocol
from fabric_lsp.engine.compaction.api import preview_branch_summary, preview_compaction
from tests.conftest import REAL_SESSIONS

SESSIONS = sorted(REAL_SESSIONS.glob("*.jsonl"))


def ordered(value: object) -> object:
    """`value` with every object as a list of (key, value) pairs: equality then also
    compares key order (what a client reading the JSON text sees)."""
    if isinstance(value, dict):
        return [(k, ordered(v)) for k, v in value.items()]
    if isinstance(value, list):
        return [ordered(v) for v in value]
    return (type(value).__name__, value)


def round_trip(result: dict, struct: type) -> dict:
    back = msgspec.to_builtins(msgspec.convert(result, struct))
    assert ordered(back) == ordered(result), "the Struct changes the key order or a value type"
    return back


@pytest.mark.parametrize("path", SESSIONS, ids=lambda p: p.name[:2])
@pytest.mark.parametrize("keep", [200, 20000])
def test_compaction_preview_results_fit_the_contract(path: Path, keep: int) -> None:
    result = preview_compaction(str(path), keep_recent_tokens=keep, include_qa=True)
    assert round_trip(result, protocol.CompactionPreviewResult) == result


def test_cancelled_and_odd_previews_fit_the_contract(tmp_path: Path) -> None:
    src = REAL_SESSIONS / "01-print-default-tools.jsonl"
    bad = preview_compaction(
        str(src), keep_recent_tokens=10, instructions='__pi_fabric_compact_request_v1__:{"version":1,"x":1}'
    )
    assert bad["outcome"] == "cancelled" and bad["error"]["code"] == "unknown-field"
    assert round_trip(bad, protocol.CompactionPreviewResult) == bad
    odd = tmp_path / "odd.jsonl"
    odd.write_bytes(src.read_bytes() + b"not json\n" + b'{"type":"message","id":"x","parentId":"x"}\n')
    res = preview_compaction(str(odd), keep_recent_tokens=10)
    assert res["warnings"]
    assert round_trip(res, protocol.CompactionPreviewResult) == res


def test_branch_summary_preview_fits_the_contract() -> None:
    path = REAL_SESSIONS / "03-rpc-all-entry-types-branch-compaction.jsonl"
    result = preview_branch_summary(str(path), target_id="74ca2b3c")
    assert round_trip(result, protocol.BranchSummaryPreviewResult) == result


def test_result_from_json_names_the_method_and_field_of_a_result_off_the_contract() -> None:
    """A result that crossed a process edge as plain JSON (a preview worker's answer, a
    running server's) is checked against its method's Struct."""
    good = {"error": {"code": "session_not_found", "message": "Session not found: x"}}
    converted = protocol.result_from_json(protocol.EXPAND, good)
    assert isinstance(converted, protocol.ExpandErrorResult)
    assert protocol.to_wire(converted) == good
    with pytest.raises(protocol.ResultContractError, match=r"fabric/expand: .* at error\.code"):
        protocol.result_from_json(protocol.EXPAND, {"error": {"code": 7, "message": "m"}})
    with pytest.raises(protocol.ResultContractError, match=r"fabric/sessions: .*wire contract"):
        protocol.result_from_json(protocol.SESSIONS, {"sessions": "not a list"})
    # results are strict: a key the Struct does not declare never reaches a client
    with pytest.raises(protocol.ResultContractError, match=r"fabric/compact/cancel: .*unknown field `extra`"):
        protocol.result_from_json(protocol.COMPACT_CANCEL, {"cancelled": True, "extra": 1})


def test_the_engine_entry_points_return_the_result_structs(tmp_path: Path) -> None:
    """engine_owner.py takes the params Structs and returns the result Structs; their encoding
    is what every face sends (Fabric trace and fact records: tests/engine/memory/
    test_memory_fabric_records.py)."""
    import shutil

    from fabric_lsp.config import load_config
    from fabric_lsp.engine_owner import Engines

    agent = tmp_path / "agent"
    folder = agent / "sessions" / "--proj--"
    folder.mkdir(parents=True)
    for src in SESSIONS:
        shutil.copy(src, folder / src.name)
    cfg = load_config(init_options={"agentDir": str(agent), "indexDir": str(tmp_path / "index")})
    engines = Engines(lambda: cfg)
    try:

        def call(method: str, name: str, params: dict, *args: object) -> object:
            out = getattr(engines, name)(protocol.decode_params(method, params), *args)
            assert isinstance(out, protocol.RESULT_TYPES[method]), (method, type(out))
            wire = protocol.to_wire(out)
            assert protocol.to_wire(protocol.result_from_json(method, wire)) == wire
            return out

        sessions = call(protocol.SESSIONS, "sessions", {"scope": "global"}, None)
        assert isinstance(sessions, protocol.SessionsResult) and sessions.total_items == len(SESSIONS)
        recall = call(protocol.RECALL, "recall", {"query": "fabric_exec", "scope": "global"}, None)
        assert isinstance(recall, protocol.RecallResult)
        file = str(folder / SESSIONS[0].name)
        preview = call(protocol.COMPACTION_PREVIEW, "compaction_preview", {"session": file, "keepRecentTokens": 200})
        assert isinstance(preview, protocol.CompactionPreviewResult) and preview.session_file == file
        status = call(protocol.COMPACT_STATUS, "compact_status", {"session": file})
        assert isinstance(status, protocol.CompactStatusResult) and status.settled in (True, False)
    finally:
        engines.close()


@pytest.mark.parametrize("path", SESSIONS, ids=lambda p: p.name[:2])
def test_a_result_is_sent_as_the_same_text_without_the_converter(path: Path) -> None:
    """The server writes our methods' responses without pygls' converter (message_json):
    the bytes must be the converter's, for real results and for the odd values."""
    from pygls.protocol import JsonRPCResponseMessage

    from fabric_lsp.server import FabricServer, message_json, wire_json

    serialize = FabricServer().protocol._serialize_message
    results = [
        protocol.to_wire(
            protocol.result_from_json(protocol.COMPACTION_PREVIEW, preview_compaction(str(path), include_qa=True))
        ),
        {"a": [float("inf"), float("nan"), -0.0, 1e21, "é\u2028\ud800"], "b": None, "c": {"d": [True, 2**60]}},
    ]
    for result in results:
        message = JsonRPCResponseMessage(id=3, jsonrpc="2.0", result=result)
        assert message_json(message, serialize) == wire_json(message, serialize)

    class Holder:
        def __init__(self) -> None:
            self.y = [1, "two"]

    # a value json cannot write itself goes the converter's way, with the same result
    odd = JsonRPCResponseMessage(id=4, jsonrpc="2.0", result={"x": Holder()})
    assert (
        message_json(odd, serialize)
        == wire_json(odd, serialize)
        == '{"id": 4, "jsonrpc": "2.0", "result": {"x": {"y": [1, "two"]}}}'
    )


@pytest.mark.parametrize("path", SESSIONS[:2], ids=lambda p: p.name[:2])
def test_an_encoded_result_is_written_as_the_bytes_of_its_response(path: Path) -> None:
    """A result Struct's response goes out as bytes made around msgspec's output
    (`EncodedResult.response`): `id`, `jsonrpc`, `result` in that order, the result's
    values unchanged, for any id and for a lone surrogate (JSON's escape)."""
    from fabric_lsp.server import EncodedResult

    preview = protocol.result_from_json(protocol.COMPACTION_PREVIEW, preview_compaction(str(path), include_qa=True))
    odd = protocol.Coverage(
        complete=False,
        indexed_sessions=1,
        eligible_sessions=2,
        stale_sessions=0,
        incomplete_sessions=0,
        reasons=["é\u2028\ud800"],
        error=None,
    )
    for struct in (preview, odd):
        for msg_id in (3, "req-é", 2**60):
            data = EncodedResult(struct).response(msg_id)
            message = json.loads(data.decode("utf-8"))
            assert list(message) == ["id", "jsonrpc", "result"]
            assert message == {"id": msg_id, "jsonrpc": "2.0", "result": msgspec.to_builtins(struct)}
            if struct is preview:  # msgspec's own bytes, uncopied into text
                assert data.endswith(b',"jsonrpc":"2.0","result":' + msgspec.json.encode(struct) + b"}")
