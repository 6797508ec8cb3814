// The machine registry: one runner per persisted machine kind, built from each feature's spec (a missing kind is a type error).
import { SqlClient } from "@effect/sql"
import { Effect, Layer } from "effect"
import { MachineRunners, type Runners } from "../machines/Host.js"
import { runner } from "../machines/runner.js"
import { ChainMachine } from "../services/chains/chainSpec.js"
import { ChannelMachine } from "../services/channels/channelSpec.js"
import { CircuitMachine } from "../services/circuits/circuitSpec.js"
import { DisputeMachine } from "../services/disputes/disputeSpec.js"
import { ExecutionMachine } from "../services/executions/executionSpec.js"
import { SettlementMachine } from "../services/payments/settlementSpec.js"
import { TreasuryMachine } from "../services/treasury/treasurySpec.js"
import { DeliveryMachine } from "../services/webhooks/deliverySpec.js"
import { WithdrawalMachine } from "../services/withdrawals/withdrawalSpec.js"

export const MachineRunnersLive = Layer.effect(
  MachineRunners,
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const runners: Runners = {
      execution: runner(sql, "execution", (yield* ExecutionMachine).spec),
      settlement: runner(sql, "settlement", (yield* SettlementMachine).spec),
      circuit: runner(sql, "circuit", (yield* CircuitMachine).spec),
      treasury: runner(sql, "treasury", (yield* TreasuryMachine).spec),
      withdrawal: runner(sql, "withdrawal", (yield* WithdrawalMachine).spec),
      dispute: runner(sql, "dispute", (yield* DisputeMachine).spec),
      webhookDelivery: runner(sql, "webhookDelivery", (yield* DeliveryMachine).spec),
      chain: runner(sql, "chain", (yield* ChainMachine).spec),
      channel: runner(sql, "channel", (yield* ChannelMachine).spec)
    }
    return runners
  })
)
