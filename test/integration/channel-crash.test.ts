// kill -9 between a voucher's charge and the call's answer: the service (its own embedded PostgreSQL) dies with a
// channel-paid call in flight, charged and not answered. Started again on the same data, the call runs out its deadline
// and gives its charge back (charged once or not at all); the payer's client sends the very same header again and
// that pays the retry, kept once. The channel's charged total is exactly the one call.
import { describe, expect, it } from "@effect/vitest"
import { computeChannelId, signVoucher } from "@x402/evm/batch-settlement/client"
import { decodePaymentRequiredHeader } from "@x402/core/http"
import { Effect } from "effect"
import pg from "pg"
import { beforeAll } from "vitest"
import { encodeHeaderJson } from "../../layers/x402/v2.js"
import { channelMachine } from "../../machines/channel.js"
import { startMachine, stepMachine } from "../../machines/step.js"
import { fakeAgent } from "../support/agents.js"
import { devAccount } from "../support/clients.js"
import { depositOnChain, NETWORK, saltOf } from "../support/channelOpen.js"
import { embeddedDatabase, PROCESS_OPERATOR_TOKEN, postgresServing, registerAgentAt, tempDataDir, untilProcesses } from "../support/processes.js"
import { ensureBundle, killHard, serverProcess } from "../support/servers.js"
import { inject } from "vitest"

beforeAll(ensureBundle, 180_000)

const PRICE = 11_000n

describe("a channel-paid call across kill -9", () => {
  it.scopedLive("charged, then the host dies before the answer: after the restart the charge goes back, the same header pays the retry once", () =>
    Effect.gen(function* () {
      const dataDir = yield* tempDataDir("marketplace-channel-crash-")
      yield* Effect.addFinalizer(() => Effect.sync(() => postgresServing(dataDir).forEach((pid) => process.kill(pid, "SIGKILL"))))
      const env = {
        DATA_DIR: dataDir, DEVNET_RPC_URL: inject("rpcUrl"), OPERATOR_TOKEN: PROCESS_OPERATOR_TOKEN,
        EXECUTION_TIMEOUT_MS: "3000", EXECUTION_RETRY_WINDOW_SECONDS: "1"
      }
      const first = yield* serverProcess(env)
      const agent = yield* fakeAgent({ kind: "delay", ms: 20_000, then: "echo" })
      const agentId = yield* registerAgentAt(first, devAccount(4), agent.url)
      const payer = devAccount(5)
      const salt = saltOf(`crash ${Date.now()}`)
      const { config, channelId, hash } = yield* Effect.promise(() => depositOnChain(payer, 1_000_000n, salt))
      let db = yield* embeddedDatabase(dataDir)
      const query = <R extends pg.QueryResultRow>(text: string, values: ReadonlyArray<unknown> = []) =>
        Effect.promise(() => db.query<R>(text, [...values]).then((r) => r.rows))
      const opened = stepMachine(channelMachine, startMachine(channelMachine, {}).persisted, { type: "DEPOSIT_INCLUDED", at: Date.now(), txHash: hash, balance: "1000000" })
      yield* query(
        `INSERT INTO channels (id, network, payer, payer_authorizer, receiver, token, withdraw_delay, balance, status, machine_snapshot, salt, receiver_authorizer)
         VALUES ($1, 'base-sepolia', $2, $2, $3, $4, $5, 1000000, 'open', $6::jsonb, $7, $8)`,
        [channelId, payer.address.toLowerCase(), config.receiver.toLowerCase(), config.token.toLowerCase(), config.withdrawDelay, JSON.stringify(opened.persisted), salt, config.receiverAuthorizer.toLowerCase()]
      )

      const body = JSON.stringify({ targetAgentId: agentId, capabilityId: "echo", input: { text: "across a crash" } })
      const offer = yield* Effect.promise(async () => {
        const r = await fetch(`${first.baseUrl}/api/v1/execute`, { method: "POST", headers: { "content-type": "application/json" }, body })
        return decodePaymentRequiredHeader(r.headers.get("PAYMENT-REQUIRED")!).accepts.find((a) => a.scheme === "batch-settlement")!
      })
      const voucher = yield* Effect.promise(() => signVoucher(payer, computeChannelId(config, NETWORK), PRICE.toString(), NETWORK))
      const header = encodeHeaderJson({ x402Version: 2, accepted: offer, payload: { type: "voucher", channelConfig: config, voucher } })
      const send = (baseUrl: string) =>
        fetch(`${baseUrl}/api/v1/execute`, { method: "POST", headers: { "content-type": "application/json", "PAYMENT-SIGNATURE": header }, body })
      // The call is charged and its agent is working: the host dies before it answers.
      const lost = send(first.baseUrl).then((r) => r.status, () => 0)
      yield* untilProcesses(query<{ status: string }>(`SELECT status FROM channel_charges WHERE channel_id = $1`, [channelId]), (rows) => rows.length === 1, 20_000)
      expect(yield* killHard(first)).toMatchObject({ signal: "SIGKILL" })
      expect(yield* Effect.promise(() => lost)).toBe(0)

      // Started again: the call runs out its deadline (the agent timeout plus 60 s of grace: a dead attempt has no
      // recorded result) and gives its charge back, once.
      const second = yield* serverProcess(env)
      db = yield* embeddedDatabase(dataDir)
      yield* untilProcesses(query<{ status: string }>(`SELECT status FROM channel_charges WHERE channel_id = $1`, [channelId]), (rows) => rows[0]?.status === "returned", 150_000)
      const [afterCrash] = yield* query<{ charged: string }>(`SELECT charged_cumulative::text AS charged FROM channels WHERE id = $1`, [channelId])
      expect(afterCrash?.charged).toBe("0")

      // The payer's client sends the very same header again: it pays the retry, kept once.
      agent.setBehaviour("echo")
      const retried = yield* Effect.promise(() => send(second.baseUrl).then(async (r) => ({ status: r.status, json: (await r.json()) as { data?: { status: string } } })))
      expect(retried.status).toBe(200)
      expect(retried.json.data?.status).toBe("completed")
      const charges = yield* query<{ status: string }>(`SELECT status FROM channel_charges WHERE channel_id = $1 ORDER BY created_at`, [channelId])
      expect(charges.map((c) => c.status)).toEqual(["returned", "kept"])
      const [row] = yield* query<{ charged: string }>(`SELECT charged_cumulative::text AS charged FROM channels WHERE id = $1`, [channelId])
      expect(row?.charged).toBe(PRICE.toString())
      // The ledger's channel receivable holds exactly the one kept call.
      const [receivable] = yield* query<{ balance: string }>(`SELECT COALESCE(sum(amount), 0)::text AS balance FROM ledger_entries WHERE account_id = 'channel_receivable'`)
      expect(receivable?.balance).toBe(PRICE.toString())
    }), { timeout: 300_000 })
})
