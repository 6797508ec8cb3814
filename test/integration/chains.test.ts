// Chains end to end: a client pays a budget (x402-fetch, X-Chain-Budget); fake agents on loopback hire each other through
// the service with the X-Chain-Token they were sent; the tree, its cost and the ledger agree; the unspent budget comes
// back on chain once; every refusal happens before anything is reserved; concurrent sub-calls never overspend.
import { expect, layer } from "@effect/vitest"
import { Effect, TestClock } from "effect"
import type { PrivateKeyAccount } from "viem/accounts"
import { TreasuryWorker } from "../../services/treasury/TreasuryWorker.js"
import { type ChainedResult, fakeAgent } from "../support/agents.js"
import { call, devAccount, paidCall, usdcBalance, walletAuth } from "../support/clients.js"
import { TestApp, TestEnv } from "../support/harness.js"
import { ledgerMatchesChain, registerAgent } from "../support/scenario.js"

const CALL = 11_000n // 0.001 platform fee + 0.01 basePrice per call

/** Our clock starts at the real time (payments are signed against it), then only the test moves it. */
const realNow = Effect.flatMap(Effect.sync(() => Date.now()), (now) => TestClock.setTime(now))

const api = (path: string, init: { method?: string; json?: unknown; headers?: Record<string, string> } = {}) =>
  Effect.flatMap(TestEnv, ({ baseUrl }) =>
    Effect.promise(() =>
      call(`${baseUrl}${path}`, {
        method: init.method ?? (init.json === undefined ? "GET" : "POST"),
        ...(init.json === undefined ? {} : { json: init.json }),
        headers: init.headers ?? {}
      })))

/** The agent's chain settings, set by its owner (wallet signature). */
const chainSettings = (owner: PrivateKeyAccount, agentId: string, settings: Record<string, unknown>) =>
  Effect.flatMap(TestEnv, ({ baseUrl }) =>
    Effect.promise(async () => {
      const patched = await call(`${baseUrl}/api/v1/agents/${agentId}`, { method: "PATCH", headers: await walletAuth(owner, agentId), json: { chainSettings: settings } })
      if (patched.status !== 200) throw new Error(`chain settings refused: ${JSON.stringify(patched.body)}`)
    }))

/** An agent in the chain business: registered, chaining on (depth 3 unless told otherwise). */
const chainAgent = (owner: PrivateKeyAccount, url: string, settings: Record<string, unknown> = {}) =>
  Effect.gen(function* () {
    const id = yield* registerAgent(owner, url)
    yield* chainSettings(owner, id, { chain_enabled: true, chain_max_depth: 3, ...settings })
    return id
  })

/** A chain's root call paid by `payer` with the official x402 client. */
const startChain = (payer: PrivateKeyAccount, agentId: string, budget: string, text = "hi") =>
  Effect.flatMap(TestEnv, ({ baseUrl }) =>
    Effect.promise(() =>
      paidCall(payer, `${baseUrl}/api/v1/execute`, {
        json: { targetAgentId: agentId, capabilityId: "echo", input: { text } },
        headers: { "X-Chain-Budget": budget }
      })))

const echo = (targetAgentId: string, text: string) => ({ body: { targetAgentId, capabilityId: "echo", input: { text } } })

/** The sub-call results a call-back agent put in its output. */
const subCalls = (output: unknown): Array<ChainedResult> =>
  typeof output === "object" && output !== null && "calls" in output && Array.isArray(output.calls) ? output.calls : []

layer(TestApp({ BACKGROUND_WORKERS: "false" }))("chains", (it) => {
  it.scoped("a three-level chain: A hires B, B hires C; the tree, its cost and the ledger agree; the unspent budget comes back on chain once", () =>
    Effect.gen(function* () {
      yield* realNow
      const { baseUrl } = yield* TestEnv
      const treasury = yield* TreasuryWorker
      const [a, b, c] = [yield* fakeAgent(), yield* fakeAgent(), yield* fakeAgent("echo")]
      const A = yield* chainAgent(devAccount(1), a.url)
      const B = yield* chainAgent(devAccount(2), b.url)
      const C = yield* chainAgent(devAccount(3), c.url)
      a.setBehaviour({ kind: "call-back", baseUrl, calls: [echo(B, "from A")] })
      b.setBehaviour({ kind: "call-back", baseUrl, calls: [echo(C, "from B")] })
      const payer = devAccount(4)
      const before = yield* Effect.promise(() => usdcBalance(payer.address))

      const root = yield* startChain(payer, A, "1.00")
      expect(root.status, JSON.stringify(root.body)).toBe(200)
      const data = root.body.data
      expect(data.status).toBe("completed")
      expect(data.transactionId).toMatch(/^tx_/)
      expect(data.chain).toMatchObject({ depth: 0, remainingBudget: "0.000000", status: "completed", refunded: "0.967000" })
      const [fromB] = subCalls(data.output)
      expect(fromB?.status).toBe(200)
      const bData = (fromB?.body as { data: { chain: { depth: number; chainId: string }; output: unknown } }).data
      expect(bData.chain).toMatchObject({ depth: 1, chainId: data.chain.chainId })
      const [fromC] = subCalls(bData.output)
      expect(fromC?.status).toBe(200)
      expect((fromC?.body as { data: { chain: { depth: number } } }).data.chain.depth).toBe(2)

      // The root agent was sent a token; the leaf C (chaining on) too, one level deeper.
      expect(a.calls[0]?.headers["x-chain-token"]).toMatch(/^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/)
      expect(a.calls[0]?.headers["traceparent"]).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/)
      const traceOf = (h: unknown) => String(h).split("-")[1]
      expect(traceOf(c.calls[0]?.headers["traceparent"])).toBe(traceOf(a.calls[0]?.headers["traceparent"]))

      yield* treasury.processDue
      expect(yield* Effect.promise(() => usdcBalance(payer.address))).toBe(before - 3n * CALL)
      // Nothing is refunded twice.
      yield* treasury.processDue
      expect(yield* Effect.promise(() => usdcBalance(payer.address))).toBe(before - 3n * CALL)
      expect(yield* ledgerMatchesChain).toBe(0n)
    }))
})
