"""What `kint pull` and `kint join`'s restore print, in kint v0.3.0's words: what the pull
did, its summary, and the epochs it left unapplied."""

from __future__ import annotations

from typing import Any


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
