// GET /health: ready only when the database, its migrations and the chain answer.
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { UnavailableResponse } from "../domain/Errors.js"
import { ok } from "./Envelope.js"

export const Health = Schema.Struct({
  /**
   * `degraded`: serving, but the ledger's treasury disagrees with the chain (see `treasury`), or the treasury's ETH
   * pays for fewer than TREASURY_GAS_LOW_TRANSACTIONS more transactions at current fees (see `gas`), or the chain's
   * RPC answers badly (see `chain.problem`), or a batch-settlement channel is at risk or its reconciliation drifted
   * (see `channels`). A chain RPC that does not answer within 1.5 s is a 503.
   */
  status: Schema.Literal("ok", "degraded"),
  mode: Schema.Literal("devnet", "rpc"),
  database: Schema.Literal("embedded", "external"),
  chain: Schema.Struct({
    chainId: Schema.Number,
    network: Schema.String,
    /** The head the RPC answered; absent while it answers with errors. */
    blockNumber: Schema.optional(Schema.String),
    usdc: Schema.String,
    treasury: Schema.String,
    /** Blocks before a treasury transaction is final (CHAIN_CONFIRMATIONS); the reconciliation compares at the last final block. */
    confirmations: Schema.Number,
    /** Present while the RPC answers badly: errors (429, 5xx, JSON-RPC errors) or a head behind one already seen. */
    problem: Schema.optional(Schema.Struct({ kind: Schema.Literal("errors", "stale"), message: Schema.String }))
  }),
  /**
   * Every network payments are taken on, the primary (`chain`) first, each on its own: its head, token, confirmations
   * and its own reconciliation. Another network that does not answer degrades (the primary still takes payments).
   */
  networks: Schema.Array(Schema.Struct({
    network: Schema.String,
    /** The x402 v2 (CAIP-2) id payers name it by. */
    caip2: Schema.String,
    chainId: Schema.Number,
    blockNumber: Schema.optional(Schema.String),
    usdc: Schema.String,
    confirmations: Schema.Number,
    /** Absent when this network's RPC answers well. */
    problem: Schema.optional(Schema.Struct({ kind: Schema.Literal("errors", "stale", "down"), message: Schema.String })),
    treasury: Schema.optional(Schema.Struct({ drift: Schema.String, block: Schema.String, checkedAt: Schema.String, confirmed: Schema.Boolean })),
    /** The treasury's ETH for gas on this network (its settlements and refunds pay it). */
    gas: Schema.optional(Schema.Struct({ balanceWei: Schema.String, transactionsLeft: Schema.String, low: Schema.Boolean, checkedAt: Schema.String }))
  })),
  settlement: Schema.Literal("local", "facilitator"),
  /** The last reconciliation of the ledger's treasury with the chain (micro-USDC); absent until the first check. */
  treasury: Schema.optional(Schema.Struct({ drift: Schema.String, block: Schema.String, checkedAt: Schema.String, confirmed: Schema.Boolean })),
  /** The treasury's ETH for gas (wei) and how many payout-sized transactions it pays for now; absent until the first check. */
  gas: Schema.optional(Schema.Struct({ balanceWei: Schema.String, transactionsLeft: Schema.String, low: Schema.Boolean, checkedAt: Schema.String })),
  /**
   * Batch-settlement channels (absent until one exists): the live ones (open, withdrawing, claimFailed) counted by
   * status (every state: the `marketplace_channels` gauge), what is charged and not yet claimed
   * (micro-USDC), the channels at risk (withdrawing with charges unclaimed, or a claim failed: `degraded` while any is)
   * and each network's last channel reconciliation (`degraded` while a confirmed drift is the newest).
   */
  channels: Schema.optional(Schema.Struct({
    byStatus: Schema.Array(Schema.Struct({ status: Schema.String, count: Schema.Number })),
    unclaimed: Schema.String,
    atRisk: Schema.Number,
    withdrawingUnclaimed: Schema.Number,
    claimFailed: Schema.Number,
    atRiskAmount: Schema.String,
    reconciliation: Schema.Array(Schema.Struct({
      network: Schema.String,
      block: Schema.String,
      receivableDrift: Schema.String,
      channelsDrifted: Schema.Number,
      pendingDrift: Schema.String,
      claimsInFlight: Schema.String,
      confirmed: Schema.Boolean,
      checkedAt: Schema.String
    }))
  })),
  uptimeSeconds: Schema.Number
}).annotations({ identifier: "Health" })

export class HealthApi extends HttpApiGroup.make("health")
  .add(
    HttpApiEndpoint.get("health", "/health")
      .addSuccess(ok(Health))
      .addError(UnavailableResponse)
      .annotate(OpenApi.Summary, "Readiness: database, migrations and chain")
  ) {}
