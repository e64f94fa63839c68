"""The end of a client's own ZeroMQ context when its ender thread does not start
(kint/client_context.py `end_context`, its RuntimeError branch): the context is ended once,
by the ender or by the caller, never by both (a second end of a context is libzmq's use
after free), and a Ctrl-C that cut the start short is raised again once the context is
ended, never swallowed.

Two failures of `Thread.start` reach that branch: no thread to be had (a box out of them,
or the interpreter's end), and a signal flood in threading's own code: a KeyboardInterrupt
raised in `Condition.wait`'s restore of its lock, inside the start's wait for the new
thread, leaves the lock released, and the `with` around that wait then raises RuntimeError
("release unlocked lock") with the KeyboardInterrupt as its context, the thread maybe
running. Neither can be had on purpose, so a stand-in for the thread class raises each, as
CPython does (the one stand-in of these tests); the context, its socket and the message
queued on it are real, and so is the ender thread where the stand-in starts it.
"""

from __future__ import annotations

import threading
from pathlib import Path
from types import SimpleNamespace

import pytest
import zmq

from kint import client_context
from kint.client_context import end_context


class _Counted(zmq.Context):
    """A real context that counts its ends (declared here: pyzmq takes an attribute set on
    a context for an option unless its class names it)."""

    ends = 0

    def term(self) -> None:
        self.ends += 1
        super().term()


def _queued(tmp_path: Path) -> _Counted:
    """A context whose closed socket still holds a message for nobody (no listener at the
    path): its end waits out the socket's linger, as a goodbye's does for a held supervisor."""
    context = _Counted()
    sock = context.socket(zmq.DEALER)
    sock.connect(f"ipc://{tmp_path / 'nobody.sock'}")
    sock.send(b"goodbye")
    sock.close(linger=300)
    return context


def _flood() -> RuntimeError:
    """The RuntimeError threading's own code raises when a KeyboardInterrupt cut it short."""
    try:
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt:
            raise RuntimeError("release unlocked lock")
    except RuntimeError as err:
        return err


def _threads(monkeypatch, start) -> list[threading.Thread]:
    """end_context's threads made by a class whose start is `start(thread)`; the threads
    made, for the test to wait on."""
    made: list[threading.Thread] = []

    class Thread(threading.Thread):
        def start(self) -> None:
            made.append(self)
            start(self)

    monkeypatch.setattr(client_context, "threading",
                        SimpleNamespace(Lock=threading.Lock, Thread=Thread))
    return made


def test_no_thread_to_end_the_context_ends_it_in_the_caller(tmp_path, monkeypatch):
    def refused(_thread: threading.Thread) -> None:
        raise RuntimeError("can't start new thread")

    _threads(monkeypatch, refused)
    context = _queued(tmp_path)
    end_context(context)  # nothing raised: no signal cut it short
    assert context.closed and context.ends == 1


def test_a_ctrl_c_that_cut_the_start_short_is_raised_once_the_context_ends(tmp_path,
                                                                        monkeypatch):
    """The thread never ran: the caller ends the context, then raises the Ctrl-C."""
    def cut(_thread: threading.Thread) -> None:
        raise _flood()

    _threads(monkeypatch, cut)
    context = _queued(tmp_path)
    with pytest.raises(KeyboardInterrupt):
        end_context(context)
    assert context.closed and context.ends == 1


def test_a_ctrl_c_after_the_thread_began_leaves_the_end_to_it(tmp_path, monkeypatch):
    """The thread runs (it took the claim, or takes it after the caller): one end of the
    context between them, the Ctrl-C raised at once, the thread ending the context still."""
    def started_then_cut(thread: threading.Thread) -> None:
        threading.Thread.start(thread)
        raise _flood()

    made = _threads(monkeypatch, started_then_cut)
    context = _queued(tmp_path)
    with pytest.raises(KeyboardInterrupt):
        end_context(context)
    assert len(made) == 1
    made[0].join(30)
    assert not made[0].is_alive()
    assert context.closed and context.ends == 1
