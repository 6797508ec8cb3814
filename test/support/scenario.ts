// Shared steps of execution tests: register an agent that points at a fake agent, and pay calls to it.
import { Effect } from "effect"
import type { PrivateKeyAccount } from "viem/accounts"
import { call, paidCall } from "./clients.js"
import { capability, registration } from "./fixtures.js"
import { Reconciliation } from "../../services/treasury/Reconciliation.js"
import { OPERATOR_TOKEN, TestEnv } from "./harness.js"

export const echoCapability = (overrides: Record<string, unknown> = {}) =>
  capability({
    id: "echo",
    name: "Echo",
    description: "Echoes the input",
    inputSchema: { type: "object", properties: { text: { type: "string" } }, required: ["text"] },
    outputSchema: { type: "object", required: ["echo"] },
    pricing: { model: "per-request", basePrice: "0.01", currency: "USDC" },
    ...overrides
  })

/** Registers (pays) an agent owned by `owner` whose execution endpoint is `url`; optionally pins its trust tier. */
export const registerAgent = (owner: PrivateKeyAccount, url: string, options: { tier?: "new" | "trusted" | "premium"; capabilities?: Array<unknown> } = {}) =>
  Effect.gen(function* () {
    const { baseUrl } = yield* TestEnv
    const created = yield* Effect.promise(() =>
      paidCall(owner, `${baseUrl}/api/v1/agents`, {
        json: registration(owner, { capabilities: options.capabilities ?? [echoCapability()], endpoints: { execution: url } })
      }))
    if (created.status !== 201) throw new Error(`registration failed: ${JSON.stringify(created.body)}`)
    const id: string = created.body.data.id
    if (options.tier !== undefined) {
      const pinned = yield* Effect.promise(() =>
        call(`${baseUrl}/api/v1/operator/agents/${id}/trust-tier`, {
          method: "POST",
          json: { tier: options.tier, reason: "test scenario" },
          headers: { authorization: `Bearer ${OPERATOR_TOKEN}`, "x-operator": "test harness" }
        }))
      if (pinned.status !== 200) throw new Error(`pinning the tier failed: ${JSON.stringify(pinned.body)}`)
    }
    return id
  })

/** POST /api/v1/execute paid by `payer` with the official x402 client. */
export const execute = (payer: PrivateKeyAccount, body: Record<string, unknown>, query = "") =>
  Effect.flatMap(TestEnv, ({ baseUrl }) => Effect.promise(() => paidCall(payer, `${baseUrl}/api/v1/execute${query}`, { json: body })))

export const balanceOf = (agentId: string) =>
  Effect.flatMap(TestEnv, ({ baseUrl }) => Effect.promise(() => call(`${baseUrl}/api/v1/payments/balance/${agentId}`)))

/** The ledger's treasury equals the treasury's USDC on chain, to the micro-USDC (reconciled at the latest block). */
export const ledgerMatchesChain = Effect.gen(function* () {
  const reconciliation = yield* Reconciliation
  const result = yield* reconciliation.check()
  return result.drift
})
