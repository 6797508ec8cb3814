// Charges against a batch-settlement channel on the real PostgreSQL, from two connection pools (as two processes hold
// them) and from two node processes: the compare-and-set charge, its replay, the corrective state, returned charges
// and the claim's take.
import { describe, expect, it } from "@effect/vitest"
import { Effect, Option } from "effect"
import { spawn } from "node:child_process"
import { channelMachine } from "../../machines/channel.js"
import { startMachine, stepMachine } from "../../machines/step.js"
import type { NewChannel } from "../../services/channels/Repo.js"
import { payUntilAnswered, processRepo, type Repo, voucher } from "../support/channelCharges.js"
import { freshDatabase } from "../support/harness.js"


const hex = (n: number, width: number) => `0x${n.toString(16).padStart(width, "0")}`
const channel = (n: number, balance: bigint): NewChannel => ({
  id: hex(n, 64),
  network: "eip155:84532",
  payer: hex(0xa1, 40),
  payerAuthorizer: hex(0xa2, 40),
  receiver: hex(0xb1, 40),
  token: hex(0xc1, 40),
  withdrawDelay: 86_400,
  balance,
  salt: null,
  receiverAuthorizer: null
})

/** A channel whose deposit was included: open, its snapshot from the machine. */
const openChannel = (repo: Repo, n: number, balance: bigint) =>
  Effect.gen(function* () {
    const start = startMachine(channelMachine, {})
    const ch = channel(n, balance)
    yield* repo.insert(ch, "depositPending", start.persisted)
    const open = stepMachine(channelMachine, start.persisted, { type: "DEPOSIT_INCLUDED", at: 1, txHash: "0xd1", balance: String(balance) })
    expect(open.state).toBe("open")
    yield* repo.saveMachine(ch.id, "open", open.persisted)
    return ch.id
  })

/** test/support/channelCharger.ts in its own node process: each request's outcome. */
const chargerProcess = (url: string, channelId: string, amounts: ReadonlyArray<bigint>) =>
  Effect.async<{ readonly pid: number; readonly outcomes: ReadonlyArray<{ readonly i: number; readonly outcome: string }> }, Error>((resume) => {
    const child = spawn(process.execPath, ["--import", "tsx", "test/support/channelCharger.ts", url, channelId, ...amounts.map(String)], {
      stdio: ["ignore", "pipe", "pipe"]
    })
    let out = ""
    let err = ""
    child.stdout.on("data", (d: Buffer) => (out += d.toString()))
    child.stderr.on("data", (d: Buffer) => (err += d.toString()))
    child.on("exit", (code) =>
      resume(code === 0 ? Effect.try({ try: () => JSON.parse(out), catch: () => new Error(out) }) : Effect.fail(new Error(`charger exited ${code}: ${err}`))))
    return Effect.sync(() => child.kill("SIGKILL"))
  })

describe("channel charges", () => {
  it.scopedLive("50 paid calls, each sent at once through two connection pools: each charged exactly once, never past the balance, the cumulative the sum", () =>
    Effect.gen(function* () {
      const db = yield* freshDatabase
      const [a, b] = yield* Effect.all([processRepo(db.url), processRepo(db.url)])
      const amounts = Array.from({ length: 50 }, (_, i) => 1_000n + BigInt(i) * 7n)
      const total = amounts.reduce((s, x) => s + x, 0n)
      // The balance holds exactly the 50 calls: one more micro-USDC is over it.
      const id = yield* openChannel(a, 1, total)
      const results = yield* Effect.all(
        amounts.flatMap((amount, i) => [
          Effect.map(payUntilAnswered(a, id, `req_${i}`, amount), (r) => ({ i, ...r })),
          Effect.map(payUntilAnswered(b, id, `req_${i}`, amount), (r) => ({ i, ...r }))
        ]),
        { concurrency: "unbounded" }
      )
      for (let i = 0; i < amounts.length; i++) {
        const mine = results.filter((r) => r.i === i).map((r) => r.answer.outcome).sort()
        expect(mine).toEqual(["charged", "replayed"])
      }
      const row = Option.getOrThrow(yield* b.find(id))
      expect(row.chargedCumulative).toBe(total)
      expect(row.chargedCumulative).toBeLessThanOrEqual(row.balance)
      // The stored voucher covers everything charged: a claim of the cumulative can use it.
      expect(row.voucherMaxClaimable).toBe(total)
      const charges = yield* a.charges(id)
      expect(charges).toHaveLength(50)
      expect(charges.reduce((s, c) => s + BigInt(c.amount), 0n)).toBe(total)
      // Each charge moved the cumulative from the previous one: one chain of compare-and-sets, no gap, no overlap.
      let previous = 0n
      for (const c of charges) {
        expect(BigInt(c.cumulativeAfter) - BigInt(c.amount)).toBe(previous)
        previous = BigInt(c.cumulativeAfter)
      }
      // The balance is spent: the next call is refused with the state, and nothing is charged.
      const over = yield* a.charge({ channelId: id, requestId: "req_over", amount: 1n, voucher: voucher(total + 1n), expectedCumulative: total })
      expect(over).toEqual({ outcome: "over_balance", chargedCumulative: total, balance: total, voucherMaxClaimable: total })
      expect(Option.getOrThrow(yield* a.find(id)).chargedCumulative).toBe(total)
    }))

  it.scopedLive("two processes send the same 30 paid calls at once: each charged by exactly one of them, the cumulative the sum", () =>
    Effect.gen(function* () {
      const db = yield* freshDatabase
      const repo = yield* processRepo(db.url)
      const amounts = Array.from({ length: 30 }, (_, i) => 2_000n + BigInt(i) * 11n)
      const total = amounts.reduce((s, x) => s + x, 0n)
      const id = yield* openChannel(repo, 8, total)
      const [one, two] = yield* Effect.all([chargerProcess(db.url, id, amounts), chargerProcess(db.url, id, amounts)], { concurrency: 2 })
      expect(one.pid).not.toBe(two.pid)
      for (let i = 0; i < amounts.length; i++) {
        const both = [...one.outcomes, ...two.outcomes].filter((o) => o.i === i).map((o) => o.outcome).sort()
        expect(both).toEqual(["charged", "replayed"])
      }
      const row = Option.getOrThrow(yield* repo.find(id))
      expect(row.chargedCumulative).toBe(total)
      expect((yield* repo.charges(id)).reduce((s, c) => s + BigInt(c.amount), 0n)).toBe(total)
    }))

  it.scopedLive("a replay returns the first outcome and charges nothing; a stale or short voucher is refused with the current state", () =>
    Effect.gen(function* () {
      const db = yield* freshDatabase
      const [a, b] = yield* Effect.all([processRepo(db.url), processRepo(db.url)])
      const id = yield* openChannel(a, 2, 1_000_000n)
      const first = yield* a.charge({ channelId: id, requestId: "req_1", amount: 300n, voucher: voucher(300n), expectedCumulative: 0n })
      expect(first).toEqual({ outcome: "charged", chargedCumulative: 300n, balance: 1_000_000n, voucherMaxClaimable: 300n })
      // The same request again, from the other process, even with another expectation: the first outcome, nothing more.
      const replay = yield* b.charge({ channelId: id, requestId: "req_1", amount: 300n, voucher: voucher(600n), expectedCumulative: 300n })
      expect(replay.outcome).toBe("replayed")
      expect(replay.chargedCumulative).toBe(300n)
      // The same request id for another amount is not a replay: refused, nothing charged.
      expect((yield* b.charge({ channelId: id, requestId: "req_1", amount: 5n, voucher: voucher(305n), expectedCumulative: 300n })).outcome)
        .toBe("request_conflict")

      // A payer that missed a charge signs over a stale cumulative: refused with what the corrective 402 needs.
      const stale = yield* b.charge({ channelId: id, requestId: "req_2", amount: 200n, voucher: voucher(200n), expectedCumulative: 0n })
      expect(stale).toEqual({ outcome: "stale", chargedCumulative: 300n, balance: 1_000_000n, voucherMaxClaimable: 300n })
      // A voucher whose ceiling does not cover the new cumulative.
      const short = yield* b.charge({ channelId: id, requestId: "req_2", amount: 200n, voucher: voucher(499n), expectedCumulative: 300n })
      expect(short.outcome).toBe("voucher_short")
      // A refused attempt stored nothing: the same request with the corrected voucher is charged.
      const corrected = yield* b.charge({ channelId: id, requestId: "req_2", amount: 200n, voucher: voucher(500n), expectedCumulative: 300n })
      expect(corrected.outcome).toBe("charged")
      // The price may sit inside the voucher's ceiling (a dynamic price under its maximum).
      const within = yield* a.charge({ channelId: id, requestId: "req_3", amount: 50n, voucher: voucher(900n), expectedCumulative: 500n })
      expect(within).toEqual({ outcome: "charged", chargedCumulative: 550n, balance: 1_000_000n, voucherMaxClaimable: 900n })
      expect((yield* a.charges(id)).map((c) => c.requestId)).toEqual(["req_1", "req_2", "req_3"])

      // A channel that is no longer open takes no charge; an unknown channel neither.
      yield* a.saveMachine(id, "withdrawing", { value: "withdrawing", context: {} })
      expect((yield* a.charge({ channelId: id, requestId: "req_4", amount: 1n, voucher: voucher(551n), expectedCumulative: 550n })).outcome)
        .toBe("not_open")
      expect((yield* a.charge({ channelId: hex(99, 64), requestId: "req_5", amount: 1n, voucher: voucher(1n), expectedCumulative: 0n })).outcome)
        .toBe("unknown_channel")
      expect(Option.getOrThrow(yield* a.find(id)).chargedCumulative).toBe(550n)
    }))

  it.scopedLive("a failed call's charge goes back once before a claim; after the claim took it, it is refused", () =>
    Effect.gen(function* () {
      const db = yield* freshDatabase
      const [a, b] = yield* Effect.all([processRepo(db.url), processRepo(db.url)])
      const id = yield* openChannel(a, 3, 1_000_000n)
      yield* a.charge({ channelId: id, requestId: "req_ok", amount: 100n, voucher: voucher(100n), expectedCumulative: 0n })
      yield* a.charge({ channelId: id, requestId: "req_failed", amount: 40n, voucher: voucher(140n), expectedCumulative: 100n })

      // Both processes give the failed call's charge back at once: lowered once.
      const returned = yield* Effect.all([a.returnCharge("req_failed"), b.returnCharge("req_failed")], { concurrency: 2 })
      expect(returned.map((r) => r.outcome).sort()).toEqual(["already_returned", "returned"])
      expect(returned.every((r) => r.chargedCumulative === 100n)).toBe(true)
      expect((yield* a.returnCharge("req_unknown")).outcome).toBe("unknown")

      // The stored voucher (140) still covers the lowered cumulative; the payer's next voucher is signed over 100:
      // a voucher over the old cumulative is stale.
      expect((yield* b.charge({ channelId: id, requestId: "req_next", amount: 10n, voucher: voucher(150n), expectedCumulative: 140n })).outcome)
        .toBe("stale")
      expect((yield* b.charge({ channelId: id, requestId: "req_next", amount: 10n, voucher: voucher(110n), expectedCumulative: 100n })).outcome)
        .toBe("charged")

      // A claim takes only the charges of calls that are over (kept): none yet.
      expect(Option.isNone(yield* a.claim(id))).toBe(true)
      // The calls end and keep their charges; the claim takes them (110, with the latest voucher); they can no longer go back.
      expect((yield* a.keep("req_ok", 100n)).outcome).toBe("kept")
      expect((yield* b.keep("req_next", 10n)).outcome).toBe("kept")
      expect((yield* a.keep("req_next", 10n)).outcome).toBe("already")
      const take = Option.getOrThrow(yield* a.claim(id))
      expect(take.totalClaimed).toBe(110n)
      expect(take.voucherMaxClaimable).toBe(110n)
      expect(Option.isNone(yield* b.claim(id))).toBe(true)
      const refused = yield* b.returnCharge("req_next")
      expect(refused).toEqual({ outcome: "claimed", chargedCumulative: 110n })
      const row = Option.getOrThrow(yield* a.find(id))
      expect([row.chargedCumulative, row.claimedCumulative]).toEqual([110n, 110n])

      // A charge after the claim can still go back; it never lowers the cumulative below what is claimed.
      yield* a.charge({ channelId: id, requestId: "req_late", amount: 5n, voucher: voucher(115n), expectedCumulative: 110n })
      expect(yield* b.returnCharge("req_late")).toEqual({ outcome: "returned", chargedCumulative: 110n })
    }))

  it.scopedLive("a claim built while failed calls give their charges back: each charge is either claimed or returned, never both", () =>
    Effect.gen(function* () {
      const db = yield* freshDatabase
      const [a, b] = yield* Effect.all([processRepo(db.url), processRepo(db.url)])
      const id = yield* openChannel(a, 5, 1_000_000n)
      let cumulative = 0n
      for (let i = 0; i < 20; i++) {
        const amount = 100n + BigInt(i)
        expect((yield* a.charge({ channelId: id, requestId: `req_${i}`, amount, voucher: voucher(cumulative + amount), expectedCumulative: cumulative })).outcome)
          .toBe("charged")
        cumulative += amount
      }
      // One process builds the claim while the other ends every call: the even ones keep their charges, the odd ones
      // (failed) give them back. A charge is claimable only once kept, so the claim takes kept charges only.
      const [take, returned] = yield* Effect.all(
        [a.claim(id), Effect.all(Array.from({ length: 20 }, (_, i) => i % 2 === 0
          ? Effect.as(b.keep(`req_${i}`, 100n + BigInt(i)), { outcome: "claimed" as const })
          : b.returnCharge(`req_${i}`)), { concurrency: 4 })],
        { concurrency: 2 }
      )
      const late = yield* a.claim(id)
      const charges = yield* a.charges(id)
      const claimed = charges.filter((c) => c.status === "claimed")
      expect(claimed.length + charges.filter((c) => c.status === "returned").length).toBe(20)
      expect(returned.filter((r) => r.outcome === "returned")).toHaveLength(20 - claimed.length)
      expect(returned.filter((r) => r.outcome === "claimed")).toHaveLength(claimed.length)
      const claimedSum = claimed.reduce((s, c) => s + BigInt(c.amount), 0n)
      const row = Option.getOrThrow(yield* a.find(id))
      // What the claim submits is exactly what stays charged: nothing returned is claimed, nothing claimed returned.
      expect(row.chargedCumulative).toBe(claimedSum)
      expect(row.claimedCumulative).toBe(claimedSum)
      expect(Option.match(late, { onNone: () => Option.match(take, { onNone: () => 0n, onSome: (t) => t.totalClaimed }), onSome: (t) => t.totalClaimed })).toBe(claimedSum)
      expect(claimed.every((c) => Number(c.requestId.slice(4)) % 2 === 0)).toBe(true)
      expect(claimed).toHaveLength(10)
    }))

  it.scopedLive("a zero price is refused; one request id raced onto two channels is charged on one of them only", () =>
    Effect.gen(function* () {
      const db = yield* freshDatabase
      const [a, b] = yield* Effect.all([processRepo(db.url), processRepo(db.url)])
      const one = yield* openChannel(a, 6, 1_000n)
      const two = yield* openChannel(a, 7, 1_000n)
      expect((yield* a.charge({ channelId: one, requestId: "req_0", amount: 0n, voucher: voucher(0n), expectedCumulative: 0n })).outcome)
        .toBe("invalid_amount")
      const raced = yield* Effect.all([
        a.charge({ channelId: one, requestId: "req_x", amount: 10n, voucher: voucher(10n), expectedCumulative: 0n }),
        b.charge({ channelId: two, requestId: "req_x", amount: 10n, voucher: voucher(10n), expectedCumulative: 0n })
      ], { concurrency: 2 })
      expect(raced.map((r) => r.outcome).sort()).toEqual(["charged", "request_conflict"])
      const rows = yield* Effect.all([a.find(one), a.find(two)])
      expect(rows.map((r) => Option.getOrThrow(r).chargedCumulative).sort()).toEqual([0n, 10n])
    }))

  it.scopedLive("the table refuses a balance below what is charged, whatever writes it", () =>
    Effect.gen(function* () {
      const db = yield* freshDatabase
      const a = yield* processRepo(db.url)
      const id = yield* openChannel(a, 4, 1_000n)
      yield* a.charge({ channelId: id, requestId: "req_1", amount: 800n, voucher: voucher(800n), expectedCumulative: 0n })
      const lowered = yield* Effect.either(a.mirrorBalance(id, 700n))
      expect(lowered._tag).toBe("Left")
      expect(Option.getOrThrow(yield* a.find(id)).balance).toBe(1_000n)
    }))
})
