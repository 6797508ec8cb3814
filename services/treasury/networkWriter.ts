// One network's writer of treasury transactions (TreasuryWriter.ts holds one per network): a nonce from PostgreSQL, the
// signed bytes stored before they are broadcast (broadcast.ts sends them), rebroadcast (never re-signed) after a crash,
// receipts awaited under a renewed lease, and nonce gaps repaired.
import { SqlClient, type SqlError, type Statement } from "@effect/sql"
import { withSpan } from "../../layers/observability/span.js"
import { Clock, Config, Data, Duration, Effect, Fiber, Option, Schedule } from "effect"
import { type Hex, isHex, keccak256, type TransactionReceipt } from "viem"
import type { ChainShape } from "../../layers/Chain.js"
import { pollReceipt } from "./receipts.js"
import { MachineHost } from "../../machines/Host.js"
import { newId } from "../../src/domain/Ids.js"
import { ChainReadError, minedNonce, pendingNonce, receiptOf } from "./chainReads.js"
import { type Fees, feeSource, maxFeeCeiling } from "./fees.js"
import { replacer } from "./replace.js"
import { broadcaster } from "./broadcast.js"
import { nonceRepair } from "./nonceRepair.js"
import * as txLog from "./txLog.js"
import { MoneyFaults } from "./Faults.js"
import { type TreasuryPurpose, TreasuryRepo, type TreasuryTxRow } from "./Repo.js"

/** Stored hashes and bytes are hex (column values the writer made); anything else reads as nothing. */
const asHex = (s: string): Hex => (isHex(s) ? s : "0x")

export class TreasuryError extends Data.TaggedError("TreasuryError")<{ readonly message: string }> {}

/** How long a process owns an in-flight transaction; renewed while it waits for the receipt. */
export const TREASURY_LEASE_MS = 30_000

/** What the chain says about one of our transactions. */
export type TxOutcome =
  | { readonly _tag: "Mined"; readonly receipt: TransactionReceipt }
  /** Its nonce was mined by another transaction: these bytes can never be mined. */
  | { readonly _tag: "Dropped" }
  | { readonly _tag: "Pending" }

/** The treasury writer of one network: its own nonce row, fees, broadcasts and receipts; the same treasury key. */
export const makeNetworkWriter = (chain: ChainShape) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const repo = yield* TreasuryRepo
    const host = yield* MachineHost
    const signer = chain.signer
    const faults = yield* MoneyFaults
    /** How long a request waits for its receipt before leaving the transaction to the worker. */
    const receiptWaitMs = yield* Config.integer("TREASURY_RECEIPT_WAIT_MS").pipe(Config.withDefault(60_000))
    /** The most the treasury signs per gas, first signature or replacement: a fee spike past it waits (and is logged). */
    const ceiling = yield* maxFeeCeiling
    const currentFees = feeSource(chain, ceiling).pipe(Effect.mapError((e) => new TreasuryError({ message: e.message })))

    const requireSigner = Option.match(signer, {
      onNone: () => Effect.fail(new TreasuryError({ message: "no treasury signer is configured (facilitator mode)" })),
      onSome: Effect.succeed
    })

    const signAt = (nonce: bigint, to: `0x${string}`, data: Hex | undefined, gas: bigint, fee: Fees) =>
      Effect.gen(function* () {
        const s = yield* requireSigner
        const account = s.account
        if (account.type !== "local") return yield* new TreasuryError({ message: "the treasury signer must be a local key" })
        const raw = yield* Effect.tryPromise({
          // In-process signing: no RPC round trip while the nonce row is locked.
          try: () =>
            account.signTransaction({
              type: "eip1559",
              chainId: chain.chainId,
              nonce: Number(nonce),
              to,
              ...(data === undefined ? {} : { data }),
              value: 0n,
              gas,
              maxFeePerGas: fee.maxFeePerGas,
              maxPriorityFeePerGas: fee.maxPriorityFeePerGas
            }),
          catch: (error) => new TreasuryError({ message: `signing failed: ${String(error).slice(0, 200)}` })
        })
        return { raw, hash: keccak256(raw) }
      })

    const { broadcast, broadcastFirst, resendUntilSent } = broadcaster(chain, host)

    /**
     * Allocates a nonce, signs and stores the transaction (one database transaction), then broadcasts it. With
     * `withReceipt`, the broadcast may return the receipt too (`receipt`; none: await it).
     */
    const submit = (intent: {
      readonly purpose: TreasuryPurpose
      readonly subjectId: string
      readonly to: `0x${string}`
      readonly data?: Hex
      readonly gas: bigint
      /** Runs inside the transaction that stores the signed bytes (e.g. linking the row to its subject). */
      readonly link?: (txId: string) => Effect.Effect<void, SqlError.SqlError>
      /** A write sent in the same statement as the row (no extra round trip): it may not read what that statement writes. */
      readonly linkStatement?: (txId: string) => Statement.Fragment
      /** What the transaction pays and the ids it is about (refund, execution, withdrawal, agent), for its log line. */
      readonly logFields?: Readonly<Record<string, string | bigint | null>>
    }, withReceipt = false) =>
      Effect.gen(function* () {
        const s = yield* requireSigner
        const fee = yield* currentFees // read outside the nonce lock
        const id = newId("ttx")
        const now = yield* Clock.currentTimeMillis
        const stored = yield* sql.withTransaction(
          Effect.gen(function* () {
            const nonce = yield* repo.allocateNonce(chain.network, s.account.address)
            const { raw, hash } = yield* signAt(nonce, intent.to, intent.data, intent.gas, fee)
            yield* repo.insert({
              id,
              purpose: intent.purpose,
              subjectId: intent.subjectId,
              signer: s.account.address,
              network: chain.network,
              nonce,
              to: intent.to,
              raw,
              hash,
              leaseUntil: new Date(now + TREASURY_LEASE_MS)
            }, intent.linkStatement === undefined ? [] : [intent.linkStatement(id)])
            if (intent.link !== undefined) yield* intent.link(id)
            return { id, rawTx: raw, txHash: hash, nonce }
          })
        )
        yield* faults.afterSign({ id, purpose: intent.purpose })
        const { sent, receipt } = yield* broadcastFirst(stored, withReceipt)
        yield* txLog.sent(intent, stored, sent)
        yield* faults.afterBroadcast({ id, purpose: intent.purpose })
        return { ...stored, receipt, sent }
      }).pipe(withSpan("TreasuryWriter.submit", { attributes: { purpose: intent.purpose } }))

    /**
     * Waits for the receipt (bounded), keeping the lease while it waits, and sending the bytes again while their first
     * broadcast has not gone through (`sent: false`, as `submit` says). `pollingIntervalMs`: the caller is the only one
     * waiting (the settler's loop), so it polls the receipt itself at that pace (on a devnet the poll is most of a batch's
     * round trip) instead of following blocks.
     */
    const awaitReceipt = (
      tx: { readonly id: string; readonly txHash: string; readonly rawTx?: string; readonly sent?: boolean },
      timeoutMs = receiptWaitMs,
      pollingIntervalMs?: number
    ) =>
      Effect.gen(function* () {
        const resend = tx.sent === false && tx.rawTx !== undefined
          ? Option.some(yield* Effect.forkScoped(resendUntilSent({ id: tx.id, rawTx: tx.rawTx, txHash: tx.txHash })))
          : Option.none()
        // Each renewal is uninterruptible: interrupting a statement in flight sends PostgreSQL a cancel request for the
        // connection, which can land on the next statement another fiber runs on it once it is back in the pool.
        const renew = yield* Effect.forkScoped(
          Effect.flatMap(Clock.currentTimeMillis, (now) => repo.renewLease(tx.id, new Date(now + TREASURY_LEASE_MS))).pipe(
            Effect.catchAll(() => Effect.void),
            Effect.uninterruptible,
            Effect.repeat(Schedule.spaced(Duration.millis(TREASURY_LEASE_MS / 3))),
            Effect.delay(Duration.millis(TREASURY_LEASE_MS / 3))
          )
        )
        const receipt = yield* Effect.tryPromise({
          // Ask at once (a devnet mines on submission), then poll.
          try: () =>
            chain.publicClient.getTransactionReceipt({ hash: tx.txHash as Hex }).catch(() =>
              pollingIntervalMs === undefined
                ? chain.publicClient.waitForTransactionReceipt({ hash: tx.txHash as Hex, timeout: timeoutMs })
                : pollReceipt(chain, tx.txHash as Hex, timeoutMs, pollingIntervalMs)
            ),
          catch: (error) => new ChainReadError({ message: `no receipt for ${tx.txHash}: ${String(error).slice(0, 300)}` })
        }).pipe(
          Effect.map(Option.some),
          // viem's waiter can miss a mined receipt (or an RPC call of its fails): say why, and read it once directly.
          Effect.catchAll((e) =>
            Effect.logWarning(`treasury tx ${tx.id}: ${e.message}`).pipe(
              Effect.zipRight(receiptOf(chain, tx.txHash as Hex)),
              Effect.orElseSucceed(() => Option.none<TransactionReceipt>())
            ))
        )
        yield* Fiber.interrupt(renew)
        if (Option.isSome(resend)) yield* Fiber.interrupt(resend.value)
        return receipt
      }).pipe(Effect.scoped)

    /** The receipt of whichever of the row's bytes was mined (the newest, or one it replaced). */
    const minedReceipt = (tx: TreasuryTxRow) =>
      Effect.gen(function* () {
        for (const hash of [tx.txHash, ...tx.replacedHashes]) {
          const receipt = yield* receiptOf(chain, asHex(hash))
          if (Option.isSome(receipt)) return receipt
        }
        return Option.none<TransactionReceipt>()
      })

    const replaceIfUnderpriced = replacer({ sql, chain, repo, host, signAt, ceiling })

    /**
     * Where an unfinished transaction stands on chain: mined (any of its bytes), dropped (its nonce went to another), or
     * still pending: replaced with higher fees when the chain's fees left it behind, and (re)broadcast.
     */
    const observe = (tx: TreasuryTxRow) =>
      Effect.gen(function* () {
        const receipt = yield* minedReceipt(tx)
        if (Option.isSome(receipt)) return { _tag: "Mined", receipt: receipt.value } satisfies TxOutcome
        const mined = yield* minedNonce(chain, tx.signer as `0x${string}`)
        if (mined > tx.nonce) {
          // The nonce is used, but not by these bytes (a receipt lookup again closes the race with our own mining).
          const again = yield* minedReceipt(tx)
          if (Option.isSome(again)) return { _tag: "Mined", receipt: again.value } satisfies TxOutcome
          yield* txLog.dropped(tx)
          return { _tag: "Dropped" } satisfies TxOutcome
        }
        // Not mined and its nonce still open (dropped from a mempool too): new fees if it is underpriced, then send the
        // bytes (again) and give them a moment to be mined.
        const current = Option.getOrElse(yield* replaceIfUnderpriced(tx), () => tx)
        const sent = yield* broadcast(current)
        if (sent && current === tx) yield* txLog.resent(tx) // the same bytes again (replace.ts logs a replacement)
        const receiptNow = sent ? yield* awaitReceipt(current, Math.min(receiptWaitMs, 5_000)) : Option.none()
        if (Option.isSome(receiptNow)) return { _tag: "Mined", receipt: receiptNow.value } satisfies TxOutcome
        // The bytes it replaced may have been mined meanwhile.
        const late = current === tx ? Option.none<TransactionReceipt>() : yield* minedReceipt(current)
        return Option.isSome(late) ? { _tag: "Mined", receipt: late.value } satisfies TxOutcome : { _tag: "Pending" } satisfies TxOutcome
      })

    /** The treasury machine's side of an outcome, inside the caller's transaction (with the purpose's booking). */
    const recordIn = (txId: string, outcome: Exclude<TxOutcome, { _tag: "Pending" }>) =>
      Effect.flatMap(Clock.currentTimeMillis, (at) =>
        host.deliver(
          "treasury",
          txId,
          outcome._tag === "Mined"
            ? {
              type: "MINED",
              at,
              success: outcome.receipt.status === "success",
              block: outcome.receipt.blockNumber.toString(),
              // With one confirmation inclusion is final; deeper, the finality follower decides (Finality.ts).
              final: chain.confirmations <= 1
            }
            : { type: "DROPPED", at, reason: "nonce used by another transaction" }
        ))

    const { repairGaps, syncNonce } = nonceRepair({
      sql, chain, repo, signAt, currentFees,
      signerAddress: Effect.map(requireSigner, (x) => x.account.address),
      broadcast: (tx) => broadcast(tx)
    })

    return {
      chain,
      submit, awaitReceipt, observe, minedReceipt, recordIn, broadcast, repairGaps, syncNonce, find: repo.find, enabled: Option.isSome(signer),
      address: Option.map(signer, (x) => x.account.address)
    } as const
  })

export type NetworkWriter = Effect.Effect.Success<ReturnType<typeof makeNetworkWriter>>
