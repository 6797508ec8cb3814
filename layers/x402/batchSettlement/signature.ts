// Who signed a channel payload's typed data: a key, recovered locally (recover.ts: libsecp256k1 when it loads), or a
// smart account, asked through the chain (ERC-1271 `isValidSignature` on the digest), bounded by a timeout as the exact
// scheme's smart-account check is (smartAccount.ts).
import { Duration, Effect } from "effect"
import { type Hex, isErc6492Signature, type TypedDataDefinition } from "viem"
import { signedByKey } from "../recover.js"
import { type ChannelPayloadRejected, type ChannelReason, ChannelPayloadRejected as Rejected, rejected } from "./reasons.js"

/** What the on-chain check needs (a viem public client's `verifyHash` is one: ERC-1271 for a contract, ECDSA else). */
export interface HashSignatureReader {
  verifyHash(args: { readonly address: `0x${string}`; readonly hash: Hex; readonly signature: Hex }): Promise<boolean>
}

export interface SignatureCheck {
  readonly typedData: TypedDataDefinition
  /** The typed data's digest (the caller has it: the contract's digest, cross-checked in the tests). */
  readonly digest: Hex
  readonly signature: Hex
  /** Which x402 reason a wrong signature is refused with. */
  readonly reason: ChannelReason
  readonly what: string
}

/** A signature that only a key may make (a non-zero `payerAuthorizer`): ECDSA recovery, no chain. */
export const verifyKeySignature = (signer: `0x${string}`, check: SignatureCheck): Effect.Effect<void, ChannelPayloadRejected> =>
  Effect.flatMap(
    Effect.promise(() => signedByKey(check.typedData, signer, check.signature, check.digest)),
    (ok) => (ok ? Effect.void : Effect.fail(rejected(check.reason, `the ${check.what} is not signed by ${signer}`, { signer })))
  )

/**
 * A signature by `account`, which may be a key or a deployed smart account: the local recovery first (plain keys cost
 * nothing more), then ERC-1271 through the chain within `timeoutMs`. A counterfactual account's ERC-6492 signature is
 * refused: channels are opened only by accounts that exist.
 */
export const verifyAccountSignature = (
  reader: HashSignatureReader,
  timeoutMs: number,
  account: `0x${string}`,
  check: SignatureCheck
): Effect.Effect<void, ChannelPayloadRejected> =>
  Effect.gen(function* () {
    if (isErc6492Signature(check.signature)) {
      return yield* rejected("invalid_batch_settlement_evm_eip6492_factory_not_allowed", `the ${check.what} is signed by an account that is not deployed yet (ERC-6492)`, {
        signer: account
      })
    }
    if (yield* Effect.promise(() => signedByKey(check.typedData, account, check.signature, check.digest))) return
    const unavailable = new Rejected({
      reason: "invalid_batch_settlement_evm_rpc_read_failed",
      message: `the chain could not check the ${check.what}'s signature (ERC-1271); try again`,
      retryable: true
    })
    const valid = yield* Effect.tryPromise(() => reader.verifyHash({ address: account, hash: check.digest, signature: check.signature })).pipe(
      Effect.timeoutFail({ duration: Duration.millis(timeoutMs), onTimeout: () => unavailable }),
      Effect.mapError(() => unavailable)
    )
    if (!valid) return yield* rejected(check.reason, `the ${check.what} is not signed by ${account} (key or ERC-1271)`, { signer: account })
  })
