// Payers with smart-contract wallets (issue 27): a deployed ERC-1271 account and a counterfactual ERC-6492 account pay
// by hand and through the unmodified @x402/fetch; their payments are verified on chain, settled through the token's
// signature check (the counterfactual account deployed first by its allowed factory) and refunded to the account when
// the call fails; a wrong signature and a factory not on the allow-list are refused before anything is reserved.
import { expect, layer } from "@effect/vitest"
import { ExactEvmScheme } from "@x402/evm/exact/client"
import { wrapFetchWithPayment, x402Client } from "@x402/fetch"
import { Effect, Fiber, TestClock } from "effect"
import { getAddress } from "viem"
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts"
import { inject } from "vitest"
import { MachineHost } from "../../machines/Host.js"
import { Payments } from "../../services/payments/Payments.js"
import { Refunds } from "../../services/refunds/Refunds.js"
import { TreasuryWorker } from "../../services/treasury/TreasuryWorker.js"
import { fakeAgent } from "../support/agents.js"
import { call, devAccount, type Envelope, usdcBalance } from "../support/clients.js"
import { TestApp, TestEnv } from "../support/harness.js"
import { makeGate } from "../support/gate.js"
import { execute, ledgerMatchesChain, registerAgent } from "../support/scenario.js"
import { clientSigner, deployFactory, factoryAddress, hasCode, type SignOptions, type SmartAccount, smartAccount, smartPayment } from "../support/smartAccounts.js"

const PRICE = 11_000n // 0.01 + the 10% client fee

/** The first factory the run's deployer makes is allowed; the second is not. */
const ALLOWED = factoryAddress(0)
const NOT_ALLOWED = factoryAddress(1)

/** Our clock starts at the real time (payments are signed against it), then only the test moves it. */
const realNow = Effect.flatMap(Effect.sync(() => Date.now()), (now) => TestClock.setTime(now))

/** Holds the first settlement sent after `arm()` in flight until `open()`: the payments arriving meanwhile form one batch. */
const gate = makeGate()

const App = TestApp({
  BACKGROUND_WORKERS: "false",
  EXECUTION_RETRY_WINDOW_SECONDS: "600",
  RATE_LIMIT_CLIENT_PER_WINDOW: "1000",
  PAYMENT_TIMEOUT_SECONDS: "900",
  X402_EIP6492_ALLOWED_FACTORIES: ALLOWED
}, { faults: { afterBroadcast: gate.afterBroadcast } })

layer(App)("smart-account payers", (it) => {
  const factories = Effect.promise(async () => {
    if (!(await hasCode(ALLOWED))) expect(getAddress(await deployFactory())).toBe(ALLOWED)
    if (!(await hasCode(NOT_ALLOWED))) expect(getAddress(await deployFactory())).toBe(NOT_ALLOWED)
  })

  const executeWith = (header: string, agentId: string, text: string) =>
    Effect.flatMap(TestEnv, ({ baseUrl }) =>
      Effect.promise(() =>
        call(`${baseUrl}/api/v1/execute`, { method: "POST", json: { targetAgentId: agentId, capabilityId: "echo", input: { text } }, headers: { "X-PAYMENT": header } })))

  /** Closes the failed calls' retry windows and runs the workers until their refunds are paid. */
  const payRefunds = Effect.gen(function* () {
    yield* TestClock.adjust(601_000)
    const host = yield* MachineHost
    while ((yield* host.fireDue) > 0) { /* every window closes */ }
    yield* (yield* Refunds).sendDue
    const worker = yield* TreasuryWorker
    for (let i = 0; i < 5; i++) yield* worker.processDue
  })

  /** A call from `account` to a failing agent: paid on chain, then refunded to the account; ledger = chain. */
  const paidThenRefunded = (account: SmartAccount, agentOwner: number, sign: SignOptions = {}) =>
    Effect.gen(function* () {
      const { sql } = yield* TestEnv
      const failing = yield* fakeAgent({ kind: "json", status: 200, body: { wrong: true } })
      const agentId = yield* registerAgent(devAccount(agentOwner), failing.url, { tier: "premium" })
      const before = yield* Effect.promise(() => usdcBalance(account.address))
      const { header } = yield* Effect.promise(() => smartPayment(account, PRICE, sign))
      const answer = yield* executeWith(header, agentId, "smart")
      expect(answer.status, JSON.stringify(answer.body)).toBe(502)
      const requestId = String(answer.body.error?.details?.requestId)
      const [payment] = yield* sql<{ status: string; payer: string }>`SELECT p.status, p.payer FROM payments p
        JOIN executions e ON e.payment_id = p.id WHERE e.id = ${requestId}`
      expect(payment).toEqual({ status: "settled", payer: account.address.toLowerCase() })
      expect((yield* Effect.promise(() => usdcBalance(account.address))) - before).toBe(-PRICE)

      yield* payRefunds
      const refunds = yield* sql<{ status: string; toAddress: string }>`SELECT status, to_address FROM refunds WHERE execution_id = ${requestId}`
      expect(refunds).toEqual([{ status: "confirmed", toAddress: account.address.toLowerCase() }])
      expect(yield* Effect.promise(() => usdcBalance(account.address))).toBe(before)
      expect(yield* ledgerMatchesChain).toBe(0n)
    })

  it.scoped("a deployed ERC-1271 account's payment is verified on chain, settled by the token's signature check, and refunded to the account", () =>
    Effect.gen(function* () {
      yield* realNow
      yield* factories
      const account = yield* Effect.promise(() => smartAccount(ALLOWED, { deployed: true, usdc: 1_000_000n }))
      yield* paidThenRefunded(account, 3)
    }), { timeout: 120_000 })

  it.scoped("a smart account's signature that is not 65 bytes settles alone through the token's bytes overload, and is refunded", () =>
    Effect.gen(function* () {
      yield* realNow
      yield* factories
      const account = yield* Effect.promise(() => smartAccount(ALLOWED, { deployed: true, usdc: 1_000_000n }))
      yield* paidThenRefunded(account, 8, { prefixed: true })
      const { sql } = yield* TestEnv
      const [tx] = yield* sql<{ purpose: string }>`SELECT t.purpose FROM treasury_txs t JOIN payments p ON p.treasury_tx_id = t.id
        WHERE p.payer = ${account.address.toLowerCase()}`
      expect(tx).toEqual({ purpose: "settlement" })
    }), { timeout: 120_000 })

  it.scoped("a counterfactual ERC-6492 account is deployed by its allowed factory, then settled, and refunded to the account", () =>
    Effect.gen(function* () {
      yield* realNow
      yield* factories
      const account = yield* Effect.promise(() => smartAccount(ALLOWED, { deployed: false, usdc: 1_000_000n }))
      expect(yield* Effect.promise(() => hasCode(account.address))).toBe(false)
      yield* paidThenRefunded(account, 4)
      expect(yield* Effect.promise(() => hasCode(account.address))).toBe(true)
      const { sql } = yield* TestEnv
      const deploys = yield* sql<{ state: string; toAddress: string }>`SELECT state, to_address FROM treasury_txs WHERE purpose = 'account_deploy'`
      expect(deploys).toEqual([{ state: "confirmed", toAddress: ALLOWED.toLowerCase() }])
    }), { timeout: 120_000 })

  /** An echo agent owned by dev account `owner` (one agent per wallet), which a refused payment never reaches. */
  const echoAgent = (owner: number) =>
    Effect.gen(function* () {
      const echo = yield* fakeAgent("echo")
      return { id: yield* registerAgent(devAccount(owner), echo.url, { tier: "premium" }), calls: echo.calls }
    })

  const refusedBeforeReserving = (echo: { readonly id: string; readonly calls: ReadonlyArray<unknown> }, account: SmartAccount, header: string, nonce: string, reason: string) =>
    Effect.gen(function* () {
      const { sql } = yield* TestEnv
      const before = yield* Effect.promise(() => usdcBalance(account.address))
      const answer = yield* executeWith(header, echo.id, "refused")
      expect(answer.status, JSON.stringify(answer.body)).toBe(402)
      expect(answer.body.error?.details?.reason).toBe(reason)
      expect(yield* sql`SELECT 1 FROM payments WHERE nonce = ${nonce}`).toHaveLength(0)
      expect(yield* sql`SELECT 1 FROM executions WHERE payer = ${account.address.toLowerCase()}`).toHaveLength(0)
      expect(echo.calls).toHaveLength(0)
      expect(yield* Effect.promise(() => usdcBalance(account.address))).toBe(before)
    })

  it.scoped("a smart account's payment signed by a key that is not its owner is refused before anything is reserved", () =>
    Effect.gen(function* () {
      yield* factories
      const echo = yield* echoAgent(5)
      const deployed = yield* Effect.promise(() => smartAccount(ALLOWED, { deployed: true, usdc: 100_000n }))
      const stranger = privateKeyToAccount(generatePrivateKey())
      const wrong = yield* Effect.promise(() => smartPayment(deployed, PRICE, { signer: stranger }))
      yield* refusedBeforeReserving(echo, deployed, wrong.header, wrong.nonce, "invalid_exact_evm_payload_signature")
      const counterfactual = yield* Effect.promise(() => smartAccount(ALLOWED, { deployed: false, usdc: 100_000n }))
      const wrong6492 = yield* Effect.promise(() => smartPayment(counterfactual, PRICE, { signer: stranger }))
      yield* refusedBeforeReserving(echo, counterfactual, wrong6492.header, wrong6492.nonce, "invalid_exact_evm_payload_signature")
      expect(yield* Effect.promise(() => hasCode(counterfactual.address))).toBe(false)
    }), { timeout: 60_000 })

  it.scoped("a counterfactual account whose factory is not on the allow-list is refused and never deployed", () =>
    Effect.gen(function* () {
      yield* factories
      const echo = yield* echoAgent(7)
      const account = yield* Effect.promise(() => smartAccount(NOT_ALLOWED, { deployed: false, usdc: 100_000n }))
      const payment = yield* Effect.promise(() => smartPayment(account, PRICE))
      yield* refusedBeforeReserving(echo, account, payment.header, payment.nonce, "eip6492_factory_not_allowed")
      expect(yield* Effect.promise(() => hasCode(account.address))).toBe(false)
    }), { timeout: 60_000 })

  it.scoped("the unmodified @x402/fetch pays with a smart-account signer, counterfactual then deployed", () =>
    Effect.gen(function* () {
      yield* realNow
      yield* factories
      const { baseUrl } = yield* TestEnv
      const echo = yield* fakeAgent("echo")
      const agentId = yield* registerAgent(devAccount(6), echo.url, { tier: "premium" })
      const account = yield* Effect.promise(() => smartAccount(ALLOWED, { deployed: false, usdc: 1_000_000n }))
      const usdc = getAddress(inject("usdcAddress"))
      const client = new x402Client()
        .register("eip155:84532", new ExactEvmScheme(clientSigner(account)))
        .setSpendControls({ allowedAssets: [{ network: "eip155:84532", asset: usdc, maxAmountPerPayment: "10000000" }] })
      const paying = wrapFetchWithPayment(fetch, client)
      const before = yield* Effect.promise(() => usdcBalance(account.address))
      for (const text of ["first (account not deployed)", "second (account deployed)"]) {
        const response = yield* Effect.promise(async () => {
          const r = await paying(`${baseUrl}/api/v1/execute`, {
            method: "POST",
            headers: { "content-type": "application/json" },
            body: JSON.stringify({ targetAgentId: agentId, capabilityId: "echo", input: { text } })
          })
          return { status: r.status, body: (await r.json()) as Envelope }
        })
        expect(response.status, JSON.stringify(response.body)).toBe(200)
        expect(response.body.data.output).toMatchObject({ echo: { text } })
        expect(response.body.data.settlement.status).toBe("settled")
      }
      expect(yield* Effect.promise(() => hasCode(account.address))).toBe(true)
      expect((yield* Effect.promise(() => usdcBalance(account.address))) - before).toBe(-2n * PRICE)
      expect(yield* ledgerMatchesChain).toBe(0n)
    }), { timeout: 120_000 })

  it.scoped("65-byte smart-account payments share a SettlementBatcher batch with key payments: the token checks them through ERC-1271", () =>
    Effect.gen(function* () {
      yield* realNow
      yield* factories
      const { sql } = yield* TestEnv
      const payments = yield* Payments
      const echo = yield* fakeAgent("echo")
      const agentId = yield* registerAgent(devAccount(9), echo.url, { tier: "premium" })
      const accounts = yield* Effect.forEach([0, 1, 2], () => Effect.promise(() => smartAccount(ALLOWED, { deployed: true, usdc: 100_000n })))
      const headers = yield* Effect.forEach(accounts, (a) => Effect.promise(() => smartPayment(a, PRICE)))
      const before = yield* Effect.forEach(accounts, (a) => Effect.promise(() => usdcBalance(a.address)))
      gate.arm()
      const calls = [
        ...headers.map((h, i) => executeWith(h.header, agentId, `smart ${i}`)),
        ...[2, 3, 4].map((k) => execute(devAccount(k), { targetAgentId: agentId, capabilityId: "echo", input: { text: `key ${k}` } }))
      ]
      const fiber = yield* Effect.fork(Effect.all(calls, { concurrency: "unbounded" }))
      for (let i = 0; i < 3_000 && (yield* payments.settlementQueue.waiting) < calls.length - 1; i++) {
        yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 10)))
      }
      expect(yield* payments.settlementQueue.waiting).toBe(calls.length - 1)
      gate.open()
      const answers = yield* Fiber.join(fiber)
      expect(answers.map((a) => [a.status, a.body.data?.settlement?.status])).toEqual(calls.map(() => [200, "settled"]))
      const rows = yield* sql<{ purpose: string }>`SELECT t.purpose FROM payments p JOIN treasury_txs t ON t.id = p.treasury_tx_id
        WHERE p.payer IN ${sql.in(accounts.map((a) => a.address.toLowerCase()))}`
      expect(rows.filter((r) => r.purpose === "settlement_batch").length).toBeGreaterThanOrEqual(2)
      for (const [i, a] of accounts.entries()) expect(yield* Effect.promise(() => usdcBalance(a.address))).toBe(before[i]! - PRICE)
      expect(yield* ledgerMatchesChain).toBe(0n)
    }), { timeout: 120_000 })
})

/** A crash right after a counterfactual account's deployment is signed and stored: the first time only. */
let crashed = false
const crashAfterDeploySigned = (tx: { readonly purpose: string }) =>
  Effect.suspend(() =>
    crashed || tx.purpose !== "account_deploy" ? Effect.void : Effect.sync(() => void (crashed = true)).pipe(Effect.zipRight(Effect.die("simulated crash")))
  )

layer(
  TestApp(
    { BACKGROUND_WORKERS: "false", RATE_LIMIT_CLIENT_PER_WINDOW: "1000", PAYMENT_TIMEOUT_SECONDS: "900", TREASURY_RECEIPT_WAIT_MS: "2000", X402_EIP6492_ALLOWED_FACTORIES: ALLOWED },
    { faults: { afterSign: crashAfterDeploySigned } }
  )
)("smart-account payers after a crash", (it) => {
  it.scoped("a crash between signing a counterfactual account's deployment and sending it: the worker sends those bytes, no second deployment is signed, the payment settles once", () =>
    Effect.gen(function* () {
      yield* realNow
      if (!(yield* Effect.promise(() => hasCode(ALLOWED)))) expect(getAddress(yield* Effect.promise(deployFactory))).toBe(ALLOWED)
      const { sql, baseUrl } = yield* TestEnv
      const echo = yield* fakeAgent("echo")
      const agentId = yield* registerAgent(devAccount(3), echo.url, { tier: "premium" })
      const account = yield* Effect.promise(() => smartAccount(ALLOWED, { deployed: false, usdc: 1_000_000n }))
      const before = yield* Effect.promise(() => usdcBalance(account.address))
      const { header, nonce } = yield* Effect.promise(() => smartPayment(account, PRICE))
      yield* Effect.promise(() =>
        call(`${baseUrl}/api/v1/execute`, { method: "POST", json: { targetAgentId: agentId, capabilityId: "echo", input: { text: "crash" } }, headers: { "X-PAYMENT": header } })
          .catch(() => undefined))
      expect(crashed).toBe(true)
      const deploys = sql<{ state: string }>`SELECT state FROM treasury_txs WHERE purpose = 'account_deploy'`
      expect(yield* deploys).toEqual([{ state: "signed" }])
      expect(yield* Effect.promise(() => hasCode(account.address))).toBe(false)

      // The payment's recovery leaves the signed deployment to the treasury worker, which sends its stored bytes.
      const payments = yield* Payments
      const worker = yield* TreasuryWorker
      const status = Effect.map(sql<{ status: string }>`SELECT status FROM payments WHERE nonce = ${nonce}`, (r) => r[0]?.status)
      for (let i = 0; i < 6 && (yield* status) !== "settled"; i++) {
        yield* TestClock.adjust(61_000)
        yield* payments.recoverDue
        yield* worker.processDue
      }
      expect(yield* status).toBe("settled")
      expect(yield* deploys).toEqual([{ state: "confirmed" }])
      expect(yield* Effect.promise(() => hasCode(account.address))).toBe(true)
      expect(yield* Effect.promise(() => usdcBalance(account.address))).toBe(before - PRICE)
      expect(yield* ledgerMatchesChain).toBe(0n)
    }), { timeout: 120_000 })
})
