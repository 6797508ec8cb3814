// How the host runs a channel's machine (machines/channel.ts): the row and its snapshot, and what each step books: the
// balance mirror, the claim deadline of a withdrawal, a landed claim, a settle into the treasury, the write-off of what
// was never claimed when the payer's money left, and the channel.* events, all in the step's transaction.
import { Effect, Option, Schema } from "effect"
import { channelMachine } from "../../machines/channel.js"
import type { MachineSpec } from "../../machines/runner.js"
import { isPersistedSnapshot, startMachine } from "../../machines/step.js"
import { Networks } from "../../layers/Networks.js"
import { formatUsdc } from "../../src/domain/Money.js"
import { Accounts, Ledger } from "../ledger/Ledger.js"
import { Outbox } from "../outbox/Outbox.js"
import { ChannelStatus, type ChannelRow, ChannelsRepo } from "./Repo.js"

export type ChannelSpec = MachineSpec<typeof channelMachine, ChannelRow, "noteWithdraw" | "countClaim" | "noteError">

/** The ledger account of charges written off (migration 0048). */
export const CHANNEL_LOSSES = "channel_losses"

const isStatus = Schema.is(ChannelStatus)

/** A decimal string of micro-USDC from an event (the machine's events carry amounts as strings). */
const micros = (value: string): bigint => (/^[0-9]+$/.test(value) ? BigInt(value) : 0n)

export class ChannelMachine extends Effect.Service<ChannelMachine>()("channels/ChannelMachine", {
  effect: Effect.gen(function* () {
    const repo = yield* ChannelsRepo
    const ledger = yield* Ledger
    const outbox = yield* Outbox
    const networks = yield* Networks
    /** An unbalanced transfer is a bug, not a database fault. */
    const book = (input: Parameters<typeof ledger.transfer>[0]) =>
      ledger.transfer(input).pipe(Effect.catchTag("LedgerInvariantError", Effect.die), Effect.asVoid)

    const spec: ChannelSpec = {
      machine: channelMachine,
      pure: ["noteWithdraw", "countClaim", "noteError"],
      lock: repo.lock,
      snapshot: (row) => (isPersistedSnapshot(row.machineSnapshot) ? row.machineSnapshot : startMachine(channelMachine, {}).persisted),
      actions: {
        mirrorBalance: ({ balance }, { id, row }) =>
          // Only deposits move an open channel's balance, and only up: a lower figure is an earlier deposit's, read late.
          repo.mirrorBalance(id, micros(balance) < row.balance ? row.balance : micros(balance)),
        // After a refund (the ceiling for charges comes down with it) or a deposit reopening the channel: the chain's figure.
        setBalance: ({ balance }, { id }) => (balance === null ? Effect.void : repo.mirrorBalance(id, micros(balance))),
        // Nothing more is charged once the payer started a withdrawal: one claim of everything charged is due at once,
        // long before `at` (the withdrawal's finalizable time, at least 15 minutes away).
        claimBefore: ({ at }, { id, event }) => repo.claimDue(id, new Date(Math.min(event.at, at)), new Date(at)),
        // A claim moves no ledger money (it stays in the contract, claimed for us, until a settle): the chain's figure only.
        bookClaim: ({ totalClaimed }, { id }) => repo.claimedOnChain(id, micros(totalClaimed)),
        bookSettle: ({ amount }, { id, row, event }) =>
          Effect.gen(function* () {
            const settled = micros(amount)
            if (settled === 0n) return
            // The claimed money arrived in the treasury of the channel's network: the receivable becomes treasury money.
            yield* book({
              kind: "channel_settle",
              movements: [{ debit: networks.treasuryAccount(row.network), credit: Accounts.channelReceivable, amount: settled }],
              subjectId: id,
              txHash: "txHash" in event ? event.txHash : null,
              // Booked at its block: a reconciliation at an earlier (final) block does not count it yet.
              chainBlock: event.type === "SETTLED" && event.block !== undefined ? BigInt(event.block) : null
            })
            yield* repo.settled(id, settled)
          }),
        writeOffUnclaimed: ({ reason }, { id, row }) =>
          Effect.gen(function* () {
            // What the chain never claimed is lost to us (the payer took it back); our agents keep their earnings.
            const onChain = row.claimedOnChain > row.claimedCumulative ? row.claimedCumulative : row.claimedOnChain
            const lost = row.chargedCumulative - onChain - row.writtenOff
            if (lost <= 0n) return
            yield* book({
              kind: "channel_write_off",
              movements: [{ debit: CHANNEL_LOSSES, credit: Accounts.channelReceivable, amount: lost }],
              subjectId: id,
              memo: `payer's money ${reason} before a claim`
            })
            yield* repo.writeOff(id, lost, onChain)
          }),
        // The needs-attention list reads the channel's state (claimFailed, withdrawing) and the host's transition log
        // line says why (layers/observability/machineLog.ts): nothing to store beyond the step.
        raiseAttention: () => Effect.void,
        // No agent owns a channel and webhooks are per agent: the events are recorded for the operator (agent_id null).
        announce: ({ outcome }, { id, row, event }) =>
          outbox.emit(`channel.${outcome}`, null, {
            channelId: id,
            network: row.network,
            payer: row.payer,
            balance: formatUsdc("balance" in event ? micros(event.balance) : row.balance),
            charged: formatUsdc(row.chargedCumulative),
            ...("txHash" in event ? { txHash: event.txHash } : {}),
            ...("reason" in event ? { reason: event.reason } : {}),
            ...(event.type === "WITHDRAW_INITIATED" ? { finalizableAt: new Date(event.finalizableAt).toISOString() } : {})
          })
      },
      save: (id, _row, step) =>
        isStatus(step.state)
          ? repo.saveMachine(id, step.state, step.persisted)
          : Effect.dieMessage(`channel machine: state ${step.state} is not a channel status`),
      timerEvent: () => Option.none()
    }
    return { spec } as const
  }),
  dependencies: [ChannelsRepo.Default, Ledger.Default, Outbox.Default]
}) {}
