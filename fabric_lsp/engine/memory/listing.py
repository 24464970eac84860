"""`fabric/sessions`: the sessions of a scope, newest first, with their index facts
(entry count, timestamps, leaf, tier), paged, and the coverage of the index behind them.
"""

from __future__ import annotations

from pathlib import Path

from fabric_lsp.engine.activity import ActivitySink, CancelToken
from fabric_lsp.protocol import SessionInfo, SessionsParams, SessionsResult
from fabric_lsp.protocol_results import coverage_error, index_coverage

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
) -> SessionsResult:
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
            return SessionsResult(
                sessions=[],
                total_items=0,
                page=page,
                page_size=page_size,
                has_next=False,
                coverage=coverage_error(err.code, err.message),
            )
        found = len(refs)
        refs = refs[: max(1, eng.config.max_sessions)][:SESSIONS_LIST_CAP]
        hot = hot_files(eng, known, refs)
        states, tiers, index_cov = load_index(eng, refs, hot, branches, hydrate=False, cancel=cancel, activity=activity)
        coverage = index_coverage(index_cov)
        if found > len(refs):  # the cap cut sessions: the list is not the whole scope
            coverage.complete = False
            coverage.reasons = sort_lexical(set(coverage.reasons) | {"max_sessions"})
    by_file = {st.file: (st, tier) for st, tier in zip(states, tiers)}
    start = (page - 1) * page_size
    rows: list[SessionInfo] = []
    for ref in refs[start : start + page_size]:  # rows of this page only
        st_tier = by_file.get(ref.file)
        row = SessionInfo(
            session_id=ref.id,
            session_file=ref.file,
            uri=Path(ref.file).as_uri(),
            cwd=ref.cwd,
            entry_count=0,
            size_bytes=ref.key.size if ref.key else 0,
            mtime=ref.mtime,
            tier="hot" if ref.file in hot else "cold",
        )
        if st_tier is not None:
            st, _tier = st_tier
            row.session_id = st.session_id
            row.cwd = st.cwd or ref.cwd
            row.entry_count = st.entry_count
            row.first_ts = st.first_ts
            row.last_ts = st.last_ts
            row.leaf_id = st.lineage.leaf_id
        rows.append(row)
    return SessionsResult(
        sessions=rows,
        total_items=len(refs),
        page=page,
        page_size=page_size,
        has_next=start + page_size < len(refs),
        coverage=coverage,
    )
