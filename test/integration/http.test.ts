import { expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import { randomUUID } from "node:crypto"
import { request } from "node:http"
import { ErrorCodes } from "../../src/domain/Errors.js"
import { authorizationUsed, call, devAccount, paidCall, signPayment, usdcBalance, walletAuth } from "../support/clients.js"
import { capability, registration } from "../support/fixtures.js"
import { OPERATOR_TOKEN, TestApp, TestEnv } from "../support/harness.js"

const REGISTRATION_FEE = 100_000n
/** Never registered here: a valid body for this wallet reaches the payment step. */
const applicant = devAccount(7)

interface Raw {
  readonly status: number
  readonly headers: Record<string, string | Array<string> | undefined>
  readonly text: string
}

/**
 * A request through node:http, so tests control the framing exactly (content-length, chunked, no body).
 * `chunks` are written one by one with `transfer-encoding: chunked`; the response is read even if the server
 * answers before the whole body is sent.
 */
const raw = (
  baseUrl: string,
  method: string,
  path: string,
  options: { readonly headers?: Record<string, string>; readonly body?: string | Buffer; readonly chunks?: ReadonlyArray<string> } = {}
) =>
  Effect.async<Raw, Error>((resume) => {
    let done = false
    const finish = (result: Raw | Error) => {
      if (done) return
      done = true
      resume(result instanceof Error ? Effect.fail(result) : Effect.succeed(result))
    }
    const url = new URL(path, baseUrl)
    const req = request(
      { host: url.hostname, port: url.port, method, path: `${url.pathname}${url.search}`, headers: options.headers ?? {} },
      (res) => {
        let text = ""
        res.setEncoding("utf8")
        res.on("data", (chunk: string) => (text += chunk))
        res.on("end", () => finish({ status: res.statusCode ?? 0, headers: res.headers, text }))
        res.on("error", finish)
      }
    )
    req.on("error", (error) => finish(new Error(`${method} ${path.slice(0, 60)}: connection closed without a response (${error.message})`)))
    if (options.chunks !== undefined) {
      req.setHeader("transfer-encoding", "chunked")
      const write = (i: number): void => {
        if (i >= options.chunks!.length || done) return void req.end()
        req.write(options.chunks![i], () => setImmediate(() => write(i + 1)))
      }
      write(0)
    } else if (options.body !== undefined) {
      if (req.getHeader("content-length") === undefined) req.setHeader("content-length", Buffer.byteLength(options.body))
      req.end(options.body)
    } else {
      req.end()
    }
  })

const jsonOf = (response: Raw) => {
  try {
    return JSON.parse(response.text) as any
  } catch {
    throw new Error(`non-JSON ${response.status} response: ${response.text.slice(0, 300)}`)
  }
}

/** The failure envelope: JSON, success:false, a registered code whose status is the HTTP status, no internals. */
const expectEnvelope = (response: Raw, status?: number, code?: keyof typeof ErrorCodes) => {
  const body = jsonOf(response)
  expect(response.status).toBeLessThan(500)
  expect(body.success).toBe(false)
  expect(Object.keys(ErrorCodes)).toContain(body.error?.code)
  expect(typeof body.error?.message).toBe("string")
  expect(ErrorCodes[body.error.code as keyof typeof ErrorCodes].status).toBe(response.status)
  // No stack frames (raw or JSON-escaped newlines), no file paths.
  expect(response.text).not.toMatch(/(?:\n|\\n)\s*at |\bat [^\s]+ \(.*:\d+:\d+\)|node_modules|\.ts:\d+/)
  if (status !== undefined) expect(response.status).toBe(status)
  if (code !== undefined) expect(body.error.code).toBe(code)
  return body
}

const JSON_HEADERS = { "content-type": "application/json" }
const post = (baseUrl: string, path: string, json: unknown, headers: Record<string, string> = {}) =>
  raw(baseUrl, "POST", path, { headers: { ...JSON_HEADERS, ...headers }, body: JSON.stringify(json) })

const nested = (depth: number, open = "[", close = "]", leaf = "1") => `${open.repeat(depth)}${leaf}${close.repeat(depth)}`
const nestedObject = (depth: number) => `${"{\"a\":".repeat(depth)}1${"}".repeat(depth)}`

layer(TestApp(), { excludeTestServices: true })("HTTP edge: the error envelope for bad input, never a 500", (it) => {
  it.effect("GET /health answers 200 with status ok in devnet mode and a live chain", () =>
    Effect.gen(function* () {
      const { baseUrl } = yield* TestEnv
      const response = yield* Effect.promise(() => call(`${baseUrl}/health`))
      expect(response.status).toBe(200)
      expect(response.body).toMatchObject({
        success: true,
        data: { status: "ok", mode: "devnet", settlement: "local", chain: { network: "base-sepolia", chainId: 84532 } }
      })
      expect(response.body.data.chain.blockNumber).toMatch(/^\d+$/)
      expect(typeof response.body.data.uptimeSeconds).toBe("number")
    }))

  it.effect("GET /openapi.json describes the agent routes, and GET /docs serves HTML", () =>
    Effect.gen(function* () {
      const { baseUrl } = yield* TestEnv
      const spec = yield* raw(baseUrl, "GET", "/openapi.json")
      expect(spec.status).toBe(200)
      const paths = Object.keys(jsonOf(spec).paths)
      expect(paths).toEqual(expect.arrayContaining(["/api/v1/agents", "/api/v1/agents/{id}", "/health"]))
      expect(Object.keys(jsonOf(spec).paths["/api/v1/agents/{id}"])).toEqual(expect.arrayContaining(["get", "patch", "delete"]))

      const docs = yield* raw(baseUrl, "GET", "/docs")
      expect(docs.status).toBe(200)
      expect(docs.headers["content-type"]).toMatch(/text\/html/)
      expect(docs.text).toMatch(/<html/i)
      // Swagger UI's script (loaded at the first /docs, src/http/Docs.ts) and the API's document inside the page
      expect(docs.text).toContain("SwaggerUIBundle(")
      expect(docs.text).toContain("/api/v1/agents/{id}")
    }))

  it.effect("an unknown route answers 404 NOT_FOUND in the envelope", () =>
    Effect.gen(function* () {
      const { baseUrl } = yield* TestEnv
      expectEnvelope(yield* raw(baseUrl, "GET", "/nope"), 404, "NOT_FOUND")
      expectEnvelope(yield* raw(baseUrl, "GET", "/api/v2/agents"), 404, "NOT_FOUND")
      expectEnvelope(yield* raw(baseUrl, "PUT", `/api/v1/agents/${randomUUID()}`), 404, "NOT_FOUND")
    }))

  it.effect("GET /api/v1/agents/not-a-uuid is 400 VALIDATION_ERROR at path `id`; an unknown uuid is 404 AGENT_NOT_FOUND", () =>
    Effect.gen(function* () {
      const { baseUrl } = yield* TestEnv
      const body = expectEnvelope(yield* raw(baseUrl, "GET", "/api/v1/agents/not-a-uuid"), 400, "VALIDATION_ERROR")
      expect(body.error.details.issues.map((i: { path: string }) => i.path)).toEqual(["id"])
      expectEnvelope(yield* raw(baseUrl, "GET", `/api/v1/agents/${randomUUID()}`), 404, "AGENT_NOT_FOUND")
    }))

  it.effect("a malformed JSON body is 400 INVALID_JSON", () =>
    Effect.gen(function* () {
      const { baseUrl } = yield* TestEnv
      for (const text of ["{", "{\"name\": }", "{'name': 'x'}", "{}{}", "\uFEFF{}", "NaN", "undefined"]) {
        expectEnvelope(yield* raw(baseUrl, "POST", "/api/v1/agents", { headers: JSON_HEADERS, body: text }), 400, "INVALID_JSON")
      }
    }))

  it.effect("an empty body with content-type json is 400, on POST and PATCH", () =>
    Effect.gen(function* () {
      const { baseUrl } = yield* TestEnv
      expectEnvelope(yield* raw(baseUrl, "POST", "/api/v1/agents", { headers: { ...JSON_HEADERS, "content-length": "0" } }), 400)
      expectEnvelope(yield* raw(baseUrl, "POST", "/api/v1/agents", { headers: JSON_HEADERS, body: "" }), 400)
      expectEnvelope(yield* raw(baseUrl, "POST", "/api/v1/agents"), 400)
      expectEnvelope(yield* raw(baseUrl, "PATCH", `/api/v1/agents/${randomUUID()}`, { headers: JSON_HEADERS, body: "" }), 400)
    }))

  it.effect("a body that is not application/json is 415 UNSUPPORTED_MEDIA_TYPE", () =>
    Effect.gen(function* () {
      const { baseUrl } = yield* TestEnv
      const json = JSON.stringify(registration(applicant))
      for (const type of ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "application/jsonp", "application/xml"]) {
        const response = yield* raw(baseUrl, "POST", "/api/v1/agents", { headers: { "content-type": type }, body: json })
        expect(jsonOf(response).error.details.contentType).toBe(type)
        expectEnvelope(response, 415, "UNSUPPORTED_MEDIA_TYPE")
      }
      expectEnvelope(yield* raw(baseUrl, "POST", "/api/v1/agents", { body: json }), 415, "UNSUPPORTED_MEDIA_TYPE")
      expectEnvelope(
        yield* raw(baseUrl, "PATCH", `/api/v1/agents/${randomUUID()}`, { headers: { "content-type": "text/plain" }, body: "{}" }),
        415,
        "UNSUPPORTED_MEDIA_TYPE"
      )
    }))

  it.effect("structured-syntax JSON types (application/vnd.api+json) are refused with 415, not misread as an empty body", () =>
    Effect.gen(function* () {
      const { baseUrl } = yield* TestEnv
      const json = JSON.stringify(registration(applicant))
      for (const type of ["application/vnd.api+json", "application/problem+json; charset=utf-8"]) {
        const response = yield* raw(baseUrl, "POST", "/api/v1/agents", { headers: { "content-type": type }, body: json })
        expectEnvelope(response, 415, "UNSUPPORTED_MEDIA_TYPE")
      }
    }))

  it.effect("a JSON array, number, string, boolean or null as the body is 400 VALIDATION_ERROR", () =>
    Effect.gen(function* () {
      const { baseUrl } = yield* TestEnv
      for (const text of ["[]", "[{}]", "42", "\"agent\"", "true", "null"]) {
        expectEnvelope(yield* raw(baseUrl, "POST", "/api/v1/agents", { headers: JSON_HEADERS, body: text }), 400, "VALIDATION_ERROR")
      }
    }))

  it.effect("deeply nested JSON (5000 levels) as the body, in metadata, tags or capabilities is 400, not 500", () =>
    Effect.gen(function* () {
      const { baseUrl } = yield* TestEnv
      const valid = JSON.stringify(registration(applicant))
      const bodies = [
        nested(5000),
        nestedObject(5000),
        valid.replace(/^\{/, `{"metadata":${nestedObject(5000)},`).replace(/,"metadata":\{"owner":"tests"\}/, ""),
        valid.replace("\"tags\":[\"nlp\",\"text\"]", `"tags":${nested(5000)}`),
        valid.replace(/"capabilities":\[/, `"capabilities":[${nested(5000, "{\"x\":", "}")},`)
      ]
      const statuses: Array<string> = []
      for (const body of bodies) {
        const response = yield* raw(baseUrl, "POST", "/api/v1/agents", { headers: JSON_HEADERS, body })
        statuses.push(`${body.slice(0, 24)}... -> ${response.status} ${jsonOf(response).error?.code}`)
      }
      expect(statuses.filter((s) => !/-> 400 (?:VALIDATION_ERROR|INVALID_JSON)$/.test(s))).toEqual([])
    }))

  it.effect("an inputSchema nested 5000 levels deep is refused with 400 for its nesting, not a 500", () =>
    Effect.gen(function* () {
      const { baseUrl } = yield* TestEnv
      const deep = `${"{\"type\":\"object\",\"properties\":{\"a\":".repeat(5000)}{"type":"string"}${"}}".repeat(5000)}`
      const body = JSON.stringify(registration(applicant, { capabilities: [capability({ inputSchema: "@" })] })).replace("\"@\"", deep)
      const response = yield* raw(baseUrl, "POST", "/api/v1/agents", { headers: JSON_HEADERS, body })
      const refused = expectEnvelope(response, 400, "VALIDATION_ERROR")
      expect(refused.error.details.issues[0].message).toMatch(/nested deeper than 64 levels/)
    }))

  it.effect("huge string fields under the body limit are refused at their field paths", () =>
    Effect.gen(function* () {
      const { baseUrl } = yield* TestEnv
      const cases: ReadonlyArray<readonly [Record<string, unknown>, string]> = [
        [{ name: "n".repeat(500_000) }, "name"],
        [{ description: "d".repeat(900_000) }, "description"],
        [{ tags: ["t".repeat(100_000)] }, "tags.0"],
        [{ metadata: { blob: "m".repeat(100_000) } }, "metadata"],
        [{ endpoints: { execution: `http://example.com/${"p".repeat(100_000)}` } }, "endpoints.execution"],
        [{ capabilities: [capability({ id: "c".repeat(100_000) })] }, "capabilities.0.id"],
        [{ capabilities: [capability({ description: "x".repeat(300_000) })] }, "capabilities.0.description"]
      ]
      for (const [overrides, path] of cases) {
        const body = expectEnvelope(yield* post(baseUrl, "/api/v1/agents", registration(applicant, overrides)), 400, "VALIDATION_ERROR")
        expect(body.error.details.issues.map((i: { path: string }) => i.path)).toContain(path)
      }
    }))

  it.effect("a validation error does not echo a huge offending value back to the caller", () =>
    Effect.gen(function* () {
      const { baseUrl } = yield* TestEnv
      const response = yield* post(baseUrl, "/api/v1/agents", registration(applicant, { name: "n".repeat(500_000) }))
      expectEnvelope(response, 400, "VALIDATION_ERROR")
      expect(response.text.length).toBeLessThan(20_000)
    }))

  it.effect("wrong types everywhere are 400 VALIDATION_ERROR at each field", () =>
    Effect.gen(function* () {
      const { baseUrl } = yield* TestEnv
      const response = yield* post(baseUrl, "/api/v1/agents", {
        wallet: 12345,
        name: ["Summarizer"],
        description: null,
        tags: "nlp,text",
        capabilities: { summarize: capability() },
        endpoints: "http://example.com/x",
        metadata: [1, 2, 3]
      })
      const body = expectEnvelope(response, 400, "VALIDATION_ERROR")
      expect(body.error.details.issues.map((i: { path: string }) => i.path)).toEqual(
        expect.arrayContaining(["wallet", "name", "description", "tags", "capabilities", "endpoints", "metadata"])
      )
      const inner = yield* post(baseUrl, "/api/v1/agents", registration(applicant, {
        capabilities: [capability({ pricing: ["per-request"], examples: { input: {} }, inputSchema: "string", name: 7 })]
      }))
      expect(expectEnvelope(inner, 400, "VALIDATION_ERROR").error.details.issues.map((i: { path: string }) => i.path)).toEqual(
        expect.arrayContaining(["capabilities.0.pricing", "capabilities.0.examples", "capabilities.0.inputSchema", "capabilities.0.name"])
      )
    }))

  it.effect("unicode names (emoji, CJK, Cyrillic, Arabic, combining marks) pass validation and reach the payment challenge", () =>
    Effect.gen(function* () {
      const { baseUrl } = yield* TestEnv
      for (const name of ["Ågent 🤖 名前", "Агент", "مساعد", "e\u0301e\u0301e\u0301"]) {
        const response = yield* post(baseUrl, "/api/v1/agents", registration(applicant, { name }))
        expect({ name, status: response.status }).toEqual({ name, status: 402 })
      }
    }))

  it.effect("a paid registration whose name contains a NUL character is refused cleanly (not a 500) and not charged", () =>
    Effect.gen(function* () {
      const { baseUrl } = yield* TestEnv
      const payer = devAccount(8)
      const before = yield* Effect.promise(() => usdcBalance(payer.address))
      const { header, nonce } = yield* Effect.promise(() => signPayment({ account: payer, value: REGISTRATION_FEE }))
      // The payment is real, so the request gets past validation and payment verification to the database.
      const response = yield* post(baseUrl, "/api/v1/agents", registration(devAccount(5), { name: "Agent\u0000Zero" }), { "X-PAYMENT": header })
      expect(yield* Effect.promise(() => authorizationUsed(payer.address, nonce))).toBe(false)
      expect(yield* Effect.promise(() => usdcBalance(payer.address))).toBe(before)
      expectEnvelope(response, 400, "VALIDATION_ERROR")
    }))

  it.effect("a paid registration whose name holds a lone UTF-16 surrogate is refused or stored exactly, never silently altered", () =>
    Effect.gen(function* () {
      const { baseUrl } = yield* TestEnv
      const owner = devAccount(9)
      const name = "Agent\ud800Half"
      const response = yield* Effect.promise(() => paidCall(owner, `${baseUrl}/api/v1/agents`, { json: registration(owner, { name }) }))
      expect(response.status).toBeLessThan(500)
      if (response.status === 201) {
        const read = yield* Effect.promise(() => call(`${baseUrl}/api/v1/agents/${response.body.data.id}`))
        expect(read.body.data.name).toBe(name)
      } else {
        expect(response.body.error?.code).toBe("VALIDATION_ERROR")
      }
    }))

  it.effect("an owner's PATCH with NUL characters or lone surrogates in text fields is refused with 400, never 500", () =>
    Effect.gen(function* () {
      const { baseUrl } = yield* TestEnv
      const owner = devAccount(6)
      const created = yield* Effect.promise(() => paidCall(owner, `${baseUrl}/api/v1/agents`, { json: registration(owner) }))
      expect(created.status).toBe(201)
      const id: string = created.body.data.id
      const patches = [
        { name: "Nul\u0000Agent" },
        { description: "ends with NUL\u0000" },
        { tags: ["t\u0000g"] },
        { metadata: { note: "nul \u0000 inside" } },
        { metadata: { ["key\u0000"]: 1 } },
        { metadata: { half: "\ud800" } },
        { capabilities: [capability({ description: "nul \u0000 here" })] }
      ]
      const statuses: Array<string> = []
      for (const json of patches) {
        const headers = yield* Effect.promise(() => walletAuth(owner, id))
        const response = yield* raw(baseUrl, "PATCH", `/api/v1/agents/${id}`, {
          headers: { ...JSON_HEADERS, ...headers },
          body: JSON.stringify(json)
        })
        statuses.push(`${JSON.stringify(json).slice(0, 40)} -> ${response.status}`)
      }
      expect(statuses.filter((s) => /-> 5\d\d$/.test(s))).toEqual([])
      expect(statuses.filter((s) => !/-> 400$/.test(s))).toEqual([])
      const read = yield* Effect.promise(() => call(`${baseUrl}/api/v1/agents/${id}`))
      expect(read.status).toBe(200)
      expect(read.body.data).toMatchObject({ name: "Summarizer", description: "Summarizes documents", metadata: { owner: "tests" } })

      // Control: ordinary unicode is stored and read back exactly.
      const unicode = yield* Effect.promise(async () =>
        call(`${baseUrl}/api/v1/agents/${id}`, { method: "PATCH", headers: await walletAuth(owner, id), json: { name: "Ågent 🤖 名前", metadata: { note: "ünïcödé ✓" } } }))
      expect(unicode.status).toBe(200)
      const after = yield* Effect.promise(() => call(`${baseUrl}/api/v1/agents/${id}`))
      expect(after.body.data).toMatchObject({ name: "Ågent 🤖 名前", metadata: { note: "ünïcödé ✓" } })
    }))

  it.effect("a garbage X-PAYMENT on a valid registration is 402 with details.reason saying what is wrong", () =>
    Effect.gen(function* () {
      const { baseUrl } = yield* TestEnv
      const { header } = yield* Effect.promise(() => signPayment({ account: devAccount(8), value: REGISTRATION_FEE }))
      const decoded = JSON.parse(Buffer.from(header, "base64").toString("utf8"))
      const b64 = (value: unknown) => Buffer.from(typeof value === "string" ? value : JSON.stringify(value)).toString("base64")
      const cases: ReadonlyArray<readonly [string, string]> = [
        ["not base64!!", "invalid_payload"],
        [b64("{}"), "invalid_payload"],
        [b64("[]"), "invalid_payload"],
        [b64("null"), "invalid_payload"],
        [b64("not json"), "invalid_payload"],
        [b64({ ...decoded, payload: { ...decoded.payload, signature: "nope" } }), "invalid_payload"],
        ["x".repeat(4000), "invalid_payload"],
        // Base64 of 5,000 "[" once overflowed the stack in the error formatter (a 500); depth and size are bounded first.
        [b64("[".repeat(5000)), "invalid_payload"],
        [b64({ ...decoded, payload: { ...decoded.payload, nested: JSON.parse(`${"[".repeat(100)}${"]".repeat(100)}`) } }), "invalid_payload"],
        [b64({ ...decoded, padding: "p".repeat(9000) }), "invalid_payload"],
        [b64({ ...decoded, x402Version: 2 }), "invalid_x402_version"],
        [b64({ ...decoded, x402Version: "1" }), "invalid_payload"],
        [b64({ ...decoded, scheme: "upto" }), "unsupported_scheme"],
        [b64({ ...decoded, network: "base" }), "invalid_network"]
      ]
      for (const [payment, reason] of cases) {
        const response = yield* post(baseUrl, "/api/v1/agents", registration(applicant), { "X-PAYMENT": payment })
        const body = expectEnvelope(response, 402, "PAYMENT_REQUIRED")
        expect({ payment: payment.slice(0, 30), reason: body.error.details.reason }).toEqual({ payment: payment.slice(0, 30), reason })
        expect(body.x402Version).toBe(1)
        expect(body.accepts[0]).toMatchObject({ scheme: "exact", maxAmountRequired: "100000" })
      }
    }))

  it.effect("~40 assorted malformed requests on every route answer < 500 with a registered error code and no internals", () =>
    Effect.gen(function* () {
      const { baseUrl } = yield* TestEnv
      const uuid = randomUUID()
      const bearer = { Authorization: `Bearer ${OPERATOR_TOKEN}` }
      const json = (value: unknown, extra: Record<string, string> = {}) => ({ headers: { ...JSON_HEADERS, ...extra }, body: JSON.stringify(value) })
      const text = (value: string, extra: Record<string, string> = {}) => ({ headers: { ...JSON_HEADERS, ...extra }, body: value })
      const requests: ReadonlyArray<readonly [string, string, Parameters<typeof raw>[3]]> = [
        ["GET", "/api/v1/agents", {}],
        ["DELETE", "/api/v1/agents", {}],
        ["PATCH", "/api/v1/agents", json({ name: "abc" })],
        ["POST", "/api/v1/agents", text("{\"wallet\":")],
        ["POST", "/api/v1/agents", json({ wallet: applicant.address })],
        ["POST", "/api/v1/agents", json([registration(applicant)])],
        ["POST", "/api/v1/agents", { headers: { "content-type": "text/plain" }, body: "hello" }],
        ["POST", "/api/v1/agents", json(registration(applicant), { "X-PAYMENT": "%%%" })],
        ["POST", "/api/v1/agents?x=%ZZ", json({})],
        ["POST", "/api/v1/agents", text("\u0000\u0001\u0002")],
        ["GET", "/api/v1/agents/not-a-uuid", {}],
        ["GET", "/api/v1/agents/%E0%A4%A", {}],
        ["GET", "/api/v1/agents/%00", {}],
        ["GET", `/api/v1/agents/${"a".repeat(4000)}`, {}],
        ["GET", `/api/v1/agents/${uuid}`, {}],
        ["GET", `/api/v1/agents/${uuid}?cache=%ZZ`, {}],
        ["POST", `/api/v1/agents/${uuid}`, json({})],
        ["PATCH", "/api/v1/agents/not-a-uuid", json({ name: "abc" })],
        ["PATCH", `/api/v1/agents/${uuid}`, json({ name: "abc" })],
        ["PATCH", `/api/v1/agents/${uuid}`, text("[1,2")],
        ["PATCH", `/api/v1/agents/${uuid}`, json({ name: 3 }, { "X-Agent-Wallet": "x", "X-Agent-Signature": "y" })],
        ["PATCH", `/api/v1/agents/${uuid}`, { headers: { "content-type": "multipart/form-data; boundary=z" }, body: "--z--" }],
        ["DELETE", "/api/v1/agents/not-a-uuid", {}],
        ["DELETE", `/api/v1/agents/${uuid}`, { headers: { "X-Agent-Wallet": "0x0", "X-Agent-Signature": ":sig:" } }],
        ["DELETE", `/api/v1/agents/${uuid}`, { headers: { "content-type": "text/plain" }, body: "bye" }],
        ["GET", "/api/v1/agents/check-wallet/0x123", {}],
        ["GET", `/api/v1/agents/check-wallet/0x${"g".repeat(40)}`, {}],
        ["GET", "/api/v1/agents/check-wallet/", {}],
        ["POST", `/api/v1/agents/check-wallet/${applicant.address}`, json({})],
        ["GET", "/api/v1/operator/agents", {}],
        ["GET", `/api/v1/operator/agents/${uuid}/status`, {}],
        ["POST", `/api/v1/operator/agents/${uuid}/status`, json({ status: "suspended" })],
        ["POST", `/api/v1/operator/agents/${uuid}/status`, json({ status: "suspended" }, { Authorization: "Bearer" })],
        ["POST", "/api/v1/operator/agents/not-a-uuid/status", json({ status: "suspended" }, bearer)],
        ["POST", `/api/v1/operator/agents/${uuid}/status`, json({ status: "deleted" }, bearer)],
        ["POST", `/api/v1/operator/agents/${uuid}/status`, text("{status:", bearer)],
        ["POST", `/api/v1/operator/agents/${uuid}/status`, json({ status: "active", reason: "r".repeat(1001) }, bearer)],
        ["POST", `/api/v1/operator/agents/${uuid}/trust-tier`, json({}, bearer)],
        ["POST", `/api/v1/operator/agents/${uuid}/trust-tier`, json({ tier: "premium" }, bearer)],
        ["POST", `/api/v1/operator/agents/${uuid}/trust-tier`, { headers: { ...bearer, "content-type": "text/plain" }, body: "premium" }],
        ["DELETE", `/api/v1/operator/agents/${uuid}/trust-tier`, { headers: bearer }],
        ["POST", "/health", json({})],
        ["GET", "/api/v1/../../etc/passwd", {}]
      ]
      expect(requests.length).toBeGreaterThanOrEqual(40)
      const failures: Array<string> = []
      for (const [method, path, options] of requests) {
        const response = yield* raw(baseUrl, method, path, options)
        try {
          expectEnvelope(response)
        } catch (error) {
          failures.push(`${method} ${path.slice(0, 60)} -> ${response.status} ${response.text.slice(0, 160)}`)
        }
      }
      expect(failures).toEqual([])
    }))
})

layer(TestApp({ MAX_BODY_BYTES: "4096" }), { excludeTestServices: true })("HTTP edge: body size limit (MAX_BODY_BYTES=4096)", (it) => {
  const padded = (bytes: number) => {
    const base = registration(applicant, { metadata: { pad: "" } })
    const size = JSON.stringify(base).length
    return JSON.stringify(registration(applicant, { metadata: { pad: "p".repeat(bytes - size) } }))
  }

  it.effect("a body just under the limit is read (402 challenge); one over it with content-length is 413 PAYLOAD_TOO_LARGE", () =>
    Effect.gen(function* () {
      const { baseUrl } = yield* TestEnv
      const fits = padded(4000)
      expect(Buffer.byteLength(fits)).toBe(4000)
      expect((yield* raw(baseUrl, "POST", "/api/v1/agents", { headers: JSON_HEADERS, body: fits })).status).toBe(402)

      const tooBig = padded(5000)
      const response = yield* raw(baseUrl, "POST", "/api/v1/agents", { headers: { ...JSON_HEADERS, "content-length": String(Buffer.byteLength(tooBig)) }, body: tooBig })
      const body = expectEnvelope(response, 413, "PAYLOAD_TOO_LARGE")
      expect(body.error.details).toEqual({ limitBytes: 4096 })
      // Also when the type is wrong or the route is a PATCH: size is checked first.
      expectEnvelope(yield* raw(baseUrl, "POST", "/api/v1/agents", { headers: { "content-type": "text/plain" }, body: tooBig }), 413, "PAYLOAD_TOO_LARGE")
      expectEnvelope(yield* raw(baseUrl, "PATCH", `/api/v1/agents/${randomUUID()}`, { headers: JSON_HEADERS, body: tooBig }), 413, "PAYLOAD_TOO_LARGE")
    }))

  it.effect("a chunked body (no content-length) is refused with 411 LENGTH_REQUIRED, whatever its size", () =>
    Effect.gen(function* () {
      const { baseUrl } = yield* TestEnv
      for (const text of [padded(3000), padded(20_000)]) {
        const response = yield* raw(baseUrl, "POST", "/api/v1/agents", { headers: JSON_HEADERS, chunks: text.match(/[\s\S]{1,1000}/g) ?? [] })
        expectEnvelope(response, 411, "LENGTH_REQUIRED")
      }
    }))

  it.effect("fetch with a ReadableStream body (duplex: half, sent chunked) gets 411 LENGTH_REQUIRED, not a dropped connection", () =>
    Effect.gen(function* () {
      const { baseUrl } = yield* TestEnv
      const streamed = (text: string) =>
        Effect.promise(async () => {
          const bytes = new TextEncoder().encode(text)
          const body = new ReadableStream<Uint8Array>({
            start(controller) {
              for (let i = 0; i < bytes.length; i += 1024) controller.enqueue(bytes.slice(i, i + 1024))
              controller.close()
            }
          })
          // undici sends a stream body with transfer-encoding: chunked and no content-length.
          const response = await fetch(`${baseUrl}/api/v1/agents`, { method: "POST", headers: JSON_HEADERS, body, duplex: "half" } as RequestInit)
            .catch((error: unknown) => {
              throw new Error(`connection closed without a response: ${String((error as Error).cause ?? error)}`)
            })
          return { status: response.status, headers: {}, text: await response.text() } satisfies Raw
        })
      expectEnvelope(yield* streamed(padded(3000)), 411, "LENGTH_REQUIRED")
      expectEnvelope(yield* streamed(padded(20_000)), 411, "LENGTH_REQUIRED")
    }))
})
