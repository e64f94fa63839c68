"""What to hand pip so that it installs this kint elsewhere (beside Hermes, or again in this
environment). kint is not published on PyPI, so `pip install kint` fetches nothing of ours:
every hint that tells a user to install kint names the checkout this kint runs from, when it
runs from one, and otherwise says to use the wheel or checkout it came from."""

from __future__ import annotations

from pathlib import Path

NOT_FROM_A_CHECKOUT = "<the kint wheel or checkout this kint was installed from>"


def install_source() -> str:
    """This kint's checkout (the folder with its pyproject.toml and the kint package), or a
    placeholder naming what to use instead."""
    checkout = Path(__file__).resolve().parents[1]
    if (checkout / "pyproject.toml").is_file() and (checkout / "kint").is_dir():
        return str(checkout)
    return NOT_FROM_A_CHECKOUT
