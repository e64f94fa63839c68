"""The agent's words for kint's hints built at run time (an address, a chain, a nonce, a
file, an endpoint): each known by its template in kint.protocol.hints and matched with its
values taken (kint.agent_server.hint_matchers.built), the values carried into the words.
Kept apart from kint.agent_server.agent_hints' table of hints named word for word, which
asks these after its own (`_RULES`), so that each module stays one screenful of one kind.
"""

from __future__ import annotations

from kint.protocol.errors import CHAIN_UNREADABLE_AT
from kint.protocol.hints import (ARCHIVE_AT, CHAIN_UNREADABLE_DEVCHAIN, CONNECT_OFFLINE_DAEMON,
                                 CONNECT_OFFLINE_FILE, CONNECT_UNSET_OFFLINE,
                                 CONNECT_WHEN_READABLE_AT, CONTRACT_CHECK, DEVCHAIN_TRANSPORT,
                                 FILL_AGAIN_HINT,
                                 FORMER_KEY_DEVCHAIN_FUND, FORMER_KEY_ELSEWHERE,
                                 FORMER_KEY_FUND, FORMER_KEY_UNFILLABLE, FUND_DEVCHAIN_KEY_HINT,
                                 FUND_SESSION_KEY_HINT, HEADER_TRANSPORT_AT,
                                 HEADER_TRANSPORT_DEVCHAIN, RECOVERY_CODE_AT, RECOVERY_FILE_AT,
                                 REORG_HINT, SEND_REFUSED_AT, STALE_JOURNAL_AT, UNREAD_GAP_AT)


def _transport_retry(done: str) -> str:
    """A transport failure's hint in an agent's words: its own call again first, the
    endpoint after that the human's ({endpoint}: where the space's are set); `done` says
    what the failure left as it was."""
    return ("call {tool} again in a minute: that is a transport failure, never a verdict on "
            f"the vault{done}; if it fails again, stop and tell the human to change the RPC "
            "({endpoint})")


def _devchain_retry(done: str) -> str:
    """The same on the devchain, whose endpoint is its own: the human's part is to see
    whether the devchain runs and start it (DEVCHAIN_TRANSPORT), not to change an RPC."""
    return ("call {tool} again in a minute: that is a transport failure, never a verdict on "
            f"the vault{done}; if it fails again, stop and tell the human: {DEVCHAIN_TRANSPORT}")


# The human's ways past a previous key's nonce this machine cannot fill, then the pull.
_UNFILLED = ("put the previous session key's keystore back as session.key.old under "
             "KINT_HOME, or send any transaction from {address} at nonce {hole}, or move "
             "pending-{space16}.json out of KINT_HOME (the push's rows stay in the store); "
             "after that, call {pull}: it fills nonce {hole} with a transfer to self once the "
             "keystore is back, and settles the interrupted push (with the journal moved out "
             "there is none, and memory_push then anchors the rows with this machine's key)")
# The agent's own connect once the human has let the chain be read.
_CONNECT_AGAIN = "after that, call {tool} again with the same arguments: {then}"
# Hints the worker builds at run time (an address, a chain, a nonce, a file), known by their
# template in kint.protocol.hints, each value carried into the agent's words.
AGENT_TEMPLATES: tuple[tuple[str, str], ...] = (
    # A chain that lost epochs, or an endpoint that says so: another endpoint's word first
    # ({endpoint}: where the space's endpoints in force are set), all the human's.
    (REORG_HINT, f"stop and tell the human: {REORG_HINT}"),
    # No EpochAnchor at the contract's address through the space's settings: no call of the
    # agent's mends a setting, and no retry makes code appear there.
    (CONTRACT_CHECK, f"stop and tell the human: {CONTRACT_CHECK}"),
    # The endpoints named where the space's are set ({endpoint}, {endpoints}: rpc_hint's
    # named_hint), in the worker's words and the agent's alike. A pull's walk that met no
    # old history: a pull is what heals it, whichever tool met it.
    (ARCHIVE_AT, "call {pull} in a minute; if it stops at the same epoch, stop and tell the "
                 "human: the endpoint keeps no history that old, and the space needs an "
                 "archive endpoint ({endpoint})"),
    # A gap at an epoch the last pull could not read: the agent's own pull may heal it.
    (UNREAD_GAP_AT, "call memory_pull again; if it stops at the same epoch again, stop and "
                    "tell the human: the endpoint does not serve it (another is given by "
                    "{endpoint})"),
    # The head epoch's header not read (kint.tenant_worker.head_header), and a chain read
    # that failed in transport (CHAIN_UNREADABLE's own): a passing fault heals; the
    # endpoint is the human's.
    (HEADER_TRANSPORT_AT, _transport_retry("")),
    (CHAIN_UNREADABLE_AT, _transport_retry(": nothing was sent or changed")),
    (HEADER_TRANSPORT_DEVCHAIN, _devchain_retry("")),
    (CHAIN_UNREADABLE_DEVCHAIN, _devchain_retry(": nothing was sent or changed")),
    # A push's transaction the endpoint answered and refused (it cannot land): the push
    # again is the agent's own; only what stays so is the human's.
    (SEND_REFUSED_AT, "call {tool} again in a minute: the endpoint refused the epoch before "
                      "it could land, and nothing was dropped; if it is refused the same way, "
                      "stop and tell the human what the endpoint said (the endpoint: "
                      "{endpoint})"),
    # An interrupted push's journal the endpoint answered for untruly: the agent's pull
    # settles it once the endpoint answers truly; the endpoints are the human's to check.
    (STALE_JOURNAL_AT, "call memory_pull in a minute: it settles the interrupted push once "
                       "the endpoint answers truly; if it fails again, stop and tell the "
                       "human: the endpoint answers with an old or different chain, and "
                       "theirs is to check {endpoints}; once they have, call memory_pull "
                       "again"),
    # The session key short of ETH: the agent holds no wallet; the owner funds the key.
    (FUND_SESSION_KEY_HINT, "stop and tell the human: this machine's session key {address} "
                            "needs ETH on chain {chain_id}, and funding it is the owner's; "
                            "after that, call {tool} again"),
    # On the devchain the human's command that funds it (no wallet holds devchain ETH).
    (FUND_DEVCHAIN_KEY_HINT, "stop and tell the human: this machine's session key {address} "
                             "needs devchain ETH, which `kint devchain fund {address}` in "
                             "their terminal gives; after that, call {tool} again"),
    # A previous key's nonce whose fill the endpoint refused: its ETH is the owner's to
    # send, the pull that fills it again the agent's own.
    (FORMER_KEY_FUND + FILL_AGAIN_HINT,
     "stop and tell the human: the previous session key {address} needs ETH on chain "
     "{chain_id} to fill nonce {hole}, and funding it is the owner's; after that, call "
     "{pull}: it fills nonce {hole} again"),
    (FORMER_KEY_DEVCHAIN_FUND + FILL_AGAIN_HINT,
     "stop and tell the human: the previous session key {address} needs devchain ETH to "
     "fill nonce {hole}, which `kint devchain fund {address}` in their terminal gives; "
     "after that, call {pull}: it fills nonce {hole} again"),
    (FILL_AGAIN_HINT, "call {pull} in a minute: it fills nonce {hole} again; if it is "
                      "refused the same way, stop and tell the human what it says"),
    # A previous key's nonce nothing here can fill: the ways past it are the human's, the
    # pull after them the agent's own (it fills or settles; a journal moved out, the push).
    (FORMER_KEY_ELSEWHERE + FORMER_KEY_UNFILLABLE, f"stop and tell the human: "
                                                   f"{FORMER_KEY_ELSEWHERE}or {_UNFILLED}"),
    (FORMER_KEY_UNFILLABLE, f"stop and tell the human: {_UNFILLED}"),
    # A connect with a recovery code while the chain could not be read: the same call again
    # is the agent's own once the endpoint answers; the endpoint's setting ({check}: the
    # endpoints in force, named where they are set), and KINT_OFFLINE (named where it is
    # in force: kint-server's environment, config.toml, the supervisor's environment), are
    # the human's.
    (CONNECT_WHEN_READABLE_AT, "call {tool} again in a minute with the same arguments: the "
                               "chain could not be read, and once it can, {then}; if it "
                               "fails again, stop and tell the human to {check}"),
    (CONNECT_UNSET_OFFLINE, "stop and tell the human: KINT_OFFLINE=1 in kint-server's "
                            "environment (the harness's MCP configuration) keeps the chain "
                            "from being read; unsetting it there and starting kint-server "
                            f"again is theirs; {_CONNECT_AGAIN}"),
    (CONNECT_OFFLINE_FILE, "stop and tell the human: `offline` in {where} keeps the chain "
                           "from being read; removing it (or setting it to false) is "
                           f"theirs, and applies without a restart; {_CONNECT_AGAIN}"),
    (CONNECT_OFFLINE_DAEMON, "stop and tell the human: the supervisor was started with "
                             "KINT_OFFLINE=1, which keeps the chain from being read; starting "
                             "it again without it is theirs (the service's environment file, "
                             "or `kint supervisor stop` and a command from an environment "
                             f"without it); {_CONNECT_AGAIN}"),
    # The vault's maker without its recovery code file ({file}: its path, push's): writing
    # it again is the agent's own step (14-agents.md: run it, tell the human where it is,
    # do not open it); copying it off the machine is the human's.
    (RECOVERY_FILE_AT, "run `kint recovery-code` to write the file again (do not open it), "
                       "then tell the human where it is ({file}) so they copy it off this "
                       "machine; after that, call {tool} again"),
    # A recovery code that is not one ({file}: the space's file under KINT_HOME, or its
    # pattern): the code came from the human, and the agent cannot copy it again itself.
    (RECOVERY_CODE_AT, "nothing was done; ask the human for the recovery code again (the "
                       "last line of {file}) and call {tool} again with it"),
)
