// How the host runs a treasury transaction's machine: its row, snapshot and (last) inclusion block. It has no actions of its own:
// what a mined or dropped transaction means is booked by its purpose in the same database transaction.
import { SqlClient } from "@effect/sql"
import { Effect, Option } from "effect"
import type { MachineSpec } from "../../machines/runner.js"
import { isPersistedSnapshot } from "../../machines/step.js"
import { treasuryTxMachine } from "../../machines/treasuryTx.js"
import * as UnitOfWork from "../sql/UnitOfWork.js"
import { TreasuryRepo, type TreasuryTxRow } from "./Repo.js"

export type TreasurySpec = MachineSpec<typeof treasuryTxMachine, TreasuryTxRow, "countReplacement" | "noteOutcome" | "countReorg">

export class TreasuryMachine extends Effect.Service<TreasuryMachine>()("treasury/TreasuryMachine", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const repo = yield* TreasuryRepo
    const spec: TreasurySpec = {
      machine: treasuryTxMachine,
      pure: ["countReplacement", "noteOutcome", "countReorg"],
      lock: repo.lock,
      guarded: repo.guarded,
      snapshot: (row) => (isPersistedSnapshot(row.machineSnapshot) ? row.machineSnapshot : { value: row.state, context: { broadcasts: 0, lastError: null } }),
      actions: {},
      // In a unit of work (the paid path's final transaction) the update goes with its batch.
      save: (id, _row, step, event) =>
        UnitOfWork.update(sql, "treasury_txs", id, {
          state: step.state,
          machineSnapshot: JSON.stringify(step.persisted),
          updatedAt: new Date(event.at),
          ...(event.type === "MINED" ? { blockNumber: event.block, minedAt: new Date(event.at) } : {}),
          ...(event.type === "BROADCAST_FAILED" ? { lastError: event.error } : {}),
          ...(event.type === "DROPPED" ? { lastError: event.reason } : {}),
          ...(event.type === "REORGED" ? { lastError: `taken out of block ${event.block} by a reorg: sent again` } : {})
        }),
      timerEvent: () => Option.none()
    }
    return { spec } as const
  }),
  dependencies: [TreasuryRepo.Default]
}) {}
