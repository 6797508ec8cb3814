// Spending limits from a payer's side: the EIP-712 X-Payer-* headers, and PUT/GET of /api/v1/payers/{wallet}/limits.
import { Effect } from "effect"
import type { PrivateKeyAccount } from "viem/accounts"
import { type LimitsAction, limitsMessage, limitsTypes, type SignedLimits } from "../../services/limits/authorization.js"
import { SpendingLimits } from "../../services/limits/SpendingLimits.js"
import { call } from "./clients.js"
import { TestEnv } from "./harness.js"

export const usdc = (micros: bigint) => (Number(micros) / 1e6).toFixed(6)

/** The wire body of `limits` (decimal strings). */
export const wire = (l: SignedLimits) => ({
  ...(l.perCallMax === undefined ? {} : { perCallMax: usdc(l.perCallMax) }),
  ...(l.perDayMax === undefined ? {} : { perDayMax: usdc(l.perDayMax) }),
  ...(l.perAgentPerDayMax === undefined ? {} : { perAgentPerDayMax: usdc(l.perAgentPerDayMax) }),
  ...(l.allowedAgents === undefined ? {} : { allowedAgents: l.allowedAgents })
})

/** The X-Payer-* headers: `signer` signs `action` over `limits` for `payer`'s path. */
export const signLimits = (signer: PrivateKeyAccount, action: LimitsAction, payer: string, limits: SignedLimits | undefined, signedAt = Date.now()) =>
  Effect.gen(function* () {
    const { domain } = yield* SpendingLimits
    const signature = yield* Effect.promise(() =>
      signer.signTypedData({ domain, types: limitsTypes, primaryType: "SpendingLimits", message: limitsMessage(action, payer, limits, signedAt) }))
    return { "x-payer-signature": signature, "x-payer-signed-at": String(signedAt) }
  })

export const limitsUrl = (wallet: string) => Effect.map(TestEnv, ({ baseUrl }) => `${baseUrl}/api/v1/payers/${wallet}/limits`)

/** PUT the payer's limits, signed by the payer. */
export const setLimits = (payer: PrivateKeyAccount, limits: SignedLimits, signedAt = Date.now()) =>
  Effect.gen(function* () {
    const headers = yield* signLimits(payer, "set", payer.address, limits, signedAt)
    const url = yield* limitsUrl(payer.address)
    return yield* Effect.promise(() => call(url, { method: "PUT", json: wire(limits), headers }))
  })
