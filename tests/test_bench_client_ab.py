"""bench/client_ab.py's own guards (review30g): each tree's client runs that tree's kint
and no other, a client that ended is said so, and a kernel without schedstat is named
(bench/bench_twohop.py's `cpu_ns`, which every A/B bench shares). The benchmark itself
is run by hand (bench/README.md); these check only what keeps its numbers honest, with
real client processes and no supervisor (none of them gets as far as a call)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

import kint
from conftest import kint_copy

BENCH = Path(__file__).resolve().parent.parent / "bench"
sys.path.insert(0, str(BENCH))

import client_ab  # noqa: E402  (bench/ is no package: on the path above)
from bench_twohop import cpu_ns  # noqa: E402


def _spec(tmp_path: Path) -> dict:
    """What the parent sends a client; it sends no op here, so the client calls nothing."""
    return {"where": {"tenant": "t", "db": str(tmp_path / "memory.db"), "space": "t"},
            "kint_home": str(tmp_path / "kint"), "queries": []}


def _partial_tree(tmp_path: Path) -> Path:
    """A tree holding kint's `__init__.py` only: the venv's editable finder then serves
    `kint.client` and the rest from this checkout."""
    tree = tmp_path / "partial"
    (tree / "kint").mkdir(parents=True)
    (tree / "kint" / "__init__.py").write_bytes(Path(kint.__file__).read_bytes())
    return tree


def _served_from(tree: Path) -> Path:
    """The folder this venv serves `kint.client` from to a process whose path starts with
    the tree at `tree`, as the child's does: its editable install's checkout, which is the
    checkout running the test only when that is the one the venv was installed from (a
    lane's worktree runs against /work/main's)."""
    probe = subprocess.run([sys.executable, "-c", "import sys; sys.path.insert(0, sys.argv[1]); "
                            "import kint.client; print(kint.client.__file__)", str(tree)],
                           text=True, capture_output=True, timeout=60)
    assert probe.returncode == 0, probe.stderr
    return Path(probe.stdout.strip()).parent


def _child(tree: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(BENCH / "client_ab.py"), "--child", str(tree),
                           json.dumps(_spec(tmp_path))], input="", text=True,
                          capture_output=True, timeout=60)


def test_every_kint_module_is_checked_by_path_components(tmp_path):
    main = tmp_path / "main"
    own, beside = main / "kint", tmp_path / "main2" / "kint"
    modules = {
        "kint": SimpleNamespace(__file__=str(own / "__init__.py"), __path__=[str(own)]),
        "kint.client": SimpleNamespace(__file__=str(beside / "client.py")),
        "kint.ns": SimpleNamespace(__file__=None, __path__=[str(beside / "ns")]),
        "kintsugi": SimpleNamespace(__file__=str(beside / "kintsugi.py")),  # not kint's
        "json": json,
    }
    assert client_ab.foreign_kint(modules, main) == [
        f"kint.client ({beside / 'client.py'})", f"kint.ns ({beside / 'ns'})"]
    assert client_ab.foreign_kint({"kint": modules["kint"]}, main) == []


def test_a_partial_trees_client_is_refused_and_a_whole_trees_runs(tmp_path):
    """The old guard read `kint.__file__` only: a tree with nothing but `__init__.py`
    passed it while its client was the venv's checkout's (named: `_served_from`)."""
    tree = _partial_tree(tmp_path)
    served = _served_from(tree)
    assert not served.resolve().is_relative_to(tree.resolve()), served  # a client not its own
    out = _child(tree, tmp_path)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "not the tree at " in out.stderr, out.stderr
    assert f" ({served}/" in out.stderr, out.stderr  # the checkout it came from, named
    kint_copy(tmp_path / "whole")
    out = _child(tmp_path / "whole", tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr


def test_a_client_that_ended_is_said_so_and_every_side_is_closed(tmp_path):
    ended = client_ab.Side("e", _partial_tree(tmp_path), _spec(tmp_path), True)
    ended.proc.wait(timeout=60)  # its pipe closed: the op's write is a broken pipe
    with pytest.raises(client_ab.ClientEnded, match=r"^the client of e ended \(exit 1\)$"):
        ended.block("status")
    ended.close()  # the op left in the pipe's buffer: no broken pipe out of close
    assert ended.proc.stdin is not None and ended.proc.stdin.closed


def test_cpu_ns_names_a_kernel_without_schedstat(tmp_path):
    assert cpu_ns(os.getpid()) > 0
    for pid, stat in ((1, "0 0 0\n"), (2, None)):  # zeros (sched_info off), or no file
        task = tmp_path / str(pid) / "task" / str(pid)
        task.mkdir(parents=True)
        if stat is not None:
            (task / "schedstat").write_text(stat)
        with pytest.raises(RuntimeError, match="CONFIG_SCHED_INFO"):
            cpu_ns(pid, proc=tmp_path)
