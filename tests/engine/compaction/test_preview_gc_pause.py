"""A preview pauses the cyclic GC (engine/gcpause.py) and ends the pause only once the
hook's answer it does not return is gone: the collection the allocator starts right after
the pause then traverses the few objects still alive, not the summary's ~15,000 events
(4–12 ms of a 50 MB preview, docs/performance.md)."""

from __future__ import annotations

import gc
import sys
from pathlib import Path
from typing import Any

from fabric_lsp.engine import gcpause
from fabric_lsp.engine.compaction.api import compaction_run, preview_compaction

ROOT = Path(__file__).resolve().parents[3]


class _Recorder:
    """`gc` as gcpause sees it: records how many objects the youngest generation holds
    when the last pause ends."""

    def __init__(self) -> None:
        self.young: list[int] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(gc, name)

    def enable(self) -> None:
        self.young.append(len(gc.get_objects(0)))
        gc.enable()


def test_the_pause_ends_after_the_dropped_hook_is_freed(tmp_path, monkeypatch):
    sys.path.insert(0, str(ROOT / "bench"))
    from corpus import generate_session

    path = generate_session(
        tmp_path / "s.jsonl", target_bytes=1_500_000, seed="gc-pause", cwd="/home/user/projects/orbit"
    )
    gc.collect()
    recorder = _Recorder()
    monkeypatch.setattr(gcpause, "gc", recorder)
    result, hook = compaction_run(str(path))
    assert result["outcome"] == "compacted" and hook is not None
    events = len(hook["compile"]["events"])
    del result, hook
    with_hook = recorder.young[-1]  # (compaction_run's pause ends while its answer is held)
    assert with_hook > events

    preview_compaction(str(path))
    assert recorder.young[-1] < events // 4 < with_hook
