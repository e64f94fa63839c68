"""The arguments of kint's six MCP tools, one pydantic model per tool.

Each model is two things at once: the input schema a harness shows the model (a
description on every argument, the bounds, the tiers as an enum, no other properties) and
the check every call meets before anything reaches the space's worker. Keeping both in
one place is the point: a schema that says one thing while the server accepts another is
how an agent ends up pushing when it asked to compact.

The bounds are the worker's own (kint.protocol.ops), so a value the schema accepts is one
the worker accepts too, and the CLI reference (docs/commands.md) gives the same ranges.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

from kint.protocol.ops import OPS, ArgSpec
from kint.rows.canon import VersionedTier

ADDRESS_PATTERN = r"^0x[0-9a-fA-F]{40}$"


def _spec(op: str, name: str) -> ArgSpec:
    return OPS[op].args[name]


def _config(tool: str) -> ConfigDict:
    # extra="forbid": an argument the tool does not take is refused, never dropped (a
    # dropped `compact: true` once turned into a plain push). strict: a value of another
    # JSON type than the schema's is refused, never coerced (pydantic's lax mode read
    # `discard_local: "yes"` or `1` as true, and `"12"` as a block).
    return ConfigDict(extra="forbid", strict=True, title=f"{tool}Arguments")


class StatusArgs(BaseModel):
    model_config = _config("memory_status")


class ConnectArgs(BaseModel):
    model_config = _config("memory_connect")

    passphrase: str | None = Field(
        None, min_length=1, max_length=_spec("connect", "passphrase").max_chars,
        description="The vault passphrase of a Base Account or smart-wallet owner. A "
                    "secret: whatever is typed into an agent chat stays in its transcript, "
                    "so prefer `kint connect --smart-account --passphrase-stdin` in a "
                    "terminal.")
    recovery_code: str | None = Field(
        None, min_length=1, max_length=_spec("connect", "recovery_code").max_chars,
        description="The vault's recovery code (the last line of RECOVERY-<space16>.txt). "
                    "Used instead of `passphrase` when both are given. A secret, like "
                    "`passphrase`.")
    owner: str | None = Field(
        None, pattern=ADDRESS_PATTERN,
        description="The owner wallet's address, 0x and 40 hex digits. Needed the first "
                    "time this machine connects; later calls use the owner it enrolled.")
    dev: bool = Field(
        False,
        description="Local devchain only: make a throwaway owner and connect it. Refused "
                    "on Base, and with owner, passphrase or recovery_code (dev's own "
                    "owner's signature is its key).")


class PullArgs(BaseModel):
    model_config = _config("memory_pull")

    full: bool = Field(
        False,
        description="Walk past snapshot epochs back to the first epoch (on a store already "
                    "up to date, read every epoch not read yet), so memory_history can show "
                    "versions older than the newest snapshot. Slower.")
    discard_local: bool = Field(
        False,
        description="Move this machine's store aside (kept as <store>.kint-backup-<time>) "
                    "and restore it from the chain: the way past FORK, or past HELD when the "
                    "anchored value is the right one. Unanchored local changes go aside with "
                    "it: ask the human first.")
    force_scan: bool = Field(
        False,
        description="Taken for agents written against kint v0.3.0, and does nothing: "
                    "v0.3.0's pull never acted on it either.")


class PushArgs(BaseModel):
    model_config = _config("memory_push")

    snapshot: bool = Field(
        False,
        description="Anchor the whole store as one epoch instead of the changes since the "
                    "last one (even when nothing changed), so a restore elsewhere can stop "
                    "at it.")


_LIMIT = _spec("verify", "limit")


class VerifyArgs(BaseModel):
    model_config = _config("memory_verify")

    query: str = Field(
        min_length=1, max_length=_spec("verify", "query").max_chars,
        description="What the fact you are about to act on is about, in words Sibyl's "
                    "search finds it by (the same search memory_search runs). Every hit is "
                    "checked against what was anchored.")
    limit: int = Field(
        5, ge=_LIMIT.min_value, le=_LIMIT.max_value,
        description=f"How many of the search's hits to check, {_LIMIT.min_value} to "
                    f"{_LIMIT.max_value}.")


_BLOCK = _spec("history", "block")


class HistoryArgs(BaseModel):
    model_config = _config("memory_history")

    tier: VersionedTier = Field(
        description="The row's tier: `entity` (named by category and key), `state` or "
                    "`reference` (named by key alone). Journal events have no versions.")
    key: str = Field(
        min_length=1, max_length=_spec("history", "key").max_chars,
        description="The entity's name, or the state or reference key.")
    category: str | None = Field(
        None, min_length=1, max_length=_spec("history", "category").max_chars,
        description="The entity's category. Needed when `tier` is `entity`: it is part of "
                    "the entity's identity, so no entity is found without it. "
                    "Must be left out for `state` and `reference`.")
    block: int | None = Field(
        None, ge=_BLOCK.min_value, le=_BLOCK.max_value,
        description="A block number: answer with the version live at that block (the last "
                    "one anchored at or before it, or null) instead of the whole list. A "
                    "block is an upper bound on when a version existed, not a time.")

    @model_validator(mode="after")
    def _category_names_entities_only(self) -> "HistoryArgs":
        # An entity without its category is not refused: v0.3.0 (08-tools.md) answers that
        # lookup with nothing found, and the tool says why in a `note` (kint.agent_server.
        # tools). A category on another tier could never match a row, so it is refused.
        if self.tier != "entity" and self.category is not None:
            raise ValueError(f"only entities have a category: leave `category` out for tier "
                             f"`{self.tier}`")
        return self
