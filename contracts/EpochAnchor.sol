// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

/// @title EpochAnchor
/// @notice Anchors a hash chain of encrypted epochs per (owner, space). The ciphertext
/// travels only in calldata; the contract keeps its keccak256 digest as the head and
/// emits it, so a reader walks back through `Epoch` logs and transaction inputs.
/// Writers: the owner, a session key the owner authorized (until its expiry), or a
/// writer a still-valid session key delegated to (until the earlier of both expiries).
contract EpochAnchor {
    struct Head {
        uint64 seq;
        uint64 blockNumber;
        bytes32 digest;
    }

    struct Delegation {
        address sessionKey;
        uint64 expiry;
    }

    struct WrapsState {
        uint64 version;
        uint64 blockNumber;
    }

    /// owner => session key => expiry (unix seconds; valid while expiry > block.timestamp)
    mapping(address => mapping(address => uint64)) public sessionExpiry;
    /// owner => writer => the session key that delegated it and the writer's own expiry
    mapping(address => mapping(address => Delegation)) public delegations;

    mapping(address => mapping(bytes32 => Head)) private _heads;
    mapping(address => mapping(bytes32 => WrapsState)) private _wraps;

    event Authorized(address indexed owner, address indexed sessionKey, uint64 expiry);
    event Delegated(address indexed owner, address indexed sessionKey, address indexed writer, uint64 expiry);
    event Epoch(
        address indexed owner,
        bytes32 indexed space,
        uint64 indexed seq,
        bytes32 digest,
        bytes32 prev,
        uint64 prevBlock,
        address writer
    );
    event Wraps(address indexed owner, bytes32 indexed space, uint64 version, bytes blob);

    error BadPrev(bytes32 expected, bytes32 given);
    error BadSeq(uint64 expected, uint64 given);
    error NotAuthorized(address owner, address caller);

    /// @notice The caller (the owner) authorizes `sessionKey` until `expiry`; 0 revokes.
    function authorize(address sessionKey, uint64 expiry) external {
        sessionExpiry[msg.sender][sessionKey] = expiry;
        emit Authorized(msg.sender, sessionKey, expiry);
    }

    /// @notice A valid session key of `owner` lets `writer` write until `expiry` (0 revokes).
    /// The writer's right also ends whenever this session key's does.
    function delegate(address owner, address writer, uint64 expiry) external {
        if (sessionExpiry[owner][msg.sender] <= block.timestamp) revert NotAuthorized(owner, msg.sender);
        delegations[owner][writer] = Delegation(msg.sender, expiry);
        emit Delegated(owner, msg.sender, writer, expiry);
    }

    function canWrite(address owner, address caller) public view returns (bool) {
        if (caller == owner) return true;
        if (sessionExpiry[owner][caller] > block.timestamp) return true;
        Delegation memory d = delegations[owner][caller];
        return d.expiry > block.timestamp && sessionExpiry[owner][d.sessionKey] > block.timestamp;
    }

    function push(address owner, bytes32 space, uint64 seq, bytes32 prev, bytes calldata ciphertext) external {
        if (!canWrite(owner, msg.sender)) revert NotAuthorized(owner, msg.sender);
        Head storage h = _heads[owner][space];
        bytes32 current = h.digest;
        if (prev != current) revert BadPrev(current, prev);
        uint64 expected = h.seq + 1;
        if (seq != expected) revert BadSeq(expected, seq);
        uint64 prevBlock = h.blockNumber;
        bytes32 digest = keccak256(ciphertext);
        h.seq = seq;
        h.blockNumber = uint64(block.number);
        h.digest = digest;
        emit Epoch(owner, space, seq, digest, prev, prevBlock, msg.sender);
    }

    function head(address owner, bytes32 space) external view returns (uint64 seq, bytes32 digest, uint64 blockNumber) {
        Head storage h = _heads[owner][space];
        return (h.seq, h.digest, h.blockNumber);
    }

    function publishWraps(address owner, bytes32 space, bytes calldata blob) external {
        if (!canWrite(owner, msg.sender)) revert NotAuthorized(owner, msg.sender);
        WrapsState storage w = _wraps[owner][space];
        uint64 version = w.version + 1;
        w.version = version;
        w.blockNumber = uint64(block.number);
        emit Wraps(owner, space, version, blob);
    }

    function wraps(address owner, bytes32 space) external view returns (uint64 version, uint64 blockNumber) {
        WrapsState storage w = _wraps[owner][space];
        return (w.version, w.blockNumber);
    }
}
