// Credit as the payment of a call: the payer wallet's EIP-712 `PayerCreditSpend` (the PayerCredit domain) in the
// `X-Credit-Payment` header, bound to the call (agent, capability, input hash), a maximum, a nonce and an expiry, and the
// credit taken under its account's lock inside the call's reservation. docs/clients.md "Paying with credit".
import { Clock, Data, Effect } from "effect"
import { createHash } from "node:crypto"
import { getAddress, isHex, recoverTypedDataAddress } from "viem"
import { Chain } from "../../layers/Chain.js"
import { sha256 } from "../../layers/x402/payment.js"
import { canonicalJson } from "../../src/domain/Json.js"
import { formatUsdc } from "../../src/domain/Money.js"
import { payoutDomain } from "../withdrawals/PayoutAuthorization.js"
import { RemaindersRepo } from "./Repo.js"

export const creditSpendTypes = {
  PayerCreditSpend: [
    { name: "payer", type: "address" },
    { name: "agentId", type: "string" },
    { name: "capabilityId", type: "string" },
    { name: "inputSha256", type: "bytes32" },
    { name: "maxAmount", type: "uint256" },
    { name: "nonce", type: "bytes32" },
    { name: "validBefore", type: "uint256" }
  ]
} as const

/** How far ahead a spend may be valid (seconds): a captured header is useless after this at the latest. */
export const MAX_VALIDITY_SECONDS = 3_600
/** The largest header read (characters). */
const MAX_HEADER_LENGTH = 2_048

/** 0x sha256 of the canonical JSON of a call's input (the receipt's `requestSha256`, as bytes32). */
export const inputSha256 = (input: unknown): `0x${string}` => `0x${createHash("sha256").update(canonicalJson(input), "utf8").digest("hex")}`

/** Why a credit payment is refused; the pipeline answers it with the 402 challenge (`details.reason`). */
export class CreditRefused extends Data.TaggedError("CreditRefused")<{
  readonly reason:
    | "credit_payment_invalid" | "credit_signature_invalid" | "credit_payment_expired" | "credit_max_amount_too_low"
    | "credit_payment_already_used" | "insufficient_credit"
  readonly message: string
  readonly details?: Record<string, unknown>
}> {}

/** A verified spend: who pays, up to what, and the once-only key stored on its payment row. */
export interface CreditSpend {
  readonly payer: string
  readonly maxAmount: bigint
  readonly validBefore: number
  /** Stored as the payment row's nonce: derived (never equal to an EIP-3009 nonce of the same payer), unique per payer. */
  readonly storedNonce: string
  readonly headerSha256: string
}

const invalid = (message: string) => new CreditRefused({ reason: "credit_payment_invalid", message })

const fieldsOf = (header: string) =>
  Effect.gen(function* () {
    const text = header.trim()
    if (text.length === 0 || text.length > MAX_HEADER_LENGTH) return yield* invalid("X-Credit-Payment must be base64 JSON of at most 2048 characters")
    const parsed = yield* Effect.try(() => JSON.parse(Buffer.from(text, "base64").toString("utf8")) as unknown).pipe(
      Effect.orElseFail(() => invalid("X-Credit-Payment is not base64 JSON")))
    const o = typeof parsed === "object" && parsed !== null ? parsed as Record<string, unknown> : {}
    const { payer, maxAmount, nonce, validBefore, signature } = o
    if (typeof payer !== "string" || !/^0x[0-9a-fA-F]{40}$/.test(payer)) return yield* invalid("payer must be a 0x address")
    if (typeof maxAmount !== "string" || !/^[0-9]{1,20}$/.test(maxAmount)) return yield* invalid("maxAmount must be micro-USDC digits (a string)")
    if (typeof nonce !== "string" || !/^0x[0-9a-fA-F]{64}$/.test(nonce)) return yield* invalid("nonce must be 0x and 32 bytes of hex")
    if (typeof validBefore !== "number" || !Number.isSafeInteger(validBefore) || validBefore < 0) return yield* invalid("validBefore must be seconds since the epoch (a number)")
    if (typeof signature !== "string" || !/^0x[0-9a-fA-F]{130}$/.test(signature) || !isHex(signature)) return yield* invalid("signature must be a 0x 65-byte signature")
    return { payer: getAddress(payer.toLowerCase()), maxAmount: BigInt(maxAmount), nonce: nonce.toLowerCase() as `0x${string}`, validBefore, signature, text }
  })

export class CreditSpends extends Effect.Service<CreditSpends>()("remainders/CreditSpends", {
  effect: Effect.gen(function* () {
    const chain = yield* Chain
    const repo = yield* RemaindersRepo
    const domain = payoutDomain(chain.chainId, chain.treasury)

    /** Verifies the header for this call and price (nothing stored: the reservation's payment row is the once-only guard). */
    const verify = (header: string, call: { readonly agentId: string; readonly capabilityId: string; readonly input: unknown; readonly price: bigint }) =>
      Effect.gen(function* () {
        const f = yield* fieldsOf(header)
        const now = Math.floor((yield* Clock.currentTimeMillis) / 1000)
        if (f.validBefore <= now) {
          return yield* new CreditRefused({ reason: "credit_payment_expired", message: "the credit payment's validBefore has passed", details: { validBefore: f.validBefore, now } })
        }
        if (f.validBefore > now + MAX_VALIDITY_SECONDS) {
          return yield* invalid(`validBefore may be at most ${MAX_VALIDITY_SECONDS} seconds ahead`)
        }
        const recovered = yield* Effect.tryPromise(() =>
          recoverTypedDataAddress({
            domain,
            types: creditSpendTypes,
            primaryType: "PayerCreditSpend",
            message: {
              payer: f.payer,
              agentId: call.agentId,
              capabilityId: call.capabilityId,
              inputSha256: inputSha256(call.input),
              maxAmount: f.maxAmount,
              nonce: f.nonce,
              validBefore: BigInt(f.validBefore)
            },
            signature: f.signature as `0x${string}`
          })
        ).pipe(Effect.orElseSucceed(() => undefined))
        if (recovered === undefined || recovered.toLowerCase() !== f.payer.toLowerCase()) {
          return yield* new CreditRefused({
            reason: "credit_signature_invalid",
            message: "the signature does not recover to payer for this agent, capability, input, maxAmount, nonce and validBefore"
          })
        }
        if (f.maxAmount < call.price) {
          return yield* new CreditRefused({
            reason: "credit_max_amount_too_low",
            message: `this call holds ${formatUsdc(call.price)} USDC; the credit payment allows at most ${formatUsdc(f.maxAmount)}`,
            details: { maxAmount: formatUsdc(f.maxAmount) }
          })
        }
        return {
          payer: f.payer.toLowerCase(),
          maxAmount: f.maxAmount,
          validBefore: f.validBefore,
          storedNonce: `0x${sha256(`credit-spend:${f.nonce}`)}`,
          headerSha256: sha256(f.text)
        } satisfies CreditSpend
      })

    const short = (credit: bigint, amount: bigint) =>
      new CreditRefused({
        reason: "insufficient_credit",
        message: `the credit (${formatUsdc(credit)} USDC) does not cover this call (${formatUsdc(amount)} USDC); nothing was charged`,
        details: { credit: formatUsdc(credit) }
      })

    /** Whether the payer's credit covers `amount` now (read without a lock: `take` decides under it). */
    const covers = (wallet: string, amount: bigint) =>
      Effect.flatMap(repo.creditOf(wallet, false).pipe(Effect.orDie), (credit) => (credit >= amount ? Effect.void : Effect.fail(short(credit, amount))))

    /**
     * Inside the reservation's transaction: locks the payer's credit account and refuses when it holds less than
     * `amount` (concurrent spends serialise on the lock, each sees what the previous left). The caller moves the money.
     */
    const take = (wallet: string, amount: bigint) =>
      Effect.gen(function* () {
        const credit = yield* repo.creditOf(wallet, true)
        if (credit < amount) return yield* short(credit, amount)
        return credit
      })

    return { verify, covers, take } as const
  }),
  dependencies: [RemaindersRepo.Default]
}) {}
