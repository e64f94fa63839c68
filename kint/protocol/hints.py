"""The hints kint's refusals name a step with, each kept word for word in one place: the
worker's, the custody layer's and the commands' for what only the human can put right (a
session key, a key file, the owner's authorization, a state file, the endpoint's history),
and for what an agent does itself (a pull, a push, a connect once the chain reads).

Apart from kint.protocol.errors (the codes, their default hints, the endpoint checks, the
exception): kint-server, which never imports the worker, knows each of these by its words
or its template (kint.agent_server.agent_hints) and gives the agent its own next step in
their place; the worker and the CLI raise them as they are.
"""

from __future__ import annotations

from kint.outcomes import NOTHING_ANCHORED_OR_DROPPED
from kint.protocol.errors import CHAIN_UNREADABLE_AT, RETRY_THEN

# NO_SESSION_KEY where there is no session key file at all (kint.custody's SessionKeyMissing):
# no passphrase can open a file that is not there, so the default's "or check
# KINT_SESSION_PASSPHRASE" does not apply; the one step is to make a key. Named here, as the
# hints below, so that kint-server tells an agent whose step it is.
SESSION_KEY_MISSING_HINT = ("`kint session-key create` makes one and prints its address, "
                            "which the owner then authorizes (`kint authorize`) and funds "
                            "with a little ETH")

# The worker's hints for a session key or key file that only the human can put right (the
# local passphrase, the owner's authorization, a key file kint will not rewrite), and for a
# data key or enrolment that connect gives. Named here, as SESSION_KEY_MISSING_HINT and the
# hints below, so that kint-server, which never imports the worker, gives an agent its own
# step for each (kint.agent_server.agent_hints): the terminal's words would have it run them.
# A keystore that does not open with the local passphrase in force: NO_SESSION_KEY's default
# hint begins `run kint session-key create`, which keeps the key there (`exists: 0x...`) and
# opens nothing. The passphrase is what is wrong.
SESSION_KEY_LOCKED_HINT = ("give back the local passphrase the key was sealed with "
                           "(KINT_SESSION_PASSPHRASE, the Keychain item, or local.secret); if "
                           "it is lost, `kint session-key rotate` makes a new key (which needs "
                           "its own authorization)")
# No local passphrase at all where the session key and the key cache were sealed under one.
NO_LOCAL_SECRET_HINT = ("this machine's session key and key cache are sealed under its local "
                        "passphrase (KINT_SESSION_PASSPHRASE, the Keychain on macOS, else "
                        "KINT_HOME/local.secret): give back the one they were made with; "
                        "nothing was dropped")
# A keystore kint cannot read: CORRUPT_STATE's default hint (move it aside, then pull or
# connect) would leave the machine with no session key and no word of how to get one. The
# one wording for every command and op that meets it (kint join adds its own "then run kint
# join again", as it does to every custody hint).
SESSION_KEY_CORRUPT_HINT = ("`kint session-key rotate` moves it aside and makes a new key, "
                            "which needs the owner's authorization (kint authorize)")
# A rekey journal that does not open: the one key file kint never rewrites itself.
REKEY_JOURNAL_HINT = ("give back the local secret it was sealed under if its source changed; "
                      "otherwise run `kint connect` (a carried key opens the chain head), "
                      "then move the file aside")
# A rekey journal a newer kint wrote: nothing is wrong with it, and moving it aside (the
# garbled one's way out) may drop the only copy of the data key the chain's head is under.
REKEY_JOURNAL_NEWER_HINT = ("run the newer kint that wrote it: its worker settles the "
                            "rotation when it starts, or at the next push or pull; do not "
                            "move the file aside (it may hold the only copy of the data key "
                            "the chain's head is sealed under)")
# The next step for a session key the chain will not take epochs from (not NOT_CONNECTED's
# default, `kint connect`: this machine is connected, its key cannot write).
UNAUTHORIZED_HINT = ("the owner authorizes this machine's session key with `kint authorize` "
                     "(direct, page, or payload then submit) and it needs a little ETH; "
                     "`kint session-key show` says which is missing")
# The worker's hints for a state file it cannot trust (kint.tenant_worker.state_health, and
# the pending-epoch journal's own, pending_journal.py): moving a file aside is the human's,
# the pull after it the agent's own memory_pull. And for an epoch that landed with an Epoch
# event that does not match what was sent (pending.py, reanchor.py): a pull re-reads it.
# Named here so that kint-server, which never imports the worker, gives an agent its words.
CORRUPT_FILE_HINT = ("move the file aside and run `kint pull` (or `kint connect` for a key "
                     "file); kint never replaces a corrupt file by itself")
CORRUPT_JOURNAL_HINT = "move it aside and run `kint pull`"
REREAD_HINT = "run `kint pull` to re-read it"

# A push refused by the journal of a killed push whose key the owner has not authorized (or
# no longer does: kint.tenant_worker's unauthorized_journal), and a pull's warning when it
# went on past one it dropped: the authorization is the owner's, the push after it the
# agent's own. KEPT: its transaction may still land, so the journal waits for the key.
UNAUTHORIZED_PUSH_HINT = f"{UNAUTHORIZED_HINT}; then `kint push` anchors them"
UNAUTHORIZED_KEPT_HINT = (f"{UNAUTHORIZED_HINT}; then `kint push` sends it again. Not to "
                          f"authorize this key again: `kint session-key rotate`, and the owner "
                          f"authorizes the new key; the next push or pull drops this journal, "
                          f"a previous key's then, and `kint push` anchors its rows with the "
                          f"new key")
# What a pull's warning says of the rows a dropped journal carried (kint.tenant_worker's
# overtaken.py, unauthorized_journal.py): still in the store, or in the one the pull moved
# aside. Named here so kint-server tells an agent its own tools for them.
ROTATED_KEY_NOTICE_TAIL = "`kint push` anchors them with this machine's current session key"
OVERTAKEN_NOTICE_TAIL = "`kint status` counts them, and `kint push` anchors them"
WRITE_BACK = "write back from it what is still wanted"
WRITE_BACK_TAIL = f"{WRITE_BACK}, then `kint push`"
# A push's or rekey's refusal on a kept notice whose rows a discarding pull moved aside (the
# pull killed before it said the notice): the refusal uses the notice up, so it says the
# write-back step the pull's warning would have said, which was then never said; its pull
# first finishes the restore the kill may have cut short. `{again}`: the command refused.
ASIDE_FIRST = ("run `kint pull` (it finishes a restore the discarding pull left), then "
               "write back from the store that pull moved aside (named above) what is still "
               "wanted")
ASIDE_THEN = f"{ASIDE_FIRST}, then `{{again}}`"

# A push refused by the journal of an interrupted push that a previous session key of this
# machine left (rotated since, and no longer authorized: kint.tenant_worker's
# unauthorized_journal): the journal is dropped, and the next push anchors its rows with the
# current key. Named here so that kint-server gives an agent its own call for it.
ROTATED_KEY_PUSH_HINT = ("run `kint push` again: it anchors them with this machine's current "
                         "session key")
# The machine that created the vault pushes only while its recovery code file is there
# (kint.tenant_worker.push_refusals): writing it again is a step an agent may take itself
# (14-agents.md, "What you can do for the user"), keeping it off the machine the human's.
# `{file}`: the file's path, which push names, so that kint-server tells an agent where it
# is (the agent has no other way to the path). RECOVERY_FILE_HINT, "it", is an older
# worker's hint (before the path was named), which kint no longer raises: kept so that
# kint-server still gives the agent its words for that worker's reply (agent_hints).
RECOVERY_FILE_AT = "run `kint recovery-code` to write {file} again and copy it off the machine"
RECOVERY_FILE_HINT = RECOVERY_FILE_AT.format(file="it")
# A space with no enrolment here (push, pull, verify, history and rekey refuse with it), and
# a data key not cached (missing or expired): connect gives both.
NOT_CONNECTED_HINT = "run `kint connect --owner ADDRESS` first"
NO_DATA_KEY_HINT = ("run `kint connect --owner ADDRESS` with the wallet's signature, the vault "
                    "passphrase or the recovery code")
# A cached data key this machine's wraps do not hold: the key was rotated on another machine,
# and a connect with the owner's key (never the agent's to give) carries the new one here.
WRAPS_ROTATED_HINT = "run `kint connect` again"
# What opens an epoch sealed under a data key this machine does not hold, when the key was
# rotated on another machine (v0.3.0's 03-new-machine.md, "Gaps": a wrong key does not heal
# on the next pull, connect again). The pull's line and push's hint say it
# (push_refusals.gap_hint); verify's reason is the seed's own words.
ROTATED_GAP_STEP = ("if the data key was rotated on another machine (`kint rekey`), `kint "
                    "connect` again with a key that opens the vault now (the owner's "
                    "signature, the vault passphrase or the new recovery code), then `kint "
                    "pull`")
# What that connect says when the head epoch's wrap under the key given does not open the
# data key that sealed the epoch: a rotation's does, and a kek tag is public (every header
# carries it), so a leaked session key can put this machine's tag on bytes of its own.
NOT_A_REKEY_HINT = ("the owner revokes the leaked session key that wrote it "
                    "(revokeSessionKey, docs/authorize.md), then `kint compact "
                    "--over-skipped` on a machine that holds the data key anchors a readable "
                    "snapshot over it")
NOT_A_REKEY = ("if that connect says the head epoch's wrap under the key does not open, no "
               f"rekey made it: {NOT_A_REKEY_HINT}")
# A push's GAP at such an epoch; and a discarding pull refused before the move for one
# (kint.tenant_worker.pull): the connect is the human's, the pull after it the agent's.
ROTATED_GAP_HINT = f"{ROTATED_GAP_STEP}; {NOT_A_REKEY}"
ROTATED_DISCARD_HINT = ("`kint connect` again with a key that opens the vault in the head epoch "
                        "(the owner's signature, the vault passphrase or its recovery code): "
                        "after a `kint rekey` on another machine, or a vault started on two "
                        "machines before the first push, it takes that vault's data key; then "
                        "`kint pull --discard-local` again")
# A snapshot (compact, rekey, memory_push with snapshot) too large for one epoch.
SNAPSHOT_TOO_LARGE_HINT = ("a snapshot (compact, rekey) is one epoch and cannot be split; "
                           "`kint push` splits the changes across epochs")

# Hints the worker gives for what only the human can change about the chain endpoint, named
# here so that kint-server (which never imports the worker) tells an agent to stop and say
# them: an endpoint without old history (a pull's walk, kint/tenant_worker/walk_history.py)
# and a chain whose head fell behind this machine's newest epoch though its blocks did not
# (a reorganisation, kint/tenant_worker/behind_head.py).
# Each hint that sends the user to another endpoint is a template (an `_AT`): {endpoint}
# names where the space's endpoints in force are set (kint.chain.endpoint_source's
# other_endpoint), and kint-server carries it into its words (or, for the one an agent has
# no call for, --over-skipped's, hands the whole hint to the human). The worker raises the
# machine-wide words (the `_HINT`, the template filled with them) and names the space's
# own on the way out (kint.tenant_worker.rpc_hint.name_the_endpoint), where "rpc_url in
# config.toml" changed nothing for a space whose endpoints a connect kept or its own table
# sets; the machine-wide words stay only where the chain settings cannot be read.
ARCHIVE_AT = ("pull again (a passing fault heals); if it stops at the same epoch, the "
              "endpoint keeps no history that old (a pruned node, or one without a "
              "transaction index): give the space an archive endpoint ({endpoint}) and pull")
ARCHIVE_HINT = ARCHIVE_AT.format(endpoint="rpc_url in config.toml, or `kint connect "
                                          "--rpc-urls URL` for one with no key in it")
# An address with no EpochAnchor through the space's settings (a view with no data, doctor's
# contract check finding no code, a contract that does not answer as EpochAnchor): the
# contract and the endpoint, each named where it was set (kint.chain.contract_source), and
# the chain ({chain_id}). A template, which kint-server carries into its words.
CONTRACT_CHECK = ("check the contract ({contract}) and the endpoint ({endpoint}): they must "
                  "name kint's EpochAnchor and an endpoint of chain {chain_id}, where it is "
                  "deployed")
# REORG_HINT is a template: {endpoint} names where the space's endpoints in force were set
# (kint.chain.endpoint_source.other_endpoint), which kint-server carries into its words.
REORG_HINT = ("ask another endpoint ({endpoint}): if it answers the same, the chain lost "
              "those epochs, and `kint push --reanchor` sends them again from this machine's "
              "epoch cache, byte for byte; until then kint changes nothing")

# A recovery code that is not one, or whose checksum fails: where to copy it from again
# (named here, as the two above, so that kint-server gives an agent its own next step).
# An address refused for a mixed case that is not its EIP-55 checksum (kint.custody.ids):
# only the human can read it off the wallet again, so kint-server says it as theirs.
CHECKSUM_HINT = ("copy the address again from the wallet or an explorer: the case of its "
                 "letters is a checksum, and a mistyped character breaks it")

# `{file}`: the space's own file under KINT_HOME (recovery_file_named), where the space is
# known (a connect's), else its pattern (RECOVERY_CODE_HINT): the hint said the literal
# `RECOVERY-<space16>.txt` to a user who had to work out the space's id to find the file.
RECOVERY_CODE_AT = ("copy the code again: it is the last line of {file}, written where the "
                    "vault started (or by `kint recovery-code` on a machine that holds the "
                    "data key)")
RECOVERY_CODE_HINT = RECOVERY_CODE_AT.format(file="RECOVERY-<space16>.txt")


def recovery_file_named(space16: str) -> str:
    """The space's recovery code file as a hint names it where it may be on another machine
    (the one where the vault started, or a rekey ran): its path under that KINT_HOME."""
    return f"KINT_HOME/RECOVERY-{space16}.txt"


def recovery_code_hint(space16: str | None) -> str:
    """RECOVERY_CODE_AT naming the space's file, or its pattern where no space is known."""
    if space16 is None:
        return RECOVERY_CODE_HINT
    return RECOVERY_CODE_AT.format(file=recovery_file_named(space16))

# A connect with a recovery code that had nothing to check the code against, or no wraps of
# it, while the chain could not be read (kint.tenant_worker.recovery_binding): connecting
# again is the same call, which an agent makes itself once the endpoint answers; the
# endpoint's setting, and KINT_OFFLINE unset, are the human's. `{then}`: what the chain's
# head epoch does then. Named here so that kint-server gives an agent its own call for them.
# `{check}`: the check of the endpoints in force, by where they are set (rpc_hint's
# endpoint_check, or a connect's own --rpc-urls: name_the_given); raised in machine-wide
# words (CONNECT_WHEN_READABLE, a template of `{then}` alone) and named on the way out of
# the worker, where "check KINT_RPC_URL" was said of a connect's dead --rpc-urls too.
CONNECT_WHEN_READABLE_AT = "connect again when the chain can be read ({check}): {then}"
CONNECT_WHEN_READABLE = CONNECT_WHEN_READABLE_AT.format(
    check="check KINT_RPC_URL or the space's endpoints", then="{then}")
# KINT_OFFLINE=1 by where it is in force: the call's environment (a command's, kint-server's),
# config.toml (`offline`, read again when it changes) or the environment the supervisor was
# started with (read once): unsetting it anywhere else leaves the next connect refused.
CONNECT_UNSET_OFFLINE = "unset KINT_OFFLINE and connect again: {then}"
CONNECT_OFFLINE_FILE = ("remove `offline` from {where} (or set it to false) and connect again: "
                        "{then}")
CONNECT_OFFLINE_DAEMON = ("the supervisor was started with KINT_OFFLINE=1: unset it in the "
                          "service's environment file and restart the service, or `kint "
                          "supervisor stop` and connect again from an environment without it: "
                          "{then}")
# A push whose transaction the endpoint answered and refused (it cannot land), a store
# locked by another writer, a store read failing other than as damaged
# (kint.tenant_worker.push_refusals): a push again is the agent's own memory_push.
# {endpoint}: the endpoint the push sent through, by where it is set
# (kint.chain.endpoint_source.endpoint_in_force), which the worker names on the way out as
# it names ARCHIVE_AT's.
SEND_REFUSED_AT = "check what the endpoint said ({endpoint}), then push again"
SEND_REFUSED_HINT = SEND_REFUSED_AT.format(endpoint="KINT_RPC_URL, or the endpoints given to "
                                                    "`kint connect --rpc-urls`")
STORE_LOCKED_PUSH_HINT = "run the push again once the other writer lets go of the store"
# The same lock met by a pull, and by any other op of the worker's that reads or writes the
# store (state_health.guarded): the store is fine, only taken, and the op is the one to run
# again, never INTERNAL's "a bug in kint".
STORE_LOCKED_PULL_HINT = "run the pull again once the other writer lets go of the store"
STORE_LOCKED_HINT = "run it again once the other writer lets go of the store"
# A store read that failed other than as a lock or this user's permission (damaged, an
# archive of a shape kint does not read, an I/O error), met by any op but a push's own read
# of the rows (state_health.store_refusal): kint never writes it, so it is the human's.
STORE_UNREADABLE_HINT = "check the store file; kint only reads it"
STORE_READ_FAILED_HINT = ("that is not a damaged store, so nothing is held: run the push "
                          "again; if it fails the same way, the supervisor log has the details")
# A discard's count of the store's tenants that SQLite read and kint could not make out
# (discard.refuse_if_shared): no table with Sibyl's tenant_id, or a SQLite error that is not
# a damaged file (a schema this kint's SQLite does not read; any other error SQLite's own,
# a cut-short transaction it could not roll back, say). The file may be another tool's, or
# hold other tenants' rows, so it is the human's to look at or to move aside by hand.
STORE_UNCOUNTED_DISCARD_HINT = (
    "a discard moves the whole file, so it moves only a store whose tenants kint can count, "
    "or one SQLite cannot read at all; the error says why this one could not be counted: "
    "no table with Sibyl's tenant_id, or a schema this kint's SQLite does not read (a "
    "collation it lacks), means --db (or SIBYL_MEMORY_DB) names another tool's file or a "
    "newer Sibyl's store: check it, or, to discard it all the same, move it aside yourself, "
    "then `kint pull`; any other SQLite error is SQLite's own (the supervisor log may say "
    "more): run the pull again once it is put right")

# An interrupted push's journal the endpoint answered for with a head or an event that does
# not fit it (kint.tenant_worker.pending): kept, and settled by a pull through an endpoint
# that answers truly. The endpoints are the human's to check; the pull is the agent's own.
# {endpoints}: the endpoints in force, as STALE_RPC's hint checks them (rpc_hint.stale_hint).
STALE_JOURNAL_AT = "check {endpoints}, then run `kint pull`"
STALE_JOURNAL_HINT = STALE_JOURNAL_AT.format(endpoints="KINT_RPC_URL and KINT_RPC_URL_2")
# The session key short of ETH for the next transaction (kint.tenant_worker.session_sender):
# funding it is the owner's, never the agent's. Built with the chain and the address.
FUND_SESSION_KEY_HINT = ("send ETH on chain {chain_id} to {address} (`kint status` names it)"
                         + RETRY_THEN)
# The same on the devchain, where no wallet holds its ETH: the command that gives it is
# named, as join's next: line, doctor and authorize name it. Built with the address.
FUND_DEVCHAIN_KEY_HINT = "`kint devchain fund {address}` gives it devchain ETH" + RETRY_THEN
# A previous session key's nonce whose fill the endpoint refused (kint.tenant_worker's
# former_key): the next pull fills it again, after the ETH it may need, which is the owner's.
FORMER_KEY_FUND = "send ETH on chain {chain_id} to {address}, then "
# The same on the devchain, where no wallet holds its ETH: the command that gives it.
FORMER_KEY_DEVCHAIN_FUND = "`kint devchain fund {address}` gives it devchain ETH, then "
FILL_AGAIN_HINT = "run `kint pull`: it fills nonce {hole} again"
# A previous session key's nonce that nothing here can fill (its keystore no longer opens
# here): putting the keystore back, spending the nonce from elsewhere or moving the journal
# out is the human's, the pull after it the agent's own. ELSEWHERE comes first when a
# transaction of that key waits at another endpoint past the bound (former_key_wait).
FORMER_KEY_ELSEWHERE = ("send the transaction waiting at {url} through the endpoint this "
                        "space sends through too, or check why that endpoint does not pass "
                        "it on; ")
FORMER_KEY_UNFILLABLE = ("put that key's keystore back as session.key.old under KINT_HOME and "
                         "run `kint pull` (it fills nonce {hole} with a transfer to self), or "
                         "send any transaction from {address} at nonce {hole}; or move "
                         "pending-{space16}.json out of KINT_HOME and run `kint pull`: the "
                         "push's rows are still in the store, and the next push anchors them "
                         "with this machine's key")

# The head epoch's header that the endpoint would not serve (kint.tenant_worker.head_header).
HEADER_TRANSPORT_AT = ("that is a transport failure, never a verdict on the vault: try again, "
                       "or change the RPC ({endpoint})")
HEADER_TRANSPORT_HINT = HEADER_TRANSPORT_AT.format(endpoint="KINT_RPC_URL")
# Those transport failures (and CHAIN_UNREADABLE's own) on the devchain, whose endpoint is
# its own, none given to the space: there a failure almost always means it is not running
# (kint.tenant_worker.rpc_hint.named_hint), and "change the RPC" named nothing to change.
DEVCHAIN_TRANSPORT = ("`kint devchain status` says whether the devchain runs (`kint devchain "
                      "start` starts it)")


def on_the_devchain(template: str) -> str:
    """Transport failure `template` (HEADER_TRANSPORT_AT, CHAIN_UNREADABLE_AT) said of the
    devchain: its check, then the try again, where another RPC was named."""
    return template.partition("try again, or change")[0] + DEVCHAIN_TRANSPORT + ", then try again"


HEADER_TRANSPORT_DEVCHAIN = on_the_devchain(HEADER_TRANSPORT_AT)
CHAIN_UNREADABLE_DEVCHAIN = on_the_devchain(CHAIN_UNREADABLE_AT)
# DISK_FULL's hint for a pull (kint.tenant_worker.state_health): what it had applied stays,
# and the next pull goes on from there.
DISK_FULL_PULL_TAIL = ": the next pull picks up where this one stopped (nothing to discard)"
# RPC_UNAVAILABLE's hint for a receipt wait that ran out while the push waited behind a
# previous session key's nonce held at another endpoint of the space, within the bound on
# that wait (kint.tenant_worker.former_key_wait): no endpoint failed, so the generic hint's
# check of the endpoints was a wrong next step, and "try again" met the same wait. Named
# here so kint-server gives an agent its own words for it.
DEFERRED_FILL_HINT = ("that transaction reaching the endpoint this space sends through frees "
                      "the way (send it there too, or check why the other does not pass it "
                      "on); else run `kint pull` once the bound named above has passed: "
                      "the nonce is then filled here, or what to do is named "
                      "(KINT_NONCE_RETRY_SECONDS sets the bound)")
# A push's GAP hints (kint.tenant_worker.push_refusals.gap_hint), named here so kint-server
# tells them apart by what they are, not by the words they contain: a gap the last pull left
# at an epoch it read and could not open, which may never open (the human's snapshot over
# it), and one at an epoch it could not read at all, which the next pull may well heal.
GAP_NEVER_OPENS_HINT = ("run `kint pull` to apply it; for an epoch that will never open, "
                        "`kint compact --over-skipped` anchors this machine's store over it")
UNREAD_GAP_AT = ("run `kint pull` again: the last one could not read that epoch (through "
                 "another endpoint if this one keeps failing: {endpoint})")
UNREAD_GAP_HINT = UNREAD_GAP_AT.format(endpoint="rpc_url in config.toml")
# The same gap met by a snapshot given --over-skipped (push_refusals.refuse_gap).
UNREAD_OVER_SKIPPED_AT = ("run `kint pull` again (through another endpoint if this one keeps "
                          "failing: {endpoint}); --over-skipped is for an epoch the pull read "
                          "and could not open")
UNREAD_OVER_SKIPPED_HINT = UNREAD_OVER_SKIPPED_AT.format(endpoint="rpc_url in config.toml")
# The commands that say a kept settled notice (kint.tenant_worker.settled_notice), as
# `kint status` names them; kint-server names its own tools in their place.
SAID_BY_NEXT = "the next push, pull, rekey or recovery-code"
# The way past a discard refused because another process holds the store, for a person at
# a terminal: an agent's kint-server closes its own connection first. Said to an agent
# that has just called memory_pull with discard_local, it would send the agent round in a
# loop, so kint-server says the human's step instead (kint.agent_server.results).
DISCARD_FROM_AGENT = ", or from a kint-server agent call memory_pull with discard_local"

# A server-side push held (kint.tenant_worker.drift), each hold with the hint that is true of
# it: "memory_verify still refuses the row" was every hold's, also where nothing was refused.
# Rows changed (or gone) with no session's note to account for them: which value is meant
# is the human's word, and `kint push` from a terminal is never held.
DRIFT_HOLD_HINT = (f"{NOTHING_ANCHORED_OR_DROPPED}; no write of Sibyl's tools accounts for "
                   f"the rows named: check the store, then `kint push` from a terminal "
                   f"anchors it as it is")
# A store that lost every anchored row (another tenant's pull remade a shared store): a plain
# pull restores them, the agent's own memory_pull.
STORE_LOST_HOLD_HINT = (f"{NOTHING_ANCHORED_OR_DROPPED}; run `kint pull`: it restores the "
                        f"anchored rows the store lost (`kint push` from a terminal anchors "
                        f"their deletion, if it is meant)")
