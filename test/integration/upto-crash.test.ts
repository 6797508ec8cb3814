// A process that dies while an upto settlement is in flight: the settle's signed bytes are stored and never broadcast
// (the crash's moment). The call answers without its output, settlement pending; the treasury worker, once the
// transaction's lease ran out, sends the stored bytes, reads the receipt and records the settlement: the payer paid the
// charge once, the output is released, and the ledger agrees with the chain.
import { expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import { getAddress, type Hex } from "viem"
import { inject } from "vitest"
import { TreasuryWorker } from "../../services/treasury/TreasuryWorker.js"
import { call, devAccount, publicClient, TREASURY, usdcBalance } from "../support/clients.js"
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

/** Dies once, right after the first upto settle's bytes were stored. */
let crashes = 0
const usdc = (): Hex => getAddress(inject("usdcAddress"))

layer(
  TestApp({ BACKGROUND_WORKERS: "false", EXECUTION_TIMEOUT_MS: "10000" }, {
    faults: {
      afterSign: (tx) => (tx.purpose === "upto_settle" && crashes === 0 ? Effect.sync(() => crashes++).pipe(Effect.zipRight(Effect.die("crash after signing"))) : Effect.void)
    }
  }),
  { excludeTestServices: true, timeout: 120_000 }
)("an upto settlement across a crash", (it) => {
  it.scoped("the worker sends the stored settle and records it: charged once, output released, ledger = chain", () =>
    Effect.gen(function* () {
      const { baseUrl, sql } = yield* TestEnv
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
      expect(crashes).toBe(1)
      expect(paid.status).toBe(200)
      expect(paid.body.data).toMatchObject({ settlement: { status: "settlement_pending" } })
      expect(paid.body.data.output).toBeUndefined()
      expect(yield* Effect.promise(() => usdcBalance(payer.address))).toBe(before)

      // The transaction's lease runs out (as after a restart); the worker sends its stored bytes and books the receipt.
      yield* sql`UPDATE treasury_txs SET lease_until = now() - interval '1 second' WHERE purpose = 'upto_settle'`
      yield* (yield* TreasuryWorker).processDue
      const [tx] = yield* sql<{ state: string }>`SELECT state FROM treasury_txs WHERE purpose = 'upto_settle'`
      expect(tx?.state).not.toBe("signed")
      expect(yield* Effect.promise(() => usdcBalance(payer.address))).toBe(before - CHARGE)

      const status = yield* Effect.promise(() => call(`${baseUrl}/api/v1/execute/${paid.body.data.requestId}`, { headers: { "payment-signature": paid.used } }))
      expect(status.body).toMatchObject({ data: { status: "completed", output: { ok: true }, settlement: { status: "settled" }, metering: { charged: "0.005000" } } })
      expect(yield* ledgerMatchesChain).toBe(0n)
      // One settle, from the treasury writer: the crash sent nothing twice.
      const sent = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM treasury_txs WHERE purpose = 'upto_settle'`
      expect(sent[0]?.n).toBe(1)
      expect(getAddress(TREASURY)).toBe(getAddress(devAccount(0).address))
    }))
})
