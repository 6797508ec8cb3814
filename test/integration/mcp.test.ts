// The MCP endpoint end to end with the official SDK client (Client + StreamableHTTPClientTransport): initialize, the
// tool list and its schemas, every free tool against real agents, an execution and a chain (each answer equal to the
// HTTP API's), resources, tool errors with the API's codes, protocol errors, concurrent clients, plain JSON answers, and
// statelessness: no session is issued, a session id from elsewhere is served, GET and DELETE are 405. (Through a
// round-robin balancer in front of two instances: test/integration/two-hosts.test.ts.)
import { expect, layer } from "@effect/vitest"
import { McpError } from "@modelcontextprotocol/sdk/types.js"
import { Context, Effect, Layer, TestClock } from "effect"
import { ErrorCodes } from "../../src/domain/Errors.js"
import { fakeAgent } from "../support/agents.js"
import { call, devAccount, paidCall, walletAuth } from "../support/clients.js"
import { TestApp, TestEnv } from "../support/harness.js"
import { mcpSession } from "../support/mcp.js"
import { echoCapability, registerAgent } from "../support/scenario.js"

const FREE_TOOLS = [
  "discover_agents", "search_agents", "recommend_agent", "list_tags", "get_agent", "get_execution_status", "check_chain_budget",
  "get_chain_status", "get_chain_cost", "get_reputation", "reputation_leaderboard", "agent_leaderboard", "platform_analytics",
  "platform_timeseries"
]
/** Paid with x402 over MCP: test/integration/mcp-paid.test.ts. */
const PAID_TOOLS = ["register_agent", "execute"]
const ALL_TOOLS = [...FREE_TOOLS, ...PAID_TOOLS]

const connect = mcpSession("mcp-test")

const api = (path: string, init: { json?: unknown; headers?: Record<string, string> } = {}) =>
  Effect.flatMap(TestEnv, ({ baseUrl }) =>
    Effect.promise(() => call(`${baseUrl}${path}`, { ...(init.json === undefined ? {} : { method: "POST", json: init.json }), headers: init.headers ?? {} })))

const data = (path: string, init: { json?: unknown; headers?: Record<string, string> } = {}) =>
  Effect.map(api(path, init), (response) => {
    expect(response.status, `${path}: ${JSON.stringify(response.body)}`).toBeLessThan(300)
    return response.body.data
  })

const STREAMING = { accept: "application/json, text/event-stream" }

/** A raw JSON-RPC POST to /mcp (for what the SDK client never sends). */
const rpc = (message: unknown, headers: Record<string, string>) =>
  Effect.flatMap(TestEnv, ({ baseUrl }) =>
    Effect.promise(async () => {
      const response = await fetch(`${baseUrl}/mcp`, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: JSON.stringify(message) })
      const body: any = response.status === 202 ? null : await response.json()
      return { status: response.status, headers: response.headers, body }
    }))

/** The JSON in a tool result's first (text) content. */
const textOf = (result: Record<string, unknown>) => {
  const first: unknown = Array.isArray(result.content) ? result.content[0] : undefined
  expect(first).toMatchObject({ type: "text", text: expect.any(String) })
  return JSON.parse(typeof first === "object" && first !== null && "text" in first ? String(first.text) : "null")
}

/** The protocol error a rejected call carries. */
const rejection = (promise: Promise<unknown>) =>
  Effect.promise(() => promise.then(() => { throw new Error("expected a protocol error") }, (error: unknown) => error))

interface ScenarioShape {
  readonly translator: string
  readonly forecaster: string
  readonly requestId: string
  readonly payment: string
  readonly chainId: string
  readonly rootTransactionId: string
}
class Scenario extends Context.Tag("test/McpScenario")<Scenario, ScenarioShape>() {}

/** An agent registered (paid) and then renamed and retagged by its owner. */
const agent = (owner: number, url: string, patch: Record<string, unknown>, capabilities: Array<unknown>) =>
  Effect.gen(function* () {
    const { baseUrl } = yield* TestEnv
    const id = yield* registerAgent(devAccount(owner), url, { capabilities })
    const patched = yield* Effect.promise(async () =>
      call(`${baseUrl}/api/v1/agents/${id}`, { method: "PATCH", headers: await walletAuth(devAccount(owner), id), json: patch }))
    if (patched.status !== 200) throw new Error(`agent update refused: ${JSON.stringify(patched.body)}`)
    return id
  })

/** Two agents, one paid execution and one chain, made through the HTTP API (payments signed against the real time). */
const Seeded = Layer.scoped(
  Scenario,
  Effect.gen(function* () {
    yield* TestClock.setTime(Date.now())
    const { baseUrl } = yield* TestEnv
    const echo = yield* fakeAgent("echo")
    const translator = yield* agent(1, echo.url, {
      name: "Polyglot Translator",
      description: "Translates documents between languages",
      tags: ["translation", "language"],
      chainSettings: { chain_enabled: true, chain_max_depth: 3 }
    }, [echoCapability({ examples: [{ name: "hello", input: { text: "hello" }, output: { echo: { text: "hello" } } }] })])
    const forecaster = yield* agent(2, echo.url, { name: "Weather Oracle", description: "Weather forecasts for any city", tags: ["weather"] }, [
      echoCapability({ id: "forecast", name: "Forecast", description: "Tomorrow's weather for a city", pricing: { model: "per-request", basePrice: "0.02", currency: "USDC" } })
    ])
    const payer = devAccount(9)
    const executed = yield* Effect.promise(() =>
      paidCall(payer, `${baseUrl}/api/v1/execute`, { json: { targetAgentId: translator, capabilityId: "echo", input: { text: "bonjour" } } }))
    if (executed.status !== 200) throw new Error(`execution failed: ${JSON.stringify(executed.body)}`)
    const chained = yield* Effect.promise(() =>
      paidCall(payer, `${baseUrl}/api/v1/execute`, {
        json: { targetAgentId: translator, capabilityId: "echo", input: { text: "chain" } },
        headers: { "X-Chain-Budget": "0.05" }
      }))
    if (chained.status !== 200) throw new Error(`chain failed: ${JSON.stringify(chained.body)}`)
    return {
      translator,
      forecaster,
      requestId: executed.body.data.requestId,
      payment: executed.headers.get("x-payment-used") ?? "",
      chainId: chained.body.data.chain.chainId,
      rootTransactionId: chained.body.data.transactionId
    }
  })
).pipe(Layer.provideMerge(TestApp({ BACKGROUND_WORKERS: "false" })))

layer(Seeded, { timeout: 120_000 })("mcp", (it) => {
  it.scoped("initialize names the server; tools/list shows every free tool with an object input schema, an output schema and its cost", () =>
    Effect.gen(function* () {
      const { client, transport } = yield* connect
      // Stateless: no session to lose when the next request reaches another process or instance.
      expect(transport.sessionId).toBeUndefined()
      expect(client.getServerVersion()).toMatchObject({ name: "agent-marketplace" })
      expect(client.getServerCapabilities()).toMatchObject({ tools: {}, resources: {} })
      expect(client.getInstructions()).toContain("search_agents")
      const { tools } = yield* Effect.promise(() => client.listTools())
      expect(tools.map((t) => t.name).sort()).toEqual([...ALL_TOOLS].sort())
      for (const tool of tools.filter((t) => FREE_TOOLS.includes(t.name))) {
        expect(tool.inputSchema.type, tool.name).toBe("object")
        expect(tool.outputSchema?.type, tool.name).toBe("object")
        expect(tool.description, tool.name).toMatch(/\bFree[.;]/)
        expect(tool.annotations, tool.name).toMatchObject({ readOnlyHint: true, openWorldHint: false })
        expect(JSON.stringify(tool), tool.name).not.toContain("/schemas/")
      }
      const discover = tools.find((t) => t.name === "discover_agents")
      expect(discover?.inputSchema).toMatchObject({
        additionalProperties: false,
        properties: { limit: { type: "integer", minimum: 1, maximum: 50 }, chainable: { type: "boolean" }, tags: { type: "array" } }
      })
      expect(tools.find((t) => t.name === "get_execution_status")?.inputSchema.required).toEqual(["requestId"])
    }))

  it.scoped("every free tool answers with structured content equal to the HTTP API's answer for the same question", () =>
    Effect.gen(function* () {
      const { chainId, forecaster, payment, requestId, rootTransactionId, translator } = yield* Scenario
      const { client } = yield* connect
      const called = new Set<string>()
      const tool = (name: string, args: Record<string, unknown> = {}) =>
        Effect.promise(async () => {
          called.add(name)
          // callTool also checks structuredContent against the tool's outputSchema (the SDK client's ajv).
          const result = await client.callTool({ name, arguments: args })
          expect(result.isError ?? false, `${name}: ${JSON.stringify(result.content)}`).toBe(false)
          expect(textOf(result), name).toEqual(result.structuredContent)
          return result.structuredContent as Record<string, any>
        })

      expect(yield* tool("discover_agents")).toEqual(yield* data("/api/v1/discover"))
      const translators = yield* tool("discover_agents", { tags: ["translation"], maxPrice: "0.015", minHealth: 0, chainable: true, limit: 5 })
      expect(translators).toEqual(yield* data("/api/v1/discover?tags=translation&maxPrice=0.015&minHealth=0&chainable=true&limit=5"))
      expect(translators.agents.map((a: { id: string }) => a.id)).toEqual([translator])
      const found = yield* tool("search_agents", { query: "translate documents", limit: 3 })
      expect(found).toEqual(yield* data("/api/v1/discover/search?query=translate+documents&limit=3"))
      expect(found.agents[0].id).toBe(translator)
      const recommended = yield* tool("recommend_agent", { need: "weather forecast for Paris" })
      expect(recommended).toEqual(yield* data("/api/v1/discover/recommend?need=weather+forecast+for+Paris"))
      expect(recommended.recommended.id).toBe(forecaster)
      expect(yield* tool("list_tags")).toEqual(yield* data("/api/v1/discover/tags"))

      const agent = yield* tool("get_agent", { agentId: forecaster })
      expect(agent.agent).toEqual(yield* data(`/api/v1/agents/${forecaster}`))
      expect(agent.agent.capabilities[0]).toMatchObject({ id: "forecast", pricing: { basePrice: "0.020000" } })

      // Status for anyone; output and cost only with the payment that bought them, as on HTTP.
      const anonymous = yield* tool("get_execution_status", { requestId })
      expect(anonymous).toEqual(yield* data(`/api/v1/execute/${requestId}`))
      expect(anonymous).not.toHaveProperty("output")
      expect(anonymous).not.toHaveProperty("cost")
      expect(anonymous.message).toContain("X-PAYMENT")
      const paid = yield* tool("get_execution_status", { requestId, payment })
      expect(paid).toEqual(yield* data(`/api/v1/execute/${requestId}`, { headers: { "X-PAYMENT": payment } }))
      expect(paid).toMatchObject({ status: "completed", output: { echo: { text: "bonjour" } }, cost: { total: "0.011000" } })
      const wrong = yield* tool("get_execution_status", { requestId, payment: `${payment.slice(0, -4)}AAAA` })
      expect(wrong).not.toHaveProperty("output")

      const budget = { targetAgentId: translator, capabilityId: "echo", input: { text: "x" }, estimatedDepth: 2 }
      expect(yield* tool("check_chain_budget", budget)).toEqual(yield* data("/api/v1/chains/budget-check", { json: budget }))
      const chain = yield* tool("get_chain_status", { chainId })
      expect(chain).toEqual(yield* data(`/api/v1/chains/${chainId}`))
      expect(chain).toMatchObject({ chainId, rootTransactionId, totalBudget: "0.050000", tree: { agentId: translator } })
      expect(yield* tool("get_chain_status", { chainId: rootTransactionId })).toEqual(chain)
      expect(yield* tool("get_chain_cost", { chainId: rootTransactionId })).toEqual(yield* data(`/api/v1/chains/${chainId}/cost`))

      const reputation = yield* tool("get_reputation", { agentId: translator })
      expect(reputation).toEqual({ profile: yield* data(`/api/v1/reputation/${translator}`) })
      const withHistory = yield* tool("get_reputation", { agentId: translator, eventsLimit: 1 })
      expect(withHistory.history).toEqual(yield* data(`/api/v1/reputation/${translator}/events?limit=1`))
      expect(yield* tool("reputation_leaderboard", { limit: 5 })).toEqual(yield* data("/api/v1/reputation/leaderboard?limit=5"))
      const leaders = yield* tool("agent_leaderboard", { sort: "executions" })
      expect(leaders).toEqual(yield* data("/api/v1/analytics/leaderboard?sort=executions"))
      expect(leaders.agents[0]).toMatchObject({ id: translator, execution_count: 2 })
      expect(yield* tool("platform_analytics")).toEqual(yield* data("/api/v1/analytics/platform"))
      const series = yield* tool("platform_timeseries", { metric: "volume", days: 7 })
      expect(series).toEqual(yield* data("/api/v1/analytics/platform/timeseries?metric=volume&days=7"))
      expect(series.data).toHaveLength(7)

      const { tools } = yield* Effect.promise(() => client.listTools())
      expect([...called].sort()).toEqual(tools.map((t) => t.name).filter((name) => FREE_TOOLS.includes(name)).sort())
    }))

  it.scoped("a failing tool is a tool error (isError) carrying the HTTP API's envelope and code; the session goes on", () =>
    Effect.gen(function* () {
      const { client } = yield* connect
      const failing = (name: string, args: Record<string, unknown>) =>
        Effect.promise(async () => {
          const result = await client.callTool({ name, arguments: args })
          expect(result.isError, name).toBe(true)
          expect(result.structuredContent, name).toBeUndefined()
          return textOf(result)
        })
      const unknownAgent = "00000000-0000-4000-8000-000000000000"
      const missing = yield* failing("get_agent", { agentId: unknownAgent })
      const http = yield* api(`/api/v1/agents/${unknownAgent}`)
      expect(http.status).toBe(404)
      expect(missing).toEqual(http.body)
      expect(missing).toMatchObject({ success: false, error: { code: "AGENT_NOT_FOUND" } })
      expect(yield* failing("get_chain_status", { chainId: "tx_nosuchchain000" })).toMatchObject({ error: { code: "CHAIN_NOT_FOUND" } })
      expect(yield* failing("get_execution_status", { requestId: "req_nosuchexecution" })).toMatchObject({ error: { code: "EXECUTION_NOT_FOUND" } })
      // A rule of the service (not of the schema) answers VALIDATION_ERROR as a tool error, as it is a 400 on HTTP.
      expect(yield* failing("discover_agents", { sort: "relevance" })).toMatchObject({ error: { code: "VALIDATION_ERROR" } })
      const budget = yield* failing("check_chain_budget", { targetAgentId: unknownAgent, capabilityId: "echo", input: {} })
      expect(budget.error.code).toBe("AGENT_NOT_FOUND")
      expect(Object.keys(ErrorCodes)).toContain(budget.error.code)
      const { tools } = yield* Effect.promise(() => client.listTools())
      expect(tools.length).toBe(ALL_TOOLS.length)
    }))

  it.scoped("an unknown tool and bad arguments are protocol errors (-32602) naming what is wrong; the session goes on", () =>
    Effect.gen(function* () {
      const { client } = yield* connect
      const unknown = yield* rejection(client.callTool({ name: "hack_the_planet", arguments: {} }))
      expect(unknown).toBeInstanceOf(McpError)
      expect(unknown).toMatchObject({ code: -32602, message: expect.stringContaining("unknown tool") })
      const cases: ReadonlyArray<readonly [string, Record<string, unknown>, string]> = [
        ["discover_agents", { limit: 500 }, "limit"],
        ["discover_agents", { limit: "10" }, "limit"],
        ["discover_agents", { maxPrice: "cheap" }, "maxPrice"],
        ["discover_agents", { colour: "blue" }, "colour"],
        ["get_agent", {}, "agentId"],
        ["get_agent", { agentId: "not-a-uuid" }, "agentId"],
        ["get_execution_status", { requestId: "../../etc/passwd" }, "requestId"],
        ["search_agents", { query: "   " }, "query"],
        ["platform_timeseries", { metric: "weather" }, "metric"]
      ]
      for (const [name, args, field] of cases) {
        const error = yield* rejection(client.callTool({ name, arguments: args }))
        expect(error, `${name} ${JSON.stringify(args)}`).toBeInstanceOf(McpError)
        expect(error, `${name} ${JSON.stringify(args)}`).toMatchObject({ code: -32602, message: expect.stringContaining(field) })
      }
      const detailed = yield* rejection(client.callTool({ name: "discover_agents", arguments: { limit: 0, minHealth: 2 } }))
      expect(detailed).toMatchObject({
        data: { code: "VALIDATION_ERROR", issues: expect.arrayContaining([expect.objectContaining({ path: "limit" }), expect.objectContaining({ path: "minHealth" })]) }
      })
      const still = yield* Effect.promise(() => client.callTool({ name: "list_tags", arguments: {} }))
      expect(still.isError ?? false).toBe(false)
    }))

  it.scoped("resources: every active agent's capability with its schemas, examples and price, by template; the error codes", () =>
    Effect.gen(function* () {
      const { forecaster, translator } = yield* Scenario
      const { client } = yield* connect
      const { resources } = yield* Effect.promise(() => client.listResources())
      const uris = resources.map((r) => r.uri)
      expect(uris).toContain("marketplace://errors")
      expect(uris).toContain(`marketplace://agents/${translator}/capabilities/echo`)
      expect(uris).toContain(`marketplace://agents/${forecaster}/capabilities/forecast`)
      const { resourceTemplates } = yield* Effect.promise(() => client.listResourceTemplates())
      expect(resourceTemplates.map((t) => t.uriTemplate)).toEqual(["marketplace://agents/{agentId}/capabilities/{capabilityId}"])

      const read = (uri: string) =>
        Effect.promise(async () => {
          const { contents } = await client.readResource({ uri })
          expect(contents).toHaveLength(1)
          expect(contents[0]).toMatchObject({ uri, mimeType: "application/json" })
          const [content] = contents
          return JSON.parse(content !== undefined && "text" in content ? content.text : "null")
        })
      const echo = yield* read(`marketplace://agents/${translator}/capabilities/echo`)
      expect(echo.capability).toEqual((yield* data(`/api/v1/agents/${translator}`)).capabilities[0])
      expect(echo.capability.inputSchema).toMatchObject({ required: ["text"] })
      expect(echo.capability.examples).toEqual([{ name: "hello", input: { text: "hello" }, output: { echo: { text: "hello" } } }])
      expect(echo.cost).toEqual({ agentFee: "0.010000", platformFee: "0.001000", total: "0.011000" })
      expect(echo.agent).toMatchObject({ id: translator, name: "Polyglot Translator" })

      const errors = yield* read("marketplace://errors")
      expect(errors.errors.map((e: { code: string }) => e.code).sort()).toEqual(Object.keys(ErrorCodes).sort())
      expect(errors.errors.find((e: { code: string }) => e.code === "AGENT_NOT_FOUND")).toEqual({
        code: "AGENT_NOT_FOUND",
        httpStatus: 404,
        meaning: ErrorCodes.AGENT_NOT_FOUND.meaning
      })
      for (const uri of [`marketplace://agents/${translator}/capabilities/nope`, "marketplace://agents/x/capabilities/echo", "file:///etc/passwd"]) {
        expect(yield* rejection(client.readResource({ uri })), uri).toMatchObject({ code: -32002 })
      }
    }))

  it.scoped("two clients at once: interleaved calls, and one closing leaves the other working", () =>
    Effect.gen(function* () {
      const first = yield* connect
      const second = yield* connect
      const calls = Array.from({ length: 10 }, (_, i) =>
        (i % 2 === 0 ? first : second).client.callTool({ name: i % 3 === 0 ? "list_tags" : "platform_analytics", arguments: {} }))
      const results = yield* Effect.promise(() => Promise.all(calls))
      expect(results.every((r) => r.isError !== true && r.structuredContent !== undefined)).toBe(true)

      yield* Effect.promise(() => first.transport.terminateSession())
      yield* Effect.promise(() => first.client.close())
      const { tools } = yield* Effect.promise(() => second.client.listTools())
      expect(tools.length).toBe(ALL_TOOLS.length)
    }))

  it.effect("a session id this process never issued (another instance's, or one from before a restart) is served, not 404", () =>
    Effect.gen(function* () {
      const foreign = { ...STREAMING, "mcp-session-id": "0b6f6f3e-9a4c-4d7e-8a51-3f0c2d1e5b7a", "mcp-protocol-version": "2025-06-18" }
      const initialized = yield* rpc({ jsonrpc: "2.0", method: "notifications/initialized" }, foreign)
      expect(initialized.status).toBe(202)
      const listed = yield* Effect.flatMap(TestEnv, ({ baseUrl }) =>
        Effect.promise(async () => {
          const response = await fetch(`${baseUrl}/mcp`, {
            method: "POST",
            headers: { "content-type": "application/json", ...foreign },
            body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" })
          })
          return { status: response.status, type: response.headers.get("content-type"), text: await response.text() }
        }))
      expect(listed.status).toBe(200)
      expect(listed.type).toContain("text/event-stream")
      expect(listed.text).toContain('"list_tags"')
    }))

  it.effect("GET (an event stream) and DELETE (ending a session) are 405: nothing is sent unprompted, no session is kept", () =>
    Effect.gen(function* () {
      const { baseUrl } = yield* TestEnv
      for (const method of ["GET", "DELETE"]) {
        const response = yield* Effect.promise(() =>
          fetch(`${baseUrl}/mcp`, { method, headers: { accept: "text/event-stream", "mcp-session-id": "0b6f6f3e-9a4c-4d7e-8a51-3f0c2d1e5b7a" } }))
        expect(response.status, method).toBe(405)
        expect(response.headers.get("allow"), method).toBe("POST")
        expect(yield* Effect.promise(() => response.json()), method).toMatchObject({ jsonrpc: "2.0", error: { code: -32000 } })
      }
    }))

  it.effect("a client that accepts only JSON is answered in plain JSON, with no session and no initialize needed", () =>
    Effect.gen(function* () {
      const headers = { accept: "application/json" }
      const init = yield* rpc({
        jsonrpc: "2.0",
        id: 1,
        method: "initialize",
        params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "curl", version: "1" } }
      }, headers)
      expect(init.status).toBe(200)
      expect(init.headers.get("content-type")).toContain("application/json")
      expect(init.headers.get("mcp-session-id")).toBeNull()
      expect(init.body).toMatchObject({ jsonrpc: "2.0", id: 1, result: { serverInfo: { name: "agent-marketplace" } } })

      const called = yield* rpc({ jsonrpc: "2.0", id: 2, method: "tools/call", params: { name: "list_tags", arguments: {} } }, headers)
      expect(called.status).toBe(200)
      expect(called.headers.get("mcp-session-id")).toBeNull()
      expect(called.body.result.structuredContent).toEqual(yield* data("/api/v1/discover/tags"))
      // A batch: one JSON answer holding both.
      const batch = yield* rpc([
        { jsonrpc: "2.0", id: 3, method: "tools/list" },
        { jsonrpc: "2.0", id: 4, method: "tools/call", params: { name: "get_agent", arguments: { agentId: "nope" } } }
      ], headers)
      expect(batch.status).toBe(200)
      expect(batch.body.map((m: { id: number }) => m.id).sort()).toEqual([3, 4])
      expect(batch.body.find((m: { id: number }) => m.id === 4).error.code).toBe(-32602)

      const broken = yield* Effect.flatMap(TestEnv, ({ baseUrl }) =>
        Effect.promise(() => fetch(`${baseUrl}/mcp`, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: "{nope" })))
      expect(broken.status).toBe(400)
      const notes = yield* rpc({ jsonrpc: "2.0", method: "notifications/initialized" }, headers)
      expect(notes.status).toBe(202)
      // Bodies over MAX_BODY_BYTES (1 MiB) are refused before anything parses them.
      const huge = yield* Effect.flatMap(TestEnv, ({ baseUrl }) =>
        Effect.promise(() =>
          fetch(`${baseUrl}/mcp`, {
            method: "POST",
            headers: { "content-type": "application/json", ...headers },
            body: JSON.stringify({ jsonrpc: "2.0", id: 5, method: "tools/call", params: { name: "search_agents", arguments: { query: "x".repeat(1_100_000) } } })
          })))
      expect(huge.status).toBe(413)
    }))
})

