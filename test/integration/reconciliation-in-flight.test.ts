// Money in flight is not drift: a payment the chain settled while its agent still works, and a refund mined whose
// receipt was not booked yet (a crash after broadcasting), are counted as in flight at the block, not as drift.
import { expect, layer } from "@effect/vitest"
import { Effect, Fiber, TestClock } from "effect"
import { getAddress, type Hex } from "viem"
import { MachineHost } from "../../machines/Host.js"
import { Refunds } from "../../services/refunds/Refunds.js"
import { Reconciliation } from "../../services/treasury/Reconciliation.js"
import { TreasuryWorker } from "../../services/treasury/TreasuryWorker.js"
import { fakeAgent } from "../support/agents.js"
import { authorizationUsed, devAccount, publicClient } from "../support/clients.js"
import { TestApp, TestEnv } from "../support/harness.js"
import { execute, registerAgent } from "../support/scenario.js"

const PRICE = 11_000n

/** Our clock starts at the real time (payments are signed against it), then only the test moves it. */
const realNow = Effect.flatMap(Effect.sync(() => Date.now()), (now) => TestClock.setTime(now))

/** Polls a fact with a real-time deadline (the chain and the agent run on real time). */
const until = <A>(what: string, probe: Effect.Effect<A | undefined>, ms = 20_000) =>
  Effect.gen(function* () {
    const deadline = Date.now() + ms
    while (Date.now() < deadline) {
      const value = yield* probe
      if (value !== undefined) return value
      yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 25)))
    }
    return yield* Effect.dieMessage(`timed out waiting for ${what}`)
  })

/** After a broadcast of a refund, the process "dies" once: the refund is on chain, its receipt not booked. */
let crashAfterRefundBroadcast = true
const afterBroadcast = (tx: { readonly purpose: string }) =>
  Effect.suspend(() => {
    if (!crashAfterRefundBroadcast || tx.purpose !== "refund") return Effect.void
    crashAfterRefundBroadcast = false
    return Effect.die("simulated crash after broadcast")
  })

layer(TestApp({ BACKGROUND_WORKERS: "false", EXECUTION_RETRY_WINDOW_SECONDS: "600", TREASURY_RECEIPT_WAIT_MS: "2000" }, { faults: { afterBroadcast } }))(
  "reconciliation with money in flight",
  (it) => {
    it.scoped("a payment settled while its agent still works is in flight, not drift; booked, it is neither", () =>
      Effect.gen(function* () {
        yield* realNow
        const { sql } = yield* TestEnv
        const reconciliation = yield* Reconciliation
        const slow = yield* fakeAgent({ kind: "delay", ms: 3_000, then: "echo" })
        const agentId = yield* registerAgent(devAccount(3), slow.url, { tier: "premium" })
        expect((yield* reconciliation.check()).drift).toBe(0n)
        const call = yield* Effect.fork(execute(devAccount(4), { targetAgentId: agentId, capabilityId: "echo", input: { text: "slow" } }))
        const payment = yield* until("the payment to be settled on chain", Effect.gen(function* () {
          const [row] = yield* sql<{ payer: string; nonce: string }>`SELECT payer, nonce FROM payments WHERE purpose = 'execution' AND status = 'reserved'`.pipe(Effect.orDie)
          if (row === undefined) return undefined
          const used = yield* Effect.promise(() => authorizationUsed(getAddress(row.payer), row.nonce as Hex))
          return used ? row : undefined
        }))
        const during = yield* reconciliation.check()
        expect(during.inFlight.incoming).toBe(PRICE)
        expect(during.chainBalance - during.ledgerBalance).toBe(PRICE)
        expect(during.drift).toBe(0n)
        // The same block, checked again once the call is booked: the money moved from in flight to the ledger.
        const answer = yield* Fiber.join(call)
        expect(answer.status, JSON.stringify(answer.body)).toBe(200)
        const [booked] = yield* sql<{ status: string }>`SELECT status FROM payments WHERE nonce = ${payment.nonce}`
        expect(booked?.status).toBe("settled")
        const after = yield* reconciliation.check(during.block)
        expect(after.inFlight.incoming).toBe(0n)
        expect(after.drift).toBe(0n)
        expect(after.ledgerBalance).toBe(during.ledgerBalance + PRICE)
      }), { timeout: 60_000 })

    it.scoped("a refund mined but not booked (a crash after broadcasting) is in flight out of the treasury, not drift", () =>
      Effect.gen(function* () {
        yield* realNow
        const { sql } = yield* TestEnv
        const reconciliation = yield* Reconciliation
        const broken = yield* fakeAgent({ kind: "json", status: 200, body: { wrong: true } })
        const agentId = yield* registerAgent(devAccount(5), broken.url, { tier: "premium" })
        const failed = yield* execute(devAccount(6), { targetAgentId: agentId, capabilityId: "echo", input: { text: "bad" } })
        expect(failed.status).toBe(502)
        yield* TestClock.adjust(601_000)
        const host = yield* MachineHost
        while ((yield* host.fireDue) > 0) { /* the retry window closes: a refund is owed */ }
        yield* (yield* Refunds).sendDue.pipe(Effect.catchAllDefect(() => Effect.void))
        const [tx] = yield* sql<{ txHash: string; state: string }>`SELECT tx_hash, state FROM treasury_txs WHERE purpose = 'refund'`
        expect(["signed", "broadcast"]).toContain(tx?.state)
        const receipt = yield* Effect.promise(() => publicClient().waitForTransactionReceipt({ hash: tx!.txHash as Hex }))
        const during = yield* reconciliation.check(receipt.blockNumber)
        expect(during.inFlight.outgoing).toBe(PRICE)
        expect(during.ledgerBalance - during.chainBalance).toBe(PRICE)
        expect(during.drift).toBe(0n)
        // The worker follows the receipt and books the refund: nothing in flight, still no drift.
        yield* TestClock.adjust(31_000)
        const worker = yield* TreasuryWorker
        for (let i = 0; i < 3; i++) yield* worker.processDue
        const [refund] = yield* sql<{ status: string }>`SELECT status FROM refunds`
        expect(refund?.status).toBe("confirmed")
        const after = yield* reconciliation.check(receipt.blockNumber)
        expect(after.inFlight).toMatchObject({ incoming: 0n, outgoing: 0n })
        expect(after.drift).toBe(0n)
      }), { timeout: 60_000 })
  }
)
