// A payer wallet's spending limits: set, read and removed with the wallet's signature (authorization.ts); enforced
// inside every paid call's reservation statement (statements.ts, the SQL function of migrations/0029).
import { SqlClient, type SqlError } from "@effect/sql"
import { Clock, Effect, Option, Schema } from "effect"
import { Chain } from "../../layers/Chain.js"
import { NotFound, Unauthorized } from "../../src/domain/Errors.js"
import type { LimitsView, SetLimitsRequest } from "../../src/domain/Limits.js"
import { formatUsdc } from "../../src/domain/Money.js"
import { payoutDomain } from "../withdrawals/PayoutAuthorization.js"
import { type PayerHeaders, verifyPayerSignature } from "./authorization.js"
import { utcDay } from "./statements.js"

const LimitsRow = Schema.Struct({
  payer: Schema.String,
  perCallMax: Schema.NullOr(Schema.BigInt),
  perDayMax: Schema.NullOr(Schema.BigInt),
  perAgentPerDayMax: Schema.NullOr(Schema.BigInt),
  allowedAgents: Schema.NullOr(Schema.Array(Schema.String)),
  signedAtMs: Schema.BigInt
})
type LimitsRow = typeof LimitsRow.Type
const decodeLimits = Schema.decodeUnknown(Schema.Array(LimitsRow))
const decodeSpent = Schema.decodeUnknown(Schema.Array(Schema.Struct({ agentId: Schema.String, spent: Schema.BigInt })))

const hasLimits = (row: LimitsRow) =>
  row.perCallMax !== null || row.perDayMax !== null || row.perAgentPerDayMax !== null || row.allowedAgents !== null

const stale = (signedAt: number) =>
  new Unauthorized({
    code: "AUTH_SIGNATURE_REUSED",
    message: "a change to spending limits must be signed later than the last change (X-Payer-Signed-At); sign a fresh timestamp",
    details: { signedAt }
  })

export class SpendingLimits extends Effect.Service<SpendingLimits>()("limits/SpendingLimits", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const chain = yield* Chain
    const domain = payoutDomain(chain.chainId, chain.treasury)
    const rows = (effect: Effect.Effect<ReadonlyArray<unknown>, SqlError.SqlError>) => Effect.flatMap(Effect.orDie(effect), (r) => Effect.orDie(decodeLimits(r)))

    const view = (row: LimitsRow): Effect.Effect<LimitsView> =>
      Effect.gen(function* () {
        const day = utcDay(yield* Clock.currentTimeMillis)
        const spent = yield* Effect.flatMap(
          Effect.orDie(sql`SELECT agent_id, spent FROM payer_spending WHERE payer = ${row.payer} AND day = ${day}::date`),
          (r) => Effect.orDie(decodeSpent(r))
        )
        return {
          wallet: row.payer,
          perCallMax: row.perCallMax === null ? null : formatUsdc(row.perCallMax),
          perDayMax: row.perDayMax === null ? null : formatUsdc(row.perDayMax),
          perAgentPerDayMax: row.perAgentPerDayMax === null ? null : formatUsdc(row.perAgentPerDayMax),
          allowedAgents: row.allowedAgents,
          day,
          spentToday: formatUsdc(spent.find((s) => s.agentId === "")?.spent ?? 0n),
          spentTodayByAgent: Object.fromEntries(spent.filter((s) => s.agentId !== "").map((s) => [s.agentId, formatUsdc(s.spent)])),
          signedAt: Number(row.signedAtMs)
        }
      })

    const notFound = (wallet: string) =>
      new NotFound({ code: "SPENDING_LIMITS_NOT_FOUND", message: `the wallet ${wallet} has no spending limits`, details: { wallet } })

    /** Replaces the payer's limits (what is left out: no limit), if signed later than the last change. */
    const set = (wallet: string, body: SetLimitsRequest, headers: PayerHeaders) =>
      Effect.gen(function* () {
        const { signedAt } = yield* verifyPayerSignature(domain, "set", wallet, body, headers)
        const payer = wallet.toLowerCase()
        const allowed = body.allowedAgents === undefined ? null : [...new Set(body.allowedAgents.map((a: string) => a.toLowerCase()))]
        const saved = yield* rows(sql`
          INSERT INTO payer_limits (payer, per_call_max, per_day_max, per_agent_per_day_max, allowed_agents, signed_at_ms)
          VALUES (${payer}, ${body.perCallMax?.toString() ?? null}, ${body.perDayMax?.toString() ?? null},
                  ${body.perAgentPerDayMax?.toString() ?? null}, ${allowed}::text[], ${signedAt})
          ON CONFLICT (payer) DO UPDATE SET per_call_max = EXCLUDED.per_call_max, per_day_max = EXCLUDED.per_day_max,
            per_agent_per_day_max = EXCLUDED.per_agent_per_day_max, allowed_agents = EXCLUDED.allowed_agents,
            signed_at_ms = EXCLUDED.signed_at_ms, updated_at = now()
          WHERE payer_limits.signed_at_ms < EXCLUDED.signed_at_ms
          RETURNING *`)
        const row = saved[0]
        if (row === undefined) return yield* stale(signedAt)
        return yield* view(row)
      }).pipe(Effect.withSpan("SpendingLimits.set"))

    /** The payer's limits and what it spent today. */
    const get = (wallet: string, headers: PayerHeaders) =>
      Effect.gen(function* () {
        yield* verifyPayerSignature(domain, "read", wallet, undefined, headers)
        const found = Option.fromNullable((yield* rows(sql`SELECT * FROM payer_limits WHERE payer = ${wallet.toLowerCase()}`))[0])
        if (Option.isNone(found) || !hasLimits(found.value)) return yield* notFound(wallet)
        return yield* view(found.value)
      }).pipe(Effect.withSpan("SpendingLimits.get"))

    /** Removes every limit; the row keeps the signed timestamp so no older signed change can be replayed. */
    const remove = (wallet: string, headers: PayerHeaders) =>
      Effect.gen(function* () {
        const { signedAt } = yield* verifyPayerSignature(domain, "delete", wallet, undefined, headers)
        const payer = wallet.toLowerCase()
        const found = (yield* rows(sql`SELECT * FROM payer_limits WHERE payer = ${payer}`))[0]
        if (found === undefined || !hasLimits(found)) return yield* notFound(wallet)
        const cleared = yield* rows(sql`
          UPDATE payer_limits SET per_call_max = NULL, per_day_max = NULL, per_agent_per_day_max = NULL, allowed_agents = NULL,
            signed_at_ms = ${signedAt}, updated_at = now()
          WHERE payer = ${payer} AND signed_at_ms < ${signedAt} RETURNING *`)
        if (cleared.length === 0) return yield* stale(signedAt)
        return { wallet: payer, removed: true as const, signedAt }
      }).pipe(Effect.withSpan("SpendingLimits.remove"))

    return { set, get, remove, domain } as const
  })
}) {}
