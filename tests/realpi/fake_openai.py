"""A scripted OpenAI-compatible chat-completions server on 127.0.0.1 for offline Pi runs.

Every request body is kept (and written to a numbered file when `log_dir` is given): it
is the evidence of what Pi sent to the model. Replies stream one canned text answer as
SSE `chat.completion.chunk` frames, then usage, then `[DONE]`.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

# A responder maps a request body to a reply: {"text": str},
# {"tool_call": {"id": str, "name": str, "arguments": dict}}, or
# {"http_error": {"status": int, "message": str}} (an HTTP error reply: Pi records an
# assistant message with stopReason "error"; 5xx are retried when Pi's retry is on).
Responder = Callable[[dict[str, Any]], dict[str, Any]]


class FakeOpenAI:
    def __init__(
        self,
        answer: str = "Done.",
        log_dir: Path | None = None,
        responder: Responder | None = None,
        realistic_usage: bool = False,
    ) -> None:
        self.answer = answer
        self.realistic_usage = realistic_usage
        self.responder = responder
        self.log_dir = log_dir
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # keep pytest output clean
                pass

            def do_GET(self) -> None:  # /v1/models, should Pi ask
                body = json.dumps({"object": "list", "data": []}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = {"unparsed": raw.decode("utf-8", "replace")}
                owner._record(self.path, body)
                reply = owner.responder(body) if owner.responder is not None else {"text": owner.answer}
                if "http_error" in reply:
                    err = reply["http_error"]
                    data = json.dumps(
                        {
                            "error": {
                                "message": err.get("message", "error"),
                                "type": "fake_error",
                                "code": err.get("status", 500),
                            }
                        }
                    ).encode()
                    self.send_response(int(err.get("status", 500)))
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.send_header("Connection", "close")
                    self.end_headers()
                    self.wfile.write(data)
                    self.close_connection = True
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Connection", "close")
                self.end_headers()
                model = body.get("model", "fake") if isinstance(body, dict) else "fake"
                prompt_tokens = owner._prompt_tokens(body)
                for frame in owner._frames(model, reply, prompt_tokens):
                    self.wfile.write(b"data: " + frame + b"\n\n")
                    self.wfile.flush()
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()
                self.close_connection = True

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def _record(self, path: str, body: Any) -> None:
        with self._lock:
            n = len(self.requests)
            self.requests.append({"path": path, "body": body})
        if self.log_dir is not None:
            self.log_dir.mkdir(parents=True, exist_ok=True)
            (self.log_dir / f"request-{n:03d}.json").write_text(json.dumps(body, indent=1, ensure_ascii=False))

    def _prompt_tokens(self, body: Any) -> int:
        """120 by default; with `realistic_usage`, about what the request holds (chars/4),
        so that Pi's tokensBefore and the Fabric budget see a plausible context size."""
        if not self.realistic_usage or not isinstance(body, dict):
            return 120
        return max(1, len(json.dumps(body.get("messages", []), ensure_ascii=False)) // 4)

    def _frames(self, model: str, reply: dict[str, Any], prompt_tokens: int = 120) -> list[bytes]:
        def chunk(choices: list[dict[str, Any]], **extra: Any) -> bytes:
            obj = {
                "id": "chatcmpl-fake",
                "object": "chat.completion.chunk",
                "created": 0,
                "model": model,
                "choices": choices,
                **extra,
            }
            return json.dumps(obj).encode()

        frames = [chunk([{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}])]
        if "tool_call" in reply:
            call = reply["tool_call"]
            frames.append(
                chunk(
                    [
                        {
                            "index": 0,
                            "delta": {
                                "tool_calls": [
                                    {
                                        "index": 0,
                                        "id": call["id"],
                                        "type": "function",
                                        "function": {"name": call["name"], "arguments": ""},
                                    }
                                ]
                            },
                            "finish_reason": None,
                        }
                    ]
                )
            )
            frames.append(
                chunk(
                    [
                        {
                            "index": 0,
                            "delta": {
                                "tool_calls": [{"index": 0, "function": {"arguments": json.dumps(call["arguments"])}}]
                            },
                            "finish_reason": None,
                        }
                    ]
                )
            )
            finish = "tool_calls"
        else:
            frames.append(chunk([{"index": 0, "delta": {"content": reply["text"]}, "finish_reason": None}]))
            finish = "stop"
        frames.append(chunk([{"index": 0, "delta": {}, "finish_reason": finish}]))
        frames.append(
            chunk(
                [],
                usage={
                    "prompt_tokens": prompt_tokens,
                    "completion_tokens": 3,
                    "total_tokens": prompt_tokens + 3,
                    "prompt_tokens_details": {"cached_tokens": 0},
                },
            )
        )
        return frames

    def __enter__(self) -> FakeOpenAI:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()
