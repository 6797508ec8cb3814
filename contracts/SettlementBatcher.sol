// SPDX-License-Identifier: MIT
pragma solidity ^0.8.20;

/// @notice The EIP-3009 entry point the batcher calls (USDC / FiatToken v2.2 and our TestUSDC).
interface IERC3009 {
    function transferWithAuthorization(
        address from,
        address to,
        uint256 value,
        uint256 validAfter,
        uint256 validBefore,
        bytes32 nonce,
        uint8 v,
        bytes32 r,
        bytes32 s
    ) external;
}

/// @title SettlementBatcher
/// @notice Settles many EIP-3009 payments in one transaction. Each authorization is tried on its own (try/catch, with
///         a bounded amount of gas), so one that fails (already used, expired, a bad signature, funds gone) never
///         reverts the others, and each outcome is reported as an event. It holds no funds and no state: anyone may
///         call it, as anyone may call `transferWithAuthorization` itself; the signatures decide where money goes.
contract SettlementBatcher {
    struct Authorization {
        address from;
        address to;
        uint256 value;
        uint256 validAfter;
        uint256 validBefore;
        bytes32 nonce;
        uint8 v;
        bytes32 r;
        bytes32 s;
    }

    /// @notice Gas forwarded to each `transferWithAuthorization`: a token call that needs more fails that item only.
    uint256 public constant ITEM_GAS = 120_000;

    /// @dev What one item needs beyond the call itself (its event, the loop), with EIP-150's 1/64 held back.
    uint256 private constant ITEM_RESERVE = ITEM_GAS + ITEM_GAS / 63 + 10_000;

    /// @notice One per authorization, in order. `ok` is true when the token accepted it; an item that was not tried
    ///         because the transaction ran short of gas is reported as not ok (its authorization stays unused).
    event AuthorizationSettled(address indexed token, address indexed from, bytes32 indexed nonce, uint256 index, bool ok);

    /// @return settled how many of the authorizations the token accepted
    function settle(address token, Authorization[] calldata items) external returns (uint256 settled) {
        require(token.code.length > 0, "SettlementBatcher: token has no code");
        for (uint256 i = 0; i < items.length; i++) {
            Authorization calldata a = items[i];
            bool ok = false;
            if (gasleft() >= ITEM_RESERVE) {
                try IERC3009(token).transferWithAuthorization{gas: ITEM_GAS}(
                    a.from, a.to, a.value, a.validAfter, a.validBefore, a.nonce, a.v, a.r, a.s
                ) {
                    ok = true;
                    settled++;
                } catch {}
            }
            emit AuthorizationSettled(token, a.from, a.nonce, i, ok);
        }
    }
}
