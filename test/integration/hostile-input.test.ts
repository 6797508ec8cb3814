// Issue 24: 200+ generated hostile schemas and inputs (wide, deep, many branches, uniqueItems, $ref cycles and doubling,
// huge enums, long patterns and strings) sent unpaid to registration, execute and the MCP tools of a server process with
// npm start's heap cap, while a client makes paid calls beside them. The process never dies, its resident memory stays
// under the cap, every answer is a 4xx in the spec's envelope within a second, and the paid calls keep their latency.
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { beforeAll } from "vitest"
import { fakeAgent } from "../support/agents.js"
import { devAccount, paidCall } from "../support/clients.js"
import { capability, registration } from "../support/fixtures.js"
import {
  ACCEPTED_SCHEMAS, type Answer, between, branchesSchema, type Capability, cpuSeconds, cycleSchema, deepSchema, doublingSchema, enumSchema,
  HEAP_CAP_OPTIONS, isClientErrorEnvelope, isMcpClientError, median, MIB, mcpCall, patternSchema, random, residentMemory,
  sharedRefsSchema, timed, wideSchema
} from "../support/hostile.js"
import { registerAgentAt, sharedSettings } from "../support/processes.js"
import { ensureBundle, serverProcess } from "../support/servers.js"

beforeAll(ensureBundle, 180_000)

const next = random(24)
const pick = <A>(xs: ReadonlyArray<A>): A => xs[Math.floor(next() * xs.length)]!

/** Schemas over some limit (or just under it): each a different way to make compiling or validating expensive. */
const hostileSchema = (): readonly [string, () => unknown] => {
  switch (between(next, 0, 11)) {
    case 0: { const n = between(next, 201, 20_000); return [`${n} properties`, () => wideSchema(n)] }
    case 1: { const n = between(next, 13, 40); return [`${n} levels deep`, () => deepSchema(n)] }
    case 2: { const k = pick(["anyOf", "oneOf", "allOf"] as const); const n = between(next, 65, 3_000); return [`${n} ${k} branches`, () => branchesSchema(k, n)] }
    case 3: { const n = between(next, 501, 50_000); return [`an enum of ${n}`, () => enumSchema(n)] }
    case 4: { const n = between(next, 14, 60); return [`$refs doubling ${n} times`, () => doublingSchema(n)] }
    case 5: { const n = between(next, 1, 50); return [`a $ref cycle of ${n}`, () => cycleSchema(n)] }
    case 6: { const d = between(next, 5, 20); const u = between(next, 150, 200); return [`${d} definitions used ${u} times`, () => sharedRefsSchema(d, u)] }
    case 7: { const n = between(next, 1_001, 30_000); return [`a ${n}-character pattern`, () => patternSchema(`^${"(ab|cd)".repeat(Math.ceil(n / 7))}$`)] }
    case 8: { const n = between(next, 2, 4); return [`{100} repeats nested ${n} deep`, () => patternSchema(`^${"(".repeat(n)}a${"{100})".repeat(n)}$`)] }
    case 9: { const n = between(next, 33_000, 600_000); return [`a ${n}-character description`, () => ({ type: "string", description: "x".repeat(n) })] }
    case 10: { const n = between(next, 0, 1e6); return ["a remote $ref", () => ({ $ref: `https://schemas.example/${n}.json` })] }
    default: return ["$dynamicRef", () => ({ $dynamicRef: "#meta", $defs: { m: { $dynamicAnchor: "meta" } } })]
  }
}

/** Inputs for the capabilities of ACCEPTED_SCHEMAS (registered, so within the limits) that make validating expensive. */
const hostileInput = (): readonly [string, Capability, () => unknown] => {
  switch (between(next, 0, 6)) {
    case 0: {
      const n = between(next, 5_000, 50_000)
      const duplicate = next() < 0.5 // at 0 and 1: the last pair a pairwise check would reach
      const items = () => Array.from({ length: n }, (_, a) => ({ a, b: [a % 7, { c: "x" }] }))
      return [`${n} uniqueItems objects${duplicate ? ", two equal" : ""}`, "unique", () => ({ items: duplicate ? [{ b: [0, { c: "x" }], a: 0 }, ...items()] : items() })]
    }
    case 1: { const n = between(next, 1_000, 40_000); return [`${n} items under 64 allOf branches`, "heavy", () => ({ items: Array.from({ length: n }, () => ({ k0: 0 })) })] }
    case 2: { const n = between(next, 1_000, 900_000); return [`a ${n}-character string against a pattern`, "pattern", () => ({ text: `${"ab-".repeat(Math.ceil(n / 3))}!` })] }
    case 3: { const n = between(next, 1_000, 900_000); return [`a ${n}-character string against an enum of 500`, "enum", () => ({ v: "v".repeat(n) })] }
    case 4: {
      const n = between(next, 10, 60)
      const nested = () => {
        let value: unknown = "leaf"
        for (let i = 0; i < n; i++) value = { a: value }
        return { a: value }
      }
      return [`${n} levels of input`, "deep", nested]
    }
    case 5: { const n = between(next, 1_000, 50_000); return [`${n} keys`, pick(["heavy", "unique", "refs"] as const), () => Object.fromEntries(Array.from({ length: n }, (_, i) => [`k${i}`, i]))] }
    default: { const n = between(next, 1_000, 900_000); return [`a ${n}-character string under $refs doubling 8 times`, "refs", () => ({ a: "a".repeat(n) })] }
  }
}

/** Capabilities stored before the limits existed (written straight to the database): now refused, never compiled. */
const LEGACY = { wide: wideSchema(20_000), cycle: cycleSchema(3), doubling: doublingSchema(40, { type: "object" }) }

interface Case {
  readonly label: string
  /** The hostile schema or input (built when the phase is prepared). */
  readonly payload: () => unknown
  /** The request carrying `payload`, its body serialized now: the test's own CPU must not slow the paid client beside. */
  readonly prepare: (payload: unknown) => () => Promise<Answer>
  readonly ok: (answer: Answer) => boolean
}

interface Phase {
  readonly answers: ReadonlyArray<{ readonly label: string; readonly answer: Answer; readonly ok: boolean }>
  readonly paidMs: ReadonlyArray<number>
  readonly paidStatuses: ReadonlyArray<number>
  readonly cpuMsPerRequest: number
  readonly peakRss: number
}

describe("hostile input before payment (issue 24)", () => {
  it.scopedLive("200+ hostile schemas and inputs, unpaid, over registration, execute and MCP beside paid calls: 4xx envelopes within a second, the process alive under its memory cap, paid latency kept", () =>
    Effect.gen(function* () {
      const { env, query } = yield* sharedSettings()
      // Every payload here is parsed and validated: the per-address budget of large unpaid bodies (test/integration/
      // unpaid-bodies.test.ts) would otherwise answer part of both runs 429 unread, and this test measures validation.
      const server = yield* serverProcess({ ...env, NODE_OPTIONS: HEAP_CAP_OPTIONS, UNPAID_BODY_BYTES_PER_MINUTE: String(1024 * 1024 * 1024) })
      const pid = server.child.pid!
      const base = server.baseUrl
      const agent = yield* fakeAgent("echo")
      const echoAgent = yield* registerAgentAt(server, devAccount(1), agent.url)
      const register = (owner: number, schemas: Record<string, unknown>) =>
        Effect.promise(async () => {
          const created = await paidCall(devAccount(owner), `${base}/api/v1/agents`, {
            json: registration(devAccount(owner), {
              capabilities: Object.entries(schemas).map(([id, inputSchema]) => capability({ id, inputSchema })),
              endpoints: { execution: agent.url }
            })
          })
          expect(created.status, JSON.stringify(created.body)).toBe(201)
          return String(created.body.data.id)
        })
      // "open" has no inputSchema: the control requests carry the same payloads there (parsed and walked, not validated).
      const hostileAgent = yield* register(2, { ...ACCEPTED_SCHEMAS, open: undefined })
      const legacyAgent = yield* register(3, Object.fromEntries(Object.keys(LEGACY).map((id) => [id, { type: "object" }])))
      const [row] = yield* query<{ capabilities: Array<Record<string, unknown>> }>("SELECT capabilities FROM agents WHERE id = $1", [legacyAgent])
      const legacy = row!.capabilities.map((c) => ({ ...c, inputSchema: LEGACY[c.id as keyof typeof LEGACY] }))
      yield* query("UPDATE agents SET capabilities = $1::jsonb WHERE id = $2", [JSON.stringify(legacy), legacyAgent])

      const paid = async () => {
        const started = performance.now()
        const answer = await paidCall(devAccount(4), `${base}/api/v1/execute`, { json: { targetAgentId: echoAgent, capabilityId: "echo", input: { text: "paid" } } })
        return { status: answer.status, ms: performance.now() - started }
      }
      yield* Effect.promise(paid) // warm-up
      const alone: Array<{ status: number; ms: number }> = []
      for (let i = 0; i < 5; i++) alone.push(yield* Effect.promise(paid))

      const registrationBody = (schema: unknown) => registration(devAccount(7), { capabilities: [capability({ inputSchema: schema })] })
      const httpRegistration = (): Case => {
        const [label, schema] = hostileSchema()
        return {
          label: `POST /api/v1/agents: ${label}`,
          payload: schema,
          prepare: (payload) => {
            const body = JSON.stringify(registrationBody(payload))
            return () => timed(`${base}/api/v1/agents`, { body })
          },
          ok: (a) => isClientErrorEnvelope(a.status, a.body)
        }
      }
      const httpExecute = (): Case => {
        const legacyCase = next() < 0.2
        const [label, capabilityId, input] = legacyCase ? (["a legacy schema", pick(Object.keys(LEGACY)), () => ({ items: [1, 2] })] as const) : hostileInput()
        return {
          label: `POST /api/v1/execute (${capabilityId}): ${label}`,
          payload: input,
          prepare: (payload) => {
            const body = JSON.stringify({ targetAgentId: legacyCase ? legacyAgent : hostileAgent, capabilityId, input: payload })
            return () => timed(`${base}/api/v1/execute`, { body })
          },
          ok: (a) => isClientErrorEnvelope(a.status, a.body)
        }
      }
      const mcpRegistration = (): Case => {
        const [label, schema] = hostileSchema()
        return {
          label: `MCP register_agent: ${label}`,
          payload: schema,
          prepare: (payload) => mcpCall(base, "register_agent", registrationBody(payload)),
          // A body over the size limit is refused by the HTTP layer before MCP sees it: a 413 envelope.
          ok: (a) => isMcpClientError(a) || isClientErrorEnvelope(a.status, a.body)
        }
      }
      const mcpExecute = (): Case => {
        const [label, capabilityId, input] = hostileInput()
        return {
          label: `MCP execute (${capabilityId}): ${label}`,
          payload: input,
          prepare: (payload) => mcpCall(base, "execute", { targetAgentId: hostileAgent, capabilityId, input: payload }),
          ok: (a) => isMcpClientError(a) || isClientErrorEnvelope(a.status, a.body)
        }
      }
      const cases = [
        ...Array.from({ length: 80 }, httpRegistration),
        ...Array.from({ length: 80 }, httpExecute),
        ...Array.from({ length: 25 }, mcpRegistration),
        ...Array.from({ length: 25 }, mcpExecute)
      ].sort(() => next() - 0.5)
      /** The same payload as an ordinary request: input to the "open" capability, nothing to validate (402). */
      const control = (c: Case): Case => ({
        label: `control for ${c.label}`,
        payload: c.payload,
        prepare: (payload) => {
          const body = JSON.stringify({ targetAgentId: hostileAgent, capabilityId: "open", input: { payload } })
          return () => timed(`${base}/api/v1/execute`, { body })
        },
        ok: (a) => isClientErrorEnvelope(a.status, a.body)
      })

      /** Sends `phase` two at a time while one client pays for calls beside them; samples the server's memory and CPU. */
      const run = (phase: ReadonlyArray<Case>) =>
        Effect.promise(async (): Promise<Phase> => {
          const queue = phase.map((c) => ({ ...c, send: c.prepare(c.payload()) }))
          const cpuBefore = await cpuSeconds(pid)
          let done = false
          let peakRss = 0
          const sampler = (async () => {
            while (!done) {
              peakRss = Math.max(peakRss, (await residentMemory(pid)).rss)
              await new Promise((r) => setTimeout(r, 50)) // sampling period, not a wait for the service
            }
          })()
          const beside: Array<{ status: number; ms: number }> = []
          const payer = (async () => {
            while (!done) beside.push(await paid())
          })()
          const answers: Array<{ readonly label: string; readonly answer: Answer; readonly ok: boolean }> = []
          const worker = async () => {
            for (let c = queue.shift(); c !== undefined; c = queue.shift()) {
              const answer = await c.send()
              answers.push({ label: c.label, answer, ok: c.ok(answer) })
            }
          }
          await Promise.all([worker(), worker()]).finally(() => (done = true))
          await Promise.all([sampler, payer])
          const cpuMs = ((await cpuSeconds(pid)) - cpuBefore) * 1_000
          return {
            answers,
            paidMs: beside.map((p) => p.ms),
            paidStatuses: beside.map((p) => p.status),
            cpuMsPerRequest: cpuMs / (answers.length + 2 * beside.length),
            peakRss
          }
        })

      const ordinary = yield* run(cases.map(control))
      const hostile = yield* run(cases)
      const summary = (p: Phase) => ({
        statuses: p.answers.reduce<Record<string, number>>((n, a) => ({ ...n, [a.answer.status]: (n[a.answer.status] ?? 0) + 1 }), {}),
        slowestMs: Math.round(Math.max(...p.answers.map((a) => a.answer.ms))),
        medianMs: Math.round(median(p.answers.map((a) => a.answer.ms))),
        serverCpuMsPerRequest: Math.round(p.cpuMsPerRequest * 10) / 10,
        peakRssMiB: Math.round(p.peakRss / MIB),
        paidMedianMs: Math.round(median(p.paidMs)),
        paidCalls: p.paidMs.length
      })
      console.log(JSON.stringify({ paidAloneMs: Math.round(median(alone.map((p) => p.ms))), ordinary: summary(ordinary), hostile: summary(hostile) }))
      if (process.env.HOSTILE_DEBUG) {
        for (const a of [...hostile.answers].sort((x, y) => y.answer.ms - x.answer.ms).slice(0, 15)) console.log(Math.round(a.answer.ms), a.answer.status, a.label)
      }

      expect(hostile.answers).toHaveLength(210)
      const wrong = hostile.answers.filter((a) => !a.ok).map((a) => `${a.label}: ${a.answer.status} ${JSON.stringify(a.answer.body).slice(0, 200)}`)
      expect(wrong).toEqual([])
      const slow = hostile.answers.filter((a) => a.answer.ms >= 1_000).map((a) => `${a.label}: ${Math.round(a.answer.ms)} ms`)
      expect(slow).toEqual([])
      expect(server.child.exitCode).toBeNull()
      expect(server.child.signalCode).toBeNull()
      expect((yield* Effect.promise(() => timed(`${base}/health`))).status).toBe(200)
      // A refused schema or input costs about what parsing it did: the server's CPU per request, hostile vs the same
      // payloads as ordinary input (measured as CPU time, so the machine's load does not matter).
      expect(hostile.cpuMsPerRequest).toBeLessThan(2 * ordinary.cpuMsPerRequest + 5)
      expect(hostile.peakRss).toBeLessThan(Math.max(256 * MIB, 1.15 * ordinary.peakRss))

      expect([...alone, ...ordinary.paidStatuses.map((status) => ({ status })), ...hostile.paidStatuses.map((status) => ({ status }))].every((p) => p.status === 200)).toBe(true)
      expect(hostile.paidMs.length).toBeGreaterThanOrEqual(3)
      // Paid calls beside the hostile requests: as fast as beside the same payloads sent as ordinary requests (generous
      // on a shared 2-core machine; both measured in this test, a moment apart).
      expect(median(hostile.paidMs)).toBeLessThan(2 * median(ordinary.paidMs) + 250)
    }), 120_000)
})
