// What a chained call shows: the requesting agent in the transaction views and in both agents' payment history (what
// the hiring agent spent on others included), and X-RateLimit-* on chained answers and on refusals given after the
// limits were counted (none on refusals before them).
import { expect, layer } from "@effect/vitest"
import { Effect, TestClock } from "effect"
import { type ChainedResult, fakeAgent } from "../support/agents.js"
import { echoCall, chainAgent, startChain } from "../support/chains.js"
import { call, devAccount, walletAuth } from "../support/clients.js"
import { TestApp, TestEnv } from "../support/harness.js"
import { execute } from "../support/scenario.js"

const api = (path: string, headers: Record<string, string> = {}) =>
  Effect.flatMap(TestEnv, ({ baseUrl }) => Effect.promise(() => call(`${baseUrl}${path}`, { headers })))

const subCalls = (output: unknown): Array<ChainedResult> =>
  typeof output === "object" && output !== null && "calls" in output && Array.isArray(output.calls) ? output.calls : []

/** The X-RateLimit-* pair of a response (null where absent). */
const limitsOf = (headers: Headers | Readonly<Record<string, string>>) => {
  const get = (name: string) => (headers instanceof Headers ? headers.get(name) : headers[name]) ?? null
  return { agent: get("x-ratelimit-agent-remaining"), client: get("x-ratelimit-client-remaining") }
}

/** A (owned by `owners[0]`) hires B (`owners[1]`) with each of `texts`, inside a chain paid by `payer`. */
const chainOfTwo = (owners: readonly [number, number], payer: number, texts: ReadonlyArray<string>) =>
  Effect.gen(function* () {
    const { baseUrl } = yield* TestEnv
    const [a, b] = [yield* fakeAgent(), yield* fakeAgent("echo")]
    const A = yield* chainAgent(devAccount(owners[0]), a.url)
    const B = yield* chainAgent(devAccount(owners[1]), b.url)
    a.setBehaviour({ kind: "call-back", baseUrl, calls: texts.map((text) => echoCall(B, text)) })
    const root = yield* startChain(devAccount(payer), A, "1.00")
    expect(root.status, JSON.stringify(root.body)).toBe(200)
    return { A, B, a, root, calls: subCalls(root.body.data.output) }
  })

// Three requests per client per window: a root call and two sub-calls fill it (the test clock stands still, so the
// window does not turn over during a test).
layer(TestApp({ BACKGROUND_WORKERS: "false", RATE_LIMIT_CLIENT_PER_WINDOW: "3" }))("chained calls' views", (it) => {
  it.scoped("X-RateLimit-* on chained answers and on refusals after the limits were counted (RATE_LIMITED), none before them", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(Date.now())
      const { baseUrl } = yield* TestEnv
      const { B, a, root, calls } = yield* chainOfTwo([1, 2], 9, ["one", "two", "three"])
      // The root's window (1 of 3 used), each chained answer's, and the chained refusal's (counted, then given back).
      expect(limitsOf(root.headers)).toEqual({ agent: "599", client: "2" })
      expect(a.chainedAnswers.map((r) => [r.status, limitsOf(r.headers)])).toEqual([
        [200, { agent: "599", client: "1" }],
        [200, { agent: "598", client: "0" }],
        [429, { agent: "598", client: "0" }]
      ])
      expect(calls[2]?.body).toMatchObject({ error: { code: "RATE_LIMITED" } })
      // The payer's own paid call, refused over its window: the headers say why.
      const refused = yield* execute(devAccount(9), { targetAgentId: B, capabilityId: "echo", input: { text: "direct" } })
      expect({ status: refused.status, code: refused.body.error?.code }).toEqual({ status: 429, code: "RATE_LIMITED" })
      expect(limitsOf(refused.headers)).toEqual({ agent: "598", client: "0" })
      expect(Number(refused.headers.get("retry-after"))).toBeGreaterThan(0)
      // Refused before the limits were counted (a bad chain token): no X-RateLimit-*.
      const badToken = yield* Effect.promise(() =>
        call(`${baseUrl}/api/v1/execute`, { method: "POST", json: echoCall(B, "x").body, headers: { "X-Chain-Token": "bm90.YXRva2Vu" } }))
      expect(badToken.body.error?.code).toBe("CHAIN_TOKEN_INVALID")
      expect(limitsOf(badToken.headers)).toEqual({ agent: null, client: null })
    }))

  it.scoped("A hires B twice: B's transactions name A as requesting_agent; A's history lists what it spent on B beside what it provided", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(Date.now())
      const [ownerA, ownerB] = [devAccount(3), devAccount(4)]
      const { A, B, root, calls } = yield* chainOfTwo([3, 4], 8, ["one", "two"])
      const rootTx: string = root.body.data.transactionId
      const hired = calls.map((r) => (r.body as { data: { transactionId: string } }).data.transactionId)
      expect(hired).toHaveLength(2)

      // The single view names the requester of a chained call; a client's call has none.
      for (const tx of hired) {
        expect((yield* api(`/api/v1/payments/tx/${tx}`)).body.data).toMatchObject({ id: tx, requesting_agent: A, providing_agent: B, amount: "0.011000" })
      }
      expect((yield* api(`/api/v1/payments/tx/${rootTx}`)).body.data).toMatchObject({ requesting_agent: null, providing_agent: A })

      // A's history: what it provided (the root call) and what it spent hiring B; B's: what it provided, for A.
      const historyOf = (owner: typeof ownerA, agentId: string, query = "") =>
        Effect.flatMap(Effect.promise(() => walletAuth(owner, agentId)), (headers) => api(`/api/v1/payments/history/${agentId}${query}`, headers))
      const ofA: Array<{ id: string }> = (yield* historyOf(ownerA, A)).body.data
      expect(ofA.map((t) => t.id).sort()).toEqual([rootTx, ...hired].sort())
      const rowOf = (id: string) => ofA.find((t) => t.id === id)
      expect(rowOf(rootTx)).toMatchObject({ requesting_agent: null, providing_agent: A })
      for (const id of hired) expect(rowOf(id)).toMatchObject({ requesting_agent: A, providing_agent: B, amount: "0.011000", status: "completed" })
      const ofB = (yield* historyOf(ownerB, B)).body.data
      expect(ofB.map((t: { id: string }) => t.id).sort()).toEqual([...hired].sort())
      for (const t of ofB) expect(t).toMatchObject({ requesting_agent: A, providing_agent: B })
      // Pages of the merged history are disjoint and complete.
      const first = (yield* historyOf(ownerA, A, "?limit=2")).body.data
      const second = (yield* historyOf(ownerA, A, "?limit=2&offset=2")).body.data
      expect(first).toHaveLength(2)
      expect([...first, ...second].map((t: { id: string }) => t.id).sort()).toEqual([rootTx, ...hired].sort())
    }))
})
