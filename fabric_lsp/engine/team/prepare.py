"""The builder side of a push: one session built from source and made ready to send.

Runs in a builder process (`memory/build_pool.py`'s generic child imports only this
module and what it needs, not the push's plan or database code) or in the pushing
process. What is sent is what the local hot index holds (`state_build.build_state`,
tier hot, branch mode `active`): the normalized records, their postings, the segment
starts and the file operations; the rows' COPY encodings are in `copy_rows`.
"""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass
from typing import Any

import msgspec

from fabric_lsp.engine.memory import file_history
from fabric_lsp.engine.memory.config import MemoryConfig
from fabric_lsp.engine.memory.records import HotRecords
from fabric_lsp.engine.memory.state import SourceMissing
from fabric_lsp.engine.memory.state_build import build_state

from . import copy_rows

BRANCHES = "active"  # the branch mode pushed (docs/team.md: `branches: "all"` is not pushed)
_encode = msgspec.json.Encoder().encode


class RecordEncoder:
    """A session's records as stored (`decode_record` reads them back): a record that
    starts with the session's file and id without those two fields, cut from its encoded
    bytes (the same bytes as encoding the record without them: msgspec writes keys in
    order, no spaces); any other whole, wrapped in a one-element list."""

    def __init__(self, session_file: str, record_sid: str) -> None:
        self.session_file, self.record_sid = session_file, record_sid
        self.lead = _encode({"sessionFile": session_file, "sessionId": record_sid})[:-1]

    def __call__(self, rec: dict[str, Any]) -> bytes:
        keys = iter(rec)
        if (
            next(keys, None) == "sessionFile"
            and next(keys, None) == "sessionId"
            and rec["sessionFile"] == self.session_file
            and rec["sessionId"] == self.record_sid
        ):
            data = _encode(rec)
            lead = self.lead
            if data.startswith(lead):
                return b"{" + data[len(lead) + 1 :] if data[len(lead)] == 0x2C else b"{}"  # 0x2C: ","
        return _encode([rec])


class _EncodedRecords:
    """A session's records encoded (`RecordEncoder`) as the hot build makes them (a
    `state_build.RecordSink`): the session's record id is the first record's."""

    def __init__(self, session_file: str) -> None:
        self.session_file = session_file
        self.start()

    def start(self) -> None:
        self.records: list[bytes] = []
        self.record_sid = ""
        self.encode: RecordEncoder | None = None

    def __call__(self, rec: dict[str, Any], /) -> None:
        encode = self.encode
        if encode is None:
            sid = rec.get("sessionId")
            self.record_sid = sid if isinstance(sid, str) else ""
            encode = self.encode = RecordEncoder(self.session_file, self.record_sid)
        self.records.append(encode(rec))


def decode_record(data: str | bytes, session_file: str, record_sid: str) -> dict[str, Any]:
    value = msgspec.json.decode(data)
    if isinstance(value, list):
        return value[0]  # type: ignore[no-any-return]
    out: dict[str, Any] = {"sessionFile": session_file, "sessionId": record_sid}
    out.update(value)
    return out


PREPARE = "fabric_lsp.engine.team.prepare:prepare"  # the builders' task (memory/build_pool.py)


@dataclass(frozen=True)
class PushTask:
    """One session to prepare (pickled to a builder)."""

    file: str
    cfg: MemoryConfig
    ref_id: str
    ref_cwd: str
    skey: str
    policy: str
    old: tuple[int, str, int, bool] | None
    dry_run: bool


def prepare(task: PushTask) -> dict[str, Any]:
    """One session made ready to send, in a builder process or here: built from source as
    the local hot index builds it (`sessions.build_state`, tier hot), its action decided
    against what is pushed (`old` = (entry count, records hash, gen, same policy), or
    None when nothing is), and the rows to send as COPY payloads (`copy_rows`; none with
    `dry_run`).
    `{"missing": reason}` when the source is unavailable."""
    file, cfg, skey, policy, old, dry_run = task.file, task.cfg, task.skey, task.policy, task.old, task.dry_run
    ref_id, ref_cwd = task.ref_id, task.ref_cwd
    sink = _EncodedRecords(file)
    try:
        state = build_state(file, BRANCHES, "hot", cfg, ref_id=ref_id, ref_cwd=ref_cwd, encode=False, sink=sink)
    except SourceMissing as missing:
        return {"missing": missing.reason}
    entries = state.entries if state.entries is not None else HotRecords()
    encoded = sink.records
    if len(encoded) != len(entries):  # (cannot be: every record the state keeps went to the sink)
        raise AssertionError(f"{file}: {len(encoded)} records encoded, {len(entries)} built")
    record_sid = sink.record_sid
    prefix_n = old[0] if old is not None and old[3] else None
    h = hashlib.sha256()
    prefix: str | None = None
    for i, data in enumerate(encoded):
        if i == prefix_n:
            prefix = h.hexdigest()
        h.update(data)
        h.update(b"\n")
    if prefix_n is not None and prefix_n == len(encoded):
        prefix = h.hexdigest()
    n = len(encoded)
    if old is None:
        action, start, gen = "new", 0, 0
    elif prefix_n is not None and prefix == old[1] and n >= old[0]:
        action, start, gen = "append", old[0], old[2] + 1
    else:
        action, start, gen = "replace", 0, 0
    out: dict[str, Any] = {
        "action": action,
        "start": start,
        "gen": gen,
        "n": n,
        "sessionId": state.session_id,
        "cwd": state.cwd,
    }
    if dry_run:
        return out
    index = state.hot_index
    assert index is not None
    seg_starts = index.seg_starts
    out["row"] = (
        state.session_id,
        record_sid,
        state.cwd,
        state.source_hash,
        state.lineage.fingerprint,
        state.lineage.leaf_id,
        state.mtime,
        state.size,
        ",".join(str(v) for v in state.key.as_list()),
        policy,
        n,
        index.total_len,
        len(seg_starts),
        h.hexdigest(),
        bool(state.coverage["complete"]),
        list(state.coverage["reasons"]),
        _json_text(state.first_ts),
        _json_text(state.last_ts),
        gen,
    )
    dl = index.doc_len
    sk = skey.encode("ascii")
    # JSON text holds no raw tab, newline or CR: only its backslashes need COPY's escape
    out["entries"] = b"".join(
        b"%b\t%d\t%d\t%b\n" % (sk, pos, dl[pos], encoded[pos].replace(b"\\", b"\\\\")) for pos in range(start, n)
    )
    first_new_seg = (
        0 if action != "append" else next((si for si, st in enumerate(seg_starts) if st >= start), len(seg_starts))
    )
    out["segments"] = "".join(
        f"{skey}\t{si}\t{seg_starts[si]}\t{entries.index_at(seg_starts[si])}\n"
        for si in range(first_new_seg, len(seg_starts))
    ).encode("utf-8")
    if copy_rows.ARRAYS_OK:
        out["postings"], out["postingsCount"] = copy_rows.postings_binary(index, start, uuid.UUID(skey).bytes, gen)
        out["postingsFormat"] = "binary"
    else:
        out["postings"], out["postingsCount"] = copy_rows.postings_text(index, start, skey, gen)
        out["postingsFormat"] = "text"
    out["fileOps"] = file_history.encode_record(state) if state.file_ops is not None else None
    return out


def _json_text(value: Any) -> str | None:
    return None if value is None else _encode(value).decode("utf-8")
