// Chain steps shared by chain tests: an agent in the chain business (registered, chaining switched on) and a chain's
// root call paid with X-Chain-Budget by the official x402 client.
import { Effect } from "effect"
import type { PrivateKeyAccount } from "viem/accounts"
import { call, paidCall, walletAuth } from "./clients.js"
import { TestEnv } from "./harness.js"
import { registerAgent } from "./scenario.js"

/** An agent owned by `owner` at `url`: chaining on, depth 3, no caller lists, unless `settings` say otherwise. */
export const chainAgent = (owner: PrivateKeyAccount, url: string, settings: Record<string, unknown> = {}) =>
  Effect.gen(function* () {
    const { baseUrl } = yield* TestEnv
    const id = yield* registerAgent(owner, url)
    const patched = yield* Effect.promise(async () =>
      call(`${baseUrl}/api/v1/agents/${id}`, {
        method: "PATCH",
        headers: await walletAuth(owner, id),
        json: { chainSettings: { chain_enabled: true, chain_max_depth: 3, chain_allowed_callers: [], chain_blocked_callers: [], ...settings } }
      }))
    if (patched.status !== 200) throw new Error(`agent update refused: ${JSON.stringify(patched.body)}`)
    return id
  })

/** A chain's root call to `agentId`'s echo, paid by `payer` with a budget of `budget` USDC. */
export const startChain = (payer: PrivateKeyAccount, agentId: string, budget: string, text = "hi") =>
  Effect.flatMap(TestEnv, ({ baseUrl }) =>
    Effect.promise(() =>
      paidCall(payer, `${baseUrl}/api/v1/execute`, {
        json: { targetAgentId: agentId, capabilityId: "echo", input: { text } },
        headers: { "X-Chain-Budget": budget }
      })))

/** The body of a sub-call an agent makes to `targetAgentId`'s echo. */
export const echoCall = (targetAgentId: string, text: string) => ({ body: { targetAgentId, capabilityId: "echo", input: { text } } })

