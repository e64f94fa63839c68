"""The threads a worker runs its ops on: up to `size`, the one that went idle last first.

Why not `concurrent.futures.ThreadPoolExecutor`: its idle threads all wait on one queue
and take turns, and it starts a new thread whenever a request arrives before the last
one's thread has marked itself idle, which a client that sends its next request as soon
as it has the answer does every time. A space served one request at a time so ended up
with all four threads, each op landing on the next. Every thread keeps its own read-only
store connection (kint.tenant_worker.space) and its own warm stack, so each op started on
colder caches, and the worker held ~0.5 MiB of its own memory per connection and ~1.5 MiB
more for the second thread (measured on a 500-row store), which counts against
KINT_WORKER_RECYCLE_MIB and the box.

Here an op goes to the thread that finished last; a thread is started only when every
existing one is busy, so a space served one call at a time runs them all on one thread,
and the rest exist only while ops really overlap (a push, a verify beside it). Ops that
find every thread busy wait in arrival order. An op's own errors are its business (the
worker's `_run` turns them into replies); one that escapes is logged, never lost silently.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections import deque
from typing import Any, Callable

log = logging.getLogger("kint.worker")

Work = tuple[Callable[..., Any], tuple[Any, ...], Callable[[Any], None] | None]


class OpPool:
    def __init__(self, size: int, name_prefix: str) -> None:
        if size < 1:
            raise ValueError("an op pool needs at least one thread")
        self._size = size
        self._name_prefix = name_prefix
        self._lock = threading.Lock()
        # Each idle thread waits on its own inbox; the list is a stack (last idle on top).
        self._idle: list[queue.SimpleQueue[Work | None]] = []
        self._backlog: deque[Work] = deque()
        self._started = 0
        self._closed = False

    @property
    def threads(self) -> int:
        """How many threads have been started (for tests and diagnostics)."""
        return self._started

    def submit(self, fn: Callable[..., Any], *args: Any,
               then: Callable[[Any], None] | None = None) -> None:
        """Run `fn(*args)` on a pool thread: the last one to go idle, a new one if all are
        busy and fewer than `size` exist, else the first to finish. `then(result)` runs on
        the same thread once it is back among the idle ones: the worker sends the op's reply
        there, so the request a client sends on reading it finds this thread free."""
        work: Work = (fn, args, then)
        with self._lock:
            if self._closed:
                raise RuntimeError("the op pool is shut down")
            if self._idle:
                self._idle.pop().put(work)
                return
            if self._started >= self._size:
                self._backlog.append(work)
                return
            self._started += 1
            name = f"{self._name_prefix}_{self._started - 1}"
        threading.Thread(target=self._serve, args=(work,), name=name, daemon=True).start()

    def _serve(self, first: Work) -> None:
        inbox: queue.SimpleQueue[Work | None] = queue.SimpleQueue()
        work: Work | None = first
        while work is not None:
            fn, args, then = work
            try:
                result = fn(*args)
            except BaseException:  # noqa: BLE001 - logged here, or nowhere
                log.exception("an op escaped its handler")
                then = None
            with self._lock:
                work = self._backlog.popleft() if self._backlog else None
                closed = self._closed
                if work is None and not closed:
                    self._idle.append(inbox)
            if then is not None:
                try:
                    then(result)
                except BaseException:  # noqa: BLE001
                    log.exception("an op's answer could not be sent")
            if work is None and not closed:
                work = inbox.get()

    def shutdown(self) -> None:
        """No more ops; ops waiting for a thread are dropped, idle threads end, running
        ones finish what they run (the worker decides how long it waits for them)."""
        with self._lock:
            self._closed = True
            self._backlog.clear()
            idle, self._idle = self._idle, []
        for inbox in idle:
            inbox.put(None)
