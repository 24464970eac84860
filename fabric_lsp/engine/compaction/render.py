"""Rendering (digest §5): bounded blocks, footer and the global 32 KiB guard."""

from __future__ import annotations

from typing import Any

from .bounds import MAX_SUMMARY_BYTES, clip_utf8, range_text, utf8_bytes

BLOCKS = (
    ("goal", "[Session Goal]", 4096),
    ("files", "[Files And Changes]", 4608),
    ("activity", "[Fabric Activity]", 2048),
    ("outstanding", "[Outstanding Context]", 4608),
    ("earlierTurns", "[Earlier Turns]", 3072),
    ("status", "[Current Status]", 2048),
)
REQUEST_HEADER = "[Compaction Request]"
REQUEST_MAX = 3072
TRANSCRIPT_MAX = 5120
FOOTER_MAX = 1536
MAX_LINE_BYTES = 1024
MAX_BLOCK_LINES = 128
RECALL_GUIDANCE = (
    "For exact pre-summary history, use memory.recall on this range, "
    "then memory.expand by stable entry or operation address."
)


def sampled_lines(lines: list[str], keep: int) -> list[str]:
    if len(lines) <= keep:
        return lines
    head = -(-keep // 2)
    tail = keep // 2
    return (
        lines[:head]
        + [f"\u2026 omitted {len(lines) - keep} rendered lines"]
        + (lines[len(lines) - tail :] if tail else [])
    )


def bounded_block(header: str, lines: list[str], max_bytes: int) -> str:
    clipped = [clip_utf8(line, MAX_LINE_BYTES) for line in lines]
    capped = sampled_lines(clipped, MAX_BLOCK_LINES)
    # fast path: everything fits
    full = header + "\n" + "\n".join(capped)
    if utf8_bytes(full) <= max_bytes:
        return full
    sizes = [utf8_bytes(line) for line in capped]
    header_bytes = utf8_bytes(header)
    for keep in range(len(capped) - 1, -1, -1):
        head = -(-keep // 2)
        tail = keep // 2
        marker = f"\u2026 omitted {len(capped) - keep} rendered lines"
        n = head + tail + 1
        total = (
            header_bytes
            + 1
            + sum(sizes[:head])
            + utf8_bytes(marker)
            + (sum(sizes[len(capped) - tail :]) if tail else 0)
            + (n - 1)
        )
        if total <= max_bytes:
            return header + "\n" + "\n".join(sampled_lines(capped, keep))
    return clip_utf8(header, max_bytes)


def section_headers(sections: dict[str, Any], has_request: bool) -> list[str]:
    headers = [h for key, h, _ in BLOCKS if sections.get(key)]
    if has_request:
        headers.insert(1, REQUEST_HEADER)
    return headers


def render_summary(
    sections: dict[str, Any],
    *,
    first_entry_id: str | None,
    last_entry_id: str | None,
    last_timestamp: str | None,
    request_lines: list[str] | None = None,
    summary_kind: str = "compaction",
) -> str:
    blocks: list[str] = []
    request_block = None
    if request_lines:
        request_block = bounded_block(REQUEST_HEADER, request_lines, REQUEST_MAX)
    for key, header, limit in BLOCKS:
        lines = sections.get(key)
        if not lines:
            continue
        blocks.append(bounded_block(header, lines, limit))
        if key == "goal" and request_block is not None:
            blocks.append(request_block)
            request_block = None
    if request_block is not None:
        blocks.insert(0, request_block)
    if sections.get("transcript"):
        blocks.append(bounded_block("---", sections["transcript"], TRANSCRIPT_MAX))
    ts = last_timestamp or "(unknown time)"
    rng = range_text(first_entry_id, last_entry_id) if (first_entry_id or last_entry_id) else "(no entries)"
    if summary_kind == "branch":
        head = f"[branch summarized {ts}; structural source entries {rng}]"
    else:
        head = f"[compacted {ts}; cumulative source entries {rng}]"
    blocks.append(bounded_block("---", [head, RECALL_GUIDANCE], FOOTER_MAX))
    summary = "\n\n".join(blocks) + "\n"
    if utf8_bytes(summary) > MAX_SUMMARY_BYTES:
        summary = clip_utf8(summary, MAX_SUMMARY_BYTES - 1, suffix="") + "\n"
    return summary
