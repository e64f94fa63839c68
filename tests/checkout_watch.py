"""Naming an edit of kint's own files made while the suite runs, on the tests it failed.

Every supervisor a test starts runs the checkout's kint, and stops on its own once a file
of the package changes (kint/supervisor/code_watch.py: an upgrade, or an edit of an
editable install). The test's next `kint` command then starts a production supervisor in
its place, without the suite's preloads: no test account gate (tests/support/
kint_test_gate.py), so its Sibyl refuses the machine's test sign-in file as "damaged or
belongs to another computer", and no crash point or hold (kint_test_faults.py) acts.
A module whose machines outlive a test (tests/test_overtaken.py) then fails test after
test with that refusal, or with WORKER_DOWN "the supervisor is stopping" for a request that
met the upgrade's drain: it reads as a flake under load, and was taken for one (a lane
wrote the modules of a split into its checkout while the module ran from it). So the suite takes the
package's fingerprint when it starts, and a failed test whose package no longer matches it carries a
section naming the changed files and what that does; the session's summary says it once more.

The tests that move a file's mtime on purpose (test_upgrade.py, test_upgrade_sessions.py)
put it back before their test ends, so their own reports see the package as it was.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kint.supervisor.code_watch import Signature, code_signature

SECTION = "kint's files changed during this run"
# Past this many, the note counts the rest rather than naming them.
NAMED_AT_MOST = 5


class CheckoutWatch:
    """The kint package's fingerprint at the suite's start (or `root`'s, for a test of
    this module), and what differs from it now."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = root
        self.start: Signature = code_signature(root)

    def changed(self) -> list[str]:
        """The package's files added, removed or rewritten since the start, by path."""
        now = code_signature(self.root)
        if now == self.start:  # the usual answer, without building the maps
            return []
        before = {entry[0]: entry[1:] for entry in self.start}
        after = {entry[0]: entry[1:] for entry in now}
        return sorted(path for path in before.keys() | after.keys()
                      if before.get(path) != after.get(path))

    def note(self) -> str | None:
        """What a failed test's report says when the package changed, else None."""
        changed = self.changed()
        if not changed:
            return None
        named = ", ".join(changed[:NAMED_AT_MOST])
        more = len(changed) - NAMED_AT_MOST
        if more > 0:
            named += f" and {more} more"
        return (f"kint/ changed after this test session started ({named}). Every supervisor "
                "started before the change stops for an upgrade (kint/supervisor/"
                "code_watch.py), and a test machine's next `kint` command starts a "
                "production one without the suite's preloads (tests/support/"
                "run_supervisor.py): its Sibyl refuses the test sign-in file as damaged or "
                "another computer's, and no crash point or hold acts; a request that met "
                "the upgrade's drain gets WORKER_DOWN \"the supervisor is stopping\". The "
                "failure may be that, not the test's: run it again with the checkout left "
                "alone while tests run from it.")

    def annotate(self, report: Any) -> None:
        """Add the note to a failed test report (`pytest.TestReport`) when it applies."""
        if not report.failed:
            return
        note = self.note()
        if note is not None:
            report.sections.append((SECTION, note))
