// The marketplace's signed receipts of paid calls (docs/clients.md): read them from a paid answer's settlement header,
// check their Ed25519 signature with the marketplace's published key, and hash your own input and output to compare.
import { createHash, createPublicKey, type KeyObject, verify } from "node:crypto"
import type { MarketplaceKey } from "./requestSignature.js"

/** Amounts are USDC atomic units (micro-USDC) as decimal strings; `charged + returned = authorized`. */
export interface ExecutionReceipt {
  readonly receiptVersion: 1
  readonly requestId: string
  readonly payer: string
  readonly agentId: string
  readonly capabilityId: string
  readonly network: string
  readonly transaction: string
  /** A call paid from credit or by a channel voucher (no settlement of its own); a channel's receipt names it. */
  readonly funding?: "credit" | "channel"
  readonly scheme?: "batch-settlement" | "upto"
  readonly channelId?: string
  readonly unit: string
  readonly unitsUsed: string
  readonly unitPrice: string
  readonly platformFee: string
  readonly authorized: string
  readonly charged: string
  readonly returned: string
  readonly requestSha256: string
  readonly responseSha256: string
  readonly completedAt: string
  readonly keyId: string
  readonly signature: string
}

/** JSON with object keys sorted at every level and no whitespace: what the receipt's hashes and signature cover. */
export const canonicalJson = (value: unknown): string =>
  Array.isArray(value)
    ? `[${value.map(canonicalJson).join(",")}]`
    : typeof value === "object" && value !== null
    ? `{${Object.keys(value).sort().map((k) => `${JSON.stringify(k)}:${canonicalJson((value as Record<string, unknown>)[k])}`).join(",")}}`
    : JSON.stringify(value) ?? "null"

/** Hex sha256 of a value's canonical JSON: compare with `requestSha256` (your input) and `responseSha256` (the output). */
export const contentSha256 = (value: unknown): string => createHash("sha256").update(canonicalJson(value), "utf8").digest("hex")

/**
 * Whether the receipt was signed by the marketplace's key and no field was changed since. `publicKey`: the key from
 * `fetchMarketplaceKey` (its key id must match the receipt's), a `KeyObject`, or the PEM of
 * `GET /api/v1/platform/signing-key`.
 * @example
 * const key = await fetchMarketplaceKey("http://127.0.0.1:3000")
 * if (!verifyReceipt(result.receipt!, key)) throw new Error("forged receipt")
 */
export const verifyReceipt = (receipt: ExecutionReceipt, publicKey: MarketplaceKey | KeyObject | string): boolean => {
  try {
    if (typeof publicKey === "object" && "keyId" in publicKey && publicKey.keyId !== receipt.keyId) return false
    const key = typeof publicKey === "string" ? createPublicKey(publicKey) : "keyId" in publicKey ? publicKey.key : publicKey
    const { signature, ...fields } = receipt
    return verify(null, Buffer.from(canonicalJson(fields), "utf8"), key, Buffer.from(signature, "base64"))
  } catch {
    return false
  }
}

/** The receipt in a paid answer's `PAYMENT-RESPONSE` (x402 v2) or `X-PAYMENT-RESPONSE` (v1) header, if any. */
export const receiptFromHeaders = (headers: { get(name: string): string | null }): ExecutionReceipt | undefined => {
  const header = headers.get("payment-response") ?? headers.get("x-payment-response")
  if (header === null) return undefined
  try {
    const settled = JSON.parse(Buffer.from(header, "base64").toString("utf8")) as { extensions?: { receipt?: ExecutionReceipt } }
    return settled.extensions?.receipt
  } catch {
    return undefined
  }
}
