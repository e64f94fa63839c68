"""The workers' exit sentinels behind one descriptor (kint/supervisor/exits.py): with
real processes, the supervisor's `zmq.Poller` wakes on the one descriptor when a worker
exits, and `exited` names exactly the workers that did. And the workers a supervisor still
has when its loop ends are ended, whatever they do with SIGTERM."""

from __future__ import annotations

import multiprocessing
import signal
import time
from types import SimpleNamespace
from typing import Any

import zmq

from kint.supervisor.exits import ExitWatch
from kint.supervisor.lifecycle import WorkerLifecycle
from kint.supervisor.workers import WorkerHandle


def test_the_poller_wakes_on_one_descriptor_for_the_worker_that_exited():
    ctx = multiprocessing.get_context("spawn")
    procs = {name: ctx.Process(target=time.sleep, args=(120,)) for name in ("a", "b", "c")}
    watch: ExitWatch[str] = ExitWatch()
    poller = zmq.Poller()
    poller.register(watch.fileno(), zmq.POLLIN)
    try:
        for name, proc in procs.items():
            proc.start()
            watch.watch(proc.sentinel, name)
        assert poller.poll(200) == [] and watch.exited() == []
        procs["b"].kill()
        assert poller.poll(30_000) == [(watch.fileno(), zmq.POLLIN)]
        assert watch.exited() == ["b"]
        watch.forget(procs["b"].sentinel)
        procs["b"].join(10)
        assert poller.poll(200) == [] and watch.exited() == []
        for name in ("a", "c"):
            procs[name].kill()
        deadline = time.monotonic() + 30
        gone: set[str] = set()
        while gone != {"a", "c"} and time.monotonic() < deadline:
            poller.poll(1000)
            gone.update(watch.exited())
        assert gone == {"a", "c"}
    finally:
        for proc in procs.values():
            if proc.is_alive():
                proc.kill()
            proc.join(10)
        watch.close()


def _deaf_to_sigterm(ready: Any) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    ready.set()
    time.sleep(120)


def test_workers_left_by_a_loop_that_raised_are_ended_sigterm_then_sigkill():
    """A supervisor whose loop raised still has its workers; `multiprocess` would join them
    at exit forever (their parent lives on, so they never leave by themselves). Closing
    the supervisor ends them: SIGTERM, and SIGKILL for one that ignores it."""
    ctx = multiprocessing.get_context("spawn")
    ready = ctx.Event()
    polite = ctx.Process(target=time.sleep, args=(120,))
    deaf = ctx.Process(target=_deaf_to_sigterm, args=(ready,))
    sup = SimpleNamespace(handles={}, settings=SimpleNamespace(kill_grace_s=0.5))
    try:
        for name, proc in (("polite", polite), ("deaf", deaf)):
            proc.start()
            sup.handles[name] = WorkerHandle(space_id=name * 8, label=name, tenant="t",
                                             db=f"/{name}.db", state="ready", process=proc,
                                             pid=proc.pid)
        assert ready.wait(60)
        WorkerLifecycle.end_workers_left(sup)  # type: ignore[arg-type]
        assert polite.exitcode == -signal.SIGTERM and deaf.exitcode == -signal.SIGKILL
        assert all(h.process is None and h.state == "stopped" for h in sup.handles.values())
    finally:
        for proc in (polite, deaf):
            if proc.is_alive():
                proc.kill()
            proc.join(10)
