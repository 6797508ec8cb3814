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
