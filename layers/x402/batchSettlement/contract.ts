// The calls we send to x402BatchSettlement and the logs we read back, as one typed ABI fragment (the full ABI is
// layers/devnet/channels/x402BatchSettlement.generated.ts): deposits (with the ERC-3009 deposit collector's data),
// claims, settles, refunds and the reads and logs the channel workers follow; the `Deposited` log's balance.
import { BATCH_SETTLEMENT_ADDRESS, ERC3009_DEPOSIT_COLLECTOR_ADDRESS } from "@x402/evm"
import { decodeEventLog, encodeAbiParameters, encodeFunctionData, getAddress, type Hex, parseAbi, parseErc6492Signature } from "viem"
import type { VerifiedDepositAuthorization } from "./deposit.js"
import type { ChannelConfig } from "./payloads.js"

export const batchSettlementAbi = parseAbi([
  "struct ChannelConfig { address payer; address payerAuthorizer; address receiver; address receiverAuthorizer; address token; uint40 withdrawDelay; bytes32 salt; }",
  "struct Voucher { ChannelConfig channel; uint128 maxClaimableAmount; }",
  "struct VoucherClaim { Voucher voucher; bytes signature; uint128 totalClaimed; }",
  "function deposit(ChannelConfig config, uint128 amount, address collector, bytes collectorData)",
  "function claimWithSignature(VoucherClaim[] voucherClaims, bytes authorizerSignature)",
  "function settle(address receiver, address token)",
  "function refundWithSignature(ChannelConfig config, uint128 amount, uint256 nonce, bytes receiverAuthorizerSignature)",
  "function multicall(bytes[] data) returns (bytes[] results)",
  "function channels(bytes32 channelId) view returns (uint128 balance, uint128 totalClaimed)",
  "function receivers(address receiver, address token) view returns (uint128 totalClaimed, uint128 totalSettled)",
  "function refundNonce(bytes32 channelId) view returns (uint256)",
  "event Deposited(bytes32 indexed channelId, address indexed sender, uint128 amount, uint128 balance)",
  "event Claimed(bytes32 indexed channelId, address indexed receiver, uint128 amount, uint128 totalClaimed)",
  "event Settled(address indexed receiver, address indexed token, address indexed sender, uint128 amount)",
  "event Refunded(bytes32 indexed channelId, address indexed payer, uint128 amount, uint256 nonce)",
  "event WithdrawInitiated(bytes32 indexed channelId, uint128 amount, uint40 initiatedAt)",
  "event WithdrawFinalized(bytes32 indexed channelId, address indexed payer, uint128 amount)",
  "error InvalidAmount()",
  "error InvalidConfig()",
  "error DepositNotReceived(uint256 expected, uint256 received)",
  "error InvalidVoucherSignature(bytes32 channelId)",
  "error ClaimAboveVoucher(bytes32 channelId)",
  "error ClaimBelowClaimed(bytes32 channelId)",
  "error ClaimExceedsBalance(bytes32 channelId)",
  "error InvalidAuthorizerSignature()",
  "error MixedReceiverAuthorizers()",
  "error Unauthorized()",
  "error InvalidRefundNonce(uint256 expected)",
  "error ReentrancyGuardReentrantCall()",
  "error TransferFailed()"
])

export const batchSettlementAddress = getAddress(BATCH_SETTLEMENT_ADDRESS)

/** The config as the contract's tuple (checksummed addresses). */
const contractConfig = (config: ChannelConfig) => ({
  payer: getAddress(config.payer),
  payerAuthorizer: getAddress(config.payerAuthorizer),
  receiver: getAddress(config.receiver),
  receiverAuthorizer: getAddress(config.receiverAuthorizer),
  token: getAddress(config.token),
  withdrawDelay: config.withdrawDelay,
  salt: config.salt
})

/**
 * What the ERC-3009 deposit collector decodes: `abi.encode(validAfter, validBefore, salt, signature)` (the signature
 * without an ERC-6492 wrapper, as @x402/evm's facilitator sends it).
 */
export const erc3009CollectorData = (auth: VerifiedDepositAuthorization): Hex =>
  encodeAbiParameters(
    [{ type: "uint256" }, { type: "uint256" }, { type: "uint256" }, { type: "bytes" }],
    [auth.validAfter, auth.validBefore, BigInt(auth.salt), parseErc6492Signature(auth.signature).signature]
  )

/** The calldata of a deposit through the ERC-3009 collector. */
export const depositCalldata = (config: ChannelConfig, auth: VerifiedDepositAuthorization): Hex =>
  encodeFunctionData({
    abi: batchSettlementAbi,
    functionName: "deposit",
    args: [contractConfig(config), auth.amount, getAddress(ERC3009_DEPOSIT_COLLECTOR_ADDRESS), erc3009CollectorData(auth)]
  })

/** The channel's balance right after a deposit, from its `Deposited` log in the receipt (none when it has none). */
export const depositedBalance = (
  logs: ReadonlyArray<{ readonly address: string; readonly topics: ReadonlyArray<Hex>; readonly data: Hex }>,
  channelId: Hex
): bigint | undefined => {
  for (const log of logs) {
    if (log.address.toLowerCase() !== batchSettlementAddress.toLowerCase()) continue
    const [signature, ...rest] = log.topics
    if (signature === undefined) continue
    try {
      const decoded = decodeEventLog({ abi: batchSettlementAbi, eventName: "Deposited", topics: [signature, ...rest], data: log.data })
      if (decoded.args.channelId.toLowerCase() === channelId.toLowerCase()) return decoded.args.balance
    } catch {
      // another event of the contract
    }
  }
  return undefined
}
