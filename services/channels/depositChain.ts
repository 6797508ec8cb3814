// What a deposit asks of the chain before and after it is sent: the payer's USDC balance and a dry run of the deposit
// (no gas spent on one that cannot succeed), the reasons a dry run gives in x402's words, and the channel's balance
// after an included deposit (its Deposited log, or the contract read at that block).
import { Data, Effect } from "effect"
import type { Address, Hex, TransactionReceipt } from "viem"
import type { ChainShape } from "../../layers/Chain.js"
import { usdcAbi } from "../../layers/devnet/usdcAbi.js"
import { batchSettlementAbi, batchSettlementAddress, depositedBalance } from "../../layers/x402/batchSettlement/contract.js"
import type { ChannelReason } from "../../layers/x402/batchSettlement/reasons.js"

/** A deposit we did not take: its x402 reason, a sentence for the payer; `retryable` when the same payment may pass later. */
export class DepositRefused extends Data.TaggedError("DepositRefused")<{
  readonly reason: ChannelReason
  readonly message: string
  readonly retryable: boolean
  readonly details?: Readonly<Record<string, unknown>>
}> {}

export const refused = (reason: ChannelReason, message: string, retryable = false, details?: Readonly<Record<string, unknown>>) =>
  new DepositRefused({ reason, message, retryable, ...(details === undefined ? {} : { details }) })

const short = (error: unknown) => String(error instanceof Error ? error.message : error).slice(0, 300)

/** A dry run's revert in x402's words (the test USDC and Circle's FiatToken revert with the same strings). */
export const simulationRefusal = (error: unknown): DepositRefused => {
  const text = short(error)
  if (/authorization is used|authorization is used or canceled/i.test(text)) {
    return refused("invalid_batch_settlement_evm_deposit_simulation_failed", "the deposit authorization was already used")
  }
  if (/authorization is expired/i.test(text)) return refused("invalid_batch_settlement_evm_payload_authorization_valid_before", "the deposit authorization has expired")
  if (/not yet valid/i.test(text)) return refused("invalid_batch_settlement_evm_payload_authorization_valid_after", "the deposit authorization is not valid yet", true)
  if (/exceeds balance|insufficient/i.test(text)) return refused("invalid_batch_settlement_evm_insufficient_balance", "the payer's USDC balance does not cover the deposit")
  if (/invalid signature/i.test(text)) return refused("invalid_batch_settlement_evm_receive_authorization_signature", "the token refuses the deposit authorization's signature")
  if (/revert/i.test(text)) return refused("invalid_batch_settlement_evm_deposit_simulation_failed", `the deposit would revert: ${text}`)
  return refused("invalid_batch_settlement_evm_rpc_read_failed", `the chain could not be asked about the deposit: ${text}`, true)
}

/**
 * Before anything is signed: the payer holds the amount, and the deposit runs through (`eth_estimateGas` from our
 * sender: the dry run and the gas in one call). Answers the gas to send with (the estimate and a margin).
 */
export const preflight = (chain: ChainShape, input: { readonly payer: Address; readonly amount: bigint; readonly from: Address; readonly data: Hex }) =>
  Effect.gen(function* () {
    const balance = yield* Effect.tryPromise({
      try: () => chain.publicClient.readContract({ address: chain.usdc.address, abi: usdcAbi, functionName: "balanceOf", args: [input.payer] }),
      catch: (e) => refused("invalid_batch_settlement_evm_rpc_read_failed", `the payer's balance could not be read: ${short(e)}`, true)
    })
    if (balance < input.amount) {
      return yield* refused("invalid_batch_settlement_evm_insufficient_balance", "the payer's USDC balance does not cover the deposit", false, {
        balance: balance.toString(),
        amount: input.amount.toString()
      })
    }
    const gas = yield* Effect.tryPromise({
      try: () => chain.publicClient.estimateGas({ account: input.from, to: batchSettlementAddress, data: input.data }),
      catch: simulationRefusal
    })
    return gas + gas / 4n
  })

/** The channel's balance after the deposit a successful receipt included. */
export const balanceAfter = (chain: ChainShape, receipt: TransactionReceipt, channelId: Hex) =>
  Effect.gen(function* () {
    const logged = depositedBalance(receipt.logs, channelId)
    if (logged !== undefined) return logged
    const [balance] = yield* Effect.tryPromise({
      try: () =>
        chain.publicClient.readContract({
          address: batchSettlementAddress,
          abi: batchSettlementAbi,
          functionName: "channels",
          args: [channelId],
          blockNumber: receipt.blockNumber
        }),
      catch: (e) => refused("invalid_batch_settlement_evm_rpc_read_failed", `the channel's balance could not be read: ${short(e)}`, true)
    })
    return balance
  })
