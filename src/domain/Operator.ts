// Wire schemas of the operator API (/api/v1/operator): machine inspection, levers and their record, statistics, transactions.
import { Schema } from "effect"
import type { MachineKind } from "../../machines/Host.js"
import { integer, Limit } from "./Discovery.js"
import { AgentId, Wallet } from "./Ids.js"

/** Every persisted machine kind; `complete` fails to compile when the host has a kind this list lacks. */
export const MACHINE_KINDS = ["execution", "settlement", "circuit", "treasury", "withdrawal", "dispute", "webhookDelivery", "chain", "channel"] as const satisfies ReadonlyArray<MachineKind>
const complete: [Exclude<MachineKind, (typeof MACHINE_KINDS)[number]>] extends [never] ? true : false = true
void complete

export const OPERATOR_PAGE_DEFAULT = 50
export const OPERATOR_PAGE_MAX = 200

export const MachineKindSchema = Schema.Literal(...MACHINE_KINDS).annotations({ identifier: "MachineKind" })

/** Who acts: a name the operator gives with every lever (the token has no identity of its own). */
export const OperatorHeaders = Schema.Struct({
  "x-operator": Schema.String.pipe(
    Schema.pattern(/^[A-Za-z0-9][A-Za-z0-9._@ -]{0,63}$/, { message: () => "X-Operator: your name, 1-64 letters, digits, spaces or . _ @ -" })
  ).annotations({ description: "The operator's name, recorded with the action (required on every lever)" })
})

const Reason = Schema.Trim.pipe(Schema.minLength(1, { message: () => "a reason is required" }), Schema.maxLength(1000))
  .annotations({ description: "Why (recorded with the action)" })

export const LeverRequest = Schema.Struct({ reason: Reason }).annotations({ identifier: "LeverRequest" })
export const ForceCircuitRequest = Schema.Struct({ state: Schema.Literal("open", "closed"), reason: Reason }).annotations({ identifier: "ForceCircuitRequest" })
export const SetAgentStatusRequest = Schema.Struct({ status: Schema.Literal("active", "inactive", "suspended"), reason: Reason })

const Cursor = Schema.String.pipe(Schema.maxLength(512))
export const PageQuery = Schema.Struct({
  limit: Schema.optional(Limit(OPERATOR_PAGE_MAX)).annotations({ description: `1-${OPERATOR_PAGE_MAX}, default ${OPERATOR_PAGE_DEFAULT}` }),
  cursor: Schema.optional(Cursor).annotations({ description: "nextCursor of the previous page" })
})
export const ActorListQuery = Schema.extend(PageQuery, Schema.Struct({ state: Schema.optional(Schema.String.pipe(Schema.maxLength(64))) }))
export const ActionListQuery = Schema.extend(
  PageQuery,
  Schema.Struct({ machine: Schema.optional(Schema.String.pipe(Schema.maxLength(32))), actorId: Schema.optional(Schema.String.pipe(Schema.maxLength(128))) })
)
export const StatsQuery = Schema.Struct({ days: Schema.optional(integer(1, 90)).annotations({ description: "1-90, default 30" }) })

export const KindPath = Schema.Struct({ kind: MachineKindSchema })
export const ActorPath = Schema.Struct({ kind: MachineKindSchema, id: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(128)) })
export const IdPath = Schema.Struct({ id: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(128)) })
export const AgentPath = Schema.Struct({ id: AgentId })
export const RequesterPath = Schema.Struct({
  requester: Schema.Union(Wallet, AgentId).annotations({ description: "The paying wallet, or an agent that called others inside chains" })
})
export const ProviderPath = Schema.Struct({ agentId: AgentId })

export const Pagination = Schema.Struct({ limit: Schema.Number, hasMore: Schema.Boolean, nextCursor: Schema.NullOr(Schema.String) })

const StateCount = Schema.Struct({ state: Schema.String, count: Schema.Number })
export const KindCounts = Schema.Struct({ kind: MachineKindSchema, total: Schema.Number, states: Schema.Array(StateCount) }).annotations({ identifier: "KindCounts" })

const ActorFields = {
  kind: MachineKindSchema,
  id: Schema.String,
  state: Schema.String,
  createdAt: Schema.String,
  summary: Schema.Record({ key: Schema.String, value: Schema.NullOr(Schema.String) })
}
export const ActorList = Schema.Struct({
  kind: MachineKindSchema,
  state: Schema.NullOr(Schema.String),
  actors: Schema.Array(Schema.Struct(ActorFields)),
  pagination: Pagination
}).annotations({ identifier: "ActorList" })

export const OperatorAction = Schema.Struct({
  id: Schema.String,
  operator: Schema.String,
  tokenFingerprint: Schema.String,
  action: Schema.String,
  machine: Schema.String,
  actorId: Schema.String,
  reason: Schema.String,
  outcome: Schema.Literal("applied", "refused"),
  from: Schema.NullOr(Schema.String),
  to: Schema.NullOr(Schema.String),
  transitionId: Schema.NullOr(Schema.String),
  details: Schema.Unknown,
  at: Schema.String
}).annotations({ identifier: "OperatorAction" })

const Timer = Schema.Struct({
  source: Schema.Literal("timer", "worker"),
  event: Schema.String,
  dueAt: Schema.String,
  attempts: Schema.NullOr(Schema.Number),
  armedAt: Schema.NullOr(Schema.String)
})
export const ActorDetail = Schema.Struct({
  ...ActorFields,
  snapshot: Schema.Unknown,
  timers: Schema.Array(Timer),
  operatorActions: Schema.Array(OperatorAction)
}).annotations({ identifier: "ActorDetail" })

const Transition = Schema.Struct({
  id: Schema.String,
  event: Schema.String,
  from: Schema.NullOr(Schema.String),
  to: Schema.String,
  at: Schema.String,
  payload: Schema.Unknown,
  operator: Schema.NullOr(Schema.Struct({ actionId: Schema.String, name: Schema.NullOr(Schema.String), action: Schema.NullOr(Schema.String), reason: Schema.NullOr(Schema.String) }))
})
export const ActorHistory = Schema.Struct({ kind: MachineKindSchema, id: Schema.String, transitions: Schema.Array(Transition), pagination: Pagination })
  .annotations({ identifier: "ActorHistory" })
export const ActionList = Schema.Struct({ actions: Schema.Array(OperatorAction), pagination: Pagination }).annotations({ identifier: "OperatorActionList" })

export const OperatorStats = Schema.Struct({
  generatedAt: Schema.String,
  agents: Schema.Struct({ total: Schema.Number, active: Schema.Number, suspended: Schema.Number, inactive: Schema.Number, newLast7Days: Schema.Number }),
  transactions: Schema.Struct({ total: Schema.Number, completed: Schema.Number, last24Hours: Schema.Number, last7Days: Schema.Number }),
  volume: Schema.Struct({ totalGMV: Schema.String, gmvLast24Hours: Schema.String, gmvLast7Days: Schema.String }),
  fees: Schema.Struct({
    total: Schema.String,
    byKind: Schema.Array(Schema.Struct({ kind: Schema.String, amount: Schema.String })),
    days: Schema.Number,
    byDay: Schema.Array(Schema.Struct({ date: Schema.String, fees: Schema.String, executions: Schema.Number, completed: Schema.Number, gmv: Schema.String }))
  })
}).annotations({ identifier: "OperatorStats" })

const OperatorTransaction = Schema.Struct({
  id: Schema.String,
  requestId: Schema.String,
  requesting_agent: Schema.NullOr(Schema.String),
  payer: Schema.String,
  providing_agent: Schema.String,
  capability_id: Schema.String,
  amount: Schema.String,
  platformFee: Schema.String,
  platformCut: Schema.String,
  agent_earnings: Schema.String,
  status: Schema.String,
  execution_time: Schema.NullOr(Schema.Number),
  escrow_id: Schema.String,
  escrowStatus: Schema.String,
  chainId: Schema.NullOr(Schema.String),
  /** The network its payment was made on. */
  network: Schema.String,
  created_at: Schema.String
})
export const TransactionList = Schema.Struct({
  requester: Schema.optional(Schema.String),
  provider: Schema.optional(Schema.String),
  transactions: Schema.Array(OperatorTransaction),
  pagination: Pagination
}).annotations({ identifier: "OperatorTransactionList" })
