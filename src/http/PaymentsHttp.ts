// Handlers of /api/v1/payments and /api/v1/platform.
import { HttpApiBuilder } from "@effect/platform"
import { Effect } from "effect"
import { AgentProxy } from "../../layers/AgentProxy.js"
import { Balances } from "../../services/ledger/Balances.js"
import { History } from "../../services/ledger/History.js"
import { toAccepted, toList, toWithdrawal } from "../../services/withdrawals/View.js"
import { Withdrawals } from "../../services/withdrawals/Withdrawals.js"
import { Api } from "./Api.js"
import { respond } from "./Envelope.js"

export const PaymentsHttpLive = HttpApiBuilder.group(Api, "payments", (handlers) =>
  Effect.gen(function* () {
    const balances = yield* Balances
    const withdrawals = yield* Withdrawals
    const history = yield* History
    return handlers
      .handle("balance", ({ path }) => Effect.map(balances.balance(path.agentId), respond))
      .handle("withdraw", ({ headers, payload }) => Effect.map(withdrawals.request(payload, headers), (w) => respond(toAccepted(w))))
      .handle("withdrawals", ({ path, urlParams }) =>
        Effect.map(withdrawals.list(path.agentId, urlParams.limit ?? 20, urlParams.offset ?? 0), ({ rows, summary }) => respond(toList(rows, summary))))
      .handle("withdrawal", ({ path }) => Effect.map(withdrawals.get(path.id), (w) => respond(toWithdrawal(w))))
      .handle("history", ({ headers, path, urlParams }) =>
        Effect.map(history.history(path.agentId, headers, urlParams.limit ?? 20, urlParams.offset ?? 0), respond))
      .handle("transaction", ({ path }) => Effect.map(balances.transaction(path.txId), respond))
  }))

export const PlatformHttpLive = HttpApiBuilder.group(Api, "platform", (handlers) =>
  Effect.map(AgentProxy, (proxy) => handlers.handle("signingKey", () => Effect.succeed(respond(proxy.signingKey)))))
