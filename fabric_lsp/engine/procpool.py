"""A small persistent pool of child interpreters for stateless CPU-heavy engine calls.

Engine threads share the GIL with the server's event loop and its stdio reader: a preview
computed in the server slows reading to a few messages a second, so `$/cancelRequest` and
cheap requests arrive late. Here a call runs in a child interpreter (engine/childproc.py:
a plain `python -c`, no multiprocessing, nothing forked from a threaded server) and the
server's thread only waits in `select` and unpickles the answer.

`ProcessPool(dispatch)` names a function `module:function` with the signature
`fn(name, kwargs, cancel, activity) -> result`; the child imports it once and calls it for
every task, the server calls the same function itself when the pool cannot start (so
both give the same result for the same arguments).

Wire, both ways length-prefixed pickles:

    server → child   ("run", task_id, name, kwargs) | ("cancel", task_id)
    child → server   ("ready", pid) once | ("event", task_id, event) |
                     ("ok", task_id, result) | ("raise", task_id, pickled_exc, type_name, text, traceback, is_value_error)

Children:

* start on the first task (at most `size` of them), at normal priority, and stay; the
  first may have been started before the pool (`prestart`), which it then adopts;
* run one task at a time; a cancel sets the task's CancelToken in the child, whose engine
  stops at its next check (`Cancelled`); a child that has not stopped `CANCEL_GRACE_S`
  after the cancel is killed and replaced;
* exit as soon as their stdin closes (the server exited or was killed);
* one that dies during a task is replaced and the task runs once more in a new child; a
  second death raises `WorkerDied` (a clear error for the request, never a hang).

When no child can be started (no interpreter, an import error in the child) the pool
logs why, stops trying, and every call runs in the calling thread. After `close()` (the
server exiting) a call raises `Cancelled`: it is never computed in the caller then.
"""

from __future__ import annotations

import importlib
import itertools
import logging
import os
import pickle
import select
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any

from . import alloc
from .activity import ActivitySink, Cancelled, CancelToken
from .childproc import FrameBuffer, pack, read_frame, spawn, stop

log = logging.getLogger("fabric_lsp.procpool")

START_TIMEOUT_S = 60.0  # a child's imports on a loaded machine
CANCEL_GRACE_S = 2.0
POLL_S = 0.05

_CHILD = "from fabric_lsp.engine.procpool import child_main; child_main({dispatch!r}, {reserve_mb!r})"

Dispatch = Callable[[str, dict[str, Any], CancelToken | None, ActivitySink | None], Any]


class WorkerDied(RuntimeError):
    """A worker child died twice while computing the same task."""


class PoolUnavailable(RuntimeError):
    """No worker child could be started."""


class RemoteError(Exception):
    """An exception raised in a child that could not be sent as itself; its class carries
    the original class name (`type(err).__name__`)."""


def _load(ref: str) -> Dispatch:
    module, _, name = ref.partition(":")
    return getattr(importlib.import_module(module), name)


def _rebuild(data: bytes | None, type_name: str, text: str, remote_tb: str, is_value_error: bool) -> BaseException:
    exc: BaseException | None = None
    if data is not None:
        try:
            exc = pickle.loads(data)
        except Exception:
            exc = None
    if not isinstance(exc, BaseException):
        # ValueError keeps its meaning (the server answers it as invalid params)
        bases = (RemoteError, ValueError) if is_value_error else (RemoteError,)
        made: BaseException = type(type_name, bases, {})(text)
        exc = made
    if remote_tb and not isinstance(exc, Cancelled):
        exc.add_note("in the worker process:\n" + remote_tb.rstrip())
    return exc


class _Worker:
    def __init__(self, dispatch: str, tuned_alloc: bool = True, reserve_mb: int = 0) -> None:
        code = _CHILD.format(dispatch=dispatch, reserve_mb=reserve_mb)
        self.proc = spawn(code, stderr=None, tuned_alloc=tuned_alloc)
        self.frames = FrameBuffer()
        self.pid = self.proc.pid
        assert self.proc.stdout is not None
        self._fd = self.proc.stdout.fileno()

    def wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"the worker process did not start within {timeout:.0f} s")
            msg = self.recv(min(left, 1.0))
            if msg is not None and msg[0] == "ready":
                return

    def send(self, msg: Any) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(pack(msg))
        self.proc.stdin.flush()

    def recv(self, timeout: float) -> Any:
        """The next message, None when none came within `timeout`; EOFError once the
        child's output ended (it died)."""
        deadline = time.monotonic() + timeout
        while True:
            ok, msg = self.frames.next()
            if ok:
                return msg
            left = deadline - time.monotonic()
            ready, _, _ = select.select([self._fd], [], [], max(0.0, left))
            if not ready:
                return None
            chunk = os.read(self._fd, 1 << 20)
            if not chunk:
                raise EOFError
            self.frames.feed(chunk)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def how_it_ended(self) -> str:
        try:
            code = self.proc.wait(timeout=2)
        except Exception:
            return "it stopped answering"
        return f"killed by signal {-code}" if code < 0 else f"exit code {code}"

    def kill(self) -> None:
        stop(self.proc)


class _Died(Exception):
    pass


# Children started by `prestart` before their pool exists, by (dispatch, tuned_alloc, reserve_mb).
_prestarted: dict[tuple[str, bool, int], _Worker] = {}
_prestart_lock = threading.Lock()


def prestart(dispatch: str, *, tuned_alloc: bool = True, reserve_mb: int = 0) -> None:
    """Start one child for `dispatch` now, before the pool that will use it exists: a
    server calls this first thing, so the child's interpreter start and imports overlap
    the server's own, and the pool's first child is this one (`ProcessPool._checkout`).
    At most one per dispatch; a child that cannot start is left to the pool to report."""
    key = (dispatch, tuned_alloc, reserve_mb)
    with _prestart_lock:
        if key in _prestarted:
            return
        try:
            _prestarted[key] = _Worker(dispatch, tuned_alloc, reserve_mb)
        except OSError:
            pass


def _take_prestarted(dispatch: str, tuned_alloc: bool, reserve_mb: int) -> _Worker | None:
    with _prestart_lock:
        worker = _prestarted.pop((dispatch, tuned_alloc, reserve_mb), None)
    if worker is not None and not worker.alive():
        worker.kill()  # (it died before its pool needed it: a fresh one is started instead)
        return None
    return worker


class ProcessPool:
    """`run(name, kwargs, cancel, activity)` in one of at most `size` child interpreters."""

    def __init__(
        self,
        dispatch: str,
        size: int,
        *,
        start_timeout: float = START_TIMEOUT_S,
        tuned_alloc: bool = True,
        reserve_mb: int = 0,
    ) -> None:
        self.dispatch = dispatch
        self.tuned_alloc = tuned_alloc  # False: the children keep glibc's own mmap threshold (alloc.py)
        self.reserve_mb = reserve_mb  # object arenas each child keeps from its start (`alloc.reserve_object_arenas`)
        self.size = max(1, size)
        self.start_timeout = start_timeout
        self.unavailable: str | None = None  # why no child can be started
        self.restarts = 0  # children replaced after dying
        self._local: Dispatch | None = None
        self._cond = threading.Condition()
        self._idle: list[_Worker] = []
        self._all: set[_Worker] = set()
        self._starting = 0
        self._started_any = False
        self._warming = False  # warm() is starting the first child
        self._closed = False
        self._ids = itertools.count(1)

    # -- public ---------------------------------------------------------------------

    def run(
        self, name: str, kwargs: dict[str, Any], cancel: CancelToken | None = None, activity: ActivitySink | None = None
    ) -> Any:
        for attempt in (1, 2):
            try:
                worker = self._checkout(cancel)
            except PoolUnavailable:
                return self._run_here(name, kwargs, cancel, activity)
            try:
                return self._run_on(worker, name, kwargs, cancel, activity)
            except _Died as died:
                self._discard(worker)
                with self._cond:
                    self.restarts += 1
                if (cancel is not None and cancel.cancelled) or self._closed:
                    raise Cancelled() from None
                if attempt == 2:
                    raise WorkerDied(
                        f"the worker process computing this request died twice ({died}); the request was not completed"
                    ) from None
                log.warning(
                    "a %s worker process (pid %d) died during a task (%s): retrying in a new one",
                    name,
                    worker.pid,
                    died,
                )
        raise AssertionError("unreachable")

    def warm(self) -> None:
        """Start one child now (the server calls this right after `initialized`), so the
        first task does not wait for an interpreter to start and import the engine. A no-op
        when a child exists or is starting, or the pool is closed or unavailable."""
        with self._cond:
            if self._closed or self.unavailable is not None or self._all or self._starting:
                return
            self._warming = True
        try:
            worker = self._checkout(None, warming=True)
        except (PoolUnavailable, Cancelled):
            return
        finally:
            with self._cond:
                self._warming = False
                self._cond.notify_all()
        self._release(worker)

    def pids(self) -> list[int]:
        with self._cond:
            return sorted(w.pid for w in self._all)

    def close(self) -> None:
        with self._cond:
            self._closed = True
            workers, self._all, self._idle = list(self._all), set(), []
            self._cond.notify_all()
        early = _take_prestarted(self.dispatch, self.tuned_alloc, self.reserve_mb)  # (one this pool never needed)
        for w in workers if early is None else [*workers, early]:
            w.kill()

    # -- internals ------------------------------------------------------------------

    def _run_here(
        self, name: str, kwargs: dict[str, Any], cancel: CancelToken | None, activity: ActivitySink | None
    ) -> Any:
        if self._local is None:
            self._local = _load(self.dispatch)
        return self._local(name, kwargs, cancel, activity)

    def _checkout(self, cancel: CancelToken | None, *, warming: bool = False) -> _Worker:
        with self._cond:
            while True:
                if self._closed:  # the server is exiting: never fall back to computing here
                    raise Cancelled()
                if self.unavailable is not None:
                    raise PoolUnavailable(self.unavailable)
                if cancel is not None:
                    cancel.check()
                while self._idle:
                    w = self._idle.pop()
                    if w.alive():
                        return w
                    self._all.discard(w)
                    self.restarts += 1
                    log.warning(
                        "a worker process (pid %d) died while idle (%s): starting a new one", w.pid, w.how_it_ended()
                    )
                # (while the warm-up child starts, a task waits for it rather than starting another)
                if len(self._all) + self._starting < self.size and (warming or not self._warming):
                    self._starting += 1
                    break
                self._cond.wait(POLL_S)
        try:
            worker = _take_prestarted(self.dispatch, self.tuned_alloc, self.reserve_mb) or _Worker(
                self.dispatch, self.tuned_alloc, self.reserve_mb
            )
        except OSError as err:
            self._start_failed(f"cannot start a worker process: {err}")
        else:
            try:
                worker.wait_ready(self.start_timeout)
            except (EOFError, OSError, TimeoutError, pickle.UnpicklingError) as err:
                why = str(err) if isinstance(err, TimeoutError) else worker.how_it_ended()
                worker.kill()
                self._start_failed(f"a worker process exited before it was ready ({why})")
            with self._cond:
                self._starting -= 1
                self._started_any = True
                self._all.add(worker)
                if self._closed:
                    worker.kill()
                    raise Cancelled()
            return worker
        raise AssertionError("unreachable")

    def _start_failed(self, why: str) -> None:
        with self._cond:
            self._starting -= 1
            if not self._started_any and self.unavailable is None:
                self.unavailable = why
                log.warning("%s: computing in the server process instead", why)
            else:
                log.warning("%s: computing this request in the server process", why)
            self._cond.notify_all()
        raise PoolUnavailable(why)

    def _release(self, worker: _Worker) -> None:
        with self._cond:
            if self._closed or worker not in self._all:
                worker.kill()
                return
            self._idle.append(worker)
            self._cond.notify_all()

    def _discard(self, worker: _Worker) -> None:
        worker.kill()
        with self._cond:
            self._all.discard(worker)
            self._cond.notify_all()

    def _run_on(
        self,
        worker: _Worker,
        name: str,
        kwargs: dict[str, Any],
        cancel: CancelToken | None,
        activity: ActivitySink | None,
    ) -> Any:
        task_id = next(self._ids)
        try:
            worker.send(("run", task_id, name, kwargs))
        except OSError:
            raise _Died(worker.how_it_ended()) from None
        cancel_sent: float | None = None
        while True:
            if cancel is not None and cancel.cancelled:
                if cancel_sent is None:
                    cancel_sent = time.monotonic()
                    try:
                        worker.send(("cancel", task_id))
                    except OSError:
                        raise _Died(worker.how_it_ended()) from None
                elif time.monotonic() - cancel_sent > CANCEL_GRACE_S:
                    log.info(
                        "a worker process (pid %d) did not stop within %.0f s of a cancel: replaced",
                        worker.pid,
                        CANCEL_GRACE_S,
                    )
                    self._discard(worker)
                    raise Cancelled()
            try:
                msg = worker.recv(POLL_S)
            except (EOFError, OSError, pickle.UnpicklingError):
                raise _Died(worker.how_it_ended()) from None
            if msg is None or msg[1] != task_id:
                continue
            if msg[0] == "event":
                if activity is not None and cancel_sent is None:
                    activity(msg[2])
                continue
            self._release(worker)
            if msg[0] == "ok":
                return msg[2]
            raise _rebuild(*msg[2:])


# -- the child's side -------------------------------------------------------------------


def _describe(exc: BaseException) -> tuple[bytes | None, str, str, str, bool]:
    data: bytes | None
    try:
        data = pickle.dumps(exc, protocol=pickle.HIGHEST_PROTOCOL)
        back = pickle.loads(data)
        if type(back) is not type(exc) or str(back) != str(exc):
            data = None
    except Exception:
        data = None
    tb = "" if isinstance(exc, Cancelled) else "".join(traceback.format_exception(exc))
    return data, type(exc).__name__, str(exc), tb, isinstance(exc, ValueError)


def child_main(dispatch_ref: str, reserve_mb: int = 0) -> None:
    """A worker child: run tasks from stdin, one at a time, until stdin closes; with
    `reserve_mb`, its object allocator keeps that many megabytes of arenas from the start
    (`alloc.reserve_object_arenas`, before it says it is ready)."""
    import queue
    import sys

    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # a stray print in the engine goes to stderr, never into the frames
    sys.stdout = sys.stderr
    inp = os.fdopen(os.dup(0), "rb")
    dispatch = _load(dispatch_ref)
    _reserve = alloc.reserve_object_arenas(reserve_mb)  # (a local of a function that never returns: kept)
    write_lock = threading.Lock()
    state = threading.Lock()
    current: dict[str, Any] = {"id": None, "token": None}
    early_cancels: set[int] = set()
    tasks: queue.SimpleQueue[Any] = queue.SimpleQueue()

    def send(msg: Any) -> None:
        frame = pack(msg)
        with write_lock:
            out.write(frame)
            out.flush()

    def reader() -> None:
        while True:
            try:
                msg = read_frame(inp)
            except Exception:
                os._exit(0)  # the server is gone: so is this child, at once
            if msg[0] == "run":
                tasks.put(msg)
            elif msg[0] == "cancel":
                with state:
                    if current["id"] == msg[1]:
                        current["token"].cancel()
                    else:
                        early_cancels.add(msg[1])

    threading.Thread(target=reader, daemon=True, name="fabric-worker-input").start()
    send(("ready", os.getpid()))
    while True:
        _, task_id, name, kwargs = tasks.get()
        token = CancelToken()
        with state:
            current["id"], current["token"] = task_id, token
            if task_id in early_cancels:
                early_cancels.discard(task_id)
                token.cancel()
        try:
            reply: Any = ("ok", task_id, dispatch(name, kwargs, token, lambda ev, i=task_id: send(("event", i, ev))))
        except BaseException as exc:  # everything goes back to the server
            reply = ("raise", task_id, *_describe(exc))
        with state:
            current["id"], current["token"] = None, None
        try:
            send(reply)
        except (pickle.PicklingError, TypeError, AttributeError, RecursionError) as exc:
            send(("raise", task_id, *_describe(exc)))
        del reply
        alloc.trim()  # an idle child gives back what its task left in the heap
