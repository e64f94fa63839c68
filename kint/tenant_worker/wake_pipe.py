"""The worker loop's wake pipe: a byte on it wakes the loop's poll (a signal through
`signal.set_wakeup_fd`, a pool thread's answer, a beat asked for from any thread).

Why a class with a lock rather than two bare descriptors: a pool thread whose op outlives
the stop grace is still running when the worker closes the pipe on its way out, and its
answer then writes its byte. Written to the closed write end's number, it went to whatever
file the process had opened under that number since (the kernel hands out the lowest free
one): a log file, a state file, the store. Here a write after `close` writes nothing, and
the check and the write are one step under the lock, so `close` cannot fall between them.
The lock is held only for one non-blocking write.
"""

from __future__ import annotations

import os
import threading


class WakePipe:
    def __init__(self) -> None:
        self.read_fd, self._write_fd = os.pipe()
        os.set_blocking(self.read_fd, False)
        os.set_blocking(self._write_fd, False)
        self._lock = threading.Lock()
        self._closed = False

    @property
    def write_fd(self) -> int:
        """The write end, for `signal.set_wakeup_fd` (which the worker resets to -1 before
        `close`: the interpreter writes there itself, outside this lock)."""
        return self._write_fd

    def wake(self) -> None:
        """From any thread: one byte, or nothing once the pipe is closed. A full pipe is
        readable already, so its refusal is no loss."""
        with self._lock:
            if self._closed:
                return
            try:
                os.write(self._write_fd, b"\0")
            except BlockingIOError:
                pass

    def drain(self) -> None:
        """Read what is there (the loop, before it looks at why it woke)."""
        try:
            os.read(self.read_fd, 4096)
        except BlockingIOError:
            pass

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            os.close(self.read_fd)
            os.close(self._write_fd)
