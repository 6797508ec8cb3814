// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

// The part of Multicall3 that `@x402/evm`'s facilitators use to read channel, allowance and balance state in one call
// (`tryAggregate`), and viem's `multicall` (`aggregate3`): our own implementation, placed on local chains at the
// canonical Multicall3 address (anvil has none). Each call runs as a plain `call` from this contract.

contract Multicall3 {
    struct Call {
        address target;
        bytes callData;
    }

    struct Call3 {
        address target;
        bool allowFailure;
        bytes callData;
    }

    struct Result {
        bool success;
        bytes returnData;
    }

    /// Runs every call; with `requireSuccess` any failure reverts the whole batch.
    function tryAggregate(bool requireSuccess, Call[] calldata calls) external payable returns (Result[] memory returnData) {
        returnData = new Result[](calls.length);
        for (uint256 i = 0; i < calls.length; i++) {
            (bool success, bytes memory data) = calls[i].target.call(calls[i].callData);
            if (requireSuccess && !success) revert("Multicall3: call failed");
            returnData[i] = Result(success, data);
        }
    }

    /// Runs every call; a failing call reverts the batch unless it allows failure.
    function aggregate3(Call3[] calldata calls) external payable returns (Result[] memory returnData) {
        returnData = new Result[](calls.length);
        for (uint256 i = 0; i < calls.length; i++) {
            (bool success, bytes memory data) = calls[i].target.call(calls[i].callData);
            if (!success && !calls[i].allowFailure) revert("Multicall3: call failed");
            returnData[i] = Result(success, data);
        }
    }
}
