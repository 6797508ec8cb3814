// The agent wallet's consent to a registration paid by another wallet: an EIP-712 signature over the registration body
// (docs/clients.md, "Registering for another wallet"). A fee paid from the agent's own wallet needs none.
import { Clock, Effect } from "effect"
import { createHash } from "node:crypto"
import { getAddress, type Hex, keccak256, stringToBytes, verifyTypedData } from "viem"
import { Unauthorized } from "../../src/domain/Errors.js"
import { canonicalJson } from "../../src/domain/Json.js"
import { SIGNATURE_MAX_AGE_MS, SIGNATURE_MAX_FUTURE_MS } from "./WalletAuth.js"

/** The body field that carries the proof; it is left out of what is signed. */
export const WALLET_PROOF_FIELD = "walletProof"

/** The EIP-712 domain: this service on this chain (a proof made for another chain id is refused). */
export const registrationDomain = (chainId: number) => ({ name: "Agent Marketplace", version: "1", chainId }) as const

export const registrationTypes = {
  AgentRegistration: [
    { name: "wallet", type: "address" },
    { name: "name", type: "string" },
    { name: "execution", type: "string" },
    { name: "registration", type: "bytes32" },
    { name: "issuedAt", type: "uint256" }
  ]
} as const

/** The registration as the client sent it, without the proof: a JSON object, or nothing to sign. */
const withoutProof = (body: unknown): Record<string, unknown> | undefined => {
  if (typeof body !== "object" || body === null || Array.isArray(body)) return undefined
  const { [WALLET_PROOF_FIELD]: _, ...rest } = body as Record<string, unknown>
  return rest
}

/**
 * keccak256 of the canonical JSON (RFC 8785: sorted keys, no whitespace) of the body as sent, `walletProof` left out.
 * It binds every field (wallet, name, endpoints, capabilities with their prices, tags, metadata) exactly as sent.
 */
export const registrationDigest = (body: unknown): Hex => keccak256(stringToBytes(canonicalJson(withoutProof(body) ?? null)))

/**
 * sha256 of the same canonical JSON: the registration's fingerprint, stored with the agent, that tells a re-send of it
 * (same body, same payment header) from another registration presenting a used header.
 */
export const registrationFingerprint = (body: unknown): string =>
  createHash("sha256").update(canonicalJson(withoutProof(body) ?? null)).digest("hex")

type Signed = { readonly wallet: string; readonly name: string; readonly endpoints: { readonly execution: string } }

const typedData = (fields: Signed, registration: Hex, issuedAt: number, chainId: number) => ({
  domain: registrationDomain(chainId),
  types: registrationTypes,
  primaryType: "AgentRegistration" as const,
  message: {
    wallet: getAddress(fields.wallet),
    name: fields.name,
    execution: fields.endpoints.execution,
    registration,
    issuedAt: BigInt(issuedAt)
  }
})

/** What the agent's wallet signs (viem's `signTypedData` argument), for the body as it will be sent and the time of signing in ms. */
export const registrationTypedData = (body: Signed, issuedAt: number, chainId: number) =>
  typedData(body, registrationDigest(body), issuedAt, chainId)

/** The proof as it arrives in the body: `{ signature: 0x…65 bytes, issuedAt: ms }`. */
export interface WalletProofField {
  readonly signature: string
  readonly issuedAt: number
}

const invalid = (message: string) => new Unauthorized({ code: "WALLET_PROOF_INVALID", message: `${message}; nothing was charged` })

/**
 * Checks that the agent's wallet signed this very registration (the body as sent) within the last 5 minutes (30 s of
 * clock skew ahead). Replays are bounded by the window and by one agent per wallet: a used proof can only register
 * the same body for the same wallet again, which the wallet's unique index refuses once that agent exists.
 */
export const verifyRegistrationProof = (
  rawBody: unknown,
  request: Signed,
  proof: WalletProofField,
  chainId: number
): Effect.Effect<void, Unauthorized> =>
  Effect.gen(function* () {
    const now = yield* Clock.currentTimeMillis
    if (proof.issuedAt < now - SIGNATURE_MAX_AGE_MS || proof.issuedAt > now + SIGNATURE_MAX_FUTURE_MS) {
      return yield* new Unauthorized({
        code: "WALLET_PROOF_EXPIRED",
        message: "walletProof.issuedAt must be within the last 5 minutes (and at most 30 seconds ahead); sign again. Nothing was charged",
        details: { issuedAt: proof.issuedAt, now }
      })
    }
    const sent = withoutProof(rawBody)
    if (sent === undefined) return yield* invalid("the registration body is not a JSON object")
    if (!/^0x[0-9a-fA-F]{130}$/.test(proof.signature)) return yield* invalid("walletProof.signature must be a 65-byte 0x hex signature")
    // The readable fields from the decoded request (the same values as sent: none of them is normalised but the
    // address's case), the digest from the body exactly as sent.
    const typed = typedData(request, registrationDigest(sent), proof.issuedAt, chainId)
    const valid = yield* Effect.promise(() =>
      verifyTypedData({ ...typed, address: getAddress(request.wallet), signature: proof.signature as Hex }).catch(() => false))
    if (!valid) return yield* invalid("walletProof is not the agent wallet's EIP-712 signature over this registration")
  })
