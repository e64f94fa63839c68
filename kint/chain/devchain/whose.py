"""Whose devchain record this is: this KINT_HOME's own (its anvil started here, stopped by
`stop`, forgotten once gone, replaced by `start`) or a copy of another KINT_HOME's (never
signalled nor removed, judged by whether its endpoint answers: docs/quickstart.md, "A second
machine on the devchain").

The record's own facts decide before the id `kint devchain start` keeps (records.home_id),
because the id is a file that can be lost or copied:

- its anvil runs here (the process under its pid has the command line and start time
  recorded, naming this home's state file: identity.recorded_anvil_runs) and writes to this
  home's `devchain/anvil.log` (`writes_here`): this home's own, whatever the id says. With
  `devchain/home.id` deleted, the id alone made this home's running anvil a copy's, which
  `stop` then never stopped; the id is written back from the record (`adopt_id`), so the
  next start records the same one. The command line alone does not do: a home at the same
  path seen through another mount namespace sharing the pid namespace (a container run with
  --pid=host, a sandbox) sees the first home's anvil under the same pid with the same
  command line, and took it for its own (stopped it, adopted its id). An anvil running here
  that writes to another anvil.log is another home's: a copy. Where that cannot be asked
  (no /proc, or no anvil.log here) the id decides, as before the facts came first;
- its endpoint answers with the chain id and the genesis block it recorded while its anvil
  does not run here: a devchain that runs elsewhere. A whole KINT_HOME copied to another
  host (the same `~/.kint` path) copies home.id too, so the id took the first machine's
  record for the copy's own and forgot it as a dead anvil's, and `start` began a fork of
  the chain beside the one it answers for;
- otherwise the id: a record naming an id that is not this home's (none kept here counts as
  another: a machine that copied the record has never started a devchain) is a copy; one
  naming this home's id (or none, from a kint before the id) is this home's own, stopped.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal, NamedTuple

import requests

from kint.chain.devchain.anvil import CHAIN_ID
from kint.chain.devchain.identity import recorded_anvil_runs
from kint.chain.devchain.records import home_id, home_id_path, started_here
from kint.paths import atomic_write, devchain_dir


def _call(url: str, method: str, params: list[Any]) -> Any:
    r = requests.post(url, json={"jsonrpc": "2.0", "id": 1, "method": method,
                                 "params": params}, timeout=1.0)
    r.raise_for_status()
    return r.json()["result"]


def answers(url: str, genesis: Any = None) -> bool:
    """The devchain answers at `url`: chain id 31337 and, when `genesis` (block 0's hash, as
    a start records it) is given, that genesis: another anvil on the port answers for
    another chain."""
    try:
        if int(_call(url, "eth_chainId", []), 16) != CHAIN_ID:
            return False
        if not isinstance(genesis, str):
            return True
        block = _call(url, "eth_getBlockByNumber", ["0x0", False])
        return isinstance(block, dict) and str(block.get("hash")).lower() == genesis.lower()
    except (requests.RequestException, ValueError, KeyError, TypeError):
        return False


def record_answers(record: dict[str, Any]) -> bool:
    """The record's endpoint answers for the chain the record names (its genesis, when it
    recorded one: a kint before it recorded none)."""
    url = record.get("rpc_url")
    return isinstance(url, str) and answers(url, record.get("genesis"))


def writes_here(record: dict[str, Any], home: Path) -> bool | None:
    """Whether the recorded anvil, running, writes to this home's `devchain/anvil.log` (the
    file `start` gives it as stdout): the same file, device and inode, or another one (a
    home at this path in another mount namespace). None when that cannot be asked: no
    /proc, no anvil.log here, a process of another user's.

    Nothing of anvil's or kint's puts a new file at this path while this home's anvil runs:
    anvil writes its log to the descriptor `start` gave it as stdout (lifecycle.start,
    O_APPEND), with no log file of its own to reopen or rotate (anvil has no such option),
    and kint rotates only its own logs (logs.rotated_logs). Only a hand or a tool outside
    them does (logrotate without copytruncate, an `mv`): the running anvil then writes to
    the file moved aside, and reads here as another home's at this path, never signalled,
    `stop` leaving it. That errs safe, and it is not told apart from that other home's:
    both are another file than this path's."""
    if not Path("/proc/self/stat").exists():
        return None
    try:
        theirs = os.stat(f"/proc/{int(record['pid'])}/fd/1")
        ours = os.stat(devchain_dir(home) / "anvil.log")
    except (OSError, ValueError, TypeError, KeyError):
        return None
    return (theirs.st_dev, theirs.st_ino) == (ours.st_dev, ours.st_ino)


# Whose a record judged a copy is, as `kint devchain start` and `status` word its running
# line: another KINT_HOME's, or not known to be (`Judgement.unsure`). A Literal, so a type
# checker catches a misspelt comparison with one.
Whose = Literal["another", "unsure"]
ANOTHER: Whose = "another"
UNSURE: Whose = "unsure"


class Judgement(NamedTuple):
    """What `judged` found of a record: whether it is a copy (`copy`); whether its
    endpoint answered for its chain, when that was asked to decide (None when it was not);
    and (`unsure`) whether a copy is one only by the id this home no longer keeps, which its
    endpoint answering would not settle: another KINT_HOME's record, or this one's own
    with devchain/home.id removed, nothing telling them apart."""

    copy: bool
    answered: bool | None
    unsure: bool = False


def judged(record: dict[str, Any], home: Path) -> Judgement:
    """Whether the record is a copy (`copy`), and whether its endpoint answered for its
    chain when that was asked to decide: a caller that needs both asks the endpoint once,
    and cannot get two answers that disagree. A copy by the id alone, with no home.id kept
    here, is `unsure` when the answer the caller then asks would not say whose it is: an
    anvil running under its pid whose anvil.log cannot be read is this home's as likely as
    not, and a record with no genesis (a kint before it was recorded) is answered by any
    chain 31337 on its port (another anvil's, on the port of this home's own gone). One
    naming a genesis its endpoint answers with is that devchain running, and not under the
    pid this home's start recorded: another KINT_HOME's. A record naming no state file
    (older still than the id) is not a copy: its pid is told by its identity, as for this
    home's own."""
    if "state" in record and not started_here(record, home):
        return Judgement(True, None)
    kept = home_id(home)
    elsewhere = "home" in record and record["home"] != kept
    by_id_alone = elsewhere and kept is None
    if "state" in record and recorded_anvil_runs(record):
        mine = writes_here(record, home)
        if mine is None:
            return Judgement(elsewhere, None, by_id_alone)
        return Judgement(not mine, None)
    if elsewhere or "genesis" not in record:
        return Judgement(elsewhere, None, by_id_alone and "genesis" not in record)
    answered = record_answers(record)
    return Judgement(answered, answered)


def whose_copy(judgement: Judgement) -> Whose | None:
    """None for this home's own record, else whose the copy is: ANOTHER or UNSURE."""
    if not judgement.copy:
        return None
    return UNSURE if judgement.unsure else ANOTHER


def adopt_id(record: dict[str, Any], home: Path) -> None:
    """Write the id back from this home's own record (its anvil runs here and writes to
    this home's anvil.log) when home.id is gone, so the next start records the id the
    record and its copies carry. Call with the lock held."""
    kept = record.get("home")
    if (isinstance(kept, str) and kept and home_id(home) is None
            and started_here(record, home) and recorded_anvil_runs(record)
            and writes_here(record, home) is True):
        atomic_write(home_id_path(home), kept.encode())
