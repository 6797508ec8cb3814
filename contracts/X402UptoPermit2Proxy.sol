// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

// The x402 `upto` scheme's Permit2 proxy: our own implementation of the interface `@x402/evm` exports as
// `x402UptoPermit2ProxyABI`, placed on local chains at the canonical address. The payer signs a Permit2
// `PermitWitnessTransferFrom` for a maximum with this contract as spender and the witness
// `Witness(address to,address facilitator,uint256 validAfter)`; the named facilitator then settles any amount up to
// that maximum, once (Permit2's nonce), to `witness.to` only. No constructor and no immutables.

interface IUptoSignatureTransfer {
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

    function permitWitnessTransferFrom(
        PermitTransferFrom calldata permit,
        SignatureTransferDetails calldata transferDetails,
        address owner,
        bytes32 witness,
        string calldata witnessTypeString,
        bytes calldata signature
    ) external;
}

interface IUptoERC2612 {
    function permit(address owner, address spender, uint256 value, uint256 deadline, uint8 v, bytes32 r, bytes32 s)
        external;
}

contract x402UptoPermit2Proxy {
    struct Witness {
        address to;
        address facilitator;
        uint256 validAfter;
    }

    struct EIP2612Permit {
        uint256 value;
        uint256 deadline;
        bytes32 r;
        bytes32 s;
        uint8 v;
    }

    IUptoSignatureTransfer public constant PERMIT2 = IUptoSignatureTransfer(0x000000000022D473030F116dDEE9F6B43aC78BA3);
    bytes32 public constant WITNESS_TYPEHASH = keccak256("Witness(address to,address facilitator,uint256 validAfter)");
    string public constant WITNESS_TYPE_STRING =
        "Witness witness)TokenPermissions(address token,uint256 amount)Witness(address to,address facilitator,uint256 validAfter)";

    bool private transient locked;

    event Settled();
    event SettledWithPermit();

    error AmountExceedsPermitted();
    error InvalidDestination();
    error InvalidOwner();
    error InvalidPermit2Address();
    error PaymentTooEarly();
    error Permit2612AmountMismatch();
    error ReentrancyGuardReentrantCall();
    error UnauthorizedFacilitator();

    modifier nonReentrant() {
        if (locked) revert ReentrancyGuardReentrantCall();
        locked = true;
        _;
        locked = false;
    }

    /// Transfers `amount` (at most `permit.permitted.amount`) from `owner` to `witness.to`; callable only by
    /// `witness.facilitator`, not before `witness.validAfter`.
    function settle(
        IUptoSignatureTransfer.PermitTransferFrom calldata permit,
        uint256 amount,
        address owner,
        Witness calldata witness,
        bytes calldata signature
    ) external nonReentrant {
        _settle(permit, amount, owner, witness, signature);
        emit Settled();
    }

    /// As `settle`, after offering the token's EIP-2612 `permit` for Permit2 (ignored when it fails: the allowance
    /// may already be in place); the EIP-2612 value must equal the Permit2 maximum.
    function settleWithPermit(
        EIP2612Permit calldata permit2612,
        IUptoSignatureTransfer.PermitTransferFrom calldata permit,
        uint256 amount,
        address owner,
        Witness calldata witness,
        bytes calldata signature
    ) external nonReentrant {
        if (permit2612.value != permit.permitted.amount) revert Permit2612AmountMismatch();
        try IUptoERC2612(permit.permitted.token).permit(
            owner, address(PERMIT2), permit2612.value, permit2612.deadline, permit2612.v, permit2612.r, permit2612.s
        ) {} catch {}
        _settle(permit, amount, owner, witness, signature);
        emit SettledWithPermit();
    }

    function _settle(
        IUptoSignatureTransfer.PermitTransferFrom calldata permit,
        uint256 amount,
        address owner,
        Witness calldata witness,
        bytes calldata signature
    ) private {
        if (owner == address(0)) revert InvalidOwner();
        if (witness.to == address(0)) revert InvalidDestination();
        if (msg.sender != witness.facilitator) revert UnauthorizedFacilitator();
        if (block.timestamp < witness.validAfter) revert PaymentTooEarly();
        if (amount > permit.permitted.amount) revert AmountExceedsPermitted();
        PERMIT2.permitWitnessTransferFrom(
            permit,
            IUptoSignatureTransfer.SignatureTransferDetails(witness.to, amount),
            owner,
            keccak256(abi.encode(WITNESS_TYPEHASH, witness.to, witness.facilitator, witness.validAfter)),
            WITNESS_TYPE_STRING,
            signature
        );
    }
}
