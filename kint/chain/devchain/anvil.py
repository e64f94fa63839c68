"""Which anvil runs the devchain: `KINT_ANVIL` when set; else, when kint runs from its source
checkout, the pinned npm package there (`node_modules/@foundry-rs/anvil-<os>-<arch>/bin/anvil`,
installed by `make node`); else `anvil` on PATH (an `npm install -g @foundry-rs/anvil@<pin>`
shim is followed to the binary it runs); else Foundry's `~/.foundry/bin/anvil`. None of them:
an error that names how to install one.
"""

from __future__ import annotations

import os
import platform
import shutil
from pathlib import Path

from kint.chain.devchain.errors import DevchainError
from kint.protocol import ErrorCode

# The @foundry-rs/anvil version package.json pins (tests/test_devchain.py keeps them equal).
ANVIL_VERSION = "1.7.1"
INSTALL_WAYS = (f"`npm install -g @foundry-rs/anvil@{ANVIL_VERSION}` (the version kint pins) "
                f"or Foundry's `foundryup` (https://getfoundry.sh)")
INSTALL_HINT = f"install anvil with {INSTALL_WAYS}, or set KINT_ANVIL to an anvil binary"
PROJECT_ROOT = Path(__file__).resolve().parents[3]
# The chain id the devchain's anvil is started with (`--chain-id`).
CHAIN_ID = 31337


def platform_package() -> str | None:
    """The npm package holding this platform's anvil binary, e.g. `anvil-linux-amd64`."""
    machine = platform.machine().lower()
    arch = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}.get(machine)
    system = {"linux": "linux", "darwin": "darwin"}.get(platform.system().lower())
    return f"anvil-{system}-{arch}" if arch and system else None


def _executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def checkout_root() -> Path | None:
    """The source checkout kint runs from (editable install or `python -m kint.cli` there),
    or None when kint runs from an installed wheel."""
    if (PROJECT_ROOT / "package.json").is_file() and (PROJECT_ROOT / "pyproject.toml").is_file():
        return PROJECT_ROOT
    return None


def _npm_binary(node_modules: Path) -> Path | None:
    package = platform_package()
    if package is None:
        return None
    path = node_modules / "@foundry-rs" / package / "bin" / "anvil"
    return path if _executable(path) else None


def _through_npm_shim(path: Path) -> Path:
    """`npm install -g @foundry-rs/anvil` puts a node script on PATH that runs the platform
    package's binary as its child: use that binary itself, so the pid kint records is
    anvil's. Anything else is used as found."""
    real = path.resolve()
    shim = ("bin.mjs", "anvil", "@foundry-rs")
    if (real.name, real.parent.name, real.parent.parent.name) != shim:
        return path
    package_dir = real.parent
    for node_modules in (package_dir / "node_modules", package_dir.parent.parent):
        binary = _npm_binary(node_modules)
        if binary is not None:
            return binary
    return path


def anvil_binary() -> Path:
    """The anvil to run: KINT_ANVIL, the checkout's pinned npm package, PATH, ~/.foundry."""
    from kint import settings

    explicit = settings.value("KINT_ANVIL")
    if explicit:
        path = Path(explicit).expanduser()
        if not _executable(path):
            raise DevchainError(f"KINT_ANVIL={explicit} is not an executable file",
                                hint=f"point KINT_ANVIL at an anvil binary or unset it; to get "
                                     f"one, install it with {INSTALL_WAYS}",
                                code=ErrorCode.CONFIG_INVALID)
        return path
    root = checkout_root()
    if root is not None:
        binary = _npm_binary(root / "node_modules")
        if binary is not None:
            return binary
    found = shutil.which("anvil")
    if found:
        return _through_npm_shim(Path(found))
    foundry = Path.home() / ".foundry" / "bin" / "anvil"
    if _executable(foundry):
        return foundry
    if root is None:
        raise DevchainError("anvil was not found (KINT_ANVIL is unset, and no anvil is on PATH "
                            "or in ~/.foundry/bin)", hint=INSTALL_HINT,
                            code=ErrorCode.CONFIG_INVALID)
    raise DevchainError(f"anvil was not found (KINT_ANVIL is unset, {root}/node_modules has no "
                        f"@foundry-rs/{platform_package() or 'anvil'}, and no anvil is on PATH "
                        f"or in ~/.foundry/bin)",
                        hint=f"run `make node` in {root}, or {INSTALL_HINT}",
                        code=ErrorCode.CONFIG_INVALID)
