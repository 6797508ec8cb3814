// Wallet-signature authentication (spec section 5): `service-auth:{agentId}:{timestampMs}` signed as a personal message,
// good for 5 minutes. Reads (GET, nothing moved or changed) only verify it, so it serves any number of reads in its
// window; every state-changing call also consumes it (one change per signature, remembered until it would expire).
import { SqlClient } from "@effect/sql"
import { Clock, Duration, Effect, Layer, Schedule } from "effect"
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

/** A verified signature: who signed, for which agent, and the signed timestamp (what makes it single-use). */
export interface WalletProof {
  readonly agentId: string
  readonly wallet: string
  readonly signedAt: number
}

/** Proves that the caller controls `agent.wallet` and signed for `agent.id` within the last 5 minutes. */
export const verifyWalletSignature = (
  agent: { readonly id: string; readonly wallet: string },
  headers: WalletAuthHeaders
): Effect.Effect<WalletProof, Unauthorized | Forbidden> =>
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
    return { agentId: agent.id, wallet, signedAt }
  }).pipe(Effect.withSpan("WalletAuth.verify"))

/**
 * Uses up a verified signature: every state-changing call does, never a read (GET). Call it inside the database
 * transaction of the change it authorises: a change that
 * fails leaves the signature usable, and of two concurrent requests with one signature the second waits on the first's
 * row and is refused once it commits.
 */
export const consumeWalletSignature = (proof: WalletProof) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const used = yield* sql`
      INSERT INTO used_wallet_signatures (agent_id, wallet, signed_at_ms, expires_at)
      VALUES (${proof.agentId}, ${proof.wallet}, ${proof.signedAt}, ${new Date(proof.signedAt + SIGNATURE_MAX_AGE_MS)})
      ON CONFLICT DO NOTHING RETURNING 1`.pipe(Effect.orDie)
    if (used.length === 0) {
      return yield* new Unauthorized({
        code: "AUTH_SIGNATURE_REUSED",
        message: "this signature was already used for a change; sign a fresh timestamp for every change",
        details: { signedAt: proof.signedAt }
      })
    }
  })

/** Forgets used signatures once they have expired (an expired signature is refused before it is looked up). */
export const UsedSignaturesPruneLive = Layer.scopedDiscard(
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    yield* Effect.flatMap(Clock.currentTimeMillis, (now) =>
      sql`DELETE FROM used_wallet_signatures WHERE expires_at < ${new Date(now - SIGNATURE_MAX_FUTURE_MS)}`).pipe(
      Effect.catchAllCause((cause) => Effect.logWarning("pruning used wallet signatures failed", cause)),
      Effect.repeat(Schedule.spaced(Duration.minutes(1))),
      Effect.forkScoped
    )
  })
)
