// Operator decisions that are not machine levers, recorded like them (operator_actions, same transaction): pinning an
// agent's trust tier, and resolving a dispute (its RESOLVE event goes through the dispute's machine; the record names it).
import { SqlClient } from "@effect/sql"
import { Clock, Effect, Either } from "effect"
import type { TrustTier } from "../../src/domain/Agent.js"
import type { Resolution } from "../../src/domain/Dispute.js"
import { NotFound } from "../../src/domain/Errors.js"
import type { AgentId } from "../../src/domain/Ids.js"
import { AgentCache } from "../agents/AgentCache.js"
import { Agents } from "../agents/Agents.js"
import { Disputes } from "../disputes/Disputes.js"
import { type OperatorIdentity, OperatorLog } from "./Actions.js"

type ResolutionType = typeof Resolution.Type

export class Decisions extends Effect.Service<Decisions>()("operator/Decisions", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const log = yield* OperatorLog
    const agents = yield* Agents
    const cache = yield* AgentCache
    const disputes = yield* Disputes

    /**
     * Pins an agent's trust tier (null: back to the tier it earns). Always applied (pinning the pinned tier again changes
     * nothing but is still a decision on record); from/to are the agent's tier in force before and after.
     */
    const pinTrustTier = (who: OperatorIdentity, agentId: AgentId, tier: TrustTier | null, reason: string) =>
      Effect.gen(function* () {
        const at = yield* Clock.currentTimeMillis
        const agent = yield* sql.withTransaction(
          Effect.gen(function* () {
            const [before] = yield* sql<{ trustTier: string; trustTierOverride: string | null }>`
              SELECT trust_tier, trust_tier_override FROM agents WHERE id = ${agentId} AND status <> 'pending' FOR UPDATE`
            if (before === undefined) return yield* new NotFound({ code: "AGENT_NOT_FOUND", message: `agent ${agentId} not found` })
            const pinned = yield* agents.setTrustTier(agentId, tier)
            yield* log.record(who, {
              action: tier === null ? "unpin_trust_tier" : "pin_trust_tier",
              machine: "agent",
              actorId: agentId,
              reason,
              outcome: "applied",
              from: before.trustTier,
              to: pinned.trustTier,
              transitionId: null,
              details: { pinned: tier, previousPin: before.trustTierOverride },
              at
            })
            return pinned
          })
        ).pipe(Effect.catchTag("SqlError", Effect.die))
        // Again after the commit: a reader between the service's invalidation and the commit may have cached the old tier.
        yield* cache.invalidate(agentId)
        return agent
      }).pipe(Effect.withSpan("Decisions.pinTrustTier"))

    /**
     * Resolves a dispute and records who decided and why (the notes, or the resolution when none are given). A dispute
     * already closed is a refusal on record (409 DISPUTE_CLOSED, as before); an invalid split or an unknown dispute is not
     * an action and is not recorded. The dispute's public `resolved_by` stays "operator": the name is for the audit only.
     */
    const resolveDispute = (
      who: OperatorIdentity,
      disputeId: string,
      decision: { readonly resolution: ResolutionType; readonly notes: string; readonly clientShareBps?: number | undefined }
    ) =>
      Effect.gen(function* () {
        const at = yield* Clock.currentTimeMillis
        const reason = decision.notes.trim() === "" ? decision.resolution : decision.notes.trim().slice(0, 1000)
        const outcome = yield* sql.withTransaction(
          Effect.gen(function* () {
            const [before] = yield* sql<{ status: string }>`SELECT status FROM disputes WHERE id = ${disputeId} FOR UPDATE`
            const result = yield* Effect.either(disputes.resolve(disputeId, decision.resolution, decision.notes, decision.clientShareBps, "operator"))
            const recorded = before !== undefined && (Either.isRight(result) || result.left._tag === "Conflict")
            if (recorded) {
              const applied = Either.isRight(result)
              yield* log.record(who, {
                action: "resolve_dispute",
                machine: "dispute",
                actorId: disputeId,
                reason,
                outcome: applied ? "applied" : "refused",
                from: before.status,
                to: applied ? result.right.status : null,
                transitionId: applied ? yield* log.lastTransition("dispute", disputeId) : null,
                details: { resolution: decision.resolution, ...(decision.clientShareBps === undefined ? {} : { clientShareBps: decision.clientShareBps }) },
                at
              })
            }
            return result
          })
        ).pipe(Effect.catchTag("SqlError", Effect.die))
        return yield* outcome
      }).pipe(Effect.withSpan("Decisions.resolveDispute"))

    return { pinTrustTier, resolveDispute } as const
  }),
  dependencies: [OperatorLog.Default, Agents.Default, AgentCache.Default, Disputes.Default]
}) {}
