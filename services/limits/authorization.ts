// A payer's authority over its own spending limits: an EIP-712 signature by the payer wallet over the action, the
// limits exactly as sent and a millisecond timestamp, bound to this marketplace's chain and treasury (the withdrawal
// authorization's domain). Reads may reuse a signature for its 5 minutes; a change must be signed later than the last
// change (the stored timestamp: a replayed older request is refused). Format: docs/clients.md, Spending limits.
import { Clock, Effect } from "effect"
import { getAddress, isHex, recoverTypedDataAddress } from "viem"
import { Unauthorized } from "../../src/domain/Errors.js"
import { SIGNATURE_MAX_AGE_MS, SIGNATURE_MAX_FUTURE_MS } from "../agents/WalletAuth.js"
import type { PayoutDomain } from "../withdrawals/PayoutAuthorization.js"

export type LimitsAction = "set" | "read" | "delete"

export const limitsTypes = {
  SpendingLimits: [
    { name: "action", type: "string" },
    { name: "payer", type: "address" },
    { name: "perCallMax", type: "uint256" },
    { name: "perDayMax", type: "uint256" },
    { name: "perAgentPerDayMax", type: "uint256" },
    { name: "allowedAgents", type: "string[]" },
    { name: "signedAt", type: "uint256" }
  ]
} as const

/** The limits as signed: micro-USDC amounts and the allow-list exactly as sent. */
export interface SignedLimits {
  readonly perCallMax?: bigint
  readonly perDayMax?: bigint
  readonly perAgentPerDayMax?: bigint
  readonly allowedAgents?: ReadonlyArray<string>
}

/** The message signed for an action: absent limits are 0 and an absent allow-list is [] (reads and deletes: all so). */
export const limitsMessage = (action: LimitsAction, payer: string, body: SignedLimits | undefined, signedAt: number) => ({
  action,
  // Lowercased first: a path address with a wrong mixed-case checksum is still this wallet, never a 500.
  payer: getAddress(payer.toLowerCase()),
  perCallMax: body?.perCallMax ?? 0n,
  perDayMax: body?.perDayMax ?? 0n,
  perAgentPerDayMax: body?.perAgentPerDayMax ?? 0n,
  allowedAgents: [...(body?.allowedAgents ?? [])],
  signedAt: BigInt(signedAt)
})

export interface PayerHeaders {
  readonly "x-payer-signature"?: string | undefined
  readonly "x-payer-signed-at"?: string | undefined
}

/** Proves the caller holds `payer`'s key and signed this very action within the last 5 minutes; the signed timestamp out. */
export const verifyPayerSignature = (domain: PayoutDomain, action: LimitsAction, payer: string, body: SignedLimits | undefined, headers: PayerHeaders) =>
  Effect.gen(function* () {
    const signature = headers["x-payer-signature"]?.trim()
    const signedAtText = headers["x-payer-signed-at"]?.trim()
    if (signature === undefined || signature === "" || signedAtText === undefined || signedAtText === "") {
      return yield* new Unauthorized({
        code: "PAYER_AUTH_REQUIRED",
        message: "X-Payer-Signature and X-Payer-Signed-At are required: the payer wallet's EIP-712 SpendingLimits signature (docs/clients.md)"
      })
    }
    if (!/^0x[0-9a-fA-F]{130}$/.test(signature) || !isHex(signature) || !/^\d{1,16}$/.test(signedAtText)) {
      return yield* new Unauthorized({
        code: "PAYER_SIGNATURE_INVALID",
        message: "X-Payer-Signature must be a 0x 65-byte signature and X-Payer-Signed-At milliseconds since the epoch"
      })
    }
    const signedAt = Number(signedAtText)
    const now = yield* Clock.currentTimeMillis
    if (now - signedAt > SIGNATURE_MAX_AGE_MS) {
      return yield* new Unauthorized({ code: "AUTH_EXPIRED", message: "the signature is older than 5 minutes; sign a fresh timestamp (milliseconds)", details: { signedAt, now } })
    }
    if (signedAt - now > SIGNATURE_MAX_FUTURE_MS) {
      return yield* new Unauthorized({ code: "AUTH_FUTURE_TIMESTAMP", message: "the signed timestamp is in the future; use milliseconds since the epoch", details: { signedAt, now } })
    }
    const recovered = yield* Effect.tryPromise(() =>
      recoverTypedDataAddress({
        domain,
        types: limitsTypes,
        primaryType: "SpendingLimits",
        message: limitsMessage(action, payer, body, signedAt),
        signature
      })).pipe(Effect.orElseSucceed(() => undefined))
    if (recovered === undefined || recovered.toLowerCase() !== payer.toLowerCase()) {
      return yield* new Unauthorized({
        code: "PAYER_SIGNATURE_INVALID",
        message: "X-Payer-Signature does not recover to this wallet for this action, these limits and X-Payer-Signed-At (on this chain and treasury)",
        details: { action }
      })
    }
    return { signedAt }
  }).pipe(Effect.withSpan("SpendingLimits.verifySignature"))
