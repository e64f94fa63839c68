"""One tool call at a time, off the event loop.

kint-server's tool calls must never overlap: a pull swaps (or, with `discard_local`, closes
and reopens) the one client Sibyl's tools share, and must not do so under a Sibyl write.
They once ran on the event loop for that reason, which left the loop deaf for as long as a
kint call waited on the worker (up to TOOL_WAIT_S, a restore once 30 minutes): no
`ping`, no `notifications/cancelled`, no `tools/list`. The SDK's lowlevel Server handles
each request in a task of its own, so a `Gate` keeps the one-at-a-time rule instead: every
tool call, Sibyl's or kint's, passes it, and a kint call's blocking work runs in a thread
while the loop answers the rest.

A call the client cancels (the SDK answers "Request cancelled" at once and cancels the
handler's task) stops being waited for, not done: the worker already has it and goes on,
and so does the thread, which lets the gate go only when its work returns, within the
call's own bound. So the next call still never overlaps it. The thread is a daemon: a
server whose client went away exits without waiting for it, as the worker finishes the
work after it is gone (kint.mcp_server).
"""

from __future__ import annotations

import logging
import threading
from typing import Callable, TypeVar

import anyio
import anyio.from_thread
import anyio.lowlevel

log = logging.getLogger("kint.server")

T = TypeVar("T")


class Gate:
    """What every tool call passes, one at a time. A semaphore rather than a lock: the
    thread that did the work lets it go, even after the task that took it was cancelled."""

    def __init__(self) -> None:
        self._one = anyio.Semaphore(1)

    async def enter(self) -> None:
        await self._one.acquire()

    def leave(self) -> None:
        self._one.release()

    async def off_loop(self, name: str, work: Callable[[], T]) -> T:
        """Run `work` in a thread of its own after taking the gate, and give its result or
        raise what it raised. The gate is let go when `work` returns, not when this
        coroutine ends: cancelled, it stops waiting while the work goes on."""
        await self.enter()
        token = anyio.lowlevel.current_token()
        done = anyio.Event()
        box: dict[str, object] = {}

        def run() -> None:
            try:
                box["result"] = work()
            except BaseException as err:  # noqa: BLE001 - raised again in the waiting task
                box["error"] = err
            finally:
                try:
                    anyio.from_thread.run_sync(self._finished, done, token=token)
                except RuntimeError:  # the loop is gone (the server exits): nobody waits
                    pass

        try:
            threading.Thread(target=run, name=f"kint-{name}", daemon=True).start()
        except BaseException:
            self.leave()
            raise
        try:
            await done.wait()
        except anyio.get_cancelled_exc_class():
            log.info("%s: no longer waited for (cancelled, or the client went away); its "
                     "work goes on and the next tool call waits for it", name)
            raise
        if "error" in box:
            raise box["error"]  # type: ignore[misc]
        return box["result"]  # type: ignore[return-value]

    def _finished(self, done: anyio.Event) -> None:
        self.leave()
        done.set()
