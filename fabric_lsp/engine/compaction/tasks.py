"""The previews as named tasks of plain arguments, so one call runs the same in the
calling thread or in a worker process (engine/procpool.py): `run_task(name, kwargs,
cancel, activity)` with `kwargs` holding `source` (the session path) and the keyword
options of `preview_compaction` / `preview_branch_summary`, all already resolved by the
caller (engine_owner.py). Stateless: the result depends on the bytes read and the arguments.
"""

from __future__ import annotations

from typing import Any

from fabric_lsp.engine.activity import ActivitySink, CancelToken

from .api import preview_branch_summary, preview_compaction
from .task_names import BRANCH_SUMMARY_PREVIEW, COMPACTION_PREVIEW

__all__ = ["BRANCH_SUMMARY_PREVIEW", "COMPACTION_PREVIEW", "run_task"]

_TASKS = {COMPACTION_PREVIEW: preview_compaction, BRANCH_SUMMARY_PREVIEW: preview_branch_summary}


def run_task(
    name: str, kwargs: dict[str, Any], cancel: CancelToken | None = None, activity: ActivitySink | None = None
) -> dict[str, Any]:
    options = dict(kwargs)
    source = options.pop("source")
    return _TASKS[name](source, cancel=cancel, activity=activity, **options)
