// Handlers of /api/v1/chains.
import { HttpApiBuilder } from "@effect/platform"
import { Effect } from "effect"
import { Chains } from "../../services/chains/Chains.js"
import { Api } from "./Api.js"
import { respond } from "./Envelope.js"

export const ChainsHttpLive = HttpApiBuilder.group(Api, "chains", (handlers) =>
  Effect.map(Chains, (chains) =>
    handlers
      .handle("budgetCheck", ({ payload }) => Effect.map(chains.budgetCheck(payload), respond))
      .handle("status", ({ path }) => Effect.map(chains.status(path.id), respond))
      .handle("cost", ({ path }) => Effect.map(chains.cost(path.id), respond))))
