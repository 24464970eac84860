"""`fabric/sessions`: the sessions of a scope, newest first, with their index facts
(entry count, timestamps, leaf, tier), paged, and the coverage of the index behind them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fabric_lsp.engine.activity import ActivitySink, CancelToken
from fabric_lsp.protocol import SessionsParams

from .catalog import Unresolved, all_refs, forget_vanished, hot_files, scope_kind, scope_refs
from .core import MemoryState
from .index import load_index
from .tokenize import sort_lexical

SESSIONS_LIST_CAP = 500
SESSIONS_MAX_PAGE_SIZE = 200


def sessions(
    eng: MemoryState,
    params: SessionsParams,
    *,
    cwd: str | None = None,
    cancel: CancelToken | None = None,
    activity: ActivitySink | None = None,
) -> dict[str, Any]:
    """The sessions of `params.scope`, decoded and bounded by the wire contract."""
    kind, target = scope_kind(params.scope)
    branches = params.branches
    cwd = params.cwd or cwd
    page, page_size = params.page, params.page_size
    with eng.lock:
        known = all_refs(eng)
        forget_vanished(eng, known)
        try:
            refs = scope_refs(eng, kind, target, cwd, known)
        except Unresolved as err:
            return {
                "sessions": [],
                "totalItems": 0,
                "page": page,
                "pageSize": page_size,
                "hasNext": False,
                "coverage": {
                    "complete": False,
                    "indexedSessions": 0,
                    "eligibleSessions": 0,
                    "staleSessions": 0,
                    "incompleteSessions": 0,
                    "reasons": [err.code],
                    "error": {"code": err.code, "message": err.message},
                },
            }
        found = len(refs)
        refs = refs[: max(1, eng.config.max_sessions)][:SESSIONS_LIST_CAP]
        hot = hot_files(eng, known, refs)
        states, tiers, coverage = load_index(eng, refs, hot, branches, hydrate=False, cancel=cancel, activity=activity)
        if found > len(refs):  # the cap cut sessions: the list is not the whole scope
            coverage["complete"] = False
            coverage["reasons"] = sort_lexical(set(coverage["reasons"]) | {"max_sessions"})
    by_file = {st.file: (st, tier) for st, tier in zip(states, tiers)}
    start = (page - 1) * page_size
    rows: list[dict[str, Any]] = []
    for ref in refs[start : start + page_size]:  # rows of this page only
        st_tier = by_file.get(ref.file)
        row: dict[str, Any] = {
            "sessionId": ref.id,
            "sessionFile": ref.file,
            "uri": Path(ref.file).as_uri(),
            "cwd": ref.cwd,
            "entryCount": 0,
            "sizeBytes": ref.key.size if ref.key else 0,
            "mtime": ref.mtime,
            "tier": "hot" if ref.file in hot else "cold",
        }
        if st_tier is not None:
            st, _tier = st_tier
            row["sessionId"] = st.session_id
            row["cwd"] = st.cwd or ref.cwd
            row["entryCount"] = st.entry_count
            if st.first_ts is not None:
                row["firstTs"] = st.first_ts
            if st.last_ts is not None:
                row["lastTs"] = st.last_ts
            if st.lineage.leaf_id is not None:
                row["leafId"] = st.lineage.leaf_id
        rows.append(row)
    return {
        "sessions": rows,
        "totalItems": len(refs),
        "page": page,
        "pageSize": page_size,
        "hasNext": start + page_size < len(refs),
        "coverage": coverage,
    }
