// The SDK's public surface (the package's one entry point).
export { createAgent, capabilitiesOf, pricingOf, type Agent, type AgentContext, type AgentDefinition, type CapabilityDefinition, type HireResult, type NodeHandler } from "./agent.js"
export { agentOwner, type AgentOwner, type Balance, type HistoryItem, type OwnerOptions, type WithdrawAccepted, type Withdrawal } from "./owner.js"
export {
  marketplace,
  type AgentSummary,
  type ChainNode,
  type ChainView,
  type DiscoverFilters,
  type Dispute,
  type DisputeOpened,
  type DisputeReason,
  type ExecuteOptions,
  type ExecuteResult,
  type Execution,
  type ExecutionStatus,
  type Marketplace,
  type MarketplaceOptions
} from "./client.js"
export * as webhooks from "./webhooks.js"
export { WebhookVerificationError, type WebhookEvent } from "./webhooks.js"
export {
  AuthenticationError,
  ConflictError,
  errorFromResponse,
  ExecutionError,
  ForbiddenError,
  MarketplaceError,
  NotFoundError,
  PaymentError,
  RateLimitError,
  UnavailableError,
  ValidationError
} from "./errors.js"
export { checkMarketplaceRequest, fetchMarketplaceKey, MAX_SIGNATURE_AGE_MS, type MarketplaceKey, type Refusal } from "./requestSignature.js"
export { canonicalJson, contentSha256, receiptFromHeaders, verifyReceipt, type ExecutionReceipt } from "./receipts.js"
export { walletAuthHeaders, type OwnerWallet } from "./walletAuth.js"
export { payingFetch, type PayerOptions, type Wallet } from "./payments.js"
export { fromMicro, toMicro } from "./money.js"
export type { DynamicPricing, PerMinutePricing, PerRequestPricing, PerTokenPricing, Pricing } from "./pricing.js"
