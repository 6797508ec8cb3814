// Verification of an x402 exact payment against a price: everything checked before our database is touched (payload,
// network, recipient, amount, validity window, EIP-3009 signature), then the chain (authorization unused, funds).
import { Clock, Effect } from "effect"
import { getAddress, type Hex, isAddressEqual, verifyTypedData } from "viem"
import type { AppConfigShape } from "../Config.js"
import type { ChainShape } from "../Chain.js"
import { transferWithAuthorizationTypes, usdcAbi } from "../devnet/usdcAbi.js"
import { decodePaymentHeader } from "./header.js"
import { PaymentRejected, type RejectionReason, sha256, type VerifiedPayment } from "./payment.js"

/** `verify(header, amount)` for one chain and configuration; `amount` is the exact price. */
export const makeVerify = (chain: ChainShape, config: Pick<AppConfigShape, "paymentMinValiditySeconds">) => {
  const { publicClient } = chain
  const domain = {
    name: chain.usdc.name,
    version: chain.usdc.version,
    chainId: chain.chainId,
    verifyingContract: chain.usdc.address
  } as const

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

  return verify
}
