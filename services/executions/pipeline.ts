// What every prepaid funding kind's pipeline (credited.ts, channeled.ts, upto.ts) works with: the services of admit,
// reserve, run and record, gathered once here, so that a funding kind's file names only what it adds (its funds, its
// refusals, its reservation).
import { SqlClient } from "@effect/sql"
import { Effect, type Scope } from "effect"
import { AppConfig } from "../../layers/Config.js"
import { MachineHost } from "../../machines/Host.js"
import { Circuits } from "../circuits/Circuits.js"
import { Ledger } from "../ledger/Ledger.js"
import { Outbox } from "../outbox/Outbox.js"
import { Paywall } from "../payments/Paywall.js"
import { AgentCall } from "./AgentCall.js"
import { answering } from "./answer.js"
import type { Timing } from "./deadline.js"
import { Metering } from "./metering.js"
import { lookUpCallback, prepare } from "./prepare.js"
import { Quotes } from "./quote.js"
import { RateLimits } from "./RateLimits.js"
import { Receipts } from "./Receipts.js"
import { ExecutionsRepo } from "./Repo.js"

export const pipelineParts = (scope: Scope.Scope, timing: Timing) => Effect.gen(function* () {
  const config = yield* AppConfig
  const repo = yield* ExecutionsRepo
  return {
    sql: yield* SqlClient.SqlClient,
    config,
    answer: answering(scope, timing, config.publicBaseUrl),
    paywall: yield* Paywall,
    ledger: yield* Ledger,
    outbox: yield* Outbox,
    rateLimits: yield* RateLimits,
    repo,
    receipts: yield* Receipts,
    host: yield* MachineHost,
    agentCall: yield* AgentCall,
    circuits: yield* Circuits,
    metering: yield* Metering,
    quotes: yield* Quotes,
    /** The checks every paid call makes before payment (agent, capability, input, callback URL). */
    check: yield* prepare,
    checkCallbackHost: yield* lookUpCallback,
    /** An execution row that must exist (read back after the call's own writes). */
    load: (id: string) => repo.find(id).pipe(Effect.orDie)
  } as const
})
