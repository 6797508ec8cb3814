// The channel machine on the machine host, on the real PostgreSQL: each event delivered as the channel workers deliver
// it (host.deliver), and what each step books: the balance mirror, a withdrawal's claim due time and its needs-attention
// row, a settle into the network's treasury, the write-off of what was never claimed on chain when the payer's money
// left, and the channel.* events recorded for the operator. The ledger stays balanced and the receivable ends at zero.
import { SqlClient } from "@effect/sql"
import { expect, layer } from "@effect/vitest"
import { Effect, Option } from "effect"
import { channelMachine } from "../../machines/channel.js"
import { MachineHost } from "../../machines/Host.js"
import { startMachine } from "../../machines/step.js"
import { Networks } from "../../layers/Networks.js"
import { makeChannelsRepo, type NewChannel } from "../../services/channels/Repo.js"
import { CHANNEL_LOSSES } from "../../services/channels/channelSpec.js"
import { Accounts, Ledger } from "../../services/ledger/Ledger.js"
import { attentionQuery } from "../../services/operator/attentionQueries.js"
import { Inspection } from "../../services/operator/Inspection.js"
import { voucher } from "../support/channelCharges.js"
import { TestApp, TestEnv } from "../support/harness.js"

const hex = (n: number, width: number) => `0x${n.toString(16).padStart(width, "0")}`
const MINUTE = 60_000

const fixture = Effect.gen(function* () {
  const { sql, chain } = yield* TestEnv
  const repo = yield* Effect.provideService(makeChannelsRepo, SqlClient.SqlClient, sql)
  const networks = yield* Networks
  return { sql, repo, host: yield* MachineHost, ledger: yield* Ledger, treasury: networks.treasuryAccount(chain.network), network: chain.network }
})
type Fixture = Effect.Effect.Success<typeof fixture>

/** A channel whose first deposit was sent: the row as a deposit inserts it. */
const newChannel = (n: number, network: string): NewChannel => ({
  id: hex(n, 64),
  network,
  payer: hex(0xa1, 40),
  payerAuthorizer: hex(0xa2, 40),
  receiver: hex(0xb1, 40),
  token: hex(0xc1, 40),
  withdrawDelay: 900,
  balance: 0n,
  salt: null,
  receiverAuthorizer: null
})

/** Debit-positive: the treasury and the receivable are assets, the losses an expense. */
const balanceOf = (sql: SqlClient.SqlClient, account: string) =>
  Effect.map(sql<{ balance: string }>`SELECT coalesce(sum(amount), 0)::text AS balance FROM ledger_entries WHERE account_id = ${account}`, (r) => BigInt(r[0]?.balance ?? "0"))

/** A paid call's charge as the paid-call pipeline books it: the voucher's charge, the receivable against escrow. */
const charge = (f: Fixture, channelId: string, requestId: string, amount: bigint, expected: bigint) =>
  f.sql.withTransaction(Effect.gen(function* () {
    const answer = yield* f.repo.charge({ channelId, requestId, amount, voucher: voucher(expected + amount), expectedCumulative: expected })
    expect(answer.outcome).toBe("charged")
    yield* f.ledger.transfer({ kind: "channel_charge", movements: [{ debit: Accounts.channelReceivable, credit: Accounts.escrow, amount }], subjectId: channelId })
  }))

/** An open channel with `balance` and three charges: 1.0 + 0.5 claimed (the claim built), then 0.25 not. */
const openWithCharges = (f: Fixture, n: number, at: number) =>
  Effect.gen(function* () {
    const ch = newChannel(n, f.network)
    yield* f.repo.insert(ch, "depositPending", startMachine(channelMachine, {}).persisted)
    const opened = yield* f.host.deliverNow("channel", ch.id, { type: "DEPOSIT_INCLUDED", at, txHash: hex(1, 64), balance: "5000000" })
    expect(Option.getOrThrow(opened)).toEqual({ from: "depositPending", state: "open", changed: true })
    yield* charge(f, ch.id, `req_${n}_a`, 1_000_000n, 0n)
    yield* charge(f, ch.id, `req_${n}_b`, 500_000n, 1_000_000n)
    // Both calls are over and keep their charges: a claim takes kept charges only.
    yield* f.repo.keep(`req_${n}_a`, 1_000_000n)
    yield* f.repo.keep(`req_${n}_b`, 500_000n)
    expect(Option.getOrThrow(yield* f.repo.claim(ch.id)).totalClaimed).toBe(1_500_000n)
    yield* charge(f, ch.id, `req_${n}_c`, 250_000n, 1_500_000n)
    return ch.id
  })

const attention = (f: Fixture, kind: "channel_claim_failed" | "channel_withdrawing", id: string) =>
  Effect.map(f.sql<{ actorId: string; amount: string; cause: string }>`${attentionQuery(f.sql, kind, new Date())}`, (rows) => rows.find((r) => r.actorId === id))

layer(TestApp({ BACKGROUND_WORKERS: "false" }))("the channel machine on the host", (it) => {
  it.effect("a deposit opens the channel (balance mirrored, channel.opened for the operator); a withdrawal makes its claim due and is listed; a settle books the treasury; the payer's exit writes off what was never claimed; the ledger balances to a zero receivable", () =>
    Effect.gen(function* () {
      const f = yield* fixture
      const treasuryBefore = yield* balanceOf(f.sql, f.treasury)
      const receivableBefore = yield* balanceOf(f.sql, Accounts.channelReceivable)
      const now = Date.now()
      const id = yield* openWithCharges(f, 1, now)
      const opened = Option.getOrThrow(yield* f.repo.find(id))
      expect(opened).toMatchObject({ status: "open", balance: 5_000_000n, chargedCumulative: 1_750_000n, claimedCumulative: 1_500_000n })
      const [event] = yield* f.sql<{ agentId: string | null; payload: { channelId: string; balance: string } }>`
        SELECT agent_id, payload FROM outbox_events WHERE event_type = 'channel.opened'`
      expect(event).toMatchObject({ agentId: null, payload: { channelId: id, balance: "5.000000" } })

      // The claim lands; half of it settles into the treasury.
      yield* f.host.deliverNow("channel", id, { type: "CLAIMED", at: now + 1, txHash: hex(2, 64), totalClaimed: "1500000" })
      yield* f.host.deliverNow("channel", id, { type: "SETTLED", at: now + 2, txHash: hex(3, 64), amount: "1000000", unsettled: "500000" })
      expect(yield* balanceOf(f.sql, f.treasury)).toBe(treasuryBefore + 1_000_000n)
      expect(Option.getOrThrow(yield* f.repo.find(id))).toMatchObject({ claimedOnChain: 1_500_000n, settledCumulative: 1_000_000n })

      // The payer starts a withdrawal: the claim is due at once, long before it can finalize; the console lists it.
      const finalizableAt = now + 15 * MINUTE
      const withdrawing = yield* f.host.deliverNow("channel", id, { type: "WITHDRAW_INITIATED", at: now + 3, finalizableAt })
      expect(Option.getOrThrow(withdrawing).state).toBe("withdrawing")
      const due = Option.getOrThrow(yield* f.repo.find(id))
      expect(due.claimDueAt?.getTime()).toBe(now + 3)
      expect(due.finalizableAt?.getTime()).toBe(finalizableAt)
      // The operator's inspection shows the channel, its cumulatives and the claim due as its worker timer.
      const inspected = Option.getOrThrow(yield* (yield* Inspection).actor("channel", id))
      expect(inspected).toMatchObject({ kind: "channel", state: "withdrawing", summary: { chargedCumulative: "1750000", claimedOnChain: "1500000", settledCumulative: "1000000" } })
      expect(inspected.timers).toEqual([{ source: "worker", event: "CLAIM", dueAt: new Date(now + 3).toISOString(), attempts: null, armedAt: null }])
      expect((yield* (yield* Inspection).list("channel", { state: "withdrawing", limit: 10 })).actors.map((a) => a.id)).toEqual([id])
      const listed = yield* attention(f, "channel_withdrawing", id)
      expect(listed?.amount).toBe("250000")
      expect(listed?.cause).toMatch(/is withdrawing channel .* charges are not claimed on chain yet/)

      // The payer finalizes before the last 0.25 is claimed: it is written off, the 0.5 claimed waits for its settle.
      const drained = yield* f.host.deliverNow("channel", id, { type: "WITHDRAW_FINALIZED", at: now + 4, txHash: hex(4, 64), amount: "3500000", unsettled: "500000" })
      expect(Option.getOrThrow(drained).state).toBe("drained")
      expect(yield* balanceOf(f.sql, CHANNEL_LOSSES)).toBe(250_000n)
      const charges = yield* f.repo.charges(id)
      expect(charges.map((c) => c.status)).toEqual(["claimed", "claimed", "written_off"])
      expect(Option.getOrThrow(yield* f.repo.find(id))).toMatchObject({ writtenOff: 250_000n, claimDueAt: null })

      const closed = yield* f.host.deliverNow("channel", id, { type: "SETTLED", at: now + 5, txHash: hex(5, 64), amount: "500000", unsettled: "0" })
      expect(Option.getOrThrow(closed).state).toBe("closed")
      expect(yield* balanceOf(f.sql, f.treasury)).toBe(treasuryBefore + 1_500_000n)
      expect(yield* balanceOf(f.sql, Accounts.channelReceivable)).toBe(receivableBefore)
      expect(Option.getOrThrow(yield* f.repo.find(id)).settledCumulative).toBe(1_500_000n)
      const events = yield* f.sql<{ eventType: string }>`SELECT event_type FROM outbox_events WHERE payload->>'channelId' = ${id} ORDER BY seq`
      expect(events.map((e) => e.eventType)).toEqual(["channel.opened", "channel.withdrawing", "channel.drained", "channel.closed"])
      const history = yield* f.sql<{ toState: string }>`SELECT to_state FROM machine_transitions WHERE machine = 'channel' AND actor_id = ${id} ORDER BY id`
      expect(history.map((h) => h.toState)).toEqual(["open", "open", "open", "withdrawing", "drained", "closed"])
      // Every transfer balances (the commit trigger checks it too): the whole ledger sums to zero.
      const [total] = yield* f.sql<{ sum: string }>`SELECT coalesce(sum(amount), 0)::text AS sum FROM ledger_entries`
      expect(total?.sum).toBe("0")
    }))

  it.effect("a failed claim parks the channel in claimFailed and lists it; a cooperative refund then writes off everything not claimed on chain, the claim that never landed included", () =>
    Effect.gen(function* () {
      const f = yield* fixture
      const lossesBefore = yield* balanceOf(f.sql, CHANNEL_LOSSES)
      const now = Date.now()
      const id = yield* openWithCharges(f, 2, now)
      const failed = yield* f.host.deliverNow("channel", id, { type: "CLAIM_FAILED", at: now + 1, reason: "claim reverted: InvalidSignature" })
      expect(Option.getOrThrow(failed).state).toBe("claimFailed")
      const listed = yield* attention(f, "channel_claim_failed", id)
      expect(listed?.amount).toBe("1750000")
      expect(listed?.cause).toMatch(/failed: claim reverted: InvalidSignature$/)

      const closed = yield* f.host.deliverNow("channel", id, { type: "REFUNDED", at: now + 2, txHash: hex(6, 64), amount: "5000000", unsettled: "0" })
      expect(Option.getOrThrow(closed).state).toBe("closed")
      expect((yield* balanceOf(f.sql, CHANNEL_LOSSES)) - lossesBefore).toBe(1_750_000n)
      expect((yield* f.repo.charges(id)).map((c) => c.status)).toEqual(["written_off", "written_off", "written_off"])
      expect(yield* attention(f, "channel_claim_failed", id)).toBeUndefined()
      // A repeated exit event changes nothing (a closed channel takes no event): written off once.
      const again = yield* f.host.deliverNow("channel", id, { type: "REFUNDED", at: now + 3, txHash: hex(6, 64), amount: "5000000", unsettled: "0" })
      expect(Option.getOrThrow(again).changed).toBe(false)
      expect((yield* balanceOf(f.sql, CHANNEL_LOSSES)) - lossesBefore).toBe(1_750_000n)
    }))
})
