"""The LSP base protocol (header part, then content part) on the server's input.

pygls' reader (`pygls.io_.run_async`) reads `Content-Length` bytes at once (a claim of
10^20 bytes kills the process) and ignores any header it cannot parse, so a lowercase,
non-numeric or too-small header leaves the server alive but deaf. This reader:

* accepts header names in any case and `\\n` as well as `\\r\\n` line ends;
* refuses a `Content-Length` over `MAX_CONTENT_LENGTH` without allocating it (the body
  buffer only ever holds bytes that actually arrived);
* on any malformed header (not a number, over the cap, missing, a line over
  `MAX_HEADER_LINE` bytes, more than `MAX_HEADER_LINES` lines) logs the reason and skips
  to the next `Content-Length:` header in the stream; a body that is not JSON is logged
  and, when it holds a later header (its length was too large), reading resumes there;
* when a body stalls `BODY_STALL_S` short of its length and what did arrive is a whole
  JSON message, takes that (a too-large length never leaves a request unanswered);
* refuses a message nested deeper than `MAX_MESSAGE_DEPTH` (answered by the protocol's
  `reject_too_deep`), so no recursion limit is ever reached while handling one;
* ends only at end of input (also inside a header or body), with a logged reason.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Awaitable, Callable
from typing import Any

log = logging.getLogger("fabric_lsp.framing")

MAX_CONTENT_LENGTH = 256 * 1024 * 1024  # 256 MiB: a didOpen of any session an editor can hold
MAX_HEADER_LINE = 8192
MAX_HEADER_LINES = 32
MAX_MESSAGE_DEPTH = 128
BODY_STALL_S = 2.0
READ_CHUNK = 1 << 16

_HEADER_START = re.compile(rb"content-length[ \t]*:", re.IGNORECASE)
NESTED = "\udfff<nested>"  # stands for a nested value in `top_level` (no client id looks like it)
_NESTED_JSON = b'"\\udfff<nested>"'
_KEEP_FOR_MATCH = len(b"content-length:") + 8  # a header split across two reads
_TOKEN = re.compile(rb"[!#$%&'*+.^_`|~0-9A-Za-z-]+")  # an HTTP header name
_JSON_TOKEN = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]')


class _BadHeader(Exception):
    pass


class FrameReader:
    """Message bodies from a byte stream. `read_some(n)` returns at most `n` bytes as
    soon as any are available, b"" at end of input."""

    def __init__(self, read_some: Callable[[int], Awaitable[bytes]]) -> None:
        self._read_some = read_some
        self._buf = bytearray()
        self._eof = False
        self._pending: asyncio.Future[bytes] | None = None
        self._resync = False
        self._skipped = 0

    async def _fill(self, timeout: float | None = None) -> bool:
        """Read more input; False at end of input or when nothing came within `timeout`."""
        if self._eof:
            return False
        if self._pending is None:
            self._pending = asyncio.ensure_future(self._read_some(READ_CHUNK))
        done, _ = await asyncio.wait({self._pending}, timeout=timeout)
        if not done:
            return False  # the read stays pending: the next _fill picks it up
        chunk = self._pending.result()
        self._pending = None
        if not chunk:
            self._eof = True
            return False
        self._buf.extend(chunk)
        return True

    def push_back(self, data: bytes) -> None:
        self._buf[:0] = data

    def resync(self, why: str) -> None:
        """Log `why` and skip input up to the next `Content-Length:` header."""
        log.warning("LSP input: %s; skipping to the next Content-Length header", why)
        self._resync = True

    async def _find_header(self) -> bool:
        while True:
            m = _HEADER_START.search(self._buf)
            if m is not None:
                self._skipped += m.start()
                del self._buf[: m.start()]
                log.warning("LSP input: resynchronised after skipping %d byte(s)", self._skipped)
                self._resync, self._skipped = False, 0
                return True
            drop = max(0, len(self._buf) - _KEEP_FOR_MATCH)
            self._skipped += drop
            del self._buf[:drop]
            if not await self._fill():
                return False

    async def _line(self, start: int) -> tuple[bytes, int] | None:
        """The header line at `start` without its line end, and the offset after it;
        None at EOF. The buffer is not consumed."""
        while True:
            nl = self._buf.find(b"\n", start, start + MAX_HEADER_LINE + 1)
            if nl >= 0:
                return bytes(self._buf[start:nl]).rstrip(b"\r"), nl + 1
            if len(self._buf) - start > MAX_HEADER_LINE:
                raise _BadHeader(f"a header line longer than {MAX_HEADER_LINE} bytes")
            if not await self._fill():
                return None

    async def _header(self) -> int | None:
        """The Content-Length of the next well-formed header block; None at EOF."""
        while True:
            if self._resync and not await self._find_header():
                log.warning("LSP input ended while skipping malformed input")
                return None
            try:
                length = await self._header_block()
            except _BadHeader as err:
                # search again from just after the block's start: a header may follow
                # garbage on the same line (a too-small Content-Length)
                del self._buf[:1]
                self.resync(str(err))
                continue
            if length is None and self._buf.strip():
                log.warning("LSP input ended inside a header")
            return length

    async def _header_block(self) -> int | None:
        """Parse one header block at the buffer's start; consume it only when it is good."""
        length: int | None = None
        lines = 0
        off = 0
        while True:
            got = await self._line(off)
            if got is None:
                return None
            line, nxt = got
            if not line.strip():
                if lines == 0:  # a stray blank line between messages
                    del self._buf[:nxt]
                    continue
                if length is None:
                    raise _BadHeader("a header without Content-Length")
                del self._buf[:nxt]
                return length
            lines += 1
            if lines > MAX_HEADER_LINES:
                raise _BadHeader(f"more than {MAX_HEADER_LINES} header lines")
            name, sep, value = line.partition(b":")
            if not sep or not _TOKEN.fullmatch(name.strip()):
                raise _BadHeader(f"a malformed header line {line[:60]!r}")
            if name.strip().lower() == b"content-length":
                value = value.strip()
                if not value.isdigit():
                    raise _BadHeader(f"Content-Length {value[:40]!r} is not a number")
                if len(value) > 15 or int(value) > MAX_CONTENT_LENGTH:
                    raise _BadHeader(
                        f"Content-Length {value[:24].decode()} is over the cap of {MAX_CONTENT_LENGTH} bytes"
                    )
                if length is not None and int(value) != length:
                    raise _BadHeader("two different Content-Length headers")
                length = int(value)
            off = nxt

    async def _body(self, length: int) -> bytes | None:
        while len(self._buf) < length:
            arrived = len(self._buf)
            if await self._fill(BODY_STALL_S if arrived else None):
                continue
            if self._eof:
                log.warning("LSP input ended inside a message body (%d of %d bytes)", len(self._buf), length)
                return None
            if _whole_json(self._buf):  # stalled short of its length, but complete
                log.warning("LSP input: Content-Length said %d bytes, the message had %d", length, arrived)
                body = bytes(self._buf)
                self._buf.clear()
                return body
        body = bytes(self._buf[:length])
        del self._buf[:length]
        return body

    async def next_body(self) -> bytes | None:
        """The next message body; None at end of input."""
        while True:
            length = await self._header()
            if length is None:
                return None
            body = await self._body(length)
            if body is None:
                return None
            if body:
                return body
            log.warning("LSP input: a message with Content-Length 0")


def _whole_json(data: bytearray) -> bool:
    try:
        return isinstance(json.loads(bytes(data)), (dict, list))
    except (ValueError, RecursionError):
        return False


def nesting_exceeds(body: bytes, limit: int) -> bool:
    """True when `body` (JSON) nests arrays/objects deeper than `limit`; cheap when the
    body has few brackets (every LSP message), a C-speed token scan otherwise."""
    if body.count(b"[") + body.count(b"{") <= limit:
        return False
    depth = 0
    for m in _JSON_TOKEN.finditer(body):
        tok = m.group()
        if tok in (b"[", b"{"):
            depth += 1
            if depth > limit:
                return True
        elif tok in (b"]", b"}"):
            depth -= 1
    return False


def top_level(body: bytes) -> Any:
    """The body's top-level JSON with every nested array/object replaced by `NESTED`:
    enough to read `jsonrpc`, `id` and `method` of a message too deep to parse."""
    out = bytearray()
    depth = 0
    pos = 0
    for m in _JSON_TOKEN.finditer(body):
        if depth <= 1:
            out += body[pos : m.start()]  # numbers, literals, `,` and `:` before the token
        tok = m.group()
        if tok in (b"[", b"{"):
            if depth == 0:
                out += tok
            elif depth == 1:
                out += _NESTED_JSON
            depth += 1
        elif tok in (b"]", b"}"):
            if depth == 1:
                out += tok
            depth = max(0, depth - 1)
        elif depth <= 1:
            out += tok  # a string: a key or a value of the top level
        pos = m.end()
    if depth <= 1:
        out += body[pos:]
    try:
        return json.loads(bytes(out))
    except ValueError:
        return None


def _decode(body: bytes, reader: FrameReader, protocol: Any) -> Any:
    try:
        return json.loads(body, object_hook=protocol.structure_message)
    except ValueError:
        m = _HEADER_START.search(body)
        if m is None:
            raise
    # The length was too large: the body ran into the next message's header. Read on
    # from that header, and take what came before it when it is a whole message.
    reader.push_back(body[m.start() :])
    message = json.loads(body[: m.start()], object_hook=protocol.structure_message)
    log.warning("LSP input: a Content-Length was too large (the body ran into the next header)")
    return message


async def serve(
    reader: FrameReader, protocol: Any, stop: Callable[[], bool], room: Callable[[], Awaitable[None]] | None = None
) -> None:
    """Hand every message body to `protocol` (pygls' `structure_message` /
    `handle_message`, plus `reject_too_deep(top_level_json)`) until end of input.
    `room()`, when given, is awaited before each message: the output's back-pressure
    (outbox.py pauses input while the client does not read its output)."""
    while not stop():
        if room is not None:
            await room()
        body = await reader.next_body()
        if body is None:
            break
        try:
            if nesting_exceeds(body, MAX_MESSAGE_DEPTH):
                protocol.reject_too_deep(top_level(body))
                continue
            message = _decode(body, reader, protocol)
        except ValueError:  # not JSON (UnicodeDecodeError included)
            log.warning("LSP input: a message body that is not JSON (%d bytes) was ignored", len(body))
            continue
        try:
            protocol.handle_message(message)
        except RecursionError:
            protocol.reject_too_deep(top_level(body))
        except Exception:
            log.exception("unable to handle a message")
