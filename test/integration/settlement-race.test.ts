// A payment's authorization that lands on chain while the service is asking the chain what became of it. With two
// processes on one database and one treasury, one process's recovery pass looks a payment up (is the authorization
// used? does the payer still hold the amount?) while the other's settlement of the same authorization is mined. Reads
// at different heights saw "unused", then "the payer no longer holds the amount": the payment failed for good while its
// money was in the treasury, and the treasury drifted by exactly one call (docs/settlement.md, "Looking a payment up").
import { expect, layer } from "@effect/vitest"
import { Context, Effect, Layer, TestClock } from "effect"
import { createPublicClient, createTestClient, createWalletClient, getAddress, type Hex, http, parseEther, parseSignature } from "viem"
import { generatePrivateKey, type PrivateKeyAccount, privateKeyToAccount } from "viem/accounts"
import { devnetChain } from "../../layers/devnet/accounts.js"
import { usdcAbi } from "../../layers/devnet/usdcAbi.js"
import type { VerifiedPayment } from "../../layers/x402/payment.js"
import { Payments } from "../../services/payments/Payments.js"
import { TreasuryWorker } from "../../services/treasury/TreasuryWorker.js"
import { fakeAgent } from "../support/agents.js"
import { TestApp, TestEnv } from "../support/harness.js"
import { chainOn, type ProductionChain, productionChain } from "../support/productionChain.js"
import { balanceOfCall, ethCallHolding, type RpcInterpose, rpcInterpose } from "../support/rpcInterpose.js"
import { execute, ledgerMatchesChain, registerAgent } from "../support/scenario.js"

/** One 0.01 call and its fee. */
const PRICE = 11_000n

class Own extends Context.Tag("test/OwnChain")<Own, ProductionChain>() {}
class Interpose extends Context.Tag("test/RpcInterpose")<Interpose, RpcInterpose>() {}
const OwnLive = Layer.scoped(Own, productionChain({ payers: 3 }))
const InterposeLive = Layer.scoped(Interpose, Effect.flatMap(Own, (own) => rpcInterpose(own.rpcUrl))).pipe(Layer.provideMerge(OwnLive))

/** The next paid call's settlement stops before it is sent (its process died): the payment waits for recovery. */
const crash: { next: boolean; seen: Array<VerifiedPayment> } = { next: false, seen: [] }

const App = Layer.unwrapScoped(
  Effect.map(Effect.all([Own, Interpose]), ([own, interpose]) =>
    TestApp(
      { BACKGROUND_WORKERS: "false", EXECUTION_RETRY_WINDOW_SECONDS: "600", TREASURY_RECEIPT_WAIT_MS: "3000", RATE_LIMIT_CLIENT_PER_WINDOW: "1000" },
      {
        chain: chainOn(own, "rpc", interpose.url),
        faults: {
          beforeSettle: (p) =>
            crash.next
              ? Effect.sync(() => {
                crash.next = false
                crash.seen.push(p)
              }).pipe(Effect.zipRight(Effect.die("the process settling this payment died")))
              : Effect.void
        }
      }
    ))
).pipe(Layer.provideMerge(InterposeLive))

/** Our clock starts at the real time (payments are signed against it), then only the test moves it. */
const realNow = Effect.flatMap(Effect.sync(() => Date.now()), (now) => TestClock.setTime(now))

/** Another sender (the other process's settlement, or anyone: EIP-3009 lets anyone) submits the authorization. */
const landElsewhere = async (own: ProductionChain, p: VerifiedPayment) => {
  const chain = devnetChain(own.rpcUrl)
  const transport = http(own.rpcUrl)
  const account = privateKeyToAccount(generatePrivateKey())
  await createTestClient({ mode: "anvil", chain, transport }).setBalance({ address: account.address, value: parseEther("1") })
  const wallet = createWalletClient({ account, chain, transport })
  const { r, s, v } = parseSignature(p.signature)
  const hash = await wallet.writeContract({
    address: own.usdc,
    abi: usdcAbi,
    functionName: "transferWithAuthorization",
    args: [getAddress(p.payer), getAddress(p.payTo), p.amount, p.validAfter, p.validBefore, p.nonce, Number(v), r, s],
    gas: 200_000n
  })
  const receipt = await createPublicClient({ chain, transport }).waitForTransactionReceipt({ hash, pollingInterval: 20 })
  if (receipt.status !== "success") throw new Error("the authorization did not land")
  return hash
}

/** `from` sends `amount` USDC to `to` (with gas given to `from` first). */
const move = (own: ProductionChain, from: PrivateKeyAccount, to: Hex, amount: bigint) =>
  Effect.promise(async () => {
    const chain = devnetChain(own.rpcUrl)
    const transport = http(own.rpcUrl)
    await createTestClient({ mode: "anvil", chain, transport }).setBalance({ address: from.address, value: parseEther("1") })
    const hash = await createWalletClient({ account: from, chain, transport }).writeContract({ address: own.usdc, abi: usdcAbi, functionName: "transfer", args: [to, amount] })
    await createPublicClient({ chain, transport }).waitForTransactionReceipt({ hash, pollingInterval: 20 })
  })

/** A fresh payer holding exactly `amount` (its last call, as payers near the end of their funds are). */
const payerHolding = (own: ProductionChain, amount: bigint) =>
  Effect.promise(async () => {
    const chain = devnetChain(own.rpcUrl)
    const transport = http(own.rpcUrl)
    const funder = own.payers[1]!
    await createTestClient({ mode: "anvil", chain, transport }).setBalance({ address: funder.address, value: parseEther("1") })
    const payer = privateKeyToAccount(generatePrivateKey())
    const wallet = createWalletClient({ account: funder, chain, transport })
    const hash = await wallet.writeContract({ address: own.usdc, abi: usdcAbi, functionName: "transfer", args: [payer.address, amount] })
    await createPublicClient({ chain, transport }).waitForTransactionReceipt({ hash, pollingInterval: 20 })
    return payer
  })

/** Recovery passes, each after the leases and backoffs of the last ran out. */
const recoverPasses = (n: number) =>
  Effect.gen(function* () {
    const payments = yield* Payments
    const worker = yield* TreasuryWorker
    for (let pass = 0; pass < n; pass++) {
      yield* TestClock.adjust(61_000)
      yield* payments.recoverDue
      yield* worker.processDue
    }
  })

layer(App, { timeout: 90_000 })("an authorization that lands while the service looks it up", (it) => {
  it.scoped("is settled and booked once: the payer's last call is charged, never failed with its money in the treasury (drift 0)", () =>
    Effect.gen(function* () {
      yield* realNow
      const own = yield* Own
      const interpose = yield* Interpose
      const { sql } = yield* TestEnv
      const agent = yield* fakeAgent()
      const agentId = yield* registerAgent(own.payers[0]!, agent.url, { tier: "premium" })
      const payer = yield* payerHolding(own, PRICE)

      crash.next = true
      yield* execute(payer, { targetAgentId: agentId, capabilityId: "echo", input: { text: "my last cent" } })
      const p = crash.seen[0]!
      expect(p.amount).toBe(PRICE)
      const [held] = yield* sql<{ id: string; status: string }>`SELECT id, status FROM payments WHERE payer = ${payer.address.toLowerCase()}`
      expect(held?.status).toBe("reserved")

      // The recovery pass asks the chain about the payment; between its reads, the other sender's transaction is mined.
      let landed: Hex | undefined
      interpose.before(ethCallHolding(balanceOfCall(payer.address)), async () => {
        landed = await landElsewhere(own, p)
      })
      yield* recoverPasses(4)
      expect(interpose.fired()).toBe(1)
      expect(landed).toBeDefined()
      expect(yield* Effect.promise(() => own.balanceOf(payer.address))).toBe(0n)

      // The money reached the treasury once: the payment is settled with that transaction and booked once.
      const [row] = yield* sql<{ status: string; txHash: string | null }>`SELECT status, tx_hash FROM payments WHERE id = ${held!.id}`
      expect(row).toEqual({ status: "settled", txHash: landed })
      const [booked] = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM ledger_transfers WHERE payment_id = ${held!.id} AND kind = 'settlement'`
      expect(booked?.n).toBe(1)
      // The blocks after it make it final; the ledger's treasury equals the chain's.
      yield* Effect.promise(() => createTestClient({ mode: "anvil", chain: devnetChain(own.rpcUrl), transport: http(own.rpcUrl) }).mine({ blocks: 5 }))
      expect(yield* ledgerMatchesChain).toBe(0n)
    }))

  it.scoped("a payer short of the amount is held, not failed: when money comes back and the authorization lands, it is settled and booked once", () =>
    Effect.gen(function* () {
      yield* realNow
      const own = yield* Own
      const { sql } = yield* TestEnv
      const agent = yield* fakeAgent()
      const agentId = yield* registerAgent(own.payers[2]!, agent.url, { tier: "premium" })
      const payer = yield* payerHolding(own, PRICE)
      const elsewhere = own.payers[1]!

      crash.next = true
      yield* execute(payer, { targetAgentId: agentId, capabilityId: "echo", input: { text: "spent elsewhere" } })
      const p = crash.seen.at(-1)!
      const [held] = yield* sql<{ id: string }>`SELECT id FROM payments WHERE payer = ${payer.address.toLowerCase()}`
      // The payer spends the money before the payment settles: the authorization is valid, unused, and not covered.
      yield* move(own, payer, elsewhere.address, PRICE)
      yield* recoverPasses(1)
      const [waiting] = yield* sql<{ status: string }>`SELECT status FROM payments WHERE id = ${held!.id}`
      expect(waiting?.status).toBe("retrying")
      expect(yield* sql`SELECT 1 FROM treasury_txs WHERE purpose IN ('settlement', 'settlement_batch')
                        AND id IN (SELECT treasury_tx_id FROM payments WHERE id = ${held!.id})`).toHaveLength(0)

      // Money comes back to the payer (a refund of an earlier call), and someone lands the authorization.
      yield* move(own, elsewhere, payer.address, PRICE)
      const landed = yield* Effect.promise(() => landElsewhere(own, p))
      yield* recoverPasses(2)
      const [row] = yield* sql<{ status: string; txHash: string | null }>`SELECT status, tx_hash FROM payments WHERE id = ${held!.id}`
      expect(row).toEqual({ status: "settled", txHash: landed })
      const [booked] = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM ledger_transfers WHERE payment_id = ${held!.id} AND kind = 'settlement'`
      expect(booked?.n).toBe(1)
      yield* Effect.promise(() => createTestClient({ mode: "anvil", chain: devnetChain(own.rpcUrl), transport: http(own.rpcUrl) }).mine({ blocks: 5 }))
      expect(yield* ledgerMatchesChain).toBe(0n)
    }))
})
