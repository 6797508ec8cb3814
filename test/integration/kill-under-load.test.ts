// kill -9 under load (issue 13): a server process (the start script, as deployed) is SIGKILLed while paid executions
// from eight clients are in flight; a restarted process finishes all of it from what PostgreSQL and the chain say.
// Afterwards nothing is left unfinished, each payer's USDC moved by exactly what the ledger says it paid and got back,
// every answered call is completed and settled, and the ledger's treasury equals the chain to the micro-USDC.
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { beforeAll } from "vitest"
import { fakeAgent } from "../support/agents.js"
import { devAccount, paidCall, TREASURY, usdcBalance } from "../support/clients.js"
import { registerAgentAt, sharedSettings, untilProcesses } from "../support/processes.js"
import { ensureBundle, killHard, serverProcess } from "../support/servers.js"

beforeAll(ensureBundle, 180_000)

interface Unfinished {
  readonly payments: number
  readonly executions: number
  readonly escrows: number
  readonly refunds: number
  readonly treasuryTxs: number
}

const UNFINISHED = `
  SELECT (SELECT count(*) FROM payments WHERE status IN ('reserved', 'retrying'))::int AS payments,
         (SELECT count(*) FROM executions WHERE status = 'pending')::int AS executions,
         (SELECT count(*) FROM escrows WHERE status IN ('held', 'refunding'))::int AS escrows,
         (SELECT count(*) FROM refunds WHERE status IN ('pending', 'submitted'))::int AS refunds,
         (SELECT count(*) FROM treasury_txs WHERE state IN ('signed', 'broadcast'))::int AS "treasuryTxs"`

const total = (u: Unfinished) => u.payments + u.executions + u.escrows + u.refunds + u.treasuryTxs

describe("kill -9 under load", () => {
  it.scopedLive("a server SIGKILLed with paid calls in flight: after a restart every payment is settled or refunded once and the ledger equals the chain", () =>
    Effect.gen(function* () {
      // Short agent time limit and retry window, so calls cut off at the agent are failed and refunded within the test.
      const { env, query } = yield* sharedSettings({ EXECUTION_TIMEOUT_MS: "2000", EXECUTION_RETRY_WINDOW_SECONDS: "1", TREASURY_RECEIPT_WAIT_MS: "2000" })
      const first = yield* serverProcess(env)
      const agent = yield* fakeAgent({ kind: "delay", ms: 40, then: "echo" })
      const agentId = yield* registerAgentAt(first, devAccount(1), agent.url)
      const payers = [2, 3, 4, 5, 6, 7, 8, 9].map(devAccount)
      const before = yield* Effect.promise(() => Promise.all(payers.map((p) => usdcBalance(p.address))))

      // Eight closed loops (the official x402 client: 402, sign, pay) until the process dies under them.
      let stop = false
      const answered: Array<{ readonly status: number; readonly requestId: string | undefined }> = []
      const loops = payers.map(async (payer, i) => {
        for (let n = 0; !stop; n++) {
          const result = await paidCall(payer, `${first.baseUrl}/api/v1/execute`, { json: { targetAgentId: agentId, capabilityId: "echo", input: { text: `load ${i}-${n}` } } })
            .catch(() => undefined)
          if (result !== undefined && !stop) answered.push({ status: result.status, requestId: result.body?.data?.requestId })
        }
      })
      yield* untilProcesses(Effect.sync(() => answered.length), (n) => n >= 24, 60_000)
      stop = true
      expect(yield* killHard(first)).toMatchObject({ signal: "SIGKILL" })
      yield* Effect.promise(() => Promise.all(loops))
      // The crash left work half done (the dead process cannot change anything after this read).
      const [atKill] = yield* query<Unfinished>(UNFINISHED)
      expect(total(atKill!)).toBeGreaterThan(0)
      expect(answered.every((a) => a.status === 200)).toBe(true)

      yield* serverProcess(env)
      yield* untilProcesses(Effect.map(query<Unfinished>(UNFINISHED), (rows) => rows[0]!), (u) => total(u) === 0, 150_000)

      // Every answered call is completed on a settled payment.
      const answeredIds = answered.map((a) => a.requestId).filter((id): id is string => id !== undefined)
      expect(answeredIds).toHaveLength(answered.length)
      const finished = yield* query<{ id: string; status: string; payment: string }>(
        "SELECT e.id, e.status, p.status AS payment FROM executions e JOIN payments p ON p.id = e.payment_id WHERE e.id = ANY($1)", [answeredIds])
      expect(finished).toHaveLength(answeredIds.length)
      expect(finished.filter((e) => e.status !== "completed" || e.payment !== "settled")).toEqual([])

      // Each payer's USDC moved by what the ledger's records say: settled payments out, confirmed refunds back.
      const after = yield* Effect.promise(() => Promise.all(payers.map((p) => usdcBalance(p.address))))
      const paid = yield* query<{ payer: string; amount: string }>(
        "SELECT payer, sum(amount)::text AS amount FROM payments WHERE status = 'settled' AND purpose = 'execution' GROUP BY payer")
      const refunded = yield* query<{ payer: string; amount: string }>(
        "SELECT lower(to_address) AS payer, sum(amount)::text AS amount FROM refunds WHERE status = 'confirmed' GROUP BY lower(to_address)")
      const sumFor = (rows: ReadonlyArray<{ payer: string; amount: string }>, address: string) =>
        BigInt(rows.find((r) => r.payer === address.toLowerCase())?.amount ?? "0")
      payers.forEach((p, i) => {
        expect((before[i] ?? 0n) - (after[i] ?? 0n)).toBe(sumFor(paid, p.address) - sumFor(refunded, p.address))
      })
      // Nothing failed for want of money or by a double spend: each authorization was settled or refused once.
      const failed = yield* query<{ reason: string | null }>("SELECT failure_reason AS reason FROM payments WHERE status = 'failed'")
      expect(failed).toEqual([])

      // The ledger's treasury equals the treasury's USDC on chain, to the micro-USDC (all settled, nothing in flight).
      const chain = yield* Effect.promise(() => usdcBalance(TREASURY))
      const [ledger] = yield* query<{ total: string }>("SELECT COALESCE(sum(amount), 0)::text AS total FROM ledger_entries WHERE account_id = 'treasury'")
      expect(chain - BigInt(ledger?.total ?? "0")).toBe(0n)
    }), { timeout: 300_000 })
})
