// Issue 29, lever 1: how much the Effect fiber runtime does per paid call. Every instruction the runtime evaluates
// (flatMap, sync, suspend, async, fiber-ref access, ...) is counted while sequential paid calls run (payment headers
// signed beforehand, no 402 round), and the count per call is held under a budget: the hot path stays a few large
// effects, not thousands of small ones. `OPS_DETAIL=1` prints the instructions by kind.
import { expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import { call, devAccount, signPayment } from "../support/clients.js"
import { fakeAgent } from "../support/agents.js"
import { TestApp, TestEnv } from "../support/harness.js"
import { registerAgent } from "../support/scenario.js"

/** The runtime's instruction handlers (effect 3.x `FiberRuntime`): one call per instruction evaluated. */
const INSTRUCTIONS = [
  "Sync", "Success", "Failure", "OnSuccess", "OnFailure", "OnSuccessAndFailure", "Async", "Yield", "While", "Iterator",
  "WithRuntime", "UpdateRuntimeFlags", "Tag", "Left", "Right", "Some", "None", "Micro", "Commit", "OnStep"
]

/** About 1,870 today (2026-11; 2,290 before session 3 settlecpu), most of them in settling, calling the agent and recording (bench/analysis.md, session 3, runtime and settlecpu). */
const BUDGET_PER_CALL = 4_000
const CALLS = 10

/** Counts the instructions evaluated (and fibers resumed) until the returned `restore` runs. */
const countInstructions = Effect.promise(async () => {
  const runtime: unknown = await import(new URL("../../node_modules/effect/dist/esm/internal/fiberRuntime.js", import.meta.url).href)
  if (typeof runtime !== "object" || runtime === null || !("FiberRuntime" in runtime) || typeof runtime.FiberRuntime !== "function") {
    throw new Error("effect's FiberRuntime is not where this test expects it")
  }
  const proto: Record<string, unknown> = runtime.FiberRuntime.prototype
  const counts = new Map<string, number>()
  const originals = new Map<string, unknown>()
  for (const name of INSTRUCTIONS) {
    const original = proto[name]
    if (typeof original !== "function") continue
    originals.set(name, original)
    proto[name] = function (this: unknown, ...args: Array<unknown>) {
      counts.set(name, (counts.get(name) ?? 0) + 1)
      return original.apply(this, args)
    }
  }
  return {
    counts,
    total: () => [...counts.values()].reduce((a, b) => a + b, 0),
    restore: () => originals.forEach((original, name) => (proto[name] = original))
  }
})

layer(TestApp({ BACKGROUND_WORKERS: "false", RATE_LIMIT_CLIENT_PER_WINDOW: "1000", RATE_LIMIT_AGENT_PER_WINDOW: "1000" }), { excludeTestServices: true })(
  "runtime work per paid call",
  (it) => {
    it.scoped("a paid call runs a few thousand runtime instructions, not tens of thousands", () =>
      Effect.gen(function* () {
        const { baseUrl } = yield* TestEnv
        const agent = yield* fakeAgent("echo")
        const agentId = yield* registerAgent(devAccount(1), agent.url, { tier: "premium" })
        // Price of the premium echo capability: 0.01 + the 0.001 platform fee.
        const headers = yield* Effect.promise(() =>
          Promise.all(Array.from({ length: CALLS + 2 }, (_, i) => signPayment({ account: devAccount(2 + (i % 4)), value: 11_000n }))))
        const paidCall = (i: number) =>
          Effect.promise(() =>
            call(`${baseUrl}/api/v1/execute`, {
              method: "POST",
              json: { targetAgentId: agentId, capabilityId: "echo", input: { text: `call ${i}` } },
              headers: { "X-PAYMENT": headers[i]!.header }
            }))
        // Warm: caches filled, code paths compiled.
        for (const i of [CALLS, CALLS + 1]) expect((yield* paidCall(i)).status).toBe(200)
        const counter = yield* Effect.acquireRelease(countInstructions, (c) => Effect.sync(c.restore))
        for (let i = 0; i < CALLS; i++) expect((yield* paidCall(i)).status).toBe(200)
        counter.restore()
        const perCall = counter.total() / CALLS
        if (process.env["OPS_DETAIL"] === "1") {
          console.log(`runtime instructions per paid call: ${perCall.toFixed(0)}; ${[...counter.counts].sort((a, b) => b[1] - a[1]).map(([k, v]) => `${k} ${(v / CALLS).toFixed(0)}`).join(", ")}`)
        }
        expect(perCall).toBeGreaterThan(100)
        expect(perCall).toBeLessThan(BUDGET_PER_CALL)
      }))
  }
)
