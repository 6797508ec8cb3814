// An RPC that misbehaves (issue 26): an anvil of the test's own behind a proxy that answers 429, 5xx, hangs, serves a
// stale head or loses the answer to a send. /health degrades (and is 503 only when nothing answers), paid calls answer
// within their bound, and every accepted payment and every refund moves money exactly once: ledger = chain.
import { expect, layer } from "@effect/vitest"
import { Effect, TestClock } from "effect"
import { createPublicClient, createTestClient, http } from "viem"
import type { PrivateKeyAccount } from "viem/accounts"
import { devnetChain } from "../../layers/devnet/accounts.js"
import { MachineHost } from "../../machines/Host.js"
import { Payments } from "../../services/payments/Payments.js"
import { Refunds } from "../../services/refunds/Refunds.js"
import { TreasuryWorker } from "../../services/treasury/TreasuryWorker.js"
import { fakeAgent } from "../support/agents.js"
import { call } from "../support/clients.js"
import { TestEnv } from "../support/harness.js"
import { recordingLogs } from "../support/logs.js"
import type { ProductionChain } from "../support/productionChain.js"
import { appBehindRpcProxy, OwnChain, Proxy } from "../support/proxiedChain.js"
import { execute, ledgerMatchesChain, registerAgent } from "../support/scenario.js"

const PRICE = 11_000n

const App = appBehindRpcProxy(
  { LOG_FORMAT: "json", LOG_LEVEL: "info", BACKGROUND_WORKERS: "false", EXECUTION_RETRY_WINDOW_SECONDS: "600", TREASURY_RECEIPT_WAIT_MS: "3000", RATE_LIMIT_CLIENT_PER_WINDOW: "1000" },
  8
)

/** Our clock starts at the real time (payments are signed against it), then only the test moves it. */
const realNow = Effect.flatMap(Effect.sync(() => Date.now()), (now) => TestClock.setTime(now))

const health = Effect.flatMap(TestEnv, ({ baseUrl }) =>
  Effect.promise(async () => {
    const started = Date.now()
    const answer = await call(`${baseUrl}/health`)
    return { ...answer, ms: Date.now() - started }
  }))

/** Wall-clock time of a request (the test's clock is a TestClock). */
const timed = <A extends { status: number }, R>(effect: Effect.Effect<A, never, R>) =>
  Effect.gen(function* () {
    const started = Date.now()
    const answer = yield* effect
    return { ...answer, ms: Date.now() - started }
  })

/**
 * A paid call's answer while the chain misbehaves: done (200), accepted and held (202), unavailable (503), or refused
 * before any money moved because the payment could not be checked on chain (402 with a retryable reason).
 */
const clearAnswer = (paid: { status: number; body: { error?: { details?: unknown } } }) =>
  [200, 202, 503].includes(paid.status) ||
  (paid.status === 402 && JSON.stringify(paid.body.error?.details ?? {}).includes('"reason":"unexpected_verify_error"'))

/** Every test leaves the proxy passing, whatever happened in it. */
const passAfter = <A, E, R>(test: Effect.Effect<A, E, R>) =>
  Effect.flatMap(Proxy, (proxy) => Effect.ensuring(test, Effect.sync(() => proxy.setMode({ _tag: "pass" }))))

/** Runs the recovery pass and the treasury worker after every lease has run out, until nothing is held. */
const recoverAll = Effect.gen(function* () {
  const payments = yield* Payments
  const worker = yield* TreasuryWorker
  const { sql } = yield* TestEnv
  for (let pass = 0; pass < 5; pass++) {
    yield* TestClock.adjust(61_000)
    yield* worker.processDue
    yield* payments.recoverDue
    const [open] = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM payments WHERE status NOT IN ('settled', 'failed')`
    if (open!.n === 0) return
  }
  return yield* Effect.dieMessage("payments still held after five recovery passes")
})

/** What each payer paid the treasury on chain, against what the ledger settled for them. */
const paidExactly = (own: ProductionChain, payer: PrivateKeyAccount, before: bigint) =>
  Effect.gen(function* () {
    const { sql } = yield* TestEnv
    const [settled] = yield* sql<{ total: string }>`
      SELECT coalesce(sum(amount), 0)::text AS total FROM payments WHERE payer = ${payer.address.toLowerCase()} AND status = 'settled'`
    const after = yield* Effect.promise(() => own.balanceOf(payer.address))
    return { onChain: before - after, settled: BigInt(settled!.total) }
  })

layer(App, { timeout: 120_000 })("an RPC that misbehaves", (it) => {
  it.scoped("/health is degraded (200, chain.problem) while the RPC answers 429, 5xx or a stale head, and ok again after", () =>
    passAfter(Effect.gen(function* () {
      const own = yield* OwnChain
      const proxy = yield* Proxy
      const anvil = createTestClient({ mode: "anvil", chain: devnetChain(own.rpcUrl), transport: http(own.rpcUrl) })
      const reader = createPublicClient({ chain: devnetChain(own.rpcUrl), transport: http(own.rpcUrl) })
      const fine = yield* health
      expect(fine.status).toBe(200)
      expect(fine.body.data.status).toBe("ok")

      proxy.setMode({ _tag: "429", retryAfterSeconds: 1 })
      const limited = yield* health
      expect(limited.status).toBe(200)
      expect(limited.body.data).toMatchObject({ status: "degraded", chain: { problem: { kind: "errors" } } })
      expect(limited.ms).toBeLessThan(2_000)

      proxy.setMode({ _tag: "5xx", status: 503 })
      const failing = yield* health
      expect(failing.status).toBe(200)
      expect(failing.body.data).toMatchObject({ status: "degraded", chain: { problem: { kind: "errors" } } })

      // A node that fell behind: the head answered is older than one this process already saw.
      proxy.setMode({ _tag: "pass" })
      const head = yield* Effect.promise(() => reader.getBlockNumber())
      yield* Effect.promise(() => anvil.mine({ blocks: 5 }))
      expect((yield* health).body.data.status).toBe("ok")
      proxy.setMode({ _tag: "stale", block: head })
      const stale = yield* health
      expect(stale.status).toBe(200)
      expect(stale.body.data).toMatchObject({ status: "degraded", chain: { blockNumber: head.toString(), problem: { kind: "stale" } } })

      proxy.setMode({ _tag: "pass" })
      const again = yield* health
      expect(again.body.data.status).toBe("ok")
      expect(again.body.data.chain.problem).toBeUndefined()
    })), { timeout: 120_000 })

  it.scoped("a hanging RPC: /health answers 503 within 2 s, paid calls answer within their bound, nothing is charged twice after", () =>
    passAfter(Effect.gen(function* () {
      yield* realNow
      const own = yield* OwnChain
      const proxy = yield* Proxy
      const agent = yield* fakeAgent()
      const agentId = yield* registerAgent(own.payers[0]!, agent.url)
      const payer = own.payers[1]!
      const before = yield* Effect.promise(() => own.balanceOf(payer.address))

      proxy.setMode({ _tag: "hang" })
      const down = yield* health
      expect(down.status).toBe(503)
      expect(down.body.error?.details).toEqual({ component: "chain" })
      expect(down.ms).toBeLessThan(2_000)
      const paid = yield* timed(execute(payer, { targetAgentId: agentId, capabilityId: "echo", input: { text: "hang" } }))
      expect(paid.ms).toBeLessThan(30_000)
      expect(clearAnswer(paid)).toBe(true)

      proxy.setMode({ _tag: "pass" })

      // Past the verification: the settlement's send hangs on every try; the call answers, its output held.
      const logs = yield* recordingLogs
      proxy.burst({ _tag: "hang" }, 3, ["eth_sendRawTransaction"])
      const held = yield* timed(execute(payer, { targetAgentId: agentId, capabilityId: "echo", input: { text: "hanging send" } }))
      expect(held.ms).toBeLessThan(20_000)
      expect(held.status).toBe(200)
      expect(held.body.data.settlement.status).not.toBe("settled")
      expect(held.body.data.output).toBeUndefined()

      yield* recoverAll
      // The held settlement's trouble and its retry are logged with its payment id.
      const { sql } = yield* TestEnv
      const [payment] = yield* sql<{ id: string }>`SELECT payment_id AS id FROM executions WHERE id = ${held.body.data.requestId}`
      expect(logs.find("settlement.retrying", { paymentId: payment!.id })).toEqual([expect.objectContaining({ level: "warn", cause: expect.stringMatching(/./) })])
      expect(logs.find("settlement.retry", { paymentId: payment!.id, trigger: "RETRY_DUE" }).length).toBeGreaterThan(0)
      expect(logs.find("treasury.broadcast_failed").length).toBeGreaterThan(0)
      const { onChain, settled } = yield* paidExactly(own, payer, before)
      expect(onChain).toBe(settled)
      expect(onChain).toBe((paid.status === 200 || paid.status === 202 ? 2n : 1n) * PRICE)
      expect(yield* ledgerMatchesChain).toBe(0n)
    })), { timeout: 120_000 })

  it.scoped("429 and 5xx bursts during paid calls: each answers within its bound, and every accepted payment settles once", () =>
    passAfter(Effect.gen(function* () {
      yield* realNow
      const own = yield* OwnChain
      const proxy = yield* Proxy
      const agent = yield* fakeAgent()
      const agentId = yield* registerAgent(own.payers[2]!, agent.url)
      const payer = own.payers[3]!
      const before = yield* Effect.promise(() => own.balanceOf(payer.address))
      const statuses: Array<number> = []
      const bursts = [
        { _tag: "429", retryAfterSeconds: 1 } as const,
        { _tag: "5xx", status: 502 } as const,
        { _tag: "5xx", status: 503 } as const,
        { _tag: "429", retryAfterSeconds: 30 } as const
      ]
      for (const [i, mode] of bursts.entries()) {
        for (const requests of [1, 2, 4, 12]) {
          proxy.burst(mode, requests)
          const paid = yield* timed(execute(payer, { targetAgentId: agentId, capabilityId: "echo", input: { text: `burst ${i}/${requests}` } }))
          expect(paid.ms).toBeLessThan(30_000)
          expect(clearAnswer(paid)).toBe(true)
          statuses.push(paid.status)
        }
      }
      let held = 0
      // Bursts aimed past the verification, at the settlement's send and its receipt: more than the retries absorb.
      for (const methods of [["eth_sendRawTransaction"], ["eth_getTransactionReceipt"], ["eth_estimateGas", "eth_feeHistory", "eth_getBlockByNumber", "eth_maxPriorityFeePerGas"]]) {
        proxy.burst({ _tag: "5xx", status: 502 }, 12, methods)
        const paid = yield* timed(execute(payer, { targetAgentId: agentId, capabilityId: "echo", input: { text: methods.join(",") } }))
        expect(paid.ms).toBeLessThan(30_000)
        expect(clearAnswer(paid)).toBe(true)
        statuses.push(paid.status)
        if (paid.status === 200 && paid.body.data?.settlement?.status !== "settled") held++
      }
      // The faults reached the money: calls answered with their output held until the payment settles.
      expect(held).toBeGreaterThan(0)
      proxy.setMode({ _tag: "pass" })
      yield* recoverAll
      const { onChain, settled } = yield* paidExactly(own, payer, before)
      expect(onChain).toBe(settled)
      const accepted = statuses.filter((s) => s === 200 || s === 202).length
      expect(onChain).toBe(BigInt(accepted) * PRICE)
      expect(onChain % PRICE).toBe(0n)
      expect(proxy.counts()["eth_blockNumber"] ?? 0).toBeGreaterThan(0)
      expect(yield* ledgerMatchesChain).toBe(0n)
    })), { timeout: 120_000 })

  it.scoped("a lost answer to eth_sendRawTransaction (a settlement, then a refund): the transaction went through, one transfer, booked once", () =>
    passAfter(Effect.gen(function* () {
      yield* realNow
      const own = yield* OwnChain
      const proxy = yield* Proxy
      const { sql } = yield* TestEnv
      const agent = yield* fakeAgent()
      const agentId = yield* registerAgent(own.payers[4]!, agent.url)
      const payer = own.payers[5]!
      const before = yield* Effect.promise(() => own.balanceOf(payer.address))

      // Settlement: every answer to a send is lost (502, then dropped connections); the first send reached the chain.
      proxy.loseSendAnswers(30, "502")
      const paid = yield* execute(payer, { targetAgentId: agentId, capabilityId: "echo", input: { text: "lost" } })
      expect([200, 202]).toContain(paid.status)
      expect(proxy.lostSends()).toBeGreaterThan(0)
      proxy.loseSendAnswers(0, "502")
      yield* recoverAll
      expect(yield* paidExactly(own, payer, before)).toEqual({ onChain: PRICE, settled: PRICE })

      // Refund: a failed call whose retry window closed; the answers to its send are dropped.
      const broken = yield* fakeAgent({ kind: "json", status: 200, body: { wrong: true } })
      const brokenId = yield* registerAgent(own.payers[6]!, broken.url, { tier: "premium" })
      const failed = yield* execute(payer, { targetAgentId: brokenId, capabilityId: "echo", input: { text: "bad" } })
      expect(failed.status).toBe(502)
      yield* TestClock.adjust(601_000)
      const host = yield* MachineHost
      while ((yield* host.fireDue) > 0) { /* the retry window closes */ }
      const lostBefore = proxy.lostSends()
      proxy.loseSendAnswers(30, "drop")
      yield* (yield* Refunds).sendDue
      expect(proxy.lostSends()).toBeGreaterThan(lostBefore)
      proxy.loseSendAnswers(0, "drop")
      yield* recoverAll
      for (let i = 0; i < 3; i++) {
        yield* TestClock.adjust(31_000)
        yield* (yield* TreasuryWorker).processDue
      }
      const refunds = yield* sql<{ status: string; txHash: string }>`SELECT status, tx_hash FROM refunds`
      expect(refunds.map((r) => r.status)).toEqual(["confirmed"])
      const txs = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM treasury_txs WHERE purpose = 'refund'`
      expect(txs[0]!.n).toBe(1)
      // Paid once for the good call, the failed call's payment settled and refunded once.
      expect(yield* paidExactly(own, payer, before)).toEqual({ onChain: PRICE, settled: 2n * PRICE })
      expect(yield* ledgerMatchesChain).toBe(0n)
    })), { timeout: 120_000 })
})
