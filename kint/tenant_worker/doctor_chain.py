"""The chain checks of the space's `kint doctor` (v0.3.0's list, 09-cli.md): the primary RPC
answers for the configured chain, the secondary RPC is another endpoint on the same chain
(an endpoint on another chain said in kint.chain.chain_id's words, as the CLI and a cold
start say it),
the contract has code, the session key may write, and the chain's head against this
machine's mirror.

Bounds: every call is one RPC, tried once (not three times as other reads are), bounded by
KINT_RPC_TIMEOUT (this call's, else the space's),
and by DOCTOR_CALL_S at most (said on the primary's line when the setting is longer and the
primary answered, and on every line whose call timed out under that cap: `_cap_said`), and
no call starts once the chain's checks have taken CHAIN_CALLS_WORTH calls' bound (the
checks left say so), so that doctor
answers within the command's own deadline whatever the setting or the endpoint. Once the
primary fails a call, nothing more is asked of it: each check that needs it says so
instead, so a hung endpoint costs doctor one timeout, not one per check, and a hung
primary and secondary two. The secondary is asked through its own tracker: its failure is
not the primary's, and must not make verify skip the head read or the heartbeat report the
space's endpoint as down.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from kint.chain.anchor import Anchor, NoContractThere
from kint.chain.calls import ChainRefused
from kint.chain.chain_id import (answered_chain_id, no_second_hint, on_other_chain,
                                 silent_second_hint)
from kint.chain.config import BASE_CHAIN_ID, ChainConfig
from kint.chain.contract_source import contract_check
from kint.chain.key_facts import MIN_WRITE_BALANCE_WEI, read_key_facts
from kint.chain.rpc import RpcTracker, RpcUnavailable
from kint.protocol.checks import check
from kint.render import epoch_at
from kint.settings.urls import redact_url
from kint.tenant_worker.enrolment import Enrolment
from kint.tenant_worker.rpc_hint import GENERIC, bound_said, endpoint_check, endpoint_hint
from kint.tenant_worker.statefiles import Mirror

PRIMARY_DOWN = "not checked: the primary RPC did not answer"
# What a check's chain read may end in besides its answer: the endpoint failing, or a
# refusal where a read can earn none (a read answered "insufficient funds": a lying or
# broken endpoint). Either is the check's own failed line, never the whole doctor's error.
CHAIN_READ_FAILED = (RpcUnavailable, ChainRefused)
# The longest doctor waits for one RPC call; after CHAIN_CALLS_WORTH of its calls' bound
# it starts no more (an endpoint slow but answering). The session key's check makes two
# calls, so the chain's checks take at most (2 + 2) x 12 = 48 s, inside the CLI's 60 s for
# the doctor op with the local checks.
DOCTOR_CALL_S = 12.0
CHAIN_CALLS_WORTH = 2


def _chain_name(chain: ChainConfig) -> str:
    if chain.devchain:
        return "the devchain"
    return "Base" if chain.chain_id == BASE_CHAIN_ID else "the configured chain"


def chain_checks(chain: ChainConfig, tracker: RpcTracker, enrolment: Enrolment, home: Path,
                 space_id: str, mirror: Mirror | None) -> list[dict[str, Any]]:
    """The chain's checks for a connected space, read through the space's own tracker."""
    setting_s = chain.rpc_timeout_s
    chain = chain.with_rpc_timeout(min(setting_s, DOCTOR_CALL_S))
    budget_s = CHAIN_CALLS_WORTH * chain.rpc_timeout_s
    deadline = time.monotonic() + budget_s
    anchor = Anchor(chain, tracker)
    primary, answering = _primary_rpc(anchor, chain)
    capped = setting_s > chain.rpc_timeout_s
    if capped and answering:  # the calls after it wait the cap (`_primary_rpc`'s why)
        primary["detail"] += (f" (doctor waits {chain.rpc_timeout_s:g} s a call at most; "
                              f"KINT_RPC_TIMEOUT is {setting_s:g} s)")
    checks = [primary, _secondary_rpc(chain)]
    primary_url = chain.rpc_urls[0]
    failures = tracker.last_failure_at(primary_url)

    def answering_still() -> bool:
        return (answering and tracker.last_failure_at(primary_url) == failures
                and time.monotonic() < deadline)

    def not_checked(name: str) -> dict[str, Any]:
        if answering and tracker.last_failure_at(primary_url) == failures:  # time ran out
            return check(name, False, f"not checked: the chain's checks took {budget_s:g} s "
                         f"already", f"the endpoint answers slowly: {endpoint_check(chain)}, "
                         f"or run doctor again")
        return check(name, False, PRIMARY_DOWN, "fix the primary RPC first")

    code, has_code = (_contract_code(anchor, chain) if answering_still()
                      else (not_checked("contract"), False))
    checks.append(code)
    checks.append(_session_key(anchor, home, enrolment.owner) if answering_still() else
                  no_session_key(home) or not_checked("session key"))
    if not answering_still():
        checks.append(not_checked("head"))
    elif not has_code:
        checks.append(check("head", False, "not read: there is no contract at "
                            f"{chain.anchor}", "see the contract check"))
    else:
        checks.append(_head(anchor, enrolment.owner, space_id, mirror))
    if capped:
        for line in checks:
            line["detail"] = _cap_said(line["detail"], chain.rpc_timeout_s, setting_s)
    return checks


def _cap_said(detail: str, cap_s: float, setting_s: float) -> str:
    """`detail` with a timeout said as the `cap_s` doctor waited, its own cap on a call,
    where the call's error named KINT_RPC_TIMEOUT (kint.chain.calls.transport_words): with
    the setting longer than the cap, every call here waited the cap, and a line sending the
    user to a setting doctor did not wait out was a message that lied. Rewritten by
    rpc_hint.bound_said, as a request's timeout is; any other detail is returned as it
    is."""
    return bound_said(detail, f"{cap_s:g} s (doctor's cap on a call; KINT_RPC_TIMEOUT is "
                              f"{setting_s:g} s; ")


def _primary_rpc(anchor: Anchor, chain: ChainConfig) -> tuple[dict[str, Any], bool]:
    """(the check, whether the endpoint answered at all). Only a line that answered is
    given the note of doctor's cap (`chain_checks`): the checks after it are asked under
    that cap. A primary that failed is asked nothing more, and its own call either timed
    out (the cap said in the timeout's words: `_cap_said`) or ended before any bound (a
    refused connection, an HTTP status, an error object), where "doctor waits 12 s" was
    noise after the error's own parenthesis."""
    where = redact_url(chain.rpc_urls[0])
    try:
        answered = anchor.chain_id()
    except CHAIN_READ_FAILED as err:
        return check("rpc primary", False, f"{where}: {err}", _endpoint_named(chain)), False
    wrong = on_other_chain(chain, {0: answered})
    if wrong is not None:
        return check("rpc primary", False, *wrong), True
    return check("rpc primary", True, f"{where}: chain id {answered} "
                 f"({_chain_name(chain)})"), True


def _endpoint_named(chain: ChainConfig) -> str:
    """The hint of a chain read that failed, naming where `chain`'s endpoints in force are
    set (the devchain's record, a space's kept ones, a file's table: rpc_hint), for the
    primary's check and the contract's and head's reads after it: those said "check
    KINT_RPC_URL" of a space whose endpoint a config table or a connect sets."""
    named = endpoint_hint(chain)
    return ("check KINT_RPC_URL, or the endpoints given to `kint connect --rpc-urls`"
            if named == GENERIC else named)


def _secondary_rpc(chain: ChainConfig) -> dict[str, Any]:
    """The second opinion a cold-start pull asks for the head (pull.py `_cold_start`). On
    the devchain a pull asks none, so there is nothing to check. A second missing or
    silent is hinted as the cold start's refusal hints it (kint.chain.chain_id), by where
    the endpoints came from: a space's kept ones are given again by a connect."""
    name = "rpc secondary"
    if chain.devchain:
        return check(name, True, "not asked on the devchain: a pull reads its one endpoint")
    single = (" (KINT_ALLOW_SINGLE_RPC=1: a cold-start pull accepts the primary alone)"
              if chain.allow_single_rpc else ": a cold-start pull would refuse without one")
    if len(chain.rpc_urls) < 2:
        return check(name, True, f"none configured{single}", no_second_hint(chain), warn=True)
    where = redact_url(chain.rpc_urls[1])
    if chain.second_is_same_endpoint:
        return check(name, True, f"{where} (SAME as primary: no second opinion on a cold "
                                 f"start){single}", no_second_hint(chain), warn=True)
    try:
        answered = answered_chain_id(chain, RpcTracker(), 1)
    except CHAIN_READ_FAILED as err:
        if chain.allow_single_rpc:
            return check(name, True, f"{where}: {err}{single}", no_second_hint(chain),
                         warn=True)
        return check(name, False, f"{where}: {err}{single}", silent_second_hint(chain))
    wrong = on_other_chain(chain, {1: answered})
    if wrong is not None:
        return check(name, False, *wrong)
    return check(name, True, f"{where}: chain id {answered}, another endpoint than the "
                 f"primary")


def _contract_code(anchor: Anchor, chain: ChainConfig) -> tuple[dict[str, Any], bool]:
    """Code at the contract's address, and whether it is the EpochAnchor kint ships.

    The packaged artifact is kint's own compile of contracts/EpochAnchor.sol (no immutables,
    no metadata hash), which is what `kint devchain start` deploys: there the runtime code
    is exactly the artifact's, and other bytes mean the address names another contract
    (`[WARN]`). On Base the contract is kint v0.3.0's deployment, the same interface built
    from other source, whose runtime code kint does not ship: other bytes there are
    expected and only said. Only no code at all fails: the address or the chain is wrong,
    and every read and push would fail with it."""
    from kint.chain.artifact import ArtifactMissing, epoch_anchor_artifact

    name = "contract"
    try:
        code = anchor.code()
    except CHAIN_READ_FAILED as err:
        return check(name, False, str(err), _endpoint_named(chain)), False
    if not code:
        return check(name, False, f"no code at {chain.anchor} on chain {chain.chain_id}: "
                     f"wrong address or wrong chain", contract_check(chain)), False
    size = f"{chain.anchor}: {len(code)} bytes of code"
    try:
        shipped = bytes.fromhex(epoch_anchor_artifact()["deployedBytecode"].removeprefix("0x"))
    except ArtifactMissing:
        return check(name, True, f"{size} (not compared: this kint was built without its "
                     f"contract artifact)"), True
    if code == shipped:
        return check(name, True, f"{size}, the EpochAnchor kint ships"), True
    if chain.devchain:
        return check(name, True, f"{size} that are not the EpochAnchor kint ships",
                     "unset KINT_CONTRACT, or run `kint devchain stop` and `kint devchain "
                     "start` to deploy it again", warn=True), True
    return check(name, True, f"{size}, not kint's own build of the interface (expected on "
                 f"Base: kint v0.3.0 deployed its own)"), True


def no_session_key(home: Path) -> dict[str, Any] | None:
    """The session key's check when there is no key on this machine (no chain needed): a
    warning, as for a key not authorized or funded (`_session_key`). v0.3.0's docs say
    nothing of it; what a missing key stops is the same as those two, writes, while a
    restore and every read work without one (a machine kept to restore from, its key
    removed so it can never append), so doctor does not exit 1 for it. A key file that
    cannot be read still fails."""
    from kint.custody.session_key import session_key_exists

    if session_key_exists(home):
        return None
    return check("session key", True, "no session key on this machine",
                 "run `kint session-key create`, then fund and authorize it, before pushing; "
                 "pulls and reads need none", warn=True)


def _session_key(anchor: Anchor, home: Path, owner: str) -> dict[str, Any]:
    """Ok when the owner has authorized the key and it holds more than 0.00002 ETH, else a
    warning, as in v0.3.0 (02-quickstart.md: doctor "warns" at or below that balance or
    while the key is not authorized): a machine that only restores and reads needs neither
    (03-new-machine.md), so its doctor must not exit 1 for them. A key that cannot be read
    at all still fails."""
    from kint.custody.errors import CustodyError
    from kint.custody.session_key import session_address

    missing = no_session_key(home)
    if missing is not None:
        return missing
    try:
        address = session_address(home)
        facts = read_key_facts(anchor, address, owner, with_expiry=False)
    except NoContractThere as err:  # the contract check says it, and what to check
        return check("session key", False, err.happened,
                     "see the contract check")
    except (CustodyError, *CHAIN_READ_FAILED) as err:
        return check("session key", False, str(err), "check the session key file and the RPC")
    ok = bool(facts.authorized) and facts.balance_wei > MIN_WRITE_BALANCE_WEI
    detail = (f"{address}: {facts.balance_eth} ETH, "
              f"{'authorized' if facts.authorized else 'NOT authorized'} for {owner}")
    if ok:
        return check("session key", True, detail)
    # On the devchain no wallet holds its ETH: the command that gives it is named.
    fund = (f"fund it (kint devchain fund {address})" if anchor.config.devchain else
            "fund it with a few cents of ETH")
    return check("session key", True, detail, f"{fund} and authorize it (kint authorize) before "
                 "pushing; pulls and reads need neither", warn=True)


def _head(anchor: Anchor, owner: str, space_id: str, mirror: Mirror | None) -> dict[str, Any]:
    """The chain's head of (owner, space) against the mirror's: `in step`, or NOT in step: pull."""
    try:
        head = anchor.head(owner, space_id)
    except CHAIN_READ_FAILED as err:
        return check("head", False, str(err), _endpoint_named(anchor.config))
    there = f"chain {epoch_at(head.seq, head.block)}"
    if mirror is None and head.seq == 0:
        return check("head", True, "nothing anchored yet, on the chain or here")
    here = (f"this machine {epoch_at(mirror.head.seq, mirror.head.block)}"
            if mirror is not None else "this machine none")
    if mirror is not None and (mirror.head.seq, mirror.head.digest) == (head.seq, head.digest):
        return check("head", True, f"{here}; {there}; in step")
    return check("head", True, f"{here}; {there}; NOT in step: pull",
                 "run `kint pull` (then `kint push` for changes made here)", warn=True)
