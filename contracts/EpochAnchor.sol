// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

/// @notice The one method EpochAnchor calls on a smart-account owner (ERC-1271).
interface IERC1271 {
    function isValidSignature(bytes32 digest, bytes calldata signature) external view returns (bytes4);
}

/// @title EpochAnchor
/// @notice Keeps, for each owner and space, the head of a hash chain of encrypted epochs:
/// the keccak256 digest of the newest ciphertext, its 1-based seq and the block it landed in.
/// The ciphertext itself rides only in the calldata of `push`; keeping it out of storage and
/// out of events is what makes an epoch cost its calldata and nothing more.
/// @dev There is deliberately no owner, admin, pause, proxy, receive or fallback: a change to
/// the rules means a new deployment, so a reader can trust that the rules it checked are the
/// rules every epoch was written under. The contract never holds ETH.
contract EpochAnchor {
    /// @notice The newest epoch of one (owner, space). All zeros until the first push, which
    /// is why the first push names `prev = bytes32(0)` and gets seq 1.
    struct Head {
        bytes32 digest;
        uint64 seq;
        uint64 blockNumber;
    }

    /// @notice owner => space => newest epoch.
    mapping(address owner => mapping(bytes32 space => Head)) public head;
    /// @notice owner => session key => unix expiry. A key writes while expiry > block.timestamp;
    /// 0 means revoked or never set.
    mapping(address owner => mapping(address key => uint64 expiry)) public sessionKeyExpiry;
    /// @notice owner => space => the lowest seq the owner still vouches for: a hint for
    /// readers about where to start walking. It never affects `push`.
    mapping(address owner => mapping(bytes32 space => uint64 seq)) public startSeq;
    /// @notice owner => replay counter for `setSessionKeyBySig`. Every owner action on its
    /// session keys also moves it, so a signed but unsubmitted authorization dies with it.
    mapping(address owner => uint256 nonce) public authNonce;

    /// @dev EIP-712 pieces. The separator is rebuilt from block.chainid and address(this) on
    /// every call, so an authorization signed for one chain never verifies on a fork of it.
    bytes32 private constant DOMAIN_TYPEHASH =
        keccak256("EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)");
    bytes32 private constant NAME_HASH = keccak256("kint EpochAnchor");
    bytes32 private constant VERSION_HASH = keccak256("1");
    bytes32 private constant AUTHORIZATION_TYPEHASH = keccak256(
        "SessionKeyAuthorization(address owner,address key,uint64 expiry,uint256 nonce,uint256 deadline)"
    );
    /// @dev ERC-1271's "valid" answer: bytes4(keccak256("isValidSignature(bytes32,bytes)")).
    bytes4 private constant ERC1271_MAGIC = 0x1626ba7e;
    /// @dev Half the secp256k1 group order. An `s` above it is the malleated twin of a valid
    /// signature; refusing it gives every signature exactly one accepted encoding.
    uint256 private constant HALF_ORDER = 0x7fffffffffffffffffffffffffffffff5d576e7357a4501ddfe92f46681b20a0;

    /// @notice One epoch appended. `writer` is msg.sender (the owner or one of its session
    /// keys). `prevBlock` is the block of the previous head (0 for the first), so a reader walks
    /// back with one exact-block log query per epoch and never hits an RPC range cap.
    event Epoch(
        address indexed owner,
        bytes32 indexed space,
        address indexed writer,
        uint64 seq,
        bytes32 prev,
        bytes32 digest,
        uint64 prevBlock
    );
    /// @notice A session key's expiry changed (0: revoked).
    event SessionKeySet(address indexed owner, address indexed key, uint64 expiry);
    /// @notice An owner moved its reader hint for a space.
    event StartSeqSet(address indexed owner, bytes32 indexed space, uint64 seq);

    /// @notice The caller is neither the owner nor one of its unexpired session keys.
    error NotAuthorized();
    /// @notice `push` was given zero bytes: an epoch must carry something to anchor.
    error EmptyCiphertext();
    /// @notice `prev` is not the head. `expected` is the digest on chain, `got` what was sent,
    /// so the loser of a race learns what it should have built on.
    error StaleHead(bytes32 expected, bytes32 got);
    /// @notice The authorization's deadline has passed.
    error AuthorizationExpired();
    /// @notice The authorization's signature does not verify for the owner's current nonce.
    error BadSignature();
    /// @notice `setStartSeq` would move the hint backwards.
    error SeqNotMonotone();

    /// @notice Append one epoch to `owner`'s chain in `space`.
    /// @dev The checks run in a fixed order so a revert reads unambiguously: who may write,
    /// then that there is a payload, then the compare-and-swap on the head. The last one is
    /// why two writers racing on one head cannot both land: the loser learns the new head.
    /// @return digest keccak256(ct), the new head digest.
    /// @return seq The new epoch's seq (the old head's + 1).
    function push(address owner, bytes32 space, bytes32 prev, bytes calldata ct)
        external
        returns (bytes32 digest, uint64 seq)
    {
        if (!canWrite(owner, msg.sender)) revert NotAuthorized();
        if (ct.length == 0) revert EmptyCiphertext();
        Head storage h = head[owner][space];
        bytes32 current = h.digest;
        if (prev != current) revert StaleHead(current, prev);
        uint64 prevBlock = h.blockNumber;
        digest = keccak256(ct);
        seq = h.seq + 1;
        h.digest = digest;
        h.seq = seq;
        h.blockNumber = uint64(block.number);
        emit Epoch(owner, space, msg.sender, seq, prev, digest, prevBlock);
    }

    /// @notice The caller (an owner) lets `key` push for it until `expiry`; 0 revokes.
    /// @dev Moves authNonce even though no signature is checked: an owner acting on its keys
    /// must also kill any authorization it signed earlier and a machine may be holding back.
    function setSessionKey(address key, uint64 expiry) external {
        _setSessionKey(msg.sender, key, expiry);
        authNonce[msg.sender] += 1;
    }

    /// @notice The caller (an owner) ends `key`'s right to push, effective in this block.
    /// @dev Moves authNonce for the same reason as setSessionKey: a revoked machine must not
    /// re-arm itself with a withheld signature.
    function revokeSessionKey(address key) external {
        _setSessionKey(msg.sender, key, 0);
        authNonce[msg.sender] += 1;
    }

    /// @notice Set `key`'s expiry with the owner's EIP-712 signature, so a cold owner wallet
    /// signs offline and the session key itself sends (and pays for) the transaction.
    /// @dev The nonce is read from storage, never passed, so a signature works exactly once.
    /// The deadline is checked first: a stale authorization is refused for what it is.
    function setSessionKeyBySig(address owner, address key, uint64 expiry, uint256 deadline, bytes calldata signature)
        external
    {
        if (block.timestamp > deadline) revert AuthorizationExpired();
        uint256 nonce = authNonce[owner];
        bytes32 digest = authorizationDigest(owner, key, expiry, nonce, deadline);
        if (!_signedBy(owner, digest, signature)) revert BadSignature();
        authNonce[owner] = nonce + 1;
        _setSessionKey(owner, key, expiry);
    }

    /// @notice Record where a reader should start walking the caller's chain in `space`.
    /// @dev Monotone non-decreasing (the same value again is fine): a hint that could move
    /// back would let an old history be vouched for again after the owner gave up on it.
    function setStartSeq(bytes32 space, uint64 seq) external {
        if (seq < startSeq[msg.sender][space]) revert SeqNotMonotone();
        startSeq[msg.sender][space] = seq;
        emit StartSeqSet(msg.sender, space, seq);
    }

    /// @notice True when `writer` may push for `owner`: the owner itself, or a session key
    /// whose expiry is still strictly ahead (a key stops in the second its expiry is reached).
    function canWrite(address owner, address writer) public view returns (bool) {
        return writer == owner || sessionKeyExpiry[owner][writer] > block.timestamp;
    }

    /// @notice The EIP-712 domain separator for this chain and this deployment.
    function DOMAIN_SEPARATOR() public view returns (bytes32) {
        return keccak256(abi.encode(DOMAIN_TYPEHASH, NAME_HASH, VERSION_HASH, block.chainid, address(this)));
    }

    /// @notice The exact digest an owner signs to authorize `key`, so a client never has to
    /// rebuild the domain by hand (and never gets it subtly wrong).
    function authorizationDigest(address owner, address key, uint64 expiry, uint256 nonce, uint256 deadline)
        public
        view
        returns (bytes32)
    {
        bytes32 structHash = keccak256(abi.encode(AUTHORIZATION_TYPEHASH, owner, key, expiry, nonce, deadline));
        return keccak256(abi.encodePacked("\x19\x01", DOMAIN_SEPARATOR(), structHash));
    }

    function _setSessionKey(address owner, address key, uint64 expiry) private {
        sessionKeyExpiry[owner][key] = expiry;
        emit SessionKeySet(owner, key, expiry);
    }

    /// @dev An owner with code is a smart account: it alone can say what its signature is
    /// (ERC-1271), and anything but the magic value, including a revert, is a refusal. An owner
    /// without code (an EOA, or an account not deployed yet) must have signed with its key:
    /// exactly 65 bytes r || s || v, v in {0, 1, 27, 28}, low s, recovering to the owner and
    /// never to the zero address ecrecover returns on failure.
    function _signedBy(address owner, bytes32 digest, bytes calldata signature) private view returns (bool) {
        if (owner.code.length > 0) {
            try IERC1271(owner).isValidSignature(digest, signature) returns (bytes4 magic) {
                return magic == ERC1271_MAGIC;
            } catch {
                return false;
            }
        }
        if (signature.length != 65) return false;
        bytes32 r;
        bytes32 s;
        uint8 v;
        assembly {
            r := calldataload(signature.offset)
            s := calldataload(add(signature.offset, 32))
            v := byte(0, calldataload(add(signature.offset, 64)))
        }
        if (v < 2) v += 27;
        if (v != 27 && v != 28) return false;
        if (uint256(s) > HALF_ORDER) return false;
        address signer = ecrecover(digest, v, r, s);
        return signer != address(0) && signer == owner;
    }
}
