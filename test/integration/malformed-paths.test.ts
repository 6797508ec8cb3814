// Finding 9: a path whose percent-encoding is not valid UTF-8 (`/ops/%E0`, before any login) is the client's mistake:
// a 4xx, never a 500 with an error in the log; the same on the API's routes (their path parameters) and its unknown paths.
import { expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import { request } from "node:http"
import { OPERATOR_TOKEN, TestApp, TestEnv } from "../support/harness.js"

/** GET `path` sent byte for byte (fetch would re-encode it): status and body. */
const get = (path: string, headers: Record<string, string> = {}) =>
  Effect.flatMap(TestEnv, ({ baseUrl }) =>
    Effect.async<{ status: number; text: string }>((resume) => {
      const url = new URL(baseUrl)
      const req = request({ host: url.hostname, port: url.port, method: "GET", path, headers }, (res) => {
        let text = ""
        res.setEncoding("utf8")
        res.on("data", (chunk: string) => (text += chunk))
        res.on("end", () => resume(Effect.succeed({ status: res.statusCode ?? 0, text })))
      })
      req.on("error", (error) => resume(Effect.die(error)))
      req.end()
    }))

const MALFORMED = ["%E0", "%E0%A4", "%C0%AF", "%FF", "%ED%A0%80", "%"]

layer(TestApp({ BACKGROUND_WORKERS: "false" }))("malformed percent-encoding in a path", (it) => {
  it.effect("GET /ops/%E0 without logging in is a 4xx, not a 500 (and so is every other malformed console path)", () =>
    Effect.gen(function* () {
      for (const bad of MALFORMED) {
        for (const path of [`/ops/${bad}`, `/ops/machines/${bad}`, `/ops/machines/execution/${bad}`, `/ops/actions/${bad}`]) {
          const answer = yield* get(path)
          expect({ path, status: answer.status }).toEqual({ path, status: answer.status >= 400 && answer.status < 500 ? answer.status : "4xx" })
        }
      }
      const answer = yield* get("/ops/%E0")
      expect(answer.status).toBe(400)
      expect(answer.text).not.toContain("failed to answer")
    }))

  it.effect("the API's routes answer a malformed path parameter with a 4xx in the envelope", () =>
    Effect.gen(function* () {
      const operator = { authorization: `Bearer ${OPERATOR_TOKEN}` }
      for (const bad of MALFORMED) {
        for (const [path, headers] of [
          [`/api/v1/agents/${bad}`, {}],
          [`/api/v1/execute/${bad}`, {}],
          [`/api/v1/disputes/${bad}`, {}],
          [`/api/v1/reputation/${bad}`, {}],
          [`/api/v1/payments/balance/${bad}`, {}],
          [`/api/v1/operator/machines/${bad}`, operator],
          [`/api/v1/operator/machines/execution/actors/${bad}`, operator],
          [`/api/v1/${bad}`, {}],
          [`/${bad}`, {}]
        ] as const) {
          const answer = yield* get(path, headers)
          expect({ path, status: answer.status }).toEqual({ path, status: answer.status >= 400 && answer.status < 500 ? answer.status : "4xx" })
          expect(JSON.parse(answer.text)).toMatchObject({ success: false, error: { code: expect.any(String) } })
        }
      }
    }))
})
