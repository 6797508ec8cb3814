// Handlers of /api/v1/agents: decode, call the Agents service, encode.
import { HttpApiBuilder, HttpServerRequest } from "@effect/platform"
import { Effect } from "effect"
import { AppConfig } from "../../layers/Config.js"
import { presentedFromHeaders } from "../../layers/x402/credential.js"
import { Agents } from "../../services/agents/Agents.js"
import { AgentRegistration } from "../../services/agents/Registration.js"
import { Paywall } from "../../services/payments/Paywall.js"
import { toResource } from "../../services/agents/View.js"
import { Api } from "./Api.js"
import { respond } from "./Envelope.js"
import { challengeHeaders, receiptHeaders, setResponseHeaders } from "./PaymentHeaders.js"

export const AgentsHttpLive = HttpApiBuilder.group(Api, "agents", (handlers) =>
  Effect.gen(function* () {
    const agents = yield* Agents
    const registration = yield* AgentRegistration
    const paywall = yield* Paywall
    const { publicBaseUrl } = yield* AppConfig
    const resource = `${publicBaseUrl}/api/v1/agents`
    return handlers
      .handle("register", ({ headers, payload }) =>
        Effect.gen(function* () {
          // The body as sent (already read and cached by the server): what a walletProof signs.
          const raw = yield* Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) => request.json).pipe(Effect.orDie)
          const result = yield* registration.register(payload, raw, presentedFromHeaders(headers), resource)
          yield* setResponseHeaders(receiptHeaders(result.payment))
          const { payment: _, ...data } = result
          return respond(data)
        }).pipe(Effect.tapError(challengeHeaders(paywall))))
      .handle("checkWallet", ({ path }) => Effect.map(agents.checkWallet(path.wallet), respond))
      .handle("get", ({ path }) =>
        Effect.map(agents.get(path.id), ({ agent, meta }) => ({ success: true as const, data: toResource(agent), meta })))
      .handle("update", ({ headers, path, payload }) =>
        Effect.map(agents.update(path.id, headers, payload), (agent) => respond(toResource(agent))))
      .handle("deactivate", ({ headers, path }) => Effect.map(agents.deactivate(path.id, headers), respond))
  }))
