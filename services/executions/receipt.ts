// The payer's receipt of a paid call, pure: its fields derived from the execution row, the exact bytes that are signed,
// and their check. Signed with the service's Ed25519 key (the one that signs agent requests); docs/clients.md.
import * as crypto from "node:crypto"
import { canonicalJson } from "../../src/domain/Json.js"
import type { ExecutionRow } from "./Repo.js"

/** The receipt format's version; a new field or a changed meaning bumps it. */
export const RECEIPT_VERSION = 1

/**
 * What the service attests, every value a string except `receiptVersion` (so the signed bytes never depend on how a
 * language prints numbers). Amounts are USDC atomic units (micro-USDC) as decimal integers. Invariants: `charged +
 * returned = authorized`; `charged = platformFee + unitsUsed × unitPrice` (÷ 1,000, rounded up, for `token`).
 */
export interface ReceiptFields {
  readonly receiptVersion: typeof RECEIPT_VERSION
  readonly requestId: string
  readonly payer: string
  readonly agentId: string
  readonly capabilityId: string
  /** CAIP-2 network of the settlement, and its transaction hash (the payment the receipt accounts for). */
  readonly network: string
  /** Empty for a call paid from credit (no settlement: `funding` says so). */
  readonly transaction: string
  /** Only on a call paid from the payer's credit: `credit` (an x402-paid call's receipt has no such field). */
  readonly funding?: "credit" | "channel"
  /** A call paid by a batch-settlement voucher: the scheme and the channel it was charged to (`charged` is what it took). */
  readonly scheme?: "batch-settlement" | "upto"
  readonly channelId?: string
  /** What a unit is: `call` for flat pricing; metered: `token` (unitPrice per 1,000), `second`, `minute`, `micro-usdc` (dynamic). */
  readonly unit: string
  readonly unitsUsed: string
  /** The agent's price per unit. */
  readonly unitPrice: string
  /** The marketplace's fixed fee per call, part of `charged`. */
  readonly platformFee: string
  /** What the payment authorised (the x402 amount: the maximum). */
  readonly authorized: string
  readonly charged: string
  /** What goes back to the payer (`authorized - charged`). */
  readonly returned: string
  /** Hex sha256 of canonicalJson(input) and canonicalJson(output): sorted keys, no whitespace, JSON.stringify values. */
  readonly requestSha256: string
  readonly responseSha256: string
  /** When the call completed (ISO 8601, milliseconds, UTC). */
  readonly completedAt: string
  /** Which service key signed (first 16 hex of sha256 of its SPKI DER; GET /api/v1/platform/signing-key). */
  readonly keyId: string
}

/** A receipt as the payer gets it: the fields and `signature`, base64 Ed25519 over `receiptSignedBytes(fields)`. */
export interface ExecutionReceipt extends ReceiptFields {
  readonly signature: string
}

export const sha256Hex = (text: string): string => crypto.createHash("sha256").update(text, "utf8").digest("hex")

/** The signed bytes: UTF-8 of the canonical JSON (sorted keys, no whitespace) of every field but `signature`. */
export const receiptSignedBytes = (receipt: ReceiptFields): Buffer => {
  const { signature: _ignored, ...fields } = receipt as ReceiptFields & { readonly signature?: unknown }
  return Buffer.from(canonicalJson(fields), "utf8")
}

export type ReceiptRow = Pick<
  ExecutionRow,
  | "id" | "payer" | "agentId" | "capabilityId" | "input" | "output" | "status" | "price" | "platformFee" | "agentFee"
  | "chainId" | "completedAt" | "settlementState" | "settlementTxHash" | "authorized" | "meterUnit" | "unitPrice" | "unitsUsed"
  | "paymentPurpose" | "paymentChannelId"
>

/** A metered execution's terms once its usage is charged (metering.ts); undefined for flat pricing. */
const meteredOf = (row: ReceiptRow) => {
  const { authorized, meterUnit, unitPrice, unitsUsed } = row
  if (authorized == null || meterUnit == null || unitPrice == null || unitsUsed == null) return undefined
  return { authorized, unit: meterUnit, unitPrice, unitsUsed }
}

/**
 * The receipt's fields, derived only from stored facts (so the same execution always gets the same bytes, and the
 * same signature: Ed25519 is deterministic). Receipts are issued for completed calls paid by their own x402 payment
 * whose settlement is on chain; none otherwise (a failed call's refund is on its status; a chain's calls are
 * accounted on the chain).
 */
export const receiptFields = (row: ReceiptRow, network: string, keyId: string): ReceiptFields | undefined => {
  if (row.status !== "completed" || row.chainId !== null || row.settlementState !== "settled") return undefined
  // A call paid from credit has no settlement transaction: its receipt says `funding: "credit"` instead.
  const credit = row.paymentPurpose === "credit"
  // A call paid by a channel voucher neither: its receipt names the scheme and the channel charged.
  const channel = row.paymentPurpose === "channel" && row.paymentChannelId != null ? row.paymentChannelId : undefined
  if ((row.settlementTxHash === null && !credit && channel === undefined) || row.completedAt === null || row.output === null) return undefined
  // Flat pricing: one unit at the agent's price; the payment authorised exactly the price, all of it charged. Metered
  // (metering.ts): the units used at the unit price (per 1,000 for tokens), the payment authorised the maximum, `price`
  // holds the charge.
  const charged = row.price
  const metered = meteredOf(row)
  const authorized = metered?.authorized ?? row.price
  return {
    receiptVersion: RECEIPT_VERSION,
    requestId: row.id,
    payer: row.payer,
    agentId: row.agentId,
    capabilityId: row.capabilityId,
    network,
    transaction: row.settlementTxHash ?? "",
    ...(credit ? { funding: "credit" as const } : {}),
    ...(channel === undefined ? {} : { funding: "channel" as const, scheme: "batch-settlement" as const, channelId: channel }),
    // An upto authorization: `authorized` is the maximum it allowed, `charged` what settled.
    ...(row.paymentPurpose === "upto" ? { scheme: "upto" as const } : {}),
    unit: metered?.unit ?? "call",
    unitsUsed: (metered?.unitsUsed ?? 1n).toString(),
    unitPrice: (metered?.unitPrice ?? row.agentFee).toString(),
    platformFee: row.platformFee.toString(),
    authorized: authorized.toString(),
    charged: charged.toString(),
    returned: (authorized - charged).toString(),
    requestSha256: sha256Hex(canonicalJson(row.input)),
    responseSha256: sha256Hex(canonicalJson(row.output)),
    completedAt: row.completedAt.toISOString(),
    keyId
  }
}

/** Whether `receipt` carries a valid signature by `publicKey` over its fields (any changed field fails). */
export const verifyReceipt = (receipt: ExecutionReceipt, publicKey: crypto.KeyObject): boolean => {
  try {
    return crypto.verify(null, receiptSignedBytes(receipt), publicKey, Buffer.from(receipt.signature, "base64"))
  } catch {
    return false
  }
}
