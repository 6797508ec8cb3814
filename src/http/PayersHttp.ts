// Handlers of /api/v1/payers.
import { HttpApiBuilder } from "@effect/platform"
import { Effect } from "effect"
import { SpendingLimits } from "../../services/limits/SpendingLimits.js"
import { Credits } from "../../services/remainders/Credits.js"
import { Api } from "./Api.js"
import { respond } from "./Envelope.js"

export const PayersHttpLive = HttpApiBuilder.group(Api, "payers", (handlers) =>
  Effect.map(Effect.all([SpendingLimits, Credits]), ([limits, credits]) =>
    handlers
      .handle("setLimits", ({ path, payload, headers }) => Effect.map(limits.set(path.wallet, payload, headers), respond))
      .handle("getLimits", ({ path, headers }) => Effect.map(limits.get(path.wallet, headers), respond))
      .handle("deleteLimits", ({ path, headers }) => Effect.map(limits.remove(path.wallet, headers), respond))
      .handle("getCredit", ({ path, headers }) => Effect.map(credits.balance(path.wallet, headers), respond))
      .handle("withdrawCredit", ({ path, payload, headers }) => Effect.map(credits.withdraw(path.wallet, payload.amount, headers), respond))))
