"""Standard LSP features: hover on Pi session JSONL lines and on entry references,
go-to-definition from a reference to its JSONL line, and `workspace/symbol` as
project-scope recall."""

from __future__ import annotations

import json
import logging
import os
import re
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

import cachetools
from lsprotocol import types
from pygls.uris import to_fs_path

from fabric_lsp import protocol
from fabric_lsp.engine.entry_preview import entry_text, render_entry
from fabric_lsp.engine.references import EntryReference, reference_at
from fabric_lsp.engine.session import DEFAULT_MAX_LINE_BYTES, parse_json_line, read_session
from fabric_lsp.engine.session.projection import EDIT_NEEDLE, context_edit_marks, file_context_edit_marks
from fabric_lsp.engine.session.regular_file import NotReadable, read_regular_file
from fabric_lsp.engine_owner import DomainError
from fabric_lsp.handlers.registry import feature
from fabric_lsp.handlers.request_runner import run_request

if TYPE_CHECKING:
    from fabric_lsp.server import FabricServer

HOVER = types.TEXT_DOCUMENT_HOVER
DEFINITION = types.TEXT_DOCUMENT_DEFINITION
SYMBOL = types.WORKSPACE_SYMBOL

log = logging.getLogger(__name__)

_logs: cachetools.LRUCache[tuple[Any, ...], Any] = cachetools.LRUCache(maxsize=8)
_logs_lock = threading.Lock()

# a buffer without this text holds no Pi 1.x context edit (session/projection.py)
_EDIT_NEEDLE_TEXT = EDIT_NEEDLE.decode()


def _session_header(first_line: str) -> dict[str, Any] | None:
    """Pi's rule: a session file starts with {"type":"session","id":<string>}."""
    ok, value = parse_json_line(first_line.encode("utf-8", "surrogatepass"))
    if not ok:
        return None
    if isinstance(value, dict) and value.get("type") == "session" and isinstance(value.get("id"), str):
        return value
    return None


def _read_log(ls: FabricServer, method: str, path: Path) -> Any:
    st = os.stat(path)
    key = (str(path), st.st_size, st.st_mtime_ns, st.st_ino)
    with _logs_lock:
        hit = _logs.get(key)
    if hit is not None:
        return hit
    log = read_session(path)
    with _logs_lock:
        _logs[key] = log
    return log


def find_entry(ls: FabricServer, method: str, ref: EntryReference) -> tuple[Path, Any, Any]:
    """(session file, SessionLog, EntryRecord) of a reference; DomainError when absent."""
    path = ls.engines.session_path(ref.session_id)
    log = _read_log(ls, method, path)
    record = None
    for rec in log.records:  # last duplicate wins, as in Pi
        if rec.id == ref.entry_id:
            record = rec
    if record is None:
        raise DomainError("address_not_found", f'Entry "{ref.entry_id}" was not found in session {ref.session_id}.')
    return path, log, record


_doc_lines: cachetools.LRUCache[tuple[str, int], list[str]] = cachetools.LRUCache(maxsize=4)


def _lines(doc: Any) -> list[str]:
    """The document's lines, split once per (uri, version): session files can be tens
    of MB and every hover would otherwise split them again."""
    if doc.version is None:
        return doc.lines
    key = (doc.uri, doc.version)
    lines = _doc_lines.get(key)
    if lines is None:
        lines = _doc_lines[key] = doc.lines
    return lines


def _server_position(doc: Any, lines: list[str], position: types.Position) -> tuple[int, int]:
    pos = doc.position_codec.position_from_client_units(lines, position)
    return pos.line, pos.character


# A URI the client never opened is read from disk only when it is a regular file of at
# most this size, off the event loop (pygls would read anything, on the loop).
UNOPENED_MAX_BYTES = DEFAULT_MAX_LINE_BYTES


async def _document(ls: FabricServer, method: str, params: Any) -> tuple[Any, list[str]] | None:
    """(document, lines) of a hover/definition target: the client's open document, else a
    regular file on disk (bounded, read in the engine executor); None when neither."""
    uri = params.text_document.uri
    doc = ls.workspace.text_documents.get(unquote(uri))
    if doc is not None:
        return doc, _lines(doc)
    doc = ls.workspace.get_text_document(uri)  # lazy: its text is never touched here
    path = to_fs_path(uri) if uri.startswith("file:") else None
    if not path:
        return None

    def work(_p: Any, cancel: Any, activity: Any) -> list[str] | None:
        try:
            data = read_regular_file(path, UNOPENED_MAX_BYTES)
        except (OSError, NotReadable) as err:
            log.info("%s: not reading %s: %s", method, path, err)
            return None
        return data.decode("utf-8", "replace").splitlines(True)

    lines = await run_request(ls, method, None, work, title="Fabric: reading the session", long=False, params=params)
    return (doc, lines) if lines is not None else None


def _hover_kind(ls: FabricServer) -> types.MarkupKind:
    """Markdown unless the client declared hover formats without it."""
    hover = getattr(getattr(ls.client_capabilities, "text_document", None), "hover", None)
    formats = getattr(hover, "content_format", None)
    if formats and types.MarkupKind.Markdown not in formats:
        return types.MarkupKind.PlainText
    return types.MarkupKind.Markdown


def _markdown(value: str, ls: FabricServer | None = None) -> types.Hover:
    kind = _hover_kind(ls) if ls is not None else types.MarkupKind.Markdown
    return types.Hover(contents=types.MarkupContent(kind=kind, value=value))


@feature(HOVER)
async def hover(ls: FabricServer, params: types.HoverParams) -> types.Hover | None:
    source = await _document(ls, HOVER, params)
    if source is None:
        return None
    doc, lines = source
    try:
        line_no, char = _server_position(doc, lines, params.position)
    except Exception:
        return None
    if line_no >= len(lines):
        return None
    line = lines[line_no].rstrip("\r\n")
    ref = reference_at(line, char)
    if ref is not None:

        def work(_p: Any, cancel: Any, activity: Any) -> str:
            try:
                path, log, rec = find_entry(ls, HOVER, ref)
            except DomainError as err:
                return f"**{ref.text}**: {err.message}"
            sid = (log.header or {}).get("id", ref.session_id)
            marks = file_context_edit_marks(str(path), branches="all") or {}
            return render_entry(
                rec.raw,
                session_id=sid,
                line=rec.line,
                session_file=str(path),
                context_edit=marks.get(rec.id) if isinstance(rec.id, str) else None,
            )

        text = await run_request(ls, HOVER, None, work, title="Fabric: entry preview", long=False, params=params)
        return _markdown(text, ls)
    if not lines or not line.strip():
        return None
    path = doc.path if getattr(doc, "path", None) else None

    def render(_p: Any, cancel: Any, activity: Any) -> str | None:
        # one line can be 64 MiB: parse and render it off the event loop
        header = _session_header(lines[0])
        if header is None:
            return None
        ok, raw = parse_json_line(line.encode("utf-8", "surrogatepass"))
        if not ok:
            return f"**Malformed line {line_no + 1}**: not valid JSON, so Pi skips it."
        if not isinstance(raw, dict):
            return f"**Line {line_no + 1}** is not a JSON object, so Pi skips it."
        eid = raw.get("id")
        mark = None
        if isinstance(eid, str) and any(_EDIT_NEEDLE_TEXT in text for text in lines):
            # the buffer as the client has it (Pi 1.x context edits: session/projection.py)
            mark = context_edit_marks("".join(lines).encode("utf-8", "surrogatepass"), branches="all").get(eid)
        return render_entry(raw, session_id=header["id"], line=line_no, session_file=path, context_edit=mark)

    text = await run_request(ls, HOVER, None, render, title="Fabric: entry preview", long=False, params=params)
    return _markdown(text, ls) if text is not None else None


@feature(DEFINITION)
async def definition(ls: FabricServer, params: types.DefinitionParams) -> list[types.Location] | None:
    source = await _document(ls, DEFINITION, params)
    if source is None:
        return None
    doc, lines = source
    try:
        line_no, char = _server_position(doc, lines, params.position)
    except Exception:
        return None
    if line_no >= len(lines):
        return None
    ref = reference_at(lines[line_no].rstrip("\r\n"), char)
    if ref is None:
        return await _definition_in_session(ls, params, doc, lines, line_no, char)

    def work(_p: Any, cancel: Any, activity: Any) -> Any:
        try:
            path, _log, rec = find_entry(ls, DEFINITION, ref)
        except DomainError:
            return None
        return path, rec.line

    found = await run_request(ls, DEFINITION, None, work, title="Fabric: go to entry", long=False, params=params)
    if found is None:
        return None
    path, line = found
    start = types.Position(line=line, character=0)
    return [types.Location(uri=path.as_uri(), range=types.Range(start=start, end=start))]


_JSON_STRING = re.compile(r'"((?:[^"\\]|\\.)*)"')


def entry_line_in(lines: list[str], entry_id: str, cancel: Any = None) -> int | None:
    """0-based line of the entry with this id in a session's lines (the last duplicate
    wins, as in Pi); None when absent. Cheap substring test before parsing a line."""
    needle = json.dumps(entry_id)
    found = None
    for i, line in enumerate(lines):
        if i % 4096 == 0 and cancel is not None:
            cancel.check()
        if needle not in line:
            continue
        ok, value = parse_json_line(line.encode("utf-8", "surrogatepass"))
        if not ok:
            continue
        if isinstance(value, dict) and value.get("id") == entry_id and value.get("type") != "session":
            found = i
    return found


async def _definition_in_session(
    ls: FabricServer, params: Any, doc: Any, lines: list[str], line_no: int, char: int
) -> Any:
    """In a session file, a JSON string that is another entry's id (a `parentId`,
    `firstKeptEntryId`, `fromId`…) goes to that entry's line."""
    if not lines:
        return None

    def work(_p: Any, cancel: Any, activity: Any) -> Any:
        if _session_header(lines[0]) is None:
            return None
        target = next((m.group(1) for m in _JSON_STRING.finditer(lines[line_no]) if m.start() < char < m.end()), None)
        if not target or "\\" in target:
            return None
        return entry_line_in(lines, target, cancel)

    line = await run_request(ls, DEFINITION, None, work, title="Fabric: go to entry", long=False, params=params)
    if line is None or line == line_no:
        return None
    start = types.Position(line=line, character=0)
    return [types.Location(uri=doc.uri, range=types.Range(start=start, end=start))]


def _symbol_name(text: str, limit: int = 80) -> str:
    first = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    return first if len(first) <= limit else first[: limit - 1] + "…"


def recall_to_symbols(result: protocol.RecallResult) -> list[types.SymbolInformation]:
    """Matched entries of a recall result as symbols located at their JSONL lines."""
    out: list[types.SymbolInformation] = []
    for item in result.items:
        match item:
            case protocol.SegmentItem(segment=seg):
                uri = Path(seg.session_file).as_uri()
                for entry in seg.entries:
                    if not entry.matched:
                        continue
                    pos = types.Position(line=entry.line, character=0)
                    label = entry.role or entry.type or "entry"
                    out.append(
                        types.SymbolInformation(
                            name=_symbol_name(entry.text) or f"{label} {entry.entry_id}",
                            kind=types.SymbolKind.String,
                            location=types.Location(uri=uri, range=types.Range(start=pos, end=pos)),
                            container_name=f"{seg.session_id} · {label}",
                        )
                    )
            case protocol.PointerItem(pointer=ptr):
                pos = types.Position(line=0, character=0)
                out.append(
                    types.SymbolInformation(
                        name=f"session {ptr.session_id} (cold; matches {', '.join(ptr.matched_terms)})",
                        kind=types.SymbolKind.File,
                        location=types.Location(
                            uri=Path(ptr.session_file).as_uri(), range=types.Range(start=pos, end=pos)
                        ),
                        container_name=ptr.cwd or None,
                    )
                )
    return out


@feature(SYMBOL)
async def workspace_symbol(
    ls: FabricServer, params: types.WorkspaceSymbolParams
) -> list[types.SymbolInformation] | None:
    query = params.query.strip()
    if not query:
        return []

    def work(_p: Any, cancel: Any, activity: Any) -> Any:
        decoded = protocol.decode_params(protocol.RECALL, {"query": query, "scope": "project", "pageSize": 100})
        return ls.engines.recall(decoded, ls.default_cwd(), cancel, activity)

    result = await run_request(
        ls, SYMBOL, None, work, title="Fabric: searching sessions", params=params, memory=True, encode=False
    )
    return recall_to_symbols(result)


__all__ = ["entry_text", "find_entry", "recall_to_symbols"]
