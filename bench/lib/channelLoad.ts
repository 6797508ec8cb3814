// Voucher-paid calls for bench/channels.ts: one official batch-settlement client (@x402/fetch + @x402/evm, unmodified)
// and one channel per concurrent worker. Every worker's first call deposits (before timing); the measured calls then pay
// by voucher only, each worker sending its next call as soon as the previous one answered (a closed loop).
import type { PaymentRequired } from "@x402/core/types"
import { x402HTTPClient } from "@x402/fetch"
import type { Hex } from "viem"
import { type ChannelClient, channelClient, channelResponse, payloadType } from "../../test/support/channelClient.js"
import { accountAt } from "./payments.js"
import { at, BenchError, PRICE } from "./params.js"
import type { RunResult } from "./load.js"

/**
 * One request per call: the same official client pays from the first 402 it saw instead of asking again each call
 * (what `wrapFetchWithPayment` does after its probe, through the client's x402HTTPClient); an answer that is a 402 goes
 * through the client's recovery and one retry, as the wrapper does.
 */
const rememberingFetch = (c: ChannelClient, base: typeof fetch): typeof fetch => {
  const http = new x402HTTPClient(c.client)
  let remembered: PaymentRequired | undefined
  const paid = async (required: PaymentRequired, input: Parameters<typeof fetch>[0], init: RequestInit | undefined) => {
    const payload = await http.createPaymentPayload(required)
    const headers = new Headers(init?.headers)
    for (const [k, v] of Object.entries(http.encodePaymentSignatureHeader(payload))) headers.set(k, v)
    const response = await base(input, { ...init, headers })
    const result = await http.processPaymentResult(payload, (name) => response.headers.get(name), response.status)
    return { response, recovered: result.recovered }
  }
  return async (input, init) => {
    if (remembered === undefined) {
      const probe = await base(input, init)
      if (probe.status !== 402) return probe
      const text = await probe.text()
      const body: unknown = text === "" ? undefined : JSON.parse(text)
      remembered = http.getPaymentRequiredResponse((name) => probe.headers.get(name), body)
    }
    const first = await paid(remembered, input, init)
    return first.recovered ? (await paid(remembered, input, init)).response : first.response
  }
}

export interface ChannelWorkers {
  readonly clients: ReadonlyArray<{ readonly fetch: typeof fetch }>
  /** Payloads each client sent in PAYMENT-SIGNATURE, by type ("deposit", "voucher"). */
  readonly sentTypes: () => Readonly<Record<string, number>>
  /** HTTP requests the clients sent (the unpaid first request of every call and its paid retry). */
  readonly httpRequests: () => number
}

/** `concurrency` clients: payers 1..9 round robin, a channel of their own each (the salt names the worker). */
export const channelWorkers = (o: {
  readonly rpcUrl: string
  readonly usdc: Hex
  readonly concurrency: number
  readonly callsPerWorker: number
  readonly tag: string
  /** One request per call (the first 402 remembered) instead of wrapFetchWithPayment's probe and paid retry. */
  readonly remember?: boolean
}): ChannelWorkers => {
  const types: Record<string, number> = {}
  let requests = 0
  const counting: typeof fetch = (input, init) => {
    requests++
    const header = input instanceof Request ? input.headers.get("payment-signature") : null
    const type = header === null ? undefined : payloadType(header)
    if (type !== undefined) types[type] = (types[type] ?? 0) + 1
    return fetch(input, init)
  }
  const clients = Array.from({ length: o.concurrency }, (_, w) =>
    channelClient(accountAt(1 + (w % 9)), {
      rpcUrl: o.rpcUrl,
      usdc: o.usdc,
      salt: `bench ${o.tag} worker ${w}`,
      // Enough for three times a worker's share (the loop hands calls to whichever worker is free): no top-up deposit
      // inside the measured window.
      depositCalls: Math.max(3, 3 * o.callsPerWorker + 10),
      fetch: counting
    }))
  const paying = clients.map((c) => ({ fetch: o.remember === true ? rememberingFetch(c, counting) : c.fetch }))
  return { clients: paying, sentTypes: () => ({ ...types }), httpRequests: () => requests }
}

/** The answer of a voucher-paid execution: completed, the echo, and PAYMENT-RESPONSE charging the call's price. */
const problemOf = async (response: Response): Promise<string | undefined> => {
  const text = await response.text()
  if (response.status !== 200) return `HTTP ${response.status}: ${text.slice(0, 400)}`
  let body: unknown
  try {
    body = JSON.parse(text)
  } catch {
    return `a non-JSON body: ${text.slice(0, 200)}`
  }
  if (at(body, "data", "status") !== "completed") return `status ${String(at(body, "data", "status"))}: ${text.slice(0, 400)}`
  if (at(body, "data", "output", "echo", "text") !== "hello") return "the output is not the agent's echo"
  const paid = channelResponse(response)
  if (paid?.success !== true || paid.chargedAmount !== PRICE) return `PAYMENT-RESPONSE charged ${String(paid?.chargedAmount)} (expected ${PRICE})`
  return undefined
}

const body = (agentId: string, n: number) => JSON.stringify({ targetAgentId: agentId, capabilityId: "echo", input: { text: "hello", n } })

/** Each worker's first call (the deposit), all workers at once; throws when one fails. */
export const depositAll = async (workers: ChannelWorkers, origin: string, agentId: string) => {
  const problems = await Promise.all(workers.clients.map(async (c, w) => {
    const response = await c.fetch(`${origin}/api/v1/execute`, { method: "POST", headers: { "content-type": "application/json" }, body: body(agentId, -1 - w) })
    return problemOf(response)
  }))
  const failed = problems.filter((p): p is string => p !== undefined)
  if (failed.length > 0) throw new BenchError(`${failed.length} deposits failed: ${failed.slice(0, 3).join("; ")}`)
}

/** `requests` voucher-paid calls spread over the workers, each worker a closed loop. */
export const runVoucherLoop = async (workers: ChannelWorkers, origin: string, agentId: string, requests: number): Promise<RunResult> => {
  const latencies = new Float64Array(requests)
  const errorSamples: Array<string> = []
  let errors = 0
  let done = 0
  let next = 0
  const worker = async (client: { readonly fetch: typeof fetch }) => {
    for (;;) {
      const i = next++
      if (i >= requests) return
      const started = performance.now()
      try {
        const response = await client.fetch(`${origin}/api/v1/execute`, { method: "POST", headers: { "content-type": "application/json" }, body: body(agentId, i) })
        const problem = await problemOf(response)
        latencies[done++] = performance.now() - started
        if (problem !== undefined) {
          errors++
          if (errorSamples.length < 5) errorSamples.push(`request ${i}: ${problem}`)
        }
      } catch (error) {
        latencies[done++] = performance.now() - started
        errors++
        if (errorSamples.length < 5) errorSamples.push(`request ${i}: ${String(error)}`)
      }
    }
  }
  const started = performance.now()
  await Promise.all(workers.clients.map(worker))
  return { requests, concurrency: workers.clients.length, wallMs: performance.now() - started, latenciesMs: latencies, errors, errorSamples }
}
