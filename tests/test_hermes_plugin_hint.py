"""`kint setup hermes` names how to put kint beside Hermes when Hermes' Python cannot import
it. kint is not on PyPI, so the hint hands pip this kint's checkout, never the bare name
`kint` (which would install nothing of ours). Hermes' Python is a stand-in here (the real
Hermes runs in tests/test_hermes_agent.py, where kint is importable)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kint.harnesses import hermes, hermes_provider

CHECKOUT = Path(__file__).resolve().parent.parent


def test_the_hint_installs_this_checkout(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hermes_provider, "hermes_python", lambda cli: "/opt/hermes/bin/python")
    monkeypatch.setattr(hermes_provider, "kint_importable", lambda python: False)
    said = hermes.plugin_blocker("hermes")
    assert said is not None
    assert f"/opt/hermes/bin/python -m pip install {CHECKOUT})" in said
    assert "pip install kint)" not in said


def test_no_hint_when_kint_is_importable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hermes_provider, "hermes_python", lambda cli: "/opt/hermes/bin/python")
    monkeypatch.setattr(hermes_provider, "kint_importable", lambda python: True)
    assert hermes.plugin_blocker("hermes") is None
