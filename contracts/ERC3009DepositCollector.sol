// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

// Deposit collector of the x402 `batch-settlement` scheme for tokens with ERC-3009 `receiveWithAuthorization` (USDC):
// our own implementation, placed on local chains at the canonical address. The payer signs a
// `ReceiveWithAuthorization` to this contract whose nonce is `keccak256(abi.encode(channelId, salt))`, which binds the
// authorization to one channel; only the batch settlement contract may call `collect`, and the funds go straight on
// to it.
//
// `data` = `abi.encode(uint256 validAfter, uint256 validBefore, uint256 salt, bytes signature)`, as `@x402/evm` builds it.

interface IERC3009Receive {
    function receiveWithAuthorization(
        address from,
        address to,
        uint256 value,
        uint256 validAfter,
        uint256 validBefore,
        bytes32 nonce,
        bytes calldata signature
    ) external;
    function transfer(address to, uint256 value) external returns (bool);
}

contract ERC3009DepositCollector {
    address public constant BATCH_SETTLEMENT = 0x4020074e9dF2ce1deE5A9C1b5c3f541D02a10003;

    error OnlyBatchSettlement();
    error TransferFailed();

    function collect(address payer, address token, uint256 amount, bytes32 channelId, bytes calldata data) external {
        if (msg.sender != BATCH_SETTLEMENT) revert OnlyBatchSettlement();
        (uint256 validAfter, uint256 validBefore, uint256 salt, bytes memory signature) =
            abi.decode(data, (uint256, uint256, uint256, bytes));
        bytes32 nonce = keccak256(abi.encode(channelId, salt));
        IERC3009Receive(token).receiveWithAuthorization(
            payer, address(this), amount, validAfter, validBefore, nonce, signature
        );
        (bool ok, bytes memory result) = token.call(abi.encodeCall(IERC3009Receive.transfer, (msg.sender, amount)));
        if (!ok || (result.length > 0 && !abi.decode(result, (bool)))) revert TransferFailed();
    }
}
