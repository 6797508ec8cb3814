// Chains that misbehave, on an anvil of the test's own (a fresh treasury key, a USDC deployed for the run): a base-fee
// spike leaves a refund underpriced (the writer replaces it: same nonce, fees from the chain, paid once), and a refund
// dropped from the mempool is sent again with the same bytes, a refund whose nonce another transaction took is found
// dropped and sent anew, and a paid call whose settlement waits for a block that does not come answers at its deadline
// with its status URL. Ledger = chain after each, and each step is logged with its hashes and amount.
import { expect, layer } from "@effect/vitest"
import { Context, Effect, Fiber, Layer, TestClock } from "effect"
import { createPublicClient, createTestClient, createWalletClient, type Hex, http, parseAbiItem, parseGwei, parseTransaction } from "viem"
import { privateKeyToAccount } from "viem/accounts"
import { devnetChain } from "../../layers/devnet/accounts.js"
import { MachineHost } from "../../machines/Host.js"
import { Refunds } from "../../services/refunds/Refunds.js"
import { TreasuryWorker } from "../../services/treasury/TreasuryWorker.js"
import { fakeAgent } from "../support/agents.js"
import { call } from "../support/clients.js"
import { chainOn, type ProductionChain, productionChain } from "../support/productionChain.js"
import { TestApp, TestEnv } from "../support/harness.js"
import { recordingLogs } from "../support/logs.js"
import { execute, ledgerMatchesChain, registerAgent } from "../support/scenario.js"

const PRICE = 11_000n
const transfer = parseAbiItem("event Transfer(address indexed from, address indexed to, uint256 value)")

class Own extends Context.Tag("test/OwnChain")<Own, ProductionChain>() {}
const OwnLive = Layer.scoped(Own, productionChain({ payers: 8 }))

const App = Layer.unwrapScoped(
  Effect.map(Own, (own) =>
    TestApp(
      {
        LOG_FORMAT: "json", LOG_LEVEL: "info", BACKGROUND_WORKERS: "false", EXECUTION_RETRY_WINDOW_SECONDS: "600", TREASURY_RECEIPT_WAIT_MS: "500",
        RATE_LIMIT_CLIENT_PER_WINDOW: "1000", EXECUTION_TIMEOUT_MS: "5000", PAID_CALL_DEADLINE_MS: "8000"
      },
      { chain: chainOn(own, "devnet") }
    ))
).pipe(Layer.provideMerge(OwnLive))

/** Our clock starts at the real time (payments are signed against it), then only the test moves it. */
const realNow = Effect.flatMap(Effect.sync(() => Date.now()), (now) => TestClock.setTime(now))

/** A failed paid call whose retry window has closed: a refund of PRICE is owed to `payer`. */
const owedRefund = (own: ProductionChain, ownerIndex: number, payerIndex: number) =>
  Effect.gen(function* () {
    const broken = yield* fakeAgent({ kind: "json", status: 200, body: { wrong: true } })
    const agentId = yield* registerAgent(own.payers[ownerIndex]!, broken.url, { tier: "premium" })
    const payer = own.payers[payerIndex]!
    const failed = yield* execute(payer, { targetAgentId: agentId, capabilityId: "echo", input: { text: "bad" } })
    expect(failed.status).toBe(502)
    yield* TestClock.adjust(601_000)
    const host = yield* MachineHost
    while ((yield* host.fireDue) > 0) { /* the retry window closes */ }
    return payer
  })

const tools = (own: ProductionChain) => {
  const chain = devnetChain(own.rpcUrl)
  return {
    anvil: createTestClient({ mode: "anvil", chain, transport: http(own.rpcUrl) }),
    reader: createPublicClient({ chain, transport: http(own.rpcUrl) })
  }
}

/** Polls the database (real time: the worker runs beside it) until `probe` finds something. */
const until = <A>(probe: Effect.Effect<A | undefined>) =>
  Effect.gen(function* () {
    for (let i = 0; i < 400; i++) {
      const found = yield* probe
      if (found !== undefined) return found
      yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 25)))
    }
    return yield* Effect.dieMessage("not found within 10 s")
  })

layer(App)("a chain that misbehaves", (it) => {
  it.scoped("no block comes for a paid call's settlement: it answers 202 with its status URL at PAID_CALL_DEADLINE_MS, and completes when the block comes", () =>
    Effect.gen(function* () {
      yield* realNow
      const own = yield* Own
      const { sql, baseUrl } = yield* TestEnv
      const { anvil } = tools(own)
      const echo = yield* fakeAgent("echo")
      const agentId = yield* registerAgent(own.payers[6]!, echo.url, { tier: "premium" })
      const payer = own.payers[7]!
      const before = yield* Effect.promise(() => own.balanceOf(payer.address))

      yield* Effect.promise(() => anvil.setAutomine(false))
      const answer = yield* Effect.fork(execute(payer, { targetAgentId: agentId, capabilityId: "echo", input: { text: "slow chain" } }))
      // The settlement is signed and sent; the agent has answered; no block.
      yield* until(Effect.map(
        sql<{ n: number }>`SELECT count(*)::int AS n FROM treasury_txs WHERE purpose IN ('settlement', 'settlement_batch') AND state IN ('signed', 'broadcast')`.pipe(Effect.orDie),
        (r) => (r[0]!.n > 0 ? true : undefined)
      ))
      yield* TestClock.adjust(8_000)
      const accepted = yield* Fiber.join(answer)
      expect(accepted.status, JSON.stringify(accepted.body)).toBe(202)
      expect(accepted.body.data).toMatchObject({ status: "pending", statusUrl: expect.stringContaining(accepted.body.data.requestId) })
      expect(yield* Effect.promise(() => own.balanceOf(payer.address))).toBe(before)

      // The block comes: the work that went on records the settlement and the agent's output.
      yield* Effect.promise(() => anvil.mine({ blocks: 1 }))
      yield* Effect.promise(() => anvil.setAutomine(true))
      const paymentHeader = accepted.headers.get("x-payment-used") ?? ""
      const status = yield* until(Effect.promise(async () => {
        const r = await call(`${baseUrl}/api/v1/execute/${accepted.body.data.requestId}`, { headers: { "X-PAYMENT": paymentHeader } })
        return r.body.data?.status === "completed" && r.body.data?.settlement?.status === "settled" ? r.body.data : undefined
      }))
      expect(status.output).toMatchObject({ echo: { text: "slow chain" } })
      expect(yield* Effect.promise(() => own.balanceOf(payer.address))).toBe(before - 11_000n)
      expect(yield* ledgerMatchesChain).toBe(0n)
    }), { timeout: 120_000 })

  it.scoped("a base-fee spike strands a refund: it is replaced at the same nonce with the chain's fees and paid once", () =>
    Effect.gen(function* () {
      yield* realNow
      const own = yield* Own
      const { sql } = yield* TestEnv
      const { anvil, reader } = tools(own)
      const payer = yield* owedRefund(own, 0, 1)
      const logs = yield* recordingLogs
      const before = yield* Effect.promise(() => own.balanceOf(payer.address))
      const fromBlock = yield* Effect.promise(() => reader.getBlockNumber())

      // The refund is signed at the fees of the moment and sent, but no block comes yet.
      yield* Effect.promise(() => anvil.setAutomine(false))
      yield* (yield* Refunds).sendDue
      const [sent] = yield* sql<{ id: string; txHash: string; rawTx: string }>`SELECT id, tx_hash, raw_tx FROM treasury_txs WHERE purpose = 'refund'`
      const signedFee = parseTransaction(sent!.rawTx as Hex).maxFeePerGas ?? 0n
      // The base fee jumps past what we signed: the block comes without our refund.
      yield* Effect.promise(() => anvil.setNextBlockBaseFeePerGas({ baseFeePerGas: signedFee * 10n }))
      yield* Effect.promise(() => anvil.mine({ blocks: 1 }))
      expect(yield* Effect.promise(() => reader.getTransactionReceipt({ hash: sent!.txHash as Hex }).then(() => true, () => false))).toBe(false)

      // The worker takes the transaction over after its lease: underpriced, it is re-signed and sent; then a block.
      yield* TestClock.adjust(31_000)
      const worker = yield* TreasuryWorker
      const pass = yield* Effect.fork(worker.processDue)
      const replaced = yield* until(Effect.map(
        sql<{ txHash: string; replacedHashes: ReadonlyArray<string> }>`SELECT tx_hash, replaced_hashes FROM treasury_txs WHERE id = ${sent!.id}`.pipe(Effect.orDie),
        (rows) => (rows[0] !== undefined && rows[0].replacedHashes.length > 0 ? rows[0] : undefined)
      ))
      expect(replaced.replacedHashes).toEqual([sent!.txHash])
      yield* Effect.promise(() => anvil.mine({ blocks: 1 }))
      yield* Fiber.join(pass)
      yield* Effect.promise(() => anvil.setAutomine(true))
      for (let i = 0; i < 2; i++) yield* worker.processDue

      const [refund] = yield* sql<{ status: string; txHash: string }>`SELECT status, tx_hash FROM refunds`
      expect(refund).toEqual({ status: "confirmed", txHash: replaced.txHash })
      const replacement = yield* Effect.promise(() => reader.getTransaction({ hash: replaced.txHash as Hex }))
      expect(replacement.maxFeePerGas).toBeGreaterThan(signedFee * 10n)
      expect(yield* Effect.promise(() => own.balanceOf(payer.address))).toBe(before + PRICE)
      const paid = yield* Effect.promise(() => reader.getLogs({ address: own.usdc, event: transfer, args: { from: own.treasury, to: payer.address }, fromBlock }))
      expect(paid.map((log) => log.args.value)).toEqual([PRICE])
      const history = yield* sql<{ event: { type: string } }>`SELECT event FROM machine_transitions WHERE machine = 'treasury' AND actor_id = ${sent!.id} ORDER BY id`
      expect(history.map((h) => h.event.type)).toContain("REPLACED")
      // Logged: the refund sent, its replacement (old and new hash), its confirmation (hash and amount).
      expect(logs.find("treasury.sent", { treasuryTxId: sent!.id })).toEqual([expect.objectContaining({ purpose: "refund", txHash: sent!.txHash, amountMicroUsdc: String(PRICE) })])
      expect(logs.find("treasury.replaced", { treasuryTxId: sent!.id })).toEqual([expect.objectContaining({ replacedHash: sent!.txHash, txHash: replaced.txHash })])
      expect(logs.find("refund.confirmed", { treasuryTxId: sent!.id })).toEqual([expect.objectContaining({ txHash: replaced.txHash, amountMicroUsdc: String(PRICE) })])
      expect(yield* ledgerMatchesChain).toBe(0n)
      // The spike passes.
      yield* Effect.promise(() => anvil.setNextBlockBaseFeePerGas({ baseFeePerGas: signedFee / 4n }))
      yield* Effect.promise(() => anvil.mine({ blocks: 1 }))
    }), { timeout: 120_000 })

  it.scoped("a refund dropped from the mempool is sent again with the same bytes and nonce, and paid once", () =>
    Effect.gen(function* () {
      yield* realNow
      const own = yield* Own
      const { sql } = yield* TestEnv
      const { anvil, reader } = tools(own)
      const payer = yield* owedRefund(own, 2, 3)
      const logs = yield* recordingLogs
      const before = yield* Effect.promise(() => own.balanceOf(payer.address))

      yield* Effect.promise(() => anvil.setAutomine(false))
      yield* (yield* Refunds).sendDue
      const [sent] = yield* sql<{ id: string; txHash: string }>`SELECT id, tx_hash FROM treasury_txs WHERE purpose = 'refund' AND state IN ('signed', 'broadcast')`
      yield* Effect.promise(() => anvil.dropTransaction({ hash: sent!.txHash as Hex }))
      yield* Effect.promise(() => anvil.mine({ blocks: 1 }))
      expect(yield* Effect.promise(() => reader.getTransactionReceipt({ hash: sent!.txHash as Hex }).then(() => true, () => false))).toBe(false)

      yield* TestClock.adjust(31_000)
      const worker = yield* TreasuryWorker
      const pass = yield* Effect.fork(worker.processDue)
      // The same bytes reach the pool again: mine them.
      yield* until(Effect.promise(() => reader.getTransaction({ hash: sent!.txHash as Hex }).then(() => true, () => undefined)))
      yield* Effect.promise(() => anvil.mine({ blocks: 1 }))
      yield* Fiber.join(pass)
      yield* Effect.promise(() => anvil.setAutomine(true))
      yield* worker.processDue

      const [row] = yield* sql<{ state: string; txHash: string; replacedHashes: ReadonlyArray<string> }>`SELECT state, tx_hash, replaced_hashes FROM treasury_txs WHERE id = ${sent!.id}`
      expect(row).toEqual({ state: "confirmed", txHash: sent!.txHash, replacedHashes: [] })
      expect(logs.find("treasury.resent", { treasuryTxId: sent!.id, txHash: sent!.txHash }).length).toBeGreaterThanOrEqual(1)
      expect(logs.find("refund.confirmed", { treasuryTxId: sent!.id })).toEqual([expect.objectContaining({ txHash: sent!.txHash, amountMicroUsdc: String(PRICE) })])
      expect(yield* Effect.promise(() => own.balanceOf(payer.address))).toBe(before + PRICE)
      expect(yield* ledgerMatchesChain).toBe(0n)
    }), { timeout: 120_000 })

  it.scoped("a refund whose nonce another transaction took is found dropped, logged with its hash, and sent again: paid once", () =>
    Effect.gen(function* () {
      yield* realNow
      const own = yield* Own
      const { sql } = yield* TestEnv
      const { anvil, reader } = tools(own)
      const payer = yield* owedRefund(own, 4, 5)
      const logs = yield* recordingLogs
      const before = yield* Effect.promise(() => own.balanceOf(payer.address))

      yield* Effect.promise(() => anvil.setAutomine(false))
      yield* (yield* Refunds).sendDue
      const [sent] = yield* sql<{ id: string; txHash: string; nonce: string }>`
        SELECT id, tx_hash, nonce::text FROM treasury_txs WHERE purpose = 'refund' AND state IN ('signed', 'broadcast')`
      // The refund leaves the pool and another transaction of the treasury's key (an operator's tool) takes its nonce.
      yield* Effect.promise(() => anvil.dropTransaction({ hash: sent!.txHash as Hex }))
      const wallet = createWalletClient({ account: privateKeyToAccount(own.treasuryKey), chain: devnetChain(own.rpcUrl), transport: http(own.rpcUrl) })
      yield* Effect.promise(() =>
        wallet.sendTransaction({ to: own.treasury, value: 0n, nonce: Number(sent!.nonce), maxFeePerGas: parseGwei("100"), maxPriorityFeePerGas: parseGwei("2") }))
      yield* Effect.promise(() => anvil.mine({ blocks: 1 }))
      yield* Effect.promise(() => anvil.setAutomine(true))

      // After its lease the worker finds the nonce used by other bytes: dropped; the refund is owed again and sent anew.
      yield* TestClock.adjust(31_000)
      const worker = yield* TreasuryWorker
      yield* worker.processDue
      yield* worker.processDue
      expect(logs.find("treasury.dropped", { treasuryTxId: sent!.id })).toEqual([
        expect.objectContaining({ level: "warn", purpose: "refund", txHash: sent!.txHash, nonce: sent!.nonce, cause: expect.stringContaining("nonce") })
      ])
      expect(logs.find("refund.failed", { treasuryTxId: sent!.id })).toEqual([expect.objectContaining({ cause: "transaction dropped", amountMicroUsdc: String(PRICE) })])
      const [refund] = yield* sql<{ id: string; status: string; txHash: string; treasuryTxId: string }>`SELECT id, status, tx_hash, treasury_tx_id FROM refunds
        WHERE id = (SELECT subject_id FROM treasury_txs WHERE id = ${sent!.id})`
      expect(refund).toMatchObject({ status: "confirmed" })
      expect(refund!.treasuryTxId).not.toBe(sent!.id)
      expect(logs.find("refund.confirmed", { refundId: refund!.id })).toEqual([
        expect.objectContaining({ treasuryTxId: refund!.treasuryTxId, txHash: refund!.txHash, amountMicroUsdc: String(PRICE) })
      ])
      expect(yield* Effect.promise(() => reader.getTransactionReceipt({ hash: refund!.txHash as Hex }).then((r) => r.status))).toBe("success")
      expect(yield* Effect.promise(() => own.balanceOf(payer.address))).toBe(before + PRICE)
      expect(yield* ledgerMatchesChain).toBe(0n)
    }), { timeout: 120_000 })
})
