"""Drive real Pi in RPC mode: JSON lines in, events out (split on \\n only)."""

from __future__ import annotations

import json
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


class PiRpc:
    def __init__(self, node: Path, cli: Path, args: list[str], *, cwd: Path, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            [str(node), str(cli), "--mode", "rpc", *args],
            cwd=cwd,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self.events: list[dict[str, Any]] = []
        self._cond = threading.Condition()
        self._n = 0
        self._stderr: list[bytes] = []
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=lambda: self._stderr.extend(iter(self.proc.stderr.readline, b"")), daemon=True).start()

    def _read(self) -> None:
        buf = b""
        assert self.proc.stdout is not None
        while True:
            chunk = self.proc.stdout.read1(65536)
            if not chunk:
                break
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                if not line.strip():
                    continue
                try:
                    obj = json.loads(line)
                except ValueError:
                    continue
                with self._cond:
                    self.events.append(obj)
                    self._cond.notify_all()

    def send(self, cmd: dict[str, Any]) -> str:
        self._n += 1
        cid = f"c{self._n}"
        data = json.dumps({"id": cid, **cmd}, ensure_ascii=False) + "\n"
        assert self.proc.stdin is not None
        self.proc.stdin.write(data.encode())
        self.proc.stdin.flush()
        return cid

    def wait(self, pred: Callable[[dict[str, Any]], bool], timeout: float = 60.0, start: int = 0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        with self._cond:
            i = start
            while True:
                while i < len(self.events):
                    if pred(self.events[i]):
                        return self.events[i]
                    i += 1
                left = deadline - time.monotonic()
                if left <= 0 or self.proc.poll() is not None:
                    raise TimeoutError(
                        f"no matching event; last: {self.events[-5:]}; stderr: {b''.join(self._stderr)[-2000:]!r}"
                    )
                self._cond.wait(left)

    def call(self, cmd: dict[str, Any], timeout: float = 60.0) -> dict[str, Any]:
        cid = self.send(cmd)
        return self.wait(lambda e: e.get("type") == "response" and e.get("id") == cid, timeout)

    def mark(self) -> int:
        with self._cond:
            return len(self.events)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
