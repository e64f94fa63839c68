"""Sibyl's own tool errors as the agent reads them (kint.agent_server.sibyl_errors): the
JSON Sibyl raised, `ok: false` and a hint added. Sibyl's payload never decides `ok`, so an
error can never read as a success (tests/test_dogfood21.py drives the real server)."""

from __future__ import annotations

import json

from kint.agent_server.sibyl_errors import error_payload


def test_a_payload_of_its_own_ok_still_reads_as_a_failure() -> None:
    text = json.dumps({"ok": True, "error": "NotFound", "code": "NOT_FOUND", "message": "x"})
    out = error_payload("memory_recall", f"Error executing tool memory_recall: {text}")
    assert out["ok"] is False and list(out)[0] == "ok", out
    assert out["code"] == "NOT_FOUND" and out["hint"], out


def test_text_that_is_not_json_is_carried_as_its_message() -> None:
    out = error_payload("memory_recall", "Error executing tool memory_recall: boom")
    assert out["ok"] is False and out["message"] == "boom" and out["hint"], out
