"""An op that runs out of open files inside a running worker is refused BUSY naming what ran
out (kint/tenant_worker/op_replies.py, `_out_of_files`): this process's limit (EMFILE), with
the hint to raise `ulimit -n`, or the system's table of open files (ENFILE), with its own
hint (SYSTEM_FILES_HINT), since no process's limit mends that one. Both used to get the
`ulimit -n` hint and count.

Real parts: a real Worker (not serving: its replies go nowhere) over a real store, its op
runner's own mapping. The one stand-in is the failing op: a handler that raises the errno,
bare or beneath the error an op wraps it in (a real ENFILE needs the whole system's table
of open files full, which cannot be made here; EMFILE's real run, a worker's limit lowered
with prlimit, is in tests/test_open_files.py).
"""

from __future__ import annotations

import errno
import os

import pytest

from conftest import write_store
from kint.open_files import SYSTEM_FILES_HINT, WORKER_ROOM_HINT
from kint.protocol import ErrorCode, ProtocolError
from kint.protocol.envelope import Request


def _bare(code: int) -> BaseException:
    return OSError(code, os.strerror(code))


def _wrapped(code: int) -> BaseException:
    """As Sibyl's refusals reach the runner (handlers.sibyl_refusal): INTERNAL, raised
    from the OSError."""
    try:
        raise OSError(code, os.strerror(code))
    except OSError as inner:
        try:
            raise ProtocolError(ErrorCode.INTERNAL, "the store could not be opened") from inner
        except ProtocolError as outer:
            return outer


@pytest.fixture
def worker(tmp_path):
    from kint.tenant_worker.config import WorkerConfig
    from kint.tenant_worker.process import Worker

    home = tmp_path / "kint"
    home.mkdir(mode=0o700)
    cfg = WorkerConfig(space_id="ef" * 32, label="t", tenant="t",
                       db=str(write_store(tmp_path / "memory.db", tenant="t")),
                       kint_home=str(home), back_address="ipc:///unused", supervisor_pid=1,
                       idle_beat_s=2.5)
    running = Worker(cfg, b"\x03" * 32)
    yield running
    running.close()


@pytest.mark.parametrize("made", [_bare, _wrapped])
@pytest.mark.parametrize("code, hint, said, unsaid", [
    (errno.EMFILE, WORKER_ROOM_HINT, "ulimit -n", "system's table"),
    (errno.ENFILE, SYSTEM_FILES_HINT, "the system's table of them is full", "ulimit -n")])
def test_an_op_out_of_files_names_the_limit_that_ran_out(worker, made, code, hint, said,
                                                         unsaid):
    def failing(_ctx, _args):
        raise made(code)

    reply = worker._run(Request(id="r1", op="verify", args={}), {"verify": failing})
    assert (reply.ok, reply.error, reply.hint) == (False, ErrorCode.BUSY.value, hint), \
        reply.to_dict()
    assert reply.message.startswith(f"verify in the worker of space {'ef' * 8} ran out of "
                                    f"open files"), reply.message
    assert said in reply.message and unsaid not in reply.message, reply.message
