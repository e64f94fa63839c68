"""Turning results into the lines a person reads: the text helpers every renderer shares
(widths, escapes, ages, times, a refusal's lines) and `kint supervisor status`'s table,
which is all that command loads of it (tests/test_cli.py, STATUS_KINT_MODULES). A space's
`kint status` is rendered in render_space.py; pull's, verify's and history's lines in
render_pull.py and render_verify.py. Kept apart from the CLI's wiring so the formats can be
tested and reused (the demo prints the same tables)."""

from __future__ import annotations

import os
from datetime import datetime, timezone
from typing import Any

STATUS_COLUMNS = ["SPACE", "TENANT", "STORE", "PID", "STATE", "OP", "RPC", "HEAD",
                  "UNANCHORED", "HELD", "RESTARTS", "LAST BEAT", "UPTIME", "MEMORY"]


def _char_width(ch: str) -> int:
    """The columns `ch` takes on a terminal: two for a wide or full-width character (CJK),
    none for a combining mark, one for the rest."""
    import unicodedata

    if unicodedata.combining(ch):
        return 0
    return 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1


def display_width(text: str) -> int:
    """The columns `text` takes on a terminal (`len` for ASCII, the common case)."""
    if text.isascii():
        return len(text)
    return sum(_char_width(ch) for ch in text)


def _shorten(text: str, width: int, keep_end: bool = False) -> str:
    """`text` cut to `width` columns with `...` where it was cut (its end kept for a path),
    counting a wide character as the two columns it takes: a tenant named in Japanese
    would otherwise take twice its column and push every column after it out of line."""
    if display_width(text) <= width:
        return text
    room, used, kept = width - 3, 0, []
    for ch in (reversed(text) if keep_end else text):
        used += _char_width(ch)
        if used > room:
            break
        kept.append(ch)
    return "..." + "".join(reversed(kept)) if keep_end else "".join(kept) + "..."


def _pad(text: str, width: int) -> str:
    """`text` followed by spaces up to `width` columns (`str.ljust` counts characters)."""
    return text + " " * (width - display_width(text))


def age_text(seconds: float | None) -> str:
    """A duration in a status column's few characters (`4.2s`, `3m`, `1.5h`; `-` when unknown)."""
    if seconds is None:
        return "-"
    if seconds < 60:
        return f"{seconds:.1f}s"
    if seconds < 3600:
        return f"{seconds / 60:.0f}m"
    return f"{seconds / 3600:.1f}h"


def _rpc(row: dict[str, Any]) -> str:
    rpc = row.get("rpc")
    if not rpc:
        return "-"
    if rpc.get("call"):
        where = rpc.get("endpoint")  # the call another endpoint than the primary holds up
        return (f"{rpc['call']} {age_text(rpc.get('age_s'))}"
                + (f" ({where} rpc)" if where and where != "primary" else ""))
    if rpc.get("down_since_s") is not None:
        return f"down {age_text(rpc['down_since_s'])}"
    return "ok"


def _state(row: dict[str, Any]) -> str:
    state = row["state"]
    if state == "quarantined" and row.get("retry_in_s") is not None:
        return f"quarantined (retry {age_text(row['retry_in_s'])})"
    if row.get("no_room"):
        return f"{state} (no room)"
    refused = row.get("start_refused")
    if refused:
        if refused.get("code") == "BUSY":  # the worker began short of open files
            return f"{state} (no open files)"
        pid = refused.get("holder_pid")
        return f"{state} (held by pid {pid})" if pid else f"{state} (lock held)"
    waits = row.get("waits_for")  # a starting worker's wait for the space's worker lock
    if waits:
        pid = waits.get("pid")
        return f"{state} (waits for pid {pid})" if pid else f"{state} (waits for the lock)"
    return state


def _head(head: dict[str, Any] | None) -> str:
    """The HEAD column: `seq@block`, the seq alone before anything is anchored (no block)."""
    if not head:
        return "-"
    return f"{head['seq']}@{head['block']}" if head.get("block") is not None else str(head["seq"])


def epoch_at(seq: int, block: int | None) -> str:
    """A head in `kint status`'s and doctor's words: `epoch N at block B`, or, before the
    first epoch (seq 0, whose mirror has no block), that nothing is anchored."""
    if not seq:
        return "epoch 0 (nothing anchored yet)"
    return f"epoch {seq} at block {block}"


def _op(op: dict[str, Any] | None, progress: str | None,
        failure: dict[str, Any] | None = None, running: int = 0) -> str:
    """The OP column: the oldest op in flight and its age, `+N` for the `running` beside it
    (`--json` names each under `ops`), else what a push or pull started by the store
    watcher is doing (it runs with no op in flight), else the watcher's failed push it
    waits to try again (`push failed x3`; the line under the table says why), else `-`."""
    if op:
        more = f" +{running - 1}" if running > 1 else ""
        return f"{op['name']} {age_text(op['age_s'])}{more}"
    if progress:
        return _shorten(progress, 24)
    return f"push failed x{failure['attempts']}" if failure else "-"


def _unanchored(row: dict[str, Any]) -> str:
    """The UNANCHORED column: the count, `~N` when the store or the head moved since it was
    made, or it was made within two seconds of the store's last write (the worker
    recounts; the line under the table says so), `-` when none was made."""
    count = row.get("unanchored")
    if count is None:
        return "-"
    return f"~{count}" if row.get("unanchored_stale") else str(count)


def status_rows(status: dict[str, Any]) -> list[list[str]]:
    rows = []
    for row in status["spaces"]:
        op = row.get("op")
        head = row.get("head")
        held = row.get("held")
        rows.append([
            row["space"],
            # Escaped before they are cut: an escape is what takes the columns.
            _shorten(printable(row["tenant"]), 14),
            _shorten(printable(row["store"]), 40, keep_end=True),
            str(row["pid"]) if row.get("pid") else "-",
            _state(row),
            _op(op, row.get("progress"), row.get("watcher_failure"),
                row.get("ops_running") or 0),
            _rpc(row),
            _head(head),
            _unanchored(row),
            (held.get("reason") or "held") if held else "-",
            str(row["restarts"]),
            age_text(row.get("last_beat_age_s")),
            age_text(row.get("uptime_s")),
            f"{row['memory_mib']:.1f}M" if row.get("memory_mib") is not None else "-",
        ])
    return rows


def home_short(path: object) -> str:
    """`path` as a person reads it: under the user's home, `~/...`, as kint v0.3.0's `kint
    join` names the store (`store ~/.sibyl-memory/memory.db`, 03-new-machine.md); any
    other path as it is. Escaped (`printable`). For text only: `--json` gives the whole
    path, which a script opens as it is."""
    text = str(path)
    home = os.path.expanduser("~").rstrip(os.sep)
    if home and (text == home or text.startswith(home + os.sep)):
        text = "~" + text[len(home):]
    return printable(text)


def printable(text: str) -> str:
    """`text` with control characters escaped (`\\n`, `\\x1b`): a path with a newline in it
    must not break a table or a status line, nor a terminal escape reach the terminal."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii")
                   for ch in text)


def table(columns: list[str], rows: list[list[str]]) -> str:
    rows = [[printable(c) for c in r] for r in rows]
    widths = [max(len(columns[i]), *(display_width(r[i]) for r in rows)) if rows
              else len(columns[i]) for i in range(len(columns))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths)).rstrip()]
    for r in rows:
        lines.append("  ".join(_pad(c, w) for c, w in zip(r, widths)).rstrip())
    return "\n".join(lines)


def refusal_text(code: str, message: str, hint: str | None) -> str:
    """A refused call as the CLI prints it on stderr: what happened, then what to do."""
    text = f"kint: error: {message} [{code}]"
    return f"{text}\nhint: {hint}" if hint else text


def supervisor_status_text(status: dict[str, Any]) -> str:
    sup = status["supervisor"]
    head = f"supervisor pid {sup['pid']}, up {age_text(sup['uptime_s'])}, {sup['kint_home']}"
    closed = (sup.get("front") or {}).get("closed")
    if closed and closed.get("stopping"):  # its stop began: no count is why
        head += ("\nstopping: new clients refused until it has stopped; the next call "
                 "starts a new one")
    elif closed:  # seen only by a client connected before (a --watch started while it took
        # new clients, which keeps its connection): a new one is refused BUSY
        head += (f"\nnew clients refused: {closed['open']} of the supervisor's "
                 f"{closed['limit']} open files (ulimit -n) are in use; it takes new ones "
                 f"again as some close")
    if not status["spaces"]:
        return (head + "\nno spaces yet (a worker starts on the first request for its space)"
                + "\n" + started_with_text(sup.get("started_with") or []))
    text = head + "\n" + table(STATUS_COLUMNS, status_rows(status))
    spaces = status["spaces"]
    if any(r.get("unanchored") is not None and r.get("unanchored_stale") for r in spaces):
        text += ("\n~N unanchored: counted before the store or the head last moved, or "
                 "within two seconds of the store's last write; a running worker recounts "
                 "within seconds")
    for row in spaces:
        shared = row.get("store_shared")
        if shared:  # the worker's words, which quote paths: escaped as the cells are
            text += (f"\nWARNING: space {row['space']}: "
                     f"{printable(str(shared.get('message')))}; "
                     f"{printable(str(shared.get('hint')))}")
    # The watcher's lines, each field in its turn over every space, as `kint status` words
    # them for one (render_space), here named by the space's watcher.
    for field, words in (("watcher_failure", watcher_failure_text),
                         ("watcher_uncounted", watcher_uncounted_text),
                         ("watcher_settings", watcher_settings_text)):
        for row in spaces:
            if row.get(field):
                text += "\n" + words(row[field], f"watcher of {row['space']}")
    for row in spaces:
        if row.get("parked"):
            text += "\n" + parked_text(row["parked"], row["space"])
    for row in spaces:
        if row.get("last_exit"):
            # A worker that could not start says why in its own words, which may quote
            # a store path or a tenant's name: escaped as the table's cells are.
            text += f"\nlast exit of {row['space']}: {printable(row['last_exit'])}"
        if row.get("start_refused"):
            text += f"\nto serve {row['space']}: {printable(row['start_refused']['hint'])}"
    refused = [row for row in spaces if row.get("no_room")]
    files = sup.get("open_files")
    if refused and files:  # one line, however many spaces wait for room
        text += (f"\n{len(refused)} space(s) refused a worker: the supervisor has "
                 f"{files['open']} files open of its limit of {files['limit']} (ulimit -n), "
                 f"{files['reserve']} kept free for clients; a worker that goes idle makes "
                 f"room, or raise the limit and restart the supervisor")
    return text + "\n" + started_with_text(sup.get("started_with") or [])


def parked_text(parked: list[dict[str, Any]], space: str) -> str:
    """A space's requests waiting for an exited worker's last replies, as `kint supervisor
    status` says them under its table, the space first (`parked_words`)."""
    return f"{space}: {parked_words(parked)}"


def parked_words(parked: list[dict[str, Any]]) -> str:
    """Requests waiting for an exited worker's last replies (`kint supervisor status`, and
    `kint status`'s `parked:` line): how many, for which ops, of which worker, and when
    they are answered without them (WORKER_DOWN, or TIMEOUT at a request's own
    deadline)."""
    ops = ", ".join(sorted({printable(str(p["op"])) for p in parked}))
    # Two exits of the space within the grace (a second restart) leave two workers' requests.
    pids = sorted({int(p["pid"]) for p in parked if p.get("pid") is not None})
    named = ", ".join(map(str, pids))
    workers = (f"workers (pids {named})" if len(pids) > 1
               else f"worker (pid {named})" if pids else "worker")
    left = max(float(p["left_s"]) for p in parked)
    return (f"{len(parked)} request(s) ({ops}) wait for the last replies of its exited "
            f"{workers}, answered without them within {age_text(left)}")


def started_with_text(entries: list[dict[str, Any]]) -> str:
    """The settings the supervisor took from the environment it was started with (secrets
    as `set`, endpoints without their keys: kint.settings.started_with), one line."""
    if not entries:
        return "started with: none of kint's settings in its environment"
    return "started with: " + ", ".join(f"{e['name']}={printable(str(e['value']))}"
                                        for e in entries)


def utc_time(unix: int, pattern: str = "%Y-%m-%dT%H:%M:%SZ") -> str:
    """A unix time as UTC, for people. The contract keeps a session key's expiry as a
    uint64, and an owner may give a key `type(uint64).max` for "never": past year 9999 no
    datetime holds it, so it is shown as its number rather than stop the command."""
    try:
        return datetime.fromtimestamp(int(unix), timezone.utc).strftime(pattern)
    except (OverflowError, ValueError, OSError):
        return f"unix time {int(unix)} (past year 9999)"


def watcher_settings_text(entries: list[dict[str, Any]], who: str) -> str:
    """The push settings the watcher's pushes take from a kint-server session, beside the
    supervisor's own (`kint supervisor status`, under its table; `kint status`)."""
    taken = "; ".join(f"{e['name']}={printable(value_text(e['value']))} (the supervisor's: "
                      f"{printable(value_text(e['own']))}, {e['own_source']})" for e in entries)
    return f"{who}: its pushes run with the kint-server session's {taken}"


def value_text(value: Any) -> str:
    """A setting's value as `--json` gives it (kint.settings.report.json_value), as a text
    line prints it: `unset` for none or a switch off, `1` for one on, a whole number of
    seconds without its `.0`. The one rule for `kint config show`'s lines and the status's
    push settings, which had a copy each (kint.settings.values.shown is another job: it
    starts from the parsed value and its setting, masking a secret and a URL's key)."""
    if value is None or value is False:
        return "unset"
    if value is True:
        return "1"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def watcher_uncounted_text(uncounted: dict[str, Any], who: str = "watcher") -> str:
    """Why the store watcher cannot count the store's unanchored rows (`kint status`'s
    line, and `kint supervisor status`'s under its table), and what that does to the
    worker's stops: a failure for good (`lasting`; a worker before it said none, and
    meant that) holds off no idle exit, nor a recycle while no session is attached; one
    that may pass (a lock) keeps the store the worker's until it is pushed."""
    then = ("it holds off no idle stop of the worker, nor a recycle while no session is "
            "attached" if uncounted.get("lasting", True) else
            "the worker keeps the store (no idle stop, no recycle) until it is pushed")
    return (f"{who}: cannot count the store's unanchored rows for "
            f"{age_text(uncounted['age_s'])}: {printable(uncounted['message'])}; counted "
            f"again later, and {then}")


def watcher_failure_text(failure: dict[str, Any], who: str = "watcher") -> str:
    """The store watcher's last failed push, while it waits to try again (`kint status`'s
    line, and `kint supervisor status`'s under its table, `who` naming the space's)."""
    attempts = failure["attempts"]
    next_try = (f"next attempt in {age_text(failure['retry_in_s'])}" if failure["retry_in_s"]
                else "next attempt at the next tick")
    return (f"{who}: push failed {age_text(failure['age_s'])} ago ({failure['code']}): "
            f"{printable(failure['message'])}; {attempts} failed attempt"
            f"{'' if attempts == 1 else 's'}, {next_try}")


