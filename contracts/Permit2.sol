// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

// The part of Permit2's signature transfers that the x402 `upto` proxy and the `batch-settlement` Permit2 deposit
// collector use: our own implementation, placed on local chains at the canonical Permit2 address. The owner approves
// this contract on the token once, then signs EIP-712 `PermitWitnessTransferFrom` messages (domain `Permit2`, no
// version, chain id and this address) naming a spender, a maximum, an unordered nonce, a deadline and a witness.
// Not here: allowance transfers, batch permits, and `permitTransferFrom` without a witness.

interface IPermit2Token {
    function transferFrom(address from, address to, uint256 value) external returns (bool);
}

interface IPermit2ERC1271 {
    function isValidSignature(bytes32 digest, bytes calldata signature) external view returns (bytes4);
}

contract Permit2 {
    struct TokenPermissions {
        address token;
        uint256 amount;
    }

    struct PermitTransferFrom {
        TokenPermissions permitted;
        uint256 nonce;
        uint256 deadline;
    }

    struct SignatureTransferDetails {
        address to;
        uint256 requestedAmount;
    }

    bytes32 private constant DOMAIN_TYPEHASH =
        keccak256("EIP712Domain(string name,uint256 chainId,address verifyingContract)");
    bytes32 private constant HASHED_NAME = keccak256("Permit2");
    bytes32 private constant TOKEN_PERMISSIONS_TYPEHASH = keccak256("TokenPermissions(address token,uint256 amount)");
    string private constant PERMIT_WITNESS_STUB =
        "PermitWitnessTransferFrom(TokenPermissions permitted,address spender,uint256 nonce,uint256 deadline,";

    /// Unordered nonces: bit `nonce & 0xff` of word `nonce >> 8`, set once used (or invalidated).
    mapping(address owner => mapping(uint256 wordPosition => uint256 bitmap)) public nonceBitmap;

    event UnorderedNonceInvalidation(address indexed owner, uint256 word, uint256 mask);

    error SignatureExpired(uint256 signatureDeadline);
    error InvalidAmount(uint256 maxAmount);
    error InvalidNonce();
    error InvalidSignature();
    error InvalidSigner();
    error TransferFailed();

    function DOMAIN_SEPARATOR() public view returns (bytes32) {
        return keccak256(abi.encode(DOMAIN_TYPEHASH, HASHED_NAME, block.chainid, address(this)));
    }

    /// Moves `transferDetails.requestedAmount` (at most the permitted amount) of the token from `owner` to
    /// `transferDetails.to`, on the owner's signature over the permit, the caller as spender and the witness.
    function permitWitnessTransferFrom(
        PermitTransferFrom calldata permit,
        SignatureTransferDetails calldata transferDetails,
        address owner,
        bytes32 witness,
        string calldata witnessTypeString,
        bytes calldata signature
    ) external {
        if (block.timestamp > permit.deadline) revert SignatureExpired(permit.deadline);
        if (transferDetails.requestedAmount > permit.permitted.amount) revert InvalidAmount(permit.permitted.amount);
        _useUnorderedNonce(owner, permit.nonce);
        bytes32 typeHash = keccak256(abi.encodePacked(PERMIT_WITNESS_STUB, witnessTypeString));
        bytes32 permissionsHash =
            keccak256(abi.encode(TOKEN_PERMISSIONS_TYPEHASH, permit.permitted.token, permit.permitted.amount));
        bytes32 structHash =
            keccak256(abi.encode(typeHash, permissionsHash, msg.sender, permit.nonce, permit.deadline, witness));
        _verify(owner, keccak256(abi.encodePacked("\x19\x01", DOMAIN_SEPARATOR(), structHash)), signature);
        (bool ok, bytes memory result) = permit.permitted.token.call(
            abi.encodeCall(IPermit2Token.transferFrom, (owner, transferDetails.to, transferDetails.requestedAmount))
        );
        if (!ok || (result.length > 0 && !abi.decode(result, (bool)))) revert TransferFailed();
    }

    /// Marks the nonces of `mask` in word `wordPos` as used, so signatures over them can no longer be spent.
    function invalidateUnorderedNonces(uint256 wordPos, uint256 mask) external {
        nonceBitmap[msg.sender][wordPos] |= mask;
        emit UnorderedNonceInvalidation(msg.sender, wordPos, mask);
    }

    function _useUnorderedNonce(address owner, uint256 nonce) private {
        uint256 bit = 1 << (nonce & 0xff);
        uint256 flipped = nonceBitmap[owner][nonce >> 8] ^= bit;
        if (flipped & bit == 0) revert InvalidNonce();
    }

    /// An owner without code signs with ECDSA (65 bytes, or 64-byte EIP-2098); an owner with code answers EIP-1271.
    function _verify(address owner, bytes32 digest, bytes calldata signature) private view {
        if (owner.code.length > 0) {
            (bool ok, bytes memory result) =
                owner.staticcall(abi.encodeCall(IPermit2ERC1271.isValidSignature, (digest, signature)));
            if (!ok || result.length < 32 || abi.decode(result, (bytes4)) != IPermit2ERC1271.isValidSignature.selector) {
                revert InvalidSigner();
            }
            return;
        }
        bytes32 r;
        bytes32 s;
        uint8 v;
        if (signature.length == 65) {
            r = bytes32(signature[0:32]);
            s = bytes32(signature[32:64]);
            v = uint8(signature[64]);
        } else if (signature.length == 64) {
            r = bytes32(signature[0:32]);
            bytes32 vs = bytes32(signature[32:64]);
            s = vs & bytes32(0x7fffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff);
            v = uint8(uint256(vs >> 255)) + 27;
        } else {
            revert InvalidSignature();
        }
        address signer = ecrecover(digest, v, r, s);
        if (signer == address(0)) revert InvalidSignature();
        if (signer != owner) revert InvalidSigner();
    }
}
