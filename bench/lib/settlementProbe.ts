// Settlement throughput of one signer, as the paywall settles (viem nonce manager, fixed gas, 20 ms receipt polling).
import { createNonceManager, createPublicClient, createWalletClient, http, parseSignature, WaitForTransactionReceiptTimeoutError } from "viem"
import { privateKeyToAccount } from "viem/accounts"
import { jsonRpc } from "viem/nonce"
import { DEV_PRIVATE_KEYS, DEVNET_USDC_ADDRESS, devnetChain } from "../../layers/devnet/anvil.js"
import { usdcAbi } from "../../layers/devnet/usdcAbi.js"
import { percentile } from "./load.js"
import { BenchError, log, ms, PARAMS } from "./params.js"
import { paymentRequests, type SignedPayment, signAll } from "./payments.js"
import { cpuMs } from "./proc.js"
import type { Infra } from "./servers.js"
import { blockNumber, rpcCall } from "./snapshot.js"
import type { SettlementResult } from "./types.js"

// ---------------------------------------------------------------------------------------------------------------
// settlement throughput of one signer (as the service settles: viem nonce manager, fixed gas, 20 ms receipt polling)

export const runPool = async <A>(items: ReadonlyArray<A>, inFlight: number, f: (a: A, i: number) => Promise<void>) => {
  let next = 0
  await Promise.all(
    Array.from({ length: Math.min(inFlight, items.length) }, async () => {
      for (;;) {
        const i = next++
        const item = items[i]
        if (item === undefined) return
        await f(item, i)
      }
    })
  )
}

export const logSettlement = (r: SettlementResult) =>
  log(
    `    one at a time: submit p50 ${ms(r.sequential.submitP50)} ms + receipt p50 ${ms(r.sequential.receiptP50)} ms; ` +
      `${r.settled.inFlight} in flight: ${r.settled.perSecond.toFixed(0)} settlements/s (submit + receipt), ` +
      `${r.submitted.perSecond.toFixed(0)} submissions/s; anvil ${ms(r.anvilCpuMsPerTx)} ms CPU per transaction (blocks ${r.blocks.from}→${r.blocks.to})` +
      (r.stalledWaits > 0 ? `; ${r.stalledWaits} receipt waits stalled 20 s although the transaction was mined` : "")
  )

export const measureSettlement = async (infra: Infra): Promise<SettlementResult> => {
  const key = DEV_PRIVATE_KEYS[0]
  if (key === undefined) throw new BenchError("no dev key 0")
  const chain = devnetChain(infra.rpcUrl)
  const transport = http(infra.rpcUrl, { batch: false, retryCount: 0 })
  const publicClient = createPublicClient({ chain, transport, pollingInterval: 20 })
  const account = privateKeyToAccount(key, { nonceManager: createNonceManager({ source: jsonRpc() }) })
  const wallet = createWalletClient({ account, chain, transport, pollingInterval: 20 })
  const submit = (p: SignedPayment) => {
    const { r, s, v, yParity } = parseSignature(p.signature)
    return wallet.writeContract({
      address: DEVNET_USDC_ADDRESS,
      abi: usdcAbi,
      functionName: "transferWithAuthorization",
      args: [p.from, p.to, p.value, p.validAfter, p.validBefore, p.nonce, Number(v ?? BigInt(yParity + 27)), r, s],
      gas: 150_000n
    })
  }
  const { sequential, concurrent, inFlight } = PARAMS.settlementProbe
  const payments = await signAll(paymentRequests(sequential + 2 * concurrent, 1n))
  const seqPayments = payments.slice(0, sequential)
  const settlePayments = payments.slice(sequential, sequential + concurrent)
  const burstPayments = payments.slice(sequential + concurrent)
  const fromHeight = await blockNumber(infra.rpcUrl)
  const anvilBefore = cpuMs(infra.anvilPid)
  let reverted = 0
  let stalls = 0
  // As the service waits (viem, 20 ms polling), but bounded: a waiter that misses a mined receipt is counted and the
  // receipt read directly; a transaction that is not mined at all breaks the run, with the pool's state in the error.
  const wait = async (hash: `0x${string}`) => {
    let receipt: Awaited<ReturnType<typeof publicClient.getTransactionReceipt>>
    try {
      receipt = await publicClient.waitForTransactionReceipt({ hash, timeout: 20_000 })
    } catch (error) {
      if (!(error instanceof WaitForTransactionReceiptTimeoutError)) throw error
      const direct = await publicClient.getTransactionReceipt({ hash }).catch(() => undefined)
      if (direct === undefined) {
        const pool = await rpcCall(infra.rpcUrl, "txpool_status").catch(() => "?")
        const tx = await publicClient.getTransaction({ hash }).then((t) => `nonce ${t.nonce}`, () => "unknown to the node")
        throw new BenchError(`settlement ${hash} (${tx}) was not mined within 20 s; txpool ${JSON.stringify(pool)}`)
      }
      stalls++
      receipt = direct
    }
    if (receipt.status !== "success") reverted++
  }

  // one at a time: submit, then receipt
  const submitMs = new Float64Array(sequential)
  const receiptMs = new Float64Array(sequential)
  for (const [i, p] of seqPayments.entries()) {
    const t0 = performance.now()
    const hash = await submit(p)
    const t1 = performance.now()
    await wait(hash)
    submitMs[i] = t1 - t0
    receiptMs[i] = performance.now() - t1
  }

  // settlements (submit + receipt) with `inFlight` at a time, like the paid calls at concurrency 32
  let t0 = performance.now()
  await runPool(settlePayments, inFlight, async (p) => wait(await submit(p)))
  const settleWallMs = performance.now() - t0

  // submissions only (receipts collected afterwards, untimed)
  const hashes: Array<`0x${string}`> = []
  t0 = performance.now()
  await runPool(burstPayments, inFlight, async (p) => {
    hashes.push(await submit(p))
  })
  const submitWallMs = performance.now() - t0
  await runPool(hashes, 64, wait)
  if (reverted > 0) throw new BenchError(`${reverted} settlement transactions of the probe reverted`)
  const anvilCpuMsPerTx = (cpuMs(infra.anvilPid) - anvilBefore) / payments.length
  return {
    blocks: { from: fromHeight, to: await blockNumber(infra.rpcUrl) },
    anvilCpuMsPerTx,
    stalledWaits: stalls,
    sequential: { count: sequential, submitP50: percentile(submitMs, 50), receiptP50: percentile(receiptMs, 50) },
    settled: { count: concurrent, inFlight, perSecond: (1000 * concurrent) / settleWallMs },
    submitted: { count: concurrent, inFlight, perSecond: (1000 * concurrent) / submitWallMs }
  }
}
