// Counterfactual (ERC-6492) payers cost the treasury a deployment: concurrent payments of one account funded for one
// price buy one deployment, one settlement and one agent call (the others are refused before anything is reserved);
// an account funded for all of them is still deployed once; a payment whose window cannot hold the deployment and the
// settlement is refused up front. Treasury transactions are counted from the database and their gas from the chain.
import { expect, layer } from "@effect/vitest"
import { Effect, TestClock } from "effect"
import { createTestClient, getAddress, type Hex, http } from "viem"
import { inject } from "vitest"
import type { VerifiedPayment } from "../../layers/x402/payment.js"
import { Payments } from "../../services/payments/Payments.js"
import { fakeAgent } from "../support/agents.js"
import { call, devAccount, publicClient, usdcBalance } from "../support/clients.js"
import { TestApp, TestEnv } from "../support/harness.js"
import { ledgerMatchesChain, registerAgent } from "../support/scenario.js"
import { deployFactory, factoryAddress, hasCode, smartAccount, smartPayment } from "../support/smartAccounts.js"

const PRICE = 11_000n // 0.01 + the 10% client fee
const FACTORY = factoryAddress(0)
const PAYMENTS = 6

/** Our clock starts at the real time (payments are signed against it). */
const realNow = Effect.flatMap(Effect.sync(() => Date.now()), (now) => TestClock.setTime(now))

layer(TestApp({
  BACKGROUND_WORKERS: "false",
  RATE_LIMIT_CLIENT_PER_WINDOW: "1000",
  RATE_LIMIT_AGENT_PER_WINDOW: "1000",
  PAYMENT_TIMEOUT_SECONDS: "900",
  X402_EIP6492_ALLOWED_FACTORIES: FACTORY
}))("counterfactual payers and the treasury's gas", (it) => {
  const factory = Effect.promise(async () => {
    if (!(await hasCode(FACTORY))) expect(getAddress(await deployFactory())).toBe(FACTORY)
  })

  const executeWith = (header: string, agentId: string, text: string) =>
    Effect.flatMap(TestEnv, ({ baseUrl }) =>
      Effect.promise(() =>
        call(`${baseUrl}/api/v1/execute`, { method: "POST", json: { targetAgentId: agentId, capabilityId: "echo", input: { text } }, headers: { "X-PAYMENT": header } })))

  /** The treasury transactions sent since `since` (their purposes, targets and the gas the chain says they used). */
  const treasurySince = (since: Date) =>
    Effect.gen(function* () {
      const { sql } = yield* TestEnv
      const rows = yield* sql<{ purpose: string; toAddress: string; txHash: string }>`SELECT purpose, to_address, tx_hash FROM treasury_txs
        WHERE created_at >= ${since} ORDER BY nonce`
      const gas = yield* Effect.forEach(rows, (r) =>
        Effect.promise(() => publicClient().getTransactionReceipt({ hash: r.txHash as Hex }).then((receipt) => receipt.gasUsed)))
      return { rows, gas: gas.reduce((a, b) => a + b, 0n) }
    })

  const echoAgent = (owner: number) =>
    Effect.gen(function* () {
      const echo = yield* fakeAgent("echo")
      return { id: yield* registerAgent(devAccount(owner), echo.url, { tier: "premium" }), calls: echo.calls }
    })

  it.scoped("six concurrent payments of one counterfactual account funded for one price: one deployment, one settlement, one agent call; the other five are refused before anything is reserved", () =>
    Effect.gen(function* () {
      yield* realNow
      yield* factory
      const { sql } = yield* TestEnv
      const echo = yield* echoAgent(3)
      const account = yield* Effect.promise(() => smartAccount(FACTORY, { deployed: false, usdc: PRICE }))
      const signed = yield* Effect.forEach(Array.from({ length: PAYMENTS }), () => Effect.promise(() => smartPayment(account, PRICE)))
      const since = new Date()
      const answers = yield* Effect.all(signed.map((s, i) => executeWith(s.header, echo.id, `attack ${i}`)), { concurrency: "unbounded" })

      const served = answers.filter((a) => a.status === 200)
      expect(served, JSON.stringify(answers.map((a) => a.body))).toHaveLength(1)
      expect(served[0]!.body.data.settlement.status).toBe("settled")
      expect(served[0]!.body.data.output).toMatchObject({ echo: { text: expect.stringMatching(/^attack /) } })
      const refused = answers.filter((a) => a.status !== 200)
      expect(refused.map((a) => [a.status, a.body.error?.details?.reason])).toEqual(refused.map(() => [402, "insufficient_funds"]))
      // The agent was called once: the refused payments never reached it.
      expect(echo.calls).toHaveLength(1)
      // One payment reserved; nothing else was stored for the refused ones.
      const payments = yield* sql<{ status: string }>`SELECT status FROM payments WHERE payer = ${account.address.toLowerCase()}`
      expect(payments).toEqual([{ status: "settled" }])
      expect(yield* sql`SELECT 1 FROM executions WHERE payer = ${account.address.toLowerCase()}`).toHaveLength(1)

      // The treasury paid for one deployment (one factory call) and one settlement: what one price bought.
      const { rows, gas } = yield* treasurySince(since)
      expect(rows.map((r) => [r.purpose, r.toAddress])).toEqual([["account_deploy", FACTORY.toLowerCase()], ["settlement", expect.any(String)]])
      expect(gas).toBeLessThan(1_000_000n + 300_000n)
      expect(yield* Effect.promise(() => hasCode(account.address))).toBe(true)
      expect(yield* Effect.promise(() => usdcBalance(account.address))).toBe(0n)
      expect(yield* ledgerMatchesChain).toBe(0n)
    }), { timeout: 120_000 })

  it.scoped("an account funded for all of its concurrent payments is deployed once: every payment waits for that deployment, settles, and is served", () =>
    Effect.gen(function* () {
      yield* realNow
      yield* factory
      const echo = yield* echoAgent(4)
      const account = yield* Effect.promise(() => smartAccount(FACTORY, { deployed: false, usdc: BigInt(PAYMENTS) * PRICE }))
      const signed = yield* Effect.forEach(Array.from({ length: PAYMENTS }), () => Effect.promise(() => smartPayment(account, PRICE)))
      const since = new Date()
      const answers = yield* Effect.all(signed.map((s, i) => executeWith(s.header, echo.id, `funded ${i}`)), { concurrency: "unbounded" })
      expect(answers.map((a) => [a.status, a.body.data?.settlement?.status]), JSON.stringify(answers.map((a) => a.body)))
        .toEqual(answers.map(() => [200, "settled"]))
      expect(echo.calls).toHaveLength(PAYMENTS)
      const { rows } = yield* treasurySince(since)
      expect(rows.filter((r) => r.purpose === "account_deploy")).toHaveLength(1)
      expect(rows.filter((r) => r.purpose === "settlement")).toHaveLength(PAYMENTS)
      expect(yield* Effect.promise(() => usdcBalance(account.address))).toBe(0n)
      expect(yield* ledgerMatchesChain).toBe(0n)
    }), { timeout: 120_000 })

  it.scoped("a counterfactual account's payment valid for less than the deployment and the settlement need is refused up front; nothing is deployed", () =>
    Effect.gen(function* () {
      yield* realNow
      yield* factory
      const { sql } = yield* TestEnv
      const echo = yield* echoAgent(5)
      const account = yield* Effect.promise(() => smartAccount(FACTORY, { deployed: false, usdc: PRICE }))
      // Past the 6 s every payment needs, short of the 6 + 60 s a counterfactual one needs.
      const short = yield* Effect.promise(() => smartPayment(account, PRICE, { validForSeconds: 30 }))
      const answer = yield* executeWith(short.header, echo.id, "short")
      expect(answer.status, JSON.stringify(answer.body)).toBe(402)
      expect(answer.body.error?.details).toMatchObject({ reason: "invalid_exact_evm_payload_authorization_valid_before", minValiditySeconds: 66 })
      expect(yield* sql`SELECT 1 FROM payments WHERE nonce = ${short.nonce}`).toHaveLength(0)
      expect(echo.calls).toHaveLength(0)
      expect(yield* Effect.promise(() => hasCode(account.address))).toBe(false)

      // Valid long enough, the same account pays, is deployed and served.
      const enough = yield* Effect.promise(() => smartPayment(account, PRICE, { validForSeconds: 120 }))
      const paid = yield* executeWith(enough.header, echo.id, "enough")
      expect([paid.status, paid.body.data?.settlement?.status], JSON.stringify(paid.body)).toEqual([200, "settled"])
      expect(yield* Effect.promise(() => hasCode(account.address))).toBe(true)
    }), { timeout: 120_000 })
})

/** The devnet stops mining when the watched payer's settlement starts (its deployment then waits in the mempool). */
const anvil = () => createTestClient({ mode: "anvil", transport: http(inject("rpcUrl")) })
let stallFor: string | undefined
const stallMining = (p: VerifiedPayment) =>
  Effect.suspend(() => (p.payer !== stallFor ? Effect.void : Effect.promise(() => anvil().setAutomine(false))))

layer(TestApp({
  BACKGROUND_WORKERS: "false",
  PAYMENT_TIMEOUT_SECONDS: "900",
  TREASURY_RECEIPT_WAIT_MS: "300",
  X402_EIP6492_ALLOWED_FACTORIES: FACTORY
}, { faults: { beforeSettle: stallMining } }))("a counterfactual payer whose deployment is not mined in time", (it) => {
  it.scoped("the agent is not called; once the deployment is mined the payment settles once and the agent is still not called (the failed call holds the money for its refund)", () =>
    Effect.gen(function* () {
      yield* realNow
      yield* Effect.addFinalizer(() => Effect.promise(() => anvil().setAutomine(true)))
      if (!(yield* Effect.promise(() => hasCode(FACTORY)))) expect(getAddress(yield* Effect.promise(deployFactory))).toBe(FACTORY)
      const { baseUrl, sql } = yield* TestEnv
      const echo = yield* fakeAgent("echo")
      const agentId = yield* registerAgent(devAccount(6), echo.url, { tier: "premium" })
      const account = yield* Effect.promise(() => smartAccount(FACTORY, { deployed: false, usdc: PRICE }))
      const { header, nonce } = yield* Effect.promise(() => smartPayment(account, PRICE))
      stallFor = account.address.toLowerCase()
      const answer = yield* Effect.promise(() =>
        call(`${baseUrl}/api/v1/execute`, { method: "POST", json: { targetAgentId: agentId, capabilityId: "echo", input: { text: "stalled" } }, headers: { "X-PAYMENT": header } }))
      stallFor = undefined
      expect(answer.status, JSON.stringify(answer.body)).not.toBe(200)
      expect(JSON.stringify(answer.body)).toContain("the agent was not called")
      expect(echo.calls).toHaveLength(0)
      const deploys = sql<{ state: string }>`SELECT state FROM treasury_txs WHERE purpose = 'account_deploy' AND subject_id = ${account.address.toLowerCase()}`
      // Sent, not mined: the one deployment of this account is in flight.
      expect((yield* deploys).map((d) => d.state)).toEqual([expect.stringMatching(/^(signed|broadcast)$/)])

      // The chain mines again: the recovery pass finds the account deployed and settles the payment, once.
      yield* Effect.promise(async () => {
        await anvil().setAutomine(true)
        await anvil().mine({ blocks: 1 })
      })
      const status = Effect.map(sql<{ status: string }>`SELECT status FROM payments WHERE nonce = ${nonce}`, (r) => r[0]?.status)
      for (let i = 0; i < 4 && (yield* status) !== "settled"; i++) {
        yield* TestClock.adjust(61_000)
        yield* (yield* Payments).recoverDue
      }
      expect(yield* status).toBe("settled")
      expect(yield* Effect.promise(() => hasCode(account.address))).toBe(true)
      expect(yield* deploys).toHaveLength(1)
      expect(echo.calls).toHaveLength(0)
      const [execution] = yield* sql<{ status: string }>`SELECT status FROM executions WHERE payer = ${account.address.toLowerCase()}`
      expect(execution?.status).not.toBe("completed")
    }), { timeout: 120_000 })
})
