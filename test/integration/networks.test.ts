// Two networks in one deployment: the primary devnet (84532) and a second anvil posing as Ethereum (chain id 1, its own
// TestUSDC and batcher). The 402 offers both; the unmodified official clients pay on either; each payment is settled,
// refunded and reconciled on its own network, with its own treasury nonces.
import { expect, layer } from "@effect/vitest"
import { x402Client } from "@x402/core/client"
import { toClientEvmSigner } from "@x402/evm"
import { ExactEvmScheme } from "@x402/evm/exact/client"
import { decodePaymentResponseHeader, wrapFetchWithPayment } from "@x402/fetch"
import { Context, Effect, Layer } from "effect"
import { join } from "node:path"
import { createPublicClient, createWalletClient, getAddress, http, publicActions } from "viem"
import type { PrivateKeyAccount } from "viem/accounts"
import { inject } from "vitest"
import { decodeXPaymentResponse, wrapFetchWithPayment as wrapV1 } from "x402-fetch"
import { DEVNET_SECOND_USDC_ADDRESS, devnetChain, startDevnet } from "../../layers/devnet/anvil.js"
import { usdcAbi } from "../../layers/devnet/usdcAbi.js"
import { Reconciliation } from "../../services/treasury/Reconciliation.js"
import { TreasuryRepo } from "../../services/treasury/Repo.js"
import { fakeAgent } from "../support/agents.js"
import { call, devAccount, usdcBalance } from "../support/clients.js"
import { OPERATOR_TOKEN, TestApp, TestEnv } from "../support/harness.js"
import { untilReal } from "../support/receivers.js"
import { execute, registerAgent } from "../support/scenario.js"

const PRICE = 11_000n // 0.001 platform fee + 0.01 basePrice

class Second extends Context.Tag("test/SecondNetwork")<Second, { readonly rpcUrl: string }>() {}

/** The second anvil for this file only (≈ 50 ms to start; its token and batcher from the compile cache). */
const App = Layer.unwrapScoped(
  Effect.gen(function* () {
    const net = yield* Effect.acquireRelease(
      Effect.promise(() => startDevnet({ network: "second", port: 0, compileCacheDir: join(process.cwd(), "node_modules", ".cache", "test-usdc") })),
      (n) => Effect.promise(() => n.stop())
    )
    return Layer.merge(
      TestApp({ DEVNET_SECOND_NETWORK: "ethereum", DEVNET_SECOND_RPC_URL: net.rpcUrl, EXECUTION_RETRY_WINDOW_SECONDS: "1" }),
      Layer.succeed(Second, { rpcUrl: net.rpcUrl })
    )
  })
)

const secondBalance = (address: `0x${string}`) =>
  Effect.flatMap(Second, ({ rpcUrl }) =>
    Effect.promise(() =>
      createPublicClient({ chain: devnetChain(rpcUrl, 1), transport: http(rpcUrl) })
        .readContract({ address: DEVNET_SECOND_USDC_ADDRESS, abi: usdcAbi, functionName: "balanceOf", args: [address] })
    ))

/** The official x402 v2 client (@x402/fetch), set up to pay on Ethereum (CAIP-2 eip155:1) only. */
const ethereumClient = (account: PrivateKeyAccount) =>
  new x402Client()
    .register("eip155:1", new ExactEvmScheme(toClientEvmSigner(account)))
    .setSpendControls({ allowedAssets: [{ network: "eip155:1", asset: getAddress(DEVNET_SECOND_USDC_ADDRESS), maxAmountPerPayment: "1000000" }] })

const payOnEthereum = (payer: PrivateKeyAccount, body: Record<string, unknown>) =>
  Effect.flatMap(TestEnv, ({ baseUrl }) =>
    Effect.promise(async () => {
      const response = await wrapFetchWithPayment(fetch, ethereumClient(payer))(`${baseUrl}/api/v1/execute`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(body)
      })
      return { status: response.status, headers: response.headers, body: (await response.json()) as { data?: { requestId: string; settlement?: { txHash: string } } } }
    }))

/** Every network's ledger treasury equals its chain's treasury balance. */
const driftOnEveryNetwork = Effect.gen(function* () {
  const reconciliation = yield* Reconciliation
  return yield* Effect.forEach(reconciliation.all, (r) => Effect.map(r.check(), (c) => [r.network, c.drift] as const))
})

layer(App, { excludeTestServices: true, timeout: 180_000 })("two networks", (it) => {
  it.scoped("the 402 offers both networks in v2 and only the one x402 v1 can name in the v1 body", () =>
    Effect.gen(function* () {
      const { baseUrl } = yield* TestEnv
      const agent = yield* fakeAgent("echo")
      const agentId = yield* registerAgent(devAccount(1), agent.url)
      const response = yield* Effect.promise(() =>
        fetch(`${baseUrl}/api/v1/execute`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ targetAgentId: agentId, capabilityId: "echo", input: { text: "hi" } }) }))
      expect(response.status).toBe(402)
      const v1 = (yield* Effect.promise(() => response.json())) as { accepts: Array<{ network: string }> }
      expect(v1.accepts.map((a) => a.network)).toEqual(["base-sepolia"])
      const v2 = JSON.parse(Buffer.from(response.headers.get("payment-required") ?? "", "base64").toString("utf8")) as { accepts: Array<{ scheme: string; network: string; asset: string }> }
      // `exact` on both networks first, then a payment channel on each (both devnets hold the channel contracts).
      expect(v2.accepts.map((a) => [a.scheme, a.network])).toEqual([
        ["exact", "eip155:84532"], ["exact", "eip155:1"], ["batch-settlement", "eip155:84532"], ["batch-settlement", "eip155:1"]
      ])
      expect(v2.accepts[1]!.asset.toLowerCase()).toBe(DEVNET_SECOND_USDC_ADDRESS.toLowerCase())
      expect(v2.accepts[0]!.asset.toLowerCase()).toBe(inject("usdcAddress").toLowerCase())
    }))

  it.scoped("@x402/fetch pays on Ethereum: settled there, booked in that network's treasury, ledger = chain on both", () =>
    Effect.gen(function* () {
      const { sql } = yield* TestEnv
      const agent = yield* fakeAgent("echo")
      const agentId = yield* registerAgent(devAccount(2), agent.url)
      const payer = devAccount(3)
      const [primaryBefore, secondBefore] = [yield* Effect.promise(() => usdcBalance(payer.address)), yield* secondBalance(payer.address)]
      const paid = yield* payOnEthereum(payer, { targetAgentId: agentId, capabilityId: "echo", input: { text: "on ethereum" } })
      expect(paid.status).toBe(200)
      const settlement = decodePaymentResponseHeader(paid.headers.get("payment-response") ?? "")
      expect(settlement).toMatchObject({ success: true, network: "eip155:1" })
      // The signed receipt names the network the payment was made on.
      expect(settlement.extensions?.["receipt"]).toMatchObject({ network: "eip155:1", transaction: settlement.transaction })
      expect(yield* secondBalance(payer.address)).toBe(secondBefore - PRICE)
      expect(yield* Effect.promise(() => usdcBalance(payer.address))).toBe(primaryBefore)
      const [row] = yield* sql<{ network: string; status: string; txNetwork: string }>`
        SELECT p.network, p.status, t.network AS tx_network FROM payments p JOIN treasury_txs t ON t.id = p.treasury_tx_id
        WHERE p.subject_id = ${paid.body.data!.requestId}`
      expect(row).toEqual({ network: "ethereum", status: "settled", txNetwork: "ethereum" })
      const [booked] = yield* sql<{ account: string }>`
        SELECT e.account_id AS account FROM ledger_entries e JOIN ledger_transfers t ON t.id = e.transfer_id
        JOIN payments p ON p.id = t.payment_id WHERE p.subject_id = ${paid.body.data!.requestId} AND t.kind = 'settlement' AND e.amount > 0`
      expect(booked?.account).toBe("treasury:ethereum")
      // The transaction's views say which network it was paid on.
      const { baseUrl } = yield* TestEnv
      const [tx] = yield* sql<{ transactionId: string }>`SELECT transaction_id FROM executions WHERE id = ${paid.body.data!.requestId}`
      const single = yield* Effect.promise(() => call(`${baseUrl}/api/v1/payments/tx/${tx!.transactionId}`))
      expect(single.body.data.settlement).toMatchObject({ status: "settled", network: "ethereum" })
      const listed = yield* Effect.promise(() =>
        call(`${baseUrl}/api/v1/operator/transactions/provider/${agentId}`, { headers: { authorization: `Bearer ${OPERATOR_TOKEN}` } }))
      expect(listed.body.data.transactions.map((t: { network: string }) => t.network)).toEqual(["ethereum"])
      expect(yield* driftOnEveryNetwork).toEqual([["base-sepolia", 0n], ["ethereum", 0n]])
    }))

  it.scoped("a failed call paid on Ethereum is refunded on Ethereum", () =>
    Effect.gen(function* () {
      const { sql } = yield* TestEnv
      const agent = yield* fakeAgent({ kind: "json", status: 500, body: { error: "down" } })
      const agentId = yield* registerAgent(devAccount(4), agent.url)
      const payer = devAccount(5)
      const [primaryBefore, secondBefore] = [yield* Effect.promise(() => usdcBalance(payer.address)), yield* secondBalance(payer.address)]
      const paid = yield* payOnEthereum(payer, { targetAgentId: agentId, capabilityId: "echo", input: { text: "fails" } })
      expect(paid.status).toBeGreaterThanOrEqual(500)
      // Held for the retry window (1 s here), then refunded by the workers.
      const refund = yield* untilReal(
        sql<{ status: string; network: string | null; txNetwork: string | null }>`
          SELECT r.status, r.network, t.network AS tx_network FROM refunds r LEFT JOIN treasury_txs t ON t.id = r.treasury_tx_id`.pipe(Effect.orDie),
        (rows) => rows[0]?.status === "confirmed",
        30_000
      )
      expect(refund[0]).toEqual({ status: "confirmed", network: "ethereum", txNetwork: "ethereum" })
      expect(yield* secondBalance(payer.address)).toBe(secondBefore)
      expect(yield* Effect.promise(() => usdcBalance(payer.address))).toBe(primaryBefore)
      expect(yield* driftOnEveryNetwork).toEqual([["base-sepolia", 0n], ["ethereum", 0n]])
    }))

  it.scoped("20 concurrent payments over both networks settle once each on their own network, with independent treasury nonces", () =>
    Effect.gen(function* () {
      const { sql } = yield* TestEnv
      const agent = yield* fakeAgent("echo")
      const agentId = yield* registerAgent(devAccount(6), agent.url)
      const body = (i: number) => ({ targetAgentId: agentId, capabilityId: "echo", input: { text: `call ${i}` } })
      const results = yield* Effect.all(
        Array.from({ length: 20 }, (_, i) =>
          i % 2 === 0
            ? Effect.map(payOnEthereum(devAccount(7 + (i % 3)), body(i)), (r) => ({ network: "ethereum", status: r.status, id: r.body.data?.requestId }))
            : Effect.map(execute(devAccount(7 + (i % 3)), body(i)), (r) => ({ network: "base-sepolia", status: r.status, id: r.body.data?.requestId as string | undefined }))),
        { concurrency: "unbounded" }
      )
      expect(results.map((r) => r.status)).toEqual(Array(20).fill(200))
      const rows = yield* sql<{ subjectId: string; network: string; status: string; txNetwork: string }>`
        SELECT p.subject_id, p.network, p.status, t.network AS tx_network FROM payments p JOIN treasury_txs t ON t.id = p.treasury_tx_id
        WHERE p.subject_id IN ${sql.in(results.map((r) => r.id!))}`
      expect(rows).toHaveLength(20)
      for (const r of results) {
        const row = rows.find((x) => x.subjectId === r.id)
        expect(row).toMatchObject({ network: r.network, status: "settled", txNetwork: r.network })
      }
      // Each network's nonces: one sequence each, no nonce used twice, none skipped.
      const nonces = yield* sql<{ network: string; nonces: Array<string> }>`
        SELECT network, array_agg(nonce::text ORDER BY nonce) AS nonces FROM treasury_txs WHERE state <> 'dropped' GROUP BY network ORDER BY network`
      for (const n of nonces) {
        const list = n.nonces.map(BigInt)
        expect(new Set(list).size).toBe(list.length)
        expect(list[list.length - 1]! - list[0]! + 1n).toBe(BigInt(list.length))
      }
      expect(nonces.map((n) => n.network).sort()).toEqual(["base-sepolia", "ethereum"])
      const signers = yield* sql<{ network: string }>`SELECT network FROM treasury_signers ORDER BY network`
      expect(signers.map((s) => s.network)).toEqual(["base-sepolia", "ethereum"])
      expect(yield* driftOnEveryNetwork).toEqual([["base-sepolia", 0n], ["ethereum", 0n]])
    }))

  it.scoped("/health reports each network on its own", () =>
    Effect.gen(function* () {
      const { baseUrl } = yield* TestEnv
      const health = yield* Effect.promise(() => call(`${baseUrl}/health`))
      expect(health.status).toBe(200)
      expect(health.body.data.networks).toEqual([
        expect.objectContaining({ network: "base-sepolia", caip2: "eip155:84532", chainId: 84532, usdc: getAddress(inject("usdcAddress")) }),
        expect.objectContaining({ network: "ethereum", caip2: "eip155:1", chainId: 1, usdc: getAddress(DEVNET_SECOND_USDC_ADDRESS) })
      ])
      // Each network's own reconciliation and gas: the treasury's ETH on Ethereum pays for its settlements there.
      expect(health.body.data.networks[1].gas).toMatchObject({ low: false })
      expect(health.body.data.status).toBe("ok")
    }))
})

layer(TestApp({ DEVNET_SECOND_NETWORK: "ethereum" }), { excludeTestServices: true, timeout: 120_000 })("a devnet with DEVNET_SECOND_NETWORK", (it) => {
  it.scoped("starts its own second anvil (chain id 1, state in DATA_DIR) and takes payments on both", () =>
    Effect.gen(function* () {
      const { baseUrl } = yield* TestEnv
      const health = yield* Effect.promise(() => call(`${baseUrl}/health`))
      expect(health.body.data.networks.map((n: { caip2: string }) => n.caip2)).toEqual(["eip155:84532", "eip155:1"])
      expect(health.body.data.networks[1]).not.toHaveProperty("problem")
    }))

  it.scoped("rows from before networks (network '') are adopted by the primary network", () =>
    Effect.gen(function* () {
      const { sql, chain } = yield* TestEnv
      const signer = chain.treasury.toLowerCase()
      const [before] = yield* sql<{ nextNonce: string }>`SELECT next_nonce::text FROM treasury_signers WHERE network = 'base-sepolia' AND address = ${signer}`
      // An upgraded database: the nonce row and a reconciliation written before the migration.
      yield* sql`DELETE FROM treasury_signers WHERE network = 'base-sepolia'`
      yield* sql`INSERT INTO treasury_signers (network, address, next_nonce) VALUES ('', ${signer}, ${before!.nextNonce})`
      yield* sql`DELETE FROM treasury_reconciliations`
      yield* sql`INSERT INTO treasury_reconciliations (block_number, chain_balance, ledger_balance, drift, kind, confirmed) VALUES (1, 0, 0, 0, 'check', false)`
      yield* Effect.flatMap(TreasuryRepo, (repo) => repo.adoptLegacy("base-sepolia")).pipe(Effect.provide(TreasuryRepo.Default))
      expect(yield* sql`SELECT network, next_nonce::text FROM treasury_signers WHERE address = ${signer} ORDER BY network`).toEqual([
        { network: "base-sepolia", nextNonce: before!.nextNonce },
        { network: "ethereum", nextNonce: expect.any(String) }
      ])
      expect(yield* sql`SELECT network FROM treasury_reconciliations`).toEqual([{ network: "base-sepolia" }])
    }))
})

/** A second network x402 v1 can name (Polygon, chain id 137): the unmodified x402-fetch pays it. */
const PolygonApp = Layer.unwrapScoped(
  Effect.gen(function* () {
    const net = yield* Effect.acquireRelease(
      Effect.promise(() => startDevnet({ network: "second", secondChainId: 137, port: 0, compileCacheDir: join(process.cwd(), "node_modules", ".cache", "test-usdc") })),
      (n) => Effect.promise(() => n.stop())
    )
    return Layer.merge(
      TestApp({ DEVNET_SECOND_NETWORK: "polygon", DEVNET_SECOND_RPC_URL: net.rpcUrl }),
      Layer.succeed(Second, { rpcUrl: net.rpcUrl })
    )
  })
)

layer(PolygonApp, { excludeTestServices: true, timeout: 120_000 })("a second network x402 v1 names", (it) => {
  it.scoped("x402-fetch (v1) with a wallet on that chain pays there: settled on the second network, ledger = chain on both", () =>
    Effect.gen(function* () {
      const { baseUrl, sql } = yield* TestEnv
      const { rpcUrl } = yield* Second
      const agent = yield* fakeAgent("echo")
      const agentId = yield* registerAgent(devAccount(2), agent.url)
      const payer = devAccount(3)
      const reader = createPublicClient({ chain: devnetChain(rpcUrl, 137), transport: http(rpcUrl) })
      const balanceThere = () => reader.readContract({ address: DEVNET_SECOND_USDC_ADDRESS, abi: usdcAbi, functionName: "balanceOf", args: [payer.address] })
      const before = yield* Effect.promise(balanceThere)
      const wallet = createWalletClient({ account: payer, chain: devnetChain(rpcUrl, 137), transport: http(rpcUrl) }).extend(publicActions)
      const paying = wrapV1(fetch, wallet as unknown as Parameters<typeof wrapV1>[1], 10_000_000n)
      const response = yield* Effect.promise(() =>
        paying(`${baseUrl}/api/v1/execute`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ targetAgentId: agentId, capabilityId: "echo", input: { text: "v1 on polygon" } }) }))
      expect(response.status).toBe(200)
      expect(decodeXPaymentResponse(response.headers.get("x-payment-response") ?? "")).toMatchObject({ success: true, network: "polygon" })
      expect(yield* Effect.promise(balanceThere)).toBe(before - PRICE)
      const body = (yield* Effect.promise(() => response.json())) as { data: { requestId: string } }
      const [row] = yield* sql<{ network: string; status: string }>`SELECT network, status FROM payments WHERE subject_id = ${body.data.requestId}`
      expect(row).toEqual({ network: "polygon", status: "settled" })
      expect(yield* driftOnEveryNetwork).toEqual([["base-sepolia", 0n], ["polygon", 0n]])
    }))
})
