// Issue 24, findings 1 and 2, as the attacks themselves, against a server process started as `npm start` starts it
// (heap capped at 256 MB): a 20,000-property inputSchema sent unpaid to registration (HTTP and MCP), and 20,000
// uniqueItems items sent unpaid to execute. Each is answered with a 4xx within a second, the process lives on, and a
// request sent beside the attack is not held up.
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { beforeAll } from "vitest"
import { fakeAgent } from "../support/agents.js"
import { devAccount, paidCall } from "../support/clients.js"
import { capability, registration } from "../support/fixtures.js"
import { ACCEPTED_SCHEMAS, HEAP_CAP_OPTIONS, isMcpClientError, MIB, mcpCall, residentMemory, timed, wideSchema } from "../support/hostile.js"
import { sharedSettings } from "../support/processes.js"
import { ensureBundle, serverProcess } from "../support/servers.js"

beforeAll(ensureBundle, 180_000)

/** A server process with the start script's heap cap, on a fresh database. */
const cappedServer = Effect.gen(function* () {
  const { env } = yield* sharedSettings()
  const server = yield* serverProcess({ ...env, NODE_OPTIONS: HEAP_CAP_OPTIONS })
  const pid = server.child.pid
  if (pid === undefined) throw new Error("no pid")
  return { server, pid }
})

const alive = (server: { readonly child: { readonly exitCode: number | null; readonly signalCode: NodeJS.Signals | null } }) =>
  server.child.exitCode === null && server.child.signalCode === null

describe("hostile schemas before payment (issue 24)", () => {
  it.scopedLive("finding 1: an unpaid registration with a 20,000-property inputSchema (~800 KB) is refused within a second and the process lives on", () =>
    Effect.gen(function* () {
      const { pid, server } = yield* cappedServer
      const body = JSON.stringify(registration(devAccount(7), { capabilities: [capability({ inputSchema: wideSchema(20_000) })] }))
      expect(body.length).toBeGreaterThan(700_000)

      for (let round = 0; round < 3; round++) {
        // /health sent beside the attack: the event loop is not held while the schema is looked at.
        const [refused, health] = yield* Effect.promise(() =>
          Promise.all([timed(`${server.baseUrl}/api/v1/agents`, { body }), timed(`${server.baseUrl}/health`)]))
        expect(refused.status, JSON.stringify(refused.body).slice(0, 300)).toBe(400)
        expect(refused.body).toMatchObject({ success: false, error: { code: "VALIDATION_ERROR" } })
        expect(refused.body.error.details.issues).toEqual([
          { path: "capabilities.0.inputSchema", message: expect.stringMatching(/^not a valid JSON Schema: is \d+ characters of JSON; a schema may have at most 32768$/) }
        ])
        expect(refused.ms).toBeLessThan(1_000)
        expect(health.status).toBe(200)
        expect(health.ms).toBeLessThan(1_000)
      }

      // The MCP tool takes the same path (validation before payment): a tool error with the same code, as fast.
      const viaMcp = yield* Effect.promise(() =>
        mcpCall(server.baseUrl, "register_agent", registration(devAccount(7), { capabilities: [capability({ inputSchema: wideSchema(20_000) })] }))())
      expect(isMcpClientError(viaMcp), JSON.stringify(viaMcp.body).slice(0, 300)).toBe(true)
      expect(viaMcp.body.result.content[0].text).toContain("VALIDATION_ERROR")
      expect(viaMcp.ms).toBeLessThan(1_000)

      expect(alive(server)).toBe(true)
      const after = yield* Effect.promise(() => timed(`${server.baseUrl}/health`))
      expect(after.status).toBe(200)
      const memory = yield* Effect.promise(() => residentMemory(pid))
      // Old code: ajv compiling the schema grew past the 256 MB heap and the process died.
      expect(memory.peak).toBeLessThan(256 * MIB)
    }))

  it.scopedLive("finding 2: 20,000 uniqueItems items (~150 KB) sent unpaid to execute are answered within a second, and the event loop is not held", () =>
    Effect.gen(function* () {
      const { server } = yield* cappedServer
      const agent = yield* fakeAgent("echo")
      const created = yield* Effect.promise(() =>
        paidCall(devAccount(1), `${server.baseUrl}/api/v1/agents`, {
          json: registration(devAccount(1), {
            capabilities: [capability({ id: "unique", inputSchema: ACCEPTED_SCHEMAS.unique })],
            endpoints: { execution: agent.url }
          })
        }))
      expect(created.status, JSON.stringify(created.body)).toBe(201)
      const targetAgentId = String(created.body.data.id)
      const items = Array.from({ length: 20_000 }, (_, a) => ({ a }))
      const execute = (list: ReadonlyArray<unknown>) =>
        timed(`${server.baseUrl}/api/v1/execute`, { body: { targetAgentId, capabilityId: "unique", input: { items: list } } })

      // All distinct: ajv compared all 200 million pairs (5.2 s) before the 402; now one pass.
      const [distinct, healthBeside] = yield* Effect.promise(() => Promise.all([execute(items), timed(`${server.baseUrl}/health`)]))
      expect(distinct.status).toBe(402)
      expect(distinct.body).toMatchObject({ success: false, error: { code: "PAYMENT_REQUIRED" } })
      expect(distinct.ms).toBeLessThan(1_000)
      expect(healthBeside.ms).toBeLessThan(1_000)

      // The duplicate pair is the last pair a pairwise check reaches: refused, with the pair named.
      const duplicate = yield* Effect.promise(() => execute([{ a: 0 }, ...items]))
      expect(duplicate.status).toBe(400)
      expect(duplicate.body.error).toMatchObject({
        code: "VALIDATION_ERROR",
        details: { issues: [{ path: "input.items", message: "must NOT have duplicate items (items ## 0 and 1 are identical)" }] }
      })
      expect(duplicate.ms).toBeLessThan(1_000)
      expect(agent.calls).toHaveLength(0)
      expect(alive(server)).toBe(true)
    }))
})
