// Reorgs on an anvil of the test's own (a fresh treasury key, a USDC deployed for the run), CHAIN_CONFIRMATIONS = 4:
// a settlement, a refund and a withdrawal are included and booked, then a reorg of depth 1-3 takes them out before
// they are final. Each is sent again from its stored bytes (same nonce: the reorg rolled it back), included again,
// finalized once four blocks hold it, and paid exactly once; the reconciliation compares at the last final block, so
// the ledger equals the chain at every step.
import { expect, layer } from "@effect/vitest"
import { Clock, Context, Effect, Layer, TestClock } from "effect"
import { createPublicClient, createTestClient, type Hex, http } from "viem"
import { devnetChain } from "../../layers/devnet/accounts.js"
import { MachineHost } from "../../machines/Host.js"
import { Reconciliation } from "../../services/treasury/Reconciliation.js"
import { Refunds } from "../../services/refunds/Refunds.js"
import { TreasuryWorker } from "../../services/treasury/TreasuryWorker.js"
import { fakeAgent } from "../support/agents.js"
import { call, walletAuth } from "../support/clients.js"
import { chainOn, type ProductionChain, productionChain } from "../support/productionChain.js"
import { TestApp, TestEnv } from "../support/harness.js"
import { echoCapability, execute, ledgerMatchesChain, registerAgent } from "../support/scenario.js"

const CONFIRMATIONS = 4

class Own extends Context.Tag("test/OwnChain")<Own, ProductionChain>() {}
const OwnLive = Layer.scoped(Own, productionChain({ payers: 6 }))

const App = Layer.unwrapScoped(
  Effect.map(Own, (own) =>
    TestApp(
      { BACKGROUND_WORKERS: "false", EXECUTION_RETRY_WINDOW_SECONDS: "600", TREASURY_RECEIPT_WAIT_MS: "2000", RATE_LIMIT_CLIENT_PER_WINDOW: "1000" },
      { chain: chainOn(own, "devnet", own.rpcUrl, CONFIRMATIONS) }
    ))
).pipe(Layer.provideMerge(OwnLive))

/** Our clock starts at the real time (payments are signed against it), then only the test moves it. */
const realNow = Effect.flatMap(Effect.sync(() => Date.now()), (now) => TestClock.setTime(now))

const tools = (own: ProductionChain) => {
  const chain = devnetChain(own.rpcUrl)
  const anvil = createTestClient({ mode: "anvil", chain, transport: http(own.rpcUrl) })
  const reader = createPublicClient({ chain, transport: http(own.rpcUrl), pollingInterval: 20 })
  return {
    reader,
    head: Effect.promise(() => reader.getBlockNumber({ cacheTime: 0 })),
    /** Replaces the last `depth` blocks with empty ones: what they held is gone (not back in the pool). */
    reorg: (depth: number) => Effect.promise(() => anvil.request({ method: "anvil_reorg" as never, params: [depth, []] as never })),
    mine: (blocks: number) => Effect.promise(() => anvil.mine({ blocks })),
    hasReceipt: (hash: string) => Effect.promise(() => reader.getTransactionReceipt({ hash: hash as Hex }).then(() => true, () => false))
  }
}

interface TxRow { readonly id: string; readonly state: string; readonly txHash: string; readonly blockNumber: string | null; readonly nonce: string }
const txRow = (id: string) =>
  Effect.flatMap(TestEnv, ({ sql }) =>
    sql<TxRow>`SELECT id, state, tx_hash, block_number::text AS block_number, nonce::text AS nonce FROM treasury_txs WHERE id = ${id}`.pipe(
      Effect.map((r) => r[0]!), Effect.orDie))
const newestTx = (purposes: ReadonlyArray<string>) =>
  Effect.flatMap(TestEnv, ({ sql }) =>
    sql<{ id: string }>`SELECT id FROM treasury_txs WHERE purpose IN ${sql.in(purposes)} ORDER BY nonce DESC LIMIT 1`.pipe(
      Effect.flatMap((r) => txRow(r[0]!.id)), Effect.orDie))

/** The reconciliation at the last final block, and that it is at least `block` (it compared what it must). */
const reconciledPast = (block: bigint) =>
  Effect.gen(function* () {
    const result = yield* (yield* Reconciliation).check()
    expect(result.block).toBeGreaterThanOrEqual(block)
    return result.drift
  })

layer(App)("reorgs before finality", (it) => {
  it.scoped("a paid call's settlement taken out by a reorg is sent again, included again, finalized, and charged once", () =>
    Effect.gen(function* () {
      yield* realNow
      const own = yield* Own
      const { sql } = yield* TestEnv
      const chain = tools(own)
      const echo = yield* fakeAgent("echo")
      const agentId = yield* registerAgent(own.payers[0]!, echo.url, { tier: "premium" })
      const payer = own.payers[1]!
      const before = yield* Effect.promise(() => own.balanceOf(payer.address))

      const answer = yield* execute(payer, { targetAgentId: agentId, capabilityId: "echo", input: { text: "reorg me" } })
      expect(answer.status).toBe(200)
      const settlement = yield* newestTx(["settlement", "settlement_batch"])
      // Booked at inclusion, not final: four blocks must hold it.
      expect(settlement.state).toBe("mined")
      const charged = yield* Effect.promise(() => own.balanceOf(payer.address))
      expect(before - charged).toBe(11_000n)

      const head = yield* chain.head
      yield* chain.reorg(Number(head - BigInt(settlement.blockNumber!) + 1n))
      expect(yield* chain.hasReceipt(settlement.txHash)).toBe(false)
      // The authorization was rolled back with it: the payer holds the money again, for now.
      expect(yield* Effect.promise(() => own.balanceOf(payer.address))).toBe(before)
      // The ledger booked it, the chain lost it, but not at a final block: no drift.
      expect(yield* ledgerMatchesChain).toBe(0n)

      const worker = yield* TreasuryWorker
      yield* worker.processDue
      const again = yield* txRow(settlement.id)
      expect(again.state).toBe("mined")
      expect(again.txHash).toBe(settlement.txHash)
      expect(BigInt(again.blockNumber!)).toBeGreaterThan(BigInt(settlement.blockNumber!))
      expect(yield* Effect.promise(() => own.balanceOf(payer.address))).toBe(charged)
      const history = yield* sql<{ eventType: string }>`SELECT event_type FROM machine_transitions WHERE machine = 'treasury' AND actor_id = ${settlement.id} ORDER BY id`
      expect(history.map((h) => h.eventType)).toEqual(expect.arrayContaining(["REORGED", "MINED"]))

      yield* chain.mine(CONFIRMATIONS)
      yield* worker.processDue
      expect((yield* txRow(settlement.id)).state).toBe("confirmed")
      expect(yield* reconciledPast(BigInt(again.blockNumber!))).toBe(0n)
      // At the block it was first booked in (which the reorg emptied) the ledger does not count it either: the block it
      // is in now is recorded beside the append-only ledger.
      expect((yield* (yield* Reconciliation).check(BigInt(settlement.blockNumber!))).drift).toBe(0n)
      expect(yield* Effect.promise(() => own.balanceOf(payer.address))).toBe(before - 11_000n)
      // The execution stays what it was: completed, paid once.
      const [execution] = yield* sql<{ status: string }>`SELECT status FROM executions WHERE agent_id = ${agentId}`
      expect(execution!.status).toBe("completed")
    }), { timeout: 120_000 })

  it.scoped("a refund and a withdrawal taken out by a deeper reorg are sent again in nonce order and paid once each", () =>
    Effect.gen(function* () {
      yield* realNow
      const own = yield* Own
      const { baseUrl } = yield* TestEnv
      const chain = tools(own)
      const worker = yield* TreasuryWorker

      // An agent that earned 2.00 (1.70 available at once: premium) and a broken one whose call will be refunded.
      const echo = yield* fakeAgent("echo")
      const owner = own.payers[2]!
      const earner = yield* registerAgent(owner, echo.url, {
        tier: "premium",
        capabilities: [echoCapability({ pricing: { model: "per-request", basePrice: "2.00", currency: "USDC" } })]
      })
      expect((yield* execute(own.payers[3]!, { targetAgentId: earner, capabilityId: "echo", input: { text: "earn" } })).status).toBe(200)
      const broken = yield* fakeAgent({ kind: "json", status: 200, body: { wrong: true } })
      const failing = yield* registerAgent(own.payers[5]!, broken.url, { tier: "premium" })
      const payer = own.payers[4]!
      const payerBefore = yield* Effect.promise(() => own.balanceOf(payer.address))
      expect((yield* execute(payer, { targetAgentId: failing, capabilityId: "echo", input: { text: "bad" } })).status).toBe(502)
      yield* TestClock.adjust(601_000)
      const host = yield* MachineHost
      while ((yield* host.fireDue) > 0) { /* the retry window closes: a refund is owed */ }

      const ownerBefore = yield* Effect.promise(() => own.balanceOf(owner.address))
      const timestamp = yield* Clock.currentTimeMillis
      const accepted = yield* Effect.promise(async () =>
        call(`${baseUrl}/api/v1/payments/withdraw`, { method: "POST", headers: await walletAuth(owner, earner, { timestamp }), json: { agentId: earner, amount: "1.20" } }))
      expect(accepted.status, JSON.stringify(accepted.body)).toBe(202)
      yield* (yield* Refunds).sendDue
      yield* worker.processDue
      const refund = yield* newestTx(["refund"])
      const payout = yield* newestTx(["withdrawal"])
      expect([refund.state, payout.state]).toEqual(["mined", "mined"])
      expect(yield* Effect.promise(() => own.balanceOf(payer.address))).toBe(payerBefore)
      expect((yield* Effect.promise(() => own.balanceOf(owner.address))) - ownerBefore).toBe(1_100_000n)

      // One block on top, then a reorg of three: both transactions are gone, their nonces open again.
      yield* chain.mine(1)
      const head = yield* chain.head
      const lowest = BigInt(refund.blockNumber!) < BigInt(payout.blockNumber!) ? refund : payout
      const depth = Number(head - BigInt(lowest.blockNumber!) + 1n)
      expect(depth).toBeLessThanOrEqual(3)
      yield* chain.reorg(3)
      expect(yield* chain.hasReceipt(refund.txHash)).toBe(false)
      expect(yield* chain.hasReceipt(payout.txHash)).toBe(false)
      expect(yield* Effect.promise(() => own.balanceOf(payer.address))).toBe(payerBefore - 11_000n)
      expect(yield* Effect.promise(() => own.balanceOf(owner.address))).toBe(ownerBefore)
      expect(yield* ledgerMatchesChain).toBe(0n)

      yield* worker.processDue
      const [refundAgain, payoutAgain] = [yield* txRow(refund.id), yield* txRow(payout.id)]
      expect([refundAgain.state, payoutAgain.state]).toEqual(["mined", "mined"])
      expect([refundAgain.txHash, payoutAgain.txHash]).toEqual([refund.txHash, payout.txHash])
      yield* chain.mine(CONFIRMATIONS)
      yield* worker.processDue
      expect([(yield* txRow(refund.id)).state, (yield* txRow(payout.id)).state]).toEqual(["confirmed", "confirmed"])

      // Paid once each, and the refund and the withdrawal say so.
      expect(yield* Effect.promise(() => own.balanceOf(payer.address))).toBe(payerBefore)
      expect((yield* Effect.promise(() => own.balanceOf(owner.address))) - ownerBefore).toBe(1_100_000n)
      const withdrawal = yield* Effect.promise(() => call(`${baseUrl}/api/v1/payments/withdrawal/${accepted.body.data.withdrawalId}`))
      expect(withdrawal.body.data).toMatchObject({ status: "completed", tx_hash: payout.txHash })
      const top = BigInt(refundAgain.blockNumber!) > BigInt(payoutAgain.blockNumber!) ? refundAgain : payoutAgain
      expect(yield* reconciledPast(BigInt(top.blockNumber!))).toBe(0n)
    }), { timeout: 120_000 })
})
