"""The shared GC pause is counted: overlapping pauses (threads of the server) keep the
collector off until the last one ends, then restore its earlier state."""

from __future__ import annotations

import gc
import threading

from fabric_lsp.engine.gcpause import cyclic_gc_paused


def test_overlapping_pauses_restore_only_at_the_end() -> None:
    assert gc.isenabled()
    first_in, second_done, release = threading.Event(), threading.Event(), threading.Event()
    seen: list[bool] = []

    def long_pause() -> None:
        with cyclic_gc_paused():
            first_in.set()
            release.wait(10)

    t = threading.Thread(target=long_pause)
    t.start()
    first_in.wait(10)
    with cyclic_gc_paused():
        seen.append(gc.isenabled())
    second_done.set()
    seen.append(gc.isenabled())  # the first pause is still active
    release.set()
    t.join(10)
    assert seen == [False, False]
    assert gc.isenabled()


def test_a_collector_already_off_stays_off() -> None:
    gc.disable()
    try:
        with cyclic_gc_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
