// Handlers of /api/v1/operator (thin: decode, call services/operator/*, encode) and the bearer-token check guarding them.
import { HttpApiBuilder, HttpServerRequest } from "@effect/platform"
import { Clock, Context, Effect, Layer, Option, Redacted } from "effect"
import { Agents } from "../../services/agents/Agents.js"
import { toResource } from "../../services/agents/View.js"
import { type OperatorIdentity, OperatorLog, tokenFingerprint } from "../../services/operator/Actions.js"
import { Decisions } from "../../services/operator/Decisions.js"
import { Inspection } from "../../services/operator/Inspection.js"
import { Levers } from "../../services/operator/Levers.js"
import { Attention } from "../../services/operator/Attention.js"
import { OperatorStats } from "../../services/operator/Stats.js"
import { OperatorTransactions } from "../../services/operator/Transactions.js"
import { TokenThrottle } from "../../services/operator/TokenThrottle.js"
import { Reconciliation } from "../../services/treasury/Reconciliation.js"
import { ChannelReconciliation } from "../../services/treasury/ChannelReconciliation.js"
import { currentView, storedView } from "../../services/treasury/channelReconciliationView.js"
import { NotFound, RateLimited, Unauthorized, Unavailable } from "../domain/Errors.js"
import { OPERATOR_PAGE_DEFAULT } from "../domain/Operator.js"
import { Api } from "./Api.js"
import { respond } from "./Envelope.js"
import { OperatorAuth } from "./OperatorApi.js"
import { setResponseHeaders } from "./PaymentHeaders.js"

/** The operator bearer token in force (configured, or generated at start in devnet). */
export class OperatorToken extends Context.Tag("OperatorToken")<OperatorToken, Redacted.Redacted<string>>() {}

const refused = new Unauthorized({ code: "OPERATOR_AUTH_REQUIRED", message: "operator endpoints need Authorization: Bearer <OPERATOR_TOKEN>" })

/**
 * The bearer check of every operator endpoint: a presented token goes through the one throttle of operator-token
 * attempts (per client address, shared with the /ops login); a request without one is refused without counting.
 */
export const OperatorAuthLive = Layer.effect(
  OperatorAuth,
  Effect.gen(function* () {
    const token = yield* OperatorToken
    const throttle = yield* TokenThrottle
    return OperatorAuth.of({
      bearer: (credential) =>
        Effect.gen(function* () {
          const offered = Redacted.value(credential)
          if (offered === "") return yield* refused
          const request = yield* HttpServerRequest.HttpServerRequest
          const checked = yield* throttle.check("api", Option.getOrElse(request.remoteAddress, () => "unknown"), offered, token)
          if (checked._tag === "Accepted") return
          if (checked._tag === "Refused") return yield* refused
          yield* setResponseHeaders({ "Retry-After": String(checked.retryAfterSeconds) })
          return yield* new RateLimited({
            code: "OPERATOR_AUTH_THROTTLED",
            message: `too many failed operator-token attempts from your address; try again in ${checked.retryAfterSeconds} seconds`,
            details: { retryAfterSeconds: checked.retryAfterSeconds }
          })
        })
    })
  })
)

const actorNotFound = (kind: string, id: string) => new NotFound({ code: "ACTOR_NOT_FOUND", message: `no ${kind} ${id}` })

export const OperatorHttpLive = HttpApiBuilder.group(Api, "operator", (handlers) =>
  Effect.gen(function* () {
    const agents = yield* Agents
    const reconciliation = yield* Reconciliation
    const channelChecks = yield* ChannelReconciliation
    const inspection = yield* Inspection
    const levers = yield* Levers
    const decisions = yield* Decisions
    const log = yield* OperatorLog
    const stats = yield* OperatorStats
    const attention = yield* Attention
    const transactions = yield* OperatorTransactions
    const fingerprint = tokenFingerprint(yield* OperatorToken)
    const who = (headers: { readonly "x-operator": string }): OperatorIdentity => ({ name: headers["x-operator"], tokenFingerprint: fingerprint })
    const page = (urlParams: { readonly limit?: number | undefined; readonly cursor?: string | undefined }) => ({
      limit: urlParams.limit ?? OPERATOR_PAGE_DEFAULT,
      cursor: urlParams.cursor
    })
    const agentResource = (id: Parameters<typeof agents.loadRecord>[0]) =>
      Effect.flatMap(agents.loadRecord(id), Option.match({
        onNone: () => Effect.fail(new NotFound({ code: "AGENT_NOT_FOUND", message: `agent ${id} not found` })),
        onSome: (agent) => Effect.succeed(respond(toResource(agent)))
      }))
    return handlers
      .handle("setAgentStatus", ({ path, headers, payload }) =>
        Effect.zipRight(levers.setAgentStatus(who(headers), path.id, payload.status, payload.reason), agentResource(path.id)))
      .handle("suspendAgent", ({ path, headers, payload }) => Effect.map(levers.setAgentStatus(who(headers), path.id, "suspended", payload.reason), respond))
      .handle("reinstateAgent", ({ path, headers, payload }) => Effect.map(levers.setAgentStatus(who(headers), path.id, "active", payload.reason), respond))
      .handle("refundFrozen", ({ path, headers, payload }) => Effect.map(levers.refundFrozen(who(headers), path.id, payload.reason), respond))
      .handle("setTrustTier", ({ path, headers, payload }) =>
        Effect.map(decisions.pinTrustTier(who(headers), path.id, payload.tier, payload.reason), (agent) => respond(toResource(agent))))
      .handle("retrySettlement", ({ path, headers, payload }) => Effect.map(levers.retrySettlement(who(headers), path.id, payload.reason), respond))
      .handle("retryRefund", ({ path, headers, payload }) => Effect.map(levers.retryRefund(who(headers), path.id, payload.reason), respond))
      .handle("requeueDelivery", ({ path, headers, payload }) => Effect.map(levers.requeueDelivery(who(headers), path.id, payload.reason), respond))
      .handle("forceCircuit", ({ path, headers, payload }) => Effect.map(levers.forceCircuit(who(headers), path.id, payload.state, payload.reason), respond))
      .handle("machineCounts", () => Effect.map(inspection.overview, respond))
      .handle("listActors", ({ path, urlParams }) => Effect.map(inspection.list(path.kind, { ...page(urlParams), state: urlParams.state }), respond))
      .handle("kindCounts", ({ path }) => Effect.map(inspection.counts(path.kind), respond))
      .handle("actor", ({ path }) =>
        Effect.flatMap(inspection.actor(path.kind, path.id), Option.match({
          onNone: () => Effect.fail(actorNotFound(path.kind, path.id)),
          onSome: (actor) => Effect.succeed(respond(actor))
        })))
      .handle("actorHistory", ({ path, urlParams }) =>
        Effect.flatMap(inspection.history(path.kind, path.id, page(urlParams)), Option.match({
          onNone: () => Effect.fail(actorNotFound(path.kind, path.id)),
          onSome: (history) => Effect.succeed(respond(history))
        })))
      .handle("actions", ({ urlParams }) => Effect.map(log.list({ ...page(urlParams), machine: urlParams.machine, actorId: urlParams.actorId }), respond))
      .handle("attention", () => Effect.map(attention.report, respond))
      .handle("stats", ({ urlParams }) => Effect.map(stats.stats(urlParams.days ?? 30), respond))
      .handle("transactionsByRequester", ({ path, urlParams }) => Effect.map(transactions.list({ requester: path.requester }, page(urlParams)), respond))
      .handle("transactionsByProvider", ({ path, urlParams }) => Effect.map(transactions.list({ provider: path.agentId }, page(urlParams)), respond))
      .handle("treasuryReconciliation", () =>
        Effect.gen(function* () {
          const current = yield* reconciliation.check().pipe(
            Effect.mapError((e) => new Unavailable({ code: "SERVICE_UNAVAILABLE", message: `the chain did not answer: ${e.message}` }))
          )
          const channelsNow = yield* channelChecks.check.pipe(
            Effect.mapError((e) => new Unavailable({ code: "SERVICE_UNAVAILABLE", message: `the chain did not answer: ${e.message}` }))
          )
          const channelsLast = yield* channelChecks.status
          const last = yield* reconciliation.status
          const at = new Date(yield* Clock.currentTimeMillis)
          const now = at.toISOString()
          return respond({
            current: {
              block: current.block.toString(),
              chainBalance: current.chainBalance.toString(),
              ledgerBalance: current.ledgerBalance.toString(),
              drift: current.drift.toString(),
              inFlightIncoming: current.inFlight.incoming.toString(),
              inFlightOutgoing: current.inFlight.outgoing.toString(),
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
            }),
            channels: { current: channelsNow.map((c) => currentView(c, at)), lastChecks: channelsLast.map(storedView) }
          })
        }))
  })).pipe(Layer.provide(OperatorAuthLive))
