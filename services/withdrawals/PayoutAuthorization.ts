// The authority to pay an agent's earnings to an address other than its registered wallet: an EIP-712 signature by that
// wallet over exactly this payout (agent, amount, destination, a nonce, a deadline), bound to this marketplace's chain and
// treasury. A `service-auth:` signature (spec section 5, made for any owner action, reads included) can never be one:
// a personal message and typed data hash differently. Format and rules: docs/withdrawals.md.
import { Clock, Effect } from "effect"
import { getAddress, type Hex, recoverTypedDataAddress } from "viem"
import { BadRequest, Forbidden, Unauthorized } from "../../src/domain/Errors.js"
import type { PayoutAuthorizationBody } from "../../src/domain/Withdrawal.js"
import { formatUsdc } from "../../src/domain/Money.js"

/** How far ahead a deadline may lie: the spec's 5-minute signature lifetime plus 30 seconds of clock skew. */
export const PAYOUT_DEADLINE_MAX_SECONDS = 5 * 60 + 30

export const payoutTypes = {
  Withdrawal: [
    { name: "agentId", type: "string" },
    { name: "amount", type: "uint256" },
    { name: "destination", type: "address" },
    { name: "nonce", type: "bytes32" },
    { name: "deadline", type: "uint256" }
  ]
} as const

export interface PayoutDomain {
  readonly name: "Agent Marketplace"
  readonly version: "1"
  readonly chainId: number
  /** The treasury that pays: a signature for one deployment is worthless at another. */
  readonly verifyingContract: `0x${string}`
}

export const payoutDomain = (chainId: number, treasury: `0x${string}`): PayoutDomain => ({
  name: "Agent Marketplace",
  version: "1",
  chainId,
  verifyingContract: getAddress(treasury)
})

export interface Payout {
  readonly agentId: string
  readonly amount: bigint
  /** Lowercase 0x address. */
  readonly destination: string
}

/** What to sign for `payout` (the refusal of an unsigned payout elsewhere carries it, less the nonce and deadline). */
export const typedDataTemplate = (domain: PayoutDomain, payout: Payout) => ({
  domain,
  types: payoutTypes,
  primaryType: "Withdrawal" as const,
  message: { agentId: payout.agentId, amount: payout.amount.toString(), destination: getAddress(payout.destination), nonce: "0x<32 random bytes>", deadline: "<unix seconds, at most 330 s ahead>" }
})

/** A payout to another address without `authorization`: refused, with what to sign. */
export const authorizationRequired = (domain: PayoutDomain, payout: Payout, registered: string) =>
  new Forbidden({
    code: "WITHDRAWAL_AUTHORIZATION_REQUIRED",
    message: "a payout to an address other than the agent's registered wallet needs `authorization`: an EIP-712 signature by the registered wallet over the amount and destination (docs/withdrawals.md)",
    details: { registeredWallet: registered, destinationWallet: payout.destination, amount: formatUsdc(payout.amount), typedData: typedDataTemplate(domain, payout) }
  })

/**
 * Checks an authorization against the payout the request asks for (the message is rebuilt from the request: a changed
 * amount or destination recovers another address). Its single use is the withdrawal row's unique (agent, nonce).
 */
export const verifyPayoutAuthorization = (domain: PayoutDomain, payout: Payout, registered: string, auth: PayoutAuthorizationBody) =>
  Effect.gen(function* () {
    const nowSeconds = Math.floor((yield* Clock.currentTimeMillis) / 1000)
    if (auth.deadline <= nowSeconds) {
      return yield* new Unauthorized({
        code: "AUTH_EXPIRED",
        message: "the withdrawal authorization's deadline has passed; sign a new one",
        details: { deadline: auth.deadline, now: nowSeconds }
      })
    }
    if (auth.deadline - nowSeconds > PAYOUT_DEADLINE_MAX_SECONDS) {
      const message = `the deadline may lie at most ${PAYOUT_DEADLINE_MAX_SECONDS} seconds ahead (Unix seconds)`
      return yield* new BadRequest({ code: "VALIDATION_ERROR", message, details: { issues: [{ path: "authorization.deadline", message }] } })
    }
    const recovered = yield* Effect.tryPromise(() =>
      recoverTypedDataAddress({
        domain,
        types: payoutTypes,
        primaryType: "Withdrawal",
        message: {
          agentId: payout.agentId,
          amount: payout.amount,
          destination: getAddress(payout.destination),
          nonce: auth.nonce as Hex,
          deadline: BigInt(auth.deadline)
        },
        signature: auth.signature as Hex
      })).pipe(Effect.orElseSucceed(() => undefined))
    if (recovered === undefined || recovered.toLowerCase() !== registered.toLowerCase()) {
      return yield* new Unauthorized({
        code: "AUTH_INVALID_SIGNATURE",
        message: "the withdrawal authorization does not recover to the agent's registered wallet: agent, amount, destination, nonce and deadline must be those signed, for this chain and treasury"
      })
    }
    return { nonce: auth.nonce.toLowerCase() }
  }).pipe(Effect.withSpan("PayoutAuthorization.verify"))
