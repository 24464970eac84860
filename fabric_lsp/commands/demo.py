"""`fabric-lsp demo`: start the real server as a subprocess and speak LSP to it over stdio,
as an editor does, against the bundled example agent dir.

It prints the session list, a recall result, an expansion of the first hit, a hover on
that hit's entry reference and a compaction preview. A step that fails is reported and
fails the demo.

The JSON-RPC framing here is written by hand on purpose: this module is on the CLI path
and must never import pygls.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import fabric_lsp

DEFAULT_QUERY = "convert_anomaly"
REQUEST_TIMEOUT_S = 120.0
# The preview runs at Pi's defaults (keepRecentTokens and reserveTokens from Pi's settings,
# else 20000 / 16384) on the largest example session, which is long enough to compact.
DEMO_CONTEXT_WINDOW = 200000


class LspError(Exception):
    def __init__(self, method: str, code: int, message: str) -> None:
        super().__init__(f"{method}: {message} ({code})")
        self.method = method
        self.code = code
        self.message = message


class StdioLspClient:
    """A minimal LSP client: Content-Length framing, requests with ids, and the answers an
    editor gives to server requests (progress tokens, configuration, registrations)."""

    def __init__(
        self,
        argv: list[str],
        *,
        env: dict[str, str],
        stderr: Any = subprocess.DEVNULL,
        settings: dict[str, Any] | None = None,
        cwd: str | None = None,
    ) -> None:
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, env=env, cwd=cwd
        )
        self._next_id = 0
        self._pending: dict[int, queue.Queue[dict[str, Any]]] = {}
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()
        self.settings = settings or {}
        self.notifications: list[dict[str, Any]] = []
        self.on_notification: Callable[[dict[str, Any]], None] | None = None
        self._reader = threading.Thread(target=self._read_loop, name="demo-lsp-reader", daemon=True)
        self._reader.start()

    # -- framing ------------------------------------------------------------------------

    def _send(self, message: dict[str, Any]) -> None:
        body = json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
        frame = b"Content-Length: %d\r\n\r\n" % len(body) + body
        assert self.proc.stdin is not None
        with self._write_lock:
            self.proc.stdin.write(frame)
            self.proc.stdin.flush()

    def _read_message(self) -> dict[str, Any] | None:
        stream = self.proc.stdout
        assert stream is not None
        length = None
        while True:
            line = stream.readline()
            if not line:
                return None
            line = line.strip()
            if not line:
                break
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value.strip())
        if length is None:
            return None
        body = stream.read(length)
        if len(body) < length:
            return None
        return json.loads(body.decode("utf-8"))

    def _read_loop(self) -> None:
        while True:
            try:
                message = self._read_message()
            except (OSError, ValueError):
                message = None
            if message is None:
                with self._lock:
                    pending = list(self._pending.values())
                for q in pending:
                    q.put({"error": {"code": -32099, "message": "server closed the connection"}})
                return
            if "method" in message and "id" in message:
                self._answer_server_request(message)
            elif "method" in message:
                self.notifications.append(message)
                if self.on_notification is not None:
                    self.on_notification(message)
            else:
                msg_id = message.get("id")
                with self._lock:
                    q = self._pending.get(msg_id) if msg_id is not None else None
                if q is not None:
                    q.put(message)

    def _answer_server_request(self, message: dict[str, Any]) -> None:
        method = message["method"]
        result: Any = None
        if method == "workspace/configuration":
            result = [self.settings.get(item.get("section") or "", None) for item in message["params"]["items"]]
        self._send({"jsonrpc": "2.0", "id": message["id"], "result": result})

    # -- API ----------------------------------------------------------------------------

    def request(self, method: str, params: Any = None, timeout: float = REQUEST_TIMEOUT_S) -> Any:
        with self._lock:
            self._next_id += 1
            msg_id = self._next_id
            q: queue.Queue[dict[str, Any]] = queue.Queue()
            self._pending[msg_id] = q
        self._send({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})
        try:
            reply = q.get(timeout=timeout)
        except queue.Empty:
            raise LspError(method, -32603, f"no answer within {timeout:.0f} s") from None
        finally:
            with self._lock:
                self._pending.pop(msg_id, None)
        if "error" in reply:
            err = reply["error"]
            raise LspError(method, int(err.get("code", 0)), str(err.get("message", "")))
        return reply.get("result")

    def notify(self, method: str, params: Any = None) -> None:
        self._send({"jsonrpc": "2.0", "method": method, "params": params})

    def close(self, timeout: float = 10.0) -> int:
        try:
            self.request("shutdown", None, timeout=timeout)
            self.notify("exit", None)
        except (LspError, OSError):
            pass
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()


# -- the demo --------------------------------------------------------------------------------


def bundled_agent_dir() -> Path | None:
    path = Path(fabric_lsp.__file__).resolve().parent / "examples" / "agent"
    return path if (path / "sessions").is_dir() else None


def fixture_sessions() -> Path | None:
    path = Path(fabric_lsp.__file__).resolve().parents[1] / "tests" / "fixtures" / "real-sessions"
    return path if path.is_dir() else None


def prepare_agent_dir(workdir: Path) -> tuple[Path, str]:
    """A private copy of the example agent dir (the server writes its index there)."""
    agent = workdir / "agent"
    source = bundled_agent_dir()
    if source is not None:
        shutil.copytree(source / "sessions", agent / "sessions")
        origin = "bundled example agent dir"
    elif (fixtures := fixture_sessions()) is not None:
        folder = agent / "sessions" / "--home-user-proj--"
        folder.mkdir(parents=True)
        for f in sorted(fixtures.glob("*.jsonl")):
            shutil.copyfile(f, folder / f.name)
        origin = "tests/fixtures/real-sessions (no bundled example agent dir)"
    else:
        raise SystemExit("fabric-lsp demo: no example agent dir is bundled with this installation")
    for path in sorted(agent.rglob("*.jsonl")):
        os.chmod(path, stat.S_IRUSR | stat.S_IWUSR)
    return agent, origin


def largest_session(agent: Path) -> tuple[Path | None, str | None]:
    """The largest session file (the most to compact; ties by path) and its cwd."""
    files = sorted(agent.glob("sessions/*/*.jsonl"), key=lambda p: (-p.stat().st_size, str(p)))
    if not files:
        return None, None
    newest = files[0]
    try:
        with open(newest, "rb") as fh:
            header = json.loads(fh.readline())
        cwd = header.get("cwd") if isinstance(header, dict) else None
    except (OSError, ValueError):
        cwd = None
    return newest, cwd if isinstance(cwd, str) else None


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + f"\n… ({len(text) - limit} more characters)"


def _section(out: Callable[[str], None], title: str) -> None:
    out("")
    out(f"== {title} " + "=" * max(0, 70 - len(title)))


def run_demo(args: argparse.Namespace, out: Callable[[str], None] = print) -> int:
    as_json = bool(getattr(args, "json", False))
    say = (lambda _s: None) if as_json else out
    with tempfile.TemporaryDirectory(prefix="fabric-lsp-demo-") as tmp:
        workdir = Path(tmp)
        if getattr(args, "agent_dir", None):
            agent, origin = Path(args.agent_dir).expanduser().resolve(), "--agent-dir"
            init_options: dict[str, Any] = {"agentDir": str(agent), "indexDir": str(workdir / "index")}
        else:
            agent, origin = prepare_agent_dir(workdir)
            init_options = {"agentDir": str(agent)}
        own_copy = not getattr(args, "agent_dir", None)
        session_file, cwd = largest_session(agent)
        if own_copy and session_file is not None:
            # The intents step shows a pending intent and cancels it. A file that is not
            # quiet is never committed, so date the private copy in the future.
            future = time.time() + 3600
            os.utime(session_file, (future, future))
        env = dict(os.environ)
        env["PI_CODING_AGENT_DIR"] = str(agent)
        if not own_copy:  # a real agent dir: do not resume (commit) intents left pending there
            env["FABRIC_LSP_INTENTS_AUTOSTART"] = "0"
        log_path = workdir / "server.log"
        with open(log_path, "wb") as log:
            t0 = time.perf_counter()
            client = StdioLspClient([sys.executable, "-m", "fabric_lsp", "serve"], env=env, stderr=log)
            progress: list[str] = []

            def on_note(message: dict[str, Any]) -> None:
                if message["method"] == "$/progress":
                    value = message["params"].get("value", {})
                    if value.get("kind") in ("begin", "report") and (value.get("title") or value.get("message")):
                        progress.append(value.get("message") or value.get("title"))

            client.on_notification = on_note
            report: dict[str, Any] = {"agentDir": str(agent), "source": origin}
            try:
                init = client.request(
                    "initialize",
                    {
                        "processId": os.getpid(),
                        "clientInfo": {"name": "fabric-lsp demo"},
                        "rootUri": Path(cwd).as_uri() if cwd else None,
                        "workspaceFolders": [{"uri": Path(cwd).as_uri(), "name": Path(cwd).name}] if cwd else None,
                        "initializationOptions": init_options,
                        "capabilities": {
                            "window": {"workDoneProgress": True},
                            "workspace": {"configuration": True, "symbol": {}},
                            "textDocument": {"hover": {"contentFormat": ["markdown", "plaintext"]}},
                        },
                    },
                )
                client.notify("initialized", {})
                ready_s = time.perf_counter() - t0
                info = init.get("serverInfo", {})
                say(f"fabric-lsp demo: {info.get('name')} {info.get('version')} answered initialize in {ready_s:.2f} s")
                say(f"agent dir: {agent} ({origin})")
                report["server"] = info
                report["steps"] = steps = {}
                steps["sessions"] = _step(say, "fabric/sessions", lambda: _sessions(client, say))
                recall = _step(say, "fabric/recall", lambda: _recall(client, say, args.query))
                steps["recall"] = recall
                steps["expand"] = _step(say, "fabric/expand", lambda: _expand(client, say, recall))
                if isinstance(steps["expand"], dict) and steps["expand"].get("reference"):
                    steps["hover"] = _step(say, "textDocument/hover", lambda: _hover(client, say, steps["expand"]))
                steps["workspaceSymbol"] = _step(say, "workspace/symbol", lambda: _symbols(client, say, args.query))
                steps["compactionPreview"] = _step(
                    say, "fabric/compactionPreview", lambda: _preview(client, say, session_file)
                )
                if own_copy:
                    steps["intents"] = _step(say, "fabric/compact/*", lambda: _intents(client, say, session_file))
                else:
                    say(
                        "\n(fabric/compact/* skipped with --agent-dir: the demo never leaves intents in a real agent dir)"
                    )
                report["progressMessages"] = len(progress)
                if progress:
                    _section(say, "$/progress seen")
                    for message in progress[:8]:
                        say(f"  {message}")
            finally:
                code = client.close()
            report["serverExitCode"] = code
        if as_json:
            out(json.dumps(report, indent=2, ensure_ascii=False, sort_keys=True))
        else:
            say("")
            say(f"server exited with code {code}")
        failed = [k for k, v in report.get("steps", {}).items() if isinstance(v, dict) and v.get("failed")]
        if failed:
            sys.stderr.write(log_path.read_text(encoding="utf-8", errors="replace")[-4000:])
        return 1 if failed or code != 0 else 0


def _step(say: Callable[[str], None], method: str, fn: Callable[[], Any]) -> Any:
    try:
        return fn()
    except LspError as err:
        say(f"  [{method}] failed: {err.message} ({err.code})")
        return {"failed": err.message, "code": err.code}


def _coverage_words(cov: dict[str, Any]) -> str:
    """The coverage fields in words: truncation is information, other reasons are named."""
    if cov.get("complete"):
        return "coverage complete"
    reasons = list(cov.get("reasons", []))
    words = []
    if "max_entry_chars" in reasons:
        reasons.remove("max_entry_chars")
        from fabric_lsp.engine.memory.config import MemoryConfig  # the demo runs the defaults

        limit = MemoryConfig().max_entry_chars
        words.append(f"text past {limit:,} characters of an entry is not indexed (expand shows it whole)")
    if reasons:
        words.append("incomplete: " + ", ".join(reasons))
    return "; ".join(words) or "coverage incomplete"


def _sessions(client: StdioLspClient, say: Callable[[str], None]) -> Any:
    _section(say, "fabric/sessions (global)")
    result = client.request("fabric/sessions", {"scope": "global", "pageSize": 20})
    for s in result.get("sessions", []):
        say(f"  {s.get('sessionId')}  {s.get('entryCount'):>4} entries  {s.get('tier'):<4}  {s.get('cwd')}")
    say(f"  {result.get('totalItems')} sessions; {_coverage_words(result.get('coverage', {}))}")
    return {"totalItems": result.get("totalItems")}


def _recall(client: StdioLspClient, say: Callable[[str], None], query: str) -> Any:
    _section(say, f'fabric/recall "{query}" (global)')
    result = client.request("fabric/recall", {"query": query, "scope": "global", "pageSize": 3})
    say(_clip(result.get("text", ""), 1500))
    say(
        f"  totalItems={result.get('totalItems')} totalMatches={result.get('totalMatches')} "
        f"authoritative={result.get('authoritative')}; {_coverage_words(result.get('coverage', {}))}"
    )
    first = None
    for item in result.get("items", []):
        if item.get("kind") == "segment":
            seg = item["segment"]
            entry = next((e for e in seg.get("entries", []) if e.get("matched")), None)
            if entry is not None and entry.get("entryId"):
                first = {
                    "session": seg["sessionFile"],
                    "sessionId": seg["sessionId"],
                    "entryId": entry["entryId"],
                    "line": entry.get("line"),
                }
                break
    return {"totalItems": result.get("totalItems"), "first": first}


def _expand(client: StdioLspClient, say: Callable[[str], None], recall: Any) -> Any:
    first = recall.get("first") if isinstance(recall, dict) else None
    _section(say, "fabric/expand (first hit)")
    if not first:
        say("  nothing to expand (recall returned no segment)")
        return None
    result = client.request("fabric/expand", {"session": first["session"], "entryIds": [first["entryId"]]})
    if "error" in result:
        say(f"  {result['error']['code']}: {result['error']['message']}")
        return {"error": result["error"]}
    for e in result.get("expanded", []):
        line = e.get("line")
        where = f"line {line + 1}" if isinstance(line, int) else "line ?"
        say(f"  entry {e.get('entryId')} ({e.get('role') or e.get('type')}), {where} of {result.get('sessionFile')}")
        say(_clip(e.get("text", ""), 1200))
    reference = f"pi-entry:{result.get('sessionId')}/{first['entryId']}"
    return {"entries": len(result.get("expanded", [])), "reference": reference}


def _hover(client: StdioLspClient, say: Callable[[str], None], expanded: Any) -> Any:
    reference = expanded["reference"]
    _section(say, f"textDocument/hover on {reference}")
    uri = "untitled:fabric-demo.md"
    text = f"See {reference} for where it started.\n"
    client.notify(
        "textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "markdown", "version": 1, "text": text}}
    )
    result = client.request(
        "textDocument/hover", {"textDocument": {"uri": uri}, "position": {"line": 0, "character": 8}}
    )
    value = (result or {}).get("contents", {}).get("value", "") if isinstance(result, dict) else ""
    say(_clip(value, 1200) or "  (no hover)")
    return {"chars": len(value)}


def _symbols(client: StdioLspClient, say: Callable[[str], None], query: str) -> Any:
    _section(say, f'workspace/symbol "{query}" (project recall for plain LSP clients)')
    symbols = client.request("workspace/symbol", {"query": query}) or []
    for sym in symbols[:5]:
        loc = sym.get("location", {})
        line = loc.get("range", {}).get("start", {}).get("line", 0)
        say(f"  {sym.get('name')}  [{sym.get('containerName')}]  {Path(loc.get('uri', '')).name}:{line + 1}")
    say(f"  {len(symbols)} symbols")
    return {"symbols": len(symbols)}


def _preview(client: StdioLspClient, say: Callable[[str], None], session_file: Path | None) -> Any:
    _section(say, f"fabric/compactionPreview (largest session, Pi's defaults, contextWindow {DEMO_CONTEXT_WINDOW})")
    if session_file is None:
        say("  no session to preview")
        return None
    result = client.request(
        "fabric/compactionPreview", {"session": str(session_file), "contextWindow": DEMO_CONTEXT_WINDOW}
    )
    if "error" in result:
        say(f"  {result['error']['code']}: {result['error']['message']}")
        return {"error": result["error"]}
    say(
        f"  session {result.get('sessionId')}: outcome={result.get('outcome')} tokensBefore={result.get('tokensBefore')} "
        f"firstKeptEntryId={result.get('firstKeptEntryId')}"
        + (f" reason={result['reason']}" if result.get("reason") else "")
    )
    if result.get("summary"):
        say(_clip(result["summary"], 2500))
    return {"outcome": result.get("outcome"), "summaryChars": len(result.get("summary") or "")}


def _intents(client: StdioLspClient, say: Callable[[str], None], session_file: Path | None) -> Any:
    _section(say, "fabric/compact/request → status → cancel (largest session)")
    if session_file is None:
        say("  no session")
        return None
    session = str(session_file)
    pending = client.request(
        "fabric/compact/request",
        {"session": session, "reason": "demo", "instructions": "Keep the public API notes.", "requestedBy": "demo"},
    )
    intent = pending.get("pending", {})
    say(
        f"  pending intent: requestedBy={intent.get('requestedBy')} reason={intent.get('reason')} "
        f"instructions={intent.get('instructions')!r}"
    )
    status = client.request("fabric/compact/status", {"session": session})
    say(f"  status: settled={status.get('settled')} pending={'yes' if status.get('pending') else 'no'}")
    cancelled = client.request("fabric/compact/cancel", {"session": session})
    say(f"  cancel: cancelled={cancelled.get('cancelled')} (the demo never commits)")
    return {"requested": bool(intent), "cancelled": cancelled.get("cancelled")}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--query", default=DEFAULT_QUERY, help=f'recall query (default "{DEFAULT_QUERY}")')
    p.add_argument("--agent-dir", help="use this agent dir instead of a copy of the bundled example (read-only use)")
    p.add_argument("--json", action="store_true", help="print a JSON summary instead of the walkthrough")


SUBCOMMANDS = {
    "demo": (
        "run the server on the bundled example sessions and show recall, expand and a compaction preview",
        add_arguments,
        run_demo,
    ),
}
