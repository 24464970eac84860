"""Tasks for tests/engine/test_procpool.py, run by a real worker child (this directory is
put on the child's PYTHONPATH by the test) or, for the fallback test, by the test itself."""

from __future__ import annotations

import os
import threading
import time

from fabric_lsp.engine.activity import report


class Unpicklable(Exception):
    def __init__(self, detail: str) -> None:
        super().__init__(f"unpicklable: {detail}")
        self.lock = threading.Lock()  # a lock cannot be pickled


def run(name, kwargs, cancel, activity):
    if name == "echo":
        if activity is not None:
            report(activity, "echo", 50)
        return {"pid": os.getpid(), "kwargs": kwargs}
    if name == "spin":  # an engine loop that honours its CancelToken
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            cancel.check()
            if activity is not None:
                report(activity, "spinning")
            time.sleep(0.01)  # the simulated unit of work
        return "spun for 60 s"
    if name == "deaf":  # never checks its token
        time.sleep(kwargs["seconds"])
        return "slept"
    if name == "value_error":
        raise ValueError("bad value")
    if name == "unpicklable":
        raise Unpicklable("detail")
    if name == "die":
        os._exit(3)
    if name == "holes":  # ~150 MB of malloc'd blocks, one in 64 kept: the heap keeps holes
        blocks = [bytes(1500) for _ in range(100_000)]
        _kept.extend(blocks[::64])
        del blocks
        return len(_kept)
    if name == "small_churn":  # ~28 MB of small objects built and dropped: its minor page faults
        import resource  # (POSIX only)

        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        objects = [(i, str(i)) for i in range(200_000)]
        del objects
        return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
    raise KeyError(name)


_kept: list[bytes] = []
