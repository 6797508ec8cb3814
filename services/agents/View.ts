// Pure mapping of an agent record to the spec's Agent resource on the wire.
import type { AgentRecord, AgentResource } from "../../src/domain/Agent.js"
import { healthBandOf } from "../../src/domain/Health.js"
import { settlementPolicy } from "../../src/domain/Trust.js"

const usageWarning = (w: { capabilityId: string; requestId: string; at: string }) => ({
  code: "USAGE_NOT_REPORTED" as const,
  ...w,
  message: `${w.capabilityId} is priced per token but answered a paid call without X-Usage-Units: that call charged 0 tokens (the payer paid only the platform fee). Report the tokens used in the response header X-Usage-Units.`
})

export const toResource = (agent: AgentRecord): AgentResource => {
  const policy = settlementPolicy(agent.trustTier)
  return {
    id: agent.id,
    wallet: agent.wallet,
    name: agent.name,
    description: agent.description,
    tags: agent.tags,
    capabilities: agent.capabilities,
    endpoints: agent.endpoints,
    metadata: agent.metadata,
    status: agent.status === "pending" ? "inactive" : agent.status,
    status_set_by: agent.statusSetBy,
    status_reason: agent.status !== "active" && agent.statusSetBy === "operator" ? agent.statusReason : null,
    reputation_score: agent.reputationScore,
    health_score: agent.healthScore,
    health_band: healthBandOf(agent.healthScore),
    health_updated_at: agent.healthUpdatedAt.toISOString(),
    circuitState: agent.circuitState,
    trustTier: agent.trustTier,
    settlementType: policy.settlementType,
    settlementDelay: policy.settlementDelay,
    chain_enabled: agent.chainSettings.chain_enabled,
    chainSettings: agent.chainSettings,
    ...(agent.usageWarning === null ? {} : { warnings: [usageWarning(agent.usageWarning)] }),
    created_at: agent.createdAt.toISOString(),
    updated_at: agent.updatedAt.toISOString()
  }
}
