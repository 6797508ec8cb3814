// The campaign's load: paid calls through the balancer from several payers at once (each payment signed just before
// its call, valid for an hour), every answer kept: done, refused, cut short or unreachable all count as answers.
import { at } from "../lib/params.js"
import { paymentRequests, signOne } from "../lib/payments.js"
import { PRICE } from "../lib/params.js"

/** Dev accounts that pay the calls (1 paid the agent's registration; 0 is the treasury). */
export const PAYERS: ReadonlyArray<number> = [2, 3, 4, 5, 6, 7, 8, 9]

export interface CallResult {
  readonly payer: `0x${string}`
  /** HTTP status; 0 when the connection failed or the reply was cut. */
  readonly status: number
  readonly requestId: string | undefined
  readonly state: string | undefined
}

const one = async (balancer: string, agentId: string, i: number): Promise<CallResult> => {
  const [request] = paymentRequests(1, PRICE, { payers: [PAYERS[i % PAYERS.length]!] })
  const payment = await signOne(request!)
  try {
    const answer = await fetch(`${balancer}/api/v1/execute`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-payment": payment.header },
      body: JSON.stringify({ targetAgentId: agentId, capabilityId: "echo", input: { text: "hello", n: i } }),
      signal: AbortSignal.timeout(90_000)
    })
    const body: unknown = await answer.json().catch(() => undefined)
    const requestId = at(body, "data", "requestId") ?? at(body, "error", "details", "requestId")
    const state = at(body, "data", "status")
    return { payer: payment.from, status: answer.status, requestId: typeof requestId === "string" ? requestId : undefined, state: typeof state === "string" ? state : undefined }
  } catch {
    return { payer: payment.from, status: 0, requestId: undefined, state: undefined }
  }
}

/** `calls` paid calls, `concurrency` at a time. */
export const paidLoad = async (balancer: string, agentId: string, calls: number, concurrency: number, offset: number) => {
  const results: Array<CallResult> = []
  let next = 0
  const worker = async () => {
    while (next < calls) {
      const i = next++
      results.push(await one(balancer, agentId, offset + i))
    }
  }
  await Promise.all(Array.from({ length: concurrency }, worker))
  return results
}
