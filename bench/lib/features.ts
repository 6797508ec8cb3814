// The marketplace's other features switched on during its phases, as production would run them (issue 13: "with every
// feature built so far switched on"): the bench agent's owner subscribes a webhook to every event (a loopback receiver
// in this process answers 200 and counts), and a Prometheus-like scraper reads /metrics every few seconds.
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import { privateKeyToAccount } from "viem/accounts"
import { DEV_PRIVATE_KEYS } from "../../layers/devnet/anvil.js"
import { BenchError, postJson } from "./params.js"

/** Prometheus scrapes every 15-60 s; every 5 s is on the heavy side of what production would see. */
const METRICS_SCRAPE_MS = 5_000

export interface WebhookReceiver {
  readonly url: string
  /** Deliveries received (POSTs with an X-Webhook-Delivery-Id). */
  readonly received: () => number
  readonly close: () => Promise<void>
}

export const startWebhookReceiver = () =>
  new Promise<WebhookReceiver>((resolve) => {
    let received = 0
    const server = http.createServer((req, res) => {
      req.resume()
      req.on("end", () => {
        if (req.headers["x-webhook-delivery-id"] !== undefined) received++
        res.writeHead(200, { "content-type": "text/plain" }).end("ok")
      })
    })
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as AddressInfo
      resolve({
        url: `http://127.0.0.1:${port}/hooks`,
        received: () => received,
        close: () => new Promise<void>((done) => {
          server.closeAllConnections()
          server.close(() => done())
        })
      })
    })
  })

/** `*` webhook for the agent owned by dev account `owner`, authenticated with the owner's wallet signature (spec section 5). */
export const subscribeEverything = async (origin: string, agentId: string, owner: number, url: string) => {
  const key = DEV_PRIVATE_KEYS[owner]
  if (key === undefined) throw new BenchError(`no dev key ${owner}`)
  const account = privateKeyToAccount(key)
  const message = `service-auth:${agentId}:${Date.now()}`
  const signature = await account.signMessage({ message })
  const created = await postJson(`${origin}/api/v1/webhooks`, { agentId, url, events: ["*"] }, {
    "x-agent-wallet": account.address,
    "x-agent-signature": `${message}:sig:${signature}`
  })
  if (created.status !== 201) throw new BenchError(`webhook subscription failed: HTTP ${created.status} ${created.text}`)
}

/** Reads `origin`/metrics every `everyMs` until stopped (a scrape that fails stops the run: metrics are a feature under test). */
export const scrapeMetrics = (origin: string, everyMs = METRICS_SCRAPE_MS) => {
  let scrapes = 0
  let failure: string | undefined
  const timer = setInterval(() => {
    fetch(`${origin}/metrics`, { signal: AbortSignal.timeout(5_000) })
      .then(async (r) => {
        await r.text()
        if (r.status !== 200) failure ??= `/metrics answered ${r.status}`
        else scrapes++
      })
      .catch((error: unknown) => (failure ??= `/metrics: ${String(error)}`))
  }, everyMs)
  return {
    stop: () => {
      clearInterval(timer)
      if (failure !== undefined) throw new BenchError(failure)
      return scrapes
    }
  }
}
