// Issue 24 #3: a chained call's result is read back only by its rightful holders. Its request id is public (the chain
// view lists it) and its chain id sits in every token, so nothing computable from them may unlock its output: the old
// proof `chain-budget:<requestId>` is refused on GET /execute/:id, on retry and on the MCP status tool; the caller keeps
// the random handle it was given, and the chain's payer reads every call with the root payment's header.
import { expect, layer } from "@effect/vitest"
import { Effect, TestClock } from "effect"
import { createHash } from "node:crypto"
import { readFileSync } from "node:fs"
import { fileURLToPath } from "node:url"
import { TreasuryWorker } from "../../services/treasury/TreasuryWorker.js"
import { type ChainedResult, fakeAgent } from "../support/agents.js"
import { echoCall, startChain } from "../support/chains.js"
import { call, devAccount, walletAuth } from "../support/clients.js"
import { TestApp, TestEnv } from "../support/harness.js"
import { mcpSession } from "../support/mcp.js"
import { registerAgent } from "../support/scenario.js"

const api = (path: string, init: { method?: string; headers?: Record<string, string> } = {}) =>
  Effect.flatMap(TestEnv, ({ baseUrl }) => Effect.promise(() => call(`${baseUrl}${path}`, { method: init.method ?? "GET", headers: init.headers ?? {} })))

/** The sub-call results a call-back agent put in its output. */
const subCalls = (output: unknown): Array<ChainedResult> =>
  typeof output === "object" && output !== null && "calls" in output && Array.isArray(output.calls) ? output.calls : []

/** One agent per wallet: registered the first time, pointed at the test's fake agent with chaining on every time. */
const agentIds = new Map<number, string>()
const chainAgent = (owner: number, url: string) =>
  Effect.gen(function* () {
    const { baseUrl } = yield* TestEnv
    const account = devAccount(owner)
    const id = agentIds.get(owner) ?? (yield* registerAgent(account, url))
    agentIds.set(owner, id)
    const patched = yield* Effect.promise(async () =>
      call(`${baseUrl}/api/v1/agents/${id}`, {
        method: "PATCH",
        headers: await walletAuth(account, id),
        json: { endpoints: { execution: url }, chainSettings: { chain_enabled: true, chain_max_depth: 3 } }
      }))
    expect(patched.status, JSON.stringify(patched.body)).toBe(200)
    return id
  })

const mcpClient = mcpSession("chain-readback-test")

/**
 * A completed chain A → B paid by dev account 9 (A and B owned by dev accounts `owners`): the root response and what
 * A got back for its sub-call to B.
 */
const chainWithOneSubCall = (owners: readonly [number, number]) => Effect.gen(function* () {
  yield* TestClock.setTime(Date.now())
  yield* (yield* TreasuryWorker).processDue
  const { baseUrl } = yield* TestEnv
  const [a, b] = [yield* fakeAgent(), yield* fakeAgent("echo")]
  const A = yield* chainAgent(owners[0], a.url)
  const B = yield* chainAgent(owners[1], b.url)
  a.setBehaviour({ kind: "call-back", baseUrl, calls: [echoCall(B, "private to the chain")] })
  const root = yield* startChain(devAccount(9), A, "0.50")
  expect(root.status, JSON.stringify(root.body)).toBe(200)
  const [sub] = subCalls(root.body.data.output)
  expect(sub?.status).toBe(200)
  const subData = (sub?.body as { data: { requestId: string; output: unknown; chain: { readHandle?: string } } }).data
  // The child's request id is public: the chain view shows it to anyone.
  const view = (yield* api(`/api/v1/chains/${root.body.data.transactionId}`)).body.data
  const childId: string = view.tree.children[0].requestId
  expect(childId).toBe(subData.requestId)
  return { root, childId, sub: subData, subPaymentUsed: sub?.paymentUsed }
})

const PRIVATE = { echo: { text: "private to the chain" } }

layer(TestApp({ BACKGROUND_WORKERS: "false" }), { timeout: 120_000 })("chained calls' read-back", (it) => {
  it.scoped("attack: `X-PAYMENT: chain-budget:<child request id>` on GET /api/v1/execute/<child> shows no output and no cost (either header)", () =>
    Effect.gen(function* () {
      const { childId } = yield* chainWithOneSubCall([1, 2])
      const forged = `chain-budget:${childId}`
      const read = yield* api(`/api/v1/execute/${childId}`, { headers: { "X-PAYMENT": forged } })
      expect(read.status).toBe(200)
      expect(read.body.data.status).toBe("completed")
      expect(read.body.data.output).toBeUndefined()
      expect(read.body.data.cost).toBeUndefined()
      expect(read.body.data.message).toMatch(/payment header/)
      const v2 = yield* api(`/api/v1/execute/${childId}`, { headers: { "PAYMENT-SIGNATURE": forged } })
      expect(v2.body.data.output).toBeUndefined()
    }))

  it.scoped("attack: `X-PAYMENT: chain-budget:<child request id>` on POST /api/v1/execute/<child>/retry is RETRY_NOT_AUTHORIZED", () =>
    Effect.gen(function* () {
      const { childId } = yield* chainWithOneSubCall([1, 2])
      const retried = yield* api(`/api/v1/execute/${childId}/retry`, { method: "POST", headers: { "X-PAYMENT": `chain-budget:${childId}` } })
      expect(retried.status).toBe(403)
      expect(retried.body.error?.code).toBe("RETRY_NOT_AUTHORIZED")
    }))

  it.scoped("attack: payment `chain-budget:<child request id>` on the MCP get_execution_status tool shows no output and no cost", () =>
    Effect.gen(function* () {
      const { childId } = yield* chainWithOneSubCall([1, 2])
      const { client } = yield* mcpClient
      const status = yield* Effect.promise(() =>
        client.callTool({ name: "get_execution_status", arguments: { requestId: childId, payment: `chain-budget:${childId}` } }))
      expect(status.isError ?? false).toBe(false)
      const seen = status.structuredContent as Record<string, unknown>
      expect(seen.status).toBe("completed")
      expect(seen.output).toBeUndefined()
      expect(seen.cost).toBeUndefined()
    }))

  it.scoped("the caller reads its sub-call again with the random handle it was given (X-PAYMENT-USED and chain.readHandle), over HTTP and MCP", () =>
    Effect.gen(function* () {
      const { childId, sub, subPaymentUsed } = yield* chainWithOneSubCall([1, 2])
      expect(sub.output).toMatchObject(PRIVATE)
      const handle = sub.chain.readHandle
      expect(handle).toMatch(/^chr_[A-Za-z0-9_-]{43}$/)
      expect(subPaymentUsed).toBe(handle)
      expect(handle).not.toContain(childId)

      const read = yield* api(`/api/v1/execute/${childId}`, { headers: { "X-PAYMENT": handle ?? "" } })
      expect(read.body.data).toMatchObject({ status: "completed", output: PRIVATE, cost: { total: "0.011000" } })
      const { client } = yield* mcpClient
      const status = yield* Effect.promise(() => client.callTool({ name: "get_execution_status", arguments: { requestId: childId, payment: handle } }))
      expect(status.structuredContent).toMatchObject({ output: PRIVATE })
      // Only the hash is stored.
      const { sql } = yield* TestEnv
      const stored = yield* sql<{ headerSha256: string; signature: string }>`
        SELECT p.header_sha256, p.signature FROM payments p JOIN executions e ON e.payment_id = p.id WHERE e.id = ${childId}`
      expect(stored[0]?.signature).toBe("chain-budget")
      expect(stored[0]?.headerSha256).toMatch(/^[0-9a-f]{64}$/)
      expect(JSON.stringify(stored)).not.toContain(handle ?? "-")
    }))

  it.scoped("the chain's payer reads a sub-call's result with the root payment's header (its X-PAYMENT-USED); a handle of another call does not", () =>
    Effect.gen(function* () {
      const { childId, root, sub } = yield* chainWithOneSubCall([1, 2])
      const rootPayment = root.headers.get("x-payment-used")
      expect(rootPayment).toBeTruthy()
      const read = yield* api(`/api/v1/execute/${childId}`, { headers: { "X-PAYMENT": rootPayment ?? "" } })
      expect(read.body.data).toMatchObject({ status: "completed", output: PRIVATE })

      // Another chain's payer (another chain's handle) reads nothing of this one.
      const other = yield* chainWithOneSubCall([3, 4])
      const foreign = yield* api(`/api/v1/execute/${childId}`, { headers: { "X-PAYMENT": other.sub.chain.readHandle ?? "" } })
      expect(foreign.body.data.output).toBeUndefined()
      const foreignRoot = yield* api(`/api/v1/execute/${childId}`, { headers: { "X-PAYMENT": other.root.headers.get("x-payment-used") ?? "" } })
      expect(foreignRoot.body.data.output).toBeUndefined()
      // The sub-call's handle reads that call only, not its chain's root.
      const rootRead = yield* api(`/api/v1/execute/${root.body.data.requestId}`, { headers: { "X-PAYMENT": sub.chain.readHandle ?? "" } })
      expect(rootRead.body.data.output).toBeUndefined()
    }))

  it.scoped("a handle stored before the fix (sha256 of chain-budget:<id>) stops working once migration 0022 ran; the chain's payer still reads", () =>
    Effect.gen(function* () {
      const { childId, root } = yield* chainWithOneSubCall([1, 2])
      const { sql } = yield* TestEnv
      const forged = `chain-budget:${childId}`
      const old = createHash("sha256").update(forged).digest("hex")
      yield* sql`UPDATE payments SET header_sha256 = ${old} WHERE id = (SELECT payment_id FROM executions WHERE id = ${childId})`
      expect((yield* api(`/api/v1/execute/${childId}`, { headers: { "X-PAYMENT": forged } })).body.data.output).toMatchObject(PRIVATE)
      yield* sql.unsafe(readFileSync(fileURLToPath(new URL("../../migrations/0022_chain_read_handles.sql", import.meta.url)), "utf8"))
      expect((yield* api(`/api/v1/execute/${childId}`, { headers: { "X-PAYMENT": forged } })).body.data.output).toBeUndefined()
      const byPayer = yield* api(`/api/v1/execute/${childId}`, { headers: { "X-PAYMENT": root.headers.get("x-payment-used") ?? "" } })
      expect(byPayer.body.data.output).toMatchObject(PRIVATE)
    }))
})
