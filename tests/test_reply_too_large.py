"""An answer too large to send is refused TOO_LARGE, never left to time out.

`history` sends every anchored version of one row, its body included: Sibyl lets one value
be up to 1 MiB, so a row rewritten a few times has a history larger than a reply may be
(MAX_MESSAGE_BYTES, 4 MiB). Here a real store's row is anchored again and again with a
~1 MiB body (the epochs are sealed and recorded for real by tests/anchoring.py; the body
compresses to little, so each fits one epoch), and the real supervisor and worker are asked
for its history:

- between the reply limit and the back socket's frame limit (SOCKET_MAX_MESSAGE_BYTES),
  the supervisor used to drop the worker's reply, and past the frame limit ZeroMQ dropped
  the worker's connection with it: either way the client waited for TIMEOUT. The worker
  now sends TOO_LARGE, naming the op and the size, with a hint;
- a reply that still reaches the supervisor over the limit (the worker's own check
  skipped, by the test fault hook `unguarded_reply`) is answered TOO_LARGE by the
  supervisor.

Each time the same worker answers the next request: no restart, no lost connection.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from anchoring import anchor
from conftest import make_sandbox, sibyl_client
from kint.client import KintError
from kint.protocol.limits import MAX_MESSAGE_BYTES, SOCKET_MAX_MESSAGE_BYTES

# Sibyl refuses a value of 1024 KiB or more; this leaves room for the JSON around it.
BODY_CHARS = 1024 * 1024 - 4096
HISTORY = {"tier": "entity", "key": "handbook", "category": "rules"}


@pytest.fixture(scope="module")
def box(tmp_path_factory):
    root = tmp_path_factory.mktemp("too-large")
    # Never recycled for its memory (KINT_WORKER_RECYCLE_MIB=0): each test asks that the
    # same worker answers after a refused reply, and a worker that built a ~9 MiB history
    # holds ~28.5 MiB of its own (over the 22 MiB default), so a loaded box's quiet spell
    # before that status had it replaced: a stop these tests do not test.
    sb = make_sandbox(root, KINT_TEST_CRASH_FLAG=str(root / "fault-flag"),
                      KINT_WORKER_RECYCLE_MIB="0")
    sb.start_entitled()
    yield sb
    sb.shutdown()


def rewritten(sb, profile: str, versions: int) -> Path:
    """A store whose one row was anchored `versions` times, each time with another ~1 MiB
    body. The store starts afresh before each version: Sibyl's free tier caps a store at
    5 MB, and only the row's current text matters to the next epoch's diff."""
    db = sb.profile_db(profile)
    for i in range(versions):
        for old in db.parent.glob(db.name + "*"):
            old.unlink()
        client = sibyl_client(db, sb.tenant)
        client.set_entity("rules", "handbook", {"text": chr(ord("a") + i) * BODY_CHARS})
        client.storage.close()
        anchor(sb.kint_home, sb.label(db), db, sb.tenant, block=100 + i)
    return db


@pytest.fixture(scope="module")
def five(box) -> Path:
    """A store whose row was anchored 5 times (~5 MiB of history: over the reply limit,
    under the frame limit), made once for the two tests that ask for it: neither writes to
    it (a refused history, a status and a history of one version)."""
    return rewritten(box, "five", 5)


def history_refused(sb, db: Path) -> KintError:
    with pytest.raises(KintError) as refused:
        sb.call("history", db, timeout_s=50, args=HISTORY)
    return refused.value


def still_served(sb, db: Path, pid: int, versions: int) -> None:
    """The same worker answers the next request, and the hint's narrower ask works."""
    assert sb.call("status", db, timeout_s=30)["worker"]["pid"] == pid
    one = sb.call("history", db, timeout_s=50, args={**HISTORY, "block": 100 + versions - 1})
    assert one["version"]["seq"] == versions


def test_a_history_over_the_reply_limit_is_refused_too_large(box, five):
    db = five  # ~5 MiB: over the reply limit, under the frame limit
    pid = box.call("status", db, timeout_s=30)["worker"]["pid"]
    out = box.kint("--db", str(db), "history", "entity", "handbook", "--category", "rules",
                   "--json", timeout=120)
    # --json: the refusal is the JSON error object on stdout, nothing on stderr.
    assert out.returncode == 2 and out.stderr == "", out.stdout + out.stderr
    refusal = json.loads(out.stdout)
    assert refusal["error"] == "TOO_LARGE", refusal
    assert "did not finish" not in refusal["message"]
    assert "the history reply is " in refusal["message"], refusal
    size = int(refusal["message"].split("the history reply is ")[1].split()[0])
    assert MAX_MESSAGE_BYTES < size < SOCKET_MAX_MESSAGE_BYTES
    assert f"over the limit of {MAX_MESSAGE_BYTES}" in refusal["message"]
    assert "--block N" in refusal["hint"], refusal
    # The worker refused it itself: nothing over the limit reached the supervisor.
    log = (box.kint_home / "supervisor.log").read_text()
    assert f"space {box.row(db)['space']}: a history reply" not in log
    still_served(box, db, pid, 5)


def test_a_history_over_the_socket_frame_limit_is_refused_too_large(box):
    db = rewritten(box, "nine", 9)  # ~9 MiB: ZeroMQ would drop the worker's connection
    pid = box.call("status", db, timeout_s=30)["worker"]["pid"]
    err = history_refused(box, db)
    assert err.code == "TOO_LARGE", (err.code, err.message)
    size = int(err.message.split("the history reply is ")[1].split()[0])
    assert size > SOCKET_MAX_MESSAGE_BYTES
    assert "--block N" in (err.hint or "")
    still_served(box, db, pid, 9)


def test_the_supervisor_answers_an_oversized_reply_too_large(box, five):
    """A reply over the limit that reaches the supervisor anyway goes no further: its
    client gets TOO_LARGE from the supervisor, not a frame it would refuse, nor a TIMEOUT."""
    db = five
    pid = box.call("status", db, timeout_s=30)["worker"]["pid"]
    flag = Path(box.env["KINT_TEST_CRASH_FLAG"])
    flag.write_text("unguarded_reply")
    err = history_refused(box, db)
    assert not flag.exists()  # the worker did skip its own check
    assert err.code == "TOO_LARGE", (err.code, err.message)
    size = int(err.message.split("the history reply is ")[1].split()[0])
    assert MAX_MESSAGE_BYTES < size < SOCKET_MAX_MESSAGE_BYTES
    log = (box.kint_home / "supervisor.log").read_text()
    assert f"a history reply of {size} bytes is over the limit" in log
    still_served(box, db, pid, 5)
