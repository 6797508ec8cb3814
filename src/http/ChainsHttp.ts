// Handlers of /api/v1/chains.
import { HttpApiBuilder } from "@effect/platform"
import { Effect } from "effect"
import { Chains } from "../../services/chains/Chains.js"
import { budgetCheck } from "../../services/flows/budgetCheck.js"
import { Api } from "./Api.js"
import { respond } from "./Envelope.js"

export const ChainsHttpLive = HttpApiBuilder.group(Api, "chains", (handlers) =>
  Effect.map(Effect.all([Chains, budgetCheck]), ([chains, check]) =>
    handlers
      .handle("budgetCheck", ({ payload }) => Effect.map(check(payload), respond))
      .handle("status", ({ path }) => Effect.map(chains.status(path.id), respond))
      .handle("cost", ({ path }) => Effect.map(chains.cost(path.id), respond))))
