// Group-commit settlement: concurrent payments share one SettlementBatcher transaction, each payment keeps its own
// outcome (a front-run authorization is settled with the front-runner's hash), a crash between signing and broadcasting
// a batch is finished by rebroadcasting the same bytes (also with a second batch in flight behind its nonce), a full batch
// goes out beside the transaction in flight, and the contract isolates a bad authorization from the others.
import { describe, expect, it, layer } from "@effect/vitest"
import { Effect, Fiber, TestClock } from "effect"
import { decodeEventLog, getAddress, type Hex, parseSignature } from "viem"
import { inject } from "vitest"
import { DEVNET_SETTLEMENT_BATCHER_ADDRESS } from "../../layers/devnet/anvil.js"
import { settlementBatcherAbi } from "../../layers/devnet/batcherAbi.js"
import { transferWithAuthorizationTypes } from "../../layers/devnet/usdcAbi.js"
import type { VerifiedPayment } from "../../layers/x402/payment.js"
import { Payments } from "../../services/payments/Payments.js"
import { batchGas } from "../../services/payments/chainOutcome.js"
import { TreasuryWorker } from "../../services/treasury/TreasuryWorker.js"
import { fakeAgent } from "../support/agents.js"
import { authorizationUsed, devAccount, frontRunAuthorization, publicClient, usdcBalance, walletFor } from "../support/clients.js"
import { TestApp, TestEnv } from "../support/harness.js"
import { makeGate } from "../support/gate.js"
import { execute, ledgerMatchesChain, registerAgent } from "../support/scenario.js"

const PRICE = 11_000n
const N = 12

const tick = Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 10)))

/** Polls `check` (bounded) until it holds. */
const eventually = <E, R>(what: string, check: Effect.Effect<boolean, E, R>) =>
  Effect.gen(function* () {
    for (let i = 0; i < 3_000; i++) {
      if (yield* check) return
      yield* tick
    }
    return yield* Effect.dieMessage(`timed out waiting for ${what}`)
  })

/** Our clock starts at the real time (payments are signed against it), then only the test moves it. */
const realNow = Effect.flatMap(Effect.sync(() => Date.now()), (now) => TestClock.setTime(now))

/**
 * N paid executions at once while the first settlement is held in flight; returns the execution ids in order of
 * payers (devAccount(2..5) round robin: several payments of the same payer and amount share the batch).
 */
const concurrentExecutions = (
  gate: ReturnType<typeof makeGate>,
  agentId: string,
  /** Runs while the first settlement is held and the others wait for the batch. */
  whileQueued: Effect.Effect<void> = Effect.void
) =>
  Effect.gen(function* () {
    const payments = yield* Payments
    gate.arm()
    const fiber = yield* Effect.fork(Effect.forEach(
      Array.from({ length: N }, (_, i) => i),
      (i) => execute(devAccount(2 + (i % 4)), { targetAgentId: agentId, capabilityId: "echo", input: { text: `n${i}` } }),
      { concurrency: "unbounded" }
    ))
    yield* eventually(`${N - 1} payments queued behind the first`, Effect.map(payments.settlementQueue.waiting, (n) => n === N - 1))
    yield* whileQueued
    gate.open()
    const responses = yield* Fiber.join(fiber)
    return responses.map((r) => {
      const id = r.body.data?.requestId ?? r.body.error?.details?.requestId
      expect(typeof id, JSON.stringify(r.body)).toBe("string")
      return String(id)
    })
  })

/** Each execution's payment: its settled hash and its treasury transaction. */
const settlementsOf = (ids: ReadonlyArray<string>) =>
  Effect.gen(function* () {
    const { sql } = yield* TestEnv
    return yield* sql<{ id: string; status: string; txHash: string | null; payer: string; nonce: string; purpose: string; treasuryHash: string; txState: string }>`
      SELECT p.id, p.status, p.tx_hash, p.payer, p.nonce, t.purpose, t.tx_hash AS treasury_hash, t.state AS tx_state
      FROM executions e JOIN payments p ON p.id = e.payment_id JOIN treasury_txs t ON t.id = p.treasury_tx_id
      WHERE e.id IN ${sql.in(ids)}`
  })

/** Every payment was booked once: exactly one settlement transfer in the ledger per payment. */
const bookedOnce = (paymentIds: ReadonlyArray<string>) =>
  Effect.gen(function* () {
    const { sql } = yield* TestEnv
    const rows = yield* sql<{ paymentId: string; n: number }>`
      SELECT payment_id, count(*)::int AS n FROM ledger_transfers WHERE kind = 'settlement' AND payment_id IN ${sql.in(paymentIds)} GROUP BY payment_id`
    expect(rows).toHaveLength(paymentIds.length)
    expect(rows.every((r) => r.n === 1)).toBe(true)
  })

const gate = makeGate()
/** Every payment that reached settlement, in the order it was handed to the settler. */
const seen: Array<VerifiedPayment> = []

/** A third party submits a payment's own authorization (EIP-3009 lets anyone): the front-runner's transaction. */
const frontRun = (p: VerifiedPayment) =>
  Effect.promise(async () => {
    const { hash, status } = await frontRunAuthorization(p)
    expect(status).toBe("success")
    return hash
  })

layer(
  TestApp({ RATE_LIMIT_CLIENT_PER_WINDOW: "1000" }, {
    faults: { afterBroadcast: gate.afterBroadcast, beforeSettle: (p: VerifiedPayment) => Effect.sync(() => void seen.push(p)) }
  }),
  { excludeTestServices: true }
)("group-commit settlement", (it) => {
  it.scoped("N concurrent paid executions settle in fewer chain transactions than N, each with its transaction's hash, booked once", () =>
    Effect.gen(function* () {
      const agent = yield* fakeAgent("echo")
      const agentId = yield* registerAgent(devAccount(1), agent.url, { tier: "premium" })
      const payers = [2, 3, 4, 5].map((i) => devAccount(i).address)
      const before = yield* Effect.promise(() => Promise.all(payers.map(usdcBalance)))
      const ids = yield* concurrentExecutions(gate, agentId)
      const rows = yield* settlementsOf(ids)
      expect(rows).toHaveLength(N)
      expect(rows.every((r) => r.status === "settled" && r.txState === "confirmed")).toBe(true)
      // Each settlement carries the hash of the transaction that paid it: one alone, then one batch for all the rest.
      expect(rows.every((r) => r.txHash === r.treasuryHash)).toBe(true)
      const transactions = new Set(rows.map((r) => r.txHash))
      expect(transactions.size).toBe(2)
      expect(rows.filter((r) => r.purpose === "settlement_batch")).toHaveLength(N - 1)
      for (const r of rows) expect(yield* Effect.promise(() => authorizationUsed(getAddress(r.payer), r.nonce as Hex))).toBe(true)
      const after = yield* Effect.promise(() => Promise.all(payers.map(usdcBalance)))
      expect(payers.map((_, i) => (before[i] ?? 0n) - (after[i] ?? 0n))).toEqual(payers.map(() => (BigInt(N) / 4n) * PRICE))
      yield* bookedOnce(rows.map((r) => r.id))
      expect(yield* ledgerMatchesChain).toBe(0n)
    }))

  it.scoped("a front-run authorization in a batch is settled with the front-runner's hash; the others with the batch's", () =>
    Effect.gen(function* () {
      const agent = yield* fakeAgent("echo")
      const agentId = yield* registerAgent(devAccount(6), agent.url, { tier: "premium" })
      seen.length = 0
      let frontRunHash: Hex | undefined
      // One of the queued payments (not the one in flight) is used by a third party before the batch is sent.
      const ids = yield* concurrentExecutions(gate, agentId, Effect.gen(function* () {
        const victim = seen.slice(1).find((p) => getAddress(p.payer) === devAccount(3).address)
        expect(victim).toBeDefined()
        frontRunHash = yield* frontRun(victim!)
      }))
      const rows = yield* settlementsOf(ids)
      expect(frontRunHash).toBeDefined()
      expect(rows.every((r) => r.status === "settled")).toBe(true)
      const victim = rows.filter((r) => r.txHash === frontRunHash)
      expect(victim).toHaveLength(1)
      expect(getAddress(victim[0]!.payer)).toBe(devAccount(3).address)
      // It was in the batch, whose transaction succeeded for the others: the failed item did not revert them.
      expect(victim[0]).toMatchObject({ purpose: "settlement_batch", txState: "confirmed" })
      const batched = rows.filter((r) => r.purpose === "settlement_batch" && r.txHash !== frontRunHash)
      expect(batched).toHaveLength(N - 2)
      expect(new Set(batched.map((r) => r.txHash)).size).toBe(1)
      expect(batched[0]!.txHash).toBe(batched[0]!.treasuryHash)
      yield* bookedOnce(rows.map((r) => r.id))
      expect(yield* ledgerMatchesChain).toBe(0n)
    }))
})

const fullGate = makeGate()

layer(
  TestApp({ RATE_LIMIT_CLIENT_PER_WINDOW: "1000", SETTLEMENT_BATCH_MAX: "4" }, { faults: { afterBroadcast: fullGate.afterBroadcast } }),
  { excludeTestServices: true }
)("group-commit settlement with a backlog", (it) => {
  it.scoped("a full batch goes out beside the transaction in flight; a partial one waits for it", () =>
    Effect.gen(function* () {
      const payments = yield* Payments
      const agent = yield* fakeAgent("echo")
      const agentId = yield* registerAgent(devAccount(1), agent.url, { tier: "premium" })
      const M = 11
      fullGate.arm()
      const fiber = yield* Effect.fork(Effect.forEach(
        Array.from({ length: M }, (_, i) => i),
        (i) => execute(devAccount(2 + (i % 4)), { targetAgentId: agentId, capabilityId: "echo", input: { text: `m${i}` } }),
        { concurrency: "unbounded" }
      ))
      // The first payment is held in flight. Of the ten behind it, full batches of 4 go out one at a time beside it
      // (at most two transactions in flight): two batches are mined while it is held, and the last two payments wait.
      const { sql } = yield* TestEnv
      const batches = sql<{ n: number }>`SELECT count(*)::int AS n FROM treasury_txs WHERE purpose = 'settlement_batch' AND state = 'confirmed'`
      yield* eventually("two full batches mined beside the held settlement", Effect.map(batches, (r) => r[0]?.n === 2))
      yield* eventually("the last two payments waiting", Effect.map(payments.settlementQueue.waiting, (n) => n === 2))
      const held = yield* sql<{ state: string }>`SELECT state FROM treasury_txs WHERE purpose = 'settlement' AND state <> 'confirmed'`
      expect(held).toHaveLength(1)
      fullGate.open()
      const ids = (yield* Fiber.join(fiber)).map((r) => String(r.body.data?.requestId))
      const rows = yield* settlementsOf(ids)
      expect(rows.every((r) => r.status === "settled" && r.txHash === r.treasuryHash)).toBe(true)
      const sizes = new Map<string, number>()
      for (const r of rows) sizes.set(r.txHash ?? "", (sizes.get(r.txHash ?? "") ?? 0) + 1)
      expect([...sizes.values()].sort()).toEqual([1, 2, 4, 4])
      yield* bookedOnce(rows.map((r) => r.id))
      expect(yield* ledgerMatchesChain).toBe(0n)
    }), { timeout: 60_000 })
})

/** A crash right after a batch's signed bytes are stored: the first time only. */
const crashOnce = () => {
  let crashed = false
  return (tx: { readonly purpose: string }) =>
    Effect.suspend(() =>
      crashed || tx.purpose !== "settlement_batch" ? Effect.void : Effect.sync(() => void (crashed = true)).pipe(Effect.zipRight(Effect.die("simulated crash")))
    )
}

const crashGate = makeGate()

layer(
  TestApp(
    { BACKGROUND_WORKERS: "false", RATE_LIMIT_CLIENT_PER_WINDOW: "1000", TREASURY_RECEIPT_WAIT_MS: "2000" },
    { faults: { afterBroadcast: crashGate.afterBroadcast, afterSign: crashOnce() } }
  )
)("a crash inside a batch", (it) => {
  it.scoped("between signing and broadcasting a batch: recovery rebroadcasts the same bytes, and every payment settles once", () =>
    Effect.gen(function* () {
      yield* realNow
      const { sql } = yield* TestEnv
      const agent = yield* fakeAgent("echo")
      const agentId = yield* registerAgent(devAccount(1), agent.url, { tier: "premium" })
      const payers = [2, 3, 4, 5].map((i) => devAccount(i).address)
      const before = yield* Effect.promise(() => Promise.all(payers.map(usdcBalance)))
      const settlementTxs = Effect.map(
        sql<{ n: number }>`SELECT count(*)::int AS n FROM treasury_txs WHERE purpose IN ('settlement', 'settlement_batch')`,
        (r) => r[0]?.n ?? 0
      )
      const txsBefore = yield* settlementTxs
      const ids = yield* concurrentExecutions(crashGate, agentId)
      // The batch was signed and stored, never broadcast; its payments wait for it.
      const [stored] = yield* sql<{ id: string; state: string; txHash: string }>`SELECT id, state, tx_hash FROM treasury_txs WHERE purpose = 'settlement_batch'`
      expect(stored?.state).toBe("signed")
      const waiting = (yield* settlementsOf(ids)).filter((r) => r.purpose === "settlement_batch")
      expect(waiting).toHaveLength(N - 1)
      expect(waiting.every((r) => r.status === "retrying")).toBe(true)

      yield* TestClock.adjust(31_000)
      // The payments' recovery pass leaves a live batch to the treasury worker: it signs nothing new.
      yield* (yield* Payments).recoverDue
      expect(yield* settlementTxs).toBe(txsBefore + 2)
      yield* (yield* TreasuryWorker).processDue

      const rows = yield* settlementsOf(ids)
      expect(rows.every((r) => r.status === "settled")).toBe(true)
      expect(rows.filter((r) => r.txHash === stored?.txHash)).toHaveLength(N - 1)
      const [after] = yield* sql<{ state: string }>`SELECT state FROM treasury_txs WHERE id = ${stored!.id}`
      expect(after?.state).toBe("confirmed")
      expect(yield* settlementTxs).toBe(txsBefore + 2)
      const spent = yield* Effect.promise(() => Promise.all(payers.map(usdcBalance)))
      expect(payers.map((_, i) => (before[i] ?? 0n) - (spent[i] ?? 0n))).toEqual(payers.map(() => (BigInt(N) / 4n) * PRICE))
      yield* bookedOnce(rows.map((r) => r.id))
      const statuses = yield* sql<{ status: string }>`SELECT status FROM executions WHERE id IN ${sql.in(ids)}`
      expect(statuses.every((s) => s.status === "completed")).toBe(true)
      expect(yield* ledgerMatchesChain).toBe(0n)
    }), { timeout: 120_000 })
})

const gapGate = makeGate()

layer(
  TestApp(
    { BACKGROUND_WORKERS: "false", RATE_LIMIT_CLIENT_PER_WINDOW: "1000", TREASURY_RECEIPT_WAIT_MS: "2000", SETTLEMENT_BATCH_MAX: "4" },
    { faults: { afterBroadcast: gapGate.afterBroadcast, afterSign: crashOnce() } }
  )
)("a crash with two transactions in flight", (it) => {
  it.scoped("the first full batch dies between signing and broadcasting while the next ones go out behind its nonce: recovery sends it, the chain mines the rest, every payment settles once", () =>
    Effect.gen(function* () {
      yield* realNow
      const { sql } = yield* TestEnv
      const payments = yield* Payments
      const agent = yield* fakeAgent("echo")
      const agentId = yield* registerAgent(devAccount(1), agent.url, { tier: "premium" })
      const payers = [2, 3, 4, 5].map((i) => devAccount(i).address)
      const before = yield* Effect.promise(() => Promise.all(payers.map(usdcBalance)))
      const M = 11
      gapGate.arm()
      const fiber = yield* Effect.fork(Effect.forEach(
        Array.from({ length: M }, (_, i) => i),
        (i) => execute(devAccount(2 + (i % 4)), { targetAgentId: agentId, capabilityId: "echo", input: { text: `g${i}` } }),
        { concurrency: "unbounded" }
      ))
      // Beside the held settlement: batch A (signed, then the crash: never broadcast), batch B (sent behind A's nonce,
      // so the chain cannot mine it; its receipt wait gives up). The last two payments wait for the held one.
      const batches = sql<{ id: string; nonce: string; state: string }>`SELECT id, nonce::text, state FROM treasury_txs WHERE purpose = 'settlement_batch' ORDER BY nonce`
      yield* eventually("two batches stored and two payments waiting", Effect.zipWith(batches, payments.settlementQueue.waiting, (b, w) => b.length === 2 && w === 2))
      gapGate.open()
      const ids = (yield* Fiber.join(fiber)).map((r) => String(r.body.data?.requestId ?? r.body.error?.details?.requestId))
      const stored = yield* batches
      expect(stored).toHaveLength(3)
      expect(stored.map((b) => b.state)).toEqual(["signed", "signed", "signed"])
      expect((yield* settlementsOf(ids)).filter((r) => r.status === "settled")).toHaveLength(1)

      // After the leases: the treasury worker sends A's stored bytes; the chain then mines B and C behind it.
      yield* TestClock.adjust(31_000)
      yield* payments.recoverDue
      for (let i = 0; i < 5; i++) {
        yield* (yield* TreasuryWorker).processDue
        if ((yield* settlementsOf(ids)).every((r) => r.status === "settled")) break
        yield* TestClock.adjust(31_000)
      }
      const rows = yield* settlementsOf(ids)
      expect(rows.map((r) => r.status)).toEqual(rows.map(() => "settled"))
      expect(rows.every((r) => r.txHash === r.treasuryHash)).toBe(true)
      expect((yield* batches).map((b) => b.state)).toEqual(["confirmed", "confirmed", "confirmed"])
      const sizes = new Map<string, number>()
      for (const r of rows) sizes.set(r.txHash ?? "", (sizes.get(r.txHash ?? "") ?? 0) + 1)
      expect([...sizes.values()].sort()).toEqual([1, 2, 4, 4])
      const spent = yield* Effect.promise(() => Promise.all(payers.map(usdcBalance)))
      const paidBy = payers.map((_, i) => BigInt(Array.from({ length: M }, (_, k) => k).filter((k) => k % 4 === i).length) * PRICE)
      expect(payers.map((_, i) => (before[i] ?? 0n) - (spent[i] ?? 0n))).toEqual(paidBy)
      yield* bookedOnce(rows.map((r) => r.id))
      expect(yield* ledgerMatchesChain).toBe(0n)
    }), { timeout: 120_000 })
})

/** An EIP-3009 authorization from a dev account to `to`, signed by `signer` (the payer itself unless a forgery is wanted). */
const authorization = async (payer: number, to: `0x${string}`, value: bigint, signer = payer) => {
  const now = BigInt(Math.floor(Date.now() / 1000))
  const nonce = `0x${Buffer.from(crypto.getRandomValues(new Uint8Array(32))).toString("hex")}` as Hex
  const message = { from: devAccount(payer).address, to, value, validAfter: now - 600n, validBefore: now + 600n, nonce }
  const signature = await devAccount(signer).signTypedData({
    domain: { name: "USDC", version: "2", chainId: 84532, verifyingContract: getAddress(inject("usdcAddress")) },
    types: transferWithAuthorizationTypes,
    primaryType: "TransferWithAuthorization",
    message
  })
  const { r, s, v } = parseSignature(signature)
  return { ...message, v: Number(v), r, s }
}

const settleBatch = async (items: ReadonlyArray<Awaited<ReturnType<typeof authorization>>>) => {
  const wallet = walletFor(devAccount(8))
  const hash = await wallet.writeContract({
    address: DEVNET_SETTLEMENT_BATCHER_ADDRESS,
    abi: settlementBatcherAbi,
    functionName: "settle",
    args: [getAddress(inject("usdcAddress")), items],
    gas: batchGas(items.length)
  })
  const receipt = await publicClient().waitForTransactionReceipt({ hash })
  const reported = receipt.logs
    .filter((log) => getAddress(log.address) === DEVNET_SETTLEMENT_BATCHER_ADDRESS)
    .map((log) => decodeEventLog({ abi: settlementBatcherAbi, data: log.data, topics: log.topics }).args)
  return { receipt, reported }
}

describe("the SettlementBatcher contract on the devnet", () => {
  const payee = devAccount(9).address

  it("an invalid signature in the middle fails that item only: the others are paid and each outcome is reported", async () => {
    const items = [await authorization(7, payee, 1_000n), await authorization(7, payee, 2_000n, 6), await authorization(7, payee, 4_000n)]
    const before = await usdcBalance(payee)
    const { receipt, reported } = await settleBatch(items)
    expect(receipt.status).toBe("success")
    expect(reported.map((e) => [Number(e.index), e.ok, e.nonce])).toEqual(items.map((a, i) => [i, i !== 1, a.nonce]))
    expect((await usdcBalance(payee)) - before).toBe(5_000n)
    expect(await Promise.all(items.map((a) => authorizationUsed(a.from, a.nonce)))).toEqual([true, false, true])
  }, 60_000)

  it("an authorization already used is reported not ok, and a full batch fits the gas the settler gives it", async () => {
    const used = await authorization(7, payee, 1_000n)
    await settleBatch([used])
    const fresh = await Promise.all(Array.from({ length: 40 }, (_, i) => authorization(1 + (i % 9), payee, 10n)))
    const { receipt, reported } = await settleBatch([used, ...fresh])
    expect(receipt.status).toBe("success")
    expect(reported.map((e) => e.ok)).toEqual([false, ...fresh.map(() => true)])
    expect(receipt.gasUsed).toBeLessThan(batchGas(41))
  }, 60_000)
})
