"""A parametrized table's commands, run ahead of its tests, two at a time.

A table whose every case is one `kint` command, independent of every other case's outcome
and state (a refusal made before anything is written or sent), spent most of its time in
each command's interpreter start and imports (~0.2-0.7 s of one core each), one command
after another while the box's second core idled. A module fixture hands the table's cases
to `running_ahead` when the first of its tests starts: two commands run at any time, in
the table's order, and each test waits for its own case's outcome and makes its own
assertions on it. A failing case is still its own test's failure, under its own id, with
the checks it made before; only the moment its command ran moved.

Only the cases this session collected run (`collected_ids`): a test picked out with `-k`
does not wait for the whole table. (Within one test, machines_together.side_by_side runs
independent lanes of commands.)
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Mapping

import pytest

# Two commands at a time: the suite's box has two cores, and the test process itself waits.
LANES = 2
# A bound on one case's wait for its command (each command keeps its own timeout too).
WAIT_S = 300


class TableRuns:
    """The outcomes of a table's commands, by case id, as they come in."""

    def __init__(self, pool: ThreadPoolExecutor, runs: Mapping[Any, Callable[[], Any]]):
        self._runs: dict[Any, Future] = {case: pool.submit(run) for case, run in runs.items()}

    def cases(self) -> list[Any]:
        """The cases' ids, in the order they were handed over."""
        return list(self._runs)

    def outcome(self, case: Any) -> Any:
        """Case `case`'s outcome once its command has ended (its error raised here)."""
        return self._runs[case].result(timeout=WAIT_S)

    def wait_all(self) -> None:
        """Once every case's command has ended: for a later test that changes what the
        commands read (each case's own test still reports its outcome)."""
        for run in self._runs.values():
            run.exception(timeout=WAIT_S)


@contextmanager
def running_ahead(runs: Mapping[Any, Callable[[], Any]]) -> Iterator[TableRuns]:
    """`runs` (a case's id, any hashable -> a function running that case's command) started
    now, LANES at a time, for the `with` block; on the way out, every command still running
    is waited for (nothing of a case outlives its module)."""
    pool = ThreadPoolExecutor(max_workers=LANES)
    try:
        yield TableRuns(pool, runs)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def collected_ids(request: pytest.FixtureRequest, test: Callable[..., Any]) -> set[str]:
    """The ids of `test`'s parametrized cases this session will run."""
    return {item.callspec.id for item in request.session.items
            if getattr(item, "function", None) is test and hasattr(item, "callspec")}
