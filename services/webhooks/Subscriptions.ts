// Webhook subscriptions, managed by the agent's owner with its wallet signature (single-use for changes, good for its
// 5 minutes on reads): the spec asks for the bare X-Agent-Wallet header, but a wallet address is public
// (docs/decisions/webhooks-and-keys.md). At most 5 per agent.
import { SqlClient } from "@effect/sql"
import { Clock, Effect, Option } from "effect"
import { UrlGuard } from "../../layers/UrlGuard.js"
import { BadRequest, Conflict, NotFound } from "../../src/domain/Errors.js"
import { AgentId, newId } from "../../src/domain/Ids.js"
import { Agents } from "../agents/Agents.js"
import { consumeWalletSignature, verifyWalletSignature, type WalletAuthHeaders } from "../agents/WalletAuth.js"
import { unknownEvents } from "./events.js"
import { type SubscriptionRow, WebhooksRepo } from "./Repo.js"
import { WebhookSecrets } from "./Secrets.js"

export const MAX_SUBSCRIPTIONS_PER_AGENT = 5

const invalid = (path: string, message: string) =>
  new BadRequest({ code: "VALIDATION_ERROR", message: "validation failed", details: { issues: [{ path, message }] } })

export interface SubscriptionChange {
  readonly url?: string | undefined
  readonly events?: ReadonlyArray<string> | undefined
  readonly isActive?: boolean | undefined
}

export class Subscriptions extends Effect.Service<Subscriptions>()("webhooks/Subscriptions", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const repo = yield* WebhooksRepo
    const secrets = yield* WebhookSecrets
    const agents = yield* Agents
    const urlGuard = yield* UrlGuard

    const notFound = (id: string) => new NotFound({ code: "WEBHOOK_NOT_FOUND", message: `no webhook ${id}` })

    /** The owner's proof for `agentId` (its wallet signature, checked; a change consumes it in its transaction). */
    const owner = (agentId: string, auth: WalletAuthHeaders) =>
      Effect.gen(function* () {
        const agent = yield* agents.loadRecord(AgentId.make(agentId))
        if (Option.isNone(agent) || agent.value.status === "pending") {
          return yield* new NotFound({ code: "AGENT_NOT_FOUND", message: `agent ${agentId} not found` })
        }
        return yield* verifyWalletSignature(agent.value, auth)
      })

    /**
     * HTTPS, or http to a loopback host when private URLs are allowed (devnet, tests), and what the address guard can
     * say without a lookup. The lookup itself (`lookUpHost`) waits for the owner's signature.
     */
    const screenUrl = (raw: string) =>
      Effect.gen(function* () {
        const url = URL.canParse(raw) ? new URL(raw) : undefined
        if (url === undefined || (url.protocol !== "https:" && url.protocol !== "http:")) return yield* invalid("url", "must be an https URL")
        if (url.username !== "" || url.password !== "") return yield* invalid("url", "must not carry credentials")
        const loopback = ["localhost", "127.0.0.1", "[::1]"].includes(url.hostname)
        if (url.protocol === "http:" && !(urlGuard.allowPrivateUrls && loopback)) {
          return yield* invalid("url", "must be https (http only to a loopback address when ALLOW_PRIVATE_URLS is on)")
        }
        yield* urlGuard.screen(raw).pipe(Effect.mapError((rejected) => invalid("url", rejected.reason)))
      })

    const lookUpHost = (raw: string) => urlGuard.check(raw).pipe(Effect.mapError((rejected) => invalid("url", rejected.reason)))

    const checkEvents = (events: ReadonlyArray<string>) => {
      const unknown = unknownEvents(events)
      return unknown.length === 0 ? Effect.void : Effect.fail(invalid("events", `unknown events: ${unknown.slice(0, 5).join(", ")}`))
    }

    const create = (input: { readonly agentId: string; readonly url: string; readonly events?: ReadonlyArray<string> | undefined }, auth: WalletAuthHeaders) =>
      Effect.gen(function* () {
        const events = [...new Set(input.events ?? ["*"])]
        yield* checkEvents(events)
        yield* screenUrl(input.url)
        // The signature before any lookup: strangers must not make us resolve names of their choice.
        const proof = yield* owner(input.agentId, auth)
        yield* lookUpHost(input.url)
        const id = newId("wh")
        const secret = secrets.generate()
        const at = new Date(yield* Clock.currentTimeMillis)
        yield* sql.withTransaction(
          Effect.gen(function* () {
            yield* consumeWalletSignature(proof)
            const count = yield* repo.countForAgentLocked(input.agentId)
            if (count >= MAX_SUBSCRIPTIONS_PER_AGENT) {
              return yield* new Conflict({
                code: "WEBHOOK_LIMIT_REACHED",
                message: `an agent may have at most ${MAX_SUBSCRIPTIONS_PER_AGENT} webhooks`,
                details: { limit: MAX_SUBSCRIPTIONS_PER_AGENT }
              })
            }
            yield* repo.insert({ id, agentId: input.agentId, url: input.url, events, secretEncrypted: secrets.encrypt(secret), at })
          })
        )
        return { id, url: input.url, events, secret }
      }).pipe(Effect.catchTag("SqlError", Effect.die), Effect.withSpan("Subscriptions.create"))

    /** A subscription of the signing owner's agent, locked in the change's transaction (404 for anyone else's). */
    const change = <A, E>(id: string, auth: WalletAuthHeaders, f: (row: SubscriptionRow, at: Date) => Effect.Effect<A, E, never>) =>
      Effect.gen(function* () {
        const found = yield* repo.find(id)
        if (Option.isNone(found)) return yield* notFound(id)
        const proof = yield* owner(found.value.agentId, auth)
        const at = new Date(yield* Clock.currentTimeMillis)
        return yield* sql.withTransaction(
          Effect.gen(function* () {
            yield* consumeWalletSignature(proof)
            const row = yield* repo.lock(id)
            if (Option.isNone(row)) return yield* notFound(id)
            return yield* f(row.value, at)
          })
        )
      }).pipe(Effect.catchTag("SqlError", Effect.die))

    /** A read (GET): the signature is checked, not used up (good for its 5 minutes). */
    const list = (agentId: string, auth: WalletAuthHeaders) =>
      Effect.zipRight(owner(agentId, auth), repo.byAgent(agentId)).pipe(Effect.catchTag("SqlError", Effect.die))

    const update = (id: string, patch: SubscriptionChange, auth: WalletAuthHeaders) =>
      Effect.gen(function* () {
        if (patch.events !== undefined) yield* checkEvents(patch.events)
        if (patch.url !== undefined) {
          yield* screenUrl(patch.url)
          // The owner's signature before the lookup (checked again, and used, in the change's transaction).
          const found = yield* repo.find(id)
          if (Option.isNone(found)) return yield* notFound(id)
          yield* owner(found.value.agentId, auth)
          yield* lookUpHost(patch.url)
        }
        const events = patch.events === undefined ? undefined : [...new Set(patch.events)]
        return yield* change(id, auth, (_, at) => Effect.as(repo.update(id, { ...patch, events }, at), { id, updated: true }))
      }).pipe(Effect.catchTag("SqlError", Effect.die))

    const remove = (id: string, auth: WalletAuthHeaders) => change(id, auth, (_, at) => Effect.as(repo.remove(id, at), { deleted: true }))

    const rotate = (id: string, auth: WalletAuthHeaders) =>
      change(id, auth, (_, at) => {
        const secret = secrets.generate()
        return Effect.as(repo.update(id, { secretEncrypted: secrets.encrypt(secret) }, at), { id, secret })
      })

    /** The subscription, for its owner only (signature verified and consumed): the test post and requeue (POSTs). */
    const authorized = (id: string, auth: WalletAuthHeaders) => change(id, auth, (row) => Effect.succeed(row))

    /** The subscription, for its owner only, for a read (GET of deliveries, logs, dead letters): verified, not consumed. */
    const readable = (id: string, auth: WalletAuthHeaders) =>
      Effect.gen(function* () {
        const found = yield* repo.find(id)
        if (Option.isNone(found)) return yield* notFound(id)
        yield* owner(found.value.agentId, auth)
        return found.value
      }).pipe(Effect.catchTag("SqlError", Effect.die))

    return { create, list, update, remove, rotate, authorized, readable } as const
  }),
  dependencies: [WebhooksRepo.Default, WebhookSecrets.Default, Agents.Default, UrlGuard.Default]
}) {}
