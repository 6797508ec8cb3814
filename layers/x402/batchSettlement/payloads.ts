// The batch-settlement (payment channel) payloads a payer sends in x402 v2's PAYMENT-SIGNATURE header: a deposit (token
// authorization + first voucher), a voucher, or a refund request, each with the channel's config. Shapes as
// @x402/evm's batch-settlement client sends them (its `BatchSettlement*Payload` types; the decoded values are checked
// assignable to them below), bounded and decoded like the exact scheme's header (header.ts).
import type {
  BatchSettlementDepositPayload,
  BatchSettlementRefundPayload,
  BatchSettlementVoucherPayload,
  ChannelConfig as OfficialChannelConfig
} from "@x402/evm"
import { Schema } from "effect"
import { paymentPayloadV2, paymentSignatureDecoder } from "../v2.js"

const hexOf = (pattern: RegExp, description: string) =>
  Schema.TemplateLiteral(Schema.Literal("0x"), Schema.String).pipe(Schema.pattern(pattern), Schema.annotations({ description }))

const Address = hexOf(/^0x[0-9a-fA-F]{40}$/, "an EVM address")
const Bytes32 = hexOf(/^0x[0-9a-fA-F]{64}$/, "32 bytes in hex")
/** A signature: 65 bytes for a key, longer for ERC-1271 / ERC-6492 (bounded by the header's length). */
const Signature = hexOf(/^0x(?:[0-9a-fA-F]{2})+$/, "a hex signature")

const UINT128_LIMIT = 1n << 128n
const UINT256_LIMIT = 1n << 256n
const uintString = (limit: bigint, bits: number) =>
  Schema.String.pipe(
    Schema.pattern(/^(0|[1-9]\d{0,77})$/),
    Schema.filter((s) => BigInt(s) < limit, { message: () => `must fit in uint${bits}` })
  )
/** A token amount as the contract holds it (uint128), in decimal. */
const Uint128String = uintString(UINT128_LIMIT, 128)
const Uint256String = uintString(UINT256_LIMIT, 256)

/** The immutable channel config; its EIP-712 hash under the x402 Batch Settlement domain is the channel id. */
export const ChannelConfig = Schema.Struct({
  payer: Address,
  payerAuthorizer: Address,
  receiver: Address,
  receiverAuthorizer: Address,
  token: Address,
  withdrawDelay: Schema.Int.pipe(Schema.between(0, 2 ** 40 - 1)),
  salt: Bytes32
})
export type ChannelConfig = typeof ChannelConfig.Type

/** A cumulative voucher: the payer lets the receiver claim up to `maxClaimableAmount` from the channel in total. */
export const VoucherFields = Schema.Struct({
  channelId: Bytes32,
  maxClaimableAmount: Uint128String,
  signature: Signature
})
export type VoucherFields = typeof VoucherFields.Type

/** ERC-3009 `receiveWithAuthorization` to the deposit collector; its nonce is derived from the channel id and `salt`. */
export const Erc3009DepositAuthorization = Schema.Struct({
  validAfter: Uint256String,
  validBefore: Uint256String,
  salt: Bytes32,
  signature: Signature
})
export type Erc3009DepositAuthorization = typeof Erc3009DepositAuthorization.Type

/** A Permit2 witness transfer to the Permit2 deposit collector (decoded; not verified yet: see docs/settlement.md). */
export const Permit2DepositAuthorization = Schema.Struct({
  from: Address,
  permitted: Schema.Struct({ token: Address, amount: Uint256String }),
  spender: Address,
  nonce: Uint256String,
  deadline: Uint256String,
  witness: Schema.Struct({ channelId: Bytes32 }),
  signature: Signature
})

export const DepositPayload = Schema.Struct({
  type: Schema.Literal("deposit"),
  channelConfig: ChannelConfig,
  voucher: VoucherFields,
  deposit: Schema.Struct({
    amount: Uint128String,
    authorization: Schema.Union(
      Schema.Struct({ erc3009Authorization: Erc3009DepositAuthorization }),
      Schema.Struct({ permit2Authorization: Permit2DepositAuthorization })
    )
  })
})
export type DepositPayload = typeof DepositPayload.Type

export const VoucherPayload = Schema.Struct({
  type: Schema.Literal("voucher"),
  channelConfig: ChannelConfig,
  voucher: VoucherFields
})
export type VoucherPayload = typeof VoucherPayload.Type

/** A cooperative refund request: a zero-charge voucher, and the amount to return (all that is unclaimed when absent). */
export const RefundPayload = Schema.Struct({
  type: Schema.Literal("refund"),
  channelConfig: ChannelConfig,
  voucher: VoucherFields,
  amount: Schema.optionalWith(Uint128String, { exact: true })
})
export type RefundPayload = typeof RefundPayload.Type

export const ChannelPayload = Schema.Union(DepositPayload, VoucherPayload, RefundPayload)
export type ChannelPayload = typeof ChannelPayload.Type

/** The decoded PAYMENT-SIGNATURE header of a batch-settlement payment. */
export const ChannelPaymentPayloadV2 = paymentPayloadV2(ChannelPayload)
export type ChannelPaymentPayloadV2 = typeof ChannelPaymentPayloadV2.Type

/** Decodes a PAYMENT-SIGNATURE header holding a batch-settlement payload (deposit, voucher or refund). */
export const decodeChannelPaymentSignature = paymentSignatureDecoder(ChannelPaymentPayloadV2, {
  version: "batch-settlement payments are x402 v2 payloads in PAYMENT-SIGNATURE",
  shape: "PAYMENT-SIGNATURE does not hold an x402 v2 batch-settlement payload"
})

// Our decoded payloads as @x402/evm's types (to hand one to its facilitator): that these compile is the proof that
// what we decode has the shapes the package's client sends.
export const asOfficialDeposit = (p: DepositPayload): BatchSettlementDepositPayload => p
export const asOfficialVoucher = (p: VoucherPayload): BatchSettlementVoucherPayload => p
export const asOfficialRefund = (p: RefundPayload): BatchSettlementRefundPayload => p
export const asOfficialConfig = (c: ChannelConfig): OfficialChannelConfig => c
