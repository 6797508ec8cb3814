// Withdrawals: an agent's owner takes available earnings out: to its registered wallet with the spec's wallet signature
// (single-use), to any other address only with an EIP-712 authorization over amount and destination (PayoutAuthorization.ts).
// The amount leaves available at once (a locked balance check: concurrent requests cannot overdraw), the payout is a
// treasury transaction confirmed by its Transfer log, and a payout that reverted gives the funds back.
import { SqlClient } from "@effect/sql"
import { Clock, Effect, Option } from "effect"
import { encodeFunctionData, getAddress } from "viem"
import { Chain } from "../../layers/Chain.js"
import { usdcAbi } from "../../layers/devnet/usdcAbi.js"
import { MachineHost } from "../../machines/Host.js"
import { startMachine } from "../../machines/step.js"
import { withdrawalMachine } from "../../machines/withdrawal.js"
import { Conflict, Forbidden, NotFound, Unauthorized } from "../../src/domain/Errors.js"
import { type AgentId, newId } from "../../src/domain/Ids.js"
import type { PayoutAuthorizationBody } from "../../src/domain/Withdrawal.js"
import { formatUsdc } from "../../src/domain/Money.js"
import { Agents } from "../agents/Agents.js"
import { consumeWalletSignature, verifyWalletSignature, type WalletAuthHeaders } from "../agents/WalletAuth.js"
import { Accounts, Ledger } from "../ledger/Ledger.js"
import { Outbox } from "../outbox/Outbox.js"
import { isUniqueViolation } from "../sql/SqlErrors.js"
import { movedExactly } from "../treasury/chainReads.js"
import type { TreasuryTxRow } from "../treasury/Repo.js"
import { type TxOutcome, TreasuryWriter } from "../treasury/TreasuryWriter.js"
import { authorizationRequired, payoutDomain, verifyPayoutAuthorization } from "./PayoutAuthorization.js"
import { WithdrawalsRepo, type WithdrawalRow } from "./Repo.js"

/** Spec limits: at least 1.00 USDC, a 0.10 fee (platform revenue). */
export const WITHDRAWAL_MINIMUM = 1_000_000n
export const WITHDRAWAL_FEE = 100_000n
const TRANSFER_GAS = 100_000n
const LEASE_MS = 60_000

export interface WithdrawRequest {
  readonly agentId: AgentId
  readonly amount: bigint
  readonly destinationWallet?: string | undefined
  readonly authorization?: PayoutAuthorizationBody | undefined
}

export class Withdrawals extends Effect.Service<Withdrawals>()("withdrawals/Withdrawals", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const chain = yield* Chain
    const agents = yield* Agents
    const repo = yield* WithdrawalsRepo
    const ledger = yield* Ledger
    const outbox = yield* Outbox
    const writer = yield* TreasuryWriter
    const host = yield* MachineHost

    const domain = payoutDomain(chain.chainId, chain.treasury)

    /**
     * Who may send this payout: with `authorization`, the typed-data signature over exactly it (any destination); without,
     * the spec's wallet signature, and only to the registered wallet. What makes it single-use: the signature's timestamp
     * (used_wallet_signatures) or the authorization's nonce (the withdrawal row's unique agent + nonce).
     */
    const authorize = (agent: { readonly id: string; readonly wallet: string }, req: WithdrawRequest, destination: string, auth: WalletAuthHeaders) =>
      Effect.gen(function* () {
        const payout = { agentId: agent.id, amount: req.amount, destination }
        if (req.authorization !== undefined) {
          const { nonce } = yield* verifyPayoutAuthorization(domain, payout, agent.wallet, req.authorization)
          return { _tag: "Typed", nonce } as const
        }
        const proof = yield* verifyWalletSignature(agent, auth)
        if (destination !== agent.wallet.toLowerCase()) return yield* authorizationRequired(domain, payout, agent.wallet.toLowerCase())
        return { _tag: "Signed", proof } as const
      })

    const notFound = (id: string) => new NotFound({ code: "WITHDRAWAL_NOT_FOUND", message: `no withdrawal ${id}` })

    /** Takes the amount out of available and queues the payout, in one transaction with the signature's use. */
    const request = (req: WithdrawRequest, auth: WalletAuthHeaders) =>
      Effect.gen(function* () {
        const record = yield* agents.loadRecord(req.agentId)
        if (Option.isNone(record) || record.value.status === "pending") {
          return yield* new NotFound({ code: "AGENT_NOT_FOUND", message: `agent ${req.agentId} not found` })
        }
        const agent = record.value
        const destination = (req.destinationWallet ?? agent.wallet).toLowerCase()
        const authority = yield* authorize(agent, req, destination, auth)
        if (agent.status === "suspended") {
          return yield* new Forbidden({ code: "AGENT_SUSPENDED", message: "the agent is suspended by the platform; its earnings cannot be withdrawn" })
        }
        const id = newId("wd")
        const net = req.amount - WITHDRAWAL_FEE
        const now = yield* Clock.currentTimeMillis
        yield* sql.withTransaction(
          Effect.gen(function* () {
            if (authority._tag === "Signed") yield* consumeWalletSignature(authority.proof)
            // The available balance is read under the account row's lock: two withdrawals cannot both spend it.
            const [account] = yield* sql<{ available: string }>`
              SELECT (-balance)::text AS available FROM ledger_accounts WHERE id = ${Accounts.agentAvailable(agent.id)} FOR NO KEY UPDATE`
            const available = BigInt(account?.available ?? "0")
            if (available < req.amount) {
              return yield* new Conflict({
                code: "INSUFFICIENT_BALANCE",
                message: "the amount exceeds the available balance",
                details: { available: formatUsdc(available), requested: formatUsdc(req.amount) }
              })
            }
            yield* sql`INSERT INTO withdrawals ${sql.insert({
              id,
              agentId: agent.id,
              amount: req.amount.toString(),
              fee: WITHDRAWAL_FEE.toString(),
              netAmount: net.toString(),
              destinationWallet: destination,
              authorizationNonce: authority._tag === "Typed" ? authority.nonce : null,
              status: "pending",
              machineSnapshot: JSON.stringify(startMachine(withdrawalMachine, {}).persisted),
              nextAttemptAt: new Date(now),
              createdAt: new Date(now)
            })}`
            yield* ledger.transfer({
              kind: "withdrawal_requested",
              movements: [
                { debit: Accounts.agentAvailable(agent.id), credit: Accounts.withdrawalsPayable, amount: net },
                { debit: Accounts.agentAvailable(agent.id), credit: Accounts.platformRevenue, amount: WITHDRAWAL_FEE }
              ],
              agentId: agent.id,
              subjectId: id
            }).pipe(Effect.catchTag("LedgerInvariantError", Effect.die))
            yield* outbox.emit("withdrawal.requested", agent.id, {
              withdrawalId: id,
              agentId: agent.id,
              amount: formatUsdc(req.amount),
              netAmount: formatUsdc(net),
              destinationWallet: destination
            })
          })
        ).pipe(Effect.catchTag("SqlError", (error) =>
          isUniqueViolation(error, "withdrawals_authorization_nonce")
            ? Effect.fail(new Unauthorized({
              code: "AUTH_SIGNATURE_REUSED",
              message: "this withdrawal authorization (its nonce) was already used; sign a new one with a fresh nonce",
              details: { nonce: authority._tag === "Typed" ? authority.nonce : null }
            }))
            : Effect.die(error)))
        return Option.getOrThrow(yield* repo.find(id).pipe(Effect.orDie))
      }).pipe(Effect.withSpan("Withdrawals.request"))

    /** What the chain said about a payout, recorded with its machine step in one transaction. */
    const record = (w: WithdrawalRow, txId: string, outcome: Exclude<TxOutcome, { _tag: "Pending" }>) =>
      sql.withTransaction(
        Effect.gen(function* () {
          yield* writer.recordIn(txId, outcome)
          const at = yield* Clock.currentTimeMillis
          if (outcome._tag === "Dropped") {
            yield* host.deliver("withdrawal", w.id, { type: "DROPPED", at, reason: "payout transaction dropped (its nonce went to another)" })
            return
          }
          const { receipt } = outcome
          const paid = receipt.status === "success" && movedExactly(chain, receipt, chain.treasury, w.destinationWallet, w.netAmount)
          if (paid) {
            yield* Effect.logInfo(`withdrawal ${w.id} paid out: ${w.netAmount} micro-USDC to ${w.destinationWallet} in ${receipt.transactionHash}`, {
              event: "withdrawal.paid_out",
              withdrawalId: w.id,
              agentId: w.agentId,
              treasuryTxId: txId,
              to: w.destinationWallet,
              amountMicroUsdc: w.netAmount,
              txHash: receipt.transactionHash,
              block: receipt.blockNumber
            })
          }
          yield* host.deliver(
            "withdrawal",
            w.id,
            paid
              ? { type: "PAID", at, txHash: receipt.transactionHash, block: receipt.blockNumber.toString() }
              : { type: "FAILED", at, reason: "the payout transaction reverted or did not pay the destination" }
          )
        })
      )

    /** Signs and sends one pending payout (stored first, one nonce), then waits for its receipt. */
    const send = (w: WithdrawalRow) =>
      Effect.gen(function* () {
        const tx = yield* writer.submit({
          purpose: "withdrawal",
          subjectId: w.id,
          to: chain.usdc.address,
          data: encodeFunctionData({ abi: usdcAbi, functionName: "transfer", args: [getAddress(w.destinationWallet), w.netAmount] }),
          gas: TRANSFER_GAS,
          logFields: { withdrawalId: w.id, agentId: w.agentId, to: w.destinationWallet, amountMicroUsdc: w.netAmount },
          link: (txId) =>
            Effect.flatMap(Clock.currentTimeMillis, (at) => host.deliver("withdrawal", w.id, { type: "SUBMITTED", at, txId })).pipe(Effect.asVoid)
        })
        const receipt = yield* writer.awaitReceipt(tx)
        if (Option.isSome(receipt)) yield* record(w, tx.id, { _tag: "Mined", receipt: receipt.value })
      })

    /** One pass over pending payouts (leased, shared by processes); in-flight ones are the treasury worker's. */
    const sendDue = Effect.gen(function* () {
      const now = yield* Clock.currentTimeMillis
      const due = yield* repo.claimDue(now, LEASE_MS, 20).pipe(Effect.orDie)
      yield* Effect.forEach(
        due,
        (w) =>
          send(w).pipe(
            Effect.catchAll((error) => sql`UPDATE withdrawals SET last_error = ${error.message.slice(0, 500)} WHERE id = ${w.id}`.pipe(Effect.orDie)),
            Effect.catchAllCause((cause) => Effect.logError(`withdrawal ${w.id}: payout failed; retried after its lease`, cause))
          ),
        { concurrency: 4, discard: true }
      )
      return due.length
    }).pipe(Effect.withSpan("Withdrawals.sendDue"))

    /** The treasury worker found a payout transaction's fate. */
    const resolveTx = (tx: TreasuryTxRow) =>
      Effect.gen(function* () {
        const outcome = yield* writer.observe(tx)
        if (outcome._tag === "Pending") return
        const w = yield* repo.find(tx.subjectId)
        if (Option.isNone(w) || w.value.treasuryTxId !== tx.id) return yield* sql.withTransaction(writer.recordIn(tx.id, outcome))
        yield* record(w.value, tx.id, outcome)
      })

    const get = (id: string) => Effect.flatMap(repo.find(id).pipe(Effect.orDie), Option.match({ onNone: () => Effect.fail(notFound(id)), onSome: Effect.succeed }))

    const list = (agentId: AgentId, limit: number, offset: number) =>
      Effect.gen(function* () {
        const rows = yield* repo.listByAgent(agentId, limit, offset)
        const summary = yield* repo.summary(agentId)
        return { rows, summary }
      }).pipe(Effect.orDie)

    return { request, sendDue, resolveTx, get, list } as const
  }),
  dependencies: [Agents.Default, WithdrawalsRepo.Default, Ledger.Default, Outbox.Default, TreasuryWriter.Default, MachineHost.Default]
}) {}
