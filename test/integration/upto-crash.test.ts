// A process that dies on an upto call's way to its settlement. (1) The settle's signed bytes are stored and never
// broadcast: the treasury worker, once the transaction's lease ran out, sends the stored bytes, reads the receipt and
// records the settlement. (2) The charge is recorded and nothing was signed yet: the upto recovery pass, once the
// payment's lease ran out, settles it. Either way the call first answers without its output (settlement pending), then
// the payer paid the charge once, the output is released, and the ledger agrees with the chain. (3) The stored settle
// never reaches the chain and another transaction of the treasury's key takes its nonce: the worker finds it dropped,
// the payment waits for a retry, and the recovery pass sends a new settle: still charged once.
import { expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import { getAddress, type Hex } from "viem"
import { inject } from "vitest"
import { UptoSettlements } from "../../services/payments/UptoSettlements.js"
import { TreasuryWorker } from "../../services/treasury/TreasuryWorker.js"
import { call, devAccount, publicClient, TREASURY, usdcBalance, walletFor } from "../support/clients.js"
import { capability } from "../support/fixtures.js"
import { TestApp, TestEnv } from "../support/harness.js"
import { startMeteredAgent } from "../support/meteredAgent.js"
import { ledgerMatchesChain, registerAgent } from "../support/scenario.js"
import { approvePermit2, uptoClient } from "../support/uptoClient.js"

const tokens = capability({
  id: "tokens", name: "Tokens", description: "per-token", inputSchema: undefined, outputSchema: undefined,
  pricing: { model: "per-token", basePrice: "0.002", currency: "USDC", maxTokens: 10_000 }
})
const CHARGE = 1_000n + 4_000n // the fee and 2,000 tokens at 0.002 per 1,000

/** A fault that dies the first time it is reached and lets every later pass through; `hits()`: how often it died. */
const dieOnce = (message: string) => {
  let hits = 0
  return { hits: () => hits, strike: Effect.suspend(() => (hits === 0 ? Effect.sync(() => hits++).pipe(Effect.zipRight(Effect.die(message))) : Effect.void)) }
}
/** Dies right after the first upto settle's bytes were stored (the first and the third case, each its own). */
const crashes = dieOnce("crash after signing")
const dropped = dieOnce("crash after signing")
/** Dies right after the first upto charge was recorded (before anything is signed). */
const early = dieOnce("crash before the settle")
const usdc = (): Hex => getAddress(inject("usdcAddress"))

/** An agent with the metered capability, the payer's Permit2 approval, and one upto-paid call of 2,000 tokens. */
const crashedCall = Effect.gen(function* () {
  const { baseUrl } = yield* TestEnv
  const agent = yield* Effect.acquireRelease(Effect.promise(startMeteredAgent), (a) => Effect.promise(() => a.close()))
  const agentId = yield* registerAgent(devAccount(1), agent.url, { tier: "premium", capabilities: [tokens] })
  const payer = devAccount(8)
  yield* Effect.promise(async () => publicClient().waitForTransactionReceipt({ hash: await approvePermit2(payer, usdc()) }))
  const before = yield* Effect.promise(() => usdcBalance(payer.address))
  const paid = yield* Effect.promise(async () => {
    const r = await uptoClient(payer, { rpcUrl: inject("rpcUrl"), usdc: usdc() })(`${baseUrl}/api/v1/execute`, {
      method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ targetAgentId: agentId, capabilityId: "tokens", input: { units: "2000" } })
    })
    return { status: r.status, used: r.headers.get("x-payment-used") ?? "", body: (await r.json()) as { data: { requestId: string; output?: unknown; settlement: { status: string } } } }
  })
  expect(paid.status).toBe(200)
  expect(paid.body.data).toMatchObject({ settlement: { status: "settlement_pending" } })
  expect(paid.body.data.output).toBeUndefined()
  expect(yield* Effect.promise(() => usdcBalance(payer.address))).toBe(before)
  return { payer, before, paid, baseUrl }
})

/** After the recovery: charged once, the output released to the header's holder, the ledger equal to the chain. */
const settledOnce = (c: Effect.Effect.Success<typeof crashedCall>, settlesSent = 1) =>
  Effect.gen(function* () {
    const { sql } = yield* TestEnv
    expect(yield* Effect.promise(() => usdcBalance(c.payer.address))).toBe(c.before - CHARGE)
    const status = yield* Effect.promise(() => call(`${c.baseUrl}/api/v1/execute/${c.paid.body.data.requestId}`, { headers: { "payment-signature": c.paid.used } }))
    expect(status.body).toMatchObject({ data: { status: "completed", output: { ok: true }, settlement: { status: "settled" }, metering: { charged: "0.005000" } } })
    expect(yield* ledgerMatchesChain).toBe(0n)
    const sent = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM treasury_txs WHERE purpose = 'upto_settle'`
    expect(sent[0]?.n).toBe(settlesSent)
  })

layer(
  TestApp({ BACKGROUND_WORKERS: "false", EXECUTION_TIMEOUT_MS: "10000" }, {
    faults: {
      afterSign: (tx) => (tx.purpose === "upto_settle" ? crashes.strike : Effect.void)
    }
  }),
  { excludeTestServices: true, timeout: 120_000 }
)("an upto settlement across a crash", (it) => {
  it.scoped("the worker sends the stored settle and records it: charged once, output released, ledger = chain", () =>
    Effect.gen(function* () {
      const { sql } = yield* TestEnv
      const crashed = yield* crashedCall
      expect(crashes.hits()).toBe(1)
      // The transaction's lease runs out (as after a restart); the worker sends its stored bytes and books the receipt.
      yield* sql`UPDATE treasury_txs SET lease_until = now() - interval '1 second' WHERE purpose = 'upto_settle'`
      yield* (yield* TreasuryWorker).processDue
      yield* settledOnce(crashed)
      expect(getAddress(TREASURY)).toBe(getAddress(devAccount(0).address))
    }))
})

layer(
  TestApp({ BACKGROUND_WORKERS: "false", EXECUTION_TIMEOUT_MS: "10000" }, {
    faults: { beforeUptoSettle: () => early.strike }
  }),
  { excludeTestServices: true, timeout: 120_000 }
)("an upto charge recorded, then a crash before its settle", (it) => {
  it.scoped("the upto recovery pass settles it once the payment's lease ran out", () =>
    Effect.gen(function* () {
      const { sql } = yield* TestEnv
      const crashed = yield* crashedCall
      expect(early.hits()).toBe(1)
      const [open] = yield* sql<{ status: string; uptoCharged: string }>`SELECT status, upto_charged::text FROM payments WHERE purpose = 'upto'`
      expect(open).toEqual({ status: "reserved", uptoCharged: CHARGE.toString() })
      yield* sql`UPDATE payments SET next_attempt_at = now() - interval '1 second' WHERE purpose = 'upto'`
      expect(yield* (yield* UptoSettlements).recoverDue).toBe(1)
      yield* settledOnce(crashed)
    }))
})

layer(
  TestApp({ BACKGROUND_WORKERS: "false", EXECUTION_TIMEOUT_MS: "10000" }, {
    faults: {
      afterSign: (tx) => (tx.purpose === "upto_settle" ? dropped.strike : Effect.void)
    }
  }),
  { excludeTestServices: true, timeout: 120_000 }
)("an upto settle whose nonce another transaction took", (it) => {
  it.scoped("the worker finds it dropped, the recovery pass sends a new settle: charged once, output released, ledger = chain", () =>
    Effect.gen(function* () {
      const { sql } = yield* TestEnv
      const crashed = yield* crashedCall
      expect(dropped.hits()).toBe(1)
      const [stored] = yield* sql<{ id: string; nonce: string }>`SELECT id, nonce::text FROM treasury_txs WHERE purpose = 'upto_settle'`
      // Another transaction of the treasury's key (an operator's tool) is mined at the stored settle's nonce.
      const treasury = walletFor(devAccount(0))
      yield* Effect.promise(async () =>
        treasury.waitForTransactionReceipt({ hash: await treasury.sendTransaction({ to: TREASURY, value: 0n, nonce: Number(stored!.nonce) }) }))
      yield* sql`UPDATE treasury_txs SET lease_until = now() - interval '1 second' WHERE id = ${stored!.id}`
      yield* (yield* TreasuryWorker).processDue
      const [waiting] = yield* sql<{ status: string; txState: string }>`
        SELECT p.status, t.state AS tx_state FROM payments p JOIN treasury_txs t ON t.id = ${stored!.id} WHERE p.purpose = 'upto'`
      expect(waiting).toEqual({ status: "retrying", txState: "dropped" })
      expect(yield* Effect.promise(() => usdcBalance(crashed.payer.address))).toBe(crashed.before)
      // Its retry is due: the recovery pass settles the charge with a new transaction.
      yield* sql`UPDATE payments SET next_attempt_at = now() - interval '1 second' WHERE purpose = 'upto'`
      expect(yield* (yield* UptoSettlements).recoverDue).toBe(1)
      yield* settledOnce(crashed, 2)
    }))
})
