// Issue 26, crashes on a chain that keeps going: a process killed between signing a treasury transaction and
// broadcasting it leaves a nonce that every later transaction waits behind, on chain, until the worker claims the row
// after its 30 s lease. The next start sends the stored bytes of every unfinished transaction again at once (whatever
// the lease) and fills nonce gaps, so nothing waits behind them; booking stays the worker's, once per transaction.
import { expect, layer } from "@effect/vitest"
import { Effect, TestClock } from "effect"
import { parseAbiItem } from "viem"
import { MachineHost } from "../../machines/Host.js"
import { Refunds } from "../../services/refunds/Refunds.js"
import { TreasuryWorker } from "../../services/treasury/TreasuryWorker.js"
import { devAccount, publicClient, TREASURY } from "../support/clients.js"
import { fakeAgent } from "../support/agents.js"
import { TestApp, TestEnv } from "../support/harness.js"
import { execute, ledgerMatchesChain, registerAgent } from "../support/scenario.js"
import { untilReal } from "../support/receivers.js"

const PRICE = 11_000n
const transferEvent = parseAbiItem("event Transfer(address indexed from, address indexed to, uint256 value)")

/** Our clock starts at the real time (payments are signed against it), then only the test moves it. */
const realNow = Effect.flatMap(Effect.sync(() => Date.now()), (now) => TestClock.setTime(now))

/**
 * Transfers of `amount` from the treasury to `to` mined after block `after` (the block read at the test's start may
 * hold an earlier test file's last refund to the same dev account).
 */
const treasuryTransfersTo = (to: `0x${string}`, amount: bigint, after: bigint) =>
  Effect.promise(() => publicClient().getLogs({ event: transferEvent, args: { from: TREASURY, to }, fromBlock: after + 1n, toBlock: "latest" })).pipe(
    Effect.map((logs) => logs.filter((l) => l.args.value === amount))
  )

/** `count` failed executions whose retry windows closed: each owes its payer a refund. */
const owedRefunds = (count: number, payerIndex: number, ownerIndex: number) =>
  Effect.gen(function* () {
    const agent = yield* fakeAgent({ kind: "json", status: 200, body: { wrong: true } })
    const agentId = yield* registerAgent(devAccount(ownerIndex), agent.url, { tier: "premium" })
    const payer = devAccount(payerIndex)
    const ids = yield* Effect.forEach(Array.from({ length: count }, (_, i) => i), (i) =>
      Effect.map(execute(payer, { targetAgentId: agentId, capabilityId: "echo", input: { text: `s${i}` } }), (r) => {
        expect(r.status, JSON.stringify(r.body)).toBe(502)
        return String(r.body.error?.details?.requestId)
      }))
    yield* TestClock.adjust(601_000)
    const host = yield* MachineHost
    while ((yield* host.fireDue) > 0) { /* every retry window closes: each execution starts its refund */ }
    return { ids, payer }
  })

/** The process "dies" after storing the first refund's signed bytes, before broadcasting them (a defect ends the pass). */
const dieAfterFirstSign = () => {
  let died = false
  return (tx: { readonly purpose: string }) =>
    Effect.suspend(() => (died || tx.purpose !== "refund" ? Effect.void : Effect.sync(() => void (died = true)).pipe(Effect.zipRight(Effect.die("simulated kill -9")))))
}

layer(
  TestApp(
    { BACKGROUND_WORKERS: "false", EXECUTION_RETRY_WINDOW_SECONDS: "600", TREASURY_RECEIPT_WAIT_MS: "1000" },
    { faults: { afterSign: dieAfterFirstSign() } }
  )
)("the treasury at start", (it) => {
  it.scoped("transactions signed and never broadcast by a killed process are sent again at start, whatever their lease, and the ones behind them are mined at once", () =>
    Effect.gen(function* () {
      yield* realNow
      const { sql } = yield* TestEnv
      const startBlock = yield* Effect.promise(() => publicClient().getBlockNumber())
      const { ids, payer } = yield* owedRefunds(3, 7, 3)
      const refunds = yield* Refunds
      yield* refunds.sendDue.pipe(Effect.catchAllDefect(() => Effect.void))
      yield* refunds.sendDue.pipe(Effect.catchAllDefect(() => Effect.void))
      const signed = yield* sql<{ nonce: string; state: string }>`SELECT nonce::text, state FROM treasury_txs WHERE purpose = 'refund' ORDER BY nonce`
      expect(signed).toHaveLength(3)
      // The hypothesis: the lowest nonce was never sent, so the chain holds the others back (their leases still run).
      expect(yield* treasuryTransfersTo(payer.address, PRICE, startBlock)).toHaveLength(0)

      // A restart: the start routine, with every lease still 30 s away (the clock does not move).
      const worker = yield* TreasuryWorker
      yield* worker.start
      // The chain mines the transactions the filled gap held back right after it (anvil: asynchronously, in ms).
      expect(yield* untilReal(treasuryTransfersTo(payer.address, PRICE, startBlock), (t) => t.length >= 3, 5_000)).toHaveLength(3)

      // Booking stays the worker's after the leases: each refund once, the ledger equal to the chain.
      yield* TestClock.adjust(31_000)
      for (let i = 0; i < 3; i++) yield* worker.processDue
      const rows = yield* sql<{ status: string }>`SELECT status FROM refunds WHERE execution_id IN ${sql.in(ids)}`
      expect(rows.map((r) => r.status)).toEqual(["confirmed", "confirmed", "confirmed"])
      expect(yield* treasuryTransfersTo(payer.address, PRICE, startBlock)).toHaveLength(3)
      expect(yield* ledgerMatchesChain).toBe(0n)
    }))

  it.scoped("a nonce handed out with no transaction (the nonce row ahead of the chain) is filled at start, not after a worker pass", () =>
    Effect.gen(function* () {
      yield* realNow
      const { sql } = yield* TestEnv
      const startBlock = yield* Effect.promise(() => publicClient().getBlockNumber())
      const { ids, payer } = yield* owedRefunds(1, 8, 4)
      yield* sql`UPDATE treasury_signers SET next_nonce = next_nonce + 1`
      const refunds = yield* Refunds
      yield* refunds.sendDue
      expect(yield* treasuryTransfersTo(payer.address, PRICE, startBlock)).toHaveLength(0)
      const worker = yield* TreasuryWorker
      yield* worker.start
      expect(yield* untilReal(treasuryTransfersTo(payer.address, PRICE, startBlock), (t) => t.length >= 1, 5_000)).toHaveLength(1)
      yield* TestClock.adjust(31_000)
      for (let i = 0; i < 3; i++) yield* worker.processDue
      const rows = yield* sql<{ status: string }>`SELECT status FROM refunds WHERE execution_id IN ${sql.in(ids)}`
      expect(rows.map((r) => r.status)).toEqual(["confirmed"])
      expect(yield* ledgerMatchesChain).toBe(0n)
    }))
})
