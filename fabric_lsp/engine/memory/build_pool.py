"""A tiny pool of child interpreters that build sessions' derived states (cold digests and
hot shards) in parallel with the caller.

Children are plain `python -c` processes (no multiprocessing start-method pitfalls: the
host's `__main__` is never re-imported, nothing is forked from a threaded server). Each
reads length-prefixed pickled tasks on stdin and answers on stdout, in order; a child is
sent its next task before the caller unpickles and adopts its answer, so it does not wait
for the caller (on 2 cores that wait was about a tenth of a 1 GB index). The pool is used for
one batch and then closed; a cancelled batch kills its children. A child writes the disk
cache records of what it built (temp file + rename, `persist.write_records`), so a killed
one leaves at worst a temp file, which the next cache cleanup removes, never a torn
record; the parent adopts the state without writing it again.
"""

from __future__ import annotations

import os
import pickle
import select
import struct
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ..childproc import pack, spawn, stop

# A task's arguments (pickled to the child) and the child's reply: ("ok", digest),
# ("missing", reason) or ("error", repr of the exception).
TaskArgs = tuple[Any, ...]
Reply = tuple[str, Any]

# Windows' select() waits on sockets only, not on a child's pipes: no pool there.
PIPES_POLLABLE = os.name != "nt"
# Builder children of a batch: two at most (more only compete on a small machine), one
# (no pool) on a single CPU.
BUILD_WORKERS = min(2, os.cpu_count() or 1)

_CHILD = r"""
import gc, os, pickle, struct, sys
if os.environ.get("FABRIC_LSP_BUILD_NICE"):
    os.nice(int(os.environ["FABRIC_LSP_BUILD_NICE"]))  # background indexing: lowest priority
gc.disable()  # a short-lived builder of acyclic data: collection passes only cost time
from fabric_lsp.engine.memory.state_build import SourceMissing, build_detached
inp, out = sys.stdin.buffer, sys.stdout.buffer
while True:
    head = inp.read(8)
    if len(head) < 8:
        break
    (n,) = struct.unpack("<Q", head)
    task = pickle.loads(inp.read(n))
    try:
        file, branches, tier, cfg, ref_id, ref_cwd, index_dir = task
        result = ("ok", build_detached(file, branches, tier, cfg, ref_id=ref_id, ref_cwd=ref_cwd, index_dir=index_dir))
    except SourceMissing as missing:
        result = ("missing", missing.reason)
    except Exception as exc:
        result = ("error", repr(exc))
    data = pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL)
    out.write(struct.pack("<Q", len(data)))
    out.write(data)
    out.flush()
"""


def _widen_pipe(fd: int) -> None:
    """Let a reply pipe hold 1 MiB instead of Linux's 64 KiB: a hot state of several
    megabytes then crosses in a few reads and wakeups, not hundreds. Best effort (other
    systems, or a lower `/proc/sys/fs/pipe-max-size`, keep their default)."""
    try:
        import fcntl
    except ImportError:  # Windows
        return
    setsz = getattr(fcntl, "F_SETPIPE_SZ", None)  # (Linux only)
    if setsz is None:
        return
    try:
        fcntl.fcntl(fd, setsz, 1 << 20)
    except OSError:
        pass


class _Child:
    def __init__(self, nice: int = 0, code: str = _CHILD) -> None:
        self.code = code
        # glibc's own mmap threshold, not the server's fixed one (alloc.py): a builder frees
        # a multi-megabyte buffer per session (file, text batch, encoded record), and with a
        # fixed 256 KiB threshold each one is a fresh mapping whose pages the kernel zeroes
        # again (about 9% of a 1 GB index's wall time, mostly system time; docs/performance.md)
        self.proc = spawn(code, env_extra={"FABRIC_LSP_BUILD_NICE": str(nice)} if nice else None, tuned_alloc=False)
        fd = self.fileno()
        os.set_blocking(fd, False)  # `pump` reads what there is, never waits
        _widen_pipe(fd)
        self.head = b""  # the reply's length prefix, while incomplete
        self.reply: bytearray | None = None  # the reply being read, allocated once at its size
        self.got = 0
        self.task: Any | None = None

    def send(self, key: Any, task: TaskArgs) -> None:
        assert self.proc.stdin is not None
        self.task = key  # (before the write: a child that died holds it as failed)
        self.proc.stdin.write(pack(task))
        self.proc.stdin.flush()

    def fileno(self) -> int:
        assert self.proc.stdout is not None
        return self.proc.stdout.fileno()

    def pump(self) -> bytearray | None:
        """Read what is available; the pickled reply once complete (not decoded: the
        caller sends the next task first). Raises EOFError. The reply is read straight
        into one buffer of its announced size: no chunk is copied again."""
        fd = self.fileno()
        while True:
            reply = self.reply
            try:
                if reply is None:
                    chunk = os.read(fd, 8 - len(self.head))
                    if not chunk:
                        raise EOFError
                    self.head += chunk
                    if len(self.head) < 8:
                        continue
                    (n,) = struct.unpack("<Q", self.head)
                    self.head, self.reply, self.got = b"", bytearray(n), 0
                    reply = self.reply
                elif self.got < len(reply):
                    k = os.readv(fd, [memoryview(reply)[self.got :]])
                    if not k:
                        raise EOFError
                    self.got += k
            except BlockingIOError:
                return None
            if self.got == len(reply):
                self.reply = None
                return reply

    def kill(self) -> None:
        stop(self.proc)


# Builder children started ahead of a batch (`prestart`), taken by the next `run_batch`.
_spares: list[_Child] = []
_spares_lock = threading.Lock()


def prestart(workers: int) -> int:
    """Start `workers` builder children now, for a batch about to come (a fresh index:
    the first call or the indexer's first pass builds every session), so they have
    imported the builder when it does. The next `run_batch` takes them (reniced to its
    priority); `drop_spares` ends the ones nothing took. Returns how many started."""
    if not PIPES_POLLABLE:
        return 0
    started: list[_Child] = []
    for _ in range(workers):
        try:
            started.append(_Child())
        except OSError:
            break
    with _spares_lock:
        _spares.extend(started)
    return len(started)


def _take_spare(nice: int, code: str) -> _Child | None:
    """A started child for `code` (None: none left), at priority `nice`."""
    with _spares_lock:
        found = next((c for c in _spares if c.code == code), None)
        if found is None:
            return None
        _spares.remove(found)
    if found.proc.poll() is not None:  # it died meanwhile
        found.kill()
        return None
    if nice:
        try:
            os.setpriority(os.PRIO_PROCESS, found.proc.pid, nice)
        except (AttributeError, OSError):
            pass
    return found


def drop_spares() -> int:
    """End the started children no batch took; returns how many."""
    with _spares_lock:
        left = list(_spares)
        _spares.clear()
    for child in left:
        child.kill()
    return len(left)


# A child that runs any `module:function(*args)` task (the team push's builders): the
# same frames and replies as _CHILD, ("ok", the function's result) or ("error", repr).
_CALL_CHILD = r"""
import gc, importlib, os, pickle, struct, sys
if os.environ.get("FABRIC_LSP_BUILD_NICE"):
    os.nice(int(os.environ["FABRIC_LSP_BUILD_NICE"]))
gc.disable()
inp, out = sys.stdin.buffer, sys.stdout.buffer
fns = {}
while True:
    head = inp.read(8)
    if len(head) < 8:
        break
    (n,) = struct.unpack("<Q", head)
    target, args = pickle.loads(inp.read(n))
    try:
        fn = fns.get(target)
        if fn is None:
            module, _, name = target.partition(":")
            fn = fns[target] = getattr(importlib.import_module(module), name)
        result = ("ok", fn(*args))
    except Exception as exc:
        result = ("error", repr(exc))
    data = pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL)
    out.write(struct.pack("<Q", len(data)))
    out.write(data)
    out.flush()
"""


def run_batch(
    tasks: Iterable[tuple[Any, TaskArgs]],
    workers: int,
    on_result: Callable[[Any, Reply], None],
    check_cancel: Callable[[], None],
    *,
    on_idle: Callable[[], bool] | None = None,
    nice: int = 0,
    skip: Callable[[Any], bool] | None = None,
    calls: bool = False,
) -> list[Any]:
    """Run `(key, args)` tasks on `workers` children; `on_result(key, reply)` for each.
    `on_idle()` may do caller work between polls (returns False when it has none left).
    `skip(key)`, asked right before a task is sent, leaves it out when True (the caller
    settles it). With `calls`, a task is `("module:function", args)` run by a generic
    child (else the arguments of `sessions.build_detached`). Returns the keys whose child
    died (the caller builds those itself)."""
    queue = list(tasks)
    if not PIPES_POLLABLE:
        # the caller builds everything itself (the same states, one at a time; `skip`
        # asked once for each, as if it were about to be sent)
        return [k for k, _ in queue if skip is None or not skip(k)]
    children: list[_Child] = []
    failed: list[Any] = []

    held: list[tuple[Any, TaskArgs]] = []  # past `skip`, not sent (a child failed to start)

    def next_task() -> tuple[Any, TaskArgs] | None:
        """The next queued task `skip` does not leave out (None: none is left)."""
        if held:
            return held.pop()
        while queue:
            key, args = queue.pop(0)
            if skip is None or not skip(key):
                return key, args
        return None

    try:
        # A child is started only for a task it is to build: a batch whose tasks are all
        # skipped (the background indexer's, while a call builds the same sessions) starts
        # none, so it takes no CPU from the builders it waits for.
        while len(children) < workers:
            first = next_task()
            if first is None:
                break
            code = _CALL_CHILD if calls else _CHILD
            try:
                child = _take_spare(nice, code) or _Child(nice, code)
            except OSError:
                held.append(first)
                break
            children.append(child)
            try:
                child.send(*first)
            except OSError:
                pass  # the child died: its task is failed when its pipe ends
        if not children:
            # no child could start: the caller builds the rest (`skip` asked once for each)
            return [k for k, _ in held] + [k for k, _ in queue if skip is None or not skip(k)]

        def feed(child: _Child) -> None:
            task = next_task()
            if task is None:
                return
            try:
                child.send(*task)
            except OSError:
                pass  # the child died: its task is failed when its pipe ends

        caller_busy = on_idle is not None
        while any(c.task is not None for c in children):
            check_cancel()
            if caller_busy:
                assert on_idle is not None
                caller_busy = on_idle()
                timeout = 0.0
            else:
                timeout = 0.05
            live = [c for c in children if c.task is not None]
            ready, _, _ = select.select(live, [], [], timeout)
            for child in ready:
                try:
                    payload = child.pump()
                except (EOFError, OSError):
                    failed.append(child.task)
                    child.task = None
                    while (rest := next_task()) is not None:  # (`skip` asked for each)
                        failed.append(rest[0])
                    continue
                if payload is None:
                    continue
                key, child.task = child.task, None
                # A child is sent its next task before its answer is unpickled and adopted,
                # so it never waits for the caller (one task at a time: two would bind a
                # session to a busy child while another one idles at a batch's end).
                feed(child)
                try:
                    reply: Reply = pickle.loads(payload)
                except Exception:  # an answer that does not load: built by the caller
                    failed.append(key)
                    continue
                on_result(key, reply)
        while on_idle is not None and caller_busy:
            check_cancel()
            caller_busy = on_idle()
        return failed
    finally:
        for child in children:
            child.kill()


def build_split(
    pooled: Sequence[tuple[Any, str]],
    local: list[tuple[Any, str]],
    *,
    task: Callable[[Any, str], TaskArgs],
    workers: int,
    build_here: Callable[[Any, str], None],
    on_built: Callable[[Any, str, Any], None],
    check_cancel: Callable[[], None],
    nice: int = 0,
    skip: Callable[[Any, str], bool] | None = None,
) -> list[tuple[Any, str]]:
    """The one way a set of sessions is built in parallel: the `pooled` refs (`(ref, tier)`,
    `ref.file` their key; cold digests and hot shards alike) go to `workers` children,
    `task(ref, tier)` being a child's build arguments, while this thread builds `local`
    ones between polls (sessions a live Pi holds, built on its live leaf). A child's answer
    reaches `on_built(ref, tier, state)` (a SourceMissing for an unavailable source); a
    session whose child failed or died is built here. A pooled session for which
    `skip(ref, tier)` is True when its turn comes is not built: the skipped ones are
    returned."""
    from .state import SourceMissing

    by_file = {ref.file: (ref, tier) for ref, tier in pooled}
    skipped: list[tuple[Any, str]] = []

    def skip_file(file: Any) -> bool:
        assert skip is not None
        if skip(*by_file[file]):
            skipped.append(by_file[file])
            return True
        return False

    pending = list(local)

    def on_result(file: Any, reply: Reply) -> None:
        status, value = reply
        ref, tier = by_file[file]
        if status == "ok":
            on_built(ref, tier, value)
        elif status == "missing":
            on_built(ref, tier, SourceMissing(value))
        else:
            build_here(ref, tier)

    def on_idle() -> bool:
        if not pending:
            return False
        ref, tier = pending.pop(0)
        build_here(ref, tier)
        return bool(pending)

    failed = run_batch(
        ((ref.file, task(ref, tier)) for ref, tier in pooled),
        workers,
        on_result,
        check_cancel,
        on_idle=on_idle,
        nice=nice,
        skip=skip_file if skip is not None else None,
    )
    for ref, tier in pending:
        check_cancel()
        build_here(ref, tier)
    for file in failed:
        check_cancel()
        build_here(*by_file[file])
    return skipped
