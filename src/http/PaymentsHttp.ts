// Handlers of /api/v1/payments and /api/v1/platform.
import { HttpApiBuilder } from "@effect/platform"
import { Effect } from "effect"
import { AgentProxy } from "../../layers/AgentProxy.js"
import { Balances } from "../../services/ledger/Balances.js"
import { Api } from "./Api.js"
import { respond } from "./Envelope.js"

export const PaymentsHttpLive = HttpApiBuilder.group(Api, "payments", (handlers) =>
  Effect.gen(function* () {
    const balances = yield* Balances
    return handlers
      .handle("balance", ({ path }) => Effect.map(balances.balance(path.agentId), respond))
      .handle("transaction", ({ path }) => Effect.map(balances.transaction(path.txId), respond))
  }))

export const PlatformHttpLive = HttpApiBuilder.group(Api, "platform", (handlers) =>
  Effect.map(AgentProxy, (proxy) => handlers.handle("signingKey", () => Effect.succeed(respond(proxy.signingKey)))))
