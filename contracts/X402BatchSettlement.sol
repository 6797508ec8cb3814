// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

// Payment channels of the x402 `batch-settlement` scheme: our own implementation of the published interface (the ABI
// `@x402/evm` exports as `batchSettlementABI`, the EIP-712 types of the scheme spec), placed on local chains at the
// canonical address. No constructor and no immutables: the code works wherever it is placed by `anvil_setCode`, and
// the EIP-712 domain is computed from `block.chainid` and `address(this)` at every use.
//
// Accounting per channel: `balance` (deposits minus withdrawals and refunds) and `totalClaimed` (cumulative, only
// grows). Unclaimed escrow is `balance - totalClaimed`. Per receiver and token: `totalClaimed` and `totalSettled`;
// `settle` pays the difference to the receiver.

interface IBatchToken {
    function balanceOf(address account) external view returns (uint256);
    function transfer(address to, uint256 value) external returns (bool);
}

interface IDepositCollector {
    /// Moves exactly `amount` of `token` from `payer` to the caller (the batch settlement contract).
    function collect(address payer, address token, uint256 amount, bytes32 channelId, bytes calldata data) external;
}

interface IERC1271Wallet {
    function isValidSignature(bytes32 digest, bytes calldata signature) external view returns (bytes4);
}

contract x402BatchSettlement {
    struct ChannelConfig {
        address payer;
        address payerAuthorizer;
        address receiver;
        address receiverAuthorizer;
        address token;
        uint40 withdrawDelay;
        bytes32 salt;
    }

    struct Voucher {
        ChannelConfig channel;
        uint128 maxClaimableAmount;
    }

    struct VoucherClaim {
        Voucher voucher;
        bytes signature;
        uint128 totalClaimed;
    }

    struct ChannelState {
        uint128 balance;
        uint128 totalClaimed;
    }

    struct PendingWithdrawal {
        uint128 amount;
        uint40 initiatedAt;
    }

    struct ReceiverState {
        uint128 totalClaimed;
        uint128 totalSettled;
    }

    bytes32 public constant CHANNEL_CONFIG_TYPEHASH = keccak256(
        "ChannelConfig(address payer,address payerAuthorizer,address receiver,address receiverAuthorizer,address token,uint40 withdrawDelay,bytes32 salt)"
    );
    bytes32 private constant VOUCHER_TYPEHASH = keccak256("Voucher(bytes32 channelId,uint128 maxClaimableAmount)");
    bytes32 private constant REFUND_TYPEHASH = keccak256("Refund(bytes32 channelId,uint256 nonce,uint128 amount)");
    bytes32 private constant CLAIM_ENTRY_TYPEHASH =
        keccak256("ClaimEntry(bytes32 channelId,uint128 maxClaimableAmount,uint128 totalClaimed)");
    bytes32 private constant CLAIM_BATCH_TYPEHASH = keccak256(
        "ClaimBatch(ClaimEntry[] claims)ClaimEntry(bytes32 channelId,uint128 maxClaimableAmount,uint128 totalClaimed)"
    );
    bytes32 private constant DOMAIN_TYPEHASH =
        keccak256("EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)");
    bytes32 private constant HASHED_NAME = keccak256("x402 Batch Settlement");
    bytes32 private constant HASHED_VERSION = keccak256("1");
    uint40 public constant MIN_WITHDRAW_DELAY = 900;
    uint40 public constant MAX_WITHDRAW_DELAY = 2_592_000;
    uint256 private constant SECP256K1N_HALF = 0x7FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFF5D576E7357A4501DDFE92F46681B20A0;

    mapping(bytes32 channelId => ChannelState) public channels;
    mapping(bytes32 channelId => PendingWithdrawal) public pendingWithdrawals;
    mapping(address receiver => mapping(address token => ReceiverState)) public receivers;
    mapping(bytes32 channelId => uint256) public refundNonce;

    bool private transient locked;

    event ChannelCreated(bytes32 indexed channelId, ChannelConfig config);
    event ChannelClosed(bytes32 indexed channelId, ChannelConfig config);
    event Deposited(bytes32 indexed channelId, address indexed sender, uint128 amount, uint128 balance);
    event Claimed(bytes32 indexed channelId, address indexed receiver, uint128 amount, uint128 totalClaimed);
    event Settled(address indexed receiver, address indexed token, address indexed sender, uint128 amount);
    event Refunded(bytes32 indexed channelId, address indexed payer, uint128 amount, uint256 nonce);
    event WithdrawInitiated(bytes32 indexed channelId, uint128 amount, uint40 initiatedAt);
    event WithdrawFinalized(bytes32 indexed channelId, address indexed payer, uint128 amount);

    error ReentrancyGuardReentrantCall();
    error InvalidConfig();
    error InvalidAmount();
    error DepositNotReceived(uint256 expected, uint256 received);
    error InvalidVoucherSignature(bytes32 channelId);
    error InvalidAuthorizerSignature();
    error ClaimAboveVoucher(bytes32 channelId);
    error ClaimBelowClaimed(bytes32 channelId);
    error ClaimExceedsBalance(bytes32 channelId);
    error MixedReceiverAuthorizers();
    error Unauthorized();
    error InvalidRefundNonce(uint256 expected);
    error WithdrawAboveEscrow(uint128 available);
    error NoPendingWithdrawal();
    error WithdrawDelayNotElapsed(uint256 readyAt);
    error TransferFailed();

    modifier nonReentrant() {
        if (locked) revert ReentrancyGuardReentrantCall();
        locked = true;
        _;
        locked = false;
    }

    // ---- deposits -------------------------------------------------------------------------------------------------

    /// Credits `amount` to the channel of `config`, pulled from the payer by `collector`. The channel is created by
    /// its first deposit (and again after it was drained).
    function deposit(ChannelConfig calldata config, uint128 amount, address collector, bytes calldata collectorData)
        external
        nonReentrant
    {
        if (amount == 0) revert InvalidAmount();
        _checkConfig(config);
        bytes32 channelId = getChannelId(config);
        uint256 before = IBatchToken(config.token).balanceOf(address(this));
        IDepositCollector(collector).collect(config.payer, config.token, amount, channelId, collectorData);
        uint256 received = IBatchToken(config.token).balanceOf(address(this)) - before;
        if (received != amount) revert DepositNotReceived(amount, received);
        ChannelState storage channel = channels[channelId];
        if (channel.balance == 0 && channel.totalClaimed == 0) emit ChannelCreated(channelId, config);
        channel.balance += amount;
        emit Deposited(channelId, msg.sender, amount, channel.balance);
    }

    // ---- claims and settles ---------------------------------------------------------------------------------------

    /// Claims vouchers; the caller must be the receiver or the receiver authorizer of every row.
    function claim(VoucherClaim[] calldata voucherClaims) external nonReentrant {
        for (uint256 i = 0; i < voucherClaims.length; i++) {
            ChannelConfig calldata config = voucherClaims[i].voucher.channel;
            if (msg.sender != config.receiver && msg.sender != config.receiverAuthorizer) revert Unauthorized();
            _claim(voucherClaims[i]);
        }
    }

    /// Claims vouchers on the EIP-712 `ClaimBatch` signature of their (one, shared) receiver authorizer; anyone relays.
    function claimWithSignature(VoucherClaim[] calldata voucherClaims, bytes calldata authorizerSignature)
        external
        nonReentrant
    {
        if (voucherClaims.length == 0) return;
        address authorizer = voucherClaims[0].voucher.channel.receiverAuthorizer;
        for (uint256 i = 1; i < voucherClaims.length; i++) {
            if (voucherClaims[i].voucher.channel.receiverAuthorizer != authorizer) revert MixedReceiverAuthorizers();
        }
        if (!_validSignature(authorizer, getClaimBatchDigest(voucherClaims), authorizerSignature, true)) {
            revert InvalidAuthorizerSignature();
        }
        for (uint256 i = 0; i < voucherClaims.length; i++) {
            _claim(voucherClaims[i]);
        }
    }

    /// Pays everything claimed and not yet settled for `receiver` in `token` to `receiver`. Permissionless.
    function settle(address receiver, address token) external nonReentrant {
        ReceiverState storage state = receivers[receiver][token];
        uint128 amount = state.totalClaimed - state.totalSettled;
        if (amount == 0) return;
        state.totalSettled = state.totalClaimed;
        _transfer(token, receiver, amount);
        emit Settled(receiver, token, msg.sender, amount);
    }

    // ---- refunds and withdrawals ----------------------------------------------------------------------------------

    /// Cooperative refund by the receiver or its authorizer, capped at the unclaimed escrow.
    function refund(ChannelConfig calldata config, uint128 amount) external nonReentrant {
        if (msg.sender != config.receiver && msg.sender != config.receiverAuthorizer) revert Unauthorized();
        _refund(config, getChannelId(config), amount);
    }

    /// Cooperative refund on the receiver authorizer's EIP-712 `Refund` signature for the channel's current nonce.
    function refundWithSignature(
        ChannelConfig calldata config,
        uint128 amount,
        uint256 nonce,
        bytes calldata receiverAuthorizerSignature
    ) external nonReentrant {
        bytes32 channelId = getChannelId(config);
        if (nonce != refundNonce[channelId]) revert InvalidRefundNonce(refundNonce[channelId]);
        bytes32 digest = getRefundDigest(channelId, nonce, amount);
        if (!_validSignature(config.receiverAuthorizer, digest, receiverAuthorizerSignature, true)) {
            revert InvalidAuthorizerSignature();
        }
        _refund(config, channelId, amount);
    }

    /// Starts the payer's timed withdrawal of at most the unclaimed escrow; a new call replaces (and restarts) it.
    function initiateWithdraw(ChannelConfig calldata config, uint128 amount) external nonReentrant {
        _onlyPayer(config);
        bytes32 channelId = getChannelId(config);
        ChannelState storage channel = channels[channelId];
        uint128 available = channel.balance - channel.totalClaimed;
        if (amount == 0) revert InvalidAmount();
        if (amount > available) revert WithdrawAboveEscrow(available);
        pendingWithdrawals[channelId] = PendingWithdrawal(amount, uint40(block.timestamp));
        emit WithdrawInitiated(channelId, amount, uint40(block.timestamp));
    }

    /// Completes a timed withdrawal once `withdrawDelay` has passed, capped at the unclaimed escrow left by then.
    function finalizeWithdraw(ChannelConfig calldata config) external nonReentrant {
        _onlyPayer(config);
        bytes32 channelId = getChannelId(config);
        PendingWithdrawal memory pending = pendingWithdrawals[channelId];
        if (pending.initiatedAt == 0) revert NoPendingWithdrawal();
        uint256 readyAt = uint256(pending.initiatedAt) + config.withdrawDelay;
        if (block.timestamp < readyAt) revert WithdrawDelayNotElapsed(readyAt);
        delete pendingWithdrawals[channelId];
        ChannelState storage channel = channels[channelId];
        uint128 available = channel.balance - channel.totalClaimed;
        uint128 amount = pending.amount < available ? pending.amount : available;
        channel.balance -= amount;
        if (amount > 0) _transfer(config.token, config.payer, amount);
        emit WithdrawFinalized(channelId, config.payer, amount);
        _closeIfDrained(channelId, config, amount);
    }

    // ---- batching and views ---------------------------------------------------------------------------------------

    /// Runs several calls to this contract in one transaction (each as if called directly); any failure reverts all.
    function multicall(bytes[] calldata data) external returns (bytes[] memory results) {
        results = new bytes[](data.length);
        for (uint256 i = 0; i < data.length; i++) {
            (bool ok, bytes memory result) = address(this).delegatecall(data[i]);
            if (!ok) {
                assembly {
                    revert(add(result, 32), mload(result))
                }
            }
            results[i] = result;
        }
    }

    function getChannelId(ChannelConfig calldata config) public view returns (bytes32) {
        return _typedDigest(keccak256(abi.encode(CHANNEL_CONFIG_TYPEHASH, config)));
    }

    function getVoucherDigest(bytes32 channelId, uint128 maxClaimableAmount) public view returns (bytes32) {
        return _typedDigest(keccak256(abi.encode(VOUCHER_TYPEHASH, channelId, maxClaimableAmount)));
    }

    function getRefundDigest(bytes32 channelId, uint256 nonce, uint128 amount) public view returns (bytes32) {
        return _typedDigest(keccak256(abi.encode(REFUND_TYPEHASH, channelId, nonce, amount)));
    }

    function getClaimBatchDigest(VoucherClaim[] calldata voucherClaims) public view returns (bytes32) {
        bytes32[] memory entries = new bytes32[](voucherClaims.length);
        for (uint256 i = 0; i < voucherClaims.length; i++) {
            VoucherClaim calldata c = voucherClaims[i];
            entries[i] = keccak256(
                abi.encode(
                    CLAIM_ENTRY_TYPEHASH, getChannelId(c.voucher.channel), c.voucher.maxClaimableAmount, c.totalClaimed
                )
            );
        }
        return _typedDigest(keccak256(abi.encode(CLAIM_BATCH_TYPEHASH, keccak256(abi.encodePacked(entries)))));
    }

    // ---- internals ------------------------------------------------------------------------------------------------

    /// One voucher row: the payer's signature over the ceiling, then `totalClaimed` may only grow, up to the ceiling
    /// and the channel's balance. A row that does not raise `totalClaimed` changes nothing (a replay is harmless).
    function _claim(VoucherClaim calldata c) private {
        ChannelConfig calldata config = c.voucher.channel;
        bytes32 channelId = getChannelId(config);
        ChannelState storage channel = channels[channelId];
        if (c.totalClaimed > c.voucher.maxClaimableAmount) revert ClaimAboveVoucher(channelId);
        if (c.totalClaimed < channel.totalClaimed) revert ClaimBelowClaimed(channelId);
        if (c.totalClaimed > channel.balance) revert ClaimExceedsBalance(channelId);
        if (c.totalClaimed == channel.totalClaimed) return;
        bytes32 digest = getVoucherDigest(channelId, c.voucher.maxClaimableAmount);
        bool ok = config.payerAuthorizer != address(0)
            ? _validSignature(config.payerAuthorizer, digest, c.signature, false)
            : _validSignature(config.payer, digest, c.signature, true);
        if (!ok) revert InvalidVoucherSignature(channelId);
        uint128 delta = c.totalClaimed - channel.totalClaimed;
        channel.totalClaimed = c.totalClaimed;
        receivers[config.receiver][config.token].totalClaimed += delta;
        emit Claimed(channelId, config.receiver, delta, c.totalClaimed);
    }

    /// The nonce advances first, whatever moves; a pending withdrawal shrinks by the refund (cancelled when covered).
    function _refund(ChannelConfig calldata config, bytes32 channelId, uint128 requested) private {
        uint256 nonce = refundNonce[channelId]++;
        ChannelState storage channel = channels[channelId];
        uint128 available = channel.balance - channel.totalClaimed;
        uint128 amount = requested < available ? requested : available;
        if (amount == 0) return;
        channel.balance -= amount;
        PendingWithdrawal storage pending = pendingWithdrawals[channelId];
        if (pending.initiatedAt != 0) {
            if (amount >= pending.amount) delete pendingWithdrawals[channelId];
            else pending.amount -= amount;
        }
        _transfer(config.token, config.payer, amount);
        emit Refunded(channelId, config.payer, amount, nonce);
        _closeIfDrained(channelId, config, amount);
    }

    function _closeIfDrained(bytes32 channelId, ChannelConfig calldata config, uint128 moved) private {
        ChannelState storage channel = channels[channelId];
        if (moved > 0 && channel.balance == 0 && channel.totalClaimed == 0) emit ChannelClosed(channelId, config);
    }

    function _onlyPayer(ChannelConfig calldata config) private view {
        if (msg.sender != config.payer && (config.payerAuthorizer == address(0) || msg.sender != config.payerAuthorizer)) {
            revert Unauthorized();
        }
    }

    function _checkConfig(ChannelConfig calldata config) private pure {
        if (
            config.payer == address(0) || config.receiver == address(0) || config.receiverAuthorizer == address(0)
                || config.token == address(0) || config.withdrawDelay < MIN_WITHDRAW_DELAY
                || config.withdrawDelay > MAX_WITHDRAW_DELAY
        ) revert InvalidConfig();
    }

    function _typedDigest(bytes32 structHash) private view returns (bytes32) {
        bytes32 domain =
            keccak256(abi.encode(DOMAIN_TYPEHASH, HASHED_NAME, HASHED_VERSION, block.chainid, address(this)));
        return keccak256(abi.encodePacked("\x19\x01", domain, structHash));
    }

    /// ECDSA (65 bytes, low s) against `signer`; when that fails and `allowContract`, EIP-1271 on a signer with code.
    function _validSignature(address signer, bytes32 digest, bytes calldata signature, bool allowContract)
        private
        view
        returns (bool)
    {
        if (signer == address(0)) return false;
        if (signature.length == 65) {
            bytes32 r = bytes32(signature[0:32]);
            bytes32 s = bytes32(signature[32:64]);
            uint8 v = uint8(signature[64]);
            if (uint256(s) <= SECP256K1N_HALF && (v == 27 || v == 28) && ecrecover(digest, v, r, s) == signer) {
                return true;
            }
        }
        if (!allowContract || signer.code.length == 0) return false;
        (bool ok, bytes memory result) =
            signer.staticcall(abi.encodeCall(IERC1271Wallet.isValidSignature, (digest, signature)));
        return ok && result.length >= 32 && abi.decode(result, (bytes4)) == IERC1271Wallet.isValidSignature.selector;
    }

    function _transfer(address token, address to, uint256 amount) private {
        (bool ok, bytes memory result) = token.call(abi.encodeCall(IBatchToken.transfer, (to, amount)));
        if (!ok || (result.length > 0 && !abi.decode(result, (bool)))) revert TransferFailed();
    }
}
