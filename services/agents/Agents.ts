// The agent registry: the checks a registration runs before payment (Registration.ts), reads through the cache, owner updates and deactivation, operator status changes.
import { SqlClient, type SqlError } from "@effect/sql"
import { Clock, Effect, Option, Schema } from "effect"
import { UrlGuard, type UrlRejected } from "../../layers/UrlGuard.js"
import {
  AgentRecord,
  Capability,
  type Endpoints,
  type RegisterAgentRequest,
  type TrustTier,
  type UpdateAgentRequest
} from "../../src/domain/Agent.js"
import { BadRequest, Conflict, Forbidden, NotFound } from "../../src/domain/Errors.js"
import type { AgentId } from "../../src/domain/Ids.js"
import { unstorableStrings } from "../../src/domain/Json.js"
import { earnedTier } from "../../src/domain/Trust.js"
import { AgentCache } from "./AgentCache.js"
import { JsonSchemas, type SchemaIssue } from "./JsonSchemas.js"
import { Accounts, Ledger } from "../ledger/Ledger.js"
import { Outbox } from "../outbox/Outbox.js"
import { consumeWalletSignature, verifyWalletSignature, type WalletAuthHeaders } from "./WalletAuth.js"
import { withSpan } from "../../layers/observability/span.js"

const encodeCapabilities = Schema.encodeSync(Schema.Array(Capability))
const decodeRecord = Schema.decodeUnknown(AgentRecord)

const validationError = (issues: ReadonlyArray<SchemaIssue>) =>
  new BadRequest({ code: "VALIDATION_ERROR", message: "the request failed validation", details: { issues } })

/** The endpoints' URLs against one of the URL guard's checks, as validation issues at `endpoints.execution`/`.health`. */
const endpointIssues = <R>(endpoints: Endpoints | undefined, check: (url: string) => Effect.Effect<void, UrlRejected, R>) =>
  Effect.map(
    Effect.forEach(["execution", "health"] as const, (key) => {
      const url = endpoints?.[key]
      return url === undefined
        ? Effect.succeed(Option.none<SchemaIssue>())
        : Effect.map(Effect.flip(check(url)).pipe(Effect.option), Option.map((rejected): SchemaIssue => ({ path: `endpoints.${key}`, message: rejected.reason })))
    }),
    Option.reduceCompact<ReadonlyArray<SchemaIssue>, SchemaIssue>([], (all, issue) => [...all, issue])
  )

const notFound = (id: string) => new NotFound({ code: "AGENT_NOT_FOUND", message: `agent ${id} not found`, details: { agentId: id } })


export class Agents extends Effect.Service<Agents>()("Agents", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const schemas = yield* JsonSchemas
    const urlGuard = yield* UrlGuard
    const ledger = yield* Ledger
    const outbox = yield* Outbox
    const cache = yield* AgentCache

    const loadRecord = (id: AgentId, lock = false) =>
      (lock ? sql`SELECT * FROM agents WHERE id = ${id} FOR UPDATE` : sql`SELECT * FROM agents WHERE id = ${id}`).pipe(
        Effect.flatMap((rows) => (rows[0] === undefined ? Effect.succeed(Option.none()) : Effect.map(decodeRecord(rows[0]), Option.some))),
        Effect.orDie
      )

    /** Checks that cannot be expressed in the request schema: capability JSON Schemas and the URL policy. */
    const validateSemantics = (input: {
      readonly capabilities?: ReadonlyArray<Capability> | undefined
      readonly endpoints?: Endpoints | undefined
    }) =>
      Effect.gen(function* () {
        const issues: Array<SchemaIssue> = unstorableStrings(input, "")
        if (issues.length > 0) return yield* validationError(issues)
        const capabilitySchemas = (input.capabilities ?? []).flatMap((capability, i) =>
          (["inputSchema", "outputSchema"] as const).flatMap((key) => {
            const schema = capability[key]
            return schema === undefined ? [] : [{ schema, path: `capabilities.${i}.${key}` }]
          }))
        for (const issue of schemas.checkSchemas(capabilitySchemas)) {
          issues.push({ path: issue.path, message: `not a valid JSON Schema: ${issue.message}` })
        }
        issues.push(...yield* endpointIssues(input.endpoints, urlGuard.screen))
        if (issues.length > 0) return yield* validationError(issues)
      })

    /**
     * The URL policy's lookup of the endpoints' hosts: only once the caller has proved something (the registration's
     * payment, the owner's signature), so that strangers cannot make us resolve names of their choice.
     */
    const checkEndpointHosts = (endpoints: Endpoints | undefined) =>
      Effect.flatMap(endpointIssues(endpoints, urlGuard.check), (issues) => (issues.length > 0 ? validationError(issues) : Effect.void))

    const walletTaken = (wallet: string) =>
      sql<{ id: string; status: string }>`SELECT id, status FROM agents WHERE wallet = ${wallet}`.pipe(
        Effect.orDie,
        Effect.flatMap((rows) => {
          const row = rows[0]
          if (row === undefined) return Effect.void
          return Effect.fail(
            new Conflict({
              code: "WALLET_ALREADY_REGISTERED",
              message: row.status === "pending"
                ? "a registration for this wallet is being settled"
                : "this wallet already has an agent (one agent per wallet); nothing was charged",
              details: { wallet, ...(row.status === "pending" ? {} : { agentId: row.id }) }
            })
          )
        })
      )


    /** An active, inactive or suspended agent (a pending registration is invisible), via the read cache. */
    const get = (id: AgentId) =>
      Effect.gen(function* () {
        const cached = yield* cache.get(id)
        if (cached !== undefined) return { agent: cached, meta: { cached: true, cacheSource: "memory" as const } }
        const since = yield* cache.mark
        const record = yield* loadRecord(id)
        if (Option.isNone(record) || record.value.status === "pending") return yield* notFound(id)
        yield* cache.set(id, record.value, since)
        return { agent: record.value, meta: { cached: false, cacheSource: "database" as const } }
      }).pipe(withSpan("Agents.get"))

    /**
     * Loads the agent for its owner, proving the wallet signature; suspended agents are frozen for owners. `use`: inside
     * the change's transaction, the signature is used up (single-use); without it, only checked.
     */
    const authorizeOwner = (id: AgentId, auth: WalletAuthHeaders, use = true) =>
      Effect.gen(function* () {
        const record = yield* loadRecord(id, use)
        if (Option.isNone(record) || record.value.status === "pending") return yield* notFound(id)
        const proof = yield* verifyWalletSignature(record.value, auth)
        if (use) yield* consumeWalletSignature(proof)
        if (record.value.status === "suspended") {
          return yield* new Forbidden({
            code: "AGENT_SUSPENDED",
            message: "the agent is suspended by the platform and cannot be changed by its owner",
            details: { reason: record.value.statusReason }
          })
        }
        return record.value
      })

    const update = (id: AgentId, auth: WalletAuthHeaders, patch: UpdateAgentRequest) =>
      Effect.gen(function* () {
        // Authenticate first: strangers must not make us resolve hostnames of their choice.
        yield* authorizeOwner(id, auth, false)
        yield* validateSemantics(patch)
        yield* checkEndpointHosts(patch.endpoints)
        const updated = yield* sql.withTransaction(
          Effect.gen(function* () {
            const current = yield* authorizeOwner(id, auth)
            // An operator's pause is the operator's to lift; the owner may still edit everything else.
            const pausedByOperator = current.status === "inactive" && current.statusSetBy === "operator"
            if (pausedByOperator && patch.status === "active") {
              const message = "an operator paused this agent; only an operator can make it active again"
              return yield* new Forbidden({ code: "AGENT_PAUSED_BY_OPERATOR", message, details: { setBy: "operator", reason: current.statusReason } })
            }
            const statusChange = patch.status === undefined || pausedByOperator ? {} : { status: patch.status, statusReason: null, statusSetBy: "owner" }
            const chainSettings = { ...current.chainSettings, ...(patch.chainSettings ?? {}) }
            const set = {
              ...(patch.name === undefined ? {} : { name: patch.name }),
              ...(patch.description === undefined ? {} : { description: patch.description }),
              ...(patch.tags === undefined ? {} : { tags: JSON.stringify([...new Set(patch.tags)]) }),
              ...(patch.capabilities === undefined ? {} : { capabilities: JSON.stringify(encodeCapabilities(patch.capabilities)) }),
              ...(patch.endpoints === undefined ? {} : { endpoints: JSON.stringify(patch.endpoints) }),
              ...(patch.metadata === undefined ? {} : { metadata: JSON.stringify(patch.metadata) }),
              ...statusChange,
              chainSettings: JSON.stringify(chainSettings),
              updatedAt: new Date()
            }
            const rows = yield* sql`UPDATE agents SET ${sql.update(set)} WHERE id = ${id} RETURNING *`
            const record = yield* Effect.orDie(decodeRecord(rows[0]))
            yield* outbox.emit("agent.updated", id, { agentId: id, fields: Object.keys(patch) })
            return record
          })
        ).pipe(Effect.catchTag("SqlError", Effect.die))
        yield* cache.invalidate(id)
        return updated
      }).pipe(withSpan("Agents.update"))

    const deactivate = (id: AgentId, auth: WalletAuthHeaders) =>
      Effect.gen(function* () {
        yield* sql.withTransaction(
          Effect.gen(function* () {
            yield* authorizeOwner(id, auth)
            // Already inactive (an operator's pause included): the pause, its author and reason stay as they are.
            yield* sql`UPDATE agents SET status = 'inactive', status_reason = NULL, status_set_by = 'owner', updated_at = now()
                       WHERE id = ${id} AND status <> 'inactive'`
            yield* outbox.emit("agent.deactivated", id, { agentId: id })
          })
        ).pipe(Effect.catchTag("SqlError", Effect.die))
        yield* cache.invalidate(id)
        return { id, status: "inactive" as const }
      }).pipe(withSpan("Agents.deactivate"))

    const checkWallet = (wallet: string) =>
      sql<{ id: string }>`SELECT id FROM agents WHERE wallet = ${wallet} AND status <> 'pending'`.pipe(
        Effect.orDie,
        Effect.map((rows) => (rows[0] === undefined ? { exists: false } : { exists: true, agentId: rows[0].id }))
      )

    /**
     * Operator: suspend, reinstate or pause an agent, with a reason kept on the agent, inside the caller's transaction
     * (the caller invalidates the cache once it committed). `previous` is the status it had (none: no such agent).
     */
    const setStatusIn = (id: AgentId, status: "active" | "inactive" | "suspended", reason: string | undefined) =>
      Effect.gen(function* () {
        const [current] = yield* sql<{ status: string }>`SELECT status FROM agents WHERE id = ${id} AND status <> 'pending' FOR UPDATE`
        if (current === undefined) return Option.none()
        const rows = yield* sql`UPDATE agents SET status = ${status}, status_reason = ${reason ?? null}, status_set_by = 'operator', updated_at = now()
                                WHERE id = ${id} RETURNING *`
        yield* outbox.emit("agent.status_changed", id, { agentId: id, status, reason: reason ?? null })
        return Option.some({ previous: current.status, agent: yield* Effect.orDie(decodeRecord(rows[0])) })
      })

    /** Operator: the same in its own transaction. */
    const setStatus = (id: AgentId, status: "active" | "inactive" | "suspended", reason: string | undefined) =>
      Effect.gen(function* () {
        const changed = yield* sql.withTransaction(setStatusIn(id, status, reason)).pipe(Effect.orDie)
        if (Option.isNone(changed)) return yield* notFound(id)
        yield* cache.invalidate(id)
        return changed.value.agent
      })

    /** Operator: pin a trust tier (null returns the agent to the tier it earns). */
    const setTrustTier = (id: AgentId, tier: TrustTier | null) =>
      Effect.gen(function* () {
        const current = yield* loadRecord(id)
        if (Option.isNone(current) || current.value.status === "pending") return yield* notFound(id)
        const effective = earnedTier({ ...current.value, trustTierOverride: tier }, yield* Clock.currentTimeMillis)
        const rows = yield* sql`UPDATE agents SET trust_tier_override = ${tier}, trust_tier = ${effective}, updated_at = now()
                                WHERE id = ${id} RETURNING *`.pipe(Effect.orDie)
        if (rows[0] === undefined) return yield* notFound(id)
        yield* cache.invalidate(id)
        return yield* Effect.orDie(decodeRecord(rows[0]))
      })

    return { validateSemantics, walletTaken, checkEndpointHosts, get, update, deactivate, checkWallet, setStatus, setStatusIn, setTrustTier, loadRecord } as const
  }),
  dependencies: [JsonSchemas.Default, UrlGuard.Default, Ledger.Default, Outbox.Default, AgentCache.Default]
}) {}
