"""Team recall (`scope: "team"` / `"team:<member>"`) and team expand over the database.

The answer equals a local `scope: "global"` recall over the same sessions with every
session hot (recall.run_search over HotViews), plus `member` and `machine` on each item:

1. *Stats* (SQL): the sessions in scope in the local view order (newest `mtime` first,
   then the UTF-16 order of the path, then the member), the 50,000-entry candidate cap
   applied in that order (`take` per session), N, the total length and each query term's
   document frequency over the capped corpus.
2. *IDF* (Python): `idf = log((N - df + 0.5) / (df + 0.5) + 1)`, `avgdl`, the two length
   normalisation constants: the same expressions as `search.bm25_located`, so the
   logarithm is the client's libm's, as it is locally.
3. *Scoring and ranking* (SQL): per candidate entry the sum over the query terms, in query
   order, of `idf * (tf * (k1 + 1)) / (tf + (k1 (1 - b) + k1 b / avgdl * dl))` in double
   precision (IEEE +, *, / are correctly rounded, so every term's contribution and the
   ordered sum are bit-identical to the local ones); segments take their best entry's
   score; the 10,000-item cap, the totals and the page come from one ordered window.
4. *Assembly* (Python): the page's segments' records are fetched and rendered by the
   engine's own `search.segment_result` / `search.render_text`.
"""

from __future__ import annotations

import math
from typing import Any

from fabric_lsp.engine.memory.search import (
    CANDIDATE_ENTRIES,
    CANDIDATE_ITEMS,
    K1,
    B,
    HotIndex,
    HotView,
    SegmentItem,
    render_text,
    segment_result,
)
from fabric_lsp.engine.memory.tokenize import plan_memory_query, sort_lexical
from fabric_lsp.protocol import (
    ExpandErrorBody,
    ExpandErrorCode,
    ExpandErrorResult,
    ExpandParams,
    ExpandResult,
    RecallParams,
    RecallResult,
)
from fabric_lsp.protocol import SegmentItem as SegmentResultItem
from fabric_lsp.protocol_results import TeamMember, index_coverage

from .prepare import BRANCHES, decode_record
from .schema import SCHEMA

TEAM_SOURCE_NOTE = "stored normalized entries from the team database; the full source lives on the member's machine"


def team_scope(scope: Any) -> str | None:
    """None: not a team scope; else the member filter ("" for the whole team)."""
    if not isinstance(scope, str):
        return None
    s = scope.strip()
    if s == "team":
        return ""
    if s.startswith("team:"):
        member = s[len("team:") :].strip()
        if not member:
            raise ValueError('scope: "team:" needs a member name')
        return member
    return None


# The sessions in scope, in the local view order, with the candidate cap (`take`).
_SCOPED = f"""
scoped AS (
  SELECT s.skey, s.entry_count, s.total_len, s.mtime, s.file_key, s.member,
         coalesce(sum(s.entry_count) OVER (ORDER BY s.mtime DESC, s.file_key, s.member COLLATE "C"
                                           ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS before
  FROM {SCHEMA}.sessions s
  WHERE s.branches = %(branches)s AND (%(member)s::text = '' OR s.member = %(member)s::text)
),
capped AS (
  SELECT skey, entry_count, total_len, mtime, file_key, member,
         LEAST(entry_count, GREATEST(0, %(limit)s - before))::int AS take
  FROM scoped
)"""

_STATS = f"""
WITH {_SCOPED}
SELECT
  (SELECT coalesce(sum(take), 0) FROM capped) AS n,
  (SELECT coalesce(sum(CASE WHEN take = entry_count THEN total_len
                            ELSE (SELECT coalesce(sum(e.dl), 0) FROM {SCHEMA}.entries e
                                  WHERE e.skey = c.skey AND e.pos < c.take) END), 0)
     FROM capped c WHERE take > 0) AS total_len,
  (SELECT bool_or(take < entry_count) FROM capped) AS capped,
  (SELECT coalesce(array_agg(t.term ORDER BY t.term), '{{}}') FROM (
     SELECT p.term FROM {SCHEMA}.postings p JOIN capped c ON c.skey = p.skey
     WHERE p.term = ANY(%(terms)s::text[]) AND c.take > 0 GROUP BY p.term) t) AS df_terms,
  (SELECT coalesce(array_agg(t.df ORDER BY t.term), '{{}}') FROM (
     SELECT p.term, sum(CASE WHEN c.take = c.entry_count THEN cardinality(p.pos)
                             ELSE (SELECT count(*) FROM unnest(p.pos) x WHERE x < c.take) END)::bigint AS df
     FROM {SCHEMA}.postings p JOIN capped c ON c.skey = p.skey
     WHERE p.term = ANY(%(terms)s::text[]) AND c.take > 0 GROUP BY p.term) t) AS dfs
"""

_PAGE_COLUMNS = """k.skey, k.seg, k.score, k.matched, k.start_pos,
  coalesce((SELECT n.start_pos FROM {schema}.segments n WHERE n.skey = k.skey AND n.seg = k.seg + 1), k.entry_count)
    AS end_pos, k.matched_pos, k.take"""

_SEARCH = f"""
WITH {_SCOPED},
q AS (SELECT * FROM unnest(%(terms)s::text[], %(idfs)s::float8[]) WITH ORDINALITY AS q(term, idf, ord)),
hits AS (
  SELECT p.skey, u.pos, u.seg,
         sum(q.idf * (u.tf * %(k1p1)s::float8) / (u.tf + (%(norm_a)s::float8 + %(norm_b)s::float8 * u.dl))
             ORDER BY q.ord) AS score
  FROM q JOIN {SCHEMA}.postings p ON p.term = q.term
  JOIN capped c ON c.skey = p.skey,
  LATERAL unnest(p.pos, p.tf, p.dl, p.seg) AS u(pos, tf, dl, seg)
  WHERE u.pos < c.take
  GROUP BY p.skey, u.pos, u.seg
),
segs AS (
  SELECT skey, seg, max(score) AS score, count(*)::int AS matched, array_agg(pos) AS matched_pos
  FROM hits GROUP BY skey, seg
),
ranked AS (
  SELECT g.skey, g.seg, g.score, g.matched, g.matched_pos, sg.start_pos, c.entry_count, c.take,
         row_number() OVER (ORDER BY g.score DESC, c.mtime DESC, sg.start_index, c.file_key, c.member COLLATE "C") AS rn
  FROM segs g JOIN capped c ON c.skey = g.skey
  JOIN {SCHEMA}.segments sg ON sg.skey = g.skey AND sg.seg = g.seg
),
totals AS (
  SELECT count(*) AS all_items,
         count(*) FILTER (WHERE rn <= %(max_items)s) AS items,
         coalesce(sum(matched) FILTER (WHERE rn <= %(max_items)s), 0) AS matches
  FROM ranked
)
SELECT t.all_items, t.items, t.matches, {_PAGE_COLUMNS.format(schema=SCHEMA)}
FROM totals t LEFT JOIN ranked k ON k.rn > %(first)s AND k.rn <= %(last)s AND k.rn <= %(max_items)s
ORDER BY k.rn
"""

_BROWSE = f"""
WITH {_SCOPED},
segs AS (
  SELECT sg.skey, sg.seg, sg.start_pos, sg.start_index, c.entry_count, c.take, c.mtime, c.file_key, c.member,
         coalesce(lead(sg.start_pos) OVER (PARTITION BY sg.skey ORDER BY sg.seg), c.entry_count) AS end_pos
  FROM capped c JOIN {SCHEMA}.segments sg ON sg.skey = c.skey
  WHERE c.take > 0
),
ranked AS (
  SELECT skey, seg, 0.0::float8 AS score, GREATEST(0, LEAST(end_pos, take) - start_pos)::int AS matched,
         NULL::int[] AS matched_pos, start_pos, entry_count, take,
         row_number() OVER (ORDER BY mtime DESC, start_index, file_key, member COLLATE "C") AS rn
  FROM segs
),
totals AS (
  SELECT count(*) AS all_items,
         count(*) FILTER (WHERE rn <= %(max_items)s) AS items,
         coalesce(sum(matched) FILTER (WHERE rn <= %(max_items)s), 0) AS matches
  FROM ranked
)
SELECT t.all_items, t.items, t.matches, {_PAGE_COLUMNS.format(schema=SCHEMA)}
FROM totals t LEFT JOIN ranked k ON k.rn > %(first)s AND k.rn <= %(last)s AND k.rn <= %(max_items)s
ORDER BY k.rn
"""

_COVERAGE = f"""
SELECT count(*)::int, count(*) FILTER (WHERE NOT complete)::int,
       coalesce((SELECT array_agg(DISTINCT r) FROM {SCHEMA}.sessions s2, unnest(s2.reasons) r
                 WHERE s2.branches = %(branches)s AND (%(member)s::text = '' OR s2.member = %(member)s::text)), '{{}}'),
       (SELECT coalesce(sum(pending_sessions), 0)::int FROM {SCHEMA}.pushes p
        WHERE %(member)s::text = '' OR p.member = %(member)s::text),
       (SELECT coalesce(array_agg(DISTINCT r), '{{}}') FROM {SCHEMA}.pushes p, unnest(p.pending_reasons) r
        WHERE %(member)s::text = '' OR p.member = %(member)s::text)
FROM {SCHEMA}.sessions s
WHERE s.branches = %(branches)s AND (%(member)s::text = '' OR s.member = %(member)s::text)
"""


def _idf(n: int, df: int) -> float:
    # the expression of search.bm25_located
    return math.log((n - df + 0.5) / (df + 0.5) + 1)


def team_recall(
    conn: Any, params: RecallParams, *, local_stale: int = 0, local_stale_reasons: list[str] | None = None
) -> RecallResult:
    """`fabric/recall` with a team scope, over the connection `conn`. `local_stale`:
    sessions of this member whose local files changed since they were pushed (a coverage
    reason, `team_push_stale`, like a stale local index). `params` is decoded and checked
    by the wire contract (protocol.py: a team scope takes no regex, integrity expectations
    or ranges)."""
    query, mode, scope, branches = params.query, params.query_mode, params.scope, params.branches
    member = team_scope(scope)
    if member is None:
        raise ValueError('scope: expected "team" or "team:<member>"')
    page, page_size = params.page, params.page_size
    plan = plan_memory_query(query, mode)
    browse = plan["kind"] == "browse"
    base: dict[str, Any] = {"branches": branches, "member": member, "limit": CANDIDATE_ENTRIES}
    q_reasons: set[str] = set()
    if branches != "active":
        # only the active branch is pushed (push.BRANCHES): say so, never answer "no matches"
        q_reasons.add("team_branches_not_pushed")
    start = (page - 1) * page_size
    window = dict(base, max_items=CANDIDATE_ITEMS, first=start, last=start + page_size)
    rows: list[tuple[Any, ...]]
    if browse:
        rows = conn.execute(_BROWSE, window).fetchall()
        stats_capped = _capped(conn, base)
    else:
        terms: list[str] = plan["terms"]
        stats = conn.execute(_STATS, dict(base, terms=terms)).fetchone()
        n, total_len, stats_capped, df_terms, dfs = stats
        df = dict(zip(df_terms, dfs))
        if n == 0 or not terms:
            rows = [(0, 0, 0) + (None,) * 8]
        else:
            avgdl = int(total_len) / int(n)
            used = [t for t in terms if df.get(t, 0) > 0]
            idfs = [_idf(int(n), int(df[t])) for t in used]
            rows = conn.execute(
                _SEARCH,
                dict(
                    window,
                    terms=used,
                    idfs=idfs,
                    k1p1=K1 + 1,
                    norm_a=K1 * (1 - B),
                    norm_b=K1 * B / avgdl,
                ),
            ).fetchall()
    if stats_capped:
        q_reasons.add("candidate_entry_budget")
    all_items, total_items, total_matches = int(rows[0][0]), int(rows[0][1]), int(rows[0][2])
    if all_items > CANDIDATE_ITEMS:
        q_reasons.add("candidate_item_budget")
    page_rows = [r for r in rows if r[3] is not None]
    items = _assemble(conn, page_rows, browse)
    segment_count = total_items
    cov_row = conn.execute(_COVERAGE, base).fetchone()
    indexed, incomplete, session_reasons, pending, pending_reasons = cov_row
    stale = int(pending) + local_stale
    reasons = set(session_reasons) | set(pending_reasons)
    if stale:
        reasons.add("team_push_stale")
    reasons.update(local_stale_reasons or [])
    index_cov: dict[str, Any] = {
        "complete": stale == 0 and incomplete == 0,
        "indexedSessions": int(indexed),
        "eligibleSessions": int(indexed) + stale,
        "staleSessions": stale,
        "incompleteSessions": int(incomplete),
        "reasons": sort_lexical(reasons),
    }
    q_complete = not q_reasons
    coverage = index_coverage(
        index_cov,
        complete=bool(index_cov["complete"] and q_complete),
        reasons=sort_lexical(set(index_cov["reasons"]) | q_reasons),
    )
    page_items = [it for it, _ in items]
    text = render_text(
        page_items,
        query=query if not browse else None,
        total_items=total_items,
        total_matches=total_matches,
        segment_count=segment_count,
        index_coverage=index_cov,
        query_reasons=sort_lexical(q_reasons),
        query_complete=q_complete,
    )
    out_items: list[SegmentResultItem] = []
    for it, who in items:
        seg = segment_result(it)
        seg.member, seg.machine = who
        out_items.append(SegmentResultItem(segment=seg))
    return RecallResult(
        scope=scope,
        branches=branches,
        query=query,
        query_mode=mode,
        page=page,
        page_size=page_size,
        total_items=total_items,
        total_matches=total_matches,
        has_next=start + page_size < total_items,
        authoritative=coverage.complete,
        coverage=coverage,
        items=list(out_items),
        text=text,
    )


def _capped(conn: Any, base: dict[str, Any]) -> bool:
    row = conn.execute(
        f"WITH {_SCOPED} SELECT coalesce(bool_or(take < entry_count), false) FROM capped", base
    ).fetchone()
    return bool(row[0]) if row is not None else False


def _assemble(conn: Any, page_rows: list[tuple[Any, ...]], browse: bool) -> list[tuple[SegmentItem, tuple[str, str]]]:
    """The page's segments as the engine's SegmentItems over views of exactly their
    records (so `segment_result` and `render_text` are the local ones)."""
    if not page_rows:
        return []
    skeys = [r[3] for r in page_rows]
    starts = [r[7] for r in page_rows]
    ends = [r[8] for r in page_rows]
    fetched = conn.execute(
        f"""SELECT r.ord, e.pos, e.rec FROM unnest(%s::uuid[], %s::int[], %s::int[]) WITH ORDINALITY AS r(skey, a, b, ord)
            JOIN {SCHEMA}.entries e ON e.skey = r.skey AND e.pos >= r.a AND e.pos < r.b
            ORDER BY r.ord, e.pos""",
        (skeys, starts, ends),
    ).fetchall()
    sessions = {
        row[0]: row[1:]
        for row in conn.execute(
            f"SELECT skey, session_id, session_file, source_hash, branches, lineage_fingerprint, mtime, "
            f"record_session_id, member, machine FROM {SCHEMA}.sessions WHERE skey = ANY(%s::uuid[])",
            (list(set(skeys)),),
        ).fetchall()
    }
    recs: dict[int, list[str]] = {}
    for ordinal, _pos, rec in fetched:
        recs.setdefault(int(ordinal) - 1, [])
        recs[int(ordinal) - 1].append(rec)
    out: list[tuple[SegmentItem, tuple[str, str]]] = []
    for i, r in enumerate(page_rows):
        skey, _seg, score, matched, start_pos, end_pos, matched_pos, take = r[3:11]
        sid, sfile, shash, sbranches, fp, mtime, rec_sid, member, machine = sessions[skey]
        records = [decode_record(x, sfile, rec_sid) for x in recs.get(i, [])]
        if len(records) != end_pos - start_pos:
            raise RuntimeError("team database: a segment's entries are missing (a push is in progress?); try again")
        view = HotView(sid, sfile, shash, sbranches, fp, mtime, records, HotIndex(), "hot")
        if browse:
            chosen = {p - start_pos for p in range(start_pos, min(end_pos, take))}
            matched_set: set[int] | None = None if len(chosen) == len(records) and take >= end_pos else chosen
        else:
            matched_set = {int(p) - start_pos for p in matched_pos}
        item = SegmentItem(view, 0, len(records), float(score) if not browse else 0.0, matched_set, int(matched))
        out.append((item, (member, machine)))
    return out


# ---- status and expand -------------------------------------------------------------------


def team_status(conn: Any, member: str | None = None) -> list[dict[str, Any]]:
    """One object per pushed session file (all members, or one)."""
    rows = conn.execute(
        f"SELECT member, machine, session_file, session_id, cwd, branches, source_hash, lineage_fingerprint, "
        f"entry_count, size, complete, reasons, pushed_at FROM {SCHEMA}.sessions "
        f"WHERE %(m)s::text IS NULL OR member = %(m)s::text ORDER BY member, machine, session_file",
        {"m": member},
    ).fetchall()
    return [
        {
            "member": r[0],
            "machine": r[1],
            "sessionFile": r[2],
            "sessionId": r[3],
            "cwd": r[4],
            "branches": r[5],
            "sourceHash": r[6],
            "lineageFingerprint": r[7],
            "entryCount": r[8],
            "sizeBytes": r[9],
            "complete": r[10],
            "reasons": list(r[11]),
            "pushedAt": r[12].isoformat(),
        }
        for r in rows
    ]


def team_members(conn: Any) -> list[TeamMember]:
    """Every member with sessions in the database (active branches, as recall searches),
    by name in code point order: its machines (sorted), sessions, entries and last push."""
    rows = conn.execute(
        f'SELECT member, array_agg(DISTINCT machine COLLATE "C" ORDER BY machine COLLATE "C"), count(*), '
        f"coalesce(sum(entry_count), 0), max(pushed_at) FROM {SCHEMA}.sessions WHERE branches = %s "
        'GROUP BY member ORDER BY member COLLATE "C"',
        (BRANCHES,),
    ).fetchall()
    return [
        TeamMember(member=r[0], machines=list(r[1]), sessions=r[2], entries=int(r[3]), last_pushed_at=r[4].isoformat())
        for r in rows
    ]


def _error(code: ExpandErrorCode, message: str, candidates: list[str] | None = None) -> ExpandErrorResult:
    return ExpandErrorResult(error=ExpandErrorBody(code=code, message=message, candidates=candidates))


def team_expand(conn: Any, params: ExpandParams) -> ExpandResult | ExpandErrorResult:
    """`fabric/expand` of a team item: `member` + `session` (id or the pushed file path),
    `indices` / `entryIds` / `operationAddresses` / `entryRange`. Answers with the stored
    (normalized, possibly truncated) records and says where the full source is."""
    member, session = params.member, params.session
    if member is None:
        raise ValueError("member: a team expand needs the item's member")
    rows = conn.execute(
        f"SELECT skey, session_id, session_file, source_hash, branches, lineage_fingerprint, record_session_id, "
        f"machine, entry_count FROM {SCHEMA}.sessions WHERE member = %s AND (session_id = %s OR session_file = %s)",
        (member, session, session),
    ).fetchall()
    if not rows:
        return _error("session_not_found", f'Session "{session}" of member "{member}" is not in the team database.')
    if len(rows) > 1:
        return _error(
            "ambiguous_session", f'Session "{session}" matches {len(rows)} pushed files.', sorted(r[2] for r in rows)
        )
    skey, sid, sfile, shash, sbranches, fp, rec_sid, machine, count = rows[0]
    exp_hash = params.expected_source_hash
    if exp_hash is not None and exp_hash != shash:
        return _error("stale_pointer", f"The pushed session has sourceHash {shash}, not {exp_hash}; recall again.")
    records = [
        decode_record(r[0], sfile, rec_sid)
        for r in conn.execute(f"SELECT rec FROM {SCHEMA}.entries WHERE skey = %s ORDER BY pos", (skey,)).fetchall()
    ]
    selected: list[dict[str, Any]]
    if params.indices is not None:
        wanted = list(params.indices)
        by_index = {rec["index"]: rec for rec in records}
        missing = [i for i in wanted if i not in by_index]
        if missing:
            return _error("index_out_of_bounds", f"Entry index {missing[0]} is not among the {count} pushed entries.")
        selected = [by_index[i] for i in dict.fromkeys(wanted)]
    elif params.entry_ids is not None or params.operation_addresses is not None:
        key = "entryId" if params.entry_ids is not None else "operationAddress"
        values = list(params.entry_ids or params.operation_addresses or [])
        selected = []
        for v in dict.fromkeys(values):
            found = [rec for rec in records if rec.get(key) == v]
            if not found:
                return _error("address_not_found", f'Address "{v}" was not found.')
            if len(found) > 1:
                return _error("ambiguous_address", f'Address "{v}" resolves to {len(found)} records.')
            selected.extend(found)
    else:  # the wire contract asks for exactly one selector
        rng = params.entry_range
        assert rng is not None
        selected = [rec for rec in records if rng.first <= rec["index"] <= rng.last]
    from fabric_lsp.engine.memory.expand import expanded_entry

    return ExpandResult(
        session=session,
        session_id=sid,
        session_file=sfile,
        source_hash=shash,
        branches=sbranches,
        lineage_fingerprint=fp,
        expanded=[expanded_entry(rec) for rec in selected],
        member=member,
        machine=machine,
        note=TEAM_SOURCE_NOTE,
    )
