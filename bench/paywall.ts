// The minimal x402 paywall baseline: a bare node:http server that verifies X-PAYMENT for the exact price with our
// PaymentVerifier, settles it on chain (waiting for the receipt), forwards the body to the agent with undici and returns
// the agent's JSON. No database, escrow, ledger, machines or proxy features. Run as a child process with
// DEVNET_RPC_URL (same chain wiring as the service: layers/Chain.ts attached devnet, dev account 0 settles),
// AGENT_URL and PAYWALL_PRICE (atomic units); it reports its port over IPC and exits when the parent goes away.
import { Effect, Layer, ManagedRuntime, Option } from "effect"
import * as http from "node:http"
import { Pool } from "undici"
import { getAddress, type Hex, parseSignature } from "viem"
import { Chain, ChainLive } from "../layers/Chain.js"
import { ConfigLive } from "../layers/Config.js"
import { usdcAbi } from "../layers/devnet/usdcAbi.js"
import { PrimaryOnlyLive } from "../layers/Networks.js"
import { PaymentVerifier } from "../layers/PaymentVerifier.js"
import type { VerifiedPayment } from "../layers/x402/payment.js"

const agentUrl = new URL(process.env["AGENT_URL"] ?? "")
const price = BigInt(process.env["PAYWALL_PRICE"] ?? "11000")

const VerifierLive = PaymentVerifier.Default.pipe(Layer.provide(PrimaryOnlyLive), Layer.provideMerge(ChainLive), Layer.provide(ConfigLive))
const runtime = ManagedRuntime.make(VerifierLive)
const verifier = await runtime.runPromise(PaymentVerifier)
const chain = await runtime.runPromise(Chain)
const signer = Option.getOrThrow(chain.signer)

/** What a minimal x402 server does: submit transferWithAuthorization from its key and wait for the receipt. */
const settle = async (p: VerifiedPayment): Promise<{ readonly ok: true; readonly hash: Hex } | { readonly ok: false; readonly reason: string }> => {
  const { r, s, v, yParity } = parseSignature(p.signature)
  try {
    const hash = await signer.walletClient.writeContract({
      address: chain.usdc.address,
      abi: usdcAbi,
      functionName: "transferWithAuthorization",
      args: [getAddress(p.payer), p.payTo, p.amount, p.validAfter, p.validBefore, p.nonce, Number(v ?? BigInt(yParity + 27)), r, s],
      gas: 150_000n
    })
    const receipt = await chain.publicClient.getTransactionReceipt({ hash }).catch(() => chain.publicClient.waitForTransactionReceipt({ hash }))
    return receipt.status === "success" ? { ok: true, hash } : { ok: false, reason: "settlement_failed" }
  } catch (error) {
    return { ok: false, reason: String(error).slice(0, 200) }
  }
}
const requirements = verifier.requirements({ amount: price, resource: "http://127.0.0.1/paywall", description: "bench paywall" })
const agent = new Pool(agentUrl.origin, { connections: 128, pipelining: 1, keepAliveTimeout: 10_000 })

/** Time per step (ms, summed over successful requests), sent to the parent on request over IPC. */
const phases = { verify: 0, settle: 0, forward: 0, total: 0, count: 0 }

const json = (res: http.ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) => {
  const text = JSON.stringify(body)
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text), ...headers })
  res.end(text)
}

const handle = async (req: http.IncomingMessage, res: http.ServerResponse, body: Buffer) => {
  const t0 = performance.now()
  const header = req.headers["x-payment"]
  if (typeof header !== "string" || header.trim() === "") {
    return json(res, 402, { x402Version: 1, error: "X-PAYMENT header is required", accepts: [requirements] })
  }
  const verified = await runtime.runPromise(Effect.either(verifier.verify(header, price)))
  const t1 = performance.now()
  if (verified._tag === "Left") {
    return json(res, 402, { x402Version: 1, error: verified.left.reason, message: verified.left.message, accepts: [requirements] })
  }
  const settled = await settle(verified.right)
  const t2 = performance.now()
  if (!settled.ok) return json(res, 402, { x402Version: 1, error: settled.reason, accepts: [requirements] })
  const reply = await agent.request({
    path: agentUrl.pathname + agentUrl.search,
    method: "POST",
    headers: { "content-type": "application/json", accept: "application/json" },
    body
  })
  const text = await reply.body.text()
  const t3 = performance.now()
  phases.verify += t1 - t0
  phases.settle += t2 - t1
  phases.forward += t3 - t2
  phases.total += t3 - t0
  phases.count++
  const receipt = Buffer.from(JSON.stringify({ success: true, transaction: settled.hash, network: verifier.network, payer: verified.right.payer }))
  res.writeHead(reply.statusCode, {
    "content-type": "application/json",
    "content-length": Buffer.byteLength(text),
    "x-payment-response": receipt.toString("base64")
  })
  res.end(text)
}

const server = http.createServer((req, res) => {
  const chunks: Array<Buffer> = []
  req.on("data", (chunk: Buffer) => chunks.push(chunk))
  req.on("end", () => {
    handle(req, res, Buffer.concat(chunks)).catch((error: unknown) => {
      if (!res.headersSent) json(res, 500, { error: "internal", message: String(error) })
      else res.destroy()
    })
  })
})
server.keepAliveTimeout = 60_000

const report = () => {
  if (process.send !== undefined && process.connected) process.send({ type: "timing", phases: { ...phases } })
}

process.on("message", (message: unknown) => {
  if (typeof message === "object" && message !== null && "type" in message) {
    if (message.type === "timing") report()
    if (message.type === "reset-timing") Object.assign(phases, { verify: 0, settle: 0, forward: 0, total: 0, count: 0 })
  }
})

server.listen(0, "127.0.0.1", () => {
  const address = server.address()
  const port = typeof address === "object" && address !== null ? address.port : 0
  if (process.send !== undefined) process.send({ type: "listening", port })
  else console.log(`paywall listening on http://127.0.0.1:${port}`)
})

const shutdown = () => {
  server.close()
  void agent.close().finally(() => runtime.dispose()).finally(() => process.exit(0))
  setTimeout(() => process.exit(0), 2_000).unref()
}
process.on("disconnect", shutdown)
process.on("SIGTERM", shutdown)
process.on("SIGINT", shutdown)
