// The agents feature's statement for a per-token call answered without usage: notes it on the agent's record (its view
// shows the warning) at most once an hour, and says whether this call noted it (then the owner's webhook is told).
import type { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/** How often a repeated omission is noted again (each note changes the agent's record and sends one webhook). */
export const USAGE_WARNING_EVERY = "1 hour"

export const noteUsageMissing = (sql: SqlClient.SqlClient, agentId: string, capabilityId: string, requestId: string) =>
  Effect.map(
    sql<{ id: string }>`
      UPDATE agents SET usage_warning = jsonb_build_object('capabilityId', ${capabilityId}::text, 'requestId', ${requestId}::text,
          'at', to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))
        WHERE id = ${agentId}::uuid
          AND (usage_warning IS NULL OR (usage_warning->>'at')::timestamptz < now() - ${USAGE_WARNING_EVERY}::interval)
        RETURNING id`,
    (rows) => rows.length > 0
  )

/** A per-token call of that capability reported its usage: the warning about it is lifted (no write when there is none). */
export const clearUsageWarning = (sql: SqlClient.SqlClient, agentId: string, capabilityId: string) =>
  sql`UPDATE agents SET usage_warning = NULL WHERE id = ${agentId}::uuid AND usage_warning->>'capabilityId' = ${capabilityId}::text`
