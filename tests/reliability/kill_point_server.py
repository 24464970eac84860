"""The real `fabric-lsp` stdio server with a kill point in the memory cache writer.

FABRIC_KILL_AT="<phase>:<n>" makes the process SIGKILL itself at the n-th cache record
write (1-based), at <phase>:
  half     - after writing half of the record's bytes to the temp file
  rename   - right before the temp file is renamed into place
  renamed  - right after the rename
Nothing else changes: this is the server's own code, stopped at the worst moments.
"""

from __future__ import annotations

import os
import signal
import sys
import types


def _install(spec: str) -> None:
    from fabric_lsp.engine.memory import disk_cache

    phase, _, n = spec.partition(":")
    target = int(n or "1")
    count = {"writes": 0}
    real = os

    def die() -> None:
        real.kill(real.getpid(), signal.SIGKILL)

    def write(fd: int, data) -> int:
        count["writes"] += 1
        if phase == "half" and count["writes"] == target and len(data) > 1:
            real.write(fd, bytes(data[: len(data) // 2]))
            die()
        return real.write(fd, data)

    def replace(src, dst) -> None:
        if phase == "rename" and count["writes"] >= target:
            die()
        real.replace(src, dst)
        if phase == "renamed" and count["writes"] >= target:
            die()

    proxy = types.SimpleNamespace(**{k: getattr(real, k) for k in dir(real) if not k.startswith("__")})
    proxy.write = write
    proxy.replace = replace
    disk_cache.os = proxy  # only the cache writer sees the kill points


if __name__ == "__main__":
    spec = os.environ.get("FABRIC_KILL_AT")
    if spec:
        _install(spec)
    from fabric_lsp.cli import main

    sys.exit(main(sys.argv[1:]))
