"""What `kint verify` and `kint history` print: a recall's checked hits and its decision,
and a row's anchored versions."""

from __future__ import annotations

from typing import Any


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
