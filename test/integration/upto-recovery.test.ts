// A process killed (kill -9) while the agent of an upto-paid call is still working: nothing was charged and nothing
// signed; the payment holds the call's maximum. Started again on the same database, the execution ends at its deadline (timeout)
// and the upto recovery pass, once the payment's lease ran out, voids the payment: no settle is sent, the payer keeps
// every micro-USDC, the maximum no longer counts against its unsettled payments, the escrow is not held, a
// re-sent header answers the call that timed out (it pays no other), and the ledger equals the chain.
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { getAddress, type Hex } from "viem"
import { beforeAll, inject } from "vitest"
import { call, devAccount, publicClient, usdcBalance } from "../support/clients.js"
import { recordingFetch } from "../support/channelClient.js"
import { capability } from "../support/fixtures.js"
import { meteredAgent } from "../support/meteredAgent.js"
import { PROCESS_OPERATOR_TOKEN, registerAgentAt, sharedSettings, UNFINISHED, untilProcesses } from "../support/processes.js"
import { ensureBundle, killHard, serverProcess } from "../support/servers.js"
import { approvePermit2, uptoClient } from "../support/uptoClient.js"

beforeAll(ensureBundle, 180_000)

const tokens = capability({
  id: "tokens", name: "Tokens", description: "per-token", inputSchema: undefined, outputSchema: undefined,
  pricing: { model: "per-token", basePrice: "0.002", currency: "USDC", maxTokens: 10_000 }
})

describe("an upto-paid call cut off by a crash while its agent works", () => {
  it.scopedLive("after a restart the payment is voided: nothing sent, nothing charged, the maximum released, a re-sent header answers the call that timed out, ledger = chain", () =>
    Effect.gen(function* () {
      const { env, query } = yield* sharedSettings({ EXECUTION_TIMEOUT_MS: "3000", EXECUTION_RETRY_WINDOW_SECONDS: "1" })
      const usdc: Hex = getAddress(inject("usdcAddress"))
      const first = yield* serverProcess(env)
      const agent = yield* meteredAgent
      const agentId = yield* registerAgentAt(first, devAccount(1), agent.url, [tokens])
      const payer = devAccount(7)
      yield* Effect.promise(async () => publicClient().waitForTransactionReceipt({ hash: await approvePermit2(payer, usdc) }))
      const before = yield* Effect.promise(() => usdcBalance(payer.address))

      // The official client pays the call's maximum by upto; the agent holds its answer far beyond the crash.
      const headers: Array<string> = []
      const body = JSON.stringify({ targetAgentId: agentId, capabilityId: "tokens", input: { units: "2000", delayMs: 60_000 } })
      const cut = uptoClient(payer, { rpcUrl: inject("rpcUrl"), usdc, fetch: recordingFetch(headers) })(`${first.baseUrl}/api/v1/execute`, {
        method: "POST", headers: { "content-type": "application/json" }, body
      }).then(() => "answered", () => "cut")
      const [reserved] = yield* untilProcesses(
        query<{ id: string; subjectId: string; amount: string }>(`SELECT id, subject_id AS "subjectId", amount::text FROM payments WHERE purpose = 'upto' AND status = 'reserved'`),
        (rows) => rows.length === 1 && agent.calls.length === 1,
        30_000
      )
      expect(yield* killHard(first)).toMatchObject({ signal: "SIGKILL" })
      expect(yield* Effect.promise(() => cut)).toBe("cut")

      // Started again on the same database: the attempt's deadline (the agent's timeout and a minute's grace) ends the
      // execution (timeout); the payment's lease runs out (as it does 60 s after the crash) and the recovery pass voids it.
      const second = yield* serverProcess(env)
      const [ended] = yield* untilProcesses(
        query<{ status: string }>(`SELECT status FROM executions WHERE id = $1`, [reserved!.subjectId]),
        (rows) => rows[0]?.status !== "pending",
        120_000
      )
      expect(ended!.status).toBe("timeout")
      yield* query(`UPDATE payments SET next_attempt_at = now() - interval '1 second' WHERE id = $1`, [reserved!.id])
      const [voided] = yield* untilProcesses(
        query<{ status: string; failureReason: string | null; uptoCharged: string | null; treasuryTxId: string | null }>(
          `SELECT status, failure_reason AS "failureReason", upto_charged::text AS "uptoCharged", treasury_tx_id AS "treasuryTxId" FROM payments WHERE id = $1`,
          [reserved!.id]
        ),
        (rows) => rows[0]?.status === "failed",
        30_000
      )
      expect(voided).toMatchObject({ uptoCharged: null, treasuryTxId: null })
      expect(voided!.failureReason).toMatch(/^unused/)

      // Nothing was sent and nothing charged; the escrow is not held and nothing is left open.
      const settles = yield* query<{ n: number }>(`SELECT count(*)::int AS n FROM treasury_txs WHERE purpose = 'upto_settle'`)
      expect(settles[0]!.n).toBe(0)
      expect(yield* Effect.promise(() => usdcBalance(payer.address))).toBe(before)
      expect((yield* query<{ n: number }>(UNFINISHED))[0]!.n).toBe(0)
      // The client retries with its header: it answers the call that timed out, and pays no other.
      const again = yield* Effect.promise(() => call(`${second.baseUrl}/api/v1/execute`, { method: "POST", json: JSON.parse(body), headers: { "payment-signature": headers[0] ?? "" } }))
      expect(again.status).toBe(504)
      expect(again.body).toMatchObject({ error: { code: "EXECUTION_TIMEOUT", details: { requestId: reserved!.subjectId, status: "timeout", funding: "upto" } } })
      expect(again.body.error?.message).toMatch(/nothing was charged/)
      expect((yield* query<{ n: number }>(`SELECT count(*)::int AS n FROM payments WHERE purpose = 'upto'`))[0]!.n).toBe(1)

      const reconciled = yield* untilProcesses(
        Effect.promise(() => call(`${second.baseUrl}/api/v1/operator/treasury/reconciliation`, { headers: { authorization: `Bearer ${PROCESS_OPERATOR_TOKEN}` } })),
        (r) => r.status === 200 && r.body.data?.current?.inFlightIncoming === "0" && r.body.data?.current?.inFlightOutgoing === "0",
        60_000
      )
      expect(reconciled.body.data.current).toMatchObject({ drift: "0" })
    }), { timeout: 300_000 })
})
