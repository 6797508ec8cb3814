// Settles an upto payment once its call is over: exactly what the call used, in one `settle` of the
// x402UptoPermit2Proxy sent by the one treasury writer ('upto_settle'), simulated first so that a settlement the chain
// would refuse (the payer moved the money or revoked Permit2 since verification) spends no gas. The outcome goes into
// the payment's settlement machine (services/payments/settlementSpec.ts: the treasury receives the charge in the ledger,
// the execution releases or voids its escrow). A call that used nothing settles nothing: the Permit2 nonce stays
// unused. The treasury worker follows a transaction whose receipt the request did not see; the recovery pass finishes
// what a crash left (docs/settlement.md "Upto").
import { SqlClient } from "@effect/sql"
import { x402UptoPermit2ProxyABI } from "@x402/evm"
import { Clock, Duration, Effect, Layer, Option, Schedule } from "effect"
import { BaseError, ContractFunctionRevertedError, encodeFunctionData, getAddress, type Hex, type TransactionReceipt } from "viem"
import { withSpan } from "../../layers/observability/span.js"
import { UPTO_PERMIT2_PROXY_ADDRESS } from "../../layers/x402/channelContracts.js"
import { MachineHost } from "../../machines/Host.js"
import { movedExactly } from "../treasury/chainReads.js"
import { MoneyFaults } from "../treasury/Faults.js"
import type { NetworkWriter } from "../treasury/networkWriter.js"
import type { TreasuryTxRow } from "../treasury/Repo.js"
import { type TxOutcome, TreasuryWriter } from "../treasury/TreasuryWriter.js"
import { pending, type Settlement, type SettleOutcome } from "./chainOutcome.js"
import { Payments } from "./Payments.js"
import { PAYMENT_LEASE_MS, PaymentsRepo } from "./Repo.js"
import { uptoSettleRow, type UptoSettleRow } from "./uptoRepo.js"

/** Gas for one proxy `settle` (Permit2's witness check and one transfer): measured ≈ 95k on the devnet. */
const UPTO_SETTLE_GAS = 200_000n

const asHex = (s: string): Hex => (/^0x[0-9a-fA-F]*$/.test(s) ? `0x${s.slice(2)}` : "0x")

/** The proxy's `settle` arguments for `amount` of the stored authorization (as @x402/evm's facilitator builds them). */
export const uptoSettleArgs = (row: UptoSettleRow, amount: bigint, facilitator: `0x${string}`, receiver: `0x${string}`) =>
  [
    { permitted: { token: getAddress(row.asset), amount: BigInt(row.uptoPermitted) }, nonce: BigInt(row.nonce), deadline: BigInt(row.uptoDeadline) },
    amount,
    getAddress(row.payer),
    { to: receiver, facilitator, validAfter: BigInt(row.validAfter) },
    asHex(row.signature)
  ] as const

/** Whether a simulation failed because the contract refuses (final), rather than because the node did not answer. */
const reverted = (error: unknown) =>
  error instanceof BaseError && error.walk((e) => e instanceof ContractFunctionRevertedError) instanceof ContractFunctionRevertedError

const open = (row: UptoSettleRow) => row.status === "reserved" || row.status === "retrying"

export class UptoSettlements extends Effect.Service<UptoSettlements>()("payments/UptoSettlements", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const writers = yield* TreasuryWriter
    const payments = yield* Payments
    const repo = yield* PaymentsRepo
    const host = yield* MachineHost
    const faults = yield* MoneyFaults

    const find = (paymentId: string) => Effect.map(uptoSettleRow(sql, paymentId), (rows) => Option.fromNullable(rows[0]))

    /** What a mined settle did: exactly the charge from the payer to the treasury, or a failure for good. */
    const fromReceipt = (w: NetworkWriter, row: UptoSettleRow, charged: bigint, txId: string, outcome: Exclude<TxOutcome, { _tag: "Pending" }>): Settlement => {
      const tx = Option.some({ id: txId, outcome, network: w.chain.network })
      if (outcome._tag === "Dropped") return { outcome: { _tag: "Pending", message: "the settle transaction was dropped; it is sent again" }, tx }
      const receipt: TransactionReceipt = outcome.receipt
      return receipt.status === "success" && movedExactly(w.chain, receipt, getAddress(row.payer), w.chain.treasury, charged)
        ? { outcome: { _tag: "Settled", txHash: receipt.transactionHash, block: receipt.blockNumber }, tx }
        : { outcome: { _tag: "Failed", reason: "settlement_failed", message: `the upto settle ${receipt.transactionHash} reverted or moved another amount` }, tx }
    }

    /**
     * Settles the charge of a call that is over (its `upto_charged` set): simulated first (a refusal costs no gas), sent,
     * its receipt awaited, and the outcome recorded in the payment's machine. Anything already settled or failed is left.
     */
    const settle = (paymentId: string): Effect.Effect<SettleOutcome> =>
      Effect.gen(function* () {
        const found = yield* find(paymentId)
        if (Option.isNone(found) || !open(found.value) || found.value.uptoCharged === null) return pending("the upto payment is not ready to settle").outcome
        const row = found.value
        yield* faults.beforeUptoSettle(paymentId)
        const charged = BigInt(row.uptoCharged ?? "0")
        const w = writers.on(row.network)
        if (Option.isNone(w.address)) return pending("no treasury key settles upto payments on this network").outcome
        const facilitator = w.address.value
        const args = uptoSettleArgs(row, charged, facilitator, w.chain.treasury)
        const simulated = yield* Effect.either(Effect.tryPromise(() =>
          w.chain.publicClient.simulateContract({ address: UPTO_PERMIT2_PROXY_ADDRESS, abi: x402UptoPermit2ProxyABI, functionName: "settle", args, account: facilitator })))
        const settlement: Settlement = yield* Effect.gen(function* () {
          if (simulated._tag === "Left") {
            return reverted(simulated.left.error)
              ? { outcome: { _tag: "Failed", reason: "settlement_failed", message: `the chain refuses the upto settle (nothing sent): ${String(simulated.left.error).slice(0, 240)}` }, tx: Option.none() } satisfies Settlement
              : pending(`the upto settle could not be simulated: ${String(simulated.left.error).slice(0, 240)}`)
          }
          const sent = yield* w.submit({
            purpose: "upto_settle",
            subjectId: paymentId,
            to: UPTO_PERMIT2_PROXY_ADDRESS,
            data: encodeFunctionData({ abi: x402UptoPermit2ProxyABI, functionName: "settle", args }),
            gas: UPTO_SETTLE_GAS,
            linkStatement: (txId) => repo.linkTreasuryTx(paymentId, txId),
            logFields: { payment: paymentId, execution: row.subjectId, amount: charged }
          }, true)
          const receipt = Option.isSome(sent.receipt) ? sent.receipt : yield* w.awaitReceipt(sent)
          return Option.match(receipt, {
            onNone: () => pending("the upto settle is not mined yet: the treasury worker follows it"),
            onSome: (r) => fromReceipt(w, row, charged, sent.id, { _tag: "Mined", receipt: r })
          })
        }).pipe(
          Effect.catchTags({ TreasuryError: (e) => Effect.succeed(pending(e.message)), SqlError: (e) => Effect.succeed(pending(`database: ${e.message}`)) })
        )
        // Not mined yet: the payment stays as it is (the worker records the receipt); else the outcome is recorded.
        if (settlement.outcome._tag === "Pending" && Option.isNone(settlement.tx)) return settlement.outcome
        yield* sql.withTransaction(payments.recordIn(paymentId, settlement))
        return settlement.outcome
      }).pipe(Effect.orDie, withSpan("UptoSettlements.settle"))

    /**
     * Inside the record transaction of a call that is over without a charge (it failed or timed out): nothing settles,
     * the payment fails as unused (the execution voids its escrow, the payer's limits get the maximum back).
     */
    const voidUnused = (paymentId: string) =>
      Effect.flatMap(Clock.currentTimeMillis, (at) =>
        host.deliver("settlement", paymentId, { type: "UNUSED", at, reason: "unused: the call did not complete, nothing was settled" }))

    /** The treasury worker found an upto settle's fate (after a crash or a slow chain): record it. */
    const resolveTx = (tx: TreasuryTxRow) =>
      Effect.gen(function* () {
        const w = writers.on(tx.network)
        const outcome = yield* w.observe(tx)
        if (outcome._tag === "Pending") return
        const found = yield* find(tx.subjectId)
        if (Option.isNone(found) || !open(found.value) || found.value.uptoCharged === null) return yield* sql.withTransaction(w.recordIn(tx.id, outcome))
        const settlement = fromReceipt(w, found.value, BigInt(found.value.uptoCharged), tx.id, outcome)
        yield* sql.withTransaction(payments.recordIn(found.value.id, settlement))
      }).pipe(withSpan("UptoSettlements.resolveTx"))

    /**
     * Upto payments whose lease ran out: a call that is over is settled (its charge) or voided (no charge); one still
     * running keeps its lease; one whose settle is in flight is the treasury worker's.
     */
    const recoverDue = Effect.gen(function* () {
      const now = yield* Clock.currentTimeMillis
      const due = yield* sql<{ readonly id: string; readonly executionStatus: string | null; readonly uptoCharged: string | null; readonly txState: string | null }>`
        UPDATE payments p SET next_attempt_at = ${new Date(now + PAYMENT_LEASE_MS)}, attempts = attempts + 1
        FROM (SELECT q.id, e.status AS execution_status, t.state AS tx_state FROM payments q
              LEFT JOIN executions e ON e.id = q.subject_id LEFT JOIN treasury_txs t ON t.id = q.treasury_tx_id
              WHERE q.purpose = 'upto' AND q.status IN ('reserved', 'retrying') AND q.next_attempt_at <= ${new Date(now)}
              ORDER BY q.next_attempt_at LIMIT 20 FOR UPDATE OF q SKIP LOCKED) d
        WHERE p.id = d.id
        RETURNING p.id, d.execution_status, p.upto_charged::text, d.tx_state`
      for (const row of due) {
        if (row.txState === "signed" || row.txState === "broadcast") continue
        if (row.uptoCharged !== null && row.uptoCharged !== "0") yield* settle(row.id)
        else if (row.executionStatus !== null && row.executionStatus !== "pending" && row.executionStatus !== "completed") yield* sql.withTransaction(voidUnused(row.id))
      }
      return due.length
    }).pipe(Effect.orDie, withSpan("UptoSettlements.recoverDue"))

    return { settle, voidUnused, resolveTx, recoverDue } as const
  }),
  dependencies: [TreasuryWriter.Default, Payments.Default, PaymentsRepo.Default, MachineHost.Default]
}) {}

/** Runs the upto recovery pass every few seconds for the life of the service. */
export const UptoRecoveryLive = Layer.scopedDiscard(
  Effect.gen(function* () {
    const upto = yield* UptoSettlements
    yield* upto.recoverDue.pipe(
      Effect.catchAllCause((cause) => Effect.logError("upto recovery pass failed", cause)),
      Effect.repeat(Schedule.spaced(Duration.seconds(5))),
      Effect.forkScoped
    )
  })
)
