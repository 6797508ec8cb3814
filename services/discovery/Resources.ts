// The marketplace as an x402 discovery catalogue (the facilitator `/discovery/resources` list, x402 v2 bazaar format):
// one resource per capability of every active agent, with its price as v2 payment requirements and its bazaar
// extension (how to call it: `POST /api/v1/execute`, the input and output schemas) in `metadata`.
import { SqlClient, SqlSchema } from "@effect/sql"
import { Effect, Schema } from "effect"
import { AppConfig } from "../../layers/Config.js"
import { BAZAAR } from "../../layers/x402/bazaar.js"
import { requirementsV2 } from "../../layers/x402/v2.js"
import { Capability } from "../../src/domain/Agent.js"
import { quoteOf } from "../../src/domain/Pricing.js"
import { Paywall } from "../payments/Paywall.js"
import { capabilityDiscovery } from "./bazaar.js"

const Row = Schema.Struct({
  agentId: Schema.String,
  name: Schema.String,
  description: Schema.NullOr(Schema.String),
  tags: Schema.Array(Schema.String),
  updatedAt: Schema.DateFromSelf,
  capability: Capability
})

export interface ResourcesQuery {
  readonly type?: string | undefined
  readonly limit?: number | undefined
  readonly offset?: number | undefined
}

export const RESOURCES_DEFAULT_LIMIT = 20

export class DiscoveryResources extends Effect.Service<DiscoveryResources>()("discovery/DiscoveryResources", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const paywall = yield* Paywall
    const { publicBaseUrl } = yield* AppConfig

    const page = SqlSchema.findAll({
      Request: Schema.Struct({ limit: Schema.Number, offset: Schema.Number }),
      Result: Row,
      execute: ({ limit, offset }) => sql`
        SELECT a.id::text AS agent_id, a.name, a.description, a.tags, a.updated_at, c.value AS capability
          FROM agents a CROSS JOIN LATERAL jsonb_array_elements(a.capabilities) WITH ORDINALITY AS c(value, n)
         WHERE a.status = 'active'
         ORDER BY a.created_at, a.id, c.n
         LIMIT ${limit} OFFSET ${offset}`
    })
    const total = sql<{ total: number }>`
      SELECT count(*)::int AS total FROM agents a CROSS JOIN LATERAL jsonb_array_elements(a.capabilities) c WHERE a.status = 'active'`

    /** One page of the catalogue; a `type` other than "http" (the only kind we serve) lists nothing. */
    const list = (query: ResourcesQuery) =>
      Effect.gen(function* () {
        const limit = query.limit ?? RESOURCES_DEFAULT_LIMIT
        const offset = query.offset ?? 0
        if (query.type !== undefined && query.type !== "http") return { x402Version: 2 as const, items: [], pagination: { limit, offset, total: 0 } }
        const [rows, [count]] = yield* Effect.all([page({ limit, offset }), total], { concurrency: 2 })
        const items = rows.map((row) => {
          const resource = `${publicBaseUrl}/api/v1/execute?targetAgentId=${row.agentId}&capabilityId=${encodeURIComponent(row.capability.id)}`
          const priced = paywall.price({
            // A metered capability's payment authorises its maximum (src/domain/Pricing.ts), as POST /execute asks.
            amount: quoteOf(row.capability).price,
            resource,
            description: `${row.name}: ${row.capability.name}`
          })
          return {
            resource,
            type: "http" as const,
            x402Version: 2 as const,
            accepts: priced.accepts.map((a) => requirementsV2(a, paywall.caip2For(a.network))),
            lastUpdated: row.updatedAt.toISOString(),
            metadata: {
              agentId: row.agentId,
              agentName: row.name,
              description: row.capability.description,
              agentDescription: row.description,
              capabilityId: row.capability.id,
              tags: row.tags,
              [BAZAAR]: capabilityDiscovery(row.agentId, row.capability)
            }
          }
        })
        return { x402Version: 2 as const, items, pagination: { limit, offset, total: count?.total ?? 0 } }
      }).pipe(Effect.catchTags({ SqlError: Effect.die, ParseError: Effect.die }), Effect.withSpan("DiscoveryResources.list"))

    return { list } as const
  }),
  dependencies: [Paywall.Default]
}) {}
