// Find anything by an id an operator has in hand: an agent, execution, transaction, escrow, payment, refund, dispute,
// withdrawal, delivery or dead letter, webhook, chain, channel (or its deposit's nonce), treasury transaction, wallet
// address or transaction hash. Every hit names the page that shows it: a machine actor or an agent.
import { SqlClient } from "@effect/sql"
import { Effect, Schema } from "effect"
import { rowsOf } from "../sql/Rows.js"

const Hit = Schema.Struct({
  what: Schema.String,
  /** A machine kind, or "agent". */
  page: Schema.String,
  id: Schema.String,
  detail: Schema.NullOr(Schema.String),
  at: Schema.DateFromSelf
})
export type SearchHit = typeof Hit.Type
const hits = rowsOf(Hit)

const MAX_HITS = 100

export class Search extends Effect.Service<Search>()("operator/Search", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient

    /** Exact matches (case-insensitive for addresses and hashes), newest first. */
    const find = (query: string) =>
      Effect.gen(function* () {
        const q = query.trim()
        if (q === "" || q.length > 128) return []
        const lower = q.toLowerCase()
        const uuid = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/.test(lower) ? lower : null
        return yield* hits(sql`
          SELECT * FROM (
            SELECT 'agent' AS what, 'agent' AS page, a.id::text AS id, format('%s (%s)', a.name, a.status) AS detail, a.created_at AS at
              FROM agents a WHERE a.id::text = ${uuid} OR a.wallet = ${lower} OR a.registration_tx_hash = ${lower} OR a.registration_payment_id = ${q}
            UNION ALL
            SELECT 'execution', 'execution', e.id, format('%s · %s', e.state, e.capability_id), e.created_at
              FROM executions e WHERE e.id = ${q} OR e.transaction_id = ${q} OR e.escrow_id = ${q} OR e.payment_id = ${q}
            UNION ALL
            SELECT 'execution paid by this wallet', 'execution', e.id, format('%s · %s', e.state, e.capability_id), e.created_at
              FROM (SELECT * FROM executions WHERE payer = ${lower} ORDER BY created_at DESC LIMIT 20) e
            UNION ALL
            SELECT 'payment (settlement)', 'settlement', p.id, format('%s · %s · on %s', p.status, p.purpose, p.network), p.created_at
              FROM payments p WHERE p.id = ${q} OR p.tx_hash = ${lower} OR p.subject_id = ${q}
            UNION ALL
            SELECT 'refund', 'execution', coalesce(r.execution_id, r.id), format('refund %s: %s%s', r.id, r.status, coalesce(' · on ' || r.network, '')), r.created_at
              FROM refunds r WHERE r.id = ${q} OR r.tx_hash = ${lower} OR r.to_address = ${lower}
                OR r.treasury_tx_id IN (SELECT x.id FROM treasury_txs x WHERE x.tx_hash = ${lower} OR ${lower} = ANY (x.replaced_hashes))
            UNION ALL
            SELECT 'treasury transaction', 'treasury', t.id, format('%s %s · nonce %s%s', t.purpose, t.state, t.nonce, CASE WHEN t.network = '' THEN '' ELSE ' on ' || t.network END), t.created_at
              FROM treasury_txs t WHERE t.id = ${q} OR t.tx_hash = ${lower} OR t.subject_id = ${q} OR ${lower} = ANY (t.replaced_hashes)
            UNION ALL
            SELECT 'dispute', 'dispute', d.id, format('%s · %s', d.status, d.reason), d.created_at
              FROM disputes d WHERE d.id = ${q} OR d.transaction_id = ${q} OR d.execution_id = ${q} OR d.client_wallet = ${lower}
            UNION ALL
            SELECT 'withdrawal', 'withdrawal', w.id, w.status, w.created_at
              FROM withdrawals w WHERE w.id = ${q} OR w.tx_hash = ${lower} OR w.destination_wallet = ${lower}
                OR w.treasury_tx_id IN (SELECT x.id FROM treasury_txs x WHERE x.tx_hash = ${lower} OR ${lower} = ANY (x.replaced_hashes))
            UNION ALL
            SELECT 'webhook delivery', 'webhookDelivery', d.id, format('%s · %s', d.status, d.event_type), d.created_at
              FROM webhook_deliveries d WHERE d.id = ${q} OR d.event_id = ${q}
                OR d.id = (SELECT l.delivery_id FROM webhook_dead_letters l WHERE l.id = ${q})
            UNION ALL
            SELECT 'webhook subscription', 'agent', s.agent_id::text, format('webhook %s to %s (%s)', s.id, s.url, CASE WHEN s.is_active THEN 'active' ELSE 'switched off' END), s.created_at
              FROM webhook_subscriptions s WHERE s.id = ${q}
            UNION ALL
            SELECT 'chain', 'chain', c.id::text, c.status, c.started_at
              FROM chains c WHERE c.id::text = ${uuid} OR c.root_execution_id = ${q} OR c.payment_id = ${q}
            UNION ALL
            SELECT 'channel', 'channel', ch.id, format('%s · balance %s · charged %s · on %s', ch.status, ch.balance, ch.charged_cumulative, ch.network), ch.created_at
              FROM channels ch WHERE ch.id = ${lower} OR ch.payer = ${lower}
                OR ch.id IN (SELECT cd.channel_id FROM channel_deposits cd WHERE cd.nonce = ${lower})
          ) hits ORDER BY at DESC LIMIT ${MAX_HITS}`).pipe(Effect.orDie)
      }).pipe(Effect.withSpan("Search.find"))

    return { find } as const
  })
}) {}
