"""The real fabric-lsp server with injected engine faults, for the e2e tests of failure
and cancellation paths (tests/e2e/test_lsp_progress_cancel.py). Fault injection lives
here, in the tests, never in production code.

FABRIC_TEST_FAULTS="fabric/sessions=fail,fabric/recall=slow": "fail" raises inside the
request; "slow" works for up to 60 s, reporting progress and honouring the CancelToken
like an engine loop.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

from fabric_lsp.engine.activity import report
from fabric_lsp.handlers import request_runner

FAULTS: dict[str, str] = dict(
    item.split("=", 1) for item in os.environ.get("FABRIC_TEST_FAULTS", "").split(",") if "=" in item
)


def _injected(method: str, kind: str) -> Any:
    def work(params: Any, cancel: Any, activity: Any) -> Any:
        if kind == "fail":
            raise RuntimeError(f"injected fault in {method}")
        deadline = time.monotonic() + 60.0
        step = 0
        while time.monotonic() < deadline:
            cancel.check()
            report(activity, f"Injected slow work, step {step}", min(99, step))
            step += 1
            time.sleep(0.02)  # the simulated engine's unit of work
        return None

    return work


_real_run_request = request_runner.run_request


async def run_request(server: Any, method: str, raw_params: Any, work: Any, **kwargs: Any) -> Any:
    if method in FAULTS:
        work = _injected(method, FAULTS[method])
    return await _real_run_request(server, method, raw_params, work, **kwargs)


request_runner.run_request = run_request  # before the handler modules import it

if __name__ == "__main__":
    from fabric_lsp.cli import main

    sys.exit(main(sys.argv[1:]))
