"""`fabric/fileHistory` and the file-history CodeLens: what past Pi sessions did to the
file open in the editor (engine/memory/file_history.py holds the logic)."""

from __future__ import annotations

import os
import stat
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from lsprotocol import types
from pygls.uris import to_fs_path

from fabric_lsp import protocol
from fabric_lsp.handlers.documents import _session_header
from fabric_lsp.handlers.registry import feature
from fabric_lsp.handlers.request_runner import run_request

if TYPE_CHECKING:
    from fabric_lsp.server import FabricServer

CODE_LENS = types.TEXT_DOCUMENT_CODE_LENS
LENS_COMMAND = "fabric.fileHistory"


@feature(protocol.FILE_HISTORY)
async def file_history(ls: FabricServer, raw: Any) -> Any:
    def work(params: protocol.FileHistoryParams, cancel: Any, activity: Any) -> Any:
        return ls.engines.file_history(params, ls.default_cwd(), cancel, activity)

    return await run_request(ls, protocol.FILE_HISTORY, raw, work, title="Fabric: file history", memory=True)


def lens_path(ls: FabricServer, uri: str) -> str | None:
    """The path a lens would describe: a `file:` document that is not a Pi session log
    (not under the session dir, and not starting with a session header)."""
    from fabric_lsp.engine.memory.file_history import is_under, normalize_path  # lazy: start-up time

    if not uri.startswith("file:"):
        return None
    path = normalize_path(to_fs_path(uri) or "")
    if path is None or is_under(path, str(ls.config.session_dir)):
        return None
    # Only a document the client opened is read here; pygls would read any other URI
    # lazily, on the event loop (a device or a FIFO included): see `unopened_session`.
    doc = ls.workspace.text_documents.get(unquote(uri))
    if doc is not None:
        source = doc.source
        end = source.find("\n")
        if _session_header(source if end < 0 else source[:end]) is not None:
            return None
    return path


def unopened_session(path: str) -> bool:
    """For a file the client did not open: True when it is no regular file (never read)
    or a Pi session log (its header is read, at most 8 KiB). Runs off the event loop."""
    from fabric_lsp.engine.session.reader import read_header

    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return True
    except OSError:
        return False  # a file that is gone may still have a history
    return read_header(path) is not None


_VERBS = {"read": "read", "edit": "edited", "write": "written"}


def lens_title(result: protocol.FileHistoryResult) -> str | None:
    """The CodeLens title for a `fabric/fileHistory` result, e.g.
    "Pi: 3 sessions · edited in 01a182b4"; None when no session touched the file."""
    if not result.sessions:
        return None
    newest = result.sessions[0]
    n = len(result.sessions)
    return f"Pi: {n} session{'s' if n != 1 else ''} · {_VERBS[newest.last_action]} in {newest.session_id[:8]}"


@feature(CODE_LENS, types.CodeLensOptions(resolve_provider=False))
async def code_lens(ls: FabricServer, params: types.CodeLensParams) -> list[types.CodeLens]:
    if not ls.config.code_lens:
        return []
    path = lens_path(ls, params.text_document.uri)
    if path is None:
        return []

    opened = unquote(params.text_document.uri) in ls.workspace.text_documents

    def work(_p: Any, cancel: Any, activity: Any) -> Any:
        if not opened and unopened_session(path):
            return None
        decoded = protocol.decode_params(protocol.FILE_HISTORY, {"path": path, "pageSize": 1})
        return ls.engines.file_history(decoded, ls.default_cwd(), cancel, activity)

    result = await run_request(
        ls, CODE_LENS, None, work, title="Fabric: file history", long=False, params=params, memory=True, encode=False
    )
    if result is None:
        return []
    title = lens_title(result)
    if title is None:
        return []
    start = types.Position(line=0, character=0)
    return [
        types.CodeLens(
            range=types.Range(start=start, end=start),
            command=types.Command(title=title, command=LENS_COMMAND, arguments=[{"path": path}]),
        )
    ]
