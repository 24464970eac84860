"""Engine results fit the wire contract exactly: converting a real result into its
protocol.py Struct and back loses no key and changes no value."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from fabric_lsp import protocol
from fabric_lsp.engine.compaction.api import preview_branch_summary, preview_compaction
from tests.conftest import REAL_SESSIONS

SESSIONS = sorted(REAL_SESSIONS.glob("*.jsonl"))


def round_trip(result: dict, struct: type) -> dict:
    return msgspec.to_builtins(msgspec.convert(result, struct))


@pytest.mark.parametrize("path", SESSIONS, ids=lambda p: p.name[:2])
@pytest.mark.parametrize("keep", [200, 20000])
def test_compaction_preview_results_fit_the_contract(path: Path, keep: int) -> None:
    result = preview_compaction(str(path), keep_recent_tokens=keep, include_qa=True)
    assert round_trip(result, protocol.CompactionPreviewResult) == result


def test_cancelled_and_odd_previews_fit_the_contract(tmp_path: Path) -> None:
    src = REAL_SESSIONS / "01-print-default-tools.jsonl"
    bad = preview_compaction(str(src), keep_recent_tokens=10,
                             instructions='__pi_fabric_compact_request_v1__:{"version":1,"x":1}')
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


def test_check_result_names_the_method_and_field_of_a_result_off_the_contract() -> None:
    good = {"error": {"code": "session_not_found", "message": "Session not found: x"}}
    assert protocol.check_result(protocol.EXPAND, good) is good
    with pytest.raises(protocol.ResultContractError, match=r"fabric/expand: .* at error\.code"):
        protocol.check_result(protocol.EXPAND, {"error": {"code": 7, "message": "m"}})
    with pytest.raises(protocol.ResultContractError, match=r"fabric/sessions: .*wire contract"):
        protocol.check_result(protocol.SESSIONS, {"sessions": "not a list"})
