"""The watcher's count when the data key's cache does not read (kint/tenant_worker/
sessions.py, `_changes_to_push`).

A read of the key cache that may pass by itself (the process out of open files) answered
None, "cannot push", as a key not there does; since a dirty store the space cannot push
from is no work once no session is attached (Watcher.work_left), the idle stop could take
a store whose rows the next tick would have pushed. It is now a count that failed, not for
good (CountFailed, `lasting` false), which the worker keeps. A cache file that is missing
or garbled (someone must connect again) still answers None.

Real parts: a real cache file under a temp KINT_HOME, read by kint's own reader, and a real
EMFILE: a child process lowers its open-file limit and fills it. Stand-in: the space's
context (its enrolment answers "connected", its config names the temp KINT_HOME), as no
worker can be run out of open files at the moment of its watcher's count and no other.
"""

from __future__ import annotations

import subprocess
import sys

CHILD = r'''
import os, resource, sys
from pathlib import Path
from types import SimpleNamespace
from kint.tenant_worker import data_key, sessions, unanchored  # imported before the fill
from kint.tenant_worker.unanchored import CountFailed

home, space = Path(sys.argv[1]), "ab" * 32
cache = home / f"vault-{space[:16]}.aes"
said = []
ctx = SimpleNamespace(
    enrolment=lambda: object(), enrolment_checked=False,
    unanchored=SimpleNamespace(cannot_count=lambda who, err, s: said.append(str(err))),
    config=SimpleNamespace(home=home, space_id=space, space16=space[:16],
                           db=str(home / "memory.db")))

def answer():
    try:
        return repr(sessions._changes_to_push(ctx))
    except CountFailed as err:
        return f"CountFailed lasting={err.lasting}"

print("missing", answer())
cache.write_bytes(b"garbled")
print("garbled", answer())
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (64, hard))
filler = []
try:
    while True:
        filler.append(os.open(os.devnull, os.O_RDONLY))
except OSError:
    pass
out = answer()
for fd in filler:
    os.close(fd)
print("out-of-files", out)
'''


def test_a_key_cache_read_that_may_pass_is_a_count_failed_not_cannot_push(tmp_path):
    home = tmp_path / "kint"
    home.mkdir(mode=0o700)
    done = subprocess.run([sys.executable, "-c", CHILD, str(home)], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    answers = dict(line.split(" ", 1) for line in done.stdout.splitlines())
    assert answers["missing"] == "None", answers  # not connected here: cannot push
    assert answers["garbled"] == "None", answers  # a file to mend: cannot push
    assert answers["out-of-files"] == "CountFailed lasting=False", answers
