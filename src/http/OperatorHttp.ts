// Handlers of /api/v1/operator and the bearer-token check guarding them.
import { HttpApiBuilder } from "@effect/platform"
import { Clock, Context, Effect, Layer, Option, Redacted } from "effect"
import { timingSafeEqual } from "node:crypto"
import { Agents } from "../../services/agents/Agents.js"
import { toResource } from "../../services/agents/View.js"
import { Reconciliation } from "../../services/treasury/Reconciliation.js"
import { Unauthorized, Unavailable } from "../domain/Errors.js"
import { Api } from "./Api.js"
import { respond } from "./Envelope.js"
import { OperatorAuth } from "./OperatorApi.js"

/** The operator bearer token in force (configured, or generated at start in devnet). */
export class OperatorToken extends Context.Tag("OperatorToken")<OperatorToken, Redacted.Redacted<string>>() {}

const sameSecret = (a: string, b: string) => {
  const x = Buffer.from(a)
  const y = Buffer.from(b)
  return x.length === y.length && timingSafeEqual(x, y)
}

export const OperatorAuthLive = Layer.effect(
  OperatorAuth,
  Effect.map(OperatorToken, (token) =>
    OperatorAuth.of({
      bearer: (credential) =>
        sameSecret(Redacted.value(credential), Redacted.value(token))
          ? Effect.void
          : Effect.fail(
            new Unauthorized({ code: "OPERATOR_AUTH_REQUIRED", message: "operator endpoints need Authorization: Bearer <OPERATOR_TOKEN>" })
          )
    }))
)

export const OperatorHttpLive = HttpApiBuilder.group(Api, "operator", (handlers) =>
  Effect.gen(function* () {
    const agents = yield* Agents
    const reconciliation = yield* Reconciliation
    return handlers
      .handle("setAgentStatus", ({ path, payload }) =>
        Effect.map(agents.setStatus(path.id, payload.status, payload.reason), (agent) => respond(toResource(agent))))
      .handle("setTrustTier", ({ path, payload }) =>
        Effect.map(agents.setTrustTier(path.id, payload.tier), (agent) => respond(toResource(agent))))
      .handle("treasuryReconciliation", () =>
        Effect.gen(function* () {
          const current = yield* reconciliation.check().pipe(
            Effect.mapError((e) => new Unavailable({ code: "SERVICE_UNAVAILABLE", message: `the chain did not answer: ${e.message}` }))
          )
          const last = yield* reconciliation.status
          const now = new Date(yield* Clock.currentTimeMillis).toISOString()
          return respond({
            current: {
              block: current.block.toString(),
              chainBalance: current.chainBalance.toString(),
              ledgerBalance: current.ledgerBalance.toString(),
              drift: current.drift.toString(),
              checkedAt: now
            },
            lastCheck: Option.match(last, {
              onNone: () => null,
              onSome: (l) => ({
                block: l.blockNumber.toString(),
                chainBalance: l.chainBalance.toString(),
                ledgerBalance: l.ledgerBalance.toString(),
                drift: l.drift.toString(),
                checkedAt: l.checkedAt.toISOString(),
                confirmed: l.confirmed
              })
            })
          })
        }))
  })).pipe(Layer.provide(OperatorAuthLive))
