// Wire schemas of webhook subscriptions (spec sections 2 and 4).
import { Schema } from "effect"
import { AgentId } from "./Ids.js"

const Url = Schema.String.pipe(Schema.minLength(1), Schema.maxLength(2048))
const Events = Schema.Array(Schema.String.pipe(Schema.maxLength(64))).pipe(Schema.minItems(1), Schema.maxItems(32))

export const CreateWebhookRequest = Schema.Struct({
  agentId: AgentId,
  url: Url,
  events: Schema.optional(Events).annotations({ description: "Event names, `*` (all) or `chain.*`; default ['*']" })
}).annotations({ identifier: "CreateWebhookRequest" })

export const UpdateWebhookRequest = Schema.Struct({
  url: Schema.optional(Url),
  events: Schema.optional(Events),
  isActive: Schema.optional(Schema.Boolean)
}).annotations({ identifier: "UpdateWebhookRequest" })

export const WebhookCreated = Schema.Struct({
  id: Schema.String,
  url: Schema.String,
  events: Schema.Array(Schema.String),
  secret: Schema.String,
  message: Schema.String
})

export const WebhookSubscription = Schema.Struct({
  id: Schema.String,
  url: Schema.String,
  events: Schema.Array(Schema.String),
  isActive: Schema.Boolean,
  failure_count: Schema.Number,
  last_failure: Schema.NullOr(Schema.String),
  last_success: Schema.NullOr(Schema.String),
  created_at: Schema.String
}).annotations({ identifier: "WebhookSubscription" })

export const WebhookPath = Schema.Struct({ id: Schema.String.pipe(Schema.pattern(/^wh_[A-Za-z0-9_-]{1,64}$/)) })

export const Delivery = Schema.Struct({
  id: Schema.String,
  event_type: Schema.String,
  status: Schema.Literal("pending", "delivered", "dead"),
  response_status: Schema.NullOr(Schema.Number),
  attempt_count: Schema.Number,
  delivered_at: Schema.NullOr(Schema.String),
  created_at: Schema.String
})
export const DeliveryList = Schema.Struct({ deliveries: Schema.Array(Delivery) })

export const DeliveryLogs = Schema.Struct({
  delivery: Schema.Struct({ id: Schema.String, eventType: Schema.String, status: Schema.String, attemptCount: Schema.Number, createdAt: Schema.String }),
  attempts: Schema.Array(Schema.Struct({
    id: Schema.String,
    attempt_number: Schema.Number,
    response_status: Schema.NullOr(Schema.Number),
    response_body: Schema.NullOr(Schema.String),
    error_message: Schema.NullOr(Schema.String),
    response_time_ms: Schema.Number,
    created_at: Schema.String
  }))
})

export const DeadLetterList = Schema.Struct({
  deadLetterQueue: Schema.Array(Schema.Struct({
    id: Schema.String,
    delivery_id: Schema.String,
    event_type: Schema.String,
    last_attempt_at: Schema.String,
    total_attempts: Schema.Number,
    last_error: Schema.NullOr(Schema.String),
    requeued_at: Schema.NullOr(Schema.String),
    created_at: Schema.String
  })),
  pagination: Schema.Struct({ total: Schema.Number, limit: Schema.Number, offset: Schema.Number, hasMore: Schema.Boolean })
})
