// Wallet-signature authentication (spec section 5): `service-auth:{agentId}:{timestampMs}` signed as a personal message.
import { Clock, Effect } from "effect"
import { isHex, recoverMessageAddress } from "viem"
import { Forbidden, Unauthorized } from "../../src/domain/Errors.js"

export const SIGNATURE_MAX_AGE_MS = 5 * 60 * 1000
/** Clock skew we tolerate for timestamps ahead of ours. */
export const SIGNATURE_MAX_FUTURE_MS = 30 * 1000

const HEADER = /^(service-auth:([0-9a-fA-F-]{36}):(\d{1,16})):sig:(0x[0-9a-fA-F]{130})$/
const ADDRESS = /^0x[0-9a-fA-F]{40}$/

export interface WalletAuthHeaders {
  readonly "x-agent-wallet"?: string | undefined
  readonly "x-agent-signature"?: string | undefined
}

/** Proves that the caller controls `agent.wallet` and signed for `agent.id` within the last 5 minutes. Returns the wallet. */
export const verifyWalletSignature = (
  agent: { readonly id: string; readonly wallet: string },
  headers: WalletAuthHeaders
): Effect.Effect<string, Unauthorized | Forbidden> =>
  Effect.gen(function* () {
    const walletHeader = headers["x-agent-wallet"]
    const signatureHeader = headers["x-agent-signature"]
    if (walletHeader === undefined || signatureHeader === undefined || walletHeader === "" || signatureHeader === "") {
      return yield* new Unauthorized({
        code: "AUTH_REQUIRED",
        message: "X-Agent-Wallet and X-Agent-Signature headers are required"
      })
    }
    const match = HEADER.exec(signatureHeader.trim())
    const [, message, signedAgentId, timestamp, signature] = match ?? []
    if (
      !ADDRESS.test(walletHeader.trim()) || message === undefined || signedAgentId === undefined ||
      timestamp === undefined || signature === undefined || !isHex(signature)
    ) {
      return yield* new Unauthorized({
        code: "AUTH_MALFORMED",
        message: "X-Agent-Signature must be `service-auth:{agentId}:{timestampMs}:sig:{0x signature}` and X-Agent-Wallet an address"
      })
    }
    if (signedAgentId.toLowerCase() !== agent.id.toLowerCase()) {
      return yield* new Forbidden({
        code: "AUTH_WRONG_AGENT",
        message: "the signed message is for a different agent",
        details: { signedAgentId, agentId: agent.id }
      })
    }
    const now = yield* Clock.currentTimeMillis
    const signedAt = Number(timestamp)
    if (now - signedAt > SIGNATURE_MAX_AGE_MS) {
      return yield* new Unauthorized({
        code: "AUTH_EXPIRED",
        message: "the signature is older than 5 minutes; sign a fresh timestamp (milliseconds)",
        details: { signedAt, now }
      })
    }
    if (signedAt - now > SIGNATURE_MAX_FUTURE_MS) {
      return yield* new Unauthorized({
        code: "AUTH_FUTURE_TIMESTAMP",
        message: "the signed timestamp is in the future; use milliseconds since the epoch",
        details: { signedAt, now }
      })
    }
    const recovered = yield* Effect.tryPromise(() => recoverMessageAddress({ message, signature })).pipe(
      Effect.orElseSucceed(() => undefined)
    )
    const wallet = walletHeader.trim().toLowerCase()
    if (recovered === undefined || recovered.toLowerCase() !== wallet) {
      return yield* new Unauthorized({
        code: "AUTH_INVALID_SIGNATURE",
        message: "the signature does not recover to X-Agent-Wallet"
      })
    }
    if (wallet !== agent.wallet.toLowerCase()) {
      return yield* new Forbidden({
        code: "AUTH_WALLET_MISMATCH",
        message: "the wallet is not this agent's registered wallet"
      })
    }
    return wallet
  }).pipe(Effect.withSpan("WalletAuth.verify"))
