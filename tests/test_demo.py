"""`kint demo` (what `make demo` runs) plays the seed's beat end to end on the devchain, a
second machine joining with the owner wallet's signature, and leaves nothing behind."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from conftest import KINT


def test_demo_plays_the_beat_and_cleans_up(sandbox):
    # The demo's folders and processes are looked for in a temporary folder of its own
    # (short: its machines' sockets live under it), not the machine's /tmp, where another
    # test run or a user's `make demo` may be playing at the same time.
    tmp = Path(tempfile.mkdtemp(prefix="kd-"))
    try:
        _plays_the_beat_and_cleans_up(sandbox, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _plays_the_beat_and_cleans_up(sandbox, tmp: Path) -> None:
    out = subprocess.run([KINT, "demo"], env={**sandbox.env, "TMPDIR": str(tmp)}, text=True,
                         capture_output=True, timeout=300)
    text = out.stdout
    assert out.returncode == 0, text + out.stderr
    assert text.rstrip().endswith("demo: done")
    proceeds = [line for line in text.splitlines() if "DECISION: PROCEED: entity rules/" in line]
    assert len(proceeds) == 2  # machine A before the edit, machine B after its pull
    refuse = [line for line in text.splitlines() if "DECISION: REFUSE:" in line]
    assert len(refuse) == 1
    assert "the chain vouches for" in refuse[0] and "(epoch 2, no later than block" in refuse[0]
    assert "(unanchored, head epoch 2 at block" in refuse[0]
    history = [line for line in text.splitlines() if line.strip().startswith("epoch ")
               and " block <= " in line]
    assert [h.split()[1] for h in history] == ["1", "2"]
    assert "store root matches the anchored root" in text
    # The second machine connects the way a wallet owner does: a signature on stdin, the
    # data key out of the head epoch's header; no secret is ever on a command line.
    assert "| kint connect --owner 0x" in text and "--signature -" in text
    assert "data key from chain head header" in text
    assert "RECOVERY-" in text and "fresh vault" in text
    assert not list(tmp.glob("kint-demo-*")), "the demo left its folders"
    assert not sandbox.kint_home.exists(), "the demo must not use the caller's KINT_HOME"
    leftovers = subprocess.run(["pgrep", "-f", f"{tmp}/kint-demo-"], capture_output=True,
                               text=True)
    assert leftovers.stdout.strip() == "", "the demo left processes running"


def test_the_demo_supervisor_refuses_a_home_outside_a_sandbox(sandbox):
    import sys

    out = subprocess.run([sys.executable, "-m", "kint.demo_supervisor", "--home",
                          str(sandbox.kint_home)], env=sandbox.env, capture_output=True,
                         text=True, timeout=30)
    assert out.returncode == 2 and "not inside a kint demo sandbox" in out.stderr


def test_the_demo_supervisor_refuses_a_relative_home(tmp_path, sandbox):
    """A relative --home was made absolute from the current folder, so run in a demo
    sandbox it served a home there: refused instead, as kint.supervisor refuses one."""
    import sys

    from kint.demo_supervisor import SANDBOX_MARKER
    from kint.paths import HOME_REFUSAL_CODE, RELATIVE_PROBLEM

    box = tmp_path / "box"
    box.mkdir()
    (box / SANDBOX_MARKER).write_text("")
    try:
        out = subprocess.run([sys.executable, "-m", "kint.demo_supervisor", "--home",
                              "box/kint"], env=sandbox.env, cwd=tmp_path, capture_output=True,
                             text=True, timeout=30)
    except subprocess.TimeoutExpired:
        pytest.fail("the demo supervisor served the relative home instead of refusing it")
    assert out.returncode == 2, out.stderr
    assert out.stderr.splitlines()[0] == (
        f"kint: error: box/kint {RELATIVE_PROBLEM} [{HOME_REFUSAL_CODE}]")
    assert not (box / "kint").exists()
