"""A space's `kint status` as a person reads it (render.py's helpers; the supervisor's
table is there): the store, rows and files, then, once connected, kint v0.3.0's chain lines
(the owner, what this machine anchored, the chain head, the session key) and the cap block
that ends it."""

from __future__ import annotations

from typing import Any

from kint.render import (age_text, parked_words, printable, utc_time, watcher_failure_text,
                         watcher_settings_text, watcher_uncounted_text)


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
    if result.get("settled_notice"):
        lines.append(f"settled: {printable(result['settled_notice'])}")
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
    if result.get("watcher_settings"):  # a kint-server session's, as supervisor status says
        chain_lines.append(watcher_settings_text(result["watcher_settings"], "watcher"))
    uncounted = result.get("watcher_uncounted")
    if uncounted:
        chain_lines.append(watcher_uncounted_text(uncounted))
    shared = result.get("store_shared")
    if shared:
        chain_lines.append(f"WARNING: {printable(shared['message'])}; {shared['hint']}")
    if result.get("parked"):  # the supervisor's, read beside the worker's answer (read_parked)
        chain_lines.append(f"parked:  {parked_words(result['parked'])}")
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
        f"worker:  pid {worker['pid']}, up {age_text(worker['uptime_s'])}",
        *(cap_lines(cap) if cap else []),
    ])
