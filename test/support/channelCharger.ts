// A process that pays calls through one channel: `tsx test/support/channelCharger.ts DATABASE_URL CHANNEL_ID AMOUNT…`
// sends request `req_<i>` for each amount, all at once, and prints each request's outcome as one JSON line.
import { Effect } from "effect"
import { payUntilAnswered, processRepo } from "./channelCharges.js"

const [url, channelId, ...amounts] = process.argv.slice(2)
if (url === undefined || channelId === undefined) throw new Error("usage: channelCharger DATABASE_URL CHANNEL_ID AMOUNT…")

const outcomes = await Effect.runPromise(
  Effect.scoped(
    Effect.gen(function* () {
      const repo = yield* processRepo(url)
      return yield* Effect.all(
        amounts.map((amount, i) => Effect.map(payUntilAnswered(repo, channelId, `req_${i}`, BigInt(amount)), (r) => ({ i, outcome: r.answer.outcome }))),
        { concurrency: "unbounded" }
      )
    })
  )
)
process.stdout.write(`${JSON.stringify({ pid: process.pid, outcomes })}\n`)
