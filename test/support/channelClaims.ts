// Channels whose receiver is the service's treasury, on a devnet of the test's own (the channel contracts placed by its
// start): opened with the official client's deposit, recorded as the deposit path records them, and charged as the
// paid-call pipeline charges them (the voucher's charge, the receivable against escrow).
import { SqlClient } from "@effect/sql"
import { computeChannelId } from "@x402/evm/batch-settlement/client"
import { Context, Effect, Layer, Option } from "effect"
import type { Hex } from "viem"
import { Chain, connectChain } from "../../layers/Chain.js"
import { MachineHost } from "../../machines/Host.js"
import { channelMachine } from "../../machines/channel.js"
import { startMachine } from "../../machines/step.js"
import { ChannelsRepo } from "../../services/channels/Repo.js"
import { Accounts, Ledger } from "../../services/ledger/Ledger.js"
import { type ChannelChain, type ChannelConfig, NETWORK, startChannelChain } from "./channelChain.js"
import { TestApp } from "./harness.js"

export class OwnChannelChain extends Context.Tag("test/OwnChannelChain")<OwnChannelChain, ChannelChain>() {}

const OwnLive = Layer.scoped(OwnChannelChain, Effect.acquireRelease(Effect.promise(startChannelChain), (c) => Effect.promise(() => c.devnet.stop())))

/** The service on the test's devnet: dev account 0 is the treasury (receiver and receiver authorizer); no background workers. */
export const ChannelClaimsApp = (confirmations: number) =>
  Layer.unwrapScoped(
    Effect.map(OwnChannelChain, (c) =>
      TestApp({ BACKGROUND_WORKERS: "false", TREASURY_RECEIPT_WAIT_MS: "5000", CHANNEL_WITHDRAW_DELAY_SECONDS: "900" }, {
        chain: Layer.effect(Chain, connectChain({
          mode: "devnet",
          rpcUrl: c.devnet.rpcUrl,
          usdcAddress: c.usdc,
          signerKey: Option.some(c.devnet.accounts[0]!.privateKey),
          treasuryAddress: Option.none(),
          confirmations
        }))
      }))
  ).pipe(Layer.provideMerge(OwnLive))

export interface OpenChannel {
  readonly id: string
  readonly config: ChannelConfig
}

/** Our treasury's channel config (`salt` names it): the payer is dev account 1. */
export const ourConfig = (c: ChannelChain, salt: string): ChannelConfig => {
  const treasury = c.devnet.accounts[0]!.address
  return { ...c.configFor(salt), receiver: treasury, receiverAuthorizer: treasury }
}

/** Deposits `amount` on chain and records the channel open, as the deposit path does. */
export const openChannel = (salt: string, amount: bigint) =>
  Effect.gen(function* () {
    const c = yield* OwnChannelChain
    const repo = yield* ChannelsRepo
    const host = yield* MachineHost
    const network = (yield* Chain).network
    const config = ourConfig(c, salt)
    const { collectorData } = yield* Effect.promise(() => c.depositPayload(config, amount))
    const receipt = yield* Effect.promise(() => c.deposit(config, amount, collectorData))
    const id = computeChannelId(config, NETWORK).toLowerCase()
    const low = (s: string) => s.toLowerCase()
    yield* repo.insert({
      id, network, payer: low(config.payer), payerAuthorizer: low(config.payerAuthorizer), receiver: low(config.receiver),
      token: low(config.token), withdrawDelay: config.withdrawDelay, balance: 0n, salt: low(config.salt), receiverAuthorizer: low(config.receiverAuthorizer)
    }, "depositPending", startMachine(channelMachine, {}).persisted)
    yield* host.deliverNow("channel", id, { type: "DEPOSIT_INCLUDED", at: Date.now(), txHash: receipt.transactionHash, balance: amount.toString() })
    return { id, config } satisfies OpenChannel
  })

/** A finished paid call's charge of `amount` on the payer's voucher for the new cumulative, booked as the pipeline books it. */
export const charge = (ch: OpenChannel, requestId: string, amount: bigint) =>
  Effect.gen(function* () {
    const c = yield* OwnChannelChain
    const sql = yield* SqlClient.SqlClient
    const repo = yield* ChannelsRepo
    const ledger = yield* Ledger
    const row = Option.getOrThrow(yield* repo.find(ch.id))
    const ceiling = row.chargedCumulative + amount
    const voucher = yield* Effect.promise(() => c.claimRow(ch.config, ceiling, ceiling))
    yield* sql.withTransaction(Effect.gen(function* () {
      const answer = yield* repo.charge({
        channelId: ch.id, requestId, amount, voucher: { maxClaimable: ceiling, signature: voucher.signature.toLowerCase() }, expectedCumulative: row.chargedCumulative
      })
      if (answer.outcome !== "charged") return yield* Effect.dieMessage(`charge ${requestId}: ${answer.outcome}`)
      yield* ledger.transfer({ kind: "channel_charge", movements: [{ debit: Accounts.channelReceivable, credit: Accounts.escrow, amount }], subjectId: ch.id })
    }))
    // The call is over and keeps its charge: only kept charges are claimable.
    yield* repo.keep(requestId, amount)
  })

/** The contract's view of a channel. */
export const onChain = (id: string) => Effect.flatMap(OwnChannelChain, (c) => Effect.promise(() => c.channelState(id as Hex)))

/** Debit-positive balance of a ledger account. */
export const ledgerBalance = (account: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    Effect.map(sql<{ balance: string }>`SELECT coalesce(sum(amount), 0)::text AS balance FROM ledger_entries WHERE account_id = ${account}`, (r) => BigInt(r[0]?.balance ?? "0")))
