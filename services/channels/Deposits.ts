// Deposits into a payer's channel whose receiver is our treasury: the paid-call pipeline hands us a verified deposit
// (layers/x402/batchSettlement/deposit.ts); we check the payer can pay it and that it would run (no gas on one that
// cannot), open the channel row (its machine in depositPending), send `deposit(config, amount, ERC-3009 collector,
// collectorData)` through the treasury writer once per ERC-3009 nonce, wait for its receipt and deliver the channel's
// balance at inclusion (DEPOSIT_INCLUDED: a first deposit opens the channel, a top-up raises its ceiling). A process
// that dies after sending leaves the rest to the treasury worker (`resolveTx`). Deposits move no ledger money: the
// payer's USDC sits in the contract until claims and settles (docs/settlement.md "Deposits").
import { SqlClient, type SqlError } from "@effect/sql"
import { Clock, Effect, Option } from "effect"
import type { Hex, TransactionReceipt } from "viem"
import type { ChainShape } from "../../layers/Chain.js"
import { Networks } from "../../layers/Networks.js"
import { batchSettlementAddress, depositCalldata } from "../../layers/x402/batchSettlement/contract.js"
import type { VerifiedDepositAuthorization } from "../../layers/x402/batchSettlement/deposit.js"
import type { ChannelConfig } from "../../layers/x402/batchSettlement/payloads.js"
import { channelMachine } from "../../machines/channel.js"
import { MachineHost } from "../../machines/Host.js"
import { startMachine } from "../../machines/step.js"
import type { TreasuryTxRow } from "../treasury/Repo.js"
import { type TxOutcome, TreasuryWriter } from "../treasury/TreasuryWriter.js"
import { balanceAfter, DepositRefused, preflight, refused } from "./depositChain.js"
import { type DepositRow, DepositsRepo } from "./DepositsRepo.js"
import { type ChannelRow, ChannelsRepo } from "./Repo.js"
import type { NetworkChannelTerms } from "./Terms.js"

export { DepositRefused } from "./depositChain.js"

export interface DepositInput {
  readonly terms: NetworkChannelTerms
  readonly config: ChannelConfig
  readonly channelId: `0x${string}`
  readonly authorization: VerifiedDepositAuthorization
}

type Finished = Exclude<TxOutcome, { _tag: "Pending" }>

/**
 * Channel states that take a deposit: a first deposit that failed may be tried again with a new authorization, and a
 * channel the payer left (refunded or withdrawn) opens again with a new deposit (the official client deposits into the
 * same channel after a full refund). Not while the payer's withdrawal runs or a claim is failing.
 */
const TAKES_DEPOSITS: ReadonlyArray<ChannelRow["status"]> = ["depositPending", "open", "depositFailed", "drained", "closed"]

export class Deposits extends Effect.Service<Deposits>()("channels/Deposits", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const networks = yield* Networks
    const writers = yield* TreasuryWriter
    const host = yield* MachineHost
    const channels = yield* ChannelsRepo
    const deposits = yield* DepositsRepo

    /**
     * A finished deposit transaction, booked once (whoever moves its row out of `sending`: the waiting request or the
     * worker): the treasury machine's outcome, then the channel's event, in one database transaction.
     */
    const record = (chain: ChainShape, txId: string, deposit: DepositRow, outcome: Finished) =>
      Effect.gen(function* () {
        const mined: TransactionReceipt | undefined = outcome._tag === "Mined" && outcome.receipt.status === "success" ? outcome.receipt : undefined
        const balance = mined === undefined ? undefined : yield* balanceAfter(chain, mined, deposit.channelId as Hex)
        const at = yield* Clock.currentTimeMillis
        yield* sql.withTransaction(Effect.gen(function* () {
          yield* writers.on(chain.network).recordIn(txId, outcome)
          if (mined !== undefined && balance !== undefined) {
            if (!(yield* deposits.settle(deposit.nonce, { status: "included" }))) return
            const included = { type: "DEPOSIT_INCLUDED", at, txHash: mined.transactionHash, balance: balance.toString() } as const
            const delivered = yield* host.deliver("channel", deposit.channelId, included)
            // Two first deposits raced and the other one failed first: this one's money is in the channel, so it opens.
            if (Option.isSome(delivered) && !delivered.value.changed && delivered.value.state === "depositFailed") {
              yield* deposits.revive(deposit.channelId, startMachine(channelMachine, {}).persisted)
              yield* host.deliver("channel", deposit.channelId, included)
            }
            return
          }
          const reason = outcome._tag === "Dropped"
            ? "the deposit transaction was dropped (its nonce went to another transaction); sign a new deposit"
            : "the deposit transaction reverted (its authorization was used, expired or the payer's balance fell before it was mined)"
          if (yield* deposits.settle(deposit.nonce, { status: "failed", reason })) {
            yield* host.deliver("channel", deposit.channelId, { type: "DEPOSIT_FAILED", at, reason })
          }
        }))
      })

    /** The channel as the deposit left it, or the deposit's refusal. */
    const answer = (nonce: string) =>
      Effect.gen(function* () {
        const deposit = yield* deposits.find(nonce)
        if (Option.isNone(deposit)) return yield* Effect.dieMessage(`deposit ${nonce} vanished`)
        const d = deposit.value
        if (d.status === "failed") return yield* refused("invalid_batch_settlement_evm_deposit_transaction_failed", d.failureReason ?? "the deposit failed")
        if (d.status === "sending") {
          return yield* refused("invalid_batch_settlement_evm_deposit_transaction_failed", "the deposit is sent and not included yet: send the same payment again to follow it", true)
        }
        const row = yield* channels.find(d.channelId)
        return Option.isSome(row) ? row.value : yield* Effect.dieMessage(`channel ${d.channelId} of deposit ${nonce} is missing`)
      })

    /** A deposit sent before (by this request's earlier attempt or another process): wait for it, then answer as it ended. */
    const follow = (chain: ChainShape, d: DepositRow) =>
      Effect.gen(function* () {
        if (d.status === "sending" && d.treasuryTxId !== null) {
          const writer = writers.on(chain.network)
          const tx = yield* writer.find(d.treasuryTxId).pipe(Effect.orDie)
          if (Option.isSome(tx)) {
            const receipt = yield* writer.awaitReceipt(tx.value)
            if (Option.isSome(receipt)) yield* record(chain, tx.value.id, d, { _tag: "Mined", receipt: receipt.value })
          }
        }
        return yield* answer(d.nonce)
      })

    const deposit = (input: DepositInput): Effect.Effect<ChannelRow, DepositRefused | SqlError.SqlError> =>
      Effect.gen(function* () {
        const { terms, config, authorization } = input
        const chain = terms.chain
        const writer = writers.on(terms.network)
        const id = input.channelId.toLowerCase()
        const nonce = authorization.nonce.toLowerCase()
        const known = yield* deposits.find(nonce)
        if (Option.isSome(known)) return yield* follow(chain, known.value)

        const existing = yield* channels.find(id)
        if (Option.isSome(existing) && !TAKES_DEPOSITS.includes(existing.value.status)) {
          return yield* refused("invalid_batch_settlement_evm_deposit_payload", `the channel is ${existing.value.status}: it takes no deposits; open a channel with another salt`, false, { status: existing.value.status })
        }
        if (Option.isNone(writer.address)) return yield* refused("invalid_batch_settlement_evm_deposit_transaction_failed", "this service sends no transactions (no treasury key)")
        const data = depositCalldata(config, authorization)
        const gas = yield* preflight(chain, { payer: authorization.payer, amount: authorization.amount, from: writer.address.value, data })

        if (Option.isNone(existing) || existing.value.status === "depositFailed") {
          yield* deposits.openOrRevive({
            id,
            network: terms.network,
            payer: config.payer.toLowerCase(),
            payerAuthorizer: config.payerAuthorizer.toLowerCase(),
            receiver: config.receiver.toLowerCase(),
            token: config.token.toLowerCase(),
            withdrawDelay: config.withdrawDelay,
            salt: config.salt.toLowerCase(),
            receiverAuthorizer: config.receiverAuthorizer.toLowerCase()
          }, startMachine(channelMachine, {}).persisted)
        }
        const row = { nonce, channelId: id, amount: authorization.amount }
        const sent = yield* writer.submit({
          purpose: "channel_deposit",
          subjectId: nonce,
          to: batchSettlementAddress,
          data,
          gas,
          // The deposit's row commits with the signed bytes: a second sender of this nonce fails here and follows the first.
          link: (txId) => deposits.insert(row, txId),
          logFields: { channel: id, amount: authorization.amount, payer: config.payer }
        }, true).pipe(
          Effect.map(Option.some),
          Effect.catchTag("SqlError", (e) => Effect.flatMap(deposits.find(nonce), (d) => (Option.isSome(d) ? Effect.succeed(Option.none()) : Effect.fail(e)))),
          Effect.catchTag("TreasuryError", (e) => refused("invalid_batch_settlement_evm_deposit_transaction_failed", `the deposit could not be sent: ${e.message}`, true))
        )
        if (Option.isNone(sent)) return yield* Effect.flatMap(deposits.find(nonce), (d) => follow(chain, Option.getOrThrow(d)))
        const tx = sent.value
        const receipt = Option.isSome(tx.receipt) ? tx.receipt : yield* writer.awaitReceipt(tx)
        if (Option.isSome(receipt)) {
          const stored = yield* deposits.find(nonce)
          if (Option.isSome(stored)) yield* record(chain, tx.id, stored.value, { _tag: "Mined", receipt: receipt.value })
        }
        return yield* answer(nonce)
      }).pipe(Effect.withSpan("Deposits.deposit"))

    /** The treasury worker found a deposit transaction's fate (its sender died or gave up waiting): book it. */
    const resolveTx = (tx: TreasuryTxRow) =>
      Effect.gen(function* () {
        const writer = writers.on(tx.network)
        const outcome = yield* writer.observe(tx)
        if (outcome._tag === "Pending") return
        const d = yield* deposits.find(tx.subjectId)
        if (Option.isNone(d)) return yield* Effect.asVoid(sql.withTransaction(writer.recordIn(tx.id, outcome)))
        yield* record(networks.of(tx.network), tx.id, d.value, outcome)
      }).pipe(Effect.withSpan("Deposits.resolveTx"))

    return { deposit, resolveTx } as const
  }),
  dependencies: [TreasuryWriter.Default, MachineHost.Default, ChannelsRepo.Default, DepositsRepo.Default]
}) {}
