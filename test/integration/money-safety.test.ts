// Money paths tried as an attacker and a crash would: concurrent refunds, a front-run settlement, a crash between signing
// and broadcasting, a nonce gap. Afterwards the ledger's treasury equals the chain's, to the micro-USDC.
import { expect, layer } from "@effect/vitest"
import { Effect, Option, TestClock } from "effect"
import { getAddress, type Hex, parseAbiItem } from "viem"
import { usdcAbi } from "../../layers/devnet/usdcAbi.js"
import { MachineHost } from "../../machines/Host.js"
import { Refunds } from "../../services/refunds/Refunds.js"
import { Reconciliation } from "../../services/treasury/Reconciliation.js"
import { TreasuryWorker } from "../../services/treasury/TreasuryWorker.js"
import { call, devAccount, frontRunAuthorization, publicClient, TREASURY, usdcBalance, walletFor } from "../support/clients.js"
import { fakeAgent } from "../support/agents.js"
import { OPERATOR_TOKEN, TestApp, TestEnv } from "../support/harness.js"
import { balanceOf, execute, ledgerMatchesChain, registerAgent } from "../support/scenario.js"
import { foldOutcomes } from "../support/reputation.js"

const PRICE = 11_000n
const transferEvent = parseAbiItem("event Transfer(address indexed from, address indexed to, uint256 value)")

/** Our clock starts at the real time (payments are signed against it), then only the test moves it. */
const realNow = Effect.flatMap(Effect.sync(() => Date.now()), (now) => TestClock.setTime(now))

/** Transfers of `amount` from the treasury to `to` mined since `fromBlock` (pass the block after the test's start: the start block may hold an earlier file's transfer). */
const treasuryTransfersTo = (to: `0x${string}`, amount: bigint, fromBlock: bigint) =>
  Effect.promise(() =>
    publicClient().getLogs({ address: undefined, event: transferEvent, args: { from: TREASURY, to }, fromBlock, toBlock: "latest" })
  ).pipe(Effect.map((logs) => logs.filter((l) => l.args.value === amount)))

/**
 * Fails `count` executions, then closes their retry windows so each owes a refund. The agent answers with output that
 * breaks its outputSchema: a failed execution for the client, while the transport succeeded (its circuit stays closed).
 */
const failedExecutions = (count: number, payerIndex: number, ownerIndex: number) =>
  Effect.gen(function* () {
    const agent = yield* fakeAgent({ kind: "json", status: 200, body: { wrong: true } })
    const agentId = yield* registerAgent(devAccount(ownerIndex), agent.url, { tier: "premium" })
    const payer = devAccount(payerIndex)
    const ids = yield* Effect.forEach(
      Array.from({ length: count }, (_, i) => i),
      (i) =>
        Effect.map(execute(payer, { targetAgentId: agentId, capabilityId: "echo", input: { text: `n${i}` } }), (r) => {
          expect(r.status, JSON.stringify(r.body)).toBe(502)
          return String(r.body.error?.details?.requestId)
        }),
      { concurrency: 8 }
    )
    yield* TestClock.adjust(601_000)
    const host = yield* MachineHost
    while ((yield* host.fireDue) > 0) { /* every retry window closes: each execution starts its refund */ }
    return { ids, payer }
  })

layer(TestApp({ BACKGROUND_WORKERS: "false", EXECUTION_RETRY_WINDOW_SECONDS: "600", RATE_LIMIT_CLIENT_PER_WINDOW: "1000" }))(
  "refunds under concurrency",
  (it) => {
    it.scoped("50 concurrent refunds of the same amount to one payer are 50 distinct transfers, each booked once", () =>
      Effect.gen(function* () {
        yield* realNow
        const { sql } = yield* TestEnv
        const startBlock = yield* Effect.promise(() => publicClient().getBlockNumber())
        const { ids, payer } = yield* failedExecutions(50, 4, 3)
        const before = yield* Effect.promise(() => usdcBalance(payer.address))
        const refunds = yield* Refunds
        // Three workers at once, each sending its batch concurrently (what several processes do).
        yield* Effect.all([refunds.sendDue, refunds.sendDue, refunds.sendDue], { concurrency: "unbounded" })
        const worker = yield* TreasuryWorker
        for (let i = 0; i < 5; i++) yield* worker.processDue
        const rows = yield* sql<{ status: string; txHash: string }>`SELECT status, tx_hash FROM refunds WHERE execution_id IN ${sql.in(ids)}`
        expect(rows).toHaveLength(50)
        expect(rows.every((r) => r.status === "confirmed")).toBe(true)
        expect(new Set(rows.map((r) => r.txHash)).size).toBe(50)
        expect((yield* Effect.promise(() => usdcBalance(payer.address))) - before).toBe(50n * PRICE)
        expect(yield* treasuryTransfersTo(payer.address, PRICE, startBlock + 1n)).toHaveLength(50)
        const statuses = yield* sql<{ status: string }>`SELECT status FROM executions WHERE id IN ${sql.in(ids)}`
        expect(statuses.every((s) => s.status === "refunded")).toBe(true)
        expect(yield* ledgerMatchesChain).toBe(0n)
      }))
  }
)

/** A crash at one step of a refund: the first time, the process "dies" there (a defect ends the pass); later calls pass. */
const crashOnce = () => {
  let crashed = false
  return (tx: { readonly purpose: string }) =>
    Effect.suspend(() =>
      crashed || tx.purpose !== "refund" ? Effect.void : Effect.sync(() => void (crashed = true)).pipe(Effect.zipRight(Effect.die("simulated crash")))
    )
}

layer(
  TestApp(
    { BACKGROUND_WORKERS: "false", EXECUTION_RETRY_WINDOW_SECONDS: "600", TREASURY_RECEIPT_WAIT_MS: "2000" },
    { faults: { afterSign: crashOnce(), afterBroadcast: crashOnce() } }
  )
)("crashes between the steps of a treasury transaction", (it) => {
  it.scoped("a crash between signing and broadcasting, and one between broadcasting and booking: after recovery exactly one transfer per refund", () =>
    Effect.gen(function* () {
      yield* realNow
      const { sql } = yield* TestEnv
      const startBlock = yield* Effect.promise(() => publicClient().getBlockNumber())
      const { ids, payer } = yield* failedExecutions(3, 5, 1)
      const refunds = yield* Refunds
      const worker = yield* TreasuryWorker
      // One pass: the first refund is signed and stored, then the process "dies" before broadcasting it; the second is
      // broadcast and the process "dies" before reading its receipt; the third goes through (stuck behind the first's nonce).
      yield* refunds.sendDue.pipe(Effect.catchAllDefect(() => Effect.void))
      const stuck = yield* sql<{ state: string }>`SELECT state FROM treasury_txs WHERE purpose = 'refund' ORDER BY nonce`
      expect(stuck.map((t) => t.state)).toContain("signed")
      // After the leases run out, the worker rebroadcasts the stored bytes (never re-signs) and books each once.
      yield* TestClock.adjust(31_000)
      for (let i = 0; i < 4; i++) yield* worker.processDue
      const rows = yield* sql<{ status: string }>`SELECT status FROM refunds WHERE execution_id IN ${sql.in(ids)}`
      expect(rows.map((r) => r.status)).toEqual(["confirmed", "confirmed", "confirmed"])
      expect(yield* sql`SELECT 1 FROM treasury_txs WHERE purpose = 'refund'`).toHaveLength(3)
      expect(yield* treasuryTransfersTo(payer.address, PRICE, startBlock + 1n)).toHaveLength(3)
      expect(yield* ledgerMatchesChain).toBe(0n)
    }))

  it.scoped("a nonce with no transaction (lost by an older version) is filled, and the transactions behind it confirm", () =>
    Effect.gen(function* () {
      yield* realNow
      const { sql } = yield* TestEnv
      const { ids } = yield* failedExecutions(1, 6, 2)
      // A nonce handed out and never used: every later transaction waits behind it on chain.
      yield* sql`UPDATE treasury_signers SET next_nonce = next_nonce + 1`
      const refunds = yield* Refunds
      yield* refunds.sendDue
      const worker = yield* TreasuryWorker
      // The worker's passes, each after the leases of the last one ran out.
      for (let i = 0; i < 3; i++) {
        yield* TestClock.adjust(31_000)
        yield* worker.processDue
      }
      const fills = yield* sql<{ state: string }>`SELECT state FROM treasury_txs WHERE purpose = 'gap_fill'`
      expect(fills.map((f) => f.state)).toEqual(["confirmed"])
      const [refund] = yield* sql<{ status: string }>`SELECT status FROM refunds WHERE execution_id = ${ids[0]!}`
      expect(refund?.status).toBe("confirmed")
      expect(yield* ledgerMatchesChain).toBe(0n)
    }))
})

/** Holds the front-runner's transaction hash once the hook has used the client's authorization. */
const frontRun: { hash: Hex | undefined } = { hash: undefined }

layer(
  TestApp({}, {
    faults: {
      // A third party submits the client's own authorization between our verification and our settlement.
      beforeSettle: (p) =>
        Effect.promise(async () => {
          const { hash } = await frontRunAuthorization(p)
          frontRun.hash = hash
        })
    }
  })
  , { excludeTestServices: true })("a front-run settlement", (it) => {
  it.scoped("is settled with the front-runner's hash: the execution completes with its output and the agent is paid", () =>
    Effect.gen(function* () {
      const agent = yield* fakeAgent("echo")
      const agentId = yield* registerAgent(devAccount(7), agent.url, { tier: "premium" })
      const registrationHash = frontRun.hash
      expect(registrationHash).toBeDefined()
      const response = yield* execute(devAccount(8), { targetAgentId: agentId, capabilityId: "echo", input: { text: "mine" } })
      expect(response.status).toBe(200)
      expect(response.body.data).toMatchObject({ status: "completed", output: { echo: { text: "mine" } }, settlement: { status: "settled", txHash: frontRun.hash } })
      expect(frontRun.hash).not.toBe(registrationHash)
      const { sql } = yield* TestEnv
      const [tx] = yield* sql<{ state: string }>`SELECT state FROM treasury_txs WHERE purpose = 'settlement' ORDER BY created_at DESC LIMIT 1`
      expect(tx?.state).toBe("reverted")
      // The agent worked and is paid (premium: released at once); reputation counted the paid call.
      expect((yield* balanceOf(agentId)).body.data).toMatchObject({ available: "0.008500" })
      yield* foldOutcomes
      const [scored] = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM reputation_events WHERE agent_id = ${agentId}`
      expect(scored?.n).toBe(1)
      expect(yield* ledgerMatchesChain).toBe(0n)
    }))
})

layer(TestApp({ BACKGROUND_WORKERS: "false" }))("reconciliation", (it) => {
  it.scoped("USDC that reaches the treasury outside the ledger is reported as drift, confirmed at the same block, and shown to operators", () =>
    Effect.gen(function* () {
      yield* realNow
      const { baseUrl } = yield* TestEnv
      expect(yield* ledgerMatchesChain).toBe(0n)
      // Somebody sends the treasury 1.234567 USDC directly: no payment, no booking.
      const usdc = (yield* TestEnv).chain.usdc.address
      const wallet = walletFor(devAccount(6))
      const hash = yield* Effect.promise(() =>
        wallet.writeContract({ address: getAddress(usdc), abi: usdcAbi, functionName: "transfer", args: [TREASURY, 1_234_567n] }))
      yield* Effect.promise(() => wallet.waitForTransactionReceipt({ hash }))
      expect(yield* ledgerMatchesChain).toBe(1_234_567n)
      const reconciliation = yield* Reconciliation
      // The pass reads the chain, waits 20 s (test clock) and reads the same block again: move the clock until it is done.
      const pass = yield* Effect.fork(reconciliation.pass)
      while (Option.isNone(yield* pass.poll)) {
        yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 20)))
        yield* TestClock.adjust(21_000)
      }
      const last = yield* reconciliation.status
      expect(last._tag === "Some" && last.value.confirmed && last.value.drift === 1_234_567n).toBe(true)
      const seen = yield* Effect.promise(() =>
        call(`${baseUrl}/api/v1/operator/treasury/reconciliation`, { headers: { authorization: `Bearer ${OPERATOR_TOKEN}` } }))
      expect(seen.body.data.current.drift).toBe("1234567")
      expect(seen.body.data.lastCheck).toMatchObject({ drift: "1234567", confirmed: true })
      const health = yield* Effect.promise(() => call(`${baseUrl}/health`))
      expect(health.body.data).toMatchObject({ status: "degraded", treasury: { drift: "1234567", confirmed: true } })
      const refused = yield* Effect.promise(() => fetch(`${baseUrl}/api/v1/operator/treasury/reconciliation`))
      expect(refused.status).toBe(401)
    }))
})
