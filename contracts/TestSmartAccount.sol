// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

/// @title TestSmartAccount
/// @notice FOR TESTS ONLY. Never deploy it anywhere that matters: it has no replay
/// protection, no recovery and no upgrade path. It exists so the test suite can exercise
/// EpochAnchor's ERC-1271 branch (an owner address that has code) on a local chain.
/// @dev One EOA `signer` stands behind the account: it validates the signer's plain 65-byte
/// signatures over a digest, and lets the signer make the account call any contract, so the
/// account can itself act as an owner (setSessionKey, push).
contract TestSmartAccount {
    /// @notice The EOA whose signatures this account accepts and who may drive it.
    address public immutable signer;

    /// @notice `execute` was called by someone other than the signer.
    error NotSigner();

    constructor(address signer_) {
        signer = signer_;
    }

    /// @notice ERC-1271: 0x1626ba7e when `signature` (r || s || v) recovers to the signer over
    /// `digest`, 0xffffffff otherwise. It never reverts, so a test of the refusal path checks
    /// the answer and not a revert.
    function isValidSignature(bytes32 digest, bytes calldata signature) external view returns (bytes4) {
        if (signature.length != 65) return 0xffffffff;
        bytes32 r;
        bytes32 s;
        uint8 v;
        assembly {
            r := calldataload(signature.offset)
            s := calldataload(add(signature.offset, 32))
            v := byte(0, calldataload(add(signature.offset, 64)))
        }
        if (v < 2) v += 27;
        address got = ecrecover(digest, v, r, s);
        return got != address(0) && got == signer ? bytes4(0x1626ba7e) : bytes4(0xffffffff);
    }

    /// @notice Call `target` with `data` as this account. Only the signer may. A revert in the
    /// target is passed up unchanged, so a test sees the target's own custom error.
    function execute(address target, bytes calldata data) external returns (bytes memory result) {
        if (msg.sender != signer) revert NotSigner();
        bool ok;
        (ok, result) = target.call(data);
        if (!ok) {
            assembly {
                revert(add(result, 32), mload(result))
            }
        }
    }
}
