"""A failed test names kint's files changed since the session started (tests/
checkout_watch.py): such a change stops every supervisor the tests started, and the
failures it causes (Sibyl refusing the test sign-in file, WORKER_DOWN "the supervisor is
stopping") read as a flake under load unless the report says so.

The fingerprint's comparison on a package of the test's own; the hooks' wiring through a
pytest session of its own loading the suite's conftest, whose package fingerprint the
inner test alters in memory: no file of kint/ is touched, so no supervisor of another
test run from this checkout stops for it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

from checkout_watch import NAMED_AT_MOST, SECTION, CheckoutWatch

TESTS = Path(__file__).resolve().parent


def package(root: Path) -> Path:
    (root / "tenant_worker").mkdir(parents=True)
    (root / "__init__.py").write_text("")
    (root / "tenant_worker" / "history.py").write_text("x = 1\n")
    (root / "tenant_worker" / "pull.py").write_text("y = 1\n")
    return root


def test_the_files_added_removed_or_rewritten_are_named(tmp_path):
    root = package(tmp_path / "kint")
    watch = CheckoutWatch(root)
    assert watch.changed() == [] and watch.note() is None
    (root / "tenant_worker" / "__pycache__").mkdir()  # Python's own writes are no change
    (root / "tenant_worker" / "__pycache__" / "pull.cpython-311.pyc").write_bytes(b"\0")
    assert watch.changed() == []

    history = root / "tenant_worker" / "history.py"
    st = history.stat()
    os.utime(history, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    (root / "tenant_worker" / "pull.py").unlink()
    (root / "tenant_worker" / "push.py").write_text("z = 1\n")
    assert watch.changed() == ["tenant_worker/history.py", "tenant_worker/pull.py",
                               "tenant_worker/push.py"]
    note = watch.note()
    assert note is not None
    assert "(tenant_worker/history.py, tenant_worker/pull.py, tenant_worker/push.py)" in note
    assert "damaged or another computer's" in note and "the supervisor is stopping" in note


def test_past_a_few_files_the_rest_are_counted(tmp_path):
    root = package(tmp_path / "kint")
    watch = CheckoutWatch(root)
    for n in range(NAMED_AT_MOST + 3):
        (root / f"added_{n}.py").write_text("")
    note = watch.note()
    assert note is not None and "added_4.py and 3 more)" in note
    assert "added_5.py" not in note


def test_only_a_failed_report_is_annotated(tmp_path):
    root = package(tmp_path / "kint")
    watch = CheckoutWatch(root)
    failed = SimpleNamespace(failed=True, sections=[])
    watch.annotate(failed)
    assert failed.sections == []  # nothing changed
    (root / "added.py").write_text("")
    passed = SimpleNamespace(failed=False, sections=[])
    watch.annotate(passed)
    watch.annotate(failed)
    assert passed.sections == []
    assert [title for title, _ in failed.sections] == [SECTION]
    assert "(added.py)" in failed.sections[0][1]


INNER = '''
import conftest


def test_a_fails_with_kint_as_it_was():
    assert False, "a failure of its own"


def test_b_fails_after_kint_changed():
    start = conftest.checkout.start
    conftest.checkout.start = tuple(e for e in start if e[0] != "__init__.py")
    assert False, "a failure after the edit"


def test_c_passes_after_kint_changed():
    pass
'''


def _own_run(env: dict[str, str]) -> dict[str, str]:
    """`env` less what would make a session of its own a part of this run: with this
    run's KINT_TESTS_RUN_ROOT, one run in a single process (no xdist) took itself for the
    run's controller and at its end stopped the run's devchain, removed its folder and
    marked the run failed; with PYTEST_XDIST_WORKER, it took itself for a worker. Its own
    run's folder is made under this run's temporary folder, and goes with it."""
    return {name: value for name, value in env.items()
            if name != "KINT_TESTS_RUN_ROOT" and not name.startswith("PYTEST_XDIST_")}


def test_the_suite_names_the_change_under_the_failure_and_in_its_summary(tmp_path):
    """The suite's own conftest, loaded as a plugin by a session of its own: the failure
    before the change says nothing of it, the one after names the file under its
    traceback, the passing test adds nothing, and the summary says it once."""
    (tmp_path / "test_inner.py").write_text(INNER)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "conftest", "-p", "no:cacheprovider",
         "-c", str(tmp_path / "pytest.ini"), "--rootdir", str(tmp_path), "-q",
         str(tmp_path / "test_inner.py")],
        env={**_own_run(os.environ), "PYTHONPATH": str(TESTS)}, cwd=tmp_path, text=True,
        capture_output=True, timeout=120, stdin=subprocess.DEVNULL)
    text = out.stdout + out.stderr
    assert "2 failed, 1 passed" in text, text
    assert f"= {SECTION} =" in text, text
    before, after = text.split("test_b_fails_after_kint_changed _", 1)
    assert SECTION not in before, text
    under_b, summary = after.split(f"= {SECTION} =", 1)
    assert under_b.count(f"- {SECTION} -") == 1 and "(__init__.py)" in under_b, text
    assert SECTION not in summary and "(__init__.py)" in summary, text
