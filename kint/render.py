"""Turning results into the lines a person reads. Kept apart from the CLI's wiring so the
formats can be tested and reused (the demo prints the same tables)."""

from __future__ import annotations

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


def _age(seconds: float | None) -> str:
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
        return (f"{rpc['call']} {_age(rpc.get('age_s'))}"
                + (f" ({where} rpc)" if where and where != "primary" else ""))
    if rpc.get("down_since_s") is not None:
        return f"down {_age(rpc['down_since_s'])}"
    return "ok"


def _state(row: dict[str, Any]) -> str:
    state = row["state"]
    if state == "quarantined" and row.get("retry_in_s") is not None:
        return f"quarantined (retry {_age(row['retry_in_s'])})"
    if row.get("no_room"):
        return f"{state} (no room)"
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
        return f"{op['name']} {_age(op['age_s'])}{more}"
    if progress:
        return _shorten(progress, 24)
    return f"push failed x{failure['attempts']}" if failure else "-"


def _unanchored(row: dict[str, Any]) -> str:
    """The UNANCHORED column: the count, `~N` when the store or the head moved since it was
    made (the worker recounts; the line under the table says so), `-` when none was made."""
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
            _age(row.get("last_beat_age_s")),
            _age(row.get("uptime_s")),
            f"{row['memory_mib']:.1f}M" if row.get("memory_mib") is not None else "-",
        ])
    return rows


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
    head = f"supervisor pid {sup['pid']}, up {_age(sup['uptime_s'])}, {sup['kint_home']}"
    if not status["spaces"]:
        return (head + "\nno spaces yet (a worker starts on the first request for its space)"
                + "\n" + started_with_text(sup.get("started_with") or []))
    text = head + "\n" + table(STATUS_COLUMNS, status_rows(status))
    spaces = status["spaces"]
    if any(r.get("unanchored") is not None and r.get("unanchored_stale") for r in spaces):
        text += ("\n~N unanchored: counted before the store or the head last moved; a running "
                 "worker recounts within seconds")
    for row in spaces:
        if row.get("watcher_failure"):
            text += "\n" + watcher_failure_text(row["watcher_failure"],
                                                 f"watcher of {row['space']}")
    for row in spaces:
        if row.get("last_exit"):
            # A worker that could not start says why in its own words, which may quote
            # a store path or a tenant's name: escaped as the table's cells are.
            text += f"\nlast exit of {row['space']}: {printable(row['last_exit'])}"
    refused = [row for row in spaces if row.get("no_room")]
    files = sup.get("open_files")
    if refused and files:  # one line, however many spaces wait for room
        text += (f"\n{len(refused)} space(s) refused a worker: the supervisor has "
                 f"{files['open']} files open of its limit of {files['limit']} (ulimit -n), "
                 f"{files['reserve']} kept free for clients; a worker that goes idle makes "
                 f"room, or raise the limit and restart the supervisor")
    return text + "\n" + started_with_text(sup.get("started_with") or [])


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


def session_key_text(facts: dict[str, Any] | None) -> str:
    """The session key's balance and authorization as `kint status` shows them after its
    address (v0.3.0's `balance <eth> ETH authorized True`, here with the expiry), from the
    facts the worker read with the chain head; without them (the head unread), what the
    key is for."""
    if not facts or not facts.get("exists"):
        return "(pays for every push)" if not facts else "(no session key on this machine)"
    if "balance_eth" not in facts:
        return f"(balance unknown: {facts.get('error', 'not read')})"
    if not facts.get("authorized"):
        return f"balance {facts['balance_eth']} ETH authorized False"
    until = utc_time(facts.get("expiry") or 0, "%Y-%m-%d %H:%M UTC")
    return f"balance {facts['balance_eth']} ETH authorized True until {until}"


def watcher_failure_text(failure: dict[str, Any], who: str = "watcher") -> str:
    """The store watcher's last failed push, while it waits to try again (`kint status`'s
    line, and `kint supervisor status`'s under its table, `who` naming the space's)."""
    attempts = failure["attempts"]
    next_try = (f"next attempt in {_age(failure['retry_in_s'])}" if failure["retry_in_s"]
                else "next attempt at the next tick")
    return (f"{who}: push failed {_age(failure['age_s'])} ago ({failure['code']}): "
            f"{printable(failure['message'])}; {attempts} failed attempt"
            f"{'' if attempts == 1 else 's'}, {next_try}")


# `kint status`'s word for a chain head older than the one this machine anchored.
BEHIND = ("BEHIND this machine: a stale or lagging RPC, or a reorganisation: `kint push` "
          "says which")


def _connected_lines(result: dict[str, Any]) -> list[str]:
    """`kint status` once connected, in kint v0.3.0's lines and order (02-quickstart.md and
    03-new-machine.md, "Check it"): the owner and the data key; what this machine last
    anchored; the rows changed and deleted since; the chain head, `(in step)` or `(NOT in
    step: pull or push)`, or, older than what this machine anchored, `(BEHIND this machine:
    a stale or lagging RPC, or a reorganisation: `kint push` says which)`, where pull and
    push both refuse it, with the contract; the session key's balance and authorization.
    Both causes are named, since telling them apart takes the endpoint's block number,
    which status does not read, and a push with nothing to push reads no chain at all
    (v0.3.0's 06-epochs.md): after a reorganisation, this line is where a user who writes
    nothing sees that the chain lost epochs."""
    store = result["store"]
    head = result.get("head") or {"seq": 0, "block": 0}
    anchored = f"last anchored on this machine: seq {head['seq']} block {head.get('block') or 0}"
    if result.get("mirror_rows") is not None:
        anchored += f" rows {result['mirror_rows']}"
    chain_head = result.get("chain_head")
    if chain_head is not None:
        step = ("in step" if result.get("in_step") else
                BEHIND if chain_head["seq"] < head["seq"]
                else "NOT in step: pull or push")
        there = (f"chain head: seq {chain_head['seq']} digest {chain_head['digest'][:16]} "
                 f"block {chain_head['block']} ({step})")
    else:
        there = f"chain head: unavailable ({result.get('chain_head_unavailable')})"
    split = result.get("unanchored_changes")
    if split:
        changes = f"{split['changed']} changed, {split['deleted']} deleted"
    elif not store["exists"] and result.get("mirror_rows"):
        changes = ("not counted: the store does not exist; `kint pull` "
                   "restores the anchored rows")
    elif not store["exists"]:
        changes = "none: the store is not created yet (Sibyl creates it on the first write)"
    else:
        changes = "not counted: nothing anchored on this machine to count against"
    lines = [f"owner {result['owner']}  data key "
             f"{'cached' if result.get('data_key_cached') else 'NOT cached'}",
             anchored,
             f"unanchored: {changes}",
             f"{there}  contract {result.get('contract')}",
             f"session key {result.get('session')} "
             f"{session_key_text(result.get('session_key'))}"]
    if result.get("interrupted_pull"):
        lines.append(f"pull:    {result['interrupted_pull']}")
    if result.get("restore_in_progress"):
        lines.append(f"restore: {printable(result['restore_in_progress'])}")
    return lines


def cap_size(size: int) -> str:
    """A size in v0.3.0's cap block (15-sibyl.md, "One client, one cap"): KB (of 1024 bytes)
    to one decimal below 1 MiB, MB (of 1 MiB) to two decimals from 1 MiB up, so the
    cap itself reads `5.00 MB` and a small store is not a row of `0.00 MB`."""
    if size < 1048576:
        return f"{size / 1024:.1f} KB"
    return f"{size / 1048576:.2f} MB"


def cap_lines(cap: dict[str, Any]) -> list[str]:
    """kint v0.3.0's cap accounting block (02-quickstart.md, "Check it"): Sibyl's stores,
    kint's own state (volunteered to the cap), and the total Sibyl's cap gate enforces; the
    exact bytes are in `--json`'s `cap`."""
    return ["cap accounting (the same 5 MiB free cap Sibyl enforces):",
            f"  sibyl stores      {cap_size(cap['sibyl_bytes'])}",
            f"  kint state        {cap_size(cap['kint_bytes'])}   (mirror, epoch cache, keys; "
            f"volunteered)",
            f"  enforced total    {cap_size(cap['volunteered_total'])} of "
            f"{cap_size(cap['cap_bytes'])}"]


def space_status_text(result: dict[str, Any]) -> str:
    store = result["store"]
    path = printable(store["path"])
    if store["exists"]:
        where = f"{path} ({store['size_bytes']} bytes)"
    else:
        where = f"{path} (not created yet)"
    rows = result.get("rows")
    row_text = (", ".join(f"{tier} {n}" for tier, n in rows.items()) if rows is not None
                else "-")
    files = result["files"]
    present = [name for name, value in files.items() if value and name != "epochs"]
    file_text = ", ".join(present) if present else "none yet"
    if files.get("epochs"):
        file_text += f"; {files['epochs']} cached epoch(s)"
    worker = result["worker"]
    chain_lines = []
    if "connected" not in result:
        chain_lines = []
    elif result.get("connected"):
        chain_lines = _connected_lines(result)
    else:
        chain_lines = ["chain:   not connected (run `kint connect`)"]
    for problem in [*(result.get("state_problems") or []), *result.get("disk_problems", [])]:
        chain_lines.append(f"PROBLEM: {printable(problem)}")
    if result.get("held"):
        chain_lines.append(f"held:    {result['held']['message']} ({result['held']['reason']})")
    failure = result.get("watcher_failure")
    if failure:
        chain_lines.append(watcher_failure_text(failure))
    shared = result.get("store_shared")
    if shared:
        chain_lines.append(f"WARNING: {printable(shared['message'])}; {shared['hint']}")
    cap = result.get("cap")
    # The cap block ends the output (15-sibyl.md: "The last four lines of `kint status`"),
    # so the worker's line, kint's own, goes before it.
    return "\n".join([
        f"tenant {printable(result['tenant'])}  space {result['space']}  store {path}",
        f"space:   {result['space']} ({printable(result['label'])})",
        f"store:   {where}",
        f"rows:    {row_text}",
        f"files:   {file_text} (under {result['kint_home']})",
        *chain_lines,
        f"worker:  pid {worker['pid']}, up {_age(worker['uptime_s'])}",
        *(cap_lines(cap) if cap else []),
    ])


def verify_lines(result: dict[str, Any]) -> list[str]:
    """`kint verify` without --json: kint v0.3.0's lines (07-verify.md), each checked hit
    indented two spaces with its status in a column ten wide, as its transcript shows."""
    verdict = result["verdict"]
    lines = [f"query: {result['query']}",
             f"sibyl verdict: {verdict['code']}  hits: {len(result['hits'])}"]
    for check in result["checks"]:
        category = check.get("category")
        name = f"{category}/{check['key']}" if category is not None else check["key"]
        lines.append(f"  {check['status']:<10} {check['tier']} {name}: {check['reason']}")
    lines.append(f"DECISION: {result['decision'].upper()}: {result['reason']}")
    if result.get("refusal_entity"):
        if result.get("refusal_written", True):
            lines.append(f"refusal written back as Sibyl entity {result['refusal_entity']}")
        else:
            lines.append(f"refusal already written back as Sibyl entity "
                         f"{result['refusal_entity']} (the same value refused before; "
                         f"nothing new written)")
    return lines


def history_lines(result: dict[str, Any]) -> list[str]:
    """`kint history`: one line per anchored version, oldest first."""
    lines = []
    for v in result["versions"]:
        if v["deleted"]:
            lines.append(f"epoch {v['seq']} block <= {v['block']}: DELETED")
        else:
            lines.append(f"epoch {v['seq']} block <= {v['block']} leaf {v['leaf'][:16]}: "
                         f"{v['body']}")
    return lines


def pull_lines(result: dict[str, Any]) -> list[str]:
    """`kint join`'s restore lines before its `restore:` line: what the pull did
    (pull_progress_lines), then the epochs it did not apply."""
    return pull_progress_lines(result) + unapplied_epoch_lines(result)


def pull_output_lines(result: dict[str, Any]) -> list[str]:
    """All `kint pull` prints, in v0.3.0's order (03-new-machine.md, "What it prints"): what
    the pull did, its summary and the cold start's second-opinion line, then the epochs it
    left unapplied (unapplied_epoch_lines: gaps first, then those a retired data key
    seals), last and indented by two spaces, as the "Gaps" section of that page shows
    them."""
    return (pull_progress_lines(result) + pull_summary_lines(result)
            + [f"  {line}" for line in unapplied_epoch_lines(result)])


def pull_progress_lines(result: dict[str, Any]) -> list[str]:
    """What a pull did, before its summary, in v0.3.0's words (03-new-machine.md's join
    transcript): the stores moved aside, a cold start's two agreeing RPCs (or the one RPC
    KINT_ALLOW_SINGLE_RPC=1 let stand alone), one line per epoch applied, a `pull: WARNING`
    line per row or root that did not come back as anchored, a `pull: NOTICE` when the
    rows' provenance could not be saved (a full disk), and a `pull: NOTICE` when `--full`'s
    walk for history stopped short."""
    lines = [f"moved aside: {path}" for path in result.get("backups", [])]
    if result.get("rpcs_agreed"):
        agreed = result["chain_head"]
        lines.append(f"pull: cold start, both RPCs agree: head seq {agreed['seq']}, digest "
                     f"{agreed['digest'][:16]}, block {agreed['block']}")
    if result.get("single_rpc"):
        head = result["chain_head"]
        lines.append(f"pull: cold start on one RPC (KINT_ALLOW_SINGLE_RPC=1): "
                     f"{result['single_rpc']}, so head seq {head['seq']} at block "
                     f"{head['block']} has no second opinion")
    for epoch in result.get("applied_epochs", []):
        lines.append(f"pull: applied epoch {epoch['seq']} ({epoch['rows']} rows, "
                     f"{epoch['deletions']} deletions) from block {epoch['block']}")
    # v0.3.0's line for an epoch applied with a row or root that did not come back as
    # anchored (03-new-machine.md, "What every epoch must pass"): each names its epoch.
    lines += [f"pull: WARNING {warning}" for warning in result.get("warnings", [])]
    unsaved = result.get("provenance_unsaved")
    if unsaved:  # the pull is done; its finer provenance met a full disk (pull.py)
        lines.append(f"pull: NOTICE {unsaved['message']}; {unsaved['hint']}")
    stopped = result.get("backfill_stopped")
    if stopped:  # the pull is done; `--full`'s walk for history could not go further
        lines.append(f"pull: NOTICE --full stopped at epoch {stopped['seq']} block "
                     f"{stopped['block']}: {stopped['reason']}; the epochs below it are not "
                     f"cached for history, and the next `kint pull --full` tries again")
    return lines


def pull_summary_lines(result: dict[str, Any]) -> list[str]:
    """`kint pull`'s summary, after pull_progress_lines (`restored N epoch(s), R rows; head
    seq S at block B; ...`), then, after a cold start that two RPCs agreed on, v0.3.0's
    `cold start: two RPCs agreed on the head: True`."""
    lines = [result["message"]]
    if result.get("rpcs_agreed"):
        lines.append("cold start: two RPCs agreed on the head: True")
    return lines


def unapplied_epoch_lines(result: dict[str, Any]) -> list[str]:
    """The epochs a pull did not apply, in v0.3.0's words (09-cli.md, "kint pull"): one
    `SKIPPED` line for each it could not apply (ending with the snapshot that carried the
    pull on, when one did), then one `CLOSED` line for each sealed under a retired data
    key."""
    lines = []
    for entry in result.get("skipped", []):
        tail = (f" (snapshot epoch {entry['superseded_by']} carries the whole state, the pull "
                f"carried on)" if entry.get("superseded_by") else "")
        lines.append(f"SKIPPED epoch {entry['seq']} block {entry['block']}: {entry['reason']}"
                     f"{tail}")
    for entry in result.get("closed", []):
        lines.append(f"CLOSED epoch {entry['seq']} block {entry['block']}: {entry['reason']}")
    return lines
