// Pure mappings of discovered agents to the wire: /discover's agent, /discover/search's agent with composite_score, and
// /discover/recommend's agent with matchScore.
import type { DiscoveredAgent, RecommendedAgent, SearchedAgent } from "../../src/domain/Discovery.js"
import { healthBandOf } from "../../src/domain/Health.js"
import { settlementPolicy } from "../../src/domain/Trust.js"
import { roundScore } from "./Ranking.js"
import type { DiscoveredRow } from "./Repo.js"

export const forDiscover = (row: DiscoveredRow): DiscoveredAgent => {
  const policy = settlementPolicy(row.trustTier)
  return {
    id: row.id,
    name: row.name,
    description: row.description,
    capabilities: row.capabilities,
    tags: row.tags,
    health_score: row.healthScore,
    health_band: healthBandOf(row.healthScore),
    reputation_score: row.reputationScore,
    trustTier: row.trustTier,
    settlementType: policy.settlementType,
    settlementDelay: policy.settlementDelay
  }
}

export const forSearch = (row: DiscoveredRow): SearchedAgent => ({
  id: row.id,
  name: row.name,
  description: row.description,
  composite_score: roundScore(row.composite),
  capabilities: row.capabilities,
  health_score: row.healthScore,
  health_band: healthBandOf(row.healthScore),
  reputation_score: row.reputationScore
})

export const forRecommend = (row: DiscoveredRow): RecommendedAgent => ({
  id: row.id,
  name: row.name,
  description: row.description,
  capabilities: row.capabilities,
  reputation_score: row.reputationScore,
  matchScore: roundScore(row.relevance),
  trustTier: row.trustTier,
  settlementType: settlementPolicy(row.trustTier).settlementType
})

/** The best match is recommended; the next ones are the alternatives. */
export const recommendation = (rows: ReadonlyArray<DiscoveredRow>) => {
  const [first, ...rest] = rows
  return { recommended: first === undefined ? null : forRecommend(first), alternatives: rest.map(forRecommend) }
}
