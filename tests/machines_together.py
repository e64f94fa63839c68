"""Several machines on the session's devchain, their test supervisors started side by side;
and a test's independent runs of commands, side by side.

A test supervisor's start is mostly its interpreter importing kint, ZeroMQ and Sibyl, then
its forkserver doing the same: a second or more of one core each. A test that needs two
machines waited for one start, then the other; started together, the box's second core
takes the other, and the test waits about one start's time. Each machine is what
`chain_machines.new_machine` makes (the same steps, its session key made the same way),
only the supervisors' starts overlap.

A `kint` command is mostly its interpreter's start and imports too (~0.1 s to ~0.7 s of one
core): a test that runs several commands no one of which needs another's outcome or state
runs them in lanes (`side_by_side`), each lane's commands in their order.

A module whose tests each need a machine of their own, new, starts them all at once
(`MachinePool`, one per test the session runs there) rather than one start per test.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

from chain_machines import join_devchain, make_session_key
from conftest import Sandbox, make_sandbox


def new_machines(roots: list[Path], chain_home: Path, *,
                 envs: list[dict[str, str]] | None = None, **env: str) -> list[Sandbox]:
    """One machine per root, in that order, each as `new_machine(root, chain_home, **env)`
    makes it; with `envs`, one environment per root on top of `env`. The session keys are
    made one after another (`make_session_key` swaps this process's environment for the
    call), then every supervisor is started at once and waited for. A machine whose
    supervisor did start is stopped when another one fails."""
    machines = []
    for root, own in zip(roots, envs or [{}] * len(roots), strict=True):
        machine = make_sandbox(root, **env, **own)
        join_devchain(chain_home, machine)
        make_session_key(machine)
        machines.append(machine)
    with ThreadPoolExecutor(max_workers=len(machines)) as pool:
        starts = [pool.submit(machine.start_entitled) for machine in machines]
    failed = [start.exception() for start in starts if start.exception() is not None]
    if failed:
        for machine in machines:
            machine.shutdown()
        raise failed[0]
    return machines


class MachinePool:
    """New machines for the tests of one module, each taking one it alone uses: one per
    test of `request`'s module the session runs that asks for `fixture`, started together
    (`new_machines`) when the pool is made. A test that finds the pool empty (run again by
    a plugin, or a count that missed it) gets a machine started for it alone, never an
    IndexError. `shutdown` stops the ones never taken; a test stops its own."""

    def __init__(self, request: Any, fixture: str, root: Path, chain_home: Path,
                 **env: str) -> None:
        count = sum(1 for item in request.session.items
                    if item.module is request.module and fixture in item.fixturenames)
        self._root, self._chain_home, self._env = root, chain_home, env
        self._made = count
        self._free = new_machines([root / f"m{n}" for n in range(count)], chain_home, **env)

    def take(self) -> Sandbox:
        if self._free:
            return self._free.pop()
        self._made += 1
        return new_machines([self._root / f"m{self._made}"], self._chain_home, **self._env)[0]

    def shutdown(self) -> None:
        for machine in self._free:
            machine.shutdown()
        self._free.clear()


def side_by_side(*lanes: Callable[[], Any]) -> list[Any]:
    """Run each lane (a function) in a thread of its own, all at once; their results, in
    order, once every lane has ended. The first lane's error, if any failed, is raised
    then (never while another lane still runs a command)."""
    with ThreadPoolExecutor(max_workers=len(lanes)) as pool:
        runs = [pool.submit(lane) for lane in lanes]
    for run in runs:
        error = run.exception()
        if error is not None:
            raise error
    return [run.result() for run in runs]


@contextmanager
def machines_started(roots: list[Path], chain_home: Path, **env: str) -> Iterator[list[Sandbox]]:
    """`new_machines(roots, chain_home, **env)` for the `with` block (a module fixture's
    yield), every one stopped after it."""
    made = new_machines(roots, chain_home, **env)
    try:
        yield made
    finally:
        for machine in made:
            machine.shutdown()


@contextmanager
def running_together(machines: Mapping[str, Sandbox]) -> Iterator[Mapping[str, Sandbox]]:
    """`machines` (made, not started: a module's own mix of settings and keys) with their
    supervisors started side by side, for the `with` block; every one stopped after it,
    or when a start fails."""
    try:
        side_by_side(*(machine.start_entitled for machine in machines.values()))
        yield machines
    finally:
        for machine in machines.values():
            machine.shutdown()
