// A treasury transaction the chain's fees left behind, replaced: re-signed at the same nonce with the fees of
// services/treasury/fees.ts, stored over the row (its earlier hashes kept: any may be the one mined) with a REPLACED step
// of its machine, in one database transaction.
import type { SqlClient } from "@effect/sql"
import { Clock, Effect, Option } from "effect"
import { type Hex, isHex, parseTransaction } from "viem"
import type { ChainShape } from "../../layers/Chain.js"
import type { MachineHost } from "../../machines/Host.js"
import { ChainReadError } from "./chainReads.js"
import { type Fees, replacementFees } from "./fees.js"
import type { TreasuryRepo, TreasuryTxRow } from "./Repo.js"

const asHex = (s: string): Hex => (isHex(s) ? s : "0x")

export interface ReplacerDeps<E> {
  readonly sql: SqlClient.SqlClient
  readonly chain: ChainShape
  readonly repo: TreasuryRepo
  readonly host: MachineHost
  readonly signAt: (nonce: bigint, to: `0x${string}`, data: Hex | undefined, gas: bigint, fee: Fees) => Effect.Effect<{ readonly raw: Hex; readonly hash: Hex }, E>
  /** TREASURY_MAX_FEE_PER_GAS_GWEI in wei. */
  readonly ceiling: bigint
}

/**
 * Re-signs a transaction the chain's fees have left behind (its max fee below the latest base fee plus the priority
 * fee of the moment): same nonce, recipient, data and gas, fees from the chain and at least 12.5% above the old ones
 * (what nodes require of a replacement), never above TREASURY_MAX_FEE_PER_GAS_GWEI. The row keeps the bytes it
 * replaces (either may be mined: the nonce lets only one through, so nothing is paid twice).
 */
export const replacer = <E>({ sql, chain, repo, host, signAt, ceiling }: ReplacerDeps<E>) =>
  (tx: TreasuryTxRow) =>
    Effect.gen(function* () {
      const old = parseTransaction(asHex(tx.rawTx))
      if (old.type !== "eip1559" || old.maxFeePerGas === undefined || old.maxPriorityFeePerGas === undefined || old.to == null || old.gas === undefined) {
        return Option.none<TreasuryTxRow>()
      }
      const [block, estimate] = yield* Effect.all([
        Effect.tryPromise(() => chain.publicClient.getBlock({ blockTag: "latest" })),
        Effect.tryPromise(() => chain.publicClient.estimateFeesPerGas())
      ]).pipe(Effect.mapError((e) => new ChainReadError({ message: `fees: ${String(e.error).slice(0, 200)}` })))
      const baseFee = block.baseFeePerGas ?? 0n
      const decision = replacementFees(
        { maxFeePerGas: old.maxFeePerGas, maxPriorityFeePerGas: old.maxPriorityFeePerGas },
        { baseFee, priorityFee: estimate.maxPriorityFeePerGas },
        ceiling
      )
      if (decision._tag === "NotNeeded") return Option.none<TreasuryTxRow>()
      if (decision._tag === "PastCeiling") {
        yield* Effect.logWarning("treasury transaction underpriced, and a replacement would pass the fee ceiling: it waits for fees to fall", {
          event: "treasury.underpriced", treasuryTxId: tx.id, subjectId: tx.subjectId, purpose: tx.purpose, nonce: tx.nonce.toString(), hash: tx.txHash, baseFee: baseFee.toString(), ceiling: ceiling.toString()
        })
        return Option.none<TreasuryTxRow>()
      }
      const maxFeePerGas = decision.fees.maxFeePerGas
      const { raw, hash } = yield* signAt(tx.nonce, old.to, old.data, old.gas, decision.fees)
      const at = yield* Clock.currentTimeMillis
      const replaced = yield* sql.withTransaction(
        Effect.gen(function* () {
          if (!(yield* repo.replaceStatement(tx.id, tx.txHash, raw, hash))) return false
          yield* host.deliverNow("treasury", tx.id, {
            type: "REPLACED",
            at,
            hash,
            maxFeePerGas: maxFeePerGas.toString(),
            reason: `base fee ${baseFee} wei passed the signed max fee ${old.maxFeePerGas}`
          })
          return true
        })
      ).pipe(Effect.orDie)
      if (!replaced) return Option.none<TreasuryTxRow>()
      yield* Effect.logWarning(`treasury tx ${tx.id} replaced with higher fees: ${tx.txHash} -> ${hash}`, {
        event: "treasury.replaced", treasuryTxId: tx.id, subjectId: tx.subjectId, purpose: tx.purpose, nonce: tx.nonce.toString(), replacedHash: tx.txHash, txHash: hash,
        maxFeePerGas: maxFeePerGas.toString(), previousMaxFeePerGas: old.maxFeePerGas.toString(), baseFee: baseFee.toString()
      })
      return Option.some<TreasuryTxRow>({ ...tx, rawTx: raw, txHash: hash, replacedHashes: [...tx.replacedHashes, tx.txHash] })
    })
