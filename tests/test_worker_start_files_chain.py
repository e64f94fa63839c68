"""A worker whose start runs out of open files after its first check (kint/tenant_worker/
worker_start.py, `run_worker`): the check saw twelve free, and the start itself took them
(libzmq's own threads open their pollers and signalers, SQLite the store).

Such an error comes wrapped (SQLite's, Sibyl's, a `raise ... from` of kint's own), so the
exit follows the exception chain as an op's refusal does (open_files.ran_out_of_files):
looking at the outer error alone, the start was taken for a crash (EXIT_FATAL: restarts,
then a quarantine). And the system's table of open files full (ENFILE) exits with its own
code, so the supervisor does not hint `ulimit -n`, which does not mend it.

Real parts: `run_worker` in a forked process, with its real logging, settings and worker
lock. The one stand-in is the failing step: the Worker's construction raises the error
(running the box out of descriptors at that very instant is not reliable here).
"""

from __future__ import annotations

import errno
import multiprocessing
import os

import pytest

from conftest import TENANT, write_store
from kint.protocol import worker_wire


class _StartFailed(RuntimeError):
    pass


def _exit_code(tmp_path, monkeypatch, err: BaseException) -> int | None:
    from kint.tenant_worker import worker_start
    from kint.tenant_worker.config import WorkerConfig

    def failing(*_args, **_kw):
        raise err

    monkeypatch.setattr(worker_start, "Worker", failing)
    home = tmp_path / "kint"
    home.mkdir(mode=0o700)
    token = b"\x0c" * 32
    cfg = WorkerConfig(space_id=token.hex(), label=TENANT, tenant=TENANT,
                       db=str(write_store(tmp_path / "memory.db")), kint_home=str(home),
                       back_address=f"ipc://{tmp_path}/back.sock",
                       supervisor_pid=os.getpid(), idle_beat_s=2.5)
    child = multiprocessing.get_context("fork").Process(target=worker_start.run_worker,
                                                         args=(cfg, token))
    child.start()
    child.join(30)
    assert not child.is_alive()
    return child.exitcode


def _wrapped(code: int) -> BaseException:
    try:
        try:
            raise OSError(code, os.strerror(code))
        except OSError as inner:
            raise _StartFailed("the store could not be opened") from inner
    except _StartFailed as outer:
        return outer


@pytest.mark.parametrize("code, exit_code", [
    (errno.EMFILE, worker_wire.EXIT_NO_FILES),
    (errno.ENFILE, worker_wire.EXIT_NO_SYSTEM_FILES)])
def test_a_start_out_of_files_beneath_another_error_is_a_refusal(tmp_path, monkeypatch,
                                                                  code, exit_code):
    assert _exit_code(tmp_path, monkeypatch, _wrapped(code)) == exit_code


def test_any_other_start_failure_is_still_a_crash(tmp_path, monkeypatch):
    err = _StartFailed("no such module")
    assert _exit_code(tmp_path, monkeypatch, err) == worker_wire.EXIT_FATAL
