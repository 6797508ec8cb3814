// Chain events through a webhook: each of chain.partial_failure, chain.budget_warning and chain.depth_limit is caused by
// the operation the spec describes, in a real chain (fake agents hiring each other through the service), and reaches
// the root agent's webhook receiver once, signed, with the data shape docs/webhooks.md documents.
import { expect, layer } from "@effect/vitest"
import { Effect, TestClock } from "effect"
import { createHmac } from "node:crypto"
import type { PrivateKeyAccount } from "viem/accounts"
import { Dispatcher } from "../../services/webhooks/Dispatcher.js"
import { fakeAgent } from "../support/agents.js"
import { chainAgent, echoCall, startChain } from "../support/chains.js"
import { call, devAccount, walletAuth } from "../support/clients.js"
import { TestApp, TestEnv } from "../support/harness.js"
import { type Received, receiver } from "../support/receivers.js"

const realNow = Effect.flatMap(Effect.sync(() => Date.now()), (now) => TestClock.setTime(now))

/** The root agent's owner subscribes its webhook to `events`; the receiver and the secret. */
const subscribe = (owner: PrivateKeyAccount, agentId: string, events: ReadonlyArray<string>) =>
  Effect.gen(function* () {
    const { baseUrl } = yield* TestEnv
    const hook = yield* receiver([204])
    const created = yield* Effect.promise(async () =>
      call(`${baseUrl}/api/v1/webhooks`, { method: "POST", json: { agentId, url: hook.url, events }, headers: await walletAuth(owner, agentId) }))
    expect(created.status).toBe(201)
    return { hook, secret: String(created.body.data.secret) }
  })

/** Everything committed so far is dispatched and sent (the workers are off in this file). */
const deliverAll = Effect.flatMap(Dispatcher, (d) => Effect.zipRight(d.dispatchDue, d.sendDue))

const signedBy = (secret: string, r: Received) =>
  r.headers["x-webhook-signature"] === `sha256=${createHmac("sha256", secret).update(r.body).digest("hex")}`

/** The one post the receiver got: its event, checked signature and data. */
const onlyPost = (hook: { readonly received: ReadonlyArray<Received> }, secret: string) => {
  expect(hook.received).toHaveLength(1)
  const post = hook.received[0]!
  expect(signedBy(secret, post)).toBe(true)
  const body = JSON.parse(post.body) as { event: string; timestamp: string; data: Record<string, unknown> }
  expect(post.headers["x-webhook-event"]).toBe(body.event)
  return body
}

const ID = expect.stringMatching(/^(req|job)_/)
const TX = expect.stringMatching(/^tx_/)

layer(TestApp({ BACKGROUND_WORKERS: "false" }))("chain events through a webhook", (it) => {
  it.scoped("a hired agent that fails: the root agent's webhook gets chain.partial_failure once, with what went back to the budget", () =>
    Effect.gen(function* () {
      yield* realNow
      const { baseUrl } = yield* TestEnv
      const [a, b] = [yield* fakeAgent(), yield* fakeAgent({ kind: "json", status: 500, body: { error: "boom" } })]
      const A = yield* chainAgent(devAccount(1), a.url)
      const B = yield* chainAgent(devAccount(2), b.url)
      a.setBehaviour({ kind: "call-back", baseUrl, calls: [echoCall(B, "fails")] })
      const { hook, secret } = yield* subscribe(devAccount(1), A, ["chain.partial_failure"])
      const root = yield* startChain(devAccount(9), A, "0.50")
      expect(root.status).toBe(200)
      yield* deliverAll
      yield* deliverAll
      const { event, data } = onlyPost(hook, secret)
      expect(event).toBe("chain.partial_failure")
      expect(data).toEqual({
        chainId: root.body.data.chain.chainId,
        requestId: ID,
        transactionId: TX,
        agentId: B,
        depth: 1,
        error: expect.any(String),
        returned: "0.011000",
        remainingBudget: "0.489000"
      })
    }))

  it.scoped("a sub-call that leaves less than 20% of the budget: chain.budget_warning once (the next one under 20% warns no more)", () =>
    Effect.gen(function* () {
      yield* realNow
      const { baseUrl } = yield* TestEnv
      const [a, b] = [yield* fakeAgent(), yield* fakeAgent("echo")]
      const A = yield* chainAgent(devAccount(3), a.url)
      const B = yield* chainAgent(devAccount(4), b.url)
      // 0.08 budget, 0.011 a call: the root leaves 0.069; sub-calls leave 0.058, 0.047, 0.036, 0.025, 0.014 (17.5%: the
      // warning) and 0.003 (under 20% again: no second warning).
      a.setBehaviour({ kind: "call-back", baseUrl, calls: ["1", "2", "3", "4", "5", "6"].map((n) => echoCall(B, n)) })
      const { hook, secret } = yield* subscribe(devAccount(3), A, ["chain.budget_warning"])
      const root = yield* startChain(devAccount(9), A, "0.08")
      expect(root.status).toBe(200)
      expect(b.calls).toHaveLength(6)
      yield* deliverAll
      yield* deliverAll
      const { event, data } = onlyPost(hook, secret)
      expect(event).toBe("chain.budget_warning")
      expect(data).toEqual({ chainId: root.body.data.chain.chainId, totalBudget: "0.080000", remainingBudget: "0.014000", threshold: "20%" })
    }))

  it.scoped("a call made at the chain's maximum depth: chain.depth_limit once, naming the call and the limit", () =>
    Effect.gen(function* () {
      yield* realNow
      const { baseUrl } = yield* TestEnv
      const [a, b] = [yield* fakeAgent(), yield* fakeAgent("echo")]
      const A = yield* chainAgent(devAccount(5), a.url, { chain_max_depth: 1 })
      const B = yield* chainAgent(devAccount(6), b.url)
      a.setBehaviour({ kind: "call-back", baseUrl, calls: [echoCall(B, "at the limit")] })
      const { hook, secret } = yield* subscribe(devAccount(5), A, ["chain.*"])
      const root = yield* startChain(devAccount(9), A, "1.00")
      expect(root.status).toBe(200)
      yield* deliverAll
      yield* deliverAll
      const posts = hook.received.map((r) => ({ r, body: JSON.parse(r.body) as { event: string; data: Record<string, unknown> } }))
      expect(posts.map((p) => p.body.event).sort()).toEqual(["chain.child_spawned", "chain.completed", "chain.depth_limit", "chain.started"])
      const limit = posts.find((p) => p.body.event === "chain.depth_limit")!
      expect(signedBy(secret, limit.r)).toBe(true)
      const spawned = posts.find((p) => p.body.event === "chain.child_spawned")!.body.data
      expect(limit.body.data).toEqual({
        chainId: root.body.data.chain.chainId,
        requestId: spawned["requestId"],
        transactionId: TX,
        agentId: B,
        parentRequestId: root.body.data.requestId,
        depth: 1,
        maxDepth: 1
      })
    }))
})
