// Deposits into our channels on the real devnet and PostgreSQL, signed by @x402/evm's client: a first deposit opens the
// channel (its row open, its balance the chain's), a top-up raises it, the same deposit sent twice at once deposits
// once, a deposit that cannot succeed (an empty wallet, an authorization already used) is refused without a
// transaction, and a process that dies after sending leaves the worker to open the channel. Deposits move no ledger money.
import { expect, layer } from "@effect/vitest"
import { Effect, Option, TestClock } from "effect"
import { createWalletClient, http } from "viem"
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts"
import { devnetChain } from "../../layers/devnet/accounts.js"
import { batchSettlementAddress, depositCalldata } from "../../layers/x402/batchSettlement/contract.js"
import { MachineHost } from "../../machines/Host.js"
import { Deposits } from "../../services/channels/Deposits.js"
import { makeChannelsRepo } from "../../services/channels/Repo.js"
import { Search } from "../../services/operator/Search.js"
import { TreasuryWorker } from "../../services/treasury/TreasuryWorker.js"
import { devAccount, publicClient, usdcBalance } from "../support/clients.js"
import { channelConfig, devnetTerms, onChain, signedDeposit } from "../support/channelDeposits.js"
import { TestApp, TestEnv } from "../support/harness.js"
import { SqlClient } from "@effect/sql"
import { inject } from "vitest"

/** Our clock starts at the real time, then only the test moves it. */
const realNow = Effect.flatMap(Effect.sync(() => Date.now()), (now) => TestClock.setTime(now))

const repo = Effect.flatMap(TestEnv, ({ sql }) => Effect.provideService(makeChannelsRepo, SqlClient.SqlClient, sql))
const depositTxs = Effect.flatMap(TestEnv, ({ sql }) => sql<{ subjectId: string; state: string }>`SELECT subject_id, state FROM treasury_txs WHERE purpose = 'channel_deposit' ORDER BY nonce`)
const ledgerEntries = Effect.flatMap(TestEnv, ({ sql }) => Effect.map(sql<{ n: number }>`SELECT count(*)::int AS n FROM ledger_entries`, (r) => r[0]?.n ?? 0))

layer(TestApp({ BACKGROUND_WORKERS: "false" }))("channel deposits", (it) => {
  it.scoped("a first deposit opens the channel with the chain's balance and a top-up raises it; neither moves ledger money", () =>
    Effect.gen(function* () {
      yield* realNow
      const terms = yield* devnetTerms
      const deposits = yield* Deposits
      const payer = devAccount(7)
      const config = channelConfig(terms, payer, "opens")
      const entriesBefore = yield* ledgerEntries
      const payerBefore = yield* Effect.promise(() => usdcBalance(payer.address))

      const first = yield* signedDeposit(terms, payer, config, 1_000_000n)
      const opened = yield* deposits.deposit(first)
      expect(opened).toMatchObject({ id: first.channelId.toLowerCase(), status: "open", balance: 1_000_000n, network: terms.network })
      expect((yield* onChain(terms, first.channelId)).balance).toBe(1_000_000n)

      const topUp = yield* signedDeposit(terms, payer, config, 500_000n)
      const raised = yield* deposits.deposit(topUp)
      expect(raised).toMatchObject({ status: "open", balance: 1_500_000n })
      expect((yield* onChain(terms, first.channelId)).balance).toBe(1_500_000n)
      expect(yield* Effect.promise(() => usdcBalance(payer.address))).toBe(payerBefore - 1_500_000n)
      expect((yield* depositTxs).map((t) => t.subjectId)).toEqual([first.authorization.nonce.toLowerCase(), topUp.authorization.nonce.toLowerCase()])
      expect(yield* ledgerEntries).toBe(entriesBefore)
      const history = yield* (yield* TestEnv).sql<{ toState: string }>`SELECT to_state FROM machine_transitions WHERE machine = 'channel' AND actor_id = ${opened.id} ORDER BY id`
      expect(history.map((h) => h.toState)).toEqual(["open", "open"])
      // The operator finds the channel by its id, its payer or a deposit's nonce, on the channel machine's page.
      const search = yield* Search
      for (const q of [first.channelId, payer.address, topUp.authorization.nonce]) {
        expect((yield* search.find(q)).filter((h) => h.page === "channel").map((h) => h.id)).toEqual([opened.id])
      }
    }))

  it.scoped("the same deposit sent twice at once, and again later, is sent and deposited once", () =>
    Effect.gen(function* () {
      yield* realNow
      const terms = yield* devnetTerms
      const deposits = yield* Deposits
      const payer = devAccount(8)
      const input = yield* signedDeposit(terms, payer, channelConfig(terms, payer, "twice"), 700_000n)
      const payerBefore = yield* Effect.promise(() => usdcBalance(payer.address))
      const both = yield* Effect.all([deposits.deposit(input), deposits.deposit(input)], { concurrency: 2 })
      expect(both.map((r) => [r.status, r.balance])).toEqual([["open", 700_000n], ["open", 700_000n]])
      const again = yield* deposits.deposit(input)
      expect(again).toMatchObject({ status: "open", balance: 700_000n })
      expect((yield* depositTxs).filter((t) => t.subjectId === input.authorization.nonce.toLowerCase())).toHaveLength(1)
      expect((yield* onChain(terms, input.channelId)).balance).toBe(700_000n)
      expect(yield* Effect.promise(() => usdcBalance(payer.address))).toBe(payerBefore - 700_000n)
    }))

  it.scoped("a deposit from an empty wallet is refused (insufficient balance) before anything is signed, sent or stored", () =>
    Effect.gen(function* () {
      yield* realNow
      const terms = yield* devnetTerms
      const deposits = yield* Deposits
      const empty = privateKeyToAccount(generatePrivateKey())
      const input = yield* signedDeposit(terms, empty, channelConfig(terms, empty, "empty"), 1_000_000n)
      const txsBefore = (yield* depositTxs).length
      const refusal = yield* Effect.flip(deposits.deposit(input))
      expect(refusal).toMatchObject({ _tag: "DepositRefused", reason: "invalid_batch_settlement_evm_insufficient_balance", retryable: false })
      expect((yield* depositTxs).length).toBe(txsBefore)
      expect(yield* (yield* repo).find(input.channelId.toLowerCase())).toEqual(Option.none())
    }))

  it.scoped("a deposit whose authorization was already used (by another relayer) is refused by the dry run, without a transaction", () =>
    Effect.gen(function* () {
      yield* realNow
      const terms = yield* devnetTerms
      const deposits = yield* Deposits
      const payer = devAccount(9)
      const input = yield* signedDeposit(terms, payer, channelConfig(terms, payer, "used elsewhere"), 300_000n)
      // Someone else relays the payer's signed deposit first (anyone may send it).
      const wallet = createWalletClient({ account: payer, chain: devnetChain(inject("rpcUrl")), transport: http(inject("rpcUrl")) })
      const hash = yield* Effect.promise(() => wallet.sendTransaction({ to: batchSettlementAddress, data: depositCalldata(input.config, input.authorization) }))
      expect((yield* Effect.promise(() => publicClient().waitForTransactionReceipt({ hash }))).status).toBe("success")
      const txsBefore = (yield* depositTxs).length
      const refusal = yield* Effect.flip(deposits.deposit(input))
      expect(refusal).toMatchObject({ _tag: "DepositRefused", reason: "invalid_batch_settlement_evm_deposit_simulation_failed", message: "the deposit authorization was already used" })
      expect((yield* depositTxs).length).toBe(txsBefore)
    }))
})

layer(TestApp({ BACKGROUND_WORKERS: "false" }))("deposits into a channel that takes none", (it) => {
  it.scoped("a top-up of a channel whose payer started a withdrawal is refused before anything is sent: nothing could be charged against it", () =>
    Effect.gen(function* () {
      yield* realNow
      const terms = yield* devnetTerms
      const deposits = yield* Deposits
      const payer = devAccount(4)
      const config = channelConfig(terms, payer, "withdrawing")
      const opened = yield* deposits.deposit(yield* signedDeposit(terms, payer, config, 200_000n))
      yield* (yield* MachineHost).deliverNow("channel", opened.id, { type: "WITHDRAW_INITIATED", at: Date.now(), finalizableAt: Date.now() + 900_000 })
      const txsBefore = (yield* depositTxs).length
      const refusal = yield* Effect.flip(deposits.deposit(yield* signedDeposit(terms, payer, config, 100_000n)))
      expect(refusal).toMatchObject({ _tag: "DepositRefused", reason: "invalid_batch_settlement_evm_deposit_payload", details: { status: "withdrawing" } })
      expect((yield* depositTxs).length).toBe(txsBefore)
      expect((yield* onChain(terms, opened.id as `0x${string}`)).balance).toBe(200_000n)
    }))
})

/** Dies right after each deposit's bytes were broadcast: the process "crashes" before it reads the receipt. */
let crashes = 0
const crashed = () => crashes > 0
layer(
  TestApp({ BACKGROUND_WORKERS: "false" }, {
    faults: {
      afterBroadcast: (tx) =>
        tx.purpose === "channel_deposit" ? Effect.sync(() => crashes++).pipe(Effect.zipRight(Effect.die("crash after broadcast"))) : Effect.void
    }
  })
)("a crash after a deposit is sent", (it) => {
  it.scoped("the treasury worker follows the deposit to its receipt and opens the channel; the payer's re-sent deposit finds it open, deposited once", () =>
    Effect.gen(function* () {
      yield* realNow
      const terms = yield* devnetTerms
      const deposits = yield* Deposits
      const payer = devAccount(6)
      const input = yield* signedDeposit(terms, payer, channelConfig(terms, payer, "crash"), 400_000n)
      const id = input.channelId.toLowerCase()
      yield* deposits.deposit(input).pipe(Effect.catchAllDefect(() => Effect.void), Effect.ignore)
      expect(crashed()).toBe(true)
      expect(Option.getOrThrow(yield* (yield* repo).find(id)).status).toBe("depositPending")

      // The lease runs out; the worker reads the receipt of the stored transaction and delivers the inclusion.
      yield* TestClock.adjust(31_000)
      yield* (yield* TreasuryWorker).processDue
      const row = Option.getOrThrow(yield* (yield* repo).find(id))
      expect(row).toMatchObject({ status: "open", balance: 400_000n })
      expect((yield* onChain(terms, input.channelId)).balance).toBe(400_000n)

      const resent = yield* deposits.deposit(input)
      expect(resent).toMatchObject({ status: "open", balance: 400_000n })
      expect((yield* depositTxs).filter((t) => t.subjectId === input.authorization.nonce.toLowerCase())).toHaveLength(1)
      expect((yield* onChain(terms, input.channelId)).balance).toBe(400_000n)
    }))
  it.scoped("a deposit included after another first deposit of the channel failed opens the channel all the same", () =>
    Effect.gen(function* () {
      yield* realNow
      const terms = yield* devnetTerms
      const deposits = yield* Deposits
      const payer = devAccount(5)
      const input = yield* signedDeposit(terms, payer, channelConfig(terms, payer, "raced"), 250_000n)
      const id = input.channelId.toLowerCase()
      yield* deposits.deposit(input).pipe(Effect.catchAllDefect(() => Effect.void), Effect.ignore)
      // Another first deposit of this channel reverted and was booked first: the channel ended in depositFailed.
      const failed = yield* (yield* MachineHost).deliverNow("channel", id, { type: "DEPOSIT_FAILED", at: Date.now(), reason: "the other deposit reverted" })
      expect(Option.getOrThrow(failed).state).toBe("depositFailed")
      yield* TestClock.adjust(31_000)
      yield* (yield* TreasuryWorker).processDue
      expect(Option.getOrThrow(yield* (yield* repo).find(id))).toMatchObject({ status: "open", balance: 250_000n })
    }))
})
