// What the bench sends: the agent's registration, the requests per target with their pre-signed payments, and the checks
// every answer must pass.
import type { Job } from "./load.js"
import { at, BenchError, log, ms, PARAMS, postJson, PRICE } from "./params.js"
import { paymentRequests, type SignedPayment, signAll, signOne } from "./payments.js"
import type { Infra } from "./servers.js"

// ---------------------------------------------------------------------------------------------------------------
// registration of the agent (once, through a marketplace instance)

/** `paid`: the registration fee's payment (default: dev account 1 to the devnet's treasury, dev account 0). */
export const registerAgent = async (infra: Pick<Infra, "agentUrl">, origin: string, paid?: SignedPayment): Promise<string> => {
  const now = Math.floor(Date.now() / 1000)
  const payment = paid ?? await signOne({
    payer: 1,
    to: 0,
    value: PARAMS.registrationFee.toString(),
    validAfter: String(now - 600),
    validBefore: String(now + 3600)
  })
  const created = await postJson(
    `${origin}/api/v1/agents`,
    {
      wallet: payment.from,
      name: "Bench Echo",
      description: "Echoes its input (benchmark agent)",
      tags: ["bench"],
      capabilities: [
        {
          id: "echo",
          name: "Echo",
          description: "Echoes the input",
          inputSchema: { type: "object" },
          outputSchema: { type: "object" },
          pricing: { model: "per-request", basePrice: "0.01", currency: "USDC" }
        }
      ],
      endpoints: { execution: infra.agentUrl },
      metadata: { purpose: "benchmark" }
    },
    { "x-payment": payment.header }
  )
  if (created.status !== 201) throw new BenchError(`registration failed: HTTP ${created.status} ${created.text}`)
  const id = at(created.body, "data", "id")
  if (typeof id !== "string") throw new BenchError(`registration answered no agent id: ${created.text}`)
  const pinned = await postJson(`${origin}/api/v1/operator/agents/${id}/trust-tier`, { tier: "premium", reason: "benchmark agent" }, {
    authorization: `Bearer ${PARAMS.operatorToken}`,
    "x-operator": "bench"
  })
  if (pinned.status !== 200) throw new BenchError(`pinning the trust tier failed: HTTP ${pinned.status} ${pinned.text}`)
  return id
}

// ---------------------------------------------------------------------------------------------------------------
// jobs and checks per target

export const input = (i: number) => ({ text: "hello", n: i })

export const directJobs = (count: number, offset: number): Array<Job> =>
  Array.from({ length: count }, (_, i) => ({
    headers: {},
    body: JSON.stringify({ requestId: `bench_${offset + i}`, capabilityId: "echo", input: input(offset + i) })
  }))

export const paywallJobs = (payments: ReadonlyArray<SignedPayment>, offset: number): Array<Job> =>
  payments.map((p, i) => ({
    headers: { "x-payment": p.header },
    body: JSON.stringify({ requestId: `bench_${offset + i}`, capabilityId: "echo", input: input(offset + i) })
  }))

export const marketplaceJobs = (agentId: string, payments: ReadonlyArray<SignedPayment>, offset: number): Array<Job> =>
  payments.map((p, i) => ({
    headers: { "x-payment": p.header },
    body: JSON.stringify({ targetAgentId: agentId, capabilityId: "echo", input: input(offset + i) })
  }))

export const checkEcho = (body: unknown) => (at(body, "echo", "text") === "hello" ? undefined : "the agent's echo is missing")

export const checkExecution = (body: unknown) => {
  if (at(body, "success") !== true) return "success is not true"
  if (at(body, "data", "status") !== "completed") return `status is ${String(at(body, "data", "status"))}, not completed`
  if (at(body, "data", "settlement", "status") !== "settled") return "the payment is not settled"
  if (at(body, "data", "output", "echo", "text") !== "hello") return "the output is not the agent's echo"
  return undefined
}

export const sign = async (count: number) => {
  const started = performance.now()
  const signed = await signAll(paymentRequests(count, PRICE))
  log(`    signed ${count} X-PAYMENT headers in ${ms(performance.now() - started)} ms`)
  return signed
}
