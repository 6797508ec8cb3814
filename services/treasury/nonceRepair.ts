// The treasury's nonce sequence kept whole on one network: our nonce row never behind the chain, and nonces below it
// that no transaction holds (a crash between taking a nonce and storing its transaction, a dropped transaction whose
// purpose was re-queued) filled with a zero-value self-transfer, so that later transactions are not stuck behind them.
import type { SqlClient } from "@effect/sql"
import { Clock, Effect, Option } from "effect"
import type { Hex } from "viem"
import type { ChainShape } from "../../layers/Chain.js"
import { newId } from "../../src/domain/Ids.js"
import { minedNonce, pendingNonce } from "./chainReads.js"
import type { Fees } from "./fees.js"
import type { TreasuryRepo } from "./Repo.js"

const GAP_FILL_GAS = 21_000n

/** The writer's own steps this uses (each with its own errors). */
export interface NonceRepairDeps<EAddress, ESign, EFees, EBroadcast> {
  readonly sql: SqlClient.SqlClient
  readonly chain: ChainShape
  readonly repo: TreasuryRepo
  /** The treasury's address on this network (fails without a signer: facilitator mode). */
  readonly signerAddress: Effect.Effect<`0x${string}`, EAddress>
  readonly signAt: (nonce: bigint, to: `0x${string}`, data: Hex | undefined, gas: bigint, fee: Fees) => Effect.Effect<{ readonly raw: Hex; readonly hash: Hex }, ESign>
  readonly currentFees: Effect.Effect<Fees, EFees>
  readonly broadcast: (tx: { readonly id: string; readonly rawTx: string }) => Effect.Effect<unknown, EBroadcast>
}

export const nonceRepair = <EAddress, ESign, EFees, EBroadcast>(
  { sql, chain, repo, signerAddress, signAt, currentFees, broadcast }: NonceRepairDeps<EAddress, ESign, EFees, EBroadcast>
) => {
  /**
   * Nonces below our next one that the chain has not mined and no live transaction holds block every later
   * transaction: each is filled with a zero-value self-transfer (its purpose, if any, was re-queued when dropped).
   */
  const repairGaps = Effect.gen(function* () {
    const address = yield* signerAddress
    const mined = yield* minedNonce(chain, address)
    const next = yield* repo.nextNonce(chain.network, address)
    if (Option.isNone(next) || next.value <= mined) return 0
    const gaps = yield* repo.gaps(chain.network, address, mined, next.value)
    const now = yield* Clock.currentTimeMillis
    const fee = yield* currentFees
    for (const nonce of gaps) {
      const { raw, hash } = yield* signAt(nonce, address, undefined, GAP_FILL_GAS, fee)
      const id = newId("ttx")
      yield* sql.withTransaction(repo.insert({
        id,
        purpose: "gap_fill",
        subjectId: `nonce:${nonce}`,
        signer: address,
        network: chain.network,
        nonce,
        to: address,
        raw,
        hash,
        leaseUntil: new Date(now)
      }))
      yield* Effect.logWarning(`treasury nonce ${nonce} had no transaction: filled with a zero-value self-transfer ${hash}`, { event: "treasury.gap_filled", treasuryTxId: id, nonce, txHash: hash })
      yield* broadcast({ id, rawTx: raw })
    }
    return gaps.length
  })

  /** Our nonce row is never behind the chain (a fresh database, or transactions sent by an older version or another tool). */
  const syncNonce = Effect.gen(function* () {
    const address = yield* signerAddress
    const next = yield* pendingNonce(chain, address)
    yield* repo.ensureSigner(chain.network, address, next)
  })

  return { repairGaps, syncNonce } as const
}
