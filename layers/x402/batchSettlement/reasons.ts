// Why a batch-settlement (payment channel) payload is refused: x402's reason names for the scheme, as
// specs/schemes/batch-settlement/scheme_batch_settlement_evm.md lists them and @x402/evm's facilitator returns them.
import { Data } from "effect"

export const CHANNEL_REASONS = [
  "invalid_batch_settlement_evm_channel_id_invalid",
  "invalid_batch_settlement_evm_channel_id_mismatch",
  "invalid_batch_settlement_evm_receiver_mismatch",
  "invalid_batch_settlement_evm_receiver_authorizer_mismatch",
  "invalid_batch_settlement_evm_token_mismatch",
  "invalid_batch_settlement_evm_withdraw_delay_mismatch",
  "invalid_batch_settlement_evm_withdraw_delay_out_of_range",
  "invalid_batch_settlement_evm_voucher_signature",
  "invalid_batch_settlement_evm_cumulative_amount_mismatch",
  "invalid_batch_settlement_evm_cumulative_exceeds_balance",
  "invalid_batch_settlement_evm_cumulative_below_claimed",
  "invalid_batch_settlement_evm_channel_not_found",
  "invalid_batch_settlement_evm_erc3009_authorization_required",
  "invalid_batch_settlement_evm_receive_authorization_signature",
  "invalid_batch_settlement_evm_payload_authorization_valid_before",
  "invalid_batch_settlement_evm_payload_authorization_valid_after",
  "invalid_batch_settlement_evm_deposit_payload",
  "invalid_batch_settlement_evm_eip6492_factory_not_allowed",
  "invalid_batch_settlement_evm_rpc_read_failed",
  "invalid_batch_settlement_evm_refund_no_balance",
  "invalid_batch_settlement_evm_refund_amount_invalid",
  "invalid_batch_settlement_evm_insufficient_balance",
  "invalid_batch_settlement_evm_deposit_simulation_failed",
  "invalid_batch_settlement_evm_deposit_transaction_failed"
] as const

export type ChannelReason = (typeof CHANNEL_REASONS)[number]

/** A refused channel payload: its x402 reason, a sentence for the payer, and what was compared. */
export class ChannelPayloadRejected extends Data.TaggedError("ChannelPayloadRejected")<{
  readonly reason: ChannelReason
  readonly message: string
  readonly details?: Readonly<Record<string, unknown>>
  /** True when asking again may succeed (the chain did not answer in time). */
  readonly retryable?: boolean
}> {}

export const rejected = (reason: ChannelReason, message: string, details?: Readonly<Record<string, unknown>>) =>
  new ChannelPayloadRejected({ reason, message, ...(details === undefined ? {} : { details }) })
