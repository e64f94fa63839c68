"""The workers' exit sentinels behind one descriptor (kint/supervisor/exits.py): with
real processes, the supervisor's `zmq.Poller` wakes on the one descriptor when a worker
exits, and `exited` names exactly the workers that did."""

from __future__ import annotations

import multiprocessing
import time

import zmq

from kint.supervisor.exits import ExitWatch


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
