// x402 v1 "exact" payments on EVM: the 402 challenge, verification of X-PAYMENT (EIP-3009 signatures) and settlement on chain.
import { Clock, Data, Effect, Option, ParseResult, Schema } from "effect"
import { createHash } from "node:crypto"
import { getAddress, type Hex, isAddressEqual, parseSignature, verifyTypedData } from "viem"
import type { PaymentRequirements } from "../src/domain/Errors.js"
import { jsonNestingDepth, MAX_JSON_DEPTH } from "../src/domain/Json.js"
import { AppConfig } from "./Config.js"
import { Chain } from "./Chain.js"
import { transferWithAuthorizationTypes, usdcAbi } from "./devnet/usdcAbi.js"

const IntString = Schema.String.pipe(Schema.pattern(/^\d{1,78}$/))
const HexAddress = Schema.String.pipe(Schema.pattern(/^0x[0-9a-fA-F]{40}$/))

/** The decoded X-PAYMENT header (x402 v1, scheme "exact", EVM). */
export const PaymentPayload = Schema.Struct({
  x402Version: Schema.Number,
  scheme: Schema.String,
  network: Schema.String,
  payload: Schema.Struct({
    signature: Schema.String.pipe(Schema.pattern(/^0x[0-9a-fA-F]+$/)),
    authorization: Schema.Struct({
      from: HexAddress,
      to: HexAddress,
      value: IntString,
      validAfter: IntString,
      validBefore: IntString,
      nonce: Schema.String.pipe(Schema.pattern(/^0x[0-9a-fA-F]{64}$/))
    })
  })
})
export type PaymentPayload = typeof PaymentPayload.Type

/** A payment whose signature, amount, recipient, window, nonce and funds all checked out. */
export interface VerifiedPayment {
  readonly payer: `0x${string}`
  readonly payTo: `0x${string}`
  readonly asset: `0x${string}`
  readonly network: string
  readonly amount: bigint
  readonly nonce: Hex
  readonly validAfter: bigint
  readonly validBefore: bigint
  readonly signature: Hex
  /** sha256 of the raw header: proves later that a caller holds the same payment header. */
  readonly headerSha256: string
  readonly payload: PaymentPayload
}

/** Why a payment was refused; `reason` uses the x402 error reason names where one exists. */
export type RejectionReason =
  | "invalid_payload"
  | "invalid_x402_version"
  | "unsupported_scheme"
  | "invalid_network"
  | "invalid_exact_evm_payload_recipient_mismatch"
  | "invalid_exact_evm_payload_authorization_value"
  | "invalid_exact_evm_payload_authorization_valid_after"
  | "invalid_exact_evm_payload_authorization_valid_before"
  | "invalid_exact_evm_payload_signature"
  | "payment_already_used"
  | "insufficient_funds"
  | "settlement_failed"
  | "unexpected_verify_error"

export class PaymentRejected extends Data.TaggedError("PaymentRejected")<{
  readonly reason: RejectionReason
  readonly message: string
  readonly details?: Record<string, unknown>
}> {}

/** Settlement did not happen. `final`: it never will with this authorization (revert, used, expired). */
export class SettlementError extends Data.TaggedError("SettlementError")<{
  readonly reason: RejectionReason | "rpc_error"
  readonly message: string
  readonly final: boolean
}> {}

export const sha256 = (text: string): string => createHash("sha256").update(text).digest("hex")

/** A real x402 v1 exact payment header is under 1 KiB; anything far larger is refused before it is decoded. */
export const MAX_PAYMENT_HEADER_LENGTH = 8 * 1024

const invalidPayload = (message: string, details?: Record<string, unknown>) =>
  new PaymentRejected({ reason: "invalid_payload", message, ...(details === undefined ? {} : { details }) })

/**
 * Decodes a base64 (or base64url) JSON X-PAYMENT header, bounded before anything recursive touches it: its length,
 * then the JSON's nesting depth (a linear scan), then the parse and the schema.
 */
export const decodePaymentHeader = (header: string): Effect.Effect<PaymentPayload, PaymentRejected> =>
  Effect.gen(function* () {
    const trimmed = header.trim()
    if (trimmed.length > MAX_PAYMENT_HEADER_LENGTH) {
      return yield* invalidPayload(`X-PAYMENT is longer than ${MAX_PAYMENT_HEADER_LENGTH} characters`)
    }
    const text = Buffer.from(trimmed, "base64").toString("utf8")
    if (jsonNestingDepth(text) > MAX_JSON_DEPTH) {
      return yield* invalidPayload(`X-PAYMENT nests deeper than ${MAX_JSON_DEPTH} levels`)
    }
    const json = yield* Effect.try({ try: (): unknown => JSON.parse(text), catch: () => invalidPayload("X-PAYMENT is not base64-encoded JSON") })
    return yield* Schema.decodeUnknown(PaymentPayload)(json).pipe(
      Effect.mapError((error) =>
        invalidPayload("X-PAYMENT does not hold an x402 v1 exact EVM payment payload", {
          issues: ParseResult.ArrayFormatter.formatErrorSync(error).slice(0, 5).map((i) => ({ path: i.path.join("."), message: i.message.slice(0, 200) }))
        })
      )
    )
  })

/** Gas for one transferWithAuthorization; set explicitly to skip an estimate round trip per settlement. */
const SETTLEMENT_GAS = 150_000n

export class PaymentVerifier extends Effect.Service<PaymentVerifier>()("PaymentVerifier", {
  effect: Effect.gen(function* () {
    const chain = yield* Chain
    const config = yield* AppConfig
    const { publicClient } = chain
    const domain = {
      name: chain.usdc.name,
      version: chain.usdc.version,
      chainId: chain.chainId,
      verifyingContract: chain.usdc.address
    } as const

    /** The x402 `accepts[]` entry for a price. */
    const requirements = (input: { readonly amount: bigint; readonly resource: string; readonly description: string }): PaymentRequirements => ({
      scheme: "exact",
      network: chain.network,
      maxAmountRequired: input.amount.toString(),
      resource: input.resource,
      description: input.description,
      mimeType: "application/json",
      payTo: chain.treasury,
      maxTimeoutSeconds: config.paymentTimeoutSeconds,
      asset: chain.usdc.address,
      extra: { name: chain.usdc.name, version: chain.usdc.version }
    })

    const reject = (reason: RejectionReason, message: string, details?: Record<string, unknown>) =>
      Effect.fail(new PaymentRejected({ reason, message, ...(details === undefined ? {} : { details }) }))

    /** Everything that can be checked without touching our database; `amount` is the exact price. */
    const verify = (header: string, amount: bigint): Effect.Effect<VerifiedPayment, PaymentRejected> =>
      Effect.gen(function* () {
        const payload = yield* decodePaymentHeader(header)
        if (payload.x402Version !== 1) {
          return yield* reject("invalid_x402_version", "only x402Version 1 is supported", { x402Version: payload.x402Version })
        }
        if (payload.scheme !== "exact") return yield* reject("unsupported_scheme", "only the \"exact\" scheme is supported")
        if (payload.network !== chain.network) {
          return yield* reject("invalid_network", `payments are taken on ${chain.network}`, { network: payload.network, expected: chain.network })
        }
        const auth = payload.payload.authorization
        const payer = getAddress(auth.from)
        if (!isAddressEqual(getAddress(auth.to), chain.treasury)) {
          return yield* reject("invalid_exact_evm_payload_recipient_mismatch", "the payment is not made out to the platform treasury", {
            to: auth.to,
            expected: chain.treasury
          })
        }
        const value = BigInt(auth.value)
        if (value !== amount) {
          return yield* reject(
            "invalid_exact_evm_payload_authorization_value",
            value < amount ? "the payment is less than the price" : "the payment does not equal the price",
            { value: auth.value, expected: amount.toString() }
          )
        }
        const now = BigInt(Math.floor((yield* Clock.currentTimeMillis) / 1000))
        const validAfter = BigInt(auth.validAfter)
        const validBefore = BigInt(auth.validBefore)
        if (validAfter >= now) {
          return yield* reject("invalid_exact_evm_payload_authorization_valid_after", "the payment is not valid yet", {
            validAfter: auth.validAfter,
            now: now.toString()
          })
        }
        if (validBefore <= now + BigInt(config.paymentMinValiditySeconds)) {
          return yield* reject("invalid_exact_evm_payload_authorization_valid_before", "the payment has expired or expires too soon to settle", {
            validBefore: auth.validBefore,
            now: now.toString(),
            minValiditySeconds: config.paymentMinValiditySeconds
          })
        }
        const signature = payload.payload.signature as Hex
        const nonce = auth.nonce.toLowerCase() as Hex
        const message = { from: payer, to: getAddress(auth.to), value, validAfter, validBefore, nonce }
        const valid = signature.length === 132 &&
          (yield* Effect.promise(() =>
            verifyTypedData({
              address: payer,
              domain,
              types: transferWithAuthorizationTypes,
              primaryType: "TransferWithAuthorization",
              message,
              signature
            }).catch(() => false)
          ))
        if (!valid) return yield* reject("invalid_exact_evm_payload_signature", "the payment signature does not match its authorization")
        const [used, balance] = yield* Effect.tryPromise(() =>
          Promise.all([
            publicClient.readContract({ address: chain.usdc.address, abi: usdcAbi, functionName: "authorizationState", args: [payer, nonce] }),
            publicClient.readContract({ address: chain.usdc.address, abi: usdcAbi, functionName: "balanceOf", args: [payer] })
          ])
        ).pipe(
          Effect.mapError(() =>
            new PaymentRejected({ reason: "unexpected_verify_error", message: "the chain could not be queried; try again", details: { retryable: true } })
          )
        )
        if (used) return yield* reject("payment_already_used", "this payment authorization was already used")
        if (balance < value) {
          return yield* reject("insufficient_funds", "the payer's USDC balance does not cover the payment", {
            balance: balance.toString(),
            required: value.toString()
          })
        }
        return {
          payer: payer.toLowerCase() as `0x${string}`,
          payTo: chain.treasury,
          asset: chain.usdc.address,
          network: chain.network,
          amount: value,
          nonce,
          validAfter,
          validBefore,
          signature,
          headerSha256: sha256(header.trim()),
          payload
        } satisfies VerifiedPayment
      }).pipe(Effect.withSpan("PaymentVerifier.verify"))

    /** Finds the transaction that used an authorization, if any (for recovery after a crash or a lost receipt). */
    const findSettlement = (payer: `0x${string}`, nonce: Hex): Effect.Effect<Option.Option<Hex>, SettlementError> =>
      Effect.tryPromise({
        try: async () => {
          const used = await publicClient.readContract({
            address: chain.usdc.address,
            abi: usdcAbi,
            functionName: "authorizationState",
            args: [getAddress(payer), nonce]
          })
          if (!used) return Option.none<Hex>()
          const logs = await publicClient.getContractEvents({
            address: chain.usdc.address,
            abi: usdcAbi,
            eventName: "AuthorizationUsed",
            args: { authorizer: getAddress(payer), nonce },
            fromBlock: "earliest",
            strict: true
          })
          const hash = logs[0]?.transactionHash
          return hash === undefined ? Option.none<Hex>() : Option.some(hash)
        },
        catch: (error) => new SettlementError({ reason: "rpc_error", message: String(error), final: false })
      })

    /** Why an authorization cannot be settled any more, if it cannot. */
    const finalReason = (p: VerifiedPayment) =>
      Effect.tryPromise(async () => {
        const [used, balance] = await Promise.all([
          publicClient.readContract({ address: chain.usdc.address, abi: usdcAbi, functionName: "authorizationState", args: [getAddress(p.payer), p.nonce] }),
          publicClient.readContract({ address: chain.usdc.address, abi: usdcAbi, functionName: "balanceOf", args: [getAddress(p.payer)] })
        ])
        if (used) return Option.some<RejectionReason>("payment_already_used")
        if (balance < p.amount) return Option.some<RejectionReason>("insufficient_funds")
        if (p.validBefore <= BigInt(Math.floor(Date.now() / 1000))) return Option.some<RejectionReason>("invalid_exact_evm_payload_authorization_valid_before")
        return Option.none<RejectionReason>()
      }).pipe(Effect.orElseSucceed(() => Option.none<RejectionReason>()))

    /** Submits transferWithAuthorization from the settlement signer and waits for its receipt. */
    const settleLocally = (p: VerifiedPayment) =>
      Effect.gen(function* () {
        const signer = Option.getOrThrow(chain.signer)
        const { r, s, v, yParity } = parseSignature(p.signature)
        const hash = yield* Effect.tryPromise({
          try: () =>
            signer.walletClient.writeContract({
              address: chain.usdc.address,
              abi: usdcAbi,
              functionName: "transferWithAuthorization",
              args: [getAddress(p.payer), p.payTo, p.amount, p.validAfter, p.validBefore, p.nonce, Number(v ?? BigInt(yParity + 27)), r, s],
              gas: SETTLEMENT_GAS
            }),
          catch: (error) => new SettlementError({ reason: "rpc_error", message: `submitting the settlement failed: ${String(error)}`, final: false })
        })
        const receipt = yield* Effect.tryPromise({
          // Ask at once (a devnet mines on submission), then poll.
          try: () =>
            publicClient.getTransactionReceipt({ hash }).catch(() => publicClient.waitForTransactionReceipt({ hash, timeout: 120_000 })),
          catch: (error) => new SettlementError({ reason: "rpc_error", message: `no receipt for ${hash}: ${String(error)}`, final: false })
        })
        if (receipt.status !== "success") {
          const reason = yield* finalReason(p)
          return yield* new SettlementError({
            reason: Option.getOrElse(reason, () => "settlement_failed" as const),
            message: `the settlement transaction ${hash} reverted`,
            final: true
          })
        }
        return hash
      })

    /** Settles through a standard x402 facilitator (POST /settle). */
    const settleWithFacilitator = (p: VerifiedPayment, facilitatorUrl: string, paymentRequirements: PaymentRequirements) =>
      Effect.tryPromise({
        try: async () => {
          const response = await fetch(`${facilitatorUrl.replace(/\/+$/, "")}/settle`, {
            method: "POST",
            headers: { "content-type": "application/json" },
            body: JSON.stringify({ x402Version: 1, paymentPayload: p.payload, paymentRequirements }),
            signal: AbortSignal.timeout(120_000)
          })
          const body = (await response.json()) as { success?: boolean; transaction?: string; errorReason?: string }
          return body
        },
        catch: (error) => new SettlementError({ reason: "rpc_error", message: `facilitator /settle failed: ${String(error)}`, final: false })
      }).pipe(
        Effect.flatMap((body) =>
          body.success === true && typeof body.transaction === "string" && /^0x[0-9a-fA-F]{64}$/.test(body.transaction)
            ? Effect.succeed(body.transaction as Hex)
            : Effect.fail(
              new SettlementError({ reason: "settlement_failed", message: `facilitator refused: ${body.errorReason ?? "unknown"}`, final: true })
            )
        )
      )

    /** Moves the money on chain; returns the transaction hash. */
    const settle = (p: VerifiedPayment, paymentRequirements: PaymentRequirements): Effect.Effect<Hex, SettlementError> =>
      (Option.isSome(config.facilitatorUrl) && Option.isNone(chain.signer)
        ? settleWithFacilitator(p, config.facilitatorUrl.value, paymentRequirements)
        : settleLocally(p)
      ).pipe(Effect.withSpan("PaymentVerifier.settle"))

    return { requirements, verify, settle, findSettlement, network: chain.network, treasury: chain.treasury } as const
  })
}) {}
