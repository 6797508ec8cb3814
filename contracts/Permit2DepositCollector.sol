// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

// Deposit collector of the x402 `batch-settlement` scheme for any ERC-20 through Permit2: our own implementation,
// placed on local chains at the canonical address. The payer signs a Permit2 `PermitWitnessTransferFrom` with this
// contract as spender and the witness `DepositWitness(bytes32 channelId)`, which binds it to one channel; only the
// batch settlement contract may call `collect`, and Permit2 sends the funds straight to it.
//
// `data` = `abi.encode(uint256 nonce, uint256 deadline, bytes permit2Signature, bytes eip2612PermitData)`; a non-empty
// `eip2612PermitData` (`abi.encode(value, deadline, v, r, s)`) is first offered to the token's EIP-2612 `permit` for
// Permit2 (its failure is ignored: the allowance may already be there).

interface IPermit2WitnessTransfer {
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

interface IERC2612Permit {
    function permit(address owner, address spender, uint256 value, uint256 deadline, uint8 v, bytes32 r, bytes32 s)
        external;
}

contract Permit2DepositCollector {
    address public constant BATCH_SETTLEMENT = 0x4020074e9dF2ce1deE5A9C1b5c3f541D02a10003;
    address public constant PERMIT2 = 0x000000000022D473030F116dDEE9F6B43aC78BA3;
    bytes32 public constant WITNESS_TYPEHASH = keccak256("DepositWitness(bytes32 channelId)");
    string public constant WITNESS_TYPE_STRING =
        "DepositWitness witness)DepositWitness(bytes32 channelId)TokenPermissions(address token,uint256 amount)";

    error OnlyBatchSettlement();

    function collect(address payer, address token, uint256 amount, bytes32 channelId, bytes calldata data) external {
        if (msg.sender != BATCH_SETTLEMENT) revert OnlyBatchSettlement();
        (uint256 nonce, uint256 deadline, bytes memory signature, bytes memory eip2612) =
            abi.decode(data, (uint256, uint256, bytes, bytes));
        if (eip2612.length > 0) _offerEip2612Permit(token, payer, eip2612);
        IPermit2WitnessTransfer(PERMIT2).permitWitnessTransferFrom(
            IPermit2WitnessTransfer.PermitTransferFrom(IPermit2WitnessTransfer.TokenPermissions(token, amount), nonce, deadline),
            IPermit2WitnessTransfer.SignatureTransferDetails(msg.sender, amount),
            payer,
            keccak256(abi.encode(WITNESS_TYPEHASH, channelId)),
            WITNESS_TYPE_STRING,
            signature
        );
    }

    function _offerEip2612Permit(address token, address payer, bytes memory data) private {
        (uint256 value, uint256 deadline, uint8 v, bytes32 r, bytes32 s) =
            abi.decode(data, (uint256, uint256, uint8, bytes32, bytes32));
        try IERC2612Permit(token).permit(payer, PERMIT2, value, deadline, v, r, s) {} catch {}
    }
}
